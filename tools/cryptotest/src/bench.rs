//! Measuring one case: an algorithm, a target, an operand size or size distribution, some
//! threads.
//!
//! The target ([`Target`]) is one driver (a session pinned to it, `new_session_on`), `auto`
//! (a session of a framework that routes each request by its policy, `new_session`), or a
//! static split of `--oracle` (a pinned session per driver, one chosen per request by the
//! split's precomputed route).
//!
//! Every thread has its own sessions and its own requests, made before the clock starts and
//! reused for every operation, so what is timed is the framework and the driver, not
//! allocation. A size distribution gives each thread its own sequence of sizes
//! (`crate::sizes`) and a request per entry; the measuring loop cycles through the slots,
//! so the only per-request work besides the operation is an index step. With `--batch 1` a thread runs one request at a time (`Session::run`: direct
//! dispatch, as the cryptotest of "Cryptographic Device Support for FreeBSD" did through /dev/crypto). With `--batch N` it
//! hands N batchable requests to the dispatch worker in one `submit_batch` (the driver gets
//! them with the hint that more follow), with immediate callbacks that only hand each
//! result back; it keeps two such batches in flight and submits a batch again as soon as
//! its results are back, as a gateway reading packets in batches would. With `--batch N
//! --direct` it hands each batch over whole in its own thread (`Session::run_batch`: a
//! driver that takes runs gets the N requests in one call), as ipsecd does with a run of
//! packets.
//!
//! Request layouts. Encryption and digests run in place, the way IPsec uses them. An
//! authenticated decrypt runs out of place, because its ciphertext and tag must stay valid
//! for the next operation. With `--verify` everything runs out of place: each thread
//! cycles through at least [`VARIANTS`] distinct inputs whose expected outputs the
//! reference driver (`soft`) computed beforehand, and every result is compared with its
//! expected bytes. Verification thus costs a copy and a compare per request, not a second
//! cryptographic operation, and no driver but the measured one runs while the clock does.
//!
//! Public-key cases ([`PkCase`]) measure one operation each with the keys of
//! `crate::pubkey::Keys`, through the same loops; a result that cannot be known beforehand
//! (an ECDSA signature, an ML-KEM encapsulation) is copied aside, up to [`KEEP_LATER`] per
//! thread, and checked by the reference after the clock stops (`checked` counts those).
//! `random` cases ask for random bytes in place; under `--verify` each result must differ
//! from the one before it in its slot (the first from the zeroed buffer): a source that
//! repeats itself, or the null driver, fails.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ocf::{Callback, Flags, Framework, Op, Outcome, Request, Session};

use crate::algs::{Alg, Data, Kind};
use crate::oracle::{self, Split};
use crate::pubkey::{Check, Keys};
use crate::rusage::Usage;
use crate::sizes::SizeSpec;

/// How long a batch submitter spins for its results before it sleeps.
const SPIN_BEFORE_SLEEP: Duration = Duration::from_micros(100);

/// Distinct inputs per thread with `--verify`.
pub const VARIANTS: usize = 8;

pub use crate::drivers::REFERENCE;

/// Randomized public-key results kept per thread for the check after the clock.
pub const KEEP_LATER: usize = 256;

/// Random results shorter than this cannot be told from a repeat (two draws of n bytes
/// match with probability 2^-8n): `--verify` needs at least this many.
pub const RANDOM_VERIFY_MIN: usize = 8;

/// A public-key case: the keys, and the operation measured.
#[derive(Clone, Copy)]
pub struct PkCase<'a> {
    pub keys: &'a Keys,
    pub op: Op,
}

/// How long a case runs.
#[derive(Clone, Copy, Debug)]
pub enum Limit {
    /// For this long (`-T`).
    Time(Duration),
    /// This many operations, shared out among the threads (`-n`).
    Count(u64),
}

/// What a case's sessions are.
#[derive(Clone, Copy)]
pub enum Target<'a> {
    /// Pinned to this driver of the case's framework (`new_session_on`).
    Pinned(&'a str),
    /// Routed by this framework's policy among its drivers (`new_session`).
    Auto(&'a Framework),
    /// A static split: pinned sessions on these drivers of this framework (A first, then
    /// B's members), one chosen per request by the split.
    Split { fw: &'a Framework, drivers: &'a [String], split: Split },
}

/// One case to measure.
pub struct CaseSpec<'a> {
    /// The framework with the reference driver, and with the driver of a pinned target.
    pub fw: &'a Framework,
    pub alg: &'a Alg,
    pub target: Target<'a>,
    pub decrypt: bool,
    pub sizes: SizeSpec,
    pub threads: usize,
    pub batch: usize,
    /// Batches handed over whole in the measuring thread (`Session::run_batch`) instead of
    /// through the dispatch worker.
    pub direct: bool,
    pub limit: Limit,
    pub verify: bool,
    /// A public-key case's keys and operation (`None` for the others).
    pub public_key: Option<PkCase<'a>>,
}

impl CaseSpec<'_> {
    /// `encrypt`, `decrypt`, `digest`, `random`, or the public-key operation's name.
    pub fn op_name(&self) -> &'static str {
        if let Some(pk) = self.public_key {
            return pk.op.name();
        }
        if self.alg.kind == Kind::Random {
            return "random";
        }
        if self.alg.kind == Kind::Compress {
            return if self.decrypt { "decompress" } else { "compress" };
        }
        match (self.alg.kind.ciphers(), self.decrypt) {
            (false, _) => "digest",
            (true, false) => "encrypt",
            (true, true) => "decrypt",
        }
    }

    fn op(&self) -> Op {
        if let Some(pk) = self.public_key {
            return pk.op;
        }
        if self.alg.kind == Kind::Random {
            return Op::Random;
        }
        if self.alg.kind == Kind::Compress {
            return if self.decrypt { Op::Decompress } else { Op::Compress };
        }
        match (self.alg.kind.ciphers(), self.decrypt) {
            (false, _) => Op::ComputeDigest,
            (true, false) => Op::Encrypt,
            (true, true) => Op::Decrypt,
        }
    }
}

/// What a case measured.
#[derive(Clone, Debug, Default)]
pub struct CaseResult {
    /// Requests that completed successfully, and their payload bytes.
    pub ops: u64,
    pub bytes: u64,
    /// Wall-clock time from the first thread's start until the last thread finished.
    pub seconds: f64,
    /// CPU time and context switches of the whole process over the case.
    pub usage: Usage,
    /// Requests the driver refused as Busy and the framework offered again.
    pub restarts: u64,
    /// Requests that failed, and the first failure.
    pub errors: u64,
    pub first_error: Option<String>,
    /// With `--verify`: results compared, results that differed, and the first difference.
    pub checked: u64,
    pub mismatches: u64,
    pub first_mismatch: Option<String>,
}

impl CaseResult {
    /// `Some(true)` if verification ran and every result matched (and none failed).
    pub fn verified(&self, verify: bool) -> Option<bool> {
        verify.then_some(self.mismatches == 0 && self.errors == 0 && self.checked > 0)
    }

    /// Payload megabits per second of wall-clock time.
    pub fn mbit_s(&self) -> f64 {
        rate(self.bytes as f64 * 8.0 / 1e6, self.seconds)
    }

    /// Payload thousands of bytes per second of wall-clock time (openssl speed's unit).
    pub fn kbytes_s(&self) -> f64 {
        rate(self.bytes as f64 / 1e3, self.seconds)
    }

    /// Payload megabits per CPU second (user + system, all threads of the process).
    pub fn cpu_mbit_s(&self) -> f64 {
        rate(self.bytes as f64 * 8.0 / 1e6, self.usage.user_s + self.usage.sys_s)
    }

    /// Operations per second of wall-clock time (public-key cases).
    pub fn ops_s(&self) -> f64 {
        rate(self.ops as f64, self.seconds)
    }

    /// Operations per CPU second (user + system, all threads of the process).
    pub fn cpu_ops_s(&self) -> f64 {
        rate(self.ops as f64, self.usage.user_s + self.usage.sys_s)
    }
}

fn rate(amount: f64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        amount / seconds
    } else {
        0.0
    }
}

/// Why a case was not run (the driver cannot do the algorithm, the size does not fit it).
#[derive(Debug)]
pub struct Skipped(pub String);

/// Measures one case.
pub fn run_case(spec: &CaseSpec) -> Result<CaseResult, Skipped> {
    let alg = spec.alg;
    if let Some(size) = spec.sizes.fixed().filter(|s| s % alg.block_len() != 0) {
        return Err(Skipped(format!(
            "{}: {size}-byte operands skipped: not a multiple of its {}-byte block",
            alg.name,
            alg.block_len()
        )));
    }
    if let Some(size) =
        spec.sizes.fixed().filter(|&s| alg.kind == Kind::Random && spec.verify && s < RANDOM_VERIFY_MIN)
    {
        return Err(Skipped(format!(
            "{}: {size}-byte results skipped under --verify: fewer than {RANDOM_VERIFY_MIN} random bytes \
             cannot be told from a repeat",
            alg.name
        )));
    }
    let params = match (spec.public_key, alg.params()) {
        (Some(pk), _) => pk.keys.params(pk.op),
        (None, Some(p)) => p,
        (None, None) => return Err(Skipped(format!("{}: a public-key algorithm needs its keys", alg.name))),
    };
    let skipped = |driver: &str, e: ocf::Error| Skipped(format!("{}: skipped on {driver}: {e}", alg.name));
    let pinned =
        |fw: &Framework, driver: &str| fw.new_session_on(driver, &params).map_err(|e| skipped(driver, e));
    let sessions = || -> Result<Vec<Session>, Skipped> {
        match spec.target {
            Target::Pinned(d) => Ok(vec![pinned(spec.fw, d)?]),
            Target::Auto(fw) => Ok(vec![fw.new_session(&params).map_err(|e| skipped("auto", e))?]),
            Target::Split { fw, drivers, .. } => drivers.iter().map(|d| pinned(fw, d)).collect(),
        }
    };
    // Public-key inputs and results come from the keys' own reference sessions; random
    // bytes have none to compare with.
    let reference = match alg.kind {
        Kind::PublicKey | Kind::Random => None,
        _ => Some(pinned(spec.fw, REFERENCE)?),
    };
    // Batches: two in flight (see `Worker::run_batches`).
    let batches = if spec.batch > 1 { 2 * spec.batch } else { 1 };
    let mut per_thread = batches.max(if spec.verify { VARIANTS } else { 1 });
    if let Target::Split { drivers, split, .. } = spec.target {
        per_thread = per_thread.next_multiple_of(split.cycle(drivers.len().saturating_sub(1)));
    }
    let mut workers = Vec::with_capacity(spec.threads);
    for t in 0..spec.threads {
        let sessions = sessions()?;
        let slots = build_slots(spec, reference.as_ref(), per_thread, t)?;
        let count = match spec.limit {
            Limit::Count(n) => {
                let threads = spec.threads as u64;
                Some(n / threads + u64::from((t as u64) < n % threads))
            }
            Limit::Time(_) => None,
        };
        let (batch, direct) = (spec.batch, spec.direct);
        workers.push(Worker { sessions, slots, count, batch, direct, tally: Tally::default() });
    }
    drop(reference);

    let restarts_before = restarts(spec);
    let stop = AtomicBool::new(false);
    let start_line = Barrier::new(spec.threads + 1);
    let (workers, seconds, usage) = std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .into_iter()
            .map(|mut w| {
                let (stop, start_line) = (&stop, &start_line);
                scope.spawn(move || {
                    start_line.wait();
                    // Each thread times itself: the main thread may be scheduled well
                    // after the workers have started (or, for a short -n, finished).
                    let started = Instant::now();
                    w.run(stop);
                    (w, started, Instant::now())
                })
            })
            .collect();
        let before = Usage::now();
        start_line.wait();
        if let Limit::Time(d) = spec.limit {
            std::thread::sleep(d);
            stop.store(true, Ordering::Relaxed);
        }
        // A worker thread that panicked is a bug in cryptotest; pass the panic on.
        let joined: Vec<(Worker, Instant, Instant)> =
            handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect();
        let usage = Usage::now().since(before);
        // From the first thread's start to the last one's end.
        let first = joined.iter().map(|j| j.1).min();
        let last = joined.iter().map(|j| j.2).max();
        let seconds = match (first, last) {
            (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        (joined.into_iter().map(|j| j.0).collect::<Vec<_>>(), seconds, usage)
    });

    let mut r = CaseResult { seconds, usage, ..CaseResult::default() };
    r.restarts = restarts(spec).saturating_sub(restarts_before);
    for w in workers {
        let mut t = w.tally;
        // The randomized public-key results kept aside, checked now that the clock stopped.
        if let Some(pk) = spec.public_key {
            for (i, result) in t.kept.drain(..) {
                let Some(Expected::Later(input)) = w.slots.get(i).and_then(|s| s.expect.as_ref()) else {
                    continue;
                };
                t.checked += 1;
                if let Some(diff) = pk.keys.check_later(pk.op, input, &result) {
                    t.mismatches += 1;
                    t.first_mismatch.get_or_insert(diff);
                }
            }
        }
        r.ops += t.ops;
        r.bytes += t.bytes;
        r.errors += t.errors;
        r.checked += t.checked;
        r.mismatches += t.mismatches;
        r.first_error = r.first_error.or(t.first_error);
        r.first_mismatch = r.first_mismatch.or(t.first_mismatch);
    }
    Ok(r)
}

/// Restarts so far on the drivers the case's target uses.
fn restarts(spec: &CaseSpec) -> u64 {
    let on = |fw: &Framework, driver: &str| fw.driver_stats(driver).map_or(0, |s| s.flow.restarts);
    match spec.target {
        Target::Pinned(d) => on(spec.fw, d),
        Target::Auto(fw) | Target::Split { fw, .. } => {
            fw.stats().drivers.iter().map(|d| d.flow.restarts).sum()
        }
    }
}

/// A request and, under `--verify`, what its result must be.
struct Slot {
    req: Option<Request>,
    expect: Option<Expected>,
    /// Its payload bytes, counted when it completes.
    len: u64,
    /// The session it goes to (an index into the worker's; 0 but in a split).
    route: usize,
}

/// What a result must be.
enum Expected {
    /// These bytes; an empty field is not compared, except a compression result (empty:
    /// the input did not shrink) and a public-key result.
    Bytes { payload: Vec<u8>, tag: Vec<u8> },
    /// Random bytes: not these (the slot's previous result), which it then becomes.
    Fresh(Vec<u8>),
    /// A randomized public-key result: kept, and checked after the clock with this input
    /// (`crate::pubkey::Keys::check_later`).
    Later(Vec<u8>),
}

/// The input of variant `i`: distinct per variant and thread, not all one byte.
fn input(i: usize, thread: usize, size: usize) -> Vec<u8> {
    (0..size).map(|j| (j.wrapping_mul(31) ^ i.wrapping_mul(167) ^ thread.wrapping_mul(71)) as u8).collect()
}

/// The input of a compression case's variant `i`: text-like (words of a small vocabulary,
/// in an order that differs per variant and thread) or random.
fn comp_input(data: Data, i: usize, thread: usize, size: usize) -> Vec<u8> {
    const WORDS: [&[u8]; 16] = [
        b"the ",
        b"packet ",
        b"session ",
        b"driver ",
        b"compress ",
        b"of ",
        b"and ",
        b"IPsec ",
        b"a ",
        b"to ",
        b"request ",
        b"buffer ",
        b"in ",
        b"limit ",
        b"DEFLATE ",
        b"\n",
    ];
    let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (thread as u64 + 1);
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut v = Vec::with_capacity(size + 16);
    while v.len() < size {
        match data {
            Data::Text => v.extend_from_slice(WORDS[(next() % 16) as usize]),
            Data::Random => v.extend_from_slice(&next().to_le_bytes()),
        }
    }
    v.truncate(size);
    v
}

/// Makes a thread's requests (and, with `--verify`, their expected results): at least `n`,
/// and one per entry of the thread's size sequence.
fn build_slots(
    spec: &CaseSpec,
    reference: Option<&Session>,
    n: usize,
    thread: usize,
) -> Result<Vec<Slot>, Skipped> {
    let alg = spec.alg;
    let failed =
        |e: &ocf::Failed| Skipped(format!("{}: the reference driver failed: {}", alg.name, e.error()));
    let sequence = spec.sizes.sequence(thread, alg.block_len());
    let sizes: Vec<usize> = (0..n.max(sequence.len())).map(|i| sequence[i % sequence.len()]).collect();
    let routes = match spec.target {
        Target::Split { drivers, split, .. } => {
            oracle::routes(split, &sizes, drivers.len().saturating_sub(1))
        }
        _ => vec![0; sizes.len()],
    };
    let mut slots = Vec::with_capacity(sizes.len());
    for (i, (&size, route)) in sizes.iter().zip(routes).enumerate() {
        if let Some(pk) = spec.public_key {
            let (req, check) = pk.keys.request(pk.op, i, thread, spec.verify).map_err(Skipped)?;
            let expect = check.map(|c| match c {
                Check::Exact(payload) => Expected::Bytes { payload, tag: Vec::new() },
                Check::Succeeds => Expected::Bytes { payload: Vec::new(), tag: Vec::new() },
                Check::Later(input) => Expected::Later(input),
            });
            slots.push(finish_slot(spec, req, i, expect, size, route));
            continue;
        }
        if alg.kind == Kind::Random {
            let expect = spec.verify.then(|| Expected::Fresh(vec![0; size]));
            slots.push(finish_slot(spec, Request::random(size), i, expect, size, route));
            continue;
        }
        let data = match alg.comp {
            Some((_, data)) => comp_input(data, i, thread, size),
            None => input(i, thread, size),
        };
        let iv = vec![(i + 1) as u8; alg.iv_len()];
        let Some(reference) = reference else {
            return Err(Skipped(format!("{}: no reference session", alg.name)));
        };
        let (req, expect) = match (spec.op(), alg.kind) {
            (Op::Compress, _) => {
                let expect = if spec.verify {
                    let r =
                        reference.run(Request::new(Op::Compress, data.clone()).with_output(vec![0; size]));
                    // An input that does not shrink has no result: an empty one is expected
                    // (a driver that compressed it differs).
                    Some(Expected::Bytes {
                        payload: r.map(|r| r.result_payload()).unwrap_or_default(),
                        tag: Vec::new(),
                    })
                } else {
                    None
                };
                (Request::new(Op::Compress, data).with_output(vec![0; size]), expect)
            }
            (Op::Decompress, _) => {
                // The first of this variant's inputs that shrinks (small ones may not).
                let mut last = None;
                let found = (0..64).find_map(|k| {
                    let data = match alg.comp {
                        Some((_, d)) => comp_input(d, i + k * 7919, thread, size),
                        None => data.clone(),
                    };
                    let r = Request::new(Op::Compress, data.clone()).with_output(vec![0; size]);
                    match reference.run(r) {
                        Ok(r) => Some((data, r.result_payload())),
                        Err(e) => {
                            last = Some(e.error().to_string());
                            None
                        }
                    }
                });
                let Some((data, packed)) = found else {
                    let why = last.unwrap_or_default();
                    return Err(Skipped(format!("{}: nothing to decompress: {why}", alg.name)));
                };
                let req = Request::new(Op::Decompress, packed).with_output(vec![0; size]);
                (req, spec.verify.then(|| Expected::Bytes { payload: data, tag: Vec::new() }))
            }
            (Op::ComputeDigest, _) => {
                let expect = if spec.verify {
                    let r = reference
                        .run(Request::new(Op::ComputeDigest, data.clone()))
                        .map_err(|e| failed(&e))?;
                    Some(Expected::Bytes { payload: Vec::new(), tag: r.tag().to_vec() })
                } else {
                    None
                };
                (Request::new(Op::ComputeDigest, data), expect)
            }
            (Op::Encrypt, _) if !spec.verify => (Request::new(Op::Encrypt, data).with_iv(&iv), None),
            (Op::Encrypt, _) => {
                let r = reference
                    .run(Request::new(Op::Encrypt, data.clone()).with_iv(&iv))
                    .map_err(|e| failed(&e))?;
                let expect = Expected::Bytes { payload: r.buf.to_vec(), tag: r.tag().to_vec() };
                (Request::new(Op::Encrypt, data).with_iv(&iv).with_output(vec![0; size]), Some(expect))
            }
            (_, kind) => {
                let sealed = reference
                    .run(Request::new(Op::Encrypt, data.clone()).with_iv(&iv))
                    .map_err(|e| failed(&e))?;
                let ct = sealed.buf.to_vec();
                if kind == Kind::Cipher && !spec.verify {
                    // Nothing to authenticate: decrypting in place again and again is fine.
                    (Request::new(Op::Decrypt, ct).with_iv(&iv), None)
                } else {
                    let req = Request::new(Op::Decrypt, ct)
                        .with_iv(&iv)
                        .with_tag(sealed.tag())
                        .with_output(vec![0; size]);
                    (req, spec.verify.then(|| Expected::Bytes { payload: data, tag: Vec::new() }))
                }
            }
        };
        slots.push(finish_slot(spec, req, i, expect, size, route));
    }
    Ok(slots)
}

/// Slot `i`: its request numbered and flagged for the case's way of submitting.
fn finish_slot(
    spec: &CaseSpec,
    mut req: Request,
    i: usize,
    expect: Option<Expected>,
    size: usize,
    route: usize,
) -> Slot {
    req.user = i as u64;
    if spec.batch > 1 {
        req = req.with_flags(Flags::BATCH | Flags::CALLBACK_IMMEDIATE);
    }
    Slot { req: Some(req), expect, len: size as u64, route }
}

/// One measuring thread.
struct Worker {
    /// One session, or a split's (indexed by [`Slot::route`]).
    sessions: Vec<Session>,
    slots: Vec<Slot>,
    /// Operations to do (`-n`), or `None` to run until told to stop (`-T`).
    count: Option<u64>,
    batch: usize,
    direct: bool,
    tally: Tally,
}

#[derive(Default)]
struct Tally {
    ops: u64,
    bytes: u64,
    errors: u64,
    first_error: Option<String>,
    checked: u64,
    mismatches: u64,
    first_mismatch: Option<String>,
    /// Randomized public-key results kept for the check after the clock: (slot, result).
    kept: Vec<(usize, Vec<u8>)>,
}

impl Worker {
    fn run(&mut self, stop: &AtomicBool) {
        if self.batch > 1 && self.direct {
            self.run_whole_batches(stop);
        } else if self.batch > 1 {
            self.run_batches(stop);
        } else {
            self.run_one_at_a_time(stop);
        }
    }

    fn remaining(&self, done: u64, stop: &AtomicBool) -> u64 {
        match self.count {
            Some(n) => n.saturating_sub(done),
            None if stop.load(Ordering::Relaxed) => 0,
            None => u64::MAX,
        }
    }

    fn run_one_at_a_time(&mut self, stop: &AtomicBool) {
        // One session (pinned, auto): no route to read per request; a split's per slot.
        if self.sessions.len() == 1 {
            self.cycle(stop, |_| 0);
        } else {
            self.cycle(stop, |route| route);
        }
    }

    #[inline(always)]
    fn cycle(&mut self, stop: &AtomicBool, route: impl Fn(usize) -> usize) {
        let (n, mut i, mut done) = (self.slots.len(), 0, 0u64);
        while self.remaining(done, stop) > 0 {
            let slot = &mut self.slots[i];
            let Some(req) = slot.req.take() else { break };
            let outcome = self.sessions[route(slot.route)].run(req);
            self.finish(outcome);
            done += 1;
            i = if i + 1 == n { 0 } else { i + 1 };
        }
    }

    /// Hands each batch over whole in this thread (`Session::run_batch`), as a gateway
    /// with a run of packets in hand does; a split hands each session its part.
    fn run_whole_batches(&mut self, stop: &AtomicBool) {
        let (n, mut next, mut done) = (self.slots.len(), 0, 0u64);
        let mut reqs: Vec<Request> = Vec::with_capacity(self.batch);
        let mut outcomes = Vec::with_capacity(self.batch);
        loop {
            let want = self.remaining(done, stop).min(self.batch as u64) as usize;
            if want == 0 {
                break;
            }
            for (r, session) in self.sessions.iter().enumerate() {
                for k in 0..want {
                    let slot = &mut self.slots[(next + k) % n];
                    if slot.route == r {
                        reqs.extend(slot.req.take());
                    }
                }
                if !reqs.is_empty() {
                    session.run_batch(&mut reqs, &mut outcomes);
                }
            }
            for outcome in outcomes.drain(..) {
                self.finish(outcome);
            }
            next = (next + want) % n;
            done += want as u64;
        }
    }

    /// Keeps two batches in flight: while the driver works on one, the results of the
    /// other come back and are submitted again, so neither side waits for the other's
    /// wake-up.
    fn run_batches(&mut self, stop: &AtomicBool) {
        let returns = Arc::new(BatchReturn::default());
        let back: Callback = {
            let returns = returns.clone();
            Arc::new(move |outcome| returns.put(outcome))
        };
        // Free slots in the order they came back, so that every slot (every entry of a
        // size sequence) takes its turn.
        let mut free: VecDeque<usize> = (0..self.slots.len()).collect();
        let mut picked: Vec<usize> = Vec::with_capacity(self.batch);
        let mut split_part: Vec<Request> = Vec::with_capacity(self.batch);
        let mut outcomes = Vec::with_capacity(self.slots.len());
        let (mut submitted, mut in_flight) = (0u64, 0usize);
        loop {
            let want = self.remaining(submitted, stop).min(self.batch as u64) as usize;
            if want > 0 && free.len() >= want {
                picked.clear();
                picked.extend(free.drain(..want));
                let slots = &mut self.slots;
                if let [session] = &self.sessions[..] {
                    session.submit_batch(picked.iter().filter_map(|&i| slots[i].req.take()), &back);
                } else {
                    // A split: each session gets its part of the batch.
                    for (r, session) in self.sessions.iter().enumerate() {
                        split_part.extend(picked.iter().filter_map(|&i| {
                            let slot = &mut slots[i];
                            if slot.route == r {
                                slot.req.take()
                            } else {
                                None
                            }
                        }));
                        if !split_part.is_empty() {
                            session.submit_batch(split_part.drain(..), &back);
                        }
                    }
                }
                submitted += want as u64;
                in_flight += want;
                continue;
            }
            if in_flight == 0 {
                break;
            }
            returns.wait_for(self.batch.min(in_flight), &mut outcomes);
            for outcome in outcomes.drain(..) {
                in_flight -= 1;
                if let Some(i) = self.finish(outcome) {
                    free.push_back(i);
                }
            }
        }
    }

    /// Counts an outcome, checks it under `--verify`, and puts the request back in its
    /// slot, whose index it returns. Inlined into the measuring loops (a call per request
    /// measured 9 instructions more); failures are counted out of line.
    #[inline(always)]
    fn finish(&mut self, outcome: Outcome) -> Option<usize> {
        let (req, ok) = match outcome {
            Ok(req) => {
                self.tally.ops += 1;
                (req, true)
            }
            // Compression that does not shrink the data answered "send the original": done.
            Err(failed) if matches!(failed.error(), ocf::Error::Incompressible { .. }) => {
                self.tally.ops += 1;
                (failed.into_parts().1, true)
            }
            Err(failed) => (self.tally.failed(failed), false),
        };
        let i = req.user as usize;
        let slot = self.slots.get_mut(i)?;
        if ok {
            self.tally.bytes += slot.len;
        }
        if let Some(expect) = &mut slot.expect {
            self.tally.check(&req, expect, i);
        }
        slot.req = Some(req);
        Some(i)
    }
}

impl Tally {
    /// Counts a failed request; returns it.
    #[cold]
    fn failed(&mut self, failed: ocf::Failed) -> Request {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(failed.error().to_string());
        }
        failed.into_parts().1
    }

    /// Compares a result with what the reference computed (random bytes: with the slot's
    /// previous result; a randomized public-key result: kept for later, up to
    /// [`KEEP_LATER`]).
    fn check(&mut self, req: &Request, expect: &mut Expected, slot: usize) {
        let diff = match expect {
            Expected::Later(_) => {
                if self.kept.len() < KEEP_LATER {
                    self.kept.push((slot, req.result_payload()));
                }
                return;
            }
            Expected::Fresh(previous) => {
                let got = result_bytes(req);
                let same = *got == previous[..];
                previous.clear();
                previous.extend_from_slice(&got);
                same.then(|| format!("{} random bytes repeat the previous result in their slot", got.len()))
            }
            Expected::Bytes { .. } => difference(req, expect),
        };
        self.checked += 1;
        if let Some(diff) = diff {
            self.mismatches += 1;
            if self.first_mismatch.is_none() {
                self.first_mismatch = Some(diff);
            }
        }
    }
}

/// Where a worker's outcomes come back. The callbacks run immediately in the driver's
/// completion context and only store the outcome; the one that completes what the
/// submitter waits for (a batch) wakes it, so a batch costs one wake-up, not one per
/// request (a futex wake is a system call, and on a VM often an inter-processor
/// interrupt: microseconds).
#[derive(Default)]
struct BatchReturn {
    state: Mutex<BatchState>,
    all_back: Condvar,
    /// `state.outcomes.len()`, readable without the lock, for the submitter's spin.
    back: AtomicUsize,
}

#[derive(Default)]
struct BatchState {
    /// How many outcomes the submitter waits for (0: it is not waiting).
    wanted: usize,
    outcomes: Vec<Outcome>,
}

impl BatchReturn {
    fn lock(&self) -> MutexGuard<'_, BatchState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn put(&self, outcome: Outcome) {
        let mut st = self.lock();
        st.outcomes.push(outcome);
        self.back.store(st.outcomes.len(), Ordering::Release);
        if st.wanted > 0 && st.outcomes.len() == st.wanted {
            self.all_back.notify_one();
        }
    }

    /// Waits until at least `n` outcomes are back and moves them into `into`. Spins for a
    /// while first: a batch takes the driver microseconds, and a sleeping thread takes
    /// tens of microseconds to wake on this kind of machine, which would be measured as
    /// the framework's cost.
    fn wait_for(&self, n: usize, into: &mut Vec<Outcome>) {
        let start = Instant::now();
        let mut spins = 0u32;
        while self.back.load(Ordering::Acquire) < n {
            std::hint::spin_loop();
            spins += 1;
            if spins % 256 == 0 && start.elapsed() > SPIN_BEFORE_SLEEP {
                break;
            }
        }
        let mut st = self.lock();
        st.wanted = n;
        while st.outcomes.len() < n {
            st = self.all_back.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        st.wanted = 0;
        into.append(&mut st.outcomes);
        self.back.store(0, Ordering::Release);
    }
}

/// The result bytes of a request: its output buffer's payload when out of place.
fn result_bytes(req: &Request) -> Cow<'_, [u8]> {
    if req.op.compresses() || req.op.asymmetric() {
        return Cow::Owned(req.result_payload());
    }
    let range = req.payload_range();
    let (buf, start) = match &req.out {
        Some(out) => (out, req.out_offset),
        None => (&req.buf, range.start),
    };
    match buf.as_contiguous().and_then(|b| b.get(start..start + range.len())) {
        Some(bytes) => Cow::Borrowed(bytes),
        None => Cow::Owned(req.result_payload()),
    }
}

/// Where a result differs from what the reference driver computed, if it does.
fn difference(req: &Request, expect: &Expected) -> Option<String> {
    let Expected::Bytes { payload, tag } = expect else { return None };
    let first_diff = |got: &[u8], want: &[u8]| {
        if got.len() != want.len() {
            return Some(format!("{} bytes instead of {}", got.len(), want.len()));
        }
        got.iter()
            .zip(want)
            .position(|(a, b)| a != b)
            .map(|at| format!("byte {at} is {:#04x}, {REFERENCE} computed {:#04x}", got[at], want[at]))
    };
    if !payload.is_empty() || req.op.compresses() {
        if let Some(d) = first_diff(&result_bytes(req), payload) {
            return Some(format!("output differs: {d}"));
        }
    }
    if !tag.is_empty() {
        if let Some(d) = first_diff(req.tag(), tag) {
            return Some(format!("tag differs: {d}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algs;

    fn case<'a>(fw: &'a Framework, alg: &'a Alg, driver: &'a str) -> CaseSpec<'a> {
        CaseSpec {
            fw,
            alg,
            target: Target::Pinned(driver),
            decrypt: false,
            sizes: SizeSpec::Fixed(64),
            threads: 1,
            batch: 1,
            direct: false,
            limit: Limit::Count(100),
            verify: true,
            public_key: None,
        }
    }

    fn framework() -> Framework {
        let fw = Framework::new();
        ocf_soft::register(&fw).unwrap();
        ocf_null::register(&fw).unwrap();
        fw
    }

    #[test]
    fn every_algorithm_verifies_on_soft_both_ways_one_at_a_time_and_batched_both_ways() {
        let fw = framework();
        for alg in algs::symmetric() {
            for decrypt in [false, true] {
                for (threads, batch, direct) in [(1, 1, false), (2, 4, false), (2, 4, true)] {
                    let spec = CaseSpec { decrypt, threads, batch, direct, ..case(&fw, &alg, "soft") };
                    if alg.name == "deflate-random" && decrypt {
                        assert!(run_case(&spec).is_err(), "random bytes never shrink: nothing to decompress");
                        continue;
                    }
                    let r = run_case(&spec).unwrap();
                    let what = format!("{} {} t{threads} b{batch} {direct}", alg.name, spec.op_name());
                    assert_eq!((r.ops, r.errors, r.mismatches), (100, 0, 0), "{what}: {r:?}");
                    assert_eq!(r.checked, 100, "{what}");
                    assert_eq!(r.bytes, 6400, "{what}");
                    assert_eq!(r.verified(true), Some(true), "{what}");
                }
            }
        }
    }

    #[test]
    fn the_null_driver_fails_verification() {
        // It does no cryptography, so every ciphertext, plaintext and digest is wrong.
        let fw = framework();
        for name in ["aes-128-gcm", "aes-128-cbc", "sha256"] {
            let alg = algs::resolve(&[name.into()]).unwrap().remove(0);
            let r = run_case(&case(&fw, &alg, "null")).unwrap();
            assert_eq!((r.ops, r.mismatches), (100, 100), "{name}");
            assert_eq!(r.verified(true), Some(false));
            assert!(r.first_mismatch.unwrap().contains("differs"));
        }
    }

    #[test]
    fn a_block_cipher_skips_sizes_that_are_not_whole_blocks() {
        let fw = framework();
        let alg = algs::resolve(&["aes-128-cbc".into()]).unwrap().remove(0);
        let e = run_case(&CaseSpec { sizes: SizeSpec::Fixed(8), ..case(&fw, &alg, "soft") }).unwrap_err();
        assert!(e.0.contains("not a multiple of its 16-byte block"), "{}", e.0);
    }

    #[test]
    fn a_distribution_counts_the_bytes_it_did_rounded_to_whole_blocks() {
        let fw = framework();
        let alg = algs::resolve(&["aes-128-cbc".into()]).unwrap().remove(0);
        let seq = SizeSpec::Imix.sequence(0, 16);
        for batch in [1, 4] {
            let spec = CaseSpec {
                sizes: SizeSpec::Imix,
                batch,
                limit: Limit::Count(seq.len() as u64),
                ..case(&fw, &alg, "soft")
            };
            let r = run_case(&spec).unwrap();
            assert_eq!((r.ops, r.mismatches, r.errors), (seq.len() as u64, 0, 0), "batch {batch}");
            // One whole cycle: every entry once, 40 → 48 and 1500 → 1504 for 16-byte blocks.
            assert_eq!(r.bytes, seq.iter().sum::<usize>() as u64, "batch {batch}");
            assert_eq!(r.bytes, (341 * (48 * 7 + 576 * 4 + 1504)) as u64);
        }
    }

    /// A split sends each request to the driver its rule picks: `null` fails verification,
    /// so the mismatches count the requests that went to it.
    #[test]
    fn a_split_routes_by_share_and_by_threshold() {
        let fw = framework();
        let drivers = ["soft".to_owned(), "null".to_owned()];
        let alg = algs::resolve(&["aes-128-gcm".into()]).unwrap().remove(0);
        let split = |split| Target::Split { fw: &fw, drivers: &drivers, split };
        for (threads, batch) in [(1, 1), (2, 1), (2, 4)] {
            let spec = CaseSpec { target: split(Split::Share(3)), threads, batch, ..case(&fw, &alg, "soft") };
            let r = run_case(&spec).unwrap();
            assert_eq!(r.ops, 100);
            if batch == 1 {
                assert_eq!(r.mismatches, 30, "30% to B, exactly, t{threads}");
            } else {
                // Batches reuse slots in the order they come back: each slot within one use
                // of the others (10 slots a thread here).
                assert!((26..=34).contains(&r.mismatches), "about 30% to B: {r:?}");
            }
        }
        let seq_len = SizeSpec::Imix.sequence(0, 1).len() as u64;
        let spec = CaseSpec {
            target: split(Split::Threshold(256)),
            sizes: SizeSpec::Imix,
            limit: Limit::Count(seq_len),
            ..case(&fw, &alg, "soft")
        };
        let r = run_case(&spec).unwrap();
        // 576 and 1500 (5 in 12) go to B.
        assert_eq!((r.ops, r.mismatches), (seq_len, seq_len * 5 / 12));
    }

    #[test]
    fn time_limited_cases_stop_and_count() {
        let fw = framework();
        let alg = algs::resolve(&["sha1".into()]).unwrap().remove(0);
        let spec = CaseSpec {
            limit: Limit::Time(Duration::from_millis(50)),
            verify: false,
            ..case(&fw, &alg, "soft")
        };
        let r = run_case(&spec).unwrap();
        // The limit runs from the start line on the main thread; the workers' clocks start
        // when each is scheduled after it, which on a busy 2-core machine can be a little
        // later (a fresh-clone CI run measured 0.04996 s). So: about the limit, not at least it.
        assert!(r.ops > 0 && r.seconds > 0.025 && r.seconds < 1.0, "{r:?}");
        assert_eq!(r.verified(false), None);
        assert!(r.mbit_s() > 0.0 && r.kbytes_s() > 0.0);
    }
}
