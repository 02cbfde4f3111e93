//! AES-128-CBC encrypt, 16 x 1 KiB per batch, submitted directly (no dispatch worker, no
//! return worker) the way the IPsec core submits a batch: all but the last request marked
//! `Flags::MORE`, callbacks immediate. soft and mb take turns, median of rounds; then a
//! lone request (no hint) on each, and the cost of the lane's uncontended lock.
//!
//! `taskset -c 1 cargo run --release -p ocf-mb --example batch_cost`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ocf::{Callback, CipherAlg, Flags, Framework, Op, Request, Session, SessionParams};

const BATCH: usize = 16;
const LEN: usize = 1024;

fn session(fw: &Framework, driver: &str) -> Session {
    fw.new_session_on(driver, &SessionParams::cipher(CipherAlg::AesCbc, &[7u8; 16][..])).unwrap()
}

/// GB/s of payload over `time`, batches of `batch` (1: a lone request, no hint).
fn run(s: &Session, batch: usize, time: Duration) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    // Requests come back and are reused: no allocation per request on either driver.
    let pool: Arc<Mutex<Vec<Request>>> = Arc::new(Mutex::new(Vec::new()));
    let back = {
        let (done, pool) = (done.clone(), pool.clone());
        Arc::new(move |o: ocf::Outcome| {
            if let Ok(r) = o {
                pool.lock().unwrap().push(r);
            }
            done.fetch_add(1, Ordering::Relaxed);
        }) as Callback
    };
    let mut sent = 0u64;
    let t = Instant::now();
    while t.elapsed() < time {
        for i in 0..batch {
            let more = if i + 1 < batch { Flags::MORE } else { Flags::default() };
            let kept = pool.lock().unwrap().pop();
            let req = kept.unwrap_or_else(|| Request::new(Op::Encrypt, vec![0x5a; LEN]).with_iv(&[1; 16]));
            s.submit(req.with_flags(more | Flags::CALLBACK_IMMEDIATE), &back);
            sent += 1;
        }
        while done.load(Ordering::Relaxed) < sent {
            std::hint::spin_loop();
        }
    }
    (sent as f64 * LEN as f64) / t.elapsed().as_secs_f64() / 1e9
}

/// GB/s of payload over `time`, runs of `batch` handed over whole ([`Session::run_batch`]).
fn run_whole(s: &Session, batch: usize, time: Duration) -> f64 {
    let mut reqs: Vec<Request> =
        (0..batch).map(|_| Request::new(Op::Encrypt, vec![0x5a; LEN]).with_iv(&[1; 16])).collect();
    let mut out = Vec::with_capacity(batch);
    let mut sent = 0u64;
    let t = Instant::now();
    while t.elapsed() < time {
        s.run_batch(&mut reqs, &mut out);
        reqs.extend(out.drain(..).map(|o| o.expect("encrypts")));
        sent += batch as u64;
    }
    (sent as f64 * LEN as f64) / t.elapsed().as_secs_f64() / 1e9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let mb = ocf_mb::register_driver(&fw).expect("IPsec-MB unavailable");
    let (soft, mbs) = (session(&fw, ocf_soft::NAME), session(&fw, ocf_mb::NAME));
    for (batch, label) in [(BATCH, "16 x 1 KiB, MORE on all but the last"), (1, "lone 1 KiB, no hint")] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            a.push(run(&soft, batch, Duration::from_millis(300)));
            b.push(run(&mbs, batch, Duration::from_millis(300)));
        }
        let (a, b) = (median(a), median(b));
        println!("{label}: soft {a:.2} GB/s, mb {b:.2} GB/s, mb/soft {:.2}x", b / a);
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        a.push(run_whole(&soft, BATCH, Duration::from_millis(300)));
        b.push(run_whole(&mbs, BATCH, Duration::from_millis(300)));
    }
    let (a, b) = (median(a), median(b));
    println!("16 x 1 KiB as one run (run_batch): soft {a:.2} GB/s, mb {b:.2} GB/s, mb/soft {:.2}x", b / a);
    // The lane lock, uncontended (one thread): lock + unlock.
    let m = Mutex::new(0u64);
    let n = 10_000_000;
    let t = Instant::now();
    for _ in 0..n {
        *std::hint::black_box(&m).lock().unwrap() += 1;
    }
    println!("uncontended Mutex lock+unlock: {:.1} ns", t.elapsed().as_nanos() as f64 / n as f64);
    println!("{:?}", mb.stats());
}
