//! Sessions: a validated set of parameters bound to a driver, and the request path.
//!
//! A [`Session`] is the client's handle; this file holds it and its public API. The rest,
//! one concern per file:
//! - `submit`: the submit path, from `run`/`submit` to the driver's `process` (the direct
//!   path is there);
//! - `jobs`: what the framework's dispatch and return workers do (`crate::dispatch` holds
//!   the threads and queues, which know nothing of sessions);
//! - `complete`: the return path, where every finished request is counted and delivered;
//! - `handoff`: completions handed to the return workers, collected over a batch;
//! - `routes`: the drivers that may serve the session and the choice of one per request
//!   (`crate::routing` has the model and the policies);
//! - `binding`: a session's tie to one driver, and the registry as sessions see it;
//! - `parts`: the types those share, which refer to one another (a driver's held requests
//!   hold bindings, a binding its core, the core its driver): defined together so that no
//!   concern's file needs another's for a type;
//! - `counters`: per-session and per-driver counters, and [`SessionStats`];
//! - `reorder`: ordered completion for `ordered()` sessions.
//!
//! They name each other only downwards (`scripts/module-cycles` checks it), and any of them
//! may use this file's `SessionShared`:
//!
//! ```text
//!  submit ─▶ complete ─▶ handoff ◀─ jobs
//!    │   └─▶ routes │        │       │      binding
//!    ▼         ▼    ▼        ▼       ▼        ▼
//!  parts: DriverEntry, Binding, SessionCore, Work, Held … ─▶ counters, reorder
//! ```
//!
//! The shared types' methods live with their concern (`SessionCore`'s in `complete`,
//! `SessionShared`'s in `submit`, `routes` and `binding`) and are called from any of them.
//!
//! A session has *routes*: every registered driver that can serve it (or one, when the
//! caller named it or the policy is `Priority`). It is *bound* to a driver — a driver
//! session with its own copy of the keys, made from the session's own copy of its
//! parameters — the first time a request goes there. When a driver is unregistered the
//! session drops that route (a session left with none moves to the best driver there is)
//! and its requests go on elsewhere.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use arc_swap::ArcSwap;

use crate::buffer::{Borrowed, Buffer};
use crate::completion::{Admit, Callback, RequestFuture};
use crate::credits::{Admission, Credits};
use crate::error::{Error, ErrorKind};
use crate::params::SessionParams;
use crate::request::{Failed, Flags, Outcome, Request, RequestRules};
use crate::routing::RoutingShared;

mod binding;
mod complete;
mod counters;
mod handoff;
mod jobs;
mod parts;
mod reorder;
mod routes;
mod submit;

pub(crate) use binding::{next_binding_id, Registrar};
pub(crate) use complete::CoreReturnPath;
pub use counters::SessionStats;
pub(crate) use counters::{sum, SessionCounters};
pub(crate) use parts::{Binding, DriverEntry, SessionCore, SessionReorder, Work, Workers};
pub(crate) use routes::{Pin, Route, Routes};

use complete::request_mut;
use submit::{Started, Target};

/// A crypto session: parameters bound to a driver. Cheap to clone (shared), usable from
/// many threads at once. Freed — and its keys wiped, in ocf and in the driver — when the
/// last clone is dropped.
#[derive(Clone)]
pub struct Session {
    shared: Arc<SessionShared>,
}

pub(crate) struct SessionShared {
    id: u64,
    /// The session's own copy of its parameters and keys (wiped on drop), from which it
    /// is rebound when its driver goes away.
    params: SessionParams,
    rules: RequestRules,
    routes: ArcSwap<Routes>,
    /// The framework's routing state: the drivers' generation, decision costs.
    shared: Arc<RoutingShared>,
    /// The counters of every binding this session has had (one per driver it used).
    history: Mutex<Vec<Arc<SessionCounters>>>,
    order: Option<Arc<SessionReorder>>,
    registry: Weak<dyn Registrar>,
    /// Serializes renewing the routes.
    rebinding: Mutex<()>,
    /// Profile one request in this many (0: off).
    profile_every: u32,
}

impl Session {
    /// A session whose routes are `routes`; the first route's binding is made already
    /// (so a driver that refuses the session does so when it is made).
    pub(crate) fn new(
        id: u64,
        params: SessionParams,
        routes: Routes,
        order: Option<Arc<SessionReorder>>,
        registry: Weak<dyn Registrar>,
        shared: Arc<RoutingShared>,
        profile_every: u32,
    ) -> Session {
        let rules = RequestRules::new(&params);
        let first = routes.routes.first().and_then(|r| r.made().cloned());
        let shared = Arc::new(SessionShared {
            id,
            params,
            rules,
            routes: ArcSwap::from_pointee(routes),
            shared,
            history: Mutex::new(Vec::new()),
            order,
            registry,
            rebinding: Mutex::new(()),
            profile_every,
        });
        if let Some(b) = first {
            let _ = b.core.session.set(Arc::downgrade(&shared));
            b.entry.counters.add_live(b.core.counters.clone(), &shared);
            shared.add_history(b.core.counters.clone());
        }
        Session { shared }
    }

    /// Processes a request and waits for its outcome (a blocking wait; with a synchronous
    /// driver it returns without ever blocking).
    pub fn run(&self, req: Request) -> Outcome {
        match self.shared.start(req, Target::Wait, Admission::Block) {
            Started::Now(o) => o,
            Started::Later(Some(w)) => w.wait(),
            // A wait target always gets a waiter, and Block never gives up.
            Started::Later(None) | Started::WouldBlock(..) => unreachable!("blocking wait without a waiter"),
        }
    }

    /// Processes a batch the caller has in hand and waits for every outcome, as
    /// [`Session::run`] does for one request: each request of `reqs` (all are taken) ends in
    /// `out`, in no particular order — a request's `user` field tells them apart. The batch
    /// travels as a value: a driver that takes runs whole (the multi-buffer driver, any
    /// synchronous driver) gets it in one [`crate::DriverSession::process_run`] call, in
    /// this thread; an asynchronous one gets each request directly with the hint that more
    /// follow, and the call then waits for them. The driver is chosen once for the run.
    pub fn run_batch(&self, reqs: &mut Vec<Request>, out: &mut Vec<Outcome>) {
        self.shared.run_many(reqs, out, None)
    }

    /// Like [`Session::run_batch`], but without waiting: what the driver finishes before
    /// this call returns (a driver that takes runs, or a synchronous one: the whole run)
    /// goes to `out`, as [`Session::submit_or_finish`] hands outcomes back; what an
    /// asynchronous driver takes goes on with the hint that more follow, and `callback`
    /// gets each outcome later (as with [`Session::submit`]). For a client with a batch in
    /// hand that must not block on a card: the IPsec core.
    pub fn submit_run(&self, reqs: &mut Vec<Request>, callback: &Callback, out: &mut Vec<Outcome>) {
        self.shared.run_many(reqs, out, Some(callback))
    }

    /// Processes `data` in place as the request's buffer, without copying it into the
    /// request (see [`crate::buffer::Borrowed`]): for callers whose bytes live in memory
    /// they do not own as a `Vec`, such as the OpenSSL provider working on the application's
    /// buffer. Waits like [`Session::run`]; the request comes back with an empty buffer.
    ///
    /// # Safety
    /// Every driver that can serve this session keeps the driver contract (`crate::driver`):
    /// a request it takes comes back through `process`'s answer or exactly one
    /// `SessionContext::done`, with its buffer, and the driver keeps no part of the buffer
    /// afterwards (a synchronous driver never answers `Pending`). ocf's own drivers do. The
    /// framework then hands the request back before this call returns, so the lent pointer
    /// never outlives `data`'s borrow.
    pub unsafe fn run_in(&self, mut req: Request, data: &mut [u8]) -> Outcome {
        req.buf = Buffer::Borrowed(Borrowed::new(data));
        let mut outcome = self.run(req);
        // The loan ends here: nothing of `data` stays in the request.
        request_mut(&mut outcome).buf = Buffer::default();
        outcome
    }

    /// Processes a request; `callback` gets the outcome — on a return worker, or in the
    /// driver's completion context if the request has [`Flags::CALLBACK_IMMEDIATE`] (for a
    /// synchronous driver that is this thread, before `submit` returns). With
    /// [`Flags::BATCH`] the request is queued for the dispatch worker. If the driver's
    /// queues are full, waits for room.
    pub fn submit(&self, req: Request, callback: &Callback) {
        match self.shared.start(req, Target::Call(callback), Admission::Block) {
            Started::Now(o) => SessionShared::callback_now(callback, o),
            Started::Later(_) => {}
            Started::WouldBlock(..) => unreachable!("blocking submit gave up"),
        }
    }

    /// Like [`Session::submit`], but when the driver finishes the request before this call
    /// returns (a synchronous driver such as `soft`, with [`Flags::CALLBACK_IMMEDIATE`]),
    /// the outcome comes back here instead of through `callback`: the caller finishes its
    /// work with the state it already holds, with no indirect call and no finding that
    /// state again (the IPsec core's packet path; measured there). `None`: the request
    /// went on asynchronously, and `callback` gets the outcome as with `submit`.
    pub fn submit_or_finish(&self, req: Request, callback: &Callback) -> Option<Outcome> {
        match self.shared.start(req, Target::Call(callback), Admission::Block) {
            Started::Now(o) => Some(SessionShared::returned_now(o)),
            Started::Later(_) => None,
            Started::WouldBlock(..) => unreachable!("blocking submit gave up"),
        }
    }

    /// Like [`Session::submit`], but if the driver's queues are full the request comes
    /// straight back as [`Error::WouldBlock`] (counted), untouched, instead of waiting.
    pub fn try_submit(&self, req: Request, callback: &Callback) -> Result<(), Failed> {
        match self.shared.start(req, Target::Call(callback), Admission::Try) {
            Started::Now(o) => {
                SessionShared::callback_now(callback, o);
                Ok(())
            }
            Started::Later(_) => Ok(()),
            Started::WouldBlock(req) => {
                self.shared.count_error(ErrorKind::WouldBlock);
                Err(Failed::new(Error::WouldBlock, req))
            }
        }
    }

    /// Queues many requests for the dispatch worker in one call (each is marked
    /// [`Flags::BATCH`]); the driver receives them with the hint that more follow.
    /// `callback` gets each outcome, as with [`Session::submit`].
    pub fn submit_batch(&self, reqs: impl IntoIterator<Item = Request>, callback: &Callback) {
        let s = &self.shared;
        let mut queued = Vec::new();
        let mut workers = None;
        for mut req in reqs {
            req.flags = req.flags | Flags::BATCH;
            match s.start_queued(req, Target::Call(callback)) {
                Ok((binding, req)) => {
                    workers.get_or_insert_with(|| binding.core.workers.clone());
                    queued.push(Work::Request(s.clone(), binding, req));
                }
                Err(Started::Now(o)) => SessionShared::callback_now(callback, o),
                Err(_) => {}
            }
        }
        if let Some(workers) = workers {
            workers.dispatch().push_all(queued);
        }
    }

    /// Processes a request; the future resolves to its outcome. If the driver's queues
    /// are full, the future waits for room.
    pub fn submit_async(&self, req: Request) -> RequestFuture {
        match self.shared.start(req, Target::Wait, Admission::Try) {
            Started::Now(o) => RequestFuture::ready(o),
            Started::Later(Some(w)) => RequestFuture::waiting(w),
            Started::Later(None) => unreachable!("wait target without a waiter"),
            Started::WouldBlock(req) => RequestFuture::admitting(self.shared.clone(), req),
        }
    }

    /// This session's counters (over every driver it was bound to).
    pub fn stats(&self) -> SessionStats {
        let mut s = SessionStats::default();
        for c in self.shared.history.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            let c = c.snapshot();
            s.ops += c.ops;
            s.bytes += c.bytes;
            s.errors.add(&c.errors);
        }
        s
    }

    /// The name of the session's first driver: the one it is pinned to, or, for a session
    /// routed per request, the best by [`crate::Priority`] (see [`Session::drivers`]).
    pub fn driver_name(&self) -> String {
        self.shared.route_names().into_iter().next().unwrap_or_default()
    }

    /// Every driver that may serve this session's requests now, the first best by
    /// [`crate::Priority`]: one for a pinned session, every capable registered driver for
    /// a session routed per request.
    pub fn drivers(&self) -> Vec<String> {
        self.shared.route_names()
    }

    /// The session's parameters.
    pub fn params(&self) -> &SessionParams {
        &self.shared.params
    }

    /// A framework-unique session id.
    pub fn id(&self) -> u64 {
        self.shared.id
    }
}

impl Admit for SessionShared {
    fn credits(&self) -> Arc<Credits> {
        // The first route's: a future that waits for a credit waits for the best driver.
        match self.routes.load().routes.first() {
            Some(r) => r.entry.credits.clone(),
            None => Arc::new(Credits::new(1)),
        }
    }

    /// A future's second try, once it holds a credit.
    fn start_with_credit(self: Arc<Self>, mut req: Request, credit: Arc<Credits>) -> RequestFuture {
        req.trip_mut().credit = Some(credit);
        Session { shared: self }.submit_async(req)
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.shared.id)
            .field("drivers", &self.shared.route_names())
            .field("mode", &self.shared.params.mode.name())
            .finish()
    }
}
