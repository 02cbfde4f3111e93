//! Slot compaction shared by the 16-lane engines (`cbc16`, `des16`): after a kernel call,
//! lanes that ended leave their slot, and the last live slot fills each hole, so that the
//! active slots stay `0..active` (the register count can shrink as lanes end, and a
//! waiting lane takes the first free slot). Why the last one and not every later slot
//! moved down: cbc16's docs (7.3 against 5.3 GB/s, 16 x 64..1500 B).

/// A table of slots whose lanes have blocks left.
pub(crate) trait Slots {
    /// Blocks left in `slot`'s lane.
    fn left(&self, slot: usize) -> usize;
    /// Moves slot `from`'s lane (and its state) into slot `to`.
    fn shift(&mut self, from: usize, to: usize);
}

/// Drops the slots of `0..active` whose lanes ended, moving the last live slot into each
/// hole (one move per hole at most; none when all end together, as 16 equal lengths do);
/// returns the new active count.
pub(crate) fn retire(t: &mut impl Slots, mut active: usize) -> usize {
    let mut i = 0;
    while i < active {
        if t.left(i) > 0 {
            i += 1;
            continue;
        }
        while active > i + 1 && t.left(active - 1) == 0 {
            active -= 1;
        }
        active -= 1;
        if i < active {
            t.shift(active, i);
            i += 1;
        }
    }
    active
}

#[cfg(test)]
mod tests {
    use super::*;

    struct T(Vec<(usize, char)>);

    impl Slots for T {
        fn left(&self, slot: usize) -> usize {
            self.0[slot].0
        }
        fn shift(&mut self, from: usize, to: usize) {
            self.0[to] = self.0[from];
        }
    }

    /// The live slots end up in `0..active`, each once; ended ones are gone.
    #[test]
    fn live_slots_are_kept_and_compacted() {
        for (lefts, want) in [
            (vec![1, 0, 2, 0, 0, 3], "acf"),
            (vec![0, 0, 0], ""),
            (vec![5, 5], "ab"),
            (vec![0, 1], "b"),
            (vec![1, 0], "a"),
        ] {
            let mut t = T(lefts.iter().zip('a'..).map(|(&l, c)| (l, c)).collect());
            let n = t.0.len();
            let active = retire(&mut t, n);
            let mut got: Vec<char> = t.0[..active].iter().map(|s| s.1).collect();
            assert!(t.0[..active].iter().all(|s| s.0 > 0), "{lefts:?}");
            got.sort_unstable();
            assert_eq!(got.iter().collect::<String>(), want, "{lefts:?}");
        }
    }
}
