//! UDP (RFC 768): a checked view of the header, the checksum over the IPv4 or IPv6
//! pseudo-header, and the header's meaning ([`Repr`]).
//!
//! Over IPv4 a checksum of 0 means "none computed" and is accepted; over IPv6 it is
//! mandatory (RFC 8200 §8.1) and 0 is [`Error::MissingUdpChecksum`]. ESP in UDP (RFC 3948)
//! is sent with checksum 0 over IPv4; see [`udp_encap`](crate::udp_encap) for its payloads.

use crate::bytes::{be16, set_be16};
use crate::checksum;
use crate::error::{need, Error, Result};
use crate::ip::{ChecksumPolicy, IpProtocol, PseudoHeader};

/// The length of the UDP header.
pub const HEADER_LEN: usize = 8;
/// The largest length the 16-bit field holds.
pub const MAX_LEN: usize = 0xffff;

/// Byte offsets of the header fields (RFC 768).
mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// A view of a UDP datagram in a byte buffer.
///
/// Getters on a view made with [`new_unchecked`](Packet::new_unchecked) may panic if the
/// buffer is shorter than the length field says; [`new_checked`](Packet::new_checked) rules
/// that out.
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

    /// Checks that the buffer holds the header, that the length field covers the header,
    /// and that the buffer holds that length (it may be longer).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        need(buf, HEADER_LEN)?;
        let len = self.len();
        if usize::from(len) < HEADER_LEN {
            return Err(Error::BadUdpLen(len));
        }
        need(buf, usize::from(len))
    }

    /// Gives back the buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
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

    /// The length field: header and payload.
    #[allow(clippy::len_without_is_empty)] // A datagram is never empty: the header counts.
    #[inline]
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// The checksum field (0: none computed, IPv4 only).
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The datagram: header and payload, as long as the length field says.
    #[inline]
    fn datagram(&self) -> &[u8] {
        &self.buffer.as_ref()[..usize::from(self.len())]
    }

    /// The checksum this datagram should carry under `pseudo`: computed with the checksum
    /// field taken as 0, and 0xffff for a computed 0 (0 means "none", RFC 768).
    #[inline]
    pub fn compute_checksum(&self, pseudo: &PseudoHeader) -> u16 {
        let datagram = self.datagram();
        // The header without its checksum field (6 bytes: an even piece), then the payload.
        let sum = checksum::combine(&[
            pseudo.sum(IpProtocol::UDP, u32::from(self.len())),
            checksum::sum(&datagram[..field::CHECKSUM]),
            checksum::sum(&datagram[HEADER_LEN..]),
        ]);
        match !sum {
            0 => 0xffff,
            value => value,
        }
    }

    /// Verifies the checksum under `pseudo`: 0 is accepted over IPv4 (none computed) and
    /// refused over IPv6. Checks the length first, so it is total on any buffer.
    #[inline]
    pub fn verify_checksum(&self, pseudo: &PseudoHeader) -> Result<()> {
        self.check_len()?;
        if self.checksum() == 0 {
            return if pseudo.is_v6() { Err(Error::MissingUdpChecksum) } else { Ok(()) };
        }
        let sum = checksum::combine(&[
            pseudo.sum(IpProtocol::UDP, u32::from(self.len())),
            checksum::sum(self.datagram()),
        ]);
        if sum == 0xffff {
            Ok(())
        } else {
            Err(Error::BadChecksum)
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload: after the header, up to the length field.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the source port.
    #[inline]
    pub fn set_src_port(&mut self, port: u16) {
        set_be16(self.buffer.as_mut(), field::SRC_PORT, port);
    }

    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, port: u16) {
        set_be16(self.buffer.as_mut(), field::DST_PORT, port);
    }

    /// Sets the length field.
    #[inline]
    pub fn set_len(&mut self, len: u16) {
        set_be16(self.buffer.as_mut(), field::LENGTH, len);
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Computes the checksum under `pseudo` and stores it (the length field and payload must
    /// be in place).
    #[inline]
    pub fn fill_checksum(&mut self, pseudo: &PseudoHeader) {
        let value = self.compute_checksum(pseudo);
        self.set_checksum(value);
    }

    /// The payload, mutable (bounds as for [`Packet::payload`]).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// The meaning of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The source port.
    pub src_port: u16,
    /// The destination port.
    pub dst_port: u16,
    /// Bytes after the header.
    pub payload_len: usize,
}

impl Repr {
    /// Parses a datagram from the network: lengths as in [`Packet::check_len`], checksum
    /// verified under `pseudo` (see [`Packet::verify_checksum`]).
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>, pseudo: &PseudoHeader) -> Result<Repr> {
        Repr::parse_with(packet, pseudo, ChecksumPolicy::Verify)
    }

    /// Parses a datagram, verifying the checksum or not as `policy` says.
    #[inline]
    pub fn parse_with<T: AsRef<[u8]> + ?Sized>(
        packet: &Packet<&T>,
        pseudo: &PseudoHeader,
        policy: ChecksumPolicy,
    ) -> Result<Repr> {
        packet.check_len()?;
        if policy == ChecksumPolicy::Verify {
            packet.verify_checksum(pseudo)?;
        }
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            // check_len: len >= HEADER_LEN.
            payload_len: usize::from(packet.len()) - HEADER_LEN,
        })
    }

    /// The length of the header.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The length of the datagram: header and payload.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN.saturating_add(self.payload_len)
    }

    /// Writes the header over a payload already in place: with the checksum computed under
    /// `checksum`'s pseudo-header, or 0 ("none") when it is `None` — which is allowed over
    /// IPv4 only.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
        checksum: Option<&PseudoHeader>,
    ) -> Result<()> {
        let len = self.buffer_len();
        if len > MAX_LEN {
            return Err(Error::TooLong { max: MAX_LEN, got: len });
        }
        need(packet.buffer.as_ref(), len)?;
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        // Checked above: len <= 0xffff.
        packet.set_len(len as u16);
        packet.set_checksum(0);
        if let Some(pseudo) = checksum {
            packet.fill_checksum(pseudo);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4() -> PseudoHeader {
        PseudoHeader::V4 { src: Ipv4Addr::new(192, 0, 2, 1), dst: Ipv4Addr::new(198, 51, 100, 2) }
    }

    fn v6() -> PseudoHeader {
        PseudoHeader::V6 {
            src: "2001:db8::1".parse::<Ipv6Addr>().expect("address"),
            dst: "2001:db8::2".parse::<Ipv6Addr>().expect("address"),
        }
    }

    /// 192.0.2.1:4500 -> 198.51.100.2:4500, 12 bytes: the header and 4 payload bytes 00 00 01 00.
    /// Checksum 0xef76 computed independently (Python, RFC 1071
    /// sum over the pseudo-header and the datagram).
    const V4_DATAGRAM: [u8; 12] = [0x11, 0x94, 0x11, 0x94, 0x00, 0x0c, 0xef, 0x76, 0x00, 0x00, 0x01, 0x00];

    /// The same datagram over IPv6 2001:db8::1 -> 2001:db8::2, checksum 0x8039 (likewise).
    const V6_DATAGRAM: [u8; 12] = [0x11, 0x94, 0x11, 0x94, 0x00, 0x0c, 0x80, 0x39, 0x00, 0x00, 0x01, 0x00];

    #[test]
    fn header_fields() {
        let mut bytes = V4_DATAGRAM.to_vec();
        bytes.push(0xee);
        let p = Packet::new_checked(&bytes[..]).expect("valid");
        assert_eq!(p.src_port(), 4500);
        assert_eq!(p.dst_port(), 4500);
        assert_eq!(p.len(), 12);
        assert_eq!(p.checksum(), 0xef76);
        assert_eq!(p.payload(), &[0, 0, 1, 0], "bytes past the length excluded");
        assert_eq!(p.verify_checksum(&v4()), Ok(()));
        assert_eq!(p.compute_checksum(&v4()), 0xef76);
    }

    #[test]
    fn checksums_v4_and_v6() {
        let p = Packet::new_checked(&V6_DATAGRAM[..]).expect("valid");
        assert_eq!(p.verify_checksum(&v6()), Ok(()));
        assert_eq!(p.verify_checksum(&v4()), Err(Error::BadChecksum));
        let p = Packet::new_checked(&V4_DATAGRAM[..]).expect("valid");
        assert_eq!(p.verify_checksum(&v6()), Err(Error::BadChecksum));

        // Checksum 0: none, fine over IPv4, refused over IPv6.
        let mut zero = V4_DATAGRAM;
        zero[6] = 0;
        zero[7] = 0;
        let p = Packet::new_unchecked(&zero[..]);
        assert_eq!(p.verify_checksum(&v4()), Ok(()));
        assert_eq!(p.verify_checksum(&v6()), Err(Error::MissingUdpChecksum));
        assert_eq!(Repr::parse(&p, &v6()), Err(Error::MissingUdpChecksum));
        assert!(Repr::parse_with(&p, &v6(), ChecksumPolicy::Ignore).is_ok());

        // A flipped payload bit.
        let mut bad = V4_DATAGRAM;
        bad[11] ^= 0x80;
        let p = Packet::new_unchecked(&bad[..]);
        assert_eq!(Repr::parse(&p, &v4()), Err(Error::BadChecksum));
        assert_eq!(
            Repr::parse_with(&p, &v4(), ChecksumPolicy::Ignore),
            Ok(Repr { src_port: 4500, dst_port: 4500, payload_len: 4 })
        );
    }

    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Choose the last payload word so that the checksum comes out 0: then it is sent as
        // 0xffff, and 0xffff verifies.
        let mut bytes = [0x11, 0x94, 0x11, 0x94, 0x00, 0x0c, 0, 0, 0, 0, 0, 0];
        let sum = checksum::combine(&[v4().sum(IpProtocol::UDP, 12), checksum::sum(&bytes)]);
        // Adding !sum makes the total 0xffff, whose complement is 0.
        bytes[10..12].copy_from_slice(&(!sum).to_be_bytes());
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.fill_checksum(&v4());
        assert_eq!(p.checksum(), 0xffff);
        assert_eq!(p.verify_checksum(&v4()), Ok(()));
    }

    #[test]
    fn repr_roundtrip() {
        for (datagram, pseudo) in [(V4_DATAGRAM, v4()), (V6_DATAGRAM, v6())] {
            let repr = Repr::parse(&Packet::new_unchecked(&datagram[..]), &pseudo).expect("valid");
            assert_eq!(repr, Repr { src_port: 4500, dst_port: 4500, payload_len: 4 });
            assert_eq!(repr.header_len(), 8);
            assert_eq!(repr.buffer_len(), 12);
            let mut out = [0u8; 12];
            out[8..].copy_from_slice(&datagram[8..]);
            repr.emit(&mut Packet::new_unchecked(&mut out[..]), Some(&pseudo)).expect("fits");
            assert_eq!(out, datagram);
            repr.emit(&mut Packet::new_unchecked(&mut out[..]), None).expect("fits");
            assert_eq!(out[6..8], [0, 0]);
        }
    }

    #[test]
    fn setters() {
        let mut p = Packet::new_unchecked([0u8; 10]);
        p.set_src_port(500);
        p.set_dst_port(4500);
        p.set_len(10);
        p.payload_mut().copy_from_slice(&[0xff, 0xff]);
        p.set_checksum(7);
        assert_eq!(p.into_inner(), [0x01, 0xf4, 0x11, 0x94, 0, 10, 0, 7, 0xff, 0xff]);
    }

    #[test]
    fn errors() {
        for len in 0..12 {
            let needed = if len < 8 { 8 } else { 12 };
            let p = Packet::new_unchecked(&V4_DATAGRAM[..len]);
            assert_eq!(Repr::parse(&p, &v4()), Err(Error::Truncated { needed, got: len }), "prefix {len}");
            assert_eq!(p.verify_checksum(&v4()), Err(Error::Truncated { needed, got: len }));
        }
        let mut bad = V4_DATAGRAM;
        bad[5] = 7;
        assert_eq!(Packet::new_checked(&bad[..]), Err(Error::BadUdpLen(7)));
        bad[5] = 13;
        assert_eq!(Packet::new_checked(&bad[..]), Err(Error::Truncated { needed: 13, got: 12 }));

        let repr = Repr { src_port: 1, dst_port: 2, payload_len: 4 };
        let mut small = [0u8; 11];
        assert_eq!(
            repr.emit(&mut Packet::new_unchecked(&mut small[..]), None),
            Err(Error::Truncated { needed: 12, got: 11 })
        );
        let too_long = Repr { payload_len: MAX_LEN, ..repr };
        assert_eq!(
            too_long.emit(&mut Packet::new_unchecked(&mut small[..]), None),
            Err(Error::TooLong { max: MAX_LEN, got: MAX_LEN + 8 })
        );
        assert_eq!(Repr { payload_len: usize::MAX, ..repr }.buffer_len(), usize::MAX);
    }
}
