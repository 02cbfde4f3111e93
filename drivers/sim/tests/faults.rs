//! The card's faults, driven through the framework as a routing test drives them: a paused
//! card keeps what it accepted and completes it, correctly, after the resume; a card with
//! the injected fault fails every request with its buffers untouched, and counts them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ocf::{CipherAlg, Error, Framework, Op, Request, Session, SessionParams};
use ocf_sim::SimDriver;

const KEY: [u8; 16] = [0x2b; 16];
const IV: [u8; 16] = [0x0f; 16];

fn message(i: u64) -> Vec<u8> {
    vec![i as u8; 200]
}

fn request(i: u64) -> Request {
    let mut r = Request::new(Op::Encrypt, message(i)).with_iv(&IV);
    r.user = i;
    r
}

/// A framework with the soft driver and one card; a session on the card and one on soft
/// (for the expected results).
fn card(spec: &str) -> (Framework, Arc<SimDriver>, Session, Session) {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let card = ocf_sim::register_driver(&fw, spec).unwrap();
    let params = SessionParams::cipher(CipherAlg::AesCtr, &KEY);
    let on_card = fw.new_session_on(ocf::Driver::name(&*card), &params).unwrap();
    let on_soft = fw.new_session_on(ocf_soft::NAME, &params).unwrap();
    (fw, card, on_card, on_soft)
}

/// A request's `user` cookie and its buffer as it came back: a result, or an error and the
/// buffer handed back with it.
type Seen = (u64, Result<Vec<u8>, (Error, Vec<u8>)>);

/// The outcomes of submitted requests.
#[derive(Default)]
struct Outcomes(Mutex<Vec<Seen>>);

impl Outcomes {
    fn callback(self: &Arc<Self>) -> ocf::Callback {
        let me = self.clone();
        Arc::new(move |o: ocf::Outcome| {
            let entry = match o {
                Ok(r) => (r.user, Ok(r.buf.to_vec())),
                Err(f) => (f.request.user, Err((f.error().clone(), f.request.buf.to_vec()))),
            };
            me.0.lock().unwrap().push(entry);
        })
    }

    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Waits for `n` outcomes (a minute at most: other work shares the machine).
    fn wait_for(&self, n: usize) -> usize {
        let start = Instant::now();
        while self.count() < n && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.count()
    }
}

#[test]
fn accepted_requests_survive_a_pause_and_complete_after_resume() {
    let (_fw, card, on_card, on_soft) = card("ring=16,setup=200us,rate=1GB/s");
    // Some in flight when the card stalls: 8 × 200 µs.
    let outcomes = Arc::new(Outcomes::default());
    let callback = outcomes.callback();
    for i in 0..8 {
        on_card.submit(request(i), &callback);
    }
    card.pause();
    let paused_at = Instant::now();
    card.pause(); // idempotent
    let done_at_pause = card.stats().completed;
    for i in 8..12 {
        on_card.submit(request(i), &callback);
    }
    // (Nothing can complete while paused; the pause gives a wrong card the chance to.)
    std::thread::sleep(Duration::from_millis(300));
    let s = card.stats();
    assert!(s.paused, "{s:?}");
    assert_eq!(s.accepted, 12, "accepted while paused, there was room: {s:?}");
    assert_eq!(s.completed, done_at_pause, "nothing completes while paused: {s:?}");
    assert_eq!(s.in_flight as u64, 12 - done_at_pause, "the rest stay in the ring: {s:?}");
    assert_eq!(outcomes.count() as u64, done_at_pause);

    let paused_for = paused_at.elapsed();
    card.resume();
    card.resume(); // idempotent
    assert_eq!(outcomes.wait_for(12), 12, "everything accepted completes after the resume");
    let s = card.stats();
    assert!(!s.paused && s.in_flight == 0 && s.completed == 12, "{s:?}");
    assert_eq!(s.injected_failures, 0);
    for (i, outcome) in outcomes.0.lock().unwrap().iter() {
        let expected = on_soft.run(request(*i)).unwrap().buf.to_vec();
        assert_eq!(outcome.as_ref().ok(), Some(&expected), "request {i}: the real result");
    }
    // The clock stood still: the pause (at least 300 ms) shows as no lateness; counted, it
    // would make the requests due in it late by about the whole pause.
    assert!(Duration::from_nanos(s.late_max_ns) < paused_for / 2, "paused {paused_for:?}: {s:?}");
}

#[test]
fn unpausing_unblocks_a_busy_ring() {
    let (fw, card, on_card, _soft) = card("ring=2,setup=10us,rate=1GB/s");
    card.pause();
    let outcomes = Arc::new(Outcomes::default());
    let callback = outcomes.callback();
    for i in 0..6 {
        on_card.submit(request(i), &callback);
    }
    std::thread::sleep(Duration::from_millis(20));
    let s = card.stats();
    assert_eq!((s.accepted, s.completed, s.in_flight), (2, 0, 2), "{s:?}");
    assert!(s.busy >= 1, "a full ring answers Busy while paused: {s:?}");
    assert_eq!(outcomes.count(), 0);
    card.resume();
    assert_eq!(outcomes.wait_for(6), 6, "the resume unblocks the ring and ocf offers the rest");
    let s = card.stats();
    assert_eq!((s.accepted, s.completed), (6, 6), "{s:?}");
    assert!(s.unblocks >= 1, "{s:?}");
    let flow = fw.driver_stats(ocf::Driver::name(&*card)).unwrap().flow;
    assert!(flow.restarts >= 1 && flow.blocked_periods >= 1, "{flow:?}");
    assert!(outcomes.0.lock().unwrap().iter().all(|(_, o)| o.is_ok()));
}

#[test]
fn failed_requests_come_back_untouched_and_counted() {
    let (fw, card, on_card, on_soft) = card("ring=8,setup=10us,rate=1GB/s");
    card.fail(true);
    for i in 0..3 {
        let failed = on_card.run(request(i)).expect_err("the card reports a hardware fault");
        assert_eq!(failed.error(), &Error::DriverFailure("sim: injected device fault"));
        assert_eq!(failed.request.buf.to_vec(), message(i), "buffer untouched");
        assert_eq!(failed.request.iv(), IV);
    }
    // Asynchronous requests too, several at once.
    let outcomes = Arc::new(Outcomes::default());
    let callback = outcomes.callback();
    for i in 3..8 {
        on_card.submit(request(i), &callback);
    }
    assert_eq!(outcomes.wait_for(5), 5);
    for (i, o) in outcomes.0.lock().unwrap().iter() {
        let (e, buf) = o.as_ref().expect_err("failed");
        assert_eq!((e, buf), (&Error::DriverFailure("sim: injected device fault"), &message(*i)));
    }
    let s = card.stats();
    assert_eq!((s.completed, s.injected_failures), (8, 8), "{s:?}");
    let errors = fw.driver_stats(ocf::Driver::name(&*card)).unwrap().errors;
    assert_eq!(errors.get(ocf::ErrorKind::DriverFailure), 8, "ocf counts them as driver failures");

    card.fail(false);
    let ok = on_card.run(request(9)).expect("the fault is off");
    assert_eq!(ok.buf.to_vec(), on_soft.run(request(9)).unwrap().buf.to_vec());
    assert_eq!(card.stats().injected_failures, 8);
}

#[test]
fn a_paused_failing_card_fails_what_it_held_after_the_resume() {
    let (_fw, card, on_card, _soft) = card("ring=8,setup=10us,rate=1GB/s");
    card.pause();
    card.fail(true);
    let done = Arc::new(AtomicUsize::new(0));
    let seen = done.clone();
    let callback: ocf::Callback = Arc::new(move |o: ocf::Outcome| {
        let f = o.expect_err("failed");
        assert_eq!(f.request.buf.to_vec(), message(f.request.user));
        seen.fetch_add(1, Ordering::SeqCst);
    });
    for i in 0..4 {
        on_card.submit(request(i), &callback);
    }
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(done.load(Ordering::SeqCst), 0);
    card.resume();
    let start = Instant::now();
    while done.load(Ordering::SeqCst) < 4 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(done.load(Ordering::SeqCst), 4);
    assert_eq!(card.stats().injected_failures, 4);
}
