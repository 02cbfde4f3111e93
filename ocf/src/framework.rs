//! The framework instance: the driver registry, session creation, and statistics.
//!
//! Drivers register and unregister at run time. A new session goes to the driver that
//! probes it with the best [`Priority`]; ties go to the driver with the fewest live sessions
//! (simple load spreading, as FreeBSD's crypto_select_driver does); a caller may also name
//! the driver.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::driver::{Capabilities, Driver, Priority, SessionContext};
use crate::error::{Error, ErrorCounters, ErrorCounts};
use crate::params::{Mode, SessionParams};
use crate::session::{DriverCounters, Session, SessionCore, SessionCounters};

/// A registered driver and its accounting.
pub(crate) struct DriverEntry {
    pub(crate) name: String,
    pub(crate) driver: Arc<dyn Driver>,
    pub(crate) caps: Capabilities,
    pub(crate) counters: Arc<DriverCounters>,
    gone: AtomicBool,
}

impl DriverEntry {
    #[inline]
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
    }
}

/// An ocf instance. Cheap to clone (shared). Most programs make one.
#[derive(Clone, Default)]
pub struct Framework {
    inner: Arc<Registry>,
}

#[derive(Default)]
struct Registry {
    drivers: RwLock<Vec<Arc<DriverEntry>>>,
    /// Errors that happen before a driver is involved (bad parameters, no driver).
    errors: ErrorCounters,
    next_session_id: AtomicU64,
}

/// A driver as listed by [`Framework::drivers`].
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
    /// Sessions ever created.
    pub sessions_created: u64,
    /// Requests completed successfully (live and freed sessions).
    pub ops: u64,
    pub bytes: u64,
    /// Every error charged to this driver or its sessions, by cause.
    pub errors: ErrorCounts,
}

/// Statistics of the whole framework.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameworkStats {
    /// Errors that happened before any driver was involved.
    pub errors: ErrorCounts,
    pub drivers: Vec<DriverStats>,
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

impl Framework {
    pub fn new() -> Framework {
        Framework::default()
    }

    /// Adds a driver. Its name must be unique.
    pub fn register(&self, driver: Arc<dyn Driver>) -> Result<(), Error> {
        let name = driver.name().to_owned();
        let mut drivers = self.inner.drivers.write().unwrap_or_else(PoisonError::into_inner);
        if drivers.iter().any(|d| d.name == name) {
            self.inner.errors.record(crate::ErrorKind::DuplicateDriver);
            return Err(Error::DuplicateDriver(name));
        }
        drivers.push(Arc::new(DriverEntry {
            caps: driver.capabilities(),
            name,
            driver,
            counters: Arc::default(),
            gone: AtomicBool::new(false),
        }));
        Ok(())
    }

    /// Removes a driver. Its existing sessions stay valid objects but their requests fail
    /// with [`Error::DriverGone`]. (Moving sessions to the next best driver, and draining
    /// in-flight requests, is the dispatch layer's job.)
    pub fn unregister(&self, name: &str) -> Result<(), Error> {
        let mut drivers = self.inner.drivers.write().unwrap_or_else(PoisonError::into_inner);
        match drivers.iter().position(|d| d.name == name) {
            Some(i) => {
                let entry = drivers.remove(i);
                entry.gone.store(true, Ordering::Relaxed);
                Ok(())
            }
            None => {
                self.inner.errors.record(crate::ErrorKind::UnknownDriver);
                Err(Error::UnknownDriver(name.to_owned()))
            }
        }
    }

    /// The registered drivers, in registration order.
    pub fn drivers(&self) -> Vec<DriverInfo> {
        self.read_drivers()
            .iter()
            .map(|d| DriverInfo {
                name: d.name.clone(),
                capabilities: d.caps.clone(),
                sessions: d.counters.live_sessions(),
            })
            .collect()
    }

    /// Creates a session on the best driver for `params`.
    pub fn new_session(&self, params: &SessionParams) -> Result<Session, Error> {
        self.create(None, params)
    }

    /// Creates a session on the named driver.
    pub fn new_session_on(&self, driver: &str, params: &SessionParams) -> Result<Session, Error> {
        self.create(Some(driver), params)
    }

    /// Which driver (and priority) a session with these parameters would get now.
    pub fn choose_driver(&self, params: &SessionParams) -> Result<(String, Priority), Error> {
        params.validate()?;
        let drivers = self.read_drivers();
        let (entry, prio) = best_driver(&drivers, params)?;
        Ok((entry.name.clone(), prio))
    }

    fn create(&self, named: Option<&str>, params: &SessionParams) -> Result<Session, Error> {
        let result = self.try_create(named, params);
        if let Err((e, entry)) = &result {
            match entry {
                Some(entry) => entry.counters.errors.record(e.kind()),
                None => self.inner.errors.record(e.kind()),
            }
        }
        result.map_err(|(e, _)| e)
    }

    fn try_create(
        &self,
        named: Option<&str>,
        params: &SessionParams,
    ) -> Result<Session, (Error, Option<Arc<DriverEntry>>)> {
        params.validate().map_err(|e| (e, None))?;
        let entry = {
            let drivers = self.read_drivers();
            match named {
                Some(name) => {
                    let entry = drivers
                        .iter()
                        .find(|d| d.name == name)
                        .cloned()
                        .ok_or_else(|| (Error::UnknownDriver(name.to_owned()), None))?;
                    if !entry.caps.covers(params) || entry.driver.probe_session(params).is_none() {
                        return Err((unsupported(params), Some(entry)));
                    }
                    entry
                }
                None => best_driver(&drivers, params).map_err(|e| (e, None))?.0.clone(),
            }
        };
        let counters = Arc::new(SessionCounters::default());
        let core = Arc::new(SessionCore { counters: counters.clone(), driver: entry.counters.clone() });
        let ctx = SessionContext { core: core.clone() };
        let driver_session = match entry.driver.new_session(params, ctx) {
            Ok(s) => s,
            Err(e) => return Err((e, Some(entry))),
        };
        let id = self.inner.next_session_id.fetch_add(1, Ordering::Relaxed);
        entry.counters.sessions_created.fetch_add(1, Ordering::Relaxed);
        entry.counters.live.lock().unwrap_or_else(PoisonError::into_inner).push((id, counters));
        Ok(Session::new(id, params.clone(), entry, driver_session, core))
    }

    /// Statistics of every registered driver plus framework-level errors.
    pub fn stats(&self) -> FrameworkStats {
        FrameworkStats {
            errors: self.inner.errors.snapshot(),
            drivers: self.read_drivers().iter().map(|d| driver_stats(d)).collect(),
        }
    }

    /// Statistics of one driver.
    pub fn driver_stats(&self, name: &str) -> Option<DriverStats> {
        self.read_drivers().iter().find(|d| d.name == name).map(|d| driver_stats(d))
    }

    fn read_drivers(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<DriverEntry>>> {
        self.inner.drivers.read().unwrap_or_else(PoisonError::into_inner)
    }
}

fn best_driver<'a>(
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

fn unsupported(params: &SessionParams) -> Error {
    match &params.mode {
        Mode::Cipher { alg, .. } | Mode::Aead { alg, .. } => Error::UnsupportedCipher(*alg),
        Mode::Digest { alg } => Error::UnsupportedDigest(*alg),
        Mode::Mac { alg, .. } => Error::UnsupportedMac(*alg),
        Mode::CipherThenMac { cipher, .. } => Error::UnsupportedCipher(*cipher),
    }
}

fn driver_stats(d: &DriverEntry) -> DriverStats {
    let c = &d.counters;
    let live = c.live.lock().unwrap_or_else(PoisonError::into_inner);
    let (mut ops, mut bytes) =
        (c.retired_ops.load(Ordering::Relaxed), c.retired_bytes.load(Ordering::Relaxed));
    for (_, s) in live.iter() {
        ops += s.ops.load(Ordering::Relaxed);
        bytes += s.bytes.load(Ordering::Relaxed);
    }
    DriverStats {
        name: d.name.clone(),
        sessions: live.len(),
        sessions_created: c.sessions_created.load(Ordering::Relaxed),
        ops,
        bytes,
        errors: c.errors.snapshot(),
    }
}
