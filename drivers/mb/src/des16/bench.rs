//! Throughput of des16 beside aws-lc-rs (the soft driver's 3DES-CBC) and IPsec-MB's job
//! API (the driver's `ffi::Manager`: submit each buffer, then flush), on the same buffers,
//! the engines taking turns, the best of many short rounds (another process on the core
//! only ever slows a round down). One thread; pin it:
//!
//! `taskset -c 1 cargo test --release -p ocf-mb --lib -- --ignored --nocapture des16_throughput`
//! (`DES16_CASE=text` runs only the cases whose name contains it)

use std::time::{Duration, Instant};

#[allow(deprecated)]
use aws_lc_rs::cipher::DES_EDE3_FOR_LEGACY_USE_ONLY;
use aws_lc_rs::cipher::{
    DecryptingKey, DecryptionContext, EncryptingKey, EncryptionContext, UnboundCipherKey,
};
use aws_lc_rs::iv::FixedLength;

use super::*;

const ROUNDS: usize = 11;
const ROUND: Duration = Duration::from_millis(40);

/// MB/s of `bytes` per call of `f`, over about `ROUND`.
fn mbps(bytes: usize, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    let mut calls = 0u64;
    while t.elapsed() < ROUND {
        f();
        calls += 1;
    }
    (calls as f64 * bytes as f64) / t.elapsed().as_secs_f64() / 1e6
}

fn best(v: Vec<f64>) -> f64 {
    v.into_iter().fold(0.0, f64::max)
}

struct Case {
    name: &'static str,
    lens: Vec<usize>,
    /// One key for all buffers, or one each.
    one_key: bool,
    decrypt: bool,
}

/// The engines on one case, `ROUNDS` times in turn: the best rounds (aws-lc, IPsec-MB, des16).
fn measure(e: Des16, case: &Case) -> (f64, Option<f64>, f64) {
    let n = case.lens.len();
    let raw: Vec<[u8; 24]> = (0..n)
        .map(|i| std::array::from_fn(|j| if case.one_key { j as u8 * 7 } else { (i * 31 + j * 7) as u8 }))
        .collect();
    let ivs: Vec<[u8; 8]> = (0..n).map(|i| [i as u8 ^ 0x5c; 8]).collect();
    let bytes: usize = case.lens.iter().sum();
    let mut bufs: Vec<Vec<u8>> = case.lens.iter().map(|&l| vec![0xa7; l]).collect();

    #[allow(deprecated)]
    let unbound = |k: &[u8; 24]| UnboundCipherKey::new(&DES_EDE3_FOR_LEGACY_USE_ONLY, k).unwrap();
    let aws: Vec<(EncryptingKey, DecryptingKey)> = raw
        .iter()
        .map(|k| (EncryptingKey::cbc(unbound(k)).unwrap(), DecryptingKey::cbc(unbound(k)).unwrap()))
        .collect();
    let ours: Vec<Des3Keys> = raw.iter().map(|k| e.expand(k).unwrap()).collect();
    let mb = ipsec_mb::Jobs::new(&raw);
    let mut ws = e.workspace();

    let (mut a, mut m, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        a.push(mbps(bytes, || {
            for (((enc, dec), iv), b) in aws.iter().zip(&ivs).zip(bufs.iter_mut()) {
                if case.decrypt {
                    dec.decrypt(b, DecryptionContext::Iv64(FixedLength::from(*iv))).unwrap();
                } else {
                    enc.less_safe_encrypt(b, EncryptionContext::Iv64(FixedLength::from(*iv))).unwrap();
                }
            }
        }));
        if let Some(mut jobs) = mb.as_ref().and_then(|j| j.start()) {
            m.push(mbps(bytes, || jobs.run(&mut bufs, &ivs, case.decrypt)));
        }
        let mut lanes: Vec<Lane<'_>> = bufs
            .iter_mut()
            .zip(&ours)
            .zip(&ivs)
            .map(|((data, k), iv)| Lane { keys: if case.one_key { &ours[0] } else { k }, iv: *iv, data })
            .collect();
        c.push(mbps(bytes, || {
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
    let case = |name, lens, one_key| Case { name, lens, one_key, decrypt: false };
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
    println!("3DES-CBC, MB/s (best of {ROUNDS} alternating rounds)");
    println!(
        "{:<32} {:>8} {:>8} {:>8} {:>10} {:>10}",
        "case", "aws-lc", "imb-job", "des16", "des16/aws", "des16/imb"
    );
    let only = std::env::var("DES16_CASE").unwrap_or_default();
    for case in cases.iter().filter(|c| c.name.contains(&only)) {
        let (a, m, c) = measure(e, case);
        let m_s = m.map_or("-".to_owned(), |m| format!("{m:.1}"));
        let r = m.map_or("-".to_owned(), |m| format!("{:.2}x", c / m));
        println!("{:<32} {a:>8.1} {m_s:>8} {c:>8.1} {:>9.2}x {r:>10}", case.name, c / a);
    }
}

/// IPsec-MB's job API through the driver's glue, where it was built in.
mod ipsec_mb {
    use crate::ffi::{CipherKind, Des3Keys, DoneEntry, HashKind, JobDesc, Manager, MAX_JOBS};

    pub struct Jobs {
        keys: Vec<Des3Keys>,
    }

    pub struct Running<'a> {
        jobs: &'a Jobs,
        mgr: Manager,
        done: [DoneEntry; MAX_JOBS],
    }

    impl Jobs {
        /// `None` without IPsec-MB.
        pub fn new(keys: &[[u8; 24]]) -> Option<Jobs> {
            let mut mgr = Manager::new()?;
            let keys = keys.iter().map(|k| mgr.des3_keys(k)).collect::<Option<Vec<_>>>()?;
            Some(Jobs { keys })
        }

        pub fn start(&self) -> Option<Running<'_>> {
            Some(Running { jobs: self, mgr: Manager::new()?, done: [DoneEntry::default(); MAX_JOBS] })
        }
    }

    impl Running<'_> {
        /// Submits one job per buffer, then flushes: every job completes before it returns.
        pub fn run(&mut self, bufs: &mut [Vec<u8>], ivs: &[[u8; 8]], decrypt: bool) {
            for (i, ((b, iv), k)) in bufs.iter_mut().zip(ivs).zip(&self.jobs.keys).enumerate() {
                let d = JobDesc {
                    src: b.as_ptr(),
                    dst: b.as_mut_ptr(),
                    cipher_off: 0,
                    cipher_len: b.len() as u64,
                    hash_off: 0,
                    hash_len: 0,
                    iv: iv.as_ptr(),
                    iv_len: 8,
                    enc_keys: k.job_keys(),
                    dec_keys: k.job_keys(),
                    key_len: 24,
                    ipad: std::ptr::null(),
                    opad: std::ptr::null(),
                    aad: std::ptr::null(),
                    aad_len: 0,
                    tag: std::ptr::null_mut(),
                    tag_len: 0,
                    cipher: CipherKind::Des3,
                    hash: HashKind::Null,
                    decrypt: u32::from(decrypt),
                    pad: 0,
                    user: i as u64,
                };
                // SAFETY: the buffer, IV and key schedules outlive this call, and the flush
                // below returns every job before it ends.
                unsafe { self.mgr.submit(&d, &mut self.done) };
            }
            self.mgr.flush(&mut self.done);
        }
    }
}
