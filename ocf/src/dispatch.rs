//! Dispatch and return: how requests travel between submitters, drivers and callbacks.
//!
//! This is the machinery of section 3 of the seed paper (Leffler, "Cryptographic Device
//! Support for FreeBSD"), whose lesson is that the framework's own overhead — thread hops,
//! shared locks, dropped requests — decides performance.
//!
//! ```text
//!  submitter ──direct──────────────────────────► driver.process ──Done──► complete
//!      │                                            ▲      │                 │
//!      └─BATCH─► dispatch queue ─► dispatch worker ─┘   Pending         Waiter: wake
//!                      ▲          (hint: more follow)      │        CALLBACK_IMMEDIATE:
//!   Busy ─► held queue ┘ (driver blocked until unblock)    ▼           run it here
//!                                      device completes ─► complete   otherwise:
//!                                      (SessionContext::done)          return queue ─►
//!                                                                      return worker ─►
//!                                                                      callback
//! ```
//!
//! - **Direct dispatch.** A request not marked [`crate::Flags::BATCH`] goes from the
//!   submitting thread straight into the driver: no queue, no thread hop.
//! - **Batched dispatch.** Batchable requests go to the dispatch queue; one dispatch worker
//!   hands them to drivers with [`crate::Hint::more`] set while more for the same driver
//!   follow, so a device can ring its doorbell once per batch.
//! - **Return.** A callback runs in the driver's completion context when the request asks
//!   for it ([`crate::Flags::CALLBACK_IMMEDIATE`]), otherwise on a return worker. Dispatch
//!   and return have their own threads and their own queues and locks. A blocking waiter
//!   ([`crate::Session::run`]) or a future is always woken from the completion context: the
//!   wake-up is the whole callback, as with /dev/crypto in the paper.
//! - **Flow control.** A driver that answers Busy is marked blocked; that request and the
//!   ones after it wait in the driver's held queue until the driver calls
//!   [`crate::SessionContext::unblock`], then the dispatch worker resumes them (the paper's
//!   ERESTART and `crypto_unblock`). Every request that can wait anywhere in the framework
//!   holds a *credit* of its driver; a driver has `max_in_flight` credits. When they are
//!   gone, submitters block, futures wait, and `try_submit` answers
//!   [`crate::Error::WouldBlock`]: memory is bounded and nothing is ever dropped.
//!   Framework threads (return workers, the dispatch worker, a driver delivering
//!   completions) never block on credits — that could deadlock the pipeline that frees
//!   them — and take one beyond the limit instead, which is counted.
//! - A request that completes before it could queue anywhere (a synchronous driver, direct
//!   dispatch, an immediate callback or a waiting caller) never takes a credit: that path
//!   is the paper's "cost of a function call".

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::completion::Notify;
use crate::framework::DriverEntry;
use crate::profile::Stamps;
use crate::request::{Outcome, Request};
use crate::session::{SessionCore, SessionShared};

/// What the framework keeps in a request while it travels.
#[derive(Default)]
pub(crate) struct Trip {
    /// Where the outcome goes.
    pub(crate) notify: Notify,
    /// The flow-control credit this request holds, if it can wait in a queue.
    pub(crate) credit: Option<Arc<Credits>>,
    /// Submit order, for sessions with ordered completion.
    pub(crate) seq: u64,
    /// Whether this request is one of the profiled samples, and its timestamps.
    pub(crate) profiled: bool,
    pub(crate) stamps: Stamps,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

thread_local! {
    /// Set on framework threads and while a driver delivers completions: such threads must
    /// never block on credits (see the module docs).
    static FRAMEWORK_CONTEXT: Cell<bool> = const { Cell::new(false) };
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

/// Returns a request's credit when dropped, even if a callback panics.
pub(crate) struct CreditGuard(pub(crate) Option<Arc<Credits>>);

impl Drop for CreditGuard {
    fn drop(&mut self) {
        give_back(self.0.take())
    }
}

/// Runs one unit of a framework thread's work; returns false if it panicked (a client's
/// callback). The thread goes on, so one bad callback does not stop every later one.
fn survived(f: impl FnOnce()) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_ok()
}

pub(crate) fn in_framework_context() -> bool {
    FRAMEWORK_CONTEXT.with(Cell::get)
}

/// Marks the current thread as a framework context until dropped (restoring the old value).
pub(crate) struct FrameworkContext(bool);

impl FrameworkContext {
    pub(crate) fn enter() -> FrameworkContext {
        FrameworkContext(FRAMEWORK_CONTEXT.with(|c| c.replace(true)))
    }
}

impl Drop for FrameworkContext {
    fn drop(&mut self) {
        FRAMEWORK_CONTEXT.with(|c| c.set(self.0))
    }
}

/// How a submitter takes a credit when there is none left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Wait for one (blocking submit).
    Block,
    /// Give up (try-submit, and the first attempt of a future).
    Try,
}

/// A driver's flow-control credits: at most `limit` requests in flight (queued in the
/// framework, held by the driver, or waiting for their callback).
pub(crate) struct Credits {
    in_flight: AtomicUsize,
    limit: usize,
    low_water: usize,
    high_water: AtomicUsize,
    /// Threads or futures waiting for a credit (or for the driver to drain).
    waiters: AtomicUsize,
    /// How many times a submitter had to wait.
    pub(crate) waits: AtomicU64,
    /// How many times a framework thread took a credit beyond the limit.
    pub(crate) overcommits: AtomicU64,
    wakers: Mutex<Vec<Waker>>,
    freed: Condvar,
}

impl Credits {
    pub(crate) fn new(limit: usize) -> Credits {
        Credits {
            in_flight: AtomicUsize::new(0),
            limit: limit.max(1),
            low_water: limit.max(1) * 3 / 4,
            high_water: AtomicUsize::new(0),
            waiters: AtomicUsize::new(0),
            waits: AtomicU64::new(0),
            overcommits: AtomicU64::new(0),
            wakers: Mutex::new(Vec::new()),
            freed: Condvar::new(),
        }
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    pub(crate) fn high_water(&self) -> usize {
        self.high_water.load(Ordering::Relaxed)
    }

    #[inline]
    fn note_high_water(&self, now: usize) {
        if now > self.high_water.load(Ordering::Relaxed) {
            self.high_water.fetch_max(now, Ordering::Relaxed);
        }
    }

    /// Takes a credit if one is left. A compare-and-swap rather than add-then-undo, so
    /// the count never exceeds the limit even for an instant.
    #[inline]
    fn try_take(&self) -> bool {
        let mut now = self.in_flight.load(Ordering::SeqCst);
        loop {
            if now >= self.limit {
                return false;
            }
            match self.in_flight.compare_exchange_weak(now, now + 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => break,
                Err(actual) => now = actual,
            }
        }
        self.note_high_water(now + 1);
        true
    }

    fn take_forced(&self) {
        let before = self.in_flight.fetch_add(1, Ordering::SeqCst);
        if before >= self.limit {
            self.overcommits.fetch_add(1, Ordering::Relaxed);
        }
        self.note_high_water(before + 1);
    }

    fn take_blocking(&self) {
        if self.try_take() {
            return;
        }
        self.waits.fetch_add(1, Ordering::Relaxed);
        let mut guard = lock(&self.wakers);
        // Registering before re-trying, both under the lock that `give_back` takes when it
        // sees a waiter, means a credit freed in between is never missed.
        self.waiters.fetch_add(1, Ordering::SeqCst);
        while !self.try_take() {
            guard = self.freed.wait(guard).unwrap_or_else(PoisonError::into_inner);
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Takes a credit the way `how` says; framework threads never wait.
    pub(crate) fn take(self: &Arc<Self>, how: Admission) -> Option<Arc<Credits>> {
        if in_framework_context() {
            self.take_forced();
        } else {
            match how {
                Admission::Block => self.take_blocking(),
                Admission::Try => {
                    if !self.try_take() {
                        return None;
                    }
                }
            }
        }
        Some(self.clone())
    }

    /// A future's wait for a credit.
    pub(crate) fn poll_take(self: &Arc<Self>, cx: &mut Context<'_>) -> Poll<Arc<Credits>> {
        if self.try_take() {
            return Poll::Ready(self.clone());
        }
        let mut wakers = lock(&self.wakers);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        if self.try_take() {
            self.waiters.fetch_sub(1, Ordering::SeqCst);
            return Poll::Ready(self.clone());
        }
        self.waits.fetch_add(1, Ordering::Relaxed);
        wakers.push(cx.waker().clone());
        // The waiter count is dropped when the waker is taken by `give_back`.
        Poll::Pending
    }

    /// Returns a credit. Waiters are woken once the driver has drained to its low-water
    /// mark (three quarters of the limit), not for every credit: a submitter that outruns
    /// the driver then sleeps once per quarter of the queue instead of once per request
    /// (measured: waking on every credit halved the batched path's throughput).
    #[inline]
    pub(crate) fn give_back(&self) {
        let now = self.in_flight.fetch_sub(1, Ordering::SeqCst) - 1;
        if now <= self.low_water && self.waiters.load(Ordering::SeqCst) > 0 {
            self.wake_waiters();
        }
    }

    #[cold]
    fn wake_waiters(&self) {
        let wakers = {
            let mut w = lock(&self.wakers);
            self.waiters.fetch_sub(w.len(), Ordering::SeqCst);
            std::mem::take(&mut *w)
        };
        self.freed.notify_all();
        for w in wakers {
            w.wake();
        }
    }

    /// Waits until no request holds a credit, or the deadline passes (driver detach).
    pub(crate) fn wait_idle(&self, deadline: Instant) -> Result<(), usize> {
        let mut guard = lock(&self.wakers);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let result = loop {
            let n = self.in_flight.load(Ordering::SeqCst);
            if n == 0 {
                break Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                break Err(n);
            }
            // Woken by every credit returned; the timeout bounds a missed edge case.
            let wait = (deadline - now).min(Duration::from_millis(10));
            guard = self.freed.wait_timeout(guard, wait).unwrap_or_else(PoisonError::into_inner).0;
        };
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

/// Returns a request's credit, if it holds one.
#[inline]
pub(crate) fn give_back(credit: Option<Arc<Credits>>) {
    if let Some(c) = credit {
        c.give_back()
    }
}

/// How long an idle worker polls its queue before it sleeps.
const IDLE_POLL: Duration = Duration::from_micros(20);

/// A queue between threads: one lock, a condition variable, and no notify (no system
/// call) when the consumer is awake. The consumer takes everything at once, swapping
/// buffers, so neither side allocates in the steady state.
pub(crate) struct WorkQueue<T> {
    state: Mutex<QueueState<T>>,
    ready: Condvar,
    /// Set by producers after pushing, so an idle consumer can poll without the lock.
    pending: AtomicBool,
}

struct QueueState<T> {
    items: VecDeque<T>,
    sleeping: bool,
    closed: bool,
    high_water: usize,
}

impl<T> WorkQueue<T> {
    fn new() -> WorkQueue<T> {
        WorkQueue {
            state: Mutex::new(QueueState {
                items: VecDeque::new(),
                sleeping: false,
                closed: false,
                high_water: 0,
            }),
            ready: Condvar::new(),
            pending: AtomicBool::new(false),
        }
    }

    pub(crate) fn push(&self, item: T) {
        self.push_all(std::iter::once(item))
    }

    pub(crate) fn push_all(&self, items: impl IntoIterator<Item = T>) {
        let wake = {
            let mut s = lock(&self.state);
            s.items.extend(items);
            s.high_water = s.high_water.max(s.items.len());
            self.pending.store(!s.items.is_empty(), Ordering::Release);
            s.sleeping && !s.items.is_empty()
        };
        if wake {
            self.ready.notify_one();
        }
    }

    /// Waits for work and moves all of it into `into` (which must be empty). Returns
    /// false once the queue is closed and empty.
    ///
    /// An empty queue is polled for a few microseconds before the consumer sleeps: under
    /// load the next item is usually that close, and a sleep costs the producer a wake-up
    /// system call and the consumer a context switch (measured in `drivers/null/benches/dispatch.rs`).
    fn take_all(&self, into: &mut VecDeque<T>) -> bool {
        let mut s = lock(&self.state);
        let mut polled = false;
        loop {
            if !s.items.is_empty() {
                std::mem::swap(&mut s.items, into);
                self.pending.store(false, Ordering::Relaxed);
                return true;
            }
            if s.closed {
                return false;
            }
            if !polled {
                polled = true;
                drop(s);
                let start = Instant::now();
                while !self.pending.load(Ordering::Acquire) && start.elapsed() < IDLE_POLL {
                    std::hint::spin_loop();
                }
                s = lock(&self.state);
                continue;
            }
            s.sleeping = true;
            s = self.ready.wait(s).unwrap_or_else(PoisonError::into_inner);
            s.sleeping = false;
            polled = false;
        }
    }

    fn close(&self) {
        lock(&self.state).closed = true;
        self.ready.notify_all();
    }

    pub(crate) fn high_water(&self) -> usize {
        lock(&self.state).high_water
    }
}

/// Work for the dispatch worker.
pub(crate) enum Work {
    /// A batchable request (or one moved from a detached driver's held queue).
    Request(Arc<SessionShared>, Request),
    /// A driver was unblocked: hand it its held requests.
    Resume(Arc<DriverEntry>),
}

/// A completed request whose callback runs on a return worker.
pub(crate) struct Completion {
    pub(crate) core: Arc<SessionCore>,
    pub(crate) outcome: Outcome,
}

/// The framework's threads: one dispatch worker, and return workers (one queue each).
/// Started on first use, so a program that only uses direct dispatch with immediate
/// completion never starts a thread.
pub(crate) struct Workers {
    dispatch: Arc<WorkQueue<Work>>,
    returns: Vec<Arc<WorkQueue<Completion>>>,
    dispatch_thread: OnceLock<Option<JoinHandle<()>>>,
    return_threads: Vec<OnceLock<Option<JoinHandle<()>>>>,
}

impl Workers {
    pub(crate) fn new(return_workers: usize) -> Workers {
        let n = return_workers.max(1);
        Workers {
            dispatch: Arc::new(WorkQueue::new()),
            returns: (0..n).map(|_| Arc::new(WorkQueue::new())).collect(),
            dispatch_thread: OnceLock::new(),
            return_threads: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    pub(crate) fn return_workers(&self) -> usize {
        self.returns.len()
    }

    /// The dispatch queue, starting its worker if needed.
    pub(crate) fn dispatch(self: &Arc<Self>) -> &WorkQueue<Work> {
        self.dispatch_thread.get_or_init(|| {
            let q = self.dispatch.clone();
            spawn("ocf-dispatch".into(), move || dispatch_worker(&q))
        });
        &self.dispatch
    }

    /// Return queue `i`, starting its worker if needed.
    pub(crate) fn returns(&self, i: usize) -> &WorkQueue<Completion> {
        let i = i % self.returns.len();
        self.return_threads[i].get_or_init(|| {
            let q = self.returns[i].clone();
            spawn(format!("ocf-return-{i}"), move || return_worker(&q))
        });
        &self.returns[i]
    }

    pub(crate) fn dispatch_high_water(&self) -> usize {
        self.dispatch.high_water()
    }

    pub(crate) fn return_high_water(&self) -> usize {
        self.returns.iter().map(|q| q.high_water()).max().unwrap_or(0)
    }
}

/// Starts a worker thread. If the system refuses a thread, the work cannot be done
/// anywhere: that is unrecoverable, like an allocation failure.
fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Option<JoinHandle<()>> {
    match std::thread::Builder::new().name(name.clone()).spawn(f) {
        Ok(h) => Some(h),
        Err(e) => panic!("ocf: cannot start worker thread {name}: {e}"),
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        // Workers finish what is queued, then exit. The last reference can be dropped on
        // a worker itself (by a callback's last session handle); a thread cannot join
        // itself, so then it is left to finish on its own.
        self.dispatch.close();
        for q in &self.returns {
            q.close();
        }
        let me = std::thread::current().id();
        let mut handles: Vec<JoinHandle<()>> = Vec::new();
        if let Some(Some(h)) = self.dispatch_thread.take() {
            handles.push(h);
        }
        for t in &mut self.return_threads {
            if let Some(Some(h)) = t.take() {
                handles.push(h);
            }
        }
        for h in handles {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }
}

fn dispatch_worker(queue: &WorkQueue<Work>) {
    let _ctx = FrameworkContext::enter();
    let mut batch = VecDeque::new();
    while queue.take_all(&mut batch) {
        collecting(|| {
            while let Some(work) = batch.pop_front() {
                match work {
                    Work::Request(session, req) => {
                        // "More follow" is per driver: only if the next request goes to the
                        // same one, so a device never waits for a follow-up that is not
                        // coming.
                        let more = match batch.front() {
                            Some(Work::Request(next, _)) => SessionShared::same_driver(&session, next),
                            _ => false,
                        };
                        if !survived(|| SessionShared::dispatch_queued(&session, req, more, false)) {
                            session.core().count_error(crate::ErrorKind::CallbackPanicked);
                        }
                    }
                    Work::Resume(entry) => {
                        if !survived(|| resume(&entry)) {
                            entry.counters.errors.record(crate::ErrorKind::CallbackPanicked);
                        }
                    }
                }
            }
        });
    }
}

/// Hands an unblocked driver its held requests, oldest first, until it is empty or the
/// driver is blocked again.
fn resume(entry: &DriverEntry) {
    while let Some((held, more)) = entry.flow.next_held() {
        SessionShared::dispatch_queued(&held.session, held.req, more, true);
    }
}

fn return_worker(queue: &WorkQueue<Completion>) {
    let _ctx = FrameworkContext::enter();
    let mut batch = VecDeque::new();
    while queue.take_all(&mut batch) {
        while let Some(c) = batch.pop_front() {
            let Completion { core, outcome } = c;
            if !survived(|| SessionCore::run_queued_callback(&core, outcome)) {
                core.count_error(crate::ErrorKind::CallbackPanicked);
            }
        }
    }
}

/// A request waiting for its blocked driver.
pub(crate) struct Held {
    pub(crate) session: Arc<SessionShared>,
    pub(crate) req: Request,
}

/// A driver's flow-control state (the paper's blocked flag and queue).
#[derive(Default)]
pub(crate) struct Flow {
    /// Read on every direct dispatch; the truth is under `held`'s lock.
    blocked: AtomicBool,
    /// Bumped by every unblock, so a Busy that raced an unblock is retried, not parked.
    generation: AtomicU64,
    held: Mutex<HeldQueue>,
    pub(crate) restarts: AtomicU64,
    pub(crate) blocked_periods: AtomicU64,
    pub(crate) held_high_water: AtomicUsize,
}

#[derive(Default)]
struct HeldQueue {
    blocked: bool,
    items: VecDeque<Held>,
}

/// What became of a request the driver refused.
pub(crate) enum Refused {
    /// The driver unblocked meanwhile: offer it again now.
    Retry(Request),
    /// Parked in the held queue.
    Held,
}

impl Flow {
    #[inline]
    pub(crate) fn is_blocked(&self) -> bool {
        self.blocked.load(Ordering::Acquire)
    }

    #[inline]
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Parks a request behind a blocked driver; gives it back if the driver is not blocked.
    pub(crate) fn hold(&self, session: &Arc<SessionShared>, req: Request) -> Result<(), Request> {
        let mut h = lock(&self.held);
        if !h.blocked {
            return Err(req);
        }
        h.items.push_back(Held { session: session.clone(), req });
        self.held_high_water.fetch_max(h.items.len(), Ordering::Relaxed);
        Ok(())
    }

    /// The driver answered Busy to a request offered at generation `generation`.
    pub(crate) fn refused(
        &self,
        session: &Arc<SessionShared>,
        req: Request,
        generation: u64,
        front: bool,
    ) -> Refused {
        self.restarts.fetch_add(1, Ordering::Relaxed);
        let mut h = lock(&self.held);
        if self.generation.load(Ordering::Acquire) != generation {
            return Refused::Retry(req);
        }
        if !h.blocked {
            h.blocked = true;
            self.blocked.store(true, Ordering::Release);
            self.blocked_periods.fetch_add(1, Ordering::Relaxed);
        }
        let held = Held { session: session.clone(), req };
        if front {
            h.items.push_front(held);
        } else {
            h.items.push_back(held);
        }
        self.held_high_water.fetch_max(h.items.len(), Ordering::Relaxed);
        Refused::Held
    }

    /// The driver has room again. Returns whether held requests wait for a resume.
    pub(crate) fn unblock(&self) -> bool {
        let mut h = lock(&self.held);
        self.generation.fetch_add(1, Ordering::AcqRel);
        let was_blocked = h.blocked;
        h.blocked = false;
        self.blocked.store(false, Ordering::Release);
        was_blocked && !h.items.is_empty()
    }

    fn next_held(&self) -> Option<(Held, bool)> {
        let mut h = lock(&self.held);
        if h.blocked {
            return None;
        }
        let held = h.items.pop_front()?;
        Some((held, !h.items.is_empty()))
    }

    /// Empties the held queue (driver detach); the driver is no longer blocked.
    pub(crate) fn take_all_held(&self) -> VecDeque<Held> {
        let mut h = lock(&self.held);
        h.blocked = false;
        self.blocked.store(false, Ordering::Release);
        std::mem::take(&mut h.items)
    }

    pub(crate) fn held_now(&self) -> usize {
        lock(&self.held).items.len()
    }
}
