//! The card's random number generator: a simulated noise source whose every raw byte goes
//! through SP 800-90B's health tests (`ocf-health`) before it is given out, and faults that
//! tests switch on and off while the card runs.
//!
//! ```text
//!  Op::Random on the pk queue ─▶ device thread: CardRng::fill(payload)
//!      Mutex<TestedSource<SimNoise>>
//!        ├─ start-up test (1024 samples) when new or out
//!        ├─ SimNoise::fill_raw: ChaCha20 stream ─▶ fault (Stuck | Bias(p)) applied
//!        └─ repetition count + adaptive proportion tests on every byte
//!      ◀─ Ok: payload overwritten      ◀─ Err(RandomSourceFailed { why }), payload untouched
//! ```
//!
//! The noise is a ChaCha20 stream, seeded from the OS (or from `rng_seed=N` for tests,
//! whose bytes are then predictable): uniform bytes, as an ideal physical source's
//! digitised output would be. The claim ([`CLAIM`]) is 4 bits of min-entropy per byte, as
//! `ocf-hwrng` claims for its sources: half of what the stream holds, so that a healthy
//! card trips a test falsely about once per 2^40 bytes instead of once per 2^24, while a
//! stuck byte still trips the repetition count test at its 6th repetition and a value
//! that takes a tenth or more of the output trips the adaptive proportion test (cutoff
//! 105 in a window of 1024) in the first window that opens on it.
//!
//! Faults ([`RngFault`], `SimDriver::rng_fault`): `Stuck` makes the source repeat one
//! value; `Bias(p)` replaces each byte by one value with probability `p` (drawn from the
//! same stream). A failed source answers every request with
//! `ocf::Error::RandomSourceFailed` — each request runs a new start-up test, which a
//! faulty source fails — until the fault is healed and a start-up test passes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use ocf::Error;
use ocf_health::{Claim, HealthState, HealthStats, NoiseSource, SampleWidth, SourceError, TestedSource};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// The min-entropy the card's noise source claims per byte (see the module docs).
pub const CLAIM: Claim = Claim { entropy: 4.0, width: SampleWidth::Byte };

/// The value a faulty source repeats or favours.
pub const FAULT_VALUE: u8 = 0xA5;

/// A fault of the card's noise source, switched on with `SimDriver::rng_fault`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RngFault {
    /// Every byte is [`FAULT_VALUE`] (a stuck source).
    Stuck,
    /// Each byte is [`FAULT_VALUE`] with probability `p` (0 to 1), else the stream's (a
    /// source that has lost entropy).
    Bias(f64),
}

/// The generator's counters, in [`crate::SimStats::rng`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RngStats {
    /// Where the source stands now.
    pub state: HealthState,
    /// The health tests' counters: samples tested, failures per test, start-ups, bytes out
    /// and discarded.
    pub health: HealthStats,
    /// Random requests answered with `RandomSourceFailed`.
    pub failed_requests: u64,
    /// Random requests served.
    pub served_requests: u64,
    /// A fault is switched on now.
    pub faulty: bool,
}

/// The simulated noise source: a ChaCha20 stream, with the switched-on fault applied.
pub(crate) struct SimNoise {
    stream: ChaCha20Rng,
    fault: Option<RngFault>,
}

impl NoiseSource for SimNoise {
    fn fill_raw(&mut self, buf: &mut [u8]) -> Result<(), SourceError> {
        match self.fault {
            None => self.stream.fill_bytes(buf),
            Some(RngFault::Stuck) => buf.fill(FAULT_VALUE),
            Some(RngFault::Bias(p)) => {
                // p as a 32-bit threshold; clamped so that any f64 is a fault, never a panic.
                let threshold = (p.clamp(0.0, 1.0) * 4_294_967_296.0) as u64;
                for b in buf.iter_mut() {
                    let draw = self.stream.next_u64();
                    *b = if (draw >> 32) < threshold { FAULT_VALUE } else { draw as u8 };
                }
            }
        }
        Ok(())
    }
}

/// The card's generator: the tested source under a lock (the device thread fills, tests
/// switch faults) and the request counters.
pub(crate) struct CardRng {
    source: Mutex<TestedSource<SimNoise>>,
    failed: AtomicU64,
    served: AtomicU64,
}

impl CardRng {
    pub(crate) fn new(seed: Option<u64>) -> CardRng {
        let stream = match seed {
            Some(s) => ChaCha20Rng::seed_from_u64(s),
            None => ChaCha20Rng::from_os_rng(),
        };
        let noise = SimNoise { stream, fault: None };
        // CLAIM is a possible claim (4 of 8 bits); the unit test checks its cutoffs.
        let source = TestedSource::new(noise, CLAIM).unwrap_or_else(|_| unreachable!("CLAIM is valid"));
        CardRng { source: Mutex::new(source), failed: AtomicU64::new(0), served: AtomicU64::new(0) }
    }

    fn lock(&self) -> MutexGuard<'_, TestedSource<SimNoise>> {
        self.source.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Overwrites `payload` with tested bytes, or fails leaving it untouched.
    pub(crate) fn fill(&self, payload: &mut [u8]) -> Result<(), Error> {
        let result = self.lock().fill(payload);
        match result {
            Ok(()) => {
                self.served.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(f) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                Err(Error::RandomSourceFailed { why: f.why() })
            }
        }
    }

    pub(crate) fn set_fault(&self, fault: Option<RngFault>) {
        self.lock().source_mut().fault = fault;
    }

    pub(crate) fn stats(&self) -> RngStats {
        let source = self.lock();
        RngStats {
            state: source.state(),
            health: source.stats(),
            failed_requests: self.failed.load(Ordering::Relaxed),
            served_requests: self.served.load(Ordering::Relaxed),
            faulty: source.source().fault.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use ocf_health::Cutoffs;

    use super::*;

    #[test]
    fn the_claim_gives_the_documented_cutoffs() {
        assert_eq!(CLAIM.cutoffs().unwrap(), Cutoffs { rct: 6, apt: 105, window: 1024 });
    }

    #[test]
    fn faults_shape_the_raw_stream() {
        let mut noise = SimNoise { stream: ChaCha20Rng::seed_from_u64(7), fault: Some(RngFault::Stuck) };
        let mut buf = [0u8; 4096];
        noise.fill_raw(&mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == FAULT_VALUE));
        noise.fault = Some(RngFault::Bias(0.25));
        noise.fill_raw(&mut buf).unwrap();
        let share = buf.iter().filter(|&&b| b == FAULT_VALUE).count() as f64 / buf.len() as f64;
        // 0.25 + 0.75/256 expected; 4096 draws put 5 standard deviations at ±0.034.
        assert!((share - 0.253).abs() < 0.034, "{share}");
        noise.fault = None;
        noise.fill_raw(&mut buf).unwrap();
        let share = buf.iter().filter(|&&b| b == FAULT_VALUE).count() as f64 / buf.len() as f64;
        assert!(share < 0.02, "clean: about 1/256, got {share}");
        // Out-of-range probabilities are faults, not panics.
        noise.fault = Some(RngFault::Bias(f64::NAN));
        noise.fill_raw(&mut buf).unwrap();
        noise.fault = Some(RngFault::Bias(7.0));
        noise.fill_raw(&mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == FAULT_VALUE), "p above 1 is p = 1");
    }

    /// Issue 32: the health tests never trip on a clean source over 10^9 samples. The card's
    /// own source (seeded ChaCha20 through `CardRng`, as requests draw it), 2^30 bytes.
    #[test]
    fn a_clean_card_never_trips_over_a_billion_samples() {
        let rng = CardRng::new(Some(1_000_000_007));
        let mut chunk = vec![0u8; 1 << 20];
        for _ in 0..1024 {
            rng.fill(&mut chunk).unwrap();
        }
        let st = rng.stats();
        assert_eq!(st.health.samples, (1 << 30) + 1024);
        assert_eq!((st.health.rct_failures, st.health.apt_failures, st.failed_requests), (0, 0, 0));
        assert_eq!(st.state, HealthState::Healthy);
    }

    #[test]
    fn seeded_cards_repeat_unseeded_ones_do_not() {
        let draw = |seed| {
            let rng = CardRng::new(seed);
            let mut out = [0u8; 32];
            rng.fill(&mut out).unwrap();
            out
        };
        assert_eq!(draw(Some(1)), draw(Some(1)));
        assert_ne!(draw(Some(1)), draw(Some(2)));
        assert_ne!(draw(None), draw(None));
    }
}
