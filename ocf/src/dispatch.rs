//! Dispatch and return: how requests travel between submitters, drivers and callbacks.
//!
//! This is the machinery of section 3 of Leffler's "Cryptographic Device Support for
//! FreeBSD" (BSDCon 2003), whose lesson is that the framework's own overhead — thread hops,
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
//!   submitting thread straight into the driver: no queue, no thread hop. A submitter with a
//!   run of requests marks all but the last [`crate::Flags::MORE`], and the driver gets them
//!   with [`crate::Hint::more`] as from the dispatch worker (the IPsec core does, per batch).
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
//!
//! This module holds the mechanics, which know nothing of sessions: the queues between
//! threads ([`WorkQueue`]), the threads themselves ([`Workers`], generic over the
//! [`Jobs`] they run) and a driver's blocked flag and held queue ([`Flow`], generic over
//! what it holds). What the workers do with a request — offer it to its session's driver,
//! run its callback — is `crate::session::jobs`; the credits are `crate::credits`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::credits::FrameworkContext;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs one unit of a framework thread's work; returns false if it panicked (a client's
/// callback). The thread goes on, so one bad callback does not stop every later one.
pub(crate) fn survived(f: impl FnOnce()) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_ok()
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

/// What the framework's threads do with their work (implemented by `crate::session::jobs`).
pub(crate) trait Jobs: 'static {
    /// An item for the dispatch worker.
    type Work: Send + 'static;
    /// A finished request for a return worker.
    type Done: Send + 'static;
    /// On the dispatch worker: works through one batch taken from the dispatch queue.
    fn dispatch(batch: &mut VecDeque<Self::Work>);
    /// On a return worker: delivers one finished request.
    fn complete(done: Self::Done);
}

/// The framework's threads: one dispatch worker, and return workers (one queue each).
/// Started on first use, so a program that only uses direct dispatch with immediate
/// completion never starts a thread.
pub(crate) struct Workers<J: Jobs> {
    dispatch: Arc<WorkQueue<J::Work>>,
    returns: Vec<Arc<WorkQueue<J::Done>>>,
    dispatch_thread: OnceLock<Option<JoinHandle<()>>>,
    return_threads: Vec<OnceLock<Option<JoinHandle<()>>>>,
}

impl<J: Jobs> Workers<J> {
    pub(crate) fn new(return_workers: usize) -> Workers<J> {
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
    pub(crate) fn dispatch(self: &Arc<Self>) -> &WorkQueue<J::Work> {
        self.dispatch_thread.get_or_init(|| {
            let q = self.dispatch.clone();
            spawn("ocf-dispatch".into(), move || dispatch_worker::<J>(&q))
        });
        &self.dispatch
    }

    /// Return queue `i`, starting its worker if needed.
    pub(crate) fn returns(&self, i: usize) -> &WorkQueue<J::Done> {
        let i = i % self.returns.len();
        self.return_threads[i].get_or_init(|| {
            let q = self.returns[i].clone();
            spawn(format!("ocf-return-{i}"), move || return_worker::<J>(&q))
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

impl<J: Jobs> Drop for Workers<J> {
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

fn dispatch_worker<J: Jobs>(queue: &WorkQueue<J::Work>) {
    let _ctx = FrameworkContext::enter();
    let mut batch = VecDeque::new();
    while queue.take_all(&mut batch) {
        J::dispatch(&mut batch);
    }
}

fn return_worker<J: Jobs>(queue: &WorkQueue<J::Done>) {
    let _ctx = FrameworkContext::enter();
    let mut batch = VecDeque::new();
    while queue.take_all(&mut batch) {
        while let Some(done) = batch.pop_front() {
            J::complete(done);
        }
    }
}

/// A driver's flow-control state (the paper's blocked flag and queue); `T` is a request
/// waiting for the driver (with whatever it needs to be offered again).
pub(crate) struct Flow<T> {
    /// Read on every direct dispatch; the truth is under `held`'s lock.
    blocked: AtomicBool,
    /// Bumped by every unblock, so a Busy that raced an unblock is retried, not parked.
    generation: AtomicU64,
    held: Mutex<HeldQueue<T>>,
    pub(crate) restarts: AtomicU64,
    pub(crate) blocked_periods: AtomicU64,
    pub(crate) held_high_water: AtomicUsize,
}

impl<T> Default for Flow<T> {
    fn default() -> Flow<T> {
        Flow {
            blocked: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            held: Mutex::new(HeldQueue { blocked: false, items: VecDeque::new() }),
            restarts: AtomicU64::new(0),
            blocked_periods: AtomicU64::new(0),
            held_high_water: AtomicUsize::new(0),
        }
    }
}

struct HeldQueue<T> {
    blocked: bool,
    items: VecDeque<T>,
}

/// What became of a request the driver refused.
pub(crate) enum Refused<R> {
    /// The driver unblocked meanwhile: offer it again now.
    Retry(R),
    /// Parked in the held queue.
    Held,
}

impl<T> Flow<T> {
    #[inline]
    pub(crate) fn is_blocked(&self) -> bool {
        self.blocked.load(Ordering::Acquire)
    }

    #[inline]
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Parks a request behind a blocked driver (`held` makes what is parked, only if it
    /// is); gives the request back if the driver is not blocked.
    pub(crate) fn hold<R>(&self, req: R, held: impl FnOnce(R) -> T) -> Result<(), R> {
        let mut h = lock(&self.held);
        if !h.blocked {
            return Err(req);
        }
        h.items.push_back(held(req));
        self.held_high_water.fetch_max(h.items.len(), Ordering::Relaxed);
        Ok(())
    }

    /// The driver answered Busy to a request offered at generation `generation`; `held`
    /// makes what is parked, only if it is.
    pub(crate) fn refused<R>(
        &self,
        req: R,
        held: impl FnOnce(R) -> T,
        generation: u64,
        front: bool,
    ) -> Refused<R> {
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
        let held = held(req);
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

    /// The oldest held request, unless the driver is blocked, and whether more follow.
    pub(crate) fn next_held(&self) -> Option<(T, bool)> {
        let mut h = lock(&self.held);
        if h.blocked {
            return None;
        }
        let held = h.items.pop_front()?;
        Some((held, !h.items.is_empty()))
    }

    /// Empties the held queue (driver detach); the driver is no longer blocked.
    pub(crate) fn take_all_held(&self) -> VecDeque<T> {
        let mut h = lock(&self.held);
        h.blocked = false;
        self.blocked.store(false, Ordering::Release);
        std::mem::take(&mut h.items)
    }

    pub(crate) fn held_now(&self) -> usize {
        lock(&self.held).items.len()
    }
}
