//! # ocf-hwrng — random bytes from the machine's hardware generators, health-tested
//!
//! One driver per hardware source found, each serving [`Mode::Random`] sessions at
//! [`Priority::Hardware`]:
//!
//! - `hwrng:rdseed`: the CPU's RDSEED instruction ([`rdseed`]), where CPUID has it;
//! - `hwrng:dev`: the kernel's `/dev/hwrng` ([`dev`]), where it exists and can be opened.
//!
//! ```text
//! Request::random(n) ─▶ HwrngSession::process ─▶ Mutex<TestedSource> (ocf-health)
//!                                                   ├─ start-up test when new or out
//!                                                   ├─ NoiseSource::fill_raw: RDSEED | /dev/hwrng
//!                                                   └─ SP 800-90B RCT + APT on every raw byte
//!        ◀─ Done(Ok): the payload overwritten with tested bytes
//!        ◀─ Done(Err(RandomSourceFailed { why })): the test (or the read) that failed; the
//!           buffer untouched; the source stays out until a start-up test passes
//! ```
//!
//! Where no source exists, [`register`] registers nothing and says why
//! ([`HwrngError::Unavailable`]), as `ocf-afalg` does without AF_ALG.
//!
//! ## The claimed entropy, and what the tests can see
//!
//! Both sources give *conditioned* output, not raw noise: RDSEED's bits have been
//! through the CPU's AES-CBC-MAC conditioner (Intel) or its equivalent (AMD), and
//! `/dev/hwrng` in a VM is virtio-rng, fed from the host's kernel DRBG. SP 800-90B's
//! health tests are meant for raw noise; over conditioned output they catch a source
//! that is stuck or broken — an instruction that returns one value (AMD's RDRAND bug
//! that answered all ones after resume), a device that returns zeros — not subtle bias,
//! which the conditioner hides. The claim is [`CLAIM`]: H = 4 bits per byte, half of
//! what uniform bytes hold. At the full H = 8 the repetition count cutoff would be 4
//! (1 + ⌈20/8⌉) and a good source would trip it once per 2^24 bytes (16 MiB), by design;
//! at H = 4 its cutoff is 6 and a false alarm comes once per 2^40 bytes, while a stuck
//! byte still trips within 6 and a stuck 64-bit word (8 distinct bytes) within one
//! adaptive proportion window (128 of 1024, cutoff 105).
//!
//! [`HwrngDriver::from_source`] takes any [`NoiseSource`]: the tests inject faulty ones
//! with it; another driver may use it for its own generator.

#![deny(unsafe_code)] // but for the one RDSEED intrinsic, in `rdseed`

pub mod dev;
pub mod rdseed;

use std::fmt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use ocf::{
    Capabilities, Driver, DriverSession, Error, Failed, Framework, Hint, Mode, Priority, Processed, Request,
    SessionContext, SessionParams,
};
use ocf_health::{Claim, ClaimError, Cutoffs, HealthState, HealthStats, NoiseSource, TestedSource};
use zeroize::Zeroizing;

use crate::rdseed::{Rdseed, RdseedCounters};

/// The min-entropy claimed for every byte of both sources (see the crate docs).
pub const CLAIM: Claim = Claim { entropy: 4.0, width: ocf_health::SampleWidth::Byte };

/// A hardware source this driver knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    Rdseed,
    DevHwrng,
}

impl SourceKind {
    /// The name its driver registers under.
    pub fn driver_name(self) -> &'static str {
        match self {
            SourceKind::Rdseed => "hwrng:rdseed",
            SourceKind::DevHwrng => "hwrng:dev",
        }
    }
}

/// The prefix of every name this crate registers.
pub const NAME_PREFIX: &str = "hwrng:";

/// Why no driver was made.
#[derive(Clone, Debug, PartialEq)]
pub enum HwrngError {
    /// No hardware source on this machine: why, for each kind.
    Unavailable(String),
    /// The framework refused the driver.
    Register(Error),
    /// The claim given to [`HwrngDriver::from_source`] is impossible.
    Claim(ClaimError),
}

impl fmt::Display for HwrngError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HwrngError::Unavailable(why) => write!(f, "no hardware random source: {why}"),
            HwrngError::Register(e) => write!(f, "cannot register: {e}"),
            HwrngError::Claim(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for HwrngError {}

/// The sources this machine has, or why it has none (one reason per kind).
pub fn probe() -> Result<Vec<SourceKind>, HwrngError> {
    let mut found = Vec::new();
    let mut why = Vec::new();
    match Rdseed::probe(Arc::default()) {
        Ok(_) => found.push(SourceKind::Rdseed),
        Err(w) => why.push(w.to_owned()),
    }
    match dev::DevHwrng::open(Path::new(dev::PATH)) {
        Ok(_) => found.push(SourceKind::DevHwrng),
        Err(w) => why.push(w),
    }
    if found.is_empty() {
        Err(HwrngError::Unavailable(why.join("; ")))
    } else {
        Ok(found)
    }
}

/// Registers one driver per source found, and returns them (for their stats); registers
/// nothing where there is none, saying why.
pub fn register(fw: &Framework) -> Result<Vec<Arc<HwrngDriver>>, HwrngError> {
    let mut drivers = Vec::new();
    for kind in probe()? {
        let d = Arc::new(HwrngDriver::open(kind)?);
        fw.register(d.clone()).map_err(HwrngError::Register)?;
        drivers.push(d);
    }
    Ok(drivers)
}

/// The counters of one source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HwrngStats {
    /// The health tests' counters: samples, failures per test, start-ups, bytes out and
    /// discarded, reads that failed.
    pub health: HealthStats,
    /// Where the source stands now.
    pub state: HealthState,
    /// RDSEED answers "not ready" that were retried (0 for other sources).
    pub rdseed_not_ready: u64,
    /// RDSEED words that never came (each failed a request; also in `health.source_errors`).
    pub rdseed_exhausted: u64,
}

/// A driver serving random bytes from one health-tested source.
pub struct HwrngDriver {
    name: String,
    shared: Arc<Shared>,
}

struct Shared {
    source: Mutex<TestedSource<Box<dyn NoiseSource>>>,
    rdseed: Arc<RdseedCounters>,
}

impl HwrngDriver {
    /// The driver for a hardware source, or why it cannot be opened.
    pub fn open(kind: SourceKind) -> Result<HwrngDriver, HwrngError> {
        let rdseed = Arc::new(RdseedCounters::default());
        let source: Box<dyn NoiseSource> = match kind {
            SourceKind::Rdseed => {
                Box::new(Rdseed::probe(rdseed.clone()).map_err(|w| HwrngError::Unavailable(w.to_owned()))?)
            }
            SourceKind::DevHwrng => {
                Box::new(dev::DevHwrng::open(Path::new(dev::PATH)).map_err(HwrngError::Unavailable)?)
            }
        };
        HwrngDriver::with(kind.driver_name(), source, CLAIM, rdseed)
    }

    /// A driver named `name` over any noise source making `claim` (faulty sources in
    /// tests, a card's generator).
    pub fn from_source(
        name: &str,
        source: Box<dyn NoiseSource>,
        claim: Claim,
    ) -> Result<HwrngDriver, HwrngError> {
        HwrngDriver::with(name, source, claim, Arc::default())
    }

    fn with(
        name: &str,
        source: Box<dyn NoiseSource>,
        claim: Claim,
        rdseed: Arc<RdseedCounters>,
    ) -> Result<HwrngDriver, HwrngError> {
        let source = TestedSource::new(source, claim).map_err(HwrngError::Claim)?;
        Ok(HwrngDriver {
            name: name.to_owned(),
            shared: Arc::new(Shared { source: Mutex::new(source), rdseed }),
        })
    }

    /// The source's counters.
    pub fn stats(&self) -> HwrngStats {
        let src = self.shared.lock();
        HwrngStats {
            health: src.stats(),
            state: src.state(),
            rdseed_not_ready: self.shared.rdseed.not_ready.load(Ordering::Relaxed),
            rdseed_exhausted: self.shared.rdseed.exhausted.load(Ordering::Relaxed),
        }
    }

    /// The health tests' cutoffs for this source's claim.
    pub fn cutoffs(&self) -> Cutoffs {
        self.shared.lock().cutoffs()
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, TestedSource<Box<dyn NoiseSource>>> {
        self.source.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Driver for HwrngDriver {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { random: true, synchronous: true, ..Capabilities::default() }
    }

    fn probe_session(&self, params: &SessionParams) -> Option<Priority> {
        matches!(params.mode, Mode::Random).then_some(Priority::Hardware)
    }

    fn new_session(
        &self,
        _params: &SessionParams,
        _ctx: SessionContext,
    ) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(HwrngSession { shared: self.shared.clone() }))
    }
}

/// Every session of a driver draws from its one source (one stream under test).
struct HwrngSession {
    shared: Arc<Shared>,
}

impl DriverSession for HwrngSession {
    fn process(&self, mut req: Request, _hint: Hint) -> Processed {
        let range = req.payload_range();
        if range.start > range.end || range.end > req.buf.len() {
            let e = Error::BadRegion {
                what: "payload",
                start: range.start,
                end: range.end,
                buf_len: req.buf.len(),
            };
            return Processed::Done(Err(Failed::new(e, req)));
        }
        let filled = {
            let mut src = self.shared.lock();
            match req.buf.as_contiguous_mut() {
                Some(v) => src.fill(&mut v[range]),
                None => {
                    let mut tmp = Zeroizing::new(vec![0u8; range.len()]);
                    src.fill(&mut tmp).map(|()| req.buf.copy_in(range.start, &tmp))
                }
            }
        };
        match filled {
            Ok(()) => Processed::Done(Ok(req)),
            Err(f) => Processed::Done(Err(Failed::new(Error::RandomSourceFailed { why: f.why() }, req))),
        }
    }
}
