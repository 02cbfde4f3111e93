//! The anti-replay window and the outbound counter: window edges, sliding, ESN inference
//! across 2^32 boundaries, and every window size against a naive model.

use std::collections::HashSet;
use std::sync::Arc;
use std::thread;

use ipsec_core::replay::{ReplayError, ReplayWindow, SeqCounter, SeqExhausted, DEFAULT_WINDOW, MAX_WINDOW};
use ipsec_core::stats::Drop;

const EPOCH: u64 = 1 << 32;

/// Check, then (the ICV having verified) update, as the inbound path does.
fn accept(w: &mut ReplayWindow, seq_lo: u32) -> Result<u64, ReplayError> {
    let seq = w.check(seq_lo)?;
    w.update(seq)?;
    Ok(seq)
}

fn too_old(seq: u64, top: u64, window: u32) -> Result<u64, ReplayError> {
    Err(ReplayError::TooOld { seq, top, window })
}

fn duplicate(seq: u64) -> Result<u64, ReplayError> {
    Err(ReplayError::Duplicate { seq })
}

#[test]
fn fresh_window() {
    let w = ReplayWindow::new(DEFAULT_WINDOW, false);
    assert_eq!((w.top(), w.size(), w.esn()), (0, 64, false));
    assert_eq!(w.check(1), Ok(1));
    assert_eq!(w.check(u32::MAX), Ok(u64::from(u32::MAX)));
    assert_eq!(w.check(0), Err(ReplayError::ZeroSequence));
}

#[test]
fn window_edges() {
    let mut w = ReplayWindow::new(64, false);
    assert_eq!(accept(&mut w, 200), Ok(200));
    assert_eq!(w.top(), 200);
    // The window is 137..=200: top - size + 1 is the oldest accepted.
    assert_eq!(w.check(137), Ok(137));
    assert_eq!(w.check(136), too_old(136, 200, 64));
    assert_eq!(w.check(10), too_old(10, 200, 64));
    assert_eq!(w.check(200), duplicate(200));
    assert_eq!(accept(&mut w, 137), Ok(137));
    assert_eq!(accept(&mut w, 137), duplicate(137));
    assert_eq!(accept(&mut w, 199), Ok(199));
    assert_eq!(accept(&mut w, 201), Ok(201));
    // The window moved by one: 137 is now exactly top - size, too old rather than a replay.
    assert_eq!(w.check(137), too_old(137, 201, 64));
    assert_eq!(w.check(138), Ok(138));
    assert_eq!(w.check(0), Err(ReplayError::ZeroSequence));
}

#[test]
fn sizes_not_a_multiple_of_64_are_exact() {
    for size in [1u32, 63, 65, 100, 127, 129, 4096] {
        let mut w = ReplayWindow::new(size, false);
        let top = 10_000u32;
        assert_eq!(accept(&mut w, top), Ok(u64::from(top)));
        let oldest = top - size + 1;
        let expected = if size == 1 { duplicate(u64::from(top)) } else { Ok(u64::from(oldest)) };
        assert_eq!(w.check(oldest), expected, "size {size}");
        assert_eq!(w.check(oldest - 1), too_old(u64::from(oldest - 1), u64::from(top), size), "size {size}");
        // Every number in the window is accepted exactly once.
        for seq in oldest..top {
            assert_eq!(accept(&mut w, seq), Ok(u64::from(seq)), "size {size}");
        }
        for seq in oldest..=top {
            assert_eq!(w.check(seq), duplicate(u64::from(seq)), "size {size}");
        }
    }
}

#[test]
fn size_one() {
    let mut w = ReplayWindow::new(1, false);
    assert_eq!(accept(&mut w, 5), Ok(5));
    assert_eq!(accept(&mut w, 5), duplicate(5));
    assert_eq!(accept(&mut w, 4), too_old(4, 5, 1));
    assert_eq!(accept(&mut w, 6), Ok(6));
    assert_eq!(accept(&mut w, 100), Ok(100));
    assert_eq!(accept(&mut w, 99), too_old(99, 100, 1));
}

#[test]
fn jump_beyond_the_window_clears_it() {
    let mut w = ReplayWindow::new(64, false);
    for seq in 1..=100 {
        assert_eq!(accept(&mut w, seq), Ok(u64::from(seq)));
    }
    assert_eq!(accept(&mut w, 1000), Ok(1000));
    assert_eq!(w.check(100), too_old(100, 1000, 64));
    assert_eq!(w.check(936), too_old(936, 1000, 64));
    // 937..=999 were never seen, whatever the ring held for numbers that alias them.
    for seq in 937..1000 {
        assert_eq!(accept(&mut w, seq), Ok(u64::from(seq)));
    }
    for seq in 937..=1000 {
        assert_eq!(accept(&mut w, seq), duplicate(u64::from(seq)));
    }
}

#[test]
fn jump_by_exactly_a_ring_and_by_less_than_the_window() {
    // A 64-packet window's ring has 2 blocks (128 numbers); jumps of 128 land on the
    // same ring slot and must clear it.
    let mut w = ReplayWindow::new(64, false);
    for seq in 1..=127 {
        accept(&mut w, seq).unwrap();
    }
    assert_eq!(accept(&mut w, 255), Ok(255));
    for seq in 192..255 {
        assert_eq!(accept(&mut w, seq), Ok(u64::from(seq)), "{seq}");
    }
    // A jump within the window keeps what it still covers.
    assert_eq!(accept(&mut w, 260), Ok(260));
    for seq in 197..=255 {
        assert_eq!(w.check(seq), duplicate(u64::from(seq)));
    }
    for seq in 256..260 {
        assert_eq!(w.check(seq), Ok(u64::from(seq)));
    }
}

#[test]
fn update_rechecks() {
    let mut w = ReplayWindow::new(64, false);
    accept(&mut w, 10).unwrap();
    // Two copies of packet 11 both pass the check before either's ICV is verified.
    let a = w.check(11).unwrap();
    let b = w.check(11).unwrap();
    assert_eq!(w.update(a), Ok(()));
    assert_eq!(w.update(b), Err(ReplayError::Duplicate { seq: 11 }));
    // And a packet the window moved past while it was being verified.
    let late = w.check(12).unwrap();
    accept(&mut w, 200).unwrap();
    assert_eq!(w.update(late), Err(ReplayError::TooOld { seq: 12, top: 200, window: 64 }));
    assert_eq!(w.update(0), Err(ReplayError::ZeroSequence));
    assert_eq!(w.top(), 200);
}

#[test]
fn check_does_not_change_the_window() {
    let mut w = ReplayWindow::new(64, false);
    accept(&mut w, 50).unwrap();
    // A packet whose ICV fails is checked but never updated: nothing is recorded.
    assert_eq!(w.check(1000), Ok(1000));
    assert_eq!(w.check(40), Ok(40));
    assert_eq!(w.top(), 50);
    assert_eq!(accept(&mut w, 40), Ok(40));
    assert_eq!(w.check(20), Ok(20));
}

#[test]
fn window_zero_accepts_everything_and_tracks_the_top() {
    let mut w = ReplayWindow::new(0, false);
    for _ in 0..3 {
        assert_eq!(accept(&mut w, 7), Ok(7));
    }
    assert_eq!(accept(&mut w, 1000), Ok(1000));
    assert_eq!(accept(&mut w, 1), Ok(1));
    assert_eq!(accept(&mut w, 0), Ok(0));
    assert_eq!(w.top(), 1000);
    assert_eq!(w.size(), 0);
}

#[test]
fn window_zero_with_esn_still_infers_the_high_bits() {
    let mut w = ReplayWindow::new(0, true);
    w.update(EPOCH - 5).unwrap();
    assert_eq!(accept(&mut w, 3), Ok(EPOCH + 3));
    assert_eq!(w.top(), EPOCH + 3);
    // Late packets from before the boundary, replays included, are accepted as such.
    assert_eq!(accept(&mut w, 0xFFFF_FFFA), Ok(EPOCH - 6));
    assert_eq!(accept(&mut w, 0xFFFF_FFFA), Ok(EPOCH - 6));
    assert_eq!(accept(&mut w, 3), Ok(EPOCH + 3));
    // Half the 32-bit space behind the top is late; further is the next epoch.
    assert_eq!(w.check(0x8000_0004), Ok(0x8000_0004));
    assert_eq!(w.check(0x8000_0003), Ok(EPOCH + 0x8000_0003));
    assert_eq!(w.top(), EPOCH + 3);
}

#[test]
fn max_size_and_beyond() {
    let w = ReplayWindow::new(4096, true);
    assert_eq!(w.size(), 4096);
    assert!(std::panic::catch_unwind(|| ReplayWindow::new(MAX_WINDOW + 1, false)).is_err());
}

#[test]
fn esn_first_packets() {
    let mut w = ReplayWindow::new(64, true);
    // The window 0..=0 spans the previous epoch, which does not exist: numbers are ahead.
    assert_eq!(w.check(0), Err(ReplayError::ZeroSequence));
    assert_eq!(w.check(0xFFFF_FFFF), Ok(0xFFFF_FFFF));
    assert_eq!(accept(&mut w, 1), Ok(1));
    assert_eq!(accept(&mut w, 3), Ok(3));
    assert_eq!(accept(&mut w, 2), Ok(2));
    assert_eq!(accept(&mut w, 2), duplicate(2));
    assert_eq!(w.check(0xFFFF_FFF0), Ok(0xFFFF_FFF0));
}

#[test]
fn esn_across_the_boundary() {
    let mut w = ReplayWindow::new(64, true);
    let top = EPOCH - 5;
    w.update(top).unwrap();
    // Case A (the window lies within epoch 0): small low bits are the next epoch.
    assert_eq!(w.check(2), Ok(EPOCH + 2));
    assert_eq!(w.check(0xFFFF_FFFA), Ok(EPOCH - 6));
    assert_eq!(accept(&mut w, 2), Ok(EPOCH + 2));
    assert_eq!(accept(&mut w, 3), Ok(EPOCH + 3));
    assert_eq!(w.top(), EPOCH + 3);
    // Case B (the window spans the boundary): high low bits are late packets of epoch 0.
    assert_eq!(accept(&mut w, 0xFFFF_FFF0), Ok(EPOCH - 16));
    assert_eq!(accept(&mut w, 0xFFFF_FFF0), duplicate(EPOCH - 16));
    assert_eq!(accept(&mut w, 0xFFFF_FFFB), duplicate(EPOCH - 5));
    assert_eq!(accept(&mut w, 0), Ok(EPOCH));
    assert_eq!(accept(&mut w, 0xFFFF_FFFF), Ok(EPOCH - 1));
    assert_eq!(accept(&mut w, 2), duplicate(EPOCH + 2));
    // The oldest in the window is top - 63 = 2^32 - 60; below it the number reads as the
    // far end of the window, ahead in epoch 1, and would fail the ICV.
    assert_eq!(w.check(0xFFFF_FFC4), Ok(EPOCH - 60));
    assert_eq!(w.check(0xFFFF_FFC3), Ok(EPOCH + 0xFFFF_FFC3));
    // Moving the top well into epoch 1 gets back to case A.
    assert_eq!(accept(&mut w, 1000), Ok(EPOCH + 1000));
    assert_eq!(w.check(937), Ok(EPOCH + 937));
    assert_eq!(w.check(936), Ok(2 * EPOCH + 936));
    assert_eq!(w.check(0xFFFF_FFF0), Ok(EPOCH + 0xFFFF_FFF0));
}

#[test]
fn esn_rollover_of_the_high_bits() {
    let mut w = ReplayWindow::new(32, true);
    let mut expected = 5 * EPOCH - 3;
    w.update(expected).unwrap();
    // Consecutive low numbers wrapping to 0 carry into the high bits, epoch after epoch.
    for _ in 0..3 {
        for _ in 0..6 {
            expected += 1;
            assert_eq!(accept(&mut w, expected as u32), Ok(expected));
        }
        assert_eq!(w.top() >> 32, expected >> 32);
        expected += EPOCH - 6;
        w.update(expected).unwrap();
    }
    assert_eq!(w.top(), 8 * EPOCH - 3);
}

#[test]
fn esn_at_the_end_of_the_64_bit_space() {
    let mut w = ReplayWindow::new(64, true);
    w.update(u64::MAX - 10).unwrap();
    assert_eq!(accept(&mut w, u32::MAX), Ok(u64::MAX));
    // Below the window there is no next epoch to be in: the number is too old.
    let seq = (u64::from(u32::MAX) << 32) | 5;
    assert_eq!(w.check(5), too_old(seq, u64::MAX, 64));
    assert_eq!(w.check(u32::MAX - 63), Ok(u64::MAX - 63));
    assert_eq!(w.check(u32::MAX), duplicate(u64::MAX));
}

#[test]
fn errors_say_what_happened() {
    assert_eq!(ReplayError::Duplicate { seq: 5 }.to_string(), "sequence number 5 already seen (replay)");
    assert_eq!(
        ReplayError::TooOld { seq: 10, top: 200, window: 64 }.to_string(),
        "sequence number 10 is older than the window (top 200, window 64)"
    );
    assert!(ReplayError::ZeroSequence.to_string().contains("sequence number 0"));
    assert_eq!(ReplayError::Duplicate { seq: 5 }.drop_reason(), Drop::Replay);
    assert_eq!(ReplayError::TooOld { seq: 1, top: 100, window: 64 }.drop_reason(), Drop::TooOld);
    assert_eq!(ReplayError::ZeroSequence.drop_reason(), Drop::BadSequence);
    assert_eq!(
        SeqExhausted { esn: false }.to_string(),
        "32-bit sequence number space exhausted; the SA must be re-keyed"
    );
    assert!(SeqExhausted { esn: true }.to_string().starts_with("64-bit"));
    assert_eq!(SeqExhausted { esn: true }.drop_reason(), Drop::SeqExhausted);
}

/// xorshift64: deterministic arrivals without dependencies.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The window as RFC 4303 §3.4.3 describes it, with a set of every number accepted.
struct Model {
    size: u32,
    top: u64,
    seen: HashSet<u64>,
}

impl Model {
    fn check(&self, seq: u64) -> Result<(), ReplayError> {
        if self.size == 0 {
            Ok(())
        } else if seq == 0 {
            Err(ReplayError::ZeroSequence)
        } else if seq > self.top {
            Ok(())
        } else if seq + u64::from(self.size) <= self.top {
            Err(ReplayError::TooOld { seq, top: self.top, window: self.size })
        } else if self.seen.contains(&seq) {
            Err(ReplayError::Duplicate { seq })
        } else {
            Ok(())
        }
    }

    fn accept(&mut self, seq: u64) {
        self.seen.insert(seq);
        self.top = self.top.max(seq);
    }

    /// Appendix A.2 stated differently: the number with these low bits among the 2^32
    /// numbers starting at the window's bottom (numbers start at 0: no bottom below it).
    fn infer(&self, seq_lo: u32) -> u64 {
        let w = if self.size == 0 { 1 << 31 } else { u64::from(self.size) };
        let bottom = self.top.saturating_sub(w - 1);
        bottom + u64::from(seq_lo.wrapping_sub(bottom as u32))
    }
}

/// Arrivals around a moving front: mostly in order, some reordered within and beyond the
/// window, some duplicated, some jumps ahead; `start` is the first front.
fn arrivals(size: u32, start: u64, count: usize, seed: u64) -> Vec<u64> {
    let mut rng = Rng(seed);
    let mut front = start;
    let reach = 2 * u64::from(size) + 8;
    let mut out = Vec::with_capacity(count);
    let mut recent: Vec<u64> = Vec::new();
    for _ in 0..count {
        let seq = match rng.below(16) {
            0..=7 => {
                front += 1 + rng.below(3);
                front
            }
            8..=10 => front.saturating_sub(rng.below(reach)),
            11 | 12 if !recent.is_empty() => recent[rng.below(recent.len() as u64) as usize],
            13 => {
                front += u64::from(size) + rng.below(reach);
                front
            }
            _ => front + rng.below(reach),
        };
        out.push(seq);
        recent.push(seq);
        if recent.len() > 32 {
            recent.remove(0);
        }
    }
    out
}

/// Runs arrivals through the window and the model; about one in eight packets "fails its
/// ICV" and is checked but not updated.
fn against_model(size: u32, esn: bool, start: u64, seed: u64) {
    let mut w = ReplayWindow::new(size, esn);
    let mut model = Model { size, top: 0, seen: HashSet::new() };
    if start > 0 {
        w.update(start).unwrap();
        model.accept(start);
    }
    let mut rng = Rng(seed ^ 0x9E37_79B9_7F4A_7C15);
    let (mut accepted, mut refused, mut refused_on_update) = (0, 0, 0);
    for (i, &seq) in arrivals(size, start, 4000, seed).iter().enumerate() {
        let ctx = format!("size {size} esn {esn} arrival {i} seq {seq:#x} top {:#x}", model.top);
        let lo = seq as u32;
        let (full, expected) = if esn {
            let full = model.infer(lo);
            (full, model.check(full).map(|()| full))
        } else {
            (seq, model.check(seq).map(|()| seq))
        };
        assert_eq!(w.check(lo), expected, "check: {ctx}");
        // With ESN a number below the window reads as far ahead: the ICV refuses it.
        if expected.is_err() || full != seq {
            refused += 1;
        }
        let icv_ok = full == seq && rng.below(8) != 0;
        if icv_ok {
            // update() re-checks on its own, whatever check() said.
            let result = w.update(full);
            assert_eq!(result, model.check(full), "update: {ctx}");
            if result.is_ok() {
                model.accept(full);
                accepted += 1;
            } else {
                refused_on_update += 1;
            }
        }
        assert_eq!(w.top(), model.top, "top: {ctx}");
    }
    // The arrivals exercised both outcomes.
    assert!(accepted > 1000, "size {size}: {accepted} accepted");
    if size > 0 {
        assert!(refused > 1000, "size {size}: {refused} refused before the update");
        assert!(refused_on_update > 20, "size {size}: {refused_on_update} refused by update");
    }
}

#[test]
fn every_size_against_the_model() {
    for size in (0..=130).chain([4096]) {
        against_model(size, false, 0, 0x1234_5678 + u64::from(size));
    }
}

#[test]
fn every_size_against_the_model_with_esn_across_epochs() {
    for size in (0..=130).chain([4096]) {
        // Start just below a boundary so that the run crosses it, then from far inside
        // an epoch.
        against_model(size, true, 3 * EPOCH - 3000, 0xABCD_0000 + u64::from(size));
        against_model(size, true, EPOCH + 12345, 0x5555_0000 + u64::from(size));
    }
}

#[test]
fn esn_inference_matches_the_model_at_every_offset() {
    // For windows on both sides of a boundary, every low number near the edges.
    for size in [0u32, 1, 2, 64, 100, 4096] {
        for top in
            [EPOCH - 100, EPOCH - 1, EPOCH, EPOCH + 1, EPOCH + 62, EPOCH + 63, EPOCH + 64, EPOCH + 5000]
        {
            let mut w = ReplayWindow::new(size, true);
            w.update(top).unwrap();
            let model = Model { size, top, seen: HashSet::from([top]) };
            let edges = [0u32, 1, 2, 62, 63, 64, 65, 4095, 4096, 4097, 0x7FFF_FFFF, 0x8000_0000];
            for base in
                [0u32, top as u32, (top as u32).wrapping_sub(size), (top as u32).wrapping_sub(1 << 31)]
            {
                for d in edges {
                    for lo in [base.wrapping_add(d), base.wrapping_sub(d)] {
                        let full = model.infer(lo);
                        assert_eq!(
                            w.check(lo),
                            model.check(full).map(|()| full),
                            "size {size} top {top:#x} lo {lo:#x}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn counter_counts_from_one() {
    let c = SeqCounter::new(false);
    assert_eq!(c.last(), 0);
    assert!(!c.esn());
    for expected in 1..=1000 {
        assert_eq!(c.next(), Ok(expected));
    }
    assert_eq!(c.last(), 1000);
    assert!(!c.exhausted());
}

#[test]
fn counter_is_distinct_across_threads() {
    const PER_THREAD: usize = 20_000;
    let c = Arc::new(SeqCounter::new(false));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let c = Arc::clone(&c);
            thread::spawn(move || {
                let got: Vec<u64> = (0..PER_THREAD).map(|_| c.next().unwrap()).collect();
                // Each thread sees its own numbers increase.
                assert!(got.windows(2).all(|p| p[0] < p[1]));
                got
            })
        })
        .collect();
    let mut all: Vec<u64> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    all.sort_unstable();
    let expected: Vec<u64> = (1..=4 * PER_THREAD as u64).collect();
    assert_eq!(all, expected);
}

#[test]
fn counter_without_esn_stops_at_2_32_minus_1() {
    let max = u64::from(u32::MAX);
    let c = SeqCounter::starting_after(max - 3, false);
    assert_eq!(c.next(), Ok(max - 2));
    assert_eq!(c.next(), Ok(max - 1));
    assert_eq!(c.next(), Ok(max));
    assert!(c.exhausted());
    for _ in 0..3 {
        assert_eq!(c.next(), Err(SeqExhausted { esn: false }));
    }
    assert_eq!(c.last(), max);
}

#[test]
fn counter_exhaustion_under_contention_hands_out_each_number_once() {
    let max = u64::from(u32::MAX);
    let c = Arc::new(SeqCounter::starting_after(max - 5000, false));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let c = Arc::clone(&c);
            thread::spawn(move || {
                let mut got = Vec::new();
                while let Ok(seq) = c.next() {
                    got.push(seq);
                }
                // Once refused, refused for good.
                assert!(c.next().is_err());
                got
            })
        })
        .collect();
    let mut all: Vec<u64> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    all.sort_unstable();
    let expected: Vec<u64> = (max - 4999..=max).collect();
    assert_eq!(all, expected);
}

#[test]
fn counter_with_esn_continues_past_2_32_and_stops_at_u64_max() {
    let c = SeqCounter::starting_after(u64::from(u32::MAX) - 1, true);
    assert!(c.esn());
    assert_eq!(c.next(), Ok(u64::from(u32::MAX)));
    assert_eq!(c.next(), Ok(EPOCH));
    assert_eq!(c.next(), Ok(EPOCH + 1));

    let c = SeqCounter::starting_after(u64::MAX - 2, true);
    assert_eq!(c.next(), Ok(u64::MAX - 1));
    assert_eq!(c.next(), Ok(u64::MAX));
    assert!(c.exhausted());
    assert_eq!(c.next(), Err(SeqExhausted { esn: true }));
    assert_eq!(c.next(), Err(SeqExhausted { esn: true }));
    assert_eq!(c.last(), u64::MAX);
}

/// A window resized (an SA's `-r` changed by a reload, its key kept) keeps what it knew:
/// the top, the numbers seen, and — growing — counts the numbers the old window had left
/// behind as seen, so that none of them can be replayed.
#[test]
fn resizing_keeps_the_state() {
    let mut w = ReplayWindow::new(64, false);
    for s in (1..=1000).filter(|s| s % 3 != 0) {
        accept(&mut w, s).unwrap();
    }
    let grown = w.resized(128);
    assert_eq!((grown.top(), grown.size()), (1000, 128));
    assert_eq!(grown.check(999), Ok(999), "not seen (a multiple of 3), still in the window");
    assert_eq!(grown.check(998), duplicate(998));
    assert_eq!(grown.check(997), duplicate(997));
    assert_eq!(grown.check(936), duplicate(936), "was below the old window: not replayable");
    assert_eq!(grown.check(873), duplicate(873));
    assert_eq!(grown.check(872), too_old(872, 1000, 128));
    let shrunk = w.resized(32);
    assert_eq!(shrunk.check(996), Ok(996));
    assert_eq!(shrunk.check(998), duplicate(998));
    assert_eq!(shrunk.check(968), too_old(968, 1000, 32));
    assert_eq!(shrunk.check(969), Ok(969));
    assert_eq!(shrunk.check(1001), Ok(1001));
    // Off, and back on: everything up to the top counts as seen.
    let off = w.resized(0);
    assert_eq!((off.top(), off.check(5)), (1000, Ok(5)));
    assert_eq!(off.resized(64).check(996), duplicate(996));
    assert_eq!(ReplayWindow::new(64, false).resized(128).check(1), Ok(1), "a fresh window stays fresh");
}

/// The counter that every packet of an SA writes sits on a cache line of its own (see
/// `SeqCounter`): nothing placed before or after it in the SA shares the line.
#[test]
fn the_sequence_counter_has_a_cache_line_of_its_own() {
    assert!(std::mem::align_of::<SeqCounter>() >= 64);
    assert_eq!(std::mem::size_of::<SeqCounter>() % 64, 0);
}
