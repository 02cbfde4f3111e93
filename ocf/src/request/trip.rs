//! What the framework keeps in a request while it travels ([`Trip`]), and where its
//! outcome goes ([`Notify`]: back up the stack, a [`Waiter`], or a [`Callback`]).
//!
//! Part of the request module because the types are mutually recursive: a request carries
//! its completion target, and the target takes the request's outcome. The credit it may
//! hold is flow control's (`crate::credits`); the stamps are the profiler's.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use crate::credits::Credits;
use crate::profile::{StageProfile, Stamps};
use crate::request::Outcome;

/// What the framework keeps in a request while it travels.
#[derive(Default)]
pub(crate) struct Trip {
    /// Where the outcome goes.
    pub(crate) notify: Notify,
    /// The flow-control credit this request holds, if it can wait in a queue.
    pub(crate) credit: Option<Arc<Credits>>,
    /// Submit order, for sessions with ordered completion.
    pub(crate) seq: u64,
    /// Whether this request is one of the profiled samples, its timestamps, and the
    /// profile of the driver they are recorded in.
    pub(crate) profiled: bool,
    pub(crate) stamps: Stamps,
    pub(crate) profile: Option<Arc<StageProfile>>,
    /// What routing needs to know about this request on its way back.
    pub(crate) route: RouteTrip,
    /// The binding (its id) that took the first part of the multi-part message in progress
    /// in this request: the later parts go there. 0: none.
    pub(crate) message: u64,
}

/// A routed request's travel state (see `crate::routing`): set when a policy chose its
/// driver among several, read when it completes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RouteTrip {
    /// A policy chose the driver among several.
    pub(crate) decided: bool,
    /// Measure its completion time for the model.
    pub(crate) timed: bool,
    /// The model's prediction for it (ns), added to its driver's backlog while it is there.
    pub(crate) cost_ns: u64,
    /// When it was offered to the driver (clock ticks; 0: not timed).
    pub(crate) start: u64,
    /// The driver's backlog when it was offered (ns): the part of its time spent waiting.
    pub(crate) wait_ns: u64,
    /// Its cost is in the driver's backlog.
    pub(crate) in_backlog: bool,
    /// It is counted in the driver's active requests.
    pub(crate) active: bool,
    /// It failed on a driver's fault once and was offered to another driver.
    pub(crate) redone: bool,
    /// 0, or the length of the run it was routed in: its time teaches the model's cells
    /// for runs of that length.
    pub(crate) run_len: usize,
}

/// A completion callback, shared by many requests (typically one per client, like
/// `esp_input_cb` in Fast IPsec); per-request state travels in [`crate::RequestFields::user`]
/// or in the request's buffers.
pub type Callback = Arc<dyn Fn(Outcome) + Send + Sync>;

/// Where a request's outcome goes when a driver completes it asynchronously.
#[derive(Default)]
pub(crate) enum Notify {
    /// The submitter receives the outcome as `process`'s return value (synchronous drivers).
    #[default]
    Return,
    /// Someone blocks on, or polls, a waiter.
    Waiter(Arc<Waiter>),
    /// A callback runs.
    Callback(Callback),
}

/// A one-shot slot for an outcome, with a condition variable for blocking waiters and a
/// waker for futures.
#[derive(Default)]
pub(crate) struct Waiter {
    slot: Mutex<Slot>,
    ready: Condvar,
}

#[derive(Default)]
struct Slot {
    outcome: Option<Outcome>,
    waker: Option<Waker>,
    /// A thread blocks in `wait`: only then does `complete` notify the condition variable
    /// (std's notify is a futex wake syscall even with no waiter: 21% of an asynchronous
    /// driver's 1 KiB AES-CBC request answered Done to `Session::run`, ocf-mb's lone path).
    blocked: bool,
}

impl Waiter {
    pub(crate) fn complete(&self, outcome: Outcome) {
        let (waker, blocked) = {
            let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
            slot.outcome = Some(outcome);
            (slot.waker.take(), slot.blocked)
        };
        // `blocked` is set and the outcome checked under the same lock, so a waiter that
        // was not blocked then sees the outcome before it would block.
        if blocked {
            self.ready.notify_all();
        }
        if let Some(w) = waker {
            w.wake();
        }
    }

    pub(crate) fn wait(&self) -> Outcome {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(o) = slot.outcome.take() {
                slot.blocked = false;
                return o;
            }
            slot.blocked = true;
            slot = self.ready.wait(slot).unwrap_or_else(PoisonError::into_inner);
        }
    }

    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<Outcome> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.outcome.take() {
            Some(o) => Poll::Ready(o),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
