//! The card's random number generator: every injected fault trips the SP 800-90B health
//! tests within their cutoffs, is counted, fails the requests with `RandomSourceFailed`,
//! and the source comes back once healed; routed over soft too, random requests keep
//! succeeding while the card is out.

use std::sync::Arc;

use ocf::{Config, Driver, Error, Framework, Policy, Request, SessionParams};
use ocf_health::{HealthState, Test};
use ocf_sim::{RngFault, RngStats, SimDriver};

/// A seeded card (reproducible noise, and so a reproducible test).
const SPEC: &str = "qat-like,rng_seed=20260";

fn card(fw: &Framework) -> (Arc<SimDriver>, ocf::Session) {
    let card = ocf_sim::register_driver(fw, SPEC).unwrap();
    let s = fw.new_session_on(card.name(), &SessionParams::random()).unwrap();
    (card, s)
}

fn rng(card: &SimDriver) -> RngStats {
    card.stats().rng.expect("the card has a generator")
}

fn draw(s: &ocf::Session, n: usize) -> Result<Vec<u8>, Error> {
    s.run(Request::random(n)).map(|r| r.result_payload()).map_err(|f| {
        let (e, req) = f.into_parts();
        assert!(req.result_payload().iter().all(|&b| b == 0), "a failed request's buffer is untouched");
        e
    })
}

fn why(e: &Error) -> &'static str {
    match e {
        Error::RandomSourceFailed { why } => why,
        other => panic!("expected RandomSourceFailed, got {other:?}"),
    }
}

#[test]
fn a_clean_source_serves_tested_bytes() {
    let fw = Framework::new();
    let (card, s) = card(&fw);
    let a = draw(&s, 4096).unwrap();
    let b = draw(&s, 4096).unwrap();
    assert_ne!(a, b);
    let zeros = a.iter().filter(|&&x| x == 0).count();
    assert!(zeros < 64, "about 16 of 4096 expected, got {zeros}");
    let st = rng(&card);
    assert_eq!(st.state, HealthState::Healthy);
    assert_eq!((st.health.startups, st.health.rct_failures, st.health.apt_failures), (1, 0, 0));
    assert_eq!(st.health.samples, 1024 + 8192, "the start-up test's samples, then every byte out");
    assert_eq!(st.health.bytes_out, 8192);
    assert_eq!((st.served_requests, st.failed_requests), (2, 0));
    // Random requests queue on the public-key engine.
    assert_eq!(card.stats().pk.unwrap().completed, 2);
}

#[test]
fn a_stuck_source_trips_the_repetition_count_test_at_its_cutoff() {
    let fw = Framework::new();
    let (card, s) = card(&fw);
    draw(&s, 1000).unwrap();
    let before = rng(&card);
    let cutoff = ocf_sim::rng::CLAIM.cutoffs().unwrap().rct;
    card.rng_fault(Some(RngFault::Stuck));
    let e = draw(&s, 1000).unwrap_err();
    assert!(why(&e).contains("repetition count"), "{e}");
    let after = rng(&card);
    let samples = after.health.samples - before.health.samples;
    // The run starts at the first stuck byte (or one before, if the last clean byte had the
    // stuck value): the test trips at its cutoff-th repetition, no later.
    assert!(
        samples <= u64::from(cutoff) && samples >= u64::from(cutoff) - 1,
        "tripped after {samples} samples"
    );
    assert_eq!(after.state, HealthState::Failed(Test::RepetitionCount));
    assert_eq!(after.health.rct_failures, 1);
    assert_eq!(
        after.health.bytes_discarded - before.health.bytes_discarded,
        1000,
        "the whole request's bytes"
    );
    // While stuck, every request runs a start-up test, which fails: out, counted.
    for i in 0..3 {
        let e = draw(&s, 16).unwrap_err();
        assert!(why(&e).contains("start-up"), "{e}");
        let st = rng(&card);
        assert_eq!(st.health.startup_failures, i + 1);
        assert_eq!(st.health.rct_failures, i + 2);
    }
    // Healed: the next request's start-up test passes and bytes flow again.
    card.rng_fault(None);
    let bytes = draw(&s, 64).unwrap();
    assert!(bytes.iter().any(|&b| b != ocf_sim::rng::FAULT_VALUE));
    let st = rng(&card);
    assert_eq!(st.state, HealthState::Healthy);
    assert_eq!(st.health.startups, 2);
    assert_eq!((st.failed_requests, st.served_requests), (4, 2));
    assert!(!st.faulty);
}

#[test]
fn a_biased_source_trips_the_adaptive_proportion_test() {
    // One value with probability 0.13: a share of about 0.134, so a window that opens on it
    // holds about 137 of it, 3 standard deviations above the cutoff of 105 in 1024; about
    // one window in 7.5 opens on it. A run of 6 (the repetition count cutoff) has
    // probability 0.134^6 = 6e-6 per sample: the adaptive proportion test catches this
    // source first (in 96.5% of 400 simulated fault onsets; this seed is one of them).
    let fw = Framework::new();
    let (card, s) = card(&fw);
    draw(&s, 64).unwrap();
    let before = rng(&card);
    let cut = ocf_sim::rng::CLAIM.cutoffs().unwrap();
    card.rng_fault(Some(RngFault::Bias(0.13)));
    let mut served = 0u64;
    let e = loop {
        match draw(&s, 256) {
            Ok(_) => served += 1,
            Err(e) => break e,
        }
        assert!(served < 400, "not caught in 100 KiB");
    };
    assert!(why(&e).contains("adaptive proportion"), "{e}");
    let after = rng(&card);
    assert_eq!(after.state, HealthState::Failed(Test::AdaptiveProportion));
    assert_eq!((after.health.apt_failures, after.health.rct_failures), (1, 0));
    let samples = after.health.samples - before.health.samples;
    // The window that trips is one that opens on the favoured value; one in 7.5 does, so
    // 40 windows pass without one with probability 0.866^39 = 0.4% (the simulation: 1%,
    // median 5,855 samples). Within that window it trips at the cutoff-th occurrence,
    // before the window's end.
    assert!(
        samples <= 40 * u64::from(cut.window),
        "tripped after {samples} samples ({served} requests served)"
    );
    eprintln!("bias 0.13: tripped after {samples} samples, {served} biased requests served before");
    card.rng_fault(None);
    draw(&s, 64).unwrap();
    assert_eq!(rng(&card).state, HealthState::Healthy);
}

#[test]
fn a_slight_bias_below_what_the_cutoff_is_for_does_not_trip() {
    // One value with probability 0.01: a share of about 0.014, about 15 in a window that
    // opens on it, far below the cutoff of 105 (the claim of 4 bits per byte allows a
    // share up to 1/16, and the cutoff sits above that at α = 2^-20). A run of 6 has
    // probability 0.014^5 per sample once started. 4 MiB pass untouched.
    let fw = Framework::new();
    let (card, s) = card(&fw);
    card.rng_fault(Some(RngFault::Bias(0.01)));
    for _ in 0..64 {
        draw(&s, 65536).unwrap();
    }
    let st = rng(&card);
    assert_eq!((st.health.rct_failures, st.health.apt_failures, st.failed_requests), (0, 0, 0));
    assert_eq!(st.health.bytes_out, 64 * 65536);
}

#[test]
fn routed_over_soft_random_requests_keep_succeeding_while_the_card_is_out() {
    // Round-robin, so that the card takes half the requests while it is well.
    let fw = Framework::with_config(Config { policy: Policy::RoundRobin, ..Config::default() });
    ocf_soft::register(&fw).unwrap();
    let card = ocf_sim::register_driver(&fw, SPEC).unwrap();
    let s = fw.new_session(&SessionParams::random()).unwrap();
    assert_eq!(s.drivers().len(), 2, "routed over soft and the card: {:?}", s.drivers());
    for _ in 0..50 {
        assert_eq!(draw(&s, 32).unwrap().len(), 32);
    }
    assert!(rng(&card).served_requests >= 20, "{:?}", rng(&card));
    card.rng_fault(Some(RngFault::Stuck));
    for i in 0..300 {
        let got = draw(&s, 32).unwrap_or_else(|e| panic!("request {i} failed while the card is out: {e}"));
        assert!(got.iter().any(|&b| b != ocf_sim::rng::FAULT_VALUE), "no stuck bytes come out");
    }
    let out = rng(&card);
    assert!(out.failed_requests >= 1, "the card failed the request that found it out: {out:?}");
    assert!(out.health.rct_failures >= out.failed_requests, "each failure is a tripped test: {out:?}");
    let card_name = card.name().to_owned();
    let errors = fw.driver_stats(&card_name).unwrap().errors.get(ocf::ErrorKind::RandomSourceFailed);
    assert_eq!(errors, out.failed_requests, "each failure counted at the card, and redone on soft");
    // Healed: the card is tried again now and then, passes its start-up test, and takes its
    // share again.
    card.rng_fault(None);
    for _ in 0..600 {
        draw(&s, 32).unwrap();
    }
    let back = rng(&card);
    assert_eq!(back.state, HealthState::Healthy);
    assert!(back.served_requests >= out.served_requests + 100, "the card is back: {back:?}");
}
