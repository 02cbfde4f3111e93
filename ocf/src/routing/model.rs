//! The cost model: what one request of a given size costs on one driver, learned online from
//! the completion times the framework measures.
//!
//! One [`ModelTable`] per driver × algorithm (sessions with the same algorithm on the same
//! driver share it, so a new session starts with what earlier ones learned). It holds a
//! [`Cell`] per direction × [`SizeClass`]: an exponentially weighted average of the
//! measured time and of the payload size. A prediction for `len` bytes draws a line through
//! the class's point and its nearest measured neighbour (linear in size between classes,
//! which is what `setup + bytes / rate` is), or, with no neighbour, scales the class's time
//! as `setup + per-byte` would with the setup share unknown: not at all.
//!
//! A cell's first [`WARM_UP`] samples count by their least (a driver's first requests pay
//! for cold caches and threads that are not yet waiting). After that, averages move faster
//! down than up, and a sample counts as at most four times the
//! estimate: a time well below the estimate is news (a device recovered, a faster path
//! started), a time far above it is often one preempted thread. Cells
//! are updated with plain loads and stores, not compare-and-swap: two samples racing lose one
//! of them, which an average can afford, and no request ever waits for another.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::request::Op;

use super::{ModelEstimate, SizeClass, SIZE_CLASSES};

/// One request in this many per thread is timed for the model (requests on drivers that
/// complete later are always timed: their cost dwarfs two clock readings). A timed decision
/// reads the clock four times and consults every route's model: about 100 ns, so at 1 in 128
/// it adds 1 ns to a request (measured: 1 in 16 cost 6% of a 16-byte AES-GCM request, 1 in
/// 64 about 1.5%).
pub const SAMPLE_EVERY: u32 = 128;

/// Where a decision is *settled* — a synchronous driver that every other route is predicted
/// to cost at least [`SETTLED_MARGIN`] times as much as, every one past its warm-up, its
/// own last sample in line with its estimate, and [`SAMPLE_SETTLED`] requests at its
/// predicted cost within [`SETTLED_SPAN_NS`] — one request in this many is timed instead:
/// what the timed decision and completion cost (about 200 ns together) is then spread over
/// eight times as many requests. A change is still seen: the next timed request is at most
/// [`SETTLED_SPAN_NS`] away at the old cost, exploration is timed by the clock, not by
/// counts, and a sample out of line with its estimate makes this thread's next decision a
/// timed one, which is not settled while the estimate has not caught up (see [`tick`]).
pub(crate) const SAMPLE_SETTLED: u32 = 1024;
/// How much dearer every other route must be predicted for a decision to be settled.
pub(crate) const SETTLED_MARGIN: f64 = 4.0;
/// The longest that [`SAMPLE_SETTLED`] requests may be predicted to take for a settled
/// decision: a CPU that suddenly got slower is timed again within this (at its old cost).
pub(crate) const SETTLED_SPAN_NS: f64 = 10_000_000.0;
/// A sample more than this many times its cell's estimate is out of line: news (the driver
/// got slower) or one preempted request; either way the decision is not settled until the
/// samples agree again.
const OUT_OF_LINE: u64 = 2;

thread_local! {
    /// This thread's decisions so far (wrapping): a decision is timed when it is a multiple
    /// of the period (`tick`).
    static TICK: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether this thread's next decision is a timed one, for a period of `every` (a power of
/// two: [`SAMPLE_EVERY`], or [`SAMPLE_SETTLED`] for a settled decision).
#[inline(always)]
pub(crate) fn tick(every: u32) -> bool {
    debug_assert!(every.is_power_of_two());
    TICK.with(|t| {
        let n = t.get().wrapping_add(1);
        t.set(n);
        n & (every - 1) == 0
    })
}

/// Makes this thread's next decision a timed one (a sample was out of line).
#[cold]
fn tick_now() {
    TICK.with(|t| t.set(u32::MAX));
}

/// The first this-many samples of a cell are its warm-up: their least is the estimate.
pub(crate) const WARM_UP: u64 = 4;

/// Fixed-point scale of the stored averages (1/16 ns, 1/16 byte).
const FIX: f64 = 16.0;

/// The request directions ([`Op`]) a table keeps apart: every operation, the public-key
/// ones included (a table is one algorithm and key size, so its cells are per operation and
/// key size for them).
pub(crate) const OPS: usize = Op::ALL.len();

#[inline]
pub(crate) fn op_index(op: Op) -> usize {
    op as usize
}

fn op_of(i: usize) -> Op {
    Op::ALL[i]
}

/// What the model knows about one driver × algorithm × direction × size class.
#[derive(Default)]
pub(crate) struct Cell {
    /// Average time per request, in 1/16 ns; 0: never measured.
    time: AtomicU64,
    /// Average payload size of the measured requests, in 1/16 bytes.
    len: AtomicU64,
    samples: AtomicU64,
    /// The last sample was out of line with the estimate (more than [`OUT_OF_LINE`] times
    /// it): no decision on this cell is settled until one is in line again.
    out_of_line: AtomicBool,
    /// When a request was last sent here to explore (clock ticks; 0: never).
    pub(crate) tried: AtomicU64,
}

impl Cell {
    /// The average time (ns) and size (bytes), if measured.
    #[inline]
    pub(crate) fn point(&self) -> Option<(f64, f64)> {
        let t = self.time.load(Ordering::Relaxed);
        (t != 0).then(|| (t as f64 / FIX, self.len.load(Ordering::Relaxed) as f64 / FIX))
    }

    pub(crate) fn samples(&self) -> u64 {
        self.samples.load(Ordering::Relaxed)
    }

    /// Whether the last sample was in line with the estimate.
    pub(crate) fn in_line(&self) -> bool {
        !self.out_of_line.load(Ordering::Relaxed)
    }

    /// Folds in one measurement: `ns` for a request of `len` payload bytes.
    pub(crate) fn learn(&self, ns: u64, len: usize) {
        let sample = (ns.max(1) as f64 * FIX) as u64;
        let size = (len as f64 * FIX) as u64;
        let n = self.samples.fetch_add(1, Ordering::Relaxed);
        let old = self.time.load(Ordering::Relaxed);
        let (time, len) = if old == 0 || n == 0 {
            (sample, size)
        } else if n < WARM_UP {
            // The first requests on a driver pay for cold caches, page faults, a thread
            // that is not yet waiting: the least of them is the estimate.
            (sample.min(old), (self.len.load(Ordering::Relaxed) + size) / 2)
        } else {
            // Down by a quarter of the gap, up by an eighth, and a sample counts as at most
            // four times the estimate: one preempted thread must not teach the model that
            // the CPU takes milliseconds, while a driver that really got slower is followed
            // within a few samples (see the module docs).
            let out = sample > old.saturating_mul(OUT_OF_LINE);
            if out != self.out_of_line.load(Ordering::Relaxed) {
                self.out_of_line.store(out, Ordering::Relaxed);
            }
            if out {
                // Out of line: this thread's next decision is timed (a synchronous driver
                // completes on the submitting thread), and not settled (`Cell::in_line`).
                tick_now();
            }
            let sample = sample.min(old.saturating_mul(4));
            let shift = if sample < old { 2 } else { 3 };
            let old_len = self.len.load(Ordering::Relaxed);
            (ewma(old, sample, shift), ewma(old_len, size, 3))
        };
        self.time.store(time.max(1), Ordering::Relaxed);
        self.len.store(len, Ordering::Relaxed);
    }
}

fn ewma(old: u64, sample: u64, shift: u32) -> u64 {
    if sample >= old {
        old + ((sample - old) >> shift)
    } else {
        old - ((old - sample) >> shift)
    }
}

/// How requests reach a driver, which the model keeps apart: one at a time, or in runs
/// handed over whole (`Session::run_batch`), by the run's length, where a multi-buffer
/// driver's cost per request is a fraction of its cost for one — the smaller the longer
/// the run: a flush of 2 jobs costs IPsec-MB nearly what one of 16 does (measured in
/// ipsecd: a mixed estimate over runs of 2–3 and of ~47 packets kept AES-CBC+HMAC
/// decryption on the CPU, though mb took 740 ns a packet in the long runs, soft 1,170).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    Alone,
    /// A run of this many requests.
    InRun(usize),
}

/// The runs' length classes: 2–3, 4–15, 16 and more (their lower bounds).
pub(crate) const RUN_CLASSES: [usize; 3] = [2, 4, 16];

impl Arrival {
    /// The table's row: 0 alone, then one per run length class.
    pub(crate) fn index(self) -> usize {
        match self {
            Arrival::Alone => 0,
            Arrival::InRun(n) => RUN_CLASSES.iter().rposition(|&lo| n >= lo).map_or(1, |c| c + 1),
        }
    }

    /// The arrival of a row (a run's at its class's lower bound).
    fn of_index(i: usize) -> Arrival {
        match i {
            0 => Arrival::Alone,
            i => Arrival::InRun(RUN_CLASSES[i - 1]),
        }
    }
}

/// The model of one driver for one algorithm: a cell per arrival (alone, or a run length
/// class) × direction × size class. A run's cell holds the cost per request of the runs
/// measured (the run's time over its length).
pub(crate) struct ModelTable {
    /// The session mode and algorithms, as statistics show them.
    pub(crate) algorithm: String,
    cells: [[[Cell; SIZE_CLASSES]; OPS]; 1 + RUN_CLASSES.len()],
}

impl ModelTable {
    pub(crate) fn new(algorithm: String) -> ModelTable {
        ModelTable { algorithm, cells: Default::default() }
    }

    #[inline]
    pub(crate) fn cell(&self, op: Op, class: SizeClass) -> &Cell {
        self.cell_for(Arrival::Alone, op, class)
    }

    #[inline]
    pub(crate) fn cell_for(&self, arrival: Arrival, op: Op, class: SizeClass) -> &Cell {
        &self.cells[arrival.index()][op_index(op)][class.index()]
    }

    /// The predicted time (ns) of a request of `len` bytes; `None` if its class was never
    /// measured.
    #[inline]
    pub(crate) fn predict(&self, op: Op, class: SizeClass, len: usize) -> Option<f64> {
        self.predict_for(Arrival::Alone, op, class, len)
    }

    /// As `predict`, for requests arriving as `arrival`.
    #[inline]
    pub(crate) fn predict_for(&self, arrival: Arrival, op: Op, class: SizeClass, len: usize) -> Option<f64> {
        let row = &self.cells[arrival.index()][op_index(op)];
        let i = class.index();
        let (t, l) = row[i].point()?;
        let x = len as f64;
        // The nearest measured class on the side of `len`, else on the other side.
        let below = || row[..i].iter().rev().find_map(Cell::point);
        let above = || row[i + 1..].iter().find_map(Cell::point);
        let other = if x >= l { above().or_else(below) } else { below().or_else(above) };
        if let Some((t2, l2)) = other {
            if (l2 - l).abs() >= 1.0 {
                let slope = ((t2 - t) / (l2 - l)).max(0.0);
                return Some((t + slope * (x - l)).max(t.min(t2) * 0.5).max(1.0));
            }
        }
        Some(t)
    }

    /// The estimates for statistics: per arrival and direction that has samples, the
    /// classes' points and a least-squares line `setup + ns_per_byte * len` through them.
    pub(crate) fn estimates(&self) -> Vec<ModelEstimate> {
        let mut out = Vec::new();
        let rows =
            self.cells.iter().enumerate().flat_map(|(a, ops)| ops.iter().enumerate().map(move |r| (a, r)));
        for (a, (o, row)) in rows {
            let samples: u64 = row.iter().map(Cell::samples).sum();
            if samples == 0 {
                continue;
            }
            let mut classes = [None; SIZE_CLASSES];
            for (c, cell) in row.iter().enumerate() {
                classes[c] = cell.point();
            }
            let (setup_ns, per_byte) = fit(classes.iter().flatten().map(|&(t, l)| (l, t)));
            out.push(ModelEstimate {
                algorithm: self.algorithm.clone(),
                op: Some(op_of(o)),
                setup_ns,
                ns_per_kib: per_byte * 1024.0,
                samples,
                classes,
                run_len: match Arrival::of_index(a) {
                    Arrival::Alone => 0,
                    Arrival::InRun(n) => n,
                },
            });
        }
        out
    }
}

/// Least squares `y = a + b x` (b ≥ 0, a ≥ 0); one point: all setup.
fn fit(points: impl Iterator<Item = (f64, f64)>) -> (f64, f64) {
    let pts: Vec<(f64, f64)> = points.collect();
    let n = pts.len() as f64;
    if pts.is_empty() {
        return (0.0, 0.0);
    }
    let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), &(x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = pts.iter().map(|&(x, _)| (x - mx) * (x - mx)).sum();
    if sxx < 1e-9 {
        return (my, 0.0);
    }
    let sxy: f64 = pts.iter().map(|&(x, y)| (x - mx) * (y - my)).sum();
    let b = (sxy / sxx).max(0.0);
    let a = (my - b * mx).max(0.0);
    (a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `op_index` is the discriminant: `Op::ALL` must list the operations in their order.
    #[test]
    fn every_operation_has_its_own_cell_row() {
        for (i, op) in Op::ALL.into_iter().enumerate() {
            assert_eq!(op_index(op), i, "{op:?}");
            assert_eq!(op_of(i), op);
        }
    }

    /// Runs are kept apart by length class, and a run's cell is none of a single request's.
    #[test]
    fn run_lengths_have_cells_of_their_own() {
        let idx = |n| Arrival::InRun(n).index();
        assert_eq!([idx(1), idx(2), idx(3), idx(4), idx(15), idx(16), idx(64)], [1, 1, 1, 2, 2, 3, 3]);
        assert_eq!(Arrival::Alone.index(), 0);
        let t = ModelTable::new("x".into());
        t.cell_for(Arrival::InRun(47), Op::Decrypt, SizeClass::of(1400)).learn(740, 1400);
        let c = SizeClass::of(1400);
        assert!(t.predict_for(Arrival::InRun(40), Op::Decrypt, c, 1400).is_some());
        assert!(t.predict_for(Arrival::InRun(3), Op::Decrypt, c, 1400).is_none());
        assert!(t.predict(Op::Decrypt, c, 1400).is_none());
        assert_eq!(t.estimates()[0].run_len, 16);
    }

    #[test]
    fn learns_and_predicts_a_line() {
        let m = ModelTable::new("test".into());
        // A card: 20 µs + 1 ns per byte.
        for len in [64usize, 1024, 8192] {
            let class = SizeClass::of(len);
            for _ in 0..50 {
                m.cell(Op::Encrypt, class).learn(20_000 + len as u64, len);
            }
        }
        let p = |len| m.predict(Op::Encrypt, SizeClass::of(len), len).unwrap();
        assert!((p(1024) - 21_024.0).abs() < 2.0, "{}", p(1024));
        // Between measured classes: on the line.
        assert!((p(1000) - 21_000.0).abs() < 30.0, "{}", p(1000));
        assert!((p(8000) - 28_000.0).abs() < 100.0, "{}", p(8000));
        assert_eq!(m.predict(Op::Decrypt, SizeClass::of(1024), 1024), None, "directions are apart");
        assert_eq!(m.predict(Op::Encrypt, SizeClass::of(300), 300), None, "unmeasured class");
        let e = &m.estimates()[0];
        assert_eq!(e.op, Some(Op::Encrypt));
        assert_eq!(e.samples, 150);
        assert!((e.setup_ns - 20_000.0).abs() < 50.0, "{e:?}");
        assert!((e.ns_per_kib - 1024.0).abs() < 10.0, "{e:?}");
    }

    #[test]
    fn moves_down_faster_than_up() {
        let c = Cell::default();
        c.learn(1000, 100);
        c.learn(100_000, 100); // one preempted sample
        let up = c.point().unwrap().0;
        assert!(up < 1000.0 + 99_000.0 / 8.0 + 1.0, "{up}");
        let c = Cell::default();
        c.learn(100_000, 100);
        for _ in 0..12 {
            c.learn(1000, 100); // the device recovered
        }
        assert!(c.point().unwrap().0 < 5000.0, "{:?}", c.point());
    }
}
