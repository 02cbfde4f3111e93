//! Configurations that load but cannot work as meant: warnings, logged when ipsecd starts,
//! after a reload (SIGHUP) and after a control change that brings new ones (then also in
//! its reply, for `ipsecctl`). None refuses anything: each may be a step on the way to a
//! whole configuration.
//!
//! ```text
//! SAs, policies, this host's addresses, --udp-port ─ warnings() ─┬─ outbound tunnel policy, no inbound one back
//!                                                                ├─ outbound tunnel from an address not this host's
//!                                                                └─ esp-udp SA on another port than --udp-port
//! ```
//!
//! - **An outbound tunnel policy with no inbound counterpart**: what comes back through the
//!   tunnel matches no inbound policy and is dropped as `no_inbound_policy` (RFC 4301 §5.2;
//!   `ipsec_core::inbound`). The counterpart is an inbound `ipsec` policy whose selector
//!   covers the outbound one's reversed (its source prefix holds the outbound destination
//!   prefix, its destination prefix the outbound source prefix) with a tunnel rule between
//!   the same ends, reversed.
//! - **A tunnel source that is not this host's address** (`esp/tunnel/SRC-DST`): packets
//!   would leave with a source the peer's SA does not name, and its answers would never
//!   come here. The usual cause is the other gateway's file loaded as is. (The selector's
//!   source prefix is not checked: a network routed behind the gateway holds none of its
//!   addresses.)
//! - **An `esp-udp` SA on another local port than `--udp-port`**: ipsecd receives ESP in
//!   UDP on `--udp-port` only and drops a datagram to another port than its SA names
//!   (`udp_port`), and sends from `--udp-port` whatever the SA says.
//!
//! Each kind is one log line however many items it has (a gateway of 10,000 peers must not
//! log 10,000 lines): the first few named, then the count.

use std::collections::HashMap;
use std::net::IpAddr;

use ipsec_core::control::{
    Action, Dir, Mode, NatT, PolicySpec, Prefix, Request, Rule, SaId, SaSpec, Selector,
};
use ipsec_core::{setkey, Ipsec};

/// Items named per warning; the rest are counted.
const NAMED: usize = 3;

/// What the rules found, item by item (each a policy or an SA as the warning names it),
/// before [`Findings::lines`] makes one line of each kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Outbound tunnel policies with no inbound policy back (one item per tunnel rule).
    pub no_way_back: Vec<String>,
    /// Outbound tunnel policies whose tunnel source is not this host's (one per rule).
    pub foreign_source: Vec<String>,
    /// ESP-in-UDP SAs on another port than `--udp-port`.
    pub ports: Vec<String>,
}

impl Findings {
    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.no_way_back.is_empty() && self.foreign_source.is_empty() && self.ports.is_empty()
    }

    /// Adds `other`'s items after this one's.
    pub fn extend(&mut self, other: Findings) {
        self.no_way_back.extend(other.no_way_back);
        self.foreign_source.extend(other.foreign_source);
        self.ports.extend(other.ports);
    }

    /// One line per kind found ([`summarise`]), for a host whose ESP-in-UDP port is
    /// `udp_port`.
    pub fn lines(self, udp_port: u16) -> Vec<String> {
        let mut out = Vec::new();
        summarise(
            &mut out,
            "outbound tunnel policies with no inbound policy back through the same tunnel (what returns \
             through it will be dropped as no_inbound_policy; add the mirrored `-P in` policy)",
            self.no_way_back,
        );
        summarise(
            &mut out,
            "outbound tunnel policies whose tunnel source is not an address of this host (is this the \
             other gateway's configuration?)",
            self.foreign_source,
        );
        summarise(
            &mut out,
            &format!(
                "ESP-in-UDP SAs whose port on this host is not --udp-port {udp_port} (their packets arrive \
                 on {udp_port} and are dropped as udp_port; ipsecd sends from {udp_port})"
            ),
            self.ports,
        );
        out
    }
}

/// The warnings for `sas` and `policies` on a host whose addresses `is_local` knows and
/// whose ESP-in-UDP port is `udp_port`, one line per kind (none: an empty list). Linear in
/// the number of policies where each tunnel's ends have a few (the inbound policies are
/// found by their tunnel's ends: a gateway of 10,000 peers must not compare every pair).
pub fn warnings<'a>(
    sas: impl IntoIterator<Item = &'a SaSpec>,
    policies: &[PolicySpec],
    is_local: &dyn Fn(IpAddr) -> bool,
    udp_port: u16,
) -> Vec<String> {
    findings(sas, policies, is_local, udp_port).lines(udp_port)
}

/// [`warnings`] item by item, in the databases' order (policies by direction and match
/// order, SAs as given).
pub fn findings<'a>(
    sas: impl IntoIterator<Item = &'a SaSpec>,
    policies: &[PolicySpec],
    is_local: &dyn Fn(IpAddr) -> bool,
    udp_port: u16,
) -> Findings {
    // Inbound `ipsec` policies' selectors by the ends of each of their tunnel rules.
    let mut inbound: HashMap<(IpAddr, IpAddr), Vec<&Selector>> = HashMap::new();
    for p in policies.iter().filter(|p| p.dir == Dir::In) {
        for ends in inbound_ends(p) {
            inbound.entry(ends).or_default().push(&p.selector);
        }
    }
    let mut f = Findings::default();
    for p in policies.iter().filter(|p| p.dir == Dir::Out) {
        let back = |ends: (IpAddr, IpAddr)| {
            inbound.get(&ends).is_some_and(|sels| sels.iter().any(|q| is_way_back(q, &p.selector)))
        };
        f.extend(outbound_findings(p, &back, is_local));
    }
    for sa in sas {
        let id = SaId { src: sa.src, dst: sa.dst, proto: sa.proto, spi: sa.spi };
        f.ports.extend(port_finding(&id, sa.natt, is_local, udp_port));
    }
    f
}

/// The tunnel ends (source, destination) of an inbound `ipsec` policy's rules, one per
/// rule that has them: where an outbound policy looks for its way back.
pub(crate) fn inbound_ends(p: &PolicySpec) -> impl Iterator<Item = (IpAddr, IpAddr)> + '_ {
    let rules: &[Rule] = match &p.action {
        Action::Protect(rules) => rules,
        _ => &[],
    };
    rules.iter().filter_map(|r| r.tunnel)
}

/// The tunnel ends (source, destination) of an outbound `ipsec` policy's tunnel-mode rules,
/// one per rule: what the rules about outbound tunnels look at.
pub(crate) fn outbound_ends(p: &PolicySpec) -> impl Iterator<Item = (IpAddr, IpAddr)> + '_ {
    let rules: &[Rule] = match &p.action {
        Action::Protect(rules) => rules,
        _ => &[],
    };
    rules.iter().filter(|r| r.mode == Mode::Tunnel).filter_map(|r| r.tunnel)
}

/// Whether an inbound policy of selector `inbound` takes back what an outbound one of
/// selector `outbound` sends (its source prefix holds the outbound destination prefix,
/// its destination prefix the outbound source prefix).
pub(crate) fn is_way_back(inbound: &Selector, outbound: &Selector) -> bool {
    covers(&inbound.src, &outbound.dst) && covers(&inbound.dst, &outbound.src)
}

/// The rules about one outbound policy `p` (nothing unless it is an outbound tunnel
/// policy): `back(ends)` says whether an inbound policy with a tunnel rule of `ends`
/// takes back what `p` sends (the ends are `p`'s reversed).
pub(crate) fn outbound_findings(
    p: &PolicySpec,
    back: &dyn Fn((IpAddr, IpAddr)) -> bool,
    is_local: &dyn Fn(IpAddr) -> bool,
) -> Findings {
    let mut f = Findings::default();
    if p.dir != Dir::Out {
        return f;
    }
    for (src, dst) in outbound_ends(p) {
        if !back((dst, src)) {
            f.no_way_back.push(policy(p));
        }
        if !is_local(src) {
            f.foreign_source.push(format!("{} (tunnel source {src})", policy(p)));
        }
    }
    f
}

/// The rule about one SA: an ESP-in-UDP SA (`natt`) whose port on this host is not
/// `udp_port`.
pub(crate) fn port_finding(
    sa: &SaId,
    natt: Option<NatT>,
    is_local: &dyn Fn(IpAddr) -> bool,
    udp_port: u16,
) -> Option<String> {
    let n = natt?;
    let (here, port) = match (is_local(sa.dst), is_local(sa.src)) {
        (true, _) if n.dport != udp_port => ("destination", n.dport),
        (_, true) if n.sport != udp_port => ("source", n.sport),
        _ => return None,
    };
    Some(format!("{} {} -> {} SPI {:#x} ({here} port {port})", sa.proto.name(), sa.src, sa.dst, sa.spi))
}

/// Whether prefix `outer` holds all of `inner`.
fn covers(outer: &Prefix, inner: &Prefix) -> bool {
    outer.len <= inner.len && outer.contains(inner.addr)
}

fn policy(p: &PolicySpec) -> String {
    setkey::format_redacted(&Request::AddPolicy(p.clone()))
}

/// One line for `items` under `what`: the first [`NAMED`], then how many more.
fn summarise(out: &mut Vec<String>, what: &str, items: Vec<String>) {
    if items.is_empty() {
        return;
    }
    let more = match items.len().saturating_sub(NAMED) {
        0 => String::new(),
        n => format!("; and {n} more"),
    };
    out.push(format!("{what}: {}{more}", items[..items.len().min(NAMED)].join("; ")));
}

/// [`warnings`] for what `core` holds now, with this host's addresses (in ipsecd's network
/// namespace; none known if they cannot be read, which the warning about tunnel sources
/// then names for every policy — the line says why).
pub fn check(core: &Ipsec, udp_port: u16) -> Vec<String> {
    let local = crate::keepalive::local_addresses();
    let is_local = |a: IpAddr| local.as_ref().is_ok_and(|l| l.contains(&a));
    let sas = core.databases().sad.dump(None);
    let mut w = warnings(sas.iter().map(|sa| &sa.spec), &core.databases().spd.dump(), &is_local, udp_port);
    if let Err(e) = &local {
        w.push(format!("this host's addresses could not be read ({e}): the tunnel sources were not checked"));
        w.retain(|l| !l.starts_with("outbound tunnel policies whose tunnel source"));
    }
    w
}

/// Logs each warning, with where it came from.
pub fn log(origin: &str, warnings: &[String]) {
    for w in warnings {
        tracing::warn!("{origin}: {w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> (Vec<SaSpec>, Vec<PolicySpec>) {
        let (mut sas, mut policies) = (Vec::new(), Vec::new());
        for r in setkey::parse(text).unwrap() {
            match r.item {
                Request::AddSa(s) => sas.push(s),
                Request::AddPolicy(p) => policies.push(p),
                _ => {}
            }
        }
        (sas, policies)
    }

    const KEY: &str = "0x00112233445566778899aabbccddeeff00112233";

    /// Gateway A (10.99.0.1, network 10.98.1.0/24) of scripts/e2e, its file with `extra`.
    fn a_with(extra: &str) -> Vec<String> {
        let text = format!(
            "add 10.99.0.1 10.99.0.2 esp 0x1001 -m tunnel -E aes-gcm-16 {KEY};\n\
             add 10.99.0.2 10.99.0.1 esp 0x1002 -m tunnel -E aes-gcm-16 {KEY};\n\
             spdadd 10.98.1.0/24 10.98.2.0/24 any -P out ipsec esp/tunnel/10.99.0.1-10.99.0.2/require;\n\
             spdadd 10.98.2.0/24 10.98.1.0/24 any -P in ipsec esp/tunnel/10.99.0.2-10.99.0.1/require;\n{extra}"
        );
        let (sas, policies) = parsed(&text);
        let a = |x: IpAddr| ["10.99.0.1", "10.98.1.1"].iter().any(|l| x == l.parse::<IpAddr>().unwrap());
        warnings(&sas, &policies, &a, 4500)
    }

    #[test]
    fn a_whole_configuration_has_no_warning() {
        assert_eq!(a_with(""), Vec::<String>::new());
        // A wider inbound policy back through the same tunnel is a counterpart too, and a
        // transport policy needs none.
        let wider = "spdadd 10.98.3.0/24 10.98.2.0/24 any -P out ipsec esp/tunnel/10.99.0.1-10.99.0.2/require;\n\
                     spdadd 10.98.0.0/16 10.98.0.0/16 any -P in ipsec esp/tunnel/10.99.0.2-10.99.0.1/require;\n\
                     spdadd 10.99.0.1 10.99.0.2 any -P out ipsec esp/transport//require;\n";
        assert_eq!(a_with(wider), Vec::<String>::new());
    }

    #[test]
    fn an_outbound_tunnel_policy_without_its_inbound_one_is_named() {
        let w = a_with(
            "spdadd 10.77.0.0/24 10.98.2.0/24 any -P out ipsec esp/tunnel/10.99.0.1-10.99.0.2/require;\n\
             spdadd 10.98.2.0/24 10.77.0.0/24 any -P in ipsec esp/tunnel/10.99.0.3-10.99.0.1/require;\n",
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("outbound tunnel policies with no inbound policy back"), "{w:?}");
        assert!(w[0].contains("spdadd 10.77.0.0/24 10.98.2.0/24 any -P out"), "{w:?}");
        assert!(!w[0].contains("10.98.1.0/24"), "the whole pair is not named: {w:?}");
    }

    #[test]
    fn the_other_gateways_file_is_named_by_its_tunnel_source() {
        // B's file on A: every tunnel starts at 10.99.0.2, and the pair is whole.
        let text = format!(
            "add 10.99.0.2 10.99.0.1 esp 0x1002 -m tunnel -E aes-gcm-16 {KEY};\n\
             spdadd 10.98.2.0/24 10.98.1.0/24 any -P out ipsec esp/tunnel/10.99.0.2-10.99.0.1/require;\n\
             spdadd 10.98.1.0/24 10.98.2.0/24 any -P in ipsec esp/tunnel/10.99.0.1-10.99.0.2/require;\n"
        );
        let (sas, policies) = parsed(&text);
        let a = |x: IpAddr| x == "10.99.0.1".parse::<IpAddr>().unwrap();
        let w = warnings(&sas, &policies, &a, 4500);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("tunnel source is not an address of this host"), "{w:?}");
        assert!(w[0].contains("(tunnel source 10.99.0.2)"), "{w:?}");
    }

    #[test]
    fn an_esp_udp_sa_on_another_port_is_named_by_the_end_that_is_ours() {
        let w = a_with(&format!(
            "add 10.99.0.2[4501] 10.99.0.1[4501] esp-udp 0x2002 -m tunnel -E aes-gcm-16 {KEY};\n\
             add 10.99.0.1[4501] 10.99.0.2[4500] esp-udp 0x2001 -m tunnel -E aes-gcm-16 {KEY};\n\
             add 10.99.0.1 10.99.0.2 esp-udp 0x2003 -m tunnel -E aes-gcm-16 {KEY};\n\
             add 10.99.0.5[4501] 10.99.0.2[4501] esp-udp 0x2004 -m tunnel -E aes-gcm-16 {KEY};\n"
        ));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("not --udp-port 4500"), "{w:?}");
        assert!(w[0].contains("SPI 0x2002 (destination port 4501)"), "{w:?}");
        assert!(w[0].contains("SPI 0x2001 (source port 4501)"), "{w:?}");
        assert!(!w[0].contains("0x2003") && !w[0].contains("0x2004"), "4500, or not ours: {w:?}");
    }

    #[test]
    fn many_items_make_one_line() {
        let extra: String = (0..10)
            .map(|i| format!("spdadd 10.77.{i}.0/24 10.98.2.0/24 any -P out ipsec esp/tunnel/10.99.0.1-10.99.0.2/require;\n"))
            .collect();
        let w = a_with(&extra);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].ends_with("; and 7 more"), "{w:?}");
        assert_eq!(w[0].matches("spdadd").count(), NAMED);
    }
}
