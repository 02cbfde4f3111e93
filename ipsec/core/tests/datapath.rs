//! The packet path end to end: two gateways, each an `Ipsec` core over ocf's soft driver;
//! what one encapsulates the other decapsulates, for every algorithm, tunnel and
//! transport, IPv4 and IPv6, with and without ESN and UDP encapsulation. Tampering,
//! replays, policy violations and lifetimes are dropped and counted under their reasons.

mod common;

use std::net::IpAddr;
use std::sync::Arc;

use ipsec_core::control::{
    Action, AuthAlg, Dir, EncAlg, KeyBytes, Level, Lifetime, Mode, NatT, PolicySpec, Prefix, Proto, Request,
    Rule, SaSpec, Selector, Upper,
};
use ipsec_core::sad::{Event, Limit};
use ipsec_core::stats::Drop;
use ipsec_core::{DefaultPolicy, Packet, Payload, Via};

use common::gateway::{Collect, Gateway};
use common::packets::{checksum, datagram, ip_packet, udp_packet};

/// A core whose results land in its `Collect`.
type Gw = Gateway<Collect>;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

struct Algs {
    enc: EncAlg,
    key: Vec<u8>,
    auth: Option<(AuthAlg, Vec<u8>)>,
}

fn all_algs() -> Vec<Algs> {
    let k = |n: usize, b: u8| (0..n).map(|i| b.wrapping_add((i as u8).wrapping_mul(13))).collect::<Vec<u8>>();
    let mut v = vec![
        Algs { enc: EncAlg::AesGcm16, key: k(20, 1), auth: None },
        Algs { enc: EncAlg::AesGcm16, key: k(36, 2), auth: None },
        Algs { enc: EncAlg::ChaCha20Poly1305, key: k(36, 3), auth: None },
        Algs { enc: EncAlg::TdesCbc, key: k(24, 4), auth: Some((AuthAlg::HmacSha1, k(20, 5))) },
        Algs { enc: EncAlg::Null, key: vec![], auth: Some((AuthAlg::HmacSha256, k(32, 6))) },
    ];
    for a in AuthAlg::ALL {
        v.push(Algs { enc: EncAlg::AesCbc, key: k(16, 7), auth: Some((a, k(a.key_len(), 8))) });
    }
    v.push(Algs { enc: EncAlg::AesCbc, key: k(32, 9), auth: Some((AuthAlg::HmacSha256, k(32, 10))) });
    v
}

struct Setup {
    tunnel: bool,
    outer: (IpAddr, IpAddr),
    inner: (IpAddr, IpAddr),
    esn: bool,
    natt: bool,
}

/// An SA for `a`'s algorithms. Each SPI gets its own key (the SPI in the key's last
/// bytes): two SAs with one AEAD key would share nonces, and the SAD refuses that.
fn sa(s: &Setup, a: &Algs, spi: u32, from: IpAddr, to: IpAddr) -> SaSpec {
    let mut key = a.key.clone();
    if let Some(tail) = key.len().checked_sub(4).and_then(|at| key.get_mut(at..)) {
        tail.iter_mut().zip(spi.to_be_bytes()).for_each(|(k, s)| *k ^= s);
    }
    SaSpec {
        src: from,
        dst: to,
        proto: if s.natt { Proto::EspUdp } else { Proto::Esp },
        spi,
        mode: if s.tunnel { Mode::Tunnel } else { Mode::Transport },
        reqid: 0,
        enc: a.enc,
        enc_key: KeyBytes::new(&key),
        auth: a.auth.as_ref().map(|(x, k)| (*x, KeyBytes::new(k))),
        replay_window: 64,
        esn: s.esn,
        natt: s.natt.then_some(NatT { sport: 4500, dport: 4500 }),
        hard: Lifetime::default(),
        soft: Lifetime::default(),
    }
}

fn host(a: IpAddr) -> Prefix {
    Prefix { addr: a, len: if a.is_ipv4() { 32 } else { 128 } }
}

fn policy(s: &Setup, dir: Dir, src: IpAddr, dst: IpAddr, t: (IpAddr, IpAddr)) -> PolicySpec {
    PolicySpec {
        selector: Selector { src: host(src), dst: host(dst), sport: None, dport: None, upper: Upper::Any },
        dir,
        action: Action::Protect(vec![Rule {
            proto: Proto::Esp,
            mode: if s.tunnel { Mode::Tunnel } else { Mode::Transport },
            tunnel: s.tunnel.then_some(t),
            level: Level::Require,
        }]),
    }
}

/// Two gateways configured for `s` and `a`: packets from inner.0 to inner.1 go from
/// `left` to `right`.
fn pair(s: &Setup, a: &Algs) -> (Gw, Arc<Collect>, Gw, Arc<Collect>) {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    pair_on(fw, s, a)
}

/// [`pair`] over the drivers registered with `fw`.
fn pair_on(fw: ocf::Framework, s: &Setup, a: &Algs) -> (Gw, Arc<Collect>, Gw, Arc<Collect>) {
    let (ls, rs) = (Arc::new(Collect::default()), Arc::new(Collect::default()));
    let left = Gateway::new(fw.clone(), ls.clone());
    let right = Gateway::new(fw, rs.clone());
    let (o, i) = (s.outer, if s.tunnel { s.inner } else { s.outer });
    for g in [&left, &right] {
        g.control(&Request::AddSa(sa(s, a, 0x1000, o.0, o.1))).unwrap();
        g.control(&Request::AddSa(sa(s, a, 0x2000, o.1, o.0))).unwrap();
    }
    left.control(&Request::AddPolicy(policy(s, Dir::Out, i.0, i.1, o))).unwrap();
    right.control(&Request::AddPolicy(policy(s, Dir::In, i.0, i.1, o))).unwrap();
    (left, ls, right, rs)
}

fn setups() -> Vec<Setup> {
    let v4 = (ip("192.0.2.1"), ip("192.0.2.2"));
    let v6 = (ip("2001:db8::1"), ip("2001:db8::2"));
    let in4 = (ip("10.1.0.1"), ip("10.2.0.1"));
    let in6 = (ip("fd00:1::1"), ip("fd00:2::1"));
    let mut v = Vec::new();
    for esn in [false, true] {
        for natt in [false, true] {
            v.push(Setup { tunnel: true, outer: v4, inner: in4, esn, natt });
            v.push(Setup { tunnel: true, outer: v6, inner: in6, esn, natt });
            v.push(Setup { tunnel: true, outer: v4, inner: in6, esn, natt });
            v.push(Setup { tunnel: true, outer: v6, inner: in4, esn, natt });
            v.push(Setup { tunnel: false, outer: v4, inner: v4, esn, natt });
            v.push(Setup { tunnel: false, outer: v6, inner: v6, esn, natt });
        }
    }
    v
}

#[test]
fn every_algorithm_mode_and_family_round_trips() {
    let mut cases = 0;
    for s in setups() {
        for a in all_algs() {
            let (left, ls, right, rs) = pair(&s, &a);
            let (src, dst) = if s.tunnel { s.inner } else { s.outer };
            for n in [0, 1, 17, 100, 1400] {
                let plain = udp_packet(src, dst, n);
                left.output(Packet::with_headroom(&plain)).unwrap();
                let sent = ls.take_sent();
                assert_eq!(sent.len(), 1);
                let esp = &sent[0];
                assert_ne!(esp, &plain);
                right.input(Packet::new(esp.clone())).unwrap_or_else(|d| {
                    panic!(
                        "{} {:?} tunnel={} esn={} natt={} n={n}: dropped {d}",
                        a.enc.name(),
                        s.outer,
                        s.tunnel,
                        s.esn,
                        s.natt
                    )
                });
                let got = rs.take_delivered();
                assert_eq!(
                    got,
                    vec![plain.clone()],
                    "{} {:?} tunnel={} esn={} natt={} n={n}",
                    a.enc.name(),
                    a.auth.as_ref().map(|x| x.0),
                    s.tunnel,
                    s.esn,
                    s.natt
                );
                // Without headroom the packet is copied once; the result is the same.
                left.output(Packet::new(plain.clone())).unwrap();
                right.input(Packet::new(ls.take_sent().remove(0))).unwrap();
                assert_eq!(rs.take_delivered(), vec![plain.clone()]);
                // As a gateway's socket gives it, the IP (and UDP) header taken off: the
                // same inner packet. In transport mode the header is made anew from the
                // SA's addresses (TTL 64, DF, identification 0), the payload is the same.
                left.output(Packet::with_headroom(&plain)).unwrap();
                let sent = ls.take_sent().remove(0);
                let off = if s.outer.0.is_ipv4() { 20 } else { 40 } + if s.natt { 8 } else { 0 };
                let sport = if s.natt { 4500 } else { 0 };
                right
                    .input_payload(payload(s.outer.0, s.outer.1, (sport, sport), s.natt, &sent[off..]))
                    .unwrap();
                let got = rs.take_delivered().remove(0);
                let hdr = if src.is_ipv4() { 20 } else { 40 };
                if s.tunnel {
                    assert_eq!(got, plain);
                } else {
                    assert_eq!(&got[hdr..], &plain[hdr..], "n={n}");
                    let (g, p) =
                        (ipsec_wire::parse_any(&got).unwrap(), ipsec_wire::parse_any(&plain).unwrap());
                    assert_eq!((g.src, g.dst, g.protocol, g.ip_len), (p.src, p.dst, p.protocol, p.ip_len));
                }
                cases += 1;
            }
            assert_eq!(right.stats().total_drops(), 0, "{}", right.stats());
            assert_eq!(right.stats().packets_in, 15);
        }
    }
    assert!(cases > 500);
}

fn gcm_tunnel() -> (Setup, Algs) {
    let s = Setup {
        tunnel: true,
        outer: (ip("192.0.2.1"), ip("192.0.2.2")),
        inner: (ip("10.1.0.1"), ip("10.2.0.1")),
        esn: false,
        natt: false,
    };
    (s, Algs { enc: EncAlg::AesGcm16, key: vec![7; 20], auth: None })
}

#[test]
fn tampered_replayed_and_unknown_packets_are_dropped_and_counted() {
    let (s, a) = gcm_tunnel();
    let (left, ls, right, rs) = pair(&s, &a);
    let plain = udp_packet(s.inner.0, s.inner.1, 64);
    left.output(Packet::new(plain.clone())).unwrap();
    let esp = ls.take_sent().remove(0);

    // Every part of ESP is authenticated: sequence number, IV, ciphertext, ICV (a changed
    // SPI finds no SA: below).
    for at in [20 + 4, 20 + 9, 40, esp.len() - 1] {
        let mut bad = esp.clone();
        bad[at] ^= 0x80;
        let _ = right.input(Packet::new(bad));
    }
    assert_eq!(right.stats().drops(Drop::AuthFailed), 4, "{}", right.stats());
    let mut bad = esp.clone();
    bad[20] ^= 1;
    assert_eq!(right.input(Packet::new(bad)), Err(Drop::UnknownSpi));
    assert!(rs.take_delivered().is_empty());

    // The genuine packet still gets through (failed ones did not move the window)…
    right.input(Packet::new(esp.clone())).unwrap();
    assert_eq!(rs.take_delivered(), vec![plain]);
    // … once.
    assert_eq!(right.input(Packet::new(esp.clone())), Err(Drop::Replay));
    assert_eq!(right.stats().drops(Drop::Replay), 1);
    let sa = right.databases().sad.inbound(0x1000, s.outer.1).unwrap();
    assert_eq!(sa.stats().drops(Drop::Replay), 1, "counted per SA too");
    assert_eq!(sa.stats().drops(Drop::AuthFailed), 4);

    // ESP too short for its IV and ICV (a well-formed IPv4 packet around it).
    let mut short = esp[..20 + 20].to_vec();
    short[2..4].copy_from_slice(&40u16.to_be_bytes());
    short[10..12].copy_from_slice(&[0, 0]);
    let c = checksum(&short[..20]);
    short[10..12].copy_from_slice(&c.to_be_bytes());
    assert_eq!(right.input(Packet::new(short)), Err(Drop::EspTruncated));
    // Garbage.
    assert_eq!(right.input(Packet::new(vec![0x45, 0, 1])), Err(Drop::Malformed));
}

#[test]
fn clear_packets_where_policy_requires_esp_are_dropped() {
    let (s, a) = gcm_tunnel();
    let (_left, _ls, right, rs) = pair(&s, &a);
    let plain = udp_packet(s.inner.0, s.inner.1, 64);
    assert_eq!(right.input(Packet::new(plain)), Err(Drop::Policy));
    assert_eq!(right.stats().drops(Drop::Policy), 1);
    // Traffic no policy covers passes.
    let other = udp_packet(ip("10.9.0.1"), ip("10.9.0.2"), 10);
    right.input(Packet::new(other.clone())).unwrap();
    assert_eq!(rs.take_delivered(), vec![other]);
}

#[test]
fn a_packet_through_the_wrong_sa_is_a_policy_violation() {
    let (s, a) = gcm_tunnel();
    let (left, ls, right, rs) = pair(&s, &a);
    // Right's inbound policy for 10.1/16 → 10.2/16 demands the tunnel 192.0.2.1 → .2; a
    // packet from another inner source arrives through the same SA but no policy covers
    // it with that SA: add one that demands a different tunnel.
    let other_src = ip("10.7.0.1");
    let stranger = PolicySpec {
        selector: Selector {
            src: host(other_src),
            dst: host(s.inner.1),
            sport: None,
            dport: None,
            upper: Upper::Any,
        },
        dir: Dir::In,
        action: Action::Protect(vec![Rule {
            proto: Proto::Esp,
            mode: Mode::Tunnel,
            tunnel: Some((ip("198.51.100.1"), s.outer.1)),
            level: Level::Require,
        }]),
    };
    right.control(&Request::AddPolicy(stranger)).unwrap();
    left.control(&Request::AddPolicy(policy(&s, Dir::Out, other_src, s.inner.1, s.outer))).unwrap();
    left.output(Packet::new(udp_packet(other_src, s.inner.1, 20))).unwrap();
    assert_eq!(right.input(Packet::new(ls.take_sent().remove(0))), Err(Drop::Policy));
    assert!(rs.take_delivered().is_empty());
    assert_eq!(right.stats().drops(Drop::Policy), 1);
}

#[test]
fn no_sa_discard_and_bypass() {
    let (s, a) = gcm_tunnel();
    let (left, ls, _right, _rs) = pair(&s, &a);
    left.control(&Request::DeleteSa(ipsec_core::control::SaId {
        src: s.outer.0,
        dst: s.outer.1,
        proto: Proto::Esp,
        spi: 0x1000,
    }))
    .unwrap();
    // Without the SA, the packet waits for one (crate::acquire); with nothing held, dropped.
    assert_eq!(left.output(Packet::new(udp_packet(s.inner.0, s.inner.1, 8))), Ok(()));
    assert_eq!(left.held_packets(), 1);
    left.set_acquire_limits(ipsec_core::acquire::AcquireLimits { packets: 0, ..Default::default() });
    assert_eq!(left.output(Packet::new(udp_packet(s.inner.0, s.inner.1, 8))), Err(Drop::NoSa));
    // An outbound policy between two hosts.
    let out_policy = |src: &str, dst: &str, action| {
        let selector =
            Selector { src: host(ip(src)), dst: host(ip(dst)), sport: None, dport: None, upper: Upper::Any };
        Request::AddPolicy(PolicySpec { selector, dir: Dir::Out, action })
    };
    left.control(&out_policy("10.5.0.1", "10.5.0.2", Action::Discard)).unwrap();
    assert_eq!(left.output(Packet::new(udp_packet(ip("10.5.0.1"), ip("10.5.0.2"), 8))), Err(Drop::Policy));
    let clear = udp_packet(ip("10.6.0.1"), ip("10.6.0.2"), 8);
    left.output(Packet::new(clear.clone())).unwrap();
    assert_eq!(ls.take_sent(), vec![clear.clone()], "no policy: in the clear");

    // With the default policy discard, what no policy covers is dropped and counted; a
    // bypass policy still lets its traffic through.
    left.set_default_policy(DefaultPolicy::Discard);
    assert_eq!(left.output(Packet::new(clear.clone())), Err(Drop::NoPolicy));
    assert_eq!(left.stats().drops(Drop::NoPolicy), 1);
    left.control(&out_policy("10.6.0.1", "10.6.0.2", Action::Bypass)).unwrap();
    left.output(Packet::new(clear.clone())).unwrap();
    assert_eq!(ls.take_sent(), vec![clear], "a bypass policy: in the clear");
}

/// One gateway with one outbound AES-GCM tunnel SA of the given lifetimes and its policy.
fn sending_gateway(soft: Lifetime, hard: Lifetime) -> (Setup, Gw, Arc<Collect>) {
    let (s, a) = gcm_tunnel();
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let sink = Arc::new(Collect::default());
    let g = Gateway::new(fw, sink.clone());
    let mut spec = sa(&s, &a, 0x1000, s.outer.0, s.outer.1);
    spec.soft = soft;
    spec.hard = hard;
    g.control(&Request::AddSa(spec)).unwrap();
    g.control(&Request::AddPolicy(policy(&s, Dir::Out, s.inner.0, s.inner.1, s.outer))).unwrap();
    (s, g, sink)
}

#[test]
fn hard_packet_lifetime_removes_the_sa_and_soft_reports() {
    let (s, g, sink) = sending_gateway(
        Lifetime { packets: Some(2), ..Lifetime::default() },
        Lifetime { packets: Some(3), ..Lifetime::default() },
    );
    for _ in 0..3 {
        g.output(Packet::new(udp_packet(s.inner.0, s.inner.1, 8))).unwrap();
    }
    assert_eq!(sink.take_sent().len(), 3);
    let ev = g.take_events();
    assert!(matches!(ev.as_slice(), [Event::SoftExpired { by: Limit::Packets, .. }]), "{ev:?}");
    assert_eq!(g.output(Packet::new(udp_packet(s.inner.0, s.inner.1, 8))), Err(Drop::Expired));
    assert!(matches!(g.take_events().as_slice(), [Event::HardExpired { by: Limit::Packets, .. }]));
    assert_eq!(g.output(Packet::new(udp_packet(s.inner.0, s.inner.1, 8))), Ok(()), "the SA is gone: held");
    assert!(matches!(g.take_events().as_slice(), [Event::Acquire(_)]), "and a new one asked for");
}

/// Byte lifetimes are charged by the packet path (tunnel mode: the inner packet's length),
/// in both directions: soft once past 50 bytes, hard (the SA removed, the event naming bytes)
/// once past 100, each said once and naming the SA.
#[test]
fn a_byte_lifetime_expires_through_packets() {
    let (s, g, sink) = sending_gateway(
        Lifetime { bytes: Some(50), ..Lifetime::default() },
        Lifetime { bytes: Some(100), ..Lifetime::default() },
    );
    let id = ipsec_core::control::SaId { src: s.outer.0, dst: s.outer.1, proto: Proto::Esp, spi: 0x1000 };
    let packet = || Packet::new(udp_packet(s.inner.0, s.inner.1, 8)); // 36 bytes
    g.output(packet()).unwrap();
    assert!(g.take_events().is_empty(), "36 bytes: below both");
    g.output(packet()).unwrap();
    assert_eq!(g.take_events(), vec![Event::SoftExpired { sa: id, by: Limit::Bytes }], "72 bytes");
    g.output(packet()).unwrap_err();
    assert_eq!(g.take_events(), vec![Event::HardExpired { sa: id, by: Limit::Bytes }], "108 bytes");
    assert_eq!(sink.take_sent().len(), 2, "the packet that crossed the hard limit was not sent");
    assert!(g.databases().sad.get(&id).is_none(), "a hard expiry deletes the SA");
    assert_eq!(g.output(packet()), Ok(()), "held");
    assert!(
        matches!(g.take_events().as_slice(), [Event::Acquire(a)] if a.dst == s.outer.1),
        "a new SA asked for"
    );
    assert_eq!(g.stats().drops(Drop::Expired), 1);
}

#[test]
fn an_sa_stops_sending_before_its_sequence_number_wraps() {
    for esn in [false, true] {
        let (mut s, a) = gcm_tunnel();
        s.esn = esn;
        let (left, ls, right, rs) = pair(&s, &a);
        let id = ipsec_core::control::SaId { src: s.outer.0, dst: s.outer.1, proto: Proto::Esp, spi: 0x1000 };
        let sa = left.databases().sad.get(&id).unwrap();
        let last = if esn { u64::MAX - 1 } else { u64::from(u32::MAX) - 1 };
        sa.resume_sequence(last);
        sa.resume_sequence(5); // never moves back
                               // The last number is used…
        left.output(Packet::new(udp_packet(s.inner.0, s.inner.1, 8))).unwrap();
        let esp = ls.take_sent().remove(0);
        assert_eq!(&esp[24..28], &((last + 1) as u32).to_be_bytes());
        if !esn {
            // (with ESN the receiver's window would need to be near 2^64 to accept it)
            right.input(Packet::new(esp)).unwrap();
            assert_eq!(rs.take_delivered().len(), 1);
        }
        // …then nothing more is sent, and it is said once.
        for _ in 0..3 {
            assert_eq!(
                left.output(Packet::new(udp_packet(s.inner.0, s.inner.1, 8))),
                Err(Drop::SeqExhausted)
            );
        }
        assert!(ls.take_sent().is_empty());
        assert_eq!(left.take_events(), vec![Event::SeqExhausted(id)]);
        assert_eq!(left.stats().drops(Drop::SeqExhausted), 3);
    }
}

/// Time is stepped (`tick_at`), not slept through: the SA is added between `before` and
/// `after`, so at `after + 100 s` it is at least 100 s old and, however long the set-up took
/// (less than 100 s), not yet 200. (It slept 1.1 s and 1 s before, and needed the second
/// tick within 0.9 s of the first sleep's end.)
#[test]
fn time_lifetimes_expire_through_tick() {
    let before = std::time::Instant::now();
    let (s, g, sink) = sending_gateway(
        Lifetime { seconds: Some(100), ..Lifetime::default() },
        Lifetime { seconds: Some(200), ..Lifetime::default() },
    );
    let after = std::time::Instant::now();
    let at = |secs| after + std::time::Duration::from_secs(secs);
    g.tick_at(before);
    g.tick();
    assert!(g.take_events().is_empty(), "nothing expires at once");
    g.tick_at(at(100));
    g.tick_at(at(100));
    assert!(
        matches!(g.take_events().as_slice(), [Event::SoftExpired { by: Limit::Time, .. }]),
        "soft expiry is reported once"
    );
    g.output(Packet::new(udp_packet(s.inner.0, s.inner.1, 8))).unwrap();
    assert_eq!(sink.take_sent().len(), 1, "a dying SA still sends");
    g.tick_at(at(200));
    assert!(matches!(g.take_events().as_slice(), [Event::HardExpired { by: Limit::Time, .. }]));
    assert_eq!(g.output(Packet::new(udp_packet(s.inner.0, s.inner.1, 8))), Ok(()), "the SA is gone: held");
    assert!(matches!(g.take_events().as_slice(), [Event::Acquire(_)]), "and a new one asked for");
}

/// Over ocf-sim's QuickAssist-like card, which completes every request later from its own
/// thread: encapsulation and decapsulation finish in the SAs' callbacks, not in the call.
/// A batch reaches the card with the "more follow" hint on all but the last request of
/// each run: one doorbell per inbound batch and per outbound run of 16 (a full ring rings
/// it early), where packets one at a time ring it each time.
#[test]
fn over_an_asynchronous_accelerator_a_run_rings_the_doorbell_once() {
    let (s, a) = gcm_tunnel();
    let fw = ocf::Framework::new();
    let card = ocf_sim::register_driver(&fw, "qat-like").unwrap();
    let ring = card.stats().ring_size;
    let (left, ls, right, rs) = pair_on(fw, &s, &a);
    for g in [&left, &right] {
        let sas = g.databases().sad.dump(None);
        assert!(!sas.is_empty() && sas.iter().all(|sa| sa.driver() == "sim:qat-like"), "{} SAs", sas.len());
    }

    let wait = |c: &Collect, n: usize, sent: bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let have = if sent { c.sent.lock().unwrap().len() } else { c.delivered.lock().unwrap().len() };
            if have >= n {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{have} of {n} packets finished");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };
    let n = 40.min(ring);
    let mut plain: Vec<Vec<u8>> = (0..n).map(|i| udp_packet(s.inner.0, s.inner.1, 100 + i)).collect();
    // One at a time: a doorbell each.
    for p in &plain {
        left.output(Packet::with_headroom(p)).unwrap();
    }
    wait(&ls, n, true);
    assert_eq!(card.stats().doorbells, n as u64);
    let one_by_one = ls.take_sent();
    // The same packets as one batch: one doorbell per run of 16 (`path::RUN_LIMIT`: an
    // outbound run takes its sequence numbers at once, so runs stay short).
    let mut out = ipsec_core::Results::default();
    (*left).output(plain.iter().map(|p| Packet::with_headroom(p)), &mut out);
    assert!(out.is_empty(), "an asynchronous driver's packets go to the sink");
    wait(&ls, n, true);
    let runs = n.div_ceil(16) as u64;
    assert_eq!(card.stats().doorbells, n as u64 + runs);
    assert_eq!(card.stats().doorbell_timeouts, 0, "the last request went without the hint");
    let batched = ls.take_sent();
    // Decapsulated as a batch too, out of order or not: every packet arrives once, intact.
    (*right).input(one_by_one.into_iter().chain(batched).map(Packet::new), Via::Ip, &mut out);
    wait(&rs, 2 * n, false);
    assert_eq!(card.stats().doorbells, n as u64 + runs + 1, "inbound: one doorbell for the batch");
    let mut got = rs.take_delivered();
    got.sort();
    plain.extend(plain.clone());
    plain.sort();
    assert_eq!(got, plain);
    assert_eq!(right.stats().total_drops(), 0, "{}", right.stats());
    assert_eq!(right.stats().packets_in, 2 * n as u64);
    assert_eq!(left.stats().packets_out, 2 * n as u64);
}

/// ESP's first bytes: `spi`, sequence number 1, and `n` bytes of would-be ciphertext.
fn esp_bytes(spi: u32, n: usize) -> Vec<u8> {
    let mut v = spi.to_be_bytes().to_vec();
    v.extend_from_slice(&1u32.to_be_bytes());
    v.extend((0..n).map(|i| i as u8));
    v
}

/// A receiving gateway for ESP in UDP on `port` (SA 0x1000 from the peer) that also holds
/// a plain ESP SA from the peer (0x3001); the sending peer; and the setup.
fn udp_gateways(outer: (IpAddr, IpAddr), port: u16) -> (Gw, Arc<Collect>, Gw, Arc<Collect>, Setup) {
    let (mut s, a) = gcm_tunnel();
    s.natt = true;
    s.outer = outer;
    s.inner = if outer.0.is_ipv4() { s.inner } else { (ip("fd00:1::1"), ip("fd00:2::1")) };
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let (ls, rs) = (Arc::new(Collect::default()), Arc::new(Collect::default()));
    let left = Gateway::new(fw.clone(), ls.clone());
    let right = Gateway::new(fw, rs.clone());
    let mut spec = sa(&s, &a, 0x1000, outer.0, outer.1);
    spec.natt = Some(NatT { sport: port, dport: port });
    for g in [&left, &right] {
        g.control(&Request::AddSa(spec.clone())).unwrap();
    }
    s.natt = false;
    right.control(&Request::AddSa(sa(&s, &a, 0x3001, outer.0, outer.1))).unwrap();
    s.natt = true;
    left.control(&Request::AddPolicy(policy(&s, Dir::Out, s.inner.0, s.inner.1, outer))).unwrap();
    right.control(&Request::AddPolicy(policy(&s, Dir::In, s.inner.0, s.inner.1, outer))).unwrap();
    (left, ls, right, rs, s)
}

#[test]
fn esp_in_udp_on_any_port_is_decapsulated_from_the_udp_socket() {
    for outer in [(ip("192.0.2.1"), ip("192.0.2.2")), (ip("2001:db8::1"), ip("2001:db8::2"))] {
        let (left, ls, right, rs, s) = udp_gateways(outer, 4501);
        let plain = udp_packet(s.inner.0, s.inner.1, 100);
        left.output(Packet::with_headroom(&plain)).unwrap();
        let sent = ls.take_sent().remove(0);
        // The socket gives the datagram's payload, with the addresses and ports.
        let off = if outer.0.is_ipv4() { 20 } else { 40 };
        assert_eq!(&sent[off..off + 4], &[0x11, 0x95, 0x11, 0x95], "from and to port 4501");
        right.input_payload(payload(outer.0, outer.1, (4501, 4501), true, &sent[off + 8..])).unwrap();
        assert_eq!(rs.take_delivered(), vec![plain]);
        // Through an IP stack, port 4501 is not ESP in UDP: plain UDP, which the inbound
        // policy does not cover (it names inner addresses), delivered as it is.
        right.input(Packet::new(sent)).unwrap();
        assert_eq!(rs.take_delivered().len(), 1);
        assert_eq!(right.stats().total_drops(), 0, "{}", right.stats());
    }
}

#[test]
fn what_is_not_esp_from_the_network_sockets_is_counted_and_never_delivered() {
    for outer in [(ip("192.0.2.1"), ip("192.0.2.2")), (ip("2001:db8::1"), ip("2001:db8::2"))] {
        let (_left, _ls, right, rs, _s) = udp_gateways(outer, 4501);
        let (peer, me) = outer;
        let udp = |b: &[u8]| In::Payload(payload(peer, me, (40000, 4501), true, b));
        let bare = |b: &[u8]| In::Payload(payload(peer, me, (0, 0), false, b));
        let raw = |b: &[u8]| In::Whole(Packet::new(ip_packet(peer, me, 50, b)), Via::Esp);
        let ip = |p: Vec<u8>, via: Via| In::Whole(Packet::new(p), via);
        let mut marker_and_header = vec![0; 32];
        marker_and_header[4] = 0x11;
        let cases: Vec<(In, Result<(), Drop>)> = vec![
            (udp(&[]), Err(Drop::NotEsp)),
            (udp(&[0x00]), Err(Drop::NotEsp)),
            (udp(&[0x7f]), Err(Drop::NotEsp)),
            (udp(&[1, 2, 3]), Err(Drop::NotEsp)),
            (udp(&marker_and_header[..20]), Err(Drop::NotEsp)),
            // The repro (32 zero bytes), and IKE behind the marker.
            (udp(&[0; 32]), Err(Drop::Ike)),
            (udp(&marker_and_header), Err(Drop::Ike)),
            (udp(&[0xff]), Ok(())),
            (udp(&esp_bytes(0x1000, 0)[..6]), Err(Drop::EspTruncated)),
            (udp(&esp_bytes(0x1000, 8)), Err(Drop::EspTruncated)),
            (udp(&esp_bytes(0xdead_0001, 40)), Err(Drop::UnknownSpi)),
            (udp(&esp_bytes(0x3001, 40)), Err(Drop::EncapMismatch)),
            // ESP in UDP to another port than the SA's (4501): ipsecd's socket on 4500.
            (In::Payload(payload(peer, me, (4501, 4500), true, &esp_bytes(0x1000, 40))), Err(Drop::UdpPort)),
            (raw(&esp_bytes(0x3001, 0)[..4]), Err(Drop::EspTruncated)),
            (raw(&esp_bytes(0, 40)), Err(Drop::UnknownSpi)),
            (raw(&esp_bytes(0xdead_0001, 40)), Err(Drop::UnknownSpi)),
            (raw(&esp_bytes(0x1000, 40)), Err(Drop::EncapMismatch)),
            // Clear traffic no policy covers, from a socket that carries only ESP.
            (ip(udp_packet(peer, me, 10), Via::Esp), Err(Drop::NotEsp)),
            // Raw ESP whose socket took the header off (IPv6): the same checks.
            (bare(&esp_bytes(0x3001, 0)[..4]), Err(Drop::EspTruncated)),
            (bare(&esp_bytes(0, 40)), Err(Drop::UnknownSpi)),
            (bare(&esp_bytes(0x1000, 40)), Err(Drop::EncapMismatch)),
            // Through an IP stack: IKE and junk on port 4500 are counted, not delivered.
            (ip(datagram(peer, me, 4500, 4500, &[0; 32]), Via::Ip), Err(Drop::Ike)),
            (ip(datagram(peer, me, 4500, 4500, &[0x7f]), Via::Ip), Err(Drop::NotEsp)),
            (ip(datagram(peer, me, 4500, 4500, &[0xff]), Via::Ip), Ok(())),
        ];
        let n = cases.len();
        for (i, (input, want)) in cases.into_iter().enumerate() {
            let got = match input {
                In::Whole(p, via) => right.input_via(p, via),
                In::Payload(p) => right.input_payload(p),
            };
            assert_eq!(got, want, "{outer:?} case {i}");
        }
        assert!(rs.take_delivered().is_empty(), "nothing reaches the protected side");
        let st = right.stats();
        assert_eq!(st.keepalives, 2);
        let expect = [
            (Drop::EspTruncated, 4),
            (Drop::NotEsp, 7),
            (Drop::Ike, 3),
            (Drop::UnknownSpi, 4),
            (Drop::EncapMismatch, 3),
            (Drop::UdpPort, 1),
        ];
        assert_eq!(st.nonzero_drops().collect::<Vec<_>>(), expect.to_vec(), "{st}");
        assert_eq!(st.total_drops() + st.keepalives, n as u64);
        // A mismatch is charged to the SA its SPI names.
        let sa = right.databases().sad.inbound(0x3001, me).unwrap();
        assert_eq!(sa.stats().drops(Drop::EncapMismatch), 1);
        let sa = right.databases().sad.inbound(0x1000, me).unwrap();
        assert_eq!(sa.stats().drops(Drop::EncapMismatch), 2, "raw ESP for the ESP-in-UDP SA");
    }
}

#[test]
fn a_drop_counted_by_the_reader_is_in_the_totals() {
    let (s, a) = gcm_tunnel();
    let (_left, _ls, right, _rs) = pair(&s, &a);
    right.count_drop(Drop::Truncated);
    assert_eq!(right.stats().drops(Drop::Truncated), 1);
    assert_eq!(right.stats().to_string(), "out 0 packets 0 bytes, in 0 packets 0 bytes, truncated 1");
}

/// `esp::max_inner_len(1500)`, ipsecd's default TUN MTU, is the longest packet that every
/// transform carries within an Ethernet MTU, even over IPv6 with ESP in UDP (the largest
/// overhead): every algorithm's ESP packet of that inner length fits in 1500 bytes, and one
/// byte more does not fit for AES-CBC with HMAC-SHA2-512 (the bound is tight). With the
/// TUN MTU of 1400 that ipsecd had, that transform's full-size packets were 1512 bytes and
/// their sends failed (seen against Linux in tests/kernel/xfrm).
#[test]
fn the_longest_inner_packet_fits_every_transform_in_1500_bytes() {
    let max = ipsec_core::esp::max_inner_len(1500);
    assert_eq!(max, 1390);
    let v6 = (ip("2001:db8::1"), ip("2001:db8::2"));
    let in6 = (ip("fd00:1::1"), ip("fd00:2::1"));
    for natt in [false, true] {
        let s = Setup { tunnel: true, outer: v6, inner: in6, esn: false, natt };
        for a in all_algs() {
            let (left, ls, _, _) = pair(&s, &a);
            let name = format!("{:?}/{:?} natt={natt}", a.enc, a.auth.as_ref().map(|x| x.0));
            for n in [max, max + 1] {
                left.output(Packet::new(udp_packet(in6.0, in6.1, n - 48))).unwrap();
                let sent = ls.take_sent();
                let len = sent[0].len();
                if n == max {
                    assert!(len <= 1500, "{name}: a {n}-byte packet became {len} bytes of ESP");
                } else if natt && a.enc == EncAlg::AesCbc && a.auth.as_ref().unwrap().0 == AuthAlg::HmacSha512
                {
                    assert!(len > 1500, "{name}: the bound is not tight ({n} -> {len})");
                }
            }
        }
    }
}

/// `esp` (ESP in UDP over IPv4, as a peer sent it) as its socket gives it after a NAT gave
/// it the source port `port`.
fn from_port(esp: &[u8], port: u16) -> Payload {
    let ip = ipsec_wire::ipv4::Packet::new_unchecked(esp);
    payload(ip.src_addr().into(), ip.dst_addr().into(), (port, 4500), true, &esp[28..])
}

/// What a socket gives of ESP (`udp`: in UDP from port `sport` to port `dport`) from `src`
/// to `dst`: the bytes behind the headers it took off, at an offset, as a gateway's reader
/// puts them.
fn payload(src: IpAddr, dst: IpAddr, (sport, dport): (u16, u16), udp: bool, b: &[u8]) -> Payload {
    let src = std::net::SocketAddr::new(src, sport);
    Payload { packet: Packet::with_headroom(b), src, dst, dport, udp, ecn: 0 }
}

/// A packet from the network as a test hands it over: whole, or as a socket's payload.
enum In {
    Whole(Packet, Via),
    Payload(Payload),
}

/// Port floating (RFC 3948 §3.1, RFC 7296 §2.23): after an authenticated packet from a new
/// UDP source port, the SAs back to the peer send to that port; a forged, replayed or late
/// packet from another port moves nothing.
#[test]
fn the_newest_authenticated_packet_moves_the_peer_and_nothing_else_does() {
    let (mut s, a) = gcm_tunnel();
    s.natt = true;
    let (left, ls, right, rs) = pair(&s, &a);
    let (o, i) = (s.outer, s.inner);
    right.control(&Request::AddPolicy(policy(&s, Dir::Out, i.1, i.0, (o.1, o.0)))).unwrap();
    let plain = udp_packet(i.0, i.1, 64);
    let esp: Vec<Vec<u8>> = (0..4)
        .map(|_| {
            left.output(Packet::new(plain.clone())).unwrap();
            ls.take_sent().remove(0)
        })
        .collect();
    // Where right sends now: the UDP destination port of its next packet to left.
    let sends_to = || {
        right.output(Packet::new(udp_packet(i.1, i.0, 32))).unwrap();
        let b = rs.take_sent().remove(0);
        u16::from_be_bytes([b[22], b[23]])
    };
    assert_eq!(sends_to(), 4500);

    // Forged (the ICV fails) from another port: no move.
    let mut forged = esp[2].clone();
    *forged.last_mut().unwrap() ^= 1;
    assert_eq!(right.input_payload(from_port(&forged, 4600)), Err(Drop::AuthFailed));
    assert_eq!(right.stats().drops(Drop::AuthFailed), 1);
    // Authentic from the configured port: no move either.
    right.input_payload(from_port(&esp[0], 4500)).unwrap();
    assert_eq!((right.stats().peer_moved, sends_to()), (0, 4500));

    // Authentic and the newest, from 4600: followed, counted and reported once.
    right.input_payload(from_port(&esp[2], 4600)).unwrap();
    assert_eq!(rs.take_delivered().len(), 2);
    assert_eq!(sends_to(), 4600);
    assert_eq!(right.stats().peer_moved, 1);
    let moved: Vec<_> = right.take_events();
    assert!(matches!(moved.as_slice(), [Event::PeerMoved { from: 4500, to: 4600, .. }]), "{moved:?}");

    // A replay from yet another port: dropped, no move.
    assert_eq!(right.input_payload(from_port(&esp[2], 4700)), Err(Drop::Replay));
    // A late packet (in the window, older than the newest) from the old port: delivered,
    // but it does not move the peer back.
    right.input_payload(from_port(&esp[1], 4500)).unwrap();
    assert_eq!(rs.take_delivered().len(), 1);
    // The next packets from the new port: no new change.
    right.input_payload(from_port(&esp[3], 4600)).unwrap();
    assert_eq!((right.stats().peer_moved, sends_to()), (1, 4600));
    assert!(right.take_events().is_empty());

    // A new SA to the peer (a reload with new keys) takes the learned port.
    right.control(&Request::AddSa(sa(&s, &a, 0x2001, o.1, o.0))).unwrap();
    let newest = right.databases().sad.outbound(o.1, o.0, Mode::Tunnel, 0).unwrap();
    assert_eq!((newest.id.spi, newest.send_port()), (0x2001, Some(4600)));
    assert_eq!(sends_to(), 4600);
}

/// A batch counts its packets once per run of one SA (`path::Tally`), not per packet: the
/// counts must still be exact, per SA and in total, when a batch's SAs interleave (out and
/// in), and an SA with a packet lifetime must still stop at its exact packet within one
/// batch.
#[test]
fn a_batch_counts_interleaved_sas_exactly_and_stops_at_a_lifetime_inside_it() {
    let (s, a) = gcm_tunnel();
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let (left, right) = (Gw::new(fw.clone(), Arc::default()), Gw::new(fw, Arc::default()));
    // Two tunnels from 10.1.0.1: to 10.2.0.1 through 192.0.2.2 (SPI 0x1000), to 10.3.0.1
    // through 192.0.2.3 (SPI 0x3000, at most 3 packets on the left).
    let (o2, o3) = ((s.outer.0, s.outer.1), (s.outer.0, ip("192.0.2.3")));
    let (h1, h2, h3) = (s.inner.0, s.inner.1, ip("10.3.0.1"));
    for g in [&left, &right] {
        g.control(&Request::AddSa(sa(&s, &a, 0x1000, o2.0, o2.1))).unwrap();
        let mut limited = sa(&s, &a, 0x3000, o3.0, o3.1);
        if std::ptr::eq(g, &left) {
            limited.hard = Lifetime { packets: Some(3), ..Lifetime::default() };
        }
        g.control(&Request::AddSa(limited)).unwrap();
    }
    for (dst, t) in [(h2, o2), (h3, o3)] {
        left.control(&Request::AddPolicy(policy(&s, Dir::Out, h1, dst, t))).unwrap();
        right.control(&Request::AddPolicy(policy(&s, Dir::In, h1, dst, t))).unwrap();
    }
    let to = [(h2, 10), (h2, 20), (h3, 30), (h2, 40), (h3, 50), (h3, 60), (h2, 70), (h3, 80), (h2, 90)];
    let mut out = ipsec_core::Results::default();
    ipsec_core::Ipsec::output(
        &left,
        to.iter().map(|&(dst, n)| Packet::with_headroom(&udp_packet(h1, dst, n))),
        &mut out,
    );
    // The fourth packet to 10.3.0.1 is past the lifetime (then the SA is gone: no_sa).
    assert_eq!(out.transmit.len(), 8, "{}", left.stats());
    let st = left.stats();
    assert_eq!((st.drops(Drop::Expired), st.drops(Drop::NoSa)), (1, 0), "{st}");
    let stats = |g: &Gw, spi: u32| {
        g.databases().sad.dump(None).into_iter().find(|x| x.id.spi == spi).map(|x| x.stats())
    };
    let (sa2, sa3) = (stats(&left, 0x1000).unwrap(), stats(&left, 0x3000));
    // 5 packets of UDP 8 + 10, 20, 40, 70, 90 bytes, inner IPv4 header 20: IP lengths.
    assert_eq!((sa2.packets_out, sa2.bytes_out), (5, 5 * 28 + 230));
    assert!(sa3.is_none() || sa3.unwrap().packets_out == 3, "{sa3:?}");
    assert_eq!((st.packets_out, st.bytes_out), (8, 5 * 28 + 230 + 3 * 28 + 140));
    let mut back = ipsec_core::Results::default();
    ipsec_core::Ipsec::input(&right, out.transmit.drain(..), Via::Ip, &mut back);
    assert_eq!(back.deliver.len(), 8, "{}", right.stats());
    let (r2, r3) = (stats(&right, 0x1000).unwrap(), stats(&right, 0x3000).unwrap());
    assert_eq!((r2.packets_in, r2.bytes_in, r3.packets_in, r3.bytes_in), (5, 5 * 28 + 230, 3, 3 * 28 + 140));
    assert_eq!((right.stats().packets_in, right.stats().bytes_in), (8, 8 * 28 + 370));
}

/// A driver that takes runs whole (as the multi-buffer driver does), doing the work with
/// the soft driver's sessions and recording the length of every run it is handed.
struct Runs {
    lengths: Arc<std::sync::Mutex<Vec<usize>>>,
}

struct RunsSession(Box<dyn ocf::DriverSession>, Arc<std::sync::Mutex<Vec<usize>>>);

impl ocf::Driver for Runs {
    fn name(&self) -> &str {
        "runs"
    }
    fn capabilities(&self) -> ocf::Capabilities {
        ocf::Capabilities { runs: true, synchronous: false, ..ocf::Capabilities::every_algorithm() }
    }
    fn probe_session(&self, p: &ocf::SessionParams) -> Option<ocf::Priority> {
        ocf_soft::SoftDriver::new().probe_session(p).map(|_| ocf::Priority::Hardware)
    }
    fn new_session(
        &self,
        p: &ocf::SessionParams,
        ctx: ocf::SessionContext,
    ) -> Result<Box<dyn ocf::DriverSession>, ocf::Error> {
        Ok(Box::new(RunsSession(ocf_soft::SoftDriver::new().new_session(p, ctx)?, self.lengths.clone())))
    }
}

impl ocf::DriverSession for RunsSession {
    fn process(&self, req: ocf::Request, hint: ocf::Hint) -> ocf::Processed {
        self.0.process(req, hint)
    }
    fn process_run(&self, run: &mut Vec<ocf::Request>, done: &mut Vec<ocf::Outcome>) {
        self.1.lock().unwrap().push(run.len());
        self.0.process_run(run, done)
    }
}

/// A batch meets ocf as runs: each SA's packets in a row (out, at most 16) reach a driver
/// that takes runs in one call (`Session::submit_run`) and are finished in the call, into
/// the results; the one-packet calls go one request at a time. Every packet arrives once,
/// intact.
#[test]
fn a_batch_reaches_a_driver_that_takes_runs_as_one_run_per_sa() {
    let (s, a) = gcm_tunnel();
    let fw = ocf::Framework::new();
    let lengths = Arc::new(std::sync::Mutex::new(Vec::new()));
    fw.register(Arc::new(Runs { lengths: lengths.clone() })).unwrap();
    let (left, ls, right, rs) = pair_on(fw, &s, &a);
    let plain: Vec<Vec<u8>> = (0..24).map(|i| udp_packet(s.inner.0, s.inner.1, 100 + i)).collect();
    let mut out = ipsec_core::Results::default();
    (*left).output(plain.iter().map(|p| Packet::with_headroom(p)), &mut out);
    assert_eq!(out.transmit.len(), 24, "finished in the call");
    // Outbound runs stop at 16 (`path::RUN_LIMIT`); inbound the batch is one run.
    assert_eq!(*lengths.lock().unwrap(), vec![16, 8], "runs of at most 16 out");
    let sent: Vec<Packet> = out.transmit.drain(..).collect();
    (*right).input(sent, Via::Ip, &mut out);
    assert_eq!(*lengths.lock().unwrap(), vec![16, 8, 24], "one run in");
    let got: Vec<Vec<u8>> = out.deliver.drain(..).map(|p| p.bytes().to_vec()).collect();
    assert_eq!(got, plain, "in order, intact");
    left.output(Packet::with_headroom(&plain[0])).unwrap();
    assert_eq!(lengths.lock().unwrap().len(), 3, "a packet alone is not a run");
    assert_eq!(ls.take_sent().len(), 1);
    assert_eq!(left.stats().total_drops() + right.stats().total_drops(), 0);
    let _ = rs;
}
