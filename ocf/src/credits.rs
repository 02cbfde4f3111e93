//! Flow control's credits, and the mark of a framework thread.
//!
//! Every request that can wait anywhere in the framework holds a *credit* of its driver; a
//! driver has `max_in_flight` of them (see `crate::dispatch` for the whole picture). A
//! leaf: the request's travel state (`crate::request`) holds its credit, and the session,
//! dispatch and framework layers take and return them.
//!
//! Framework threads (return workers, the dispatch worker, a driver delivering
//! completions) never block on credits — that could deadlock the pipeline that frees them
//! — and take one beyond the limit instead; [`FrameworkContext`] marks such a thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

thread_local! {
    /// Set on framework threads and while a driver delivers completions: such threads must
    /// never block on credits (see the module docs).
    static FRAMEWORK_CONTEXT: Cell<bool> = const { Cell::new(false) };
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
