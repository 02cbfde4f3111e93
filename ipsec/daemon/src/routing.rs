//! How traffic reaches the TUN, and how ipsecd's own traffic stays out of it.
//!
//! ipsecd routes the destination prefix of every outbound `ipsec` policy into its TUN, in
//! a routing table of its own (`--table`, default [`DEFAULT_TABLE`]), and adds one rule per
//! address family: `not fwmark M lookup T`. Every socket ipsecd sends ESP through carries
//! the mark M (`SO_MARK`, `--fwmark`, default [`DEFAULT_MARK`]), so the gateway's own ESP
//! skips the table and follows the main one, while everything else the host sends looks
//! in ipsecd's table first. That is what lets a policy protect traffic to the peer
//! gateway's own address (transport mode: `A B any -P out ipsec esp/transport//require`)
//! or to everything (`0.0.0.0/0`): without the mark, the ESP to the peer would be routed
//! back into the TUN. wg-quick keeps WireGuard's own UDP out of its tunnel the same way.
//!
//! A route also gets `src ADDR` when its policy's source is one host (a transport-mode
//! policy names the local address), so that the kernel picks that address for connections
//! it opens; if ADDR is not local, the route is installed without it.
//!
//! Routes are installed through rtnetlink, at start-up and after every configuration
//! change (only the difference: a route already there is left alone), and removed when the
//! policies go or the daemon stops. One `ip route` process per route took ~1 ms each, 10 s
//! for a hub with 10,000 spokes; netlink messages go to the kernel in batches of
//! [`BATCH`], one system call each, and each is acknowledged (`Netlink::apply`). The two
//! rules, once per start, still go through iproute2 (`ip rule`).

use std::collections::HashSet;
use std::io;

use ipsec_core::Ipsec;
use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_REPLACE,
    NLM_F_REQUEST,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{constants::NETLINK_ROUTE, Socket, SocketAddr};

use ipsec_core::control::{Action, Dir};

/// Route messages sent per system call (their acknowledgements must fit the socket's
/// receive buffer).
pub const BATCH: usize = 256;

/// The default mark on ipsecd's sockets ("OC").
pub const DEFAULT_MARK: u32 = 0x4f43;
/// The default routing table of the routes into the TUN.
pub const DEFAULT_TABLE: u32 = 0x4f43;

/// The routes and rules ipsecd installed; inert when routing is left to the user.
pub struct Routing {
    tun: String,
    table: u32,
    mark: u32,
    enabled: bool,
    installed: HashSet<Route>,
}

impl Routing {
    /// Installs the two rules (`enabled`; otherwise does nothing now or later). A rule left
    /// behind by a daemon that was killed is replaced, not duplicated.
    pub fn start(tun: &str, table: u32, mark: u32, enabled: bool) -> Routing {
        let r = Routing { tun: tun.into(), table, mark, enabled, installed: HashSet::new() };
        if enabled {
            for family in ["-4", "-6"] {
                // `ip rule add` would add a second copy of a stale rule.
                while ip(&r.rule(family, "del")).is_ok() {}
                if let Err(e) = ip(&r.rule(family, "add")) {
                    tracing::warn!("{e}");
                }
            }
        }
        r
    }

    fn rule(&self, family: &str, verb: &str) -> Vec<String> {
        [family, "rule", verb, "not", "fwmark", &self.mark.to_string(), "table", &self.table.to_string()]
            .map(String::from)
            .to_vec()
    }

    /// Brings the installed routes in line with the outbound policies: removes the routes
    /// no policy wants any more, adds the new ones.
    pub fn sync(&mut self, core: &Ipsec) {
        if !self.enabled {
            return;
        }
        let want: HashSet<Route> = protected_routes(core).into_iter().collect();
        let old: Vec<Route> = self.installed.iter().filter(|r| !want.contains(r)).copied().collect();
        let new: Vec<Route> = want.iter().filter(|r| !self.installed.contains(r)).copied().collect();
        if old.is_empty() && new.is_empty() {
            return;
        }
        let mut nl = match Netlink::open(&self.tun, self.table) {
            Ok(nl) => nl,
            Err(e) => {
                tracing::warn!("routes: netlink: {e}");
                return;
            }
        };
        for r in &old {
            self.installed.remove(r);
        }
        let gone = nl.apply(Verb::Delete, &old).iter().filter(|e| e.is_ok()).count();
        let added = nl.replace(&new);
        self.installed.extend(added.iter().copied());
        tracing::info!(
            "routes into {} (table {}): {} added, {} removed, {} in all{}",
            self.tun,
            self.table,
            added.len(),
            gone,
            self.installed.len(),
            if added.len() < new.len() {
                format!("; {} refused", new.len() - added.len())
            } else {
                String::new()
            }
        );
    }

    /// Removes every route and the rules.
    pub fn stop(&mut self) {
        if !self.enabled {
            return;
        }
        let all: Vec<Route> = self.installed.drain().collect();
        match Netlink::open(&self.tun, self.table) {
            Ok(mut nl) => {
                nl.apply(Verb::Delete, &all);
            }
            Err(e) => tracing::warn!("routes: netlink: {e}"),
        }
        for family in ["-4", "-6"] {
            let _ = ip(&self.rule(family, "del"));
        }
    }
}

/// What a route message asks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verb {
    /// `ip route replace` (create, or replace a route to the same prefix).
    Replace,
    /// The same without the `src` hint (when the kernel refused it).
    ReplaceWithoutSrc,
    Delete,
}

/// An rtnetlink socket for the routes of one device and table.
struct Netlink {
    socket: Socket,
    ifindex: u32,
    table: u32,
    seq: u32,
}

impl Netlink {
    fn open(tun: &str, table: u32) -> io::Result<Netlink> {
        let ifindex = nix::net::if_::if_nametoindex(tun).map_err(io::Error::from)?;
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        // Acknowledgements of errors without a copy of the request.
        let _ = socket.set_cap_ack(true);
        Ok(Netlink { socket, ifindex, table, seq: 0 })
    }

    /// Installs routes; those the kernel refused with their `src` (not a local address)
    /// again without it, as `ip route` would need to be told. Returns those installed.
    fn replace(&mut self, routes: &[Route]) -> Vec<Route> {
        let first = self.apply(Verb::Replace, routes);
        let mut done = Vec::with_capacity(routes.len());
        let mut retry = Vec::new();
        for (r, e) in routes.iter().zip(first) {
            match e {
                Ok(()) => done.push(*r),
                Err(e) if r.src.is_some() => {
                    tracing::info!(
                        "route {}/{} src {:?}: {e} (installing it without src)",
                        r.dst.addr,
                        r.dst.len,
                        r.src
                    );
                    retry.push(*r);
                }
                Err(e) => tracing::warn!("route {}/{} dev {}: {e}", r.dst.addr, r.dst.len, self.ifindex),
            }
        }
        for (r, e) in retry.iter().zip(self.apply(Verb::ReplaceWithoutSrc, &retry)) {
            match e {
                Ok(()) => done.push(*r),
                Err(e) => tracing::warn!("route {}/{}: {e}", r.dst.addr, r.dst.len),
            }
        }
        done
    }

    /// Sends one message per route, [`BATCH`] per system call, and collects each one's
    /// acknowledgement: the outcome per route, in order.
    fn apply(&mut self, verb: Verb, routes: &[Route]) -> Vec<io::Result<()>> {
        let mut out = Vec::with_capacity(routes.len());
        for chunk in routes.chunks(BATCH) {
            let first = self.seq.wrapping_add(1);
            let mut buf = Vec::new();
            for r in chunk {
                self.seq = self.seq.wrapping_add(1);
                let mut m = self.message(verb, r);
                m.header.sequence_number = self.seq;
                m.finalize();
                let at = buf.len();
                buf.resize(at + m.buffer_len(), 0);
                m.serialize(&mut buf[at..]);
            }
            let mut acks: Vec<Option<io::Result<()>>> = (0..chunk.len()).map(|_| None).collect();
            if let Err(e) = self.socket.send(&buf, 0).and_then(|_| self.acks(first, &mut acks)) {
                acks.iter_mut()
                    .filter(|a| a.is_none())
                    .for_each(|a| *a = Some(Err(io::Error::new(e.kind(), e.to_string()))));
            }
            out.extend(
                acks.into_iter().map(|a| a.unwrap_or_else(|| Err(io::Error::other("no acknowledgement")))),
            );
        }
        out
    }

    /// Reads acknowledgements until every message from sequence number `first` on has one.
    fn acks(&self, first: u32, acks: &mut [Option<io::Result<()>>]) -> io::Result<()> {
        let mut buf = vec![0u8; 64 * 1024];
        while acks.iter().any(Option::is_none) {
            let n = self.socket.recv(&mut &mut buf[..], 0)?;
            let mut at = 0;
            while at < n {
                let len = NetlinkBuffer::new_checked(&buf[at..n])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?
                    .length() as usize;
                if len == 0 {
                    break;
                }
                let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[at..n.min(at + len)])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let i = msg.header.sequence_number.wrapping_sub(first) as usize;
                if let (NetlinkPayload::Error(e), Some(slot)) = (&msg.payload, acks.get_mut(i)) {
                    *slot = Some(match e.code {
                        None => Ok(()),
                        Some(_) => Err(e.to_io()),
                    });
                }
                at += (len + 3) & !3;
            }
        }
        Ok(())
    }

    fn message(&self, verb: Verb, r: &Route) -> NetlinkMessage<RouteNetlinkMessage> {
        let mut m = RouteMessage::default();
        m.header.address_family =
            if r.dst.addr.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 };
        m.header.destination_prefix_length = r.dst.len;
        // Tables above 255 go in the attribute alone (as iproute2 does).
        m.header.table = u8::try_from(self.table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC);
        m.header.protocol = RouteProtocol::Boot;
        m.header.scope = RouteScope::Link;
        m.header.kind = RouteType::Unicast;
        m.attributes.push(RouteAttribute::Destination(RouteAddress::from(r.dst.addr)));
        m.attributes.push(RouteAttribute::Oif(self.ifindex));
        m.attributes.push(RouteAttribute::Table(self.table));
        if let (Some(src), Verb::Replace) = (r.src, verb) {
            m.attributes.push(RouteAttribute::PrefSource(RouteAddress::from(src)));
        }
        let (payload, flags) = match verb {
            Verb::Delete => (RouteNetlinkMessage::DelRoute(m), NLM_F_REQUEST | NLM_F_ACK),
            _ => (RouteNetlinkMessage::NewRoute(m), NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE),
        };
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        NetlinkMessage::new(header, NetlinkPayload::from(payload))
    }
}

/// Runs `ip ARGS`; its complaint as the error.
pub(crate) fn ip<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Result<(), String> {
    let shown = || args.iter().map(|a| a.as_ref().to_string_lossy()).collect::<Vec<_>>().join(" ");
    match std::process::Command::new("ip").args(args).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("ip {}: {}", shown(), String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Err(format!("ip {}: {e}", shown())),
    }
}

/// A route into the TUN: an outbound policy's destination, and the source address the
/// kernel should pick for it when the policy names one host of ours as the source (the
/// usual transport-mode policy, `A B any -P out ipsec esp/transport//require`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Route {
    pub dst: ipsec_core::control::Prefix,
    pub src: Option<std::net::IpAddr>,
}

/// The routes that bring the traffic of outbound policies that protect it to the TUN, one
/// per destination prefix (the first policy's source wins).
pub fn protected_routes(core: &Ipsec) -> Vec<Route> {
    let mut v: Vec<Route> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for p in core.databases().spd.dump() {
        if p.dir == Dir::Out && matches!(p.action, Action::Protect(_)) && seen.insert(p.selector.dst) {
            let host = if p.selector.src.addr.is_ipv4() { 32 } else { 128 };
            let src = (p.selector.src.len == host).then_some(p.selector.src.addr);
            v.push(Route { dst: p.selector.dst, src });
        }
    }
    v
}
