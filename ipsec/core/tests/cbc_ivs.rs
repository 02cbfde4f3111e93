//! Outbound CBC IVs come from ocf's random operation (`src/ivs.rs`): fresh for every
//! packet, drawn from whichever driver serves random bytes, and a packet whose IV cannot be
//! drawn is dropped as `no_random`, never sent.

mod common;

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ipsec_core::control::{
    Action, AuthAlg, Dir, EncAlg, KeyBytes, Level, Lifetime, Mode, PolicySpec, Prefix, Proto, Request, Rule,
    SaSpec, Selector, Upper,
};
use ipsec_core::stats::Drop;
use ipsec_core::Packet;
use ocf::{
    Capabilities, Driver, DriverSession, Error, Hint, Priority, Processed, SessionContext, SessionParams,
};

use common::gateway::{Collect, Gateway};
use common::packets::udp_packet;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A gateway with one AES-CBC + HMAC-SHA-256 tunnel SA out, over `fw`'s drivers.
fn gateway(fw: ocf::Framework) -> (Gateway<Collect>, Arc<Collect>) {
    let sink = Arc::new(Collect::default());
    let g = Gateway::new(fw, sink.clone());
    let (a, b) = (ip("192.0.2.1"), ip("192.0.2.2"));
    g.control(&Request::AddSa(SaSpec {
        src: a,
        dst: b,
        proto: Proto::Esp,
        spi: 0x1000,
        mode: Mode::Tunnel,
        reqid: 0,
        enc: EncAlg::AesCbc,
        enc_key: KeyBytes::new(&[7; 16]),
        auth: Some((AuthAlg::HmacSha256, KeyBytes::new(&[9; 32]))),
        replay_window: 64,
        esn: false,
        natt: None,
        hard: Lifetime::default(),
        soft: Lifetime::default(),
    }))
    .unwrap();
    let net = |s: &str| Prefix { addr: ip(s), len: 24 };
    g.control(&Request::AddPolicy(PolicySpec {
        selector: Selector {
            src: net("10.1.0.0"),
            dst: net("10.2.0.0"),
            sport: None,
            dport: None,
            upper: Upper::Any,
        },
        dir: Dir::Out,
        action: Action::Protect(vec![Rule {
            proto: Proto::Esp,
            mode: Mode::Tunnel,
            tunnel: Some((a, b)),
            level: Level::Require,
        }]),
    }))
    .unwrap();
    (g, sink)
}

fn send(g: &Gateway<Collect>, n: usize) -> Vec<Result<(), Drop>> {
    (0..n)
        .map(|_| g.output(Packet::with_headroom(&udp_packet(ip("10.1.0.1"), ip("10.2.0.1"), 100))))
        .collect()
}

/// The IV of an ESP packet in a 20-byte IPv4 header: after the 8-byte ESP header.
fn iv(packet: &[u8]) -> [u8; 16] {
    packet[28..44].try_into().unwrap()
}

#[test]
fn every_packet_has_a_fresh_iv_from_the_random_operation() {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let (g, sink) = gateway(fw.clone());
    // More than one pool's worth (256 IVs) per shard: refills happen.
    assert!(send(&g, 1000).iter().all(Result::is_ok));
    let ivs: HashSet<[u8; 16]> = sink.take_sent().iter().map(|p| iv(p)).collect();
    assert_eq!(ivs.len(), 1000, "an IV was reused");
    let random = fw.driver_stats("soft").unwrap();
    assert!(random.ops >= 1000 / 256, "the IVs were not drawn through ocf: {} soft requests", random.ops);
}

/// A random source that gives `good` requests' worth of bytes, then fails its health tests.
struct Failing {
    good: AtomicU64,
}

impl Driver for Failing {
    fn name(&self) -> &str {
        "failing-rng"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { synchronous: true, random: true, ..Capabilities::default() }
    }
    fn probe_session(&self, p: &SessionParams) -> Option<Priority> {
        matches!(p.mode, ocf::Mode::Random).then_some(Priority::Hardware)
    }
    fn new_session(&self, _: &SessionParams, _: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(FailingSession(self.good.load(Ordering::Relaxed).into())))
    }
}

struct FailingSession(AtomicU64);

impl DriverSession for FailingSession {
    fn process(&self, mut r: ocf::Request, _: Hint) -> Processed {
        if self.0.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_err() {
            let e = Error::RandomSourceFailed { why: "repetition count test" };
            return Processed::Done(Err(ocf::Failed::new(e, r)));
        }
        // Distinct bytes per IV (a counter), so that the test can tell them apart.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        r.with_views(|v| {
            for chunk in v.payload.chunks_mut(8) {
                let n = NEXT.fetch_add(1, Ordering::Relaxed).to_be_bytes();
                chunk.copy_from_slice(&n[..chunk.len()]);
            }
        });
        Processed::Done(Ok(r))
    }
}

/// The soft driver without its random bytes: the ciphers of a core with no random source
/// but the ones a test gives it.
struct CiphersOnly(ocf_soft::SoftDriver);

impl Driver for CiphersOnly {
    fn name(&self) -> &str {
        "soft-ciphers"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { random: false, ..self.0.capabilities() }
    }
    fn probe_session(&self, p: &SessionParams) -> Option<Priority> {
        match p.mode {
            ocf::Mode::Random => None,
            _ => self.0.probe_session(p),
        }
    }
    fn new_session(&self, p: &SessionParams, ctx: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        self.0.new_session(p, ctx)
    }
}

/// Beside a good source, a failing one costs no packet: whenever routing gives it a refill
/// and it fails, ocf redoes the refill on the good one (the redo itself is asserted in
/// `ocf/tests/asymmetric.rs`, `a_failed_random_source_is_routed_around`).
#[test]
fn a_failing_source_beside_a_good_one_costs_no_packet() {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    fw.register(Arc::new(Failing { good: AtomicU64::new(1) })).unwrap();
    let (g, sink) = gateway(fw.clone());
    // Two threads (two shards), many refills, so that both sources are asked.
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| assert!(send(&g, 5000).iter().all(Result::is_ok)));
        }
    });
    let ivs: HashSet<[u8; 16]> = sink.take_sent().iter().map(|p| iv(p)).collect();
    assert_eq!(ivs.len(), 10_000, "an IV was reused");
    assert_eq!(g.stats().drops(Drop::NoRandom), 0);
}

#[test]
fn a_packet_without_a_random_iv_is_dropped_and_counted() {
    // The only random source fails after one pool: the rest are dropped, not sent.
    let fw = ocf::Framework::new();
    fw.register(Arc::new(CiphersOnly(ocf_soft::SoftDriver::default()))).unwrap();
    fw.register(Arc::new(Failing { good: AtomicU64::new(1) })).unwrap();
    let (g, sink) = gateway(fw);
    let results = send(&g, 300);
    assert_eq!(sink.take_sent().len(), 256, "one pool of 16-byte IVs, then nothing");
    assert!(results[256..].iter().all(|r| *r == Err(Drop::NoRandom)), "{:?}", &results[250..260]);
    assert_eq!(g.stats().drops(Drop::NoRandom), 44);

    // No random source at all.
    let fw = ocf::Framework::new();
    fw.register(Arc::new(CiphersOnly(ocf_soft::SoftDriver::default()))).unwrap();
    let (g, sink) = gateway(fw);
    assert!(send(&g, 3).iter().all(|r| *r == Err(Drop::NoRandom)));
    assert!(sink.take_sent().is_empty());
}
