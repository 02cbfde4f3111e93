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
//! (`/proc/thread-self/schedstat`, Linux's schedstats). Their ratio over the last interval
//! is the thread's contention: a request that computes for `t` takes `t × (1 + wait/run)`.
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

#[derive(Clone, Copy)]
struct Seen {
    /// When the file was last read ([`profile::now`] ticks; 0: never).
    at: u64,
    run_ns: u64,
    wait_ns: u64,
    factor: f64,
}

thread_local! {
    static SEEN: Cell<Seen> = const { Cell::new(Seen { at: 0, run_ns: 0, wait_ns: 0, factor: 1.0 }) };
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
        if let Some((run_ns, wait_ns)) = read() {
            let (run, wait) = (run_ns.saturating_sub(s.run_ns), wait_ns.saturating_sub(s.wait_ns));
            if s.at != 0 && run > 0 {
                s.factor = (1.0 + wait as f64 / run as f64).min(MAX_FACTOR);
            }
            (s.run_ns, s.wait_ns) = (run_ns, wait_ns);
        }
        s.at = now.max(1);
        seen.set(s);
        s.factor
    })
}

/// This thread's time on a CPU and waiting for one, in ns.
fn read() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut fields = text.split_ascii_whitespace().map(|f| f.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??))
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
