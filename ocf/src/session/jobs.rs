//! What the framework's threads do (`crate::dispatch` holds the threads and queues
//! themselves): the dispatch worker offers queued requests to their sessions' drivers
//! ([`Work`]), return workers run callbacks ([`Completion`]). Completions bound for return
//! workers are collected over a batch (`handoff`).

use std::collections::VecDeque;

use crate::dispatch::{survived, Jobs};
use crate::error::ErrorKind;

use super::handoff::collecting;
use super::parts::{Completion, DriverEntry, SessionCore, SessionJobs, Work};
use super::SessionShared;

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
