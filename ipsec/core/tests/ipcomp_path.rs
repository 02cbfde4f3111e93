//! IPComp on the packet path (tunnel mode, single SAs): two gateways, each an `Ipsec` core
//! over ocf's soft driver, configured by setkey text. What one sends the other delivers:
//! compressible packets as IPComp (protocol 108, the SA's CPI), short and incompressible
//! ones as plain IP-in-IP (RFC 3173 §2.2), IPv4 and IPv6 outer headers. Bombs, corrupt
//! streams, unknown CPIs and policy violations are dropped by name. Transport mode keeps
//! the packet's own header.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ipsec_core::stats::Drop;
use ipsec_core::{setkey, Ipsec, Packet, Results, Sink, Via};
use ipsec_wire::{checksum, IpProtocol};

/// The soft driver finishes in the call, so the sink sees only packets that were held for
/// an SA (crate::acquire) and released when it came: counted here.
struct Nowhere;

static RELEASED: AtomicUsize = AtomicUsize::new(0);

impl Sink for Nowhere {
    fn transmit(&self, _: Packet) {
        RELEASED.fetch_add(1, Ordering::Relaxed);
    }
    fn deliver(&self, _: Packet) {
        unreachable!("the soft driver finishes in the call")
    }
}

/// A gateway configured with `config` (setkey).
fn gateway(config: &str) -> Ipsec {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let g = Ipsec::new(fw, Arc::new(Nowhere));
    for r in setkey::parse(config).unwrap() {
        g.control(&r.item).unwrap_or_else(|e| panic!("{:?}: {e}", r.item));
    }
    g
}

/// Both ends: A (outer `a`, inner 10.1/16) and B (outer `b`, inner 10.2/16).
fn pair(a: &str, b: &str) -> (Ipsec, Ipsec) {
    let sas = format!(
        "add {a} {b} ipcomp 0x4000 -m tunnel -C deflate;\nadd {b} {a} ipcomp 0x4001 -m tunnel -C deflate;\n"
    );
    let side = |me: &str, peer: &str, mine: &str, theirs: &str| {
        format!(
            "{sas}spdadd {mine} {theirs} any -P out ipsec ipcomp/tunnel/{me}-{peer}/require;\n\
             spdadd {theirs} {mine} any -P in ipsec ipcomp/tunnel/{peer}-{me}/require;\n"
        )
    };
    (gateway(&side(a, b, "10.1.0.0/16", "10.2.0.0/16")), gateway(&side(b, a, "10.2.0.0/16", "10.1.0.0/16")))
}

/// An IPv4 UDP packet 10.1.0.1 → 10.2.0.1 with `payload`.
fn inner(payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x45, 0, 0, 0, 0x12, 0x34, 0, 0, 64, 17, 0, 0, 10, 1, 0, 1, 10, 2, 0, 1];
    h[2..4].copy_from_slice(&((28 + payload.len()) as u16).to_be_bytes());
    let c = checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(&[0x30, 0x39, 0, 53]);
    h.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(payload);
    h
}

fn text(n: usize) -> Vec<u8> {
    b"GET /index.html HTTP/1.1\r\nHost: example.org\r\nAccept: text/html\r\n"
        .iter()
        .copied()
        .cycle()
        .take(n)
        .collect()
}

fn random(n: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9u32;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// A sends `packet`; returns the one packet on the wire.
fn send(a: &Ipsec, packet: &[u8]) -> Vec<u8> {
    let mut out = Results::default();
    a.output_one(Packet::with_headroom(packet), &mut out).unwrap();
    assert_eq!((out.transmit.len(), out.deliver.len()), (1, 0));
    out.transmit[0].bytes().to_vec()
}

/// B receives `wire`; returns what it delivers, or the drop.
fn receive(b: &Ipsec, wire: &[u8]) -> Result<Vec<u8>, Drop> {
    let mut out = Results::default();
    b.input_one(Packet::new(wire.to_vec()), Via::Ip, &mut out)?;
    assert_eq!(out.deliver.len(), 1);
    Ok(out.deliver[0].bytes().to_vec())
}

fn outer_proto(wire: &[u8]) -> u8 {
    if wire[0] >> 4 == 4 {
        wire[9]
    } else {
        wire[6]
    }
}

#[test]
fn compressible_packets_go_as_ipcomp_the_rest_as_ip_in_ip_both_families() {
    for (a_addr, b_addr, outer) in [("192.0.2.1", "192.0.2.2", 20), ("2001:db8::1", "2001:db8::2", 40)] {
        let (a, b) = pair(a_addr, b_addr);
        for (payload, proto) in [
            (text(1372), IpProtocol::IPCOMP.0),
            (text(300), IpProtocol::IPCOMP.0),
            (text(30), IpProtocol::IPV4.0),
            (random(1372), IpProtocol::IPV4.0),
        ] {
            let p = inner(&payload);
            let wire = send(&a, &p);
            assert_eq!(outer_proto(&wire), proto, "{} bytes", payload.len());
            if proto == IpProtocol::IPCOMP.0 {
                assert!(wire.len() < p.len(), "smaller on the wire, outer header included");
                assert_eq!(&wire[outer..outer + 4], &[4, 0, 0x40, 0x00], "next header, flags, CPI");
            } else {
                assert_eq!(&wire[outer..], &p[..], "IP-in-IP, as it was");
            }
            assert_eq!(receive(&b, &wire), Ok(p), "{} bytes", payload.len());
        }
        let (sa, sb) = (a.stats(), b.stats());
        assert_eq!((sa.packets_out, sb.packets_in, sb.total_drops()), (4, 4, 0));
    }
}

#[test]
fn bad_ipcomp_packets_are_dropped_by_name() {
    let (a, b) = pair("192.0.2.1", "192.0.2.2");
    let good = send(&a, &inner(&text(1372)));
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut w = good.clone();
        f(&mut w);
        w
    };
    // The outer header's length and checksum follow the cut (a real packet would say so).
    let fix = |w: &mut Vec<u8>| {
        let len = w.len() as u16;
        w[2..4].copy_from_slice(&len.to_be_bytes());
        w[10..12].fill(0);
        let c = checksum::checksum(&w[..20]);
        w[10..12].copy_from_slice(&c.to_be_bytes());
    };
    let bomb = {
        // 1 MiB of zeros compressed by the same session kind: about 1 KiB.
        let fw = ocf::Framework::new();
        ocf_soft::register(&fw).unwrap();
        let s = fw.new_session(&ipsec_core::ipcomp::session_params()).unwrap();
        let r = ocf::Request::new(ocf::Op::Compress, vec![0u8; 1 << 20]).with_output(vec![0u8; 1 << 20]);
        let stream = s.run(r).unwrap().result_payload();
        with(&|w| {
            w.truncate(24);
            w.extend_from_slice(&stream);
            fix(w);
        })
    };
    let cases: [(Vec<u8>, Drop); 5] = [
        (bomb, Drop::IpCompTooBig),
        (
            with(&|w| {
                w.truncate(w.len() - 4);
                fix(w)
            }),
            Drop::IpCompCorrupt,
        ),
        (
            with(&|w| {
                w.truncate(22);
                fix(w)
            }),
            Drop::IpCompTruncated,
        ),
        (with(&|w| w[23] = 0x99), Drop::UnknownSpi),
        (with(&|w| w[20] = IpProtocol::IPCOMP.0), Drop::IpCompNested),
    ];
    for (wire, why) in &cases {
        assert_eq!(receive(&b, wire), Err(*why));
        assert_eq!(b.stats().drops(*why), 1, "{why:?} counted");
    }
    // A packet the inbound policy does not allow through this SA: 10.9.0.1 is not 10.1/16.
    let mut stray = inner(&text(1372));
    stray[12..16].copy_from_slice(&[10, 3, 0, 1]);
    stray[10..12].fill(0);
    let c = checksum::checksum(&stray[..20]);
    stray[10..12].copy_from_slice(&c.to_be_bytes());
    let a_any = gateway(
        "add 192.0.2.1 192.0.2.2 ipcomp 0x4000 -m tunnel -C deflate;\n\
         spdadd 10.0.0.0/8 10.2.0.0/16 any -P out ipsec ipcomp/tunnel/192.0.2.1-192.0.2.2/require;\n",
    );
    let b_strict = gateway(
        "add 192.0.2.1 192.0.2.2 ipcomp 0x4000 -m tunnel -C deflate;\n\
         spdadd 10.3.0.0/16 10.2.0.0/16 any -P in ipsec esp/tunnel/192.0.2.1-192.0.2.2/require;\n",
    );
    assert_eq!(receive(&b_strict, &send(&a_any, &stray)), Err(Drop::Policy));
    // One that no inbound policy covers (B's covers 10.1/16 only), compressed and as plain
    // IP-in-IP: IPComp authenticates nothing, so anyone could have sent it; it was
    // delivered.
    let b_one = gateway(
        "add 192.0.2.1 192.0.2.2 ipcomp 0x4000 -m tunnel -C deflate;\n\
         spdadd 10.1.0.0/16 10.2.0.0/16 any -P in ipsec ipcomp/tunnel/192.0.2.1-192.0.2.2/require;\n",
    );
    let mut short = stray.clone();
    short.truncate(60);
    short[2..4].copy_from_slice(&60u16.to_be_bytes());
    short[24..26].copy_from_slice(&40u16.to_be_bytes());
    short[10..12].fill(0);
    let c = checksum::checksum(&short[..20]);
    short[10..12].copy_from_slice(&c.to_be_bytes());
    let (compressed, plain) = (send(&a_any, &stray), send(&a_any, &short));
    assert_eq!((outer_proto(&compressed), outer_proto(&plain)), (IpProtocol::IPCOMP.0, IpProtocol::IPV4.0));
    for wire in [compressed, plain] {
        assert_eq!(receive(&b_one, &wire), Err(Drop::NoInboundPolicy));
    }
    assert_eq!(receive(&b_one, &send(&a_any, &inner(&text(1372)))).map(|p| p.len()), Ok(1400));
    assert_eq!((b_one.stats().drops(Drop::NoInboundPolicy), b_one.stats().total_drops()), (2, 2));
}

/// Transport mode (RFC 3173 §3): the packet keeps its own header, which names IPComp when
/// DEFLATE pays; otherwise the packet goes as it is, in the clear, which is why an inbound
/// policy names IPComp `use` (as racoon writes it, and as Linux requires: an optional
/// transport template may be missing).
#[test]
fn transport_mode_compresses_behind_the_packets_own_header() {
    let (a, b) = (
        gateway(
            "add 10.1.0.1 10.2.0.1 ipcomp 0x4000 -m transport -C deflate;\n\
             spdadd 10.1.0.1/32 10.2.0.1/32 any -P out ipsec ipcomp/transport//require;\n",
        ),
        gateway(
            "add 10.1.0.1 10.2.0.1 ipcomp 0x4000 -m transport -C deflate;\n\
             spdadd 10.1.0.1/32 10.2.0.1/32 any -P in ipsec ipcomp/transport//use;\n",
        ),
    );
    let big = inner(&text(1300));
    let wire = send(&a, &big);
    assert_eq!(outer_proto(&wire), IpProtocol::IPCOMP.0);
    assert_eq!(&wire[12..20], &big[12..20], "the packet's own addresses");
    assert_eq!(&wire[20..24], &[17, 0, 0x40, 0x00], "next header UDP, flags, CPI");
    assert!(wire.len() < big.len() / 4, "{} bytes for {}", wire.len(), big.len());
    assert_eq!(checksum::checksum(&wire[..20]), 0, "the header's checksum is right");
    assert_eq!(receive(&b, &wire), Ok(big));
    // Short: sent as it is; B's `use` policy takes it in the clear.
    let short = inner(&text(30));
    assert_eq!(send(&a, &short), short);
    assert_eq!(receive(&b, &short), Ok(short));
    // A's SA sent both; B's received the compressed one (the other is clear traffic to B).
    assert_eq!((a.stats().packets_out, b.stats().packets_in, b.stats().total_drops()), (2, 1, 0));
}

#[test]
fn missing_sas_are_asked_for_and_other_protocols_never_served() {
    let a = gateway(
        "spdadd 10.1.0.0/16 10.3.0.0/16 any -P out ipsec ipcomp/tunnel/192.0.2.1-192.0.2.9/require;\n",
    );
    let mut out = Results::default();
    let p = inner(&text(500));
    let mut q = p.clone();
    q[16..20].copy_from_slice(&[10, 3, 0, 1]);
    q[10..12].fill(0);
    let c = checksum::checksum(&q[..20]);
    q[10..12].copy_from_slice(&c.to_be_bytes());
    // No IPComp SA for that tunnel: the packet is held for a key manager (crate::acquire),
    // and goes once the SA is added.
    assert_eq!(a.output_one(Packet::with_headroom(&q), &mut out), Ok(()));
    assert_eq!(a.held_packets(), 1);
    assert_eq!(a.stats().drops(Drop::NoSa), 0);
    a.control(&setkey::parse("add 192.0.2.1 192.0.2.9 ipcomp 0x4002 -m tunnel -C deflate;").unwrap()[0].item)
        .unwrap();
    assert_eq!(a.held_packets(), 0, "released through the new IPComp SA");
    assert_eq!(RELEASED.load(Ordering::Relaxed), 1);
    // An IPComp SA never serves ESP: an ESP policy between the same ends finds no SA, and
    // asks for one.
    let e = gateway(
        "add 192.0.2.1 192.0.2.2 ipcomp 0x4000 -m tunnel -C deflate;\n\
         spdadd 10.1.0.0/16 10.2.0.0/16 any -P out ipsec esp/tunnel/192.0.2.1-192.0.2.2/require;\n",
    );
    assert_eq!(e.output_one(Packet::with_headroom(&p), &mut out), Ok(()));
    assert_eq!(e.held_packets(), 1, "held for an ESP SA, not sent through the IPComp one");
}

/// What ipsecd's raw IPComp and IP-in-IP sockets hand over ([`Via::IpComp`]): IPComp, and
/// IP-in-IP between the ends of an IPComp SA, are delivered; every other tunnel packet the
/// IP-in-IP socket sees, and anything else, is dropped as `not_ipcomp`, never delivered.
/// (Those sockets' packets went in as `Via::Esp` before: every one dropped as `not_esp`.)
#[test]
fn from_the_raw_ipcomp_sockets_only_ipcomp_sas_packets_are_delivered() {
    let (a, b) = pair("192.0.2.1", "192.0.2.2");
    let big = inner(&text(1372));
    let small = inner(&text(30));
    let (compressed, plain) = (send(&a, &big), send(&a, &small));
    assert_eq!((outer_proto(&compressed), outer_proto(&plain)), (IpProtocol::IPCOMP.0, IpProtocol::IPV4.0));
    let receive_raw = |wire: &[u8]| {
        let mut out = Results::default();
        let r = b.input_one(Packet::new(wire.to_vec()), Via::IpComp, &mut out);
        let delivered: Vec<Vec<u8>> = out.deliver.iter().map(|p| p.bytes().to_vec()).collect();
        r.map(|()| delivered.concat())
            .inspect_err(|why| assert!(delivered.is_empty(), "{why:?}: nothing delivered"))
    };
    assert_eq!(receive_raw(&compressed), Ok(big));
    assert_eq!(receive_raw(&plain), Ok(small.clone()));
    // Another tunnel's IP-in-IP: from 192.0.2.9, with which B has no IPComp SA.
    let mut foreign = plain.clone();
    foreign[12..16].copy_from_slice(&[192, 0, 2, 9]);
    foreign[10..12].fill(0);
    let c = checksum::checksum(&foreign[..20]);
    foreign[10..12].copy_from_slice(&c.to_be_bytes());
    assert_eq!(receive_raw(&foreign), Err(Drop::NotIpComp));
    // Through an IP stack the same packet is clear traffic, for the inbound policy to judge
    // (none covers 192.0.2.9 → 192.0.2.2): delivered. That is why the raw sockets say
    // where their packets came from.
    let mut out = Results::default();
    assert_eq!(b.input_one(Packet::new(foreign.clone()), Via::Ip, &mut out), Ok(()));
    assert_eq!(out.deliver.len(), 1);
    // Clear traffic (the inner UDP packet itself) on such a socket: dropped too.
    assert_eq!(receive_raw(&small), Err(Drop::NotIpComp));
    let s = b.stats();
    assert_eq!((s.packets_in, s.drops(Drop::NotIpComp), s.total_drops()), (2, 2, 2));
}
