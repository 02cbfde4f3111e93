//! Authentication: one round for each side (swanctl.conf's `local { }` and `remote { }`), and
//! the pre-shared key.
//!
//! A round says how a side proves its identity: `psk` (RFC 7296 §2.15's shared key MIC) or
//! `pubkey` (a signature with a certificate's key, RFC 7427). For `pubkey` the round names the
//! certificate files (`certs`, the local side's own) and the CA certificates a peer's chain
//! must end in (`cacerts`); iked reads them into [`crate::credentials`], and IKE_AUTH checks
//! chains with them (`exchange::proof`).
//!
//! A pre-shared key is written as swanctl.conf writes secrets: `0x` and hex, `0s` and base64,
//! or text (its UTF-8 bytes). It is kept in a [`Zeroizing`] buffer, compared in constant time,
//! and never printed. Keys shorter than [`PSK_MIN_LEN`] octets are refused: the AUTH payload
//! of one captured IKE_AUTH exchange is a PRF of the key over data the eavesdropper sees, so
//! a key can be guessed offline at leisure (RFC 7296 §2.15 warns of this); 16 octets of a
//! random key give 128 bits, the strength of the weakest cipher this implementation offers,
//! and a passphrase of fewer than 16 characters is weak however it is chosen.

use std::fmt;
use std::path::PathBuf;

use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use super::identity::Identity;

/// The shortest pre-shared key accepted, in octets (the module doc says why).
pub const PSK_MIN_LEN: usize = 16;

/// A pre-shared key.
#[derive(Clone)]
pub struct Psk(Zeroizing<Vec<u8>>);

/// What is wrong with a pre-shared key. Never quotes the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PskError {
    /// Shorter than [`PSK_MIN_LEN`] octets once decoded.
    TooShort { len: usize },
    /// `0x` with an odd number of digits or a character that is not a hex digit.
    BadHex,
    /// `0s` with text that is not base64.
    BadBase64,
}

impl fmt::Display for PskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PskError::TooShort { len } => {
                write!(f, "pre-shared key of {len} octets is shorter than the minimum of {PSK_MIN_LEN}")
            }
            PskError::BadHex => write!(f, "pre-shared key after 0x is not an even number of hex digits"),
            PskError::BadBase64 => write!(f, "pre-shared key after 0s is not base64"),
        }
    }
}

impl std::error::Error for PskError {}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn decode_hex(s: &str) -> Option<Zeroizing<Vec<u8>>> {
    let b = s.as_bytes();
    if b.len() % 2 != 0 {
        return None;
    }
    let mut out = Zeroizing::new(Vec::with_capacity(b.len() / 2));
    for pair in b.chunks(2) {
        out.push(hex_value(pair[0])? << 4 | hex_value(pair[1])?);
    }
    Some(out)
}

fn b64_value(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    } as u32)
}

/// Standard base64 (RFC 4648 §4) with optional `=` padding.
fn decode_base64(s: &str) -> Option<Zeroizing<Vec<u8>>> {
    let b = s.trim_end_matches('=').as_bytes();
    if s.len() - b.len() > 2 || b.len() % 4 == 1 {
        return None;
    }
    let mut out = Zeroizing::new(Vec::with_capacity(b.len() * 3 / 4));
    for chunk in b.chunks(4) {
        let mut acc = Zeroizing::new(0u32);
        for (i, &c) in chunk.iter().enumerate() {
            *acc |= b64_value(c)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

impl Psk {
    /// Reads a secret as swanctl.conf writes it: `0x` hex, `0s` base64, or text.
    pub fn parse(text: &str) -> Result<Psk, PskError> {
        let bytes = if let Some(h) = text.strip_prefix("0x") {
            decode_hex(h).ok_or(PskError::BadHex)?
        } else if let Some(b) = text.strip_prefix("0s") {
            decode_base64(b).ok_or(PskError::BadBase64)?
        } else {
            Zeroizing::new(text.as_bytes().to_vec())
        };
        Psk::from_bytes(bytes)
    }

    /// A key from its octets, refused below [`PSK_MIN_LEN`].
    pub fn from_bytes(bytes: Zeroizing<Vec<u8>>) -> Result<Psk, PskError> {
        if bytes.len() < PSK_MIN_LEN {
            return Err(PskError::TooShort { len: bytes.len() });
        }
        Ok(Psk(bytes))
    }

    /// The key's octets, for the PRF.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl PartialEq for Psk {
    /// In constant time.
    fn eq(&self, other: &Psk) -> bool {
        self.0.len() == other.0.len() && bool::from(self.0.ct_eq(&other.0))
    }
}

impl Eq for Psk {}

impl fmt::Debug for Psk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Psk({} octets, redacted)", self.0.len())
    }
}

/// How a side authenticates (swanctl.conf's `auth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthMethod {
    /// `psk`: the key comes from the secrets, looked up by the two identities.
    Psk,
    /// `pubkey`: a signature with the key of a certificate.
    Pubkey,
}

/// One authentication round of one side.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AuthRound {
    pub method: AuthMethod,
    /// The identity this side uses (local) or must present (remote). [`Identity::Any`] on the
    /// local side means the address IKE runs from (psk) or the certificate's subject (pubkey);
    /// on the remote side, any identity the secrets or the CA vouch for.
    pub id: Identity,
    /// `pubkey`: certificate files, the local side's own first (its end-entity certificate).
    pub certs: Vec<PathBuf>,
    /// `pubkey`: CA certificate files a chain must end in.
    pub cacerts: Vec<PathBuf>,
}

impl AuthRound {
    /// A round with an identity and no certificates.
    pub fn new(method: AuthMethod, id: Identity) -> AuthRound {
        AuthRound { method, id, certs: Vec::new(), cacerts: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let hex = Psk::parse("0x000102030405060708090a0b0c0d0e0F").unwrap();
        assert_eq!(hex.as_bytes(), (0u8..16).collect::<Vec<_>>().as_slice());
        // RFC 4648 §10's vectors, made long enough: "foobar" three times is 18 octets.
        let b64 = Psk::parse("0sZm9vYmFyZm9vYmFyZm9vYmFy").unwrap();
        assert_eq!(b64.as_bytes(), b"foobarfoobarfoobar");
        let padded = Psk::parse("0sZm9vYmFyZm9vYmFyZm9vYmFyZm8=").unwrap();
        assert_eq!(padded.as_bytes(), b"foobarfoobarfoobarfo");
        let padded2 = Psk::parse("0sZm9vYmFyZm9vYmFyZm9vYmFyZg==").unwrap();
        assert_eq!(padded2.as_bytes(), b"foobarfoobarfoobarf");
        let text = Psk::parse("correct horse battery").unwrap();
        assert_eq!(text.as_bytes(), b"correct horse battery");
        assert_eq!(format!("{text:?}"), "Psk(21 octets, redacted)");
        assert_eq!(text, Psk::parse("correct horse battery").unwrap());
        assert_ne!(text, Psk::parse("correct horse battery!").unwrap());
    }

    #[test]
    fn refused() {
        assert_eq!(Psk::parse("short").unwrap_err(), PskError::TooShort { len: 5 });
        assert_eq!(Psk::parse("0x0001").unwrap_err(), PskError::TooShort { len: 2 });
        assert_eq!(Psk::parse(&"x".repeat(15)).unwrap_err(), PskError::TooShort { len: 15 });
        assert!(Psk::parse(&"x".repeat(16)).is_ok());
        assert_eq!(Psk::parse("0x0g").unwrap_err(), PskError::BadHex);
        assert_eq!(Psk::parse("0x000").unwrap_err(), PskError::BadHex);
        assert_eq!(Psk::parse("0sZm9v!mFy").unwrap_err(), PskError::BadBase64);
        assert_eq!(Psk::parse("0sZ").unwrap_err(), PskError::BadBase64);
        assert_eq!(Psk::parse("0sZg===").unwrap_err(), PskError::BadBase64);
    }
}
