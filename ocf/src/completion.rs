//! How a finished request reaches its submitter: three ways, one path.
//!
//! Every completion — synchronous or from a driver's completion context — goes through
//! `crate::session`'s accounting and then to the request's `Notify` target:
//! - a **callback** ([`Callback`]), run with the outcome;
//! - a **blocking wait** ([`crate::Session::run`]);
//! - a **future** ([`RequestFuture`]) for async code.
//!
//! For drivers that complete inside `process` (the soft driver: FreeBSD's CRYPTOCAP_F_SYNC)
//! the outcome comes straight back up the call stack and none of the machinery here is
//! touched: no allocation, no lock, no atomic. Only requests that a driver completes later
//! use a `Waiter`, whose mutex also makes sure a result that arrives before the caller
//! starts waiting is never missed (the paper's "done" flag).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use crate::request::Outcome;

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
}

impl Waiter {
    pub(crate) fn complete(&self, outcome: Outcome) {
        let waker = {
            let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
            slot.outcome = Some(outcome);
            slot.waker.take()
        };
        self.ready.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }

    pub(crate) fn wait(&self) -> Outcome {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(o) = slot.outcome.take() {
                return o;
            }
            slot = self.ready.wait(slot).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn poll(&self, cx: &mut Context<'_>) -> Poll<Outcome> {
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

/// The future of a submitted request ([`crate::Session::submit_async`]).
#[must_use = "futures do nothing unless polled; the request's buffers come back through it"]
pub struct RequestFuture {
    state: FutureState,
}

enum FutureState {
    Ready(Option<Outcome>),
    Waiting(Arc<Waiter>),
    /// The driver's queues were full: waiting for a flow-control credit, then submitting.
    Admitting(crate::Session, Option<crate::Request>),
}

impl RequestFuture {
    pub(crate) fn ready(outcome: Outcome) -> RequestFuture {
        RequestFuture { state: FutureState::Ready(Some(outcome)) }
    }

    pub(crate) fn waiting(w: Arc<Waiter>) -> RequestFuture {
        RequestFuture { state: FutureState::Waiting(w) }
    }

    pub(crate) fn admitting(session: crate::Session, req: crate::Request) -> RequestFuture {
        RequestFuture { state: FutureState::Admitting(session, Some(req)) }
    }
}

impl Future for RequestFuture {
    type Output = Outcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        match &mut self.state {
            FutureState::Ready(o) => match o.take() {
                Some(o) => Poll::Ready(o),
                // Polled again after completion: a contract violation by the executor;
                // staying pending is the harmless answer.
                None => Poll::Pending,
            },
            FutureState::Waiting(w) => w.poll(cx),
            FutureState::Admitting(session, req) => {
                let credits = session.credits();
                match credits.poll_take(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(credit) => match req.take() {
                        Some(req) => {
                            let next = session.start_with_credit(req, credit);
                            self.state = next.state;
                            self.poll(cx)
                        }
                        None => {
                            credit.give_back();
                            Poll::Pending
                        }
                    },
                }
            }
        }
    }
}
