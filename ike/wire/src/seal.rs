//! Laying out a message whose last payload is SK or SKF before its encrypted body exists,
//! so that the core can compute IV, ciphertext and ICV in place.
//!
//! The lengths in the IKE header and the SK/SKF header cover the body, and the associated
//! data (AEAD) or the integrity input covers those headers, so the headers are written
//! first, with the body's final length, and the body after:
//!
//! ```text
//! let mut s = Sealing::new(&header, &[], Frame::Sk { inner }, iv + ct + icv)?;
//! ┌──────────── s.aad() ─────────────┬──────────── s.body_mut() ────────────┐
//! │ IKE header │ clear payloads │ SK hdr │ IV │ ciphertext             │ ICV │
//! └──────────────────────────────────┴──────────────────────────────────────┘
//!   AEAD:  seal(aad = s.aad(), plaintext → ciphertext, tag → ICV)   (RFC 5282 §5.1)
//!   CBC+HMAC: encrypt into the body, then ICV = MAC(s.bytes()[..len - icv_len])
//! s.into_bytes() → the datagram
//! ```
//!
//! For SKF the associated data also covers Fragment Number and Total Fragments
//! (RFC 7383 §2.5).

use crate::encrypted::{Encrypted, Fragment};
use crate::error::Result;
use crate::header;
use crate::ids::PayloadType;
use crate::message::{Message, Payload};

/// Which encrypted payload ends the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Frame {
    /// SK, whose inner chain starts with this type.
    Sk {
        /// The first inner payload's type.
        inner: PayloadType,
    },
    /// SKF: fragment `number` of `total`; `inner` is the first inner type on fragment 1 and
    /// [`PayloadType::NONE`] on the others.
    Skf {
        /// The first inner payload's type, or NONE.
        inner: PayloadType,
        /// Fragment Number, from 1.
        number: u16,
        /// Total Fragments.
        total: u16,
    },
}

/// A message laid out with its final lengths and a zeroed encrypted body to fill in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealing {
    bytes: Vec<u8>,
    body_offset: usize,
}

impl Sealing {
    /// Lays out `header`, the unencrypted payloads `clear` (usually none), and the SK or
    /// SKF header of `frame` with a body of `body_len` bytes (IV + ciphertext + ICV).
    pub fn new(header: &header::Repr, clear: &[Payload], frame: Frame, body_len: usize) -> Result<Sealing> {
        let mut payloads = clear.to_vec();
        let body = vec![0; body_len];
        payloads.push(match frame {
            Frame::Sk { inner } => Payload::Sk(Encrypted { inner, body }),
            Frame::Skf { inner, number, total } => Payload::Skf(Fragment { number, total, inner, body }),
        });
        let bytes = Message { header: *header, payloads }.to_bytes()?;
        Ok(Sealing { body_offset: bytes.len() - body_len, bytes })
    }

    /// The bytes before the body: the associated data.
    pub fn aad(&self) -> &[u8] {
        &self.bytes[..self.body_offset]
    }

    /// The body to fill: IV, ciphertext, ICV.
    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[self.body_offset..]
    }

    /// The associated data and the body together, for an AEAD that reads one while writing
    /// the other.
    pub fn split_mut(&mut self) -> (&[u8], &mut [u8]) {
        let (aad, body) = self.bytes.split_at_mut(self.body_offset);
        (aad, body)
    }

    /// The whole message as it stands.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The whole message, mutable (for an integrity algorithm writing the ICV at its end
    /// after reading the rest).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    /// Where the body starts.
    pub fn body_offset(&self) -> usize {
        self.body_offset
    }

    /// The datagram.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}
