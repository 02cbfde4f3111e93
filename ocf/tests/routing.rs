//! Routing each request (crate `routing`): small requests on the CPU, large ones on a device
//! that wins there, a Busy, failing or stalled device routed around with nothing lost, two
//! identical devices balanced, and every policy serving every request. A device that fails a
//! request part-way (its buffer wiped) is routed around too, but that request is not redone.
//!
//! The drivers here take a known time per request (`setup + bytes × per_byte`; spun on the
//! CPU so that it is exact, slept through if long): `Cpu` finishes in `process`, `Card` completes later on its own
//! thread, one request at a time, with a ring of `ring` slots. Both "encrypt" by XOR with
//! 0x5a, so every result can be checked.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use ocf::{
    Capabilities, CipherAlg, Config, Driver, DriverSession, Error, ErrorKind, Failed, Framework, Hint, Key,
    Op, Policy, Priority, Processed, Request, SessionContext, SessionParams, SizeClass,
};

/// How long a test waits for what must happen: generous, since other work shares the
/// machine; waits return as soon as their event comes.
const PATIENCE: Duration = Duration::from_secs(60);

/// Takes `ns`: sleeps through long times (so that a test's many "CPU" threads do not starve
/// the card's engine thread of the machine's cores), spins through short ones (exact).
fn spin(ns: u64) {
    if ns >= 50_000 {
        thread::sleep(Duration::from_nanos(ns));
        return;
    }
    let t = Instant::now();
    while (t.elapsed().as_nanos() as u64) < ns {
        std::hint::spin_loop();
    }
}

/// The drivers' "cipher": every byte XOR 0x5a, eight bytes at a time. (Byte by byte, a debug
/// build took about 3 ms for 128 KiB on both the CPU and the card, which drowned the 0.5 ms
/// between their modelled costs, and the cost-model test failed on a noisy run.)
fn xor(req: &mut Request) {
    let mut v = req.buf.to_vec();
    let mut words = v.chunks_exact_mut(8);
    for w in &mut words {
        let x = u64::from_ne_bytes((&*w).try_into().unwrap()) ^ 0x5a5a_5a5a_5a5a_5a5a;
        w.copy_from_slice(&x.to_ne_bytes());
    }
    words.into_remainder().iter_mut().for_each(|b| *b ^= 0x5a);
    req.buf = v.into();
}

fn caps(synchronous: bool) -> Capabilities {
    Capabilities { ciphers: vec![CipherAlg::Null], synchronous, ..Default::default() }
}

/// A CPU driver: `setup_ns + len × per_byte_ns`, finished in `process`.
struct Cpu {
    name: &'static str,
    setup_ns: u64,
    per_byte_ns: f64,
}

impl Driver for Cpu {
    fn name(&self) -> &str {
        self.name
    }
    fn capabilities(&self) -> Capabilities {
        caps(true)
    }
    fn probe_session(&self, _: &SessionParams) -> Option<Priority> {
        Some(Priority::Software)
    }
    fn new_session(&self, _: &SessionParams, _: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(CpuSession { setup_ns: self.setup_ns, per_byte_ns: self.per_byte_ns }))
    }
}

struct CpuSession {
    setup_ns: u64,
    per_byte_ns: f64,
}

impl DriverSession for CpuSession {
    fn process(&self, mut req: Request, _: Hint) -> Processed {
        spin(self.setup_ns + (req.buf.len() as f64 * self.per_byte_ns) as u64);
        xor(&mut req);
        Processed::Done(Ok(req))
    }
}

/// A device: a ring of `ring` slots and one engine on its own thread; faults on demand.
struct Card {
    name: &'static str,
    shared: Arc<CardShared>,
}

struct CardShared {
    setup_ns: u64,
    per_byte_ns: f64,
    ring: usize,
    queue: Mutex<CardQueue>,
    wake: Condvar,
    /// Deliver every request as a device fault, untouched.
    failing: AtomicBool,
    /// Deliver every request as a device fault part-way through, its buffer wiped.
    midway: AtomicBool,
    /// Fetch nothing while set.
    paused: AtomicBool,
    completed: AtomicU64,
}

#[derive(Default)]
struct CardQueue {
    items: VecDeque<(Request, SessionContext)>,
    /// Refused a request since the last unblock.
    refused: Option<SessionContext>,
    stop: bool,
}

impl Card {
    fn new(name: &'static str, setup_ns: u64, per_byte_ns: f64, ring: usize) -> Arc<Card> {
        let shared = Arc::new(CardShared {
            setup_ns,
            per_byte_ns,
            ring,
            queue: Mutex::default(),
            wake: Condvar::new(),
            failing: AtomicBool::new(false),
            midway: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            completed: AtomicU64::new(0),
        });
        let engine = shared.clone();
        thread::spawn(move || engine.run());
        Arc::new(Card { name, shared })
    }
}

impl Drop for Card {
    fn drop(&mut self) {
        self.shared.queue.lock().unwrap().stop = true;
        self.shared.wake.notify_all();
    }
}

impl CardShared {
    fn run(&self) {
        loop {
            let (mut req, ctx) = {
                let mut q = self.queue.lock().unwrap();
                loop {
                    if q.stop {
                        return;
                    }
                    if !self.paused.load(Ordering::SeqCst) {
                        if let Some(item) = q.items.front_mut() {
                            let _ = item;
                            break;
                        }
                    }
                    q = self.wake.wait_timeout(q, Duration::from_millis(1)).unwrap().0;
                }
                // Leave it in its slot while the engine works on it.
                let (req, ctx) = q
                    .items
                    .front_mut()
                    .map(|(r, c)| (std::mem::replace(r, Request::new(Op::Encrypt, vec![])), c.clone()))
                    .unwrap();
                (req, ctx)
            };
            spin(self.setup_ns + (req.buf.len() as f64 * self.per_byte_ns) as u64);
            let outcome = if self.failing.load(Ordering::SeqCst) {
                Err(Failed::new(Error::DriverFailure("test card: device fault"), req))
            } else if self.midway.load(Ordering::SeqCst) {
                req.buf = vec![0; req.buf.len()].into();
                Err(Failed::new(Error::DriverFailureMidway("test card: fault mid-request"), req))
            } else {
                xor(&mut req);
                Ok(req)
            };
            let refused = {
                let mut q = self.queue.lock().unwrap();
                q.items.pop_front();
                q.refused.take()
            };
            self.completed.fetch_add(1, Ordering::SeqCst);
            ctx.done(outcome);
            if let Some(c) = refused {
                c.unblock();
            }
        }
    }
}

impl Driver for Card {
    fn name(&self) -> &str {
        self.name
    }
    fn capabilities(&self) -> Capabilities {
        caps(false)
    }
    fn probe_session(&self, _: &SessionParams) -> Option<Priority> {
        Some(Priority::Hardware)
    }
    fn new_session(&self, _: &SessionParams, ctx: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(CardSession { shared: self.shared.clone(), ctx }))
    }
}

struct CardSession {
    shared: Arc<CardShared>,
    ctx: SessionContext,
}

impl DriverSession for CardSession {
    fn process(&self, req: Request, _: Hint) -> Processed {
        let mut q = self.shared.queue.lock().unwrap();
        if q.items.len() >= self.shared.ring {
            q.refused = Some(self.ctx.clone());
            return Processed::Busy(req);
        }
        q.items.push_back((req, self.ctx.clone()));
        drop(q);
        self.shared.wake.notify_one();
        Processed::Pending
    }
}

/// The tests here measure time by spinning: one at a time, so they do not steal each
/// other's cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn framework(policy: Policy) -> Framework {
    Framework::with_config(Config { policy, ..Config::default() })
}

fn params() -> SessionParams {
    SessionParams::cipher(CipherAlg::Null, Key::empty())
}

/// Runs `n` requests of `len` bytes; checks every result.
fn run_many(s: &ocf::Session, n: usize, len: usize) {
    for i in 0..n {
        let data: Vec<u8> = (0..len).map(|b| (b + i) as u8).collect();
        let done = s.run(Request::new(Op::Encrypt, data.clone())).unwrap();
        let want: Vec<u8> = data.iter().map(|b| b ^ 0x5a).collect();
        assert!(done.buf.to_vec() == want, "request {i} of {len} bytes: wrong result");
    }
}

fn routed(fw: &Framework, driver: &str, len: usize) -> u64 {
    let r = fw.routing();
    r.drivers.iter().find(|d| d.driver == driver).unwrap().routed[SizeClass::of(len).index()]
}

#[test]
fn small_requests_go_to_the_cpu_and_large_ones_to_the_card_that_wins_there() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fw = framework(Policy::CostModel);
    // CPU: 0.3 µs + 16 ns/B; card: 20 µs + 0.01 ns/B. They cross at about 1.2 KB; at 128
    // KiB the card takes 21 µs, the CPU 2.1 ms. Both also copy and XOR the buffer, which in
    // a debug build costs about 0.7 ms at 128 KiB and the card's two thread wake-ups: with
    // the CPU at 4 ns/B (0.5 ms), the card won by under 2x and a noisy run (a CI run of
    // 2026-11-26) sent 170 of the 400 large requests to the CPU.
    fw.register(Arc::new(Cpu { name: "cpu", setup_ns: 300, per_byte_ns: 16.0 })).unwrap();
    fw.register(Card::new("card", 20_000, 0.01, 64)).unwrap();
    let s = fw.new_session(&params()).unwrap();
    assert_eq!(s.drivers(), ["card", "cpu"], "every capable driver, the best priority first");
    run_many(&s, 3000, 64);
    run_many(&s, 400, 131_072);
    let (small_cpu, small_card) = (routed(&fw, "cpu", 64), routed(&fw, "card", 64));
    let (large_cpu, large_card) = (routed(&fw, "cpu", 131_072), routed(&fw, "card", 131_072));
    assert_eq!(small_cpu + small_card, 3000);
    assert_eq!(large_cpu + large_card, 400);
    assert!(small_cpu >= 2900, "64 B: cpu {small_cpu}, card {small_card}");
    assert!(large_card >= 380, "128 KiB: cpu {large_cpu}, card {large_card}");
    // The model's view: the card's setup is about 20 µs, the CPU's cost per KiB about 16 µs.
    let r = fw.routing();
    let model = |d: &str| r.drivers.iter().find(|x| x.driver == d).unwrap().models[0].clone();
    let (cpu, card) = (model("cpu"), model("card"));
    assert_eq!(cpu.op, Some(Op::Encrypt));
    // (Plus two thread wake-ups per request, tens of µs on a busy two-core machine.)
    assert!(card.setup_ns > 10_000.0 && card.setup_ns < 200_000.0, "{card:?}");
    // 16 µs slept per KiB, plus the copy and XOR (slow in a debug build).
    assert!(cpu.ns_per_kib > 12_000.0 && cpu.ns_per_kib < 60_000.0, "{cpu:?}");
    assert!(r.decisions > 0 && r.decision_ns > 0.0, "{r:?}");
}

#[test]
fn a_busy_card_sends_the_next_requests_elsewhere_and_loses_none() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fw = framework(Policy::CostModel);
    fw.register(Arc::new(Cpu { name: "cpu", setup_ns: 100_000, per_byte_ns: 0.0 })).unwrap();
    // Faster than the CPU, but only two slots.
    let card = Card::new("card", 20_000, 0.0, 2);
    fw.register(card.clone()).unwrap();
    let s = fw.new_session(&params()).unwrap();
    run_many(&s, 50, 256); // the model learns both
    thread::scope(|scope| {
        for _ in 0..6 {
            let s = s.clone();
            scope.spawn(move || run_many(&s, 100, 256));
        }
    });
    let r = fw.routing();
    let card_stats = r.drivers.iter().find(|d| d.driver == "card").unwrap();
    let cpu_stats = r.drivers.iter().find(|d| d.driver == "cpu").unwrap();
    assert_eq!(card_stats.routed_total() + cpu_stats.routed_total(), 650, "none lost");
    assert!(cpu_stats.routed_total() >= 50, "a full card sends work to the CPU: {r:?}");
    assert!(card_stats.routed_total() >= 100, "the faster card still serves: {r:?}");
    assert!(card_stats.skipped_blocked > 0, "decisions saw the card blocked: {r:?}");
    assert_eq!(fw.stats().total_errors().total(), 0);
}

/// A CPU (50 µs a request) and a card ten times faster, and a session that has run 200
/// requests of 512 bytes, most of them on the card.
fn a_cpu_and_a_faster_card_in_use() -> (Framework, Arc<Card>, ocf::Session) {
    let fw = framework(Policy::CostModel);
    fw.register(Arc::new(Cpu { name: "cpu", setup_ns: 50_000, per_byte_ns: 0.0 })).unwrap();
    let card = Card::new("card", 5_000, 0.0, 16);
    fw.register(card.clone()).unwrap();
    let s = fw.new_session(&params()).unwrap();
    run_many(&s, 200, 512);
    assert!(routed(&fw, "card", 512) > 150, "the faster card serves first");
    (fw, card, s)
}

#[test]
fn a_failing_card_is_routed_around_and_its_failed_requests_are_redone_elsewhere() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (fw, card, s) = a_cpu_and_a_faster_card_in_use();
    card.shared.failing.store(true, Ordering::SeqCst);
    let before = card.shared.completed.load(Ordering::SeqCst);
    run_many(&s, 200, 512); // every result checked: nothing lost, nothing wrong
    let faults = card.shared.completed.load(Ordering::SeqCst) - before;
    assert!(faults >= 1, "the card saw the fault");
    assert!(faults <= 5, "then it was left alone (explored at most now and then): {faults}");
    let st = fw.driver_stats("card").unwrap();
    assert_eq!(st.errors.get(ErrorKind::DriverFailure), faults, "each fault counted at the card");
    let r = fw.routing();
    assert!(r.drivers.iter().find(|d| d.driver == "card").unwrap().skipped_unhealthy > 0, "{r:?}");
    // The card recovers: exploration finds it again.
    card.shared.failing.store(false, Ordering::SeqCst);
    let t = Instant::now();
    let start = routed(&fw, "card", 512);
    while routed(&fw, "card", 512) < start + 50 && t.elapsed() < PATIENCE {
        run_many(&s, 20, 512);
    }
    assert!(routed(&fw, "card", 512) >= start + 50, "a recovered card is used again");
}

#[test]
fn a_card_failing_midway_is_routed_around_but_its_wiped_requests_are_not_redone() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (fw, card, s) = a_cpu_and_a_faster_card_in_use();
    card.shared.midway.store(true, Ordering::SeqCst);
    let before = card.shared.completed.load(Ordering::SeqCst);
    let (mut failed, mut good) = (0, 0);
    for i in 0..200 {
        let data: Vec<u8> = (0..512).map(|b| (b + i) as u8).collect();
        match s.run(Request::new(Op::Encrypt, data.clone())) {
            Ok(done) => {
                assert!(done.buf.to_vec() == data.iter().map(|b| b ^ 0x5a).collect::<Vec<_>>());
                good += 1;
            }
            Err(f) => {
                // Not redone on the CPU: the card had already written the buffer.
                assert!(matches!(f.error(), Error::DriverFailureMidway(_)), "{}", f.error());
                assert!(f.request.buf.to_vec().iter().all(|b| *b == 0), "the buffer comes back wiped");
                failed += 1;
            }
        }
    }
    let faults = card.shared.completed.load(Ordering::SeqCst) - before;
    assert_eq!(failed, faults, "each fault reaches its caller, none is redone");
    assert!((1..=5).contains(&faults), "then the card is left alone: {faults}");
    assert_eq!(good + failed, 200);
    let st = fw.driver_stats("card").unwrap();
    assert_eq!(st.errors.get(ErrorKind::DriverFailureMidway), faults, "counted under its own cause");
    assert_eq!(st.errors.get(ErrorKind::DriverFailure), 0);
    let r = fw.routing();
    assert!(r.drivers.iter().find(|d| d.driver == "card").unwrap().skipped_unhealthy > 0, "{r:?}");
}

#[test]
fn a_stalled_card_is_routed_around_and_its_requests_complete_when_it_resumes() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fw = framework(Policy::CostModel);
    fw.register(Arc::new(Cpu { name: "cpu", setup_ns: 50_000, per_byte_ns: 0.0 })).unwrap();
    let card = Card::new("card", 5_000, 0.0, 64);
    fw.register(card.clone()).unwrap();
    let s = fw.new_session(&params()).unwrap();
    run_many(&s, 200, 512);
    card.shared.paused.store(true, Ordering::SeqCst);
    // Requests submitted now may land on the stalled card; they must complete later.
    let stuck: Vec<_> = (0..4).map(|_| s.submit_async(Request::new(Op::Encrypt, vec![1; 512]))).collect();
    thread::sleep(Duration::from_millis(20));
    // While the card stalls (paused until the test resumes it), every request the router
    // does not send it completes on the CPU, and those it does send (exploring now and
    // then, as it must to see a card recover) wait for the resume. Counted, not timed: the
    // test waits until each of the 300 has completed or gone to the card. (Run one by one,
    // an explored request blocked the run until the resume: the test hung, or, timed, it
    // failed under load.)
    let held = || fw.driver_stats("card").unwrap().flow.in_flight as u64;
    let card_before = held();
    let on_card = || held() - card_before;
    let (done, wrong) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let cb: ocf::Callback = {
        let (done, wrong) = (done.clone(), wrong.clone());
        Arc::new(move |o: ocf::Outcome| {
            if !o.is_ok_and(|r| r.buf.to_vec() == vec![2 ^ 0x5a; 512]) {
                wrong.fetch_add(1, Ordering::SeqCst);
            }
            done.fetch_add(1, Ordering::SeqCst);
        })
    };
    let submitting = Instant::now();
    for _ in 0..300 {
        s.submit(Request::new(Op::Encrypt, vec![2; 512]), &cb);
    }
    let submitting = submitting.elapsed();
    let t = Instant::now();
    while done.load(Ordering::SeqCst) + on_card() < 300 {
        assert!(t.elapsed() < PATIENCE, "{} done, {} on the card", done.load(Ordering::SeqCst), on_card());
        thread::sleep(Duration::from_millis(1));
    }
    let (served, explored) = (done.load(Ordering::SeqCst), on_card());
    // A stalled route is tried (explored) at most once per 100 ms: so many while the 300
    // were submitted, however long that took (a card not seen as stalled got 12 to 60).
    let may_explore = 1 + submitting.as_millis() as u64 / 100;
    assert!(
        explored <= may_explore,
        "routed around: {served} served while it stalled, {explored} sent to the card (at most {may_explore} in {submitting:?})"
    );
    card.shared.paused.store(false, Ordering::SeqCst);
    let t = Instant::now();
    while done.load(Ordering::SeqCst) < 300 {
        assert!(t.elapsed() < PATIENCE, "{} of 300 done after the resume", done.load(Ordering::SeqCst));
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(wrong.load(Ordering::SeqCst), 0, "every result right");
    eprintln!("stalled card: {served} of 300 served on the CPU while it stalled, {explored} explored it");
    for f in stuck {
        let done = futures_lite_block_on(f).unwrap();
        assert_eq!(done.buf.to_vec(), vec![1 ^ 0x5a; 512]);
    }
    assert_eq!(fw.stats().total_errors().total(), 0, "nothing failed, nothing lost");
}

/// Blocks on a future with a thread-parking waker.
fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark()
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park_timeout(Duration::from_millis(10));
    }
}

#[test]
fn two_identical_cards_share_the_load() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for policy in [Policy::CostModel, Policy::LeastLoaded, Policy::RoundRobin] {
        let fw = framework(policy);
        fw.register(Card::new("card-a", 50_000, 0.0, 8)).unwrap();
        fw.register(Card::new("card-b", 50_000, 0.0, 8)).unwrap();
        let s = fw.new_session(&params()).unwrap();
        thread::scope(|scope| {
            for _ in 0..8 {
                let s = s.clone();
                scope.spawn(move || run_many(&s, 50, 64));
            }
        });
        // (No wall-clock bound: the share below is the claim; one card alone would need
        // 400 × 50 µs = 20 ms of engine time, which a loaded machine can stretch anyhow.)
        let (a, b) = (routed(&fw, "card-a", 64), routed(&fw, "card-b", 64));
        assert_eq!(a + b, 400, "{policy}");
        assert!(a.min(b) * 10 >= (a + b) * 3, "{policy}: card-a {a}, card-b {b}: {:#?}", fw.routing());
    }
}

#[test]
fn every_policy_serves_every_request_correctly() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for policy in Policy::ALL {
        let fw = framework(policy);
        fw.register(Arc::new(Cpu { name: "cpu", setup_ns: 1_000, per_byte_ns: 1.0 })).unwrap();
        fw.register(Card::new("card", 5_000, 0.1, 8)).unwrap();
        let s = fw.new_session(&params()).unwrap();
        let expected_routes = if policy == Policy::Priority { 1 } else { 2 };
        assert_eq!(s.drivers().len(), expected_routes, "{policy}");
        thread::scope(|scope| {
            for t in 0..4 {
                let s = s.clone();
                scope.spawn(move || {
                    for (i, len) in [16usize, 300, 1500, 9000].iter().cycle().take(80).enumerate() {
                        run_many(&s, 1, len + t + i % 3);
                    }
                });
            }
        });
        let total: u64 = fw.routing().drivers.iter().map(|d| d.routed_total()).sum();
        assert_eq!(total, 320, "{policy}");
        assert_eq!(fw.stats().total_errors().total(), 0, "{policy}");
    }
}

#[test]
fn round_robin_alternates_and_pinned_sessions_are_not_routed() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fw = framework(Policy::RoundRobin);
    fw.register(Arc::new(Cpu { name: "a", setup_ns: 0, per_byte_ns: 0.0 })).unwrap();
    fw.register(Arc::new(Cpu { name: "b", setup_ns: 0, per_byte_ns: 0.0 })).unwrap();
    let s = fw.new_session(&params()).unwrap();
    run_many(&s, 100, 32);
    assert_eq!((routed(&fw, "a", 32), routed(&fw, "b", 32)), (50, 50));
    let pinned = fw.new_session_on("b", &params()).unwrap();
    assert_eq!(pinned.drivers(), ["b"]);
    run_many(&pinned, 10, 32);
    assert_eq!((routed(&fw, "a", 32), routed(&fw, "b", 32)), (50, 60));
}

#[test]
fn a_driver_registered_later_joins_the_routes_and_one_unregistered_leaves_them() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fw = framework(Policy::RoundRobin);
    fw.register(Arc::new(Cpu { name: "a", setup_ns: 0, per_byte_ns: 0.0 })).unwrap();
    let s = fw.new_session(&params()).unwrap();
    assert_eq!(s.drivers(), ["a"]);
    fw.register(Arc::new(Cpu { name: "b", setup_ns: 0, per_byte_ns: 0.0 })).unwrap();
    run_many(&s, 10, 32);
    // Equal priority: the driver with fewer sessions first.
    assert_eq!(s.drivers(), ["b", "a"]);
    assert_eq!((routed(&fw, "a", 32), routed(&fw, "b", 32)), (5, 5));
    fw.unregister("a").unwrap();
    run_many(&s, 10, 32);
    assert_eq!(s.drivers(), ["b"]);
    assert_eq!(routed(&fw, "b", 32), 15);
    assert_eq!(s.stats().ops, 20);
}

/// A multi-buffer driver's shape: `alone_ns` for a request given by itself, and for a run
/// handed over whole `run_ns` plus `per_request_ns` each ([`Capabilities::runs`]).
struct Lanes {
    alone_ns: u64,
    run_ns: u64,
    per_request_ns: u64,
}

impl Driver for Lanes {
    fn name(&self) -> &str {
        "lanes"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { runs: true, ..caps(false) }
    }
    fn probe_session(&self, _: &SessionParams) -> Option<Priority> {
        Some(Priority::AcceleratedSoftware)
    }
    fn new_session(&self, _: &SessionParams, _: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(Lanes { ..*self }))
    }
}

impl DriverSession for Lanes {
    fn process(&self, mut req: Request, _: Hint) -> Processed {
        spin(self.alone_ns);
        xor(&mut req);
        Processed::Done(Ok(req))
    }
    fn process_run(&self, run: &mut Vec<Request>, done: &mut Vec<ocf::Outcome>) {
        spin(self.run_ns + self.per_request_ns * run.len() as u64);
        done.extend(run.drain(..).map(|mut r| {
            xor(&mut r);
            Ok(r)
        }));
    }
}

/// The routing rule without configuration: single requests stay on the CPU, runs
/// handed over whole go to the multi-buffer driver, where each request costs under a third
/// of the CPU's; the model learns the two apart (its cost per request in runs is kept apart).
#[test]
fn runs_go_to_the_driver_that_wins_on_runs_and_single_requests_stay_on_the_cpu() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fw = framework(Policy::CostModel);
    fw.register(Arc::new(Cpu { name: "cpu", setup_ns: 6_000, per_byte_ns: 0.0 })).unwrap();
    // Alone the lanes cost far more than the CPU (7x): at 2x, a busy machine's contention
    // (the CPU's cost counts double and more when threads wait for a core, `routing::cpu`)
    // sent 135 of 2,000 single requests there.
    fw.register(Arc::new(Lanes { alone_ns: 40_000, run_ns: 4_000, per_request_ns: 1_500 })).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let ops = |d: &str| routed(&fw, d, 64);
    run_many(&s, 2000, 64);
    let (cpu, lanes) = (ops("cpu"), ops("lanes"));
    assert_eq!(cpu + lanes, 2000);
    assert!(cpu >= 1900, "single requests: cpu {cpu}, lanes {lanes}");
    let mut out = Vec::new();
    for k in 0..300usize {
        let mut run: Vec<Request> = (0..16)
            .map(|i| {
                let mut r = Request::new(Op::Encrypt, vec![(k + i) as u8; 64]);
                r.user = i as u64;
                r
            })
            .collect();
        s.run_batch(&mut run, &mut out);
        assert_eq!(out.len(), 16);
        for o in out.drain(..) {
            let r = o.unwrap();
            assert_eq!(r.buf.to_vec(), vec![(k + r.user as usize) as u8 ^ 0x5a; 64], "run {k}");
        }
    }
    let (run_cpu, run_lanes) = (ops("cpu") - cpu, ops("lanes") - lanes);
    assert_eq!(run_cpu + run_lanes, 300 * 16);
    assert!(run_lanes >= 300 * 16 * 9 / 10, "runs: cpu {run_cpu}, lanes {run_lanes}");
    // And single requests after the runs still go to the CPU.
    let (cpu, lanes) = (ops("cpu"), ops("lanes"));
    run_many(&s, 1000, 64);
    assert!(
        ops("cpu") - cpu >= 950,
        "single requests after runs: cpu {}, lanes {}",
        ops("cpu") - cpu,
        ops("lanes") - lanes
    );
}

/// A CPU driver whose cost per request can be changed while it serves.
struct Varying {
    ns: Arc<AtomicU64>,
}

impl Driver for Varying {
    fn name(&self) -> &str {
        "cpu"
    }
    fn capabilities(&self) -> Capabilities {
        caps(true)
    }
    fn probe_session(&self, _: &SessionParams) -> Option<Priority> {
        Some(Priority::Software)
    }
    fn new_session(&self, _: &SessionParams, _: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(VaryingSession { ns: self.ns.clone() }))
    }
}

struct VaryingSession {
    ns: Arc<AtomicU64>,
}

impl DriverSession for VaryingSession {
    fn process(&self, mut req: Request, _: Hint) -> Processed {
        spin(self.ns.load(Ordering::Relaxed));
        xor(&mut req);
        Processed::Done(Ok(req))
    }
}

/// Where the CPU wins by far (a cheap request against a card's thread wake-ups), the
/// choice is settled: one request in `SAMPLE_SETTLED` (1024) per thread is timed, not one
/// in 128 (issue 31: the timed decisions were a share of what `auto` cost a 16-byte
/// request). The model still follows a change: when the CPU's requests get slower, its
/// samples are out of line, decisions are timed one in 128 again, and the estimate climbs
/// to the new cost.
#[test]
fn a_settled_choice_is_timed_less_often_and_a_slower_cpu_is_still_noticed() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fw = framework(Policy::CostModel);
    let cpu_ns = Arc::new(AtomicU64::new(0));
    fw.register(Arc::new(Varying { ns: cpu_ns.clone() })).unwrap();
    fw.register(Card::new("card", 0, 0.0, 16)).unwrap();
    let s = fw.new_session(&params()).unwrap();
    let model = |d: &str| {
        let r = fw.routing();
        r.drivers.iter().find(|x| x.driver == d).unwrap().models.first().cloned().unwrap_or_default()
    };
    // Until the model has measured the card past its warm-up (explored 1 ms apart).
    let mut warm = 0;
    while model("card").samples < 8 {
        run_many(&s, 100, 16);
        warm += 100;
        assert!(warm < 1_000_000, "the card is never explored");
    }
    run_many(&s, 2_000, 16);
    let timed = |n: usize| {
        let before = fw.routing().decisions;
        run_many(&s, n, 16);
        fw.routing().decisions - before
    };
    let n = 40_000;
    let settled = timed(n);
    // About n / 1024 (39), and a few more where a preempted sample was out of line; at one
    // in 128 it was about 312.
    assert!(settled <= n as u64 / 256, "{settled} timed decisions in {n} requests");
    assert!(settled >= n as u64 / 2048, "{settled} timed decisions in {n} requests");

    // The CPU's requests now take 20 µs: the first timed one is out of line (and 1024 of
    // them would take 20 ms, more than a settled choice may span).
    cpu_ns.store(20_000, Ordering::Relaxed);
    let n = 5_000;
    let unsettled = timed(n);
    assert!(unsettled >= n as u64 / 256, "{unsettled} timed decisions in {n} requests after the change");
    let cpu = model("cpu").classes[0].unwrap().0;
    assert!(cpu >= 10_000.0, "the CPU's estimate followed to {cpu:.0} ns");
}
