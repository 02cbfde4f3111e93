//! ESP extended sequence numbers (RFC 4303 §2.2.1): the high-order 32 bits are
//! authenticated after the payload but never sent. A cipher+MAC request with
//! `with_esn_high(h)` must produce the same ICV as an HMAC over `AAD || ciphertext || h`
//! computed by a plain MAC session over those bytes laid out in one buffer.

use ocf::{CipherAlg, DigestAlg, Error, Framework, MacAlg, Op, Request, SessionParams};

#[test]
fn cipher_then_mac_authenticates_the_esn_bits_after_the_ciphertext() {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let (ckey, mkey) = ([0x11u8; 16], [0x22u8; 20]);
    let eta = fw
        .new_session(
            &SessionParams::cipher_then_mac(
                CipherAlg::AesCbc,
                &ckey[..],
                MacAlg::Hmac(DigestAlg::Sha1),
                &mkey[..],
            )
            .with_tag_len(12),
        )
        .unwrap();
    let mac = fw.new_session(&SessionParams::hmac(DigestAlg::Sha1, &mkey[..]).with_tag_len(12)).unwrap();
    let (aad, iv, high) = (*b"SPI_SEQ_", [7u8; 16], 0x0102_0304u32);
    let sealed = eta
        .run(Request::new(Op::Encrypt, vec![0x5a; 64]).with_iv(&iv).with_aad(&aad).with_esn_high(high))
        .unwrap();
    let ct = sealed.buf.to_vec();

    let mut covered = aad.to_vec();
    covered.extend_from_slice(&ct);
    covered.extend_from_slice(&high.to_be_bytes());
    let expect = mac.run(Request::new(Op::ComputeDigest, covered.clone())).unwrap().tag().to_vec();
    assert_eq!(sealed.tag(), &expect[..], "ICV over AAD || ciphertext || ESN high bits");

    // Without the ESN bits the ICV differs, and decryption with the wrong high bits fails.
    let plain = eta.run(Request::new(Op::Encrypt, vec![0x5a; 64]).with_iv(&iv).with_aad(&aad)).unwrap();
    assert_ne!(plain.tag(), sealed.tag());
    let open = |h: u32| {
        eta.run(
            Request::new(Op::Decrypt, ct.clone())
                .with_iv(&iv)
                .with_aad(&aad)
                .with_tag(sealed.tag())
                .with_esn_high(h),
        )
    };
    assert_eq!(open(high).unwrap().buf.to_vec(), vec![0x5a; 64]);
    assert_eq!(open(high + 1).unwrap_err().error(), &Error::AuthFailed);

    // A MAC session appends them after its payload the same way.
    let covered_without = &covered[..covered.len() - 4];
    let m = mac.run(Request::new(Op::ComputeDigest, covered_without.to_vec()).with_esn_high(high)).unwrap();
    assert_eq!(m.tag(), &expect[..]);
}
