//! # ocf-mb — the multi-buffer CPU driver
//!
//! Serial cipher modes (AES-CBC encryption above all) cannot use the CPU's wide AES units
//! on one buffer, but can on 8–16 buffers at once. Intel IPsec-MB does that behind a job
//! API; this driver puts ocf's "more follow" hint ([`ocf::Hint::more`]) in front of it, as
//! a card's driver puts it in front of its doorbell.
//!
//! ```text
//!  process(req, hint) ── lane of this thread (Mutex<Lane>: IPsec-MB manager + held slots)
//!    │ hint.more, contiguous, in place, room:  submit job, hold the request ─► Pending
//!    │     (jobs the manager returned meanwhile complete via SessionContext::done_batch)
//!    └ otherwise: submit job, flush ─► Done(this request); every held one ─► done_batch
//!  flusher thread: parked while no lane holds anything; else every BOUND, flushes each
//!    lane that holds jobs and was not flushed since the last look (a MORE with no follower)
//! ```
//!
//! Choices, and why:
//! - **Lanes, one lock each.** Managers are not thread-safe. A thread keeps one lane (given
//!   round-robin on its first request; as many lanes as CPUs), so locks are uncontended
//!   unless threads outnumber CPUs; the flusher and free sessions need to reach every
//!   lane's held requests, which per-thread managers without a lock would not allow.
//! - **A lone request is never held**: without the hint and with nothing held in its
//!   lane it runs on the soft driver's session (aws-lc; IPsec-MB's one-job flush cost twice
//!   as much per 1 KiB here) and is answered `Done`. Without the hint but with jobs held,
//!   it joins them as one more job and the lane is flushed.
//! - **A promised follower that never comes** is bounded by the flusher thread (woken once
//!   per batch when a lane starts holding, then every [`FLUSH_BOUND`]): flushing on the
//!   next request from any thread would leave a last batch waiting forever. Measured
//!   (`tests/batching.rs`, 50 lone MOREs): worst 372 µs in a release build, 1.2 ms in a
//!   debug build beside the other tests. The wake-up (a futex) comes only when a lane goes
//!   from empty to holding while the flusher is parked: once per batch, not per request.
//! - **Lock cost**: an uncontended `Mutex` lock + unlock measured 4.4 ns here
//!   (`examples/batch_cost`); per request the lane lock is taken once.
//! - **Only contiguous, in-place requests are held** (their pointers are stable while the
//!   request waits); out-of-place or segmented ones run at once through `with_views`.
//! - Keys are expanded once per session into an `Arc` the held requests keep too, so a
//!   session freed with requests in flight still completes them; schedules are wiped on drop.

// The VAES-512 AES-CBC encrypt engine. `process` does not use it yet: only its tests and
// its measurement reach it, hence `dead_code` outside tests.
#[cfg(target_arch = "x86_64")]
#[cfg_attr(not(test), allow(dead_code))]
mod cbc16;
mod ffi;
mod lane;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use ocf::{
    Capabilities, CipherAlg, Driver, DriverSession, Error, Failed, Framework, Hint, Mode, Op, Priority,
    Processed, Request, SessionContext, SessionParams,
};

use crate::ffi::{JobDesc, JobMode, Manager, Schedule};
use crate::lane::{job_failed, Completions, Lane, IN_HAND};

/// The name the driver registers under.
pub const NAME: &str = "mb";

/// How long the flusher waits before flushing a lane whose held jobs got no follower; a
/// held request completes within about twice this (plus the timer's slack).
pub const FLUSH_BOUND: Duration = Duration::from_micros(200);

/// Whether IPsec-MB was built in and starts on this CPU.
pub fn available() -> bool {
    Manager::new().is_some()
}

/// Registers an mb driver with `fw`; `Error::DriverFailure` when IPsec-MB is unavailable.
pub fn register(fw: &Framework) -> Result<(), Error> {
    register_driver(fw).map(drop)
}

/// As [`register`], and returns the driver too, for its [`MbDriver::stats`].
pub fn register_driver(fw: &Framework) -> Result<Arc<MbDriver>, Error> {
    let d = Arc::new(MbDriver::new()?);
    fw.register(d.clone())?;
    Ok(d)
}

/// The driver's counters, summed over its lanes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MbStats {
    /// Requests held in a manager (answered Pending).
    pub held: u64,
    /// Requests run at once through a flush (answered Done): no hint with jobs held, no
    /// room, or not contiguous in place.
    pub run_now: u64,
    /// Lone requests (no hint, nothing held) run by the soft driver's session.
    pub lone: u64,
    /// Manager flushes (each completes every job it holds).
    pub flushes: u64,
    /// Flushes by the flusher thread: held requests whose follower never came.
    pub timed_flushes: u64,
}

/// Expanded keys of one session (kept by its held requests too).
pub struct Keys {
    enc: Schedule,
    dec: Schedule,
    key_len: u64,
}

struct Shared {
    lanes: Vec<Mutex<Lane>>,
    /// Lanes holding at least one job.
    busy: AtomicUsize,
    /// The flusher is parked (or about to be) until a lane starts holding.
    parked: AtomicBool,
    stop: AtomicBool,
    /// The flusher thread, to unpark.
    flusher: OnceLock<Thread>,
}

/// The driver.
pub struct MbDriver {
    shared: Arc<Shared>,
    flusher: Option<JoinHandle<()>>,
}

impl MbDriver {
    /// One lane per CPU and the flusher thread.
    pub fn new() -> Result<MbDriver, Error> {
        let unavailable = || Error::DriverFailure("mb: Intel IPsec-MB is unavailable");
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let lanes = (0..n)
            .map(|_| Manager::new().map(|m| Mutex::new(Lane::new(m))))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(unavailable)?;
        let shared = Arc::new(Shared {
            lanes,
            busy: AtomicUsize::new(0),
            parked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            flusher: OnceLock::new(),
        });
        let on_thread = shared.clone();
        let flusher = std::thread::Builder::new()
            .name("ocf-mb-flush".to_owned())
            .spawn(move || on_thread.flusher())
            .map_err(|_| Error::DriverFailure("mb: cannot start the flusher thread"))?;
        let _ = shared.flusher.set(flusher.thread().clone());
        Ok(MbDriver { shared, flusher: Some(flusher) })
    }

    /// The counters of every lane together.
    pub fn stats(&self) -> MbStats {
        self.shared.lanes.iter().fold(MbStats::default(), |a, l| {
            let s = lock(l).stats;
            MbStats {
                held: a.held + s.held,
                run_now: a.run_now + s.run_now,
                lone: a.lone + s.lone,
                flushes: a.flushes + s.flushes,
                timed_flushes: a.timed_flushes + s.timed_flushes,
            }
        })
    }
}

impl Shared {
    /// This thread's lane.
    fn lane(&self) -> MutexGuard<'_, Lane> {
        thread_local!(static MINE: Cell<usize> = const { Cell::new(usize::MAX) });
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let mut i = MINE.get();
        if i == usize::MAX {
            i = NEXT.fetch_add(1, Ordering::Relaxed);
            MINE.set(i);
        }
        lock(&self.lanes[i % self.lanes.len()])
    }

    /// Counts lanes that start or stop holding jobs (`before`, `after`: held counts), and
    /// wakes the flusher when one starts and it is parked: at most once per batch.
    fn account(&self, before: usize, after: usize) {
        match (before > 0, after > 0) {
            (false, true) => {
                self.busy.fetch_add(1, Ordering::SeqCst);
                if self.parked.swap(false, Ordering::SeqCst) {
                    if let Some(t) = self.flusher.get() {
                        t.unpark();
                    }
                }
            }
            (true, false) => {
                self.busy.fetch_sub(1, Ordering::SeqCst);
            }
            _ => {}
        }
    }

    fn flusher(&self) {
        loop {
            let stopping = self.stop.load(Ordering::SeqCst);
            if !stopping && self.busy.load(Ordering::SeqCst) == 0 {
                self.parked.store(true, Ordering::SeqCst);
                if self.busy.load(Ordering::SeqCst) == 0 && !self.stop.load(Ordering::SeqCst) {
                    std::thread::park();
                }
                self.parked.store(false, Ordering::SeqCst);
                continue;
            }
            let seen: Vec<u64> = self.lanes.iter().map(|l| lock(l).generation).collect();
            if !stopping {
                std::thread::park_timeout(FLUSH_BOUND);
            }
            for (l, gen) in self.lanes.iter().zip(seen) {
                let mut out = completions();
                {
                    let mut lane = lock(l);
                    if lane.held() > 0 && (stopping || lane.generation == gen) {
                        let before = lane.held();
                        lane.flush(&mut out, &mut None);
                        lane.stats.timed_flushes += 1;
                        self.account(before, lane.held());
                    }
                }
                deliver(out);
            }
            if stopping && self.busy.load(Ordering::SeqCst) == 0 {
                return;
            }
        }
    }
}

fn lock(l: &Mutex<Lane>) -> MutexGuard<'_, Lane> {
    // A panic in a callback never happens under the lock (completions are delivered
    // after it is released); a poisoned lane is still consistent.
    l.lock().unwrap_or_else(|p| p.into_inner())
}

thread_local! {
    /// This thread's completion list, kept between calls: a lane that returns a job on
    /// every submit (a batch longer than the manager's lanes) would otherwise allocate a
    /// list per request. A callback that submits again (re-entrant) finds it taken and
    /// starts an empty one.
    static SPARE: Cell<Completions> = const { Cell::new(Vec::new()) };
}

/// An empty completion list (this thread's kept one when it is free).
fn completions() -> Completions {
    SPARE.with(Cell::take)
}

/// Delivers completions after the lane's lock is released, and keeps the list.
fn deliver(mut out: Completions) {
    if !out.is_empty() {
        SessionContext::done_batch(out.drain(..));
    }
    SPARE.with(|c| c.set(out));
}

impl Drop for MbDriver {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.flusher.take() {
            t.thread().unpark();
            // The last reference can go on the flusher itself, as it delivers a completion
            // whose context held the driver: it then ends on its own.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

impl Driver for MbDriver {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { ciphers: vec![CipherAlg::AesCbc, CipherAlg::AesCtr], ..Capabilities::default() }
    }

    fn probe_session(&self, params: &SessionParams) -> Option<Priority> {
        match &params.mode {
            Mode::Cipher { alg: CipherAlg::AesCbc | CipherAlg::AesCtr, .. } if !params.multipart => {
                Some(Priority::AcceleratedSoftware)
            }
            _ => None,
        }
    }

    fn new_session(
        &self,
        params: &SessionParams,
        ctx: SessionContext,
    ) -> Result<Box<dyn DriverSession>, Error> {
        let (alg, key) = match &params.mode {
            Mode::Cipher { alg: alg @ (CipherAlg::AesCbc | CipherAlg::AesCtr), key } if !params.multipart => {
                (*alg, key)
            }
            Mode::Cipher { alg, .. } => return Err(Error::UnsupportedCipher(*alg)),
            _ => return Err(Error::InvalidParams("mb: only AES-CBC and AES-CTR cipher sessions")),
        };
        let mut keys = Keys { enc: Schedule([0; 240]), dec: Schedule([0; 240]), key_len: key.len() as u64 };
        if !self.shared.lane().manager().expand(key.as_bytes(), &mut keys.enc, &mut keys.dec) {
            return Err(Error::BadKeyLength { what: "mb: AES key", got: key.len(), allowed: &[16, 24, 32] });
        }
        let soft = ocf_soft::SoftDriver::new().new_session(params, ctx.clone())?;
        Ok(Box::new(MbSession {
            soft,
            shared: self.shared.clone(),
            ctx,
            keys: Arc::new(keys),
            ctr: alg == CipherAlg::AesCtr,
        }))
    }
}

struct MbSession {
    /// Lone requests run here (synchronous: it never answers Pending).
    soft: Box<dyn DriverSession>,
    shared: Arc<Shared>,
    ctx: SessionContext,
    keys: Arc<Keys>,
    ctr: bool,
}

impl MbSession {
    fn mode(&self, op: Op) -> Result<JobMode, Error> {
        match (op, self.ctr) {
            (Op::Encrypt | Op::Decrypt, true) => Ok(JobMode::Ctr),
            (Op::Encrypt, false) => Ok(JobMode::CbcEncrypt),
            (Op::Decrypt, false) => Ok(JobMode::CbcDecrypt),
            (op, _) => Err(Error::BadOperation { op: op.name(), mode: "cipher" }),
        }
    }

    fn desc(&self, mode: JobMode, data: &mut [u8], iv: &[u8]) -> JobDesc {
        JobDesc {
            src: data.as_ptr(),
            dst: data.as_mut_ptr(),
            len: data.len() as u64,
            iv: iv.as_ptr(),
            iv_len: iv.len() as u64,
            enc_keys: self.keys.enc.0.as_ptr().cast(),
            dec_keys: self.keys.dec.0.as_ptr().cast(),
            key_len: self.keys.key_len,
            mode,
            user: IN_HAND,
        }
    }
}

impl DriverSession for MbSession {
    fn process(&self, mut req: Request, hint: Hint) -> Processed {
        let mode = match self.mode(req.op) {
            Ok(m) => m,
            Err(e) => return Processed::Done(Err(Failed::new(e, req))),
        };
        let payload = req.payload.clone().unwrap_or(0..req.buf.len());
        if payload.is_empty() {
            return Processed::Done(Ok(req));
        }
        let mut lane = self.shared.lane();
        if !hint.more && lane.held() == 0 {
            // A lone request: IPsec-MB's one-lane flush ran AES-128-CBC 1 KiB at half of
            // aws-lc's speed here (5,364 against 10,586 Mb/s through cryptotest --batch 1),
            // so it goes to the soft driver's session (same keys, expanded once there too).
            lane.stats.lone += 1;
            drop(lane);
            return self.soft.process(req, hint);
        }
        let mut out = completions();
        let holdable = hint.more && req.out.is_none() && req.buf.as_contiguous().is_some();
        if holdable && lane.has_room() {
            let before = lane.held();
            let iv: *const [u8] = req.iv();
            let data = &mut req.buf.as_contiguous_mut().expect("checked contiguous")[payload];
            // SAFETY: `iv` points into the request's boxed fields, which do not move when
            // the `Request` (a box) moves; only a reborrow for the descriptor.
            let desc = self.desc(mode, data, unsafe { &*iv });
            // SAFETY: the job points into the request's heap buffer (contiguous, in place,
            // not reallocated while held), its boxed IV field and `self.keys`; the lane
            // keeps the request and an `Arc` of the keys until the manager returns the job.
            unsafe { lane.hold(desc, self.ctx.clone(), req, self.keys.clone(), &mut out) };
            let after = lane.held();
            drop(lane);
            self.shared.account(before, after);
            deliver(out);
            return Processed::Pending;
        }
        let before = lane.held();
        let ok = req.with_views(|v| {
            let desc = self.desc(mode, v.payload, v.iv);
            // SAFETY: the views live until `run_now` returns, and it flushes the job back.
            unsafe { lane.run_now(&desc, &mut out) }
        });
        drop(lane);
        self.shared.account(before, 0);
        deliver(out);
        Processed::Done(if ok { Ok(req) } else { Err(Failed::new(job_failed(), req)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built with IPsec-MB, the driver registers; built without (`OCF_NO_IPSEC_MB=1`),
    /// `register` says it is unavailable, by name, and registers nothing.
    #[test]
    fn register_says_whether_ipsec_mb_is_there() {
        let fw = Framework::new();
        let r = register(&fw);
        if cfg!(ocf_mb) {
            assert!(r.is_ok(), "{r:?}");
            assert!(available());
            assert!(fw.drivers().iter().any(|d| d.name == NAME));
        } else {
            assert_eq!(r, Err(Error::DriverFailure("mb: Intel IPsec-MB is unavailable")));
            assert!(!available());
            assert!(fw.drivers().is_empty());
        }
    }
}
