//! Sessions: a validated set of parameters bound to one driver, and the request path.
//!
//! The request path (direct dispatch, immediate completion) is:
//! `check` (the session's request rules) → driver `process` → account → deliver.
//! For a synchronous driver that is a handful of comparisons, one indirect call and two
//! relaxed atomic adds; nothing is allocated, locked or handed to another thread.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::completion::{Callback, Notify, RequestFuture, Waiter};
use crate::driver::{DriverSession, Hint, Processed};
use crate::error::{Error, ErrorCounters, ErrorCounts, ErrorKind};
use crate::framework::DriverEntry;
use crate::params::SessionParams;
use crate::request::{Failed, Outcome, Request, RequestRules};

/// Counters of one session.
#[derive(Default)]
pub(crate) struct SessionCounters {
    pub(crate) ops: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) errors: ErrorCounters,
}

/// Counters of one driver: its own error counters, the totals of freed sessions, and the
/// live sessions' counters (summed when read, so the request path updates only the
/// session's counters).
#[derive(Default)]
pub(crate) struct DriverCounters {
    pub(crate) errors: ErrorCounters,
    pub(crate) retired_ops: AtomicU64,
    pub(crate) retired_bytes: AtomicU64,
    pub(crate) sessions_created: AtomicU64,
    pub(crate) live: Mutex<Vec<(u64, Arc<SessionCounters>)>>,
}

impl DriverCounters {
    pub(crate) fn live_sessions(&self) -> usize {
        self.live.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// What both the session handle and the driver's [`crate::SessionContext`] need: where to
/// count, and how to deliver.
pub(crate) struct SessionCore {
    pub(crate) counters: Arc<SessionCounters>,
    pub(crate) driver: Arc<DriverCounters>,
}

impl SessionCore {
    #[inline]
    fn account(&self, outcome: &Outcome) {
        match outcome {
            Ok(req) => {
                self.counters.ops.fetch_add(1, Ordering::Relaxed);
                self.counters.bytes.fetch_add(req.payload_range().len() as u64, Ordering::Relaxed);
            }
            Err(f) => self.count_error(f.error().kind()),
        }
    }

    fn count_error(&self, kind: ErrorKind) {
        self.counters.errors.record(kind);
        self.driver.errors.record(kind);
    }

    fn fail(&self, error: Error, request: Request) -> Outcome {
        self.count_error(error.kind());
        Err(Failed::new(error, request))
    }

    /// The driver has room again after a Busy (FreeBSD's `crypto_unblock`).
    pub(crate) fn unblock(&self) {
        // Until the dispatch layer queues Busy requests, there is nothing to resume.
    }

    /// The asynchronous completion path (FreeBSD's `crypto_done`).
    pub(crate) fn deliver(&self, mut outcome: Outcome) {
        self.account(&outcome);
        let req = match &mut outcome {
            Ok(r) => r,
            Err(f) => &mut f.request,
        };
        match std::mem::replace(req.notify_mut(), Notify::Return) {
            Notify::Waiter(w) => w.complete(outcome),
            Notify::Callback(cb) => cb(outcome),
            // A driver that declared itself synchronous completed a request later: nobody
            // is waiting for it. Count the driver's fault; the request is dropped here.
            Notify::Return => self.count_error(ErrorKind::DriverFailure),
        }
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

impl SessionCounters {
    pub(crate) fn snapshot(&self) -> SessionStats {
        SessionStats {
            ops: self.ops.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            errors: self.errors.snapshot(),
        }
    }
}

/// A crypto session: parameters bound to a driver. Cheap to clone (shared), usable from
/// many threads at once. Freed — and its keys wiped, in ocf and in the driver — when the
/// last clone is dropped.
#[derive(Clone)]
pub struct Session {
    shared: Arc<SessionShared>,
}

struct SessionShared {
    id: u64,
    /// The session's own copy of its parameters and keys (wiped on drop).
    params: SessionParams,
    rules: RequestRules,
    entry: Arc<DriverEntry>,
    /// `Some` until the session is freed.
    driver_session: Option<Box<dyn DriverSession>>,
    core: Arc<SessionCore>,
    synchronous: bool,
}

impl Session {
    pub(crate) fn new(
        id: u64,
        params: SessionParams,
        entry: Arc<DriverEntry>,
        driver_session: Box<dyn DriverSession>,
        core: Arc<SessionCore>,
    ) -> Session {
        let rules = RequestRules::new(&params);
        let synchronous = entry.caps.synchronous;
        Session {
            shared: Arc::new(SessionShared {
                id,
                params,
                rules,
                entry,
                driver_session: Some(driver_session),
                core,
                synchronous,
            }),
        }
    }

    /// Processes a request and waits for its outcome (a blocking wait; with a synchronous
    /// driver it returns without ever blocking).
    pub fn run(&self, req: Request) -> Outcome {
        if self.shared.synchronous {
            return match self.dispatch(req, || Notify::Return) {
                Some(o) => o,
                None => broken_sync_contract(&self.shared.core),
            };
        }
        let waiter = Arc::new(Waiter::default());
        match self.dispatch(req, || Notify::Waiter(waiter.clone())) {
            Some(o) => o,
            None => waiter.wait(),
        }
    }

    /// Processes a request and hands the outcome to `callback` (immediately, from this
    /// thread, if the driver finishes synchronously; otherwise from the driver's completion
    /// context).
    pub fn submit(&self, req: Request, callback: &Callback) {
        if let Some(o) = self.dispatch(req, || Notify::Callback(callback.clone())) {
            callback(o)
        }
    }

    /// Processes a request; the future resolves to its outcome.
    pub fn submit_async(&self, req: Request) -> RequestFuture {
        if self.shared.synchronous {
            return match self.dispatch(req, || Notify::Return) {
                Some(o) => RequestFuture::ready(o),
                None => RequestFuture::ready(broken_sync_contract(&self.shared.core)),
            };
        }
        let waiter = Arc::new(Waiter::default());
        match self.dispatch(req, || Notify::Waiter(waiter.clone())) {
            Some(o) => RequestFuture::ready(o),
            None => RequestFuture::waiting(waiter),
        }
    }

    /// The one request path. Returns the outcome if it is known now, `None` if the driver
    /// will deliver it later to the notify target made by `notify`.
    #[inline]
    fn dispatch(&self, mut req: Request, notify: impl FnOnce() -> Notify) -> Option<Outcome> {
        let s = &*self.shared;
        if let Err(e) = s.rules.check(&req) {
            return Some(s.core.fail(e, req));
        }
        if s.entry.is_gone() {
            return Some(s.core.fail(Error::DriverGone, req));
        }
        req.set_tag_len(s.rules.tag_len);
        if !s.synchronous {
            *req.notify_mut() = notify();
        }
        let driver_session = s.driver_session.as_ref()?;
        match driver_session.process(req, Hint::default()) {
            Processed::Done(outcome) => {
                s.core.account(&outcome);
                Some(outcome)
            }
            Processed::Pending => None,
            // Flow control (queueing and unblocking) is the dispatch layer's job; until it
            // lands, Busy goes back to the caller with the request.
            Processed::Busy(req) => Some(s.core.fail(Error::Busy, req)),
        }
    }

    /// This session's counters.
    pub fn stats(&self) -> SessionStats {
        self.shared.core.counters.snapshot()
    }

    /// The name of the driver serving this session.
    pub fn driver_name(&self) -> &str {
        &self.shared.entry.name
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

/// A driver that declared itself synchronous answered Pending: its bug, not the caller's.
/// The request is with the driver, so the caller gets the error with an empty request
/// instead of its buffers; the driver's late completion, if any, is counted as a driver
/// failure in `deliver`. Our drivers' tests make sure this never happens.
#[cold]
fn broken_sync_contract(core: &SessionCore) -> Outcome {
    core.fail(
        Error::DriverFailure("a synchronous driver left a request pending"),
        Request::new(crate::Op::Encrypt, Vec::new()),
    )
}

impl Drop for SessionShared {
    fn drop(&mut self) {
        if let Some(ds) = self.driver_session.take() {
            self.entry.driver.free_session(ds);
        }
        // Move this session's totals into the driver's under the lock that readers take, so
        // a reader never counts them twice or not at all.
        let counters = &self.core.counters;
        let d = &self.core.driver;
        let mut live = d.live.lock().unwrap_or_else(PoisonError::into_inner);
        d.retired_ops.fetch_add(counters.ops.load(Ordering::Relaxed), Ordering::Relaxed);
        d.retired_bytes.fetch_add(counters.bytes.load(Ordering::Relaxed), Ordering::Relaxed);
        live.retain(|(id, _)| *id != self.id);
        // `params` (and its keys) are wiped by `Key`'s ZeroizeOnDrop as the fields drop.
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.shared.id)
            .field("driver", &self.shared.entry.name)
            .field("mode", &self.shared.params.mode.name())
            .finish()
    }
}
