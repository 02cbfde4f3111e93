//! Dispatch under load, with test drivers whose results are checkable (NULL cipher, RFC
//! 2410: output = input) and whose timing we control: batching and the "more follow" hint,
//! ordered completion, flow control with a ring that fills, bounded memory under sustained
//! overload, driver detach under load, and waits racing immediate completions.
//!
//! The paper's own experiment (28 threads on a Hifn 7951) runs against the simulated
//! accelerator in `drivers/sim/tests/`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use ocf::{
    Callback, Capabilities, CipherAlg, Config, Driver, DriverSession, Error, Flags, Framework, Hint, Key, Op,
    Outcome, Priority, Processed, Request, SessionContext, SessionParams,
};

/// How long a test waits for something that must happen: generous, since other work shares
/// the machine; a wait returns as soon as its event comes.
const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until `cond` holds, polling every millisecond; fails naming `what` after
/// [`PATIENCE`].
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "waited {PATIENCE:?} for {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// An asynchronous device with `slots` descriptors and one engine thread that completes
/// each request after `delay`, in arrival order or (with `shuffle`) out of order, and none
/// while `hold` is set. Full ring: Busy, and `unblock` when a slot frees. Records every
/// hint it is given.
struct Ring {
    name: &'static str,
    priority: Priority,
    slots: usize,
    delay: Duration,
    shuffle: bool,
    state: Arc<RingState>,
    engine: Mutex<Option<thread::JoinHandle<()>>>,
}

#[derive(Default)]
struct RingState {
    ring: Mutex<RingQueue>,
    kick: Condvar,
    hints_more: AtomicU64,
    hints_last: AtomicU64,
    completed: AtomicU64,
    stop: AtomicBool,
    /// A stalled engine: it takes nothing from the ring while set.
    hold: AtomicBool,
}

#[derive(Default)]
struct RingQueue {
    items: VecDeque<(Request, SessionContext)>,
    said_busy: bool,
    high_water: usize,
}

impl Ring {
    fn new(
        name: &'static str,
        priority: Priority,
        slots: usize,
        delay: Duration,
        shuffle: bool,
    ) -> Arc<Ring> {
        let state = Arc::new(RingState::default());
        let st = state.clone();
        let engine = thread::spawn(move || engine(&st, delay, shuffle));
        Arc::new(Ring { name, priority, slots, delay, shuffle, state, engine: Mutex::new(Some(engine)) })
    }
}

fn engine(st: &RingState, delay: Duration, shuffle: bool) {
    let mut turn = 0u64;
    loop {
        let (req, ctx, unblock) = {
            let mut q = st.ring.lock().unwrap();
            while q.items.is_empty() || st.hold.load(Ordering::SeqCst) {
                if st.stop.load(Ordering::SeqCst) {
                    return;
                }
                q = st.kick.wait_timeout(q, Duration::from_millis(5)).unwrap().0;
            }
            // Out of order: sometimes take the newest instead of the oldest.
            turn += 1;
            let (req, ctx) = if shuffle && turn % 3 == 0 {
                q.items.pop_back().unwrap()
            } else {
                q.items.pop_front().unwrap()
            };
            let unblock = std::mem::take(&mut q.said_busy);
            (req, ctx, unblock)
        };
        if !delay.is_zero() {
            thread::sleep(delay);
        }
        st.completed.fetch_add(1, Ordering::SeqCst);
        ctx.done(Ok(req));
        if unblock {
            ctx.unblock();
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        self.state.kick.notify_all();
        if let Some(h) = self.engine.lock().unwrap().take() {
            h.join().unwrap();
        }
    }
}

struct RingSession {
    slots: usize,
    state: Arc<RingState>,
    ctx: SessionContext,
}

impl Driver for Ring {
    fn name(&self) -> &str {
        self.name
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { ciphers: vec![CipherAlg::Null], ..Default::default() }
    }
    fn probe_session(&self, _: &SessionParams) -> Option<Priority> {
        Some(self.priority)
    }
    fn new_session(&self, _: &SessionParams, ctx: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        let _ = (self.delay, self.shuffle);
        Ok(Box::new(RingSession { slots: self.slots, state: self.state.clone(), ctx }))
    }
}

impl DriverSession for RingSession {
    fn process(&self, req: Request, hint: Hint) -> Processed {
        let counter = if hint.more { &self.state.hints_more } else { &self.state.hints_last };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut q = self.state.ring.lock().unwrap();
        if q.items.len() >= self.slots {
            q.said_busy = true;
            self.state.kick.notify_one();
            return Processed::Busy(req);
        }
        q.items.push_back((req, self.ctx.clone()));
        q.high_water = q.high_water.max(q.items.len());
        if !hint.more {
            self.state.kick.notify_one();
        }
        Processed::Pending
    }
}

/// A synchronous driver that finishes every request at once.
struct Inline(&'static str, Priority);

struct InlineSession;

impl Driver for Inline {
    fn name(&self) -> &str {
        self.0
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { ciphers: vec![CipherAlg::Null], synchronous: true, ..Default::default() }
    }
    fn probe_session(&self, _: &SessionParams) -> Option<Priority> {
        Some(self.1)
    }
    fn new_session(&self, _: &SessionParams, _: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(InlineSession))
    }
}

impl DriverSession for InlineSession {
    fn process(&self, req: Request, _: Hint) -> Processed {
        Processed::Done(Ok(req))
    }
}

fn params() -> SessionParams {
    SessionParams::cipher(CipherAlg::Null, Key::empty())
}

/// A request whose buffer encodes `i`, so the result can be checked.
fn request(i: u64) -> Request {
    let mut r = Request::new(Op::Encrypt, i.to_le_bytes().to_vec());
    r.user = i;
    r
}

/// Collects outcomes: checks each, records the order of `user` ids, and counts.
#[derive(Default)]
struct Collector {
    order: Mutex<Vec<u64>>,
    bad: AtomicU64,
    done: AtomicU64,
}

impl Collector {
    fn callback(self: &Arc<Self>) -> Callback {
        let me = self.clone();
        Arc::new(move |o: Outcome| {
            match o {
                Ok(r) if r.buf.to_vec() == r.user.to_le_bytes() => me.order.lock().unwrap().push(r.user),
                _ => {
                    me.bad.fetch_add(1, Ordering::SeqCst);
                }
            }
            me.done.fetch_add(1, Ordering::SeqCst);
        })
    }

    fn wait_for(&self, n: u64) {
        wait_until(&format!("{n} completions"), || self.done.load(Ordering::SeqCst) >= n);
        // Nothing completes twice: none more in a moment (a hint only: an absence cannot be
        // waited for; the tests whose ids are unique check the ids themselves).
        thread::sleep(Duration::from_millis(20));
        assert_eq!(self.done.load(Ordering::SeqCst), n, "every request completes exactly once");
    }
}

#[test]
fn a_batch_reaches_the_driver_with_the_more_follow_hint() {
    let fw = Framework::with_config(config());
    let ring = Ring::new("ring", Priority::Hardware, 1024, Duration::ZERO, false);
    fw.register(ring.clone()).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let c = Arc::new(Collector::default());
    let cb = c.callback();
    s.submit_batch((0..100).map(request), &cb);
    c.wait_for(100);
    assert_eq!(c.bad.load(Ordering::SeqCst), 0);
    let (more, last) =
        (ring.state.hints_more.load(Ordering::SeqCst), ring.state.hints_last.load(Ordering::SeqCst));
    assert_eq!(more + last, 100);
    assert!(last >= 1 && more >= 90, "one doorbell per batch, not per request: more={more} last={last}");
    let mut got = c.order.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
}

/// Direct dispatch with [`Flags::MORE`]: the submitter's own thread hands the driver every
/// request of its run with the hint but the last (no dispatch worker, no thread hop).
#[test]
fn direct_dispatch_passes_the_submitters_more_follow_hint() {
    let fw = Framework::with_config(config());
    let ring = Ring::new("ring", Priority::Hardware, 1024, Duration::ZERO, false);
    fw.register(ring.clone()).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let c = Arc::new(Collector::default());
    let cb = c.callback();
    for i in 0..10 {
        let mut r = request(i);
        if i < 9 {
            r.flags = Flags::MORE;
        }
        s.submit(r, &cb);
    }
    c.wait_for(10);
    let (more, last) =
        (ring.state.hints_more.load(Ordering::SeqCst), ring.state.hints_last.load(Ordering::SeqCst));
    assert_eq!((more, last), (9, 1), "the hint as the submitter gave it");
}

#[test]
fn a_batchable_request_goes_through_the_dispatch_worker() {
    let fw = Framework::with_config(config());
    fw.register(Arc::new(Inline("inline", Priority::Software))).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = seen.clone();
    let cb: Callback = Arc::new(move |o: Outcome| {
        o.unwrap();
        sink.lock().unwrap().push(thread::current().name().unwrap_or("").to_owned());
    });
    // Batched with an immediate callback: the callback runs where the driver completed
    // it, which is the dispatch worker.
    s.submit(request(1).with_flags(Flags::BATCH | Flags::CALLBACK_IMMEDIATE), &cb);
    // Not batched, immediate: the submitter's own thread.
    s.submit(request(2).with_flags(Flags::CALLBACK_IMMEDIATE), &cb);
    wait_until("two callbacks", || seen.lock().unwrap().len() >= 2);
    let seen = seen.lock().unwrap().clone();
    assert!(seen.contains(&"ocf-dispatch".to_owned()), "{seen:?}");
    assert!(seen.contains(&thread::current().name().unwrap_or("").to_owned()), "{seen:?}");
}

#[test]
fn ordered_sessions_deliver_in_submit_order_even_when_the_device_does_not() {
    let fw = Framework::with_config(config());
    let ring = Ring::new("ring", Priority::Hardware, 64, Duration::from_micros(50), true);
    fw.register(ring).unwrap();
    let n = 300;

    // Control: the device really completes out of order, so the check below can fail.
    let plain = fw.new_session(&params()).unwrap();
    let c = Arc::new(Collector::default());
    let cb = c.callback();
    for i in 0..n {
        plain.submit(request(i).with_flags(Flags::CALLBACK_IMMEDIATE), &cb);
    }
    c.wait_for(n);
    assert_ne!(*c.order.lock().unwrap(), (0..n).collect::<Vec<_>>(), "the test device must reorder");

    // Ordered: immediate callbacks and return-worker callbacks, mixed with a blocking wait.
    let ordered = fw.new_session(&params().ordered()).unwrap();
    for flags in [Flags::CALLBACK_IMMEDIATE, Flags::NONE] {
        let c = Arc::new(Collector::default());
        let cb = c.callback();
        for i in 0..n {
            ordered.submit(request(i).with_flags(flags), &cb);
        }
        assert_eq!(ordered.run(request(n)).unwrap().user, n);
        c.wait_for(n);
        assert_eq!(c.bad.load(Ordering::SeqCst), 0);
        assert_eq!(*c.order.lock().unwrap(), (0..n).collect::<Vec<_>>(), "flags {flags:?}");
    }
}

#[test]
fn a_full_ring_restarts_requests_and_loses_none() {
    let fw = Framework::with_config(config());
    let ring = Ring::new("ring", Priority::Hardware, 4, Duration::from_micros(20), false);
    fw.register(ring.clone()).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let c = Arc::new(Collector::default());
    let cb = c.callback();
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let (s, cb) = (s.clone(), cb.clone());
            thread::spawn(move || {
                for i in 0..200 {
                    s.submit(request(t * 1000 + i), &cb);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    c.wait_for(1600);
    assert_eq!(c.bad.load(Ordering::SeqCst), 0);
    let st = fw.driver_stats("ring").unwrap();
    assert!(st.flow.restarts > 0 && st.flow.blocked_periods > 0, "{:?}", st.flow);
    assert_eq!((st.ops, st.errors.total(), st.flow.held, st.flow.in_flight), (1600, 0, 0, 0));
    assert!(ring.state.ring.lock().unwrap().high_water <= 4, "the ring never overflows");
}

#[test]
fn memory_stays_bounded_under_sustained_overload() {
    // Submitters far faster than the device, 62 times the limit of requests (a count, not a
    // time: however the threads are scheduled, the device is overloaded): submit must wait,
    // queues must stay within the limit, and every request must complete.
    let limit = 64;
    let fw = Framework::with_config(Config { max_in_flight: limit, ..config() });
    let ring = Ring::new("slow", Priority::Hardware, 8, Duration::from_micros(100), false);
    fw.register(ring).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let c = Arc::new(Collector::default());
    let cb = c.callback();
    let per_thread = 1000u64;
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (s, cb) = (s.clone(), cb.clone());
            thread::spawn(move || {
                for i in 0..per_thread {
                    let flags = if i % 2 == 0 { Flags::BATCH } else { Flags::NONE };
                    s.submit(request(t << 32 | i).with_flags(flags), &cb);
                }
            })
        })
        .collect();
    // While it runs, nothing in flight exceeds the limit.
    let mut peak = 0;
    while !threads.iter().all(|t| t.is_finished()) {
        let st = fw.driver_stats("slow").unwrap();
        peak = peak.max(st.flow.in_flight);
        thread::sleep(Duration::from_millis(5));
    }
    for t in threads {
        t.join().unwrap();
    }
    let n = per_thread * 4;
    c.wait_for(n);
    assert_eq!(c.bad.load(Ordering::SeqCst), 0);
    let st = fw.driver_stats("slow").unwrap();
    let fs = fw.stats();
    assert!(peak <= limit, "in flight {peak} > limit {limit}");
    assert!(st.flow.in_flight_high_water <= limit, "{:?}", st.flow);
    assert_eq!(st.flow.overcommits, 0);
    assert!(st.flow.submit_waits > 0, "the submitters were made to wait: {:?}", st.flow);
    assert!(st.flow.held_high_water <= limit && fs.dispatch_queue_high_water <= limit);
    assert!(fs.return_queue_high_water <= limit);
}

#[test]
fn detach_under_load_moves_sessions_and_loses_nothing() {
    // The drain may take as long as the test's own patience: the device is released below
    // only once the detach has moved the sessions.
    let fw = Framework::with_config(Config { drain_timeout: PATIENCE, ..config() });
    let ring = Ring::new("dev", Priority::Hardware, 8, Duration::from_micros(30), false);
    ring.state.hold.store(true, Ordering::SeqCst);
    fw.register(ring.clone()).unwrap();
    fw.register(Arc::new(Inline("cpu", Priority::Software))).unwrap();
    let sessions: Vec<_> = (0..4).map(|_| fw.new_session(&params()).unwrap()).collect();
    assert!(sessions.iter().all(|s| s.driver_name() == "dev"));
    let c = Arc::new(Collector::default());
    let cb = c.callback();
    let per_thread = 3000u64;
    let threads: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(t, s)| {
            let (s, cb) = (s.clone(), cb.clone());
            thread::spawn(move || {
                for i in 0..per_thread {
                    let flags = if i % 3 == 0 { Flags::BATCH } else { Flags::NONE };
                    s.submit(request((t as u64) << 32 | i).with_flags(flags), &cb);
                }
            })
        })
        .collect();
    // Detach while requests are in the device (and, as the policy routes them, queued or
    // held behind its full ring): the device is stalled until the detach has moved every
    // session, so its share is at most its ring (8) whatever the scheduling, and it
    // finishes what it holds after the detach began.
    wait_until("a request in the device", || !ring.state.ring.lock().unwrap().items.is_empty());
    thread::scope(|scope| {
        let detach = scope.spawn(|| fw.unregister("dev"));
        wait_until("the sessions to move", || sessions.iter().all(|s| s.driver_name() == "cpu"));
        ring.state.hold.store(false, Ordering::SeqCst);
        ring.state.kick.notify_all();
        detach.join().unwrap().unwrap();
    });
    for t in threads {
        t.join().unwrap();
    }
    let n = per_thread * 4;
    c.wait_for(n);
    assert_eq!(c.bad.load(Ordering::SeqCst), 0, "every request completed correctly");
    assert!(sessions.iter().all(|s| s.driver_name() == "cpu"));
    let total: u64 = sessions.iter().map(|s| s.stats().ops).sum();
    assert_eq!(total, n);
    let dev_done = ring.state.completed.load(Ordering::SeqCst);
    assert!(dev_done > 0 && dev_done < n, "the load really was split: dev did {dev_done} of {n}");
    let mut got = c.order.lock().unwrap().clone();
    got.sort();
    got.dedup();
    assert_eq!(got.len() as u64, n, "none lost, none twice");
}

#[test]
fn a_wait_never_misses_a_completion_that_beats_it() {
    // A device that completes instantly, so the completion races the caller into its wait;
    // and immediate callbacks racing the submitter's return.
    let fw = Framework::with_config(config());
    fw.register(Ring::new("fast", Priority::Hardware, 2, Duration::ZERO, false)).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let threads: Vec<_> = (0..2u64)
        .map(|t| {
            let s = s.clone();
            thread::spawn(move || {
                for i in 0..3000 {
                    let id = t << 32 | i;
                    assert_eq!(s.run(request(id)).unwrap().user, id);
                }
            })
        })
        .collect();
    let c = Arc::new(Collector::default());
    let cb = c.callback();
    for i in 0..3000 {
        s.submit(request(i).with_flags(Flags::CALLBACK_IMMEDIATE), &cb);
    }
    for t in threads {
        t.join().unwrap();
    }
    c.wait_for(3000);
    assert_eq!(c.bad.load(Ordering::SeqCst), 0);
}

/// A device that keeps requests until told to raise one interrupt for all of them.
#[derive(Default)]
struct Coalescing {
    pending: Arc<Mutex<Vec<(SessionContext, Request)>>>,
}

struct CoalescingSession {
    pending: Arc<Mutex<Vec<(SessionContext, Request)>>>,
    ctx: SessionContext,
}

impl Driver for Coalescing {
    fn name(&self) -> &str {
        "coalescing"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { ciphers: vec![CipherAlg::Null], ..Default::default() }
    }
    fn probe_session(&self, _: &SessionParams) -> Option<Priority> {
        Some(Priority::Hardware)
    }
    fn new_session(&self, _: &SessionParams, ctx: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(CoalescingSession { pending: self.pending.clone(), ctx }))
    }
}

impl DriverSession for CoalescingSession {
    fn process(&self, req: Request, _: Hint) -> Processed {
        self.pending.lock().unwrap().push((self.ctx.clone(), req));
        Processed::Pending
    }
}

#[test]
fn one_interrupt_completes_many_requests() {
    let fw = Framework::with_config(config());
    let dev = Arc::new(Coalescing::default());
    fw.register(dev.clone()).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let c = Arc::new(Collector::default());
    let cb = c.callback();
    for i in 0..50 {
        s.submit(
            request(i).with_flags(if i % 2 == 0 { Flags::CALLBACK_IMMEDIATE } else { Flags::NONE }),
            &cb,
        );
    }
    assert_eq!(c.done.load(Ordering::SeqCst), 0);
    let batch: Vec<_> = dev.pending.lock().unwrap().drain(..).map(|(ctx, r)| (ctx, Ok(r))).collect();
    SessionContext::done_batch(batch);
    c.wait_for(50);
    assert_eq!(c.bad.load(Ordering::SeqCst), 0);
    assert_eq!(s.stats().ops, 50);
}

#[test]
fn a_panicking_callback_is_counted_and_loses_no_other_work() {
    let fw = Framework::with_config(Config { return_workers: 1, ..config() });
    let dev = Arc::new(Coalescing::default());
    fw.register(dev.clone()).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let c = Arc::new(Collector::default());
    let inner = c.callback();
    // Request 3 makes the callback panic, on a return worker or inside an interrupt.
    let cb: Callback = Arc::new(move |o: Outcome| {
        if o.as_ref().map(|r| r.user == 3).unwrap_or(false) {
            panic!("client bug");
        }
        inner(o)
    });
    for flags in [Flags::NONE, Flags::CALLBACK_IMMEDIATE] {
        for i in 0..8 {
            s.submit(request(i).with_flags(flags), &cb);
        }
    }
    let batch: Vec<_> = dev.pending.lock().unwrap().drain(..).map(|(ctx, r)| (ctx, Ok(r))).collect();
    // The immediate one panics here, in the "interrupt"; the queued ones must still go out.
    let interrupt =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| SessionContext::done_batch(batch)));
    assert!(interrupt.is_err(), "an immediate callback's panic reaches the completing thread");
    // The rest of the interrupt's batch was delivered anyway, and the return worker
    // survives its panic and runs the rest.
    c.wait_for(7 + 7);
    let st = s.stats();
    assert_eq!(st.errors.get(ocf::ErrorKind::CallbackPanicked), 1, "the return worker's panic is counted");
    // The framework still works afterwards, with its one return worker.
    s.submit(request(100), &cb);
    let batch: Vec<_> = dev.pending.lock().unwrap().drain(..).map(|(ctx, r)| (ctx, Ok(r))).collect();
    SessionContext::done_batch(batch);
    c.wait_for(15);
}

#[test]
fn submit_or_finish_hands_back_synchronous_outcomes_and_calls_back_the_rest() {
    let fw = Framework::with_config(config());
    fw.register(Arc::new(Inline("inline", Priority::Software))).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let c = Arc::new(Collector::default());
    let cb = c.callback();
    // A synchronous driver: the outcome comes back from the call, and the callback is
    // never run.
    let done = s.submit_or_finish(request(7).with_flags(Flags::CALLBACK_IMMEDIATE), &cb);
    assert_eq!(done.expect("finished synchronously").unwrap().user, 7);
    assert!(c.order.lock().unwrap().is_empty(), "the callback ran too");

    // An asynchronous device: nothing comes back, and the callback gets every outcome.
    let fw = Framework::with_config(config());
    fw.register(Ring::new("ring", Priority::Hardware, 64, Duration::from_micros(20), false)).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let c = Arc::new(Collector::default());
    let cb = c.callback();
    for i in 0..20 {
        assert!(s.submit_or_finish(request(i).with_flags(Flags::CALLBACK_IMMEDIATE), &cb).is_none());
    }
    c.wait_for(20);
    assert_eq!(c.bad.load(Ordering::SeqCst), 0);
    assert_eq!(c.order.lock().unwrap().len(), 20);
}

/// The configuration the tests run with: the routing policy from `OCF_TEST_POLICY` if set
/// (`scripts/test` runs these tests under every policy), else the default.
fn config() -> ocf::Config {
    let policy = match std::env::var("OCF_TEST_POLICY") {
        Ok(p) => p.parse().unwrap_or_else(|e| panic!("OCF_TEST_POLICY: {e}")),
        Err(_) => ocf::Policy::default(),
    };
    ocf::Config { policy, ..ocf::Config::default() }
}

/// A driver that takes runs whole ([`Capabilities::runs`]) and records each call: how many
/// runs, how many requests in each, and how many requests came one at a time.
#[derive(Default)]
struct Whole {
    runs: Mutex<Vec<usize>>,
    singles: AtomicU64,
}

struct WholeSession(Arc<Whole>);

struct WholeDriver(Arc<Whole>);

impl Driver for WholeDriver {
    fn name(&self) -> &str {
        "whole"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { ciphers: vec![CipherAlg::Null], runs: true, ..Default::default() }
    }
    fn probe_session(&self, _: &SessionParams) -> Option<Priority> {
        Some(Priority::AcceleratedSoftware)
    }
    fn new_session(&self, _: &SessionParams, _: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(WholeSession(self.0.clone())))
    }
}

impl DriverSession for WholeSession {
    fn process(&self, req: Request, _: Hint) -> Processed {
        self.0.singles.fetch_add(1, Ordering::SeqCst);
        Processed::Done(Ok(req))
    }
    fn process_run(&self, run: &mut Vec<Request>, done: &mut Vec<Outcome>) {
        self.0.runs.lock().unwrap().push(run.len());
        // Answers in reverse: the caller must not depend on order.
        done.extend(run.drain(..).rev().map(Ok));
    }
}

/// A session on a framework whose one driver takes runs whole, and that driver's record.
fn whole_session() -> (Framework, Arc<Whole>, ocf::Session) {
    let fw = Framework::with_config(config());
    let whole = Arc::new(Whole::default());
    fw.register(Arc::new(WholeDriver(whole.clone()))).unwrap();
    let s = fw.new_session(&params()).unwrap();
    (fw, whole, s)
}

/// `run_batch` hands a run to a driver that takes runs in one call; to a synchronous
/// driver through the default `process_run` (each request with the hint but the last); to
/// an asynchronous one request by request with the hint, and waits. Every request comes
/// back, once, intact, and the session counts them; a request that fails its checks comes
/// back failed without stopping the others.
#[test]
fn run_batch_hands_the_run_over_whole_where_the_driver_takes_runs() {
    let check = |out: &mut Vec<Outcome>, n: u64| {
        let mut got: Vec<u64> = out
            .drain(..)
            .map(|o| {
                let r = o.expect("succeeds");
                assert_eq!(r.buf.to_vec(), r.user.to_le_bytes(), "intact");
                r.user
            })
            .collect();
        got.sort();
        assert_eq!(got, (0..n).collect::<Vec<_>>());
    };
    let mut out = Vec::new();

    let (_fw, whole, s) = whole_session();
    let mut reqs: Vec<Request> = (0..16).map(request).collect();
    s.run_batch(&mut reqs, &mut out);
    assert!(reqs.is_empty(), "every request taken");
    check(&mut out, 16);
    assert_eq!(*whole.runs.lock().unwrap(), vec![16], "one call for the run");
    assert_eq!(whole.singles.load(Ordering::SeqCst), 0);
    assert_eq!(s.stats().ops, 16);

    let fw = Framework::with_config(config());
    let ring = Ring::new("ring", Priority::Hardware, 1024, Duration::from_micros(50), true);
    fw.register(ring.clone()).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let mut reqs: Vec<Request> = (0..16).map(request).collect();
    s.run_batch(&mut reqs, &mut out);
    check(&mut out, 16);
    let (more, last) =
        (ring.state.hints_more.load(Ordering::SeqCst), ring.state.hints_last.load(Ordering::SeqCst));
    assert_eq!((more, last), (15, 1), "an asynchronous driver gets the hint on all but the last");

    let fw = Framework::with_config(config());
    fw.register(Arc::new(Inline("inline", Priority::Software))).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let mut reqs: Vec<Request> = (0..16).map(request).collect();
    // A request the session's rules refuse (an IV on a NULL cipher) fails alone.
    reqs.push(request(16).with_iv(&[1; 16]));
    s.run_batch(&mut reqs, &mut out);
    let bad = out.iter().position(|o| o.is_err()).expect("the bad request fails");
    assert_eq!(out.remove(bad).unwrap_err().request.user, 16);
    check(&mut out, 16);
}

/// `submit_run` never blocks on a card: a driver that takes runs, and a synchronous one,
/// finish the whole run into `out` (the callback never runs); an asynchronous card gets
/// each request with the hint but the last, and the callback gets every outcome later.
#[test]
fn submit_run_finishes_what_it_can_at_once_and_calls_back_the_rest() {
    let c = Arc::new(Collector::default());
    let cb = c.callback();
    let mut out = Vec::new();
    let (_fw, whole, s) = whole_session();
    let mut reqs: Vec<Request> = (0..16).map(request).collect();
    s.submit_run(&mut reqs, &cb, &mut out);
    assert_eq!(out.len(), 16, "all finished in the call");
    assert_eq!(*whole.runs.lock().unwrap(), vec![16]);
    out.clear();

    let fw = Framework::with_config(config());
    fw.register(Arc::new(Inline("inline", Priority::Software))).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let mut reqs: Vec<Request> = (0..16).map(|i| request(i).with_flags(Flags::CALLBACK_IMMEDIATE)).collect();
    s.submit_run(&mut reqs, &cb, &mut out);
    assert_eq!(out.len(), 16, "a synchronous driver finishes the run in the call");
    out.clear();

    let fw = Framework::with_config(config());
    let ring = Ring::new("ring", Priority::Hardware, 1024, Duration::from_micros(50), false);
    fw.register(ring.clone()).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let mut reqs: Vec<Request> = (0..16).map(|i| request(i).with_flags(Flags::CALLBACK_IMMEDIATE)).collect();
    s.submit_run(&mut reqs, &cb, &mut out);
    assert!(out.is_empty() && reqs.is_empty(), "the card took them all");
    c.wait_for(16);
    assert_eq!(c.bad.load(Ordering::SeqCst), 0);
    assert_eq!(c.done.load(Ordering::SeqCst), 16, "none came back twice");
    let (more, last) =
        (ring.state.hints_more.load(Ordering::SeqCst), ring.state.hints_last.load(Ordering::SeqCst));
    assert_eq!((more, last), (15, 1));
}

/// A driver that keeps every request (answers Pending) and completes it on `flush`, but
/// promises `synchronous_without_hint`: requests without the hint take the framework's
/// synchronous path, so keeping one is the driver's fault, named and counted; requests
/// with the hint are held as an asynchronous driver's are.
struct Holder {
    kept: Mutex<Vec<(Request, SessionContext)>>,
}

struct HolderDriver(Arc<Holder>);

struct HolderSession(Arc<Holder>, SessionContext);

impl Driver for HolderDriver {
    fn name(&self) -> &str {
        "holder"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { ciphers: vec![CipherAlg::Null], synchronous_without_hint: true, ..Default::default() }
    }
    fn probe_session(&self, _: &SessionParams) -> Option<Priority> {
        Some(Priority::Hardware)
    }
    fn new_session(&self, _: &SessionParams, ctx: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(HolderSession(self.0.clone(), ctx)))
    }
}

impl DriverSession for HolderSession {
    fn process(&self, req: Request, _: Hint) -> Processed {
        self.0.kept.lock().unwrap().push((req, self.1.clone()));
        Processed::Pending
    }
}

#[test]
fn a_driver_synchronous_without_the_hint_gets_such_requests_on_the_synchronous_path() {
    let fw = Framework::with_config(config());
    let holder = Arc::new(Holder { kept: Mutex::new(Vec::new()) });
    fw.register(Arc::new(HolderDriver(holder.clone()))).unwrap();
    let s = fw.new_session(&params()).unwrap();
    // Without the hint: the synchronous path, so a Pending is the driver's broken promise.
    let e = s.run(request(1)).unwrap_err();
    assert_eq!(e.error(), &Error::DriverFailure("a synchronous driver left a request pending"));
    assert_eq!(s.stats().errors.get(ocf::ErrorKind::DriverFailure), 1);
    holder.kept.lock().unwrap().clear();
    // With the hint: held, and completed later through the callback.
    let c = Arc::new(Collector::default());
    let cb = c.callback();
    s.submit(request(2).with_flags(Flags::MORE | Flags::CALLBACK_IMMEDIATE), &cb);
    assert_eq!(c.done.load(Ordering::SeqCst), 0, "held");
    let (r, ctx) = holder.kept.lock().unwrap().pop().unwrap();
    ctx.done(Ok(r));
    c.wait_for(1);
    assert_eq!(c.bad.load(Ordering::SeqCst), 0);
}
