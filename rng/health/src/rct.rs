//! The Repetition Count Test (SP 800-90B §4.4.1): trips when one sample value repeats
//! `C` times in a row — a stuck source.
//!
//! ```text
//! A = the first sample, B = 1
//! for each next sample x:  x == A → B += 1, and B ≥ C is a failure
//!                          else   → A = x, B = 1
//! ```

/// The test's running state.
#[derive(Clone, Debug)]
pub(crate) struct RepetitionCount {
    cutoff: u32,
    /// The last sample, or `NONE` before the first.
    last: u16,
    run: u32,
}

const NONE: u16 = u16::MAX;

impl RepetitionCount {
    pub(crate) fn new(cutoff: u32) -> RepetitionCount {
        RepetitionCount { cutoff, last: NONE, run: 0 }
    }

    /// Forgets the stream (a new start-up).
    pub(crate) fn reset(&mut self) {
        self.last = NONE;
        self.run = 0;
    }

    /// Takes the next sample; `true` when it trips the test.
    #[inline(always)]
    pub(crate) fn feed(&mut self, x: u8) -> bool {
        if self.last == u16::from(x) {
            self.run += 1;
            self.run >= self.cutoff
        } else {
            self.last = u16::from(x);
            self.run = 1;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_the_cutoff_trips_one_less_does_not() {
        for cutoff in [2, 4, 6, 21] {
            let mut t = RepetitionCount::new(cutoff);
            assert!(!t.feed(1));
            for _ in 1..cutoff - 1 {
                assert!(!t.feed(7));
            }
            // Runs of 7: cutoff − 1 long after the first 7 … (the 1 before it is not part)
            assert!(!t.feed(7), "cutoff {cutoff}: a run of {} must pass", cutoff - 1);
            assert!(t.feed(7), "cutoff {cutoff}: a run of {cutoff} must trip");
        }
    }

    #[test]
    fn a_different_sample_restarts_the_run() {
        let mut t = RepetitionCount::new(3);
        for x in [5, 5, 6, 6, 5, 5, 6, 6] {
            assert!(!t.feed(x));
        }
        assert!(t.feed(6));
        t.reset();
        assert!(!t.feed(6), "a reset forgets the run");
    }
}
