//! A new CHILD_SA on an established IKE SA (CREATE_CHILD_SA without REKEY_SA, RFC 7296
//! §1.3.1) between two engines in memory: a second child of the connection, with PFS,
//! beside the first (which stays); the responder choosing among its children by the
//! selectors; a request no child of the responder's accepts (TS_UNACCEPTABLE); a KE group
//! the responder does not take (INVALID_KE_PAYLOAD, then once more with the group it
//! names); what `create_child` refuses; an answer that does not fit (deleted with the
//! peer).

use ike_core::io::{ChildSaInstall, Event, Output};
use ike_wire::ids::NotifyType;

#[allow(dead_code)]
#[path = "support/pair.rs"]
mod pair;
use pair::*;

/// An established pair whose configurations are `ci`, `cr`: the IKE SA's SPI on each side.
fn up(ci: ike_core::Config, cr: ike_core::Config) -> (Pair, u64, u64) {
    let mut p = Pair::with_configs(ci, cr);
    let (spi, first) = p.start();
    p.run(first, &no_nat);
    let rspi = p.r.ike_sas().next().expect("the responder's IKE SA").our_spi();
    assert_eq!(installs(&p.i_out).len(), 1, "the first CHILD_SA, in IKE_AUTH");
    (p, spi, rspi)
}

/// Asks the initiator for a new CHILD_SA of `child` and runs the exchange to its end;
/// what each side output meanwhile.
fn create(p: &mut Pair, spi: u64, child: &str) -> (Vec<Output>, Vec<Output>) {
    let (i0, r0) = (p.i_out.len(), p.r_out.len());
    let mut out = vec![];
    assert!(p.i.create_child(p.now, spi, child, &mut out), "create_child {child}");
    let first = sends(&out);
    assert_eq!(first.len(), 1, "one CREATE_CHILD_SA request");
    p.i_out.extend(out);
    p.run(first, &no_nat);
    (p.i_out.split_off(i0), p.r_out.split_off(r0))
}

/// A configured selector as it goes on the wire (and into an install).
fn narrowed(ts: &str) -> Vec<ike_wire::ts::TrafficSelector> {
    let cfg = ike_core::config::TrafficSelector::parse_list(ts).unwrap();
    ike_core::narrow::resolve(&cfg, "192.0.2.1".parse().unwrap())
}

fn failed(out: &[Output]) -> Vec<(String, Option<NotifyType>)> {
    events(out)
        .into_iter()
        .filter_map(|e| match e {
            Event::ChildSaFailed { child, notify, .. } => Some((child.clone(), *notify)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_second_child_comes_up_beside_the_first() {
    let ci = with_child(config(&I), "web", "10.1.5.0/24", "10.2.5.0/24", "aes256gcm16-x25519");
    // The responder's `web` is wider: it narrows to what was asked.
    let cr = with_child(config(&R), "web", "10.2.0.0/16", "10.1.0.0/16", "aes256gcm16-x25519");
    // Its first child, `net`, would take the request too: the first that fits wins, so
    // the responder's children are ordered web, net here.
    let mut cr = cr;
    cr.connections[0].children.reverse();
    let (mut p, spi, rspi) = up(ci, cr);
    let (first_spi, first_key) = {
        let f: &ChildSaInstall = installs(&p.i_out)[0];
        (f.spi_in, f.encr_key_in.to_vec())
    };

    let (i_out, r_out) = create(&mut p, spi, "web");
    let (ii, ri) = (installs(&i_out), installs(&r_out));
    assert_eq!((ii.len(), ri.len()), (1, 1), "{:?} {:?}", failed(&i_out), failed(&r_out));
    assert_mirrored(ii[0], ri[0]);
    assert_eq!((ii[0].child.as_str(), ri[0].child.as_str()), ("web", "web"));
    assert_eq!(ii[0].local_ts, narrowed("10.1.5.0/24"));
    assert_eq!(ii[0].remote_ts, narrowed("10.2.5.0/24"));
    assert_eq!(ii[0].encr_key_in.len(), 36, "AES-256-GCM key and salt");
    assert_ne!(ii[0].spi_in, first_spi);
    assert_ne!(ii[0].encr_key_in[..], first_key[..]);
    assert!(!i_out.iter().chain(&r_out).any(|o| matches!(o, Output::Remove(_))), "nothing replaced");
    let names = |e: &ike_core::Ike, s: u64| -> Vec<String> {
        e.ike_sa(s).unwrap().children.iter().map(|c| c.name.clone()).collect()
    };
    assert_eq!(names(&p.i, spi), ["net", "web"]);
    assert_eq!(names(&p.r, rspi), ["net", "web"]);
    assert_eq!(p.i.stats().create_child_sa.requests_sent, 1);
    assert_eq!(p.r.stats().create_child_sa.responses_sent, 1);
    assert_eq!(p.r.stats().create_child_sa.errors_sent, 0);

    // One of each: a second `web`, or a child not configured, is refused here.
    let mut out = vec![];
    assert!(!p.i.create_child(p.now, spi, "web", &mut out));
    assert!(!p.i.create_child(p.now, spi, "nope", &mut out));
    assert!(!p.i.create_child(p.now, 42, "net", &mut out));
    assert!(out.is_empty());

    // The new CHILD_SA rekeys like the first.
    let mut out = vec![];
    assert!(p.i.rekey_child(p.now, spi, ii[0].spi_in, &mut out));
    p.run(sends(&out), &no_nat);
    assert_eq!(names(&p.i, spi), ["net", "web"]);
}

#[test]
fn a_child_the_responder_does_not_have_is_ts_unacceptable() {
    let ci = with_child(config(&I), "db", "10.1.9.0/24", "10.9.0.0/24", "aes128gcm16");
    let (mut p, spi, _) = up(ci, config(&R));
    let (i_out, r_out) = create(&mut p, spi, "db");
    assert!(installs(&i_out).is_empty() && installs(&r_out).is_empty());
    assert_eq!(failed(&i_out), [("db".to_owned(), Some(NotifyType::TS_UNACCEPTABLE))]);
    assert_eq!(p.r.stats().create_child_sa.errors_sent, 1);
    assert_eq!(p.i.stats().create_child_sa.errors_received, 1);
    // The IKE SA and its first CHILD_SA are untouched; the window moves on.
    assert_eq!(p.i.ike_sa(spi).unwrap().children.len(), 1);
    let mut out = vec![];
    assert!(p.i.rekey_ike(p.now, spi, &mut out));
    assert_eq!(sends(&out).len(), 1);
}

#[test]
fn invalid_ke_payload_is_answered_with_the_group_asked_for() {
    let ci = with_child(config(&I), "web", "10.1.5.0/24", "10.2.5.0/24", "aes128gcm16-ecp256-x25519");
    let cr = with_child(config(&R), "web", "10.2.5.0/24", "10.1.5.0/24", "aes128gcm16-x25519");
    let (mut p, spi, _) = up(ci, cr);
    let (i_out, r_out) = create(&mut p, spi, "web");
    assert_eq!(p.r.stats().create_child_sa.errors_sent, 1, "INVALID_KE_PAYLOAD answered");
    assert_eq!(p.i.stats().create_child_sa.requests_sent, 2, "and the request sent again");
    let (ii, ri) = (installs(&i_out), installs(&r_out));
    assert_eq!((ii.len(), ri.len()), (1, 1), "{:?}", failed(&i_out));
    assert_mirrored(ii[0], ri[0]);
    assert!(failed(&i_out).is_empty());
}

/// A transport-mode request that only a tunnel child of the responder's takes: the
/// responder answers in tunnel mode and installs it; the answer does not fit ours, so the
/// requester installs nothing and deletes the CHILD_SA the responder made (its SPI, the
/// one we offered), which the responder removes.
#[test]
fn an_answer_that_does_not_fit_is_deleted_with_the_peer() {
    let mut ci = with_child(config(&I), "db", "10.1.9.0/24", "10.2.9.0/24", "aes128gcm16");
    ci.connections[0].children[1].mode = ike_core::config::Mode::Transport;
    let (mut p, spi, rspi) = up(ci, config(&R));
    let (i_out, r_out) = create(&mut p, spi, "db");
    assert!(installs(&i_out).is_empty());
    assert_eq!(failed(&i_out), [("db".to_owned(), None)], "an answer that does not fit");
    let ri = installs(&r_out);
    assert_eq!(ri.len(), 1, "the responder made it, in tunnel mode");
    assert_eq!(ri[0].mode, ike_core::config::Mode::Tunnel);
    let removed: Vec<u32> =
        r_out.iter().filter_map(|o| if let Output::Remove(r) = o { Some(r.spi_in) } else { None }).collect();
    assert_eq!(removed, [ri[0].spi_in], "and removed it on our Delete");
    assert_eq!(p.r.ike_sa(rspi).unwrap().children.len(), 1, "the first CHILD_SA stays");
    assert_eq!(p.i.stats().create_child_sa.errors_received, 1);
}
