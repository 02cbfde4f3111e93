//! How much the CPU is contended, as the calling thread sees it: what a request on a
//! synchronous driver really costs a thread that must first wait for a core.
//!
//! A CPU driver's measured time covers its computation, not the time a thread waits for a
//! core between its requests. With more runnable threads than cores (eight submitters on two
//! cores) every request on the CPU costs a thread its computation times the queue for the
//! cores, while a request on a card costs it only the card's time: routing by computation
//! alone keeps everything on the CPU and leaves the cards idle (measured: 0.98× the CPU
//! alone where a static 30% to the cards gave 1.25×; `docs/routing.md`).
//!
//! The kernel counts, per thread, the time it ran and the time it waited on a run queue
//! (`/proc/thread-self/schedstat`, Linux's schedstats). Their ratio is the thread's
//! contention: a request that computes for `t` takes `t × (1 + wait/run)`. The ratio is
//! taken over the recent intervals together, each older one counting [`DECAY`] times less,
//! not over the last one alone: on a machine shared with other processes, a 10 ms interval
//! in which the thread ran 0.2 ms and waited the rest says 50 from almost no running, and
//! such spikes sent one-thread AES-GCM at 8 KiB to a simulated card hundreds of times a
//! second (`cargo run --release -p ocf-sim --example auto_cost`, issue 31). Summed, an
//! interval counts by how long the thread ran in it.
//! A wake-up is not a queue: a thread that sleeps while a card works and is woken by its
//! completion waits for its (idle) core to be scheduled — 30–45 µs in the reference VM, where
//! the hypervisor must run the virtual CPU — and schedstat counts that as waiting. Counted
//! as contention it made the CPU look dearer the more requests went to a card, so more went
//! there: one thread's MODP-2048 derives went 73% to a simulated card that finished later
//! than the CPU (0.80x the CPU alone, `cryptotest -d soft -d sim:qat-like,cpu=1 -d auto`). So
//! each timeslice's first [`WAKE_NS`] of waiting is not counted (schedstat's third field
//! counts timeslices); a thread that really queues for a core waits whole timeslices of
//! others, milliseconds, and still shows it.
//! The file is read at most every [`INTERVAL_NS`] per thread (a read costs a few µs). The
//! interval is timed with ocf's own clock (`crate::profile::now`, the TSC): `Instant::now`
//! is a system call where the kernel offers no vDSO clock, 60 µs a call under
//! user-mode-linux, where it made every full routing decision cost that much (auto at 0.24×
//! the CPU alone for 16-byte AES-GCM, `scripts/kernel-vm afalg` with `KVM_AFALG_BENCH=1`).

use std::cell::Cell;

use crate::profile;

/// How often a thread reads its scheduler statistics.
const INTERVAL_NS: u64 = 10_000_000;
/// The factor's cap: beyond it the numbers are no longer a queue for the CPU.
const MAX_FACTOR: f64 = 64.0;
/// Each interval's time counts this many times less at the next reading.
const DECAY: f64 = 2.0;
/// The wait per timeslice that is a wake-up's, not a queue's (see the module docs).
const WAKE_NS: u64 = 50_000;

#[derive(Clone, Copy)]
struct Seen {
    /// When the file was last read ([`profile::now`] ticks; 0: never).
    at: u64,
    /// The counters at that reading.
    run_ns: u64,
    wait_ns: u64,
    slices: u64,
    /// The recent intervals' run and wait times, decayed.
    run: f64,
    wait: f64,
    factor: f64,
}

impl Seen {
    /// The factor with a new reading of the counters folded in (the first reading only sets
    /// the baseline).
    fn fold(mut self, run_ns: u64, wait_ns: u64, slices: u64) -> Seen {
        let (run, wait) = (run_ns.saturating_sub(self.run_ns), wait_ns.saturating_sub(self.wait_ns));
        let wait = wait.saturating_sub(slices.saturating_sub(self.slices).saturating_mul(WAKE_NS));
        if self.at != 0 {
            self.run = self.run / DECAY + run as f64;
            self.wait = self.wait / DECAY + wait as f64;
            if self.run > 0.0 {
                self.factor = (1.0 + self.wait / self.run).min(MAX_FACTOR);
            }
        }
        (self.run_ns, self.wait_ns, self.slices) = (run_ns, wait_ns, slices);
        self
    }
}

thread_local! {
    static SEEN: Cell<Seen> =
        const { Cell::new(Seen { at: 0, run_ns: 0, wait_ns: 0, slices: 0, run: 0.0, wait: 0.0, factor: 1.0 }) };
}

/// The calling thread's CPU contention: 1 when it never waits for a core, `n` when it waits
/// `n - 1` times as long as it runs. 1 where the kernel does not tell.
pub(crate) fn contention() -> f64 {
    SEEN.with(|seen| {
        let mut s = seen.get();
        let now = profile::now();
        if s.at != 0 && profile::elapsed_ns(s.at, now) < INTERVAL_NS {
            return s.factor;
        }
        if let Some((run_ns, wait_ns, slices)) = read() {
            s = s.fold(run_ns, wait_ns, slices);
        }
        s.at = now.max(1);
        seen.set(s);
        s.factor
    })
}

/// This thread's time on a CPU and waiting for one, in ns, and its timeslices so far.
fn read() -> Option<(u64, u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut fields = text.split_ascii_whitespace().map(|f| f.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??, fields.next().flatten().unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn spin_ms(ms: u128) {
        let t = Instant::now();
        while t.elapsed().as_millis() < ms {
            std::hint::black_box(0u64);
        }
    }

    /// One interval in which the thread hardly ran does not make a queue: steady sharing
    /// (run 3.5 ms, wait 6.5 ms per 10 ms in three timeslices: factor 2.8), then 0.2 ms run
    /// and 9.8 ms waited.
    /// The last interval alone said 50, which made the CPU's marginal cost 99 times its
    /// time. Sustained contention still shows in full.
    #[test]
    fn a_short_spike_moves_the_factor_little_and_lasting_contention_fully() {
        let mut s = Seen { at: 1, run_ns: 0, wait_ns: 0, slices: 0, run: 0.0, wait: 0.0, factor: 1.0 };
        let (mut run, mut wait, mut slices) = (0, 0, 0);
        // Timeslices of 3 ms: the allowance for wake-ups is a small part of these waits.
        let mut step = |s: Seen, r: u64, w: u64| {
            (run, wait, slices) = (run + r, wait + w, slices + 3);
            s.fold(run, wait, slices)
        };
        for _ in 0..10 {
            s = step(s, 3_500_000, 6_500_000);
        }
        assert!((s.factor - 1.0 - 6.35 / 3.5).abs() < 0.01, "{}", s.factor);
        s = step(s, 200_000, 9_800_000);
        assert!(s.factor < 6.0, "one spike: {}", s.factor);
        for _ in 0..20 {
            s = step(s, 200_000, 9_800_000);
        }
        assert!(s.factor > 45.0, "lasting: {}", s.factor);
    }

    /// A thread that sleeps while a card works and is woken 28 times in 10 ms, each wake-up
    /// 40 µs late (an idle virtual CPU's), running 3.2 ms: no queue for a core. Counting the
    /// waits made it 1.35, and the CPU's marginal cost 1.7 times its time.
    #[test]
    fn wake_ups_are_not_a_queue() {
        let mut s = Seen { at: 1, run_ns: 0, wait_ns: 0, slices: 0, run: 0.0, wait: 0.0, factor: 1.0 };
        let (mut run, mut wait, mut slices) = (0, 0, 0);
        for _ in 0..10 {
            (run, wait, slices) = (run + 3_200_000, wait + 28 * 40_000, slices + 28);
            s = s.fold(run, wait, slices);
        }
        assert_eq!(s.factor, 1.0);
    }

    #[test]
    fn a_thread_that_shares_the_cores_sees_the_queue() {
        if read().is_none() {
            return; // no schedstat here: the factor stays 1
        }
        assert_eq!(contention(), 1.0, "the first reading has no interval yet");
        // Eight more spinning threads than this one: on any machine with fewer than nine
        // cores this thread waits for one.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cores >= 9 {
            return;
        }
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| spin_ms(80));
            }
            spin_ms(80);
            let f = contention();
            assert!(f > 1.5, "nine spinning threads on {cores} cores: factor {f}");
        });
    }
}
