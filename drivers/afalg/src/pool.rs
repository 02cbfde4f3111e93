//! Asynchronous completion: a few worker threads, each with a bounded queue of its own.
//!
//! ```text
//!  process(req) ──try_send──► lane 0 queue ─► worker 0 ─► kernel (blocking syscalls) ─► ctx.done
//!      │   (round robin)      lane 1 queue ─► worker 1 ─► …
//!      └── every lane full: remember the session's context, answer Busy(req)
//!                            a worker that finished a request then calls unblock() on each
//! ```
//!
//! An AF_ALG request blocks its thread for the kernel's whole work; a pool lets the
//! submitter go on while a hardware engine works, and bounds the threads: no thread per
//! request. A lane per worker (a `sync_channel` each) needs no lock to receive; submitters
//! pick lanes round-robin and try each once.
//!
//! Only sessions backed by hardware use it by default (`RunMode::ByClass`): where the
//! kernel computes on the CPU, the hop to a worker cost more than it gave at every size
//! measured (cryptotest, `afalg:sync` against `afalg:pool`, Mb/s): QEMU TCG, Debian's
//! kernel, AES-GCM 16 B 2.70 vs 1.69, 1 KiB 113 vs 82, 64 KiB 256 vs 242; SHA-256 1 KiB 289
//! vs 134; UML, AES-GCM 1 KiB 52 vs 18. Not measured: io_uring (`IORING_OP_SENDMSG` /
//! `RECVMSG` on the operation socket), which would complete without threads of ours, but
//! whose Rust binding submits through `unsafe` (buffers must outlive the kernel's use of
//! them), and which runs a blocking AF_ALG receive on the kernel's own io-wq threads.
//!
//! Busy and unblock, without a lost wake-up: a submitter that finds every lane full first
//! records its context in `blocked`, then tries once more; a worker checks `blocked`
//! after each request, so either the retry found room or a later request's completion
//! sees the record. Extra `unblock` calls are harmless (ocf's contract).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use ocf::{Failed, Processed, Request, SessionContext};

use crate::session::SessionCore;
use crate::Shared;

/// One request for a worker.
pub(crate) struct Job {
    pub core: Arc<SessionCore>,
    pub req: Request,
    pub ctx: SessionContext,
}

/// The pool's counters.
#[derive(Default)]
pub(crate) struct PoolCounters {
    pub busy: AtomicU64,
    pub unblocks: AtomicU64,
    pub callback_panics: AtomicU64,
}

struct Blocked {
    any: AtomicBool,
    list: Mutex<Vec<SessionContext>>,
}

pub(crate) struct Pool {
    lanes: Vec<SyncSender<Job>>,
    next: AtomicUsize,
    blocked: Arc<Blocked>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    pub(crate) fn new(workers: usize, queue: usize, shared: Arc<Shared>) -> std::io::Result<Pool> {
        let blocked = Arc::new(Blocked { any: AtomicBool::new(false), list: Mutex::new(Vec::new()) });
        let per_lane = queue.div_ceil(workers).max(1);
        let mut lanes = Vec::with_capacity(workers);
        let mut threads = Vec::with_capacity(workers);
        for i in 0..workers {
            let (tx, rx) = sync_channel(per_lane);
            let (blocked, shared) = (blocked.clone(), shared.clone());
            let t = std::thread::Builder::new()
                .name(format!("ocf-afalg-{i}"))
                .spawn(move || work(rx, &blocked, &shared))?;
            lanes.push(tx);
            threads.push(t);
        }
        Ok(Pool { lanes, next: AtomicUsize::new(0), blocked, threads })
    }

    /// Queues the request on a lane with room, or answers Busy (see the module docs).
    pub(crate) fn submit(&self, job: Job, shared: &Shared) -> Processed {
        let job = match self.try_lanes(job) {
            Ok(()) => return Processed::Pending,
            Err(job) => job,
        };
        {
            let mut list = self.blocked.list.lock().unwrap_or_else(|p| p.into_inner());
            list.push(job.ctx.clone());
            self.blocked.any.store(true, Ordering::Release);
        }
        match self.try_lanes(job) {
            Ok(()) => Processed::Pending,
            Err(job) => {
                shared.pool.busy.fetch_add(1, Ordering::Relaxed);
                Processed::Busy(job.req)
            }
        }
    }

    fn try_lanes(&self, mut job: Job) -> Result<(), Job> {
        let n = self.lanes.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            match self.lanes[(start + i) % n].try_send(job) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(j) | TrySendError::Disconnected(j)) => job = j,
            }
        }
        Err(job)
    }
}

impl Drop for Pool {
    /// Closes the lanes; the workers finish what they hold and end. A worker cannot join
    /// itself (the last reference can go on a worker, when a completion drops the last
    /// session): that one ends on its own.
    fn drop(&mut self) {
        self.lanes.clear();
        let me = std::thread::current().id();
        for t in self.threads.drain(..) {
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}

fn work(rx: Receiver<Job>, blocked: &Blocked, shared: &Shared) {
    while let Ok(Job { core, mut req, ctx }) = rx.recv() {
        let outcome = match core.run(&mut req, &shared.errors) {
            Ok(()) => Ok(req),
            Err(e) => Err(Failed::new(e, req)),
        };
        drop(core);
        if catch_unwind(AssertUnwindSafe(|| ctx.done(outcome))).is_err() {
            shared.pool.callback_panics.fetch_add(1, Ordering::Relaxed);
        }
        drop(ctx);
        if blocked.any.load(Ordering::Acquire) {
            let waiting = {
                let mut list = blocked.list.lock().unwrap_or_else(|p| p.into_inner());
                blocked.any.store(false, Ordering::Release);
                std::mem::take(&mut *list)
            };
            for c in waiting {
                shared.pool.unblocks.fetch_add(1, Ordering::Relaxed);
                let _ = catch_unwind(AssertUnwindSafe(|| c.unblock()));
            }
        }
    }
}
