//! A lane: one IPsec-MB manager behind a lock, with the requests whose jobs it holds.
//!
//! A held request's job points into the request's own heap buffer, its IV field and the
//! session's key schedules; the request (with an `Arc` of the schedules) waits in a slot
//! of the lane until the manager returns its job, so that memory lives as long as the job.
//! A job that computes a tag writes it into the lane's scratch of its slot (one more for
//! the request in hand); [`crate::job::finish`] puts it in place or compares it.

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

/// The user id of the request in hand (never held in a slot).
pub const IN_HAND: u64 = u64::MAX;

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
    /// The tag each slot's job computes ([`MAX_HELD`] for the request in hand).
    tags: Box<[[u8; MAX_JOB_TAG]; MAX_HELD + 1]>,
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
            tags: Box::new([[0; MAX_JOB_TAG]; MAX_HELD + 1]),
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
        self.collect(n, &mut finished, &mut None);
        if finished.len() >= DELIVER_AT {
            out.append(&mut finished);
        }
        self.finished = finished;
    }

    /// Runs the job of the request in hand (`desc.user` = [`IN_HAND`]) and flushes:
    /// every held job completes into `out`; returns whether the one in hand succeeded
    /// (its tag, if any, is then in [`Lane::in_hand_tag`]).
    ///
    /// # Safety
    /// As [`Manager::submit`], until this returns.
    pub unsafe fn run_now(&mut self, mut desc: JobDesc, out: &mut Completions) -> bool {
        let mut mine = None;
        self.stats.run_now += 1;
        out.append(&mut self.finished);
        desc.tag = self.tags[MAX_HELD].as_mut_ptr();
        // SAFETY: the caller's promise; the flush below returns the job before we return.
        let n = unsafe { self.mgr.submit(&desc, &mut self.done) };
        self.collect(n, out, &mut mine);
        self.flush(out, &mut mine);
        mine.unwrap_or(false)
    }

    /// The tag the request in hand's job computed (see [`Lane::run_now`]).
    pub fn in_hand_tag(&mut self) -> &mut [u8; MAX_JOB_TAG] {
        &mut self.tags[MAX_HELD]
    }

    /// Completes every held job into `out`.
    pub fn flush(&mut self, out: &mut Completions, mine: &mut Option<bool>) {
        out.append(&mut self.finished);
        let n = self.mgr.flush(&mut self.done);
        self.generation += 1;
        self.stats.flushes += 1;
        self.collect(n, out, mine);
    }

    fn collect(&mut self, n: usize, out: &mut Completions, mine: &mut Option<bool>) {
        for d in &self.done[..n] {
            if d.user == IN_HAND {
                *mine = Some(d.ok != 0);
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
