//! The statistics a framework reports: per driver ([`DriverStats`], [`FlowStats`]), for the
//! whole framework ([`FrameworkStats`]), and the driver listing ([`DriverInfo`]).

use std::sync::atomic::Ordering;
use std::sync::PoisonError;

use crate::driver::Capabilities;
use crate::error::ErrorCounts;
use crate::session::{sum, DriverEntry};

/// A driver as listed by [`crate::Framework::drivers`].
#[derive(Clone, Debug)]
pub struct DriverInfo {
    pub name: String,
    pub capabilities: Capabilities,
    pub sessions: usize,
}

/// Statistics of one driver.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    pub name: String,
    /// Sessions alive now.
    pub sessions: usize,
    /// Sessions ever created (including sessions moved here from a detached driver).
    pub sessions_created: u64,
    /// Requests completed successfully (live and freed sessions).
    pub ops: u64,
    pub bytes: u64,
    /// Every error charged to this driver or its sessions, by cause.
    pub errors: ErrorCounts,
    /// Flow control.
    pub flow: FlowStats,
}

/// A driver's flow-control counters (the paper's restarts and blocked periods).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Requests the driver refused as Busy and the framework queued to offer again.
    pub restarts: u64,
    /// Times the driver went from accepting to blocked.
    pub blocked_periods: u64,
    /// Requests waiting for the driver to unblock now, and at most.
    pub held: usize,
    pub held_high_water: usize,
    /// Requests in flight now (queued, in the driver, or awaiting their callback), at
    /// most, and the limit.
    pub in_flight: usize,
    pub in_flight_high_water: usize,
    pub max_in_flight: usize,
    /// Times a submitter waited for room (the limit was reached).
    pub submit_waits: u64,
    /// Times a framework thread went past the limit rather than wait (see `dispatch`).
    pub overcommits: u64,
}

/// Statistics of the whole framework.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameworkStats {
    /// Errors that happened before any driver was involved.
    pub errors: ErrorCounts,
    pub drivers: Vec<DriverStats>,
    /// The most requests ever waiting for the dispatch worker.
    pub dispatch_queue_high_water: usize,
    /// The most completions ever waiting for one return worker.
    pub return_queue_high_water: usize,
}

impl FrameworkStats {
    /// All errors: framework-level plus every driver's.
    pub fn total_errors(&self) -> ErrorCounts {
        let mut e = self.errors;
        for d in &self.drivers {
            e.add(&d.errors);
        }
        e
    }
}

pub(super) fn driver_stats(d: &DriverEntry) -> DriverStats {
    let c = &d.counters;
    let live = c.live.lock().unwrap_or_else(PoisonError::into_inner);
    let (mut ops, mut bytes) = (sum(&c.retired_ops), c.retired_bytes.load(Ordering::Relaxed));
    for l in live.iter() {
        ops += sum(&l.counters.ops);
        bytes += l.counters.bytes.load(Ordering::Relaxed);
    }
    let f = &d.flow;
    DriverStats {
        name: d.name.clone(),
        sessions: live.iter().filter(|l| l.bound).count(),
        sessions_created: c.sessions_created.load(Ordering::Relaxed),
        ops,
        bytes,
        errors: c.errors.snapshot(),
        flow: FlowStats {
            restarts: f.restarts.load(Ordering::Relaxed),
            blocked_periods: f.blocked_periods.load(Ordering::Relaxed),
            held: f.held_now(),
            held_high_water: f.held_high_water.load(Ordering::Relaxed),
            in_flight: d.credits.in_flight(),
            in_flight_high_water: d.credits.high_water(),
            max_in_flight: d.credits.limit(),
            submit_waits: d.credits.waits.load(Ordering::Relaxed),
            overcommits: d.credits.overcommits.load(Ordering::Relaxed),
        },
    }
}
