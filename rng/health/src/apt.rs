//! The Adaptive Proportion Test (SP 800-90B §4.4.2): trips when a window's first sample
//! occurs `C` times among the window's `W` samples — a source that has lost entropy
//! (bias) without being stuck.
//!
//! ```text
//! A = the window's first sample, B = 1
//! for each of the window's next W − 1 samples x:  x == A → B += 1, and B ≥ C is a failure
//! then the next sample opens the next window (windows do not overlap)
//! ```

/// The test's running state.
#[derive(Clone, Debug)]
pub(crate) struct AdaptiveProportion {
    cutoff: u32,
    window: u32,
    reference: u8,
    count: u32,
    /// Samples of the current window seen; 0 when the next sample opens a window.
    seen: u32,
}

impl AdaptiveProportion {
    pub(crate) fn new(cutoff: u32, window: u32) -> AdaptiveProportion {
        AdaptiveProportion { cutoff, window, reference: 0, count: 0, seen: 0 }
    }

    /// Forgets the stream: the next sample opens a window.
    pub(crate) fn reset(&mut self) {
        self.seen = 0;
        self.count = 0;
    }

    /// Takes the next sample; `true` when it trips the test.
    #[inline(always)]
    pub(crate) fn feed(&mut self, x: u8) -> bool {
        if self.seen == 0 {
            self.reference = x;
            self.count = 1;
            self.seen = 1;
            return self.count >= self.cutoff;
        }
        self.seen += 1;
        if self.seen == self.window {
            self.seen = 0;
        }
        if x == self.reference {
            self.count += 1;
            return self.count >= self.cutoff;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window of `window` samples: `reference` at the start and at every `gap`-th place
    /// until it occurs `occurrences` times, other samples distinct from it in between.
    fn window_with(reference: u8, occurrences: u32, window: u32, gap: u32) -> Vec<u8> {
        let mut placed = 0;
        (0..window)
            .map(|i| {
                if i % gap == 0 && placed < occurrences {
                    placed += 1;
                    reference
                } else {
                    reference.wrapping_add(1 + (i % 200) as u8)
                }
            })
            .collect()
    }

    #[test]
    fn the_cutoffth_occurrence_of_the_first_sample_trips_one_less_does_not() {
        for (cutoff, window) in [(18, 1024), (105, 1024), (589, 1024), (13, 512), (410, 512)] {
            let gap = window / cutoff;
            let mut t = AdaptiveProportion::new(cutoff, window);
            let pass = window_with(0xAA, cutoff - 1, window, gap);
            assert!(pass.iter().all(|&x| !t.feed(x)), "C = {cutoff}: C − 1 occurrences pass");
            // The next window: trips exactly at its C-th occurrence, not before.
            let trip = window_with(0xAA, cutoff, window, gap);
            let at = trip.iter().position(|&x| t.feed(x)).expect("C occurrences trip");
            assert_eq!(trip[..=at].iter().filter(|&&x| x == 0xAA).count() as u32, cutoff);
            assert_eq!(at as u32, (cutoff - 1) * gap);
        }
    }

    #[test]
    fn occurrences_do_not_carry_over_windows() {
        // Three occurrences at the end of one window and three at the start of the next:
        // each window counts its own, so neither trips a cutoff of 4.
        let (cutoff, window) = (4, 16);
        let mut t = AdaptiveProportion::new(cutoff, window);
        let w1 = [9, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 9, 32, 9];
        assert!(w1.iter().all(|&x| !t.feed(x)));
        let w2 = [9, 20, 9, 21, 9, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32];
        assert!(w2.iter().all(|&x| !t.feed(x)));
        let w3 = [9, 20, 9, 21, 9, 22, 9];
        let trips: Vec<bool> = w3.iter().map(|&x| t.feed(x)).collect();
        assert_eq!(trips, [false, false, false, false, false, false, true], "the third window's 4th 9 trips");
    }
}
