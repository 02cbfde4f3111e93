//! AH (RFC 4302): a checked view of the Authentication Header ([`Packet`]) and its meaning
//! ([`Repr`]).
//!
//! ```text
//!  0        8        16                31
//!  ┌────────┬────────┬─────────────────┐
//!  │ next   │ len    │ reserved        │   len = AH length in 4-byte words − 2
//!  ├────────┴────────┴─────────────────┤
//!  │ SPI                               │
//!  ├───────────────────────────────────┤
//!  │ sequence number (low 32 bits)     │
//!  ├───────────────────────────────────┤
//!  │ ICV (IV first for AES-GMAC) …     │   padded to 4 bytes (IPv4) or 8 (IPv6)
//!  └───────────────────────────────────┘
//! ```
//!
//! The view knows nothing of ICV lengths (they belong to the SA's algorithm): everything
//! after the 12 fixed bytes is [`Packet::icv`], padding included.
//!
//!
//! The ICV's input, the packet with its mutable fields zeroed, is [`crate::ah_icv`]'s.

use crate::bytes::{be16, be32, set_be16, set_be32};
use crate::error::{need, Error, Result};
use crate::ip::IpProtocol;

/// The bytes before the ICV: Next Header, Payload Len, Reserved, SPI, Sequence Number.
pub const FIXED_LEN: usize = 12;

/// Byte offsets of the header fields (RFC 4302 §2).
mod field {
    pub const NEXT_HEADER: usize = 0;
    pub const PAYLOAD_LEN: usize = 1;
    pub const RESERVED: usize = 2;
    pub const SPI: usize = 4;
    pub const SEQUENCE_NUMBER: usize = 8;
}

/// A view of an Authentication Header (and what follows it) in a byte buffer.
///
/// Getters on a view made with [`new_unchecked`](Packet::new_unchecked) may panic if the
/// buffer is shorter than the header says; [`new_checked`](Packet::new_checked) rules that
/// out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl Packet<&[u8]> {
    /// The bytes before the ICV (also [`FIXED_LEN`]).
    pub const FIXED_LEN: usize = FIXED_LEN;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer that starts with the header, without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Packet::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let header = Packet::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    /// Checks that the length field covers at least the 12 fixed bytes (Payload Len ≥ 1)
    /// and that the buffer holds the whole header.
    ///
    /// Errors: [`Error::Truncated`], [`Error::BadAhLen`].
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        need(buf, 2)?;
        if buf[field::PAYLOAD_LEN] < 1 {
            return Err(Error::BadAhLen(buf[field::PAYLOAD_LEN]));
        }
        need(buf, self.header_len())
    }

    /// Gives back the buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The protocol of the header after this one.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// The raw Payload Len field.
    #[inline]
    pub fn payload_len_field(&self) -> u8 {
        self.buffer.as_ref()[field::PAYLOAD_LEN]
    }

    /// The length of this header in bytes: (Payload Len + 2) × 4 (RFC 4302 §2.2).
    #[inline]
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[field::PAYLOAD_LEN]) + 2) * 4
    }

    /// The Reserved field (sent as zero, covered by the ICV as it is).
    #[inline]
    pub fn reserved(&self) -> u16 {
        be16(self.buffer.as_ref(), field::RESERVED)
    }

    /// The Security Parameters Index.
    #[inline]
    pub fn spi(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SPI)
    }

    /// The sequence number (its low 32 bits with extended sequence numbers).
    #[inline]
    pub fn sequence_number(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEQUENCE_NUMBER)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The Integrity Check Value field (an AES-GMAC IV first, padding last), after the 12
    /// fixed bytes.
    #[inline]
    pub fn icv(&self) -> &'a [u8] {
        &self.buffer.as_ref()[FIXED_LEN..self.header_len()]
    }

    /// What follows the header: the upper layer, or the inner packet.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the protocol of the header after this one.
    #[inline]
    pub fn set_next_header(&mut self, next: IpProtocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = next.0;
    }

    /// Sets the Payload Len field from the header's length in bytes (a multiple of 4, from
    /// 12 to 1028).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[field::PAYLOAD_LEN] = (len / 4).saturating_sub(2) as u8;
    }

    /// Sets the Reserved field.
    #[inline]
    pub fn set_reserved(&mut self, value: u16) {
        set_be16(self.buffer.as_mut(), field::RESERVED, value);
    }

    /// Sets the SPI.
    #[inline]
    pub fn set_spi(&mut self, spi: u32) {
        set_be32(self.buffer.as_mut(), field::SPI, spi);
    }

    /// Sets the sequence number.
    #[inline]
    pub fn set_sequence_number(&mut self, seq: u32) {
        set_be32(self.buffer.as_mut(), field::SEQUENCE_NUMBER, seq);
    }

    /// The ICV field (with IV and padding), mutable.
    #[inline]
    pub fn icv_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[FIXED_LEN..end]
    }
}

/// The meaning of an Authentication Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The protocol after AH: IPv4 or IPv6 in tunnel mode, the upper layer in transport
    /// mode.
    pub next_header: IpProtocol,
    /// The Security Parameters Index (never 0).
    pub spi: u32,
    /// The sequence number (low 32 bits with ESN).
    pub sequence_number: u32,
    /// The ICV field's length: IV (AES-GMAC), ICV and padding.
    pub icv_field_len: usize,
}

impl Repr {
    /// The ICV field for an ICV of `icv_len` bytes after an IV of `iv_len`, padded so that
    /// the header is a multiple of 4 bytes over IPv4 or 8 over IPv6 (RFC 4302 §3.3.3.2.1).
    #[inline]
    pub const fn icv_field_len(iv_len: usize, icv_len: usize, v6: bool) -> usize {
        let align = if v6 { 8 } else { 4 };
        let header = (FIXED_LEN + iv_len + icv_len).div_ceil(align) * align;
        header - FIXED_LEN
    }

    /// Parses an Authentication Header. Errors: those of [`Packet::check_len`], and
    /// [`Error::ReservedSpi`] for SPI 0 (RFC 4302 §2.4: never sent).
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        let spi = packet.spi();
        if spi == 0 {
            return Err(Error::ReservedSpi);
        }
        Ok(Repr {
            next_header: packet.next_header(),
            spi,
            sequence_number: packet.sequence_number(),
            icv_field_len: packet.header_len() - FIXED_LEN,
        })
    }

    /// The length of the header: 12 bytes and the ICV field.
    #[inline]
    pub const fn header_len(&self) -> usize {
        FIXED_LEN + self.icv_field_len
    }

    /// The length [`emit`](Repr::emit) writes: the header.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the header with Reserved and the ICV field zero (as the ICV's input has it).
    ///
    /// Errors: [`Error::Truncated`] for a short buffer; [`Error::TooLong`] for an ICV field
    /// that is not a multiple of 4 bytes or does not fit Payload Len.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        const MAX: usize = (255 + 2) * 4 - FIXED_LEN;
        if self.icv_field_len > MAX || self.icv_field_len % 4 != 0 {
            return Err(Error::TooLong { max: MAX, got: self.icv_field_len });
        }
        let len = self.header_len();
        need(packet.buffer.as_ref(), len)?;
        packet.set_next_header(self.next_header);
        packet.set_header_len(len);
        packet.set_reserved(0);
        packet.set_spi(self.spi);
        packet.set_sequence_number(self.sequence_number);
        packet.icv_mut().fill(0);
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests;
