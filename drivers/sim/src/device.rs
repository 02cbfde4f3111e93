//! The simulated card: its descriptor ring, doorbell, serial engine and interrupt logic, and
//! the thread that plays the hardware.
//!
//! Submitters and the device share one [`Ring`] under one mutex; a submitter holds it for a
//! few comparisons and one push. Everything slow — computing results, waiting for the
//! modelled completion time, running completion callbacks — happens on the device thread
//! without the lock, on state only it touches ([`Engine`]).
//!
//! Faults: a paused card ([`Device::pause`]) leaves everything where it is — the device
//! thread waits, untimed, for the resume, and no interrupt that had not begun is delivered;
//! the resume moves every time the model holds on by the pause's length (the clock stood
//! still). The injected hardware fault ([`Device::fail`]) is read where the engine takes a
//! request up: instead of computing its result it finishes it as a failure.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ocf::{DriverSession, Error, Failed, Hint, Outcome, Processed, Request, SessionContext};

use crate::profile::{Coalesce, Cost};
use crate::rng::CardRng;
use crate::SimStats;

/// How long posted descriptors may wait for their doorbell before the device fetches them
/// anyway: a dispatcher that said "more follow" and then sent nothing must not stall the
/// ring for ever.
pub(crate) const DOORBELL_TIMEOUT_NS: u64 = 1_000_000;

/// The device spins, rather than sleeps, through the last this-many nanoseconds before a
/// deadline: a spin this short costs little CPU on a two-core machine and makes on-time
/// wake-ups exact.
const SPIN_NS: u64 = 4_000;

/// Timed waits end late even with the timer slack at 1 ns: on the reference VM by 30-45 µs
/// (median 33-41 µs for `nanosleep` and futex waits of 100 µs). The device learns how late
/// (a moving average of its own timed waits) and asks to wake that much early, so that its
/// waits end on time instead of one wake-up latency after every deadline. Observations
/// are capped so that one preempted wait does not teach it to wake far too early.
const MAX_LEARNED_LATENCY_NS: u64 = 200_000;

/// What the device has learned about its own wake-up latency.
struct WakeLatency {
    average_ns: u64,
}

impl WakeLatency {
    fn learn(&mut self, asked_ns: u64, woke_ns: u64) {
        let late = woke_ns.saturating_sub(asked_ns).min(MAX_LEARNED_LATENCY_NS);
        // An exponential moving average over about eight waits.
        self.average_ns = self.average_ns - self.average_ns / 8 + late / 8;
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one sim session gives the engine: what computes its real results and how long the
/// engine takes over each request.
pub(crate) struct SessionEngine {
    pub(crate) work: Work,
    pub(crate) cost: Cost,
}

/// What computes a session's results.
pub(crate) enum Work {
    /// A software session (it owns, and wipes, the keys).
    Soft(Box<dyn DriverSession>),
    /// The card's random number generator.
    Random(Arc<CardRng>),
}

impl Work {
    fn process(&self, mut req: Request) -> Processed {
        match self {
            Work::Soft(soft) => soft.process(req, Hint::default()),
            Work::Random(rng) => match req.with_views(|v| rng.fill(v.payload)) {
                Ok(()) => Processed::Done(Ok(req)),
                Err(e) => Processed::Done(Err(Failed::new(e, req))),
            },
        }
    }
}

/// One engine's shape: its queue, its interrupt coalescing, its faultiness.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceConfig {
    pub(crate) ring: usize,
    pub(crate) coalesce: Option<Coalesce>,
    pub(crate) corrupt: Option<u64>,
}

/// A command descriptor: one request in a ring slot.
struct Descriptor {
    req: Request,
    /// How the completion reaches the framework (and how an unblock does).
    ctx: SessionContext,
    session: Arc<SessionEngine>,
    /// Engine time for this request (`setup + bytes / rate`).
    cost_ns: u64,
    /// When it was posted.
    arrival_ns: u64,
    /// When the doorbell that covers it was rung: the device cannot start on a descriptor it
    /// has not been told about.
    visible_ns: u64,
}

/// The state shared by submitters and the device.
struct Ring {
    /// Posted descriptors the device has not fetched yet, oldest first; the first `kicked` of
    /// them are covered by a doorbell.
    posted: VecDeque<Descriptor>,
    kicked: usize,
    /// Descriptors the device has fetched and not yet completed: they still hold their slots.
    in_device: usize,
    /// A submitter was answered Busy since the last unblock.
    needs_unblock: bool,
    /// `Some(deadline)` while the device sleeps (`u64::MAX`: until woken).
    sleeping_until: Option<u64>,
    /// A wake-up is already on its way to the sleeping device.
    wake_sent: bool,
    shutdown: bool,
    /// `Some(since)` while the card is paused.
    paused_since: Option<u64>,
    /// Paused time the engine has not moved its due times on by yet (the device thread
    /// takes it after a resume).
    pause_shift_ns: u64,
    stats: SimStats,
}

impl Ring {
    fn occupancy(&self) -> usize {
        self.posted.len() + self.in_device
    }

    /// Makes every posted descriptor visible to the device as of `now`. Returns whether
    /// there were any.
    fn cover(&mut self, now: u64) -> bool {
        if self.kicked == self.posted.len() {
            return false;
        }
        for d in self.posted.range_mut(self.kicked..) {
            d.visible_ns = now;
        }
        self.kicked = self.posted.len();
        true
    }

    /// A submitter rings the doorbell for every posted descriptor not yet covered. Returns
    /// whether the device must be woken.
    fn kick(&mut self, now: u64) -> bool {
        if !self.cover(now) {
            return false;
        }
        self.stats.doorbells += 1;
        self.wake_device()
    }

    fn wake_device(&mut self) -> bool {
        if self.sleeping_until.is_some() && !self.wake_sent {
            self.wake_sent = true;
            return true;
        }
        false
    }
}

/// One simulated card.
pub(crate) struct Device {
    ring: Mutex<Ring>,
    /// The injected hardware fault is on ([`Device::fail`]).
    failing: AtomicBool,
    /// The device waits here; submitters notify it (the doorbell, and shutdown).
    doorbell: Condvar,
    config: DeviceConfig,
    epoch: Instant,
}

impl Device {
    pub(crate) fn new(config: DeviceConfig) -> Device {
        let slots = config.ring;
        Device {
            ring: Mutex::new(Ring {
                // Pre-sized: the request path never allocates.
                posted: VecDeque::with_capacity(slots),
                kicked: 0,
                in_device: 0,
                needs_unblock: false,
                sleeping_until: None,
                wake_sent: false,
                shutdown: false,
                paused_since: None,
                pause_shift_ns: 0,
                stats: SimStats { ring_size: slots, ..SimStats::default() },
            }),
            failing: AtomicBool::new(false),
            doorbell: Condvar::new(),
            config,
            epoch: Instant::now(),
        }
    }

    /// Nanoseconds since the device was made: the clock of the timing model.
    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    pub(crate) fn stats(&self) -> SimStats {
        let ring = lock(&self.ring);
        SimStats { in_flight: ring.occupancy(), ..ring.stats }
    }

    /// The processing function's body: post a descriptor, or answer Busy.
    pub(crate) fn post(
        &self,
        req: Request,
        hint: Hint,
        ctx: &SessionContext,
        session: &Arc<SessionEngine>,
    ) -> Processed {
        let cost_ns = session.cost.ns(req.payload_range().len());
        let now = self.now_ns();
        let mut ring = lock(&self.ring);
        if ring.shutdown {
            // Only a driver session kept past its driver can get here: the framework frees
            // sessions before it drops their driver.
            drop(ring);
            return Processed::Done(Err(Failed::new(Error::DriverGone, req)));
        }
        if ring.occupancy() >= self.config.ring {
            ring.stats.busy += 1;
            ring.needs_unblock = true;
            // Whatever is posted must get going, or no slot would ever free.
            let wake = ring.kick(now);
            drop(ring);
            if wake {
                self.doorbell.notify_one();
            }
            return Processed::Busy(req);
        }
        ring.posted.push_back(Descriptor {
            req,
            ctx: ctx.clone(),
            session: session.clone(),
            cost_ns,
            arrival_ns: now,
            visible_ns: now,
        });
        ring.stats.accepted += 1;
        let occupancy = ring.occupancy();
        ring.stats.ring_high_water = ring.stats.ring_high_water.max(occupancy);
        let wake = if !hint.more || occupancy == self.config.ring {
            ring.kick(now)
        } else {
            // No doorbell yet. A device asleep past this descriptor's doorbell timeout must
            // wake once to arm it.
            matches!(ring.sleeping_until, Some(t) if t > now.saturating_add(DOORBELL_TIMEOUT_NS))
                && ring.wake_device()
        };
        drop(ring);
        if wake {
            self.doorbell.notify_one();
        }
        Processed::Pending
    }

    /// Starts shutdown: the device finishes what it holds and its thread returns.
    pub(crate) fn shut_down(&self) {
        lock(&self.ring).shutdown = true;
        self.doorbell.notify_one();
    }

    /// Stalls the card until [`Device::resume`] (see `SimDriver::pause`).
    pub(crate) fn pause(&self) {
        let now = self.now_ns();
        let mut ring = lock(&self.ring);
        if ring.paused_since.is_none() {
            ring.paused_since = Some(now);
            ring.stats.paused = true;
        }
    }

    /// Ends a pause: every time the model holds moves on by the pause's length, as if the
    /// clock had stood still — descriptors posted during it count as posted now — and the
    /// device is woken.
    pub(crate) fn resume(&self) {
        let now = self.now_ns();
        let mut ring = lock(&self.ring);
        let Some(since) = ring.paused_since.take() else { return };
        let stood = now.saturating_sub(since);
        ring.stats.paused = false;
        ring.pause_shift_ns = ring.pause_shift_ns.saturating_add(stood);
        let frozen = |t: u64| t.max(since).saturating_add(stood);
        for d in ring.posted.iter_mut() {
            d.arrival_ns = frozen(d.arrival_ns);
            d.visible_ns = frozen(d.visible_ns);
        }
        drop(ring);
        self.doorbell.notify_one();
    }

    /// Turns the injected hardware fault on or off (see `SimDriver::fail`).
    pub(crate) fn fail(&self, on: bool) {
        self.failing.store(on, Ordering::Relaxed);
    }

    /// The device thread.
    pub(crate) fn run(&self) {
        precise_timers();
        let mut engine = Engine::new(self.config.ring, self.config.coalesce, self.config.corrupt);
        let mut latency = WakeLatency { average_ns: 0 };
        let mut ring = lock(&self.ring);
        loop {
            // Paused: nothing moves until the resume (or shutdown, which overrides it). No
            // submitter wakes a paused device (it is not marked asleep); resume does.
            if ring.paused_since.is_some() && !ring.shutdown {
                ring = self.doorbell.wait(ring).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let shift = std::mem::take(&mut ring.pause_shift_ns);
            if shift > 0 {
                engine.shift(shift);
            }
            let now = self.now_ns();
            // The doorbell safety net; at shutdown, everything posted is fetched.
            if ring.kicked < ring.posted.len() {
                let oldest = ring.posted[ring.kicked].arrival_ns;
                if ring.shutdown || now >= oldest.saturating_add(DOORBELL_TIMEOUT_NS) {
                    if !ring.shutdown {
                        ring.stats.doorbell_timeouts += 1;
                    }
                    ring.cover(now);
                }
            }
            // Fetch the descriptors the doorbell covers into the engine.
            let fetched = ring.kicked;
            if fetched > 0 {
                for d in ring.posted.drain(..fetched) {
                    engine.accept(d);
                }
                ring.kicked = 0;
                ring.in_device += fetched;
            }
            let shutdown = ring.shutdown;

            // An interrupt is due: deliver.
            if let Some(irq) = engine.interrupt(now, shutdown) {
                drop(ring);
                engine.deliver(self, irq, now);
                ring = lock(&self.ring);
                continue;
            }
            // Compute the next result ahead of its time.
            if engine.has_work() {
                drop(ring);
                engine.compute_one(self.failing.load(Ordering::Relaxed));
                ring = lock(&self.ring);
                continue;
            }
            if shutdown && ring.posted.is_empty() && engine.is_empty() {
                return;
            }

            // Nothing to do until the next interrupt or doorbell timeout, or a doorbell.
            let doorbell_deadline =
                ring.posted.front().map(|d| d.arrival_ns.saturating_add(DOORBELL_TIMEOUT_NS));
            let deadline = [engine.next_interrupt(), doorbell_deadline].into_iter().flatten().min();
            match deadline {
                Some(d) if d <= now.saturating_add(SPIN_NS) => {
                    drop(ring);
                    while self.now_ns() < d {
                        std::hint::spin_loop();
                    }
                    ring = lock(&self.ring);
                }
                _ => {
                    ring.sleeping_until = Some(deadline.unwrap_or(u64::MAX));
                    ring.wake_sent = false;
                    ring = match deadline {
                        Some(d) => {
                            // Wake early by the learned latency; a wait shorter than 1 µs
                            // would only cost a system call.
                            let sleep_ns = (d - now).saturating_sub(latency.average_ns).max(1_000);
                            let (ring, result) = self
                                .doorbell
                                .wait_timeout(ring, Duration::from_nanos(sleep_ns))
                                .unwrap_or_else(PoisonError::into_inner);
                            if result.timed_out() {
                                latency.learn(now + sleep_ns, self.now_ns());
                            }
                            ring
                        }
                        None => self.doorbell.wait(ring).unwrap_or_else(PoisonError::into_inner),
                    };
                    ring.sleeping_until = None;
                }
            }
        }
    }
}

/// Sets this thread's timer slack to 1 ns, so that timed waits end when asked rather than up
/// to the default 50 µs later. Best effort: without it, completions are merely later.
/// Runs the calling thread (the device thread) on host CPU `cpu` only (`cpu=N`).
pub(crate) fn pin_to_cpu(cpu: usize) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{sched_setaffinity, CpuSet};
        use nix::unistd::Pid;
        let mut set = CpuSet::new();
        set.set(cpu).map_err(|e| format!("cpu={cpu}: {e}"))?;
        sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| format!("cpu={cpu}: {e}"))
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(format!("cpu={cpu}: pinning a thread is only done on Linux"))
    }
}

fn precise_timers() {
    #[cfg(target_os = "linux")]
    {
        let _ = nix::sys::prctl::set_timerslack(1);
    }
}

/// A request the engine has fetched, waiting to be computed.
struct Fetched {
    req: Request,
    ctx: SessionContext,
    session: Arc<SessionEngine>,
    due_ns: u64,
}

/// A finished request, waiting for its interrupt. `outcome` is `None` only if the software
/// session left the request pending, i.e. delivers it itself through the same context.
struct Finished {
    outcome: Option<Outcome>,
    ctx: SessionContext,
    due_ns: u64,
    /// Failed by the injected fault.
    injected: bool,
}

/// What a card with the injected fault on answers (see `SimDriver::fail`).
pub(crate) const INJECTED_FAULT: Error = Error::DriverFailure("sim: injected device fault");

/// A faulty card's wrong answer: flips the first byte of the separate tag or digest if
/// there is one, else the first byte of the payload's result.
fn corrupt(req: &mut Request) {
    if let Some(&first) = req.tag().first() {
        let mut tag = [0u8; ocf::MAX_TAG_LEN];
        let n = req.tag().len();
        tag[..n].copy_from_slice(req.tag());
        tag[0] = first ^ 0x01;
        req.set_tag(&tag[..n]);
        return;
    }
    let start = if req.out.is_some() { req.out_offset } else { req.payload_range().start };
    if req.payload_range().is_empty() {
        return;
    }
    let fields = &mut **req;
    let buf = match fields.out.as_mut() {
        Some(out) => out,
        None => &mut fields.buf,
    };
    let mut byte = [0u8; 1];
    buf.copy_out(start..start + 1, &mut byte);
    buf.copy_in(start, &[byte[0] ^ 0x01]);
}

/// An interrupt to raise now: how many completions it delivers, and when the model says it
/// fires (`None` at shutdown, when the device flushes without waiting).
#[derive(Clone, Copy)]
struct Interrupt {
    count: usize,
    modelled_ns: Option<u64>,
}

/// The device thread's own state: the serial engine's queue, in completion order.
struct Engine {
    /// Finished requests, then fetched ones; due times never decrease along the two.
    finished: VecDeque<Finished>,
    fetched: VecDeque<Fetched>,
    /// When the engine finishes the last request it accepted.
    free_at_ns: u64,
    coalesce: Option<Coalesce>,
    /// A faulty card's fault rate (`corrupt=N`) and the results computed so far.
    corrupt: Option<u64>,
    computed: u64,
}

impl Engine {
    fn new(slots: usize, coalesce: Option<Coalesce>, corrupt: Option<u64>) -> Engine {
        Engine {
            finished: VecDeque::with_capacity(slots),
            fetched: VecDeque::with_capacity(slots),
            free_at_ns: 0,
            coalesce,
            corrupt,
            computed: 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.finished.is_empty() && self.fetched.is_empty()
    }

    fn has_work(&self) -> bool {
        !self.fetched.is_empty()
    }

    /// The timing model: a serial engine. Model times are absolute, so a late device
    /// catches up instead of pushing every later completion back.
    fn accept(&mut self, d: Descriptor) {
        let due_ns = self.free_at_ns.max(d.visible_ns).saturating_add(d.cost_ns);
        self.free_at_ns = due_ns;
        self.fetched.push_back(Fetched { req: d.req, ctx: d.ctx, session: d.session, due_ns });
    }

    fn due(&self, i: usize) -> Option<u64> {
        match self.finished.get(i) {
            Some(f) => Some(f.due_ns),
            None => self.fetched.get(i - self.finished.len()).map(|f| f.due_ns),
        }
    }

    /// When the next interrupt fires: at the oldest completion's due time, or with
    /// coalescing at the earlier of `count` completions and `time_ns` after the oldest.
    fn next_interrupt(&self) -> Option<u64> {
        let first = self.due(0)?;
        Some(match self.coalesce {
            None => first,
            Some(Coalesce { count, time_ns }) => {
                let by_time = first.saturating_add(time_ns);
                self.due(count.saturating_sub(1)).map_or(by_time, |by_count| by_count.min(by_time))
            }
        })
    }

    /// The interrupt to raise at `now`, if any: the finished completions that are due (all
    /// of them at shutdown), at most `coalesce_count`.
    fn interrupt(&self, now: u64, shutdown: bool) -> Option<Interrupt> {
        if shutdown {
            let count = self.finished.len();
            return (count > 0).then_some(Interrupt { count, modelled_ns: None });
        }
        let at = self.next_interrupt()?;
        if now < at {
            return None;
        }
        let count = match self.coalesce.map(|c| c.count) {
            None => self.finished.iter().take_while(|f| f.due_ns <= now).count(),
            Some(group) => {
                let due = (0..group).take_while(|&i| self.due(i).is_some_and(|d| d <= now)).count();
                // A late device (the CPU slower than the model) computes the whole group
                // before it raises the interrupt, rather than raising one per result.
                if due > self.finished.len() {
                    return None;
                }
                due
            }
        };
        // Zero: the oldest is due but not computed yet.
        (count > 0).then_some(Interrupt { count, modelled_ns: Some(at) })
    }

    /// Moves every due time on by `ns` (the length of a pause).
    fn shift(&mut self, ns: u64) {
        for f in self.finished.iter_mut() {
            f.due_ns = f.due_ns.saturating_add(ns);
        }
        for f in self.fetched.iter_mut() {
            f.due_ns = f.due_ns.saturating_add(ns);
        }
        self.free_at_ns = self.free_at_ns.saturating_add(ns);
    }

    /// Computes the oldest fetched request's real result with the software session; with
    /// the injected fault on (`failing`), fails it instead, its buffers untouched.
    fn compute_one(&mut self, failing: bool) {
        let Some(Fetched { req, ctx, session, due_ns }) = self.fetched.pop_front() else {
            return;
        };
        if failing {
            let outcome = Some(Err(Failed::new(INJECTED_FAULT, req)));
            self.finished.push_back(Finished { outcome, ctx, due_ns, injected: true });
            return;
        }
        self.computed += 1;
        let faulty = self.corrupt.is_some_and(|n| self.computed % n == 0);
        let outcome = match session.work.process(req) {
            Processed::Done(Ok(mut req)) if faulty => {
                corrupt(&mut req);
                Some(Ok(req))
            }
            Processed::Done(outcome) => Some(outcome),
            // The software driver is synchronous and never busy; should that change, its
            // Busy is this device's failure, and its Pending means it completes the request
            // itself through the context it was given.
            Processed::Busy(req) => {
                Some(Err(Failed::new(Error::DriverFailure("sim: the software engine was busy"), req)))
            }
            Processed::Pending => None,
        };
        self.finished.push_back(Finished { outcome, ctx, due_ns, injected: false });
    }

    /// Raises an interrupt: frees the slots, completes the requests, and ends a Busy period.
    /// A card paused since the interrupt was decided raises nothing (it is raised after the
    /// resume).
    fn deliver(&mut self, device: &Device, irq: Interrupt, now: u64) {
        let unblock = {
            let mut ring = lock(&device.ring);
            if ring.paused_since.is_some() && !ring.shutdown {
                return;
            }
            ring.in_device -= irq.count;
            let injected = self.finished.iter().take(irq.count).filter(|f| f.injected).count();
            let s = &mut ring.stats;
            s.interrupts += 1;
            s.completed += irq.count as u64;
            s.injected_failures += injected as u64;
            if let Some(at) = irq.modelled_ns {
                let late = now.saturating_sub(at);
                s.late_total_ns = s.late_total_ns.saturating_add(late.saturating_mul(irq.count as u64));
                s.late_max_ns = s.late_max_ns.max(late);
            }
            let unblock = ring.needs_unblock;
            if unblock {
                ring.needs_unblock = false;
                ring.stats.unblocks += 1;
            }
            unblock
        };
        let mut unblock_ctx = None;
        let mut panics = 0;
        for _ in 0..irq.count {
            let Some(Finished { outcome, ctx, .. }) = self.finished.pop_front() else { break };
            if let Some(outcome) = outcome {
                // A panicking callback must not take the device (and every request in its
                // ring) down with it. (One `SessionContext::done_batch` per interrupt would
                // hand the callbacks to ocf's return workers in one go, but a panic inside
                // it leaves the batch's thread-local collection behind and every later
                // completion from this thread is lost; `done` per request until then.)
                if catch_unwind(AssertUnwindSafe(|| ctx.done(outcome))).is_err() {
                    panics += 1;
                }
            }
            if unblock && unblock_ctx.is_none() {
                unblock_ctx = Some(ctx);
            }
        }
        // After the completions, as FreeBSD's hifn and ubsec interrupt handlers do.
        if let Some(ctx) = unblock_ctx {
            ctx.unblock();
        }
        if panics > 0 {
            lock(&device.ring).stats.callback_panics += panics;
        }
    }
}

#[cfg(test)]
mod model_tests {
    use std::sync::Mutex;

    use ocf::{CipherAlg, Framework, Key, Op, SessionParams};

    use super::*;
    use crate::testkit::{ContextCatcher, Nothing};

    /// The timing model is a serial engine whose times are absolute: requests visible at
    /// once are due one cost apart from that instant, and computing them late (a device
    /// thread that woke late) moves none of them, so lateness does not add up over a
    /// queue; a request that becomes visible after the engine went idle starts at its own
    /// visibility. (`tests/timing.rs` checks the lower bounds on the wall clock; an upper
    /// bound there would time the scheduler.)
    #[test]
    fn model_times_are_absolute() {
        let fw = Framework::new();
        let catcher = Arc::new(ContextCatcher(Mutex::new(None)));
        fw.register(catcher.clone()).unwrap();
        let _session =
            fw.new_session_on("context-catcher", &SessionParams::cipher(CipherAlg::Null, Key::empty()));
        let ctx = catcher.0.lock().unwrap().take().expect("a context");
        let session = Arc::new(SessionEngine {
            work: Work::Soft(Box::new(Nothing)),
            cost: Cost::Bytes { setup_ns: 100_000, rate: 1_000_000_000 },
        });
        let descriptor = |visible_ns: u64, cost_ns: u64| Descriptor {
            req: Request::new(Op::Encrypt, vec![0; 64]),
            ctx: ctx.clone(),
            session: session.clone(),
            cost_ns,
            arrival_ns: visible_ns,
            visible_ns,
        };
        const COST: u64 = 100_064; // 100 µs + 64 B at 1 GB/s, as tests/timing.rs's card
        let mut engine = Engine::new(64, None, None);
        for _ in 0..40 {
            engine.accept(descriptor(1_000, COST));
        }
        let due: Vec<u64> = (0..40).map(|i| engine.due(i).unwrap()).collect();
        assert_eq!(due, (1..=40).map(|i| 1_000 + i * COST).collect::<Vec<_>>());
        for _ in 0..20 {
            engine.compute_one(false);
        }
        assert_eq!(
            (0..40).map(|i| engine.due(i).unwrap()).collect::<Vec<_>>(),
            due,
            "computing moved nothing"
        );
        // Visible while the engine is still busy: behind the queue.
        engine.accept(descriptor(2_000, COST));
        assert_eq!(engine.due(40), Some(1_000 + 41 * COST));
        // Visible after the engine went idle: from its own visibility.
        engine.accept(descriptor(10_000_000, COST));
        assert_eq!(engine.due(41), Some(10_000_000 + COST));
    }
}
