//! Throughput of cbc16 beside aws-lc-rs (the soft driver's AES-CBC) and IPsec-MB's job API,
//! on the same buffers, the engines taking turns, the best of many short rounds (the
//! harness: `crate::benchkit`). One thread; pin it:
//!
//! `taskset -c 1 cargo test --release -p ocf-mb --lib -- --ignored --nocapture cbc16_throughput`
//! (`CBC16_CASE=text` runs only the cases whose name contains it)
//!
//! Each engine encrypts the same buffers in place again and again (the bytes change, the
//! work does not); no allocation inside the timed loops.

use std::time::Instant;

use aws_lc_rs::cipher::{EncryptingKey, EncryptionContext, UnboundCipherKey, AES_128};
use aws_lc_rs::iv::FixedLength;

use super::*;
use crate::benchkit::{best, iv, rate, report, Case, JobKeys, Jobs, Unit};
use crate::ffi::{CipherKind, Schedule};

const ROUNDS: usize = 21;

impl JobKeys for (Schedule, Schedule) {
    fn enc(&self) -> *const std::ffi::c_void {
        self.0 .0.as_ptr().cast()
    }
    fn dec(&self) -> *const std::ffi::c_void {
        self.1 .0.as_ptr().cast()
    }
}

/// The engines on one case, `ROUNDS` times in turn: the best rounds (aws-lc, IPsec-MB, cbc16).
fn measure(e: Cbc16, case: &Case) -> (f64, Option<f64>, f64) {
    let n = case.lens.len();
    let raw: Vec<[u8; 16]> = (0..n)
        .map(|i| std::array::from_fn(|j| if case.one_key { j as u8 } else { (i * 31 + j) as u8 }))
        .collect();
    let ivs: Vec<[u8; 16]> = (0..n).map(|i| [iv(i); 16]).collect();
    let bytes: usize = case.lens.iter().sum();
    let mut bufs: Vec<Vec<u8>> = case.lens.iter().map(|&l| vec![0xa7; l]).collect();

    let aws: Vec<EncryptingKey> = raw
        .iter()
        .map(|k| EncryptingKey::cbc(UnboundCipherKey::new(&AES_128, k).unwrap()).unwrap())
        .collect();
    let ours: Vec<Box<RoundKeys>> = raw.iter().map(|k| e.expand(k).unwrap()).collect();
    let mb = Jobs::new(CipherKind::AesCbc, 16, |mgr| {
        let schedule = |k: &[u8; 16]| {
            let (mut enc, mut dec) = (Schedule([0; 240]), Schedule([0; 240]));
            assert!(mgr.expand(k, &mut enc, &mut dec));
            (enc, dec)
        };
        Some(raw.iter().map(schedule).collect())
    });
    let mut ws = e.workspace();

    let (mut a, mut m, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        a.push(rate(bytes, 32, || {
            for ((k, iv), b) in aws.iter().zip(&ivs).zip(bufs.iter_mut()) {
                let ctx = EncryptionContext::Iv128(FixedLength::from(*iv));
                k.less_safe_encrypt(b, ctx).unwrap();
            }
        }));
        if let Some(mut jobs) = mb.as_ref().and_then(|j| j.start()) {
            m.push(rate(bytes, 32, || jobs.run(&mut bufs, &ivs, false)));
        }
        let mut lanes = case.lanes::<Cbc16>(&mut bufs, &ours);
        c.push(rate(bytes, 32, || ws.encrypt(&mut lanes).unwrap()));
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
        Case::new("16 x 1 KiB, one key", vec![1024; 16], true),
        Case::new("16 x 1 KiB, 16 keys", vec![1024; 16], false),
        Case::new("16 x mixed 64..1500, one key", mixed.clone(), true),
        Case::new("16 x mixed 64..1500, 16 keys", mixed.clone(), false),
        // Longest first for every engine (cbc16 sorts more than 16 lanes so; the order
        // matters to IPsec-MB as much): `shuffled_mixed` below times the sort.
        Case::new("64 x mixed, longest first, 16 keys", longest_first, false),
        Case::new("1 x 1 KiB", vec![1024], true),
        Case::new("3 x 1 KiB", vec![1024; 3], true),
        Case::new("64 x 1 KiB, one key", vec![1024; 64], true),
        Case::new("1 x 16 B (per-call cost)", vec![16], true),
        Case::new("16 x 16 B (per-call cost)", vec![16; 16], true),
    ];
    let title = format!("AES-128-CBC encrypt (best of {ROUNDS} alternating rounds)");
    report(&title, "cbc16", Unit("GB/s", 1e9, 2), &cases, "CBC16_CASE", |case| measure(e, case));
    shuffled_mixed(e, &mixed);
}

/// More than 16 lanes of mixed sizes in a new order per call (as requests come): 64 lanes,
/// the 16 mixed sizes four times over, 16 keys, shuffled before each call; the shuffle's
/// own time is taken off. Shows what `encrypt`'s longest-first order costs and gains.
fn shuffled_mixed(e: Cbc16, mixed: &[usize]) {
    let raw: Vec<[u8; 16]> = (0..16).map(|i| [i as u8; 16]).collect();
    let keys: Vec<Box<RoundKeys>> = raw.iter().map(|k| e.expand(k).unwrap()).collect();
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
