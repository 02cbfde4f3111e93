//! Throughput of cbc16 beside aws-lc-rs (the soft driver's AES-CBC) and IPsec-MB's job API
//! (the driver's `ffi::Manager`: submit each buffer, then flush), on the same buffers,
//! the engines taking turns, the best of many short rounds (another process on the core
//! only ever slows a round down; the medians moved by 30% between runs here). One thread; pin it:
//!
//! `taskset -c 1 cargo test --release -p ocf-mb --lib -- --ignored --nocapture cbc16_throughput`
//! (`CBC16_CASE=text` runs only the cases whose name contains it)
//!
//! Each engine encrypts the same buffers in place again and again (the bytes change, the
//! work does not); no allocation inside the timed loops.

use std::time::{Duration, Instant};

use aws_lc_rs::cipher::{EncryptingKey, EncryptionContext, UnboundCipherKey, AES_128};
use aws_lc_rs::iv::FixedLength;

use super::*;

const ROUNDS: usize = 21;
const ROUND: Duration = Duration::from_millis(40);

/// GB/s of `bytes` per call of `f`, over about `ROUND`.
fn gbps(bytes: usize, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    let mut calls = 0u64;
    while t.elapsed() < ROUND {
        for _ in 0..32 {
            f();
        }
        calls += 32;
    }
    (calls as f64 * bytes as f64) / t.elapsed().as_secs_f64() / 1e9
}

fn best(v: Vec<f64>) -> f64 {
    v.into_iter().fold(0.0, f64::max)
}

struct Case {
    name: &'static str,
    lens: Vec<usize>,
    /// One key for all buffers, or one each.
    one_key: bool,
}

/// The engines on one case, `ROUNDS` times in turn: the best rounds (aws-lc, IPsec-MB, cbc16).
fn measure(e: Cbc16, case: &Case) -> (f64, Option<f64>, f64) {
    let n = case.lens.len();
    let raw: Vec<[u8; 16]> = (0..n)
        .map(|i| std::array::from_fn(|j| if case.one_key { j as u8 } else { (i * 31 + j) as u8 }))
        .collect();
    let ivs: Vec<[u8; 16]> = (0..n).map(|i| [i as u8 ^ 0x5c; 16]).collect();
    let bytes: usize = case.lens.iter().sum();
    let mut bufs: Vec<Vec<u8>> = case.lens.iter().map(|&l| vec![0xa7; l]).collect();

    let aws: Vec<EncryptingKey> = raw
        .iter()
        .map(|k| EncryptingKey::cbc(UnboundCipherKey::new(&AES_128, k).unwrap()).unwrap())
        .collect();
    let ours: Vec<RoundKeys> = raw.iter().map(|k| e.expand(k).unwrap()).collect();
    let mb = ipsec_mb::Jobs::new(&raw);
    let mut ws = e.workspace();

    let (mut a, mut m, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        a.push(gbps(bytes, || {
            for ((k, iv), b) in aws.iter().zip(&ivs).zip(bufs.iter_mut()) {
                let ctx = EncryptionContext::Iv128(FixedLength::from(*iv));
                k.less_safe_encrypt(b, ctx).unwrap();
            }
        }));
        if let Some(mut jobs) = mb.as_ref().and_then(|j| j.start()) {
            m.push(gbps(bytes, || jobs.run(&mut bufs, &ivs)));
        }
        let mut lanes: Vec<Lane<'_>> = bufs
            .iter_mut()
            .zip(&ours)
            .zip(&ivs)
            .map(|((data, k), iv)| Lane { keys: if case.one_key { &ours[0] } else { k }, iv: *iv, data })
            .collect();
        c.push(gbps(bytes, || ws.encrypt(&mut lanes).unwrap()));
    }
    (best(a), (!m.is_empty()).then(|| best(m)), best(c))
}

#[test]
#[ignore = "a measurement: run it in release, pinned (see the module docs)"]
fn cbc16_throughput() {
    let Some(e) = Cbc16::new() else {
        eprintln!("no VAES-512 on this CPU");
        return;
    };
    // 16 sizes from 64 to 1500 (rounded down to blocks), fixed so that runs compare.
    let mixed: Vec<usize> = (0..16).map(|i| (64 + (i * 1436 / 15)) & !15).collect();
    let mut longest_first = mixed.repeat(4);
    longest_first.sort_unstable_by(|a, b| b.cmp(a));
    let cases = [
        Case { name: "16 x 1 KiB, one key", lens: vec![1024; 16], one_key: true },
        Case { name: "16 x 1 KiB, 16 keys", lens: vec![1024; 16], one_key: false },
        Case { name: "16 x mixed 64..1500, one key", lens: mixed.clone(), one_key: true },
        Case { name: "16 x mixed 64..1500, 16 keys", lens: mixed.clone(), one_key: false },
        // Longest first for every engine (cbc16 sorts more than 16 lanes so; the order
        // matters to IPsec-MB as much): `shuffled_mixed` below times the sort.
        Case { name: "64 x mixed, longest first, 16 keys", lens: longest_first, one_key: false },
        Case { name: "1 x 1 KiB", lens: vec![1024], one_key: true },
        Case { name: "3 x 1 KiB", lens: vec![1024; 3], one_key: true },
        Case { name: "64 x 1 KiB, one key", lens: vec![1024; 64], one_key: true },
        Case { name: "1 x 16 B (per-call cost)", lens: vec![16], one_key: true },
        Case { name: "16 x 16 B (per-call cost)", lens: vec![16; 16], one_key: true },
    ];
    println!("AES-128-CBC encrypt, GB/s (best of {ROUNDS} alternating rounds)");
    println!(
        "{:<36} {:>8} {:>8} {:>8} {:>10} {:>10}",
        "case", "aws-lc", "imb-job", "cbc16", "cbc16/aws", "cbc16/imb"
    );
    // CBC16_CASE=text runs only the cases whose name contains it (for `perf record`).
    let only = std::env::var("CBC16_CASE").unwrap_or_default();
    for case in cases.iter().filter(|c| c.name.contains(&only)) {
        let (a, m, c) = measure(e, case);
        let m_s = m.map_or("-".to_owned(), |m| format!("{m:.2}"));
        let r = m.map_or("-".to_owned(), |m| format!("{:.2}x", c / m));
        println!("{:<36} {a:>8.2} {m_s:>8} {c:>8.2} {:>9.2}x {r:>10}", case.name, c / a);
    }
    shuffled_mixed(e, &mixed);
}

/// More than 16 lanes of mixed sizes in a new order per call (as requests come): 64 lanes,
/// the 16 mixed sizes four times over, 16 keys, shuffled before each call; the shuffle's
/// own time is taken off. Shows what `encrypt`'s longest-first order costs and gains.
fn shuffled_mixed(e: Cbc16, mixed: &[usize]) {
    let raw: Vec<[u8; 16]> = (0..16).map(|i| [i as u8; 16]).collect();
    let keys: Vec<RoundKeys> = raw.iter().map(|k| e.expand(k).unwrap()).collect();
    let lens = mixed.repeat(4);
    let bytes: usize = lens.iter().sum();
    let mut bufs: Vec<Vec<u8>> = lens.iter().map(|&l| vec![0; l]).collect();
    let mut lanes: Vec<Lane<'_>> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, data)| Lane { keys: &keys[i % 16], iv: [0; 16], data })
        .collect();
    let mut ws = e.workspace();
    let mut x = 1u64;
    let mut shuffle = move |lanes: &mut [Lane<'_>]| {
        for i in (1..lanes.len()).rev() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lanes.swap(i, (x >> 33) as usize % (i + 1));
        }
    };
    let time = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..5_000 {
            f();
        }
        t.elapsed().as_nanos() as f64 / 5_000.0
    };
    let (mut only, mut both) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        only.push(time(&mut || shuffle(&mut lanes)));
        both.push(time(&mut || {
            shuffle(&mut lanes);
            ws.encrypt(&mut lanes).unwrap();
        }));
    }
    let fastest = |v: Vec<f64>| v.into_iter().fold(f64::MAX, f64::min);
    let ns = fastest(both) - fastest(only);
    println!("64 x mixed 64..1500, 16 keys, new order per call: cbc16 {:.2} GB/s", bytes as f64 / ns);
}

/// IPsec-MB's job API through the driver's glue, where it was built in.
mod ipsec_mb {
    use crate::ffi::{CipherKind, DoneEntry, HashKind, JobDesc, Manager, Schedule, MAX_JOBS};

    pub struct Jobs {
        scheds: Vec<(Schedule, Schedule)>,
    }

    pub struct Running<'a> {
        jobs: &'a Jobs,
        mgr: Manager,
        done: [DoneEntry; MAX_JOBS],
    }

    impl Jobs {
        /// `None` without IPsec-MB.
        pub fn new(keys: &[[u8; 16]]) -> Option<Jobs> {
            let mut mgr = Manager::new()?;
            let scheds = keys
                .iter()
                .map(|k| {
                    let (mut enc, mut dec) = (Schedule([0; 240]), Schedule([0; 240]));
                    assert!(mgr.expand(k, &mut enc, &mut dec));
                    (enc, dec)
                })
                .collect();
            Some(Jobs { scheds })
        }

        pub fn start(&self) -> Option<Running<'_>> {
            Some(Running { jobs: self, mgr: Manager::new()?, done: [DoneEntry::default(); MAX_JOBS] })
        }
    }

    impl Running<'_> {
        /// Submits one job per buffer, then flushes: every job completes before it returns.
        pub fn run(&mut self, bufs: &mut [Vec<u8>], ivs: &[[u8; 16]]) {
            for (i, ((b, iv), (enc, dec))) in bufs.iter_mut().zip(ivs).zip(&self.jobs.scheds).enumerate() {
                let d = JobDesc {
                    src: b.as_ptr(),
                    dst: b.as_mut_ptr(),
                    cipher_off: 0,
                    cipher_len: b.len() as u64,
                    hash_off: 0,
                    hash_len: 0,
                    iv: iv.as_ptr(),
                    iv_len: 16,
                    enc_keys: enc.0.as_ptr().cast(),
                    dec_keys: dec.0.as_ptr().cast(),
                    key_len: 16,
                    ipad: std::ptr::null(),
                    opad: std::ptr::null(),
                    aad: std::ptr::null(),
                    aad_len: 0,
                    tag: std::ptr::null_mut(),
                    tag_len: 0,
                    cipher: CipherKind::AesCbc,
                    hash: HashKind::Null,
                    decrypt: 0,
                    pad: 0,
                    user: i as u64,
                };
                // SAFETY: the buffer, IV and schedules outlive this call, and the flush
                // below returns every job before it ends.
                unsafe { self.mgr.submit(&d, &mut self.done) };
            }
            self.mgr.flush(&mut self.done);
        }
    }
}
