//! Property: for random packets, algorithms, keys, modes, address families, ESN and UDP
//! encapsulation, what one gateway encapsulates the other decapsulates to the same bytes,
//! and any single flipped bit in the ESP packet makes it a counted drop, never a delivery
//! of something else.

mod common;

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use ipsec_core::control::{
    Action, AuthAlg, Dir, EncAlg, KeyBytes, Level, Lifetime, Mode, NatT, PolicySpec, Prefix, Proto, Request,
    Rule, SaSpec, Selector, Upper,
};
use ipsec_core::{Packet, Sink};
use proptest::prelude::*;

use common::gateway::Gateway;

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

/// An IPv4 or IPv6 packet of protocol 253 (RFC 3692 experimentation) with `body`.
fn packet(src: IpAddr, dst: IpAddr, body: &[u8]) -> Vec<u8> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = vec![0x45, 0, 0, 0, 0, 7, 0, 0, 64, 253, 0, 0];
            h[2..4].copy_from_slice(&((20 + body.len()) as u16).to_be_bytes());
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            let c = ipsec_wire::checksum::checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h.extend_from_slice(body);
            h
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut h = vec![0x60, 0, 0, 0];
            h.extend_from_slice(&(body.len() as u16).to_be_bytes());
            h.extend_from_slice(&[253, 64]);
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            h.extend_from_slice(body);
            h
        }
        _ => unreachable!(),
    }
}

fn algs() -> impl Strategy<Value = (EncAlg, usize, Option<AuthAlg>)> {
    prop_oneof![
        Just((EncAlg::AesGcm16, 20, None)),
        Just((EncAlg::AesGcm16, 36, None)),
        Just((EncAlg::ChaCha20Poly1305, 36, None)),
        prop::sample::select(AuthAlg::ALL.to_vec()).prop_map(|a| (EncAlg::AesCbc, 16, Some(a))),
        prop::sample::select(AuthAlg::ALL.to_vec()).prop_map(|a| (EncAlg::AesCbc, 32, Some(a))),
        Just((EncAlg::TdesCbc, 24, Some(AuthAlg::HmacSha1))),
        prop::sample::select(AuthAlg::ALL.to_vec()).prop_map(|a| (EncAlg::Null, 0, Some(a))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn encapsulate_then_decapsulate_is_identity(
        (enc, klen, auth) in algs(),
        key_seed in any::<u8>(),
        body in prop::collection::vec(any::<u8>(), 0..1500),
        tunnel in any::<bool>(),
        v6_outer in any::<bool>(),
        v6_inner in any::<bool>(),
        esn in any::<bool>(),
        natt in any::<bool>(),
        flip in any::<prop::sample::Index>(),
    ) {
        let outer: (IpAddr, IpAddr) = if v6_outer {
            ("2001:db8::1".parse().unwrap(), "2001:db8::2".parse().unwrap())
        } else {
            ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap())
        };
        let inner: (IpAddr, IpAddr) = if !tunnel {
            outer
        } else if v6_inner {
            ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap())
        } else {
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
        };
        // 3DES needs three distinct subkeys; every key byte differs.
        let key: Vec<u8> = (0..klen).map(|i| key_seed.wrapping_add((i as u8).wrapping_mul(37))).collect();
        let spec = SaSpec {
            src: outer.0,
            dst: outer.1,
            proto: if natt { Proto::EspUdp } else { Proto::Esp },
            spi: 0x4242,
            mode: if tunnel { Mode::Tunnel } else { Mode::Transport },
            reqid: 0,
            enc,
            enc_key: KeyBytes::new(&key),
            auth: auth.map(|a| (a, KeyBytes::new(&vec![key_seed ^ 0x5c; a.key_len()]))),
            replay_window: 64,
            esn,
            natt: natt.then_some(NatT { sport: 4500, dport: 4500 }),
            hard: Lifetime::default(),
            soft: Lifetime::default(),
        };
        let host = |a: IpAddr| Prefix { addr: a, len: if a.is_ipv4() { 32 } else { 128 } };
        let pol = |dir| PolicySpec {
            selector: Selector { src: host(inner.0), dst: host(inner.1), sport: None, dport: None, upper: Upper::Any },
            dir,
            action: Action::Protect(vec![Rule {
                proto: Proto::Esp,
                mode: spec.mode,
                tunnel: tunnel.then_some(outer),
                level: Level::Require,
            }]),
        };
        let fw = ocf::Framework::new();
        ocf_soft::register(&fw).unwrap();
        let (ls, rs) = (Arc::new(Collect::default()), Arc::new(Collect::default()));
        let (left, right) = (Gateway::new(fw.clone(), ls.clone()), Gateway::new(fw, rs.clone()));
        for (g, dir) in [(&left, Dir::Out), (&right, Dir::In)] {
            g.control(&Request::AddSa(spec.clone())).unwrap();
            g.control(&Request::AddPolicy(pol(dir))).unwrap();
        }
        let plain = packet(inner.0, inner.1, &body);
        left.output(Packet::new(plain.clone())).unwrap();
        let esp = ls.0.lock().unwrap().remove(0);

        // One flipped bit after the outer IP header (and UDP): dropped, never delivered.
        let outer_len = if v6_outer { 40 } else { 20 } + if natt { 8 } else { 0 };
        let at = outer_len + flip.index(esp.len() - outer_len);
        let mut bad = esp.clone();
        bad[at] ^= 1;
        let _ = right.input(Packet::new(bad));
        prop_assert!(rs.0.lock().unwrap().is_empty(), "a tampered packet was delivered");
        prop_assert_eq!(right.stats().total_drops(), 1);

        right.input(Packet::new(esp)).unwrap();
        let got = rs.0.lock().unwrap().remove(0);
        prop_assert_eq!(got, plain);
    }
}
