//! Tests that need the driver's insides: the doorbell and Busy contract driven directly (as
//! the framework's dispatch layer will drive it), and shutdown with the device thread's end
//! observed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use ocf::{CipherAlg, Framework, Op};

use super::*;
use crate::testkit::ContextCatcher;

const KEY: [u8; 16] = [7; 16];
const IV: [u8; 16] = [9; 16];

/// A sim driver session made outside the framework's request path, plus what keeps its
/// context alive.
struct Direct {
    sim: SimDriver,
    session: Box<dyn DriverSession>,
    _fw: Framework,
    _catcher_session: ocf::Session,
}

fn direct(spec: &str) -> Direct {
    let fw = Framework::new();
    let catcher = Arc::new(ContextCatcher(Mutex::new(None)));
    fw.register(catcher.clone()).unwrap();
    let params = SessionParams::cipher(CipherAlg::AesCtr, &KEY);
    let catcher_session = fw.new_session_on("context-catcher", &params).unwrap();
    let ctx = catcher.0.lock().unwrap().take().unwrap();
    let sim = SimDriver::new("sim:test", SimProfile::parse(spec).unwrap()).unwrap();
    let session = sim.new_session(&params, ctx).unwrap();
    Direct { sim, session, _fw: fw, _catcher_session: catcher_session }
}

fn request(byte: u8) -> Request {
    Request::new(Op::Encrypt, vec![byte; 64]).with_iv(&IV)
}

const MORE: Hint = Hint { more: true };
const LAST: Hint = Hint { more: false };

fn pending(p: Processed) {
    assert!(matches!(p, Processed::Pending), "expected Pending");
}

/// Polls the card's counters until `done` holds (a minute at most: other work shares the
/// machine).
fn wait_for(sim: &SimDriver, done: impl Fn(&SimStats) -> bool) -> SimStats {
    let start = Instant::now();
    loop {
        let s = sim.stats();
        if done(&s) || start.elapsed() > Duration::from_secs(60) {
            return s;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn one_doorbell_per_batch() {
    let d = direct("ring=8,setup=1us,rate=1GB/s");
    for i in 0..3 {
        pending(d.session.process(request(i), MORE));
    }
    assert_eq!(d.sim.stats().doorbells, 0, "no doorbell while more follow");
    pending(d.session.process(request(3), LAST));
    let s = wait_for(&d.sim, |s| s.completed == 4);
    assert_eq!((s.accepted, s.completed, s.doorbells), (4, 4, 1), "{s:?}");
    assert_eq!(s.in_flight, 0);
}

#[test]
fn a_full_ring_rings_the_doorbell() {
    let d = direct("ring=3,setup=1us,rate=1GB/s");
    for i in 0..3 {
        pending(d.session.process(request(i), MORE));
    }
    assert_eq!(d.sim.stats().doorbells, 1, "the third filled the ring");
    let s = wait_for(&d.sim, |s| s.completed == 3);
    assert_eq!(s.completed, 3);
}

#[test]
fn forgotten_doorbell_times_out() {
    let d = direct("ring=8,setup=1us,rate=1GB/s");
    let start = Instant::now();
    pending(d.session.process(request(1), MORE));
    pending(d.session.process(request(2), MORE));
    let s = wait_for(&d.sim, |s| s.completed == 2);
    assert_eq!(s.completed, 2, "the safety net fetched them: {s:?}");
    assert!(start.elapsed() >= Duration::from_nanos(device::DOORBELL_TIMEOUT_NS));
    assert_eq!(s.doorbells, 0);
    assert!(s.doorbell_timeouts >= 1);
}

#[test]
fn full_ring_answers_busy_with_the_request_untouched_then_unblocks() {
    let d = direct("ring=2,setup=20ms,rate=1GB/s");
    pending(d.session.process(request(1), LAST));
    pending(d.session.process(request(2), LAST));
    match d.session.process(request(3), LAST) {
        Processed::Busy(req) => {
            assert_eq!(req.buf.to_vec(), vec![3; 64], "buffer untouched");
            assert_eq!(req.iv(), IV);
        }
        _ => panic!("expected Busy"),
    }
    let s = d.sim.stats();
    assert_eq!((s.accepted, s.busy, s.unblocks, s.in_flight), (2, 1, 0, 2));
    let s = wait_for(&d.sim, |s| s.completed >= 1 && s.unblocks >= 1);
    assert_eq!(s.unblocks, 1, "one unblock per Busy period: {s:?}");
    pending(d.session.process(request(4), LAST));
    let s = wait_for(&d.sim, |s| s.completed == 3);
    assert_eq!((s.completed, s.unblocks), (3, 1), "no Busy since, no more unblocks");
}

/// How many times each request's callback ran, by the request's `user` cookie.
struct Tally(Vec<AtomicUsize>);

impl Tally {
    fn new(n: usize) -> Arc<Tally> {
        Arc::new(Tally((0..n).map(|_| AtomicUsize::new(0)).collect()))
    }

    fn record(&self, user: u64) {
        self.0[user as usize].fetch_add(1, Ordering::SeqCst);
    }

    fn total(&self) -> usize {
        self.0.iter().map(|c| c.load(Ordering::SeqCst)).sum()
    }

    fn each_exactly_once(&self) -> bool {
        self.0.iter().all(|c| c.load(Ordering::SeqCst) == 1)
    }

    /// Waits (a minute at most) for `n` callbacks: the card delivers every completion before its
    /// thread ends, but ocf runs callbacks on its return workers, possibly a little later.
    fn wait_for(&self, n: usize) {
        let start = Instant::now();
        while self.total() < n && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Polls until nothing holds the device any more (a minute at most): its thread has returned.
fn device_gone(device: &Weak<device::Device>) -> bool {
    let start = Instant::now();
    while device.strong_count() > 0 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(1));
    }
    device.strong_count() == 0
}

#[test]
fn dropping_the_framework_completes_everything_and_stops_the_device() {
    let fw = Framework::new();
    // 12 requests of 5 ms each: the last is due 60 ms after the first.
    let sim =
        SimDriver::new("sim:shutdown", SimProfile::parse("ring=16,setup=5ms,rate=1GB/s").unwrap()).unwrap();
    let device = Arc::downgrade(&sim.device.device);
    fw.register(Arc::new(sim)).unwrap();
    let params = SessionParams::cipher(CipherAlg::AesCtr, &KEY);
    let session = fw.new_session_on("sim:shutdown", &params).unwrap();
    let soft_fw = Framework::new();
    ocf_soft::register(&soft_fw).unwrap();
    let expected = soft_fw.new_session(&params).unwrap().run(request(5)).unwrap().buf.to_vec();

    let tally = Tally::new(12);
    let seen = tally.clone();
    let callback: ocf::Callback = Arc::new(move |outcome: ocf::Outcome| {
        let req = outcome.expect("completed, not failed");
        assert_eq!(req.buf.to_vec(), expected, "the real ciphertext");
        seen.record(req.user);
    });
    for user in 0..12 {
        let mut req = request(5);
        req.user = user;
        session.submit(req, &callback);
    }
    assert!(tally.total() < 12, "some still in flight when the framework goes");
    drop(session);
    drop(fw);
    tally.wait_for(12);
    assert!(tally.each_exactly_once(), "every callback ran exactly once");
    assert!(device_gone(&device), "the device thread returned and nothing holds the device");
}

#[test]
fn the_last_session_dropped_from_a_completion_callback() {
    // The callback holds the last framework and session handles and drops them, so the driver
    // is dropped on its own device thread: it must not join itself.
    let fw = Framework::new();
    let sim = SimDriver::new("sim:self", SimProfile::parse("ring=4,setup=5ms,rate=1GB/s").unwrap()).unwrap();
    let device = Arc::downgrade(&sim.device.device);
    fw.register(Arc::new(sim)).unwrap();
    let session = fw.new_session_on("sim:self", &SessionParams::cipher(CipherAlg::AesCtr, &KEY)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let handles = Mutex::new(Some((fw, session.clone())));
    let counter = calls.clone();
    let last: ocf::Callback = Arc::new(move |outcome: ocf::Outcome| {
        assert!(outcome.is_ok());
        counter.fetch_add(1, Ordering::SeqCst);
        drop(handles.lock().unwrap().take());
    });
    session.submit(request(6), &last);
    drop(session);
    drop(last);
    assert!(device_gone(&device), "the device thread finished by itself");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_panicking_callback_loses_no_later_completion() {
    let fw = Framework::new();
    let sim =
        Arc::new(SimDriver::new("sim:p", SimProfile::parse("ring=4,setup=1us,rate=1GB/s").unwrap()).unwrap());
    fw.register(sim.clone()).unwrap();
    let session = fw.new_session_on("sim:p", &SessionParams::cipher(CipherAlg::AesCtr, &KEY)).unwrap();
    // CALLBACK_IMMEDIATE: the callback runs in the completion context, on the device thread.
    let boom: ocf::Callback = Arc::new(|_| panic!("callback panics on purpose"));
    session.submit(request(1).with_flags(ocf::Flags::CALLBACK_IMMEDIATE), &boom);
    let s = wait_for(&sim, |s| s.callback_panics == 1);
    assert_eq!((s.completed, s.callback_panics), (1, 1));
    // Callbacks bound for return workers, and waiters, still get their completions.
    let tally = Tally::new(5);
    let seen = tally.clone();
    let callback: ocf::Callback = Arc::new(move |outcome: ocf::Outcome| seen.record(outcome.unwrap().user));
    for user in 0..5 {
        let mut req = request(2);
        req.user = user;
        session.submit(req, &callback);
    }
    tally.wait_for(5);
    assert!(tally.each_exactly_once());
    let req = session.run(request(3)).unwrap();
    assert_ne!(req.buf.to_vec(), vec![3; 64]);
    assert_eq!(sim.stats().completed, 7);
}

#[test]
fn a_session_kept_past_its_driver_fails_its_requests() {
    let d = direct("ring=4,setup=1us,rate=1GB/s");
    let Direct { sim, session, _fw, _catcher_session } = d;
    drop(sim);
    match session.process(request(1), LAST) {
        Processed::Done(Err(failed)) => {
            assert_eq!(failed.error(), &Error::DriverGone);
            assert_eq!(failed.request.buf.to_vec(), vec![1; 64]);
        }
        _ => panic!("expected DriverGone"),
    }
}
