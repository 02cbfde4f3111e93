//! The driver through the framework: real sources where the machine has them, and
//! injected clean and faulty ones everywhere.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use ocf::{Error, ErrorKind, Framework, Op, Priority, Request, SessionParams};
use ocf_health::{HealthState, NoiseSource, SourceError, Test};
use ocf_hwrng::{HwrngDriver, HwrngError, CLAIM};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// A ChaCha8 stream that, while `fault` says so, gives zeros (1) or repeats one 64-bit
/// word of distinct bytes (2), or cannot be read (3).
struct Faulty {
    rng: ChaCha8Rng,
    fault: Arc<AtomicU8>,
    at: usize,
}

const CLEAN: u8 = 0;
const STUCK: u8 = 1;
const STUCK_WORD: u8 = 2;
const UNREADABLE: u8 = 3;

impl NoiseSource for Faulty {
    fn fill_raw(&mut self, buf: &mut [u8]) -> Result<(), SourceError> {
        match self.fault.load(Ordering::Relaxed) {
            STUCK => buf.fill(0),
            STUCK_WORD => {
                for x in buf.iter_mut() {
                    *x = 0x0123_4567_89AB_CDEFu64.to_le_bytes()[self.at % 8];
                    self.at += 1;
                }
            }
            UNREADABLE => return Err(SourceError { why: "the test source is unplugged" }),
            _ => self.rng.fill_bytes(buf),
        }
        Ok(())
    }
}

fn injected(name: &str) -> (Framework, Arc<HwrngDriver>, Arc<AtomicU8>) {
    let fault = Arc::new(AtomicU8::new(CLEAN));
    let source = Faulty { rng: ChaCha8Rng::seed_from_u64(5), fault: fault.clone(), at: 0 };
    let d = Arc::new(HwrngDriver::from_source(name, Box::new(source), CLAIM).unwrap());
    let fw = Framework::new();
    fw.register(d.clone()).unwrap();
    (fw, d, fault)
}

#[test]
fn the_machines_sources_give_tested_bytes_or_the_driver_says_why_there_are_none() {
    let fw = Framework::new();
    match ocf_hwrng::probe() {
        Ok(kinds) => {
            let drivers = ocf_hwrng::register(&fw).unwrap();
            assert_eq!(drivers.len(), kinds.len());
            for d in drivers {
                let name = ocf::Driver::name(&*d).to_owned();
                let s = fw.new_session_on(&name, &SessionParams::random()).unwrap();
                let a = s.run(Request::random(32)).unwrap().buf.to_vec();
                let b = s.run(Request::random(32)).unwrap().buf.to_vec();
                assert_ne!(a, b, "{name}: two draws differ");
                assert_ne!(a, [0; 32], "{name}");
                let st = d.stats();
                eprintln!("{name}: {st:?}");
                assert_eq!(st.state, HealthState::Healthy, "{name}");
                assert_eq!((st.health.startups, st.health.startup_bytes, st.health.bytes_out), (1, 1024, 64));
                assert_eq!(st.health.samples, 1024 + 64, "{name}: every byte tested");
                assert_eq!(st.health.rct_failures + st.health.apt_failures, 0, "{name}");
            }
        }
        Err(HwrngError::Unavailable(why)) => {
            assert!(why.contains("RDSEED") && why.contains("/dev/hwrng"), "{why}");
            assert_eq!(ocf_hwrng::register(&fw).err(), Some(HwrngError::Unavailable(why)));
            assert!(fw.drivers().is_empty(), "nothing registered");
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn random_sessions_go_to_it_at_hardware_priority_and_only_the_payload_is_written() {
    let (fw, d, _) = injected("hwrng:test");
    assert_eq!(
        fw.choose_driver(&SessionParams::random()).unwrap(),
        ("hwrng:test".to_owned(), Priority::Hardware)
    );
    assert!(fw.new_session(&SessionParams::digest(ocf::DigestAlg::Sha256)).is_err(), "random only");
    let s = fw.new_session(&SessionParams::random()).unwrap();
    let a = s.run(Request::random(64)).unwrap().buf.to_vec();
    let b = s.run(Request::random(64)).unwrap().buf.to_vec();
    assert_ne!(a, b);
    let part = s.run(Request::new(Op::Random, vec![0xEEu8; 64]).with_payload(16..48)).unwrap().buf.to_vec();
    assert_eq!(
        (&part[..16], &part[48..]),
        (&[0xEE; 16][..], &[0xEE; 16][..]),
        "outside the payload untouched"
    );
    assert_ne!(&part[16..48], &[0xEE; 32][..]);
    // A buffer in pieces is filled across them.
    let pieces = Request::new(Op::Random, ocf::Buffer::Segments(vec![vec![0xEE; 24], vec![0xEE; 40]]));
    let done = s.run(pieces).unwrap();
    assert!(matches!(done.buf, ocf::Buffer::Segments(_)));
    let got = done.buf.to_vec();
    assert!(got[..24].iter().any(|&x| x != 0xEE) && got[24..].iter().any(|&x| x != 0xEE), "{got:?}");
    assert_eq!(d.stats().health.bytes_out, 64 + 64 + 32 + 64);
}

fn fails_with(s: &ocf::Session) -> &'static str {
    let f = s.run(Request::new(Op::Random, vec![0xEEu8; 64])).unwrap_err();
    assert_eq!(f.request.buf.to_vec(), [0xEE; 64], "the buffer untouched");
    match f.error() {
        Error::RandomSourceFailed { why } => why,
        e => panic!("{e:?}"),
    }
}

#[test]
fn a_stuck_source_fails_requests_naming_the_test_is_counted_and_recovers_when_it_heals() {
    let (fw, d, fault) = injected("hwrng:faulty");
    let s = fw.new_session(&SessionParams::random()).unwrap();
    s.run(Request::random(64)).unwrap();

    fault.store(STUCK, Ordering::Relaxed);
    let why = fails_with(&s);
    assert!(why.contains("repetition count test failed"), "{why}");
    assert_eq!(d.stats().state, HealthState::Failed(Test::RepetitionCount));
    let why = fails_with(&s);
    assert!(why.contains("start-up test failed on the repetition count"), "{why}");

    fault.store(CLEAN, Ordering::Relaxed);
    let back = s.run(Request::random(64)).unwrap().buf.to_vec();
    assert_ne!(back, [0; 64]);
    let st = d.stats();
    assert_eq!(st.state, HealthState::Healthy);
    assert_eq!((st.health.startups, st.health.startup_failures, st.health.rct_failures), (2, 1, 2));
    assert_eq!((st.health.bytes_out, st.health.bytes_discarded), (128, 64));
    let errors = fw.driver_stats("hwrng:faulty").unwrap().errors;
    assert_eq!(errors.get(ErrorKind::RandomSourceFailed), 2, "the framework counts them too");
}

#[test]
fn a_source_stuck_on_one_word_trips_the_adaptive_proportion_test() {
    let (fw, d, fault) = injected("hwrng:word");
    let s = fw.new_session(&SessionParams::random()).unwrap();
    s.run(Request::random(16)).unwrap();
    fault.store(STUCK_WORD, Ordering::Relaxed);
    // 8 distinct bytes repeating: no run for the RCT; the APT sees 128 of each per
    // 1024-byte window (cutoff 105 at H = 4) once a window opens on the stuck word.
    let why = (0..40).find_map(|_| s.run(Request::random(64)).err()).map(|f| match f.error() {
        Error::RandomSourceFailed { why } => *why,
        e => panic!("{e:?}"),
    });
    let why = why.expect("tripped within 40 × 64 bytes");
    assert!(why.contains("adaptive proportion test failed"), "{why}");
    assert_eq!(d.stats().health.apt_failures, 1);
    fault.store(CLEAN, Ordering::Relaxed);
    s.run(Request::random(16)).unwrap();
}

#[test]
fn a_source_that_cannot_be_read_fails_requests_with_its_reason() {
    let (fw, d, fault) = injected("hwrng:unplugged");
    let s = fw.new_session(&SessionParams::random()).unwrap();
    fault.store(UNREADABLE, Ordering::Relaxed);
    assert_eq!(fails_with(&s), "the test source is unplugged");
    assert_eq!(d.stats().health.source_errors, 1);
    fault.store(CLEAN, Ordering::Relaxed);
    s.run(Request::random(16)).unwrap();
}

#[test]
fn an_impossible_claim_is_refused() {
    let unused = Faulty { rng: ChaCha8Rng::seed_from_u64(0), fault: Arc::default(), at: 0 };
    let e = HwrngDriver::from_source("x", Box::new(unused), ocf_health::Claim::bytes(9.0)).err().unwrap();
    assert!(e.to_string().contains("exceeds the sample's width"), "{e}");
}
