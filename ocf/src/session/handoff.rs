//! Completions handed to the return workers, which run their callbacks: one at a time
//! ([`to_return_worker`]), or, on the dispatch worker, collected while it works through a
//! batch and handed over together ([`collecting`]): one lock and at most one wake-up per
//! return queue per batch, instead of one per request.

use std::sync::Arc;

use super::parts::{Completion, Workers};

thread_local! {
    /// Completions collected on this thread while `collecting` runs, with their queues.
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
