//! Binding: a session's tie to one driver ([`Binding`]: the driver's per-session state and
//! where requests on it are counted; the type is in `parts`). Here: a binding's id, what
//! its drop does (the driver session freed, its counts kept until its last request is
//! done), the session's counting through its bindings, and the registry as sessions see
//! it ([`Registrar`], implemented by the framework, which lists and binds drivers). A
//! session has a binding per driver it has used (see `routes`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use crate::error::{Error, ErrorKind};
use crate::params::SessionParams;
use crate::routing::model::ModelTable;

use super::counters::SessionCounters;
use super::parts::{Binding, DriverEntry, SessionReorder};
use super::SessionShared;

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
        order: Option<Arc<SessionReorder>>,
        model: Arc<ModelTable>,
    ) -> Result<Binding, Error>;

    /// Counts an error that no driver can be charged with.
    fn count_error(&self, kind: ErrorKind);
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
