//! Sequences that must trip each test at exactly its cutoff and sequences that must not;
//! stuck and biased sources; the start-up test and the way back after a failure.

mod common;

use std::sync::atomic::Ordering;

use common::{clean, counting, switchable, FnSource};
use ocf_health::{Claim, Failure, HealthState, HealthTests, NoiseSource, SourceError, Test, TestedSource};
use rand_core::RngCore;

/// Tests for `claim` that have passed a start-up over clean counting bytes (1024 samples:
/// exactly one adaptive proportion window, so the next sample opens a window).
fn started(claim: Claim) -> HealthTests {
    let mut t = HealthTests::new(claim).unwrap();
    t.startup(&counting(t.startup_bytes())).unwrap();
    assert_eq!(t.state(), HealthState::Healthy);
    t
}

#[test]
fn a_run_of_c_equal_samples_trips_the_repetition_count_test_c_minus_one_does_not() {
    for h in [1.0, 2.0, 4.0, 6.0, 8.0] {
        let mut t = started(Claim::bytes(h));
        let c = t.cutoffs().rct as usize;
        // The start-up ended on 255; a run of 0x10 begins.
        assert_eq!(t.test(&vec![0x10; c - 1]), Ok(()), "H = {h}: a run of C − 1 = {} passes", c - 1);
        assert_eq!(t.test(&[0x10]), Err(Failure::RepetitionCount { startup: false }), "H = {h}: C trips");
        assert_eq!(t.state(), HealthState::Failed(Test::RepetitionCount));
        let s = t.stats();
        assert_eq!((s.rct_failures, s.apt_failures, s.bytes_discarded), (1, 0, 1), "H = {h}");
        assert_eq!(s.bytes_out, c as u64 - 1);
        // Out: nothing passes until a start-up does.
        assert_eq!(t.test(&[1, 2, 3]), Err(Failure::Out(Test::RepetitionCount)));
        assert_eq!(t.stats().bytes_discarded, 4);
    }
}

/// One adaptive proportion window: `a` first, `occurrences` times in all, in runs of at
/// most `run` (kept below the repetition count cutoff) separated by other values.
fn apt_window(a: u8, occurrences: u32, run: u32, window: u32) -> Vec<u8> {
    let mut w = Vec::with_capacity(window as usize);
    let mut placed = 0;
    let mut filler = 0u8;
    while w.len() < window as usize {
        if placed < occurrences {
            for _ in 0..run.min(occurrences - placed) {
                w.push(a);
                placed += 1;
            }
        }
        filler = filler.wrapping_add(1);
        if filler == a {
            filler = filler.wrapping_add(1);
        }
        w.push(filler);
    }
    assert_eq!(placed, occurrences, "the window holds them all");
    w.truncate(window as usize);
    w
}

#[test]
fn c_occurrences_of_a_windows_first_sample_trip_the_adaptive_proportion_test_c_minus_one_do_not() {
    for h in [1.0, 2.0, 4.0, 8.0] {
        let mut t = started(Claim::bytes(h));
        let cut = t.cutoffs();
        let run = cut.rct - 1;
        assert_eq!(t.test(&apt_window(0xAA, cut.apt - 1, run, cut.window)), Ok(()), "H = {h}: C − 1 pass");
        // The next window: everything before its C-th 0xAA passes, the C-th trips.
        let w = apt_window(0xAA, cut.apt, run, cut.window);
        let at = w.iter().enumerate().filter(|(_, &x)| x == 0xAA).nth(cut.apt as usize - 1).unwrap().0;
        assert_eq!(t.test(&w[..at]), Ok(()), "H = {h}");
        assert_eq!(t.test(&w[at..]), Err(Failure::AdaptiveProportion { startup: false }), "H = {h}");
        assert_eq!(t.state(), HealthState::Failed(Test::AdaptiveProportion));
        let s = t.stats();
        assert_eq!((s.rct_failures, s.apt_failures), (0, 1), "H = {h}");
        assert_eq!(s.bytes_discarded, (w.len() - at) as u64);
    }
}

#[test]
fn a_stuck_source_fails_its_start_up_and_gives_nothing() {
    let mut src = TestedSource::new(
        FnSource(|b: &mut [u8]| {
            b.fill(0x5A);
            Ok(())
        }),
        Claim::bytes(8.0),
    )
    .unwrap();
    let mut out = [0xEEu8; 32];
    assert_eq!(src.fill(&mut out), Err(Failure::RepetitionCount { startup: true }));
    assert_eq!(out, [0xEE; 32], "untouched");
    let s = src.stats();
    assert_eq!((s.startup_failures, s.rct_failures, s.startups, s.bytes_out), (1, 1, 0, 0));
    assert_eq!(src.state(), HealthState::Failed(Test::RepetitionCount));
}

#[test]
fn a_register_stuck_on_one_word_of_distinct_bytes_trips_the_adaptive_proportion_test() {
    // A 64-bit source that repeats one word: no byte repeats in a row, so only the
    // adaptive proportion test can see it (each value 128 times per 1024-sample window).
    for h in [4.0, 8.0] {
        let word = 0x0123_4567_89AB_CDEFu64.to_le_bytes();
        let mut i = 0;
        let stuck = FnSource(move |b: &mut [u8]| {
            for x in b.iter_mut() {
                *x = word[i % 8];
                i += 1;
            }
            Ok(())
        });
        let mut src = TestedSource::new(stuck, Claim::bytes(h)).unwrap();
        assert_eq!(src.fill(&mut [0; 16]), Err(Failure::AdaptiveProportion { startup: true }), "H = {h}");
    }
}

#[test]
fn a_biased_source_trips() {
    // Every other byte zero (and the others never zero): windows open on a zero, which
    // then fills half of each window; no two zeros touch, so the repetition count test
    // cannot see it.
    let mut rng = clean(7);
    let mut i = 0u64;
    let half_zero = FnSource(move |b: &mut [u8]| {
        for x in b.iter_mut() {
            *x = if i % 2 == 0 { 0 } else { (rng.0.next_u32() % 255 + 1) as u8 };
            i += 1;
        }
        Ok(())
    });
    let mut src = TestedSource::new(half_zero, Claim::bytes(8.0)).unwrap();
    assert_eq!(src.fill(&mut [0; 16]), Err(Failure::AdaptiveProportion { startup: true }));

    // Random bias: zero with probability 1/4 (min-entropy 2 bits, claimed 8). Either test
    // may see it first: each 1024-sample window opens on a zero a quarter of the time
    // (then the APT trips), and holds about three runs of four zeros (each trips the RCT),
    // so 64 windows pass with probability under (3/4 · e^-3)^64.
    let mut rng = clean(8);
    let quarter_zero = FnSource(move |b: &mut [u8]| {
        for x in b.iter_mut() {
            let r = rng.0.next_u32();
            *x = if r % 4 == 0 { 0 } else { (r >> 8) as u8 };
        }
        Ok(())
    });
    let mut src = TestedSource::new(quarter_zero, Claim::bytes(8.0)).unwrap();
    let e = (0..64).find_map(|_| src.fill(&mut [0; 1024]).err()).expect("a 2-bit source claiming 8 trips");
    assert!(e.test().is_some(), "{e}");
    assert_eq!(src.stats().rct_failures + src.stats().apt_failures, 1);
}

#[test]
fn the_start_up_test_holds_its_samples_back() {
    let mut src = TestedSource::new(clean(42), Claim::bytes(8.0)).unwrap();
    assert_eq!(src.state(), HealthState::Starting);
    let mut out = [0u8; 64];
    src.fill(&mut out).unwrap();
    let mut stream = vec![0u8; 1024 + 64];
    clean(42).0.fill_bytes(&mut stream);
    assert_eq!(out[..], stream[1024..], "the first 1024 raw bytes were tested, not given");
    let s = src.stats();
    assert_eq!((s.startups, s.startup_bytes, s.bytes_out, s.samples), (1, 1024, 64, 1088));
    assert_eq!(src.state(), HealthState::Healthy);
}

#[test]
fn a_failed_source_is_out_until_it_passes_a_start_up_test_again() {
    let (stuck, source) = switchable(3);
    let mut src = TestedSource::new(source, Claim::bytes(8.0)).unwrap();
    let mut out = [0u8; 256];
    src.fill(&mut out).unwrap();
    assert_eq!(src.state(), HealthState::Healthy);

    stuck.store(true, Ordering::Relaxed);
    let mut out = [0xEEu8; 256];
    assert_eq!(src.fill(&mut out), Err(Failure::RepetitionCount { startup: false }));
    assert_eq!(out, [0xEE; 256], "untouched");
    // Still stuck: the next request runs a start-up test, which fails.
    assert_eq!(src.fill(&mut out), Err(Failure::RepetitionCount { startup: true }));
    assert_eq!(out, [0xEE; 256]);

    stuck.store(false, Ordering::Relaxed);
    src.fill(&mut out).unwrap();
    assert_ne!(out, [0xEE; 256]);
    assert_eq!(src.state(), HealthState::Healthy);
    let s = src.stats();
    assert_eq!((s.startups, s.startup_failures, s.rct_failures, s.apt_failures), (2, 1, 2, 0));
    assert_eq!((s.bytes_out, s.bytes_discarded, s.startup_bytes), (512, 256, 3 * 1024));
}

#[test]
fn a_source_that_cannot_be_read_fails_naming_why() {
    let mut src = TestedSource::new(
        FnSource(|_: &mut [u8]| Err(SourceError { why: "the device is gone" })),
        Claim::bytes(8.0),
    )
    .unwrap();
    let mut out = [7u8; 8];
    assert_eq!(src.fill(&mut out), Err(Failure::Source("the device is gone")));
    assert_eq!(src.fill(&mut out).unwrap_err().why(), "the device is gone");
    assert_eq!(out, [7; 8]);
    assert_eq!(src.stats().source_errors, 2);
    assert_eq!(src.state(), HealthState::Starting);
}

#[test]
fn binary_samples_are_the_bits_of_each_byte() {
    // H = 1 per bit: repetition count cutoff 21, window 512, start-up 1024 bits.
    let mut t = HealthTests::new(Claim::bits(1.0)).unwrap();
    assert_eq!(t.startup_bytes(), 128);
    assert_eq!(
        t.startup(&[0; 100]),
        Err(Failure::StartupTooShort { need: 128, got: 100 }),
        "too few samples is an error, not a pass"
    );
    let mut raw = [0u8; 128];
    clean(1).0.fill_bytes(&mut raw);
    t.startup(&raw).unwrap();
    assert_eq!(t.stats().samples, 1024);
    // 0x55 is 01010101: no runs at all, but 0 (or 1) is half of every window: at H = 1
    // (p = 1/2) that is expected, and passes.
    assert_eq!(t.test(&[0x55; 256]), Ok(()));
    // 0xFF, two zero bytes, then 0x0F (00001111): a run of 16 + 4 = 20 zero bits passes;
    // with 0x07 (00000111) it is 21 and trips.
    assert_eq!(t.test(&[0xFF, 0, 0, 0x0F]), Ok(()), "a run of 20 passes");
    assert_eq!(t.test(&[0xFF, 0, 0, 0x07]), Err(Failure::RepetitionCount { startup: false }));
}

#[test]
fn a_boxed_source_is_a_source() {
    let boxed: Box<dyn NoiseSource> = Box::new(clean(9));
    let mut src = TestedSource::new(boxed, Claim::bytes(4.0)).unwrap();
    let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
    src.fill(&mut a).unwrap();
    src.fill(&mut b).unwrap();
    assert_ne!(a, b);
}
