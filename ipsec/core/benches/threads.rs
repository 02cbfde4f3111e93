//! What the core costs per packet when several threads use it at once: ESP tunnel-mode
//! output and input of 1400-byte packets with AES-GCM-128 in batches of 64 through
//! `Ipsec::output` / `Ipsec::input`, by one thread, by two threads on one SA (they share
//! its sequence counter, replay window and counters) and by two threads on two SAs (they
//! share only the core's totals and the databases' snapshots).
//!
//! Run: `cargo bench -p ipsec-core --bench threads` (a machine with at least two cores).
//! Per case it prints the CPU time each thread spent per packet (its own CPU clock, so a
//! thread that another process preempts is not charged for the wait: the same as one
//! thread's means no contention, above it is what sharing costs) and the throughput of all
//! threads together over one thread's (which does depend on what else the machine runs).
//!
//! The cases take turns (the order rotating each round) so that a noisy stretch of the
//! machine hits every case alike; figures are medians over the rounds.
//!
//! Options (after `--`): `--rounds N` (default 40), `--ms N` milliseconds per case per
//! round (default 50), `--only output|input`, `--profile "CASE"` runs that case alone for
//! rounds × ms (for `perf record`; CASE as the report names it, e.g. "output, 2 threads,
//! 1 SA").

use std::net::IpAddr;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use ipsec_core::control::{
    Action, Dir, EncAlg, KeyBytes, Level, Lifetime, Mode, PolicySpec, Prefix, Proto, Request as Ctl, Rule,
    SaSpec, Selector, Upper,
};
use ipsec_core::{Ipsec, Packet, Results, Sink, Via, HEADROOM, TAILROOM};
use nix::time::{clock_gettime, ClockId};
use ocf::Framework;

const SIZE: usize = 1400;
const BATCH: usize = 64;

/// The soft driver finishes every packet in the call: nothing reaches the sink.
struct Unused;

impl Sink for Unused {
    fn transmit(&self, _: Packet) {
        unreachable!("a synchronous driver's packet came through the sink")
    }
    fn deliver(&self, _: Packet) {
        unreachable!("a synchronous driver's packet came through the sink")
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A UDP packet from 10.1.0.1 to 10.`net`.0.1, `SIZE` bytes.
fn inner_packet(net: u8) -> Vec<u8> {
    let mut p = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0, 10, 1, 0, 1, 10, net, 0, 1];
    p[2..4].copy_from_slice(&(SIZE as u16).to_be_bytes());
    let c = ipsec_wire::checksum::checksum(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&[0x30, 0x39, 0, 53]);
    p.extend_from_slice(&((SIZE - 20) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.resize(SIZE, 0x5a);
    p
}

/// A gateway with two tunnels, 10.1/16 → 10.2/16 through 192.0.2.2 (SPI 0x1002) and
/// 10.1/16 → 10.3/16 through 192.0.2.3 (SPI 0x1003), policies in direction `dir`.
/// `window` 0: replay checking off, so that input can take the same packet again (the
/// window's lock is still taken for every packet).
fn gateway(fw: &Framework, dir: Dir, window: u32) -> Ipsec {
    let g = Ipsec::new(fw.clone(), Arc::new(Unused));
    for net in [2u8, 3] {
        let peer = ip(&format!("192.0.2.{net}"));
        g.control(&Ctl::AddSa(SaSpec {
            src: ip("192.0.2.1"),
            dst: peer,
            proto: Proto::Esp,
            spi: 0x1000 + u32::from(net),
            mode: Mode::Tunnel,
            reqid: 0,
            enc: EncAlg::AesGcm16,
            enc_key: KeyBytes::new(&[net; 20]),
            auth: None,
            replay_window: window,
            esn: false,
            natt: None,
            hard: Lifetime::default(),
            soft: Lifetime::default(),
        }))
        .unwrap();
        g.control(&Ctl::AddPolicy(PolicySpec {
            selector: Selector {
                src: Prefix { addr: ip("10.1.0.0"), len: 16 },
                dst: Prefix { addr: ip(&format!("10.{net}.0.0")), len: 16 },
                sport: None,
                dport: None,
                upper: Upper::Any,
            },
            dir,
            action: Action::Protect(vec![Rule {
                proto: Proto::Esp,
                mode: Mode::Tunnel,
                tunnel: Some((ip("192.0.2.1"), peer)),
                level: Level::Require,
            }]),
        }))
        .unwrap();
    }
    g
}

/// What one thread does in a batch: refill its packets and run them through the core.
type Work = Arc<dyn Fn(&mut Vec<Packet>, &mut Results) + Send + Sync>;

/// ESP output of one batch of `plain` (recycling the previous batch's ESP buffers).
fn output_work(core: Arc<Ipsec>, plain: Vec<u8>) -> Work {
    Arc::new(move |spare: &mut Vec<Packet>, res: &mut Results| {
        spare.append(&mut res.transmit);
        let batch = (0..BATCH).map(|_| {
            let mut p = spare.pop().unwrap_or_default();
            p.data.clear();
            p.data.reserve(HEADROOM + SIZE + TAILROOM);
            p.data.resize(HEADROOM, 0);
            p.data.extend_from_slice(&plain);
            p.head = HEADROOM;
            p
        });
        core.output(batch, res);
        assert_eq!(res.transmit.len(), BATCH, "{}", core.stats());
    })
}

/// ESP input of one batch of copies of `esp`.
fn input_work(core: Arc<Ipsec>, esp: Vec<u8>) -> Work {
    Arc::new(move |spare: &mut Vec<Packet>, res: &mut Results| {
        spare.append(&mut res.deliver);
        let batch = (0..BATCH).map(|_| {
            let mut p = spare.pop().unwrap_or_default();
            p.data.clear();
            p.data.extend_from_slice(&esp);
            p.head = 0;
            p
        });
        core.input(batch, Via::Ip, res);
        assert_eq!(res.deliver.len(), BATCH, "{}", core.stats());
    })
}

/// One case: a thread per entry of `work`.
struct Case {
    name: String,
    work: Vec<Work>,
    /// Per round: CPU ns per packet of each thread (mean over the threads), and packets
    /// per second of all threads together.
    ns: Vec<f64>,
    rate: Vec<f64>,
}

/// Runs every thread of `case` for `dur`, all starting together.
fn run(case: &mut Case, dur: Duration) {
    let start = Arc::new(Barrier::new(case.work.len()));
    let per_thread: Vec<(u64, Duration, Duration)> = std::thread::scope(|s| {
        let handles: Vec<_> = case
            .work
            .iter()
            .map(|w| {
                let (w, start) = (w.clone(), start.clone());
                s.spawn(move || {
                    let (mut spare, mut res) = (Vec::with_capacity(BATCH), Results::with_capacity(BATCH));
                    w(&mut spare, &mut res);
                    start.wait();
                    let (t, cpu) = (Instant::now(), cpu_time());
                    let mut n = 0u64;
                    while t.elapsed() < dur {
                        w(&mut spare, &mut res);
                        n += BATCH as u64;
                    }
                    (n, t.elapsed(), cpu_time() - cpu)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ns: f64 = per_thread.iter().map(|(n, _, cpu)| cpu.as_nanos() as f64 / *n as f64).sum::<f64>()
        / per_thread.len() as f64;
    let rate: f64 = per_thread.iter().map(|(n, wall, _)| *n as f64 / wall.as_secs_f64()).sum();
    case.ns.push(ns);
    case.rate.push(rate);
}

/// This thread's CPU time so far.
fn cpu_time() -> Duration {
    let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).expect("the thread's CPU clock");
    Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let rounds: usize = opt("--rounds").map_or(40, |v| v.parse().expect("a number"));
    let dur = Duration::from_millis(opt("--ms").map_or(50, |v| v.parse().expect("a number")));
    let only = opt("--only");

    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let out = Arc::new(gateway(&fw, Dir::Out, 64));
    let (a, b) = (inner_packet(2), inner_packet(3));
    // The inbound gateway takes what a twin of `out` (same keys) sends.
    let twin = gateway(&fw, Dir::Out, 0);
    let esp = |plain: &[u8]| {
        let mut r = Results::default();
        twin.output_one(Packet::with_headroom(plain), &mut r).unwrap();
        r.transmit[0].bytes().to_vec()
    };
    let (esp_a, esp_b) = (esp(&a), esp(&b));
    // Reversed roles: the inbound gateway is 192.0.2.2/3, its SAs' destination.
    let inp = Arc::new(gateway(&fw, Dir::In, 0));

    let mut cases = Vec::new();
    let mut add = |dir: &str, make: &dyn Fn(bool) -> Work| {
        if only.as_deref().is_some_and(|o| o != dir) {
            return;
        }
        for (what, work) in [
            ("1 thread", vec![make(true)]),
            ("2 threads, 1 SA", vec![make(true), make(true)]),
            ("2 threads, 2 SAs", vec![make(true), make(false)]),
        ] {
            cases.push(Case { name: format!("{dir}, {what}"), work, ns: vec![], rate: vec![] });
        }
    };
    add("output", &|first| output_work(out.clone(), if first { a.clone() } else { b.clone() }));
    add("input", &|first| input_work(inp.clone(), if first { esp_a.clone() } else { esp_b.clone() }));

    if let Some(name) = opt("--profile") {
        // One case alone, for `perf record`.
        let c = cases.iter_mut().find(|c| c.name == name).expect("a case name, as the report prints it");
        run(c, dur * rounds as u32);
        return;
    }
    for r in 0..rounds {
        for k in 0..cases.len() {
            let i = (r + k) % cases.len();
            run(&mut cases[i], dur);
        }
    }
    println!(
        "ESP tunnel mode, AES-GCM-128, {SIZE}-byte packets in batches of {BATCH}: {rounds} rounds of {} ms per case",
        dur.as_millis()
    );
    println!("{:<28} {:>14} {:>12} {:>10}", "case", "CPU ns/packet", "Mpackets/s", "× 1 thread");
    for group in cases.chunks(3) {
        let base = median(&group[0].rate);
        for c in group {
            let rate = median(&c.rate);
            println!("{:<28} {:>14.0} {:>12.3} {:>10.2}", c.name, median(&c.ns), rate / 1e6, rate / base);
        }
    }
    assert_eq!(inp.stats().total_drops(), 0, "{}", inp.stats());
}
