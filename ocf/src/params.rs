//! Session parameters, and the one place that validates them.
//!
//! Like FreeBSD's `check_csp()`, [`SessionParams::validate`] is the only function that
//! decides whether a combination of mode, algorithms and key/tag lengths is legal. Drivers
//! are only asked to probe parameters that passed it, so no driver re-checks lengths.

use crate::alg::{CipherAlg, CompAlg, DigestAlg, MacAlg};
use crate::asym::{self, AsymAlg, AsymKey, AsymKind, PrivateFormat, PublicFormat};
use crate::error::Error;
pub use crate::key::Key;

/// What a session does. The eight modes of the framework.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub enum Mode {
    /// Encrypt or decrypt with a plain cipher (no authentication).
    Cipher { alg: CipherAlg, key: Key },
    /// Compute or verify an unkeyed digest.
    Digest { alg: DigestAlg },
    /// Compute or verify a MAC, possibly truncated to `tag_len` bytes.
    Mac { alg: MacAlg, key: Key, tag_len: usize },
    /// Authenticated encryption with associated data.
    Aead { alg: CipherAlg, key: Key, tag_len: usize },
    /// Encrypt-then-MAC, as ESP uses it: encrypt the payload, then MAC `AAD || ciphertext`;
    /// decrypt verifies the MAC first and decrypts only if it matched.
    CipherThenMac { cipher: CipherAlg, cipher_key: Key, mac: MacAlg, mac_key: Key, tag_len: usize },
    /// Lossless compression ([`crate::Op::Compress`] / [`crate::Op::Decompress`]), as the
    /// BSDs' OCF carried CRYPTO_DEFLATE_COMP beside its ciphers. The result's length
    /// differs from the input's: it goes to the request's `out` buffer, whose room is the
    /// limit, and its length comes back in [`crate::RequestFields::result_len`] (FreeBSD's
    /// crp_olen). See [`crate::Op::Compress`] for the rules.
    Compress { alg: CompAlg },
    /// A public-key algorithm with its key (see [`crate::asym`]): signatures, key
    /// agreement, key encapsulation, modular exponentiation. The result's length comes back
    /// in [`crate::RequestFields::result_len`]; see [`crate::Op`] for each operation's
    /// buffers.
    Asymmetric { alg: AsymAlg, key: AsymKey },
    /// Random bytes ([`crate::Op::Random`]): from the kernel on the CPU, or from a device's
    /// own source checked by the SP 800-90B health tests.
    Random,
}

impl Mode {
    /// Short name used in error messages and statistics.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Cipher { .. } => "cipher",
            Mode::Digest { .. } => "digest",
            Mode::Mac { .. } => "mac",
            Mode::Aead { .. } => "aead",
            Mode::CipherThenMac { .. } => "cipher+mac",
            Mode::Compress { .. } => "compress",
            Mode::Asymmetric { .. } => "asymmetric",
            Mode::Random => "random",
        }
    }
}

/// Everything a driver needs to set up a session.
#[derive(Clone, Debug)]
pub struct SessionParams {
    pub mode: Mode,
    /// Deliver this session's results in submit order (FreeBSD's
    /// CRYPTO_F_ASYNC_KEEPORDER, made a session property). Costs a lock and a reorder
    /// buffer per completion; off by default.
    pub ordered: bool,
    /// The session carries multi-part messages ([`crate::Part`]): a message fed in pieces,
    /// as OpenSSL's update calls or a file read in chunks do. Only drivers whose
    /// [`crate::Capabilities::multipart`] is set are considered. Off by default.
    pub multipart: bool,
}

impl SessionParams {
    /// A plain cipher session.
    pub fn cipher(alg: CipherAlg, key: impl Into<Key>) -> SessionParams {
        SessionParams { mode: Mode::Cipher { alg, key: key.into() }, ordered: false, multipart: false }
    }

    /// An unkeyed digest session.
    pub fn digest(alg: DigestAlg) -> SessionParams {
        SessionParams { mode: Mode::Digest { alg }, ordered: false, multipart: false }
    }

    /// A MAC session with the full output length; see [`SessionParams::with_tag_len`].
    pub fn mac(alg: MacAlg, key: impl Into<Key>) -> SessionParams {
        SessionParams {
            mode: Mode::Mac { alg, key: key.into(), tag_len: alg.output_len() },
            ordered: false,
            multipart: false,
        }
    }

    /// An HMAC session over `digest` with the full output length.
    pub fn hmac(digest: DigestAlg, key: impl Into<Key>) -> SessionParams {
        SessionParams::mac(MacAlg::Hmac(digest), key)
    }

    /// An AEAD session with the algorithm's full tag.
    pub fn aead(alg: CipherAlg, key: impl Into<Key>) -> SessionParams {
        SessionParams {
            mode: Mode::Aead { alg, key: key.into(), tag_len: 16 },
            ordered: false,
            multipart: false,
        }
    }

    /// An encrypt-then-MAC session with the MAC's full output length.
    pub fn cipher_then_mac(
        cipher: CipherAlg,
        cipher_key: impl Into<Key>,
        mac: MacAlg,
        mac_key: impl Into<Key>,
    ) -> SessionParams {
        SessionParams {
            mode: Mode::CipherThenMac {
                cipher,
                cipher_key: cipher_key.into(),
                mac,
                mac_key: mac_key.into(),
                tag_len: mac.output_len(),
            },
            ordered: false,
            multipart: false,
        }
    }

    /// A compression session.
    pub fn compress(alg: CompAlg) -> SessionParams {
        SessionParams { mode: Mode::Compress { alg }, ordered: false, multipart: false }
    }

    /// A public-key session: `alg` with `key`.
    pub fn asymmetric(alg: AsymAlg, key: AsymKey) -> SessionParams {
        SessionParams { mode: Mode::Asymmetric { alg, key }, ordered: false, multipart: false }
    }

    /// A random-bytes session.
    pub fn random() -> SessionParams {
        SessionParams { mode: Mode::Random, ordered: false, multipart: false }
    }

    /// The size in bits of an asymmetric session's key (curve, group or modulus); 0 for
    /// other modes. Valid parameters only (the size is read from the key, as `validate`
    /// checks it).
    pub fn key_bits(&self) -> usize {
        match &self.mode {
            Mode::Asymmetric { alg, key } => asym_key_bits(*alg, key).unwrap_or(0),
            _ => 0,
        }
    }

    /// Sets the tag/MAC length (truncation, e.g. 12 for HMAC-SHA1-96). No effect on modes
    /// without a tag.
    pub fn with_tag_len(mut self, len: usize) -> SessionParams {
        match &mut self.mode {
            Mode::Mac { tag_len, .. } | Mode::Aead { tag_len, .. } | Mode::CipherThenMac { tag_len, .. } => {
                *tag_len = len
            }
            Mode::Cipher { .. }
            | Mode::Digest { .. }
            | Mode::Compress { .. }
            | Mode::Asymmetric { .. }
            | Mode::Random => {}
        }
        self
    }

    /// Builder: results are delivered in submit order.
    pub fn ordered(mut self) -> SessionParams {
        self.ordered = true;
        self
    }

    /// Builder: the session carries multi-part messages (see [`SessionParams::multipart`]).
    pub fn multipart(mut self) -> SessionParams {
        self.multipart = true;
        self
    }

    /// The length of the tag, MAC or digest a request produces or checks (0 for ciphers).
    pub fn tag_len(&self) -> usize {
        match &self.mode {
            Mode::Cipher { .. } | Mode::Compress { .. } | Mode::Asymmetric { .. } | Mode::Random => 0,
            Mode::Digest { alg } => alg.output_len(),
            Mode::Mac { tag_len, .. } | Mode::Aead { tag_len, .. } | Mode::CipherThenMac { tag_len, .. } => {
                *tag_len
            }
        }
    }

    /// The cipher, if the mode has one.
    pub fn cipher_alg(&self) -> Option<CipherAlg> {
        match &self.mode {
            Mode::Cipher { alg, .. } | Mode::Aead { alg, .. } => Some(*alg),
            Mode::CipherThenMac { cipher, .. } => Some(*cipher),
            Mode::Digest { .. }
            | Mode::Mac { .. }
            | Mode::Compress { .. }
            | Mode::Asymmetric { .. }
            | Mode::Random => None,
        }
    }

    /// The one place where session parameters are checked. Every later stage — driver
    /// probing, driver session setup, request validation — may assume they are legal.
    pub fn validate(&self) -> Result<(), Error> {
        fn cipher_key(alg: CipherAlg, key: &Key) -> Result<(), Error> {
            match alg.key_lens() {
                Some(allowed) if !allowed.contains(&key.len()) => {
                    Err(Error::BadKeyLength { what: cipher_name(alg), got: key.len(), allowed })
                }
                _ if alg == CipherAlg::TdesCbc => check_tdes_key(key.as_bytes()),
                _ => Ok(()),
            }
        }
        fn mac_key_and_len(alg: MacAlg, key: &Key, tag_len: usize) -> Result<(), Error> {
            if key.is_empty() {
                return Err(Error::BadMacKeyLength { got: 0 });
            }
            if tag_len < alg.min_output_len() || tag_len > alg.output_len() {
                return Err(Error::BadTagLength { got: tag_len, allowed: mac_len_rule(alg) });
            }
            Ok(())
        }
        match &self.mode {
            Mode::Cipher { alg, key } => {
                if alg.is_aead() {
                    return Err(Error::InvalidParams("an AEAD cannot be used as a plain cipher"));
                }
                cipher_key(*alg, key)
            }
            Mode::Digest { .. } => Ok(()),
            Mode::Mac { alg, key, tag_len } => mac_key_and_len(*alg, key, *tag_len),
            Mode::Aead { alg, key, tag_len } => {
                if !alg.is_aead() {
                    return Err(Error::InvalidParams(
                        "not an AEAD: use cipher+mac mode for encrypt-then-MAC",
                    ));
                }
                cipher_key(*alg, key)?;
                if !alg.tag_lens().contains(tag_len) {
                    return Err(Error::BadTagLength { got: *tag_len, allowed: "16" });
                }
                Ok(())
            }
            Mode::CipherThenMac { cipher, cipher_key: ck, mac, mac_key, tag_len } => {
                if self.multipart {
                    // Its users (ESP, TLS 1.0 records) hold whole packets; no client needs it.
                    return Err(Error::InvalidParams(
                        "multi-part messages are offered for cipher, digest, MAC and AEAD sessions, not cipher+mac",
                    ));
                }
                if cipher.is_aead() {
                    return Err(Error::InvalidParams("an AEAD needs no separate MAC"));
                }
                cipher_key(*cipher, ck)?;
                mac_key_and_len(*mac, mac_key, *tag_len)
            }
            // A packet is compressed whole (IPComp's unit); no client streams compression.
            Mode::Compress { .. } if self.multipart => {
                Err(Error::InvalidParams("multi-part messages are not offered for compression sessions"))
            }
            Mode::Compress { .. } => Ok(()),
            Mode::Asymmetric { .. } | Mode::Random if self.multipart => Err(Error::InvalidParams(
                "multi-part messages are not offered for asymmetric or random sessions",
            )),
            Mode::Asymmetric { alg, key } => validate_asym_key(*alg, key),
            Mode::Random => Ok(()),
        }
    }
}

/// Whether `key` is a key `alg` can hold, of a size it accepts. Encodings are parsed by the
/// driver's library when the session is made (a key that does not parse fails there with
/// [`Error::BadKey`]); what is checked here is what needs no library: the kind of key, the
/// lengths of raw forms, and the sizes of moduli.
fn validate_asym_key(alg: AsymAlg, key: &AsymKey) -> Result<(), Error> {
    let kind = alg.kind();
    match (kind, key) {
        (AsymKind::ModExp, AsymKey::ModExp { exponent, modulus }) => {
            let bits = asym_key_bits(alg, key)?;
            if bits == 0 || modulus.last().is_none_or(|b| b & 1 == 0) {
                return Err(Error::BadKey { why: "the modulus must be odd and greater than one" });
            }
            if bits > asym::MODEXP_MAX_BITS {
                return Err(Error::KeyTooLarge { bits, max: asym::MODEXP_MAX_BITS });
            }
            if exponent.len() > modulus.len() {
                return Err(Error::BadKey { why: "the exponent is longer than the modulus" });
            }
            return Ok(());
        }
        (AsymKind::ModExp, _) => {
            return Err(Error::BadKey { why: "modexp takes an exponent and a modulus (AsymKey::ModExp)" });
        }
        (_, AsymKey::ModExp { .. }) => {
            return Err(Error::BadKey { why: "an exponent and modulus are modexp's key only" });
        }
        (AsymKind::Agreement, AsymKey::Public(_)) => {
            return Err(Error::BadKey {
                why: "key agreement needs a private key (the peer's public value comes with each request)",
            });
        }
        _ => {}
    }
    // Sizes: RSA moduli within bounds, read from the key (or the size asked of generation).
    asym_key_bits(alg, key)?;
    let raw_len = |what: &'static str, got: usize, expected: usize| {
        if got == expected {
            Ok(())
        } else {
            Err(Error::BadInputLength { what, got, expected })
        }
    };
    match key {
        AsymKey::Private(k) if k.format() == PrivateFormat::Raw => match alg {
            AsymAlg::X25519 | AsymAlg::Ed25519 => raw_len("raw private key", k.bytes().len(), 32),
            AsymAlg::Ecdh(c) | AsymAlg::Ecdsa { curve: c, .. } => {
                raw_len("raw private key", k.bytes().len(), c.field_len())
            }
            AsymAlg::Ffdh(g) if k.bytes().is_empty() || k.bytes().len() > g.bytes() => {
                Err(Error::BadKey { why: "a MODP exponent is 1 to the prime's length bytes" })
            }
            AsymAlg::MlKem768 => raw_len("ML-KEM seed (d ‖ z)", k.bytes().len(), asym::MLKEM_SEED_LEN),
            AsymAlg::RsaPkcs1 { .. } | AsymAlg::RsaPss { .. } => {
                Err(Error::BadKey { why: "RSA private keys are taken as PKCS#8" })
            }
            _ => Ok(()),
        },
        AsymKey::Private(_) if matches!(alg, AsymAlg::Ffdh(_) | AsymAlg::MlKem768) => {
            Err(Error::BadKey { why: "MODP and ML-KEM private keys are taken in their raw form" })
        }
        AsymKey::Public(k) if k.format() == PublicFormat::Raw => match alg {
            AsymAlg::Ed25519 => raw_len("raw Ed25519 public key", k.bytes().len(), 32),
            AsymAlg::Ecdsa { curve, .. } => raw_len("raw EC public key", k.bytes().len(), curve.point_len()),
            AsymAlg::MlKem768 => {
                raw_len("ML-KEM encapsulation key", k.bytes().len(), asym::MLKEM768_PUBLIC_LEN)
            }
            _ => Ok(()),
        },
        AsymKey::Public(_) if alg == AsymAlg::MlKem768 => {
            Err(Error::BadKey { why: "ML-KEM public keys are taken in their raw form" })
        }
        _ => Ok(()),
    }
}

/// The weak and semi-weak DES keys (FIPS 74 §3.6), parity bits cleared.
const WEAK_DES_KEYS: [[u8; 8]; 16] = [
    [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
    [0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe],
    [0x1e, 0x1e, 0x1e, 0x1e, 0x0e, 0x0e, 0x0e, 0x0e],
    [0xe0, 0xe0, 0xe0, 0xe0, 0xf0, 0xf0, 0xf0, 0xf0],
    [0x00, 0xfe, 0x00, 0xfe, 0x00, 0xfe, 0x00, 0xfe],
    [0xfe, 0x00, 0xfe, 0x00, 0xfe, 0x00, 0xfe, 0x00],
    [0x1e, 0xe0, 0x1e, 0xe0, 0x0e, 0xf0, 0x0e, 0xf0],
    [0xe0, 0x1e, 0xe0, 0x1e, 0xf0, 0x0e, 0xf0, 0x0e],
    [0x00, 0xe0, 0x00, 0xe0, 0x00, 0xf0, 0x00, 0xf0],
    [0xe0, 0x00, 0xe0, 0x00, 0xf0, 0x00, 0xf0, 0x00],
    [0x1e, 0xfe, 0x1e, 0xfe, 0x0e, 0xfe, 0x0e, 0xfe],
    [0xfe, 0x1e, 0xfe, 0x1e, 0xfe, 0x0e, 0xfe, 0x0e],
    [0x00, 0x1e, 0x00, 0x1e, 0x00, 0x0e, 0x00, 0x0e],
    [0x1e, 0x00, 0x1e, 0x00, 0x0e, 0x00, 0x0e, 0x00],
    [0xe0, 0xfe, 0xe0, 0xfe, 0xf0, 0xfe, 0xf0, 0xfe],
    [0xfe, 0xe0, 0xfe, 0xe0, 0xfe, 0xf0, 0xfe, 0xf0],
];

/// Three-key 3DES (SP 800-67 keying option 1) needs three distinct subkeys, none of them
/// weak: with K1 = K2 or K2 = K3 it is single DES, with K1 = K3 two-key 3DES. RFC 2451
/// asks ESP implementations to reject such keys. Parity bits (the low bit of each byte)
/// are ignored, as DES ignores them.
fn check_tdes_key(key: &[u8]) -> Result<(), Error> {
    let sub = |i: usize| -> [u8; 8] { std::array::from_fn(|j| key[i * 8 + j] & 0xfe) };
    let (k1, k2, k3) = (sub(0), sub(1), sub(2));
    if k1 == k2 || k2 == k3 || k1 == k3 {
        return Err(Error::WeakKey { why: "3DES subkeys must be pairwise distinct" });
    }
    if [k1, k2, k3].iter().any(|k| WEAK_DES_KEYS.contains(k)) {
        return Err(Error::WeakKey { why: "a 3DES subkey is a weak or semi-weak DES key" });
    }
    Ok(())
}

fn cipher_name(alg: CipherAlg) -> &'static str {
    match alg {
        CipherAlg::AesCbc => "AES-CBC",
        CipherAlg::AesCtr => "AES-CTR",
        CipherAlg::TdesCbc => "3DES-CBC",
        CipherAlg::Null => "NULL",
        CipherAlg::AesGcm => "AES-GCM",
        CipherAlg::ChaCha20Poly1305 => "ChaCha20-Poly1305",
    }
}

fn mac_len_rule(alg: MacAlg) -> &'static str {
    match alg {
        MacAlg::Hmac(DigestAlg::Md5) => "10..=16",
        MacAlg::Hmac(DigestAlg::Sha1) => "10..=20",
        MacAlg::Hmac(DigestAlg::Sha256) => "16..=32",
        MacAlg::Hmac(DigestAlg::Sha384) => "24..=48",
        MacAlg::Hmac(DigestAlg::Sha512) => "32..=64",
    }
}

/// The size of the session's key in bits, as the cost model keys its tables and the
/// bounds are checked: the curve's, the group's, the modulus's. `Err` names what is wrong
/// with the key when the size cannot be read or is out of bounds.
pub(crate) fn asym_key_bits(alg: AsymAlg, key: &AsymKey) -> Result<usize, crate::Error> {
    let bits = match alg {
        AsymAlg::X25519 | AsymAlg::Ed25519 => 256,
        AsymAlg::Ecdh(c) | AsymAlg::Ecdsa { curve: c, .. } => c.bits(),
        AsymAlg::Ffdh(g) => g.bytes() * 8,
        AsymAlg::MlKem768 => 768,
        AsymAlg::ModExp => match key {
            AsymKey::ModExp { modulus, .. } => asym::der::bit_len(modulus),
            _ => 0,
        },
        AsymAlg::RsaPkcs1 { .. } | AsymAlg::RsaPss { .. } => {
            let bits = match key {
                AsymKey::Private(k) => asym::der::rsa_private_modulus_bits(k.format(), k.bytes())
                    .map_err(|why| Error::BadKey { why })?,
                AsymKey::Public(k) => asym::der::rsa_public_modulus_bits(k.format(), k.bytes())
                    .map_err(|why| Error::BadKey { why })?,
                // Generation: the size is the caller's choice, given with the key slot.
                AsymKey::Generate { bits } => *bits,
                AsymKey::ModExp { .. } => 0,
            };
            if bits < asym::RSA_MIN_BITS {
                return Err(Error::KeyTooSmall { bits, min: asym::RSA_MIN_BITS });
            }
            if bits > asym::RSA_MAX_BITS {
                return Err(Error::KeyTooLarge { bits, max: asym::RSA_MAX_BITS });
            }
            bits
        }
    };
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_accepts_the_defined_lengths() {
        for len in [16, 24, 32] {
            SessionParams::cipher(CipherAlg::AesCbc, &vec![0u8; len][..]).validate().unwrap();
            SessionParams::aead(CipherAlg::AesGcm, &vec![0u8; len][..]).validate().unwrap();
        }
        SessionParams::hmac(DigestAlg::Sha1, &[1u8; 20]).with_tag_len(12).validate().unwrap();
        SessionParams::cipher(CipherAlg::Null, Key::empty()).validate().unwrap();
    }

    #[test]
    fn validate_names_each_problem() {
        assert!(matches!(
            SessionParams::cipher(CipherAlg::AesCbc, &[0u8; 15]).validate(),
            Err(Error::BadKeyLength { got: 15, .. })
        ));
        assert!(matches!(
            SessionParams::aead(CipherAlg::ChaCha20Poly1305, &[0u8; 16]).validate(),
            Err(Error::BadKeyLength { got: 16, .. })
        ));
        assert!(matches!(
            SessionParams::hmac(DigestAlg::Sha256, Key::empty()).validate(),
            Err(Error::BadMacKeyLength { got: 0 })
        ));
        assert!(matches!(
            SessionParams::hmac(DigestAlg::Sha256, &[1u8; 32]).with_tag_len(8).validate(),
            Err(Error::BadTagLength { got: 8, .. })
        ));
        assert!(matches!(
            SessionParams::aead(CipherAlg::AesGcm, &[0u8; 16]).with_tag_len(12).validate(),
            Err(Error::BadTagLength { got: 12, .. })
        ));
        assert!(matches!(
            SessionParams::cipher(CipherAlg::TdesCbc, &[3u8; 24]).validate(),
            Err(Error::WeakKey { .. })
        ));
        let mut k = *b"\x01\x23\x45\x67\x89\xab\xcd\xef\x23\x45\x67\x89\xab\xcd\xef\x01\x45\x67\x89\xab\xcd\xef\x01\x23";
        SessionParams::cipher(CipherAlg::TdesCbc, &k).validate().unwrap();
        k[8..16].copy_from_slice(&[0x1f, 0x1f, 0x1f, 0x1f, 0x0e, 0x0e, 0x0e, 0x0e]);
        assert!(matches!(
            SessionParams::cipher(CipherAlg::TdesCbc, &k).validate(),
            Err(Error::WeakKey { .. })
        ));
        assert!(matches!(
            SessionParams::cipher(CipherAlg::AesGcm, &[0u8; 16]).validate(),
            Err(Error::InvalidParams(_))
        ));
        assert!(matches!(
            SessionParams::aead(CipherAlg::AesCbc, &[0u8; 16]).validate(),
            Err(Error::InvalidParams(_))
        ));
        SessionParams::compress(CompAlg::Deflate).validate().unwrap();
        assert!(matches!(
            SessionParams::compress(CompAlg::Deflate).multipart().validate(),
            Err(Error::InvalidParams(_))
        ));
    }
}
