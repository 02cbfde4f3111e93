//! The scapy peer harness itself (tests/common/scapy.rs, tests/scapy/peer.py): scapy encrypts
//! and decrypts its own packets for every algorithm, mode, address family, with and without
//! ESN and NAT-T, the wire layout is what RFC 4303 / RFC 3948 say, and damage is reported as
//! an integrity failure. This checks the harness (our SA → scapy's SA, the sequence-number
//! split, the framing it reports), not ipsec-core's ESP, which the interop tests compare with
//! it.

mod common;

use std::net::IpAddr;

use common::scapy::{PeerError, ScapyPeer};
use ipsec_core::control::{AuthAlg, EncAlg, KeyBytes, Lifetime, Mode, NatT, Proto, SaSpec};

const TUNNEL_V4: (&str, &str) = ("192.0.2.1", "192.0.2.2");
const TUNNEL_V6: (&str, &str) = ("2001:db8::1", "2001:db8::2");
const INNER_V4: ([u8; 4], [u8; 4]) = ([10, 0, 0, 1], [10, 0, 0, 2]);
const INNER_V6: ([u8; 16], [u8; 16]) = (
    [0x20, 1, 0xd, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0x20, 1, 0xd, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
);

fn key(len: usize, seed: u8) -> KeyBytes {
    KeyBytes::new(&(0..len).map(|i| seed.wrapping_add((i as u8).wrapping_mul(7))).collect::<Vec<_>>())
}

fn spec(
    enc: EncAlg,
    key_len: usize,
    auth: Option<AuthAlg>,
    mode: Mode,
    esn: bool,
    natt: Option<NatT>,
) -> SaSpec {
    SaSpec {
        src: "192.0.2.1".parse().unwrap(),
        dst: "192.0.2.2".parse().unwrap(),
        proto: if natt.is_some() { Proto::EspUdp } else { Proto::Esp },
        spi: 0x1000_0001,
        mode,
        reqid: 0,
        enc,
        enc_key: key(key_len, 0x11),
        auth: auth.map(|a| (a, key(a.key_len(), 0x51))),
        replay_window: 64,
        esn,
        natt,
        hard: Lifetime::default(),
        soft: Lifetime::default(),
    }
}

/// Every algorithm combination our SAs allow, with every key length.
fn algorithms() -> Vec<(EncAlg, usize, Option<AuthAlg>)> {
    let mut algs = Vec::new();
    for enc in EncAlg::ALL {
        for &key_len in enc.key_lens() {
            if enc.is_aead() {
                algs.push((enc, key_len, None));
            } else {
                algs.extend(AuthAlg::ALL.map(|a| (enc, key_len, Some(a))));
            }
        }
    }
    algs
}

/// RFC 1071 checksum of `data` added to `sum`.
fn checksum(mut sum: u32, data: &[u8]) -> u16 {
    for chunk in data.chunks(2) {
        sum += u32::from(u16::from_be_bytes([chunk[0], *chunk.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A UDP datagram with its checksum over the pseudo-header `pseudo` (addresses).
fn udp(pseudo: &[u8], payload: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut udp =
        [&1234u16.to_be_bytes()[..], &5678u16.to_be_bytes(), &len.to_be_bytes(), &[0, 0], payload].concat();
    let sum = checksum(u32::from(len) + 17, &[pseudo, &udp].concat());
    udp[6..8].copy_from_slice(&if sum == 0 { 0xffff } else { sum }.to_be_bytes());
    udp
}

fn ipv4_udp(payload: &[u8]) -> Vec<u8> {
    let (src, dst) = INNER_V4;
    let udp = udp(&[src, dst].concat(), payload);
    let total = (20 + udp.len()) as u16;
    let mut ip =
        [&[0x45, 0][..], &total.to_be_bytes(), &[0x12, 0x34, 0x40, 0, 64, 17, 0, 0], &src, &dst].concat();
    let sum = checksum(0, &ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    [ip, udp].concat()
}

/// An IPv6 UDP packet, with a Hop-by-Hop Options header (PadN only) when `hop_by_hop`.
fn ipv6_udp(payload: &[u8], hop_by_hop: bool) -> Vec<u8> {
    let (src, dst) = INNER_V6;
    let udp = udp(&[src, dst].concat(), payload);
    let ext: &[u8] = if hop_by_hop { &[17, 0, 1, 4, 0, 0, 0, 0] } else { &[] };
    let plen = (ext.len() + udp.len()) as u16;
    let nh = if hop_by_hop { 0 } else { 17 };
    [&[0x60, 0, 0, 0][..], &plen.to_be_bytes(), &[nh, 64], &src, &dst, ext, &udp].concat()
}

fn addrs(pair: (&str, &str)) -> (IpAddr, IpAddr) {
    (pair.0.parse().unwrap(), pair.1.parse().unwrap())
}

/// What RFC 4303 says scapy's ESP for these algorithms must look like: IV length, the
/// alignment of payload ‖ padding ‖ trailer, ICV length.
fn layout(enc: EncAlg, auth: Option<AuthAlg>) -> (usize, usize, usize) {
    let (iv, align) = match enc {
        EncAlg::Null => (0, 4),
        EncAlg::AesCbc => (16, 16),
        EncAlg::TdesCbc => (8, 8),
        EncAlg::AesGcm16 | EncAlg::ChaCha20Poly1305 => (8, 4),
    };
    let icv = auth.map_or(16, AuthAlg::icv_len);
    (iv, align, icv)
}

/// One scapy round trip, checking the wire layout, the framing scapy reports, and that a
/// damaged ICV or ciphertext fails the integrity check. Returns a description of the first
/// problem.
fn round_trip(
    peer: &ScapyPeer,
    spec: &SaSpec,
    tunnel: Option<(IpAddr, IpAddr)>,
    seq: u64,
    plain: &[u8],
) -> Result<(), String> {
    let wire = peer.encrypt(spec, tunnel, seq, plain)?;
    let outer_v6 = wire[0] >> 4 == 6;
    let want_v6 = match tunnel {
        Some((src, _)) => src.is_ipv6(),
        None => plain[0] >> 4 == 6,
    };
    if outer_v6 != want_v6 {
        return Err("outer header of the wrong family".into());
    }
    let (mut esp, proto) = if outer_v6 { (40, wire[6]) } else { (usize::from(wire[0] & 0xf) * 4, wire[9]) };
    if let Some(natt) = spec.natt {
        let udp = &wire[esp..esp + 8];
        let want = [
            &natt.sport.to_be_bytes()[..],
            &natt.dport.to_be_bytes(),
            &((wire.len() - esp) as u16).to_be_bytes(),
            &[0, 0],
        ]
        .concat();
        if proto != 17 || udp != want {
            return Err(format!("NAT-T UDP header {udp:02x?}, protocol {proto}"));
        }
        esp += 8;
    } else if proto != 50 {
        return Err(format!("outer protocol {proto}, not ESP"));
    }
    if wire[esp..esp + 4] != spec.spi.to_be_bytes() || wire[esp + 4..esp + 8] != (seq as u32).to_be_bytes() {
        return Err(format!("ESP header {:02x?}", &wire[esp..esp + 8]));
    }
    let (iv_len, align, icv_len) = layout(spec.enc, spec.auth.as_ref().map(|a| a.0));
    let (inner, next_header) = match tunnel {
        Some(_) => (plain.len(), if plain[0] >> 4 == 6 { 41 } else { 4 }),
        None => (plain.len() - if outer_v6 { 40 } else { 20 }, 17),
    };
    let pad = (align - (inner + 2) % align) % align;
    if wire.len() - esp != 8 + iv_len + inner + pad + 2 + icv_len {
        return Err(format!("ESP of {} bytes; {inner} bytes of payload", wire.len() - esp));
    }

    let got = peer.decrypt_near(spec, tunnel, seq, &wire).map_err(|e| format!("decrypt: {e}"))?;
    if got.packet != plain {
        return Err(format!("decrypted {:02x?}", got.packet));
    }
    let monotonic: Vec<u8> = (1..=pad as u8).collect();
    if got.seq != seq || got.iv != wire[esp + 8..esp + 8 + iv_len] || got.padding != monotonic {
        return Err(format!("framing: seq {:#x}, iv {:02x?}, padding {:02x?}", got.seq, got.iv, got.padding));
    }
    if got.next_header != next_header {
        return Err(format!("next header {}", got.next_header));
    }

    // The last byte is in the ICV; the one after the IV is ciphertext (plaintext for NULL).
    for at in [wire.len() - 1, esp + 8 + iv_len] {
        let mut bad = wire.clone();
        bad[at] ^= 0x40;
        match peer.decrypt_near(spec, tunnel, seq, &bad) {
            Err(PeerError::Integrity) => {}
            other => return Err(format!("byte {at} damaged: {other:?}")),
        }
    }
    Ok(())
}

#[test]
fn round_trips_every_algorithm_mode_family_esn_and_natt() {
    let Some(peer) = ScapyPeer::for_test() else { return };
    let shapes = [
        (Mode::Tunnel, Some(TUNNEL_V4), false),
        (Mode::Tunnel, Some(TUNNEL_V4), true),
        (Mode::Tunnel, Some(TUNNEL_V6), false),
        (Mode::Tunnel, Some(TUNNEL_V6), true),
        (Mode::Transport, None, false),
        (Mode::Transport, None, true),
    ];
    let natts = [None, Some(NatT { sport: 4500, dport: 4500 })];
    let mut n = 0u64;
    let mut failures = Vec::new();
    for (enc, key_len, auth) in algorithms() {
        for (mode, tunnel, inner_v6) in shapes {
            for esn in [false, true] {
                for natt in natts {
                    n += 1;
                    // Payload lengths 0..=36 in turn reach every padding length; with ESN,
                    // sequence numbers above 2^32 make the high bits matter.
                    let payload: Vec<u8> = (0..n % 37).map(|i| i as u8).collect();
                    let plain = if inner_v6 { ipv6_udp(&payload, false) } else { ipv4_udp(&payload) };
                    let seq = if esn { (n % 3 + 1) << 32 | n } else { n };
                    let spec = spec(enc, key_len, auth, mode, esn, natt);
                    if let Err(why) = round_trip(peer, &spec, tunnel.map(addrs), seq, &plain) {
                        let auth = auth.map_or("-", AuthAlg::name);
                        failures.push(format!(
                            "{}/{key_len} {auth} {mode:?} tunnel {tunnel:?} inner v6 {inner_v6} esn {esn} \
                             natt {natt:?}: {why}",
                            enc.name()
                        ));
                    }
                }
            }
        }
    }
    assert_eq!(n, 24 * 6 * 4);
    assert!(failures.is_empty(), "{} of {n} failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn natt_ports_other_than_4500() {
    let Some(peer) = ScapyPeer::for_test() else { return };
    // scapy only dissects UDP as ESP when a port is 4500; the peer reparses it otherwise.
    for (sport, dport) in [(4500, 61000), (61000, 4500), (5000, 5001)] {
        let natt = Some(NatT { sport, dport });
        for (mode, tunnel) in [(Mode::Tunnel, Some(addrs(TUNNEL_V4))), (Mode::Transport, None)] {
            let spec = spec(EncAlg::AesGcm16, 20, None, mode, false, natt);
            round_trip(peer, &spec, tunnel, 7, &ipv4_udp(b"nat-t")).unwrap();
        }
    }
}

#[test]
fn esn_high_bits_are_authenticated_not_sent() {
    let Some(peer) = ScapyPeer::for_test() else { return };
    let tunnel = Some(addrs(TUNNEL_V4));
    let plain = ipv4_udp(b"esn");
    for (enc, key_len, auth) in
        [(EncAlg::AesGcm16, 36, None), (EncAlg::AesCbc, 16, Some(AuthAlg::HmacSha256))]
    {
        let spec = spec(enc, key_len, auth, Mode::Tunnel, true, None);
        // Low halves 0 and all ones: scapy's own seq_num argument would treat 0 as "unset".
        for seq in [5 << 32, 5 << 32 | 0xffff_ffff, u64::MAX] {
            round_trip(peer, &spec, tunnel, seq, &plain).unwrap();
            let wire = peer.encrypt(&spec, tunnel, seq, &plain).unwrap();
            // The receiver guessing other high bits must fail, which it only can if the
            // high bits went into the ICV or AAD.
            let wrong = (seq >> 32 ^ 1) << 32 | (seq & 0xffff_ffff);
            assert_eq!(peer.decrypt_near(&spec, tunnel, wrong, &wire).unwrap_err(), PeerError::Integrity);
        }
    }
    // Without ESN only 32 bits exist.
    let spec = spec(EncAlg::AesGcm16, 20, None, Mode::Tunnel, false, None);
    assert!(peer.encrypt(&spec, tunnel, 1 << 32, &plain).is_err());
}

#[test]
fn tampered_or_wrongly_keyed_packets_fail_integrity() {
    let Some(peer) = ScapyPeer::for_test() else { return };
    let plain = ipv6_udp(b"tamper", false);
    for (enc, key_len, auth) in algorithms() {
        let spec = spec(enc, key_len, auth, Mode::Transport, false, None);
        let wire = peer.encrypt(&spec, None, 1, &plain).unwrap();
        for at in 40..wire.len() {
            let mut bad = wire.clone();
            bad[at] ^= 1;
            let got = peer.decrypt(&spec, None, &bad);
            // The SPI is checked before the ICV, so damage there is not an integrity failure.
            if at < 44 {
                assert!(matches!(got, Err(PeerError::Other(_))), "{} byte {at}: {got:?}", enc.name());
            } else {
                assert_eq!(got, Err(PeerError::Integrity), "{} byte {at}", enc.name());
            }
        }
        let mut other = spec.clone();
        match &mut other.auth {
            Some((a, _)) => other.auth = Some((*a, key(a.key_len(), 0x99))),
            None => other.enc_key = key(key_len, 0x99),
        }
        assert_eq!(peer.decrypt(&other, None, &wire), Err(PeerError::Integrity), "{}", enc.name());
    }
}

#[test]
fn explicit_iv_makes_output_reproducible() {
    let Some(peer) = ScapyPeer::for_test() else { return };
    let tunnel = Some(addrs(TUNNEL_V6));
    let plain = ipv4_udp(b"same bytes twice");
    let seq: u64 = 0x0102_0304_0506_0708;
    for (enc, key_len, auth, iv_len) in [
        (EncAlg::ChaCha20Poly1305, 36, None, 8),
        (EncAlg::AesCbc, 32, Some(AuthAlg::HmacSha512), 16),
        (EncAlg::TdesCbc, 24, Some(AuthAlg::HmacSha1), 8),
        (EncAlg::Null, 0, Some(AuthAlg::HmacSha384), 0),
    ] {
        let spec = spec(enc, key_len, auth, Mode::Tunnel, true, None);
        // Our AEAD IV is the 64-bit sequence number; any IV will do for the others.
        let iv = &seq.to_be_bytes().repeat(2)[..iv_len];
        let a = peer.encrypt_with_iv(&spec, tunnel, seq, iv, &plain).unwrap();
        let b = peer.encrypt_with_iv(&spec, tunnel, seq, iv, &plain).unwrap();
        assert_eq!(a, b, "{}", enc.name());
        assert_eq!(&a[48..48 + iv_len], iv, "{}", enc.name());
        assert!(peer.encrypt_with_iv(&spec, tunnel, seq, &[0; 3], &plain).is_err());
    }
}

#[test]
fn ipv6_transport_puts_esp_after_hop_by_hop() {
    let Some(peer) = ScapyPeer::for_test() else { return };
    let sa = spec(EncAlg::AesGcm16, 28, None, Mode::Transport, false, None);
    let plain = ipv6_udp(b"ext", true);
    let wire = peer.encrypt(&sa, None, 9, &plain).unwrap();
    assert_eq!((wire[6], wire[40]), (0, 50), "IPv6 → Hop-by-Hop → ESP");
    assert_eq!(wire[48..52], sa.spi.to_be_bytes());
    assert_eq!(peer.decrypt(&sa, None, &wire).unwrap(), plain);
    // scapy gets this combination wrong; the peer says so rather than produce bad packets.
    let natt =
        spec(EncAlg::AesGcm16, 28, None, Mode::Transport, false, Some(NatT { sport: 4500, dport: 4500 }));
    assert!(peer.encrypt(&natt, None, 9, &plain).unwrap_err().contains("extension headers"));
}

#[test]
fn refusals_are_errors_not_integrity_failures() {
    let Some(peer) = ScapyPeer::for_test() else { return };
    let plain = ipv4_udp(b"x");
    let tunnel = Some(addrs(TUNNEL_V4));
    let mut bad_key = spec(EncAlg::AesCbc, 16, Some(AuthAlg::HmacSha1), Mode::Tunnel, false, None);
    bad_key.enc_key = key(15, 0);
    assert!(peer.encrypt(&bad_key, tunnel, 1, &plain).unwrap_err().contains("key of 15 bytes"));
    let tunnel_spec = spec(EncAlg::AesCbc, 16, Some(AuthAlg::HmacSha1), Mode::Tunnel, false, None);
    assert!(peer.encrypt(&tunnel_spec, None, 1, &plain).is_err());
    let transport = spec(EncAlg::AesCbc, 16, Some(AuthAlg::HmacSha1), Mode::Transport, false, None);
    assert!(peer.encrypt(&transport, tunnel, 1, &plain).is_err());
    // Mode any: the endpoints decide.
    let any = spec(EncAlg::AesCbc, 16, Some(AuthAlg::HmacSha1), Mode::Any, false, None);
    round_trip(peer, &any, tunnel, 1, &plain).unwrap();
    round_trip(peer, &any, None, 1, &plain).unwrap();
    assert!(matches!(peer.decrypt(&any, None, &plain), Err(PeerError::Other(_))));
    assert!(matches!(peer.decrypt(&any, None, &[]), Err(PeerError::Other(_))));
}
