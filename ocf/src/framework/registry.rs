//! The driver registry: the registered drivers, choosing one for a session (best
//! [`Priority`], then fewest live sessions), binding a session to it, and rebinding a
//! session whose driver was unregistered (the [`Rebinder`] the session layer calls).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::driver::{Priority, SessionContext};
use crate::error::{Error, ErrorCounters};
use crate::params::{Mode, SessionParams};
use crate::session::{
    Binding, CoreReturnPath, DriverEntry, Rebinder, Reorder, SessionCore, SessionCounters, SessionShared,
    Workers,
};

use super::Config;

/// What a [`crate::Framework`] handle shares: the drivers, the framework-wide error
/// counters, session ids, the configuration and the worker threads.
pub(crate) struct Registry {
    pub(super) drivers: RwLock<Vec<Arc<DriverEntry>>>,
    /// Errors that happen before a driver is involved (bad parameters, no driver).
    pub(super) errors: ErrorCounters,
    pub(super) next_session_id: AtomicU64,
    pub(super) config: Config,
    pub(super) workers: Arc<Workers>,
}

impl Registry {
    /// Binds a session to a driver: the driver's per-session state, and where the
    /// session's requests on it are counted.
    pub(super) fn bind(
        &self,
        entry: &Arc<DriverEntry>,
        params: &SessionParams,
        id: u64,
        order: Option<Arc<Reorder>>,
    ) -> Result<Binding, Error> {
        let counters = Arc::new(SessionCounters::default());
        let core = Arc::new(SessionCore {
            counters,
            entry: entry.clone(),
            workers: self.workers.clone(),
            order,
            return_queue: (id as usize) % self.workers.return_workers(),
        });
        let ctx = SessionContext::new(Arc::new(CoreReturnPath(core.clone())));
        let driver_session = entry.driver.new_session(params, ctx)?;
        entry.counters.sessions_created.fetch_add(1, Ordering::Relaxed);
        Ok(Binding {
            entry: entry.clone(),
            core,
            driver_session: Some(driver_session),
            synchronous: entry.caps.synchronous,
        })
    }
}

impl Rebinder for Registry {
    /// A new binding for a session whose driver is gone, on the best registered driver;
    /// `None` if there is none (or the old driver was `named_only`: its sessions asked
    /// for it by name, and no other driver does what it does).
    fn rebind(&self, session: &Arc<SessionShared>, params: &SessionParams, old: &Binding) -> Option<Binding> {
        if old.entry.caps.named_only {
            return None;
        }
        loop {
            let entry = {
                let drivers = self.drivers.read().unwrap_or_else(PoisonError::into_inner);
                best_driver(&drivers, params).ok()?.0.clone()
            };
            match self.bind(&entry, params, session.id(), session.order()) {
                Ok(b) => {
                    entry.counters.add_live(b.core.counters.clone(), session);
                    session.add_history(b.core.counters.clone());
                    return Some(b);
                }
                // That driver would not take it after all; count it there and try without it
                // only if it was unregistered meanwhile, else give up.
                Err(e) => {
                    entry.counters.errors.record(e.kind());
                    if !entry.is_gone() {
                        return None;
                    }
                }
            }
        }
    }
}

pub(super) fn best_driver<'a>(
    drivers: &'a [Arc<DriverEntry>],
    params: &SessionParams,
) -> Result<(&'a Arc<DriverEntry>, Priority), Error> {
    if drivers.is_empty() {
        return Err(Error::NoDriver);
    }
    drivers
        .iter()
        .filter(|d| !d.caps.named_only && d.caps.covers(params))
        .filter_map(|d| d.driver.probe_session(params).map(|p| (d, p)))
        // Highest priority; among equals, the fewest live sessions; among those, the
        // earliest registered (max_by_key keeps the last maximum, hence the reversed index).
        .enumerate()
        .max_by_key(|(i, (d, p))| (*p, std::cmp::Reverse(d.counters.live_sessions()), std::cmp::Reverse(*i)))
        .map(|(_, dp)| dp)
        .ok_or_else(|| unsupported(params))
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
    }
}
