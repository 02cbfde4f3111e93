//! Interoperability with an independent ESP implementation, scapy 2.8.0 (tests/scapy/peer.py),
//! in both directions, for every algorithm × mode (tunnel, transport) × IP version (outer
//! and inner, mixed in tunnel mode) × ESN × UDP encapsulation:
//!
//! - ours → scapy: `Ipsec::output` encapsulates, scapy decrypts and decapsulates; the
//!   packet must come back unchanged;
//! - scapy → ours: scapy encrypts, `Ipsec::input` decapsulates; the packet must be
//!   delivered unchanged, with no drop counted.
//!
//! With ESN both directions also cross a 2^32 boundary of the sequence number, so the
//! high-order bits (never sent, but authenticated) are exercised: ours resumes its counter
//! just below 2^32; scapy sends 2^32 − 10 and then 2^32 + 6, which our replay window must
//! place in the next epoch. The matrix is printed (`--nocapture`).

mod common;

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use common::scapy::ScapyPeer;
use ipsec_core::control::{
    Action, AuthAlg, Dir, EncAlg, KeyBytes, Level, Lifetime, Mode, NatT, PolicySpec, Prefix, Proto, Request,
    Rule, SaSpec, Selector, Upper,
};
use ipsec_core::{Packet, Sink};

use common::gateway::Gateway;

/// A core whose results land in its `Collect`.
type Gw = Gateway<Collect>;

#[derive(Default)]
struct Collect(Mutex<Vec<Vec<u8>>>);

impl Sink for Collect {
    fn transmit(&self, p: Packet) {
        self.0.lock().unwrap().push(p.bytes().to_vec());
    }
    fn deliver(&self, p: Packet) {
        self.0.lock().unwrap().push(p.bytes().to_vec());
    }
}

impl Collect {
    fn take(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A UDP packet with a correct checksum (scapy recomputes nothing on decapsulation, and
/// neither do we; the bytes must simply survive).
fn udp_packet(src: IpAddr, dst: IpAddr, n: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..n).map(|i| (i * 13 + 5) as u8).collect();
    let mut udp = vec![0x30, 0x39, 0x00, 0x35];
    udp.extend_from_slice(&((8 + n) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&payload);
    let sum = |b: &[u8]| ipsec_wire::checksum::checksum(b);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0];
            h[2..4].copy_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            let c = sum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h.extend_from_slice(&udp);
            h
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut pseudo = s.octets().to_vec();
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&(udp.len() as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
            pseudo.extend_from_slice(&udp);
            let c = match sum(&pseudo) {
                0 => 0xffff,
                c => c,
            };
            udp[6..8].copy_from_slice(&c.to_be_bytes());
            let mut h = vec![0x60, 0, 0, 0];
            h.extend_from_slice(&(udp.len() as u16).to_be_bytes());
            h.extend_from_slice(&[17, 64]);
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            h.extend_from_slice(&udp);
            h
        }
        _ => unreachable!(),
    }
}

fn algorithms() -> Vec<(&'static str, EncAlg, usize, Option<AuthAlg>)> {
    let mut v = vec![
        ("aes-gcm-16/128", EncAlg::AesGcm16, 20, None),
        ("aes-gcm-16/256", EncAlg::AesGcm16, 36, None),
        ("chacha20-poly1305", EncAlg::ChaCha20Poly1305, 36, None),
        ("aes-cbc/128+hmac-sha1", EncAlg::AesCbc, 16, Some(AuthAlg::HmacSha1)),
        ("aes-cbc/128+hmac-sha2-256", EncAlg::AesCbc, 16, Some(AuthAlg::HmacSha256)),
        ("aes-cbc/192+hmac-sha2-384", EncAlg::AesCbc, 24, Some(AuthAlg::HmacSha384)),
        ("aes-cbc/256+hmac-sha2-512", EncAlg::AesCbc, 32, Some(AuthAlg::HmacSha512)),
        ("3des-cbc+hmac-sha1", EncAlg::TdesCbc, 24, Some(AuthAlg::HmacSha1)),
        ("null+hmac-sha1", EncAlg::Null, 0, Some(AuthAlg::HmacSha1)),
        ("null+hmac-sha2-256", EncAlg::Null, 0, Some(AuthAlg::HmacSha256)),
    ];
    v.shrink_to_fit();
    v
}

struct Shape {
    name: &'static str,
    tunnel: bool,
    outer: (IpAddr, IpAddr),
    inner: (IpAddr, IpAddr),
}

fn shapes() -> Vec<Shape> {
    let v4 = (ip("192.0.2.1"), ip("192.0.2.2"));
    let v6 = (ip("2001:db8::1"), ip("2001:db8::2"));
    let in4 = (ip("10.1.0.1"), ip("10.2.0.1"));
    let in6 = (ip("fd00:1::1"), ip("fd00:2::1"));
    vec![
        Shape { name: "tunnel 4in4", tunnel: true, outer: v4, inner: in4 },
        Shape { name: "tunnel 6in6", tunnel: true, outer: v6, inner: in6 },
        Shape { name: "tunnel 6in4", tunnel: true, outer: v4, inner: in6 },
        Shape { name: "tunnel 4in6", tunnel: true, outer: v6, inner: in4 },
        Shape { name: "transport 4", tunnel: false, outer: v4, inner: v4 },
        Shape { name: "transport 6", tunnel: false, outer: v6, inner: v6 },
    ]
}

fn spec(sh: &Shape, enc: EncAlg, klen: usize, auth: Option<AuthAlg>, esn: bool, natt: bool) -> SaSpec {
    let key: Vec<u8> = (0..klen).map(|i| 0x21u8.wrapping_add((i as u8).wrapping_mul(29))).collect();
    SaSpec {
        src: sh.outer.0,
        dst: sh.outer.1,
        proto: if natt { Proto::EspUdp } else { Proto::Esp },
        spi: 0x0c0f_0001,
        mode: if sh.tunnel { Mode::Tunnel } else { Mode::Transport },
        reqid: 0,
        enc,
        enc_key: KeyBytes::new(&key),
        auth: auth.map(|a| (a, KeyBytes::new(&vec![0x3c; a.key_len()]))),
        replay_window: 64,
        esn,
        natt: natt.then_some(NatT { sport: 4500, dport: 4500 }),
        hard: Lifetime::default(),
        soft: Lifetime::default(),
    }
}

fn gateway(sh: &Shape, sa: &SaSpec, dir: Dir) -> (Gw, Arc<Collect>) {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let sink = Arc::new(Collect::default());
    let g = Gateway::new(fw, sink.clone());
    g.control(&Request::AddSa(sa.clone())).unwrap();
    let host = |a: IpAddr| Prefix { addr: a, len: if a.is_ipv4() { 32 } else { 128 } };
    g.control(&Request::AddPolicy(PolicySpec {
        selector: Selector {
            src: host(sh.inner.0),
            dst: host(sh.inner.1),
            sport: None,
            dport: None,
            upper: Upper::Any,
        },
        dir,
        action: Action::Protect(vec![Rule {
            proto: if sa.proto == Proto::Ah { Proto::Ah } else { Proto::Esp },
            mode: sa.mode,
            tunnel: sh.tunnel.then_some(sh.outer),
            level: Level::Require,
        }]),
    }))
    .unwrap();
    (g, sink)
}

/// ours → scapy for one combination; `Err` says what went wrong.
fn ours_to_scapy(peer: &ScapyPeer, sh: &Shape, sa: &SaSpec) -> Result<(), String> {
    let (g, sink) = gateway(sh, sa, Dir::Out);
    let tunnel = sh.tunnel.then_some(sh.outer);
    let id = ipsec_core::control::SaId { src: sa.src, dst: sa.dst, proto: sa.proto, spi: sa.spi };
    let mut near = 0;
    for (i, n) in [0usize, 1, 63, 1400].into_iter().enumerate() {
        if sa.esn && i == 2 {
            // Jump across the 2^32 boundary: the next packets carry high bits 1.
            g.databases().sad.get(&id).unwrap().resume_sequence((1 << 32) - 1);
        }
        let plain = udp_packet(sh.inner.0, sh.inner.1, n);
        g.output(Packet::new(plain.clone())).map_err(|d| format!("our output dropped: {d}"))?;
        let esp = sink.take().pop().ok_or("nothing sent")?;
        near = g.databases().sad.get(&id).unwrap().last_sequence().max(near);
        let got = peer.decrypt_near(sa, tunnel, near, &esp).map_err(|e| format!("scapy: {e:?} (n={n})"))?;
        if got.packet != plain {
            return Err(format!("scapy decapsulated different bytes (n={n})"));
        }
        if got.seq != near {
            return Err(format!("scapy saw sequence {} for our {near}", got.seq));
        }
    }
    Ok(())
}

/// scapy → ours for one combination.
fn scapy_to_ours(peer: &ScapyPeer, sh: &Shape, sa: &SaSpec) -> Result<(), String> {
    let (g, sink) = gateway(sh, sa, Dir::In);
    let tunnel = sh.tunnel.then_some(sh.outer);
    let seqs: Vec<u64> =
        if sa.esn { vec![1, 2, (1 << 32) - 10, (1 << 32) + 6, (1 << 32) + 7] } else { vec![1, 2, 3, 1000] };
    for (i, seq) in seqs.into_iter().enumerate() {
        let plain = udp_packet(sh.inner.0, sh.inner.1, [0, 1, 63, 1400, 200][i % 5]);
        let esp = peer.encrypt(sa, tunnel, seq, &plain).map_err(|e| format!("scapy encrypt: {e}"))?;
        g.input(Packet::new(esp)).map_err(|d| format!("our input dropped seq {seq}: {d}"))?;
        let got = sink.take();
        if got != vec![plain] {
            return Err(format!(
                "seq {seq}: delivered {} packets, or different bytes ({})",
                got.len(),
                g.stats()
            ));
        }
    }
    if g.stats().total_drops() != 0 {
        return Err(format!("drops counted: {}", g.stats()));
    }
    Ok(())
}

#[test]
fn esp_interoperates_with_scapy_in_both_directions() {
    let Some(peer) = ScapyPeer::for_test() else { return };
    let mut failures = Vec::new();
    let mut rows = Vec::new();
    let mut cases = 0;
    for (name, enc, klen, auth) in algorithms() {
        for sh in shapes() {
            let mut cells = Vec::new();
            for esn in [false, true] {
                for natt in [false, true] {
                    let sa = spec(&sh, enc, klen, auth, esn, natt);
                    let out = ours_to_scapy(peer, &sh, &sa);
                    let inp = scapy_to_ours(peer, &sh, &sa);
                    cases += 2;
                    let mark = |r: &Result<(), String>| if r.is_ok() { "ok" } else { "FAIL" };
                    cells.push(format!("{}/{}", mark(&out), mark(&inp)));
                    for (dir, r) in [("ours→scapy", out), ("scapy→ours", inp)] {
                        if let Err(e) = r {
                            failures.push(format!("{name} {} esn={esn} natt={natt} {dir}: {e}", sh.name));
                        }
                    }
                }
            }
            rows.push(format!("{name:<26} {:<12} {}", sh.name, cells.join("  ")));
        }
    }
    println!("ESP interop with scapy 2.8.0 (each cell: ours→scapy / scapy→ours)");
    println!("{:<26} {:<12} plain  natt   esn    esn+natt", "algorithm", "mode");
    for r in &rows {
        println!("{r}");
    }
    println!("{cases} directed cases, {} failed", failures.len());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Traffic flow confidentiality padding (RFC 4303 §2.4): in tunnel mode a sender may put
/// bytes after the inner packet, inside ESP, to hide its length; the receiver knows the true
/// length from the inner IP header and discards the rest. Linux sends it with `ip xfrm state
/// … tfcpad N` (tests/kernel/xfrm). scapy encrypts the inner packet followed by zero bytes;
/// ours must deliver the inner packet alone, for IPv4 and IPv6 inside, and count no drop.
/// An inner packet whose header claims more than ESP carried is refused as `bad_inner`.
#[test]
fn tfc_padding_after_the_inner_packet_is_discarded() {
    let Some(peer) = ScapyPeer::for_test() else { return };
    for sh in shapes().into_iter().filter(|sh| sh.tunnel) {
        let sa = spec(&sh, EncAlg::AesGcm16, 20, None, false, false);
        let (g, sink) = gateway(&sh, &sa, Dir::In);
        let tunnel = Some(sh.outer);
        for (seq, n, pad) in [(1, 0, 1), (2, 63, 900), (3, 1200, 3)] {
            let plain = udp_packet(sh.inner.0, sh.inner.1, n);
            let mut padded = plain.clone();
            padded.resize(plain.len() + pad, 0);
            let esp = peer.encrypt(&sa, tunnel, seq, &padded).unwrap();
            g.input(Packet::new(esp)).unwrap_or_else(|d| panic!("{}: dropped: {d}", sh.name));
            assert_eq!(sink.take(), vec![plain], "{}: {pad} bytes of TFC padding delivered", sh.name);
        }
        assert_eq!(g.stats().total_drops(), 0, "{}: {}", sh.name, g.stats());
        // A header that claims one byte more than the packet it heads.
        let mut long = udp_packet(sh.inner.0, sh.inner.1, 20);
        let at = if sh.inner.0.is_ipv4() { 2 } else { 4 };
        let claimed = u16::from_be_bytes([long[at], long[at + 1]]) + 1;
        long[at..at + 2].copy_from_slice(&claimed.to_be_bytes());
        let esp = peer.encrypt(&sa, tunnel, 10, &long).unwrap();
        // The drop comes after decryption: counted, not returned by `input`.
        let _ = g.input(Packet::new(esp));
        assert!(
            sink.take().is_empty(),
            "{}: an inner packet longer than ESP's payload was delivered",
            sh.name
        );
        assert_eq!(g.stats().drops(ipsec_core::stats::Drop::BadInner), 1, "{}: {}", sh.name, g.stats());
    }
}

/// Sets the ECN field of the IPv4 or IPv6 header `b` starts with, as a router marking it
/// would (the IPv4 checksum follows).
fn mark_ecn(b: &mut [u8], ecn: u8) {
    use ipsec_wire::{ipv4, ipv6};
    if b[0] >> 4 == 4 {
        ipv4::Packet::new_unchecked(b).set_ecn_updating_checksum(ecn);
    } else {
        ipv6::Packet::new_unchecked(b).set_ecn(ecn);
    }
}

/// RFC 6040 §4.2 against scapy: scapy encrypts an inner packet, a router on the path marks
/// the outer header CE (ESP's ICV does not cover it), and ours must deliver the inner packet
/// marked CE where it is ECN-capable (ECT(0), ECT(1), CE: the IPv4 checksum updated) and
/// drop it as `ce_not_ect` where it is Not-ECT; every tunnel family, mixed ones too.
#[test]
fn a_ce_mark_on_the_outer_header_reaches_the_inner_packet() {
    use ipsec_core::stats::Drop;
    let Some(peer) = ScapyPeer::for_test() else { return };
    for sh in shapes().into_iter().filter(|sh| sh.tunnel) {
        let sa = spec(&sh, EncAlg::AesGcm16, 20, None, false, false);
        let (g, sink) = gateway(&sh, &sa, Dir::In);
        for (seq, inner_ecn) in [(1, 0b10), (2, 0b01), (3, 0b11), (4, 0b00)] {
            let mut plain = udp_packet(sh.inner.0, sh.inner.1, 100);
            mark_ecn(&mut plain, inner_ecn);
            let mut esp = peer.encrypt(&sa, Some(sh.outer), seq, &plain).unwrap();
            mark_ecn(&mut esp, 0b11);
            let _ = g.input(Packet::new(esp));
            let got = sink.take();
            if inner_ecn == 0 {
                assert!(got.is_empty(), "{}: Not-ECT under CE delivered", sh.name);
                continue;
            }
            let mut want = plain.clone();
            mark_ecn(&mut want, 0b11);
            assert_eq!(got, vec![want], "{}: inner ECN {inner_ecn:#04b} under CE", sh.name);
        }
        assert_eq!(g.stats().drops(Drop::CeNotEct), 1, "{}: {}", sh.name, g.stats());
        assert_eq!(g.stats().total_drops(), 1, "{}: {}", sh.name, g.stats());
    }
}

/// AH's algorithms: the HMACs scapy has, and AES-GMAC, which scapy's AH lacks (the peer
/// computes it with python-cryptography's AESGCM over scapy's zeroed packet: peer.py).
fn ah_algorithms() -> Vec<(&'static str, AuthAlg, usize)> {
    vec![
        ("hmac-sha1", AuthAlg::HmacSha1, 20),
        ("hmac-sha2-256", AuthAlg::HmacSha256, 32),
        ("hmac-sha2-384", AuthAlg::HmacSha384, 48),
        ("hmac-sha2-512", AuthAlg::HmacSha512, 64),
        ("aes-gmac/128", AuthAlg::AesGmac, 20),
        ("aes-gmac/256", AuthAlg::AesGmac, 36),
    ]
}

fn ah_spec(sh: &Shape, auth: AuthAlg, klen: usize, esn: bool) -> SaSpec {
    let key: Vec<u8> = (0..klen).map(|i| 0x5au8.wrapping_add((i as u8).wrapping_mul(17))).collect();
    SaSpec {
        proto: Proto::Ah,
        enc: EncAlg::Null,
        enc_key: KeyBytes::default(),
        auth: Some((auth, KeyBytes::new(&key))),
        ..spec(sh, EncAlg::Null, 0, None, esn, false)
    }
}

/// AH against scapy's `SecurityAssociation(AH, …)` both ways (the same two checks as ESP's:
/// the packet comes back unchanged, no drop counted), for every algorithm × tunnel (four
/// family pairs) and transport (IPv4, IPv6) × ESN, ESN crossing 2^32.
#[test]
fn ah_interoperates_with_scapy_in_both_directions() {
    let Some(peer) = ScapyPeer::for_test() else { return };
    let mut failures = Vec::new();
    let mut rows = Vec::new();
    let mut cases = 0;
    for (name, auth, klen) in ah_algorithms() {
        for sh in shapes() {
            let mut cells = Vec::new();
            for esn in [false, true] {
                let sa = ah_spec(&sh, auth, klen, esn);
                let out = ours_to_scapy(peer, &sh, &sa);
                let inp = scapy_to_ours(peer, &sh, &sa);
                cases += 2;
                let mark = |r: &Result<(), String>| if r.is_ok() { "ok" } else { "FAIL" };
                cells.push(format!("{}/{}", mark(&out), mark(&inp)));
                for (dir, r) in [("ours→scapy", out), ("scapy→ours", inp)] {
                    if let Err(e) = r {
                        failures.push(format!("{name} {} esn={esn} {dir}: {e}", sh.name));
                    }
                }
            }
            rows.push(format!("{name:<14} {:<12} {}", sh.name, cells.join("  ")));
        }
    }
    println!("AH interop with scapy 2.8.0 (each cell: ours→scapy / scapy→ours)");
    println!("{:<14} {:<12} plain  esn", "algorithm", "mode");
    for r in &rows {
        println!("{r}");
    }
    println!("{cases} directed cases, {} failed", failures.len());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// A change to a packet on its way.
type Damage<'a> = dyn Fn(&mut Vec<u8>) + 'a;

/// What AH's ICV covers, against scapy: a packet scapy signed still verifies after a
/// router's changes (TTL, DSCP and ECN, DF, checksum — IPv4; hop limit, traffic class, flow
/// label — IPv6) and fails after any change to a byte it covers (`auth_failed`, nothing
/// delivered); a replayed packet is `replay`, a short AH `ah_truncated` (IPv4; `malformed`
/// from the IPv6 header-chain walk); and scapy refuses
/// ours with a payload byte flipped. HMAC-SHA2-256 and AES-GMAC, transport IPv4 and IPv6.
#[test]
fn ah_icv_skips_mutable_fields_and_covers_the_rest() {
    use ipsec_core::stats::Drop;
    use ipsec_wire::{ipv4, ipv6};
    let Some(peer) = ScapyPeer::for_test() else { return };
    for (auth, klen) in [(AuthAlg::HmacSha256, 32), (AuthAlg::AesGmac, 20)] {
        for sh in shapes().into_iter().filter(|sh| !sh.tunnel) {
            let sa = ah_spec(&sh, auth, klen, false);
            let what = format!("{} {}", auth.name(), sh.name);
            let (g, sink) = gateway(&sh, &sa, Dir::In);
            let plain = udp_packet(sh.inner.0, sh.inner.1, 40);
            let v4 = sh.inner.0.is_ipv4();
            // A router's changes on the way.
            let ah = peer.encrypt(&sa, None, 1, &plain).unwrap();
            let mut routed = ah.clone();
            if v4 {
                let mut p = ipv4::Packet::new_unchecked(&mut routed[..]);
                p.set_ttl(3);
                p.set_dscp(46);
                p.set_ecn(3);
                p.set_dont_frag(true);
                p.fill_checksum();
            } else {
                let mut p = ipv6::Packet::new_unchecked(&mut routed[..]);
                p.set_hop_limit(3);
                p.set_traffic_class(0xb9);
                p.set_flow_label(0x12345);
            }
            g.input(Packet::new(routed)).unwrap_or_else(|d| panic!("{what}: routed packet dropped: {d}"));
            let got = sink.take();
            assert_eq!(got.len(), 1, "{what}");
            // Delivered with the header as it arrived (TTL 3), the payload as sent.
            assert_eq!(got[0][got[0].len() - 48..], plain[plain.len() - 48..], "{what}");
            // Replayed.
            let _ = g.input(Packet::new(ah.clone()));
            assert_eq!(g.stats().drops(Drop::Replay), 1, "{what}: {}", g.stats());
            // Covered bytes. Swapping two 16-bit words keeps every Internet checksum (the
            // parser checks IPv4's header and IPv6's UDP before AH is looked at), so what
            // fails is the ICV: the source address (the destination finds the SA), AH's
            // next header, reserved field and sequence number, the payload.
            let ah_at = if v4 { 20 } else { 40 };
            let swap = |b: &mut Vec<u8>, at: usize| {
                let (x, y) = ([b[at], b[at + 1]], [b[at + 2], b[at + 3]]);
                b[at..at + 2].copy_from_slice(&y);
                b[at + 2..at + 4].copy_from_slice(&x);
            };
            let src = if v4 { 12 } else { 8 };
            let damages: [&Damage<'_>; 5] = [
                &|b| swap(b, src),
                &|b| b[ah_at] ^= 1,
                &|b| b[ah_at + 2] ^= 1,
                &|b| b[ah_at + 11] ^= 0x40,
                &|b| {
                    let end = b.len() - 4;
                    swap(b, end)
                },
            ];
            for (i, damage) in damages.into_iter().enumerate() {
                let mut bad = peer.encrypt(&sa, None, 10 + i as u64, &plain).unwrap();
                damage(&mut bad);
                let before = g.stats().drops(Drop::AuthFailed);
                let _ = g.input(Packet::new(bad));
                assert!(sink.take().is_empty(), "{what}: damage {i} delivered");
                assert_eq!(
                    g.stats().drops(Drop::AuthFailed),
                    before + 1,
                    "{what}: damage {i}: {}",
                    g.stats()
                );
            }
            // Cut inside AH's fixed part.
            let short = peer.encrypt(&sa, None, 30, &plain).unwrap();
            let mut short = short[..ah_at + 8].to_vec();
            if v4 {
                let mut p = ipv4::Packet::new_unchecked(&mut short[..]);
                p.set_total_len((ah_at + 8) as u16);
                p.fill_checksum();
            } else {
                ipv6::Packet::new_unchecked(&mut short[..]).set_payload_len(8);
            }
            let _ = g.input(Packet::new(short));
            // Over IPv6 the parser's walk along the header chain already finds AH cut short.
            let why = if v4 { Drop::AhTruncated } else { Drop::Malformed };
            assert_eq!(g.stats().drops(why), 1, "{what}: {}", g.stats());
            assert_eq!(g.stats().total_drops(), 7, "{what}: {}", g.stats());
            // Ours, damaged, to scapy.
            let (g, sink) = gateway(&sh, &sa, Dir::Out);
            g.output(Packet::new(plain.clone())).unwrap();
            let mut ours = sink.take().pop().unwrap();
            let last = ours.len() - 1;
            ours[last] ^= 0x80;
            assert!(
                matches!(peer.decrypt(&sa, None, &ours), Err(common::scapy::PeerError::Integrity)),
                "{what}: scapy accepted a damaged packet of ours"
            );
        }
    }
}

/// `plain` (IPv4) with options in its header: No Operation, Record Route with room for one
/// address (mutable: zeroed in the ICV), Router Alert (immutable), End of List, padding.
fn with_ipv4_options(plain: &[u8]) -> Vec<u8> {
    let mut p = plain[..20].to_vec();
    p[0] = 0x49;
    p.extend([1, 7, 7, 4, 0, 0, 0, 0, 148, 4, 0, 0, 0, 0, 0, 0]);
    p.extend(&plain[20..]);
    let len = p.len() as u16;
    p[2..4].copy_from_slice(&len.to_be_bytes());
    ipsec_wire::ipv4::Packet::new_unchecked(&mut p[..]).fill_checksum();
    p
}

/// A router on the way: TTL down, its address recorded in Record Route, checksum anew.
fn route4(p: &mut [u8]) {
    p[8] -= 1;
    let ptr = usize::from(p[23]);
    p[20 + ptr..24 + ptr].copy_from_slice(&[203, 0, 113, 1]);
    p[23] += 4;
    ipsec_wire::ipv4::Packet::new_unchecked(p).fill_checksum();
}

/// A UDP packet from `src` to `last` by way of `hop` (a type 0 Routing header with one
/// address left), with Hop-by-Hop (an option 0x3e whose data may change on the way: the
/// change bit) and Destination Options (0x1e, which may not) in front of it.
fn ipv6_with_extension_headers(src: IpAddr, hop: IpAddr, last: IpAddr) -> Vec<u8> {
    let plain = udp_packet(src, last, 30);
    let (IpAddr::V6(hop), IpAddr::V6(last)) = (hop, last) else { unreachable!() };
    let mut p = plain[..40].to_vec();
    p[6] = 0; // Hop-by-Hop
    p[24..40].copy_from_slice(&hop.octets());
    p.extend([60, 0, 0x3e, 4, 0xa1, 0xa2, 0xa3, 0xa4]);
    p.extend([43, 0, 0x1e, 4, 0xd1, 0xd2, 0xd3, 0xd4]);
    p.extend([17, 2, 0, 1, 0, 0, 0, 0]);
    p.extend(last.octets());
    // The UDP checksum was computed to the final destination, as RFC 8200 §8.1 says.
    p.extend(&plain[40..]);
    let plen = (p.len() - 40) as u16;
    p[4..6].copy_from_slice(&plen.to_be_bytes());
    p
}

/// The first hop routes the packet on (RFC 8200 §4.4): its address goes into the list, the
/// next one into the destination, one segment less, one hop less, the Hop-by-Hop option
/// with the change bit rewritten.
fn route6(p: &mut [u8]) {
    const RH: usize = 56;
    let mut dst = [0u8; 16];
    dst.copy_from_slice(&p[24..40]);
    p.copy_within(RH + 8..RH + 24, 24);
    p[RH + 8..RH + 24].copy_from_slice(&dst);
    p[RH + 3] -= 1;
    p[7] -= 1;
    p[44..48].copy_from_slice(&[0xee; 4]);
}

/// AH over packets with IPv4 options and IPv6 extension headers, routed on the way, against
/// scapy both ways: what routers change (TTL, Record Route; hop limit, the Routing header's
/// order, a changing Hop-by-Hop option) must not break the ICV, and what they do not change
/// must be covered — the sender computes over the Routing header as it will arrive.
#[test]
fn ah_over_options_and_extension_headers_routed_on_the_way() {
    let Some(peer) = ScapyPeer::for_test() else { return };
    for (auth, klen) in [(AuthAlg::HmacSha1, 20), (AuthAlg::AesGmac, 36)] {
        // IPv4 with options.
        let sh = &shapes()[4];
        let sa = ah_spec(sh, auth, klen, false);
        let plain = with_ipv4_options(&udp_packet(sh.inner.0, sh.inner.1, 30));
        let mut routed_plain = plain.clone();
        route4(&mut routed_plain);
        let (g, sink) = gateway(sh, &sa, Dir::Out);
        g.output(Packet::new(plain.clone())).unwrap();
        let mut ours = sink.take().pop().unwrap();
        route4(&mut ours);
        let got = peer.decrypt(&sa, None, &ours).unwrap_or_else(|e| panic!("{}: scapy: {e:?}", auth.name()));
        assert_eq!(got, routed_plain, "{}: IPv4 options, ours to scapy", auth.name());
        let (g, sink) = gateway(sh, &sa, Dir::In);
        let mut theirs = peer.encrypt(&sa, None, 1, &plain).unwrap();
        route4(&mut theirs);
        g.input(Packet::new(theirs)).unwrap_or_else(|d| panic!("{}: IPv4 options: {d}", auth.name()));
        assert_eq!(sink.take(), vec![routed_plain], "{}: IPv4 options, scapy to ours", auth.name());

        // IPv6 with extension headers, by way of a first hop.
        let (src, hop, last) = (ip("2001:db8::1"), ip("2001:db8::99"), ip("2001:db8::2"));
        let plain = ipv6_with_extension_headers(src, hop, last);
        let mut routed_plain = plain.clone();
        route6(&mut routed_plain);
        let to_hop =
            Shape { name: "transport 6 via a hop", tunnel: false, outer: (src, hop), inner: (src, hop) };
        let to_last = Shape { name: "transport 6", tunnel: false, outer: (src, last), inner: (src, last) };
        let (out_sa, in_sa) = (ah_spec(&to_hop, auth, klen, false), ah_spec(&to_last, auth, klen, false));
        let (g, sink) = gateway(&to_hop, &out_sa, Dir::Out);
        g.output(Packet::new(plain.clone())).unwrap();
        let mut ours = sink.take().pop().unwrap();
        route6(&mut ours);
        let got =
            peer.decrypt(&in_sa, None, &ours).unwrap_or_else(|e| panic!("{}: scapy: {e:?}", auth.name()));
        assert_eq!(got, routed_plain, "{}: IPv6 extension headers, ours to scapy", auth.name());
        let (g, sink) = gateway(&to_last, &in_sa, Dir::In);
        let mut theirs = peer.encrypt(&out_sa, None, 1, &plain).unwrap();
        route6(&mut theirs);
        g.input(Packet::new(theirs))
            .unwrap_or_else(|d| panic!("{}: IPv6 extension headers: {d}", auth.name()));
        assert_eq!(sink.take(), vec![routed_plain], "{}: IPv6 extension headers, scapy to ours", auth.name());
        assert_eq!(g.stats().total_drops(), 0, "{}", g.stats());
    }
}

/// A core with `sas` and `policies` installed, and the sink its results land in.
fn gateway_with(sas: &[SaSpec], policies: &[PolicySpec]) -> (Gw, Arc<Collect>) {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let sink = Arc::new(Collect::default());
    let g = Gateway::new(fw, sink.clone());
    for sa in sas {
        g.control(&Request::AddSa(sa.clone())).unwrap();
    }
    for p in policies {
        g.control(&Request::AddPolicy(p.clone())).unwrap();
    }
    (g, sink)
}

/// An inbound policy from `src` to `dst` (hosts) asking for one rule.
fn inbound(
    src: IpAddr,
    dst: IpAddr,
    proto: Proto,
    mode: Mode,
    tunnel: Option<(IpAddr, IpAddr)>,
) -> PolicySpec {
    let host = |a: IpAddr| Prefix { addr: a, len: if a.is_ipv4() { 32 } else { 128 } };
    PolicySpec {
        selector: Selector { src: host(src), dst: host(dst), sport: None, dport: None, upper: Upper::Any },
        dir: Dir::In,
        action: Action::Protect(vec![Rule { proto, mode, tunnel, level: Level::Require }]),
    }
}

/// RFC 4301 §5.2 against scapy's ESP and AH: after decapsulation the inner packet must
/// match the selectors of the SA it came through. A tunnel SA's selectors are the inbound
/// policy it serves: an inner packet that no inbound policy covers is dropped as
/// `no_inbound_policy` (the hole: it was delivered, so a peer holding one SA's key could
/// inject packets from any inner address), also with no inbound policy at all; one a policy
/// covers must have come through the SA (and in the mode) its rule names — another peer's
/// tunnel, or a tunnel where the rule says transport, is `policy`. A transport SA's selector
/// is its own ends: a packet whose outer source is not the SA's is `sa_selector`; one with
/// the SA's addresses that no policy covers is delivered, as in Linux (the addresses are
/// the SA's own, as they would be in the clear). ESP raw and in UDP, AH; IPv4 and IPv6.
#[test]
fn a_decapsulated_packet_outside_the_sas_selectors_is_dropped() {
    use ipsec_core::stats::Drop;
    let Some(peer) = ScapyPeer::for_test() else { return };
    let mut cases = 0;
    for sh in shapes().into_iter().filter(|sh| sh.outer.0.is_ipv4() == sh.inner.0.is_ipv4()) {
        let (v4, (o1, o2), (h1, h2)) = (sh.outer.0.is_ipv4(), sh.outer, sh.inner);
        let (stranger, other_peer, other_net) = if v4 {
            (ip("10.77.0.1"), ip("192.0.2.3"), ip("10.3.0.1"))
        } else {
            (ip("fd00:77::1"), ip("2001:db8::3"), ip("fd00:3::1"))
        };
        let variants = [
            ("esp", spec(&sh, EncAlg::AesGcm16, 20, None, false, false)),
            ("esp-udp", spec(&sh, EncAlg::AesGcm16, 20, None, false, true)),
            ("ah", ah_spec(&sh, AuthAlg::HmacSha256, 32, false)),
        ];
        for (kind, sa) in variants {
            let what = format!("{kind} {}", sh.name);
            let proto = if sa.proto == Proto::Ah { Proto::Ah } else { Proto::Esp };
            let tunnel = sh.tunnel.then_some(sh.outer);
            let mode = sa.mode;
            let ours = inbound(h1, h2, proto, mode, tunnel);
            let mut seq = 0;
            // Sends `plain` through scapy over `sa` to a gateway; what it delivered and the
            // drops it counted.
            let mut send = |g: &Gw, sink: &Collect, sa: &SaSpec, tunnel, plain: &[u8]| {
                seq += 1;
                let wire = peer.encrypt(sa, tunnel, seq, plain).unwrap_or_else(|e| panic!("{what}: {e}"));
                let _ = g.input(Packet::new(wire));
                sink.take()
            };
            if sh.tunnel {
                // The policy's own traffic passes; a stranger's inner source does not.
                let (g, sink) = gateway_with(std::slice::from_ref(&sa), std::slice::from_ref(&ours));
                let plain = udp_packet(h1, h2, 40);
                assert_eq!(send(&g, &sink, &sa, tunnel, &plain), vec![plain], "{what}: the policy's traffic");
                let forged = udp_packet(stranger, h2, 40);
                assert!(
                    send(&g, &sink, &sa, tunnel, &forged).is_empty(),
                    "{what}: a stranger's source delivered"
                );
                assert_eq!(g.stats().drops(Drop::NoInboundPolicy), 1, "{what}: {}", g.stats());
                // No inbound policy at all (the case: B's `-P in` removed).
                let (g, sink) = gateway_with(std::slice::from_ref(&sa), &[]);
                let plain = udp_packet(h1, h2, 40);
                assert!(send(&g, &sink, &sa, tunnel, &plain).is_empty(), "{what}: delivered with no policy");
                assert_eq!(g.stats().drops(Drop::NoInboundPolicy), 1, "{what}: {}", g.stats());
                // A gateway with two peers: the other peer's SA carrying this peer's network.
                // (An AEAD key of its own: the SAD refuses one installed twice.)
                let key = if sa.enc.is_aead() { KeyBytes::new(&[0x77; 20]) } else { sa.enc_key.clone() };
                let theirs = SaSpec { src: other_peer, spi: sa.spi + 2, enc_key: key, ..sa.clone() };
                let theirs_policy = inbound(other_net, h2, proto, mode, Some((other_peer, o2)));
                let (g, sink) = gateway_with(&[sa.clone(), theirs.clone()], &[ours.clone(), theirs_policy]);
                let ends = Some((other_peer, o2));
                assert_eq!(send(&g, &sink, &theirs, ends, &udp_packet(other_net, h2, 40)).len(), 1, "{what}");
                assert!(
                    send(&g, &sink, &theirs, ends, &udp_packet(h1, h2, 40)).is_empty(),
                    "{what}: spoofed"
                );
                assert_eq!(g.stats().drops(Drop::Policy), 1, "{what}: {}", g.stats());
                // A policy whose rule is transport mode, met by a tunnel SA.
                let transport_rule = inbound(h1, h2, proto, Mode::Transport, None);
                let (g, sink) = gateway_with(std::slice::from_ref(&sa), &[transport_rule]);
                assert!(send(&g, &sink, &sa, tunnel, &udp_packet(h1, h2, 40)).is_empty(), "{what}: mode");
                assert_eq!(g.stats().drops(Drop::Policy), 1, "{what}: {}", g.stats());
            } else {
                // With no policy, a packet with the SA's own addresses passes.
                let (g, sink) = gateway_with(std::slice::from_ref(&sa), &[]);
                let plain = udp_packet(o1, o2, 40);
                assert_eq!(
                    send(&g, &sink, &sa, None, &plain),
                    vec![plain],
                    "{what}: no policy, own addresses"
                );
                // The key holder writes another outer source: not the SA's, with or without
                // a policy that covers that source.
                let spoofed = if v4 { ip("192.0.2.9") } else { ip("2001:db8::9") };
                let cover = inbound(spoofed, o2, proto, mode, None);
                for policies in [vec![ours.clone()], vec![ours.clone(), cover]] {
                    let (g, sink) = gateway_with(std::slice::from_ref(&sa), &policies);
                    let forged = udp_packet(spoofed, o2, 40);
                    assert!(
                        send(&g, &sink, &sa, None, &forged).is_empty(),
                        "{what}: spoofed source delivered"
                    );
                    assert_eq!(g.stats().drops(Drop::SaSelector), 1, "{what}: {}", g.stats());
                }
            }
            cases += 1;
        }
    }
    assert_eq!(cases, 12);
}

/// ESP in UDP sent to another port than the SA names for this end is dropped as `udp_port`
/// (scapy encapsulates to port 4999; the ICV does not cover the UDP header, so the packet
/// is otherwise the SA's); from another source port it is delivered (a NAT may change that
/// port, `the_newest_authenticated_packet_moves_the_peer_and_nothing_else_does`).
#[test]
fn esp_in_udp_to_a_port_not_the_sas_is_dropped() {
    use ipsec_core::stats::Drop;
    let Some(peer) = ScapyPeer::for_test() else { return };
    for sh in shapes() {
        let sa = spec(&sh, EncAlg::AesGcm16, 20, None, false, true);
        let (g, sink) = gateway(&sh, &sa, Dir::In);
        let tunnel = sh.tunnel.then_some(sh.outer);
        let plain = udp_packet(sh.inner.0, sh.inner.1, 40);
        let elsewhere = SaSpec { natt: Some(NatT { sport: 4500, dport: 4999 }), ..sa.clone() };
        let wire = peer.encrypt(&elsewhere, tunnel, 1, &plain).unwrap();
        assert_eq!(g.input(Packet::new(wire)), Err(Drop::UdpPort), "{}", sh.name);
        assert!(sink.take().is_empty(), "{}", sh.name);
        let moved = SaSpec { natt: Some(NatT { sport: 4600, dport: 4500 }), ..sa.clone() };
        let wire = peer.encrypt(&moved, tunnel, 2, &plain).unwrap();
        g.input(Packet::new(wire)).unwrap_or_else(|d| panic!("{}: from another source port: {d}", sh.name));
        assert_eq!(sink.take(), vec![plain], "{}", sh.name);
        assert_eq!(g.stats().total_drops(), 1, "{}: {}", sh.name, g.stats());
    }
}
