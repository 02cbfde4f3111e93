//! ocf's routing with simulated cards beside the CPU: multi-part messages stay on the
//! driver of their first part, identical cards share the work, and a card that starts
//! failing is routed around with every request still done (ocf's own routing tests, with
//! drivers of known cost, are `ocf/tests/routing.rs`).

use ocf::{CipherAlg, Config, DigestAlg, Framework, Op, Part, Policy, Request, SessionParams};

fn framework(policy: Policy) -> Framework {
    let fw = Framework::with_config(Config { policy, ..Config::default() });
    ocf_soft::register(&fw).unwrap();
    fw
}

/// SHA-256 of `data` sent as parts of `piece` bytes through `s`.
fn digest_in_parts(s: &ocf::Session, data: &[u8], piece: usize) -> Vec<u8> {
    let pieces: Vec<&[u8]> = data.chunks(piece).collect();
    let mut req = Request::new(Op::ComputeDigest, Vec::new());
    for (i, p) in pieces.iter().enumerate() {
        req.part = match (i == 0, i == pieces.len() - 1) {
            (true, true) => Part::Whole,
            (true, false) => Part::First,
            (false, false) => Part::Middle,
            (false, true) => Part::Last,
        };
        req.buf = p.to_vec().into();
        req.payload = None;
        req = s.run(req).unwrap();
    }
    req.tag().to_vec()
}

#[test]
fn every_part_of_a_message_goes_where_its_first_part_went() {
    // Round-robin sends each message's first part to the other driver than the last
    // message's: if a later part followed the policy instead, the driver would get a part
    // without its state for the message, and the digest would fail or be wrong.
    let fw = framework(Policy::RoundRobin);
    ocf_sim::register(&fw, "ring=8,setup=1us,rate=10GB/s").unwrap();
    let s = fw.new_session(&SessionParams::digest(DigestAlg::Sha256).multipart()).unwrap();
    assert_eq!(s.drivers().len(), 2, "a multi-part session is routed per message");
    let reference = fw.new_session_on("soft", &SessionParams::digest(DigestAlg::Sha256)).unwrap();
    for m in 0..40usize {
        let data: Vec<u8> = (0..1000 + m * 37).map(|i| (i * 7 + m) as u8).collect();
        let want = reference.run(Request::new(Op::ComputeDigest, data.clone())).unwrap().tag().to_vec();
        assert_eq!(digest_in_parts(&s, &data, 100 + m), want, "message {m}");
    }
    let r = fw.routing();
    for d in &r.drivers {
        assert!(d.routed_total() > 100, "both drivers took messages: {r:?}");
    }
    assert_eq!(fw.stats().total_errors().total(), 0);
}

#[test]
fn two_identical_cards_share_a_card_bound_load() {
    let fw = Framework::with_config(Config { policy: Policy::CostModel, ..Config::default() });
    let a = ocf_sim::register(&fw, "hifn7951").unwrap();
    let b = ocf_sim::register(&fw, "hifn7951").unwrap();
    assert_eq!((a.as_str(), b.as_str()), ("sim:hifn7951", "sim:hifn7951#2"));
    let key =
        *b"\x01\x23\x45\x67\x89\xab\xcd\xef\x23\x45\x67\x89\xab\xcd\xef\x01\x45\x67\x89\xab\xcd\xef\x01\x23";
    let s = fw.new_session(&SessionParams::cipher(CipherAlg::TdesCbc, &key)).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..8 {
            let s = s.clone();
            scope.spawn(move || {
                for _ in 0..40 {
                    s.run(Request::new(Op::Encrypt, vec![3; 1024]).with_iv(&[1; 8])).unwrap();
                }
            });
        }
    });
    let r = fw.routing();
    let (na, nb) = (r.drivers[0].routed_total(), r.drivers[1].routed_total());
    assert_eq!(na + nb, 320);
    assert!(na.min(nb) * 10 >= 320 * 3, "{a} {na}, {b} {nb}");
}

#[test]
fn a_card_that_starts_failing_is_routed_around_and_nothing_is_lost() {
    // Round-robin, so that the card gets half the requests until it fails (the cost model
    // would leave it all but idle: one thread's requests are faster on `soft`).
    let fw = framework(Policy::RoundRobin);
    let card = ocf_sim::register_driver(&fw, "ring=64,setup=1us,rate=100GB/s").unwrap();
    let key = [7u8; 16];
    let s = fw.new_session(&SessionParams::aead(CipherAlg::AesGcm, &key)).unwrap();
    let reference = fw.new_session_on("soft", &SessionParams::aead(CipherAlg::AesGcm, &key)).unwrap();
    let check = |n: usize| {
        for i in 0..n {
            let data = vec![i as u8; 4096];
            let nonce = [(i % 251) as u8; 12];
            let got = s.run(Request::new(Op::Encrypt, data.clone()).with_iv(&nonce)).unwrap();
            let want = reference.run(Request::new(Op::Encrypt, data).with_iv(&nonce)).unwrap();
            assert_eq!((got.buf.to_vec(), got.tag().to_vec()), (want.buf.to_vec(), want.tag().to_vec()));
        }
    };
    check(300);
    card.fail(true);
    check(300); // every request done right, though the card fails what it gets
    let failed = card.stats().injected_failures;
    assert!(failed >= 1, "the card got requests while failing: {:?}", card.stats());
    let card_name = ocf::Driver::name(&*card).to_owned();
    let st = fw.driver_stats(&card_name).unwrap();
    assert_eq!(st.errors.get(ocf::ErrorKind::DriverFailure), failed, "each fault counted at the card");
    // After a fault the card is tried again on one decision in 128 (and fails again).
    assert!(failed <= 40, "after the first fault the card is left alone but for retries: {failed}");
    let r = fw.routing();
    let skipped = r.drivers.iter().find(|d| d.driver == card_name).unwrap().skipped_unhealthy;
    assert!(skipped > 50, "{r:?}");
    // It recovers.
    card.fail(false);
    let before = card.stats().completed;
    check(300);
    assert!(
        card.stats().completed >= before + 60,
        "a recovered card takes its share again: {:?} {:?}",
        card.stats(),
        fw.routing()
    );
}

#[test]
fn a_card_can_run_on_a_cpu_of_its_own() {
    let fw = framework(Policy::Priority);
    let name = ocf_sim::register(&fw, "ring=4,setup=1us,rate=1GB/s,cpu=0").unwrap();
    let s = fw.new_session_on(&name, &SessionParams::digest(DigestAlg::Sha256)).unwrap();
    let done = s.run(Request::new(Op::ComputeDigest, b"abc".to_vec())).unwrap();
    // FIPS 180-2, appendix B.1.
    assert_eq!(done.tag()[..4], [0xba, 0x78, 0x16, 0xbf]);
    assert_eq!(ocf_sim::SimProfile::parse("hifn7951,cpu=1").unwrap().cpu(), Some(1));
    let e = ocf_sim::register(&fw, "hifn7951,cpu=1023").unwrap_err().to_string();
    assert!(e.contains("cpu=1023"), "a CPU the machine does not have is refused, named: {e}");
    let e = ocf_sim::SimProfile::parse("hifn7951,cpu=4096").unwrap_err().to_string();
    assert!(e.contains("cpu=4096"), "{e}");
}
