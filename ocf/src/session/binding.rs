//! Binding: a session's tie to one driver ([`Binding`]: the driver's per-session state and
//! where requests on it are counted), and the registered driver as sessions see it
//! ([`DriverEntry`]). A session has a binding per driver it has used (see `routes`); the
//! registry that lists and binds drivers is the framework's, reached through [`Registrar`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use crate::credits::Credits;
use crate::dispatch::Flow;
use crate::driver::{Capabilities, Driver, DriverSession};
use crate::error::{Error, ErrorKind};
use crate::params::SessionParams;
use crate::profile::StageProfile;
use crate::routing::model::ModelTable;
use crate::routing::DriverRouteState;

use super::complete::SessionCore;
use super::counters::{DriverCounters, SessionCounters};
use super::jobs::Held;
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

/// The framework's registry as a session sees it (implemented by `crate::framework`).
pub(crate) trait Registrar: Send + Sync {
    /// The drivers that can serve these parameters now, best first: highest
    /// [`crate::Priority`], then fewest live sessions, then earliest registered.
    fn candidates(&self, params: &SessionParams) -> Vec<Arc<DriverEntry>>;

    /// Binds a session to a driver: the driver's session state, and where the session's
    /// requests there are counted and modelled.
    fn bind(
        &self,
        entry: &Arc<DriverEntry>,
        params: &SessionParams,
        id: u64,
        order: Option<Arc<Reorder>>,
        model: Arc<ModelTable>,
    ) -> Result<Binding, Error>;

    /// Counts an error that no driver can be charged with.
    fn count_error(&self, kind: ErrorKind);
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

/// The next binding id.
pub(crate) fn next_binding_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Drop for Binding {
    fn drop(&mut self) {
        if let Some(ds) = self.driver_session.take() {
            self.entry.driver.free_session(ds);
        }
        // No longer one of the driver's sessions; its counts stay visible until the core
        // (and the last request that went through this binding) is gone.
        let mut live = self.entry.counters.live.lock().unwrap_or_else(PoisonError::into_inner);
        for l in live.iter_mut().filter(|l| Arc::ptr_eq(&l.counters, &self.core.counters)) {
            l.bound = false;
        }
    }
}

impl SessionShared {
    /// Whether two sessions' next requests go to the same driver (for the "more follow"
    /// hint): both have one route, on the same driver.
    pub(crate) fn same_driver(a: &Binding, b: &Binding) -> bool {
        Arc::ptr_eq(&a.entry, &b.entry)
    }

    /// Counts an error at the session's first driver (the session's and the driver's
    /// counters), or, with no driver left, in the session's statistics only.
    pub(crate) fn count_error(self: &Arc<Self>, kind: ErrorKind) {
        let routes = self.routes.load();
        match routes.routes.first().and_then(|r| r.made()) {
            Some(b) => b.core.count_error(kind),
            None => self.count_in_history(kind),
        }
    }

    /// Counts an error in the session's own statistics only (its latest binding's
    /// counters), for a request that no driver saw.
    pub(crate) fn count_in_history(&self, kind: ErrorKind) {
        if let Some(c) = self.history.lock().unwrap_or_else(PoisonError::into_inner).last() {
            c.errors.record(kind);
        }
    }

    /// Records a new binding's counters in the session's history.
    pub(crate) fn add_history(&self, counters: Arc<SessionCounters>) {
        self.history.lock().unwrap_or_else(PoisonError::into_inner).push(counters);
    }
}
