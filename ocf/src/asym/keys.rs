//! Key handles: an encoding a driver's library parses, wiped when dropped, never a bare
//! bignum.

use std::fmt;

use subtle::ConstantTimeEq;
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::key::Key;

/// How a private key is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrivateFormat {
    /// PKCS#8 `PrivateKeyInfo` (RFC 5208 / 5958), DER: what `openssl genpkey` writes (as
    /// PEM). Every algorithm but the MODP groups and ML-KEM.
    Pkcs8,
    /// The algorithm's own form: X25519's 32-byte scalar (RFC 7748), Ed25519's 32-byte seed
    /// (RFC 8032), an EC scalar of the field's length (SEC 1), a MODP exponent (big-endian,
    /// at most the prime's length), ML-KEM's 64-byte seed `d ‖ z` (FIPS 203). Not RSA.
    Raw,
}

/// How a public key is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PublicFormat {
    /// X.509 `SubjectPublicKeyInfo` (RFC 5280), DER: what a certificate carries.
    Spki,
    /// The algorithm's own form, as protocols send it: X25519 and Ed25519 32 bytes, an
    /// uncompressed EC point (`04 ‖ x ‖ y`), a MODP public value (big-endian, the prime's
    /// length), PKCS#1 `RSAPublicKey` DER, ML-KEM's 1,184-byte encapsulation key. What
    /// [`crate::Op::PublicKey`] writes.
    Raw,
}

/// A private key: its encoding, wiped when dropped; `Debug` prints only its format and
/// length. Compared in constant time only.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct PrivateKey {
    #[zeroize(skip)]
    format: PrivateFormat,
    bytes: Key,
}

impl PrivateKey {
    /// A PKCS#8 DER key. Whether it parses and fits the algorithm is checked when a session
    /// is made with it.
    pub fn pkcs8(der: &[u8]) -> PrivateKey {
        PrivateKey { format: PrivateFormat::Pkcs8, bytes: Key::new(der) }
    }

    /// A key in the algorithm's raw form (see [`PrivateFormat::Raw`]).
    pub fn raw(bytes: &[u8]) -> PrivateKey {
        PrivateKey { format: PrivateFormat::Raw, bytes: Key::new(bytes) }
    }

    /// A key of `format` taking `bytes` (already a wiped-on-drop [`Key`]).
    pub fn from_key(format: PrivateFormat, bytes: Key) -> PrivateKey {
        PrivateKey { format, bytes }
    }

    pub fn format(&self) -> PrivateFormat {
        self.format
    }

    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_bytes()
    }

    /// Whether `other` is the same key in the same format, in time that depends on the
    /// lengths only.
    pub fn matches(&self, other: &PrivateKey) -> bool {
        self.format == other.format && bool::from(self.bytes.ct_eq(&other.bytes))
    }
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrivateKey({:?}, {} bytes)", self.format, self.bytes.len())
    }
}

/// A public key: its encoding.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    format: PublicFormat,
    bytes: Vec<u8>,
}

impl PublicKey {
    /// A `SubjectPublicKeyInfo` DER key.
    pub fn spki(der: &[u8]) -> PublicKey {
        PublicKey { format: PublicFormat::Spki, bytes: der.to_vec() }
    }

    /// A key in the algorithm's raw form (see [`PublicFormat::Raw`]).
    pub fn raw(bytes: &[u8]) -> PublicKey {
        PublicKey { format: PublicFormat::Raw, bytes: bytes.to_vec() }
    }

    pub fn format(&self) -> PublicFormat {
        self.format
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({:?}, {} bytes)", self.format, self.bytes.len())
    }
}

/// The key an asymmetric session holds.
#[derive(Clone, Debug)]
pub enum AsymKey {
    /// A private key: `Sign`, `Derive`, `Decapsulate`, `PublicKey`.
    Private(PrivateKey),
    /// A public key: `Verify`, `Encapsulate`.
    Public(PublicKey),
    /// [`crate::AsymAlg::ModExp`]'s key: the exponent (secret: a Diffie-Hellman private
    /// value, an RSA private exponent) and the odd modulus, both big-endian.
    ModExp { exponent: Key, modulus: Vec<u8> },
    /// No key yet: the session makes new ones (`GenerateKey`). `bits` is the RSA modulus
    /// size; other algorithms' sizes are fixed and ignore it.
    Generate { bits: usize },
}

impl AsymKey {
    /// A short name for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            AsymKey::Private(_) => "private key",
            AsymKey::Public(_) => "public key",
            AsymKey::ModExp { .. } => "exponent and modulus",
            AsymKey::Generate { .. } => "no key (generation)",
        }
    }
}
