//! Multi-part messages through the soft driver: every algorithm, fed in pieces of every
//! awkward size, must give exactly what the whole-message path gives (which the
//! conformance suite checks against NIST, RFC and Wycheproof vectors); and the part rules
//! must refuse what does not fit, with `Error::BadPart`, counted.

use ocf::{
    CipherAlg, DigestAlg, Error, ErrorKind, Framework, MacAlg, Op, Part, Request, Session, SessionParams,
};

fn framework() -> Framework {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    fw
}

/// Deterministic test bytes.
fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2654435761).wrapping_add(seed as u32).to_be_bytes()[1]).collect()
}

/// Splits `len` into piece lengths: fixed patterns that cross block and keystream edges.
fn splits(len: usize, block: usize) -> Vec<Vec<usize>> {
    let mut out = vec![vec![len]];
    for pattern in [&[1usize, 15, 16, 17, 3][..], &[block, 2 * block, 7 * block], &[64, 1000, 5]] {
        let mut left = len;
        let mut pieces = Vec::new();
        let mut i = 0;
        while left > 0 {
            // Block modes take whole blocks per part.
            let p = (pattern[i % pattern.len()].div_ceil(block) * block).min(left);
            pieces.push(p);
            left -= p;
            i += 1;
        }
        out.push(pieces);
    }
    out.push(vec![0, len, 0]);
    out.retain(|p| !p.is_empty());
    out
}

/// Runs a message in parts in one request: AAD with the first part, the tag with the last.
fn in_parts(
    s: &Session,
    op: Op,
    iv: &[u8],
    aad: &[u8],
    data: &[u8],
    pieces: &[usize],
    tag: &[u8],
) -> Result<(Vec<u8>, Vec<u8>), Error> {
    let mut req = Request::new(op, Vec::new());
    let mut out = Vec::new();
    let mut at = 0;
    for (i, n) in pieces.iter().enumerate() {
        let first = i == 0;
        let last = i == pieces.len() - 1;
        let part = match (first, last) {
            (true, true) => Part::Whole,
            (true, false) => Part::First,
            (false, false) => Part::Middle,
            (false, true) => Part::Last,
        };
        req.buf = data[at..at + n].to_vec().into();
        req.payload = None;
        req.part = part;
        req.set_iv(if first { iv } else { &[] });
        req.aad = if first && !aad.is_empty() { ocf::Aad::Bytes(aad.to_vec()) } else { ocf::Aad::None };
        if last && op.checks_tag() {
            req.set_tag(tag);
        }
        req = s.run(req).map_err(|f| f.into_parts().0)?;
        out.extend_from_slice(&req.buf.to_vec());
        at += n;
    }
    Ok((out, req.tag().to_vec()))
}

#[test]
fn every_algorithm_in_parts_equals_whole() {
    let fw = framework();
    let mut cases: Vec<(String, SessionParams, Op, Op, usize)> = Vec::new();
    for (alg, keys) in [
        (CipherAlg::AesCbc, &[16usize, 24, 32][..]),
        (CipherAlg::AesCtr, &[16, 24, 32]),
        (CipherAlg::TdesCbc, &[24]),
        (CipherAlg::Null, &[0]),
    ] {
        for &k in keys {
            let p = SessionParams::cipher(alg, bytes(k, 1).as_slice());
            cases.push((format!("{alg}-{k}"), p, Op::Encrypt, Op::Decrypt, alg.block_len()));
        }
    }
    for (alg, keys) in [(CipherAlg::AesGcm, &[16usize, 24, 32][..]), (CipherAlg::ChaCha20Poly1305, &[32])] {
        for &k in keys {
            let p = SessionParams::aead(alg, bytes(k, 2).as_slice());
            cases.push((format!("{alg}-{k}"), p, Op::Encrypt, Op::Decrypt, 1));
        }
    }
    for d in DigestAlg::ALL {
        cases.push((format!("{d}"), SessionParams::digest(d), Op::ComputeDigest, Op::VerifyDigest, 1));
        let p = SessionParams::mac(MacAlg::Hmac(d), bytes(d.block_len() + 3, 3).as_slice());
        cases.push((format!("hmac-{d}"), p, Op::ComputeDigest, Op::VerifyDigest, 1));
    }
    for (name, params, fwd, back, block) in cases {
        let whole = fw.new_session(&params).unwrap();
        let parts = fw.new_session(&params.clone().multipart()).unwrap();
        let iv = bytes(params.cipher_alg().map_or(0, |c| c.iv_len()), 4);
        let aad = if params.cipher_alg().is_some_and(|c| c.is_aead()) { bytes(21, 5) } else { Vec::new() };
        for len in [0usize, 1, 15, 16, 17, 63, 64, 65, 1000, 4096 + 7] {
            let len = len / block * block;
            let data = bytes(len, len as u8);
            let (want, want_tag) = in_parts(&whole, fwd, &iv, &aad, &data, &[len], &[]).unwrap();
            for pieces in splits(len, block) {
                let (got, tag) = in_parts(&parts, fwd, &iv, &aad, &data, &pieces, &[])
                    .unwrap_or_else(|e| panic!("{name} {len} {pieces:?}: {e}"));
                assert_eq!(got, want, "{name}: {len} bytes as {pieces:?}");
                assert_eq!(tag, want_tag, "{name}: tag of {len} bytes as {pieces:?}");
                // And back: decrypt (or verify) in parts, with the tag in the last part.
                let input = if fwd == Op::Encrypt { &got } else { &data };
                let (back_out, _) = in_parts(&parts, back, &iv, &aad, input, &pieces, &tag)
                    .unwrap_or_else(|e| panic!("{name} back {len} {pieces:?}: {e}"));
                if fwd == Op::Encrypt {
                    assert_eq!(back_out, data, "{name}: round trip of {len} bytes as {pieces:?}");
                }
                if !tag.is_empty() {
                    let mut bad = tag.clone();
                    bad[0] ^= 1;
                    let e = in_parts(&parts, back, &iv, &aad, input, &pieces, &bad).unwrap_err();
                    assert_eq!(e, Error::AuthFailed, "{name}: forged tag, {len} bytes as {pieces:?}");
                }
            }
        }
    }
}

#[test]
fn part_rules_are_enforced_and_counted() {
    let fw = framework();
    let key = [7u8; 16];
    let one_shot = fw.new_session(&SessionParams::aead(CipherAlg::AesGcm, &key)).unwrap();
    let s = fw.new_session(&SessionParams::aead(CipherAlg::AesGcm, &key).multipart()).unwrap();
    let bad_part = |r: ocf::Outcome| match r {
        Err(f) => match f.into_parts().0 {
            Error::BadPart(why) => why,
            e => panic!("expected BadPart, got {e}"),
        },
        Ok(_) => panic!("accepted"),
    };

    // A session not opened for parts refuses them.
    let why = bad_part(
        one_shot.run(Request::new(Op::Encrypt, vec![0; 4]).with_iv(&[0; 12]).with_part(Part::First)),
    );
    assert!(why.contains("not opened for multi-part"), "{why}");
    // A middle part needs a message in progress.
    let why = bad_part(s.run(Request::new(Op::Encrypt, vec![0; 4]).with_part(Part::Middle)));
    assert!(why.contains("no message in progress"), "{why}");
    // The tag goes with the last part only.
    let mut r =
        s.run(Request::new(Op::Encrypt, vec![0; 4]).with_iv(&[0; 12]).with_part(Part::First)).unwrap();
    r.part = Part::Middle;
    r.tag_place = ocf::TagPlace::InBuffer(0);
    let why = bad_part(s.run(r));
    assert!(why.contains("tag goes with a message's Last part"), "{why}");
    // Every part asks for the first part's operation; AAD comes before payload.
    let mut r =
        s.run(Request::new(Op::Encrypt, vec![1; 4]).with_iv(&[0; 12]).with_part(Part::First)).unwrap();
    r.op = Op::Decrypt;
    r.part = Part::Middle;
    assert!(bad_part(s.run(r)).contains("operation of its first part"));
    let mut r =
        s.run(Request::new(Op::Encrypt, vec![1; 4]).with_iv(&[0; 12]).with_part(Part::First)).unwrap();
    r.part = Part::Middle;
    r.aad = ocf::Aad::Bytes(vec![1; 3]);
    let failed = s.run(r).unwrap_err();
    let (e, mut r) = failed.into_parts();
    assert!(matches!(e, Error::BadPart(w) if w.contains("before the first byte of payload")));
    // A failed part ends the message.
    assert!(!r.in_message());
    r.aad = ocf::Aad::None;
    assert!(bad_part(s.run(r)).contains("no message in progress"));
    // A multi-part session needs a driver that takes parts: the null driver does not.
    let fw2 = Framework::new();
    ocf_null::register(&fw2).unwrap();
    let e =
        fw2.new_session_on("null", &SessionParams::cipher(CipherAlg::Null, ocf::Key::empty()).multipart());
    assert!(matches!(e, Err(Error::BadPart(_))), "{:?}", e.err());

    let counted = s.stats().errors.get(ErrorKind::BadPart) + one_shot.stats().errors.get(ErrorKind::BadPart);
    assert_eq!(counted, 6, "every refused part is counted");
}

#[test]
fn a_digest_in_progress_can_be_forked() {
    let fw = framework();
    let s = fw.new_session(&SessionParams::digest(DigestAlg::Sha256).multipart()).unwrap();
    let whole = fw.new_session(&SessionParams::digest(DigestAlg::Sha256)).unwrap();
    let prefix = bytes(100, 9);
    let a = s.run(Request::new(Op::ComputeDigest, prefix.clone()).with_part(Part::First)).unwrap();
    let mut b = Request::new(Op::ComputeDigest, Vec::new());
    b.set_part_state(a.try_clone_part_state().expect("a digest state copies"));
    let finish = |mut r: Request, tail: &[u8]| {
        r.buf = tail.to_vec().into();
        r.part = Part::Last;
        s.run(r).unwrap().tag().to_vec()
    };
    let ta = finish(a, b"one ending");
    let tb = finish(b, b"another");
    let digest = |m: Vec<u8>| whole.run(Request::new(Op::ComputeDigest, m)).unwrap().tag().to_vec();
    assert_eq!(ta, digest([&prefix[..], b"one ending"].concat()));
    assert_eq!(tb, digest([&prefix[..], b"another"].concat()));
}

/// One message, two parts (`First` then `Last`), in `req`, whose buffer is lent with
/// `run_in` (the OpenSSL provider's way): the request keeps the driver's spare state from
/// message to message.
fn two_parts_in(
    s: &Session,
    req: &mut Option<Request>,
    op: Op,
    iv: &[u8],
    data: &[u8],
    tag: &[u8],
) -> Result<(Vec<u8>, Vec<u8>), Error> {
    let mut out = data.to_vec();
    // A third, rounded to whole blocks (CBC parts are whole blocks).
    let split = data.len() / 3 / 16 * 16;
    for (part, range) in [(Part::First, 0..split), (Part::Last, split..data.len())] {
        let mut r = req.take().unwrap();
        r.op = op;
        r.part = part;
        r.payload = None;
        r.set_iv(iv);
        if part == Part::Last && op.checks_tag() {
            r.set_tag(tag);
        }
        // SAFETY: the only driver registered is soft, which keeps the driver contract.
        let outcome = unsafe { s.run_in(r, &mut out[range]) };
        match outcome {
            Ok(done) => {
                assert!(done.buf.is_empty(), "the lent buffer is taken out of the request");
                *req = Some(done);
            }
            Err(f) => {
                let (e, back) = f.into_parts();
                assert!(back.buf.is_empty(), "the lent buffer is taken out of a failed request");
                *req = Some(back);
                return Err(e);
            }
        }
    }
    Ok((out, req.as_ref().unwrap().tag().to_vec()))
}

/// A reused request carries a finished message's state to the next message, where the
/// driver recycles it (an AES-GCM context only takes the new nonce). Messages of two
/// sessions with different keys, encrypting and decrypting, after a forged tag, in one
/// request, in lent buffers: each must give exactly what a fresh request gives with the
/// whole-message path — a recycled state of the wrong session would encrypt under the
/// wrong key.
#[test]
fn one_request_serves_message_after_message_across_sessions() {
    let fw = framework();
    let cases = [
        (CipherAlg::AesGcm, 16),
        (CipherAlg::AesGcm, 32),
        (CipherAlg::ChaCha20Poly1305, 32),
        (CipherAlg::AesCtr, 16),
        (CipherAlg::AesCbc, 16),
    ];
    for (alg, key_len) in cases {
        let name = format!("{alg}-{key_len}");
        let block = alg.block_len();
        // Sessions A and B: the same algorithm and key length, two keys.
        let params = |flip: u8| {
            let key: Vec<u8> = bytes(key_len, 11).iter().map(|b| b ^ flip).collect();
            if alg.is_aead() {
                SessionParams::aead(alg, key.as_slice())
            } else {
                SessionParams::cipher(alg, key.as_slice())
            }
        };
        let (a, b) = (params(0), params(0x5a));
        let sessions = [
            fw.new_session(&a.clone().multipart()).unwrap(),
            fw.new_session(&b.clone().multipart()).unwrap(),
        ];
        let whole = [fw.new_session(&a).unwrap(), fw.new_session(&b).unwrap()];
        let iv_len = alg.iv_len();
        let mut req = Some(Request::new(Op::Encrypt, Vec::new()));
        for (step, which) in [0usize, 0, 1, 0, 1, 1, 0].into_iter().enumerate() {
            let iv = bytes(iv_len, step as u8);
            let data = bytes((100 + step * 37) / block * block, 50 + step as u8);
            let (want, want_tag) =
                in_parts(&whole[which], Op::Encrypt, &iv, &[], &data, &[data.len()], &[]).unwrap();
            let (got, tag) = two_parts_in(&sessions[which], &mut req, Op::Encrypt, &iv, &data, &[])
                .unwrap_or_else(|e| panic!("{name} step {step}: {e}"));
            assert_eq!(got, want, "{name} step {step} (session {which}): ciphertext");
            assert_eq!(tag, want_tag, "{name} step {step} (session {which}): tag");
            // Back through the same request, then (AEADs) a forged tag, then back again.
            let (plain, _) = two_parts_in(&sessions[which], &mut req, Op::Decrypt, &iv, &got, &tag).unwrap();
            assert_eq!(plain, data, "{name} step {step}: round trip");
            if !tag.is_empty() {
                let mut bad = tag.clone();
                bad[15] ^= 0x80;
                let e = two_parts_in(&sessions[which], &mut req, Op::Decrypt, &iv, &got, &bad).unwrap_err();
                assert_eq!(e, Error::AuthFailed, "{name} step {step}: forged tag");
                let (plain, _) =
                    two_parts_in(&sessions[which], &mut req, Op::Decrypt, &iv, &got, &tag).unwrap();
                assert_eq!(plain, data, "{name} step {step}: after a forged tag");
            }
        }
    }
}
