//! libcrypto's ChaCha20-Poly1305 on a context keyed once: the whole-message path
//! (`crate::aead`, from 2 KiB) and the multi-part path (`crate::stream`, every size) both
//! run their messages through [`ChachaCtx`].
//!
//! Per message: the nonce and direction (`EVP_CipherInit_ex` with no cipher and no key), the
//! AAD, the payload in place, then the final call and the tag (written, or set and checked
//! by the final call in constant time). The `openssl` crate's safe calls cost 17-28 ns more
//! per message than raw EVP calls (its IV-length assertion asks the provider for a
//! parameter; `examples/chacha_cost`): 3% at 1 KiB, 1% at 8 KiB, not worth `unsafe`.

use ocf::{Error, Op};
use openssl::cipher_ctx::CipherCtx;

use crate::cpu::clear_upper_vector_state;
use crate::pool::Keyed;

/// A libcrypto ChaCha20-Poly1305 context holding a key.
pub(crate) struct ChachaCtx(CipherCtx);

impl Keyed for ChachaCtx {
    fn keyed(key: &[u8]) -> Result<ChachaCtx, Error> {
        let fail = |_| Error::DriverFailure("soft: libcrypto ChaCha20-Poly1305 setup failed");
        // Fetched once, from the driver's own library context (see `evp::lib_ctx`).
        let cipher = crate::evp::chacha20_poly1305()
            .ok_or(Error::DriverFailure("soft: libcrypto's ChaCha20-Poly1305 is unavailable"))?;
        let mut c = CipherCtx::new().map_err(fail)?;
        // The `openssl` crate asserts on a key shorter than the cipher's (32 bytes, which
        // `SessionParams::validate` and `Aead::new` checked).
        c.encrypt_init(Some(cipher), Some(key), None).map_err(fail)?;
        Ok(ChachaCtx(c))
    }

    fn arm(&mut self, nonce: &[u8], encrypt: bool) -> Result<(), Error> {
        if nonce.len() != 12 {
            return Err(Error::BadIvLength { expected: 12, got: nonce.len() });
        }
        let fail = |_| Error::DriverFailure("soft: libcrypto ChaCha20-Poly1305 nonce setup failed");
        // A new nonce resets the message state (lengths, Poly1305 key, TLS mode) and keeps
        // the key; the direction may change from message to message.
        if encrypt {
            self.0.encrypt_init(None, None, Some(nonce)).map_err(fail)
        } else {
            self.0.decrypt_init(None, None, Some(nonce)).map_err(fail)
        }
    }
}

impl ChachaCtx {
    /// The library context, to tell contexts apart in tests.
    #[cfg(test)]
    pub(crate) fn raw(&self) -> *mut openssl_sys::EVP_CIPHER_CTX {
        use foreign_types::ForeignTypeRef;
        self.0.as_ptr()
    }

    /// AAD (all of it before the first payload byte), then payload in place.
    pub(crate) fn update(&mut self, aad: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let fail = |_| Error::DriverFailure("soft: libcrypto ChaCha20-Poly1305 update failed");
        if !aad.is_empty() {
            self.0.cipher_update(aad, None).map_err(fail)?;
        }
        if !data.is_empty() {
            let n = data.len();
            self.0.cipher_update_inplace(data, n).map_err(fail)?;
        }
        clear_upper_vector_state();
        Ok(())
    }

    /// Encrypt: writes the 16-byte tag. Decrypt: checks it, `AuthFailed` on a mismatch.
    pub(crate) fn finish(&mut self, op: Op, tag: &mut [u8]) -> Result<(), Error> {
        if op == Op::Encrypt {
            self.write_tag(tag)
        } else {
            self.check_tag(tag)
        }
    }

    fn write_tag(&mut self, tag: &mut [u8]) -> Result<(), Error> {
        let fail = |_| Error::DriverFailure("soft: libcrypto ChaCha20-Poly1305 final failed");
        let result = self.0.cipher_final(&mut []).map_err(fail).and_then(|_| self.0.tag(tag).map_err(fail));
        clear_upper_vector_state();
        result
    }

    fn check_tag(&mut self, tag: &[u8]) -> Result<(), Error> {
        let fail = |_| Error::DriverFailure("soft: libcrypto ChaCha20-Poly1305 final failed");
        self.0.set_tag(tag).map_err(fail)?;
        // The final call compares the tags in constant time and fails on a mismatch.
        let result = self.0.cipher_final(&mut []).map(|_| ()).map_err(|_| Error::AuthFailed);
        clear_upper_vector_state();
        result
    }

    /// One whole message, sealed in place.
    pub(crate) fn seal(
        &mut self,
        nonce: &[u8],
        aad: &[u8],
        data: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), Error> {
        self.arm(nonce, true)?;
        self.update(aad, data)?;
        self.write_tag(tag)
    }

    /// One whole message, opened in place (the caller wipes `data` on failure).
    pub(crate) fn open(
        &mut self,
        nonce: &[u8],
        aad: &[u8],
        data: &mut [u8],
        tag: &[u8],
    ) -> Result<(), Error> {
        self.arm(nonce, false)?;
        self.update(aad, data)?;
        self.check_tag(tag)
    }
}
