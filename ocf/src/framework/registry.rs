//! The driver registry: the registered drivers, the ones that can serve a session (best
//! [`Priority`] first, then fewest live sessions), and binding a session to one (the
//! [`Registrar`] the session layer calls).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::driver::{Priority, SessionContext};
use crate::error::ErrorKind;
use crate::error::{Error, ErrorCounters};
use crate::params::{Mode, SessionParams};
use crate::routing::model::ModelTable;
use crate::routing::{Policy, RoutingShared};
use crate::session::{
    next_binding_id, Binding, CoreReturnPath, DriverEntry, Registrar, SessionCore, SessionCounters,
    SessionReorder, Workers,
};

use super::Config;

/// What a [`crate::Framework`] handle shares: the drivers, the framework-wide error
/// counters, session ids, the configuration, the worker threads and routing's shared state.
pub(crate) struct Registry {
    pub(super) routing: Arc<RoutingShared>,
    pub(super) drivers: RwLock<Vec<Arc<DriverEntry>>>,
    /// Errors that happen before a driver is involved (bad parameters, no driver).
    pub(super) errors: ErrorCounters,
    pub(super) next_session_id: AtomicU64,
    pub(super) config: Config,
    pub(super) workers: Arc<Workers>,
}

impl Registry {
    /// The list of drivers changed: sessions renew their routes at their next request.
    pub(super) fn drivers_changed(&self) {
        self.routing.generation.fetch_add(1, Ordering::AcqRel);
    }
}

impl Registrar for Registry {
    fn candidates(&self, params: &SessionParams) -> Vec<Arc<DriverEntry>> {
        let drivers = self.drivers.read().unwrap_or_else(PoisonError::into_inner);
        ranked(&drivers, params).into_iter().map(|(d, _)| d.clone()).collect()
    }

    fn bind(
        &self,
        entry: &Arc<DriverEntry>,
        params: &SessionParams,
        id: u64,
        order: Option<Arc<SessionReorder>>,
        model: Arc<ModelTable>,
    ) -> Result<Binding, Error> {
        let counters = Arc::new(SessionCounters::default());
        let core = Arc::new(SessionCore {
            counters,
            entry: entry.clone(),
            workers: self.workers.clone(),
            order,
            return_queue: (id as usize) % self.workers.return_workers(),
            model,
            session: Default::default(),
        });
        let ctx = SessionContext::new(Arc::new(CoreReturnPath(core.clone())));
        let driver_session = entry.driver.new_session(params, ctx);
        // The copies of key schedules a driver's library left in the frames it returned
        // from (see `crate::scrub`).
        crate::scrub::below_here::<{ crate::scrub::SESSION_KIB }>();
        let driver_session = driver_session?;
        entry.counters.sessions_created.fetch_add(1, Ordering::Relaxed);
        Ok(Binding {
            id: next_binding_id(),
            entry: entry.clone(),
            core,
            driver_session: Some(driver_session),
            synchronous: entry.caps.synchronous,
            synchronous_unhinted: entry.caps.synchronous || entry.caps.synchronous_without_hint,
            runs: entry.caps.synchronous || entry.caps.runs,
            count_active: entry.caps.synchronous && self.config.policy == Policy::LeastLoaded,
        })
    }

    fn count_error(&self, kind: ErrorKind) {
        self.errors.record(kind);
    }
}

/// The drivers that can serve `params`, best first: highest priority; among equals, the
/// fewest live sessions; among those, the earliest registered. `named_only` drivers are
/// never among them.
fn ranked<'a>(
    drivers: &'a [Arc<DriverEntry>],
    params: &SessionParams,
) -> Vec<(&'a Arc<DriverEntry>, Priority)> {
    let mut v: Vec<(&Arc<DriverEntry>, Priority)> = drivers
        .iter()
        .filter(|d| !d.caps.named_only && d.caps.covers(params) && !d.is_gone())
        .filter_map(|d| d.driver.probe_session(params).map(|p| (d, p)))
        .collect();
    // A stable sort keeps registration order among equals.
    v.sort_by_cached_key(|(d, p)| (std::cmp::Reverse(*p), d.counters.live_sessions()));
    v
}

/// The drivers that can serve `params`, best first; an error if there are none.
pub(super) fn best_drivers<'a>(
    drivers: &'a [Arc<DriverEntry>],
    params: &SessionParams,
) -> Result<Vec<(&'a Arc<DriverEntry>, Priority)>, Error> {
    if drivers.is_empty() {
        return Err(Error::NoDriver);
    }
    let v = ranked(drivers, params);
    if v.is_empty() {
        return Err(unsupported(params));
    }
    Ok(v)
}

pub(super) fn unsupported(params: &SessionParams) -> Error {
    if params.multipart {
        return Error::BadPart("no registered driver takes multi-part messages for this session's algorithm");
    }
    match &params.mode {
        Mode::Cipher { alg, .. } | Mode::Aead { alg, .. } => Error::UnsupportedCipher(*alg),
        Mode::Digest { alg } => Error::UnsupportedDigest(*alg),
        Mode::Mac { alg, .. } => Error::UnsupportedMac(*alg),
        Mode::CipherThenMac { cipher, .. } => Error::UnsupportedCipher(*cipher),
        Mode::Compress { alg } => Error::UnsupportedCompression(*alg),
        Mode::Asymmetric { alg, .. } => Error::UnsupportedAsym(*alg),
        Mode::Random => Error::NoDriver,
    }
}
