//! What the framework's threads do (`crate::dispatch` holds the threads and queues
//! themselves): the dispatch worker offers queued requests to their sessions' drivers
//! ([`Work`]), return workers run callbacks ([`Completion`]), and completions bound for
//! return workers are collected over a batch and handed over together ([`collecting`]).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::dispatch::{self, survived, Jobs};
use crate::error::ErrorKind;
use crate::request::{Outcome, Request};

use super::binding::{Binding, DriverEntry};
use super::complete::SessionCore;
use super::SessionShared;

/// The framework's threads, running sessions' work.
pub(crate) type Workers = dispatch::Workers<SessionJobs>;

/// Work for the dispatch worker.
pub(crate) enum Work {
    /// A batchable request (or one moved from a detached driver's held queue), with the
    /// binding it was routed to.
    Request(Arc<SessionShared>, Arc<Binding>, Request),
    /// A driver was unblocked: hand it its held requests.
    Resume(Arc<DriverEntry>),
}

/// A completed request whose callback runs on a return worker.
pub(crate) struct Completion {
    pub(crate) core: Arc<SessionCore>,
    pub(crate) outcome: Outcome,
}

/// A request waiting for its blocked driver (in the driver's `Flow`).
pub(crate) struct Held {
    pub(crate) session: Arc<SessionShared>,
    pub(crate) binding: Arc<Binding>,
    pub(crate) req: Request,
}

/// The jobs of the framework's threads.
pub(crate) struct SessionJobs;

impl Jobs for SessionJobs {
    type Work = Work;
    type Done = Completion;

    fn dispatch(batch: &mut VecDeque<Work>) {
        collecting(|| {
            while let Some(work) = batch.pop_front() {
                match work {
                    Work::Request(session, binding, req) => {
                        // "More follow" is per driver: only if the next request goes to the
                        // same one, so a device never waits for a follow-up that is not
                        // coming.
                        let more = match batch.front() {
                            Some(Work::Request(_, next, _)) => SessionShared::same_driver(&binding, next),
                            _ => false,
                        };
                        if !survived(|| SessionShared::dispatch_queued(&session, &binding, req, more, false))
                        {
                            binding.core.count_error(ErrorKind::CallbackPanicked);
                        }
                    }
                    Work::Resume(entry) => {
                        if !survived(|| resume(&entry)) {
                            entry.counters.errors.record(ErrorKind::CallbackPanicked);
                        }
                    }
                }
            }
        });
    }

    fn complete(c: Completion) {
        let Completion { core, outcome } = c;
        if !survived(|| SessionCore::run_queued_callback(outcome)) {
            core.count_error(ErrorKind::CallbackPanicked);
        }
    }
}

/// Hands an unblocked driver its held requests, oldest first, until it is empty or the
/// driver is blocked again.
fn resume(entry: &DriverEntry) {
    while let Some((held, more)) = entry.flow.next_held() {
        SessionShared::dispatch_queued(&held.session, &held.binding, held.req, more, true);
    }
}

thread_local! {
    /// On the dispatch worker, completions for return workers are collected here while it
    /// works through a batch and handed over together: one lock and at most one wake-up
    /// per return queue per batch, instead of one per request.
    static DEFERRED: std::cell::RefCell<Option<Vec<(usize, Completion)>>> =
        const { std::cell::RefCell::new(None) };
}

/// Queues a completion for return worker `queue`, deferred if this thread collects them.
pub(crate) fn to_return_worker(workers: &Workers, queue: usize, c: Completion) {
    let c = DEFERRED.with(|d| match d.borrow_mut().as_mut() {
        Some(v) => {
            v.push((queue, c));
            None
        }
        None => Some(c),
    });
    if let Some(c) = c {
        workers.returns(queue).push(c);
    }
}

/// Hands the collected completions to their return workers: each run of completions for
/// the same return queue in one push (usually the whole batch is one run).
fn flush_deferred(batch: &mut Vec<(usize, Completion)>) {
    let mut items = batch.drain(..).peekable();
    while let Some((q, first)) = items.next() {
        let workers = first.core.workers.clone();
        let mut run = vec![first];
        while let Some((nq, next)) =
            items.next_if(|(nq, c)| *nq == q && Arc::ptr_eq(&c.core.workers, &workers))
        {
            let _ = nq;
            run.push(next);
        }
        workers.returns(q).push_all(run);
    }
}

/// Runs `f` with completions for return workers collected, then hands them over together
/// (also if `f` panics: a panicking callback must not strand the others). Nested calls join
/// the outer collection.
pub(crate) fn collecting<R>(f: impl FnOnce() -> R) -> R {
    struct Flush(bool);
    impl Drop for Flush {
        fn drop(&mut self) {
            if self.0 {
                if let Some(mut v) = DEFERRED.with(|d| d.borrow_mut().take()) {
                    flush_deferred(&mut v);
                }
            }
        }
    }
    let outer = DEFERRED.with(|d| {
        let mut d = d.borrow_mut();
        if d.is_some() {
            true
        } else {
            *d = Some(Vec::new());
            false
        }
    });
    let _flush = Flush(!outer);
    f()
}
