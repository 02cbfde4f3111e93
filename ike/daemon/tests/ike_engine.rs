//! ike-core's state machine as iked's engine (`iked::daemon::ike_engine`): two engines, the
//! docs' two-gateway example (docs/iked.md), negotiating through the datagrams they hand
//! out, until both ask the loop to install the CHILD_SA — the same SAs seen from each end,
//! as setkey text that ipsecd's parser reads — and then `list`, `stats`, `down`,
//! `rekey` on demand, a wrong pre-shared key; a peer that moves behind its NAT (`peer-moved` ─▶ `migrate`); inbound
//! traffic from ipsecd's dump putting a liveness check off.

use std::time::{Duration, Instant};

use iked::config::Config;
use iked::daemon::control::Request;
use iked::daemon::engine::{Engine, Output, Severity};
use iked::daemon::ike_engine::IkeEngine;
use iked::daemon::setkey::{install_text, migrate_text, remove_text, ChildInstall, ChildMigrate, Sas};
use iked::daemon::traffic::{last_inbound, DUMP};
use ipsec_core::control::{Proto, Request as SetkeyRequest, SaId};
use ipsec_core::sad::Event as IpsecEvent;
use ipsecd::ike_relay::Datagram;
use ipsecd::service::apply_setkey;

const PSK: &str = "0x5e1c9f0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6";

/// One side of the docs' example; A (192.0.2.1) starts, B waits.
fn config(a_side: bool, psk: &str) -> Config {
    config_with(a_side, psk, "")
}

/// The same with `extra` added to the connection (e.g. `dpd_delay = 10s`).
fn config_with(a_side: bool, psk: &str, extra: &str) -> Config {
    config_child(a_side, psk, extra, None)
}

/// The same with `child` as the child's settings instead of the example's selectors and
/// ESP proposal (`start_action` stays A's).
fn config_child(a_side: bool, psk: &str, extra: &str, child: Option<&str>) -> Config {
    let (name, me, peer, my_id, peer_id, lts, rts, start) = if a_side {
        (
            "site-b",
            "192.0.2.1",
            "192.0.2.2",
            "gw-a",
            "gw-b",
            "10.1.0.0/24",
            "10.2.0.0/24",
            "start_action = start",
        )
    } else {
        ("site-a", "192.0.2.2", "192.0.2.1", "gw-b", "gw-a", "10.2.0.0/24", "10.1.0.0/24", "")
    };
    let child = child.map_or_else(
        || format!("local_ts = {lts}\n remote_ts = {rts}\n esp_proposals = aes128gcm16"),
        str::to_owned,
    );
    let text = format!(
        "connections {{ {name} {{ local_addrs = {me}\n remote_addrs = {peer}\n {extra}\n \
         proposals = aes128gcm16-prfsha256-x25519\n \
         local {{ auth = psk\n id = {my_id}.example.org\n }} remote {{ auth = psk\n id = {peer_id}.example.org\n }}\n \
         children {{ net {{ {child}\n {start}\n }} }} }} }}\n\
         secrets {{ ike-site {{ id-a = gw-a.example.org\n id-b = gw-b.example.org\n secret = {psk}\n }} }}\n"
    );
    // A directory per call: the tests run at once.
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("iked-engine-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("iked.conf");
    std::fs::write(&path, text).unwrap();
    let c = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_dir_all(&dir).unwrap();
    c
}

fn engine(a_side: bool, psk: &str) -> IkeEngine {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    IkeEngine::new(fw, config(a_side, psk), Instant::now()).unwrap()
}

/// What each side asked for while they talked.
#[derive(Default)]
struct Seen {
    installs: Vec<ChildInstall>,
    events: Vec<(Severity, String)>,
    ike_keys: Vec<iked::daemon::engine::IkeKeysOut>,
    traps: Vec<iked::daemon::setkey::Trap>,
    removes: Vec<iked::daemon::setkey::ChildRemove>,
    /// Held outbound SAs installed later (a rekey's responder), not in `installs`.
    outbound: Vec<ChildInstall>,
    /// Installs, later outbound SAs and removals in order, by inbound SPI.
    order: Vec<(&'static str, u32)>,
}

/// Carries datagrams between the two until neither sends; installs are reported done.
fn run(a: &mut IkeEngine, b: &mut IkeEngine, first: Vec<Output>) -> (Seen, Seen) {
    run_through(a, b, first, &|d, _| d)
}

/// `run` with `nat` applied to each datagram as sent (its flag: sent by A).
fn run_through(
    a: &mut IkeEngine,
    b: &mut IkeEngine,
    first: Vec<Output>,
    nat: &dyn Fn(Datagram, bool) -> Datagram,
) -> (Seen, Seen) {
    run_both(a, b, first, Vec::new(), nat)
}

/// `run_through` with outputs of both to start from: A's (`first_a`) and B's (`first_b`).
fn run_both(
    a: &mut IkeEngine,
    b: &mut IkeEngine,
    first_a: Vec<Output>,
    first_b: Vec<Output>,
    nat: &dyn Fn(Datagram, bool) -> Datagram,
) -> (Seen, Seen) {
    let (mut sa, mut sb) = (Seen::default(), Seen::default());
    let mut to_b: Vec<Output> = first_a;
    let mut to_a: Vec<Output> = first_b;
    for _ in 0..20 {
        let now = Instant::now();
        let mut next_a = Vec::new();
        for o in std::mem::take(&mut to_b) {
            handle(o, b, &mut sa, &mut next_a, now, a, &|d| nat(d, true));
        }
        let mut next_b = Vec::new();
        for o in std::mem::take(&mut to_a) {
            handle(o, a, &mut sb, &mut next_b, now, b, &|d| nat(d, false));
        }
        to_a = next_a;
        to_b = next_b;
        if to_a.is_empty() && to_b.is_empty() {
            break;
        }
    }
    (sa, sb)
}

/// `o` is `from`'s output: a datagram goes to `to`, whose outputs land in `back`.
fn handle(
    o: Output,
    to: &mut IkeEngine,
    seen: &mut Seen,
    back: &mut Vec<Output>,
    now: Instant,
    from: &mut IkeEngine,
    nat: &dyn Fn(Datagram) -> Datagram,
) {
    match o {
        Output::Send(d) => {
            let d = nat(d);
            let d = Datagram { local: d.remote, remote: d.local, nat_t: d.nat_t, bytes: d.bytes };
            let mut out = Vec::new();
            to.datagram(now, d, &mut out);
            // `to`'s answers go back to `from`, except its own installs and events,
            // which are `to`'s to report: handled on the next round from `back`.
            back.extend(out);
        }
        Output::Install { id, child } => {
            let mut more = Vec::new();
            from.installed(now, id, Ok(()), &mut more);
            if child.sas == Sas::Outbound {
                seen.order.push(("outbound", child.inbound.spi));
                seen.outbound.push(child);
            } else {
                seen.order.push(("install", child.inbound.spi));
                seen.installs.push(child);
            }
            for m in more {
                if let Output::Event(e) = m {
                    seen.events.push((e.severity, e.line));
                }
            }
        }
        Output::Event(e) => seen.events.push((e.severity, e.line)),
        Output::IkeKeys(k) => seen.ike_keys.push(k),
        Output::Remove(r) => {
            seen.order.push(("remove", r.inbound_spi));
            seen.removes.push(r);
        }
        Output::Migrate(_) => panic!("no NAT here: nothing to migrate"),
        Output::Untrap(_) => panic!("no trap here"),
        Output::Trap(t) => seen.traps.push(t),
    }
}

struct Nowhere;

impl ipsec_core::Sink for Nowhere {
    fn transmit(&self, _: ipsec_core::Packet) {}
    fn deliver(&self, _: ipsec_core::Packet) {}
}

/// ipsecd's SA and policy databases, in process, as its control requests change them.
fn ipsecd_core() -> ipsec_core::Ipsec {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    ipsec_core::Ipsec::new(fw, std::sync::Arc::new(Nowhere))
}

fn parsed(text: &str) -> Vec<SetkeyRequest> {
    ipsec_core::setkey::parse(text).unwrap_or_else(|e| panic!("{e}")).into_iter().map(|l| l.item).collect()
}

#[test]
fn two_engines_install_the_same_child_sa_from_each_end() {
    let (mut a, mut b) = (engine(true, PSK), engine(false, PSK));
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    assert!(
        matches!(first.as_slice(), [Output::Send(d)] if !d.nat_t && d.remote.port() == 500),
        "IKE_SA_INIT"
    );
    // `run` files each side's outputs under the other: A's installs and events are in
    // the Seen of the side that received A's outputs, so collect both.
    let (s1, s2) = run(&mut a, &mut b, first);
    let installs: Vec<&ChildInstall> = s1.installs.iter().chain(&s2.installs).collect();
    assert_eq!(installs.len(), 2, "both ends install: {:?} {:?}", s1.events, s2.events);
    let (x, y) = (installs[0], installs[1]);
    assert_eq!((x.local, x.remote), (y.remote, y.local));
    assert_eq!(x.inbound.spi, y.outbound.spi);
    assert_eq!(x.outbound.spi, y.inbound.spi);
    assert_eq!(x.inbound.encr[..], y.outbound.encr[..], "one direction's keys at both ends");
    assert_eq!(x.outbound.encr[..], y.inbound.encr[..]);
    assert_ne!(x.inbound.encr[..], x.outbound.encr[..]);
    assert_eq!(x.inbound.encr.len(), 20, "AES-128-GCM key and salt");
    for c in [x, y] {
        let reqs = parsed(&install_text(c).unwrap());
        assert_eq!(reqs.len(), 4, "two SAs, two policies: {reqs:?}");
    }
    let events: Vec<&String> = s1.events.iter().chain(&s2.events).map(|(_, l)| l).collect();
    assert!(
        events.iter().any(|l| l.starts_with("ike-sa-up conn=site-b") && l.ends_with("role=initiator")),
        "{events:?}"
    );
    assert!(
        events.iter().any(|l| l.starts_with("ike-sa-up conn=site-a") && l.ends_with("role=responder")),
        "{events:?}"
    );
    let keys: Vec<_> = s1.ike_keys.iter().chain(&s2.ike_keys).collect();
    assert_eq!(keys.len(), 2);
    assert_eq!((keys[0].spi_i, keys[0].spi_r), (keys[1].spi_i, keys[1].spi_r));
    assert_eq!(keys[0].sk_ei[..], keys[1].sk_ei[..]);
    assert!(iked::daemon::debug_keys::ike_line(&keys[0].borrow()).is_some());

    let now = Instant::now();
    let mut out = Vec::new();
    let list = a.command(now, &Request::List, &mut out).unwrap();
    assert!(list.starts_with("1: site-b Established initiator 192.0.2.1:500→192.0.2.2:500"), "{list}");
    assert!(list.contains("site-b/net Tunnel SPIs in"), "{list}");
    // list raw: the same SA under charon's field names, one a line, the SPIs crossed.
    let a_in = if x.local.to_string() == "192.0.2.1" { x.inbound.spi } else { y.inbound.spi };
    let b_in = if a_in == x.inbound.spi { y.inbound.spi } else { x.inbound.spi };
    let raw = a.command(now, &Request::ListRaw, &mut out).unwrap();
    let lines: Vec<&str> = raw.lines().collect();
    for want in [
        "ike site-b state ESTABLISHED",
        "ike site-b initiator yes",
        "ike site-b local-host 192.0.2.1",
        "ike site-b remote-port 500",
        "ike site-b local-id gw-a.example.org",
        "ike site-b remote-id gw-b.example.org",
        "ike site-b encr-alg AES_GCM_16",
        "ike site-b encr-keysize 128",
        "ike site-b prf-alg PRF_HMAC_SHA2_256",
        "ike site-b dh-group CURVE_25519",
        "child site-b net state INSTALLED",
        "child site-b net mode TUNNEL",
        "child site-b net encr-alg AES_GCM_16",
        &format!("child site-b net spi-in {a_in:08x}"),
        &format!("child site-b net spi-out {b_in:08x}"),
    ] {
        assert!(lines.contains(&want), "{want:?} not in\n{raw}");
    }
    assert!(!raw.contains("integ-alg") && !raw.contains("nat-local") && !raw.contains("encap"), "{raw}");
    let braw = b.command(now, &Request::ListRaw, &mut out).unwrap();
    assert!(braw.lines().any(|l| l == "ike site-a initiator no"), "{braw}");
    assert!(braw.lines().any(|l| l == format!("child site-a net spi-in {b_in:08x}")), "{braw}");
    let stats = b.command(now, &Request::Stats, &mut out).unwrap();
    assert!(stats.contains("IKE_AUTH: requests sent 0, received 1; responses sent 1"), "{stats}");
    assert!(b
        .command(now, &Request::Up { conn: "nope".into(), new: false }, &mut out)
        .unwrap_err()
        .contains("no connection"));

    assert!(a
        .command(now, &Request::Up { conn: "site-b".into(), new: false }, &mut out)
        .unwrap_err()
        .contains("site-b is up with all its children"));

    // down: the CHILD_SA that was installed is removed, by its SPIs.
    let mut out = Vec::new();
    a.command(now, &Request::Down("site-b".into()), &mut out).unwrap();
    let removes: Vec<_> =
        out.iter().filter_map(|o| if let Output::Remove(r) = o { Some(r) } else { None }).collect();
    assert_eq!(removes.len(), 1);
    let a_install = if x.local.to_string() == "192.0.2.1" { x } else { y };
    assert_eq!(
        (removes[0].inbound_spi, removes[0].outbound_spi),
        (a_install.inbound.spi, a_install.outbound.spi)
    );
    assert_eq!(parsed(&remove_text(removes[0]).unwrap()).len(), 4);
    // The Delete reaches B, which removes its CHILD_SA and answers; then A's IKE SA goes.
    let sends: Vec<Output> = out.into_iter().filter(|o| matches!(o, Output::Send(_))).collect();
    assert_eq!(sends.len(), 1, "one INFORMATIONAL Delete");
    let (s1, s2) = run(&mut a, &mut b, sends);
    assert_eq!((s1.removes.len(), s2.removes.len()), (0, 1), "B removes its CHILD_SA");
    assert!(s2.events.iter().any(|(_, l)| l.contains("reason=deleted-by-peer")), "{:?}", s2.events);
    assert!(s1.events.iter().any(|(_, l)| l.contains("reason=terminated")), "{:?}", s1.events);
    let mut out = Vec::new();
    assert_eq!(a.command(now, &Request::List, &mut out).unwrap(), "no IKE SA\n");
    assert_eq!(b.command(now, &Request::List, &mut out).unwrap(), "no IKE SA\n");
}

/// Transport mode with ESN, as tests/kernel/ike negotiates them with Linux's XFRM through
/// charon: the USE_TRANSPORT_MODE notify and the ESN transform accepted at both ends, both
/// installs in transport mode between the gateways (`dynamic` selectors) with `-f esn`, and
/// `ipsecctl ike list` saying so on the CHILD_SA's line (the kernel suite reads it there).
#[test]
fn transport_mode_with_esn_is_installed_and_listed() {
    let child = "mode = transport\n esp_proposals = aes128gcm16-esn";
    let mk = |a_side| {
        let fw = ocf::Framework::new();
        ocf_soft::register(&fw).unwrap();
        IkeEngine::new(fw, config_child(a_side, PSK, "", Some(child)), Instant::now()).unwrap()
    };
    let (mut a, mut b) = (mk(true), mk(false));
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    let (s1, s2) = run(&mut a, &mut b, first);
    let installs: Vec<&ChildInstall> = s1.installs.iter().chain(&s2.installs).collect();
    assert_eq!(installs.len(), 2, "both ends install: {:?} {:?}", s1.events, s2.events);
    for c in &installs {
        assert_eq!(c.mode, ipsec_core::control::Mode::Transport);
        assert!(c.esn, "ESN negotiated");
        let text = install_text(c).unwrap();
        let sas: Vec<&str> = text.lines().filter(|l| l.starts_with("add ")).collect();
        assert_eq!(sas.len(), 2, "{sas:?}");
        assert!(sas
            .iter()
            .all(|l| l.contains(" esp ") && l.contains(" -m transport ") && l.contains(" -f esn")));
        // The policies are between the gateways themselves, transport mode.
        assert!(text.contains("spdadd 192.0.2."), "dynamic selectors are the gateways");
        assert!(!text.contains("tunnel"), "{}", iked::daemon::setkey::redacted(c));
    }
    let mut out = Vec::new();
    let list = a.command(Instant::now(), &Request::List, &mut out).unwrap();
    assert!(list.contains("site-b/net Transport ESN SPIs in"), "{list}");
    // Without ESN the line says nothing of it.
    let (mut a, mut b) = (engine(true, PSK), engine(false, PSK));
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    run(&mut a, &mut b, first);
    let list = a.command(Instant::now(), &Request::List, &mut out).unwrap();
    assert!(list.contains("site-b/net Tunnel SPIs in"), "{list}");
}

#[test]
fn a_wrong_psk_is_an_authentication_failure() {
    let other = "0x00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    let (mut a, mut b) = (engine(true, PSK), engine(false, other));
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    let (s1, s2) = run(&mut a, &mut b, first);
    assert!(s1.installs.is_empty() && s2.installs.is_empty());
    let fails: Vec<&String> = s1
        .events
        .iter()
        .chain(&s2.events)
        .filter(|(s, _)| *s == Severity::AuthFailure)
        .map(|(_, l)| l)
        .collect();
    assert!(!fails.is_empty(), "{:?} {:?}", s1.events, s2.events);
    assert!(
        fails.iter().any(|l| l.contains("AUTH of gw-a.example.org: PSK AUTH value does not match")),
        "{fails:?}"
    );
}

/// Reloads (SIGHUP) apply into the running state machine. Unchanged: nothing happens. A
/// new key alone, or a changed connection: its IKE SA and CHILD_SA stay (no Remove, no
/// datagram), and the new settings apply from the next negotiation (the CHILD_SA brought
/// up again after `down`/`up` has the new traffic selector).
#[test]
fn a_reload_keeps_established_sas_and_changes_apply_on_the_next_negotiation() {
    let (mut a, mut b) = (engine(true, PSK), engine(false, PSK));
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    let (s1, s2) = run(&mut a, &mut b, first);
    assert_eq!(s1.installs.len() + s2.installs.len(), 2);
    let now = Instant::now();
    let list = |e: &mut IkeEngine| e.command(Instant::now(), &Request::List, &mut Vec::new()).unwrap();
    let before = list(&mut a);

    let same = config(true, PSK);
    let mut out = Vec::new();
    a.reload(now, same.clone(), &Config::diff(&same, &same), &mut out).unwrap();
    assert!(out.is_empty(), "nothing changed, nothing done");
    assert_eq!(list(&mut a), before);

    let changed = config(true, "0x00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
    let diff = Config::diff(&same, &changed);
    assert!(diff.secrets_changed && diff.unchanged == ["site-b"], "{diff:?}");
    let mut out = Vec::new();
    a.reload(now, changed, &diff, &mut out).unwrap();
    assert!(out.is_empty(), "a new key applies to the next authentication, closes nothing");
    assert_eq!(list(&mut a), before);

    let mut moved = config(true, PSK);
    moved.connections[0].children[0].local_ts =
        ike_core::config::TrafficSelector::parse_list("10.1.0.0/25").unwrap();
    let diff = Config::diff(&same, &moved);
    assert_eq!(diff.changed, ["site-b"]);
    let mut out = Vec::new();
    a.reload(now, moved, &diff, &mut out).unwrap();
    assert!(out.is_empty(), "the changed connection's SAs stay: {}", out.len());
    assert_eq!(list(&mut a), before, "the same IKE SA and CHILD_SA");
    assert!(before.contains("10.1.0.0-10.1.0.255"), "{before}");

    // The next negotiation takes the new selector.
    let mut out = Vec::new();
    a.command(now, &Request::Down("site-b".into()), &mut out).unwrap();
    run(&mut a, &mut b, out);
    assert_eq!(list(&mut a), "no IKE SA\n");
    let mut out = Vec::new();
    a.command(now, &Request::Up { conn: "site-b".into(), new: false }, &mut out).unwrap();
    let (s1, s2) = run(&mut a, &mut b, out);
    let ai = s1.installs.iter().chain(&s2.installs).find(|c| c.local.to_string() == "192.0.2.1").unwrap();
    assert_eq!(ai.local_ts, ike_core::config::TrafficSelector::parse_list("10.1.0.0/25").unwrap());
    assert!(list(&mut a).contains("10.1.0.0-10.1.0.127"), "{}", list(&mut a));
}

/// A's file parsed with `text` as its connections (the secret of the docs' example added).
fn parsed_config(text: &str) -> Config {
    let text = format!(
        "connections {{ {text} }}\nsecrets {{ ike-site {{ id-a = gw-a.example.org\n id-b = gw-b.example.org\n \
         secret = {PSK}\n }} }}\n"
    );
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("iked-reload-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("iked.conf");
    std::fs::write(&path, text).unwrap();
    let c = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_dir_all(&dir).unwrap();
    c
}

/// One of A's connections to B, named `name`, with `children` (each `NAME { … }`).
fn conn_text(name: &str, children: &str) -> String {
    format!(
        "{name} {{ local_addrs = 192.0.2.1\n remote_addrs = 192.0.2.2\n proposals = aes128gcm16-prfsha256-x25519\n \
         local {{ auth = psk\n id = gw-a.example.org\n }} remote {{ auth = psk\n id = gw-b.example.org\n }}\n \
         children {{ {children} }} }}\n"
    )
}

const NET: &str = "net { local_ts = 10.1.0.0/24\n remote_ts = 10.2.0.0/24\n esp_proposals = aes128gcm16\n \
                   start_action = start\n }";
const TRAPPED: &str = "web { local_ts = 10.1.0.0/24[tcp/80]\n remote_ts = 10.2.0.0/24\n \
                       esp_proposals = aes128gcm16\n start_action = trap\n }";

/// A reload that removes a connection closes its IKE SA (the CHILD_SA removed from ipsecd,
/// a Delete to the peer, which B answers) and starts an added one (`start_action =
/// start`); a trapped child that comes with the file has its policies installed, and goes
/// with them when the next file drops it; another connection's SAs are not touched.
#[test]
fn a_reload_closes_removed_connections_and_starts_added_ones() {
    let old = parsed_config(
        &(conn_text("site-b", NET)
            + &conn_text("spare", TRAPPED.replace("start_action = trap", "").as_str())),
    );
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let mut a = IkeEngine::new(fw, old.clone(), Instant::now()).unwrap();
    let mut b = engine(false, PSK);
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    let (s1, _) = run(&mut a, &mut b, first);
    let old_in = s1.installs[0].inbound.spi;
    let list = |e: &mut IkeEngine| e.command(Instant::now(), &Request::List, &mut Vec::new()).unwrap();
    let before = list(&mut a);
    assert!(before.starts_with("1: site-b Established"), "{before}");

    // `spare` goes, a trapped child comes with `extra`: site-b is not touched.
    let new = parsed_config(&(conn_text("site-b", NET) + &conn_text("extra", TRAPPED)));
    let diff = Config::diff(&old, &new);
    assert_eq!(
        (diff.added.as_slice(), diff.removed.as_slice()),
        (&["extra".to_owned()][..], &["spare".to_owned()][..])
    );
    let mut out = Vec::new();
    a.reload(Instant::now(), new.clone(), &diff, &mut out).unwrap();
    assert!(matches!(out.as_slice(), [Output::Trap(t)] if t.local_ts.len() == 1), "only extra/web's trap");
    assert_eq!(list(&mut a), before);

    // site-b renamed: removed and added at once.
    let renamed = parsed_config(&conn_text("site-b2", NET));
    let diff = Config::diff(&new, &renamed);
    let mut out = Vec::new();
    a.reload(Instant::now(), renamed, &diff, &mut out).unwrap();
    let kinds: Vec<&str> = out
        .iter()
        .map(|o| match o {
            Output::Remove(_) => "remove",
            Output::Send(_) => "send",
            Output::Untrap(_) => "untrap",
            Output::Event(_) => "event",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "remove").count(), 1, "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "send").count(), 2, "a Delete and an IKE_SA_INIT: {kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "untrap").count(), 1, "extra's trap removed: {kinds:?}");
    let Some(Output::Remove(r)) = out.iter().find(|o| matches!(o, Output::Remove(_))) else { unreachable!() };
    assert_eq!(r.inbound_spi, old_in);
    let mid = list(&mut a);
    assert!(mid.contains("site-b Deleting") && mid.contains("site-b2 InitSent"), "{mid}");
    let (s1, s2) = run(&mut a, &mut b, out.into_iter().filter(|o| matches!(o, Output::Send(_))).collect());
    let events: Vec<&String> = s1.events.iter().chain(&s2.events).map(|(_, l)| l).collect();
    assert!(events.iter().any(|l| l.contains("reason=deleted-by-peer")), "B heard the Delete: {events:?}");
    assert!(events.iter().any(|l| l.starts_with("ike-sa-up conn=site-b2")), "{events:?}");
    let after = list(&mut a);
    assert!(after.starts_with("1: site-b2 Established") && !after.contains("site-b "), "{after}");
    // The retired connection cannot be brought up any more.
    assert!(a
        .command(Instant::now(), &Request::Up { conn: "site-b".into(), new: false }, &mut Vec::new())
        .unwrap_err()
        .contains("no connection"));
}

/// A child dropped from a connection that stays: its CHILD_SA is removed and deleted with
/// the peer; the IKE SA stays up.
#[test]
fn a_reload_deletes_the_child_sas_of_removed_children() {
    let old = parsed_config(&conn_text("site-b", NET));
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let mut a = IkeEngine::new(fw, old.clone(), Instant::now()).unwrap();
    let mut b = engine(false, PSK);
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    run(&mut a, &mut b, first);
    let new = parsed_config(&conn_text(
        "site-b",
        &NET.replace("net {", "other {").replace("start_action = start", ""),
    ));
    let diff = Config::diff(&old, &new);
    assert_eq!(diff.changed, ["site-b"]);
    let mut out = Vec::new();
    a.reload(Instant::now(), new, &diff, &mut out).unwrap();
    assert_eq!(out.iter().filter(|o| matches!(o, Output::Remove(_))).count(), 1);
    let (_, s2) = run(&mut a, &mut b, out.into_iter().filter(|o| matches!(o, Output::Send(_))).collect());
    assert_eq!(s2.removes.len(), 1, "B removed its side");
    let list = a.command(Instant::now(), &Request::List, &mut Vec::new()).unwrap();
    assert!(list.starts_with("1: site-b Established") && !list.contains("site-b/net"), "{list}");
}

/// A peer that restarted (a new engine, the old SAs gone on its side only) negotiates
/// again: the responder removes the old CHILD_SA before it installs the new one, whose
/// policies are the same, and keeps one IKE SA.
#[test]
fn a_restarted_peer_replaces_its_old_sas() {
    let (mut a, mut b) = (engine(true, PSK), engine(false, PSK));
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    let (s1, s2) = run(&mut a, &mut b, first);
    let old_b = s2
        .installs
        .iter()
        .chain(&s1.installs)
        .find(|c| c.local.to_string() == "192.0.2.2")
        .unwrap()
        .inbound
        .spi;

    let mut a2 = engine(true, PSK);
    let mut first = Vec::new();
    a2.start(Instant::now(), &mut first);
    // Carry A2's datagrams to B by hand, to see B's outputs in their order.
    let mut to_b = first;
    let mut b_out_all = Vec::new();
    for _ in 0..4 {
        let mut to_a = Vec::new();
        for o in std::mem::take(&mut to_b) {
            if let Output::Send(d) = o {
                let mut out = Vec::new();
                b.datagram(
                    Instant::now(),
                    Datagram { local: d.remote, remote: d.local, nat_t: d.nat_t, bytes: d.bytes },
                    &mut out,
                );
                for o in out {
                    match o {
                        Output::Send(d) => to_a.push(d),
                        other => b_out_all.push(other),
                    }
                }
            }
        }
        for d in to_a {
            let mut out = Vec::new();
            a2.datagram(
                Instant::now(),
                Datagram { local: d.remote, remote: d.local, nat_t: d.nat_t, bytes: d.bytes },
                &mut out,
            );
            to_b.extend(out.into_iter().filter(|o| matches!(o, Output::Send(_))));
        }
    }
    let order: Vec<&str> = b_out_all
        .iter()
        .filter_map(|o| match o {
            Output::Remove(_) => Some("remove"),
            Output::Install { .. } => Some("install"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["remove", "install"], "the old CHILD_SA goes first");
    let Some(Output::Remove(r)) = b_out_all.iter().find(|o| matches!(o, Output::Remove(_))) else {
        unreachable!()
    };
    assert_eq!(r.inbound_spi, old_b);
    let Some(Output::Install { child, .. }) = b_out_all.iter().find(|o| matches!(o, Output::Install { .. }))
    else {
        unreachable!()
    };
    assert!(child.policies, "the new CHILD_SA brings the policies back");
    let list = b.command(Instant::now(), &Request::List, &mut Vec::new()).unwrap();
    assert_eq!(list.lines().filter(|l| l.contains("Established")).count(), 1, "{list}");
}

/// With `unique = never` on both sides, `up CONN new` brings up one more IKE SA of a
/// connection that has one (plain `up` is refused), and none replaces another: each
/// CHILD_SA is installed, none removed, and both ends list them all (what
/// `bench/ike-setup`'s rate round does a thousand times).
#[test]
fn up_new_adds_ike_sas_that_unique_never_keeps() {
    let fw = || {
        let fw = ocf::Framework::new();
        ocf_soft::register(&fw).unwrap();
        fw
    };
    let now = Instant::now();
    let mut a = IkeEngine::new(fw(), config_with(true, PSK, "unique = never"), now).unwrap();
    let mut b = IkeEngine::new(fw(), config_with(false, PSK, "unique = never"), now).unwrap();
    let mut first = Vec::new();
    a.start(now, &mut first);
    let (s1, s2) = run(&mut a, &mut b, first);
    assert_eq!(s1.installs.len() + s2.installs.len(), 2);
    let plain = Request::Up { conn: "site-b".into(), new: false };
    let e = a.command(now, &plain, &mut Vec::new()).unwrap_err();
    assert!(e.contains("is up with all its children") && e.contains("--new"), "{e}");
    let mut installs = 2;
    for n in 2..=3 {
        let mut out = Vec::new();
        let r = a.command(now, &Request::Up { conn: "site-b".into(), new: true }, &mut out).unwrap();
        assert!(r.starts_with("initiating site-b (children net), IKE SA "), "{r}");
        let (s1, s2) = run(&mut a, &mut b, out);
        assert_eq!(s1.installs.len() + s2.installs.len(), 2, "a new CHILD_SA at both ends");
        assert!(s1.removes.is_empty() && s2.removes.is_empty(), "none replaced");
        installs += 2;
        for e in [&mut a, &mut b] {
            let list = e.command(now, &Request::List, &mut Vec::new()).unwrap();
            assert_eq!(list.lines().filter(|l| l.contains("Established")).count(), n, "{list}");
        }
    }
    assert_eq!(installs, 6);
}

/// `iked --no-dos-protection`'s settings never ask for cookies, where the default's do
/// from 30 half-open SAs on; the limit on half-open SAs stays.
#[test]
fn no_dos_protection_turns_cookies_off_only() {
    let (off, on) = (iked::daemon::ike_engine::no_dos_protection(), ike_core::Settings::default());
    assert!(on.half_open.cookies_on(30));
    assert!(!off.half_open.cookies_on(30) && !off.half_open.cookies_on(100_000));
    assert_eq!(off.half_open.limit, on.half_open.limit);
    assert_eq!(off.retransmit, on.retransmit);
}

/// A CHILD_SA rekeyed on its soft expiry (make-before-break): the new pair is installed
/// under the old one's reqid without adding policies again, the old pair is removed
/// without its policies (the new one owns them now), on both sides.
#[test]
fn a_soft_expiry_rekeys_under_the_same_reqid_and_policies() {
    use ipsec_core::control::{Proto, SaId};
    use ipsec_core::sad::{Event as IpsecEvent, Limit};

    let (mut a, mut b) = (engine(true, PSK), engine(false, PSK));
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    let (s1, _) = run(&mut a, &mut b, first);
    let old = s1.installs.first().expect("A installed the first CHILD_SA");
    assert!(old.policies, "the first CHILD_SA adds its policies");
    let (old_reqid, old_spi) = (old.reqid, old.inbound.spi);

    let mut first = Vec::new();
    let sa = SaId { src: old.remote, dst: old.local, proto: Proto::Esp, spi: old_spi };
    a.sa_event(Instant::now(), &IpsecEvent::SoftExpired { sa, by: Limit::Time }, &mut first);
    let (s1, s2) = run(&mut a, &mut b, first);
    for (side, seen) in [("A", &s1), ("B", &s2)] {
        assert_eq!(seen.installs.len(), 1, "{side}: one new CHILD_SA");
        let new = &seen.installs[0];
        assert_ne!(new.inbound.spi, old_spi, "{side}: new SPIs");
        assert!(!new.policies, "{side}: the rekeyed CHILD_SA adds no policies");
        assert_eq!(seen.removes.len(), 1, "{side}: the old CHILD_SA removed");
        assert!(!seen.removes[0].policies, "{side}: the old CHILD_SA's removal keeps the policies");
        assert_eq!(new.reqid, seen.removes[0].reqid, "{side}: the new CHILD_SA takes the old one's reqid");
    }
    assert_eq!(s1.installs[0].reqid, old_reqid);
    assert_eq!(s1.removes[0].inbound_spi, old_spi);
    // The requester (A) adds both SAs at once; the responder (B) the inbound one with its
    // response and the outbound one at A's Delete of the old CHILD_SA, just before that
    // one's removal: A has the new inbound SA by then.
    assert_eq!((s1.installs[0].sas, s1.outbound.len()), (Sas::Both, 0));
    let (new_b, old_b) = (&s2.installs[0], s2.removes[0].inbound_spi);
    assert_eq!(new_b.sas, Sas::Inbound);
    assert_eq!(s2.outbound.len(), 1, "B's outbound SA comes later");
    let out_b = &s2.outbound[0];
    assert_eq!(
        (out_b.inbound.spi, out_b.outbound.spi, out_b.reqid),
        (new_b.inbound.spi, new_b.outbound.spi, new_b.reqid)
    );
    assert_eq!(out_b.outbound.encr[..], new_b.outbound.encr[..]);
    assert!(!out_b.policies);
    assert_eq!(
        s2.order,
        [("install", new_b.inbound.spi), ("outbound", new_b.inbound.spi), ("remove", old_b)],
        "B: inbound, then outbound, then the old one's removal"
    );
}

/// Both ends rekey the CHILD_SA at once (soft expiry on each side before either request
/// arrives): the requests cross (RFC 7296 §2.8.1), each side installs two new CHILD_SAs
/// under the old reqid, and the loser of the collision is deleted with the old one. The
/// policies stay throughout: no removal on either side takes them, and the CHILD_SA left
/// installed on each side holds them.
#[test]
fn crossing_rekeys_keep_the_policies() {
    use ipsec_core::control::{Proto, SaId};
    use ipsec_core::sad::{Event as IpsecEvent, Limit};

    let (mut a, mut b) = (engine(true, PSK), engine(false, PSK));
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    let (s1, s2) = run(&mut a, &mut b, first);
    let (oa, ob) = (&s1.installs[0], &s2.installs[0]);
    let expire = |c: &ChildInstall| IpsecEvent::SoftExpired {
        sa: SaId { src: c.remote, dst: c.local, proto: Proto::Esp, spi: c.inbound.spi },
        by: Limit::Time,
    };
    let (mut fa, mut fb) = (Vec::new(), Vec::new());
    a.sa_event(Instant::now(), &expire(oa), &mut fa);
    b.sa_event(Instant::now(), &expire(ob), &mut fb);
    let (s1, s2) = run_both(&mut a, &mut b, fa, fb, &|d, _| d);
    for (side, seen, old) in [("A", &s1, oa), ("B", &s2, ob)] {
        assert_eq!(seen.installs.len(), 2, "{side}: both crossing CHILD_SAs installed: {:?}", seen.events);
        assert_eq!(seen.removes.len(), 2, "{side}: the old one and the collision's loser removed");
        assert!(seen.installs.iter().all(|i| i.reqid == old.reqid), "{side}: the old reqid");
        assert!(seen.removes.iter().all(|r| !r.policies), "{side}: a removal took the policies");
        let left: Vec<_> = seen
            .installs
            .iter()
            .filter(|i| !seen.removes.iter().any(|r| r.inbound_spi == i.inbound.spi))
            .collect();
        assert_eq!(left.len(), 1, "{side}: one CHILD_SA left");
        // It sends: its outbound SA came with it or later, before the old one's removal.
        let spi = left[0].inbound.spi;
        if left[0].sas == Sas::Inbound {
            let at = seen.order.iter().position(|o| *o == ("outbound", spi)).expect("its outbound SA");
            let old_at = seen.order.iter().position(|o| *o == ("remove", old.inbound.spi)).unwrap();
            assert!(at < old_at, "{side}: {:?}", seen.order);
        }
        // The redundant one never gets an outbound SA.
        assert!(seen.outbound.iter().all(|o| o.inbound.spi == spi), "{side}: {:?}", seen.order);
    }
    // The one left on each side is one CHILD_SA seen from its two ends, and it holds the
    // policies: its removal (the IKE SA's end) takes them.
    let mut out = Vec::new();
    a.command(Instant::now(), &Request::Down("site-b".into()), &mut out).unwrap();
    let gone: Vec<_> =
        out.iter().filter_map(|o| if let Output::Remove(r) = o { Some(r) } else { None }).collect();
    assert_eq!(gone.len(), 1);
    assert!(gone[0].policies, "the CHILD_SA left holds the policies");
}

/// A peer that moved behind its NAT: iked's `migrate` request moves both ESP-in-UDP SAs to
/// the new port, and ipsecd's own setkey parser reads it as two migrations.
#[test]
fn a_migrate_request_moves_both_sas_to_the_new_port() {
    let m = ChildMigrate {
        local: "198.51.100.2:4500".parse().unwrap(),
        remote: "203.0.113.9:50123".parse().unwrap(),
        inbound_spi: 0xc100_0001,
        outbound_spi: 0xc200_0002,
        outbound: true,
    };
    let text = migrate_text(&m);
    assert_eq!(
        text,
        "migrate 198.51.100.2 203.0.113.9 esp-udp 0xc2000002 to 198.51.100.2[4500] 203.0.113.9[50123] ;\n\
         migrate 203.0.113.9 198.51.100.2 esp-udp 0xc1000001 to 203.0.113.9[50123] 198.51.100.2[4500] ;\n"
    );
    let reqs = parsed(&text);
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert!(format!("{r:?}").contains("50123"), "{r:?}");
    }
    // A CHILD_SA whose outbound SA is still held (a rekey we answered): the inbound alone.
    let held = migrate_text(&ChildMigrate { outbound: false, ..m });
    assert_eq!(
        held,
        "migrate 203.0.113.9 198.51.100.2 esp-udp 0xc1000001 to 203.0.113.9[50123] 198.51.100.2[4500] ;\n"
    );
    assert_eq!(parsed(&held).len(), 1);
}

/// A (192.0.2.1) behind a NAT that keeps its address and maps its ports 500 and 4500 to
/// 40500 and 44500: B detects the NAT and its CHILD_SA is ESP-in-UDP to port 44500. Then
/// the NAT's mapping changes and ipsecd reports `peer-moved` on B's inbound SA: B's IKE SA
/// moves to the new port and iked asks ipsecd to migrate both SAs there, which ipsecd's
/// SA database (in process) carries out.
#[test]
fn peer_moved_behind_a_nat_migrates_the_child_sa() {
    let (mut a, mut b) = (engine(true, PSK), engine(false, PSK));
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    let nat = |mut d: Datagram, from_a: bool| {
        if from_a {
            d.local.set_port(d.local.port() + 40000);
        } else {
            d.remote.set_port(d.remote.port() - 40000);
        }
        d
    };
    let (s1, s2) = run_through(&mut a, &mut b, first, &nat);
    let bi = s1.installs.iter().chain(&s2.installs).find(|c| c.local.to_string() == "192.0.2.2");
    let Some(bi) = bi else { panic!("B did not install: {:?} {:?}", s1.events, s2.events) };
    assert_eq!(bi.natt.map(|n| (n.local, n.remote)), Some((4500, 44500)));
    let ev = IpsecEvent::PeerMoved {
        sa: SaId { src: bi.remote, dst: bi.local, proto: Proto::EspUdp, spi: bi.inbound.spi },
        from: 44500,
        to: 50123,
    };
    let mut out = Vec::new();
    b.sa_event(Instant::now(), &ev, &mut out);
    let migrates: Vec<&ChildMigrate> =
        out.iter().filter_map(|o| if let Output::Migrate(m) = o { Some(m) } else { None }).collect();
    assert_eq!(
        migrates,
        vec![&ChildMigrate {
            local: "192.0.2.2:4500".parse().unwrap(),
            remote: "192.0.2.1:50123".parse().unwrap(),
            inbound_spi: bi.inbound.spi,
            outbound_spi: bi.outbound.spi,
            outbound: true,
        }]
    );
    assert_eq!(parsed(&migrate_text(migrates[0])).len(), 2);
    assert!(
        out.iter().any(|o| matches!(o, Output::Event(e) if e.line.starts_with("peer-moved") && e.line.ends_with("to=192.0.2.1:50123"))),
        "a peer-moved log line"
    );
    let mut out2 = Vec::new();
    let list = b.command(Instant::now(), &Request::List, &mut out2).unwrap();
    assert!(list.contains("192.0.2.1:50123"), "the IKE SA answers at the new port: {list}");
    let stats = b.command(Instant::now(), &Request::Stats, &mut out2).unwrap();
    assert!(stats.contains("liveness checks 0, peer moves 1"), "{stats}");

    // A real ipsecd's SA database (in process) takes B's install, then the migrate: its
    // dump shows both SAs at the new port, and the last-used lines read.
    let core = ipsecd_core();
    assert_eq!(apply_setkey(&core, "iked", &install_text(bi).unwrap()), Ok(String::new()));
    assert_eq!(apply_setkey(&core, "iked", &migrate_text(migrates[0])), Ok(String::new()));
    let dump = apply_setkey(&core, "iked", DUMP).unwrap();
    assert_eq!(dump.matches("50123").count(), 2, "{dump}");
    assert!(!dump.contains("44500"), "{dump}");
    let (seen, errors) = last_inbound(&dump);
    assert!(seen.is_empty() && errors.is_empty(), "no traffic yet: {seen:?} {errors:?}");
    assert_eq!(dump.matches("last-used").count(), 2, "{dump}");
}

/// dpd_delay = 10s on A: when a check is near, the engine asks for traffic; inbound ESP
/// seen a second ago puts the check off; with none, the check (one datagram) goes.
#[test]
fn inbound_traffic_from_the_dump_puts_the_liveness_check_off() {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let t0 = Instant::now();
    let mut a = IkeEngine::new(fw, config_with(true, PSK, "dpd_delay = 10s"), t0).unwrap();
    let mut b = engine(false, PSK);
    let mut first = Vec::new();
    a.start(t0, &mut first);
    let (s1, s2) = run(&mut a, &mut b, first);
    let ai = s1
        .installs
        .iter()
        .chain(&s2.installs)
        .find(|c| c.local.to_string() == "192.0.2.1")
        .expect("A installed");
    let at = |s: f64| t0 + Duration::from_secs_f64(s);
    assert!(!a.wants_traffic(at(8.0)));
    assert!(a.wants_traffic(at(9.5)), "a check due within two ticks");
    a.traffic(at(9.5), &[(ai.inbound.spi, Duration::from_secs(1))]);
    assert!(!a.wants_traffic(at(9.6)), "asked once a second at most");
    let mut out = Vec::new();
    a.tick(at(10.0), &mut out);
    assert!(!out.iter().any(|o| matches!(o, Output::Send(_))), "traffic at 8.5 s: no check at 10 s");
    a.tick(at(18.6), &mut out);
    assert_eq!(out.iter().filter(|o| matches!(o, Output::Send(_))).count(), 1, "the check at 18.5 s");
    let stats = a.command(at(18.6), &Request::Stats, &mut out).unwrap();
    assert!(stats.contains("liveness checks 1, peer moves 0"), "{stats}");
}

/// `ipsecctl ike rekey`: a CHILD_SA named `CONN/CHILD`, then the new one by its inbound
/// SPI as `list` shows it, then the IKE SA by its number in `list`. Each time both ends
/// install the new CHILD_SA (new SPIs, the old reqid, no new policies) before they remove
/// the old one (make-before-break: traffic keeps a pair of SAs throughout); the IKE SA's
/// rekey gives it new SPIs and keeps the CHILD_SA. Unknown names are refused, saying so.
#[test]
fn ipsecctl_rekey_rekeys_a_child_sa_and_the_ike_sa_on_demand() {
    let (mut a, mut b) = (engine(true, PSK), engine(false, PSK));
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    let (s1, _) = run(&mut a, &mut b, first);
    let first_child = s1.installs.first().expect("A installed");
    // (inbound SPI, outbound SPI, inbound key) of A's CHILD_SA.
    let mut prev = (first_child.inbound.spi, first_child.outbound.spi, first_child.inbound.encr.to_vec());
    let list = |e: &mut IkeEngine| e.command(Instant::now(), &Request::List, &mut Vec::new()).unwrap();

    // A CHILD_SA by name, then (on B's side) by its inbound SPI.
    for (side_a, what) in [(true, "site-b/net".to_owned()), (false, String::new())] {
        let what = if side_a {
            what
        } else {
            // B's inbound SPI is A's outbound one.
            format!("{:#010x}", prev.1)
        };
        let (req, other) = if side_a { (&mut a, &mut b) } else { (&mut b, &mut a) };
        let mut out = Vec::new();
        let reply = req.command(Instant::now(), &Request::Rekey(what.clone()), &mut out).unwrap();
        assert!(reply.starts_with("rekeying CHILD_SA site-"), "{reply}");
        assert_eq!(out.iter().filter(|o| matches!(o, Output::Send(_))).count(), 1, "one CREATE_CHILD_SA");
        let (s_req, s_other) = run(req, other, out);
        for (side, seen) in [("requester", &s_req), ("responder", &s_other)] {
            assert_eq!(seen.installs.len(), 1, "{side} ({what}): one new CHILD_SA {:?}", seen.events);
            assert_eq!(seen.removes.len(), 1, "{side} ({what}): the old one removed");
            assert!(!seen.installs[0].policies && !seen.removes[0].policies, "{side}: policies kept");
            assert_eq!(seen.installs[0].reqid, seen.removes[0].reqid, "{side}: the old reqid");
        }
        // A's view: new SPIs both ways, the old pair removed.
        let (new_a, rm_a) = if side_a {
            (&s_req.installs[0], &s_req.removes[0])
        } else {
            (&s_other.installs[0], &s_other.removes[0])
        };
        assert_eq!(new_a.local.to_string(), "192.0.2.1");
        assert_ne!(new_a.inbound.spi, prev.0);
        assert_ne!(new_a.outbound.spi, prev.1);
        assert_ne!(new_a.inbound.encr[..], prev.2[..], "new keys");
        assert_eq!(rm_a.inbound_spi, prev.0);
        assert!(list(&mut a).contains(&format!("SPIs in {:#010x}", new_a.inbound.spi)), "{}", list(&mut a));
        prev = (new_a.inbound.spi, new_a.outbound.spi, new_a.inbound.encr.to_vec());
    }

    // The IKE SA by its number: new SPIs, the same CHILD_SA carried over, nothing
    // installed or removed in ipsecd.
    let before = list(&mut a);
    let mut out = Vec::new();
    let reply = a.command(Instant::now(), &Request::Rekey("1".into()), &mut out).unwrap();
    assert!(reply.starts_with("rekeying IKE SA"), "{reply}");
    let (s1, s2) = run(&mut a, &mut b, out);
    let events: Vec<&String> = s1.events.iter().chain(&s2.events).map(|(_, l)| l).collect();
    assert!(events.iter().any(|l| l.starts_with("ike-sa-rekeyed conn=site-b")), "{events:?}");
    assert!(
        s1.installs.is_empty() && s2.installs.is_empty() && s1.removes.is_empty() && s2.removes.is_empty()
    );
    let after = list(&mut a);
    assert_ne!(before.lines().next(), after.lines().next(), "new IKE SA SPIs: {before} {after}");
    assert!(after.starts_with("1: site-b Established"), "{after}");
    assert!(after.contains(&format!("SPIs in {:#010x}", prev.0)), "the CHILD_SA moved: {after}");

    // By the SPI list shows, too; and names that match nothing.
    let spi = after.split("SPIs ").nth(1).unwrap().split('_').next().unwrap().to_owned();
    let mut out = Vec::new();
    assert!(a
        .command(Instant::now(), &Request::Rekey(spi), &mut out)
        .unwrap()
        .starts_with("rekeying IKE SA"));
    let mut out = Vec::new();
    for (what, why) in [
        ("site-b/nope", "no CHILD_SA site-b/nope"),
        ("0x00000001", "no CHILD_SA with inbound SPI 0x00000001"),
        ("7", "no IKE SA number 7"),
        ("nope", "no IKE SA or CHILD_SA \"nope\""),
    ] {
        let e = b.command(Instant::now(), &Request::Rekey(what.into()), &mut out).unwrap_err();
        assert!(e.starts_with(why), "{what}: {e}");
    }
}

/// The metrics (Prometheus' text) as name{labels} → value.
fn metrics(e: &IkeEngine) -> std::collections::HashMap<String, u64> {
    e.metrics()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_owned(), v.parse().unwrap_or_else(|_| panic!("{l}")))
        })
        .collect()
}

/// A datagram `from` sent, as `to` receives it.
fn received(d: &Datagram) -> Datagram {
    Datagram { local: d.remote, remote: d.local, nat_t: d.nat_t, bytes: d.bytes.clone() }
}

fn sends(out: &[Output]) -> Vec<Datagram> {
    out.iter().filter_map(|o| if let Output::Send(d) = o { Some(received(d)) } else { None }).collect()
}

/// Each counter the metrics endpoint shows moves when what it counts happens: messages by
/// exchange, direction and kind; error answers both ways; drops by exchange and cause;
/// the SA gauges; half-open SAs and their expiry; cookies (on, sent, accepted);
/// retransmissions, resent responses, timeouts; authentication failures by cause.
#[test]
fn each_counter_moves() {
    let (mut a, mut b) = (engine(true, PSK), engine(false, PSK));
    let t0 = Instant::now();
    let mut first = Vec::new();
    a.start(t0, &mut first);
    run(&mut a, &mut b, first);
    let (ma, mb) = (metrics(&a), metrics(&b));
    let m = |map: &std::collections::HashMap<String, u64>, k: &str| {
        *map.get(k).unwrap_or_else(|| panic!("no {k} in the metrics"))
    };
    for (k, va, vb) in [
        ("iked_messages_total{exchange=\"IKE_SA_INIT\",dir=\"out\",kind=\"request\"}", 1, 0),
        ("iked_messages_total{exchange=\"IKE_SA_INIT\",dir=\"in\",kind=\"request\"}", 0, 1),
        ("iked_messages_total{exchange=\"IKE_SA_INIT\",dir=\"out\",kind=\"response\"}", 0, 1),
        ("iked_messages_total{exchange=\"IKE_SA_INIT\",dir=\"in\",kind=\"response\"}", 1, 0),
        ("iked_messages_total{exchange=\"IKE_AUTH\",dir=\"out\",kind=\"request\"}", 1, 0),
        ("iked_messages_total{exchange=\"IKE_AUTH\",dir=\"in\",kind=\"response\"}", 1, 0),
        ("iked_ike_sas", 1, 1),
        ("iked_child_sas", 1, 1),
        ("iked_ike_sas_up_total", 1, 1),
        ("iked_child_sas_installed_total", 1, 1),
        ("iked_half_open", 0, 0),
    ] {
        assert_eq!((m(&ma, k), m(&mb, k)), (va, vb), "{k}");
    }

    // A CHILD_SA rekey: its request once forged (dropped), then twice (the second answered
    // from the cache), its answer never delivered: A retransmits, then gives up.
    let mut out = Vec::new();
    a.command(t0, &Request::Rekey("site-b/net".into()), &mut out).unwrap();
    let req = sends(&out).remove(0);
    let mut forged = req.clone();
    *forged.bytes.last_mut().unwrap() ^= 1;
    let mut junk = Vec::new();
    b.datagram(t0, forged, &mut junk);
    b.datagram(t0, Datagram { bytes: vec![0; 12], ..req.clone() }, &mut junk);
    assert!(junk.is_empty());
    let mut answer = Vec::new();
    b.datagram(t0, req.clone(), &mut answer);
    b.datagram(t0, req, &mut answer);
    assert_eq!(sends(&answer).len(), 2, "the answer, then the same again from the cache");
    let mut out = Vec::new();
    a.tick(t0 + Duration::from_secs(5), &mut out);
    assert_eq!(sends(&out).len(), 1, "retransmitted");
    let mb = metrics(&b);
    assert_eq!(m(&mb, "iked_exchange_drops_total{exchange=\"CREATE_CHILD_SA\"}"), 1);
    assert_eq!(m(&mb, "iked_drops_total{reason=\"unauthenticated\"}"), 1);
    assert_eq!(m(&mb, "iked_drops_total{reason=\"malformed\"}"), 1);
    assert_eq!(m(&mb, "iked_responses_resent_total"), 1);
    assert_eq!(m(&mb, "iked_messages_total{exchange=\"CREATE_CHILD_SA\",dir=\"out\",kind=\"response\"}"), 1);
    assert_eq!(m(&metrics(&a), "iked_retransmissions_total"), 1);
    for s in 6..400 {
        a.tick(t0 + Duration::from_secs(s), &mut Vec::new());
    }
    let ma = metrics(&a);
    assert_eq!(m(&ma, "iked_retransmit_timeouts_total"), 1, "{}", a.metrics());
    assert_eq!((m(&ma, "iked_ike_sas"), m(&ma, "iked_ike_sas_down_total")), (0, 1));

    // A wrong key: B refuses A (an error answer sent), A is refused (one received).
    let other = "0x00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    let (mut a2, mut b2) = (engine(true, PSK), engine(false, other));
    let mut first = Vec::new();
    a2.start(t0, &mut first);
    run(&mut a2, &mut b2, first);
    let (ma, mb) = (metrics(&a2), metrics(&b2));
    assert_eq!(m(&mb, "iked_auth_failures_total{cause=\"peer\"}"), 1);
    assert_eq!(m(&mb, "iked_error_responses_total{exchange=\"IKE_AUTH\",dir=\"sent\"}"), 1);
    assert_eq!(m(&ma, "iked_auth_failures_total{cause=\"refused_by_peer\"}"), 1);
    assert_eq!(m(&ma, "iked_error_responses_total{exchange=\"IKE_AUTH\",dir=\"received\"}"), 1);
    assert_eq!(m(&ma, "iked_auth_failures_total{cause=\"peer\"}"), 0, "one counter per cause");

    // 31 IKE_SA_INIT requests, no IKE_AUTH: 30 half-open SAs turn cookies on, the 31st
    // is asked for one; its retry with the cookie is accepted. Then they all expire.
    let (mut a3, mut b3) = (engine(true, PSK), engine(false, PSK));
    let mut inits = Vec::new();
    for _ in 0..31 {
        let mut out = Vec::new();
        a3.start(t0, &mut out);
        inits.extend(sends(&out));
    }
    let mut answers = Vec::new();
    for d in inits {
        b3.datagram(t0, d, &mut answers);
    }
    let mb = metrics(&b3);
    assert_eq!((m(&mb, "iked_half_open"), m(&mb, "iked_cookies_on")), (30, 1));
    assert_eq!(m(&mb, "iked_cookies_total{outcome=\"sent\"}"), 1);
    let cookie = sends(&answers).pop().unwrap();
    let mut retry = Vec::new();
    a3.datagram(t0, cookie, &mut retry);
    let mut out = Vec::new();
    for d in sends(&retry) {
        b3.datagram(t0, d, &mut out);
    }
    assert_eq!(m(&metrics(&b3), "iked_cookies_total{outcome=\"accepted\"}"), 1);
    b3.tick(t0 + Duration::from_secs(31), &mut Vec::new());
    let mb = metrics(&b3);
    assert_eq!((m(&mb, "iked_half_open"), m(&mb, "iked_half_open_expired_total")), (0, 31));
    assert_eq!(m(&mb, "iked_cookies_on"), 0);
    let text = b3.command(t0, &Request::Stats, &mut Vec::new()).unwrap();
    assert!(text.contains("half-open 0, expired 31; cookies off, sent 1, accepted 1"), "{text}");
}

/// B's side of the second-child tests: `net` and `web` (10.2.5.0/24 ↔ 10.1.5.0/24, with
/// PFS), both waiting for A.
fn b_two_children() -> Config {
    let text = "site-a { local_addrs = 192.0.2.2\n remote_addrs = 192.0.2.1\n \
                proposals = aes128gcm16-prfsha256-x25519\n \
                local { auth = psk\n id = gw-b.example.org\n } remote { auth = psk\n id = gw-a.example.org\n }\n \
                children { net { local_ts = 10.2.0.0/24\n remote_ts = 10.1.0.0/24\n esp_proposals = aes128gcm16\n }\n \
                web { local_ts = 10.2.5.0/24\n remote_ts = 10.1.5.0/24\n esp_proposals = aes256gcm16-x25519\n } } }";
    parsed_config(text)
}

fn engine_with(c: Config) -> IkeEngine {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    IkeEngine::new(fw, c, Instant::now()).unwrap()
}

const WEB: &str = "web { local_ts = 10.1.5.0/24\n remote_ts = 10.2.5.0/24\n esp_proposals = aes256gcm16-x25519\n ACTION\n }";

/// Two `start` children: the first comes up in IKE_AUTH, the second right after with
/// CREATE_CHILD_SA on the same IKE SA; each side installs both, with their own reqids and
/// policies. `up` then finds nothing missing.
#[test]
fn a_connections_second_child_comes_up_on_its_ike_sa() {
    let mut a = engine_with(parsed_config(&conn_text(
        "site-b",
        &format!("{NET}\n{}", WEB.replace("ACTION", "start_action = start")),
    )));
    let mut b = engine_with(b_two_children());
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    let (s1, s2) = run(&mut a, &mut b, first);
    for (side, seen, local) in [("A", &s1, "10.1.5.0"), ("B", &s2, "10.2.5.0")] {
        assert_eq!(seen.installs.len(), 2, "{side}: {:?}", seen.events);
        let web = &seen.installs[1];
        assert!(format!("{:?}", web.local_ts).contains(local), "{side}: {:?}", web.local_ts);
        assert!(web.policies && seen.installs[0].policies, "{side}: each its own policies");
        assert_ne!(web.reqid, seen.installs[0].reqid, "{side}");
        assert_eq!(web.inbound.encr.len(), 36, "{side}: AES-256-GCM");
    }
    let list = a.command(Instant::now(), &Request::List, &mut Vec::new()).unwrap();
    assert_eq!(
        list.lines().filter(|l| l.starts_with(|c: char| c.is_ascii_digit())).count(),
        1,
        "one IKE SA: {list}"
    );
    assert!(list.contains("site-b/net") && list.contains("site-b/web"), "{list}");
    let e = a
        .command(Instant::now(), &Request::Up { conn: "site-b".into(), new: false }, &mut Vec::new())
        .unwrap_err();
    assert!(e.contains("up with all its children"), "{e}");
    let stats = a.command(Instant::now(), &Request::Stats, &mut Vec::new()).unwrap();
    assert!(stats.starts_with("IKE_SA_INIT: requests sent 1,"), "{stats}");
    assert!(
        stats.contains("CREATE_CHILD_SA: requests sent 1, received 0; responses sent 0, received 1"),
        "{stats}"
    );
}

/// ipsecd's ACQUIRE for a trapped child of a connection whose IKE SA is up: iked asks for
/// the CHILD_SA on that IKE SA (CREATE_CHILD_SA, no new IKE SA), installs it under the
/// trap's reqid without policies of its own (the trap's are), and does not ask twice.
#[test]
fn an_acquire_on_an_established_ike_sa_makes_a_child_sa_there() {
    use ipsec_core::control::{Prefix, Selector, Upper};
    use ipsec_core::sad::Acquire;
    use ipsec_core::spd::Flow;
    let mut a = engine_with(parsed_config(&conn_text(
        "site-b",
        &format!("{NET}\n{}", WEB.replace("ACTION", "start_action = trap")),
    )));
    let mut b = engine_with(b_two_children());
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    let trap = first
        .iter()
        .find_map(|o| if let Output::Trap(t) = o { Some(t.clone()) } else { None })
        .expect("web's trap");
    let first: Vec<Output> = first.into_iter().filter(|o| !matches!(o, Output::Trap(_))).collect();
    let (s1, _) = run(&mut a, &mut b, first);
    assert_eq!(s1.installs.len(), 1, "net, in IKE_AUTH");
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let acquire = IpsecEvent::Acquire(Box::new(Acquire {
        src: ip("192.0.2.1"),
        dst: ip("192.0.2.2"),
        proto: Proto::Esp,
        mode: ipsec_core::control::Mode::Tunnel,
        reqid: trap.reqid,
        policy: Selector {
            src: Prefix { addr: ip("10.1.5.0"), len: 24 },
            dst: Prefix { addr: ip("10.2.5.0"), len: 24 },
            sport: None,
            dport: None,
            upper: Upper::Any,
        },
        flow: Flow { src: ip("10.1.5.1"), dst: ip("10.2.5.1"), proto: 1, sport: 0, dport: 0 },
    }));
    let mut out = Vec::new();
    a.sa_event(Instant::now(), &acquire, &mut out);
    assert_eq!(out.iter().filter(|o| matches!(o, Output::Send(_))).count(), 1, "one CREATE_CHILD_SA");
    assert!(
        out.iter().any(|o| matches!(o, Output::Event(e) if e.line.starts_with("acquire conn=site-b child=web flow-dst=10.2.5.1 ike_sa="))),
        "the log says which IKE SA"
    );
    // ipsecd asks again for another destination meanwhile: nothing more is sent.
    let mut again = Vec::new();
    a.sa_event(Instant::now(), &acquire, &mut again);
    assert!(!again.iter().any(|o| matches!(o, Output::Send(_))), "not asked twice");
    let (s1, s2) = run(&mut a, &mut b, out);
    assert_eq!((s1.installs.len(), s2.installs.len()), (1, 1), "{:?} {:?}", s1.events, s2.events);
    let web = &s1.installs[0];
    assert_eq!(web.reqid, trap.reqid, "under the trap's reqid");
    assert!(!web.policies, "the trap's policies serve it");
    assert!(s2.installs[0].policies, "B, without a trap, adds its own");
    assert_eq!(parsed(&install_text(web).unwrap()).len(), 2, "two SAs, no policy");
    let list = a.command(Instant::now(), &Request::List, &mut Vec::new()).unwrap();
    assert_eq!(list.lines().filter(|l| l.starts_with(|c: char| c.is_ascii_digit())).count(), 1, "{list}");
}
