//! Two engines, an initiator and a responder, negotiating in memory: the test carries each
//! datagram from one to the other (and may drop, repeat, alter or NAT it) until both
//! install the same CHILD_SA, each direction's keys matching the other side's opposite
//! direction.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ike_core::config::{AuthMethod, AuthRound, Identity, Mode};
use ike_core::io::{Datagram, DownReason, Event, Output};
use ike_core::stats::Drop;
use ike_core::{Ike, Settings};
use ike_wire::ids::{EncrId, IntegId};

#[allow(dead_code)]
#[path = "support/pair.rs"]
mod pair;
use pair::*;

#[test]
fn psk_handshake_installs_matching_child_sas() {
    let mut p = Pair::new(&I, &R, Settings::default(), Settings::default());
    let (spi, first) = p.start();
    assert_eq!(first.len(), 1);
    p.run(first, &no_nat);
    let (ii, ri) = (installs(&p.i_out), installs(&p.r_out));
    assert_eq!((ii.len(), ri.len()), (1, 1), "one CHILD_SA on each side");
    let (a, b) = (ii[0], ri[0]);
    assert_mirrored(a, b);
    assert_eq!((a.encr, a.encr_bits, a.integ), (EncrId::AES_GCM_16, Some(128), IntegId::NONE));
    assert_eq!(a.encr_key_in.len(), 16 + 4, "AES-128 key and GCM salt");
    assert_eq!(a.udp_encap, None, "no NAT");
    assert_eq!(a.mode, Mode::Tunnel);
    assert_eq!(a.local_ts[0].start, "10.1.0.0".parse::<IpAddr>().unwrap());
    assert_eq!(a.local_ts[0].end, "10.1.255.255".parse::<IpAddr>().unwrap());
    assert!(a.soft_lifetime <= Duration::from_secs(3600) && a.soft_lifetime >= Duration::from_secs(3240));
    assert!(a.hard_lifetime > a.soft_lifetime);
    assert!(events(&p.i_out).contains(&&Event::IkeSaUp {
        ike_sa: spi,
        remote: "192.0.2.2:500".parse().unwrap(),
        initiator: true
    }));
    assert!(events(&p.r_out).iter().any(|e| matches!(e, Event::IkeSaUp { initiator: false, .. })));
    let (si, sr) = (p.i.stats(), p.r.stats());
    assert_eq!((si.sa_init.requests_sent, si.auth.requests_sent, si.ike_sas_up), (1, 1, 1));
    assert_eq!((sr.sa_init.responses_sent, sr.auth.responses_sent, sr.ike_sas_up), (1, 1, 1));
    assert_eq!((si.drops_total(), sr.drops_total()), (0, 0));
    assert_eq!(p.r.half_open(), 0, "IKE_AUTH completed the half-open SA");
}

#[test]
fn wrong_psk_is_refused_on_both_sides() {
    let r = Side { psk: "another pre-shared key, also long", ..R };
    let mut p = Pair::new(&I, &r, Settings::default(), Settings::default());
    let (spi, first) = p.start();
    p.run(first, &no_nat);
    assert!(installs(&p.i_out).is_empty() && installs(&p.r_out).is_empty());
    assert_eq!(p.r.stats().auth_failures, 1);
    assert_eq!(p.i.stats().auth_refused_by_peer, 1, "the responder's AUTHENTICATION_FAILED");
    assert!(events(&p.i_out).contains(&&Event::IkeSaDown { ike_sa: spi, reason: DownReason::AuthFailed }));
    for out in [&p.i_out, &p.r_out] {
        // The event names the connection, though its IKE SA is gone when it is read.
        assert!(
            events(out).iter().any(|e| matches!(e, Event::AuthFailed { conn, .. } if conn == "gw")),
            "{:?}",
            events(out)
        );
    }
    assert!(p.i.ike_sa(spi).is_none());
    assert_eq!(p.r.ike_sas().count(), 0);
    assert_eq!(p.r.half_open(), 0);
}

#[test]
fn wrong_identity_is_refused() {
    let r = Side { peer_id: "other.example", ..R };
    let mut p = Pair::new(&I, &r, Settings::default(), Settings::default());
    let (_, first) = p.start();
    p.run(first, &no_nat);
    assert!(installs(&p.r_out).is_empty());
    assert_eq!(p.r.stats().auth_failures, 1);
}

/// Two connections with the initiator's addresses on the responder, the first for another
/// peer identity: IKE_SA_INIT takes the first, IKE_AUTH moves to the one IDi names (as
/// strongSwan's responder does), which authenticates and installs the CHILD_SA.
#[test]
fn the_responder_picks_its_connection_by_the_identities() {
    let mut cfg = config(&R);
    let mut other = cfg.connections[0].clone();
    other.name = "other".into();
    other.remote = AuthRound::new(AuthMethod::Psk, Identity::parse("other.example").unwrap());
    cfg.connections.insert(0, other);
    let now = std::time::Instant::now();
    let mut p = Pair {
        i: Ike::new(fw(), config(&I), Settings::default(), now).unwrap(),
        r: Ike::new(fw(), cfg, Settings::default(), now).unwrap(),
        now,
        i_out: vec![],
        r_out: vec![],
    };
    let (_, first) = p.start();
    p.run(first, &no_nat);
    let (ii, ri) = (installs(&p.i_out), installs(&p.r_out));
    assert_eq!((ii.len(), ri.len()), (1, 1), "{:?}", events(&p.r_out));
    assert_mirrored(ii[0], ri[0]);
    let sa = p.r.ike_sas().next().unwrap();
    assert_eq!(sa.conn, 1, "the connection of moon.example");
    assert_eq!(p.r.stats().auth_failures, 0);
}

#[test]
fn retransmissions_resend_the_same_bytes_and_are_answered_from_the_cache() {
    let mut p = Pair::new(&I, &R, Settings::default(), Settings::default());
    let (_, first) = p.start();
    // The request is lost; 4 s later the initiator sends it again, byte for byte.
    let mut out = vec![];
    p.i.tick(p.now + Duration::from_millis(3999), &mut out);
    assert!(out.is_empty());
    p.i.tick(p.now + Duration::from_secs(4), &mut out);
    assert_eq!(sends(&out), first);
    assert_eq!(p.i.stats().retransmissions, 1);
    // The responder gets it twice: one half-open SA, the same response twice.
    let r1 = p.deliver_r(first.clone());
    let r2 = p.deliver_r(first.clone());
    assert_eq!(r1, r2);
    assert_eq!(p.r.half_open(), 1);
    assert_eq!(p.r.stats().responses_resent, 1);
    // IKE_AUTH request retransmitted after the response was lost.
    let auth = p.deliver_i(r1);
    let a1 = p.deliver_r(auth.clone());
    let a2 = p.deliver_r(auth.clone());
    assert_eq!(a1, a2, "a retransmitted IKE_AUTH is answered from the cache");
    assert_eq!(installs(&p.r_out).len(), 1, "and not processed again");
    p.deliver_i(a2);
    assert_eq!(installs(&p.i_out).len(), 1);
    let _ = p.deliver_i(a1);
    assert_eq!(installs(&p.i_out).len(), 1, "a duplicate response changes nothing");
    assert_eq!(p.i.stats().drops(Drop::UnexpectedResponse), 1);
}

#[test]
fn a_dead_peer_is_given_up_after_the_backoff() {
    let mut p = Pair::new(&I, &R, Settings::default(), Settings::default());
    let (spi, _) = p.start();
    let mut out = vec![];
    let mut t = p.now;
    while t < p.now + Duration::from_secs(200) {
        t += Duration::from_millis(500);
        p.i.tick(t, &mut out);
        if events(&out).iter().any(|e| matches!(e, Event::IkeSaDown { .. })) {
            break;
        }
    }
    assert_eq!(sends(&out).len(), 5, "five retransmissions");
    assert!(events(&out).contains(&&Event::IkeSaDown { ike_sa: spi, reason: DownReason::PeerDead }));
    let waited = t - p.now;
    assert!(waited >= Duration::from_secs(165) && waited < Duration::from_secs(167), "{waited:?}");
    assert!(p.i.ike_sa(spi).is_none());
}

#[test]
fn altered_or_malformed_messages_are_dropped_without_changing_state() {
    let mut p = Pair::new(&I, &R, Settings::default(), Settings::default());
    let (spi, first) = p.start();
    let resp = p.deliver_r(first);
    let auth = p.deliver_i(resp);
    assert_eq!(auth.len(), 1);
    // Every single-bit change of the IKE_AUTH request's encrypted part fails its ICV; a
    // truncation fails the codec.
    let d = &auth[0];
    for at in [d.bytes.len() - 1, d.bytes.len() - 20, 40] {
        let mut bad = d.clone();
        bad.bytes[at] ^= 0x01;
        assert!(p.deliver_r(vec![bad]).is_empty());
    }
    let mut short = d.clone();
    short.bytes.truncate(d.bytes.len() - 3);
    assert!(p.deliver_r(vec![short]).is_empty());
    let noise = Datagram { bytes: vec![0x55; 77], ..d.clone() };
    assert!(p.deliver_r(vec![noise]).is_empty());
    let sr = p.r.stats();
    assert_eq!(sr.drops(Drop::Unauthenticated), 3);
    assert_eq!(sr.drops(Drop::Malformed), 2);
    assert!(installs(&p.r_out).is_empty());
    assert_eq!(p.r.half_open(), 1, "still waiting for IKE_AUTH");
    // The genuine request still completes.
    let back = p.deliver_r(auth);
    p.deliver_i(back);
    assert_eq!((installs(&p.i_out).len(), installs(&p.r_out).len()), (1, 1));
    assert!(p.i.ike_sa(spi).is_some());
}

#[test]
fn cookies_when_half_open_sas_reach_the_threshold() {
    let mut rs = Settings::default();
    rs.half_open.cookie_threshold = 0;
    let mut p = Pair::new(&I, &R, Settings::default(), rs);
    let (_, first) = p.start();
    let cookie_reply = p.deliver_r(first.clone());
    assert_eq!(p.r.ike_sas().count(), 0, "no state for a request without a cookie");
    assert_eq!(p.r.stats().cookies_sent, 1);
    let retry = p.deliver_i(cookie_reply);
    assert_eq!(retry.len(), 1);
    assert_ne!(retry[0].bytes, first[0].bytes, "the request again, with the cookie");
    p.run(retry, &no_nat);
    assert_eq!((installs(&p.i_out).len(), installs(&p.r_out).len()), (1, 1));
    assert_mirrored(installs(&p.i_out)[0], installs(&p.r_out)[0]);
    assert_eq!(p.r.stats().cookies_accepted, 1);
    assert!(events(&p.r_out).contains(&&Event::Cookies { on: true }));
}

#[test]
fn invalid_ke_payload_makes_the_initiator_use_the_asked_group() {
    let i = Side { ike: "aes128gcm16-prfsha256-ecp256-x25519", ..I };
    let r = Side { ike: "aes128gcm16-prfsha256-x25519", ..R };
    let mut p = Pair::new(&i, &r, Settings::default(), Settings::default());
    let (_, first) = p.start();
    let reply = p.deliver_r(first);
    assert_eq!(p.r.ike_sas().count(), 0, "no state for INVALID_KE_PAYLOAD");
    let retry = p.deliver_i(reply);
    p.run(retry, &no_nat);
    assert_eq!((installs(&p.i_out).len(), installs(&p.r_out).len()), (1, 1));
    assert_mirrored(installs(&p.i_out)[0], installs(&p.r_out)[0]);
    assert_eq!(p.i.stats().sa_init.requests_sent, 2);
}

#[test]
fn no_common_proposal_ends_the_ike_sa() {
    let r = Side { ike: "aes256gcm16-prfsha384-ecp384", ..R };
    let mut p = Pair::new(&I, &r, Settings::default(), Settings::default());
    let (spi, first) = p.start();
    p.run(first, &no_nat);
    assert_eq!(p.r.ike_sas().count(), 0);
    assert_eq!(p.i.stats().sa_init.errors_received, 1);
    // Unauthenticated: the initiator keeps trying, and gives up with the reason it heard.
    assert!(p.i.ike_sa(spi).is_some());
    let mut out = vec![];
    p.i.tick(p.now + Duration::from_secs(4), &mut out);
    assert_eq!(sends(&out).len(), 1, "still retransmitting");
    for s in 5..=170 {
        p.i.tick(p.now + Duration::from_secs(s), &mut out);
    }
    assert!(events(&out).contains(&&Event::IkeSaDown { ike_sa: spi, reason: DownReason::NoProposal }));
    assert!(p.i.ike_sa(spi).is_none());
}

#[test]
fn selectors_are_narrowed_to_the_responders_policy() {
    let r = Side { remote_ts: "10.1.7.0/24", local_ts: "10.2.0.0/16,10.9.0.0/16", ..R };
    let mut p = Pair::new(&I, &r, Settings::default(), Settings::default());
    let (_, first) = p.start();
    p.run(first, &no_nat);
    let (a, b) = (installs(&p.i_out)[0], installs(&p.r_out)[0]);
    assert_mirrored(a, b);
    assert_eq!(a.local_ts.len(), 1);
    assert_eq!(a.local_ts[0].start, "10.1.7.0".parse::<IpAddr>().unwrap());
    assert_eq!(a.local_ts[0].end, "10.1.7.255".parse::<IpAddr>().unwrap());
    assert_eq!(a.remote_ts[0].end, "10.2.255.255".parse::<IpAddr>().unwrap());
}

#[test]
fn disjoint_selectors_leave_the_ike_sa_up_without_a_child() {
    let r = Side { remote_ts: "172.16.0.0/12", ..R };
    let mut p = Pair::new(&I, &r, Settings::default(), Settings::default());
    let (spi, first) = p.start();
    p.run(first, &no_nat);
    assert!(installs(&p.i_out).is_empty() && installs(&p.r_out).is_empty());
    assert!(events(&p.i_out).iter().any(|e| matches!(e, Event::IkeSaUp { .. })));
    assert!(events(&p.i_out).contains(&&Event::ChildSaFailed {
        ike_sa: spi,
        child: "net".into(),
        notify: Some(ike_wire::ids::NotifyType::TS_UNACCEPTABLE)
    }));
}

#[test]
fn a_nat_moves_ike_to_4500_and_esp_into_udp() {
    // The initiator sits behind a NAT that maps 192.0.2.1:500 and :4500 to 203.0.113.9
    // ports 40500 and 44500; the responder, at 198.51.100.2, sees only those.
    let i = Side { peer: "198.51.100.2", ..I };
    let r = Side { addr: "198.51.100.2", peer: "203.0.113.9", ..R };
    let mut p = Pair::new(&i, &r, Settings::default(), Settings::default());
    let public: IpAddr = "203.0.113.9".parse().unwrap();
    let private: IpAddr = "192.0.2.1".parse().unwrap();
    let nat = |mut d: Datagram, outbound: bool| {
        if outbound {
            assert_eq!(d.local.ip(), private);
            d.local = SocketAddr::new(public, d.local.port() + 40000);
        } else {
            assert_eq!(d.remote.ip(), public);
            d.remote = SocketAddr::new(private, d.remote.port() - 40000);
        }
        d
    };
    let (spi, first) = p.start();
    p.run(first, &nat);
    assert!(events(&p.i_out).contains(&&Event::NatDetected { ike_sa: spi, local: true, remote: false }));
    let auth_req = sends(&p.i_out)[1].clone();
    assert_eq!((auth_req.local.port(), auth_req.remote.port()), (4500, 4500), "IKE_AUTH on 4500");
    let (a, b) = (installs(&p.i_out)[0], installs(&p.r_out)[0]);
    assert_eq!(a.udp_encap, Some((4500, 4500)));
    assert_eq!(b.udp_encap, Some((4500, 44500)), "the responder sends to the NAT's port");
    assert_eq!(*a.encr_key_in, *b.encr_key_out);
}

/// Every truncation and every single-bit change (bit 0 of each byte, then bit 7) of the
/// IKE_AUTH request and response, fed to the side waiting for it: each is dropped and
/// counted, nothing is sent or installed, and the genuine message then completes the
/// exchange. Every truncation of the IKE_SA_INIT request is dropped by a fresh responder.
#[test]
fn every_truncation_and_bit_flip_is_dropped() {
    let mut p = Pair::new(&I, &R, Settings::default(), Settings::default());
    let (spi, first) = p.start();
    for n in 0..first[0].bytes.len() {
        let mut d = first[0].clone();
        d.bytes.truncate(n);
        assert!(p.deliver_r(vec![d]).is_empty(), "a truncated IKE_SA_INIT of {n} bytes was answered");
    }
    assert_eq!(p.r.ike_sas().count(), 0);
    assert_eq!(p.r.stats().drops(Drop::Malformed) as usize, first[0].bytes.len());

    let init_resp = p.deliver_r(first);
    let auth_req = p.deliver_i(init_resp).remove(0);
    let variants = |d: &Datagram| {
        let mut v = Vec::new();
        for n in 0..d.bytes.len() {
            let mut t = d.clone();
            t.bytes.truncate(n);
            v.push(t);
        }
        for bit in [0x01u8, 0x80] {
            for at in 0..d.bytes.len() {
                let mut t = d.clone();
                t.bytes[at] ^= bit;
                v.push(t);
            }
        }
        v
    };
    let before = p.r.stats().drops_total();
    let tries = variants(&auth_req);
    for v in tries.clone() {
        assert!(p.deliver_r(vec![v]).is_empty());
    }
    assert_eq!(p.r.stats().drops_total() - before, tries.len() as u64, "each one dropped and counted");
    assert!(installs(&p.r_out).is_empty());
    assert_eq!(p.r.half_open(), 1);

    let auth_resp = p.deliver_r(vec![auth_req]).remove(0);
    assert_eq!(installs(&p.r_out).len(), 1);
    let before = p.i.stats().drops_total();
    let tries = variants(&auth_resp);
    for v in tries.clone() {
        assert!(p.deliver_i(vec![v]).is_empty());
    }
    assert_eq!(p.i.stats().drops_total() - before, tries.len() as u64);
    assert!(
        installs(&p.i_out).is_empty() && !events(&p.i_out).iter().any(|e| matches!(e, Event::IkeSaUp { .. }))
    );
    p.deliver_i(vec![auth_resp]);
    assert_mirrored(installs(&p.i_out)[0], installs(&p.r_out)[0]);
    assert!(p.i.ike_sa(spi).is_some());
}

/// The half-open bound: past `limit` a new IKE_SA_INIT is dropped even with a cookie, and
/// a half-open SA that never sees IKE_AUTH is deleted after the timeout.
#[test]
fn half_open_sas_are_bounded_and_expire() {
    let mut rs = Settings::default();
    rs.half_open.limit = 1;
    let mut p = Pair::new(&I, &R, Settings::default(), rs);
    let (_, first) = p.start();
    assert_eq!(p.deliver_r(first).len(), 1);
    assert_eq!(p.r.half_open(), 1);
    // A second initiator (another SPI) while one SA is half-open: dropped, no answer.
    let (_, second) = p.start();
    assert!(p.deliver_r(second).is_empty());
    assert_eq!(p.r.stats().drops(Drop::HalfOpenFull), 1);
    assert_eq!(p.r.ike_sas().count(), 1);
    let mut out = vec![];
    p.r.tick(p.now + Duration::from_secs(29), &mut out);
    assert_eq!(p.r.half_open(), 1);
    p.r.tick(p.now + Duration::from_secs(30), &mut out);
    assert_eq!((p.r.half_open(), p.r.ike_sas().count()), (0, 0));
    assert!(events(&out)
        .iter()
        .any(|e| matches!(e, Event::IkeSaDown { reason: DownReason::HalfOpenTimeout, .. })));
    assert_eq!(p.r.stats().half_open, 0);
}

fn removes(out: &[Output]) -> Vec<&ike_core::io::ChildSaRemove> {
    out.iter().filter_map(|o| if let Output::Remove(r) = o { Some(r) } else { None }).collect()
}

/// terminate: the initiator removes its CHILD_SA and sends a Delete; the responder
/// answers, removes the same CHILD_SA and the IKE SA; the answer ends the initiator's.
#[test]
fn terminate_deletes_both_ends() {
    let mut p = Pair::new(&I, &R, Settings::default(), Settings::default());
    let (spi, first) = p.start();
    p.run(first, &no_nat);
    let (a, b) = (installs(&p.i_out)[0].spi_in, installs(&p.r_out)[0].spi_in);
    let mut out = vec![];
    assert!(p.i.terminate(p.now, spi, &mut out));
    assert_eq!(removes(&out).iter().map(|r| (r.spi_in, r.spi_out)).collect::<Vec<_>>(), vec![(a, b)]);
    let delete = sends(&out);
    assert_eq!(delete.len(), 1);
    assert!(p.i.ike_sa(spi).is_some(), "waiting for the answer");
    // A byte changed: dropped, the responder keeps everything.
    let mut bad = delete[0].clone();
    let last = bad.bytes.len() - 1;
    bad.bytes[last] ^= 1;
    assert!(p.deliver_r(vec![bad]).is_empty());
    assert_eq!(p.r.ike_sas().count(), 1);
    let answer = p.deliver_r(delete.clone());
    assert_eq!(answer.len(), 1);
    assert_eq!(removes(&p.r_out).iter().map(|r| (r.spi_in, r.spi_out)).collect::<Vec<_>>(), vec![(b, a)]);
    assert!(events(&p.r_out)
        .iter()
        .any(|e| matches!(e, Event::IkeSaDown { reason: DownReason::DeletedByPeer, .. })));
    assert_eq!(p.r.ike_sas().count(), 0);
    assert!(p.deliver_r(delete).is_empty(), "a retransmitted Delete finds no SA");
    assert_eq!(p.r.stats().drops(Drop::UnknownSa), 1);
    p.deliver_i(answer);
    assert!(p.i.ike_sa(spi).is_none());
    assert!(events(&p.i_out).contains(&&Event::IkeSaDown { ike_sa: spi, reason: DownReason::Terminated }));
    assert_eq!((p.i.stats().ike_sas_down, p.r.stats().ike_sas_down), (1, 1));
}

/// A Delete nobody answers: the IKE SA goes when the retransmissions run out.
#[test]
fn an_unanswered_delete_ends_after_the_backoff() {
    let mut p = Pair::new(&I, &R, Settings::default(), Settings::default());
    let (spi, first) = p.start();
    p.run(first, &no_nat);
    let mut out = vec![];
    p.i.terminate(p.now, spi, &mut out);
    for s in 1..=170 {
        p.i.tick(p.now + Duration::from_secs(s), &mut out);
    }
    assert_eq!(sends(&out).len(), 6, "the Delete and five resends");
    assert!(events(&out).contains(&&Event::IkeSaDown { ike_sa: spi, reason: DownReason::Terminated }));
    assert!(p.i.ike_sa(spi).is_none());
}
