//! TCP (RFC 9293 §3.1): a checked view of the header, as far as a gateway that merges a
//! flow's consecutive segments (ipsecd's TUN coalescer) reads and writes it — ports,
//! sequence and acknowledgment numbers, data offset, flags, window, checksum, urgent
//! pointer, options — and the checksum over the IPv4 or IPv6 pseudo-header.

use crate::bytes::{be16, be32, set_be16};
use crate::checksum;
use crate::error::{need, Error, Result};
use crate::ip::{IpProtocol, PseudoHeader};

/// The length of a TCP header without options.
pub const MIN_HEADER_LEN: usize = 20;

/// The flag bits of the 13th byte (RFC 9293 §3.1).
pub mod flags {
    /// No more data from the sender.
    pub const FIN: u8 = 0x01;
    /// Synchronize sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push.
    pub const PSH: u8 = 0x08;
    /// The acknowledgment field is significant.
    pub const ACK: u8 = 0x10;
    /// The urgent pointer is significant.
    pub const URG: u8 = 0x20;
}

/// Byte offsets of the header fields.
mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const DATA_OFFSET: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
}

/// A view of a TCP segment (header and data) in a byte buffer: the whole buffer is the
/// segment.
///
/// Getters on a view made with [`new_unchecked`](Packet::new_unchecked) may panic if the
/// buffer is shorter than the header; [`new_checked`](Packet::new_checked) rules that out.
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

    /// Checks that the buffer holds the fixed header, and that the data offset is at least
    /// 5 words and within the buffer.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        need(buf, MIN_HEADER_LEN)?;
        let hl = self.header_len();
        if hl < MIN_HEADER_LEN || hl > buf.len() {
            return Err(Error::BadTcpHeaderLen(buf[field::DATA_OFFSET] >> 4));
        }
        Ok(())
    }

    /// The source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// The destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// The sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEQ)
    }

    /// The acknowledgment number.
    #[inline]
    pub fn ack_number(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ACK)
    }

    /// The header's length in bytes (data offset × 4), options included.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::DATA_OFFSET] >> 4) * 4
    }

    /// The flag bits ([`flags`]).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The receive window.
    #[inline]
    pub fn window(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WINDOW)
    }

    /// The checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The urgent pointer.
    #[inline]
    pub fn urgent(&self) -> u16 {
        be16(self.buffer.as_ref(), field::URGENT)
    }

    /// The options (after the fixed header, up to the data offset).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[MIN_HEADER_LEN..self.header_len()]
    }

    /// The data after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// Whether the checksum verifies under `pseudo` (the whole buffer is the segment).
    #[inline]
    pub fn verify_checksum(&self, pseudo: &PseudoHeader) -> bool {
        let b = self.buffer.as_ref();
        checksum::combine(&[pseudo.sum(IpProtocol::TCP, b.len() as u32), checksum::sum(b)]) == 0xffff
    }

    /// Whether `other` carries the same header as this one but for the sequence number,
    /// the PSH flag and the checksum: the same connection, acknowledgment, window, urgent
    /// pointer, other flags and options — a segment that may follow this one in one
    /// super-packet.
    #[inline]
    pub fn same_header_but_seq<U: AsRef<[u8]>>(&self, other: &Packet<U>) -> bool {
        let (a, b) = (self.buffer.as_ref(), other.buffer.as_ref());
        let hl = self.header_len();
        hl == other.header_len()
            && a[field::SRC_PORT..field::SEQ] == b[field::SRC_PORT..field::SEQ]
            && a[field::ACK..field::FLAGS] == b[field::ACK..field::FLAGS]
            && (a[field::FLAGS] | flags::PSH) == (b[field::FLAGS] | flags::PSH)
            && a[field::WINDOW..field::CHECKSUM] == b[field::WINDOW..field::CHECKSUM]
            && a[field::URGENT..hl] == b[field::URGENT..hl]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the flag bits.
    #[inline]
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Computes and writes the checksum over the whole buffer under `pseudo`.
    #[inline]
    pub fn fill_checksum(&mut self, pseudo: &PseudoHeader) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let sum = checksum::combine(&[pseudo.sum(IpProtocol::TCP, b.len() as u32), checksum::sum(b)]);
        self.set_checksum(!sum);
    }

    /// Writes the pseudo-header's sum for `len` bytes of segment, not complemented, into
    /// the checksum field: what a stack leaves for a device that completes the checksum
    /// (checksum offload, virtio's NEEDS_CSUM).
    #[inline]
    pub fn set_partial_checksum(&mut self, pseudo: &PseudoHeader, len: usize) {
        self.set_checksum(pseudo.sum(IpProtocol::TCP, len as u32));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// A SYN from 192.168.1.2:54321 to 93.184.216.34:80 (seq 0x38affe13, window 8760, an
    /// MSS 1460 option), checksum field 0.
    fn syn() -> ([u8; 24], PseudoHeader) {
        let seg = [
            0xd4, 0x31, 0x00, 0x50, 0x38, 0xaf, 0xfe, 0x13, 0, 0, 0, 0, 0x60, 0x02, 0x22, 0x38, 0, 0, 0, 0,
            0x02, 0x04, 0x05, 0xb4,
        ];
        let pseudo =
            PseudoHeader::V4 { src: Ipv4Addr::new(192, 168, 1, 2), dst: Ipv4Addr::new(93, 184, 216, 34) };
        (seg, pseudo)
    }

    #[test]
    fn fields_and_a_checksum_that_verifies() {
        let (mut seg, pseudo) = syn();
        let mut p = Packet::new_checked(&mut seg[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.seq_number(), p.ack_number()), (54321, 80, 0x38af_fe13, 0));
        assert_eq!((p.header_len(), p.flags(), p.window(), p.urgent()), (24, flags::SYN, 8760, 0));
        assert_eq!(p.options(), &[2, 4, 5, 0xb4]);
        assert!(p.payload().is_empty());
        assert!(!p.verify_checksum(&pseudo), "zero is not its checksum");
        p.fill_checksum(&pseudo);
        assert!(p.verify_checksum(&pseudo));
        // The same sum spelled out: the RFC 9293 §3.1 pseudo-header's bytes, then the segment.
        let mut whole = vec![192, 168, 1, 2, 93, 184, 216, 34, 0, 6, 0, 24];
        whole.extend_from_slice(&syn().0);
        assert_eq!(p.checksum(), checksum::checksum(&whole));
        p.set_flags(flags::SYN | flags::ACK);
        assert!(!p.verify_checksum(&pseudo), "a changed flag shows");
    }

    #[test]
    fn bad_lengths_are_errors() {
        let (seg, _) = syn();
        assert_eq!(Packet::new_checked(&seg[..19]).unwrap_err(), Error::Truncated { needed: 20, got: 19 });
        let mut short = seg;
        short[12] = 0x40;
        assert_eq!(Packet::new_checked(&short[..]).unwrap_err(), Error::BadTcpHeaderLen(4));
        let mut long = seg;
        long[12] = 0x70;
        assert_eq!(Packet::new_checked(&long[..]).unwrap_err(), Error::BadTcpHeaderLen(7));
    }

    #[test]
    fn followers_differ_only_in_sequence_number_psh_and_checksum() {
        let (seg, _) = syn();
        let a = Packet::new_unchecked(&seg[..]);
        let mut next = seg;
        next[4..8].copy_from_slice(&0x38af_fe14u32.to_be_bytes());
        next[13] |= flags::PSH;
        next[16] = 0x99;
        assert!(a.same_header_but_seq(&Packet::new_unchecked(&next[..])));
        for (at, what) in
            [(0, "port"), (8, "ack"), (13, "flag"), (14, "window"), (18, "urgent"), (23, "option")]
        {
            let mut other = seg;
            other[at] ^= if at == 13 { flags::FIN } else { 1 };
            assert!(!a.same_header_but_seq(&Packet::new_unchecked(&other[..])), "another {what}");
        }
    }
}
