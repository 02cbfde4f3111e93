//! SA bundles (RFC 4301 §4.5) through the core, configured with setkey text as racoon and
//! strongSwan users write them: IPComp in tunnel mode under ESP in transport mode (the
//! usual compressed VPN), and ESP under AH, both in transport mode. Two cores talk through
//! each bundle over IPv4 and IPv6, with a synchronous and an asynchronous driver; the
//! receiver's policy check sees the whole bundle (a packet missing one of its SAs, or with
//! one too many, is dropped as `policy`); a bundle missing an SA asks for it (ACQUIRE) and
//! sends the held packet through every SA when it comes. Linux XFRM's view of the same
//! bundles is in the kernel suite (`tests/kernel/xfrm`).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ipsec_core::control::{Proto, SaId};
use ipsec_core::sad::Event;
use ipsec_core::stats::Drop;
use ipsec_core::Packet;
use ipsec_wire::{checksum, IpProtocol};

use common::gateway::{Collect, Gateway};

type Gw = Gateway<Collect>;

/// Each direction has keys of its own (the core refuses a key installed twice: nonce reuse).
const GCM_AB: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324";
const GCM_BA: &str = "0xa1a2030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324";
const SHA256_AB: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20";
const SHA256_BA: &str = "0xb1b2030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20";

/// A core over the soft driver, or over ocf-sim's card (which completes every request
/// later, from its own thread), configured with `config`.
fn core(config: &str, card: bool) -> (Gw, Arc<Collect>) {
    let fw = ocf::Framework::new();
    if card {
        ocf_sim::register_driver(&fw, "qat-like").unwrap();
    }
    // The soft driver always: the only one that compresses (ESP and AH go to the card,
    // which ocf prefers for the operations it has; checked below).
    ocf_soft::register(&fw).unwrap();
    let sink = Arc::new(Collect::default());
    let g = Gateway::new(fw, sink.clone());
    for r in ipsec_core::setkey::parse(config).unwrap_or_else(|e| panic!("{e}")) {
        g.control(&r.item).unwrap_or_else(|e| panic!("line {}: {e}", r.line));
    }
    (g, sink)
}

/// The two gateways' outer addresses and protected networks.
struct Ends {
    a: &'static str,
    b: &'static str,
    net_a: &'static str,
    net_b: &'static str,
}

const V4: Ends = Ends { a: "192.0.2.1", b: "192.0.2.2", net_a: "10.1.0.0/16", net_b: "10.2.0.0/16" };
const V6: Ends = Ends { a: "2001:db8::1", b: "2001:db8::2", net_a: "10.1.0.0/16", net_b: "10.2.0.0/16" };

/// The SAs both ways of the protocols the rules name (A → B: 0x1001 ESP, 0x4001 IPComp,
/// 0x2001 AH; B → A: 0x..02) and, for A (`me_is_a`) or B, the policies `out` and `inn` ask
/// for (`{from}`, `{to}` in the rules: the outer addresses).
fn config(e: &Ends, me_is_a: bool, out: &str, inn: &str) -> String {
    let (a, b) = (e.a, e.b);
    let (me, peer, mine, theirs) = if me_is_a { (a, b, e.net_a, e.net_b) } else { (b, a, e.net_b, e.net_a) };
    let fill = |rules: &str, from: &str, to: &str| rules.replace("{from}", from).replace("{to}", to);
    let sas = format!(
        "add {a} {b} esp 0x1001 -m transport -E aes-gcm-16 {GCM_AB};\n\
         add {b} {a} esp 0x1002 -m transport -E aes-gcm-16 {GCM_BA};\n\
         add {a} {b} ipcomp 0x4001 -m tunnel -C deflate;\n\
         add {b} {a} ipcomp 0x4002 -m tunnel -C deflate;\n\
         add {a} {b} ah 0x2001 -m transport -A hmac-sha2-256 {SHA256_AB};\n\
         add {b} {a} ah 0x2002 -m transport -A hmac-sha2-256 {SHA256_BA};\n"
    );
    // Only the protocols the policies name (ocf-sim's card does not compress).
    let rules = format!("{out} {inn}");
    let sas = sas.lines().filter(|l| rules.contains(&format!("{}/", l.split(' ').nth(3).unwrap())));
    let sas: String = sas.map(|l| format!("{l}\n")).collect();
    format!(
        "{sas}spdadd {mine} {theirs} any -P out ipsec {};\nspdadd {theirs} {mine} any -P in ipsec {};\n",
        fill(out, me, peer),
        fill(inn, peer, me),
    )
}

/// IPComp in tunnel mode, then ESP in transport mode between the tunnel's ends.
const IPCOMP_ESP: &str = "ipcomp/tunnel/{from}-{to}/use esp/transport//require";
/// ESP, then AH, both in transport mode between the gateways (host-to-host: the networks
/// are the gateways' own addresses).
const ESP_AH: &str = "esp/transport//require ah/transport//require";

/// An IPv4 UDP packet `src` → `dst` with `payload`.
fn udp4(src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0];
    h.extend(src);
    h.extend(dst);
    h[2..4].copy_from_slice(&((28 + payload.len()) as u16).to_be_bytes());
    let c = checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend([0x30, 0x39, 0, 53]);
    h.extend(((8 + payload.len()) as u16).to_be_bytes());
    h.extend([0, 0]);
    h.extend_from_slice(payload);
    h
}

/// An IPv6 UDP packet `src` → `dst` with `payload` (checksum 0: nobody checks it here).
fn udp6(src: &str, dst: &str, payload: &[u8]) -> Vec<u8> {
    let (s, d): (std::net::Ipv6Addr, std::net::Ipv6Addr) = (src.parse().unwrap(), dst.parse().unwrap());
    let mut h = vec![0x60, 0, 0, 0];
    h.extend(((8 + payload.len()) as u16).to_be_bytes());
    h.extend([17, 64]);
    h.extend(s.octets());
    h.extend(d.octets());
    h.extend([0x30, 0x39, 0, 53]);
    h.extend(((8 + payload.len()) as u16).to_be_bytes());
    h.extend([0, 0]);
    h.extend_from_slice(payload);
    h
}

fn text(n: usize) -> Vec<u8> {
    b"GET /index.html HTTP/1.1\r\nHost: example.org\r\n".iter().copied().cycle().take(n).collect()
}

/// The protocol the outer header names (IPv6: its first next header).
fn outer_proto(wire: &[u8]) -> u8 {
    if wire[0] >> 4 == 4 {
        wire[9]
    } else {
        wire[6]
    }
}

/// Waits until `n` packets reached the sink one way (an asynchronous driver's come later).
fn wait(c: &Collect, n: usize, sent: bool) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let have = if sent { c.sent.lock().unwrap().len() } else { c.delivered.lock().unwrap().len() };
        if have >= n {
            return if sent { c.take_sent() } else { c.take_delivered() };
        }
        assert!(Instant::now() < deadline, "{have} of {n} packets finished");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn sa_stats(g: &Gw, src: &str, dst: &str, proto: Proto, spi: u32) -> (u64, u64) {
    let id = SaId { src: src.parse().unwrap(), dst: dst.parse().unwrap(), proto, spi };
    let s = g.databases().sad.get(&id).unwrap_or_else(|| panic!("SA {spi:#x}")).stats();
    (s.packets_out, s.packets_in)
}

/// A sends `plain` through its bundle; B receives what came out. Returns the wire packet.
fn through(a: (&Gw, &Collect), b: (&Gw, &Collect), plain: &[u8]) -> Vec<u8> {
    a.0.output(Packet::with_headroom(plain)).unwrap_or_else(|d| panic!("A dropped it: {d}"));
    let wire = wait(a.1, 1, true).pop().unwrap();
    b.0.input(Packet::new(wire.clone())).unwrap_or_else(|d| panic!("B dropped it: {d}\n{}", b.0.stats()));
    let got = wait(b.1, 1, false).pop().unwrap();
    assert_eq!(got, plain, "B delivers what A sent");
    wire
}

#[test]
fn ipcomp_under_esp_carries_compressible_and_short_packets_both_families_both_drivers() {
    for e in [V4, V6] {
        for card in [false, true] {
            let (a, sa) = core(&config(&e, true, IPCOMP_ESP, IPCOMP_ESP), card);
            let (b, sb) = core(&config(&e, false, IPCOMP_ESP, IPCOMP_ESP), card);
            let outer = if e.a.contains(':') { 40 } else { 20 };
            // Compressible: IPComp inside ESP, and the ESP packet shorter than the plain one.
            let big = udp4([10, 1, 0, 1], [10, 2, 0, 1], &text(1300));
            let wire = through((&a, &sa), (&b, &sb), &big);
            assert_eq!(outer_proto(&wire), IpProtocol::ESP.0, "{}: ESP outside", e.a);
            assert_eq!(&wire[outer..outer + 4], &0x1001u32.to_be_bytes(), "ESP's SPI");
            assert!(wire.len() < big.len(), "{}: {} bytes on the wire for {}", e.a, wire.len(), big.len());
            // Short: not compressed (RFC 3173 §2.2), so IP-in-IP inside ESP.
            let short = udp4([10, 1, 0, 1], [10, 2, 0, 1], b"hi");
            let wire = through((&a, &sa), (&b, &sb), &short);
            assert_eq!(outer_proto(&wire), IpProtocol::ESP.0);
            assert!(wire.len() > short.len() + outer);
            // Each SA of the bundle counted both packets, at both ends.
            assert_eq!(sa_stats(&a, e.a, e.b, Proto::Esp, 0x1001), (2, 0));
            assert_eq!(sa_stats(&a, e.a, e.b, Proto::IpComp, 0x4001), (2, 0));
            assert_eq!(sa_stats(&b, e.a, e.b, Proto::Esp, 0x1001), (0, 2));
            assert_eq!(sa_stats(&b, e.a, e.b, Proto::IpComp, 0x4001), (0, 2));
            assert_eq!(b.stats().total_drops(), 0, "{}", b.stats());
        }
    }
}

#[test]
fn esp_under_ah_carries_packets_both_families_both_drivers() {
    for (e, v6) in [(V4, false), (V6, true)] {
        // Host to host: the policies select the gateways' own addresses.
        let host = |x: &str| format!("{x}/{}", if v6 { 128 } else { 32 });
        let (ha, hb) = (host(e.a), host(e.b));
        let e = Ends { net_a: Box::leak(ha.into_boxed_str()), net_b: Box::leak(hb.into_boxed_str()), ..e };
        for card in [false, true] {
            let (a, sa) = core(&config(&e, true, ESP_AH, ESP_AH), card);
            let (b, sb) = core(&config(&e, false, ESP_AH, ESP_AH), card);
            for n in [0, 1, 200, 1400] {
                let plain = if v6 {
                    udp6(e.a, e.b, &text(n))
                } else {
                    udp4([192, 0, 2, 1], [192, 0, 2, 2], &text(n))
                };
                let wire = through((&a, &sa), (&b, &sb), &plain);
                // AH outside, ESP inside it: AH's next header names ESP.
                assert_eq!(outer_proto(&wire), IpProtocol::AH.0, "{}: AH outside", e.a);
                let ah = if v6 { 40 } else { 20 };
                assert_eq!(wire[ah], IpProtocol::ESP.0, "{}: ESP under AH", e.a);
                assert_eq!(&wire[ah + 4..ah + 8], &0x2001u32.to_be_bytes(), "AH's SPI");
            }
            assert_eq!(sa_stats(&b, e.a, e.b, Proto::Esp, 0x1001), (0, 4));
            assert_eq!(sa_stats(&b, e.a, e.b, Proto::Ah, 0x2001), (0, 4));
            assert_eq!(b.stats().total_drops(), 0, "{}", b.stats());
        }
    }
}

#[test]
fn the_receiver_checks_the_whole_bundle() {
    let host = Ends { net_a: "192.0.2.1/32", net_b: "192.0.2.2/32", ..V4 };
    let plain = udp4([192, 0, 2, 1], [192, 0, 2, 2], &text(100));
    // (what A applies, what B's inbound policy requires)
    for (sent, required) in [
        ("esp/transport//require", ESP_AH),                       // an SA missing
        ("ah/transport//require", ESP_AH),                        // the other one missing
        (ESP_AH, "esp/transport//require"),                       // one SA too many
        ("ah/transport//require esp/transport//require", ESP_AH), // the wrong order
        (ESP_AH, "esp/transport//require ah/transport//use"),     // `use`: AH may be there...
        ("esp/transport//require", "esp/transport//require ah/transport//use"), // ...or not
    ] {
        // (Each side's other policy does not matter here: it only brings the SAs along.)
        let (a, sa) = core(&config(&host, true, sent, required), false);
        let (b, sb) = core(&config(&host, false, sent, required), false);
        a.output(Packet::with_headroom(&plain)).unwrap();
        let wire = sa.take_sent().pop().unwrap();
        let got = b.input(Packet::new(wire));
        if required.contains("//use") {
            assert_eq!(got, Ok(()), "{sent} against {required}");
            assert_eq!(sb.take_delivered(), vec![plain.clone()]);
        } else {
            assert_eq!(got, Err(Drop::Policy), "{sent} against {required}");
            assert!(sb.take_delivered().is_empty());
            assert_eq!(b.stats().drops(Drop::Policy), 1, "{}", b.stats());
        }
    }
}

#[test]
fn a_bundle_missing_an_sa_asks_for_it_and_sends_the_held_packet_through_every_sa() {
    let host = Ends { net_a: "192.0.2.1/32", net_b: "192.0.2.2/32", ..V4 };
    let full = config(&host, true, ESP_AH, ESP_AH);
    // Without A's outbound AH SA.
    let without: String = full.lines().filter(|l| !l.contains("0x2001")).map(|l| format!("{l}\n")).collect();
    let (a, sa) = core(&without, false);
    let (b, sb) = core(&config(&host, false, ESP_AH, ESP_AH), false);
    let plain = udp4([192, 0, 2, 1], [192, 0, 2, 2], &text(100));
    assert_eq!(a.output(Packet::with_headroom(&plain)), Ok(()), "held");
    assert!(sa.take_sent().is_empty(), "nothing sent through ESP alone");
    let events = a.take_events();
    let [Event::Acquire(acq)] = events.as_slice() else { panic!("{events:?}") };
    assert_eq!(acq.proto, Proto::Ah, "the missing SA is asked for");
    assert_eq!(sa_stats(&a, host.a, host.b, Proto::Esp, 0x1001), (0, 0), "ESP not used yet");
    // The AH SA comes: the held packet goes through both.
    let add = format!("add {} {} ah 0x2001 -m transport -A hmac-sha2-256 {SHA256_AB};", host.a, host.b);
    for r in ipsec_core::setkey::parse(&add).unwrap() {
        a.control(&r.item).unwrap();
    }
    let wire = wait(&sa, 1, true).pop().unwrap();
    assert_eq!(outer_proto(&wire), IpProtocol::AH.0);
    b.input(Packet::new(wire)).unwrap();
    assert_eq!(sb.take_delivered(), vec![plain]);
}

#[test]
fn a_policy_of_more_rules_than_a_bundle_holds_is_dropped_by_name() {
    let host = Ends { net_a: "192.0.2.1/32", net_b: "192.0.2.2/32", ..V4 };
    let five = "esp/transport//require ah/transport//require esp/transport//require \
                ah/transport//require esp/transport//require";
    let (a, sa) = core(&config(&host, true, five, ESP_AH), false);
    let plain = udp4([192, 0, 2, 1], [192, 0, 2, 2], &text(10));
    assert_eq!(a.output(Packet::with_headroom(&plain)), Err(Drop::BundleTooDeep));
    assert!(sa.take_sent().is_empty());
}

/// Host to host, as racoon configures compression: IPComp and ESP both in transport mode
/// (`ipcomp/transport//use esp/transport//require`). A compressible packet goes as ESP
/// carrying IPComp behind the packet's own header; a short one as ESP alone (IPComp sends
/// it as it is, and the receiver's `use` rule lets the bundle go without it).
#[test]
fn ipcomp_and_esp_both_in_transport_mode() {
    let rules = "ipcomp/transport//use esp/transport//require";
    let host = Ends { net_a: "192.0.2.1/32", net_b: "192.0.2.2/32", ..V4 };
    let config = |me_is_a| config(&host, me_is_a, rules, rules).replace("-m tunnel -C", "-m transport -C");
    let (a, sa) = core(&config(true), false);
    let (b, sb) = core(&config(false), false);
    let big = udp4([192, 0, 2, 1], [192, 0, 2, 2], &text(1300));
    let wire = through((&a, &sa), (&b, &sb), &big);
    assert_eq!(outer_proto(&wire), IpProtocol::ESP.0);
    assert!(wire.len() < big.len() / 2, "{} bytes for {}", wire.len(), big.len());
    let short = udp4([192, 0, 2, 1], [192, 0, 2, 2], b"hi");
    through((&a, &sa), (&b, &sb), &short);
    assert_eq!(sa_stats(&b, host.a, host.b, Proto::Esp, 0x1001), (0, 2));
    assert_eq!(sa_stats(&b, host.a, host.b, Proto::IpComp, 0x4001), (0, 1), "only the big one compressed");
    assert_eq!(b.stats().total_drops(), 0, "{}", b.stats());
}

/// A bundle's packet that no inbound policy covers (RFC 4301 §5.2): A's policy sends all
/// of 10/8 through IPComp under ESP, B's inbound policy covers 10.1/16 only. A packet from
/// 10.77.0.1, compressed or not, is dropped after the last SA as `no_inbound_policy` (it
/// was delivered); the policy's own traffic still passes.
#[test]
fn a_bundles_packet_that_no_inbound_policy_covers_is_dropped() {
    let wide = Ends { net_a: "10.0.0.0/8", ..V4 };
    let (a, sa) = core(&config(&wide, true, IPCOMP_ESP, IPCOMP_ESP), false);
    let (b, sb) = core(&config(&V4, false, IPCOMP_ESP, IPCOMP_ESP), false);
    for payload in [text(1300), b"hi".to_vec()] {
        let plain = udp4([10, 77, 0, 1], [10, 2, 0, 1], &payload);
        a.output(Packet::with_headroom(&plain)).unwrap();
        let wire = wait(&sa, 1, true).pop().unwrap();
        assert_eq!(b.input(Packet::new(wire)), Err(Drop::NoInboundPolicy), "{} bytes", payload.len());
        assert!(sb.take_delivered().is_empty());
    }
    assert_eq!(b.stats().drops(Drop::NoInboundPolicy), 2, "{}", b.stats());
    through((&a, &sa), (&b, &sb), &udp4([10, 1, 0, 1], [10, 2, 0, 1], &text(1300)));
    assert_eq!(b.stats().total_drops(), 2, "{}", b.stats());
}
