//! The health of one noise source: both continuous tests over every raw sample, the
//! start-up test, the state the source is in, and the counters.
//!
//! ```text
//!   new ──▶ Starting ── start-up passes: 1024 samples through both tests ──▶ Healthy
//!              ▲   │ start-up trips a test                                     │ a test trips
//!              │   ▼                                                           ▼
//!              └── Failed(test) ◀──────────────────────────────────────────────┘
//!                  the next `startup` call begins again (Failed → Starting)
//! ```
//!
//! As FreeBSD's rndtest did and SP 800-90B §4.3 asks: the samples that trip a test are
//! discarded (the caller gets none of the buffer they came in), the failure is counted
//! per test, and the source gives nothing until a start-up test passes again. The
//! samples of a start-up test are never output either (§4.3 item 10 allows it; holding
//! them back costs 1 KiB per start and no one has to ask which bytes were tested how).

use std::fmt;

use crate::apt::AdaptiveProportion;
use crate::claim::{Claim, ClaimError, Cutoffs, SampleWidth};
use crate::rct::RepetitionCount;

/// Samples the start-up test runs the continuous tests over (SP 800-90B §4.3 item 10:
/// "at least 1024 consecutive samples").
pub const STARTUP_SAMPLES: usize = 1024;

/// One of the two continuous tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Test {
    /// SP 800-90B §4.4.1: one value too many times in a row (a stuck source).
    RepetitionCount,
    /// SP 800-90B §4.4.2: a window's first value too often in the window (a biased one).
    AdaptiveProportion,
}

/// Where the source stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HealthState {
    /// New: no start-up test has passed yet; nothing is output.
    #[default]
    Starting,
    /// The last start-up test passed and no test has tripped since: output flows.
    Healthy,
    /// Taken out by this test; nothing is output until a start-up test passes.
    Failed(Test),
}

/// Why no output was given. [`Failure::why`] is the one-line reason a driver passes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The repetition count test tripped, during a start-up test if `startup`.
    RepetitionCount { startup: bool },
    /// The adaptive proportion test tripped, during a start-up test if `startup`.
    AdaptiveProportion { startup: bool },
    /// Output was asked for before any start-up test passed.
    NotStarted,
    /// Output was asked for while the source is out after this test tripped.
    Out(Test),
    /// A start-up test was given fewer raw bytes than it needs.
    StartupTooShort { need: usize, got: usize },
    /// The noise source could not be read (its own reason).
    Source(&'static str),
}

impl Failure {
    /// The reason, for `ocf::Error::RandomSourceFailed { why }`.
    pub fn why(&self) -> &'static str {
        match self {
            Failure::RepetitionCount { startup: false } => {
                "SP 800-90B repetition count test failed: one value repeated too often in a row \
                 (stuck source); output discarded, source out until a start-up test passes"
            }
            Failure::RepetitionCount { startup: true } => {
                "SP 800-90B start-up test failed on the repetition count test (stuck source)"
            }
            Failure::AdaptiveProportion { startup: false } => {
                "SP 800-90B adaptive proportion test failed: one value took too large a share of a \
                 window (biased source); output discarded, source out until a start-up test passes"
            }
            Failure::AdaptiveProportion { startup: true } => {
                "SP 800-90B start-up test failed on the adaptive proportion test (biased source)"
            }
            Failure::NotStarted => "the noise source has not passed its start-up test yet",
            Failure::Out(Test::RepetitionCount) => {
                "the noise source is out after a repetition count test failure until a start-up test passes"
            }
            Failure::Out(Test::AdaptiveProportion) => {
                "the noise source is out after an adaptive proportion test failure until a start-up \
                 test passes"
            }
            Failure::StartupTooShort { .. } => "a start-up test needs 1024 raw samples",
            Failure::Source(why) => why,
        }
    }

    /// The test that tripped, if one did.
    pub fn test(&self) -> Option<Test> {
        match self {
            Failure::RepetitionCount { .. } => Some(Test::RepetitionCount),
            Failure::AdaptiveProportion { .. } => Some(Test::AdaptiveProportion),
            _ => None,
        }
    }

    fn tripped(test: Test, startup: bool) -> Failure {
        match test {
            Test::RepetitionCount => Failure::RepetitionCount { startup },
            Test::AdaptiveProportion => Failure::AdaptiveProportion { startup },
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::StartupTooShort { need, got } => {
                write!(f, "{} (got {got} bytes, need {need})", self.why())
            }
            _ => f.write_str(self.why()),
        }
    }
}

impl std::error::Error for Failure {}

/// The counters of one source. Each failure is counted once, under its test; a failure
/// during a start-up test is also counted in `startup_failures`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HealthStats {
    /// Raw samples that went through the tests (start-up samples included).
    pub samples: u64,
    /// Repetition count test failures.
    pub rct_failures: u64,
    /// Adaptive proportion test failures.
    pub apt_failures: u64,
    /// Start-up tests that passed.
    pub startups: u64,
    /// Start-up tests that failed (each also counted under its test).
    pub startup_failures: u64,
    /// Raw bytes consumed by start-up tests (never output).
    pub startup_bytes: u64,
    /// Bytes that passed the tests and were given out.
    pub bytes_out: u64,
    /// Bytes thrown away because a test tripped on them or the source was out.
    pub bytes_discarded: u64,
    /// Reads of the noise source that failed ([`Failure::Source`]).
    pub source_errors: u64,
}

/// The tests, the state and the counters of one noise source. No I/O: the caller brings
/// the raw bytes ([`crate::TestedSource`] does, from a [`crate::NoiseSource`]).
#[derive(Clone, Debug)]
pub struct HealthTests {
    claim: Claim,
    cutoffs: Cutoffs,
    rct: RepetitionCount,
    apt: AdaptiveProportion,
    state: HealthState,
    pub(crate) stats: HealthStats,
}

impl HealthTests {
    /// Tests for a source that makes `claim`; refuses an impossible claim.
    pub fn new(claim: Claim) -> Result<HealthTests, ClaimError> {
        let cutoffs = claim.cutoffs()?;
        Ok(HealthTests {
            claim,
            cutoffs,
            rct: RepetitionCount::new(cutoffs.rct),
            apt: AdaptiveProportion::new(cutoffs.apt, cutoffs.window),
            state: HealthState::Starting,
            stats: HealthStats::default(),
        })
    }

    pub fn claim(&self) -> Claim {
        self.claim
    }

    pub fn cutoffs(&self) -> Cutoffs {
        self.cutoffs
    }

    pub fn state(&self) -> HealthState {
        self.state
    }

    pub fn stats(&self) -> HealthStats {
        self.stats
    }

    /// Raw bytes a start-up test takes: [`STARTUP_SAMPLES`] samples.
    pub fn startup_bytes(&self) -> usize {
        STARTUP_SAMPLES / self.claim.width.per_byte()
    }

    /// Runs a start-up test over `raw` (at least [`HealthTests::startup_bytes`]; all of it
    /// is tested and none of it may be output): both tests start afresh, and the source
    /// is `Healthy` if neither trips, else `Failed`.
    pub fn startup(&mut self, raw: &[u8]) -> Result<(), Failure> {
        let need = self.startup_bytes();
        if raw.len() < need {
            return Err(Failure::StartupTooShort { need, got: raw.len() });
        }
        self.rct.reset();
        self.apt.reset();
        self.state = HealthState::Starting;
        self.stats.startup_bytes += raw.len() as u64;
        match self.run(raw) {
            Ok(()) => {
                self.state = HealthState::Healthy;
                self.stats.startups += 1;
                Ok(())
            }
            Err(test) => {
                self.stats.startup_failures += 1;
                Err(Failure::tripped(test, true))
            }
        }
    }

    /// Runs the continuous tests over the next raw bytes. `Ok`: all of `raw` may be
    /// output. `Err`: none of it may; a tripped test takes the source out.
    pub fn test(&mut self, raw: &[u8]) -> Result<(), Failure> {
        let out = match self.state {
            HealthState::Healthy => match self.run(raw) {
                Ok(()) => {
                    self.stats.bytes_out += raw.len() as u64;
                    return Ok(());
                }
                Err(test) => Failure::tripped(test, false),
            },
            HealthState::Starting => Failure::NotStarted,
            HealthState::Failed(test) => Failure::Out(test),
        };
        self.stats.bytes_discarded += raw.len() as u64;
        Err(out)
    }

    /// Feeds every sample of `raw` to both tests, counting them; the first test to trip
    /// takes the source out (the repetition count test is asked first).
    fn run(&mut self, raw: &[u8]) -> Result<(), Test> {
        let tripped = match self.claim.width {
            SampleWidth::Byte => self.run_samples(raw.iter().copied()),
            SampleWidth::Bit => {
                self.run_samples(raw.iter().flat_map(|&b| (0..8).rev().map(move |i| (b >> i) & 1)))
            }
        };
        match tripped {
            Ok(n) => {
                self.stats.samples += n;
                Ok(())
            }
            Err((n, test)) => {
                self.stats.samples += n;
                match test {
                    Test::RepetitionCount => self.stats.rct_failures += 1,
                    Test::AdaptiveProportion => self.stats.apt_failures += 1,
                }
                self.state = HealthState::Failed(test);
                Err(test)
            }
        }
    }

    /// The samples through both tests: `Ok(count)`, or `Err((count up to and including
    /// the one that tripped, the test))`.
    #[inline(always)]
    fn run_samples(&mut self, samples: impl Iterator<Item = u8>) -> Result<u64, (u64, Test)> {
        let (rct, apt) = (&mut self.rct, &mut self.apt);
        let mut n = 0u64;
        for x in samples {
            n += 1;
            let r = rct.feed(x);
            let a = apt.feed(x);
            if r | a {
                return Err((n, if r { Test::RepetitionCount } else { Test::AdaptiveProportion }));
            }
        }
        Ok(n)
    }
}
