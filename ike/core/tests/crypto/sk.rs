//! The SK payload's protection: round trips for every suite, tampering refused, IVs never
//! repeated, and cross-checks with Python's `cryptography` (AES-GCM, ChaCha20-Poly1305,
//! AES-CBC with HMAC-SHA-256) in both directions.

use ike_core::crypto::{CryptoError, Encr, Integ, SkCipher};

use crate::common::{fw, python, to_hex};

fn suites() -> Vec<(Encr, Option<Integ>)> {
    vec![
        (Encr::AesGcm16 { key_len: 16 }, None),
        (Encr::AesGcm16 { key_len: 32 }, None),
        (Encr::ChaCha20Poly1305, None),
        (Encr::AesCbc { key_len: 16 }, Some(Integ::HmacSha256_128)),
        (Encr::AesCbc { key_len: 32 }, Some(Integ::HmacSha384_192)),
        (Encr::AesCbc { key_len: 32 }, Some(Integ::HmacSha512_256)),
    ]
}

fn keys(encr: Encr, integ: Option<Integ>) -> (Vec<u8>, Vec<u8>) {
    let e = (0..encr.keymat_len()).map(|i| i as u8 ^ 0x5a).collect();
    let a = (0..integ.map_or(0, |i| i.key_len())).map(|i| i as u8 ^ 0xa5).collect();
    (e, a)
}

fn cipher(encr: Encr, integ: Option<Integ>) -> SkCipher {
    let (e, a) = keys(encr, integ);
    SkCipher::new(&fw(), encr, integ, &e, &a).unwrap()
}

/// An IKE header and SK generic header's worth of AAD (32 bytes).
fn aad() -> Vec<u8> {
    (0..32).map(|i| i as u8).collect()
}

#[test]
fn seal_open_round_trip_for_every_suite() {
    for (encr, integ) in suites() {
        let (tx, rx) = (cipher(encr, integ), cipher(encr, integ));
        for len in [0, 1, 15, 16, 17, 31, 100, 1000] {
            let plain: Vec<u8> = (0..len).map(|i| (i * 3) as u8).collect();
            let body = tx.seal(&aad(), &plain).unwrap();
            assert_eq!(body.len(), tx.body_len(len), "{encr:?} {len}");
            assert!(tx.max_plaintext_len(body.len()) >= len);
            assert_eq!(&rx.open(&aad(), &body).unwrap()[..], &plain[..], "{encr:?} {len}");
            let message = [aad(), body].concat();
            assert_eq!(&rx.open_message(&message, 32).unwrap()[..], &plain[..]);
        }
        for room in 0..100 {
            let fits = tx.max_plaintext_len(room);
            assert!(fits == 0 || tx.body_len(fits) <= room, "{encr:?}: {fits} bytes in {room}");
            assert!(tx.body_len(fits + 1) > room, "{encr:?}: {room} holds more than {fits}");
        }
    }
}

/// One flipped bit anywhere — IV, ciphertext, ICV, or the AAD (IKE and SK headers) — and
/// the message is refused as unauthenticated.
#[test]
fn a_flipped_bit_anywhere_is_refused() {
    for (encr, integ) in suites() {
        let c = cipher(encr, integ);
        let body = c.seal(&aad(), b"inner payloads, 30 bytes long!").unwrap();
        let (iv, icv) = (encr.iv_len(), c.icv_len());
        for at in [0, iv - 1, iv, body.len() - icv - 1, body.len() - icv, body.len() - 1] {
            let mut bad = body.clone();
            bad[at] ^= 0x01;
            assert_eq!(c.open(&aad(), &bad).unwrap_err(), CryptoError::SkAuthFailed, "{encr:?} byte {at}");
        }
        for at in [0, 17, 31] {
            let mut bad_aad = aad();
            bad_aad[at] ^= 0x80;
            assert_eq!(c.open(&bad_aad, &body).unwrap_err(), CryptoError::SkAuthFailed, "{encr:?} AAD {at}");
        }
    }
}

/// Any bytes at all are refused with an error, never a panic (a cheap stand-in for the
/// codec's fuzzing, which will reach here through SK payloads).
#[test]
fn junk_never_opens_and_never_panics() {
    let mut x = 0x9e37_79b9_u32;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x as u8
    };
    for (encr, integ) in suites() {
        let c = cipher(encr, integ);
        for len in 0..120 {
            let junk: Vec<u8> = (0..len).map(|_| next()).collect();
            assert!(c.open(&junk[..len / 3], &junk[len / 3..]).is_err());
            assert!(c.open_message(&junk, len + 5).is_err());
        }
    }
}

#[test]
fn short_and_ragged_bodies_are_refused_before_decryption() {
    for (encr, integ) in suites() {
        let c = cipher(encr, integ);
        let min = encr.iv_len() + encr.block_len() + c.icv_len();
        for len in [0, min - 1] {
            assert_eq!(
                c.open(&aad(), &vec![0; len]).unwrap_err(),
                CryptoError::SkTruncated { got: len, min }
            );
        }
        if encr.block_len() > 1 {
            assert_eq!(
                c.open(&aad(), &vec![0; min + 1]).unwrap_err(),
                CryptoError::SkNotBlocks { len: 17, block: 16 }
            );
        }
    }
}

/// AEAD IVs count up per direction (a nonce is never reused, even for the same
/// plaintext); CBC IVs are random.
#[test]
fn ivs_are_never_reused() {
    let gcm = cipher(Encr::AesGcm16 { key_len: 16 }, None);
    let ivs: Vec<Vec<u8>> = (0..3).map(|_| gcm.seal(&aad(), b"same").unwrap()[..8].to_vec()).collect();
    assert_eq!(
        ivs,
        vec![vec![0, 0, 0, 0, 0, 0, 0, 0], vec![0, 0, 0, 0, 0, 0, 0, 1], vec![0, 0, 0, 0, 0, 0, 0, 2]]
    );
    let cbc = cipher(Encr::AesCbc { key_len: 16 }, Some(Integ::HmacSha256_128));
    let a = cbc.seal(&aad(), b"same").unwrap();
    let b = cbc.seal(&aad(), b"same").unwrap();
    assert_ne!(a[..16], b[..16], "random CBC IVs");
    assert_ne!(a, b);
}

/// A pad length byte claiming more padding than there is, under a valid ICV (sealed with
/// ocf directly), is refused.
#[test]
fn an_impossible_pad_length_is_refused() {
    let encr = Encr::AesGcm16 { key_len: 16 };
    let (e, _) = keys(encr, None);
    // The plaintext "\x05": pad length 5 with nothing before it.
    let fw = fw();
    let s = fw.new_session(&ocf::SessionParams::aead(ocf::CipherAlg::AesGcm, &e[..16])).unwrap();
    let nonce = [&e[16..], &[0u8; 8][..]].concat();
    let done =
        s.run(ocf::Request::new(ocf::Op::Encrypt, vec![5u8]).with_iv(&nonce).with_aad(&aad())).unwrap();
    let body = [vec![0u8; 8], done.buf.to_vec(), done.tag().to_vec()].concat();
    assert_eq!(
        cipher(encr, None).open(&aad(), &body).unwrap_err(),
        CryptoError::SkBadPadLength { pad_len: 5, room: 0 }
    );
}

const PY_AEAD: &str = r#"
import sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
alg, keymat, aad, iv, plain, body = (sys.argv[1],) + tuple(bytes.fromhex(a) for a in sys.argv[2:7])
key, salt = keymat[:-4], keymat[-4:]
aead = AESGCM(key) if alg == "gcm" else ChaCha20Poly1305(key)
# Our body for `plain` with IV `iv`: plain, no padding, pad length 0 (RFC 5282 §3).
ours = iv + aead.encrypt(salt + iv, plain + b"\x00", aad)
# Theirs: 3 bytes of padding and pad length 3, IV 0xfedcba9876543210.
theirs_iv = bytes.fromhex("fedcba9876543210")
theirs = theirs_iv + aead.encrypt(salt + theirs_iv, plain + b"\xaa\xbb\xcc\x03", aad)
print(ours.hex(), theirs.hex(), aead.decrypt(salt + body[:8], body[8:], aad).hex())
"#;

/// AES-GCM-16 and ChaCha20-Poly1305 as RFC 5282 and RFC 7634 lay them out, against
/// Python's `cryptography`: our first body equals theirs, theirs (with padding) opens here,
/// and ours decrypts there.
#[test]
fn aead_matches_python_cryptography() {
    for (encr, name) in [(Encr::AesGcm16 { key_len: 32 }, "gcm"), (Encr::ChaCha20Poly1305, "chacha")] {
        let c = cipher(encr, None);
        let (e, _) = keys(encr, None);
        let plain = b"IDi, AUTH, SA, TSi, TSr: the inner payloads".to_vec();
        let body = c.seal(&aad(), &plain).unwrap();
        let args =
            [name.to_string(), to_hex(&e), to_hex(&aad()), to_hex(&[0; 8]), to_hex(&plain), to_hex(&body)];
        let Some(out) = python(PY_AEAD, &args) else { return };
        let parts: Vec<&str> = out.split(' ').collect();
        assert_eq!(to_hex(&body), parts[0], "{name}: our SK body is Python's");
        let theirs = crate::common::hex(parts[1]);
        assert_eq!(&c.open(&aad(), &theirs).unwrap()[..], &plain[..], "{name}: Python's body opens");
        assert_eq!(parts[2], format!("{}00", to_hex(&plain)), "{name}: Python opens ours");
    }
}

const PY_CBC: &str = r#"
import sys, hmac, hashlib
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
ekey, akey, aad, body, plain = (bytes.fromhex(a) for a in sys.argv[1:6])
iv, ct, icv = body[:16], body[16:-16], body[-16:]
# Ours: the ICV is HMAC-SHA-256-128 over IKE header .. end of ciphertext (RFC 7296 §3.14).
ok = hmac.compare_digest(hmac.new(akey, aad + iv + ct, hashlib.sha256).digest()[:16], icv)
d = Cipher(algorithms.AES(ekey), modes.CBC(iv)).decryptor()
pt = d.update(ct) + d.finalize()
got = pt[:len(pt) - 1 - pt[-1]]
# Theirs: IV of 0x11s, padding 0xee bytes.
tiv = bytes([0x11] * 16)
n = (len(plain) + 1 + 15) // 16 * 16
padded = plain + bytes([0xee] * (n - len(plain) - 1)) + bytes([n - len(plain) - 1])
e = Cipher(algorithms.AES(ekey), modes.CBC(tiv)).encryptor()
tct = e.update(padded) + e.finalize()
theirs = tiv + tct + hmac.new(akey, aad + tiv + tct, hashlib.sha256).digest()[:16]
print(ok, got.hex(), theirs.hex())
"#;

/// AES-CBC with HMAC-SHA2-256-128: Python checks our ICV over the whole message up to it
/// and decrypts; Python's message (other padding bytes) opens here.
#[test]
fn cbc_hmac_matches_python_cryptography() {
    let (encr, integ) = (Encr::AesCbc { key_len: 16 }, Some(Integ::HmacSha256_128));
    let c = cipher(encr, integ);
    let (e, a) = keys(encr, integ);
    let plain = b"twenty-one bytes long".to_vec();
    let body = c.seal(&aad(), &plain).unwrap();
    let args = [&e, &a, &aad(), &body, &plain].map(|b| to_hex(b));
    let Some(out) = python(PY_CBC, &args) else { return };
    let parts: Vec<&str> = out.split(' ').collect();
    assert_eq!(parts[0], "True", "Python verifies our ICV");
    assert_eq!(parts[1], to_hex(&plain), "Python decrypts ours");
    let theirs = crate::common::hex(parts[2]);
    assert_eq!(&c.open(&aad(), &theirs).unwrap()[..], &plain[..], "Python's message opens");
}

#[test]
fn keys_of_the_wrong_length_are_named() {
    let fw = fw();
    let gcm = Encr::AesGcm16 { key_len: 16 };
    assert_eq!(
        SkCipher::new(&fw, gcm, None, &[0; 16], &[]).err(),
        Some(CryptoError::KeyLength { what: "SK_e", got: 16, expected: 20 })
    );
    let cbc = Encr::AesCbc { key_len: 16 };
    assert_eq!(
        SkCipher::new(&fw, cbc, Some(Integ::HmacSha256_128), &[0; 16], &[0; 16]).err(),
        Some(CryptoError::KeyLength { what: "SK_a", got: 16, expected: 32 })
    );
}
