//! ike-core's state machine as iked's engine (`iked::daemon::ike_engine`): two engines, the
//! docs' two-gateway example (docs/iked.md), negotiating through the datagrams they hand
//! out, until both ask the loop to install the CHILD_SA — the same SAs seen from each end,
//! as setkey text that ipsecd's parser reads — and then `list`, `stats`, `down`, a wrong
//! pre-shared key; a peer that moves behind its NAT (`peer-moved` ─▶ `migrate`); inbound
//! traffic from ipsecd's dump putting a liveness check off.

use std::time::{Duration, Instant};

use iked::config::Config;
use iked::daemon::control::Request;
use iked::daemon::engine::{Engine, Output, Severity};
use iked::daemon::ike_engine::IkeEngine;
use iked::daemon::setkey::{install_text, migrate_text, remove_text, ChildInstall, ChildMigrate};
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
    let (mut sa, mut sb) = (Seen::default(), Seen::default());
    let mut to_b: Vec<Output> = first;
    let mut to_a: Vec<Output> = Vec::new();
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
            seen.installs.push(child);
            for m in more {
                if let Output::Event(e) = m {
                    seen.events.push((e.severity, e.line));
                }
            }
        }
        Output::Event(e) => seen.events.push((e.severity, e.line)),
        Output::IkeKeys(k) => seen.ike_keys.push(k),
        Output::Remove(r) => seen.removes.push(r),
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
    let stats = b.command(now, &Request::Stats, &mut out).unwrap();
    assert!(stats.contains("IKE_AUTH: requests sent 0, received 1; responses sent 1"), "{stats}");
    assert!(b
        .command(now, &Request::Rekey("1".into()), &mut out)
        .unwrap_err()
        .contains("not wired to iked's control socket"));
    assert!(b.command(now, &Request::Up("nope".into()), &mut out).unwrap_err().contains("no connection"));

    assert!(a
        .command(now, &Request::Up("site-b".into()), &mut out)
        .unwrap_err()
        .contains("has an IKE SA already"));

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

/// A reload that changes the running connection closes its IKE SA (its CHILD_SA removed
/// from ipsecd), and, none being left, the state machine takes the new file and starts
/// again; an unchanged reload keeps the SA.
#[test]
fn a_reload_closes_changed_connections_and_starts_again() {
    let (mut a, mut b) = (engine(true, PSK), engine(false, PSK));
    let mut first = Vec::new();
    a.start(Instant::now(), &mut first);
    let (s1, s2) = run(&mut a, &mut b, first);
    assert_eq!(s1.installs.len() + s2.installs.len(), 2);
    let now = Instant::now();

    let same = config(true, PSK);
    let mut out = Vec::new();
    a.reload(now, same.clone(), &Config::diff(&same, &same), &mut out);
    assert!(out.is_empty(), "nothing changed, nothing done");
    assert!(a.command(now, &Request::List, &mut out).unwrap().contains("Established"));

    let changed = config(true, "0x00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
    let diff = Config::diff(&same, &changed);
    assert!(diff.secrets_changed && diff.unchanged == ["site-b"], "{diff:?}");
    // A new key alone closes nothing either (it applies to the next authentication), but
    // the state machine cannot take it while the SA is up: the log says so.
    let mut out = Vec::new();
    a.reload(now, changed.clone(), &diff, &mut out);
    assert!(out.iter().all(|o| !matches!(o, Output::Remove(_))));
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Event(e) if e.line.contains("cannot take a new configuration"))),
        "the log says why the new key waits"
    );

    let mut moved = config(true, PSK);
    moved.connections[0].children[0].local_ts =
        ike_core::config::TrafficSelector::parse_list("10.1.9.0/24").unwrap();
    let diff = Config::diff(&same, &moved);
    assert_eq!(diff.changed, ["site-b"]);
    let mut out = Vec::new();
    a.reload(now, moved, &diff, &mut out);
    let removes = out.iter().filter(|o| matches!(o, Output::Remove(_))).count();
    let sends = out.iter().filter(|o| matches!(o, Output::Send(_))).count();
    assert_eq!((removes, sends), (1, 2), "the old CHILD_SA removed, a Delete and a new IKE_SA_INIT sent");
    let list = a.command(now, &Request::List, &mut out).unwrap();
    assert_eq!(list.lines().collect::<Vec<_>>().len(), 1, "a new state machine: {list}");
    assert!(list.starts_with("1: site-b InitSent initiator"), "{list}");
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
