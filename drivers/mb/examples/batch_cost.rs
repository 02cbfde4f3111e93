//! Encrypt (or compute a MAC), 16 x 1 KiB per batch, submitted directly (no dispatch
//! worker, no return worker): all but the last request marked `Flags::MORE`, callbacks
//! immediate; then the same 16 handed over whole as one run (`Session::run_batch`, the
//! way the IPsec core submits a batch); then a lone request (no hint). soft and mb take
//! turns, median of rounds; last, the cost of the lane's uncontended lock. Algorithms (arguments; default aes-128-cbc): aes-128-cbc, des-ede3-cbc,
//! aes-128-cbc-hmac-sha1, aes-128-cbc-hmac-sha256, hmac-sha1, hmac-sha256, aes-128-gcm.
//!
//! `taskset -c 1 cargo run --release -p ocf-mb --example batch_cost [ALG...]`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ocf::{Callback, CipherAlg, DigestAlg, Flags, Framework, MacAlg, Op, Request, Session, SessionParams};

const BATCH: usize = 16;
const LEN: usize = 1024;
/// Alternating rounds per driver and case.
const ROUNDS: usize = 9;

/// The session parameters and the operation of a named algorithm.
fn params(alg: &str) -> (SessionParams, Op) {
    let key: Vec<u8> = (0..24u8).map(|i| i.wrapping_mul(29) ^ 0x4b).collect();
    let etm =
        |d| SessionParams::cipher_then_mac(CipherAlg::AesCbc, &key[..16], MacAlg::Hmac(d), &[9u8; 20][..]);
    match alg {
        "aes-128-cbc" => (SessionParams::cipher(CipherAlg::AesCbc, &key[..16]), Op::Encrypt),
        "des-ede3-cbc" => (SessionParams::cipher(CipherAlg::TdesCbc, &key[..]), Op::Encrypt),
        "aes-128-cbc-hmac-sha1" => (etm(DigestAlg::Sha1).with_tag_len(12), Op::Encrypt),
        "aes-128-cbc-hmac-sha256" => (etm(DigestAlg::Sha256).with_tag_len(16), Op::Encrypt),
        "hmac-sha1" => (SessionParams::hmac(DigestAlg::Sha1, &[9u8; 20][..]), Op::ComputeDigest),
        "hmac-sha256" => (SessionParams::hmac(DigestAlg::Sha256, &[9u8; 32][..]), Op::ComputeDigest),
        "aes-128-gcm" => (SessionParams::aead(CipherAlg::AesGcm, &key[..16]), Op::Encrypt),
        _ => panic!("unknown algorithm {alg}"),
    }
}

/// GB/s of payload over `time`, batches of `batch` (1: a lone request, no hint).
fn run(s: &Session, op: Op, batch: usize, time: Duration) -> f64 {
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
            let iv_len = s.params().cipher_alg().map_or(0, |c| c.iv_len());
            let req = kept.unwrap_or_else(|| Request::new(op, vec![0x5a; LEN]).with_iv(&[1; 16][..iv_len]));
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
fn run_whole(s: &Session, op: Op, batch: usize, time: Duration) -> f64 {
    let iv_len = s.params().cipher_alg().map_or(0, |c| c.iv_len());
    let mut reqs: Vec<Request> =
        (0..batch).map(|_| Request::new(op, vec![0x5a; LEN]).with_iv(&[1; 16][..iv_len])).collect();
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
    let mut algs: Vec<String> = std::env::args().skip(1).collect();
    if algs.is_empty() {
        algs.push("aes-128-cbc".to_owned());
    }
    for alg in &algs {
        let (p, op) = params(alg);
        let soft = fw.new_session_on(ocf_soft::NAME, &p).unwrap();
        let mbs = fw.new_session_on(ocf_mb::NAME, &p).unwrap();
        let cases = [
            (BATCH, false, "16 x 1 KiB, MORE on all but the last"),
            (BATCH, true, "16 x 1 KiB as one run (run_batch)"),
            (1, false, "lone 1 KiB, no hint"),
        ];
        for (batch, whole, label) in cases {
            let go = |s: &Session| {
                let time = Duration::from_millis(200);
                if whole {
                    run_whole(s, op, batch, time)
                } else {
                    run(s, op, batch, time)
                }
            };
            // Rounds alternate, and each round's ratio is kept: on a shared machine the
            // load moves between rounds more than between the two halves of one.
            let (mut a, mut b, mut r) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                a.push(go(&soft));
                b.push(go(&mbs));
                r.push(b[b.len() - 1] / a[a.len() - 1]);
            }
            let (lo, hi) =
                (r.iter().cloned().fold(f64::MAX, f64::min), r.iter().cloned().fold(0.0, f64::max));
            let (a, b, r) = (median(a), median(b), median(r));
            println!(
                "{alg}, {label}: soft {a:.3} GB/s, mb {b:.3} GB/s, mb/soft {r:.2}x (rounds {lo:.2}-{hi:.2})"
            );
        }
    }
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
