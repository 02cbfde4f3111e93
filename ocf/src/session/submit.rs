//! The submit path: from a client's call to the driver's `process` and back. The direct
//! path for a synchronous driver with a waiting caller or an immediate callback is: load
//! the session's routes → choose a binding (one route: no decision; several: the policy's,
//! see `routes`) → `check` (the session's request rules) → driver `process` → account →
//! hand back: a handful of comparisons, one indirect call and two relaxed atomic adds;
//! nothing is allocated, locked or handed to another thread. Everything else — credits,
//! completion targets, batching, Busy and blocked drivers, a driver gone — is set up only
//! when the request needs it.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::completion::Callback;
use crate::credits::{give_back, Admission};
use crate::dispatch::Refused;
use crate::driver::{Hint, Processed};
use crate::error::Error;
use crate::profile;
use crate::request::{Failed, Flags, Notify, Outcome, Part, Request, RouteTrip, Waiter};

use super::complete::{redoable_here, request_mut, request_of};
use super::parts::{Binding, Held, SessionCore, Work};
use super::routes::Pick;
use super::SessionShared;
use crate::routing::model::Arrival;
use crate::routing::SizeClass;

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
    /// A request of a run that the driver finishes in one `process_run` call: it comes
    /// back to the submitter like a waiting caller's on the fast path.
    Run,
}

impl Target<'_> {
    fn is_run(self) -> bool {
        matches!(self, Target::Run)
    }
}

impl SessionShared {
    /// The submit path. Chooses the driver (see `routes`), sets up where the outcome goes,
    /// then either queues the request (batch) or offers it to the driver directly.
    #[inline]
    pub(super) fn start(self: &Arc<Self>, req: Request, target: Target<'_>, how: Admission) -> Started {
        let routes = self.routes();
        let Some((b, pick)) = self.choose(&routes, &req) else {
            return self.without_route(req, target);
        };
        self.start_on(b, pick, req, target, how)
    }

    /// The submit path once the driver is chosen.
    #[inline(always)]
    fn start_on(
        self: &Arc<Self>,
        b: &Arc<Binding>,
        pick: Pick,
        req: Request,
        target: Target<'_>,
        how: Admission,
    ) -> Started {
        let (req, waiter) = match self.prepare(b, req, target, how, pick) {
            Ok(r) => r,
            Err(started) => return started,
        };
        if req.flags.contains(Flags::BATCH) {
            b.core.workers.dispatch().push(Work::Request(self.clone(), b.clone(), req));
            return Started::Later(waiter);
        }
        let hint = Hint { more: req.flags.contains(Flags::MORE) };
        match self.offer(b, req, hint, false, Some((target, how)), None) {
            Offered::Now(o) => {
                if let (Target::Wait, Some(stamps)) = (target, stamps(&o)) {
                    // A waiting caller on the fast path: its only stages are dispatch and
                    // invoke.
                    b.entry.profile.record_request(&stamps, 0);
                }
                Started::Now(o)
            }
            Offered::Later(w) => Started::Later(waiter.or(w)),
            Offered::WouldBlock(r) => Started::WouldBlock(r),
        }
    }

    /// [`crate::Session::run_batch`] (`callback`: `None`) and
    /// [`crate::Session::submit_run`]: a run the caller has in hand. The driver is chosen
    /// once for the run (`Routes::pick_run`: under the cost model by its cost per request
    /// in runs). A driver that takes runs whole gets them in one `process_run` call, each
    /// request on the fast path (no credit, no target: like a waiting caller's with a
    /// synchronous driver), and a decided run is timed as a whole for the model. Any other
    /// — an asynchronous card, an ordered session, a driver blocked or gone — gets each
    /// request directly with the hint that more follow; then `run_batch` waits for them
    /// (timed as a whole too), and `submit_run` leaves them to `callback`, each request
    /// teaching the model's run cells when it completes.
    pub(super) fn run_many(
        self: &Arc<Self>,
        reqs: &mut Vec<Request>,
        out: &mut Vec<Outcome>,
        callback: Option<&Callback>,
    ) {
        let Some(first) = reqs.first() else { return };
        let routes = self.routes();
        let Some((b, pick)) = self.choose_run(&routes, first, reqs.len()) else {
            drop(routes);
            for req in reqs.drain(..) {
                if let Started::Now(o) = self.without_route(req, Target::Run) {
                    out.push(o);
                }
            }
            return;
        };
        let whole = b.runs
            && !b.count_active
            && self.order.is_none()
            && !b.entry.is_gone()
            && !b.entry.flow.is_blocked();
        if let (false, Some(cb)) = (whole, callback) {
            return self.run_each(b, pick, reqs, out, Target::Call(cb));
        }
        // What the model learns from a decided run: its time per request, at its mean size.
        let timed = pick.is_decided().then(|| {
            let bytes: usize = reqs.iter().map(|r| r.payload_range().len()).sum();
            (profile::now(), first.op, bytes / reqs.len(), reqs.len())
        });
        // The requests carry no decision of their own: the run as a whole is timed.
        let on = Pick::route(pick.index());
        if whole {
            self.run_whole(b, on, reqs, out);
        } else {
            self.run_each(b, on, reqs, out, Target::Wait);
        }
        if let Some((start, op, len, n)) = timed {
            let ns = profile::elapsed_ns(start, profile::now()) / n as u64;
            let model = SessionShared::route_model(&routes, pick);
            model.cell_for(Arrival::InRun(n), op, SizeClass::of(len)).learn(ns, len);
        }
    }

    /// A run in one `process_run` call; see `run_many`.
    fn run_whole(&self, b: &Binding, pick: Pick, reqs: &mut Vec<Request>, out: &mut Vec<Outcome>) {
        let Some(ds) = b.driver_session.as_ref() else {
            unreachable!("a bound session always has its driver session")
        };
        debug_assert!(!pick.is_decided(), "a run's requests carry no decision of their own");
        let mut run = RUN.with(Cell::take);
        for mut req in reqs.drain(..) {
            // The run goes directly, as a whole: a queue's flag or a hint means nothing here.
            req.flags = req.flags.without(Flags::BATCH | Flags::MORE);
            match self.prepare(b, req, Target::Run, Admission::Block, pick) {
                Ok((mut req, _)) => {
                    if req.trip().profiled {
                        req.trip_mut().stamps.dispatch = profile::now();
                    }
                    run.push(req)
                }
                // Failed its checks: finished (a run's request takes no credit).
                Err(Started::Now(o)) => out.push(o),
                Err(Started::Later(_) | Started::WouldBlock(_)) => {
                    unreachable!("a run's request neither waits nor takes a credit")
                }
            }
        }
        let mut done = DONE.with(Cell::take);
        ds.process_run(&mut run, &mut done);
        // Every request of the run is on the fast path, unrouted (the run was timed as a
        // whole): `complete`'s counting, once for the run (two atomic adds per request
        // were 5% of a 16 x 1 KiB AES-CBC run on mb), then its hand-back.
        b.core.account_run(&done);
        for o in done.drain(..) {
            let Some(o) = SessionCore::deliver_outcome(&b.core, o) else { continue };
            if let Some(stamps) = stamps(&o) {
                b.entry.profile.record_request(&stamps, 0);
            }
            out.push(o);
        }
        RUN.with(|c| c.set(run));
        DONE.with(|c| c.set(done));
    }

    /// A run one request at a time on `b`, the hint on all but the last. What finishes at
    /// once goes to `out`; for `Target::Wait` the call then waits for the rest, for
    /// `Target::Call` they go to the callback.
    fn run_each(
        self: &Arc<Self>,
        b: &Arc<Binding>,
        pick: Pick,
        reqs: &mut Vec<Request>,
        out: &mut Vec<Outcome>,
        target: Target<'_>,
    ) {
        let n = reqs.len();
        let mut waiting = Vec::new();
        for (i, mut req) in reqs.drain(..).enumerate() {
            let more = if i + 1 < n { Flags::MORE } else { Flags::default() };
            req.flags = req.flags.without(Flags::BATCH | Flags::MORE) | more;
            match self.start_on(b, pick, req, target, Admission::Block) {
                Started::Now(o) if matches!(target, Target::Call(_)) => {
                    out.push(SessionShared::returned_now(o))
                }
                Started::Now(o) => out.push(o),
                Started::Later(Some(w)) => waiting.push(w),
                Started::Later(None) => {}
                Started::WouldBlock(..) => unreachable!("a blocking submit gave up"),
            }
        }
        out.extend(waiting.into_iter().map(|w| w.wait()));
    }

    /// The start of a batched request ([`crate::Session::submit_batch`]): chosen and
    /// prepared, to be queued for the dispatch worker with its binding.
    pub(super) fn start_queued(
        self: &Arc<Self>,
        req: Request,
        target: Target<'_>,
    ) -> Result<(Arc<Binding>, Request), Started> {
        let routes = self.routes();
        let Some((b, pick)) = self.choose(&routes, &req) else {
            return Err(self.without_route(req, target));
        };
        let (req, _) = self.prepare(b, req, target, Admission::Block, pick)?;
        Ok((b.clone(), req))
    }

    /// A request for a session with no driver left: it fails with `DriverGone`, counted in
    /// the session's statistics and framework-wide (there is no driver to charge).
    #[cold]
    fn without_route(self: &Arc<Self>, req: Request, target: Target<'_>) -> Started {
        if let Some(registry) = self.registry.upgrade() {
            registry.count_error(crate::ErrorKind::DriverGone);
        }
        self.count_in_history(crate::ErrorKind::DriverGone);
        let _ = target;
        Started::Now(Err(Failed::new(Error::DriverGone, req)))
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
        pick: Pick,
    ) -> Result<(Request, Option<Arc<Waiter>>), Started> {
        let immediate = match target {
            Target::Wait | Target::Run => true,
            Target::Call(_) => req.flags.contains(Flags::CALLBACK_IMMEDIATE),
        };
        // The fast path: the outcome comes straight back up the stack, so the request can
        // never wait anywhere and needs neither a credit nor a completion target. A run's
        // requests (`run_many`) are on it too: the driver finishes them all in one call.
        let synchronous = b.synchronous || (b.synchronous_unhinted && !req.flags.contains(Flags::MORE));
        let returns_now = (synchronous || target.is_run())
            && immediate
            && self.order.is_none()
            && !req.flags.contains(Flags::BATCH);
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
            trip.profile = Some(b.entry.profile.clone());
        }
        // Routing's travel state is at rest (default) unless a decision chose the driver:
        // `complete` puts it back to rest, so the direct path need not write it.
        if pick.is_decided() {
            trip.route = RouteTrip {
                decided: true,
                timed: pick.timed(),
                cost_ns: pick.cost_ns(),
                run_len: pick.run_len(),
                ..RouteTrip::default()
            };
        }
        match req.part {
            Part::Whole => req.trip_mut().message = 0,
            Part::First => req.trip_mut().message = b.id,
            Part::Middle | Part::Last => {}
        }
        if let Err(e) = self.rules.check(&req) {
            return Err(finish_failed(&b.core, e, req, waiter));
        }
        req.set_tag_len(self.rules.tag_len);
        Ok((req, waiter))
    }

    /// Offers a request to a driver: to another route if the driver is gone, parks it if
    /// the driver is blocked, retries a Busy that raced an unblock. `convert` is how a
    /// request on the fast path (no credit, no target) gets them if it must wait after all;
    /// `None` for requests that have them. `waiter`: the waiter made for it so far.
    fn offer(
        self: &Arc<Self>,
        b: &Arc<Binding>,
        mut req: Request,
        hint: Hint,
        front: bool,
        convert: Option<(Target<'_>, Admission)>,
        mut waiter: Option<Arc<Waiter>>,
    ) -> Offered {
        loop {
            if b.entry.is_gone() {
                return self.reroute(b, req, hint, front, convert, waiter);
            }
            let flow = &b.entry.flow;
            if flow.is_blocked() {
                req = match ready_to_wait(req, convert, b, &mut waiter) {
                    Ok(r) => r,
                    Err(r) => return Offered::WouldBlock(r),
                };
                let held = |req| Held { session: self.clone(), binding: b.clone(), req };
                match flow.hold(req, held) {
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
            if req.trip().route.decided {
                routed_to(b, &mut req);
            }
            // On the fast path (no credit, no target): the driver promised to finish it.
            let fast = matches!(req.trip().notify, Notify::Return);
            match ds.process(req, hint) {
                Processed::Done(outcome) => {
                    return match SessionCore::complete(&b.core, outcome) {
                        Some(o) if fast && redoable_here(&o) => {
                            self.redo_here(b, o, hint, front, convert, waiter)
                        }
                        Some(o) => Offered::Now(o),
                        None => Offered::Later(waiter),
                    };
                }
                Processed::Pending => {
                    if b.synchronous || fast {
                        // The driver broke its promise; if the request was on the fast
                        // path nobody will see it again.
                        return Offered::Now(broken_sync_contract(&b.core));
                    }
                    return Offered::Later(waiter);
                }
                Processed::Busy(mut r) => {
                    if r.trip().route.decided {
                        not_routed_to(b, &mut r);
                    }
                    req = match ready_to_wait(r, convert, b, &mut waiter) {
                        Ok(r) => r,
                        Err(r) => {
                            flow.restarts.fetch_add(1, Ordering::Relaxed);
                            return Offered::WouldBlock(r);
                        }
                    };
                    let held = |req| Held { session: self.clone(), binding: b.clone(), req };
                    match flow.refused(req, held, generation, front) {
                        Refused::Held => return Offered::Later(waiter),
                        Refused::Retry(r) => req = r,
                    }
                }
            }
        }
    }

    /// A routed request its synchronous driver failed by a fault of its own, handed back as
    /// it came, on the fast path (where the completion path cannot redo it: the submitter
    /// takes the outcome straight back): redone once, here, on the driver the policy picks
    /// now, the failing one left out (as `SessionCore::redo` does for the others). With no
    /// other driver the failure stands.
    #[cold]
    #[inline(never)]
    fn redo_here(
        self: &Arc<Self>,
        failed_on: &Arc<Binding>,
        outcome: Outcome,
        hint: Hint,
        front: bool,
        convert: Option<(Target<'_>, Admission)>,
        waiter: Option<Arc<Waiter>>,
    ) -> Offered {
        let other = {
            let routes = self.routes();
            let chosen = self
                .choose(&routes, request_of(&outcome))
                .filter(|(b, _)| !Arc::ptr_eq(&b.entry, &failed_on.entry));
            chosen.map(|(b, _)| b.clone()).or_else(|| {
                routes
                    .routes
                    .iter()
                    .filter(|r| !Arc::ptr_eq(&r.entry, &failed_on.entry))
                    .find_map(|r| self.binding(r).cloned())
            })
        };
        let Some(b) = other else {
            let mut outcome = outcome;
            request_mut(&mut outcome).trip_mut().route = RouteTrip::default();
            return Offered::Now(outcome);
        };
        let mut req = match outcome {
            Err(f) => f.into_parts().1,
            ok => return Offered::Now(ok),
        };
        req.trip_mut().route = RouteTrip { decided: true, redone: true, ..RouteTrip::default() };
        self.offer(&b, req, hint, front, convert, waiter)
    }

    /// The request's driver is gone: the session renews its routes and the request goes to
    /// the one the policy picks now, or, with none left, fails with `DriverGone`.
    #[cold]
    fn reroute(
        self: &Arc<Self>,
        gone: &Arc<Binding>,
        req: Request,
        hint: Hint,
        front: bool,
        convert: Option<(Target<'_>, Admission)>,
        waiter: Option<Arc<Waiter>>,
    ) -> Offered {
        self.renew_routes(Some(&gone.entry));
        let next = {
            let routes = self.routes();
            self.choose(&routes, &req).map(|(b, _)| b.clone())
        };
        match next {
            Some(b) if !Arc::ptr_eq(&b.entry, &gone.entry) => {
                self.offer(&b, req, hint, front, convert, waiter)
            }
            _ => match finish_failed(&gone.core, Error::DriverGone, req, waiter) {
                Started::Now(o) => Offered::Now(o),
                Started::Later(w) => Offered::Later(w),
                Started::WouldBlock(r) => Offered::WouldBlock(r),
            },
        }
    }

    /// The dispatch worker's entry: a queued request (batched, resumed or moved).
    pub(crate) fn dispatch_queued(
        this: &Arc<SessionShared>,
        binding: &Arc<Binding>,
        req: Request,
        more: bool,
        front: bool,
    ) {
        match this.offer(binding, req, Hint { more }, front, None, None) {
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
    pub(super) fn returned_now(mut outcome: Outcome) -> Outcome {
        let trip = request_mut(&mut outcome).trip_mut();
        give_back(trip.credit.take());
        if trip.profiled {
            trip.stamps.callback = profile::now();
            let stamps = trip.stamps;
            if let Some(p) = trip.profile.take() {
                p.record_request(&stamps, profile::now());
            }
        }
        outcome
    }

    /// Runs a callback for an outcome the submitter got back directly.
    pub(super) fn callback_now(callback: &Callback, outcome: Outcome) {
        SessionCore::run_callback(callback, outcome);
    }
}

thread_local! {
    /// The run `run_whole` hands its driver, kept between calls (no allocation per run).
    static RUN: Cell<Vec<Request>> = const { Cell::new(Vec::new()) };
    /// Its outcomes, before the framework completes them.
    static DONE: Cell<Vec<Outcome>> = const { Cell::new(Vec::new()) };
}

/// What came of offering a request to a driver.
enum Offered {
    Now(Outcome),
    Later(Option<Arc<Waiter>>),
    WouldBlock(Request),
}

/// A routed request meets its driver: it is timed if the model wants it (always, on a
/// driver that completes later), and on such a driver its predicted cost joins the
/// driver's backlog until it completes (`SessionCore::complete` takes it out again).
#[inline]
fn routed_to(b: &Binding, req: &mut Request) {
    let state = &b.entry.routing;
    let route = &mut req.trip_mut().route;
    if route.timed || !b.synchronous {
        route.start = profile::now();
    }
    if !b.synchronous {
        let before = state.backlog_ns.fetch_add(route.cost_ns, Ordering::Relaxed);
        route.wait_ns = before;
        route.in_backlog = true;
        if before == 0 && b.entry.credits.in_flight() <= 1 {
            // Idle until now: its stall clock starts here, not at its last completion.
            state.last_progress.store(route.start, Ordering::Relaxed);
        }
    }
    if b.count_active {
        state.active.fetch_add(1, Ordering::Relaxed);
        route.active = true;
    }
}

/// The driver answered Busy: the request is not there after all.
fn not_routed_to(b: &Binding, req: &mut Request) {
    let route = &mut req.trip_mut().route;
    if route.in_backlog {
        b.entry.routing.backlog_ns.fetch_sub(route.cost_ns, Ordering::Relaxed);
        route.in_backlog = false;
    }
    if route.active {
        b.entry.routing.active.fetch_sub(1, Ordering::Relaxed);
        route.active = false;
    }
    route.start = 0;
}

/// Gives a request the completion target for `target`; returns the waiter if one was made.
fn set_target(req: &mut Request, target: Target<'_>) -> Option<Arc<Waiter>> {
    match target {
        // A run's request never waits (its driver finishes the run in the call).
        Target::Wait | Target::Run => {
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
fn stamps(outcome: &Outcome) -> Option<profile::Stamps> {
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
