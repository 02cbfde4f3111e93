//! The card's results are real: what it encrypts the software driver decrypts, and the
//! other way round, and its digests match published known answers.

use ocf::{CipherAlg, DigestAlg, Error, Framework, MacAlg, Op, Request, Session, SessionParams};

const CARD: &str = "ring=8,setup=2us,rate=2GB/s";

/// A framework with both drivers, and a session of each for `params`.
fn sim_and_soft(params: &SessionParams) -> (Framework, Session, Session) {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let sim = ocf_sim::register(&fw, CARD).unwrap();
    let on_sim = fw.new_session_on(&sim, params).unwrap();
    let on_soft = fw.new_session_on(ocf_soft::NAME, params).unwrap();
    assert_eq!(on_sim.driver_name(), "sim:ring=8,setup=2us,rate=2GB/s");
    (fw, on_sim, on_soft)
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn plaintext(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + 3) as u8).collect()
}

/// Encrypts on `enc`, decrypts on `dec`, checks the round trip and returns the ciphertext
/// and tag.
fn round_trip(enc: &Session, dec: &Session, iv: &[u8], aad: &[u8], msg: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let sealed = enc.run(Request::new(Op::Encrypt, msg.to_vec()).with_iv(iv).with_aad(aad)).unwrap();
    let (ct, tag) = (sealed.buf.to_vec(), sealed.tag().to_vec());
    assert_ne!(ct, msg);
    let opened =
        dec.run(Request::new(Op::Decrypt, ct.clone()).with_iv(iv).with_aad(aad).with_tag(&tag)).unwrap();
    assert_eq!(opened.buf.to_vec(), msg);
    (ct, tag)
}

#[test]
fn aes_128_gcm_across_drivers() {
    let params = SessionParams::aead(CipherAlg::AesGcm, &[0x42; 16]);
    let (_fw, sim, soft) = sim_and_soft(&params);
    let (iv, aad, msg) = ([0x24; 12], b"header", plaintext(1000));
    let a = round_trip(&sim, &soft, &iv, aad, &msg);
    let b = round_trip(&soft, &sim, &iv, aad, &msg);
    assert_eq!(a, b, "both drivers produce the same ciphertext and tag");

    // A forged tag is refused by the card.
    let mut tag = a.1.clone();
    tag[0] ^= 1;
    let failed = sim
        .run(Request::new(Op::Decrypt, a.0.clone()).with_iv(&iv).with_aad(aad).with_tag(&tag))
        .unwrap_err();
    assert_eq!(failed.error(), &Error::AuthFailed);
    assert_eq!(sim.stats().errors.get(ocf::ErrorKind::AuthFailed), 1);
}

#[test]
fn aes_128_gcm_known_answer() {
    // McGrew and Viega, "The Galois/Counter Mode of Operation (GCM)", Test Case 2:
    // K = 0^128, IV = 0^96, P = 0^128.
    let params = SessionParams::aead(CipherAlg::AesGcm, &[0; 16]);
    let (_fw, sim, _soft) = sim_and_soft(&params);
    let sealed = sim.run(Request::new(Op::Encrypt, vec![0; 16]).with_iv(&[0; 12])).unwrap();
    assert_eq!(sealed.buf.to_vec(), hex("0388dace60b6a392f328c2b971b2fe78"));
    assert_eq!(sealed.tag(), hex("ab6e47d42cec13bdf53a67b21257bddf"));
}

#[test]
fn aes_128_cbc_hmac_sha1_across_drivers() {
    let params = SessionParams::cipher_then_mac(
        CipherAlg::AesCbc,
        &[0x11; 16],
        MacAlg::Hmac(DigestAlg::Sha1),
        &[0x22; 20],
    )
    .with_tag_len(12);
    let (_fw, sim, soft) = sim_and_soft(&params);
    let (iv, aad, msg) = ([0x33; 16], b"spi+seq!", plaintext(1024));
    let a = round_trip(&sim, &soft, &iv, aad, &msg);
    let b = round_trip(&soft, &sim, &iv, aad, &msg);
    assert_eq!(a, b);
    assert_eq!(a.1.len(), 12, "HMAC-SHA1-96");

    let mut ct = a.0.clone();
    ct[5] ^= 0x80;
    let failed =
        sim.run(Request::new(Op::Decrypt, ct).with_iv(&iv).with_aad(aad).with_tag(&a.1)).unwrap_err();
    assert_eq!(failed.error(), &Error::AuthFailed);
}

#[test]
fn sha1_known_answers() {
    // FIPS 180-2, Appendix A (also RFC 3174, section 7.3, TEST1 and TEST2).
    let (_fw, sim, soft) = sim_and_soft(&SessionParams::digest(DigestAlg::Sha1));
    for (msg, digest) in [
        (&b"abc"[..], "a9993e364706816aba3e25717850c26c9cd0d89d"),
        (
            &b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"[..],
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
        ),
    ] {
        let done = sim.run(Request::new(Op::ComputeDigest, msg.to_vec())).unwrap();
        assert_eq!(done.tag(), hex(digest));
        let checked = soft.run(Request::new(Op::VerifyDigest, msg.to_vec()).with_tag(done.tag())).unwrap();
        assert_eq!(checked.buf.to_vec(), msg);
    }
    let wrong = sim.run(
        Request::new(Op::VerifyDigest, b"abd".to_vec())
            .with_tag(&hex("a9993e364706816aba3e25717850c26c9cd0d89d")),
    );
    assert_eq!(wrong.unwrap_err().error(), &Error::AuthFailed);
}

#[test]
fn the_card_wins_automatic_selection() {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let name = ocf_sim::register(&fw, "hifn7951").unwrap();
    let (chosen, priority) = fw.choose_driver(&SessionParams::digest(DigestAlg::Sha1)).unwrap();
    assert_eq!((chosen, priority), (name, ocf::Priority::Hardware));
}

#[test]
fn a_faulty_card_corrupts_every_nth_result_without_an_error() {
    // corrupt=3: results 3, 6, 9, … have one byte flipped; the card reports success.
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let sim = ocf_sim::register(&fw, "ring=8,setup=0ns,rate=10GB/s,corrupt=3").unwrap();
    for params in [
        SessionParams::cipher(CipherAlg::AesCbc, &[1; 16]),
        SessionParams::digest(DigestAlg::Sha256),
        SessionParams::aead(CipherAlg::AesGcm, &[2; 16]),
    ] {
        let on_sim = fw.new_session_on(&sim, &params).unwrap();
        let on_soft = fw.new_session_on(ocf_soft::NAME, &params).unwrap();
        let op = if params.cipher_alg().is_some() { Op::Encrypt } else { Op::ComputeDigest };
        let iv = vec![7; params.cipher_alg().map_or(0, |c| c.iv_len())];
        let mut wrong = Vec::new();
        for i in 0..9u8 {
            let req = || Request::new(op, vec![i; 64]).with_iv(&iv);
            let a = on_sim.run(req()).expect("a faulty card still reports success");
            let b = on_soft.run(req()).unwrap();
            if (a.buf.to_vec(), a.tag().to_vec()) != (b.buf.to_vec(), b.tag().to_vec()) {
                wrong.push(i);
            }
        }
        // The card counts results across its sessions: 3 per session of 9.
        assert_eq!(wrong.len(), 3, "{params:?}: wrong results {wrong:?}");
    }
    assert!("ring=8,setup=0ns,rate=1GB/s,corrupt=0".parse::<ocf_sim::SimProfile>().is_err());
    let p: ocf_sim::SimProfile = "bcm5822,corrupt=1000".parse().unwrap();
    assert_eq!(p.corrupt_every(), Some(1000));
    assert_eq!(p.to_string().parse::<ocf_sim::SimProfile>().unwrap(), p, "round trip through Display");
}
