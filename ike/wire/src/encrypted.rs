//! The Encrypted and Authenticated payload SK (RFC 7296 §3.14) and the Encrypted Fragment
//! payload SKF (RFC 7383 §2.5), as framing: the codec does no cryptography.
//!
//! ```text
//! SK:   | Next Payload = first inner type |C| RESERVED | Payload Length |
//!       | IV | ciphertext (inner payloads, padding, Pad Length) | ICV |
//!
//! SKF:  | Next Payload = first inner type (fragment 1) or 0 |C| RESERVED | Payload Length |
//!       | Fragment Number (2) | Total Fragments (2) |
//!       | IV | ciphertext | ICV |
//! ```
//!
//! Both are the last payload of their message. The integrity check and AEAD associated data
//! cover the message from the IKE header through the SK header, or through the SKF header
//! with its two 16-bit fields (RFC 5282 §5.1, RFC 7383 §2.5):
//! [`Message::aad_len`](crate::Message::aad_len) gives that length for a parsed message,
//! and [`Sealing`](crate::Sealing) lays a message out before its body is computed.
//!
//! The plaintext inside is the inner payload chain, then padding, then a Pad Length byte
//! (§3.14): [`pad`] adds them before encryption, [`unpad`] takes them off after decryption.

use crate::bytes::Reader;
use crate::error::{Error, Result};
use crate::ids::PayloadType;

/// The length of the SKF fields before the encrypted body: Fragment Number, Total Fragments.
pub const SKF_FIELDS_LEN: usize = 4;

/// An SK payload: the type of the first payload inside, and the encrypted body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Encrypted {
    /// The first inner payload's type (the SK header's Next Payload field).
    pub inner: PayloadType,
    /// IV, ciphertext and ICV, as they travel.
    pub body: Vec<u8>,
}

/// An SKF payload: one fragment of an SK payload's plaintext, encrypted on its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fragment {
    /// The Fragment Number, from 1.
    pub number: u16,
    /// The Total Fragments.
    pub total: u16,
    /// The first inner payload's type on fragment 1, [`PayloadType::NONE`] on the others.
    pub inner: PayloadType,
    /// IV, ciphertext and ICV, as they travel.
    pub body: Vec<u8>,
}

impl Fragment {
    /// Parses an SKF body (after the generic header, whose Next Payload is `inner`):
    /// 1 <= Fragment Number <= Total Fragments, else [`Error::FragmentNumber`].
    pub fn parse(inner: PayloadType, body: &[u8]) -> Result<Fragment> {
        let mut r = Reader::new(body, "SKF payload");
        let number = r.u16()?;
        let total = r.u16()?;
        check_numbers(number, total)?;
        Ok(Fragment { number, total, inner, body: r.rest().to_vec() })
    }
}

/// The inner chain with padding and the Pad Length byte appended, so that the result is a
/// multiple of `block` bytes (the cipher's block size; 1 or 0 for none, as with AES-GCM and
/// ChaCha20-Poly1305, RFC 5282 §3, RFC 7634 §2). The padding bytes are 0.
pub fn pad(inner: &[u8], block: usize) -> Vec<u8> {
    let block = block.clamp(1, 256);
    let pad_len = (block - (inner.len() + 1) % block) % block;
    let mut out = Vec::with_capacity(inner.len() + pad_len + 1);
    out.extend_from_slice(inner);
    out.resize(inner.len() + pad_len, 0);
    out.push(pad_len as u8);
    out
}

/// The inner chain of a decrypted SK or SKF plaintext: what precedes the padding and the
/// Pad Length byte (whose padding bytes may hold anything, §3.14).
/// [`Error::Truncated`] for an empty plaintext, [`Error::PadLength`] when the Pad Length
/// is longer than what precedes it.
pub fn unpad(plaintext: &[u8]) -> Result<&[u8]> {
    let Some((&pad_length, rest)) = plaintext.split_last() else {
        return Err(Error::Truncated { what: "SK plaintext", needed: 1, got: 0 });
    };
    if pad_length as usize > rest.len() {
        return Err(Error::PadLength { pad_length, plaintext: plaintext.len() });
    }
    Ok(&rest[..rest.len() - pad_length as usize])
}

/// Checks RFC 7383 §2.5's numbering: 1 <= number <= total.
pub(crate) fn check_numbers(number: u16, total: u16) -> Result<()> {
    if number == 0 || number > total {
        return Err(Error::FragmentNumber { number, total });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding() {
        let inner = [1u8, 2, 3, 4, 5];
        let p = pad(&inner, 16);
        assert_eq!(p.len(), 16);
        assert_eq!(p[15], 10);
        assert_eq!(unpad(&p).unwrap(), inner);
        assert_eq!(pad(&inner, 1), [1, 2, 3, 4, 5, 0]);
        assert_eq!(pad(&[0; 15], 16).len(), 16);
        assert_eq!(pad(&[0; 16], 16).len(), 32);
        // Padding bytes may hold anything.
        assert_eq!(unpad(&[9, 0xaa, 0xbb, 2]).unwrap(), [9]);
        assert_eq!(unpad(&[9, 2]), Err(Error::PadLength { pad_length: 2, plaintext: 2 }));
        assert_eq!(unpad(&[]), Err(Error::Truncated { what: "SK plaintext", needed: 1, got: 0 }));
        assert_eq!(unpad(&[0]).unwrap(), [0u8; 0]);
    }

    #[test]
    fn fragment_numbers() {
        assert_eq!(
            Fragment::parse(PayloadType::IDI, &[0, 1, 0, 2, 9]).unwrap(),
            Fragment { number: 1, total: 2, inner: PayloadType::IDI, body: vec![9] }
        );
        assert_eq!(
            Fragment::parse(PayloadType::NONE, &[0, 0, 0, 2]),
            Err(Error::FragmentNumber { number: 0, total: 2 })
        );
        assert_eq!(
            Fragment::parse(PayloadType::NONE, &[0, 3, 0, 2]),
            Err(Error::FragmentNumber { number: 3, total: 2 })
        );
        assert_eq!(
            Fragment::parse(PayloadType::NONE, &[0, 1, 0, 0]),
            Err(Error::FragmentNumber { number: 1, total: 0 })
        );
        assert_eq!(
            Fragment::parse(PayloadType::NONE, &[0, 1, 0]),
            Err(Error::Truncated { what: "SKF payload", needed: 4, got: 3 })
        );
    }
}
