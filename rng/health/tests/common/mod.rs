//! Noise sources for the tests.

#![allow(dead_code)] // each test file uses some of them

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ocf_health::{NoiseSource, SourceError};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// A clean source: a seeded ChaCha8 stream.
pub fn clean(seed: u64) -> ChaChaSource {
    ChaChaSource(ChaCha8Rng::seed_from_u64(seed))
}

pub struct ChaChaSource(pub ChaCha8Rng);

impl NoiseSource for ChaChaSource {
    fn fill_raw(&mut self, buf: &mut [u8]) -> Result<(), SourceError> {
        self.0.fill_bytes(buf);
        Ok(())
    }
}

/// Any function of the buffer as a source.
pub struct FnSource<F>(pub F);

impl<F: FnMut(&mut [u8]) -> Result<(), SourceError> + Send> NoiseSource for FnSource<F> {
    fn fill_raw(&mut self, buf: &mut [u8]) -> Result<(), SourceError> {
        (self.0)(buf)
    }
}

/// A clean source that gives zeros while its switch is on (a generator that got stuck).
pub fn switchable(seed: u64) -> (Arc<AtomicBool>, impl NoiseSource) {
    let stuck = Arc::new(AtomicBool::new(false));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let flag = stuck.clone();
    let source = FnSource(move |buf: &mut [u8]| {
        if flag.load(Ordering::Relaxed) {
            buf.fill(0);
        } else {
            rng.fill_bytes(buf);
        }
        Ok(())
    });
    (stuck, source)
}

/// 0, 1, …, 255, 0, 1, …: no runs, and each value four times per 1024-sample window.
pub fn counting(n: usize) -> Vec<u8> {
    (0..n).map(|i| i as u8).collect()
}
