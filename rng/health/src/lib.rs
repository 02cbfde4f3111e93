//! # ocf-health — SP 800-90B health tests for a noise source
//!
//! A driver with its own random source (a hardware generator, RDSEED, a card's
//! generator) gives out no byte of it that has not been tested, as FreeBSD's rndtest
//! tested hardware RNGs before trusting them. The tests are NIST SP 800-90B's continuous
//! health tests (§4.4) over the source's raw samples, with the cutoffs computed from
//! the min-entropy per sample the source claims at α = 2^-20, and its start-up test
//! (§4.3 item 10):
//!
//! ```text
//!  NoiseSource::fill_raw ──raw──▶ TestedSource ──tested bytes──▶ caller
//!                                  │
//!                                  ├─ HealthTests (monitor): the state machine and counters
//!                                  │    Starting ─▶ Healthy ─▶ Failed(test) ─▶ Starting …
//!                                  │    ├─ rct: Repetition Count Test   (§4.4.1)
//!                                  │    └─ apt: Adaptive Proportion Test (§4.4.2)
//!                                  └─ Claim (claim) ─▶ Cutoffs (cutoffs): C from H and α
//! ```
//!
//! What the tests can and cannot see: they catch a source that is stuck (a run of one
//! value) or has lost much of its entropy (one value too frequent in a window). They do
//! not see subtle bias, and over the output of a conditioned source (RDSEED, a kernel's
//! hwrng fed from a DRBG) they see only a failure that breaks the conditioner too: they
//! are meant for raw noise. The claimed entropy trades detection against false alarms:
//! at the claim H a good source trips a test about once per 2^20 samples by design, so a
//! source that serves many bytes claims less than it has (see the driver's choice).
//!
//! No I/O and no unsafe code: the sources live in the drivers.

#![forbid(unsafe_code)]

mod apt;
mod claim;
mod cutoffs;
mod monitor;
mod rct;
mod source;

pub use claim::{Claim, ClaimError, Cutoffs, SampleWidth};
pub use cutoffs::{alpha, apt_cutoff, binomial_upper_tail, critbinom, rct_cutoff, ALPHA_LOG2};
pub use monitor::{Failure, HealthState, HealthStats, HealthTests, Test, STARTUP_SAMPLES};
pub use source::{NoiseSource, SourceError, TestedSource};
