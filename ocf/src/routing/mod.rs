//! Routing: which driver serves each request of a session.
//!
//! The main future work of Leffler's "Cryptographic Device Support for FreeBSD" (BSDCon
//! 2003, section 5, "Load balancing"): compute per-device,
//! per-operation cost metrics and schedule every operation as it is submitted, the software
//! driver included, so that small operations stay on the CPU and large ones go where a
//! device wins. Two later write-ups show why from the user's side ("Hardware Accelerated SSL
//! on SheevaPlug (Marvell Kirkwood ARM) Using OpenSSL on Fedora", and a FreeBSD 9.2 user's
//! measurements of the Geode's glxsb, "Криптоакселерация", 2013): an accelerator is slower
//! than the CPU on small buffers.
//!
//! A session is served by every registered driver that accepts its parameters (its
//! *routes*); each route gets its own driver session, with its own copy of the keys, the
//! first time a request is sent there. For each request the session's [`Policy`] picks one:
//!
//! ```text
//!  submit(req) ─► one route? ──yes──► that driver (no decision at all: pinned sessions,
//!                     │                 a single capable driver, policy Priority; a later
//!                     │                 part of a multi-part message follows its first)
//!                     no
//!                     ▼
//!         policy(size class, op) ─► CostModel: least predicted completion time
//!                     │               = model(driver, algorithm, op, size class)
//!                     │                 + the driver's backlog (its requests in flight);
//!                     │               blocked (Busy), failing and stalled drivers are
//!                     │               left out; now and then one other driver is tried
//!                     │               (bounded exploration)
//!                     ▼
//!         that route's binding ─► the submit path (`crate::session`) ─► driver
//!                                                                        │
//!         model.learn(latency) ◄── completion (one request in SAMPLE_EVERY per thread
//!                                  is timed, one in SAMPLE_SETTLED where the CPU wins by
//!                                  far; every one on a driver that completes later) ◄┘
//! ```
//!
//! - **The model** (`model`) keeps, per driver × algorithm × direction × size class, an
//!   exponentially weighted average of the time from offering a request to its completion
//!   and of its size. Predictions within a class scale with size; a driver's setup cost and
//!   cost per KiB ([`ModelEstimate`]) are a least-squares line through its classes.
//! - **Runs.** A batch handed over whole ([`crate::Session::run_batch`]) is routed once, by
//!   each driver's cost per request *in runs of that length* (2–3, 4–15, 16 and more),
//!   cells the model keeps apart from single requests (`model::Arrival`): a multi-buffer
//!   driver that costs more than the CPU for one request can cost a fraction of it per
//!   request in a run of 16, and a flush of 2 jobs costs it nearly what one of 16 does.
//!   Every decided run is timed as a whole and teaches its driver's cells for its length;
//!   exploration works as for single requests. So single requests stay on the CPU and runs
//!   go where runs of their length win, without configuration.
//! - **Queueing.** For a driver that completes requests later (a device), the time its
//!   requests in flight will still take is added to the prediction, so a full card loses
//!   to an idle one or to the CPU. A synchronous driver (the CPU) has no queue of its own:
//!   its measured times already include the contention of the threads sharing the cores.
//! - **Exploration and health.** A route not chosen is tried now and then (sooner while it
//!   warms up, rarer the more it is predicted to lose); a driver that fails a request by its
//!   own fault is left out until a request succeeds there, and the failed request is offered
//!   once to another driver (`session::complete`); one that holds requests and completes
//!   none for a while is left out as stalled.
//! - **Cost on the request path.** Between full decisions a session reuses its last choice
//!   for the direction and size class while that is a CPU driver nothing else could beat (a
//!   few loads); a full decision reads each route's model and backlog; one request in
//!   [`SAMPLE_EVERY`] per thread is timed for the model. Where the choice is *settled* —
//!   every other route predicted at least four times dearer, the CPU's estimate in line with
//!   its last sample, and 1024 of its requests within 10 ms — one in 1024 is
//!   (`model::SAMPLE_SETTLED`): the timed decision and completion cost about 200 ns, 1.6 ns
//!   per request at 1 in 128, a share of a 120-ns AES-GCM request of 16 bytes (issue 31).
//!   A sample out of line with its estimate makes the thread's next decision a timed one
//!   that is not settled, and exploration goes by the clock, so a change is still seen.
//!   Sessions with one route skip all of it. The decisions themselves are
//!   `session::routes`.
//!
//! The policies are named ([`Policy`]) and chosen per framework ([`crate::Config::policy`]).
//! What routing did is visible in [`crate::Framework::routing`].

use std::fmt;
use std::str::FromStr;

use crate::request::Op;

pub(crate) mod cpu;
pub(crate) mod model;
pub use model::SAMPLE_EVERY;
mod state;

pub(crate) use state::{DriverRouteState, RoutingShared};

/// How a session's requests are spread over the drivers that can serve it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// One driver per session, chosen when the session is made: the best
    /// [`crate::Priority`], then the fewest sessions (ocf's behaviour before routing,
    /// FreeBSD's).
    Priority,
    /// Each request to the driver with the least predicted completion time, learned from
    /// measured completions (see the module docs).
    #[default]
    CostModel,
    /// Each request to the driver with the fewest requests in flight, relative to its
    /// flow-control limit.
    LeastLoaded,
    /// Each request to the next driver in turn.
    RoundRobin,
}

impl Policy {
    pub const ALL: [Policy; 4] =
        [Policy::Priority, Policy::CostModel, Policy::LeastLoaded, Policy::RoundRobin];

    /// The policy's name (what [`Policy::from_str`] takes).
    pub fn name(self) -> &'static str {
        match self {
            Policy::Priority => "priority",
            Policy::CostModel => "cost-model",
            Policy::LeastLoaded => "least-loaded",
            Policy::RoundRobin => "round-robin",
        }
    }

    /// Whether requests of one session may go to different drivers.
    pub fn per_request(self) -> bool {
        self != Policy::Priority
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy name that is not one of [`Policy::ALL`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
        write!(f, "unknown routing policy {:?} (policies: {})", self.0, names.join(", "))
    }
}

impl std::error::Error for UnknownPolicy {}

impl FromStr for Policy {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Policy, UnknownPolicy> {
        let s = s.trim();
        Policy::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| UnknownPolicy(s.to_owned()))
    }
}

/// How many size classes requests are counted and modelled in.
pub const SIZE_CLASSES: usize = 14;

/// A payload-size class: powers of two from "up to 16 bytes" to "up to 64 KiB", and
/// "larger".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SizeClass(u8);

impl SizeClass {
    /// The class of a payload of `len` bytes.
    #[inline]
    pub fn of(len: usize) -> SizeClass {
        // ≤16 → 0, 17..=32 → 1, …, ≤65536 → 12, larger → 13.
        let bits = usize::BITS - len.saturating_sub(1).leading_zeros();
        SizeClass((bits.saturating_sub(4) as usize).min(SIZE_CLASSES - 1) as u8)
    }

    /// Every class, smallest first.
    pub fn all() -> impl Iterator<Item = SizeClass> {
        (0..SIZE_CLASSES as u8).map(SizeClass)
    }

    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The largest payload in the class; `None` for the last ("larger than 64 KiB").
    pub fn upper(self) -> Option<usize> {
        (self.index() < SIZE_CLASSES - 1).then(|| 16usize << self.0)
    }

    /// The smallest payload in the class.
    pub fn lower(self) -> usize {
        if self.0 == 0 {
            0
        } else {
            (8usize << self.0) + 1
        }
    }

    /// A short label: `≤16`, `≤1K`, `>64K`.
    pub fn label(self) -> String {
        match self.upper() {
            Some(u) if u >= 1024 => format!("≤{}K", u / 1024),
            Some(u) => format!("≤{u}"),
            None => ">64K".to_owned(),
        }
    }
}

/// What routing did and believes, for the whole framework ([`crate::Framework::routing`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoutingStats {
    /// The framework's policy.
    pub policy: Policy,
    /// Full decisions made (see `decision_ns`).
    pub decisions: u64,
    /// The average cost of one full decision, in nanoseconds (the model consulted for
    /// every route), measured on the timed ones (one in [`SAMPLE_EVERY`] per
    /// thread); 0 if none was. Between full decisions a session reuses its last choice
    /// while it stays valid, which costs a few loads (measured in the dispatch bench).
    pub decision_ns: f64,
    /// Per registered driver, in registration order.
    pub drivers: Vec<DriverRouting>,
}

/// What routing did with one driver.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DriverRouting {
    pub driver: String,
    /// Requests this driver completed, per [`SizeClass`] of their payload: the ones a
    /// policy routed here and those of sessions pinned to it.
    pub routed: [u64; SIZE_CLASSES],
    /// Of those, requests sent here to explore (not the predicted best).
    pub explored: u64,
    /// Decisions that left this driver out because it was blocked (it had answered Busy).
    pub skipped_blocked: u64,
    /// Decisions that left this driver out because it was failing or stalled.
    pub skipped_unhealthy: u64,
    /// Requests in flight on it now (flow-control credits in use).
    pub in_flight: usize,
    /// The model's estimates for this driver, per algorithm and direction it has seen.
    pub models: Vec<ModelEstimate>,
}

impl ModelEstimate {
    /// The direction's name, `any` if none.
    pub fn op_name(&self) -> &'static str {
        self.op.map_or("any", Op::name)
    }
}

/// One line for reports: `aead aes-gcm/128 encrypt: setup 870 ns, 310 ns/KiB, 2 samples`
/// (`encrypt in runs of 16+: …` for the cost per request of runs of that length).
impl fmt::Display for ModelEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}{}: setup {:.0} ns, {:.0} ns/KiB, {} samples",
            self.algorithm,
            self.op_name(),
            match self.run_len {
                0 => "",
                2 => " in runs of 2-3",
                4 => " in runs of 4-15",
                _ => " in runs of 16+",
            },
            self.setup_ns,
            self.ns_per_kib,
            self.samples
        )
    }
}

impl DriverRouting {
    /// Requests routed to this driver, every size.
    pub fn routed_total(&self) -> u64 {
        self.routed.iter().sum()
    }
}

/// The cost model's estimates for one driver, algorithm and direction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelEstimate {
    /// The session mode and algorithms, as `aead AES-GCM-128`.
    pub algorithm: String,
    pub op: Option<Op>,
    /// Fixed cost per request and cost per KiB (a line fitted through the classes below),
    /// in nanoseconds.
    pub setup_ns: f64,
    pub ns_per_kib: f64,
    /// Completions measured.
    pub samples: u64,
    /// 0: requests one at a time; else the cost per request of runs handed over whole
    /// (`Session::run_batch`, `submit_run`) of this length class, by its lower bound: 2
    /// (2–3 requests), 4 (4–15) or 16 (16 and more). The model keeps them apart.
    pub run_len: usize,
    /// Per size class: the estimated time of one request (ns) at the class's average size,
    /// and that size; `None` where nothing was measured yet.
    pub classes: [Option<(f64, f64)>; SIZE_CLASSES],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes() {
        assert_eq!(SizeClass::of(0).index(), 0);
        assert_eq!(SizeClass::of(16).index(), 0);
        assert_eq!(SizeClass::of(17).index(), 1);
        assert_eq!(SizeClass::of(32).index(), 1);
        assert_eq!(SizeClass::of(1024).index(), 6);
        assert_eq!(SizeClass::of(1025).index(), 7);
        assert_eq!(SizeClass::of(65536).index(), 12);
        assert_eq!(SizeClass::of(65537).index(), 13);
        assert_eq!(SizeClass::of(usize::MAX).index(), 13);
        for c in SizeClass::all() {
            assert_eq!(SizeClass::of(c.lower()), c, "{}", c.label());
            if let Some(u) = c.upper() {
                assert_eq!(SizeClass::of(u), c);
                assert_eq!(SizeClass::of(u + 1).index(), c.index() + 1);
            }
        }
        assert_eq!(SizeClass::of(1000).label(), "≤1K");
        assert_eq!(SizeClass::of(40).label(), "≤64");
        assert_eq!(SizeClass::of(1 << 20).label(), ">64K");
    }

    #[test]
    fn policy_names() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>(), Ok(p));
        }
        let e = "fastest".parse::<Policy>().unwrap_err().to_string();
        assert!(e.contains("fastest") && e.contains("cost-model"), "{e}");
        assert_eq!(Policy::default(), Policy::CostModel);
    }
}
