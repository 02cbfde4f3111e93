//! The submit path: from a client's call to the driver's `process` and back. The direct
//! path for a synchronous driver with a waiting caller or an immediate callback is: load
//! the session's binding → `check` (the session's request rules) → driver `process` →
//! account → hand back: a handful of comparisons, one indirect call and two relaxed atomic
//! adds; nothing is allocated, locked or handed to another thread. Everything else —
//! credits, completion targets, batching, Busy and blocked drivers, rebinding — is set up
//! only when the route needs it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use arc_swap::Guard;

use crate::completion::Callback;
use crate::credits::{give_back, Admission};
use crate::dispatch::Refused;
use crate::driver::{Hint, Processed};
use crate::error::Error;
use crate::profile;
use crate::request::{Failed, Flags, Notify, Outcome, Request, Waiter};

use super::binding::Binding;
use super::complete::{request_mut, SessionCore};
use super::jobs::{Held, Work};
use super::SessionShared;

/// What came of starting a request.
pub(super) enum Started {
    /// Finished; the submitter delivers the outcome.
    Now(Outcome),
    /// On its way; it will reach its waiter (returned here if one was made) or callback.
    Later(Option<Arc<Waiter>>),
    /// No credit and the caller would not wait.
    WouldBlock(Request),
}

/// Who takes the outcome.
#[derive(Clone, Copy)]
pub(super) enum Target<'a> {
    Wait,
    Call(&'a Callback),
}

impl SessionShared {
    /// The submit path. Sets up where the outcome goes, then either queues the request
    /// (batch) or offers it to the driver directly.
    #[inline]
    pub(super) fn start(self: &Arc<Self>, req: Request, target: Target<'_>, how: Admission) -> Started {
        let b = self.binding.load();
        let (req, waiter) = match self.prepare(&b, req, target, how) {
            Ok(r) => r,
            Err(started) => return started,
        };
        if req.flags.contains(Flags::BATCH) {
            b.core.workers.dispatch().push(Work::Request(self.clone(), req));
            return Started::Later(waiter);
        }
        match self.offer(b, req, Hint::default(), false, Some((target, how))) {
            Offered::Now(o) => {
                if let (Target::Wait, Some(stamps)) = (target, profiled(&o)) {
                    // A waiting caller on the fast path: its only stages are dispatch and
                    // invoke.
                    self.binding.load().entry.profile.record_request(&stamps, 0);
                }
                Started::Now(o)
            }
            Offered::Later(w) => Started::Later(waiter.or(w)),
            Offered::WouldBlock(r) => Started::WouldBlock(r),
        }
    }

    /// Everything before the request meets a driver: credit (if it may wait anywhere),
    /// completion target, request rules, order, profiling. `Err` is a finished start: a
    /// request that failed its checks, or one without a credit.
    #[inline]
    pub(super) fn prepare(
        &self,
        b: &Binding,
        mut req: Request,
        target: Target<'_>,
        how: Admission,
    ) -> Result<(Request, Option<Arc<Waiter>>), Started> {
        let immediate = match target {
            Target::Wait => true,
            Target::Call(_) => req.flags.contains(Flags::CALLBACK_IMMEDIATE),
        };
        // The fast path: the outcome comes straight back up the stack, so the request can
        // never wait anywhere and needs neither a credit nor a completion target.
        let returns_now =
            b.synchronous && immediate && self.order.is_none() && !req.flags.contains(Flags::BATCH);
        let mut waiter = None;
        if !returns_now {
            if req.trip().credit.is_none() {
                match b.entry.credits.take(how) {
                    Some(c) => req.trip_mut().credit = Some(c),
                    None => return Err(Started::WouldBlock(req)),
                }
            }
            waiter = set_target(&mut req, target);
            if let Some(order) = &self.order {
                req.trip_mut().seq = order.take_seq();
            }
        }
        // Decided afresh for every submission: a reused request must not stay sampled.
        let sampled = self.profile_every != 0 && profile::sample(self.profile_every);
        let trip = req.trip_mut();
        trip.profiled = sampled;
        if sampled {
            trip.stamps = profile::Stamps { submit: profile::now(), ..Default::default() };
        }
        if let Err(e) = self.rules.check(&req) {
            return Err(finish_failed(&b.core, e, req, waiter));
        }
        req.set_tag_len(self.rules.tag_len);
        Ok((req, waiter))
    }

    /// Offers a request to the session's driver: rebinds if the driver is gone, parks it
    /// if the driver is blocked, retries a Busy that raced an unblock. `convert` is how
    /// a request on the fast path (no credit, no target) gets them if it must wait after
    /// all; `None` for requests that have them.
    fn offer(
        self: &Arc<Self>,
        mut b: Guard<Arc<Binding>>,
        mut req: Request,
        hint: Hint,
        front: bool,
        convert: Option<(Target<'_>, Admission)>,
    ) -> Offered {
        let mut waiter = None;
        loop {
            if b.entry.is_gone() {
                match self.rebind(&b) {
                    Some(nb) => {
                        b = nb;
                        continue;
                    }
                    None => {
                        return match finish_failed(&b.core, Error::DriverGone, req, waiter.take()) {
                            Started::Now(o) => Offered::Now(o),
                            Started::Later(w) => Offered::Later(w),
                            Started::WouldBlock(r) => Offered::WouldBlock(r),
                        };
                    }
                }
            }
            let flow = &b.entry.flow;
            if flow.is_blocked() {
                req = match ready_to_wait(req, convert, &b, &mut waiter) {
                    Ok(r) => r,
                    Err(r) => return Offered::WouldBlock(r),
                };
                match flow.hold(req, |req| Held { session: self.clone(), req }) {
                    Ok(()) => return Offered::Later(waiter),
                    Err(r) => {
                        req = r;
                        continue;
                    }
                }
            }
            let Some(ds) = b.driver_session.as_ref() else {
                unreachable!("a bound session always has its driver session")
            };
            let generation = flow.generation();
            if req.trip().profiled {
                req.trip_mut().stamps.dispatch = profile::now();
            }
            match ds.process(req, hint) {
                Processed::Done(outcome) => {
                    return match SessionCore::complete(&b.core, outcome) {
                        Some(o) => Offered::Now(o),
                        None => Offered::Later(waiter),
                    };
                }
                Processed::Pending => {
                    if b.synchronous {
                        // The driver broke its promise; if the request was on the fast
                        // path nobody will see it again.
                        return Offered::Now(broken_sync_contract(&b.core));
                    }
                    return Offered::Later(waiter);
                }
                Processed::Busy(r) => {
                    req = match ready_to_wait(r, convert, &b, &mut waiter) {
                        Ok(r) => r,
                        Err(r) => {
                            flow.restarts.fetch_add(1, Ordering::Relaxed);
                            return Offered::WouldBlock(r);
                        }
                    };
                    match flow.refused(req, |req| Held { session: self.clone(), req }, generation, front) {
                        Refused::Held => return Offered::Later(waiter),
                        Refused::Retry(r) => req = r,
                    }
                }
            }
        }
    }

    /// The dispatch worker's entry: a queued request (batched, resumed or moved).
    pub(crate) fn dispatch_queued(this: &Arc<SessionShared>, req: Request, more: bool, front: bool) {
        match this.offer(this.binding.load(), req, Hint { more }, front, None) {
            Offered::Now(mut o) => {
                // Queued requests always have a completion target; keep the accounting
                // honest if one slipped through.
                give_back(request_mut(&mut o).trip_mut().credit.take());
            }
            Offered::Later(_) | Offered::WouldBlock(_) => {}
        }
    }

    /// The bookkeeping of a callback for an outcome handed straight back to the submitter
    /// instead ([`Session::submit_or_finish`]): the credit goes back, and a profiled
    /// request's callback stage ends now.
    pub(super) fn returned_now(&self, mut outcome: Outcome) -> Outcome {
        let trip = request_mut(&mut outcome).trip_mut();
        give_back(trip.credit.take());
        if trip.profiled {
            trip.stamps.callback = profile::now();
            let stamps = trip.stamps;
            self.binding.load().core.entry.profile.record_request(&stamps, profile::now());
        }
        outcome
    }

    /// Runs a callback for an outcome the submitter got back directly.
    pub(super) fn callback_now(&self, callback: &Callback, outcome: Outcome) {
        let b = self.binding.load();
        SessionCore::run_callback(&b.core, callback, outcome);
    }
}

/// What came of offering a request to a driver.
enum Offered {
    Now(Outcome),
    Later(Option<Arc<Waiter>>),
    WouldBlock(Request),
}

/// Gives a request the completion target for `target`; returns the waiter if one was made.
fn set_target(req: &mut Request, target: Target<'_>) -> Option<Arc<Waiter>> {
    match target {
        Target::Wait => {
            let w = Arc::new(Waiter::default());
            req.trip_mut().notify = Notify::Waiter(w.clone());
            Some(w)
        }
        Target::Call(cb) => {
            req.trip_mut().notify = Notify::Callback(cb.clone());
            None
        }
    }
}

/// A request on the fast path must wait after all (its driver is Busy, blocked or gone):
/// give it a credit and a completion target.
fn ready_to_wait(
    mut req: Request,
    convert: Option<(Target<'_>, Admission)>,
    b: &Binding,
    waiter: &mut Option<Arc<Waiter>>,
) -> Result<Request, Request> {
    let Some((target, how)) = convert else { return Ok(req) };
    if !matches!(req.trip().notify, Notify::Return) {
        return Ok(req);
    }
    if req.trip().credit.is_none() {
        match b.entry.credits.take(how) {
            Some(c) => req.trip_mut().credit = Some(c),
            None => return Err(req),
        }
    }
    *waiter = set_target(&mut req, target);
    Ok(req)
}

/// The stamps of a profiled request.
fn profiled(outcome: &Outcome) -> Option<profile::Stamps> {
    let req = match outcome {
        Ok(r) => r,
        Err(f) => &f.request,
    };
    req.trip().profiled.then_some(req.trip().stamps)
}

/// Fails a request before it reached a driver, through the normal completion path.
fn finish_failed(core: &Arc<SessionCore>, e: Error, req: Request, waiter: Option<Arc<Waiter>>) -> Started {
    match SessionCore::complete(core, Err(Failed::new(e, req))) {
        Some(o) => Started::Now(o),
        None => Started::Later(waiter),
    }
}

/// A driver that declared itself synchronous answered Pending: its bug, not the caller's.
/// The request is with the driver, so the caller gets the error with an empty request
/// instead of its buffers; the driver's late completion, if any, is counted as a driver
/// failure. Our drivers' tests make sure this never happens.
#[cold]
fn broken_sync_contract(core: &SessionCore) -> Outcome {
    let error = Error::DriverFailure("a synchronous driver left a request pending");
    core.count_error(error.kind());
    Err(Failed::new(error, Request::new(crate::Op::Encrypt, Vec::new())))
}
