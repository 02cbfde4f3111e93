//! Path MTU (ipsec-core's `pmtu`) through the public packet path: a gateway sends ESP, an
//! ICMP error built around that very ESP packet (as a router would quote it) lowers the
//! SA's path MTU, and then an inner packet that no longer fits is refused with an ICMP
//! error to its sender whose MTU is exact: an inner packet of that length leaves in an ESP
//! packet within the path MTU, one byte more would not. For AES-GCM, AES-CBC + HMAC-SHA-256
//! and 3DES + HMAC-SHA1 (three alignments, IVs and ICVs), raw ESP and ESP in UDP, IPv4 and
//! IPv6, tunnel and transport mode. Also: aging (an injected clock), values refused as
//! bogus, errors that are not ours, the DF-clear path, and the rate limit.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use ipsec_core::stats::Drop;
use ipsec_core::{IcmpFrom, Learned, Packet};
use ipsec_wire::{icmp, ipv4, ipv6, ChecksumPolicy, IpProtocol, PseudoHeader};

use common::gateway::{Collect, Gateway};

/// A core whose results land in its `Collect`.
type Gw = Gateway<Collect>;

const ALGS: [(&str, &str); 3] = [
    ("aes-gcm", "-E aes-gcm-16 0x0102030405060708090a0b0c0d0e0f1011121314"),
    (
        "aes-cbc-sha256",
        "-E aes-cbc 0x000102030405060708090a0b0c0d0e0f -A hmac-sha2-256 \
         0x101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f",
    ),
    (
        "3des-sha1",
        "-E 3des-cbc 0x0123456789abcdef23456789abcdef01456789abcdef0123 -A hmac-sha1 \
         0x303132333435363738393a3b3c3d3e3f40414243",
    ),
];

/// One gateway's shape: outer and inner addresses, encapsulation, mode.
#[derive(Clone, Copy, Debug)]
struct Case {
    v6: bool,
    udp: bool,
    tunnel: bool,
    alg: usize,
}

impl Case {
    fn outer(&self) -> (IpAddr, IpAddr) {
        if self.v6 {
            ("fd00:99::1".parse().unwrap(), "fd00:99:1::2".parse().unwrap())
        } else {
            ("10.99.0.1".parse().unwrap(), "10.99.1.2".parse().unwrap())
        }
    }

    /// The hosts whose traffic the SA carries (the gateways themselves in transport mode).
    fn inner(&self) -> (IpAddr, IpAddr) {
        match (self.tunnel, self.v6) {
            (false, _) => self.outer(),
            (true, false) => ("10.98.1.1".parse().unwrap(), "10.98.2.1".parse().unwrap()),
            (true, true) => ("fd00:98:1::1".parse().unwrap(), "fd00:98:2::1".parse().unwrap()),
        }
    }

    fn router(&self) -> IpAddr {
        if self.v6 {
            "fd00:99:1::fe".parse().unwrap()
        } else {
            "10.99.1.254".parse().unwrap()
        }
    }

    fn gateway(&self) -> (Gw, Arc<Collect>) {
        let fw = ocf::Framework::new();
        ocf_soft::register(&fw).unwrap();
        let sink = Arc::new(Collect::default());
        let core = Gateway::new(fw, sink.clone());
        let ((o1, o2), (h1, h2)) = (self.outer(), self.inner());
        let (proto, port) = if self.udp { ("esp-udp", "[4500]") } else { ("esp", "") };
        let (mode, rule) = if self.tunnel {
            ("tunnel", format!("esp/tunnel/{o1}-{o2}/require"))
        } else {
            ("transport", "esp/transport//require".to_string())
        };
        let alg = ALGS[self.alg].1;
        let text = format!(
            "add {o1}{port} {o2}{port} {proto} 0x1001 -m {mode} {alg};\n\
             spdadd {h1} {h2} any -P out ipsec {rule};\n"
        );
        for r in ipsec_core::setkey::parse(&text).unwrap() {
            core.control(&r.item).unwrap();
        }
        (core, sink)
    }

    /// A TCP-like packet of `len` bytes from the inner sender, DF set (IPv4) or not.
    fn packet(&self, len: usize, df: bool) -> Vec<u8> {
        let (src, dst) = self.inner();
        let mut b = vec![0u8; len];
        for (i, x) in b.iter_mut().enumerate() {
            *x = i as u8;
        }
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let r = ipv4::Repr {
                    src_addr: s,
                    dst_addr: d,
                    protocol: IpProtocol::TCP,
                    payload_len: len - 20,
                    ttl: 64,
                    dscp: 0,
                    ecn: 0,
                    ident: 7,
                    dont_frag: df,
                    more_frags: false,
                    frag_offset: 0,
                };
                r.emit(&mut ipv4::Packet::new_unchecked(&mut b[..])).unwrap();
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let r = ipv6::Repr {
                    src_addr: s,
                    dst_addr: d,
                    next_header: IpProtocol::TCP,
                    payload_len: len - 40,
                    hop_limit: 64,
                    dscp: 0,
                    ecn: 0,
                    flow_label: 0,
                };
                r.emit(&mut ipv6::Packet::new_unchecked(&mut b[..])).unwrap();
            }
            _ => unreachable!(),
        }
        b
    }

    /// The ICMP error a router on the path sends about our ESP packet `esp`: `mtu`
    /// reported, the quote as long as RFC 1812 / RFC 4443 allow, and how it arrives.
    fn router_error(&self, esp: &[u8], mtu: u32) -> (Vec<u8>, IcmpFrom) {
        let quoted = &esp[..icmp::quote_len(esp.len(), self.v6)];
        let (repr, pseudo) = match (self.router(), self.outer().0) {
            (IpAddr::V6(r), IpAddr::V6(g)) => {
                (icmp::Repr::PacketTooBig { mtu, quoted }, PseudoHeader::V6 { src: r, dst: g })
            }
            (IpAddr::V4(r), IpAddr::V4(g)) => {
                (icmp::Repr::FragNeeded { mtu: mtu as u16, quoted }, PseudoHeader::V4 { src: r, dst: g })
            }
            _ => unreachable!(),
        };
        let mut msg = vec![0u8; repr.buffer_len()];
        repr.emit(&mut icmp::Packet::new_unchecked(&mut msg[..]), &pseudo).unwrap();
        let from = if self.v6 { IcmpFrom::V6(Some(pseudo)) } else { IcmpFrom::V4 };
        (msg, from)
    }
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for alg in 0..ALGS.len() {
        for v6 in [false, true] {
            for udp in [false, true] {
                for tunnel in [true, false] {
                    v.push(Case { v6, udp, tunnel, alg });
                }
            }
        }
    }
    v
}

/// The ICMP error delivered to the inner sender of `sent` (a packet of `c`): checks its
/// addresses, type, checksum and quote, and returns the MTU it reports.
fn sender_error(c: &Case, err: &[u8], sent: &[u8]) -> u32 {
    let (h1, h2) = c.inner();
    let (icmp_bytes, pseudo) = if c.v6 {
        let ip = ipv6::Packet::new_checked(err).unwrap();
        let r = ipv6::Repr::parse(&ip).unwrap();
        assert_eq!((IpAddr::V6(r.src_addr), IpAddr::V6(r.dst_addr)), (h2, h1), "{c:?}");
        assert_eq!(r.next_header, IpProtocol::ICMPV6);
        assert!(err.len() <= icmp::V6_MAX_ERROR_LEN);
        (&err[40..], PseudoHeader::V6 { src: r.src_addr, dst: r.dst_addr })
    } else {
        let ip = ipv4::Packet::new_checked(err).unwrap();
        let r = ipv4::Repr::parse(&ip).unwrap();
        assert_eq!((IpAddr::V4(r.src_addr), IpAddr::V4(r.dst_addr)), (h2, h1), "{c:?}");
        assert_eq!(r.protocol, IpProtocol::ICMP);
        assert!(err.len() <= icmp::V4_MAX_ERROR_LEN);
        (&err[20..], PseudoHeader::V4 { src: r.src_addr, dst: r.dst_addr })
    };
    let p = icmp::Packet::new_checked(icmp_bytes).unwrap();
    let repr = if c.v6 {
        icmp::Repr::parse_v6(&p, &pseudo, ChecksumPolicy::Verify)
    } else {
        icmp::Repr::parse_v4(&p, ChecksumPolicy::Verify)
    }
    .unwrap();
    assert_eq!(repr.quoted(), &sent[..repr.quoted().len()], "{c:?}: the quote is the packet's start");
    assert_eq!(repr.quoted().len(), icmp::quote_len(sent.len(), c.v6));
    repr.mtu()
}

#[test]
fn a_path_mtu_learned_from_icmp_refuses_what_no_longer_fits_with_an_exact_mtu() {
    for c in cases() {
        // Over IPv6 a path whose inner MTU is still above IPv6's 1280 (below that, IPv6
        // packets up to 1280 bytes are sent on regardless: pmtu.rs).
        let path: u32 = if c.v6 { 1420 } else { 1300 };
        let (core, sink) = c.gateway();
        let big = c.packet(1500, true);
        core.output(Packet::with_headroom(&big)).unwrap();
        let esp = sink.take_sent().pop().unwrap();
        assert!(esp.len() > path as usize, "{c:?}");

        let (msg, from) = c.router_error(&esp, path);
        assert_eq!(core.icmp_error(&msg, from), Ok(Learned::Lowered(path)), "{c:?}");
        assert_eq!(core.stats().pmtu_learned, 1);

        // Too big now: dropped, counted, and its sender told the largest that fits.
        assert_eq!(core.output(Packet::with_headroom(&big)), Err(Drop::PathMtu), "{c:?}");
        assert!(sink.take_sent().is_empty());
        let errors = sink.take_delivered();
        assert_eq!(errors.len(), 1, "{c:?}");
        let mtu = sender_error(&c, &errors[0], &big) as usize;
        let st = core.stats();
        assert_eq!((st.drops(Drop::PathMtu), st.icmp_sent), (1, 1), "{c:?}");

        // The overhead arithmetic against real packets: an inner packet of that MTU leaves
        // within the path MTU; one byte more would not (sent without DF, it goes out over
        // the path MTU, outer DF clear where the outer is IPv4).
        core.output(Packet::with_headroom(&c.packet(mtu, true))).unwrap();
        let fits = sink.take_sent().pop().unwrap();
        assert!(fits.len() <= path as usize, "{c:?}: {mtu} -> {}", fits.len());
        assert_eq!(core.output(Packet::with_headroom(&c.packet(mtu + 1, true))), Err(Drop::PathMtu), "{c:?}");
        sink.take_delivered();
        if !c.v6 {
            // Without DF: in tunnel mode the gateway sends it in fragments within the path
            // MTU; in transport mode as it is (over the path MTU, DF clear as the sender's).
            core.output(Packet::with_headroom(&c.packet(mtu + 1, false))).unwrap();
            let sent = sink.take_sent();
            assert_eq!(sent.len(), if c.tunnel { 2 } else { 1 }, "{c:?}");
            let total: usize = sent.iter().map(|f| f.len()).sum();
            assert!(total > path as usize, "{c:?}");
            for f in &sent {
                let h = ipv4::Packet::new_unchecked(&f[..]);
                assert!(!h.dont_frag() && h.verify_checksum(), "{c:?}");
                assert!(!c.tunnel || f.len() <= path as usize, "{c:?}");
            }
        }
    }
}

#[test]
fn a_learned_path_mtu_ages_out_after_ten_minutes_and_is_never_raised_by_icmp() {
    let c = Case { v6: false, udp: true, tunnel: true, alg: 0 };
    let (core, sink) = c.gateway();
    let big = c.packet(1400, true);
    let start = Instant::now();
    core.tick_at(start);
    core.output(Packet::with_headroom(&big)).unwrap();
    let esp = sink.take_sent().pop().unwrap();
    let (msg, from) = c.router_error(&esp, 1300);
    assert_eq!(core.icmp_error(&msg, from), Ok(Learned::Lowered(1300)));
    // A higher MTU, the same again: unchanged. A lower one: lowered.
    for (mtu, want) in
        [(1400, Learned::Unchanged), (1300, Learned::Unchanged), (1200, Learned::Lowered(1200))]
    {
        let (msg, from) = c.router_error(&esp, mtu);
        assert_eq!(core.icmp_error(&msg, from), Ok(want), "{mtu}");
    }
    // Just short of ten minutes: still refused. At ten minutes: the full size again.
    core.tick_at(start + Duration::from_secs(599));
    assert_eq!(core.output(Packet::with_headroom(&big)), Err(Drop::PathMtu));
    core.tick_at(start + Duration::from_secs(601));
    core.output(Packet::with_headroom(&big)).unwrap();
    assert_eq!(sink.take_sent().len(), 1);
}

#[test]
fn icmp_errors_that_are_bogus_or_not_ours_change_nothing_and_are_counted() {
    for v6 in [false, true] {
        let c = Case { v6, udp: false, tunnel: true, alg: 0 };
        let (core, sink) = c.gateway();
        let big = c.packet(1400, true);
        core.output(Packet::with_headroom(&big)).unwrap();
        let esp = sink.take_sent().pop().unwrap();
        let min = if v6 { 1280 } else { 576 };
        // Below the protocol minimum (and 0, a router older than RFC 1191); not below the
        // quoted packet's own length.
        for mtu in [0, min - 1, esp.len() as u32] {
            let (msg, from) = c.router_error(&esp, mtu);
            assert_eq!(core.icmp_error(&msg, from), Err(Drop::IcmpBogusMtu), "v6 {v6}: {mtu}");
        }
        // A bad checksum; a quote cut inside the IP header.
        let (mut msg, from) = c.router_error(&esp, 1300);
        msg[7] ^= 1;
        assert_eq!(core.icmp_error(&msg, from), Err(Drop::IcmpMalformed));
        let (msg, from) = c.router_error(&esp[..12], 1300);
        assert_eq!(core.icmp_error(&msg, from), Err(Drop::IcmpMalformed));
        // ESP that no SA of ours sent (another SPI).
        let mut other = esp.clone();
        let at = if v6 { 40 } else { 20 };
        other[at + 3] ^= 0x55;
        let (msg, from) = c.router_error(&other, 1300);
        assert_eq!(core.icmp_error(&msg, from), Err(Drop::IcmpNoSa));
        // Not ours at all: another application's UDP; another ICMP message.
        let udp = [&esp[..at], &[0x30, 0x39, 0, 53, 0, 8, 0, 0, 1, 2, 3, 4][..]].concat();
        let mut udp = udp;
        udp[if v6 { 6 } else { 9 }] = 17;
        let (msg, from) = c.router_error(&udp, 1300);
        assert_eq!(core.icmp_error(&msg, from), Ok(Learned::NotOurs));
        let (mut msg, from) = c.router_error(&esp, 1300);
        msg[0] = if v6 { 1 } else { 11 };
        assert!(matches!(core.icmp_error(&msg, from), Ok(Learned::NotOurs) | Err(Drop::IcmpMalformed)));
        let st = core.stats();
        assert_eq!(st.drops(Drop::IcmpBogusMtu), 3);
        assert_eq!(st.drops(Drop::IcmpNoSa), 1);
        assert_eq!(st.pmtu_learned, 0);
        // Nothing was learned: the big packet still goes.
        core.output(Packet::with_headroom(&big)).unwrap();
    }
}

#[test]
fn no_icmp_error_about_an_icmp_error_and_at_most_the_rate_a_second() {
    let c = Case { v6: false, udp: false, tunnel: true, alg: 0 };
    let (core, sink) = c.gateway();
    core.output(Packet::with_headroom(&c.packet(1400, true))).unwrap();
    let esp = sink.take_sent().pop().unwrap();
    let (msg, from) = c.router_error(&esp, 1300);
    core.icmp_error(&msg, from).unwrap();
    // An inner ICMP error (type 3) too big for the path: dropped, no error about it.
    let mut e = c.packet(1400, true);
    e[9] = 1;
    e[20] = 3;
    let mut p = ipv4::Packet::new_unchecked(&mut e[..]);
    p.fill_checksum();
    assert_eq!(core.output(Packet::with_headroom(&e)), Err(Drop::PathMtu));
    assert!(sink.take_delivered().is_empty());
    // A burst: ICMP_PER_SECOND errors, then the limit.
    let n = ipsec_core::pmtu::ICMP_PER_SECOND as usize;
    for _ in 0..n + 20 {
        assert_eq!(core.output(Packet::with_headroom(&c.packet(1400, true))), Err(Drop::PathMtu));
    }
    let sent = sink.take_delivered().len();
    assert!((n..n + 3).contains(&sent), "{sent} errors sent");
    assert!(core.stats().icmp_rate_limited >= 17);
}

#[test]
fn a_send_the_local_stack_refused_as_too_big_lowers_the_path_mtu_as_an_icmp_error_would() {
    for v6 in [false, true] {
        let c = Case { v6, udp: v6, tunnel: true, alg: 1 };
        let (core, sink) = c.gateway();
        let big = c.packet(1500, true);
        core.output(Packet::with_headroom(&big)).unwrap();
        let esp = sink.take_sent().pop().unwrap();
        // What the kernel's route says (the gateway's own link is the narrow one).
        assert_eq!(core.local_path_mtu(&esp, 1450), Ok(Learned::Lowered(1450)), "v6 {v6}");
        assert_eq!(core.output(Packet::with_headroom(&big)), Err(Drop::PathMtu));
        let errors = sink.take_delivered();
        assert_eq!(errors.len(), 1);
        let mtu = sender_error(&c, &errors[0], &big) as usize;
        core.output(Packet::with_headroom(&c.packet(mtu, true))).unwrap();
        assert!(sink.take_sent().pop().unwrap().len() <= 1450);
        // Not one of ours: another SPI.
        let mut other = esp.clone();
        other[if v6 { 40 + 8 } else { 20 } + 3] ^= 0x55;
        assert!(matches!(core.local_path_mtu(&other, 1400), Ok(Learned::NotOurs) | Err(Drop::IcmpNoSa)));
        assert_eq!(core.local_path_mtu(&esp[..10], 1400), Err(Drop::Malformed));
    }
}

#[test]
fn ipv6_packets_of_up_to_1280_bytes_that_no_longer_fit_go_in_fragments() {
    // An IPv6 tunnel over IPv6 and over IPv4 on a 1300-byte path: room inside for less
    // than IPv6's 1280 (RFC 8200 §5), which the tunnel must still carry (RFC 2473 §7.1).
    for outer_v6 in [true, false] {
        let c = Case { v6: outer_v6, udp: true, tunnel: true, alg: 1 };
        let (core, sink) = c.gateway();
        // The inner packets are IPv6 over an IPv4 path too: a gateway with both policies.
        let v6_inner = Case { v6: true, ..c };
        if !outer_v6 {
            let ((o1, o2), (h1, h2)) = (c.outer(), v6_inner.inner());
            let text = format!("spdadd {h1} {h2} any -P out ipsec esp/tunnel/{o1}-{o2}/require;");
            for r in ipsec_core::setkey::parse(&text).unwrap() {
                core.control(&r.item).unwrap();
            }
        }
        core.output(Packet::with_headroom(&v6_inner.packet(1400, false))).unwrap();
        let esp = sink.take_sent().pop().unwrap();
        let (msg, from) = c.router_error(&esp, 1300);
        assert_eq!(core.icmp_error(&msg, from), Ok(Learned::Lowered(1300)));
        // Over 1280: refused, Packet Too Big 1280 (never less).
        assert_eq!(core.output(Packet::with_headroom(&v6_inner.packet(1281, false))), Err(Drop::PathMtu));
        let err = sink.take_delivered().pop().unwrap();
        assert_eq!(sender_error(&v6_inner, &err, &v6_inner.packet(1281, false)), 1280);
        // 1280: sent, in two fragments within the path MTU.
        core.output(Packet::with_headroom(&v6_inner.packet(1280, false))).unwrap();
        let frags = sink.take_sent();
        assert_eq!(frags.len(), 2, "outer v6 {outer_v6}");
        assert!(frags.iter().all(|f| f.len() <= 1300));
        if outer_v6 {
            assert!(frags.iter().all(|f| f[6] == 44), "a Fragment header");
        }
    }
}

/// An ICMP error quoting one of our AH packets (RFC 4301 §6.1.2, §8.2): built by hand as an
/// RFC 792 router builds it (the IP header and 8 bytes of AH: next header, length,
/// reserved, SPI), it finds the AH SA by the SPI at AH's offset 4 and lowers its path MTU
/// (`pmtu_learned`, a `PathMtu` event); a packet that no longer fits is then refused
/// (`too_big_for_path`). The same quote naming ESP, or another SPI, is no SA's
/// (`icmp_no_sa`). IPv4 (ICMP type 3 code 4, its checksum computed here) and IPv6 (Packet
/// Too Big, as a raw ICMPv6 socket hands it over: checksum verified by the kernel).
#[test]
fn an_icmp_error_quoting_ah_lowers_the_path_mtu_of_its_sa() {
    use ipsec_core::sad::Event;
    for v6 in [false, true] {
        let c = Case { v6, udp: false, tunnel: true, alg: 0 };
        let fw = ocf::Framework::new();
        ocf_soft::register(&fw).unwrap();
        let sink = Arc::new(Collect::default());
        let core = Gateway::new(fw, sink.clone());
        let ((o1, o2), (h1, h2)) = (c.outer(), c.inner());
        let text = format!(
            "add {o1} {o2} ah 0x2001 -m tunnel -A hmac-sha2-256 \
             0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20;\n\
             spdadd {h1} {h2} any -P out ipsec ah/tunnel/{o1}-{o2}/require;\n"
        );
        for r in ipsec_core::setkey::parse(&text).unwrap() {
            core.control(&r.item).unwrap();
        }
        let big = c.packet(1400, true);
        core.output(Packet::with_headroom(&big)).unwrap();
        let ah = sink.take_sent().pop().unwrap();
        let hl = if v6 { 40 } else { 20 };
        assert_eq!(ah[if v6 { 6 } else { 9 }], 51, "AH");
        assert_eq!(ah[hl + 4..hl + 8], [0, 0, 0x20, 0x01], "AH's SPI at its offset 4");
        // The ICMP message: type, code, checksum, then (IPv4) unused and the next-hop MTU
        // or (IPv6) the MTU, then the quote: the IP header and AH's first 8 bytes.
        let error = |quote: &[u8], mtu: u16| {
            let mut m = if v6 { vec![2, 0, 0, 0, 0, 0] } else { vec![3, 4, 0, 0, 0, 0] };
            m.extend_from_slice(&mtu.to_be_bytes());
            m.extend_from_slice(quote);
            if !v6 {
                let sum = ipsec_wire::checksum::checksum(&m);
                m[2..4].copy_from_slice(&sum.to_be_bytes());
            }
            m
        };
        let from = if v6 { IcmpFrom::V6(None) } else { IcmpFrom::V4 };
        let quote = &ah[..hl + 8];
        let mtu = if v6 { 1300 } else { 1000 };
        // Quoting ESP with AH's bytes, and another SPI: no SA of ours sent it.
        let mut as_esp = quote.to_vec();
        as_esp[if v6 { 6 } else { 9 }] = 50;
        if !v6 {
            as_esp[10..12].copy_from_slice(&[0, 0]);
        }
        let mut other_spi = quote.to_vec();
        other_spi[hl + 7] ^= 0x55;
        for q in [as_esp, other_spi] {
            assert_eq!(core.icmp_error(&error(&q, mtu), from), Err(Drop::IcmpNoSa), "v6 {v6}");
        }
        assert_eq!(core.stats().pmtu_learned, 0);
        assert_eq!(
            core.icmp_error(&error(quote, mtu), from),
            Ok(Learned::Lowered(u32::from(mtu))),
            "v6 {v6}"
        );
        let st = core.stats();
        assert_eq!((st.pmtu_learned, st.drops(Drop::IcmpNoSa)), (1, 2), "v6 {v6}");
        let events = core.take_events();
        assert!(events
            .iter()
            .any(|e| matches!(e, Event::PathMtu { sa, mtu: m } if sa.spi == 0x2001 && *m == u32::from(mtu))));
        // The packet that went before no longer fits: refused, its sender told.
        assert_eq!(core.output(Packet::with_headroom(&big)), Err(Drop::PathMtu), "v6 {v6}");
        assert_eq!(core.stats().drops(Drop::PathMtu), 1);
    }
}
