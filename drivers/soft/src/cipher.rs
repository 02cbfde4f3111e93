//! Plain ciphers: AES-CBC, AES-CTR, 3DES-CBC and NULL, in place over a validated payload.
//!
//! All three go through aws-lc-rs's `cipher` module (unpadded CBC, CTR), which measured
//! fastest here at every size: AES-128-CBC decrypt 10.8 GB/s at 8 KiB (RustCrypto 5.7,
//! OpenSSL 9.5), CBC encrypt 1.4 GB/s (serial by nature; RustCrypto 1.1), CTR 9.1 GB/s
//! (RustCrypto 4.3), 3DES 34 MB/s (OpenSSL 31, RustCrypto 12). Keys are expanded once per
//! session; aws-lc wipes them when the key objects are freed.

// 3DES is deprecated for new designs (NIST SP 800-131A), and aws-lc-rs says so; ocf offers
// it because IPsec peers still negotiate it (RFC 2451) and the papers ocf follows
// measure it (Leffler's "Cryptographic Device Support for FreeBSD", Tables 5-8).
#[allow(deprecated)]
use aws_lc_rs::cipher::DES_EDE3_FOR_LEGACY_USE_ONLY;
use aws_lc_rs::cipher::{
    DecryptingKey, DecryptionContext, EncryptingKey, EncryptionContext, UnboundCipherKey, AES_128, AES_192,
    AES_256,
};
use aws_lc_rs::iv::FixedLength;
use ocf::{CipherAlg, Error};

/// A cipher with its expanded keys, chosen once per session.
// `Null` is much smaller than `Keyed`, but there is one value per session, already boxed
// with the session; boxing `Keyed` would add a pointer chase to every request.
#[allow(clippy::large_enum_variant)]
pub enum Cipher {
    /// CBC (AES or 3DES) or CTR; the IV length tells the context type apart.
    Keyed { enc: EncryptingKey, dec: DecryptingKey, iv_len: usize, alg: CipherAlg },
    /// RFC 2410: output = input.
    Null,
}

impl Cipher {
    /// `key` has a length `SessionParams::validate` accepted for `alg`.
    pub fn new(alg: CipherAlg, key: &[u8]) -> Result<Cipher, Error> {
        let lib_alg = match (alg, key.len()) {
            (CipherAlg::Null, _) => return Ok(Cipher::Null),
            (CipherAlg::AesCbc | CipherAlg::AesCtr, 16) => &AES_128,
            (CipherAlg::AesCbc | CipherAlg::AesCtr, 24) => &AES_192,
            (CipherAlg::AesCbc | CipherAlg::AesCtr, 32) => &AES_256,
            #[allow(deprecated)]
            (CipherAlg::TdesCbc, 24) => &DES_EDE3_FOR_LEGACY_USE_ONLY,
            _ => return Err(Error::UnsupportedCipher(alg)),
        };
        let bad = |_| Error::DriverFailure("soft: aws-lc-rs rejected the cipher key");
        let unbound = || UnboundCipherKey::new(lib_alg, key).map_err(bad);
        let (enc, dec) = if alg == CipherAlg::AesCtr {
            (EncryptingKey::ctr(unbound()?).map_err(bad)?, DecryptingKey::ctr(unbound()?).map_err(bad)?)
        } else {
            (EncryptingKey::cbc(unbound()?).map_err(bad)?, DecryptingKey::cbc(unbound()?).map_err(bad)?)
        };
        Ok(Cipher::Keyed { enc, dec, iv_len: alg.iv_len(), alg })
    }

    /// The algorithm (`Null` included).
    pub fn alg(&self) -> CipherAlg {
        match self {
            Cipher::Keyed { alg, .. } => *alg,
            Cipher::Null => CipherAlg::Null,
        }
    }

    /// Encrypts `data` in place. `iv` and the length of `data` were validated.
    pub fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let Cipher::Keyed { enc, iv_len, .. } = self else { return Ok(()) };
        let ctx = match *iv_len {
            16 => EncryptionContext::Iv128(FixedLength::from(iv_array::<16>(iv)?)),
            _ => EncryptionContext::Iv64(FixedLength::from(iv_array::<8>(iv)?)),
        };
        enc.less_safe_encrypt(data, ctx)
            .map(|_| ())
            .map_err(|_| Error::DriverFailure("soft: encryption failed"))
    }

    /// Decrypts `data` in place.
    pub fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let Cipher::Keyed { dec, iv_len, .. } = self else { return Ok(()) };
        let ctx = match *iv_len {
            16 => DecryptionContext::Iv128(FixedLength::from(iv_array::<16>(iv)?)),
            _ => DecryptionContext::Iv64(FixedLength::from(iv_array::<8>(iv)?)),
        };
        dec.decrypt(data, ctx).map(|_| ()).map_err(|_| Error::DriverFailure("soft: decryption failed"))
    }
}

fn iv_array<const N: usize>(iv: &[u8]) -> Result<[u8; N], Error> {
    iv.try_into().map_err(|_| Error::BadIvLength { expected: N, got: iv.len() })
}
