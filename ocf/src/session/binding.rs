//! Binding: a session's tie to one driver, and moving it to another when its driver is
//! unregistered. Holds the registered driver as sessions see it ([`DriverEntry`]); the
//! registry that chooses drivers is the framework's, reached through [`Rebinder`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use arc_swap::Guard;

use crate::credits::Credits;
use crate::dispatch::Flow;
use crate::driver::{Capabilities, Driver, DriverSession};
use crate::params::SessionParams;
use crate::profile::StageProfile;

use super::complete::SessionCore;
use super::counters::{DriverCounters, SessionCounters};
use super::jobs::Held;
use super::reorder::Reorder;
use super::SessionShared;

/// A registered driver, its accounting, flow control and profile.
pub(crate) struct DriverEntry {
    pub(crate) name: String,
    pub(crate) driver: Arc<dyn Driver>,
    pub(crate) caps: Capabilities,
    pub(crate) counters: Arc<DriverCounters>,
    pub(crate) flow: Flow<Held>,
    pub(crate) credits: Arc<Credits>,
    pub(crate) profile: StageProfile,
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
            profile: StageProfile::default(),
            gone: AtomicBool::new(false),
        }
    }

    /// Unregistered: sessions still bound here move on at their next request.
    pub(crate) fn mark_gone(&self) {
        self.gone.store(true, Ordering::SeqCst)
    }

    #[inline]
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
    }
}

/// The framework's registry as a session sees it: where it finds a new driver when its own
/// is gone (implemented by `crate::framework`).
pub(crate) trait Rebinder: Send + Sync {
    /// A new binding for `session` on the best registered driver, or `None`.
    fn rebind(&self, session: &Arc<SessionShared>, params: &SessionParams, old: &Binding) -> Option<Binding>;
}

/// A session's tie to one driver: the driver's per-session state and where its requests
/// are counted. Replaced as a whole when the session moves to another driver.
pub(crate) struct Binding {
    pub(crate) entry: Arc<DriverEntry>,
    pub(crate) core: Arc<SessionCore>,
    pub(crate) driver_session: Option<Box<dyn DriverSession>>,
    pub(crate) synchronous: bool,
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
    /// The core of the session's current binding.
    pub(crate) fn core(&self) -> Arc<SessionCore> {
        self.binding.load().core.clone()
    }

    /// Whether two sessions' requests go to the same driver now.
    pub(crate) fn same_driver(a: &Arc<SessionShared>, b: &Arc<SessionShared>) -> bool {
        Arc::ptr_eq(a, b) || Arc::ptr_eq(&a.binding.load().entry, &b.binding.load().entry)
    }

    /// Moves the session off a driver that is gone, to the best registered driver.
    /// Returns the binding to use, or `None` if there is none (the request fails with
    /// `DriverGone`).
    pub(super) fn rebind(self: &Arc<Self>, stale: &Binding) -> Option<Guard<Arc<Binding>>> {
        let registry = self.registry.upgrade()?;
        // The old binding ends (and its driver session is freed) when the last thread
        // still using it lets go.
        match self.move_off(&stale.entry, &*registry) {
            Moved::Now(_) | Moved::Already => Some(self.binding.load()),
            Moved::Nowhere => None,
        }
    }

    /// Rebinding for `Framework::unregister`: returns the old binding so the caller can
    /// wait for threads still using it.
    pub(crate) fn rebind_for_detach(
        self: &Arc<Self>,
        gone: &Arc<DriverEntry>,
        registry: &dyn Rebinder,
    ) -> Option<Arc<Binding>> {
        match self.move_off(gone, registry) {
            Moved::Now(old) => Some(old),
            Moved::Already | Moved::Nowhere => None,
        }
    }

    /// The one place a session changes driver: if it is still bound to `gone`, binds it
    /// to the best registered driver and returns the old binding.
    fn move_off(self: &Arc<Self>, gone: &Arc<DriverEntry>, registry: &dyn Rebinder) -> Moved {
        let _one_at_a_time = self.rebinding.lock().unwrap_or_else(PoisonError::into_inner);
        let current = self.binding.load();
        if !Arc::ptr_eq(&current.entry, gone) {
            return Moved::Already;
        }
        let Some(binding) = registry.rebind(self, &self.params, &current) else { return Moved::Nowhere };
        drop(current);
        Moved::Now(self.binding.swap(Arc::new(binding)))
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Records a new binding's counters in the session's history.
    pub(crate) fn add_history(&self, counters: Arc<SessionCounters>) {
        self.history.lock().unwrap_or_else(PoisonError::into_inner).push(counters);
    }

    pub(crate) fn order(&self) -> Option<Arc<Reorder>> {
        self.order.clone()
    }
}

/// What came of moving a session off a driver.
enum Moved {
    /// Moved now; the old binding.
    Now(Arc<Binding>),
    /// Someone else moved it already.
    Already,
    /// No other driver can serve it.
    Nowhere,
}
