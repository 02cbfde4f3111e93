//! The throughput harness the 16-lane engines' measurements share (`cbc16/bench.rs`,
//! `des16/bench.rs`): each case runs aws-lc-rs, IPsec-MB's job API (the driver's
//! `ffi::Manager`: submit each buffer, then flush) and the engine on the same buffers, the
//! engines taking turns for a number of short rounds, and keeps each engine's best round
//! (another process on the core only ever slows a round down; the medians moved by 30%
//! between runs here). Each bench builds its cases and its `measure`; this prints the table.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use crate::ffi::{CipherKind, DoneEntry, HashKind, JobDesc, Manager, MAX_JOBS};
use crate::testkit::LaneEngine;

/// How long one engine's round lasts.
const ROUND: Duration = Duration::from_millis(40);

/// Bytes per second of `bytes` per call of `f`, over about `ROUND`; the clock is read every
/// `batch` calls (so that reading it costs nothing beside short calls).
pub(crate) fn rate(bytes: usize, batch: u64, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    let mut calls = 0u64;
    while t.elapsed() < ROUND {
        for _ in 0..batch {
            f();
        }
        calls += batch;
    }
    (calls as f64 * bytes as f64) / t.elapsed().as_secs_f64()
}

/// The best of an engine's rounds.
pub(crate) fn best(v: Vec<f64>) -> f64 {
    v.into_iter().fold(0.0, f64::max)
}

/// One line of the table: buffers of `lens` bytes.
pub(crate) struct Case {
    pub name: &'static str,
    pub lens: Vec<usize>,
    /// One key for all buffers, or one each.
    pub one_key: bool,
    pub decrypt: bool,
}

impl Case {
    /// An encryption case.
    pub(crate) fn new(name: &'static str, lens: Vec<usize>, one_key: bool) -> Case {
        Case { name, lens, one_key, decrypt: false }
    }

    /// The engine's lanes over `bufs`: buffer `i` with `keys[i]` (`keys[0]` where the case
    /// has one key), chained from an IV of the byte [`iv`]`(i)` repeated.
    pub(crate) fn lanes<'a, E: LaneEngine>(
        &self,
        bufs: &'a mut [Vec<u8>],
        keys: &'a [E::Keys],
    ) -> Vec<E::Lane<'a>> {
        let key = |i| if self.one_key { &keys[0] } else { &keys[i] };
        bufs.iter_mut().enumerate().map(|(i, data)| E::lane(key(i), iv(i), data)).collect()
    }
}

/// The byte buffer `i`'s IV repeats, for every engine.
pub(crate) fn iv(i: usize) -> u8 {
    i as u8 ^ 0x5c
}

/// How a table shows rates: its unit's name, bytes per unit, and decimals.
pub(crate) struct Unit(pub &'static str, pub f64, pub usize);

/// Prints `title` and a table of `cases` (those whose name contains the environment
/// variable `filter`'s value, for `perf record`), each row what `measure` gives: the best
/// rounds of aws-lc, IPsec-MB (`None` without it) and `engine`, in bytes per second.
pub(crate) fn report(
    title: &str,
    engine: &str,
    Unit(unit, scale, digits): Unit,
    cases: &[Case],
    filter: &str,
    mut measure: impl FnMut(&Case) -> (f64, Option<f64>, f64),
) {
    let width = cases.iter().map(|c| c.name.len()).max().unwrap_or(0) + 4;
    println!("{title}, {unit}");
    let (vs_aws, vs_imb) = (format!("{engine}/aws"), format!("{engine}/imb"));
    println!("{:<width$} {:>8} {:>8} {engine:>8} {vs_aws:>10} {vs_imb:>10}", "case", "aws-lc", "imb-job");
    let only = std::env::var(filter).unwrap_or_default();
    for case in cases.iter().filter(|c| c.name.contains(&only)) {
        let (a, m, c) = measure(case);
        let m_s = m.map_or("-".to_owned(), |m| format!("{:.digits$}", m / scale));
        let r = m.map_or("-".to_owned(), |m| format!("{:.2}x", c / m));
        let (a_s, c_s) = (a / scale, c / scale);
        println!("{:<width$} {a_s:>8.digits$} {m_s:>8} {c_s:>8.digits$} {:>9.2}x {r:>10}", case.name, c / a);
    }
}

/// Key material IPsec-MB's jobs point at.
pub(crate) trait JobKeys {
    fn enc(&self) -> *const c_void;
    fn dec(&self) -> *const c_void;
}

/// IPsec-MB's job API through the driver's glue, where it was built in: one key per buffer.
pub(crate) struct Jobs<K> {
    keys: Vec<K>,
    cipher: CipherKind,
    key_len: u64,
}

pub(crate) struct Running<'a, K> {
    jobs: &'a Jobs<K>,
    mgr: Manager,
    done: [DoneEntry; MAX_JOBS],
}

impl<K: JobKeys> Jobs<K> {
    /// The keys `expand` makes with a manager; `None` without IPsec-MB.
    pub(crate) fn new(
        cipher: CipherKind,
        key_len: u64,
        expand: impl FnOnce(&mut Manager) -> Option<Vec<K>>,
    ) -> Option<Jobs<K>> {
        let keys = expand(&mut Manager::new()?)?;
        Some(Jobs { keys, cipher, key_len })
    }

    pub(crate) fn start(&self) -> Option<Running<'_, K>> {
        Some(Running { jobs: self, mgr: Manager::new()?, done: [DoneEntry::default(); MAX_JOBS] })
    }
}

impl<K: JobKeys> Running<'_, K> {
    /// Submits one job per buffer, then flushes: every job completes before it returns.
    pub(crate) fn run<const IV: usize>(&mut self, bufs: &mut [Vec<u8>], ivs: &[[u8; IV]], decrypt: bool) {
        for (i, ((b, iv), k)) in bufs.iter_mut().zip(ivs).zip(&self.jobs.keys).enumerate() {
            let d = JobDesc {
                src: b.as_ptr(),
                dst: b.as_mut_ptr(),
                cipher_off: 0,
                cipher_len: b.len() as u64,
                hash_off: 0,
                hash_len: 0,
                iv: iv.as_ptr(),
                iv_len: IV as u64,
                enc_keys: k.enc(),
                dec_keys: k.dec(),
                key_len: self.jobs.key_len,
                ipad: std::ptr::null(),
                opad: std::ptr::null(),
                aad: std::ptr::null(),
                aad_len: 0,
                tag: std::ptr::null_mut(),
                tag_len: 0,
                cipher: self.jobs.cipher,
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
