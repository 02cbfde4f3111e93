//! `docs/gateway.md`'s walkthrough, read from the guide itself so that it cannot rot: its
//! key recipe and its two files, as a user copies them, load into two cores, and a packet
//! from the host behind each gateway reaches the host behind the other, both ways. A's file
//! loaded on B (the mistake the old "mirrored" wording invited) loads, and routes nothing.

use std::collections::HashMap;
use std::sync::Arc;

use ipsec_core::stats::Drop;
use ipsec_core::{DefaultPolicy, Ipsec, Packet, Results, Sink, Via};
use ipsecd::service::apply_setkey;

fn guide() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/gateway.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The files the guide writes (`cat >NAME <<EOF` … `EOF`), by name.
fn files(guide: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut lines = guide.lines();
    while let Some(l) = lines.next() {
        if let Some(name) = l.strip_prefix("cat >").and_then(|r| r.strip_suffix(" <<EOF")) {
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "EOF").collect();
            out.insert(name.to_owned(), body.join("\n") + "\n");
        }
    }
    out
}

/// The key recipe's variables (`K_AB=0x$(openssl rand -hex N)`): name and byte count.
fn recipe(guide: &str) -> Vec<(String, usize)> {
    guide
        .lines()
        .filter_map(|l| {
            let (var, rest) = l.split_once("=0x$(openssl rand -hex ")?;
            let n = rest.split(')').next()?.parse().ok()?;
            Some((var.to_owned(), n))
        })
        .collect()
}

/// A file with the recipe's keys in place of `$VAR`, each key as the recipe makes it (the
/// same bytes on both gateways, different between variables).
fn filled(file: &str, keys: &[(String, usize)]) -> String {
    let mut text = file.to_owned();
    for (i, (var, n)) in keys.iter().enumerate() {
        let hex: String = (0..*n).map(|b| format!("{:02x}", (b * 7 + i * 101 + 3) as u8)).collect();
        text = text.replace(&format!("${var}"), &format!("0x{hex}"));
    }
    assert!(!text.contains('$'), "a variable the recipe does not make: {text}");
    text
}

struct Nowhere;

impl Sink for Nowhere {
    fn transmit(&self, _: Packet) {}
    fn deliver(&self, _: Packet) {}
}

fn gateway(conf: &str) -> Ipsec {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let core = Ipsec::new(fw, Arc::new(Nowhere));
    // As ipsecd sets it: what no policy covers is dropped, never sent in clear.
    core.set_default_policy(DefaultPolicy::Discard);
    apply_setkey(&core, "guide", conf)
        .unwrap_or_else(|e| panic!("the guide's file does not load: {e}\n{conf}"));
    core
}

/// An IPv4 UDP packet between two hosts.
fn packet(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut p = vec![0x45, 0, 0, 48, 0, 0, 0x40, 0, 64, 17, 0, 0];
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    let c = ipsec_wire::checksum::checksum(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&[0x30, 0x39, 0, 53, 0, 28, 0, 0]);
    p.resize(48, 7);
    p
}

/// `inner` through `from` (sealed) and `to` (opened): what `to` delivers.
fn through(from: &Ipsec, to: &Ipsec, inner: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Results::default();
    from.output_one(Packet::with_headroom(inner), &mut out).expect("sealed");
    assert_eq!(out.transmit.len(), 1, "one ESP packet");
    let mut back = Results::default();
    to.input(out.transmit.drain(..), Via::Ip, &mut back);
    back.deliver.iter().map(|p| p.bytes().to_vec()).collect()
}

#[test]
fn the_guides_files_load_and_carry_traffic_both_ways() {
    let guide = guide();
    let keys = recipe(&guide);
    assert_eq!(
        keys,
        [("K_AB".to_owned(), 20), ("K_BA".to_owned(), 20)],
        "AES-GCM-128: 16 key + 4 salt bytes"
    );
    let files = files(&guide);
    let (a, b) = (&files["a.conf"], &files["b.conf"]);
    for f in [a, b] {
        assert!(f.contains("-P out") && f.contains("-P in"), "both policies on each side: {f}");
    }
    let (a, b) = (gateway(&filled(a, &keys)), gateway(&filled(b, &keys)));
    let host_a = [10, 98, 1, 10];
    let host_b = [10, 98, 2, 10];
    let ab = packet(host_a, host_b);
    assert_eq!(through(&a, &b, &ab), [ab], "host a -> host b");
    let ba = packet(host_b, host_a);
    assert_eq!(through(&b, &a, &ba), [ba], "host b -> host a");
    // The gateway's own ping with -I 10.98.1.1, and without (source 10.99.0.1: no policy).
    let own = packet([10, 98, 1, 1], host_b);
    assert_eq!(through(&a, &b, &own), [own], "ping -I 10.98.1.1");
    let bare = packet([10, 99, 0, 1], host_b);
    assert_eq!(a.output_one(Packet::with_headroom(&bare), &mut Results::default()), Err(Drop::NoPolicy));
}

#[test]
fn a_copy_of_as_file_on_b_loads_and_routes_nothing() {
    let guide = guide();
    let keys = recipe(&guide);
    let a_conf = filled(&files(&guide)["a.conf"], &keys);
    let b = gateway(&a_conf);
    // Host b's reply has no outbound policy on such a B: dropped, not sealed.
    let reply = packet([10, 98, 2, 10], [10, 98, 1, 10]);
    assert_eq!(b.output_one(Packet::with_headroom(&reply), &mut Results::default()), Err(Drop::NoPolicy));
}
