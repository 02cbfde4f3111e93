//! What the default routing policy costs a request, against the same request on a session
//! pinned to `soft`: AES-128-GCM encryption, one thread, `soft` + `sim:qat-like` routed by
//! `cost-model` (cryptotest's `-d soft -d sim:qat-like -d auto` in one process).
//!
//! Built for a shared, noisy machine: the two sessions take turns in short slices (about
//! 1 ms of CPU each, the order swapped every round), and each slice is timed with the thread's own
//! CPU clock (`CLOCK_THREAD_CPUTIME_ID`), so time the thread spends preempted counts for
//! neither and a burst of other work on the machine hits both alike. Per size it prints
//! ns per request for each, and auto ÷ soft (throughput: soft's time over auto's) as the
//! median of the rounds with their range. Both sessions run for 300 ms first, so that the
//! model has measured both drivers (the card's first samples) before the clock starts; afterwards its exploration requests to the card are part of what auto
//! costs (their wait for the card is not: the thread sleeps, as in any blocking call).
//!
//! Run: `taskset -c 1 cargo run --release -p ocf-sim --example auto_cost [-- SIZES ROUNDS]`
//! (default `16,256,1024,8192 200`); `AUTO_COST_MODEL=1` also prints the timed decisions
//! and the model after each size. Its figures are in `docs/measurements.md` ("What the
//! default policy costs a small request"). The "p10" columns compare the two sessions'
//! 10th-percentile slices: their cost when other work on the core has evicted least.

use std::time::{Duration, Instant};

use nix::time::{clock_gettime, ClockId};
use ocf::{CipherAlg, Config, Framework, Key, Op, Request, Session, SessionParams};

/// CPU time one slice of one session takes, roughly (short, so that the two sessions see
/// the same machine).
const SLICE: Duration = Duration::from_millis(1);

fn thread_ns() -> u64 {
    let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).expect("thread CPU clock");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

fn framework(policy: ocf::Policy) -> Framework {
    // Profiling off, as cryptotest has it without -p.
    let fw = Framework::with_config(Config { policy, profile_every: 0, ..Config::default() });
    ocf_soft::register(&fw).expect("soft");
    ocf_sim::register(&fw, "qat-like").expect("sim:qat-like");
    fw
}

/// `n` requests through `s`, the one request reused; CPU ns taken.
fn slice(s: &Session, req: &mut Option<Request>, n: u64) -> u64 {
    let start = thread_ns();
    for _ in 0..n {
        let r = s.run(req.take().expect("request")).expect("AES-GCM encrypt");
        *req = Some(r);
    }
    thread_ns() - start
}

fn median(v: &mut [f64]) -> f64 {
    quantile(v, 0.5)
}

/// The `q` quantile (nearest rank) of `v`.
fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sizes: Vec<usize> = args
        .first()
        .map_or("16,256,1024,8192", String::as_str)
        .split(',')
        .map(|s| s.parse().expect("sizes: bytes, comma-separated"))
        .collect();
    let rounds: usize = args.get(1).map_or(200, |r| r.parse().expect("rounds"));

    let params = SessionParams::aead(CipherAlg::AesGcm, Key::new(&[7u8; 16]));
    let pinned_fw = framework(ocf::Policy::CostModel);
    let auto_fw = framework(ocf::Policy::CostModel);
    let soft = pinned_fw.new_session_on(ocf_soft::NAME, &params).expect("soft session");
    let auto = auto_fw.new_session(&params).expect("auto session");
    assert_eq!(auto.drivers().len(), 2, "auto routes between soft and the card");

    println!("AES-128-GCM encrypt, 1 thread, {rounds} rounds of alternating slices (thread CPU time)");
    println!(
        "{:>6} {:>10} {:>10} {:>9}  {:>13}  {:>12} {:>12} {:>9}  {:>8}",
        "bytes",
        "soft ns",
        "auto ns",
        "auto÷soft",
        "range",
        "soft ns p10",
        "auto ns p10",
        "p10 ratio",
        "to card"
    );
    for len in sizes {
        let request = || Request::new(Op::Encrypt, vec![0u8; len]).with_iv(&[1u8; 12]);
        let (mut rs, mut ra) = (Some(request()), Some(request()));
        // The model measures both drivers first (the card's warm-up samples are 1 ms apart).
        let warm = Instant::now();
        while warm.elapsed() < Duration::from_millis(300) {
            slice(&auto, &mut ra, 100);
            slice(&soft, &mut rs, 100);
        }
        let before = auto_fw.routing();
        // Requests per slice: about SLICE of CPU time.
        let per = slice(&soft, &mut rs, 10_000) as f64 / 10_000.0;
        let n = ((SLICE.as_nanos() as f64 / per) as u64).max(100);
        let (mut ts, mut ta, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let (s, a) = if round % 2 == 0 {
                let s = slice(&soft, &mut rs, n);
                (s, slice(&auto, &mut ra, n))
            } else {
                let a = slice(&auto, &mut ra, n);
                (slice(&soft, &mut rs, n), a)
            };
            ts.push(s as f64 / n as f64);
            ta.push(a as f64 / n as f64);
            ratio.push(s as f64 / a as f64);
        }
        let card = auto_fw.routing().drivers[1].routed_total() - before.drivers[1].routed_total();
        let (lo, hi) = ratio.iter().fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
        let (s10, a10) = (quantile(&mut ts, 0.1), quantile(&mut ta, 0.1));
        println!(
            "{len:>6} {:>10.1} {:>10.1} {:>9.3}  {lo:>6.3}-{hi:<6.3}  {s10:>12.1} {a10:>12.1} {:>9.3}  {card:>8}",
            median(&mut ts),
            median(&mut ta),
            median(&mut ratio),
            s10 / a10
        );
        if std::env::var_os("AUTO_COST_MODEL").is_some() {
            let r = auto_fw.routing();
            println!("       {} timed decisions in all, {:.0} ns each", r.decisions, r.decision_ns);
            for d in &r.drivers {
                for m in &d.models {
                    println!("       {} {m} explored {}", d.driver, d.explored);
                }
            }
        }
    }
}
