//! Throughput of des16 beside aws-lc-rs (the soft driver's 3DES-CBC) and IPsec-MB's job
//! API, on the same buffers, the engines taking turns, the best of many short rounds (the
//! harness: `crate::benchkit`). One thread; pin it:
//!
//! `taskset -c 1 cargo test --release -p ocf-mb --lib -- --ignored --nocapture des16_throughput`
//! (`DES16_CASE=text` runs only the cases whose name contains it)

#[allow(deprecated)]
use aws_lc_rs::cipher::DES_EDE3_FOR_LEGACY_USE_ONLY;
use aws_lc_rs::cipher::{
    DecryptingKey, DecryptionContext, EncryptingKey, EncryptionContext, UnboundCipherKey,
};
use aws_lc_rs::iv::FixedLength;

use super::*;
use crate::benchkit::{best, iv, rate, report, Case, JobKeys, Jobs, Unit};
use crate::ffi::{self, CipherKind};

const ROUNDS: usize = 11;

impl JobKeys for ffi::Des3Keys {
    fn enc(&self) -> *const std::ffi::c_void {
        self.job_keys()
    }
    fn dec(&self) -> *const std::ffi::c_void {
        self.job_keys()
    }
}

/// The engines on one case, `ROUNDS` times in turn: the best rounds (aws-lc, IPsec-MB, des16).
fn measure(e: Des16, case: &Case) -> (f64, Option<f64>, f64) {
    let n = case.lens.len();
    let raw: Vec<[u8; 24]> = (0..n)
        .map(|i| std::array::from_fn(|j| if case.one_key { j as u8 * 7 } else { (i * 31 + j * 7) as u8 }))
        .collect();
    let ivs: Vec<[u8; 8]> = (0..n).map(|i| [iv(i); 8]).collect();
    let bytes: usize = case.lens.iter().sum();
    let mut bufs: Vec<Vec<u8>> = case.lens.iter().map(|&l| vec![0xa7; l]).collect();

    #[allow(deprecated)]
    let unbound = |k: &[u8; 24]| UnboundCipherKey::new(&DES_EDE3_FOR_LEGACY_USE_ONLY, k).unwrap();
    let aws: Vec<(EncryptingKey, DecryptingKey)> = raw
        .iter()
        .map(|k| (EncryptingKey::cbc(unbound(k)).unwrap(), DecryptingKey::cbc(unbound(k)).unwrap()))
        .collect();
    let ours: Vec<Box<Des3Keys>> = raw.iter().map(|k| e.expand(k).unwrap()).collect();
    let mb = Jobs::new(CipherKind::Des3, 24, |mgr| raw.iter().map(|k| mgr.des3_keys(k)).collect());
    let mut ws = e.workspace();

    let (mut a, mut m, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        a.push(rate(bytes, 1, || {
            for (((enc, dec), iv), b) in aws.iter().zip(&ivs).zip(bufs.iter_mut()) {
                if case.decrypt {
                    dec.decrypt(b, DecryptionContext::Iv64(FixedLength::from(*iv))).unwrap();
                } else {
                    enc.less_safe_encrypt(b, EncryptionContext::Iv64(FixedLength::from(*iv))).unwrap();
                }
            }
        }));
        if let Some(mut jobs) = mb.as_ref().and_then(|j| j.start()) {
            m.push(rate(bytes, 1, || jobs.run(&mut bufs, &ivs, case.decrypt)));
        }
        let mut lanes = case.lanes::<Des16>(&mut bufs, &ours);
        c.push(rate(bytes, 1, || {
            if case.decrypt { ws.decrypt(&mut lanes) } else { ws.encrypt(&mut lanes) }.unwrap()
        }));
    }
    (best(a), (!m.is_empty()).then(|| best(m)), best(c))
}

#[test]
#[ignore = "a measurement: run it in release, pinned (see the module docs)"]
fn des16_throughput() {
    let Some(e) = Des16::new() else {
        eprintln!("no AVX-512 VBMI on this CPU");
        return;
    };
    let mixed: Vec<usize> = (0..16).map(|i| (64 + (i * 1436 / 15)) & !7).collect();
    let case = Case::new;
    let cases = [
        case("16 x 1 KiB, one key", vec![1024; 16], true),
        case("16 x 1 KiB, 16 keys", vec![1024; 16], false),
        case("16 x mixed 64..1500, 16 keys", mixed, false),
        case("1 x 1 KiB", vec![1024], true),
        case("4 x 1 KiB", vec![1024; 4], true),
        case("64 x 1 KiB, one key", vec![1024; 64], true),
        case("16 x 8 B (per-call cost)", vec![8; 16], true),
        Case { decrypt: true, ..case("decrypt 16 x 1 KiB, 16 keys", vec![1024; 16], false) },
        Case { decrypt: true, ..case("decrypt 1 x 1 KiB", vec![1024], true) },
    ];
    let title = format!("3DES-CBC (best of {ROUNDS} alternating rounds)");
    report(&title, "des16", Unit("MB/s", 1e6, 1), &cases, "DES16_CASE", |case| measure(e, case));
}
