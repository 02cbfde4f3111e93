//! Valid packets end to end through `parse_any`, then the same packets cut at every length
//! and mutated at random (a fixed-seed xorshift, so failures reproduce): no parser may
//! panic, and whatever parses must be consistent with the buffer it came from.

use std::net::{Ipv4Addr, Ipv6Addr};

use ipsec_wire::esp::Trailer;
use ipsec_wire::icmp;
use ipsec_wire::ipv6_ext::{AuthHeader, ExtHeader, FragmentHeader};
use ipsec_wire::udp_encap::{self, Encapsulated};
use ipsec_wire::{
    esp, ipv4, ipv6, parse_any, parse_any_with, udp, ChecksumPolicy, Encap, IpProtocol, PseudoHeader, Upper,
};

const V4_SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const V4_DST: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);

fn v6_src() -> Ipv6Addr {
    "2001:db8::1".parse().expect("address")
}

fn v6_dst() -> Ipv6Addr {
    "2001:db8::2".parse().expect("address")
}

/// An IPv4 packet around `payload`, with `options` (a multiple of 4 bytes), emitted and
/// checksummed by the crate itself.
fn ipv4_packet(protocol: IpProtocol, options: &[u8], payload: &[u8], more_frags: bool) -> Vec<u8> {
    let header_len = 20 + options.len();
    let repr = ipv4::Repr {
        src_addr: V4_SRC,
        dst_addr: V4_DST,
        protocol,
        payload_len: payload.len(),
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 0x1234,
        dont_frag: !more_frags,
        more_frags,
        frag_offset: 0,
    };
    let mut out = vec![0; header_len + payload.len()];
    repr.emit(&mut ipv4::Packet::new_unchecked(&mut out[..])).expect("fits");
    out[20..header_len].copy_from_slice(options);
    out[header_len..].copy_from_slice(payload);
    let mut p = ipv4::Packet::new_unchecked(&mut out[..]);
    p.set_header_len(header_len);
    p.set_total_len((header_len + payload.len()) as u16);
    p.fill_checksum();
    out
}

/// A UDP datagram, checksummed under `pseudo` or left at 0.
fn udp_datagram(src_port: u16, dst_port: u16, payload: &[u8], pseudo: Option<&PseudoHeader>) -> Vec<u8> {
    let repr = udp::Repr { src_port, dst_port, payload_len: payload.len() };
    let mut out = vec![0; repr.buffer_len()];
    out[8..].copy_from_slice(payload);
    repr.emit(&mut udp::Packet::new_unchecked(&mut out[..]), pseudo).expect("fits");
    out
}

/// An IPv6 packet: fixed header (next header `first`) and `rest`.
fn ipv6_packet(first: IpProtocol, rest: &[u8]) -> Vec<u8> {
    let repr = ipv6::Repr {
        src_addr: v6_src(),
        dst_addr: v6_dst(),
        next_header: first,
        payload_len: rest.len(),
        hop_limit: 64,
        dscp: 0,
        ecn: 0,
        flow_label: 0,
    };
    let mut out = vec![0; repr.buffer_len()];
    out[40..].copy_from_slice(rest);
    repr.emit(&mut ipv6::Packet::new_unchecked(&mut out[..])).expect("fits");
    out
}

fn esp_bytes(spi: u32, seq: u32, body_len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(spi.to_be_bytes());
    out.extend(seq.to_be_bytes());
    out.extend((0..body_len).map(|i| (i * 7) as u8));
    out
}

fn ike_payload() -> Vec<u8> {
    let mut out = udp_encap::NON_ESP_MARKER.to_vec();
    out.extend([1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0, 33, 0x20, 34, 0x08, 0, 0, 0, 0, 0, 0, 0, 28]);
    out
}

/// The valid packets, each with what `parse_any` must say about it.
fn corpus() -> Vec<(&'static str, Vec<u8>, Upper)> {
    let v4 = PseudoHeader::V4 { src: V4_SRC, dst: V4_DST };
    let v6 = PseudoHeader::V6 { src: v6_src(), dst: v6_dst() };
    let esp_repr = esp::Repr { spi: 0x1000, sequence_number: 7 };
    let nat_t = udp_encap::NAT_T_PORT;

    let mut out = Vec::new();
    out.push((
        "ipv4 esp",
        ipv4_packet(IpProtocol::ESP, &[], &esp_bytes(0x1000, 7, 48), false),
        Upper::Esp(esp_repr),
    ));
    let datagram = udp_datagram(nat_t, nat_t, &esp_bytes(0x1000, 7, 40), None);
    out.push((
        "ipv4 udp-esp, checksum 0",
        ipv4_packet(IpProtocol::UDP, &[], &datagram, false),
        Upper::UdpEncap(
            udp::Repr { src_port: nat_t, dst_port: nat_t, payload_len: 48 },
            Encap::Esp(esp_repr),
        ),
    ));
    let datagram = udp_datagram(nat_t, nat_t, &[udp_encap::KEEPALIVE], Some(&v4));
    out.push((
        "ipv4 nat-keepalive",
        ipv4_packet(IpProtocol::UDP, &[], &datagram, false),
        Upper::UdpEncap(udp::Repr { src_port: nat_t, dst_port: nat_t, payload_len: 1 }, Encap::Keepalive),
    ));
    let datagram = udp_datagram(nat_t, nat_t, &ike_payload(), Some(&v4));
    out.push((
        "ipv4 ike behind the non-esp marker, with options",
        ipv4_packet(IpProtocol::UDP, &[1, 1, 1, 0], &datagram, false),
        Upper::UdpEncap(udp::Repr { src_port: nat_t, dst_port: nat_t, payload_len: 32 }, Encap::Ike),
    ));
    let datagram = udp_datagram(53, 33_000, b"plain udp", Some(&v4));
    out.push((
        "ipv4 udp",
        ipv4_packet(IpProtocol::UDP, &[], &datagram, false),
        Upper::Udp(udp::Repr { src_port: 53, dst_port: 33_000, payload_len: 9 }),
    ));
    out.push(("ipv4 first fragment", ipv4_packet(IpProtocol::UDP, &[], &[0; 16], true), Upper::Fragment));

    // Hop-by-Hop (Router Alert), Routing, atomic Fragment, ESP.
    let mut chain = vec![43, 0, 5, 2, 0, 0, 1, 0, 44, 0, 4, 0, 0, 0, 0, 0, 50, 0, 0, 0, 0, 0, 0xca, 0xfe];
    chain.extend(esp_bytes(0x1000, 7, 32));
    out.push((
        "ipv6 hbh routing fragment esp",
        ipv6_packet(IpProtocol::HOP_BY_HOP, &chain),
        Upper::Esp(esp_repr),
    ));
    // Destination Options, AH (24 bytes), UDP with checksum.
    let mut chain = vec![51, 0, 1, 4, 0, 0, 0, 0];
    chain.extend([17, 4, 0, 0, 0, 0, 0x20, 0x02, 0, 0, 0, 1]);
    chain.extend([0x5a; 12]);
    let datagram = udp_datagram(1000, 2000, b"over ah", Some(&v6));
    chain.extend(&datagram);
    out.push((
        "ipv6 dest-opts ah udp",
        ipv6_packet(IpProtocol::DEST_OPTS, &chain),
        Upper::Udp(udp::Repr { src_port: 1000, dst_port: 2000, payload_len: 7 }),
    ));
    // UDP-encapsulated ESP over IPv6: the checksum is mandatory.
    let datagram = udp_datagram(nat_t, nat_t, &esp_bytes(0x1000, 7, 24), Some(&v6));
    out.push((
        "ipv6 udp-esp",
        ipv6_packet(IpProtocol::UDP, &datagram),
        Upper::UdpEncap(
            udp::Repr { src_port: nat_t, dst_port: nat_t, payload_len: 32 },
            Encap::Esp(esp_repr),
        ),
    ));
    // A non-first fragment whose data looks like a Hop-by-Hop header.
    let mut chain = vec![0, 0, 0x05, 0xc8, 0, 0, 0, 1];
    chain.extend([0, 0xff, 0, 0, 0, 0, 0, 0]);
    out.push(("ipv6 non-first fragment", ipv6_packet(IpProtocol::FRAGMENT, &chain), Upper::Fragment));
    out.push(("ipv6 no next header", ipv6_packet(IpProtocol::NO_NEXT_HEADER, &[]), Upper::Other));
    out
}

#[test]
fn valid_packets_parse_as_expected() {
    for (name, bytes, upper) in corpus() {
        let summary = parse_any(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(summary.upper, upper, "{name}");
        assert_eq!(summary.ip_len, bytes.len(), "{name}");
        assert_eq!(parse_any_with(&bytes, ChecksumPolicy::Ignore), Ok(summary), "{name}");
    }
}

#[test]
fn summary_fields() {
    let corpus = corpus();
    let (_, v6, _) = &corpus[6];
    let s = parse_any(v6).expect("valid");
    assert_eq!(s.src, v6_src());
    assert_eq!(s.dst, v6_dst());
    assert_eq!(s.protocol, IpProtocol::ESP);
    assert_eq!(s.offset, 64);
    assert_eq!(s.ext_headers, 3);
    assert!(!s.is_fragment, "atomic fragment");
    let (_, v4, _) = &corpus[3];
    let s = parse_any(v4).expect("valid");
    assert_eq!(s.src, V4_SRC);
    assert_eq!(s.offset, 24, "options skipped");
    assert_eq!(s.protocol, IpProtocol::UDP);
    let (_, frag, _) = &corpus[9];
    let s = parse_any(frag).expect("valid");
    assert!(s.is_fragment);
    assert_eq!(s.offset, 48);
}

#[test]
fn parse_any_errors() {
    use ipsec_wire::Error;
    assert_eq!(parse_any(&[]), Err(Error::Truncated { needed: 1, got: 0 }));
    assert_eq!(parse_any(&[0x50; 40]), Err(Error::BadVersion(5)));
    let corpus = corpus();
    // A bad IPv4 header checksum, a bad UDP checksum: refused, unless ignored.
    let mut bad = corpus[4].1.clone();
    bad[8] ^= 1;
    assert_eq!(parse_any(&bad), Err(Error::BadChecksum));
    assert!(parse_any_with(&bad, ChecksumPolicy::Ignore).is_ok());
    let mut bad = corpus[4].1.clone();
    *bad.last_mut().expect("payload") ^= 1;
    assert_eq!(parse_any(&bad), Err(Error::BadChecksum));
    // UDP checksum 0 over IPv6: accepted only on the NAT-T port, for ESP in UDP (RFC 6936).
    let mut bad = corpus[8].1.clone();
    bad[46] = 0;
    bad[47] = 0;
    let nat_t = [bad[40..42].to_vec(), bad[42..44].to_vec()].contains(&4500u16.to_be_bytes().to_vec());
    if nat_t {
        assert!(parse_any(&bad).is_ok());
        bad[40..44].copy_from_slice(&[0x30, 0x39, 0x00, 0x35]);
    }
    assert_eq!(parse_any(&bad), Err(Error::MissingUdpChecksum));
    // ESP with SPI 0 directly over IP: the IP packet parses; its ESP is classified bad.
    let mut bad = corpus[0].1.clone();
    bad[20..24].fill(0);
    assert_eq!(parse_any(&bad).map(|s| s.upper), Ok(Upper::BadEsp(Error::ReservedSpi)));
    // A two-byte payload on the NAT-T port, a one-byte one that is not a keepalive: the
    // datagram parses, its payload is classified invalid with the reason.
    let v4 = PseudoHeader::V4 { src: V4_SRC, dst: V4_DST };
    let udp = |len| udp::Repr { src_port: 4500, dst_port: 4500, payload_len: len };
    let datagram = udp_datagram(4500, 4500, &[0xff, 0xff], Some(&v4));
    let bad = ipv4_packet(IpProtocol::UDP, &[], &datagram, false);
    let invalid = Encap::Invalid(Error::Truncated { needed: 4, got: 2 });
    assert_eq!(parse_any(&bad).map(|s| s.upper), Ok(Upper::UdpEncap(udp(2), invalid)));
    let datagram = udp_datagram(4500, 4500, &[0x7f], Some(&v4));
    let bad = ipv4_packet(IpProtocol::UDP, &[], &datagram, false);
    let invalid = Encap::Invalid(Error::BadKeepalive(0x7f));
    assert_eq!(parse_any(&bad).map(|s| s.upper), Ok(Upper::UdpEncap(udp(1), invalid)));
    // Hop-by-Hop in the wrong place.
    let bad = ipv6_packet(IpProtocol::DEST_OPTS, &[0, 0, 1, 4, 0, 0, 0, 0, 59, 0, 1, 4, 0, 0, 0, 0]);
    assert_eq!(parse_any(&bad), Err(Error::MisplacedHopByHop));
    // Every cut of every valid packet is an error, never a panic, and never a success that
    // claims more bytes than it had.
    for (name, bytes, _) in &corpus {
        for len in 0..bytes.len() {
            match parse_any(&bytes[..len]) {
                Err(_) => {}
                Ok(s) => panic!("{name} cut to {len} parsed: {s:?}"),
            }
        }
    }
}

/// A fixed-seed xorshift64* generator: deterministic mutations without dependencies.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Runs every parser of the crate on `bytes` (and on `bytes` from `offset` on for the
/// parsers of inner formats) and checks what succeeds against the buffer.
fn exercise(bytes: &[u8]) {
    for policy in [ChecksumPolicy::Verify, ChecksumPolicy::Ignore] {
        if let Ok(s) = parse_any_with(bytes, policy) {
            assert!(s.offset <= s.ip_len && s.ip_len <= bytes.len(), "{s:?}");
            exercise_inner(&bytes[s.offset..s.ip_len]);
        }
    }

    let v4 = ipv4::Packet::new_unchecked(bytes);
    let _ = ipv4::Repr::parse(&v4);
    if let Ok(repr) = ipv4::Repr::parse_with(&v4, ChecksumPolicy::Ignore) {
        assert!(repr.buffer_len() <= bytes.len());
    }
    if let Ok(p) = ipv4::Packet::new_checked(bytes) {
        let _ = (p.version(), p.dscp(), p.ecn(), p.ident(), p.dont_frag(), p.is_fragment(), p.ttl());
        let _ = (p.protocol(), p.checksum(), p.src_addr(), p.dst_addr(), p.verify_checksum());
        assert_eq!(20 + p.options().len(), p.header_len());
        assert_eq!(p.header_len() + p.payload().len(), usize::from(p.total_len()));
    }

    let v6 = ipv6::Packet::new_unchecked(bytes);
    let _ = ipv6::Repr::parse(&v6);
    if let Ok(chain) = v6.walk_extension_headers() {
        assert!(chain.offset <= v6.total_len() && v6.total_len() <= bytes.len());
        assert!(chain.ext_headers <= ipv6::MAX_EXTENSION_HEADERS);
        assert!(chain.esp_insert.offset <= chain.offset);
        assert!(chain.esp_insert.next_header_field < chain.esp_insert.offset);
        exercise_inner(&bytes[chain.offset..v6.total_len()]);
    }
    if let Ok(p) = ipv6::Packet::new_checked(bytes) {
        let _ =
            (p.traffic_class(), p.flow_label(), p.next_header(), p.hop_limit(), p.src_addr(), p.dst_addr());
        assert_eq!(p.payload().len(), usize::from(p.payload_len()));
    }

    exercise_inner(bytes);
}

/// The parsers of what comes after the IP headers.
fn exercise_inner(bytes: &[u8]) {
    let pseudos =
        [PseudoHeader::V4 { src: V4_SRC, dst: V4_DST }, PseudoHeader::V6 { src: v6_src(), dst: v6_dst() }];
    let _ = esp::Repr::parse(&esp::Packet::new_unchecked(bytes));
    if let Ok(t) = Trailer::parse(bytes) {
        assert_eq!(t.total_len(), bytes.len());
    }
    let d = udp::Packet::new_unchecked(bytes);
    for pseudo in &pseudos {
        let _ = udp::Repr::parse(&d, pseudo);
        let _ = d.verify_checksum(pseudo);
        if let Ok(repr) = udp::Repr::parse_with(&d, pseudo, ChecksumPolicy::Ignore) {
            assert!(repr.buffer_len() <= bytes.len());
            let _ = d.compute_checksum(pseudo);
        }
    }
    if let Ok(d) = udp::Packet::new_checked(bytes) {
        match udp_encap::classify(d.payload()) {
            Ok(Encapsulated::Esp(p)) => assert_ne!(p.spi(), 0),
            Ok(Encapsulated::Ike(ike)) => assert!(ike.len() >= udp_encap::IKE_HEADER_LEN),
            Ok(Encapsulated::Keepalive) | Err(_) => {}
        }
    }
    let _ = udp_encap::classify(bytes);
    let m = icmp::Packet::new_unchecked(bytes);
    for policy in [ChecksumPolicy::Verify, ChecksumPolicy::Ignore] {
        if let Ok(r) = icmp::Repr::parse_v4(&m, policy) {
            assert_eq!(r.buffer_len(), bytes.len());
        }
        if let Ok(r) = icmp::Repr::parse_v6(&m, &pseudos[1], policy) {
            assert_eq!(r.buffer_len(), bytes.len());
        }
    }
    if let Ok(h) = ExtHeader::new_checked(bytes) {
        assert_eq!(h.data().len() + 2, h.header_len());
    }
    if let Ok(h) = FragmentHeader::new_checked(bytes) {
        let _ = (h.next_header(), h.frag_offset(), h.more_frags(), h.ident(), h.is_fragment());
    }
    if let Ok(h) = AuthHeader::new_checked(bytes) {
        assert_eq!(h.icv().len() + 12, h.header_len());
        let _ = (h.spi(), h.sequence_number());
    }
}

#[test]
fn every_prefix_parses_without_panic() {
    for (_, bytes, _) in corpus() {
        for len in 0..=bytes.len() {
            let prefix = &bytes[..len];
            exercise(prefix);
            // The inner parsers from every start, too.
            for start in 0..len {
                exercise_inner(&prefix[start..]);
            }
        }
    }
}

#[test]
fn random_mutations_parse_without_panic() {
    let mut rng = Rng(0x0cf0_1b5e_c0de_2026);
    // Values that steer parsers into their edge cases.
    const INTERESTING: [u8; 16] = [0, 1, 2, 4, 5, 6, 8, 17, 41, 43, 44, 50, 51, 59, 60, 0xff];
    for (_, original, _) in corpus() {
        for _ in 0..10_000 {
            let mut bytes = original.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len());
                bytes[at] = if rng.below(2) == 0 { INTERESTING[rng.below(16)] } else { rng.next() as u8 };
            }
            match rng.below(4) {
                0 => bytes.truncate(rng.below(bytes.len() + 1)),
                1 => bytes.extend((0..rng.below(64)).map(|_| rng.next() as u8)),
                _ => {}
            }
            exercise(&bytes);
        }
    }
}

#[test]
fn random_ipv6_extension_chains_terminate() {
    // Fixed headers followed by random chains of extension-header-shaped bytes: the walk
    // either finds an end or reports an error, within the limit.
    let mut rng = Rng(0x5eed);
    const NEXT: [u8; 9] = [0, 43, 44, 60, 51, 50, 17, 59, 6];
    for _ in 0..5000 {
        let mut rest = Vec::new();
        for _ in 0..rng.below(24) {
            let len8 = 1 + rng.below(3);
            let mut h = vec![0u8; len8 * 8];
            h[0] = NEXT[rng.below(NEXT.len())];
            h[1] = (len8 - 1) as u8;
            if rng.below(4) == 0 {
                h[1] = rng.next() as u8;
            }
            rest.extend(h);
        }
        let first = IpProtocol(NEXT[rng.below(NEXT.len())]);
        let bytes = ipv6_packet(first, &rest);
        exercise(&bytes);
        if let Ok(chain) = ipv6::Packet::new_unchecked(&bytes[..]).walk_extension_headers() {
            assert!(
                !matches!(chain.next_header, IpProtocol::ROUTING | IpProtocol::DEST_OPTS | IpProtocol::AH)
                    || chain.is_fragment()
            );
        }
    }
}
