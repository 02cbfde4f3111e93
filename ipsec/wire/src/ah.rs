//! AH (RFC 4302): a checked view of the Authentication Header ([`Packet`]), its meaning
//! ([`Repr`]), and the ICV's input: an IP packet with what may change on the way zeroed
//! ([`zero_mutable`]).
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
//! # The ICV's input (RFC 4302 §3.3.3.1, Appendix A)
//!
//! The ICV covers the whole IP packet as the receiver will see it, with the fields routers
//! may change zeroed:
//!
//! - IPv4: DSCP and ECN, flags and fragment offset, TTL, header checksum; every option but
//!   the immutable ones (End of List, No Operation, Security, Extended Security, Commercial
//!   Security, Router Alert, Sender Directed Multi-Destination Delivery: option numbers 0,
//!   1, 2, 5, 6, 20, 21) is zeroed whole, type and length included. Loose and Strict
//!   Source Route are zeroed like the other mutable options, and the destination address
//!   is taken as it is in the header: the "mutable but predictable" final destination of a
//!   source-routed packet is not computed (RFC 4302 §3.3.3.1.1.1 allows either; scapy does
//!   the same, and a gateway sends no source-routed packets).
//! - IPv6: traffic class, flow label, hop limit; in the Hop-by-Hop and Destination Options
//!   headers before AH, the data of each option whose type has the change bit (0x20) set;
//!   a Routing header as it will arrive: a sender with segments left (types 0 and 2, whose
//!   data is a list of addresses) authenticates the final destination in the header's
//!   destination, the first destination first in the list and segments left 0
//!   ([`Side::Sending`]); a receiver takes it as it came.
//! - AH itself: the ICV (not its padding, not an AES-GMAC IV) is zeroed.
//!
//! Headers after AH (in transport mode the upper layer, in tunnel mode the inner packet)
//! are covered as they are. With extended sequence numbers the high 32 bits follow the
//! packet in the ICV's input (RFC 4302 §2.5.1); that is the caller's, not the packet's.

use crate::bytes::{be16, be32, set_be16, set_be32};
use crate::error::{need, Error, Result};
use crate::ip::IpProtocol;
use crate::ipv6::MAX_EXTENSION_HEADERS;
use crate::ipv6_ext::ExtHeader;

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

/// Who computes the ICV: it decides how an IPv6 Routing header enters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The sender: a Routing header with segments left is put in the order it will arrive
    /// in.
    Sending,
    /// The receiver: the packet is taken as it arrived.
    Receiving,
}

/// Where [`zero_mutable`] found AH in the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Location {
    /// Where AH starts, from the start of the IP packet.
    pub offset: usize,
    /// AH's length (12 fixed bytes and the ICV field).
    pub header_len: usize,
    /// The offset of the Next Header byte that named AH: the IPv4 protocol (9), the IPv6
    /// fixed header's (6) or that of the extension header before AH.
    pub next_header_field: usize,
    /// The protocol after AH.
    pub next_header: IpProtocol,
}

/// Finds AH in the IP packet `packet` and zeroes, in place, everything the ICV does not
/// cover (see the module docs): the mutable fields and options, and the `icv_len` bytes of
/// the ICV, which start `iv_len` bytes into the ICV field. On [`Side::Sending`] an IPv6
/// Routing header is also put in the order it will arrive in.
///
/// Only the bytes up to the end of AH are read or written. The packet's IP length fields
/// bound the walk: bytes after them (link-layer padding) are not part of it. On `Err`
/// some fields may already be zeroed.
///
/// Errors: [`Error::BadVersion`]; IPv4's [`Error::Truncated`], [`Error::BadHeaderLen`],
/// [`Error::BadTotalLen`], [`Error::BadOption`]; IPv6's [`Error::Truncated`],
/// [`Error::MisplacedHopByHop`], [`Error::TooManyExtensionHeaders`], [`Error::BadOption`],
/// [`Error::UnsupportedRouting`]; [`Error::NotAh`] when no AH is where it belongs; AH's
/// [`Error::Truncated`] and [`Error::BadAhLen`] (also for an AH too short for
/// `iv_len + icv_len`, or over IPv6 not a multiple of 8 bytes).
pub fn zero_mutable(packet: &mut [u8], iv_len: usize, icv_len: usize, side: Side) -> Result<Location> {
    need(packet, 1)?;
    let (offset, next_header_field, end, v6) = match packet[0] >> 4 {
        4 => {
            let (offset, end) = zero_ipv4(packet)?;
            (offset, 9, end, false)
        }
        6 => {
            let (offset, field, end) = zero_ipv6(packet, side)?;
            (offset, field, end, true)
        }
        v => return Err(Error::BadVersion(v)),
    };
    let ah = Packet::new_checked(&packet[offset..end]).map_err(from_packet_start(offset))?;
    let header_len = ah.header_len();
    let next_header = ah.next_header();
    if header_len < FIXED_LEN + iv_len + icv_len || (v6 && header_len % 8 != 0) {
        return Err(Error::BadAhLen(ah.payload_len_field()));
    }
    let icv = offset + FIXED_LEN + iv_len;
    packet[icv..icv + icv_len].fill(0);
    Ok(Location { offset, header_len, next_header_field, next_header })
}

/// Turns a truncation inside a header at `at` into one counted from the packet start.
fn from_packet_start(at: usize) -> impl Fn(Error) -> Error {
    move |e| match e {
        Error::Truncated { needed, got } => Error::Truncated { needed: at + needed, got: at + got },
        other => other,
    }
}

/// IPv4: zeroes TOS, flags and fragment offset, TTL, checksum and the mutable options;
/// returns where AH starts and where the packet ends.
fn zero_ipv4(packet: &mut [u8]) -> Result<(usize, usize)> {
    let p = crate::ipv4::Packet::new_checked(&*packet)?;
    let (header_len, end, protocol) = (p.header_len(), usize::from(p.total_len()), p.protocol());
    if protocol != IpProtocol::AH {
        return Err(Error::NotAh(protocol.0));
    }
    packet[1] = 0; // DSCP and ECN
    packet[6..8].fill(0); // flags and fragment offset
    packet[8] = 0; // TTL
    packet[10..12].fill(0); // header checksum
    let mut at = crate::ipv4::MIN_HEADER_LEN;
    while at < header_len {
        match packet[at] {
            // End of Option List: what follows is padding, covered as it is.
            0 => break,
            // No Operation: one byte.
            1 => at += 1,
            kind => {
                let len = packet.get(at + 1).map_or(0, |&l| usize::from(l));
                if at + 1 >= header_len || len < 2 || at + len > header_len {
                    return Err(Error::BadOption { offset: at });
                }
                // Appendix A: immutable are Security (2), Extended Security (5),
                // Commercial Security (6), Router Alert (20), SDMDD (21), by option number.
                if !matches!(kind & 0x1f, 2 | 5 | 6 | 20 | 21) {
                    packet[at..at + len].fill(0);
                }
                at += len;
            }
        }
    }
    Ok((header_len, end))
}

/// IPv6: zeroes traffic class, flow label, hop limit and the mutable options of the
/// headers before AH, and puts a Routing header as it will arrive (sending); returns where
/// AH starts, the offset of the Next Header byte that named it, and where the packet ends.
fn zero_ipv6(packet: &mut [u8], side: Side) -> Result<(usize, usize, usize)> {
    let p = crate::ipv6::Packet::new_checked(&*packet)?;
    let end = p.total_len();
    let mut next = p.next_header();
    // Version stays; traffic class and flow label go.
    packet[0] &= 0xf0;
    packet[1..4].fill(0);
    packet[7] = 0; // hop limit
    let (mut at, mut field, mut count) = (crate::ipv6::HEADER_LEN, 6, 0);
    loop {
        match next {
            IpProtocol::AH => return Ok((at, field, end)),
            IpProtocol::HOP_BY_HOP | IpProtocol::ROUTING | IpProtocol::FRAGMENT | IpProtocol::DEST_OPTS => {}
            other => return Err(Error::NotAh(other.0)),
        }
        if next == IpProtocol::HOP_BY_HOP && count != 0 {
            return Err(Error::MisplacedHopByHop);
        }
        if count == MAX_EXTENSION_HEADERS {
            return Err(Error::TooManyExtensionHeaders);
        }
        let len = if next == IpProtocol::FRAGMENT {
            need(&packet[at..end], 8).map_err(from_packet_start(at))?;
            8
        } else {
            ExtHeader::new_checked(&packet[at..end]).map_err(from_packet_start(at))?.header_len()
        };
        let header = &mut packet[at..at + len];
        match next {
            IpProtocol::HOP_BY_HOP | IpProtocol::DEST_OPTS => zero_ipv6_options(header, at)?,
            IpProtocol::ROUTING if side == Side::Sending => {
                let (fixed, rest) = packet.split_at_mut(at);
                as_it_will_arrive(&mut fixed[24..40], &mut rest[..len])?;
            }
            _ => {}
        }
        count += 1;
        field = at;
        next = IpProtocol(packet[at]);
        at += len;
    }
}

/// The options of a Hop-by-Hop or Destination Options header (`header` starts at `at` in
/// the packet): the data of each option whose type has the change bit set is zeroed
/// (RFC 4302 §3.3.3.1.2.1, RFC 8200 §4.2).
fn zero_ipv6_options(header: &mut [u8], at: usize) -> Result<()> {
    let mut i = 2;
    while i < header.len() {
        let kind = header[i];
        if kind == 0 {
            // Pad1: one byte, no length.
            i += 1;
            continue;
        }
        let len = header.get(i + 1).map(|&l| usize::from(l));
        let Some(end) = len.map(|l| i + 2 + l).filter(|&e| e <= header.len()) else {
            return Err(Error::BadOption { offset: at + i });
        };
        if kind & 0x20 != 0 {
            header[i + 2..end].fill(0);
        }
        i = end;
    }
    Ok(())
}

/// A sender's Routing header with segments left, and the packet's destination `dst`, as
/// they will arrive: the final destination (the list's last address) in the header, the
/// first destination first in the list, segments left 0. Types 0 and 2 only (their data
/// is four reserved bytes and a list of addresses); any type with no segments left is
/// already as it will arrive.
fn as_it_will_arrive(dst: &mut [u8], routing: &mut [u8]) -> Result<()> {
    let (kind, left) = (routing[2], routing[3]);
    if left == 0 {
        return Ok(());
    }
    if !matches!(kind, 0 | 2) {
        return Err(Error::UnsupportedRouting(kind));
    }
    let addresses = &mut routing[8..];
    let n = addresses.len() / 16;
    if n == 0 {
        return Err(Error::UnsupportedRouting(kind));
    }
    let mut last = [0u8; 16];
    last.copy_from_slice(&addresses[(n - 1) * 16..n * 16]);
    addresses.copy_within(0..(n - 1) * 16, 16);
    addresses[..16].copy_from_slice(dst);
    dst.copy_from_slice(&last);
    routing[3] = 0;
    Ok(())
}

#[cfg(test)]
mod tests;
