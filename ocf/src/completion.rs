//! How a finished request reaches its submitter: three ways, one path.
//!
//! Every completion — synchronous or from a driver's completion context — goes through
//! the session's accounting (`crate::session::complete`) and then to the request's
//! `Notify` target (`crate::request`'s travel state):
//! - a **callback** ([`Callback`]), run with the outcome;
//! - a **blocking wait** ([`crate::Session::run`]);
//! - a **future** ([`RequestFuture`]) for async code.
//!
//! For drivers that complete inside `process` (the soft driver: FreeBSD's CRYPTOCAP_F_SYNC)
//! the outcome comes straight back up the call stack and none of the machinery here is
//! touched: no allocation, no lock, no atomic. Only requests that a driver completes later
//! use a `Waiter`, whose mutex also makes sure a result that arrives before the caller
//! starts waiting is never missed (the paper's "done" flag).
//!
//! This module knows sessions only through `Admit`, which a future that waits for a
//! flow-control credit uses to submit its request once it has one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::credits::Credits;
use crate::request::{Outcome, Request, Waiter};

pub use crate::request::Callback;

/// How a future whose driver's queues were full gets its request in (implemented by the
/// session).
pub(crate) trait Admit: Send + Sync {
    /// The credits the future waits on.
    fn credits(&self) -> Arc<Credits>;
    /// Submits the request, which now holds a credit.
    fn start_with_credit(self: Arc<Self>, req: Request, credit: Arc<Credits>) -> RequestFuture;
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
    Admitting(Arc<dyn Admit>, Option<Request>),
}

impl RequestFuture {
    pub(crate) fn ready(outcome: Outcome) -> RequestFuture {
        RequestFuture { state: FutureState::Ready(Some(outcome)) }
    }

    pub(crate) fn waiting(w: Arc<Waiter>) -> RequestFuture {
        RequestFuture { state: FutureState::Waiting(w) }
    }

    pub(crate) fn admitting(session: Arc<dyn Admit>, req: Request) -> RequestFuture {
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
                            let next = session.clone().start_with_credit(req, credit);
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
