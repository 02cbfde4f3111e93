//! A lane: one IPsec-MB manager behind a lock, with the requests whose jobs it holds.
//!
//! A held request's job points into the request's own heap buffer, its IV field and the
//! session's key schedules; the request (with an `Arc` of the schedules) waits in a slot
//! of the lane until the manager returns its job, so that memory lives as long as the job.
//! A job that computes a tag writes it into the lane's scratch of its slot (or of its
//! place in a run in hand: `RUN_MAX` more); [`crate::job::finish`] puts it in place or
//! compares it.

use std::sync::Arc;

use ocf::{Error, Failed, Outcome, Request, SessionContext};

use crate::ffi::{DoneEntry, JobDesc, Manager, MAX_JOBS, MAX_JOB_TAG};
use crate::job::{finish, Keys};

/// Requests a lane holds at most; one more is run at once with a flush. 64 keeps the
/// manager (128 jobs) from ever refusing and covers 4 rounds of its widest lanes (16).
pub const MAX_HELD: usize = 64;

/// Finished requests a lane keeps back while "more" keeps coming, to hand them over
/// together (one `done_batch`, one return-worker hand-over) instead of one per submit.
pub const DELIVER_AT: usize = 16;

/// User ids from here up are jobs of a run in hand (`RUN + i`: the `i`th), never held in a
/// slot; below it, a held request's slot.
pub const RUN: u64 = 1 << 32;

/// Jobs of a run submitted before a flush: with [`MAX_HELD`] held, the manager (128 jobs)
/// never refuses one.
pub const RUN_MAX: usize = 64;

/// The user id of the request in hand in [`Lane::run_now`]: a run of one.
pub const IN_HAND: u64 = RUN;

struct Held {
    ctx: SessionContext,
    req: Request,
    _keys: Arc<Keys>,
}

pub struct Lane {
    mgr: Manager,
    slots: Vec<Option<Held>>,
    free: Vec<u32>,
    done: [DoneEntry; MAX_JOBS],
    /// The tag each slot's job computes, then each job's of a run in hand (`MAX_HELD + i`).
    tags: Box<[[u8; MAX_JOB_TAG]; MAX_HELD + RUN_MAX]>,
    /// Requests the manager finished during a run of MORE, not yet delivered (at most
    /// [`DELIVER_AT`] - 1 between calls).
    finished: Completions,
    /// Flushes so far: the flusher flushes a lane whose count did not move in its bound.
    pub generation: u64,
    /// Counters (under the lane's lock: no shared cache line per request).
    pub stats: crate::MbStats,
}

/// Completions to deliver after the lane's lock is released (a callback may submit again).
pub type Completions = Vec<(SessionContext, Outcome)>;

impl Lane {
    pub fn new(mgr: Manager) -> Lane {
        Lane {
            mgr,
            slots: (0..MAX_HELD).map(|_| None).collect(),
            free: (0..MAX_HELD as u32).rev().collect(),
            done: [DoneEntry::default(); MAX_JOBS],
            tags: Box::new([[0; MAX_JOB_TAG]; MAX_HELD + RUN_MAX]),
            finished: Vec::with_capacity(MAX_JOBS),
            generation: 0,
            stats: crate::MbStats::default(),
        }
    }

    pub fn manager(&mut self) -> &mut Manager {
        &mut self.mgr
    }

    /// Requests held now, in the manager or finished and kept back.
    pub fn held(&self) -> usize {
        MAX_HELD - self.free.len() + self.finished.len()
    }

    pub fn has_room(&self) -> bool {
        !self.free.is_empty()
    }

    /// Holds `req` as the job `desc` (whose `user` this sets). Returns requests the
    /// manager finished meanwhile.
    ///
    /// # Safety
    /// `desc`'s pointers point into `req`'s heap buffer and IV and into `keys`, which stay
    /// put while the request waits here.
    pub unsafe fn hold(
        &mut self,
        mut desc: JobDesc,
        ctx: SessionContext,
        req: Request,
        keys: Arc<Keys>,
        out: &mut Completions,
    ) {
        let slot = self.free.pop().expect("hold is called only with room");
        desc.user = u64::from(slot);
        desc.tag = self.tags[slot as usize].as_mut_ptr();
        self.slots[slot as usize] = Some(Held { ctx, req, _keys: keys });
        self.stats.held += 1;
        // SAFETY: the caller's promise; the slot keeps the memory until the job returns.
        let n = unsafe { self.mgr.submit(&desc, &mut self.done) };
        let mut finished = std::mem::take(&mut self.finished);
        self.collect(n, &mut finished, &mut []);
        if finished.len() >= DELIVER_AT {
            out.append(&mut finished);
        }
        self.finished = finished;
    }

    /// Runs the job of the request in hand (a run of one) and flushes: every held job
    /// completes into `out`; returns whether the one in hand succeeded (its tag, if any, is
    /// then in [`Lane::in_hand_tag`]).
    ///
    /// # Safety
    /// As [`Manager::submit`], until this returns.
    pub unsafe fn run_now(&mut self, desc: JobDesc, out: &mut Completions) -> bool {
        let mut mine = [false];
        self.stats.run_now += 1;
        // SAFETY: the caller's promise.
        unsafe { self.run(std::iter::once(JobDesc { user: IN_HAND, ..desc }), &mut mine, out) };
        mine[0]
    }

    /// The tag the request in hand's job computed (see [`Lane::run_now`]).
    pub fn in_hand_tag(&mut self) -> &mut [u8; MAX_JOB_TAG] {
        self.run_tag(0)
    }

    /// The tag the `i`th job of the last run computed (see [`Lane::run`]).
    pub fn run_tag(&mut self, i: usize) -> &mut [u8; MAX_JOB_TAG] {
        &mut self.tags[MAX_HELD + i]
    }

    /// Runs the jobs of a run in hand (at most [`RUN_MAX`], user ids `RUN + i` with `i` <
    /// `ok.len()`): submits each, flushes, and sets `ok[i]` for each that succeeded (its
    /// tag, if any, in [`Lane::run_tag`]). Held jobs that come back meanwhile complete into
    /// `out`.
    ///
    /// # Safety
    /// As [`Manager::submit`] for every job, until this returns.
    pub unsafe fn run(
        &mut self,
        jobs: impl Iterator<Item = JobDesc>,
        ok: &mut [bool],
        out: &mut Completions,
    ) {
        out.append(&mut self.finished);
        for mut desc in jobs.take(RUN_MAX) {
            debug_assert!(desc.user >= RUN && desc.user - RUN < RUN_MAX as u64);
            desc.tag = self.tags[MAX_HELD + (desc.user - RUN) as usize].as_mut_ptr();
            // SAFETY: the caller's promise; the flush below returns the job before we return.
            let n = unsafe { self.mgr.submit(&desc, &mut self.done) };
            self.collect(n, out, ok);
        }
        self.flush(out, ok);
    }

    /// Completes every held job into `out` (and a run's into `ok`).
    pub fn flush(&mut self, out: &mut Completions, ok: &mut [bool]) {
        out.append(&mut self.finished);
        let n = self.mgr.flush(&mut self.done);
        self.generation += 1;
        self.stats.flushes += 1;
        self.collect(n, out, ok);
    }

    fn collect(&mut self, n: usize, out: &mut Completions, ok: &mut [bool]) {
        for d in &self.done[..n] {
            if d.user >= RUN {
                if let Some(k) = ok.get_mut((d.user - RUN) as usize) {
                    *k = d.ok != 0;
                }
                continue;
            }
            let slot = d.user as usize;
            let Some(Held { ctx, mut req, .. }) = self.slots.get_mut(slot).and_then(Option::take) else {
                continue;
            };
            self.free.push(slot as u32);
            let outcome = match (d.ok != 0).then(|| finish(&mut req, &mut self.tags[slot])) {
                Some(Ok(())) => Ok(req),
                Some(Err(e)) => Err(Failed::new(e, req)),
                None => Err(Failed::new(job_failed(), req)),
            };
            out.push((ctx, outcome));
        }
    }
}

/// A job the library refused (its checks run before it touches the data).
pub fn job_failed() -> Error {
    Error::DriverFailure("mb: IPsec-MB refused the job")
}
