//! A clean source passes 10^9 samples without one failure (issue 32: "never on a clean
//! source over 10^9 samples (a test, seeded)").
//!
//! The source is ChaCha8 with a fixed seed: bytes indistinguishable from uniform, so each
//! has the full 8 bits of min-entropy. It claims H = 4 (as the hwrng driver does): at the
//! true H = 8 the tests, whose α = 2^-20 holds at the *claimed* H, would trip about 60
//! times in 10^9 samples (a run of 4 equal bytes, C = 1 + ⌈20/8⌉, has probability 2^-24
//! per sample) — by design, not a fault. At the claim H = 4:
//!
//! - repetition count, C = 1 + ⌈20/4⌉ = 6: a sample ends a run of 6 with probability at
//!   most 256^-5 = 2^-40, so over N = 10^9 samples E ≤ 10^9 · 2^-40 ≈ 9.1·10^-4;
//! - adaptive proportion, W = 1024, C = 1 + CRITBINOM(1024, 2^-4, 1 - 2^-20) = 105: a
//!   window trips when its first value recurs 104 times among the other 1023, for a
//!   uniform byte P ≤ P(Binomial(1024, 1/256) ≥ 104) ≈ 10^-102, over 10^9 / 1024 ≈
//!   976,563 windows E ≈ 10^-96.
//!
//! The test computes both expectations with the crate's own binomial tail and asserts
//! their sum is below 10^-3 before it runs: a false alarm would then be a 1-in-1000 event.

mod common;

use std::time::Instant;

use common::clean;
use ocf_health::{binomial_upper_tail, Claim, HealthState, TestedSource};

const SAMPLES: u64 = 1_000_000_000;

#[test]
fn a_clean_source_passes_a_billion_samples_without_a_failure() {
    let claim = Claim::bytes(4.0);
    let cut = claim.cutoffs().unwrap();
    assert_eq!((cut.rct, cut.apt, cut.window), (6, 105, 1024));

    let rct_expected = SAMPLES as f64 * 256f64.powi(-(cut.rct as i32 - 1));
    let windows = SAMPLES as f64 / f64::from(cut.window);
    let apt_expected = windows * binomial_upper_tail(cut.window, 1.0 / 256.0, cut.apt - 1);
    assert!(rct_expected + apt_expected < 1e-3, "expected false alarms {rct_expected} + {apt_expected}");

    let mut src = TestedSource::new(clean(0x0cf_5eed), claim).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut left = SAMPLES;
    let t = Instant::now();
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        src.fill(&mut buf[..n]).expect("a clean source never trips");
        left -= n as u64;
    }
    let s = src.stats();
    eprintln!("10^9 samples: {:.2} s, {s:?}", t.elapsed().as_secs_f64());
    assert_eq!(src.state(), HealthState::Healthy);
    assert_eq!((s.rct_failures, s.apt_failures, s.startup_failures, s.bytes_discarded), (0, 0, 0, 0));
    assert_eq!(s.bytes_out, SAMPLES);
    assert_eq!(s.samples, SAMPLES + 1024, "every byte tested, the start-up's 1024 too");
}
