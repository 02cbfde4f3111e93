//! Every bad input an API caller can give gets its specific error, is counted under that
//! error (per session and per driver, or framework-wide before a driver is chosen), and
//! gives the caller's buffers back untouched.

use ocf::{
    Aad, CipherAlg, CompAlg, DigestAlg, Error, ErrorKind, Framework, Key, MacAlg, Op, Request, Session,
    SessionParams, TagPlace,
};

/// A valid three-key 3DES key (NIST's TDES-CBC example).
const TDES_KEY: [u8; 24] = [
    0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x45,
    0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23,
];

fn framework() -> Framework {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    fw
}

/// Submits `req` on `s`, expects `want`, and checks the counters moved by exactly one.
fn expect_request_error(
    fw: &Framework,
    s: &Session,
    req: Request,
    want: fn(&Error) -> bool,
    kind: ErrorKind,
) {
    let before_session = s.stats().errors.get(kind);
    let before_driver = fw.driver_stats("soft").unwrap().errors.get(kind);
    let buf_before = req.buf.to_vec();
    let failed = s.run(req).expect_err("bad request must fail");
    assert!(want(failed.error()), "got {:?}, expected {kind:?}", failed.error());
    assert_eq!(failed.error().kind(), kind);
    assert!(!failed.error().to_string().is_empty());
    if kind != ErrorKind::AuthFailed {
        assert_eq!(failed.request.buf.to_vec(), buf_before, "a rejected request's buffer is untouched");
    }
    assert_eq!(s.stats().errors.get(kind), before_session + 1, "session counter for {kind:?}");
    assert_eq!(
        fw.driver_stats("soft").unwrap().errors.get(kind),
        before_driver + 1,
        "driver counter for {kind:?}"
    );
}

fn expect_session_error(fw: &Framework, p: SessionParams, want: fn(&Error) -> bool, kind: ErrorKind) {
    let before = fw.stats().errors.get(kind);
    let e = fw.new_session(&p).expect_err("bad parameters must fail");
    assert!(want(&e), "got {e:?}, expected {kind:?}");
    assert_eq!(fw.stats().errors.get(kind), before + 1, "framework counter for {kind:?}");
}

#[test]
fn bad_session_parameters() {
    let fw = framework();
    type Case = (SessionParams, fn(&Error) -> bool, ErrorKind);
    let cases: Vec<Case> = vec![
        (
            SessionParams::cipher(CipherAlg::AesCbc, &[0u8; 15]),
            |e| matches!(e, Error::BadKeyLength { got: 15, .. }),
            ErrorKind::BadKeyLength,
        ),
        (
            SessionParams::cipher(CipherAlg::TdesCbc, &[0u8; 16]),
            |e| matches!(e, Error::BadKeyLength { got: 16, .. }),
            ErrorKind::BadKeyLength,
        ),
        (
            SessionParams::aead(CipherAlg::ChaCha20Poly1305, &[0u8; 16]),
            |e| matches!(e, Error::BadKeyLength { got: 16, .. }),
            ErrorKind::BadKeyLength,
        ),
        (
            SessionParams::aead(CipherAlg::AesGcm, &[0u8; 20]),
            |e| matches!(e, Error::BadKeyLength { got: 20, .. }),
            ErrorKind::BadKeyLength,
        ),
        (
            SessionParams::cipher_then_mac(
                CipherAlg::AesCbc,
                &[0u8; 33],
                MacAlg::Hmac(DigestAlg::Sha1),
                &[1u8; 20],
            ),
            |e| matches!(e, Error::BadKeyLength { got: 33, .. }),
            ErrorKind::BadKeyLength,
        ),
        (
            SessionParams::cipher(CipherAlg::TdesCbc, &[3u8; 24]),
            |e| matches!(e, Error::WeakKey { .. }),
            ErrorKind::WeakKey,
        ),
        (
            SessionParams::cipher(CipherAlg::TdesCbc, &[&TDES_KEY[..16], &[0xfe; 8][..]].concat()[..]),
            |e| matches!(e, Error::WeakKey { .. }),
            ErrorKind::WeakKey,
        ),
        (
            SessionParams::hmac(DigestAlg::Sha1, Key::empty()),
            |e| matches!(e, Error::BadMacKeyLength { got: 0 }),
            ErrorKind::BadMacKeyLength,
        ),
        (
            SessionParams::hmac(DigestAlg::Sha1, &[1u8; 20]).with_tag_len(9),
            |e| matches!(e, Error::BadTagLength { got: 9, .. }),
            ErrorKind::BadTagLength,
        ),
        (
            SessionParams::hmac(DigestAlg::Sha256, &[1u8; 32]).with_tag_len(33),
            |e| matches!(e, Error::BadTagLength { got: 33, .. }),
            ErrorKind::BadTagLength,
        ),
        (
            SessionParams::aead(CipherAlg::AesGcm, &[0u8; 16]).with_tag_len(12),
            |e| matches!(e, Error::BadTagLength { got: 12, .. }),
            ErrorKind::BadTagLength,
        ),
        (
            SessionParams::cipher(CipherAlg::ChaCha20Poly1305, &[0u8; 32]),
            |e| matches!(e, Error::InvalidParams(_)),
            ErrorKind::InvalidParams,
        ),
        (
            SessionParams::aead(CipherAlg::AesCbc, &[0u8; 16]),
            |e| matches!(e, Error::InvalidParams(_)),
            ErrorKind::InvalidParams,
        ),
        (
            SessionParams::cipher_then_mac(
                CipherAlg::AesGcm,
                &[0u8; 16],
                MacAlg::Hmac(DigestAlg::Sha1),
                &[1u8; 20],
            ),
            |e| matches!(e, Error::InvalidParams(_)),
            ErrorKind::InvalidParams,
        ),
    ];
    for (p, want, kind) in cases {
        expect_session_error(&fw, p, want, kind);
    }
}

fn cbc(fw: &Framework) -> Session {
    fw.new_session(&SessionParams::cipher(CipherAlg::AesCbc, &[7u8; 16])).unwrap()
}

fn gcm(fw: &Framework) -> Session {
    fw.new_session(&SessionParams::aead(CipherAlg::AesGcm, &[7u8; 16])).unwrap()
}

#[test]
fn bad_iv_lengths() {
    let fw = framework();
    let s = cbc(&fw);
    for iv in [&[0u8; 0][..], &[0u8; 8], &[0u8; 17], &[0u8; 32]] {
        let r = Request::new(Op::Encrypt, vec![0u8; 32]).with_iv(iv);
        expect_request_error(
            &fw,
            &s,
            r,
            |e| matches!(e, Error::BadIvLength { expected: 16, .. }),
            ErrorKind::BadIvLength,
        );
    }
    let g = gcm(&fw);
    let r = Request::new(Op::Encrypt, vec![0u8; 32]).with_iv(&[0u8; 16]);
    expect_request_error(
        &fw,
        &g,
        r,
        |e| matches!(e, Error::BadIvLength { expected: 12, got: 16 }),
        ErrorKind::BadIvLength,
    );
    let d = fw.new_session(&SessionParams::digest(DigestAlg::Sha256)).unwrap();
    let r = Request::new(Op::ComputeDigest, vec![0u8; 3]).with_iv(&[1]);
    expect_request_error(
        &fw,
        &d,
        r,
        |e| matches!(e, Error::BadIvLength { expected: 0, got: 1 }),
        ErrorKind::BadIvLength,
    );
}

#[test]
fn payloads_that_are_not_a_block_multiple() {
    let fw = framework();
    let s = cbc(&fw);
    let r = Request::new(Op::Decrypt, vec![0u8; 15]).with_iv(&[0u8; 16]);
    expect_request_error(
        &fw,
        &s,
        r,
        |e| matches!(e, Error::NotBlockMultiple { len: 15, block: 16 }),
        ErrorKind::NotBlockMultiple,
    );
    let t = fw.new_session(&SessionParams::cipher(CipherAlg::TdesCbc, &TDES_KEY)).unwrap();
    let r = Request::new(Op::Encrypt, vec![0u8; 12]).with_iv(&[0u8; 8]);
    expect_request_error(
        &fw,
        &t,
        r,
        |e| matches!(e, Error::NotBlockMultiple { len: 12, block: 8 }),
        ErrorKind::NotBlockMultiple,
    );
}

#[test]
fn regions_outside_or_overlapping() {
    let fw = framework();
    let s = cbc(&fw);
    let r = Request::new(Op::Encrypt, vec![0u8; 32]).with_iv(&[0u8; 16]).with_payload(16..48);
    expect_request_error(
        &fw,
        &s,
        r,
        |e| matches!(e, Error::BadRegion { what: "payload", .. }),
        ErrorKind::BadRegion,
    );
    #[allow(clippy::reversed_empty_ranges)]
    let r = Request::new(Op::Encrypt, vec![0u8; 32]).with_iv(&[0u8; 16]).with_payload(16..0);
    expect_request_error(
        &fw,
        &s,
        r,
        |e| matches!(e, Error::BadRegion { what: "payload", .. }),
        ErrorKind::BadRegion,
    );

    let g = gcm(&fw);
    let mut r = Request::new(Op::Encrypt, vec![0u8; 64]).with_iv(&[0u8; 12]).with_payload(8..48);
    r.aad = Aad::Region(0..80);
    expect_request_error(
        &fw,
        &g,
        r,
        |e| matches!(e, Error::BadRegion { what: "AAD", .. }),
        ErrorKind::BadRegion,
    );
    let mut r = Request::new(Op::Encrypt, vec![0u8; 64]).with_iv(&[0u8; 12]).with_payload(8..48);
    r.aad = Aad::Region(0..9);
    expect_request_error(
        &fw,
        &g,
        r,
        |e| matches!(e, Error::BadRegion { what, .. } if what.starts_with("AAD")),
        ErrorKind::BadRegion,
    );
    let r = Request::new(Op::Encrypt, vec![0u8; 64])
        .with_iv(&[0u8; 12])
        .with_payload(0..48)
        .with_tag_place(TagPlace::InBuffer(50));
    expect_request_error(
        &fw,
        &g,
        r,
        |e| matches!(e, Error::BadRegion { what: "tag", .. }),
        ErrorKind::BadRegion,
    );
    let r = Request::new(Op::Encrypt, vec![0u8; 64])
        .with_iv(&[0u8; 12])
        .with_payload(0..48)
        .with_tag_place(TagPlace::InBuffer(40));
    expect_request_error(
        &fw,
        &g,
        r,
        |e| matches!(e, Error::BadRegion { what, .. } if what.starts_with("tag")),
        ErrorKind::BadRegion,
    );
}

#[test]
fn output_buffer_too_short() {
    let fw = framework();
    let s = cbc(&fw);
    let r = Request::new(Op::Encrypt, vec![0u8; 32]).with_iv(&[0u8; 16]).with_output(vec![0u8; 31]);
    expect_request_error(
        &fw,
        &s,
        r,
        |e| matches!(e, Error::OutputTooShort { need: 32, got: 31 }),
        ErrorKind::OutputTooShort,
    );
}

#[test]
fn operations_the_mode_cannot_do() {
    let fw = framework();
    let s = cbc(&fw);
    let r = Request::new(Op::ComputeDigest, vec![0u8; 16]).with_iv(&[0u8; 16]);
    expect_request_error(
        &fw,
        &s,
        r,
        |e| matches!(e, Error::BadOperation { mode: "cipher", .. }),
        ErrorKind::BadOperation,
    );
    let d = fw.new_session(&SessionParams::digest(DigestAlg::Md5)).unwrap();
    let r = Request::new(Op::Encrypt, vec![0u8; 16]);
    expect_request_error(
        &fw,
        &d,
        r,
        |e| matches!(e, Error::BadOperation { mode: "digest", .. }),
        ErrorKind::BadOperation,
    );
}

#[test]
fn aad_where_nothing_authenticates_it() {
    let fw = framework();
    let s = cbc(&fw);
    let r = Request::new(Op::Encrypt, vec![0u8; 16]).with_iv(&[0u8; 16]).with_aad(b"header");
    expect_request_error(
        &fw,
        &s,
        r,
        |e| matches!(e, Error::AadNotSupported { mode: "cipher" }),
        ErrorKind::AadNotSupported,
    );
    let h = fw.new_session(&SessionParams::hmac(DigestAlg::Sha256, &[1u8; 32])).unwrap();
    let r = Request::new(Op::ComputeDigest, vec![0u8; 16]).with_aad(b"header");
    expect_request_error(
        &fw,
        &h,
        r,
        |e| matches!(e, Error::AadNotSupported { mode: "mac" }),
        ErrorKind::AadNotSupported,
    );
}

#[test]
fn a_tag_to_verify_of_the_wrong_length() {
    let fw = framework();
    let h = fw.new_session(&SessionParams::hmac(DigestAlg::Sha1, &[1u8; 20]).with_tag_len(12)).unwrap();
    let r = Request::new(Op::VerifyDigest, vec![0u8; 16]).with_tag(&[0u8; 20]);
    expect_request_error(
        &fw,
        &h,
        r,
        |e| matches!(e, Error::BadTagLength { got: 20, .. }),
        ErrorKind::BadTagLength,
    );
    let g = gcm(&fw);
    let r = Request::new(Op::Decrypt, vec![0u8; 16]).with_iv(&[0u8; 12]).with_tag(&[0u8; 8]);
    expect_request_error(
        &fw,
        &g,
        r,
        |e| matches!(e, Error::BadTagLength { got: 8, .. }),
        ErrorKind::BadTagLength,
    );
}

/// Tampering with any authenticated byte fails verification, for every authenticating
/// mode; AEAD in-place payloads are wiped rather than released unauthenticated.
#[test]
fn tampered_data_fails_authentication() {
    let fw = framework();
    let sha1 = MacAlg::Hmac(DigestAlg::Sha1);
    let sessions = [
        (SessionParams::aead(CipherAlg::AesGcm, &[7u8; 16]), 12),
        (SessionParams::aead(CipherAlg::AesGcm, &[7u8; 32]), 12),
        (SessionParams::aead(CipherAlg::ChaCha20Poly1305, &[7u8; 32]), 12),
        (
            SessionParams::cipher_then_mac(CipherAlg::AesCbc, &[7u8; 16], sha1, &[9u8; 20]).with_tag_len(12),
            16,
        ),
        (SessionParams::cipher_then_mac(CipherAlg::TdesCbc, &TDES_KEY, sha1, &[9u8; 20]).with_tag_len(12), 8),
    ];
    for (params, iv_len) in sessions {
        let s = fw.new_session(&params).unwrap();
        for size in [16usize, 2048] {
            let plain: Vec<u8> = (0..size).map(|i| i as u8).collect();
            let iv = vec![5u8; iv_len];
            let sealed =
                s.run(Request::new(Op::Encrypt, plain.clone()).with_iv(&iv).with_aad(b"spi+seq")).unwrap();
            let (ct, tag) = (sealed.buf.to_vec(), sealed.tag().to_vec());
            // Intact: decrypts.
            let ok =
                s.run(Request::new(Op::Decrypt, ct.clone()).with_iv(&iv).with_aad(b"spi+seq").with_tag(&tag));
            assert_eq!(ok.unwrap().buf.to_vec(), plain);
            let mut bad_ct = ct.clone();
            bad_ct[size / 2] ^= 1;
            let mut bad_tag = tag.clone();
            bad_tag[0] ^= 0x80;
            for (c, a, t) in [
                (&bad_ct, &b"spi+seq"[..], &tag),
                (&ct, &b"spi+seQ"[..], &tag),
                (&ct, &b"spi+seq"[..], &bad_tag),
            ] {
                let r = Request::new(Op::Decrypt, c.clone()).with_iv(&iv).with_aad(a).with_tag(t);
                let before = s.stats().errors.get(ErrorKind::AuthFailed);
                let f = s.run(r).unwrap_err();
                assert_eq!(*f.error(), Error::AuthFailed, "{:?}", params.mode.name());
                assert_eq!(s.stats().errors.get(ErrorKind::AuthFailed), before + 1);
                let released = f.request.buf.to_vec();
                assert_ne!(released, plain, "no plaintext is released on failure");
            }
        }
    }
    let h = fw.new_session(&SessionParams::hmac(DigestAlg::Sha512, &[1u8; 64])).unwrap();
    let tag = h.run(Request::new(Op::ComputeDigest, b"message".to_vec())).unwrap().tag().to_vec();
    let mut bad = tag.clone();
    bad[63] ^= 1;
    let f = h.run(Request::new(Op::VerifyDigest, b"message".to_vec()).with_tag(&bad)).unwrap_err();
    assert_eq!(*f.error(), Error::AuthFailed);
    let d = fw.new_session(&SessionParams::digest(DigestAlg::Sha256)).unwrap();
    let f = d.run(Request::new(Op::VerifyDigest, b"abc".to_vec()).with_tag(&[0u8; 32])).unwrap_err();
    assert_eq!(*f.error(), Error::AuthFailed);
    assert!(fw.driver_stats("soft").unwrap().errors.get(ErrorKind::AuthFailed) >= 32);
}

#[test]
fn esn_bits_on_a_session_that_does_not_mac_them() {
    let fw = framework();
    let c = fw.new_session(&SessionParams::cipher(CipherAlg::AesCbc, &[1u8; 16])).unwrap();
    let r = Request::new(Op::Encrypt, vec![0u8; 16]).with_iv(&[0u8; 16]).with_esn_high(1);
    expect_request_error(
        &fw,
        &c,
        r,
        |e| matches!(e, Error::EsnNotSupported { mode: "cipher" }),
        ErrorKind::EsnNotSupported,
    );
    let g = fw.new_session(&SessionParams::aead(CipherAlg::AesGcm, &[1u8; 16])).unwrap();
    let r = Request::new(Op::Encrypt, vec![0u8; 16]).with_iv(&[0u8; 12]).with_esn_high(1);
    expect_request_error(
        &fw,
        &g,
        r,
        |e| matches!(e, Error::EsnNotSupported { mode: "aead" }),
        ErrorKind::EsnNotSupported,
    );
}

fn deflate(fw: &Framework) -> Session {
    fw.new_session(&SessionParams::compress(CompAlg::Deflate)).unwrap()
}

/// Raw DEFLATE of `data` at level 9, by Python's zlib (an independent implementation).
/// Generated with `python3 -c "import zlib; c = zlib.compressobj(9, zlib.DEFLATED, -15);
/// print((c.compress(b'ocf ' * 64) + c.flush()).hex())"`.
const OCF_X64_DEFLATE: &str = "cb4f4e53c81fc11800";

fn unhex(h: &str) -> Vec<u8> {
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn compression_without_an_output_buffer() {
    let fw = framework();
    let s = deflate(&fw);
    for op in [Op::Compress, Op::Decompress] {
        expect_request_error(
            &fw,
            &s,
            Request::new(op, vec![0u8; 100]),
            |e| matches!(e, Error::NoOutputBuffer { .. }),
            ErrorKind::NoOutputBuffer,
        );
    }
}

#[test]
fn compression_that_does_not_shrink_the_data() {
    let fw = framework();
    let s = deflate(&fw);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let random: Vec<u8> = (0..1400)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    expect_request_error(
        &fw,
        &s,
        Request::new(Op::Compress, random).with_output(vec![0u8; 2000]),
        |e| matches!(e, Error::Incompressible { len: 1400 }),
        ErrorKind::Incompressible,
    );
    // Compressible, but the room given is smaller than the result: the same answer.
    expect_request_error(
        &fw,
        &s,
        Request::new(Op::Compress, b"ocf ".repeat(64)).with_output(vec![0u8; 4]),
        |e| matches!(e, Error::Incompressible { len: 256 }),
        ErrorKind::Incompressible,
    );
    expect_request_error(
        &fw,
        &s,
        Request::new(Op::Compress, Vec::new()).with_output(vec![0u8; 16]),
        |e| matches!(e, Error::Incompressible { len: 0 }),
        ErrorKind::Incompressible,
    );
}

#[test]
fn decompression_beyond_the_output_limit() {
    let fw = framework();
    let s = deflate(&fw);
    expect_request_error(
        &fw,
        &s,
        Request::new(Op::Decompress, unhex(OCF_X64_DEFLATE)).with_output(vec![0u8; 255]),
        |e| matches!(e, Error::OutputLimit { limit: 255 }),
        ErrorKind::OutputLimit,
    );
    let done =
        s.run(Request::new(Op::Decompress, unhex(OCF_X64_DEFLATE)).with_output(vec![0u8; 256])).unwrap();
    assert_eq!(done.result_payload(), b"ocf ".repeat(64));
}

#[test]
fn corrupt_and_truncated_compressed_data() {
    let fw = framework();
    let s = deflate(&fw);
    let good = unhex(OCF_X64_DEFLATE);
    // Block type 3 is reserved (RFC 1951 §3.2.3).
    expect_request_error(
        &fw,
        &s,
        Request::new(Op::Decompress, vec![0x07, 0, 0, 0]).with_output(vec![0u8; 1024]),
        |e| matches!(e, Error::BadCompressedData),
        ErrorKind::BadCompressedData,
    );
    expect_request_error(
        &fw,
        &s,
        Request::new(Op::Decompress, good[..good.len() - 2].to_vec()).with_output(vec![0u8; 1024]),
        |e| matches!(e, Error::BadCompressedData),
        ErrorKind::BadCompressedData,
    );
    expect_request_error(
        &fw,
        &s,
        Request::new(Op::Decompress, Vec::new()).with_output(vec![0u8; 1024]),
        |e| matches!(e, Error::BadCompressedData),
        ErrorKind::BadCompressedData,
    );
}

#[test]
fn compression_requests_with_fields_a_compression_session_does_not_use() {
    let fw = framework();
    let s = deflate(&fw);
    let out = || vec![0u8; 64];
    expect_request_error(
        &fw,
        &s,
        Request::new(Op::Compress, vec![0u8; 100]).with_output(out()).with_iv(&[0u8; 16]),
        |e| matches!(e, Error::BadIvLength { expected: 0, got: 16 }),
        ErrorKind::BadIvLength,
    );
    expect_request_error(
        &fw,
        &s,
        Request::new(Op::Compress, vec![0u8; 100]).with_output(out()).with_aad(b"aad"),
        |e| matches!(e, Error::AadNotSupported { .. }),
        ErrorKind::AadNotSupported,
    );
    expect_request_error(
        &fw,
        &s,
        Request::new(Op::Encrypt, vec![0u8; 100]).with_output(out()),
        |e| matches!(e, Error::BadOperation { op: "encrypt", mode: "compress" }),
        ErrorKind::BadOperation,
    );
    let mut r = Request::new(Op::Decompress, vec![0u8; 100]).with_output(out());
    r.out_offset = 65;
    expect_request_error(&fw, &s, r, |e| matches!(e, Error::BadRegion { .. }), ErrorKind::BadRegion);
    let cbc = cbc(&fw);
    expect_request_error(
        &fw,
        &cbc,
        Request::new(Op::Compress, vec![0u8; 16]).with_output(out()).with_iv(&[0u8; 16]),
        |e| matches!(e, Error::BadOperation { op: "compress", mode: "cipher" }),
        ErrorKind::BadOperation,
    );
}

#[test]
fn a_compression_session_no_driver_serves() {
    let fw = Framework::new();
    ocf_null::register(&fw).unwrap();
    expect_session_error(
        &fw,
        SessionParams::compress(CompAlg::Deflate),
        |e| matches!(e, Error::UnsupportedCompression(CompAlg::Deflate)),
        ErrorKind::Unsupported,
    );
    // The null driver's results are not compression: it refuses even when named.
    let e =
        fw.new_session_on("null", &SessionParams::compress(CompAlg::Deflate)).expect_err("not even by name");
    assert!(matches!(e, Error::UnsupportedCompression(CompAlg::Deflate)), "{e:?}");
}
