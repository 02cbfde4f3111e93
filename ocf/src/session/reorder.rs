//! Ordered completion for sessions opened with `ordered`: results are released in submit
//! order, whichever thread or driver finishes them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::request::Outcome;

use super::complete::SessionCore;

/// Ordered completion: results are released in submit order. Whoever completes the next
/// expected request releases it and every later one already done; the others park theirs
/// here. Callbacks run outside the lock, so a callback may submit on the same session.
pub(crate) struct Reorder {
    next_seq: AtomicU64,
    state: Mutex<ReorderState>,
}

#[derive(Default)]
struct ReorderState {
    next: u64,
    done: BTreeMap<u64, (Arc<SessionCore>, Outcome)>,
    releasing: bool,
}

impl Reorder {
    pub(crate) fn new() -> Reorder {
        Reorder { next_seq: AtomicU64::new(0), state: Mutex::new(ReorderState::default()) }
    }

    pub(super) fn take_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn release(&self, core: &Arc<SessionCore>, seq: u64, outcome: Outcome) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.done.insert(seq, (core.clone(), outcome));
        if st.releasing {
            return;
        }
        st.releasing = true;
        loop {
            let next = st.next;
            let Some((core, outcome)) = st.done.remove(&next) else { break };
            st.next += 1;
            drop(st);
            SessionCore::release(&core, outcome);
            st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        }
        st.releasing = false;
    }
}
