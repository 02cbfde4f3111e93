//! AAD given three ways — inline in the request (`Aad::Inline`, what `with_aad` picks for
//! up to 16 bytes), as a separate vector (`Aad::Bytes`), or as a region of the buffer
//! (`Aad::Region`) — authenticates the same bytes: the same ciphertext and tag, and a
//! changed byte fails verification whichever way it was given.

use ocf::{
    Aad, CipherAlg, DigestAlg, Error, Framework, InlineAad, MacAlg, Op, Request, SessionParams, TagPlace,
};

fn sessions(fw: &Framework) -> Vec<(&'static str, ocf::Session, usize)> {
    let key16 = [0x42u8; 16];
    let key32 = [0x24u8; 32];
    vec![
        ("aes-128-gcm", fw.new_session(&SessionParams::aead(CipherAlg::AesGcm, &key16[..])).unwrap(), 12),
        (
            "chacha20-poly1305",
            fw.new_session(&SessionParams::aead(CipherAlg::ChaCha20Poly1305, &key32[..])).unwrap(),
            12,
        ),
        (
            "aes-128-cbc+hmac-sha256",
            fw.new_session(
                &SessionParams::cipher_then_mac(
                    CipherAlg::AesCbc,
                    &key16[..],
                    MacAlg::Hmac(DigestAlg::Sha256),
                    &key32[..],
                )
                .with_tag_len(16),
            )
            .unwrap(),
            16,
        ),
    ]
}

#[test]
fn inline_separate_and_in_buffer_aad_authenticate_the_same_bytes() {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let payload = vec![0x5au8; 64];
    for (name, s, iv_len) in sessions(&fw) {
        let iv = vec![9u8; iv_len];
        for n in [0usize, 1, 12, 13, 16] {
            let aad: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(31) ^ 0xa5).collect();
            let inline = Request::new(Op::Encrypt, payload.clone()).with_iv(&iv).with_aad(&aad);
            assert_eq!(
                inline.aad,
                Aad::Inline(InlineAad::new(&aad).unwrap()),
                "with_aad keeps {n} bytes inline"
            );
            let inline = s.run(inline).unwrap();
            let mut bytes = Request::new(Op::Encrypt, payload.clone()).with_iv(&iv);
            bytes.aad = Aad::Bytes(aad.clone());
            let bytes = s.run(bytes).unwrap();
            // AAD ‖ payload in one buffer, the AAD as a region of it.
            let mut joined = aad.clone();
            joined.extend_from_slice(&payload);
            let mut region =
                Request::new(Op::Encrypt, joined).with_iv(&iv).with_payload(n..n + payload.len());
            region.aad = Aad::Region(0..n);
            let region = s.run(region).unwrap();
            assert_eq!(inline.buf.to_vec(), bytes.buf.to_vec(), "{name} {n}");
            assert_eq!(inline.tag(), bytes.tag(), "{name} {n}");
            assert_eq!(&region.buf.to_vec()[n..], &inline.buf.to_vec()[..], "{name} {n}");
            assert_eq!(region.tag(), inline.tag(), "{name} {n}");

            // Opening: the right inline AAD verifies; one changed byte does not.
            let open = |aad: &[u8]| {
                s.run(
                    Request::new(Op::Decrypt, inline.buf.to_vec())
                        .with_iv(&iv)
                        .with_aad(aad)
                        .with_tag(inline.tag()),
                )
            };
            assert_eq!(open(&aad).unwrap().buf.to_vec(), payload, "{name} {n}");
            if n > 0 {
                let mut bad = aad.clone();
                bad[n - 1] ^= 1;
                assert_eq!(open(&bad).unwrap_err().error(), &Error::AuthFailed, "{name} {n}");
            }
        }
    }
}

#[test]
fn aad_longer_than_the_inline_room_goes_to_the_heap_and_works_the_same() {
    assert!(InlineAad::new(&[0; InlineAad::MAX]).is_some());
    assert!(InlineAad::new(&[0; InlineAad::MAX + 1]).is_none());
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let s = fw.new_session(&SessionParams::aead(CipherAlg::AesGcm, &[1u8; 16][..])).unwrap();
    let aad = [3u8; 40];
    let r = Request::new(Op::Encrypt, vec![0u8; 32]).with_iv(&[0; 12]).with_aad(&aad);
    assert_eq!(r.aad, Aad::Bytes(aad.to_vec()));
    let sealed = s.run(r).unwrap();
    let mut region = Request::new(Op::Encrypt, [&aad[..], &[0u8; 32][..]].concat())
        .with_iv(&[0; 12])
        .with_payload(40..72)
        .with_tag_place(TagPlace::Separate);
    region.aad = Aad::Region(0..40);
    let region = s.run(region).unwrap();
    assert_eq!(region.tag(), sealed.tag());
}
