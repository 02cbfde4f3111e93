//! IPComp (RFC 3173 §2.2): the 4-byte header in front of a compressed payload — Next
//! Header, Flags, Compression Parameter Index — as a checked view ([`Packet`]) and its
//! meaning ([`Repr`]).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Next Header  |     Flags     | Compression Parameter Index   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Flags are reserved: sent as zero and ignored on receipt (RFC 3173 §2.2), so [`Repr`]
//! has none and [`Repr::emit`] writes zero. What the CPI means (the SA's algorithm, or a
//! well-known value below 64: 2 is DEFLATE) belongs to the SA, not to this view.

use crate::bytes::{be16, set_be16};
use crate::error::{need, Result};
use crate::ip::IpProtocol;

/// The length of the IPComp header.
pub const HEADER_LEN: usize = 4;

/// The well-known CPI of DEFLATE (RFC 3174 §2, IANA's IPComp transform identifier 2).
pub const CPI_DEFLATE: u16 = 2;

/// Byte offsets of the header fields (RFC 3173 §2.2).
mod field {
    pub const NEXT_HEADER: usize = 0;
    pub const FLAGS: usize = 1;
    pub const CPI: usize = 2;
}

/// A view of an IPComp packet (header and compressed payload) in a byte buffer.
///
/// Getters on a view made with [`new_unchecked`](Packet::new_unchecked) may panic if the
/// buffer is shorter than 4 bytes; [`new_checked`](Packet::new_checked) rules that out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Packet::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the 4-byte header.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(self.buffer.as_ref(), HEADER_LEN)
    }

    /// Gives back the buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The protocol of the payload once decompressed.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// The reserved flags (ignored on receipt).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The Compression Parameter Index.
    #[inline]
    pub fn cpi(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CPI)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The compressed payload after the header.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the Next Header field.
    #[inline]
    pub fn set_next_header(&mut self, next: IpProtocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = next.0;
    }

    /// Sets the flags.
    #[inline]
    pub fn set_flags(&mut self, flags: u8) {
        self.buffer.as_mut()[field::FLAGS] = flags;
    }

    /// Sets the CPI.
    #[inline]
    pub fn set_cpi(&mut self, cpi: u16) {
        set_be16(self.buffer.as_mut(), field::CPI, cpi);
    }

    /// The payload after the header, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The meaning of an IPComp header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The protocol of the decompressed payload (IPv4/IPv6 in tunnel mode, the upper layer
    /// in transport mode).
    pub next_header: IpProtocol,
    /// The Compression Parameter Index.
    pub cpi: u16,
}

impl Repr {
    /// Parses an IPComp header; the flags are ignored (RFC 3173 §2.2).
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { next_header: packet.next_header(), cpi: packet.cpi() })
    }

    /// The length of the header.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The length [`emit`](Repr::emit) writes: the header only.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header, flags zero.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        packet.check_len()?;
        packet.set_next_header(self.next_header);
        packet.set_flags(0);
        packet.set_cpi(self.cpi);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// An IPComp header carrying IPv4 (tunnel mode) with DEFLATE's well-known CPI 2: next
    /// header 4, flags 0, CPI 0x0002 (RFC 3173 §2.2 layout).
    const HEADER: [u8; 4] = [0x04, 0x00, 0x00, 0x02];

    #[test]
    fn parses_and_emits_the_same_bytes() {
        let mut bytes = HEADER.to_vec();
        bytes.extend_from_slice(&[0xcb, 0x00]);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r, Repr { next_header: IpProtocol::IPV4, cpi: CPI_DEFLATE });
        assert_eq!(p.payload(), &[0xcb, 0x00]);
        let mut out = [0xffu8; 6];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(&out[..4], &HEADER);
        assert_eq!(r.buffer_len(), 4);
    }

    #[test]
    fn flags_are_ignored_on_receipt_and_zero_on_emit() {
        let bytes = [0x29, 0xa5, 0x12, 0x34];
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.flags(), 0xa5);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r, Repr { next_header: IpProtocol::IPV6, cpi: 0x1234 });
        let mut out = [0u8; 4];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, [0x29, 0x00, 0x12, 0x34]);
    }

    #[test]
    fn short_buffers_are_truncated_never_a_panic() {
        for n in 0..HEADER_LEN {
            let b = vec![0u8; n];
            assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Truncated { needed: 4, got: n });
            assert!(Repr::parse(&Packet::new_unchecked(&b[..])).is_err());
            let mut o = vec![0u8; n];
            let r = Repr { next_header: IpProtocol::TCP, cpi: 2 };
            assert!(r.emit(&mut Packet::new_unchecked(&mut o[..])).is_err());
        }
    }
}
