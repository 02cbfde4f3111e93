//! The framework's cost per request on each dispatch path, through the null driver (whose
//! "algorithm" does nothing), and the cost of profiling.
//!
//! Paths (Leffler, "Cryptographic Device Support for FreeBSD", section 3.2):
//! - `direct-immediate/run`: a blocking caller on a synchronous driver: the outcome comes
//!   back up the stack.
//! - `direct-immediate/callback`: `submit` with `CALLBACK_IMMEDIATE`: the callback runs on
//!   the submitting thread before `submit` returns.
//! - `direct-return-worker`: `submit` without the flag: the driver runs on the submitter,
//!   the callback on a return worker (one thread hop).
//! - `batched-return-worker/N`: `submit_batch` of N requests: queued to the dispatch
//!   worker, which hands them to the driver with the "more follow" hint; callbacks on a
//!   return worker (two thread hops).
//!
//! Paths with a thread hop are timed from the first submit until the last callback has
//! run, over many requests, and reported per request (criterion's "elements" are
//! requests). Requests are allocated before the clock starts; the callbacks keep them
//! (in a thread-local sink, emptied in bulk), so allocation is not what is measured.
//!
//! `profile-cost/*` compares `Config::profile_every` = 0 (off), 64 (the default) and 1
//! (every request) on the null driver and on a real algorithm (AES-128-GCM, 1 KiB, soft).
//!
//! Run: `cargo bench -p ocf-null --bench dispatch` (pin with `taskset -c 1` for the
//! single-thread paths; the paths with workers need both cores).

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ocf::{
    Callback, CipherAlg, Config, Flags, Framework, Key, Op, Outcome, Policy, Request, Session, SessionParams,
};
use ocf_null::NullDriver;

thread_local! {
    /// Finished requests collected on the callback's thread, handed back to the pool in
    /// bulk: recycling costs no lock per request on the measured path.
    static SINK: RefCell<Vec<Request>> = const { RefCell::new(Vec::new()) };
}

/// Requests for the next round.
static POOL: Mutex<Vec<Request>> = Mutex::new(Vec::new());

fn keep(req: Request) {
    SINK.with(|s| {
        let mut s = s.borrow_mut();
        s.push(req);
        if s.len() >= 256 {
            POOL.lock().unwrap().append(&mut s);
        }
    });
}

/// `n` requests, recycled where possible (outside the timed region).
fn requests(n: usize) -> Vec<Request> {
    let mut pool = POOL.lock().unwrap();
    let take = pool.len().min(n);
    let from = pool.len() - take;
    let mut v: Vec<Request> = pool.drain(from..).collect();
    drop(pool);
    for r in &mut v {
        r.reset(Op::Encrypt, vec![0u8; 64].into());
    }
    v.extend((take..n).map(|_| request()));
    v
}

fn null_session(config: Config) -> (Framework, Session) {
    let fw = Framework::with_config(config);
    ocf_null::register(&fw).unwrap();
    let s = fw.new_session_on(ocf_null::NAME, &SessionParams::cipher(CipherAlg::Null, Key::empty())).unwrap();
    (fw, s)
}

fn request() -> Request {
    Request::new(Op::Encrypt, vec![0u8; 64])
}

/// Counts completions and wakes the timing thread when the expected number is reached.
struct Countdown {
    left: AtomicUsize,
    waiter: Mutex<Option<Thread>>,
}

impl Countdown {
    fn callback(self: &Arc<Self>) -> Callback {
        let me = self.clone();
        Arc::new(move |o: Outcome| {
            keep(o.unwrap_or_else(|f| panic!("null request failed: {f}")));
            if me.left.fetch_sub(1, Ordering::AcqRel) == 1 {
                if let Some(t) = me.waiter.lock().unwrap().take() {
                    t.unpark();
                }
            }
        })
    }

    fn arm(&self, n: usize) {
        *self.waiter.lock().unwrap() = Some(thread::current());
        self.left.store(n, Ordering::Release);
    }

    fn wait(&self) {
        while self.left.load(Ordering::Acquire) != 0 {
            thread::park_timeout(Duration::from_millis(10));
        }
    }
}

/// Times `iters` requests through `submit_all`, from the first submit to the last callback.
fn timed(iters: u64, countdown: &Arc<Countdown>, submit_all: impl FnOnce(Vec<Request>)) -> Duration {
    let reqs = requests(iters as usize);
    countdown.arm(iters as usize);
    let start = Instant::now();
    submit_all(reqs);
    countdown.wait();
    start.elapsed()
}

fn paths(c: &mut Criterion) {
    let (_fw, s) = null_session(Config::default());
    let mut g = c.benchmark_group("dispatch");
    g.throughput(Throughput::Elements(1));
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));

    let mut slot = Some(request());
    g.bench_function("direct-immediate/run", |b| {
        b.iter(|| {
            let r = s.run(slot.take().unwrap()).unwrap();
            slot = Some(black_box(r));
        })
    });

    // The same through a session routed per request between two null drivers, under each
    // per-request policy: what a routing decision adds to the direct round trip.
    for policy in [Policy::CostModel, Policy::LeastLoaded, Policy::RoundRobin] {
        let fw = Framework::with_config(Config { policy, ..Config::default() });
        fw.register(Arc::new(NullDriver::routable("null-a"))).unwrap();
        fw.register(Arc::new(NullDriver::routable("null-b"))).unwrap();
        let routed = fw.new_session(&SessionParams::cipher(CipherAlg::Null, Key::empty())).unwrap();
        assert_eq!(routed.drivers().len(), 2);
        g.bench_function(format!("direct-immediate/run-routed/{policy}"), |b| {
            b.iter(|| {
                let r = routed.run(slot.take().unwrap()).unwrap();
                slot = Some(black_box(r));
            })
        });
    }

    thread_local!(static BACK: RefCell<Option<Request>> = const { RefCell::new(None) });
    let back: Callback = Arc::new(|o: Outcome| BACK.with(|b| *b.borrow_mut() = o.ok()));
    BACK.with(|b| *b.borrow_mut() = Some(request().with_flags(Flags::CALLBACK_IMMEDIATE)));
    g.bench_function("direct-immediate/callback", |b| {
        b.iter(|| {
            let r = BACK.with(|b| b.borrow_mut().take()).unwrap();
            s.submit(r, &back);
        })
    });

    let countdown = Arc::new(Countdown { left: AtomicUsize::new(0), waiter: Mutex::new(None) });
    let cb = countdown.callback();
    g.bench_function("direct-return-worker", |b| {
        b.iter_custom(|iters| {
            timed(iters, &countdown, |reqs| {
                for r in reqs {
                    s.submit(r, &cb);
                }
            })
        })
    });

    for batch in [16usize, 64, 256] {
        g.bench_function(format!("batched-return-worker/{batch}"), |b| {
            b.iter_custom(|iters| {
                timed(iters, &countdown, |reqs| {
                    let mut reqs = reqs.into_iter();
                    while reqs.len() > 0 {
                        s.submit_batch(reqs.by_ref().take(batch), &cb);
                    }
                })
            })
        });
    }
    g.finish();
}

fn profile_cost(c: &mut Criterion) {
    let mut g = c.benchmark_group("profile-cost");
    g.throughput(Throughput::Elements(1));
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_millis(1500));
    for every in [0u32, 64, 1] {
        let (_fw, s) = null_session(Config { profile_every: every, ..Config::default() });
        let mut slot = Some(request());
        g.bench_function(format!("null-run/every={every}"), |b| {
            b.iter(|| {
                let r = s.run(slot.take().unwrap()).unwrap();
                slot = Some(black_box(r));
            })
        });

        let fw = Framework::with_config(Config { profile_every: every, ..Config::default() });
        ocf_soft::register(&fw).unwrap();
        let gcm = fw.new_session(&SessionParams::aead(CipherAlg::AesGcm, &[7u8; 16])).unwrap();
        let mut slot = Some(Request::new(Op::Encrypt, vec![0u8; 1024]).with_iv(&[1u8; 12]));
        g.bench_function(format!("aes-128-gcm-1k-run/every={every}"), |b| {
            b.iter(|| {
                let r = gcm.run(slot.take().unwrap()).unwrap();
                slot = Some(black_box(r));
            })
        });
    }
    g.finish();
}

criterion_group!(benches, paths, profile_cost);
criterion_main!(benches);
