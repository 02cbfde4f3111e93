//! IPv4 (RFC 791): a checked view of the header, its checksum, and its meaning ([`Repr`]).
//!
//! Options are not interpreted: the view skips them by the IHL, and [`Repr::emit`] writes a
//! 20-byte header without any. Fragments parse like any packet; [`Packet::is_fragment`] and
//! [`Repr::is_fragment`] tell the IPsec core which ones it must refuse.

use std::net::Ipv4Addr;

use crate::bytes::{array4, be16, set_be16};
use crate::checksum;
use crate::error::{need, Error, Result};
use crate::ip::{ChecksumPolicy, IpProtocol};

/// The length of a header without options.
pub const MIN_HEADER_LEN: usize = 20;
/// The largest total length the 16-bit field holds.
pub const MAX_TOTAL_LEN: usize = 0xffff;

/// Byte offsets of the header fields (RFC 791 §3.1).
mod field {
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const TOTAL_LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 packet in a byte buffer.
///
/// Getters on a view made with [`new_unchecked`](Packet::new_unchecked) may panic if the
/// buffer is shorter than the header says; [`new_checked`](Packet::new_checked) establishes
/// that every getter and [`payload`](Packet::payload) is in bounds.
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

    /// Checks that the buffer holds the fixed header, that the IHL is at least 5 and the
    /// buffer holds the whole header, and that the total length covers the header and fits
    /// in the buffer (which may be longer: link-layer padding).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        need(buf, MIN_HEADER_LEN)?;
        let ihl = buf[field::VER_IHL] & 0x0f;
        if ihl < 5 {
            return Err(Error::BadHeaderLen(ihl));
        }
        let header_len = self.header_len();
        need(buf, header_len)?;
        let total_len = self.total_len();
        if usize::from(total_len) < header_len {
            return Err(Error::BadTotalLen(total_len));
        }
        need(buf, usize::from(total_len))
    }

    /// Gives back the buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The version nibble (4 for IPv4).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// The header length in bytes (IHL × 4), options included.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// The Differentiated Services Code Point (the upper 6 bits of the old TOS byte).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::TOS] >> 2
    }

    /// The Explicit Congestion Notification bits (the lower 2 bits of the old TOS byte).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::TOS] & 0x03
    }

    /// The total length: header, options and payload.
    #[inline]
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TOTAL_LEN)
    }

    /// The Identification field.
    #[inline]
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    /// The Don't Fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLAGS_FRAG) & FLAG_DF != 0
    }

    /// The More Fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLAGS_FRAG) & FLAG_MF != 0
    }

    /// The fragment offset in bytes (the field counts 8-byte units).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (be16(self.buffer.as_ref(), field::FLAGS_FRAG) & FRAG_OFFSET_MASK) << 3
    }

    /// Whether this is a fragment (More Fragments set or a non-zero offset): its payload is
    /// not a whole upper-layer packet.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    /// The Time To Live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// The protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// The header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(array4(self.buffer.as_ref(), field::SRC))
    }

    /// The destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(array4(self.buffer.as_ref(), field::DST))
    }

    /// Whether the header checksum (over the header and its options) verifies.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::verifies(&self.buffer.as_ref()[..self.header_len()])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The options: the bytes between the fixed header and the payload.
    #[inline]
    pub fn options(&self) -> &'a [u8] {
        &self.buffer.as_ref()[MIN_HEADER_LEN..self.header_len()]
    }

    /// The payload: from the end of the header to the total length (link-layer padding
    /// after it excluded).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the version nibble.
    #[inline]
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Sets the header length in bytes; it is stored as IHL = `len / 4` (the caller passes a
    /// multiple of 4 between 20 and 60).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) as u8 & 0x0f);
    }

    /// Sets the DSCP (6 bits; higher bits are dropped).
    #[inline]
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.buffer.as_mut()[field::TOS];
        *b = (*b & 0x03) | (dscp << 2);
    }

    /// Sets the ECN bits (2 bits; higher bits are dropped).
    #[inline]
    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.buffer.as_mut()[field::TOS];
        *b = (*b & 0xfc) | (ecn & 0x03);
    }

    /// Sets the ECN bits and updates the header checksum for the change (RFC 1624), for a
    /// header already in flight, as a tunnel's decapsulation marks it (RFC 6040 §4.2): two
    /// additions instead of summing the header again. A header whose checksum was wrong
    /// stays wrong.
    #[inline]
    pub fn set_ecn_updating_checksum(&mut self, ecn: u8) {
        let word = |b: &[u8]| u16::from_be_bytes([b[field::VER_IHL], b[field::TOS]]);
        let old = word(self.buffer.as_ref());
        self.set_ecn(ecn);
        let new = word(self.buffer.as_ref());
        let sum = checksum::update(self.checksum(), old, new);
        self.set_checksum(sum);
    }

    /// Sets the total length.
    #[inline]
    pub fn set_total_len(&mut self, len: u16) {
        set_be16(self.buffer.as_mut(), field::TOTAL_LEN, len);
    }

    /// Sets the Identification field.
    #[inline]
    pub fn set_ident(&mut self, ident: u16) {
        set_be16(self.buffer.as_mut(), field::IDENT, ident);
    }

    #[inline]
    fn set_flags_frag(&mut self, mask: u16, value: u16) {
        let buf = self.buffer.as_mut();
        let old = be16(buf, field::FLAGS_FRAG);
        set_be16(buf, field::FLAGS_FRAG, (old & !mask) | (value & mask));
    }

    /// Sets the Don't Fragment flag.
    #[inline]
    pub fn set_dont_frag(&mut self, value: bool) {
        self.set_flags_frag(FLAG_DF, if value { FLAG_DF } else { 0 });
    }

    /// Sets the More Fragments flag.
    #[inline]
    pub fn set_more_frags(&mut self, value: bool) {
        self.set_flags_frag(FLAG_MF, if value { FLAG_MF } else { 0 });
    }

    /// Sets the fragment offset in bytes; it is stored in 8-byte units (the lower 3 bits are
    /// dropped).
    #[inline]
    pub fn set_frag_offset(&mut self, offset: u16) {
        self.set_flags_frag(FRAG_OFFSET_MASK, offset >> 3);
    }

    /// Sets the Time To Live.
    #[inline]
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Sets the protocol of the payload.
    #[inline]
    pub fn set_protocol(&mut self, protocol: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol.0;
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC..field::SRC + 4].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST..field::DST + 4].copy_from_slice(&addr.octets());
    }

    /// Computes the header checksum (options included) and stores it.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let header_len = self.header_len();
        let value = checksum::checksum(&self.buffer.as_ref()[..header_len]);
        self.set_checksum(value);
    }

    /// The payload, mutable (bounds as for [`Packet::payload`]).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.header_len()..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

/// The meaning of an IPv4 header, options aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The source address.
    pub src_addr: Ipv4Addr,
    /// The destination address.
    pub dst_addr: Ipv4Addr,
    /// The protocol of the payload.
    pub protocol: IpProtocol,
    /// Bytes after the header (options excluded from the header when emitting).
    pub payload_len: usize,
    /// The Time To Live.
    pub ttl: u8,
    /// The DSCP, 6 bits.
    pub dscp: u8,
    /// The ECN bits, 2 bits.
    pub ecn: u8,
    /// The Identification field.
    pub ident: u16,
    /// The Don't Fragment flag.
    pub dont_frag: bool,
    /// The More Fragments flag.
    pub more_frags: bool,
    /// The fragment offset in bytes; a multiple of 8.
    pub frag_offset: u16,
}

impl Repr {
    /// Parses a packet from the network: version 4, lengths as in [`Packet::check_len`],
    /// header checksum verified.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        Repr::parse_with(packet, ChecksumPolicy::Verify)
    }

    /// Parses a packet, verifying the header checksum or not as `policy` says.
    #[inline]
    pub fn parse_with<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>, policy: ChecksumPolicy) -> Result<Repr> {
        // The version first: an IPv6 packet should be called that, not a bad IHL.
        need(packet.buffer.as_ref(), 1)?;
        if packet.version() != 4 {
            return Err(Error::BadVersion(packet.version()));
        }
        packet.check_len()?;
        if policy == ChecksumPolicy::Verify && !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            // check_len: total_len >= header_len.
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
            ttl: packet.ttl(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
        })
    }

    /// Whether this is a fragment (More Fragments set or a non-zero offset).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.more_frags || self.frag_offset != 0
    }

    /// The length of the header [`emit`](Repr::emit) writes (no options).
    #[inline]
    pub const fn header_len(&self) -> usize {
        MIN_HEADER_LEN
    }

    /// The length of the whole packet: header and payload.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        MIN_HEADER_LEN.saturating_add(self.payload_len)
    }

    /// Writes a 20-byte header with its checksum. The buffer must hold header and payload
    /// ([`buffer_len`](Repr::buffer_len)); the payload is left as it is. DSCP and ECN keep
    /// their low 6 and 2 bits.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        let total_len = self.buffer_len();
        if total_len > MAX_TOTAL_LEN {
            return Err(Error::TooLong { max: MAX_TOTAL_LEN, got: total_len });
        }
        if self.frag_offset % 8 != 0 {
            return Err(Error::BadFragmentOffset(self.frag_offset));
        }
        need(packet.buffer.as_ref(), total_len)?;
        packet.set_version(4);
        packet.set_header_len(MIN_HEADER_LEN);
        packet.set_dscp(self.dscp);
        packet.set_ecn(self.ecn);
        // Checked above: total_len <= 0xffff.
        packet.set_total_len(total_len as u16);
        packet.set_ident(self.ident);
        // Clears the reserved flag too.
        packet.set_flags_frag(0xffff, 0);
        packet.set_dont_frag(self.dont_frag);
        packet.set_more_frags(self.more_frags);
        packet.set_frag_offset(self.frag_offset);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worked example of the IPv4 header checksum in the Wikipedia article "Internet
    /// checksum" (also in many textbooks): 192.168.0.1 -> 192.168.0.199, UDP, TTL 64, DF,
    /// total length 0x73, checksum 0xb861.
    const TEXTBOOK_HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0,
        0xa8, 0x00, 0xc7,
    ];

    /// The textbook header followed by its 0x73 - 20 = 95 bytes of payload.
    fn textbook_packet() -> Vec<u8> {
        let mut p = TEXTBOOK_HEADER.to_vec();
        p.extend((0..95).map(|i| i as u8));
        p
    }

    /// The inner IPv4 header of the AES-128-GCM case with SPI 0x4321 in
    /// draft-mcgrew-gcm-test-01 §4 (192.168.1.2 -> 192.168.1.1, UDP, TTL 128, ident 0x699a,
    /// checksum 0x4db7).
    const GCM_TEST_HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x48, 0x69, 0x9a, 0x00, 0x00, 0x80, 0x11, 0x4d, 0xb7, 0xc0, 0xa8, 0x01, 0x02, 0xc0,
        0xa8, 0x01, 0x01,
    ];

    #[test]
    fn textbook_header_fields() {
        let bytes = textbook_packet();
        let p = Packet::new_checked(&bytes[..]).expect("valid");
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.dscp(), 0);
        assert_eq!(p.ecn(), 0);
        assert_eq!(p.total_len(), 0x73);
        assert_eq!(p.ident(), 0);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert!(!p.is_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), IpProtocol::UDP);
        assert_eq!(p.checksum(), 0xb861);
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
        assert!(p.verify_checksum());
        assert!(p.options().is_empty());
        assert_eq!(p.payload().len(), 95);
        assert_eq!(p.payload()[1], 1);
    }

    #[test]
    fn known_checksums_recomputed() {
        for header in [TEXTBOOK_HEADER, GCM_TEST_HEADER] {
            let mut h = header;
            let expected = be16(&h, field::CHECKSUM);
            h[field::CHECKSUM] = 0;
            h[field::CHECKSUM + 1] = 0;
            assert_eq!(checksum::checksum(&h), expected);
            let mut p = Packet::new_unchecked(&mut h[..]);
            p.fill_checksum();
            assert_eq!(p.checksum(), expected);
        }
    }

    #[test]
    fn repr_parse_and_emit_roundtrip() {
        let bytes = textbook_packet();
        let repr = Repr::parse(&Packet::new_unchecked(&bytes[..])).expect("valid");
        assert_eq!(
            repr,
            Repr {
                src_addr: Ipv4Addr::new(192, 168, 0, 1),
                dst_addr: Ipv4Addr::new(192, 168, 0, 199),
                protocol: IpProtocol::UDP,
                payload_len: 95,
                ttl: 64,
                dscp: 0,
                ecn: 0,
                ident: 0,
                dont_frag: true,
                more_frags: false,
                frag_offset: 0,
            }
        );
        assert_eq!(repr.buffer_len(), bytes.len());
        assert_eq!(repr.header_len(), 20);
        let mut out = vec![0xaa; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut out[..])).expect("fits");
        assert_eq!(out[..20], TEXTBOOK_HEADER);
        assert!(out[20..].iter().all(|&b| b == 0xaa), "payload untouched");
    }

    #[test]
    fn emit_fields_and_fragments() {
        let repr = Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            protocol: IpProtocol::ESP,
            payload_len: 8,
            ttl: 1,
            dscp: 46,
            ecn: 3,
            ident: 0xbeef,
            dont_frag: false,
            more_frags: true,
            frag_offset: 1480,
        };
        assert!(repr.is_fragment());
        let mut out = [0xff; 28];
        let mut p = Packet::new_unchecked(&mut out[..]);
        repr.emit(&mut p).expect("fits");
        assert!(p.verify_checksum());
        assert!(p.is_fragment());
        assert_eq!(p.frag_offset(), 1480);
        assert_eq!(p.dscp(), 46);
        assert_eq!(p.ecn(), 3);
        assert_eq!(out[1], (46 << 2) | 3);
        // Reserved flag cleared, MF set, offset 1480 / 8 = 185.
        assert_eq!(be16(&out, field::FLAGS_FRAG), 0x2000 | 185);
        assert_eq!(Repr::parse(&Packet::new_unchecked(&out[..])), Ok(repr));

        let offset_only = Repr { more_frags: false, frag_offset: 8, ..repr };
        assert!(offset_only.is_fragment());
        let whole = Repr { more_frags: false, frag_offset: 0, ..repr };
        assert!(!whole.is_fragment());
    }

    #[test]
    fn setters() {
        let mut out = [0u8; 24];
        let mut p = Packet::new_unchecked(&mut out[..]);
        p.set_version(4);
        p.set_header_len(24);
        p.set_total_len(24);
        p.set_dont_frag(true);
        p.set_more_frags(true);
        p.set_dont_frag(false);
        p.set_frag_offset(16);
        p.set_ttl(9);
        p.set_protocol(IpProtocol::TCP);
        p.set_src_addr(Ipv4Addr::new(1, 2, 3, 4));
        p.set_dst_addr(Ipv4Addr::new(5, 6, 7, 8));
        p.payload_mut().fill(0x11);
        p.fill_checksum();
        assert!(p.check_len().is_ok());
        assert!(p.verify_checksum());
        assert!(!p.dont_frag());
        assert!(p.more_frags());
        assert_eq!(p.frag_offset(), 16);
        assert_eq!(p.header_len(), 24);
        let out = p.into_inner();
        assert_eq!(out[0], 0x46);
        let p = Packet::new_unchecked(&out[..]);
        assert_eq!(p.options(), &[0; 4]);
        assert!(p.payload().is_empty());
    }

    #[test]
    fn set_ecn_updating_checksum_keeps_the_header_valid() {
        // DSCP 46 (EF), with a 4-byte option: every ECN value from every ECN value, the
        // DSCP kept and the checksum the recomputed one.
        let mut h = [
            0x46, 0xb8, 0x00, 0x18, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01, 0x00, 0x00, 10, 0, 0, 1, 10, 0, 0, 2,
            1, 1, 1, 0,
        ];
        Packet::new_unchecked(&mut h[..]).fill_checksum();
        for from in 0..4 {
            for to in 0..4 {
                let mut p = Packet::new_unchecked(&mut h[..]);
                p.set_ecn_updating_checksum(from);
                p.set_ecn_updating_checksum(to);
                assert!(p.verify_checksum(), "{from} -> {to}");
                assert_eq!((p.dscp(), p.ecn()), (46, to));
                let sum = p.checksum();
                p.fill_checksum();
                assert_eq!(p.checksum(), sum, "{from} -> {to}");
            }
        }
    }

    #[test]
    fn options_skipped_by_ihl() {
        // IHL 6: one 4-byte option (NOP NOP NOP EOL), then 4 bytes of payload.
        let mut bytes = vec![
            0x46, 0x00, 0x00, 0x1c, 0x12, 0x34, 0x00, 0x00, 0x40, 0x32, 0x00, 0x00, 10, 0, 0, 1, 10, 0, 0, 2,
            1, 1, 1, 0, 0xde, 0xad, 0xbe, 0xef,
        ];
        Packet::new_unchecked(&mut bytes[..]).fill_checksum();
        let p = Packet::new_checked(&bytes[..]).expect("valid");
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        let repr = Repr::parse(&p).expect("valid");
        assert_eq!(repr.payload_len, 4);
        assert_eq!(repr.protocol, IpProtocol::ESP);
    }

    #[test]
    fn link_layer_padding_is_not_payload() {
        let mut bytes = textbook_packet();
        bytes.extend([0; 6]);
        let p = Packet::new_checked(&bytes[..]).expect("valid");
        assert_eq!(p.payload().len(), 95);
    }

    #[test]
    fn errors() {
        let good = textbook_packet();
        // Every prefix shorter than the total length is truncated.
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&good[..0])),
            Err(Error::Truncated { needed: 1, got: 0 })
        );
        for len in 1..good.len() {
            let needed = if len < 20 { 20 } else { 0x73 };
            assert_eq!(
                Repr::parse(&Packet::new_unchecked(&good[..len])),
                Err(Error::Truncated { needed, got: len }),
                "prefix {len}"
            );
        }
        // Version 6.
        let mut bad = good.clone();
        bad[0] = 0x65;
        assert_eq!(Repr::parse(&Packet::new_unchecked(&bad[..])), Err(Error::BadVersion(6)));
        // IHL 4.
        bad[0] = 0x44;
        assert_eq!(Repr::parse(&Packet::new_unchecked(&bad[..])), Err(Error::BadHeaderLen(4)));
        assert_eq!(Packet::new_checked(&bad[..]), Err(Error::BadHeaderLen(4)));
        // IHL 15 (60 bytes) is fine for a 115-byte packet; total length 40 < 60 is not.
        bad[0] = 0x4f;
        bad[3] = 40;
        assert_eq!(Packet::new_checked(&bad[..]), Err(Error::BadTotalLen(40)));
        // IHL 15 with only 40 bytes of buffer.
        assert_eq!(Packet::new_checked(&bad[..40]), Err(Error::Truncated { needed: 60, got: 40 }));
        // Total length beyond the buffer.
        let mut bad = good.clone();
        bad[3] = 0x74;
        assert_eq!(Packet::new_checked(&bad[..]), Err(Error::Truncated { needed: 0x74, got: 0x73 }));
        // Wrong checksum, unless ignored.
        let mut bad = good.clone();
        bad[8] = 63;
        let p = Packet::new_unchecked(&bad[..]);
        assert_eq!(Repr::parse(&p), Err(Error::BadChecksum));
        assert_eq!(Repr::parse_with(&p, ChecksumPolicy::Ignore).map(|r| r.ttl), Ok(63));
    }

    #[test]
    fn emit_errors() {
        let repr = Repr {
            src_addr: Ipv4Addr::LOCALHOST,
            dst_addr: Ipv4Addr::LOCALHOST,
            protocol: IpProtocol::UDP,
            payload_len: 10,
            ttl: 64,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
        };
        let mut small = [0u8; 29];
        assert_eq!(
            repr.emit(&mut Packet::new_unchecked(&mut small[..])),
            Err(Error::Truncated { needed: 30, got: 29 })
        );
        let mut big = vec![0u8; 70_000];
        let too_long = Repr { payload_len: 65_516, ..repr };
        assert_eq!(
            too_long.emit(&mut Packet::new_unchecked(&mut big[..])),
            Err(Error::TooLong { max: 65_535, got: 65_536 })
        );
        let huge = Repr { payload_len: usize::MAX, ..repr };
        assert_eq!(huge.buffer_len(), usize::MAX);
        assert!(huge.emit(&mut Packet::new_unchecked(&mut big[..])).is_err());
        let odd = Repr { frag_offset: 12, ..repr };
        assert_eq!(odd.emit(&mut Packet::new_unchecked(&mut big[..])), Err(Error::BadFragmentOffset(12)));
    }
}
