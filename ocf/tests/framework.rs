//! The framework's own behaviour, independent of any real algorithm: driver selection,
//! registration, the three completion styles over synchronous and asynchronous drivers,
//! flow control (Busy, unblock), driver removal, and the accounting of each error.
//! (Dispatch under load — batching, ordering, detach under load, bounded memory — is in
//! `dispatch.rs`, against the simulated accelerator.)
//!
//! The drivers here implement only the NULL cipher (output = input, RFC 2410) so that every
//! result is checkable; they differ in how they complete (inline, from another thread) and
//! in what they answer (Busy, a broken contract).

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use ocf::{
    Callback, Capabilities, CipherAlg, Driver, DriverSession, Error, ErrorKind, Flags, Framework, Hint, Key,
    Op, Outcome, Priority, Processed, Request, SessionContext, SessionParams,
};

/// How long a test waits for something that must happen: generous, since other work shares
/// the machine; a wait returns as soon as its event comes.
const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until `cond` holds, polling every millisecond; fails naming `what` after
/// [`PATIENCE`].
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "waited {PATIENCE:?} for {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    /// Finishes inside `process`.
    Inline,
    /// Hands the request to a worker thread that completes it through `SessionContext::done`
    /// after `delay`, and not while `gate` is closed (a stalled device).
    Threaded { delay: Duration },
    /// Synchronous, but answers Busy while `gate` is closed; whoever opens it calls
    /// `unblock` (a device that was momentarily full).
    BusyWhileClosed,
    /// Claims to be synchronous but answers Pending (a broken driver).
    LiesAboutSync,
}

struct NullDriver {
    name: &'static str,
    priority: Priority,
    behaviour: Behaviour,
    freed: Arc<AtomicUsize>,
    /// For `BusyWhileClosed` and `Threaded`: closed while true; the contexts of its sessions.
    gate: Arc<AtomicBool>,
    contexts: Mutex<Vec<SessionContext>>,
}

impl NullDriver {
    fn new(name: &'static str, priority: Priority, behaviour: Behaviour) -> Arc<NullDriver> {
        Arc::new(NullDriver {
            name,
            priority,
            behaviour,
            freed: Arc::default(),
            gate: Arc::default(),
            contexts: Mutex::default(),
        })
    }

    /// Opens the gate and tells the framework (FreeBSD's crypto_unblock).
    fn open(&self) {
        self.gate.store(false, Ordering::SeqCst);
        for c in self.contexts.lock().unwrap().iter() {
            c.unblock();
        }
    }
}

struct NullSession {
    behaviour: Behaviour,
    ctx: SessionContext,
    worker: Option<Mutex<mpsc::Sender<Request>>>,
    gate: Arc<AtomicBool>,
}

impl Driver for NullDriver {
    fn name(&self) -> &str {
        self.name
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            ciphers: vec![CipherAlg::Null],
            synchronous: matches!(
                self.behaviour,
                Behaviour::Inline | Behaviour::BusyWhileClosed | Behaviour::LiesAboutSync
            ),
            ..Default::default()
        }
    }
    fn probe_session(&self, _: &SessionParams) -> Option<Priority> {
        Some(self.priority)
    }
    fn new_session(&self, _: &SessionParams, ctx: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        let worker = match self.behaviour {
            Behaviour::Threaded { delay } => {
                let (tx, rx) = mpsc::channel::<Request>();
                let (ctx, gate) = (ctx.clone(), self.gate.clone());
                thread::spawn(move || {
                    for req in rx {
                        thread::sleep(delay);
                        while gate.load(Ordering::SeqCst) {
                            thread::sleep(Duration::from_millis(1));
                        }
                        ctx.done(Ok(req));
                    }
                });
                Some(Mutex::new(tx))
            }
            _ => None,
        };
        self.contexts.lock().unwrap().push(ctx.clone());
        Ok(Box::new(NullSession { behaviour: self.behaviour, ctx, worker, gate: self.gate.clone() }))
    }
    fn free_session(&self, s: Box<dyn DriverSession>) {
        self.freed.fetch_add(1, Ordering::SeqCst);
        drop(s);
    }
}

impl DriverSession for NullSession {
    fn process(&self, req: Request, _: Hint) -> Processed {
        match self.behaviour {
            Behaviour::Inline => Processed::Done(Ok(req)),
            Behaviour::BusyWhileClosed if self.gate.load(Ordering::SeqCst) => Processed::Busy(req),
            Behaviour::BusyWhileClosed => Processed::Done(Ok(req)),
            Behaviour::LiesAboutSync => {
                self.ctx.done(Ok(req));
                Processed::Pending
            }
            Behaviour::Threaded { .. } => {
                let _ = self.worker.as_ref().map(|w| w.lock().unwrap().send(req));
                Processed::Pending
            }
        }
    }
}

fn null_params() -> SessionParams {
    SessionParams::cipher(CipherAlg::Null, Key::empty())
}

fn request(data: &[u8]) -> Request {
    Request::new(Op::Encrypt, data.to_vec())
}

/// A minimal executor: polls a future to completion, parking the thread in between.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark()
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

#[test]
fn best_priority_wins_and_ties_go_to_the_least_loaded_driver() {
    let fw = Framework::with_config(config());
    fw.register(NullDriver::new("sw-a", Priority::Software, Behaviour::Inline)).unwrap();
    fw.register(NullDriver::new("sw-b", Priority::Software, Behaviour::Inline)).unwrap();
    let s1 = fw.new_session(&null_params()).unwrap();
    let s2 = fw.new_session(&null_params()).unwrap();
    assert_ne!(s1.driver_name(), s2.driver_name(), "ties must spread sessions over drivers");

    fw.register(NullDriver::new("hw", Priority::Hardware, Behaviour::Inline)).unwrap();
    assert_eq!(fw.new_session(&null_params()).unwrap().driver_name(), "hw");
    assert_eq!(fw.choose_driver(&null_params()).unwrap(), ("hw".to_string(), Priority::Hardware));
    // A caller may name a lower-priority driver.
    assert_eq!(fw.new_session_on("sw-a", &null_params()).unwrap().driver_name(), "sw-a");
}

#[test]
fn registry_errors_are_specific_and_counted() {
    let fw = Framework::with_config(config());
    assert_eq!(fw.new_session(&null_params()).unwrap_err(), Error::NoDriver);
    fw.register(NullDriver::new("n", Priority::Software, Behaviour::Inline)).unwrap();
    assert_eq!(
        fw.register(NullDriver::new("n", Priority::Software, Behaviour::Inline)).unwrap_err(),
        Error::DuplicateDriver("n".into())
    );
    assert_eq!(fw.unregister("nope").unwrap_err(), Error::UnknownDriver("nope".into()));
    assert_eq!(fw.new_session_on("nope", &null_params()).unwrap_err(), Error::UnknownDriver("nope".into()));
    let gcm = SessionParams::aead(CipherAlg::AesGcm, &[0u8; 16]);
    assert_eq!(fw.new_session(&gcm).unwrap_err(), Error::UnsupportedCipher(CipherAlg::AesGcm));
    // Unsupported on a named driver is charged to that driver.
    assert_eq!(fw.new_session_on("n", &gcm).unwrap_err(), Error::UnsupportedCipher(CipherAlg::AesGcm));
    let bad_key = SessionParams::cipher(CipherAlg::AesCbc, &[0u8; 5]);
    assert!(matches!(fw.new_session(&bad_key), Err(Error::BadKeyLength { got: 5, .. })));

    let stats = fw.stats();
    let fw_errors = stats.errors;
    assert_eq!(fw_errors.get(ErrorKind::NoDriver), 1);
    assert_eq!(fw_errors.get(ErrorKind::DuplicateDriver), 1);
    assert_eq!(fw_errors.get(ErrorKind::UnknownDriver), 2);
    assert_eq!(fw_errors.get(ErrorKind::Unsupported), 1);
    assert_eq!(fw_errors.get(ErrorKind::BadKeyLength), 1);
    assert_eq!(fw.driver_stats("n").unwrap().errors.get(ErrorKind::Unsupported), 1);
    assert_eq!(stats.total_errors().total(), 7);
}

#[test]
fn three_completion_styles_on_a_synchronous_driver() {
    let fw = Framework::with_config(config());
    fw.register(NullDriver::new("n", Priority::Software, Behaviour::Inline)).unwrap();
    let s = fw.new_session(&null_params()).unwrap();

    let r = s.run(request(b"run")).unwrap();
    assert_eq!(r.buf.to_vec(), b"run");

    // (result, name of the thread the callback ran on)
    type Seen = Vec<(Vec<u8>, String)>;
    let got: Arc<Mutex<Seen>> = Arc::default();
    let sink = got.clone();
    let cb: Callback = Arc::new(move |o: Outcome| {
        let thread = thread::current().name().unwrap_or("").to_owned();
        sink.lock().unwrap().push((o.unwrap().buf.to_vec(), thread));
    });
    s.submit(request(b"immediate").with_flags(Flags::CALLBACK_IMMEDIATE), &cb);
    let me = thread::current().name().unwrap_or("").to_owned();
    assert_eq!(
        *got.lock().unwrap(),
        vec![(b"immediate".to_vec(), me)],
        "an immediate callback from a synchronous driver runs at once, on the submitter"
    );
    s.submit(request(b"worker"), &cb);
    wait_until("the worker's callback", || got.lock().unwrap().len() >= 2);
    let (buf, thread) = got.lock().unwrap()[1].clone();
    assert_eq!(buf, b"worker");
    assert!(thread.starts_with("ocf-return-"), "other callbacks run on a return worker, not {thread:?}");

    let r = block_on(s.submit_async(request(b"future"))).unwrap();
    assert_eq!(r.buf.to_vec(), b"future");
    let st = s.stats();
    assert_eq!((st.ops, st.bytes), (4, 3 + 9 + 6 + 6));
}

#[test]
fn three_completion_styles_on_an_asynchronous_driver() {
    let fw = Framework::with_config(config());
    let delay = Duration::from_millis(5);
    fw.register(NullDriver::new("t", Priority::Hardware, Behaviour::Threaded { delay })).unwrap();
    let s = fw.new_session(&null_params()).unwrap();

    assert_eq!(s.run(request(b"run")).unwrap().buf.to_vec(), b"run");

    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let cb: Callback = Arc::new(move |o: Outcome| tx.lock().unwrap().send(o.unwrap().user).unwrap());
    for i in 0..10u64 {
        let mut r = request(b"cb");
        r.user = i;
        s.submit(r, &cb);
    }
    let mut users: Vec<u64> = (0..10).map(|_| rx.recv_timeout(PATIENCE).unwrap()).collect();
    users.sort();
    assert_eq!(users, (0..10).collect::<Vec<_>>(), "every callback exactly once");

    let r = block_on(s.submit_async(request(b"future"))).unwrap();
    assert_eq!(r.buf.to_vec(), b"future");
    assert_eq!(s.stats().ops, 12);
}

#[test]
fn a_result_that_completes_before_the_caller_waits_is_not_missed() {
    // The worker completes with no delay, racing the submitter into `wait`. Many rounds
    // make both orders happen.
    let fw = Framework::with_config(config());
    fw.register(NullDriver::new("t", Priority::Software, Behaviour::Threaded { delay: Duration::ZERO }))
        .unwrap();
    let s = fw.new_session(&null_params()).unwrap();
    for i in 0..2000u64 {
        let mut r = request(&i.to_le_bytes());
        r.user = i;
        let r = s.run(r).unwrap();
        assert_eq!(r.user, i);
        assert_eq!(r.buf.to_vec(), i.to_le_bytes());
    }
}

#[test]
fn a_busy_driver_gets_the_request_again_after_it_unblocks() {
    // A synchronous driver that is momentarily full: the framework holds the request
    // (and the ones after it) instead of failing them, and offers them again on unblock.
    let fw = Framework::with_config(config());
    let d = NullDriver::new("b", Priority::Software, Behaviour::BusyWhileClosed);
    fw.register(d.clone()).unwrap();
    let s = fw.new_session(&null_params()).unwrap();
    d.gate.store(true, Ordering::SeqCst);

    let waiter = {
        let s = s.clone();
        thread::spawn(move || s.run(request(b"keep me")))
    };
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let cb: Callback = Arc::new(move |o: Outcome| tx.lock().unwrap().send(o.unwrap().buf.to_vec()).unwrap());
    // Wait until the driver is blocked, then queue more behind it.
    wait_until("the driver to block", || fw.driver_stats("b").unwrap().flow.blocked_periods > 0);
    for i in 0..5u8 {
        s.submit(request(&[i]).with_flags(Flags::CALLBACK_IMMEDIATE), &cb);
    }
    let st = fw.driver_stats("b").unwrap();
    assert_eq!(st.flow.blocked_periods, 1);
    assert_eq!(st.flow.held, 6, "the refused request and the five behind it wait");
    assert!(rx.try_recv().is_err(), "nothing completes while the driver is blocked");

    d.open();
    assert_eq!(waiter.join().unwrap().unwrap().buf.to_vec(), b"keep me");
    let mut got: Vec<Vec<u8>> = (0..5).map(|_| rx.recv_timeout(PATIENCE).unwrap()).collect();
    got.sort();
    assert_eq!(got, (0..5u8).map(|i| vec![i]).collect::<Vec<_>>(), "none lost");
    let st = fw.driver_stats("b").unwrap();
    assert!(st.flow.restarts >= 1);
    assert_eq!((st.flow.held, st.flow.in_flight, st.ops), (0, 0, 6));
    assert_eq!(st.errors.total(), 0, "flow control is not an error");
}

#[test]
fn try_submit_answers_would_block_when_the_driver_is_full() {
    let fw = Framework::with_config(ocf::Config { max_in_flight: 3, ..config() });
    let d = NullDriver::new("b", Priority::Software, Behaviour::BusyWhileClosed);
    fw.register(d.clone()).unwrap();
    let s = fw.new_session(&null_params()).unwrap();
    d.gate.store(true, Ordering::SeqCst);
    let done = Arc::new(AtomicUsize::new(0));
    let n = done.clone();
    let cb: Callback = Arc::new(move |o: Outcome| {
        o.unwrap();
        n.fetch_add(1, Ordering::SeqCst);
    });
    for i in 0..3u8 {
        s.try_submit(request(&[i]), &cb).unwrap();
    }
    let f = s.try_submit(request(b"fourth"), &cb).unwrap_err();
    assert_eq!(*f.error(), Error::WouldBlock);
    assert_eq!(f.request.buf.to_vec(), b"fourth", "the request comes back untouched");
    assert_eq!(s.stats().errors.get(ErrorKind::WouldBlock), 1);
    let st = fw.driver_stats("b").unwrap();
    assert_eq!((st.flow.in_flight, st.flow.max_in_flight), (3, 3));

    // A blocking submit waits for room instead.
    let blocked = {
        let (s, cb) = (s.clone(), cb.clone());
        thread::spawn(move || s.submit(request(b"waits"), &cb))
    };
    // Seen in the framework's own state, not timed: the submitter counts its wait before it
    // sleeps, and nothing can wake it while the driver holds all three credits.
    wait_until("the submit to wait or return", || {
        fw.driver_stats("b").unwrap().flow.submit_waits >= 1 || blocked.is_finished()
    });
    assert!(!blocked.is_finished(), "submit waits while the driver has no room");
    let st = fw.driver_stats("b").unwrap();
    assert_eq!((st.flow.in_flight, st.flow.submit_waits, done.load(Ordering::SeqCst)), (3, 1, 0));
    d.open();
    blocked.join().unwrap();
    wait_until("four completions", || done.load(Ordering::SeqCst) >= 4);
    assert_eq!(done.load(Ordering::SeqCst), 4);
    assert!(fw.driver_stats("b").unwrap().flow.submit_waits >= 1);
}

#[test]
fn unregistering_the_only_driver_fails_later_requests_with_driver_gone() {
    let fw = Framework::with_config(config());
    let d = NullDriver::new("n", Priority::Software, Behaviour::Inline);
    let freed = d.freed.clone();
    fw.register(d).unwrap();
    let s = fw.new_session(&null_params()).unwrap();
    s.run(request(b"x")).unwrap();
    fw.unregister("n").unwrap();
    let f = s.run(request(b"y")).unwrap_err();
    assert_eq!(*f.error(), Error::DriverGone);
    assert_eq!(f.request.buf.to_vec(), b"y");
    assert_eq!(s.stats().errors.get(ErrorKind::DriverGone), 1);
    assert!(fw.drivers().is_empty());
    drop(s);
    assert_eq!(freed.load(Ordering::SeqCst), 1, "the driver frees the session when the last handle goes");
}

#[test]
fn unregistering_a_driver_moves_its_sessions_to_the_next_best() {
    let fw = Framework::with_config(config());
    let hw = NullDriver::new("hw", Priority::Hardware, Behaviour::Inline);
    let sw = NullDriver::new("sw", Priority::Software, Behaviour::Inline);
    let hw_freed = hw.freed.clone();
    fw.register(hw).unwrap();
    fw.register(sw).unwrap();
    let s = fw.new_session(&null_params()).unwrap();
    assert_eq!(s.driver_name(), "hw");
    s.run(request(b"one")).unwrap();
    fw.unregister("hw").unwrap();
    assert_eq!(hw_freed.load(Ordering::SeqCst), 1, "the old driver's session is freed at detach");
    assert_eq!(s.driver_name(), "sw");
    assert_eq!(s.run(request(b"two")).unwrap().buf.to_vec(), b"two");
    let st = s.stats();
    assert_eq!((st.ops, st.bytes, st.errors.total()), (2, 6, 0), "the session's totals span both drivers");
    let sw_stats = fw.driver_stats("sw").unwrap();
    assert_eq!((sw_stats.sessions, sw_stats.ops), (1, 1));
}

#[test]
fn driver_stats_include_freed_sessions() {
    let fw = Framework::with_config(config());
    fw.register(NullDriver::new("n", Priority::Software, Behaviour::Inline)).unwrap();
    for _ in 0..3 {
        let s = fw.new_session(&null_params()).unwrap();
        s.run(request(&[0u8; 100])).unwrap();
    }
    let live = fw.new_session(&null_params()).unwrap();
    live.run(request(&[0u8; 10])).unwrap();
    let st = fw.driver_stats("n").unwrap();
    assert_eq!((st.sessions, st.sessions_created, st.ops, st.bytes), (1, 4, 4, 310));
}

#[test]
fn a_driver_breaking_the_synchronous_contract_gets_an_error_not_a_hang_or_panic() {
    let fw = Framework::with_config(config());
    fw.register(NullDriver::new("liar", Priority::Software, Behaviour::LiesAboutSync)).unwrap();
    let s = fw.new_session(&null_params()).unwrap();
    let f = s.run(request(b"x")).unwrap_err();
    assert!(matches!(f.error(), Error::DriverFailure(_)));
    // Both the broken answer and the orphaned late completion are charged to the driver.
    assert_eq!(fw.driver_stats("liar").unwrap().errors.get(ErrorKind::DriverFailure), 2);
}

#[test]
fn a_driver_that_does_not_drain_in_time_is_reported_and_its_requests_still_complete() {
    let fw = Framework::with_config(ocf::Config { drain_timeout: Duration::from_millis(50), ..config() });
    // A stalled device: it completes only once the test opens its gate, so the drain times
    // out however the threads are scheduled.
    let d = NullDriver::new("slow", Priority::Hardware, Behaviour::Threaded { delay: Duration::ZERO });
    d.gate.store(true, Ordering::SeqCst);
    fw.register(d.clone()).unwrap();
    let s = fw.new_session(&null_params()).unwrap();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let cb: Callback =
        Arc::new(move |o: Outcome| tx.lock().unwrap().send(o.map(|r| r.buf.to_vec())).unwrap());
    s.submit(request(b"in the device"), &cb);
    let e = fw.unregister("slow").unwrap_err();
    assert_eq!(e, Error::DetachTimeout { in_flight: 1 });
    assert_eq!(
        fw.stats().errors.get(ErrorKind::DetachTimeout),
        1,
        "counted framework-wide: the driver is gone"
    );
    // The driver finishes it later: delivered once, not lost, not failed.
    assert!(rx.try_recv().is_err(), "delivered while the device was stalled");
    d.gate.store(false, Ordering::SeqCst);
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap().unwrap(), b"in the device");
    // (A second delivery cannot be ruled out by waiting; 100 ms is a hint, not the proof.)
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "delivered exactly once");
}

#[test]
fn profiling_times_each_stage_and_samples_one_request_in_n() {
    use ocf::Stage;
    let fw = Framework::with_config(ocf::Config { profile_every: 1, ..config() });
    let delay = Duration::from_millis(2);
    fw.register(NullDriver::new("t", Priority::Hardware, Behaviour::Threaded { delay })).unwrap();
    let s = fw.new_session(&null_params()).unwrap();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let cb: Callback = Arc::new(move |o: Outcome| {
        thread::sleep(Duration::from_micros(300));
        tx.lock().unwrap().send(o.is_ok()).unwrap();
    });
    for _ in 0..10 {
        s.submit(request(b"p"), &cb);
    }
    for _ in 0..10 {
        assert!(rx.recv_timeout(PATIENCE).unwrap());
    }
    // The Callback stage is recorded once the callback has returned, after it sent.
    wait_until("10 callbacks timed", || fw.profile("t").unwrap().get(Stage::Callback).count >= 10);
    let p = fw.profile("t").unwrap();
    for stage in Stage::ALL {
        assert_eq!(p.get(stage).count, 10, "{stage:?}\n{p}");
    }
    assert!(p.get(Stage::Invoke).min_ns >= delay.as_nanos() as u64, "the device's 2 ms show as Invoke\n{p}");
    assert!(p.get(Stage::Callback).min_ns >= 300_000, "the callback's 300 µs show as Callback\n{p}");
    assert!(p.get(Stage::Dispatch).avg_ns < p.get(Stage::Invoke).avg_ns);
    let table = p.to_string();
    assert!(table.contains("Dispatch") && table.contains("Callback"), "{table}");

    // Sampling: one request in 64 (per submitting thread), and a reused request does not
    // stay sampled.
    let fw = Framework::with_config(ocf::Config { profile_every: 64, ..config() });
    fw.register(NullDriver::new("n", Priority::Software, Behaviour::Inline)).unwrap();
    let s = fw.new_session(&null_params()).unwrap();
    let mut r = request(b"again");
    for _ in 0..6400 {
        r = s.run(r).unwrap();
    }
    let n = fw.profile("n").unwrap().get(Stage::Dispatch).count;
    assert!((99..=101).contains(&n), "sampled {n} of 6400");
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
