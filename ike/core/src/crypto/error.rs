//! The one error type of IKE's cryptography: one variant per cause, so that the state
//! machine can count and log each (a wrong PSK is not a truncated message, an unsupported
//! proposal is not an invalid peer value).
//!
//! Failures inside ocf that are not the peer's doing (no driver, a random source that
//! failed its health tests) arrive as [`CryptoError::Ocf`] with ocf's own variant.

use std::fmt;

use ike_wire::ids::{AuthMethod, DhId, EncrId, IntegId, PrfId};

/// Everything that can go wrong in `crypto`.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CryptoError {
    /// An encryption algorithm this implementation does not offer.
    UnsupportedEncr(EncrId),
    /// A key length attribute the algorithm does not take here (`None`: missing where
    /// required, or present where the algorithm has none).
    UnsupportedKeyLength { encr: EncrId, bits: Option<u16> },
    /// An integrity algorithm this implementation does not offer.
    UnsupportedInteg(IntegId),
    /// A pseudorandom function this implementation does not offer.
    UnsupportedPrf(PrfId),
    /// A key exchange method (Diffie-Hellman group) this implementation does not offer.
    UnsupportedKe(DhId),
    /// An AEAD proposed with an integrity algorithm (RFC 5282 §8: it must have none).
    IntegWithAead,
    /// A plain cipher proposed without an integrity algorithm.
    MissingInteg,
    /// prf+ asked for more than 255 blocks of output (RFC 7296 §2.13).
    PrfPlusTooLong { asked: usize, max: usize },
    /// A nonce shorter or longer than RFC 7296 §2.10 and §3.9 allow for the PRF.
    NonceLength { got: usize, min: usize, max: usize },
    /// An SK body shorter than its IV, one padded block and its ICV.
    SkTruncated { got: usize, min: usize },
    /// An SK ciphertext that is not a whole number of cipher blocks.
    SkNotBlocks { len: usize, block: usize },
    /// An SK payload whose ICV does not match (tampered, or another key).
    SkAuthFailed,
    /// A decrypted SK payload whose Pad Length is longer than what precedes it.
    SkBadPadLength { pad_len: usize, room: usize },
    /// The per-direction AEAD IV counter is used up: the IKE SA must be rekeyed (never
    /// happens in practice: 2^64 messages).
    SkIvExhausted,
    /// A peer's KE data of the wrong length for the method.
    KeDataLength { method: DhId, got: usize, expected: usize },
    /// A peer's elliptic-curve value that is not a point on the curve.
    KePointNotOnCurve,
    /// A peer's MODP value outside 2..=p-2.
    KeValueOutOfRange,
    /// A peer's X25519 value of small order (the shared secret would be zero).
    KeZeroSharedSecret,
    /// A pre-shared key shorter than [`crate::crypto::MIN_PSK_LEN`].
    PskTooShort { len: usize, min: usize },
    /// An authentication method this implementation does not offer.
    UnsupportedAuthMethod(AuthMethod),
    /// AUTH data too short for its method (RFC 7427's length byte and identifier, or a
    /// signature of the wrong length).
    AuthDataMalformed(&'static str),
    /// An RFC 7427 AlgorithmIdentifier this implementation does not recognise.
    UnknownSignatureAlgorithm,
    /// The signature algorithm does not fit the key (an RSA scheme with an EC key, ECDSA
    /// with the other curve).
    SignatureKeyMismatch,
    /// A key whose type (SPKI or PKCS#8 AlgorithmIdentifier) is not RSA, P-256, P-384 or
    /// Ed25519.
    UnsupportedKey(&'static str),
    /// A PSK AUTH value that does not match ours.
    PskMismatch,
    /// A signature that does not verify.
    BadSignature,
    /// Key material of the wrong length for its algorithm (a caller's mistake: the key
    /// schedule makes them right).
    KeyLength { what: &'static str, got: usize, expected: usize },
    /// ocf failed the operation for a reason that is not one of the above.
    Ocf(ocf::Error),
}

impl From<ocf::Error> for CryptoError {
    fn from(e: ocf::Error) -> CryptoError {
        CryptoError::Ocf(e)
    }
}

impl fmt::Display for CryptoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use CryptoError::*;
        match self {
            UnsupportedEncr(id) => write!(f, "unsupported encryption algorithm {id}"),
            UnsupportedKeyLength { encr, bits: Some(b) } => {
                write!(f, "{encr} with a {b}-bit key is not supported")
            }
            UnsupportedKeyLength { encr, bits: None } => {
                write!(f, "{encr}: key length attribute missing or not allowed")
            }
            UnsupportedInteg(id) => write!(f, "unsupported integrity algorithm {id}"),
            UnsupportedPrf(id) => write!(f, "unsupported PRF {id}"),
            UnsupportedKe(id) => write!(f, "unsupported key exchange method {id}"),
            IntegWithAead => f.write_str("an AEAD cipher proposed with an integrity algorithm"),
            MissingInteg => f.write_str("a non-AEAD cipher proposed without an integrity algorithm"),
            PrfPlusTooLong { asked, max } => write!(f, "prf+ asked for {asked} bytes, at most {max}"),
            NonceLength { got, min, max } => write!(f, "nonce of {got} bytes, allowed {min}..={max}"),
            SkTruncated { got, min } => write!(f, "SK payload of {got} bytes, at least {min} needed"),
            SkNotBlocks { len, block } => {
                write!(f, "SK ciphertext of {len} bytes is not a multiple of {block}")
            }
            SkAuthFailed => f.write_str("SK payload integrity check failed"),
            SkBadPadLength { pad_len, room } => {
                write!(f, "SK pad length {pad_len} exceeds the {room} bytes before it")
            }
            SkIvExhausted => f.write_str("the SK IV counter is used up: rekey the IKE SA"),
            KeDataLength { method, got, expected } => {
                write!(f, "{method} KE data of {got} bytes, expected {expected}")
            }
            KePointNotOnCurve => f.write_str("peer's KE value is not a point on the curve"),
            KeValueOutOfRange => f.write_str("peer's MODP KE value is outside 2..p-2"),
            KeZeroSharedSecret => f.write_str("peer's X25519 KE value has small order"),
            PskTooShort { len, min } => write!(f, "pre-shared key of {len} bytes, at least {min} required"),
            UnsupportedAuthMethod(m) => write!(f, "unsupported authentication method {m}"),
            AuthDataMalformed(why) => write!(f, "malformed AUTH data: {why}"),
            UnknownSignatureAlgorithm => f.write_str("unknown RFC 7427 signature algorithm identifier"),
            SignatureKeyMismatch => f.write_str("the signature algorithm does not fit the key"),
            UnsupportedKey(why) => write!(f, "unsupported key: {why}"),
            PskMismatch => f.write_str("PSK AUTH value does not match"),
            BadSignature => f.write_str("AUTH signature does not verify"),
            KeyLength { what, got, expected } => write!(f, "{what} of {got} bytes, expected {expected}"),
            Ocf(e) => write!(f, "ocf: {e}"),
        }
    }
}

impl std::error::Error for CryptoError {}
