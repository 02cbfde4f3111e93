//! `--oracle`: the static splits an `auto` case is compared with.
//!
//! Driver A is the first driver `auto` routes to (the first listed, normally `soft`); group
//! B is the others, whose requests go round-robin over its members. A split decides, per
//! request, A or B:
//!
//! - a size distribution: a threshold T, every power of two inside the distribution's range
//!   — a request smaller than T goes to A, the others to B — plus all-A and all-B;
//! - a fixed size (where a threshold means nothing): the share of requests sent to B, 0%,
//!   10%, …, 100%, interleaved deterministically: request i goes to B iff
//!   ⌊(i+1)·s⌋ > ⌊i·s⌋.
//!
//! The routes are computed per request slot before the clock starts ([`routes`]); the
//! measuring loop only looks them up. One at a time, a thread cycles through its slots, so
//! a share is exact; with `--batch`, slots are reused in the order they come back, so it
//! holds within one use per slot. Each split runs for the case's whole time, so
//! `--oracle` multiplies the run time by the number of splits.

use crate::sizes::SizeSpec;

/// Shares of requests to B, in tenths.
const SHARE_STEPS: u32 = 10;

/// One static split between A and B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Requests smaller than this many bytes to A, the rest to B (0: all to B; `usize::MAX`:
    /// all to A).
    Threshold(usize),
    /// This many tenths of the requests to B.
    Share(u32),
}

impl Split {
    /// A short label: `all A`, `<256 to A`, `30% to B`.
    pub fn label(self) -> String {
        match self {
            Split::Threshold(usize::MAX) | Split::Share(0) => "all A".into(),
            Split::Threshold(0) | Split::Share(SHARE_STEPS) => "all B".into(),
            Split::Threshold(t) => format!("<{t} to A"),
            Split::Share(k) => format!("{}% to B", k * 100 / SHARE_STEPS),
        }
    }

    /// Whether request `i`, of `size` bytes, goes to B.
    pub fn to_b(self, i: usize, size: usize) -> bool {
        match self {
            Split::Threshold(t) => size >= t,
            Split::Share(k) => {
                let k = k as usize;
                (i + 1) * k / SHARE_STEPS as usize > i * k / SHARE_STEPS as usize
            }
        }
    }

    /// How many request slots a thread's cycle must be a multiple of for the split to be
    /// exact (a share over `b_members` round-robin members).
    pub fn cycle(self, b_members: usize) -> usize {
        match self {
            Split::Share(_) => SHARE_STEPS as usize * b_members.max(1),
            Split::Threshold(_) => 1,
        }
    }
}

/// The splits to sweep for a case (only all-A when there is no B).
pub fn splits(sizes: SizeSpec, has_b: bool) -> Vec<Split> {
    if !has_b {
        return vec![Split::Share(0)];
    }
    match sizes {
        SizeSpec::Fixed(_) => (0..=SHARE_STEPS).map(Split::Share).collect(),
        _ => {
            let (lo, hi) = sizes.range();
            let mut v = vec![Split::Threshold(usize::MAX)];
            v.extend(
                (0..usize::BITS).map(|b| 1usize << b).filter(|&p| p > lo && p <= hi).map(Split::Threshold),
            );
            v.push(Split::Threshold(0));
            v
        }
    }
}

/// The route of every request slot: 0 for A, 1..=`b_members` for B's members (in turn).
pub fn routes(split: Split, sizes: &[usize], b_members: usize) -> Vec<usize> {
    let mut next_b = 0;
    sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| {
            if b_members == 0 || !split.to_b(i, size) {
                return 0;
            }
            next_b += 1;
            1 + (next_b - 1) % b_members
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_sends_exactly_that_share_to_b_interleaved() {
        for k in 0..=SHARE_STEPS {
            let r = routes(Split::Share(k), &[64; 100], 1);
            assert_eq!(r.iter().filter(|&&x| x == 1).count(), 10 * k as usize, "{k}");
            // Interleaved: in every 10 requests, k go to B.
            for w in r.chunks(10) {
                assert_eq!(w.iter().filter(|&&x| x == 1).count(), k as usize);
            }
        }
        // 30%: requests 3, 6 and 9 of each ten (⌊(i+1)·0.3⌋ > ⌊i·0.3⌋).
        assert_eq!(&routes(Split::Share(3), &[64; 10], 1), &[0, 0, 0, 1, 0, 0, 1, 0, 0, 1]);
        // B's members take turns.
        let r = routes(Split::Share(SHARE_STEPS), &[64; 6], 2);
        assert_eq!(r, [1, 2, 1, 2, 1, 2]);
        assert_eq!(Split::Share(3).label(), "30% to B");
        assert_eq!(Split::Share(0).label(), "all A");
    }

    #[test]
    fn a_threshold_sends_smaller_requests_to_a() {
        let sizes = [40, 576, 1500, 40, 255, 256];
        assert_eq!(routes(Split::Threshold(256), &sizes, 1), [0, 1, 1, 0, 0, 1]);
        assert_eq!(routes(Split::Threshold(256), &sizes, 2), [0, 1, 2, 0, 0, 1]);
        assert_eq!(routes(Split::Threshold(0), &sizes, 1), [1; 6]);
        assert_eq!(routes(Split::Threshold(usize::MAX), &sizes, 1), [0; 6]);
        assert_eq!(routes(Split::Threshold(256), &sizes, 0), [0; 6], "no B: all A");
        assert_eq!(Split::Threshold(256).label(), "<256 to A");
    }

    #[test]
    fn the_sweep_covers_each_power_of_two_in_the_range() {
        let t: Vec<String> = splits(SizeSpec::Imix, true).iter().map(|s| s.label()).collect();
        assert_eq!(t, ["all A", "<64 to A", "<128 to A", "<256 to A", "<512 to A", "<1024 to A", "all B"]);
        assert_eq!(splits(SizeSpec::LogUniform(16, 16384), true).len(), 2 + 10);
        assert_eq!(splits(SizeSpec::Fixed(1024), true).len(), 11);
        assert_eq!(splits(SizeSpec::Fixed(1024), false), [Split::Share(0)]);
    }
}
