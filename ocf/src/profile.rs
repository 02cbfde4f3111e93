//! Per-stage request profiling: the paper's Table 1 (Leffler, BSDCon 2003, section 3.1).
//!
//! A profiled request carries four raw timestamps (`Stamps`) as it passes through the
//! framework; when it completes, `StageProfile::record_request` turns them into the four
//! [`Stage`] durations and records each in a lock-free log-linear `Histogram`. Reading
//! (`StageProfile::snapshot`, giving [`ProfileStats`]) is rare and may be slow; recording is
//! frequent, happens on many threads at once (submitters, the dispatch worker, return workers,
//! device threads) and must be cheap enough to leave on: a few relaxed atomic operations, no
//! lock, no allocation. Which requests are profiled is decided by `sample` (1 in N per thread).
//!
//! Costs measured on the development machine (2-core AMD EPYC family 25 guest under KVM, TSC
//! clocksource, release build, best of 7; reproduce with `taskset -c 0,1 cargo test -p ocf
//! --release --lib profile::tests::cost_report -- --ignored --nocapture`):
//!
//! - `now()`: about 11 ns (`quanta::Clock::raw`, i.e. `rdtsc`); `std::time::Instant::now` is
//!   about 28 ns there.
//! - `Histogram::record`: about 5 ns on one thread, about 8 ns with two threads recording into
//!   the same histogram nonstop; `StageProfile::record_request` (four stages, with the tick to
//!   ns conversions): about 18 ns, about 35 ns on two threads at once.
//! - `sample`: about 1.5 ns.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------------
// Clock
// ---------------------------------------------------------------------------------------------

/// The process-wide clock, calibrated once on first use.
///
/// `quanta` reads the TSC (`rdtsc`) where CPUID reports an invariant TSC and `rdtscp`, and
/// otherwise falls back to the OS monotonic clock, so raw readings are monotonic across cores
/// either way. Calibrating the TSC against the OS clock takes about 0.6 ms on the development
/// machine (at most 200 ms); [`StageProfile::default`] does it, so that the first profiled
/// request does not pay for it. Chosen over `std::time::Instant` (2.5x the cost per reading)
/// and a hand-written `_rdtsc` (the same cost, but `unsafe` and no calibration or fallback).
fn clock() -> &'static quanta::Clock {
    static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

/// A raw timestamp in clock ticks (TSC cycles on x86_64), as cheap as the machine allows.
///
/// Only differences between two readings mean anything; convert them with [`elapsed_ns`].
/// Never returns 0 in practice, which [`Stamps`] uses for "not taken".
#[inline]
pub(crate) fn now() -> u64 {
    clock().raw()
}

/// Nanoseconds between two [`now`] readings; 0 when `end` is not after `start` (never panics).
#[inline]
pub(crate) fn elapsed_ns(start: u64, end: u64) -> u64 {
    clock().delta_as_nanos(start, end)
}

// ---------------------------------------------------------------------------------------------
// Histogram
// ---------------------------------------------------------------------------------------------

/// log2 of the number of linear sub-buckets per power of two.
const SUB_BITS: u32 = 4;
/// Linear sub-buckets per power of two: the relative error of a bucket is at most `1 / SUB`.
const SUB: usize = 1 << SUB_BITS;
/// Values `0..SUB` get one exact bucket each; each power of two from `SUB` to `2^63` gets `SUB`.
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB;

/// The bucket that holds `v`.
#[inline]
fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        v as usize
    } else {
        let exp = 63 - v.leading_zeros(); // >= SUB_BITS
        let sub = (v >> (exp - SUB_BITS)) as usize & (SUB - 1);
        (exp - SUB_BITS + 1) as usize * SUB + sub
    }
}

/// The largest value that falls in bucket `i` (inclusive).
fn bucket_upper(i: usize) -> u64 {
    if i < SUB {
        i as u64
    } else {
        let group = (i / SUB) as u32; // 1..=60
        let sub = (i % SUB) as u64;
        let lower = (SUB as u64 + sub) << (group - 1);
        lower + ((1u64 << (group - 1)) - 1)
    }
}

/// A lock-free log-linear (HDR-style) histogram of nanosecond values.
///
/// Values below 16 have exact buckets; above that, each power of two is split into 16 linear
/// sub-buckets, so a bucket's width is at most 1/16 of its lower bound. The whole `u64` range is
/// covered by 976 buckets (7,808 bytes, allocated once in [`Histogram::new`]).
///
/// Sum, minimum and maximum are kept exactly alongside the buckets; the count is the buckets'
/// total, computed when reading, which saves one contended atomic per record (measured: 7.6 ns
/// → 4.8 ns per record on one thread, 14 ns → 8 ns with two threads on one histogram). The
/// sum wraps if the recorded total ever exceeds `u64::MAX` ns (584 years);
/// [`StageStats::avg_ns`] is only meaningful below that.
pub(crate) struct Histogram {
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
}

impl Histogram {
    pub(crate) fn new() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
        }
    }

    /// Records one value: two relaxed `fetch_add`s (bucket, sum) and two relaxed loads, plus a
    /// `fetch_min`/`fetch_max` only when the value is a new extreme. No lock, no allocation;
    /// safe to call from any number of threads at once.
    #[inline]
    pub(crate) fn record(&self, ns: u64) {
        self.buckets[bucket_of(ns)].fetch_add(1, Relaxed);
        self.sum.fetch_add(ns, Relaxed);
        // A plain load first: after warm-up almost no value is a new extreme, and a load is far
        // cheaper than a read-modify-write (which is a CAS loop on x86).
        if ns < self.min.load(Relaxed) {
            self.min.fetch_min(ns, Relaxed);
        }
        if ns > self.max.load(Relaxed) {
            self.max.fetch_max(ns, Relaxed);
        }
    }

    /// Count, average, extremes and percentiles of what has been recorded so far.
    ///
    /// Percentiles use the nearest-rank definition (the smallest recorded value with at least
    /// that fraction of values at or below it) and report the **upper bound** of the bucket that
    /// value falls in, clamped to the recorded `[min, max]`. A reported percentile is therefore
    /// never below the true one and at most 1/16 (6.25%) above it.
    ///
    /// A snapshot taken while other threads record is not an atomic cut: the buckets (hence the
    /// count and percentiles), the sum and the extremes may each include a concurrent value or
    /// not. Costs one pass over the 976 buckets.
    pub(crate) fn snapshot(&self) -> StageStats {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let count: u64 = counts.iter().sum();
        if count == 0 {
            return StageStats::default();
        }
        let sum = self.sum.load(Relaxed);
        let min = self.min.load(Relaxed);
        // `max(min)`: a record racing with this snapshot may have counted but not yet set the
        // extremes; keep `clamp` below from panicking.
        let max = self.max.load(Relaxed).max(min);
        let percentile = |q: f64| -> u64 {
            let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
            let mut seen = 0u64;
            for (i, &c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return bucket_upper(i).clamp(min, max);
                }
            }
            max
        };
        StageStats {
            count,
            avg_ns: sum as f64 / count as f64,
            min_ns: min,
            max_ns: max,
            p50_ns: percentile(0.50),
            p90_ns: percentile(0.90),
            p99_ns: percentile(0.99),
            p999_ns: percentile(0.999),
        }
    }

    /// Forgets everything recorded. A value recorded concurrently with a reset may be partly kept
    /// (e.g. counted in a bucket but not in the sum); reset between runs, not during one.
    pub(crate) fn reset(&self) {
        for b in self.buckets.iter() {
            b.store(0, Relaxed);
        }
        self.sum.store(0, Relaxed);
        self.min.store(u64::MAX, Relaxed);
        self.max.store(0, Relaxed);
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------------------------
// Stages and their statistics
// ---------------------------------------------------------------------------------------------

/// The four tasks a request's time is divided into (the paper's Table 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// From submission until the request is handed to the driver.
    Dispatch,
    /// From the hand-off until the driver returns the request.
    Invoke,
    /// From the driver's return until the callback starts.
    Done,
    /// The callback itself.
    Callback,
}

impl Stage {
    /// All stages, in the order a request passes through them (and the order of
    /// [`ProfileStats::stages`]).
    pub const ALL: [Stage; 4] = [Stage::Dispatch, Stage::Invoke, Stage::Done, Stage::Callback];

    /// The stage's name as the paper's Table 1 gives it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Dispatch => "Dispatch",
            Stage::Invoke => "Invoke",
            Stage::Done => "Done",
            Stage::Callback => "Callback",
        }
    }

    /// What the stage measures, as in the paper's Table 1.
    pub fn description(self) -> &'static str {
        match self {
            Stage::Dispatch => "delay before the request is handed to the driver",
            Stage::Invoke => "delay before the driver returns the request",
            Stage::Done => "delay before the callback runs",
            Stage::Callback => "duration of the callback",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Statistics of one stage, in nanoseconds. All zero when nothing was recorded.
///
/// Percentiles are bucket upper bounds: never below the true value, at most 6.25% above it
/// (see the histogram's documentation); `count`, `avg_ns`, `min_ns` and `max_ns` are exact.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageStats {
    /// Number of values recorded.
    pub count: u64,
    /// Mean.
    pub avg_ns: f64,
    /// Smallest value.
    pub min_ns: u64,
    /// Largest value.
    pub max_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
}

/// A per-stage profile: one [`StageStats`] per [`Stage`], indexed in [`Stage::ALL`] order.
///
/// Its `Display` prints a table like the paper's Table 1.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileStats {
    /// Indexed by [`Stage`] (`stages[Stage::Invoke as usize]`); see [`ProfileStats::get`].
    pub stages: [StageStats; 4],
}

impl ProfileStats {
    /// The statistics of one stage.
    pub fn get(&self, stage: Stage) -> &StageStats {
        &self.stages[stage.index()]
    }
}

impl fmt::Display for ProfileStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<9} {:>9} {:>11} {:>11} {:>11} {:>11} {:>11}  Description",
            "Task", "Count", "Avg ns", "Min ns", "Max ns", "p50 ns", "p99 ns"
        )?;
        for stage in Stage::ALL {
            let s = self.get(stage);
            writeln!(
                f,
                "{:<9} {:>9} {:>11.0} {:>11} {:>11} {:>11} {:>11}  {}",
                stage.name(),
                s.count,
                s.avg_ns,
                s.min_ns,
                s.max_ns,
                s.p50_ns,
                s.p99_ns,
                stage.description()
            )?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Per-driver profile and per-request stamps
// ---------------------------------------------------------------------------------------------

/// The raw [`now`] readings a profiled request carries; 0 means "not taken".
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Stamps {
    /// When the client submitted the request.
    pub submit: u64,
    /// When the request was handed to the driver.
    pub dispatch: u64,
    /// When the driver returned the request.
    pub done: u64,
    /// When the callback started.
    pub callback: u64,
}

/// One histogram per [`Stage`] (4 × 7,808 bytes of buckets).
pub(crate) struct StageProfile {
    stages: [Histogram; 4],
}

impl Default for StageProfile {
    /// Also calibrates the clock (once per process), so that the first profiled request does
    /// not pay for it.
    fn default() -> Self {
        let _ = clock();
        StageProfile { stages: std::array::from_fn(|_| Histogram::new()) }
    }
}

impl StageProfile {
    /// Records one duration.
    #[inline]
    pub(crate) fn record(&self, stage: Stage, ns: u64) {
        self.stages[stage.index()].record(ns);
    }

    /// Records the stages of one request: Dispatch = dispatch − submit, Invoke = done − dispatch,
    /// Done = callback − done, Callback = `callback_end` − callback. A stage with either stamp
    /// missing (0) is skipped; one whose end is before its start counts as 0 ns.
    pub(crate) fn record_request(&self, s: &Stamps, callback_end: u64) {
        let spans = [
            (Stage::Dispatch, s.submit, s.dispatch),
            (Stage::Invoke, s.dispatch, s.done),
            (Stage::Done, s.done, s.callback),
            (Stage::Callback, s.callback, callback_end),
        ];
        for (stage, start, end) in spans {
            if start != 0 && end != 0 {
                self.record(stage, elapsed_ns(start, end));
            }
        }
    }

    /// The statistics of every stage.
    pub(crate) fn snapshot(&self) -> ProfileStats {
        ProfileStats { stages: std::array::from_fn(|i| self.stages[i].snapshot()) }
    }

    /// Forgets everything recorded (see [`Histogram::reset`]).
    pub(crate) fn reset(&self) {
        for h in &self.stages {
            h.reset();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Sampling
// ---------------------------------------------------------------------------------------------

thread_local! {
    /// Calls left on this thread until the next sample.
    static COUNTDOWN: Cell<u32> = const { Cell::new(0) };
}

/// Whether to profile this request: true once every `every` calls on the calling thread (the
/// first call on a thread included); `every == 0` never, `every == 1` always. About 1 ns.
#[inline]
pub(crate) fn sample(every: u32) -> bool {
    if every == 0 {
        return false;
    }
    COUNTDOWN.with(|left| {
        let n = left.get();
        if n == 0 {
            left.set(every - 1);
            true
        } else {
            // `min`: if `every` shrank since the countdown was set, do not wait out the old one.
            left.set(n.min(every) - 1);
            false
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn buckets_cover_u64_with_bounded_relative_error() {
        let mut probes: Vec<u64> = (0..5000).collect();
        for shift in 0..64 {
            let p = 1u64 << shift;
            probes.extend([p - 1, p, p + 1, p.saturating_mul(3) / 2]);
        }
        probes.push(u64::MAX);
        for v in probes {
            let i = bucket_of(v);
            assert!(i < BUCKETS, "{v} -> {i}");
            let upper = bucket_upper(i);
            assert!(upper >= v, "{v}: upper {upper}");
            // Bucket upper bound is within 1/16 of the value (exact below 32).
            assert!(upper - v <= v / SUB as u64, "{v}: upper {upper}");
            if i > 0 {
                assert!(bucket_upper(i - 1) < v, "{v}: previous bucket ends at {}", bucket_upper(i - 1));
            }
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_upper(BUCKETS - 1), u64::MAX);
    }

    #[test]
    fn exact_count_min_max_avg() {
        let h = Histogram::new();
        assert_eq!(h.snapshot(), StageStats::default());
        for v in [100, 200, 300, 400, 10_000] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.count, 5);
        assert_eq!(s.min_ns, 100);
        assert_eq!(s.max_ns, 10_000);
        assert_eq!(s.avg_ns, 2200.0);
        // 300 is the median; it falls in the bucket [288, 303], which reports its upper bound.
        assert_eq!(s.p50_ns, 303);
        // The top value's bucket is clamped to the exact maximum.
        assert_eq!(s.p999_ns, 10_000);

        h.reset();
        assert_eq!(h.snapshot(), StageStats::default());
        h.record(7);
        let s = h.snapshot();
        assert_eq!((s.count, s.min_ns, s.max_ns, s.p50_ns, s.p99_ns), (1, 7, 7, 7, 7));
    }

    #[test]
    fn percentiles_of_uniform_sequence_within_one_sixteenth() {
        let h = Histogram::new();
        let n = 100_000u64;
        for v in 1..=n {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.count, n);
        assert_eq!(s.avg_ns, (n + 1) as f64 / 2.0);
        assert_eq!((s.min_ns, s.max_ns), (1, n));
        for (got, q) in [(s.p50_ns, 0.5), (s.p90_ns, 0.9), (s.p99_ns, 0.99), (s.p999_ns, 0.999)] {
            let exact = (q * n as f64).ceil() as u64;
            assert!(got >= exact, "p{q}: {got} < {exact}");
            assert!(got - exact <= exact / 16, "p{q}: {got} vs {exact}");
        }
    }

    #[test]
    fn extreme_values_do_not_panic() {
        let h = Histogram::new();
        h.record(0);
        h.record(u64::MAX);
        h.record(u64::MAX - 1);
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.min_ns, 0);
        assert_eq!(s.max_ns, u64::MAX);
        assert_eq!(s.p50_ns, u64::MAX);
        assert_eq!(s.p999_ns, u64::MAX);
        h.reset();
        h.record(0);
        assert_eq!(h.snapshot().p99_ns, 0);
    }

    #[test]
    fn concurrent_recording_keeps_exact_count_and_sum() {
        let h = Arc::new(Histogram::new());
        let per_thread = 50_000u64;
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let h = Arc::clone(&h);
                std::thread::spawn(move || {
                    for i in 0..per_thread {
                        h.record(t * 1_000_000 + i);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = h.snapshot();
        let n = 4 * per_thread;
        let expected_sum: u64 =
            (0..4u64).map(|t| t * 1_000_000 * per_thread + per_thread * (per_thread - 1) / 2).sum();
        assert_eq!(s.count, n);
        assert_eq!(s.avg_ns, expected_sum as f64 / n as f64);
        assert_eq!(h.sum.load(Relaxed), expected_sum);
        assert_eq!(h.buckets.iter().map(|b| b.load(Relaxed)).sum::<u64>(), n);
        assert_eq!((s.min_ns, s.max_ns), (0, 3_000_000 + per_thread - 1));
    }

    #[test]
    fn stamps_become_stages() {
        let p = StageProfile::default();
        let t0 = now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let t1 = now();
        let full = Stamps { submit: t0, dispatch: t0, done: t1, callback: t1 };
        p.record_request(&full, t1);
        let s = p.snapshot();
        for stage in Stage::ALL {
            assert_eq!(s.get(stage).count, 1, "{stage}");
        }
        assert_eq!(s.get(Stage::Dispatch).max_ns, 0);
        // Invoke spans the 2 ms sleep.
        let invoke = s.get(Stage::Invoke).min_ns;
        assert!((1_960_000..1_000_000_000).contains(&invoke), "{invoke}");
        assert_eq!(s.get(Stage::Done).max_ns, 0);
        assert_eq!(s.get(Stage::Callback).max_ns, 0);

        // Missing stamps: only the stages with both ends are recorded.
        p.reset();
        p.record_request(&Stamps { submit: t0, dispatch: t1, ..Default::default() }, 0);
        p.record_request(&Stamps { done: t0, callback: t1, ..Default::default() }, 0);
        p.record_request(&Stamps::default(), t1);
        let s = p.snapshot();
        let counts: Vec<u64> = Stage::ALL.iter().map(|&st| s.get(st).count).collect();
        assert_eq!(counts, [1, 0, 1, 0]);

        // Reversed stamps saturate to 0 ns.
        p.reset();
        p.record_request(&Stamps { submit: t1, dispatch: t0, done: t0 - 1, callback: t0 - 2 }, t0 - 3);
        let s = p.snapshot();
        for stage in Stage::ALL {
            let st = s.get(stage);
            assert_eq!((st.count, st.max_ns), (1, 0), "{stage}");
        }
    }

    #[test]
    fn clock_is_monotonic_and_scaled() {
        let a = now();
        let b = now();
        assert!(a != 0 && b >= a);
        // The TSC interval is bracketed by two wall-clock intervals, one read inside it and one
        // outside, so scheduling noise cannot fail this; 2% is for calibration error.
        let outer = std::time::Instant::now();
        let start = now();
        let inner = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let inner_ns = inner.elapsed().as_nanos() as u64;
        let ns = elapsed_ns(start, now());
        let outer_ns = outer.elapsed().as_nanos() as u64;
        assert!(ns >= inner_ns - inner_ns / 50, "tsc {ns} ns < wall {inner_ns} ns");
        assert!(ns <= outer_ns + outer_ns / 50, "tsc {ns} ns > wall {outer_ns} ns");
        assert_eq!(elapsed_ns(b, a.min(b)), 0);
    }

    /// Runs `f` on a fresh thread, so the thread-local countdown starts from scratch.
    fn on_fresh_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().unwrap()
    }

    #[test]
    fn sample_once_every_n() {
        for n in [1u32, 7, 64] {
            for k in [1usize, 3, 10] {
                let hits = on_fresh_thread(move || (0..k * n as usize).filter(|_| sample(n)).count());
                assert_eq!(hits, k, "every {n}, {k} rounds");
            }
        }
        let hits = on_fresh_thread(|| (0..1000).filter(|_| sample(0)).count());
        assert_eq!(hits, 0);
        // Shrinking `every` does not wait out the old countdown: after sample(1000), sample(2)
        // samples on the 3rd call and every 2nd after (calls 3, 5, 7, 9 of 10).
        let hits = on_fresh_thread(|| {
            sample(1000);
            (0..10).filter(|_| sample(2)).count()
        });
        assert_eq!(hits, 4);
    }

    #[test]
    fn display_is_a_table_of_the_four_stages() {
        let p = StageProfile::default();
        p.record(Stage::Invoke, 155_883);
        let text = p.snapshot().to_string();
        assert_eq!(text.lines().count(), 5, "{text}");
        for stage in Stage::ALL {
            let line = text.lines().find(|l| l.starts_with(stage.name())).unwrap_or_else(|| panic!("{text}"));
            assert!(line.ends_with(stage.description()), "{line}");
        }
        assert!(text.contains("155883"), "{text}");
    }

    /// Prints what profiling costs on this machine (best of 7 runs of 2M calls each, since the
    /// machine is shared). Not a correctness test:
    /// `taskset -c 0,1 cargo test -p ocf --release --lib profile::tests::cost_report -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn cost_report() {
        use std::hint::black_box;
        use std::sync::Barrier;
        use std::time::Instant;
        const N: u64 = 2_000_000;
        /// Best-of-7 nanoseconds per call of `f`, which is called with 0..N.
        fn cost<T>(f: impl Fn(u64) -> T) -> f64 {
            (0..7)
                .map(|_| {
                    let t = Instant::now();
                    (0..N).for_each(|i| drop(black_box(f(i))));
                    t.elapsed().as_nanos() as f64 / N as f64
                })
                .fold(f64::INFINITY, f64::min)
        }
        /// The same on two threads at once; the mean of the two threads' per-call costs.
        fn cost2(f: impl Fn(u64) + Sync) -> f64 {
            let barrier = Barrier::new(2);
            let run = || {
                barrier.wait();
                cost(&f)
            };
            std::thread::scope(|s| {
                let other = s.spawn(run);
                (run() + other.join().unwrap()) / 2.0
            })
        }
        let value = |i: u64| 1000 + (i & 1023) * 37;
        let _ = now();
        let h = Histogram::new();
        let p = StageProfile::default();
        let stamps = Stamps { submit: 1, dispatch: 400, done: 90_000, callback: 95_000 };
        let report = [
            ("empty loop", cost(|i| i)),
            ("Instant::now", cost(|_| Instant::now())),
            ("now() (quanta raw)", cost(|_| now())),
            ("elapsed_ns", cost(|i| elapsed_ns(black_box(i), 1 << 40))),
            ("sample(64)", cost(|_| sample(black_box(64)))),
            ("Histogram::record, 1 thread", cost(|i| h.record(black_box(value(i))))),
            ("Histogram::record, 2 threads", cost2(|i| h.record(black_box(value(i))))),
            ("record_request, 1 thread", cost(|_| p.record_request(black_box(&stamps), 96_000))),
            ("record_request, 2 threads", cost2(|_| p.record_request(black_box(&stamps), 96_000))),
        ];
        for (what, ns) in report {
            println!("{what:30} {ns:6.2} ns/call");
        }
        assert_eq!(h.snapshot().count, 7 * 3 * N);
    }
}
