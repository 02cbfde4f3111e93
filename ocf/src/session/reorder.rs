//! Ordered completion for sessions opened with `ordered`: results are released in submit
//! order, whichever thread or driver finishes them. Generic over what travels with each
//! result (a session's: the core of the binding that finished it, `parts::SessionReorder`),
//! so this module needs nothing else of the session.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::request::Outcome;

/// Ordered completion: results are released in submit order. Whoever completes the next
/// expected request releases it and every later one already done; the others park theirs
/// here. Results are released outside the lock, so a callback may submit on the same
/// session.
pub(crate) struct Reorder<T> {
    next_seq: AtomicU64,
    state: Mutex<ReorderState<T>>,
}

struct ReorderState<T> {
    next: u64,
    done: BTreeMap<u64, (T, Outcome)>,
    releasing: bool,
}

impl<T> Reorder<T> {
    pub(crate) fn new() -> Reorder<T> {
        let state = ReorderState { next: 0, done: BTreeMap::new(), releasing: false };
        Reorder { next_seq: AtomicU64::new(0), state: Mutex::new(state) }
    }

    pub(super) fn take_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Parks result `seq` with `with`, then, unless another thread is releasing, hands every
    /// result now in order to `release`, outside the lock.
    pub(super) fn release(&self, seq: u64, with: T, outcome: Outcome, release: impl Fn(T, Outcome)) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.done.insert(seq, (with, outcome));
        if st.releasing {
            return;
        }
        st.releasing = true;
        loop {
            let next = st.next;
            let Some((with, outcome)) = st.done.remove(&next) else { break };
            st.next += 1;
            drop(st);
            release(with, outcome);
            st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        }
        st.releasing = false;
    }
}
