//! The card's public-key engine: its results are soft's (a signature made by the card
//! verifies on soft and the reverse, derived secrets are equal), it offers only what its
//! profile lists, and its own queue answers Busy and unblocks with nothing lost.

use ocf::asym::{AsymKey, Curve, ModpGroup, PrivateKey, PublicKey, SigEncoding};
use ocf::{AsymAlg, DigestAlg, Error, Framework, Key, Op, Request, SessionParams};

const CARD: &str = "sim:qat-like";

fn framework() -> Framework {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    fw
}

/// Runs `op` with `input` on `driver` in a session of `alg` with `key`; the result bytes.
fn run(
    fw: &Framework,
    driver: &str,
    alg: AsymAlg,
    key: AsymKey,
    op: Op,
    input: &[u8],
) -> Result<Vec<u8>, Error> {
    let bits = SessionParams::asymmetric(alg, key.clone()).key_bits();
    let s = fw.new_session_on(driver, &SessionParams::asymmetric(alg, key))?;
    let done = s.run(Request::asymmetric(op, input.to_vec(), alg.max_output_len(bits) + 64));
    done.map(|r| r.result_payload()).map_err(|f| f.into_parts().0)
}

fn verify(
    fw: &Framework,
    driver: &str,
    alg: AsymAlg,
    public: &[u8],
    msg: &[u8],
    sig: &[u8],
) -> Result<(), Error> {
    let s =
        fw.new_session_on(driver, &SessionParams::asymmetric(alg, AsymKey::Public(PublicKey::raw(public))))?;
    s.run(Request::verify(msg, sig)).map(drop).map_err(|f| f.into_parts().0)
}

fn signature_algorithms() -> Vec<(AsymAlg, usize)> {
    let mut v = vec![(AsymAlg::Ed25519, 256)];
    for curve in [Curve::P256, Curve::P384] {
        for encoding in [SigEncoding::Der, SigEncoding::P1363] {
            v.push((AsymAlg::Ecdsa { curve, hash: DigestAlg::Sha256, encoding }, curve.bits()));
        }
    }
    for bits in [2048, 3072, 4096] {
        v.push((AsymAlg::RsaPkcs1 { hash: DigestAlg::Sha256 }, bits));
        v.push((AsymAlg::RsaPss { hash: DigestAlg::Sha384 }, bits));
    }
    v
}

/// Whether two signatures made with one key may differ (randomized schemes).
fn randomized(alg: AsymAlg) -> bool {
    matches!(alg, AsymAlg::Ecdsa { .. } | AsymAlg::RsaPss { .. })
}

#[test]
fn signatures_made_on_the_card_verify_on_soft_and_the_reverse() {
    let fw = framework();
    ocf_sim::register(&fw, "qat-like").unwrap();
    let msg = b"the card signs what soft verifies";
    for (alg, bits) in signature_algorithms() {
        let key = fw.generate_key(alg, bits).unwrap();
        let private = || AsymKey::Private(key.clone());
        let public = run(&fw, CARD, alg, private(), Op::PublicKey, &[]).unwrap();
        assert_eq!(
            public,
            run(&fw, "soft", alg, private(), Op::PublicKey, &[]).unwrap(),
            "{alg}/{bits}: public key"
        );
        let by_card = run(&fw, CARD, alg, private(), Op::Sign, msg).unwrap();
        let by_soft = run(&fw, "soft", alg, private(), Op::Sign, msg).unwrap();
        if !randomized(alg) {
            assert_eq!(by_card, by_soft, "{alg}/{bits}: a deterministic scheme signs alike");
        }
        verify(&fw, "soft", alg, &public, msg, &by_card)
            .unwrap_or_else(|e| panic!("{alg}/{bits}: soft: {e}"));
        verify(&fw, CARD, alg, &public, msg, &by_soft).unwrap_or_else(|e| panic!("{alg}/{bits}: card: {e}"));
        // And the card refuses what soft refuses.
        let mut bad = by_soft.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(
            matches!(verify(&fw, CARD, alg, &public, msg, &bad), Err(Error::BadSignature)),
            "{alg}/{bits}"
        );
        assert!(
            matches!(verify(&fw, CARD, alg, &public, b"another message", &by_soft), Err(Error::BadSignature)),
            "{alg}/{bits}"
        );
    }
}

#[test]
fn the_card_derives_what_soft_derives() {
    let fw = framework();
    let card = ocf_sim::register_driver(&fw, "qat-like").unwrap();
    let algs = [
        AsymAlg::X25519,
        AsymAlg::Ecdh(Curve::P256),
        AsymAlg::Ecdh(Curve::P384),
        AsymAlg::Ffdh(ModpGroup::Modp2048),
        AsymAlg::Ffdh(ModpGroup::Modp3072),
    ];
    for alg in algs {
        let (a, b) = (fw.generate_key(alg, 0).unwrap(), fw.generate_key(alg, 0).unwrap());
        let public_of =
            |k: &PrivateKey| run(&fw, "soft", alg, AsymKey::Private(k.clone()), Op::PublicKey, &[]).unwrap();
        let (pub_a, pub_b) = (public_of(&a), public_of(&b));
        assert_eq!(
            run(&fw, CARD, alg, AsymKey::Private(a.clone()), Op::PublicKey, &[]).unwrap(),
            pub_a,
            "{alg}"
        );
        let on_card = run(&fw, CARD, alg, AsymKey::Private(a.clone()), Op::Derive, &pub_b).unwrap();
        let on_soft = run(&fw, "soft", alg, AsymKey::Private(a.clone()), Op::Derive, &pub_b).unwrap();
        let other_side = run(&fw, CARD, alg, AsymKey::Private(b.clone()), Op::Derive, &pub_a).unwrap();
        assert!(!on_card.is_empty());
        assert_eq!(on_card, on_soft, "{alg}: card and soft");
        assert_eq!(on_card, other_side, "{alg}: both sides");
    }
    // A bad peer value fails on the card as on soft, with the same error.
    let key = fw.generate_key(AsymAlg::Ecdh(Curve::P256), 0).unwrap();
    let mut off_curve = vec![4u8; 65];
    off_curve[64] = 5;
    let e = run(&fw, CARD, AsymAlg::Ecdh(Curve::P256), AsymKey::Private(key.clone()), Op::Derive, &off_curve);
    let s = run(&fw, "soft", AsymAlg::Ecdh(Curve::P256), AsymKey::Private(key), Op::Derive, &off_curve);
    assert!(matches!(e, Err(Error::InvalidPoint)), "{e:?}");
    assert_eq!(format!("{e:?}"), format!("{s:?}"));
    let pk = card.stats().pk.unwrap();
    assert_eq!(pk.completed, 5 * 3 + 1, "three requests per algorithm and the bad point: {pk:?}");
    assert_eq!(pk.accepted, pk.completed);
    assert_eq!(card.stats().accepted, 0, "nothing on the cipher engine");
}

#[test]
fn modexp_on_the_card_is_softs_at_every_size() {
    let fw = framework();
    ocf_sim::register(&fw, "qat-like").unwrap();
    for bits in [17usize, 512, 1000, 1024, 2048, 3072, 4096] {
        let bytes = bits.div_ceil(8);
        // An odd modulus with its top bit set, an exponent and a base below it.
        let mut modulus: Vec<u8> = (0..bytes).map(|i| (i * 151 + 7) as u8).collect();
        let top: u8 = if bits % 8 == 0 { 0x80 } else { 1 << (bits % 8 - 1) };
        modulus[0] = top | (modulus[0] & (top - 1));
        *modulus.last_mut().unwrap() |= 1;
        let exponent: Vec<u8> = (0..bytes.min(64)).map(|i| (i * 37 + 3) as u8).collect();
        let base: Vec<u8> = (0..bytes - 1).map(|i| (i * 13 + 1) as u8).collect();
        let key = || AsymKey::ModExp { exponent: Key::new(&exponent), modulus: modulus.clone() };
        let on_card = run(&fw, CARD, AsymAlg::ModExp, key(), Op::ModExp, &base).unwrap();
        let on_soft = run(&fw, "soft", AsymAlg::ModExp, key(), Op::ModExp, &base).unwrap();
        assert_eq!(on_card.len(), bytes, "{bits}");
        assert_eq!(on_card, on_soft, "{bits} bits");
    }
}

#[test]
fn the_card_offers_only_what_its_profile_lists() {
    let fw = framework();
    let bcm = ocf_sim::register_driver(&fw, "bcm5822").unwrap();
    let caps = fw.drivers().into_iter().find(|d| d.name == "sim:bcm5822").unwrap().capabilities;
    assert_eq!(caps.asymmetric, vec![AsymAlg::Ffdh(ModpGroup::Modp2048), AsymAlg::ModExp]);
    assert!(caps.random);
    // No elliptic curves, no RSA, no group 15, no modulus above 2048 bits: refused by name,
    // and a session that does not name a driver goes to soft.
    let ec = fw.generate_key(AsymAlg::Ecdh(Curve::P256), 0).unwrap();
    let ed = fw.generate_key(AsymAlg::Ed25519, 0).unwrap();
    let modp3072 = fw.generate_key(AsymAlg::Ffdh(ModpGroup::Modp3072), 0).unwrap();
    let big = AsymKey::ModExp { exponent: Key::new(&[3]), modulus: vec![0xff; 512] };
    let refused = [
        SessionParams::asymmetric(AsymAlg::Ecdh(Curve::P256), AsymKey::Private(ec)),
        SessionParams::asymmetric(AsymAlg::Ed25519, AsymKey::Private(ed)),
        SessionParams::asymmetric(AsymAlg::Ffdh(ModpGroup::Modp3072), AsymKey::Private(modp3072)),
        SessionParams::asymmetric(AsymAlg::ModExp, big),
        SessionParams::asymmetric(
            AsymAlg::RsaPss { hash: DigestAlg::Sha256 },
            AsymKey::Generate { bits: 2048 },
        ),
    ];
    for params in &refused {
        assert!(fw.new_session_on("sim:bcm5822", params).is_err(), "{:?}", params.mode);
        assert_eq!(fw.new_session(params).unwrap().driver_name(), "soft", "{:?}", params.mode);
    }
    // What it lists it serves, at the era's pace (32 ms for a 2048-bit exponentiation).
    let k = fw.generate_key(AsymAlg::Ffdh(ModpGroup::Modp2048), 0).unwrap();
    let params = SessionParams::asymmetric(AsymAlg::Ffdh(ModpGroup::Modp2048), AsymKey::Private(k));
    assert_eq!(fw.new_session(&params).unwrap().driver_name(), "sim:bcm5822", "hardware first");
    let started = std::time::Instant::now();
    let public = run(&fw, "sim:bcm5822", params_alg(&params), key_of(&params), Op::PublicKey, &[]).unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(32), "the model's time is a lower bound");
    assert_eq!(public, run(&fw, "soft", params_alg(&params), key_of(&params), Op::PublicKey, &[]).unwrap());
    assert_eq!(bcm.stats().pk.unwrap().completed, 1);
    // ML-KEM is on no card; the old Hifn parts have no public-key unit at all.
    let fw2 = framework();
    ocf_sim::register(&fw2, "hifn7951").unwrap();
    let x = fw2.generate_key(AsymAlg::X25519, 0).unwrap();
    let p = SessionParams::asymmetric(AsymAlg::X25519, AsymKey::Private(x));
    assert!(fw2.new_session_on("sim:hifn7951", &p).is_err());
    assert!(fw2.new_session_on("sim:hifn7951", &SessionParams::random()).is_err());
    let mlkem = fw.generate_key(AsymAlg::MlKem768, 0).unwrap();
    ocf_sim::register(&fw, "qat-like").unwrap();
    let p = SessionParams::asymmetric(AsymAlg::MlKem768, AsymKey::Private(mlkem));
    assert!(fw.new_session_on(CARD, &p).is_err());
}

fn params_alg(p: &SessionParams) -> AsymAlg {
    match &p.mode {
        ocf::Mode::Asymmetric { alg, .. } => *alg,
        _ => unreachable!(),
    }
}

fn key_of(p: &SessionParams) -> AsymKey {
    match &p.mode {
        ocf::Mode::Asymmetric { key, .. } => key.clone(),
        _ => unreachable!(),
    }
}

#[test]
fn a_full_pk_queue_answers_busy_and_unblocks_with_nothing_lost() {
    let fw = framework();
    // A queue of 2 and 200 µs per X25519: eight threads keep it full.
    let card = ocf_sim::register_driver(&fw, "qat-like,pk_ring=2,x25519=200us").unwrap();
    let name = card_name(&fw);
    let alg = AsymAlg::X25519;
    let (a, b) = (fw.generate_key(alg, 0).unwrap(), fw.generate_key(alg, 0).unwrap());
    let pub_b = run(&fw, "soft", alg, AsymKey::Private(b), Op::PublicKey, &[]).unwrap();
    let want = run(&fw, "soft", alg, AsymKey::Private(a.clone()), Op::Derive, &pub_b).unwrap();
    let s = fw.new_session_on(&name, &SessionParams::asymmetric(alg, AsymKey::Private(a))).unwrap();
    const THREADS: usize = 8;
    const EACH: usize = 25;
    std::thread::scope(|scope| {
        for _ in 0..THREADS {
            let (s, pub_b, want) = (s.clone(), &pub_b, &want);
            scope.spawn(move || {
                for _ in 0..EACH {
                    let done = s.run(Request::asymmetric(Op::Derive, pub_b.clone(), 64)).unwrap();
                    assert_eq!(&done.result_payload(), want);
                }
            });
        }
    });
    let pk = card.stats().pk.unwrap();
    assert_eq!(pk.completed, (THREADS * EACH) as u64, "{pk:?}");
    assert_eq!(pk.accepted, pk.completed);
    assert_eq!(pk.ring_high_water, 2);
    assert!(pk.busy > 0, "a queue of 2 under 8 threads was full: {pk:?}");
    assert!(pk.unblocks > 0 && pk.unblocks <= pk.busy, "{pk:?}");
    assert_eq!(pk.in_flight, 0);
    assert_eq!(card.stats().busy, 0, "the cipher engine's queue is another");
}

fn card_name(fw: &Framework) -> String {
    fw.drivers().into_iter().map(|d| d.name).find(|n| n.starts_with("sim:")).unwrap()
}
