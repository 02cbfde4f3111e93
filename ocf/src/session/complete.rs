//! The return path: every finished request comes through [`SessionCore::complete`]
//! (FreeBSD's `crypto_done`) — counted, stamped, and handed to its waiter or callback, or
//! straight back to the submitter on the direct path. [`SessionCore`] (its fields are in
//! `parts`) is what a binding's requests need on their way back; [`CoreReturnPath`] is the
//! framework's end of a driver's [`crate::SessionContext`].

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};

use crate::completion::Callback;
use crate::credits::{give_back, FrameworkContext};
use crate::driver::ReturnPath;
use crate::error::Error;
use crate::error::ErrorKind;
use crate::profile;
use crate::request::{Failed, Flags, Notify, Outcome, Request, RouteTrip};
use crate::routing::model::Arrival;
use crate::routing::SizeClass;

use super::handoff::{collecting, to_return_worker};
use super::parts::{Completion, SessionCore, Work};

impl Drop for SessionCore {
    /// The binding's last request is finished (its driver session and every request that
    /// went through it hold this core): its counts become the driver's retired totals,
    /// under the lock that readers of driver statistics take, so they never count them
    /// twice or not at all.
    fn drop(&mut self) {
        let d = &self.entry.counters;
        let mut live = d.live.lock().unwrap_or_else(PoisonError::into_inner);
        d.retired_bytes.fetch_add(self.counters.bytes.load(Ordering::Relaxed), Ordering::Relaxed);
        for (retired, ops) in d.retired_ops.iter().zip(&self.counters.ops) {
            retired.fetch_add(ops.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        live.retain(|l| !Arc::ptr_eq(&l.counters, &self.counters));
    }
}

impl SessionCore {
    #[inline]
    fn account(&self, outcome: &Outcome) {
        match outcome {
            Ok(req) => {
                let len = req.payload_range().len();
                self.counters.ops[SizeClass::of(len).index()].fetch_add(1, Ordering::Relaxed);
                self.counters.bytes.fetch_add(len as u64, Ordering::Relaxed);
            }
            Err(f) => self.count_error(f.error().kind()),
        }
    }

    /// `account` for a run's outcomes together: one add per size class present and one
    /// for the bytes, instead of two per request (atomic adds; measured below `run_whole`).
    pub(super) fn account_run(&self, outcomes: &[Outcome]) {
        let (mut ops, mut bytes) = ([0u64; crate::routing::SIZE_CLASSES], 0u64);
        for o in outcomes {
            match o {
                Ok(req) => {
                    let len = req.payload_range().len();
                    ops[SizeClass::of(len).index()] += 1;
                    bytes += len as u64;
                }
                Err(f) => self.count_error(f.error().kind()),
            }
        }
        for (c, n) in self.counters.ops.iter().zip(ops).filter(|(_, n)| *n > 0) {
            c.fetch_add(n, Ordering::Relaxed);
        }
        if bytes > 0 {
            self.counters.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    pub(crate) fn count_error(&self, kind: ErrorKind) {
        self.counters.errors.record(kind);
        self.entry.counters.errors.record(kind);
    }

    /// Every finished request comes through here (FreeBSD's `crypto_done`): it is counted,
    /// stamped, and sent to its target. Returns the outcome if the submitter takes it
    /// straight back (synchronous driver, direct path).
    #[inline]
    pub(crate) fn complete(this: &Arc<SessionCore>, outcome: Outcome) -> Option<Outcome> {
        this.account(&outcome);
        let routed = match &outcome {
            Ok(r) => r.trip().route.decided,
            Err(f) => f.request.trip().route.decided,
        };
        if routed {
            return SessionCore::complete_routed(this, outcome);
        }
        SessionCore::deliver_outcome(this, outcome)
    }

    /// `complete` for a request a policy routed: routing's bookkeeping, and a request its
    /// driver failed goes to another one (kept out of `complete` so that the direct path
    /// never writes the outcome back to memory: measured, see `routes::Pick`).
    #[inline(never)]
    fn complete_routed(this: &Arc<SessionCore>, mut outcome: Outcome) -> Option<Outcome> {
        let route = this.routed_back(&mut outcome);
        if !route.redone && redoable(&outcome) {
            match this.redo(outcome) {
                Ok(()) => return None,
                Err(o) => outcome = o,
            }
            // Still here: if the submitter takes it straight back (the synchronous fast
            // path), it may redo it there (`redoable_here`, which puts the route back to
            // rest when it does not).
            let trip = request_mut(&mut outcome).trip_mut();
            if matches!(trip.notify, Notify::Return) {
                trip.route.decided = true;
            }
        }
        SessionCore::deliver_outcome(this, outcome)
    }

    /// Stamps a finished request and sends it to its target.
    #[inline(always)]
    pub(super) fn deliver_outcome(this: &Arc<SessionCore>, mut outcome: Outcome) -> Option<Outcome> {
        let trip = request_mut(&mut outcome).trip_mut();
        if trip.profiled {
            trip.stamps.done = profile::now();
        }
        if matches!(trip.notify, Notify::Return) {
            return Some(outcome);
        }
        match &this.order {
            Some(order) => {
                let seq = trip.seq;
                order.release(seq, this.clone(), outcome, |core, o| SessionCore::release(&core, o))
            }
            None => SessionCore::release(this, outcome),
        }
        None
    }

    /// A routed request is back: its cost leaves the driver's backlog, its time (if it was
    /// timed) teaches the model, and the driver's health follows its outcome.
    fn routed_back(&self, outcome: &mut Outcome) -> RouteTrip {
        let failed = failed_by_driver(outcome);
        let req = request_mut(outcome);
        let (op, len) = (req.op, req.payload_range().len());
        let route = std::mem::take(&mut req.trip_mut().route);
        let state = &self.entry.routing;
        if route.in_backlog {
            state.backlog_ns.fetch_sub(route.cost_ns, Ordering::Relaxed);
        }
        if route.active {
            state.active.fetch_sub(1, Ordering::Relaxed);
        }
        if route.start == 0 {
            if failed {
                state.failing.store(true, Ordering::Relaxed);
            }
            return route;
        }
        let now = profile::now();
        state.completed(now, failed);
        if !failed && outcome.is_ok() {
            // The time it waited behind the driver's backlog is queueing, which decisions
            // add from the backlog itself; the model learns the rest (at least a quarter).
            let took = profile::elapsed_ns(route.start, now);
            let own = took.saturating_sub(route.wait_ns).max(took / 4);
            let arrival = match route.run_len {
                0 => Arrival::Alone,
                n => Arrival::InRun(n),
            };
            self.model.cell_for(arrival, op, SizeClass::of(len)).learn(own, len);
        }
        route
    }

    /// A routed request that its driver failed by a fault of its own (handed back
    /// unprocessed, as the driver contract says) goes once to the driver the policy picks
    /// now — the failing one is left out — through the dispatch worker. The failure stays
    /// counted at the driver that failed. `Err`: no other driver, or the outcome goes
    /// straight back to its submitter (nobody else could deliver a second outcome).
    fn redo(&self, outcome: Outcome) -> Result<(), Outcome> {
        let Some(session) = self.session.get().and_then(Weak::upgrade) else { return Err(outcome) };
        let (error, mut req) = match outcome {
            Err(f) if !matches!(f.request.trip().notify, Notify::Return) => f.into_parts(),
            other => return Err(other),
        };
        let routes = session.routes();
        // The policy's pick, unless that is this driver again (a timed decision may retry a
        // failing one): then the first other driver that takes the session.
        let chosen = session.choose(&routes, &req).filter(|(b, _)| !Arc::ptr_eq(&b.entry, &self.entry));
        let other = || {
            routes
                .routes
                .iter()
                .filter(|r| !Arc::ptr_eq(&r.entry, &self.entry))
                .find_map(|r| session.binding(r).map(|b| (b, Default::default())))
        };
        let Some((b, pick)) = chosen.or_else(other) else {
            // A random source that failed its health tests says so; other faults say that
            // nobody could redo them.
            let error = match error {
                Error::RandomSourceFailed { .. } => error,
                _ => Error::DriverFailure(REDO_NOWHERE),
            };
            return Err(Err(Failed::new(error, req)));
        };
        req.trip_mut().route = RouteTrip {
            decided: true,
            timed: pick.timed(),
            cost_ns: pick.cost_ns(),
            redone: true,
            ..RouteTrip::default()
        };
        let binding = b.clone();
        drop(routes);
        binding.core.workers.dispatch().push(Work::Request(session, binding.clone(), req));
        Ok(())
    }

    /// Hands a finished request to its waiter or callback (in order, for ordered sessions).
    pub(super) fn release(this: &Arc<SessionCore>, mut outcome: Outcome) {
        let req = request_mut(&mut outcome);
        let immediate = req.flags.contains(Flags::CALLBACK_IMMEDIATE);
        let trip = req.trip_mut();
        match std::mem::take(&mut trip.notify) {
            Notify::Waiter(w) => {
                if trip.profiled {
                    this.entry.profile.record_request(&trip.stamps, 0);
                }
                // The credit goes back before the waiter wakes: a caller whose `run` has
                // returned sees its request out of the driver's in-flight count (read
                // after, it was sometimes still 1 on a loaded machine).
                give_back(trip.credit.take());
                w.complete(outcome);
            }
            Notify::Callback(cb) if immediate => SessionCore::run_callback(&cb, outcome),
            Notify::Callback(cb) => {
                trip.notify = Notify::Callback(cb);
                let core = this.clone();
                let c = Completion { core, outcome };
                to_return_worker(&this.workers, this.return_queue, c);
            }
            // A driver that declared itself synchronous completed a request later: nobody
            // is waiting for it. Count the driver's fault; the request is dropped here.
            Notify::Return => {
                give_back(trip.credit.take());
                this.count_error(ErrorKind::DriverFailure)
            }
        }
    }

    /// Runs a callback here and now, profiling it (in the profile the request carries) and
    /// returning the request's credit.
    #[inline]
    pub(super) fn run_callback(cb: &Callback, mut outcome: Outcome) {
        let trip = request_mut(&mut outcome).trip_mut();
        // As for a waiter, the credit goes back before the callback runs: the driver is
        // done with the request, a callback that sees its result sees it out of the
        // in-flight count, and a callback that submits more (continuation style) never
        // waits on a credit its own request still holds.
        give_back(trip.credit.take());
        let profiled = if trip.profiled {
            trip.stamps.callback = profile::now();
            trip.profile.take().map(|p| (p, trip.stamps))
        } else {
            None
        };
        cb(outcome);
        if let Some((profile, stamps)) = profiled {
            profile.record_request(&stamps, profile::now());
        }
    }

    /// A return worker runs a queued callback.
    pub(crate) fn run_queued_callback(mut outcome: Outcome) {
        match std::mem::take(&mut request_mut(&mut outcome).trip_mut().notify) {
            Notify::Callback(cb) => SessionCore::run_callback(&cb, outcome),
            // Only callbacks are queued.
            _ => give_back(request_mut(&mut outcome).trip_mut().credit.take()),
        }
    }

    /// The asynchronous completion path: a driver's `SessionContext::done`.
    pub(crate) fn deliver(this: &Arc<SessionCore>, outcome: Outcome) {
        let _ctx = FrameworkContext::enter();
        if let Some(mut o) = SessionCore::complete(this, outcome) {
            // A synchronous driver completed a request later: nobody waits for it.
            give_back(request_mut(&mut o).trip_mut().credit.take());
            this.count_error(ErrorKind::DriverFailure);
        }
    }

    /// The driver has room again after a Busy (FreeBSD's `crypto_unblock`).
    pub(crate) fn unblock(&self) {
        if self.entry.flow.unblock() {
            self.workers.dispatch().push(Work::Resume(self.entry.clone()));
        }
    }
}

/// The framework's end of a driver's [`crate::SessionContext`]: one binding's core.
pub(crate) struct CoreReturnPath(pub(crate) Arc<SessionCore>);

impl ReturnPath for CoreReturnPath {
    fn done(&self, outcome: Outcome) {
        SessionCore::deliver(&self.0, outcome)
    }

    fn unblock(&self) {
        self.0.unblock()
    }

    fn collecting(&self, f: &mut dyn FnMut()) {
        collecting(f)
    }
}

/// What a request failed by its driver's fault says when no other driver could redo it.
const REDO_NOWHERE: &str = "the driver failed and no other driver could take the request";

/// The outcome is a failure the driver owns (not the caller's input, not a verification):
/// a fault, or its random source out after failing its health tests (routing then avoids
/// the driver until it succeeds again, as rndtest took a failing source out).
fn failed_by_driver(outcome: &Outcome) -> bool {
    matches!(outcome, Err(f) if matches!(f.error().kind(),
        ErrorKind::DriverFailure | ErrorKind::DriverFailureMidway | ErrorKind::RandomSourceFailed))
}

/// The driver failed the request and handed it back as it came: another driver may do it.
fn redoable(outcome: &Outcome) -> bool {
    matches!(outcome, Err(f) if matches!(f.error().kind(), ErrorKind::DriverFailure | ErrorKind::RandomSourceFailed))
}

/// A failure the submitter took straight back that may be redone on another driver: routed,
/// not yet redone, handed back as it came by its driver's fault.
#[inline]
pub(super) fn redoable_here(outcome: &Outcome) -> bool {
    let Err(f) = outcome else { return false };
    let route = &f.request.trip().route;
    route.decided && !route.redone && redoable(outcome)
}

pub(super) fn request_of(outcome: &Outcome) -> &Request {
    match outcome {
        Ok(r) => r,
        Err(f) => &f.request,
    }
}

pub(super) fn request_mut(outcome: &mut Outcome) -> &mut Request {
    match outcome {
        Ok(r) => r,
        Err(f) => &mut f.request,
    }
}
