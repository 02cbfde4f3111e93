//! A noise source and the only way its bytes come out: through the health tests.
//!
//! ```text
//! TestedSource::fill(out)
//!   ├─ not Healthy? ── read 1024 samples ─▶ HealthTests::startup ── trips ─▶ Err, out untouched
//!   ├─ read out.len() raw bytes into scratch ── read fails ─▶ Err(Source), out untouched
//!   ├─ HealthTests::test(scratch) ── trips ─▶ Err, scratch discarded, out untouched
//!   └─ out ← scratch; scratch wiped
//! ```

use zeroize::Zeroize;

use crate::claim::{Claim, ClaimError, Cutoffs};
use crate::monitor::{Failure, HealthState, HealthStats, HealthTests};

/// Raw samples from a physical source (a hardware generator, a CPU instruction, a
/// simulated card's generator): no conditioning, no testing of its own.
pub trait NoiseSource: Send {
    /// Fills all of `buf` with raw samples, or fails naming why (nothing is used then).
    fn fill_raw(&mut self, buf: &mut [u8]) -> Result<(), SourceError>;
}

impl<S: NoiseSource + ?Sized> NoiseSource for Box<S> {
    fn fill_raw(&mut self, buf: &mut [u8]) -> Result<(), SourceError> {
        (**self).fill_raw(buf)
    }
}

/// Why a noise source could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceError {
    pub why: &'static str,
}

/// A noise source whose every raw sample passes the health tests before any byte of it
/// is given out.
pub struct TestedSource<S> {
    source: S,
    tests: HealthTests,
    /// Raw bytes while they are tested; wiped after every use.
    scratch: Vec<u8>,
}

impl<S: NoiseSource> TestedSource<S> {
    /// Wraps `source`, which makes `claim`. The start-up test runs on the first
    /// [`TestedSource::fill`] (or on [`TestedSource::start`]).
    pub fn new(source: S, claim: Claim) -> Result<TestedSource<S>, ClaimError> {
        Ok(TestedSource { source, tests: HealthTests::new(claim)?, scratch: Vec::new() })
    }

    /// Runs a start-up test now (whatever the state).
    pub fn start(&mut self) -> Result<(), Failure> {
        let n = self.tests.startup_bytes();
        let result = self.read(n).and_then(|()| self.tests.startup(&self.scratch[..n]));
        self.scratch[..n].zeroize();
        result
    }

    /// Fills `out` with tested bytes, running a start-up test first if the source is new
    /// or out. On any failure `out` is left as it was.
    pub fn fill(&mut self, out: &mut [u8]) -> Result<(), Failure> {
        if self.tests.state() != HealthState::Healthy {
            self.start()?;
        }
        let n = out.len();
        let result = self.read(n).and_then(|()| self.tests.test(&self.scratch[..n]));
        if result.is_ok() {
            out.copy_from_slice(&self.scratch[..n]);
        }
        self.scratch[..n].zeroize();
        result
    }

    pub fn state(&self) -> HealthState {
        self.tests.state()
    }

    pub fn stats(&self) -> HealthStats {
        self.tests.stats()
    }

    pub fn cutoffs(&self) -> Cutoffs {
        self.tests.cutoffs()
    }

    pub fn source(&self) -> &S {
        &self.source
    }

    pub fn source_mut(&mut self) -> &mut S {
        &mut self.source
    }

    /// Reads `n` raw bytes into the front of the scratch buffer.
    fn read(&mut self, n: usize) -> Result<(), Failure> {
        if self.scratch.len() < n {
            self.scratch.resize(n, 0);
        }
        self.source.fill_raw(&mut self.scratch[..n]).map_err(|e| {
            self.tests.stats.source_errors += 1;
            Failure::Source(e.why)
        })
    }
}

impl<S> Drop for TestedSource<S> {
    fn drop(&mut self) {
        self.scratch.zeroize();
    }
}
