//! What a known-answer case is, independent of where it came from and how it is run.
//!
//! Loaders (`suites::*`) turn vector files into [`Case`]s; the runner (`run`) executes each
//! case on every driver in every [`crate::Layout`].

use std::fmt;

use ocf::Error;

use crate::report::CaseId;

/// One case: the session to make and what to check with it.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub id: CaseId,
    pub params: ocf::SessionParams,
    pub check: Check,
}

/// The inputs and expected outputs of a cipher, AEAD or cipher+MAC operation.
#[derive(Clone, Debug, Default)]
pub(crate) struct Crypt {
    pub iv: Vec<u8>,
    pub aad: Vec<u8>,
    pub plaintext: Vec<u8>,
    pub ciphertext: Vec<u8>,
    /// Empty for plain ciphers.
    pub tag: Vec<u8>,
}

/// What to check.
#[derive(Clone, Debug)]
pub(crate) enum Check {
    /// Encrypt(plaintext) must give ciphertext (and tag); decrypt(ciphertext, tag) must
    /// give plaintext.
    RoundTrip(Crypt),
    /// Decrypt(ciphertext, tag) must fail with `AuthFailed` and release no plaintext.
    Forgery(Crypt),
    /// CBC with PKCS#7 padding done by the harness (ocf's CBC is unpadded, as ESP uses
    /// it): encrypt(pad(plaintext)) must give ciphertext, and unpad(decrypt(ciphertext))
    /// must give plaintext.
    PaddedRoundTrip(Crypt),
    /// A ciphertext with bad padding: ocf must either refuse a length that is not a block
    /// multiple (`NotBlockMultiple`) or decrypt it and the harness's padding check reject it.
    BadPadding(Crypt),
    /// Compute-digest over `message` must give `expected` (which may be shorter than the
    /// session's output: then only that prefix is compared). When `expected` is the
    /// session's full length, verify-digest must accept it and reject it with one bit
    /// flipped.
    Digest { message: Vec<u8>, expected: Vec<u8> },
    /// Verify-digest of a wrong `tag` must fail with `AuthFailed`.
    WrongTag { message: Vec<u8>, tag: Vec<u8> },
    /// Session creation must fail with this error: parameters ocf does not support.
    RejectSession(Rejection),
    /// Both directions must be refused at submission with this error (e.g. a GCM nonce
    /// that is not 12 bytes).
    RejectRequest(Crypt, Rejection),
    /// Public-key operations, one after the other on the case's session (see
    /// [`crate::asym`]).
    Asym(Vec<crate::asym::Step>),
}

/// An error the case expects, matched by variant and the lengths that matter (not by the
/// human-readable `allowed` strings, which are ocf's business).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rejection {
    KeyLength {
        got: usize,
    },
    /// A degenerate or weak key (3DES with repeated or weak DES subkeys).
    WeakKey,
    MacKeyLength {
        got: usize,
    },
    IvLength {
        expected: usize,
        got: usize,
    },
    TagLength {
        got: usize,
    },
    NotBlockMultiple {
        len: usize,
        block: usize,
    },
    /// A key that does not parse or does not fit the algorithm (any reason).
    BadKey,
    /// An RSA key of `bits` below the minimum.
    KeyTooSmall {
        bits: usize,
    },
    /// An RSA key or modulus of `bits` above the maximum.
    KeyTooLarge {
        bits: usize,
    },
    /// An input (raw key, ciphertext) of the wrong length.
    InputLength {
        got: usize,
        expected: usize,
    },
    BadSignature,
    InvalidPoint,
    ZeroSharedSecret,
    PeerValueOutOfRange,
    ModExpBaseTooLarge,
}

impl Rejection {
    pub fn matches(&self, e: &Error) -> bool {
        match (*self, e) {
            (Rejection::KeyLength { got }, Error::BadKeyLength { got: g2, .. }) => got == *g2,
            (Rejection::WeakKey, Error::WeakKey { .. }) => true,
            (Rejection::MacKeyLength { got }, Error::BadMacKeyLength { got: g2 }) => got == *g2,
            (Rejection::IvLength { expected, got }, Error::BadIvLength { expected: e2, got: g2 }) => {
                expected == *e2 && got == *g2
            }
            (Rejection::TagLength { got }, Error::BadTagLength { got: g2, .. }) => got == *g2,
            (Rejection::NotBlockMultiple { len, block }, Error::NotBlockMultiple { len: l2, block: b2 }) => {
                len == *l2 && block == *b2
            }
            (Rejection::BadKey, Error::BadKey { .. }) => true,
            (Rejection::KeyTooSmall { bits }, Error::KeyTooSmall { bits: b2, .. }) => bits == *b2,
            (Rejection::KeyTooLarge { bits }, Error::KeyTooLarge { bits: b2, .. }) => bits == *b2,
            (
                Rejection::InputLength { got, expected },
                Error::BadInputLength { got: g2, expected: e2, .. },
            ) => got == *g2 && expected == *e2,
            (Rejection::BadSignature, Error::BadSignature)
            | (Rejection::InvalidPoint, Error::InvalidPoint)
            | (Rejection::ZeroSharedSecret, Error::ZeroSharedSecret)
            | (Rejection::PeerValueOutOfRange, Error::PeerValueOutOfRange)
            | (Rejection::ModExpBaseTooLarge, Error::ModExpBaseTooLarge) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::KeyLength { got } => write!(f, "BadKeyLength {{ got: {got} }}"),
            Rejection::WeakKey => f.write_str("WeakKey"),
            Rejection::MacKeyLength { got } => write!(f, "BadMacKeyLength {{ got: {got} }}"),
            Rejection::IvLength { expected, got } => {
                write!(f, "BadIvLength {{ expected: {expected}, got: {got} }}")
            }
            Rejection::TagLength { got } => write!(f, "BadTagLength {{ got: {got} }}"),
            Rejection::NotBlockMultiple { len, block } => {
                write!(f, "NotBlockMultiple {{ len: {len}, block: {block} }}")
            }
            Rejection::BadKey => f.write_str("BadKey"),
            Rejection::KeyTooSmall { bits } => write!(f, "KeyTooSmall {{ bits: {bits} }}"),
            Rejection::KeyTooLarge { bits } => write!(f, "KeyTooLarge {{ bits: {bits} }}"),
            Rejection::InputLength { got, expected } => {
                write!(f, "BadInputLength {{ got: {got}, expected: {expected} }}")
            }
            Rejection::BadSignature => f.write_str("BadSignature"),
            Rejection::InvalidPoint => f.write_str("InvalidPoint"),
            Rejection::ZeroSharedSecret => f.write_str("ZeroSharedSecret"),
            Rejection::PeerValueOutOfRange => f.write_str("PeerValueOutOfRange"),
            Rejection::ModExpBaseTooLarge => f.write_str("ModExpBaseTooLarge"),
        }
    }
}

/// Applies PKCS#7 padding to a whole number of `block`-byte blocks.
pub(crate) fn pkcs7_pad(data: &[u8], block: usize) -> Vec<u8> {
    let pad = block - data.len() % block;
    let mut out = data.to_vec();
    // `pad` is in 1..=block and block is at most 16, so it fits a byte.
    out.resize(data.len() + pad, pad as u8);
    out
}

/// Removes PKCS#7 padding, or says why it is not valid padding.
pub(crate) fn pkcs7_unpad(data: &[u8], block: usize) -> Result<&[u8], &'static str> {
    let Some(&last) = data.last() else {
        return Err("empty: no padding");
    };
    let pad = usize::from(last);
    if pad == 0 || pad > block || pad > data.len() {
        return Err("padding length byte out of range");
    }
    let (body, padding) = data.split_at(data.len() - pad);
    if padding.iter().any(|&b| b != last) {
        return Err("padding bytes differ");
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkcs7_round_trips_and_rejects() {
        assert_eq!(pkcs7_pad(b"", 16), vec![16u8; 16]);
        assert_eq!(pkcs7_pad(b"abc", 8), b"abc\x05\x05\x05\x05\x05".to_vec());
        assert_eq!(pkcs7_unpad(&pkcs7_pad(b"hello", 16), 16), Ok(&b"hello"[..]));
        assert!(pkcs7_unpad(b"", 16).is_err());
        assert!(pkcs7_unpad(&[1, 2, 3, 0], 16).is_err());
        assert!(pkcs7_unpad(&[1, 2, 2, 3], 16).is_err());
        assert!(pkcs7_unpad(&[17u8; 32], 16).is_err());
    }

    #[test]
    fn rejections_match_variant_and_lengths() {
        let r = Rejection::IvLength { expected: 12, got: 8 };
        assert!(r.matches(&Error::BadIvLength { expected: 12, got: 8 }));
        assert!(!r.matches(&Error::BadIvLength { expected: 12, got: 16 }));
        assert!(!r.matches(&Error::AuthFailed));
        assert!(
            Rejection::TagLength { got: 12 }.matches(&Error::BadTagLength { got: 12, allowed: "whatever" })
        );
        let r = Rejection::KeyTooSmall { bits: 1024 };
        assert!(r.matches(&Error::KeyTooSmall { bits: 1024, min: 2048 }));
        assert!(!r.matches(&Error::KeyTooSmall { bits: 1536, min: 2048 }));
        assert!(!r.matches(&Error::BadKey { why: "x" }));
        let r = Rejection::InputLength { got: 1087, expected: 1088 };
        assert!(r.matches(&Error::BadInputLength { what: "ciphertext", got: 1087, expected: 1088 }));
        assert!(!r.matches(&Error::BadInputLength { what: "ciphertext", got: 1089, expected: 1088 }));
        assert!(Rejection::InvalidPoint.matches(&Error::InvalidPoint));
        assert!(!Rejection::InvalidPoint.matches(&Error::BadSignature));
    }
}
