//! The generic payload header (RFC 7296 §3.2) and the walk along a payload chain.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Next Payload  |C|  RESERVED   |         Payload Length        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Each payload names the type of the one after it; the IKE header (or, inside an SK
//! payload, the SK payload's own Next Payload field) names the first. The walk:
//!
//! ```text
//!  type = first                       (from the IKE header, or the SK payload's field)
//!  loop:
//!    type == NONE   -> end; bytes left over: Error::TrailingBytes
//!    read 4 bytes   -> Error::Truncated if fewer are left
//!    length < 4     -> Error::PayloadTooShort
//!    length > left  -> Error::PayloadOverrun
//!    yield (type, critical, body, offset)
//!    type == SK/SKF -> end (their Next Payload is the first *inner* type, and they must be
//!                      last): bytes left over: Error::TrailingBytes
//!    type = this payload's Next Payload
//! ```
//!
//! The walk knows lengths only. Whether a type is known, and what to do with an unknown
//! one (skip it, or refuse the message when its critical bit is set, §2.5), is decided by
//! [`message`](crate::message), which parses each body.

use crate::error::{Error, Result};
use crate::ids::PayloadType;

/// The length of the generic payload header.
pub const HEADER_LEN: usize = 4;

/// The critical bit in the generic header's second octet.
pub const CRITICAL: u8 = 0x80;

/// A view of one payload's generic header and body.
///
/// Getters on a view made with [`new_unchecked`](Packet::new_unchecked) may panic if the
/// buffer is shorter than 4 bytes or than its Payload Length; [`new_checked`](Packet::new_checked)
/// rules that out (for the type it is told, which only names the payload in errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer holding a payload of type `payload` (for errors) after
    /// [`check_len`](Packet::check_len).
    pub fn new_checked(buffer: T, payload: PayloadType) -> Result<Packet<T>> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len(payload)?;
        Ok(packet)
    }

    /// Checks that the buffer holds the generic header and the Payload Length it gives,
    /// and that the Payload Length covers the header.
    pub fn check_len(&self, payload: PayloadType) -> Result<()> {
        let got = self.buffer.as_ref().len();
        if got < HEADER_LEN {
            return Err(Error::Truncated { what: "payload header", needed: HEADER_LEN, got });
        }
        let length = self.payload_length();
        if (length as usize) < HEADER_LEN {
            return Err(Error::PayloadTooShort { payload, length });
        }
        if length as usize > got {
            return Err(Error::PayloadOverrun { payload, length, remaining: got });
        }
        Ok(())
    }

    /// The type of the payload after this one (for SK and SKF: of the first inner payload).
    pub fn next_payload(&self) -> PayloadType {
        PayloadType(self.buffer.as_ref()[0])
    }

    /// The critical bit.
    pub fn critical(&self) -> bool {
        self.buffer.as_ref()[1] & CRITICAL != 0
    }

    /// The Payload Length: generic header and body.
    pub fn payload_length(&self) -> u16 {
        u16::from_be_bytes([self.buffer.as_ref()[2], self.buffer.as_ref()[3]])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The body: the bytes after the generic header, up to the Payload Length.
    pub fn body(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.payload_length() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the generic header: next type, critical bit (the reserved bits 0), length.
    pub fn set_header(&mut self, next: PayloadType, critical: bool, length: u16) {
        let b = self.buffer.as_mut();
        b[0] = next.0;
        b[1] = if critical { CRITICAL } else { 0 };
        b[2..4].copy_from_slice(&length.to_be_bytes());
    }
}

/// A payload's body (what follows the generic header), parsed and emitted. Every payload
/// [`Repr`](crate::Payload) implements it; [`Message`](crate::Message) adds the generic
/// headers.
pub trait Body: Sized {
    /// Parses a body (the bytes after the generic header, up to the Payload Length).
    fn parse(body: &[u8]) -> Result<Self>;

    /// The length [`emit`](Body::emit) writes.
    fn buffer_len(&self) -> usize;

    /// Writes the body into the first [`buffer_len`](Body::buffer_len) bytes of `buf`;
    /// [`Error::Truncated`] if `buf` is shorter, [`Error::TooLong`] if a field cannot hold
    /// its length.
    fn emit(&self, buf: &mut [u8]) -> Result<()>;

    /// The body as a new vector.
    fn to_vec(&self) -> Result<Vec<u8>> {
        let mut out = vec![0; self.buffer_len()];
        self.emit(&mut out)?;
        Ok(out)
    }
}

/// One payload found by [`Walker`]: its type, critical bit, body, and where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawPayload<'a> {
    /// This payload's type (named by the one before it).
    pub payload_type: PayloadType,
    /// The critical bit.
    pub critical: bool,
    /// The Next Payload field: the type after this one, or for SK/SKF the first inner type.
    pub next: PayloadType,
    /// The body, after the generic header.
    pub body: &'a [u8],
    /// Where the generic header starts, from the start of the chain (plus the walker's
    /// base: the IKE header's 28 bytes when walking a whole message).
    pub offset: usize,
}

/// Walks a payload chain, yielding each payload or the first error (then nothing more).
#[derive(Debug, Clone)]
pub struct Walker<'a> {
    chain: &'a [u8],
    at: usize,
    base: usize,
    next: PayloadType,
    last: PayloadType,
    done: bool,
}

impl<'a> Walker<'a> {
    /// A walk over `chain`, whose first payload is of type `first`; offsets are reported
    /// plus `base` (28 for a message's payloads, so that they count from the IKE header).
    pub fn new(chain: &'a [u8], first: PayloadType, base: usize) -> Walker<'a> {
        Walker { chain, at: 0, base, next: first, last: PayloadType::NONE, done: false }
    }

    fn step(&mut self) -> Result<Option<RawPayload<'a>>> {
        let rest = &self.chain[self.at..];
        if self.next == PayloadType::NONE {
            self.done = true;
            if !rest.is_empty() {
                return Err(Error::TrailingBytes { after: self.last, extra: rest.len() });
            }
            return Ok(None);
        }
        let payload_type = self.next;
        let packet = Packet::new_checked(rest, payload_type)?;
        let raw = RawPayload {
            payload_type,
            critical: packet.critical(),
            next: packet.next_payload(),
            body: packet.body(),
            offset: self.base + self.at,
        };
        self.at += packet.payload_length() as usize;
        if payload_type == PayloadType::SK || payload_type == PayloadType::SKF {
            self.done = true;
            if self.at != self.chain.len() {
                return Err(Error::TrailingBytes { after: payload_type, extra: self.chain.len() - self.at });
            }
        } else {
            self.next = raw.next;
        }
        self.last = payload_type;
        Ok(Some(raw))
    }
}

impl<'a> Iterator for Walker<'a> {
    type Item = Result<RawPayload<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(raw)) => Some(Ok(raw)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the walker yields, owned: type, critical bit, body, offset.
    type Found = (PayloadType, bool, Vec<u8>, usize);

    fn walk(chain: &[u8], first: PayloadType) -> Result<Vec<Found>> {
        Walker::new(chain, first, 28)
            .map(|r| r.map(|p| (p.payload_type, p.critical, p.body.to_vec(), p.offset)))
            .collect()
    }

    #[test]
    fn walks_a_chain() {
        // Nonce (2 body bytes) -> Vendor ID (critical, empty) -> end.
        let chain = [43, 0, 0, 6, 0xaa, 0xbb, 0, 0x80, 0, 4];
        assert_eq!(
            walk(&chain, PayloadType::NONCE).unwrap(),
            vec![
                (PayloadType::NONCE, false, vec![0xaa, 0xbb], 28),
                (PayloadType::VENDOR_ID, true, vec![], 34)
            ]
        );
        assert_eq!(walk(&[], PayloadType::NONE).unwrap(), vec![]);
    }

    #[test]
    fn refuses_lengths_that_do_not_add_up() {
        assert_eq!(
            walk(&[0, 0, 0, 3], PayloadType::NONCE),
            Err(Error::PayloadTooShort { payload: PayloadType::NONCE, length: 3 })
        );
        assert_eq!(
            walk(&[0, 0, 0, 5], PayloadType::NONCE),
            Err(Error::PayloadOverrun { payload: PayloadType::NONCE, length: 5, remaining: 4 })
        );
        assert_eq!(
            walk(&[0, 0, 0, 4, 9], PayloadType::NONCE),
            Err(Error::TrailingBytes { after: PayloadType::NONCE, extra: 1 })
        );
        assert_eq!(
            walk(&[40, 0, 0, 4], PayloadType::NONCE),
            Err(Error::Truncated { what: "payload header", needed: 4, got: 0 })
        );
        assert_eq!(
            walk(&[1], PayloadType::NONE),
            Err(Error::TrailingBytes { after: PayloadType::NONE, extra: 1 })
        );
        // SK ends the chain: its Next Payload is the inner type, and nothing may follow.
        assert_eq!(
            walk(&[35, 0, 0, 4, 0], PayloadType::SK),
            Err(Error::TrailingBytes { after: PayloadType::SK, extra: 1 })
        );
        assert_eq!(
            walk(&[35, 0, 0, 5, 7], PayloadType::SK).unwrap(),
            vec![(PayloadType::SK, false, vec![7], 28)]
        );
    }
}
