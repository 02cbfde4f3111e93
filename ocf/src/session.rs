//! Sessions: a validated set of parameters bound to a driver, and the request path.
//!
//! The direct path for a synchronous driver (the soft driver) with a waiting caller or an
//! immediate callback is: load the session's binding → `check` (the session's request
//! rules) → driver `process` → account → hand back. That is a handful of comparisons, one
//! indirect call and two relaxed atomic adds: nothing is allocated, locked or handed to
//! another thread. Every other route — batching, return workers, asynchronous drivers,
//! Busy drivers — is described in `crate::dispatch`.
//!
//! A session is *bound* to one driver at a time ([`Binding`]). When its driver is
//! unregistered, the session is rebound to the next best driver, from its own copy of its
//! parameters and keys, and its requests go on there.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use arc_swap::{ArcSwap, Guard};

use crate::buffer::{Borrowed, Buffer};
use crate::completion::{Callback, Notify, RequestFuture, Waiter};
use crate::dispatch::{give_back, Admission, FrameworkContext, Refused, Work, Workers};
use crate::driver::{DriverSession, Hint, Processed, ReturnPath};
use crate::error::{Error, ErrorCounters, ErrorCounts, ErrorKind};
use crate::framework::{DriverEntry, Registry};
use crate::params::SessionParams;
use crate::profile;
use crate::request::{Failed, Flags, Outcome, Request, RequestRules};

/// Counters of one session on one driver.
#[derive(Default)]
pub(crate) struct SessionCounters {
    pub(crate) ops: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) errors: ErrorCounters,
}

impl SessionCounters {
    pub(crate) fn snapshot(&self) -> SessionStats {
        SessionStats {
            ops: self.ops.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            errors: self.errors.snapshot(),
        }
    }
}

/// A session's binding to a driver, as the driver's registry sees it: from binding until
/// the last request that went through it is finished.
pub(crate) struct LiveSession {
    pub(crate) counters: Arc<SessionCounters>,
    pub(crate) session: Weak<SessionShared>,
    /// Still bound (false once the session is freed or moved, while requests finish).
    pub(crate) bound: bool,
}

/// Counters of one driver: its own error counters, the totals of sessions no longer bound
/// to it, and its bound sessions' counters (summed when read, so the request path updates
/// only the session's counters).
#[derive(Default)]
pub(crate) struct DriverCounters {
    pub(crate) errors: ErrorCounters,
    pub(crate) retired_ops: AtomicU64,
    pub(crate) retired_bytes: AtomicU64,
    pub(crate) sessions_created: AtomicU64,
    pub(crate) live: Mutex<Vec<LiveSession>>,
}

impl DriverCounters {
    /// Records a new binding of `session` to this driver.
    pub(crate) fn add_live(&self, counters: Arc<SessionCounters>, session: &Arc<SessionShared>) {
        let live = LiveSession { counters, session: Arc::downgrade(session), bound: true };
        self.live.lock().unwrap_or_else(PoisonError::into_inner).push(live);
    }

    pub(crate) fn live_sessions(&self) -> usize {
        self.live.lock().unwrap_or_else(PoisonError::into_inner).iter().filter(|l| l.bound).count()
    }
}

/// What a binding's requests need on their way back, shared with the driver through its
/// [`crate::SessionContext`]: where to count, how to deliver, where to profile.
pub(crate) struct SessionCore {
    pub(crate) counters: Arc<SessionCounters>,
    pub(crate) entry: Arc<DriverEntry>,
    pub(crate) workers: Arc<Workers>,
    pub(crate) order: Option<Arc<Reorder>>,
    /// This session's return worker: one per session keeps its callbacks in order and on
    /// one thread's cache.
    pub(crate) return_queue: usize,
}

impl Drop for SessionCore {
    /// The binding's last request is finished (its driver session and every request that
    /// went through it hold this core): its counts become the driver's retired totals,
    /// under the lock that readers of driver statistics take, so they never count them
    /// twice or not at all.
    fn drop(&mut self) {
        let d = &self.entry.counters;
        let mut live = d.live.lock().unwrap_or_else(PoisonError::into_inner);
        d.retired_ops.fetch_add(self.counters.ops.load(Ordering::Relaxed), Ordering::Relaxed);
        d.retired_bytes.fetch_add(self.counters.bytes.load(Ordering::Relaxed), Ordering::Relaxed);
        live.retain(|l| !Arc::ptr_eq(&l.counters, &self.counters));
    }
}

impl SessionCore {
    #[inline]
    fn account(&self, outcome: &Outcome) {
        match outcome {
            Ok(req) => {
                self.counters.ops.fetch_add(1, Ordering::Relaxed);
                self.counters.bytes.fetch_add(req.payload_range().len() as u64, Ordering::Relaxed);
            }
            Err(f) => self.count_error(f.error().kind()),
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
    pub(crate) fn complete(this: &Arc<SessionCore>, mut outcome: Outcome) -> Option<Outcome> {
        this.account(&outcome);
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
                order.release(this, seq, outcome)
            }
            None => SessionCore::release(this, outcome),
        }
        None
    }

    /// Hands a finished request to its waiter or callback (in order, for ordered sessions).
    fn release(this: &Arc<SessionCore>, mut outcome: Outcome) {
        let req = request_mut(&mut outcome);
        let immediate = req.flags.contains(Flags::CALLBACK_IMMEDIATE);
        let trip = req.trip_mut();
        match std::mem::take(&mut trip.notify) {
            Notify::Waiter(w) => {
                let credit = trip.credit.take();
                if trip.profiled {
                    this.entry.profile.record_request(&trip.stamps, 0);
                }
                w.complete(outcome);
                give_back(credit);
            }
            Notify::Callback(cb) if immediate => SessionCore::run_callback(this, &cb, outcome),
            Notify::Callback(cb) => {
                trip.notify = Notify::Callback(cb);
                let core = this.clone();
                let c = crate::dispatch::Completion { core, outcome };
                crate::dispatch::to_return_worker(&this.workers, this.return_queue, c);
            }
            // A driver that declared itself synchronous completed a request later: nobody
            // is waiting for it. Count the driver's fault; the request is dropped here.
            Notify::Return => {
                give_back(trip.credit.take());
                this.count_error(ErrorKind::DriverFailure)
            }
        }
    }

    /// Runs a callback here and now, profiling it and returning the request's credit.
    #[inline]
    fn run_callback(this: &SessionCore, cb: &Callback, mut outcome: Outcome) {
        let trip = request_mut(&mut outcome).trip_mut();
        let _credit = crate::dispatch::CreditGuard(trip.credit.take());
        let stamps = if trip.profiled {
            trip.stamps.callback = profile::now();
            Some(trip.stamps)
        } else {
            None
        };
        cb(outcome);
        if let Some(stamps) = stamps {
            this.entry.profile.record_request(&stamps, profile::now());
        }
    }

    /// A return worker runs a queued callback.
    pub(crate) fn run_queued_callback(this: &Arc<SessionCore>, mut outcome: Outcome) {
        match std::mem::take(&mut request_mut(&mut outcome).trip_mut().notify) {
            Notify::Callback(cb) => SessionCore::run_callback(this, &cb, outcome),
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
        crate::dispatch::collecting(f)
    }
}

fn request_mut(outcome: &mut Outcome) -> &mut Request {
    match outcome {
        Ok(r) => r,
        Err(f) => &mut f.request,
    }
}

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

    fn take_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    fn release(&self, core: &Arc<SessionCore>, seq: u64, outcome: Outcome) {
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

/// Statistics of one session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Requests completed successfully.
    pub ops: u64,
    /// Payload bytes of those requests.
    pub bytes: u64,
    /// Every failed request or submission, by cause.
    pub errors: ErrorCounts,
}

/// A session's tie to one driver: the driver's per-session state and where its requests
/// are counted. Replaced as a whole when the session moves to another driver.
pub(crate) struct Binding {
    pub(crate) entry: Arc<DriverEntry>,
    pub(crate) core: Arc<SessionCore>,
    pub(crate) driver_session: Option<Box<dyn DriverSession>>,
    pub(crate) synchronous: bool,
}

impl Drop for Binding {
    fn drop(&mut self) {
        if let Some(ds) = self.driver_session.take() {
            self.entry.driver.free_session(ds);
        }
        // No longer one of the driver's sessions; its counts stay visible until the core
        // (and the last request that went through this binding) is gone.
        let mut live = self.entry.counters.live.lock().unwrap_or_else(PoisonError::into_inner);
        for l in live.iter_mut().filter(|l| Arc::ptr_eq(&l.counters, &self.core.counters)) {
            l.bound = false;
        }
    }
}

/// What came of starting a request.
enum Started {
    /// Finished; the submitter delivers the outcome.
    Now(Outcome),
    /// On its way; it will reach its waiter (returned here if one was made) or callback.
    Later(Option<Arc<Waiter>>),
    /// No credit and the caller would not wait.
    WouldBlock(Request),
}

/// Who takes the outcome.
#[derive(Clone, Copy)]
enum Target<'a> {
    Wait,
    Call(&'a Callback),
}

/// A crypto session: parameters bound to a driver. Cheap to clone (shared), usable from
/// many threads at once. Freed — and its keys wiped, in ocf and in the driver — when the
/// last clone is dropped.
#[derive(Clone)]
pub struct Session {
    shared: Arc<SessionShared>,
}

pub(crate) struct SessionShared {
    id: u64,
    /// The session's own copy of its parameters and keys (wiped on drop), from which it
    /// is rebound when its driver goes away.
    params: SessionParams,
    rules: RequestRules,
    binding: ArcSwap<Binding>,
    /// The counters of every binding this session has had (one per driver it was on).
    history: Mutex<Vec<Arc<SessionCounters>>>,
    order: Option<Arc<Reorder>>,
    registry: Weak<Registry>,
    /// Serializes rebinding.
    rebinding: Mutex<()>,
    /// Profile one request in this many (0: off).
    profile_every: u32,
}

impl Session {
    pub(crate) fn new(
        id: u64,
        params: SessionParams,
        binding: Binding,
        order: Option<Arc<Reorder>>,
        registry: Weak<Registry>,
        profile_every: u32,
    ) -> Session {
        let rules = RequestRules::new(&params);
        let entry = binding.entry.clone();
        let counters = binding.core.counters.clone();
        let shared = Arc::new(SessionShared {
            id,
            params,
            rules,
            binding: ArcSwap::from_pointee(binding),
            history: Mutex::new(vec![counters.clone()]),
            order,
            registry,
            rebinding: Mutex::new(()),
            profile_every,
        });
        entry.counters.add_live(counters, &shared);
        Session { shared }
    }

    /// Processes a request and waits for its outcome (a blocking wait; with a synchronous
    /// driver it returns without ever blocking).
    pub fn run(&self, req: Request) -> Outcome {
        match self.shared.start(req, Target::Wait, Admission::Block) {
            Started::Now(o) => o,
            Started::Later(Some(w)) => w.wait(),
            // A wait target always gets a waiter, and Block never gives up.
            Started::Later(None) | Started::WouldBlock(_) => unreachable!("blocking wait without a waiter"),
        }
    }

    /// Processes `data` in place as the request's buffer, without copying it into the
    /// request (see [`crate::buffer::Borrowed`]): for callers whose bytes live in memory
    /// they do not own as a `Vec`, such as the OpenSSL provider working on the application's
    /// buffer. Waits like [`Session::run`]; the request comes back with an empty buffer.
    ///
    /// # Safety
    /// Every driver that can serve this session keeps the driver contract (`crate::driver`):
    /// a request it takes comes back through `process`'s answer or exactly one
    /// `SessionContext::done`, with its buffer, and the driver keeps no part of the buffer
    /// afterwards (a synchronous driver never answers `Pending`). ocf's own drivers do. The
    /// framework then hands the request back before this call returns, so the lent pointer
    /// never outlives `data`'s borrow.
    pub unsafe fn run_in(&self, mut req: Request, data: &mut [u8]) -> Outcome {
        req.buf = Buffer::Borrowed(Borrowed::new(data));
        let mut outcome = self.run(req);
        // The loan ends here: nothing of `data` stays in the request.
        request_mut(&mut outcome).buf = Buffer::default();
        outcome
    }

    /// Processes a request; `callback` gets the outcome — on a return worker, or in the
    /// driver's completion context if the request has [`Flags::CALLBACK_IMMEDIATE`] (for a
    /// synchronous driver that is this thread, before `submit` returns). With
    /// [`Flags::BATCH`] the request is queued for the dispatch worker. If the driver's
    /// queues are full, waits for room.
    pub fn submit(&self, req: Request, callback: &Callback) {
        match self.shared.start(req, Target::Call(callback), Admission::Block) {
            Started::Now(o) => self.shared.callback_now(callback, o),
            Started::Later(_) => {}
            Started::WouldBlock(_) => unreachable!("blocking submit gave up"),
        }
    }

    /// Like [`Session::submit`], but when the driver finishes the request before this call
    /// returns (a synchronous driver such as `soft`, with [`Flags::CALLBACK_IMMEDIATE`]),
    /// the outcome comes back here instead of through `callback`: the caller finishes its
    /// work with the state it already holds, with no indirect call and no finding that
    /// state again (the IPsec core's packet path; measured there). `None`: the request
    /// went on asynchronously, and `callback` gets the outcome as with `submit`.
    pub fn submit_or_finish(&self, req: Request, callback: &Callback) -> Option<Outcome> {
        match self.shared.start(req, Target::Call(callback), Admission::Block) {
            Started::Now(o) => Some(self.shared.returned_now(o)),
            Started::Later(_) => None,
            Started::WouldBlock(_) => unreachable!("blocking submit gave up"),
        }
    }

    /// Like [`Session::submit`], but if the driver's queues are full the request comes
    /// straight back as [`Error::WouldBlock`] (counted), untouched, instead of waiting.
    pub fn try_submit(&self, req: Request, callback: &Callback) -> Result<(), Failed> {
        match self.shared.start(req, Target::Call(callback), Admission::Try) {
            Started::Now(o) => {
                self.shared.callback_now(callback, o);
                Ok(())
            }
            Started::Later(_) => Ok(()),
            Started::WouldBlock(req) => {
                let b = self.shared.binding.load();
                b.core.count_error(ErrorKind::WouldBlock);
                Err(Failed::new(Error::WouldBlock, req))
            }
        }
    }

    /// Queues many requests for the dispatch worker in one call (each is marked
    /// [`Flags::BATCH`]); the driver receives them with the hint that more follow.
    /// `callback` gets each outcome, as with [`Session::submit`].
    pub fn submit_batch(&self, reqs: impl IntoIterator<Item = Request>, callback: &Callback) {
        let s = &self.shared;
        let b = s.binding.load();
        let mut queued = Vec::new();
        for mut req in reqs {
            req.flags = req.flags | Flags::BATCH;
            match s.prepare(&b, req, Target::Call(callback), Admission::Block) {
                Ok((req, _)) => queued.push(Work::Request(s.clone(), req)),
                Err(Started::Now(o)) => s.callback_now(callback, o),
                Err(_) => {}
            }
        }
        if !queued.is_empty() {
            b.core.workers.dispatch().push_all(queued);
        }
    }

    /// Processes a request; the future resolves to its outcome. If the driver's queues
    /// are full, the future waits for room.
    pub fn submit_async(&self, req: Request) -> RequestFuture {
        match self.shared.start(req, Target::Wait, Admission::Try) {
            Started::Now(o) => RequestFuture::ready(o),
            Started::Later(Some(w)) => RequestFuture::waiting(w),
            Started::Later(None) => unreachable!("wait target without a waiter"),
            Started::WouldBlock(req) => RequestFuture::admitting(self.clone(), req),
        }
    }

    /// A future's second try, once it holds a credit.
    pub(crate) fn start_with_credit(
        &self,
        mut req: Request,
        credit: Arc<crate::dispatch::Credits>,
    ) -> RequestFuture {
        req.trip_mut().credit = Some(credit);
        self.submit_async(req)
    }

    /// The credits a future waits on.
    pub(crate) fn credits(&self) -> Arc<crate::dispatch::Credits> {
        self.shared.binding.load().entry.credits.clone()
    }

    /// This session's counters (over every driver it was bound to).
    pub fn stats(&self) -> SessionStats {
        let mut s = SessionStats::default();
        for c in self.shared.history.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            let c = c.snapshot();
            s.ops += c.ops;
            s.bytes += c.bytes;
            s.errors.add(&c.errors);
        }
        s
    }

    /// The name of the driver serving this session now.
    pub fn driver_name(&self) -> String {
        self.shared.binding.load().entry.name.clone()
    }

    /// The session's parameters.
    pub fn params(&self) -> &SessionParams {
        &self.shared.params
    }

    /// A framework-unique session id.
    pub fn id(&self) -> u64 {
        self.shared.id
    }
}

impl SessionShared {
    /// The submit path. Sets up where the outcome goes, then either queues the request
    /// (batch) or offers it to the driver directly.
    #[inline]
    fn start(self: &Arc<Self>, req: Request, target: Target<'_>, how: Admission) -> Started {
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
    fn prepare(
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
                match flow.hold(self, req) {
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
                    match flow.refused(self, req, generation, front) {
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

    /// The core of the session's current binding.
    pub(crate) fn core(&self) -> Arc<SessionCore> {
        self.binding.load().core.clone()
    }

    /// Whether two sessions' requests go to the same driver now.
    pub(crate) fn same_driver(a: &Arc<SessionShared>, b: &Arc<SessionShared>) -> bool {
        Arc::ptr_eq(a, b) || Arc::ptr_eq(&a.binding.load().entry, &b.binding.load().entry)
    }

    /// The bookkeeping of a callback for an outcome handed straight back to the submitter
    /// instead ([`Session::submit_or_finish`]): the credit goes back, and a profiled
    /// request's callback stage ends now.
    fn returned_now(&self, mut outcome: Outcome) -> Outcome {
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
    fn callback_now(&self, callback: &Callback, outcome: Outcome) {
        let b = self.binding.load();
        SessionCore::run_callback(&b.core, callback, outcome);
    }

    /// Moves the session off a driver that is gone, to the best registered driver.
    /// Returns the binding to use, or `None` if there is none (the request fails with
    /// `DriverGone`).
    fn rebind(self: &Arc<Self>, stale: &Binding) -> Option<Guard<Arc<Binding>>> {
        let registry = self.registry.upgrade()?;
        // The old binding ends (and its driver session is freed) when the last thread
        // still using it lets go.
        match self.move_off(&stale.entry, &registry) {
            Moved::Now(_) | Moved::Already => Some(self.binding.load()),
            Moved::Nowhere => None,
        }
    }

    /// Rebinding for `Framework::unregister`: returns the old binding so the caller can
    /// wait for threads still using it.
    pub(crate) fn rebind_for_detach(
        self: &Arc<Self>,
        gone: &Arc<DriverEntry>,
        registry: &Arc<Registry>,
    ) -> Option<Arc<Binding>> {
        match self.move_off(gone, registry) {
            Moved::Now(old) => Some(old),
            Moved::Already | Moved::Nowhere => None,
        }
    }

    /// The one place a session changes driver: if it is still bound to `gone`, binds it
    /// to the best registered driver and returns the old binding.
    fn move_off(self: &Arc<Self>, gone: &Arc<DriverEntry>, registry: &Arc<Registry>) -> Moved {
        let _one_at_a_time = self.rebinding.lock().unwrap_or_else(PoisonError::into_inner);
        let current = self.binding.load();
        if !Arc::ptr_eq(&current.entry, gone) {
            return Moved::Already;
        }
        let Some(binding) = registry.rebind(self, &self.params, &current) else { return Moved::Nowhere };
        drop(current);
        Moved::Now(self.binding.swap(Arc::new(binding)))
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Records a new binding's counters in the session's history.
    pub(crate) fn add_history(&self, counters: Arc<SessionCounters>) {
        self.history.lock().unwrap_or_else(PoisonError::into_inner).push(counters);
    }

    pub(crate) fn order(&self) -> Option<Arc<Reorder>> {
        self.order.clone()
    }
}

/// What came of moving a session off a driver.
enum Moved {
    /// Moved now; the old binding.
    Now(Arc<Binding>),
    /// Someone else moved it already.
    Already,
    /// No other driver can serve it.
    Nowhere,
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

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.shared.id)
            .field("driver", &self.shared.binding.load().entry.name)
            .field("mode", &self.shared.params.mode.name())
            .finish()
    }
}
