//! The framework instance: configuration, the driver registry, session creation and
//! migration, and statistics.
//!
//! Drivers register and unregister at run time. A new session goes to the driver that
//! probes it with the best [`Priority`]; ties go to the driver with the fewest live sessions
//! (simple load spreading, as FreeBSD's crypto_select_driver does); a caller may also name
//! the driver. Unregistering a driver moves its sessions to the next best driver and
//! waits, up to [`Config::drain_timeout`], for the requests it still holds.
//!
//! This file holds the public API ([`Framework`], [`Config`]); `registry` chooses and binds
//! drivers (and lists and binds them for `crate::session`), `stats` holds the statistics types.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use crate::driver::{Driver, Priority};
use crate::error::{Error, ErrorCounters};
use crate::params::SessionParams;
use crate::profile::ProfileStats;
use crate::routing::{DriverRouting, Policy, RoutingStats};
use crate::session::{
    DriverEntry, Pin, Registrar, Route, Routes, Session, SessionReorder, SessionShared, Work, Workers,
};

mod registry;
mod stats;

use registry::{best_drivers, unsupported, Registry};
use stats::driver_stats;
pub use stats::{DriverInfo, DriverStats, FlowStats, FrameworkStats};

/// How a framework runs. `Config::default()` suits most programs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Threads that run callbacks not marked immediate. Default: one per core.
    pub return_workers: usize,
    /// Requests a driver may have in flight — queued in the framework, held by the driver
    /// or waiting for their callback — before submitters wait (flow control). Default 4096.
    pub max_in_flight: usize,
    /// Profile one request in this many (0: never; 1: every request, as `cryptotest -p`).
    /// Default 64 (its measured cost is in `docs/measurements.md`).
    pub profile_every: u32,
    /// How long `unregister` waits for a driver's requests to drain. Default 10 s.
    pub drain_timeout: Duration,
    /// How each session's requests are spread over the drivers that can serve it.
    /// Default: [`Policy::CostModel`].
    pub policy: Policy,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            return_workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_in_flight: 4096,
            profile_every: 64,
            drain_timeout: Duration::from_secs(10),
            policy: Policy::default(),
        }
    }
}

/// An ocf instance. Cheap to clone (shared). Most programs make one.
#[derive(Clone)]
pub struct Framework {
    inner: Arc<Registry>,
}

impl Default for Framework {
    fn default() -> Framework {
        Framework::with_config(Config::default())
    }
}

impl Framework {
    pub fn new() -> Framework {
        Framework::default()
    }

    pub fn with_config(config: Config) -> Framework {
        Framework {
            inner: Arc::new(Registry {
                routing: Arc::default(),
                drivers: RwLock::default(),
                errors: ErrorCounters::default(),
                next_session_id: AtomicU64::new(0),
                workers: Arc::new(Workers::new(config.return_workers)),
                config,
            }),
        }
    }

    /// The configuration this framework runs with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Adds a driver. Its name must be unique.
    pub fn register(&self, driver: Arc<dyn Driver>) -> Result<(), Error> {
        let name = driver.name().to_owned();
        let mut drivers = self.inner.drivers.write().unwrap_or_else(PoisonError::into_inner);
        if drivers.iter().any(|d| d.name == name) {
            self.inner.errors.record(crate::ErrorKind::DuplicateDriver);
            return Err(Error::DuplicateDriver(name));
        }
        drivers.push(Arc::new(DriverEntry::new(name, driver, self.inner.config.max_in_flight)));
        self.inner.drivers_changed();
        Ok(())
    }

    /// Removes a driver (detach). Its sessions drop it from their routes (a session left
    /// with none moves to the best driver there is), from their own copies of their
    /// parameters and keys, and their requests go on elsewhere: requests
    /// the driver had refused as Busy are offered to the new driver; requests the driver
    /// holds complete as it finishes them; this waits up to [`Config::drain_timeout`] for
    /// that. Sessions no other driver can serve (and sessions of a `named_only` driver)
    /// stay, and their requests fail with [`Error::DriverGone`]. No request is lost or
    /// completed twice.
    pub fn unregister(&self, name: &str) -> Result<(), Error> {
        let entry = {
            let mut drivers = self.inner.drivers.write().unwrap_or_else(PoisonError::into_inner);
            match drivers.iter().position(|d| d.name == name) {
                Some(i) => {
                    let entry = drivers.remove(i);
                    entry.mark_gone();
                    self.inner.drivers_changed();
                    entry
                }
                None => {
                    self.inner.errors.record(crate::ErrorKind::UnknownDriver);
                    return Err(Error::UnknownDriver(name.to_owned()));
                }
            }
        };
        let deadline = Instant::now() + self.inner.config.drain_timeout;
        // 1. Move every session.
        let sessions: Vec<Arc<SessionShared>> = {
            let live = entry.counters.live.lock().unwrap_or_else(PoisonError::into_inner);
            live.iter().filter(|l| l.bound).filter_map(|l| l.session.upgrade()).collect()
        };
        let mut old_bindings = Vec::new();
        for s in &sessions {
            if let Some(old) = s.renew_routes(Some(&entry)) {
                old_bindings.push(old);
            }
        }
        drop(sessions);
        // 2. Requests waiting for the driver to unblock go to their sessions' new drivers
        //    (or fail with DriverGone), through the dispatch worker.
        let held = entry.flow.take_all_held();
        if !held.is_empty() {
            let work = held.into_iter().map(|h| Work::Request(h.session, h.binding, h.req));
            self.inner.workers.dispatch().push_all(work);
        }
        // 3. Wait for threads still inside the driver, and for requests it holds.
        let drained = entry.credits.wait_idle(deadline);
        while old_bindings.iter().any(|b| Arc::strong_count(b) > 1) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        // Old bindings end here (or with the last thread using one): their driver
        // sessions are freed and their counters retired into the driver's.
        drop(old_bindings);
        match drained {
            Ok(()) => Ok(()),
            Err(in_flight) => {
                // The driver is out of the registry, so this is counted framework-wide.
                let e = Error::DetachTimeout { in_flight };
                self.inner.errors.record(e.kind());
                Err(e)
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

    /// A new private key for `alg` (`bits`: the RSA modulus size; ignored by the others),
    /// made by the best driver that generates keys for it: one `GenerateKey` request on a
    /// keyless session. The key's bytes pass through the request's `out`, which is wiped.
    pub fn generate_key(&self, alg: crate::AsymAlg, bits: usize) -> Result<crate::PrivateKey, Error> {
        use crate::asym::{PrivateFormat, PrivateKey};
        let session = self.new_session(&SessionParams::asymmetric(alg, crate::AsymKey::Generate { bits }))?;
        let room = 64 + 9 * crate::asym::RSA_MAX_BITS.max(bits) / 8;
        let mut done = session
            .run(crate::Request::asymmetric(crate::Op::GenerateKey, Vec::new(), room))
            .map_err(|f| f.into_parts().0)?;
        let format = match alg {
            crate::AsymAlg::Ffdh(_) | crate::AsymAlg::MlKem768 => PrivateFormat::Raw,
            _ => PrivateFormat::Pkcs8,
        };
        let bytes = zeroize::Zeroizing::new(done.result_payload());
        if let Some(out) = done.out.as_mut() {
            out.wipe();
        }
        Ok(PrivateKey::from_key(format, crate::Key::new(&bytes)))
    }

    /// Which driver (and priority) a session with these parameters would get now.
    pub fn choose_driver(&self, params: &SessionParams) -> Result<(String, Priority), Error> {
        params.validate()?;
        let drivers = self.read_drivers();
        let (entry, prio) = best_drivers(&drivers, params)?[0];
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
        let generation = self.inner.routing.generation.load(Ordering::Acquire);
        let (pin, entries) = {
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
                    (Pin::Named, vec![entry])
                }
                None => {
                    let ranked = best_drivers(&drivers, params).map_err(|e| (e, None))?;
                    let mut entries: Vec<Arc<DriverEntry>> =
                        ranked.into_iter().map(|(d, _)| d.clone()).collect();
                    // (A multi-part session is routed per message: see `session::routes`.)
                    if !self.inner.config.policy.per_request() {
                        entries.truncate(1);
                        (Pin::Best, entries)
                    } else {
                        (Pin::Free, entries)
                    }
                }
            }
        };
        let id = self.inner.next_session_id.fetch_add(1, Ordering::Relaxed);
        let order = params.ordered.then(|| Arc::new(SessionReorder::new()));
        // The first (best) route's binding is made now, so that a driver refusing the
        // session does so here; the others' when a request first goes there.
        let first = entries[0].clone();
        let model = first.routing.model(params);
        let binding = match self.inner.bind(&first, params, id, order.clone(), model.clone()) {
            Ok(b) => b,
            Err(e) => return Err((e, Some(first))),
        };
        let mut routes = vec![Arc::new(Route::bound(Arc::new(binding), model))];
        routes.extend(entries[1..].iter().map(|e| Arc::new(Route::new(e.clone(), params))));
        Ok(Session::new(
            id,
            params.clone(),
            Routes::new(routes, pin, self.inner.config.policy, generation),
            order,
            Arc::downgrade(&self.inner) as std::sync::Weak<dyn Registrar>,
            self.inner.routing.clone(),
            self.inner.config.profile_every,
        ))
    }

    /// Per-stage profile of one driver (the paper's Table 1).
    pub fn profile(&self, driver: &str) -> Option<ProfileStats> {
        self.read_drivers().iter().find(|d| d.name == driver).map(|d| d.profile.snapshot())
    }

    /// Clears every driver's profile (e.g. between benchmark cases).
    pub fn reset_profiles(&self) {
        for d in self.read_drivers().iter() {
            d.profile.reset();
        }
    }

    /// Statistics of every registered driver plus framework-level errors.
    pub fn stats(&self) -> FrameworkStats {
        FrameworkStats {
            errors: self.inner.errors.snapshot(),
            drivers: self.read_drivers().iter().map(|d| driver_stats(d)).collect(),
            dispatch_queue_high_water: self.inner.workers.dispatch_high_water(),
            return_queue_high_water: self.inner.workers.return_high_water(),
        }
    }

    /// What routing did and believes: per driver, the requests routed to it by size class
    /// and the cost model's estimates (see `crate::routing`).
    pub fn routing(&self) -> RoutingStats {
        let drivers: Vec<DriverRouting> = self
            .read_drivers()
            .iter()
            .map(|d| {
                let r = &d.routing;
                DriverRouting {
                    driver: d.name.clone(),
                    routed: d.counters.ops_by_class(),
                    explored: r.explored.load(Ordering::Relaxed),
                    skipped_blocked: r.skipped_blocked.load(Ordering::Relaxed),
                    skipped_unhealthy: r.skipped_unhealthy.load(Ordering::Relaxed),
                    in_flight: d.credits.in_flight(),
                    models: r.estimates(),
                }
            })
            .collect();
        let shared = &self.inner.routing;
        let timed = shared.timed_decisions.load(Ordering::Relaxed);
        RoutingStats {
            policy: self.inner.config.policy,
            decisions: timed,
            decision_ns: if timed == 0 {
                0.0
            } else {
                shared.decision_ns.load(Ordering::Relaxed) as f64 / timed as f64
            },
            drivers,
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
