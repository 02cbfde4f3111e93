//! RDSEED: the x86 instruction that returns 64 bits from the CPU's entropy source
//! (Intel since Broadwell, AMD since Zen), through the CPU's own conditioner.
//!
//! The instruction may answer "not ready" (CF = 0) when the source is drained, most
//! often under contention from other cores; Intel's DRNG guide asks callers to retry.
//! Each 64-bit word is tried up to [`TRIES`] times with a spin-loop pause between, every
//! "not ready" counted; a word that never comes fails the read (the request then fails
//! with `RandomSourceFailed`, naming it).
//!
//! Only the 64-bit form is used. On the AMD Zen 5 this was written on, CPUID reports RDSEED
//! but the kernel's `/proc/cpuinfo` does not list it — probably Linux clearing the flag
//! after AMD's 2025 erratum, in which Zen 5's 16- and 32-bit forms could return 0 while
//! signalling success. A source that answers zeros trips the repetition count test within
//! six bytes, so such a fault fails requests instead of passing zeros on.
//!
//! The intrinsic is `unsafe` only because the instruction must exist: a [`Rdseed`] is
//! made only after `is_x86_feature_detected!("rdseed")` said so. That is this crate's one
//! use of `unsafe`; the `rdrand` crate would hide the same intrinsic behind a dependency
//! whose current release needs Rust 1.86 (the workspace's floor is 1.85).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ocf_health::{NoiseSource, SourceError};

/// Tries per 64-bit word before the read fails.
pub const TRIES: u32 = 1024;

/// RDSEED's counters, shared with the driver's stats.
#[derive(Debug, Default)]
pub struct RdseedCounters {
    /// Answers "not ready" (CF = 0) that were retried.
    pub not_ready: AtomicU64,
    /// Words that did not come in [`TRIES`] tries (each failed a read).
    pub exhausted: AtomicU64,
}

/// The instruction as a noise source (present on this CPU).
pub struct Rdseed {
    counters: Arc<RdseedCounters>,
}

impl Rdseed {
    /// The source, or why this CPU has none.
    pub fn probe(counters: Arc<RdseedCounters>) -> Result<Rdseed, &'static str> {
        if cpu::has_rdseed() {
            Ok(Rdseed { counters })
        } else {
            Err(cpu::WHY_NOT)
        }
    }
}

impl NoiseSource for Rdseed {
    fn fill_raw(&mut self, buf: &mut [u8]) -> Result<(), SourceError> {
        // `Rdseed` exists only where the CPU has the instruction.
        fill_words(buf, TRIES, &self.counters, cpu::rdseed64)
    }
}

/// Fills `buf` from 64-bit words that `step` gives (`None`: not ready), little-endian,
/// each tried up to `tries` times.
pub(crate) fn fill_words(
    buf: &mut [u8],
    tries: u32,
    counters: &RdseedCounters,
    mut step: impl FnMut() -> Option<u64>,
) -> Result<(), SourceError> {
    for chunk in buf.chunks_mut(8) {
        let mut word = None;
        for _ in 0..tries {
            word = step();
            if word.is_some() {
                break;
            }
            counters.not_ready.fetch_add(1, Ordering::Relaxed);
            std::hint::spin_loop();
        }
        let Some(w) = word else {
            counters.exhausted.fetch_add(1, Ordering::Relaxed);
            return Err(SourceError {
                why: "RDSEED answered \"not ready\" 1024 times in a row (source drained)",
            });
        };
        chunk.copy_from_slice(&w.to_le_bytes()[..chunk.len()]);
    }
    Ok(())
}

#[cfg(target_arch = "x86_64")]
mod cpu {
    pub(super) const WHY_NOT: &str = "the CPU has no RDSEED instruction (CPUID leaf 7, EBX bit 18)";

    pub(super) fn has_rdseed() -> bool {
        std::arch::is_x86_feature_detected!("rdseed")
    }

    /// One RDSEED. Called only through a `Rdseed`, which exists only where
    /// [`has_rdseed`] said yes.
    #[allow(unsafe_code)]
    pub(super) fn rdseed64() -> Option<u64> {
        #[target_feature(enable = "rdseed")]
        unsafe fn step() -> Option<u64> {
            let mut v = 0u64;
            // SAFETY: the target feature is enabled on this function, and it is called
            // only where the CPU has it (below). (Rust ≥ 1.87 calls the intrinsic safe
            // here; 1.85, the workspace's floor, needs the block.)
            #[allow(unused_unsafe)]
            (unsafe { core::arch::x86_64::_rdseed64_step(&mut v) } == 1).then_some(v)
        }
        // SAFETY: `Rdseed::probe` made the `Rdseed` that calls this only after
        // `is_x86_feature_detected!("rdseed")` returned true, so the instruction exists.
        unsafe { step() }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod cpu {
    pub(super) const WHY_NOT: &str = "RDSEED is an x86-64 instruction and this is not an x86-64 CPU";

    pub(super) fn has_rdseed() -> bool {
        false
    }

    pub(super) fn rdseed64() -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_ready_answers_are_retried_and_counted() {
        let counters = RdseedCounters::default();
        // Every word comes on its third try.
        let mut n = 0u64;
        let step = || {
            n += 1;
            (n % 3 == 0).then_some(0x0807_0605_0403_0201 * (n / 3))
        };
        let mut buf = [0u8; 12];
        fill_words(&mut buf, 4, &counters, step).unwrap();
        assert_eq!(buf[..8], 0x0807_0605_0403_0201u64.to_le_bytes());
        assert_eq!(buf[8..], (0x0807_0605_0403_0201u64 * 2).to_le_bytes()[..4]);
        assert_eq!(counters.not_ready.load(Ordering::Relaxed), 4);
        assert_eq!(counters.exhausted.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_word_that_never_comes_fails_the_read_naming_why() {
        let counters = RdseedCounters::default();
        let mut buf = [0xEEu8; 16];
        let e = fill_words(&mut buf, 5, &counters, || None).unwrap_err();
        assert!(e.why.contains("RDSEED") && e.why.contains("not ready"), "{}", e.why);
        assert_eq!(counters.not_ready.load(Ordering::Relaxed), 5);
        assert_eq!(counters.exhausted.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_instruction_answers_where_the_cpu_has_it() {
        match Rdseed::probe(Arc::default()) {
            Ok(mut r) => {
                let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
                r.fill_raw(&mut a).unwrap();
                r.fill_raw(&mut b).unwrap();
                assert_ne!(a, b, "two RDSEED draws differ");
            }
            Err(why) => {
                assert!(!cpu::has_rdseed());
                assert!(why.contains("RDSEED"), "{why}");
            }
        }
    }
}
