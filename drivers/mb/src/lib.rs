//! # ocf-mb — the multi-buffer CPU driver
//!
//! Serial modes (AES-CBC encryption, 3DES, HMAC) cannot use the CPU's wide AES and SIMD
//! units on one buffer, but can on 8–16 buffers at once. Intel IPsec-MB does that behind
//! a job API; this driver puts ocf's "more follow" hint ([`ocf::Hint::more`]) in front of
//! it, as a card's driver puts it in front of its doorbell. Sessions: AES-CBC/CTR and
//! 3DES-CBC ciphers, HMAC-SHA1/SHA-256/384/512 alone or after one of those ciphers
//! (ESP's encrypt-then-MAC, one job per request), AES-GCM; whole messages only. What a
//! request is as a job, and which layouts one job covers, is in `job`.
//!
//! ```text
//!  process(req, hint) ── lane of this thread (Mutex<Lane>: IPsec-MB manager + held slots)
//!    │ no hint, nothing held ─► soft's session ─► Done
//!    │ hint.more, a job covers it, room (GCM: jobs held): submit job, hold it ─► Pending
//!    │     (jobs the manager returned meanwhile complete via SessionContext::done_batch)
//!    │ a job covers it: submit job, flush ─► Done(this request); every held one ─► done_batch
//!    └ no job covers it (cipher: run through with_views as above; others: flush if no
//!      hint, then soft's session) ─► Done
//!  flusher thread: parked while no lane holds anything; else every BOUND, flushes each
//!    lane that holds jobs and was not flushed since the last look (a MORE with no follower)
//!  process_run(run) ── a batch handed over whole (Session::run_batch): a run of one is a
//!    lone request (as above); else AES-CBC encryptions and 3DES-CBC ones both ways, in
//!    place, on a 16-lane engine (`cbc_runs`: cbc16, des16) ─► Done; every other request
//!    a job of this thread's lane (64 at most per flush), one flush ─► all Done; those no
//!    job covers as lone requests; nothing held
//! ```
//!
//! The run is the cheaper way in: the framework prepares the batch in one call, each
//! request on its fast path (no credit, no completion target, no callback), and the driver
//! needs neither to hold requests nor to wait for a last one. AES-128-CBC 16 × 1 KiB,
//! `taskset -c 1 target/release/examples/batch_cost`: 5.98 GB/s as a run against 3.73 with
//! the hint (soft 1.34), IPsec-MB's own job loop being 7.37.
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
//!   next request from any thread would leave a last batch waiting forever. The test
//!   (`tests/batching.rs`, 50 lone MOREs) asserts each is flushed within two of the
//!   flusher's waits ([`MbStats::flusher_waits`]) and prints the wall-clock worst: 372 µs
//!   in a release build, 1.2 ms in a debug build beside the other tests. The wake-up (a futex) comes only when a lane goes
//!   from empty to holding while the flusher is parked: once per batch, not per request.
//! - **Lock cost**: an uncontended `Mutex` lock + unlock measured 4.4 ns here
//!   (`examples/batch_cost`); per request the lane lock is taken once.
//! - **Only contiguous requests are held** (their pointers are stable while the request
//!   waits), in place or out of place (not cipher+MAC encryption out of place: `job`);
//!   segmented cipher requests run at once through `with_views`; other kinds, and
//!   layouts a job does not cover, on soft's session.
//! - **GCM is not held.** IPsec-MB completes a GCM job on submit, so holding it only adds
//!   the Pending path: AES-128-GCM 16 x 1 KiB held ran at 0.81-0.86x soft
//!   (`examples/batch_cost`, `taskset -c 1`); a GCM job with nothing held before it is run
//!   at once and answered `Done`: 0.97-1.05x (IPsec-MB alone, C loop: 132-138 ns per
//!   1 KiB job). With jobs held before it, it is held with them.
//! - Key material (AES and DES schedules, HMAC ipad/opad states, GCM key data) is made
//!   once per session into an `Arc` the held requests keep too, so a session freed with
//!   requests in flight still completes them; all of it is wiped on drop.

// The VAES-512 AES-CBC encrypt engine: runs use it (`cbc_runs`); the held path does not.
#[cfg(target_arch = "x86_64")]
mod cbc16;
mod cbc_runs;
// The throughput harness both 16-lane engines' measurements use.
#[cfg(all(test, target_arch = "x86_64"))]
mod benchkit;
// The AVX-512 VBMI 3DES-CBC engine: runs use it too (`cbc_runs`); the held path does not.
#[cfg(target_arch = "x86_64")]
mod des16;
mod ffi;
mod job;
mod lane;
#[cfg(target_arch = "x86_64")]
mod slots;
// What both 16-lane engines' tests share.
#[cfg(test)]
mod required;
#[cfg(all(test, target_arch = "x86_64"))]
mod testkit;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use ocf::{
    Capabilities, Driver, DriverSession, Error, Failed, Framework, Hint, Outcome, Priority, Processed,
    Request, SessionContext, SessionParams,
};

use crate::cbc_runs::CbcRuns;
use crate::ffi::Manager;
use crate::job::Keys;
use crate::lane::{job_failed, Completions, Lane, RUN, RUN_MAX};

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
    /// room, segmented (cipher sessions), or GCM with nothing held.
    pub run_now: u64,
    /// Lone requests (no hint, nothing held) run by the soft driver's session.
    pub lone: u64,
    /// Requests done in runs handed over whole (`run_batch`): as jobs, or by an engine.
    pub in_runs: u64,
    /// Of those, done by the 16-lane engines: AES-CBC encryptions on VAES-512 (`cbc16`),
    /// 3DES-CBC encryptions and decryptions on AVX-512 VBMI (`des16`).
    pub engine: u64,
    /// Manager flushes (each completes every job it holds).
    pub flushes: u64,
    /// Flushes by the flusher thread: held requests whose follower never came.
    pub timed_flushes: u64,
    /// The flusher's waits of [`FLUSH_BOUND`] (one per look at the lanes while any holds
    /// jobs): a held request with no follower is flushed at the end of the wait during
    /// which it was held, or of the next one if a flush came in between.
    pub flusher_waits: u64,
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
    /// [`MbStats::flusher_waits`].
    flusher_waits: AtomicU64,
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
            flusher_waits: AtomicU64::new(0),
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
        let start = MbStats {
            flusher_waits: self.shared.flusher_waits.load(Ordering::Relaxed),
            ..MbStats::default()
        };
        self.shared.lanes.iter().fold(start, |a, l| {
            let s = lock(l).stats;
            MbStats {
                held: a.held + s.held,
                run_now: a.run_now + s.run_now,
                lone: a.lone + s.lone,
                in_runs: a.in_runs + s.in_runs,
                engine: a.engine + s.engine,
                flushes: a.flushes + s.flushes,
                timed_flushes: a.timed_flushes + s.timed_flushes,
                flusher_waits: a.flusher_waits,
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
                self.flusher_waits.fetch_add(1, Ordering::Relaxed);
            }
            for (l, gen) in self.lanes.iter().zip(seen) {
                let mut out = completions();
                {
                    let mut lane = lock(l);
                    if lane.held() > 0 && (stopping || lane.generation == gen) {
                        let before = lane.held();
                        lane.flush(&mut out, &mut []);
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
        Capabilities {
            ciphers: job::CIPHERS.to_vec(),
            aeads: job::AEADS.to_vec(),
            macs: job::MACS.to_vec(),
            cipher_then_mac: true,
            // Without the hint `process` always answers Done (lone: soft's code; else a
            // flush), so such a request skips the framework's asynchronous set-up: a lone
            // AES-128-GCM 1 KiB request cost 1.18-1.25x soft's with it, 1.0x without.
            synchronous_without_hint: true,
            runs: true,
            ..Capabilities::default()
        }
    }

    fn probe_session(&self, params: &SessionParams) -> Option<Priority> {
        job::serves(params).then_some(Priority::AcceleratedSoftware)
    }

    fn new_session(
        &self,
        params: &SessionParams,
        ctx: SessionContext,
    ) -> Result<Box<dyn DriverSession>, Error> {
        let keys = Keys::new(self.shared.lane().manager(), params)?;
        let soft = ocf_soft::SoftDriver::new().new_session(params, ctx.clone())?;
        let cbc_runs = CbcRuns::new(params);
        Ok(Box::new(MbSession { soft, shared: self.shared.clone(), ctx, keys: Arc::new(keys), cbc_runs }))
    }
}

struct MbSession {
    /// Lone requests run here (synchronous: it never answers Pending), and those whose
    /// layout one job does not cover (see `job`).
    soft: Box<dyn DriverSession>,
    shared: Arc<Shared>,
    ctx: SessionContext,
    keys: Arc<Keys>,
    /// CBC of runs on an engine (AES-CBC encryption where the CPU has VAES-512, 3DES-CBC
    /// both ways where it has AVX-512 VBMI).
    cbc_runs: Option<CbcRuns>,
}

/// What became of a request of a run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Neither the engine nor a job took it: it runs on its own.
    Alone,
    Done,
    /// Its error is in the run's error list.
    Failed,
}

impl MbSession {
    /// A request on its own, as one without the hint: always finished at once (soft's code,
    /// or a job and a flush), which is what `synchronous_without_hint` promises.
    fn alone(&self, req: Request) -> Outcome {
        match self.process(req, Hint::default()) {
            Processed::Done(o) => o,
            _ => unreachable!("without the hint mb answers at once"),
        }
    }

    /// The requests of a run (at most [`RUN_MAX`]) still `Fate::Alone` (not taken by the
    /// engine), as jobs of this thread's lane, and one flush: each one's fate, and the
    /// error of each that failed. Requests no job covers (a layout of soft's, a bad op,
    /// nothing to do) stay `Alone`.
    fn run_jobs(
        &self,
        reqs: &mut [Request],
        fate: &mut [Fate; RUN_MAX],
        errors: &mut Vec<(usize, Error)>,
        out: &mut Completions,
        engine: usize,
    ) {
        let (mut ran, mut ok) = ([false; RUN_MAX], [false; RUN_MAX]);
        let mut lane = self.shared.lane();
        lane.stats.engine += engine as u64;
        lane.stats.in_runs += engine as u64;
        if engine == reqs.len() {
            // The engine took them all: no job, no flush (the lane only counts them).
            return;
        }
        let before = lane.held();
        let jobs = reqs.iter_mut().zip(&mut ran).enumerate().filter_map(|(i, (req, ran))| {
            if fate[i] != Fate::Alone {
                return None;
            }
            self.keys.check_op(req.op).ok()?;
            let empty = req.payload.as_ref().map_or(req.buf.is_empty(), |p| p.is_empty());
            let desc = if empty { None } else { self.keys.desc(req) }?;
            *ran = true;
            Some(ffi::JobDesc { user: RUN + i as u64, ..desc })
        });
        // SAFETY: each job points into a request of `reqs` (its heap buffers, its boxed IV,
        // tag and AAD fields) and `self.keys`; none moves or is touched until `run`
        // returns, which flushes every job back.
        unsafe { lane.run(jobs, &mut ok, out) };
        for (i, req) in reqs.iter_mut().enumerate().filter(|(i, _)| ran[*i]) {
            match if ok[i] { job::finish(req, lane.run_tag(i)) } else { Err(job_failed()) } {
                Ok(()) => fate[i] = Fate::Done,
                Err(e) => {
                    fate[i] = Fate::Failed;
                    errors.push((i, e));
                }
            }
        }
        lane.stats.in_runs += ran.iter().filter(|&&r| r).count() as u64;
        let after = lane.held();
        drop(lane);
        self.shared.account(before, after);
    }
}

impl DriverSession for MbSession {
    /// A run in hand ([`ocf::Session::run_batch`]): CBC on an engine, the rest as jobs of
    /// this thread's lane that one flush finishes; nothing is held, nothing waits for a
    /// follower.
    fn process_run(&self, run: &mut Vec<Request>, done: &mut Vec<Outcome>) {
        if let [_] = run.as_slice() {
            // A run of one is a lone request: soft's code (an engine's one lane ran 3DES at
            // 0.57x soft's; IPsec-MB's one-job flush AES-CBC at half of it).
            done.push(self.alone(run.pop().expect("one request")));
            return;
        }
        let mut out = completions();
        while !run.is_empty() {
            let n = run.len().min(RUN_MAX);
            // CBC on an engine first (AES encryption, 3DES), without the lane (`cbc_runs`).
            let mut taken = [false; RUN_MAX];
            let engine = self.cbc_runs.as_ref().map_or(0, |c| c.run(&mut run[..n], &mut taken));
            let mut fate = taken.map(|t| if t { Fate::Done } else { Fate::Alone });
            // (Allocates only when a request fails.)
            let mut errors = Vec::new();
            self.run_jobs(&mut run[..n], &mut fate, &mut errors, &mut out, engine);
            for (i, req) in run.drain(..n).enumerate() {
                done.push(match fate[i] {
                    Fate::Done => Ok(req),
                    Fate::Failed => {
                        let at = errors.iter().position(|(j, _)| *j == i).expect("a failed job's error");
                        Err(Failed::new(errors.swap_remove(at).1, req))
                    }
                    // Not a job of the run: on its own, as a request without the hint.
                    Fate::Alone => self.alone(req),
                });
            }
        }
        deliver(out);
    }

    fn process(&self, mut req: Request, hint: Hint) -> Processed {
        if let Err(e) = self.keys.check_op(req.op) {
            return Processed::Done(Err(Failed::new(e, req)));
        }
        let payload = req.payload.clone().unwrap_or(0..req.buf.len());
        if payload.is_empty() && !self.keys.tagged() {
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
        let desc = if payload.is_empty() { None } else { self.keys.desc(&mut req) };
        let before = lane.held();
        let desc = match desc {
            // A GCM job completes on submit: holding it gains nothing, and with nothing held
            // before it, it comes straight back (answered Done, without done_batch).
            Some(desc)
                if hint.more && lane.has_room() && !(self.keys.completes_on_submit() && before == 0) =>
            {
                // SAFETY: the job points into the request's heap buffers (contiguous, not
                // reallocated while held), its boxed IV, tag and AAD fields and `self.keys`;
                // the lane keeps the request and an `Arc` of the keys until the manager
                // returns the job.
                unsafe { lane.hold(desc, self.ctx.clone(), req, self.keys.clone(), &mut out) };
                let after = lane.held();
                drop(lane);
                self.shared.account(before, after);
                deliver(out);
                return Processed::Pending;
            }
            desc => desc,
        };
        let done = match desc {
            Some(desc) => {
                // SAFETY: as above, and `run_now` returns the job before it returns.
                let ok = unsafe { lane.run_now(desc, &mut out) };
                let tag = lane.in_hand_tag();
                Some(if ok { job::finish(&mut req, tag) } else { Err(job_failed()) })
            }
            None if !self.keys.tagged() => {
                let op = req.op;
                let ok = req.with_views(|v| {
                    let desc = self.keys.cipher_desc(op, v.payload, v.iv);
                    // SAFETY: the views live until `run_now` returns, and it flushes the job back.
                    unsafe { lane.run_now(desc, &mut out) }
                });
                Some(if ok { Ok(()) } else { Err(job_failed()) })
            }
            None => {
                // No job covers this layout: the held jobs are flushed (no hint: the run
                // ends here) and the request runs on soft's session.
                if !hint.more {
                    lane.flush(&mut out, &mut []);
                }
                None
            }
        };
        let after = lane.held();
        drop(lane);
        self.shared.account(before, after);
        deliver(out);
        match done {
            Some(Ok(())) => Processed::Done(Ok(req)),
            Some(Err(e)) => Processed::Done(Err(Failed::new(e, req))),
            None => self.soft.process(req, hint),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built with IPsec-MB, the driver registers; built without (`OCF_NO_IPSEC_MB=1`),
    /// `register` says it is unavailable, by name, and registers nothing, unless
    /// `OCF_REQUIRE_IPSEC_MB=1` says the machine has it: then that fails.
    #[test]
    fn register_says_whether_ipsec_mb_is_there() {
        let fw = Framework::new();
        let r = register(&fw);
        if crate::required::ipsec_mb() {
            let how = if cfg!(ocf_mb) { "built with it" } else { "built without it" };
            assert!(r.is_ok(), "OCF_REQUIRE_IPSEC_MB=1, but the driver ({how}) answers {r:?}");
        }
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
