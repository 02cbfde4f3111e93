//! Where requests are counted: per session per driver ([`SessionCounters`], the only
//! counters the request path touches), per driver ([`DriverCounters`]: its own errors,
//! retired totals, and its live sessions' counters, summed when read), and the public
//! [`SessionStats`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::error::{ErrorCounters, ErrorCounts};
use crate::routing::SIZE_CLASSES;

use super::SessionShared;

/// Counters of one session on one driver.
#[derive(Default)]
pub(crate) struct SessionCounters {
    pub(crate) ops: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) errors: ErrorCounters,
    /// Requests a routing decision sent to this driver, per size class.
    pub(crate) routed: [AtomicU64; SIZE_CLASSES],
}

impl SessionCounters {
    pub(crate) fn snapshot(&self) -> SessionStats {
        SessionStats {
            ops: self.ops.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            errors: self.errors.snapshot(),
        }
    }
}

/// A session's binding to a driver, as the driver's registry sees it: from binding until
/// the last request that went through it is finished.
pub(crate) struct LiveSession {
    pub(crate) counters: Arc<SessionCounters>,
    pub(crate) session: Weak<SessionShared>,
    /// Still bound (false once the session is freed or moved, while requests finish).
    pub(crate) bound: bool,
}

/// Counters of one driver: its own error counters, the totals of sessions no longer bound
/// to it, and its bound sessions' counters (summed when read, so the request path updates
/// only the session's counters).
#[derive(Default)]
pub(crate) struct DriverCounters {
    pub(crate) errors: ErrorCounters,
    pub(crate) retired_ops: AtomicU64,
    pub(crate) retired_bytes: AtomicU64,
    pub(crate) retired_routed: [AtomicU64; SIZE_CLASSES],
    pub(crate) sessions_created: AtomicU64,
    pub(crate) live: Mutex<Vec<LiveSession>>,
}

impl DriverCounters {
    /// Records a new binding of `session` to this driver.
    pub(crate) fn add_live(&self, counters: Arc<SessionCounters>, session: &Arc<SessionShared>) {
        let live = LiveSession { counters, session: Arc::downgrade(session), bound: true };
        self.live.lock().unwrap_or_else(PoisonError::into_inner).push(live);
    }

    /// Requests routed here per size class, by sessions gone and alive.
    pub(crate) fn routed(&self) -> [u64; SIZE_CLASSES] {
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = [0; SIZE_CLASSES];
        for (c, o) in out.iter_mut().enumerate() {
            *o = self.retired_routed[c].load(Ordering::Relaxed)
                + live.iter().map(|l| l.counters.routed[c].load(Ordering::Relaxed)).sum::<u64>();
        }
        out
    }

    pub(crate) fn live_sessions(&self) -> usize {
        self.live.lock().unwrap_or_else(PoisonError::into_inner).iter().filter(|l| l.bound).count()
    }
}

/// Statistics of one session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Requests completed successfully.
    pub ops: u64,
    /// Payload bytes of those requests.
    pub bytes: u64,
    /// Every failed request or submission, by cause.
    pub errors: ErrorCounts,
}
