//! AEADs: AES-GCM and ChaCha20-Poly1305.
//!
//! AES-GCM goes through aws-lc-rs (its VAES/AVX-512 GCM was ~4x `openssl speed` here).
//! ChaCha20-Poly1305 goes through aws-lc-rs for short messages and through OpenSSL's
//! libcrypto with a per-session, reused cipher context for long ones (libcrypto's AVX-512
//! ChaCha20 wins from about 1 KiB, and only when the context is reused: setting one up per
//! message halves it). The context is taken with `try_lock`: a session used by several
//! threads at once never waits; the loser of the race takes the aws-lc-rs path instead.

use std::sync::Mutex;

use aws_lc_rs::aead::{self, LessSafeKey, Nonce, UnboundKey};
use ocf::{CipherAlg, Error};
use openssl::cipher::Cipher as OsslCipher;
use openssl::cipher_ctx::CipherCtx;

/// From this payload length up, ChaCha20-Poly1305 uses libcrypto (see module docs).
pub(crate) const CHACHA_OPENSSL_MIN_LEN: usize = 1024;

pub(crate) struct Aead {
    key: LessSafeKey,
    /// ChaCha20-Poly1305 only: reusable libcrypto contexts, keyed once.
    chacha_ctx: Option<ChachaCtx>,
}

struct ChachaCtx {
    enc: Mutex<CipherCtx>,
    dec: Mutex<CipherCtx>,
}

impl Aead {
    pub(crate) fn new(alg: CipherAlg, key: &[u8]) -> Result<Aead, Error> {
        let lib_alg = match (alg, key.len()) {
            (CipherAlg::AesGcm, 16) => &aead::AES_128_GCM,
            (CipherAlg::AesGcm, 24) => &aead::AES_192_GCM,
            (CipherAlg::AesGcm, 32) => &aead::AES_256_GCM,
            (CipherAlg::ChaCha20Poly1305, 32) => &aead::CHACHA20_POLY1305,
            _ => return Err(Error::UnsupportedCipher(alg)),
        };
        let unbound = UnboundKey::new(lib_alg, key)
            .map_err(|_| Error::DriverFailure("soft: aws-lc-rs rejected the AEAD key"))?;
        let chacha_ctx = match alg {
            CipherAlg::ChaCha20Poly1305 => Some(ChachaCtx::new(key)?),
            _ => None,
        };
        Ok(Aead { key: LessSafeKey::new(unbound), chacha_ctx })
    }

    /// Encrypts `data` in place and writes the 16-byte tag.
    pub(crate) fn seal(
        &self,
        nonce: &[u8],
        aad: &[u8],
        data: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), Error> {
        if let Some(ctx) = self.chacha_ctx.as_ref().filter(|_| data.len() >= CHACHA_OPENSSL_MIN_LEN) {
            if let Ok(mut c) = ctx.enc.try_lock() {
                return ossl_seal(&mut c, nonce, aad, data, tag);
            }
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
    /// unauthenticated plaintext is released.
    pub(crate) fn open(&self, nonce: &[u8], aad: &[u8], data: &mut [u8], tag: &[u8]) -> Result<(), Error> {
        let result = self.open_inner(nonce, aad, data, tag);
        if result.is_err() {
            data.fill(0);
        }
        result
    }

    fn open_inner(&self, nonce: &[u8], aad: &[u8], data: &mut [u8], tag: &[u8]) -> Result<(), Error> {
        if let Some(ctx) = self.chacha_ctx.as_ref().filter(|_| data.len() >= CHACHA_OPENSSL_MIN_LEN) {
            if let Ok(mut c) = ctx.dec.try_lock() {
                return ossl_open(&mut c, nonce, aad, data, tag);
            }
        }
        let nonce = Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| Error::BadIvLength { expected: 12, got: nonce.len() })?;
        self.key
            .open_in_place_separate_tag(nonce, aead::Aad::from(aad), tag, data)
            .map(|_| ())
            .map_err(|_| Error::AuthFailed)
    }
}

impl ChachaCtx {
    fn new(key: &[u8]) -> Result<ChachaCtx, Error> {
        let fail = |_| Error::DriverFailure("soft: libcrypto ChaCha20-Poly1305 setup failed");
        let mut enc = CipherCtx::new().map_err(fail)?;
        enc.encrypt_init(Some(OsslCipher::chacha20_poly1305()), Some(key), None).map_err(fail)?;
        let mut dec = CipherCtx::new().map_err(fail)?;
        dec.decrypt_init(Some(OsslCipher::chacha20_poly1305()), Some(key), None).map_err(fail)?;
        Ok(ChachaCtx { enc: Mutex::new(enc), dec: Mutex::new(dec) })
    }
}

fn ossl_seal(
    c: &mut CipherCtx,
    nonce: &[u8],
    aad: &[u8],
    data: &mut [u8],
    tag: &mut [u8],
) -> Result<(), Error> {
    let fail = |_| Error::DriverFailure("soft: libcrypto seal failed");
    c.encrypt_init(None, None, Some(nonce)).map_err(fail)?;
    if !aad.is_empty() {
        c.cipher_update(aad, None).map_err(fail)?;
    }
    let n = data.len();
    c.cipher_update_inplace(data, n).map_err(fail)?;
    c.cipher_final(&mut []).map_err(fail)?;
    c.tag(tag).map_err(fail)
}

fn ossl_open(c: &mut CipherCtx, nonce: &[u8], aad: &[u8], data: &mut [u8], tag: &[u8]) -> Result<(), Error> {
    let fail = |_| Error::DriverFailure("soft: libcrypto open failed");
    c.decrypt_init(None, None, Some(nonce)).map_err(fail)?;
    if !aad.is_empty() {
        c.cipher_update(aad, None).map_err(fail)?;
    }
    let n = data.len();
    c.cipher_update_inplace(data, n).map_err(fail)?;
    c.set_tag(tag).map_err(fail)?;
    c.cipher_final(&mut []).map(|_| ()).map_err(|_| Error::AuthFailed)
}
