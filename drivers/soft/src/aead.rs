//! AEADs: AES-GCM and ChaCha20-Poly1305.
//!
//! AES-GCM goes through aws-lc-rs: measured here it is 1.9-2.5x every other library at
//! 16 B, 1 KiB and 8 KiB (10 GB/s at 8 KiB).
//!
//! ChaCha20-Poly1305 goes through aws-lc-rs for messages below 2 KiB and through OpenSSL's
//! libcrypto from 2 KiB up, with one libcrypto context per session and direction, keyed
//! once and re-armed with only the nonce per message ([`ChachaCtx`]). Measured per message
//! (`examples/chacha_cost`, pinned, ns at 16 B / 256 B / 1 KiB / 8 KiB): aws-lc-rs 156 / 246 /
//! 564 / 3,229; libcrypto on a kept context 409 / 448 / 596 / 2,474. libcrypto pays ~320 ns
//! per message over its bulk speed (the nonce setup ~70 ns, a separate ChaCha20 call for the
//! Poly1305 key, the final call and the tag parameter), and wins once its faster AVX-512
//! ChaCha20 amortizes that: the two cross between 1 and 2 KiB. Neither reaches `openssl
//! speed -evp chacha20-poly1305`, which (OpenSSL 3.0, even with `-aead`) streams one
//! `EVP_EncryptUpdate` per "message" with no nonce, Poly1305 key or tag: 296 ns at 1 KiB,
//! 2,173 ns at 8 KiB on the same machine.
//!
//! A libcrypto context serves one message at a time. It is taken with `try_lock`, so a
//! session used by several threads at once never waits: the thread that loses the race
//! uses aws-lc-rs for that message (same result, a little slower).

use std::sync::{Arc, Mutex};

use aws_lc_rs::aead::{self, LessSafeKey, Nonce, UnboundKey};
use ocf::{CipherAlg, Error};

use crate::chacha::ChachaCtx;
use crate::pool::{Keyed, Pool};
use crate::stream::GcmCtx;

/// From this payload length up, ChaCha20-Poly1305 uses libcrypto (see the module docs).
pub const CHACHA_LIBCRYPTO_MIN_LEN: usize = 2048;

/// Multi-part sessions: the session's pool of keyed contexts its messages start from (see
/// `crate::pool` and `crate::stream`).
pub(crate) enum StreamSource {
    Gcm(Arc<Pool<GcmCtx>>),
    Chacha(Arc<Pool<ChachaCtx>>),
}

pub struct Aead {
    alg: CipherAlg,
    key: LessSafeKey,
    /// Multi-part sessions only: where each message's streaming state comes from.
    pub(crate) streams: Option<StreamSource>,
    /// ChaCha20-Poly1305 only: libcrypto contexts, keyed once.
    libcrypto: Option<ChachaContexts>,
}

struct ChachaContexts {
    seal: Mutex<ChachaCtx>,
    open: Mutex<ChachaCtx>,
}

impl Aead {
    /// `multipart`: keep a pool of keyed contexts for streaming messages (see `crate::stream`).
    pub fn new(alg: CipherAlg, key: &[u8], multipart: bool) -> Result<Aead, Error> {
        let lib_alg = match (alg, key.len()) {
            (CipherAlg::AesGcm, 16) => &aead::AES_128_GCM,
            (CipherAlg::AesGcm, 24) => &aead::AES_192_GCM,
            (CipherAlg::AesGcm, 32) => &aead::AES_256_GCM,
            (CipherAlg::ChaCha20Poly1305, 32) => &aead::CHACHA20_POLY1305,
            _ => return Err(Error::UnsupportedCipher(alg)),
        };
        let unbound = UnboundKey::new(lib_alg, key)
            .map_err(|_| Error::DriverFailure("soft: aws-lc-rs rejected the AEAD key"))?;
        let libcrypto = match alg {
            CipherAlg::ChaCha20Poly1305 => Some(ChachaContexts {
                seal: Mutex::new(ChachaCtx::keyed(key)?),
                open: Mutex::new(ChachaCtx::keyed(key)?),
            }),
            _ => None,
        };
        let streams = multipart.then(|| match alg {
            CipherAlg::AesGcm => StreamSource::Gcm(Arc::new(Pool::new(key))),
            _ => StreamSource::Chacha(Arc::new(Pool::new(key))),
        });
        Ok(Aead { alg, key: LessSafeKey::new(unbound), streams, libcrypto })
    }

    pub fn alg(&self) -> CipherAlg {
        self.alg
    }

    /// The libcrypto context for a message of `len` bytes, if that is the faster path and
    /// the context is free.
    fn libcrypto_ctx(
        &self,
        len: usize,
        pick: fn(&ChachaContexts) -> &Mutex<ChachaCtx>,
    ) -> Option<std::sync::MutexGuard<'_, ChachaCtx>> {
        let ctxs = self.libcrypto.as_ref().filter(|_| len >= CHACHA_LIBCRYPTO_MIN_LEN)?;
        pick(ctxs).try_lock().ok()
    }

    /// Encrypts `data` in place and writes the 16-byte tag.
    pub fn seal(&self, nonce: &[u8], aad: &[u8], data: &mut [u8], tag: &mut [u8]) -> Result<(), Error> {
        if let Some(mut ctx) = self.libcrypto_ctx(data.len(), |c| &c.seal) {
            return ctx.seal(nonce, aad, data, tag);
        }
        let nonce = Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| Error::BadIvLength { expected: 12, got: nonce.len() })?;
        let t = self
            .key
            .seal_in_place_separate_tag(nonce, aead::Aad::from(aad), data)
            .map_err(|_| Error::DriverFailure("soft: AEAD seal failed"))?;
        tag.copy_from_slice(t.as_ref());
        Ok(())
    }

    /// Verifies `tag` and decrypts `data` in place. On failure `data` is zeroed so that no
    /// unauthenticated plaintext is released (both libraries decrypt before they compare).
    pub fn open(&self, nonce: &[u8], aad: &[u8], data: &mut [u8], tag: &[u8]) -> Result<(), Error> {
        let result = self.open_unchecked(nonce, aad, data, tag);
        if result.is_err() {
            data.fill(0);
        }
        result
    }

    fn open_unchecked(&self, nonce: &[u8], aad: &[u8], data: &mut [u8], tag: &[u8]) -> Result<(), Error> {
        if let Some(mut ctx) = self.libcrypto_ctx(data.len(), |c| &c.open) {
            return ctx.open(nonce, aad, data, tag);
        }
        let nonce = Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| Error::BadIvLength { expected: 12, got: nonce.len() })?;
        self.key
            .open_in_place_separate_tag(nonce, aead::Aad::from(aad), tag, data)
            .map(|_| ())
            .map_err(|_| Error::AuthFailed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8439 §2.8.2's key and nonce through both libraries (the full vector is in the
    /// conformance suite), and a forged tag through both.
    #[test]
    fn libcrypto_and_aws_lc_paths_agree_with_rfc8439() {
        let hex = |s: &str| -> Vec<u8> {
            (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
        };
        let key = hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f");
        let nonce = hex("070000004041424344454647");
        let aad = hex("50515253c0c1c2c3c4c5c6c7");
        // RFC 8439's plaintext, repeated past the libcrypto threshold; the first 114 bytes
        // of ciphertext must equal the RFC's (a stream cipher), and both libraries must agree.
        let sunscreen: &[u8] = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
        let pt: Vec<u8> = sunscreen.iter().cycle().take(CHACHA_LIBCRYPTO_MIN_LEN + 100).copied().collect();
        let want_ct_prefix = hex("d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d6");
        let a = Aead::new(CipherAlg::ChaCha20Poly1305, &key, false).unwrap();
        // libcrypto (the context is free)
        let mut buf = pt.to_vec();
        let mut tag = [0u8; 16];
        a.seal(&nonce, &aad, &mut buf, &mut tag).unwrap();
        assert_eq!(buf[..32], want_ct_prefix[..]);
        let ct = buf.clone();
        // aws-lc-rs (the context is held, as when another thread has it)
        let held = a.libcrypto.as_ref().unwrap().seal.lock().unwrap();
        let mut buf2 = pt.to_vec();
        let mut tag2 = [0u8; 16];
        a.seal(&nonce, &aad, &mut buf2, &mut tag2).unwrap();
        drop(held);
        assert_eq!((buf2, tag2), (ct.clone(), tag));
        // Open with each path; a forged tag fails and wipes the buffer on each path.
        for hold in [false, true] {
            let _held = hold.then(|| a.libcrypto.as_ref().unwrap().open.lock().unwrap());
            let mut b = ct.clone();
            a.open(&nonce, &aad, &mut b, &tag).unwrap();
            assert_eq!(b, pt);
            let mut b = ct.clone();
            let mut bad = tag;
            bad[15] ^= 1;
            assert_eq!(a.open(&nonce, &aad, &mut b, &bad), Err(Error::AuthFailed));
            assert!(b.iter().all(|x| *x == 0));
        }
    }
}
