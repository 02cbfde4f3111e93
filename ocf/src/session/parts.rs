//! The parts of a session that refer to one another, as data: defined together because
//! they form one knot of types, and each concern's behaviour (in its own file) needs the
//! whole knot, never another concern's file.
//!
//! ```text
//!  DriverEntry ── flow: Flow<Held> ──▶ Held ── binding ──▶ Binding ── core ──▶ SessionCore
//!       ▲                                                                        │ │ │
//!       └───────────────────────────────────────────── entry ────────────────────┘ │ │
//!  Workers = dispatch::Workers<SessionJobs>: Work, Completion queues ◀─ workers ───┘ │
//!  SessionReorder = Reorder<Arc<SessionCore>> ◀─ order ──────────────────────────────┘
//! ```
//!
//! What each part does lives with its concern: [`DriverEntry`]'s bookkeeping below (it
//! needs nothing else), a binding's life and the registry in `binding`, the return path
//! ([`SessionCore`]'s methods) in `complete`, the handing of completions to return
//! workers in `handoff`, the workers' jobs ([`SessionJobs`]'s `Jobs`) in `jobs`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use crate::credits::Credits;
use crate::dispatch::{self, Flow};
use crate::driver::{Capabilities, Driver, DriverSession};
use crate::profile::StageProfile;
use crate::request::{Outcome, Request};
use crate::routing::model::ModelTable;
use crate::routing::DriverRouteState;

use super::counters::{DriverCounters, SessionCounters};
use super::reorder::Reorder;
use super::SessionShared;

/// A registered driver, its accounting, flow control, profile and routing state.
pub(crate) struct DriverEntry {
    pub(crate) name: String,
    pub(crate) driver: Arc<dyn Driver>,
    pub(crate) caps: Capabilities,
    pub(crate) counters: Arc<DriverCounters>,
    pub(crate) flow: Flow<Held>,
    pub(crate) credits: Arc<Credits>,
    pub(crate) profile: Arc<StageProfile>,
    pub(crate) routing: DriverRouteState,
    gone: AtomicBool,
}

impl DriverEntry {
    pub(crate) fn new(name: String, driver: Arc<dyn Driver>, max_in_flight: usize) -> DriverEntry {
        DriverEntry {
            caps: driver.capabilities(),
            name,
            driver,
            counters: Arc::default(),
            flow: Flow::default(),
            credits: Arc::new(Credits::new(max_in_flight)),
            profile: Arc::default(),
            routing: DriverRouteState::default(),
            gone: AtomicBool::new(false),
        }
    }

    /// Unregistered: sessions with a route here drop it at their next request.
    pub(crate) fn mark_gone(&self) {
        self.gone.store(true, Ordering::SeqCst)
    }

    #[inline]
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
    }
}

/// A session's tie to one driver: the driver's per-session state and where its requests
/// are counted.
pub(crate) struct Binding {
    /// Unique in the process (never 0): what a multi-part message remembers of its driver.
    pub(crate) id: u64,
    pub(crate) entry: Arc<DriverEntry>,
    pub(crate) core: Arc<SessionCore>,
    pub(crate) driver_session: Option<Box<dyn DriverSession>>,
    pub(crate) synchronous: bool,
    /// The driver finishes a request without the "more follow" hint in `process`
    /// (synchronous, or [`crate::Capabilities::synchronous_without_hint`]).
    pub(crate) synchronous_unhinted: bool,
    /// The driver finishes a whole run in one `process_run` call (synchronous, or
    /// [`crate::Capabilities::runs`]).
    pub(crate) runs: bool,
    /// Count requests inside `process` (policy `LeastLoaded` needs it for synchronous
    /// drivers).
    pub(crate) count_active: bool,
}

/// What a binding's requests need on their way back, shared with the driver through its
/// [`crate::SessionContext`]: where to count, how to deliver, where to profile.
pub(crate) struct SessionCore {
    pub(crate) counters: Arc<SessionCounters>,
    pub(crate) entry: Arc<DriverEntry>,
    pub(crate) workers: Arc<Workers>,
    pub(crate) order: Option<Arc<SessionReorder>>,
    /// This session's return worker: one per session keeps its callbacks in order and on
    /// one thread's cache.
    pub(crate) return_queue: usize,
    /// The driver's cost model for this session's algorithm, which routed requests teach.
    pub(crate) model: Arc<ModelTable>,
    /// The session, for redoing a request its driver failed (set once it exists).
    pub(crate) session: OnceLock<Weak<SessionShared>>,
}

/// Ordered completion of a session's requests, whichever binding finished them.
pub(crate) type SessionReorder = Reorder<Arc<SessionCore>>;

/// The framework's threads, running sessions' work.
pub(crate) type Workers = dispatch::Workers<SessionJobs>;

/// The jobs of the framework's threads (what they do: `jobs`).
pub(crate) struct SessionJobs;

/// Work for the dispatch worker.
pub(crate) enum Work {
    /// A batchable request (or one moved from a detached driver's held queue), with the
    /// binding it was routed to.
    Request(Arc<SessionShared>, Arc<Binding>, Request),
    /// A driver was unblocked: hand it its held requests.
    Resume(Arc<DriverEntry>),
}

/// A completed request whose callback runs on a return worker.
pub(crate) struct Completion {
    pub(crate) core: Arc<SessionCore>,
    pub(crate) outcome: Outcome,
}

/// A request waiting for its blocked driver (in the driver's `Flow`).
pub(crate) struct Held {
    pub(crate) session: Arc<SessionShared>,
    pub(crate) binding: Arc<Binding>,
    pub(crate) req: Request,
}
