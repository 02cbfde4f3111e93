//! Public-key (asymmetric) algorithms, their keys, and the random-bytes operation's mode:
//! what a session asks a driver for, with the size facts the framework validates once.
//!
//! The seed paper's future work (Leffler, "Cryptographic Device Support for FreeBSD",
//! section 5): applying the framework's techniques to asymmetric operations. FreeBSD's own
//! attempt passed raw bignums per request with no key objects and lost every consumer (it
//! is gone from FreeBSD 14). Here, as DPDK's cryptodev does, **the key lives in the
//! session**: a session is one algorithm with one key, made once, and its requests carry
//! only the message, the peer's public value or the ciphertext. A key is a handle
//! ([`PrivateKey`], [`PublicKey`]) holding an encoding a driver's library parses (PKCS#8,
//! SubjectPublicKeyInfo, or the algorithm's raw form), wiped when dropped; no API takes or
//! returns a bare bignum.
//!
//! ```text
//!  AsymAlg  ── what: X25519, ECDH, MODP DH, CRK_MOD_EXP, Ed25519, ECDSA, RSA, ML-KEM
//!  AsymKey  ── with which key: a private key, a public key, a modulus and exponent, none
//!      │
//!  Mode::Asymmetric { alg, key } ─ validate (keys: sizes bounded, RSA moduli read here)
//!      │
//!  requests: Op::Sign, Verify, Derive, Encapsulate, Decapsulate, ModExp, PublicKey,
//!            GenerateKey — see `crate::Op` for each one's buffers
//! ```
//!
//! The cost model keeps a table per algorithm *and key size* (`rsa-pss-sha256/2048` and
//! `/4096` are apart, as their costs are), and in it a cell per operation: what the issue
//! of per-operation, per-key-size scheduling asks, in the same table as the ciphers.

use std::fmt;

use crate::alg::DigestAlg;

mod der;
mod keys;
pub mod modp;

pub use keys::{AsymKey, PrivateFormat, PrivateKey, PublicFormat, PublicKey};

/// The smallest RSA modulus accepted, in bits (NIST SP 800-131A: 2048).
pub const RSA_MIN_BITS: usize = 2048;
/// The largest RSA modulus accepted, in bits: beyond it a signature costs seconds of CPU
/// that a peer's certificate could make us spend.
pub const RSA_MAX_BITS: usize = 4096;
/// The largest modulus of [`AsymAlg::ModExp`], in bits (the MODP groups reach 3072; RSA
/// 4096).
pub const MODEXP_MAX_BITS: usize = 4096;

/// A NIST prime curve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Curve {
    P256,
    P384,
}

impl Curve {
    /// Bytes of a field element (and of a scalar).
    pub fn field_len(self) -> usize {
        match self {
            Curve::P256 => 32,
            Curve::P384 => 48,
        }
    }

    /// Length of an uncompressed point (`04 ‖ x ‖ y`, SEC 1 §2.3.3).
    pub fn point_len(self) -> usize {
        1 + 2 * self.field_len()
    }

    pub fn bits(self) -> usize {
        self.field_len() * 8
    }
}

/// An RFC 3526 MODP group for finite-field Diffie-Hellman (generator 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModpGroup {
    /// Group 14, 2048-bit prime.
    Modp2048,
    /// Group 15, 3072-bit prime.
    Modp3072,
}

impl ModpGroup {
    /// The prime, big-endian.
    pub fn prime(self) -> &'static [u8] {
        match self {
            ModpGroup::Modp2048 => &modp::MODP_2048,
            ModpGroup::Modp3072 => &modp::MODP_3072,
        }
    }

    /// Bytes of the prime (and of a public value, left-padded with zeros).
    pub fn bytes(self) -> usize {
        self.prime().len()
    }

    /// The IKEv2 transform ID (RFC 7296 §3.3.2; IANA "Transform Type 4").
    pub fn ike_group(self) -> u16 {
        match self {
            ModpGroup::Modp2048 => 14,
            ModpGroup::Modp3072 => 15,
        }
    }
}

/// How an ECDSA signature is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SigEncoding {
    /// DER `SEQUENCE { r INTEGER, s INTEGER }` (X.509, TLS).
    Der,
    /// `r ‖ s`, each the field's length (IEEE P1363; JOSE, IKEv2's ECDSA auth methods).
    P1363,
}

/// A public-key algorithm: what an asymmetric session does with its key.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsymAlg {
    /// X25519 key agreement (RFC 7748). An all-zero shared secret (a small-order peer
    /// value) is refused (RFC 7748 §6.1).
    X25519,
    /// Elliptic-curve Diffie-Hellman (SP 800-56A), the peer's point validated on the curve.
    Ecdh(Curve),
    /// Finite-field Diffie-Hellman over an RFC 3526 group; the peer's value must lie in
    /// `2..=p-2` (SP 800-56A §5.6.2.3.1).
    Ffdh(ModpGroup),
    /// Modular exponentiation `base ^ exponent mod modulus` (the seed's `CRK_MOD_EXP`, what
    /// the Broadcom 5822's unit did): the exponent and an odd modulus are the session's key
    /// ([`AsymKey::ModExp`]), the base comes with each request.
    ModExp,
    /// Ed25519 signatures (RFC 8032, pure).
    Ed25519,
    /// ECDSA over `curve` with `hash` of the message (FIPS 186-5).
    Ecdsa { curve: Curve, hash: DigestAlg, encoding: SigEncoding },
    /// RSA PKCS#1 v1.5 signatures (RFC 8017 §8.2) with `hash`; 2048–4096-bit moduli.
    RsaPkcs1 { hash: DigestAlg },
    /// RSA-PSS signatures (RFC 8017 §8.1), MGF1 with the same `hash`, salt as long as the
    /// hash (TLS 1.3, RFC 8446 §4.2.3); 2048–4096-bit moduli.
    RsaPss { hash: DigestAlg },
    /// ML-KEM-768 key encapsulation (FIPS 203).
    MlKem768,
}

/// What kind of thing an algorithm does, which decides its operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsymKind {
    /// Key agreement: `Derive`, `PublicKey`, `GenerateKey`.
    Agreement,
    /// Signatures: `Sign`, `Verify`, `PublicKey`, `GenerateKey`.
    Signature,
    /// Key encapsulation: `Encapsulate`, `Decapsulate`, `PublicKey`, `GenerateKey`.
    Kem,
    /// `ModExp` only.
    ModExp,
}

impl AsymAlg {
    /// Every algorithm and parameter combination ocf names, for drivers and tools that
    /// iterate.
    pub fn all() -> Vec<AsymAlg> {
        let mut v = vec![
            AsymAlg::X25519,
            AsymAlg::Ecdh(Curve::P256),
            AsymAlg::Ecdh(Curve::P384),
            AsymAlg::Ffdh(ModpGroup::Modp2048),
            AsymAlg::Ffdh(ModpGroup::Modp3072),
            AsymAlg::ModExp,
            AsymAlg::Ed25519,
        ];
        for curve in [Curve::P256, Curve::P384] {
            for hash in SHA2 {
                for encoding in [SigEncoding::Der, SigEncoding::P1363] {
                    v.push(AsymAlg::Ecdsa { curve, hash, encoding });
                }
            }
        }
        for hash in SHA2 {
            v.push(AsymAlg::RsaPkcs1 { hash });
            v.push(AsymAlg::RsaPss { hash });
        }
        v.push(AsymAlg::MlKem768);
        v
    }

    pub fn kind(self) -> AsymKind {
        match self {
            AsymAlg::X25519 | AsymAlg::Ecdh(_) | AsymAlg::Ffdh(_) => AsymKind::Agreement,
            AsymAlg::ModExp => AsymKind::ModExp,
            AsymAlg::Ed25519 | AsymAlg::Ecdsa { .. } | AsymAlg::RsaPkcs1 { .. } | AsymAlg::RsaPss { .. } => {
                AsymKind::Signature
            }
            AsymAlg::MlKem768 => AsymKind::Kem,
        }
    }

    /// The hash a signature algorithm applies to the message, if any (Ed25519 hashes
    /// inside).
    pub fn hash(self) -> Option<DigestAlg> {
        match self {
            AsymAlg::Ecdsa { hash, .. } | AsymAlg::RsaPkcs1 { hash } | AsymAlg::RsaPss { hash } => Some(hash),
            _ => None,
        }
    }

    /// The longest result of `Sign`, `Derive`, `Encapsulate`, `Decapsulate`, `PublicKey`
    /// (raw form) for a key of `bits`: room enough in a request's `out`.
    pub fn max_output_len(self, bits: usize) -> usize {
        let bytes = bits.div_ceil(8);
        match self {
            AsymAlg::X25519 | AsymAlg::Ed25519 => 64,
            AsymAlg::Ecdh(c) => c.point_len(),
            AsymAlg::Ffdh(g) => g.bytes(),
            AsymAlg::ModExp => bytes,
            // DER: SEQUENCE of two INTEGERs, each up to a field element plus a sign byte.
            AsymAlg::Ecdsa { curve, .. } => curve.point_len() + 8,
            // A public key in its raw form (RSAPublicKey DER) is a little longer than a
            // signature.
            AsymAlg::RsaPkcs1 { .. } | AsymAlg::RsaPss { .. } => bytes + 32,
            // The encapsulation key (`PublicKey`) is longer than `ciphertext ‖ secret`.
            AsymAlg::MlKem768 => MLKEM768_PUBLIC_LEN.max(MLKEM768_CIPHERTEXT_LEN + MLKEM_SHARED_LEN),
        }
    }
}

/// ML-KEM-768 sizes (FIPS 203, Table 3).
pub const MLKEM768_PUBLIC_LEN: usize = 1184;
pub const MLKEM768_CIPHERTEXT_LEN: usize = 1088;
pub const MLKEM_SHARED_LEN: usize = 32;
/// An ML-KEM private key's seed form, `d ‖ z` (FIPS 203 §7.1), 64 bytes.
pub const MLKEM_SEED_LEN: usize = 64;

const SHA2: [DigestAlg; 3] = [DigestAlg::Sha256, DigestAlg::Sha384, DigestAlg::Sha512];

impl fmt::Display for Curve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Curve::P256 => "p256",
            Curve::P384 => "p384",
        })
    }
}

impl fmt::Display for ModpGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ModpGroup::Modp2048 => "modp2048",
            ModpGroup::Modp3072 => "modp3072",
        })
    }
}

/// Names as `openssl speed` and strongSwan's proposals spell them where they can
/// (`x25519`, `ecdh-p256`, `modp2048`, `ecdsa-p256-sha256`, `rsa-pss-sha256`, `ml-kem-768`).
impl fmt::Display for AsymAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AsymAlg::X25519 => f.write_str("x25519"),
            AsymAlg::Ecdh(c) => write!(f, "ecdh-{c}"),
            AsymAlg::Ffdh(g) => write!(f, "{g}"),
            AsymAlg::ModExp => f.write_str("modexp"),
            AsymAlg::Ed25519 => f.write_str("ed25519"),
            AsymAlg::Ecdsa { curve, hash, encoding } => {
                let enc = match encoding {
                    SigEncoding::Der => "",
                    SigEncoding::P1363 => "-p1363",
                };
                write!(f, "ecdsa-{curve}-{hash}{enc}")
            }
            AsymAlg::RsaPkcs1 { hash } => write!(f, "rsa-pkcs1-{hash}"),
            AsymAlg::RsaPss { hash } => write!(f, "rsa-pss-{hash}"),
            AsymAlg::MlKem768 => f.write_str("ml-kem-768"),
        }
    }
}

/// The size of the session's key in bits, as the cost model keys its tables and the
/// bounds are checked: the curve's, the group's, the modulus's. `Err` names what is wrong
/// with the key when the size cannot be read or is out of bounds.
pub(crate) fn key_bits(alg: AsymAlg, key: &AsymKey) -> Result<usize, crate::Error> {
    use crate::Error;
    let bits = match alg {
        AsymAlg::X25519 | AsymAlg::Ed25519 => 256,
        AsymAlg::Ecdh(c) | AsymAlg::Ecdsa { curve: c, .. } => c.bits(),
        AsymAlg::Ffdh(g) => g.bytes() * 8,
        AsymAlg::MlKem768 => 768,
        AsymAlg::ModExp => match key {
            AsymKey::ModExp { modulus, .. } => der::bit_len(modulus),
            _ => 0,
        },
        AsymAlg::RsaPkcs1 { .. } | AsymAlg::RsaPss { .. } => {
            let bits = match key {
                AsymKey::Private(k) => der::rsa_private_modulus_bits(k.format(), k.bytes())?,
                AsymKey::Public(k) => der::rsa_public_modulus_bits(k.format(), k.bytes())?,
                // Generation: the size is the caller's choice, given with the key slot.
                AsymKey::Generate { bits } => *bits,
                AsymKey::ModExp { .. } => 0,
            };
            if bits < RSA_MIN_BITS {
                return Err(Error::KeyTooSmall { bits, min: RSA_MIN_BITS });
            }
            if bits > RSA_MAX_BITS {
                return Err(Error::KeyTooLarge { bits, max: RSA_MAX_BITS });
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
    fn names_are_unique() {
        let mut names: Vec<String> = AsymAlg::all().iter().map(|a| a.to_string()).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    #[test]
    fn modp_primes_have_their_sizes() {
        assert_eq!(ModpGroup::Modp2048.bytes(), 256);
        assert_eq!(ModpGroup::Modp3072.bytes(), 384);
        for g in [ModpGroup::Modp2048, ModpGroup::Modp3072] {
            let p = g.prime();
            // RFC 3526: the primes begin and end with 64 one bits.
            assert!(p[..8].iter().all(|&b| b == 0xff) && p[p.len() - 8..].iter().all(|&b| b == 0xff));
        }
    }
}
