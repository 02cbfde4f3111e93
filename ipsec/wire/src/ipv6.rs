//! IPv6 (RFC 8200): a checked view of the fixed header, its meaning ([`Repr`]), and the walk
//! along the extension headers to the header that IPsec cares about.
//!
//! The walk ([`Packet::walk_extension_headers`]) steps over Hop-by-Hop Options (0), Routing
//! (43), Fragment (44), Destination Options (60) and the Authentication Header (51, whose
//! length counts 4-byte units), and stops at ESP (50), No Next Header (59) or anything else,
//! which it takes for the upper-layer protocol. It stays inside the payload length, takes at
//! most [`MAX_EXTENSION_HEADERS`], and stops after the Fragment header of a non-first
//! fragment, since what follows that is fragment data, not a header.
//!
//! Jumbograms (RFC 2675: payload length 0 and a Jumbo Payload option) are not supported:
//! a payload length of 0 means an empty payload.

use std::net::Ipv6Addr;

use crate::bytes::{array16, be16, be32, set_be16, set_be32};
use crate::error::{need, Error, Result};
use crate::ip::IpProtocol;
use crate::ipv6_ext::{AuthHeader, ExtHeader, FragmentHeader};

/// The length of the fixed header.
pub const HEADER_LEN: usize = 40;
/// The largest payload length the 16-bit field holds.
pub const MAX_PAYLOAD_LEN: usize = 0xffff;
/// The most extension headers the walk steps over before it gives up with
/// [`Error::TooManyExtensionHeaders`]. RFC 8200 §4.1 recommends an order with each header
/// at most once (Destination Options twice); 16 leaves room for odd but legal chains while
/// bounding the work an attacker can ask for.
pub const MAX_EXTENSION_HEADERS: usize = 16;

/// Byte offsets of the fixed header fields (RFC 8200 §3).
mod field {
    /// Version (4 bits), Traffic Class (8), Flow Label (20).
    pub const VER_TC_FLOW: usize = 0;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;
}

/// A view of an IPv6 packet in a byte buffer.
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

    /// Checks that the buffer holds the fixed header and the payload length after it (the
    /// buffer may be longer: link-layer padding).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        need(buf, HEADER_LEN)?;
        need(buf, self.total_len())
    }

    /// Gives back the buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    fn first_word(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }

    /// The version nibble (6 for IPv6).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TC_FLOW] >> 4
    }

    /// The Traffic Class byte (DSCP and ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    /// The DSCP: the upper 6 bits of the Traffic Class.
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// The ECN bits: the lower 2 bits of the Traffic Class.
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0x03
    }

    /// The 20-bit Flow Label.
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.first_word() & 0x000f_ffff
    }

    /// The payload length: everything after the fixed header, extension headers included.
    #[inline]
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }

    /// The length of the packet: fixed header and payload.
    #[inline]
    pub fn total_len(&self) -> usize {
        HEADER_LEN + usize::from(self.payload_len())
    }

    /// The protocol of the first header after the fixed header.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// The Hop Limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// The source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array16(self.buffer.as_ref(), field::SRC))
    }

    /// The destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array16(self.buffer.as_ref(), field::DST))
    }

    /// Walks the extension headers from the fixed header to the first header that is not
    /// one of Hop-by-Hop, Routing, Fragment, Destination Options or AH. Checks the length
    /// first, so it is total on any buffer.
    ///
    /// Errors: [`Error::Truncated`] (with offsets from the start of the packet) when a header
    /// runs past the payload length, [`Error::MisplacedHopByHop`],
    /// [`Error::BadAhLen`], [`Error::TooManyExtensionHeaders`].
    #[inline]
    pub fn walk_extension_headers(&self) -> Result<HeaderChain> {
        self.check_len()?;
        // Only the payload length counts: bytes after it are link-layer padding.
        let packet = &self.buffer.as_ref()[..self.total_len()];
        let mut next = self.next_header();
        let mut at = HEADER_LEN;
        let mut chain = HeaderChain {
            next_header: next,
            offset: at,
            next_header_field: field::NEXT_HEADER,
            ext_headers: 0,
            fragment: None,
            esp_insert: EspInsertPoint {
                offset: at,
                next_header_field: field::NEXT_HEADER,
                next_header: next,
            },
        };
        loop {
            if !matches!(
                next,
                IpProtocol::HOP_BY_HOP
                    | IpProtocol::ROUTING
                    | IpProtocol::FRAGMENT
                    | IpProtocol::DEST_OPTS
                    | IpProtocol::AH
            ) {
                break;
            }
            if next == IpProtocol::HOP_BY_HOP && chain.ext_headers != 0 {
                return Err(Error::MisplacedHopByHop);
            }
            if chain.ext_headers == MAX_EXTENSION_HEADERS {
                return Err(Error::TooManyExtensionHeaders);
            }
            // `at` never passes the end: each header was checked to fit before stepping.
            let rest = &packet[at..];
            let (len, after) = match next {
                IpProtocol::FRAGMENT => {
                    let h = FragmentHeader::new_checked(rest).map_err(|e| from_packet_start(e, at))?;
                    chain.fragment = Some(Fragment {
                        offset: at,
                        frag_offset: h.frag_offset(),
                        more_frags: h.more_frags(),
                        ident: h.ident(),
                    });
                    (FragmentHeader::LEN, h.next_header())
                }
                IpProtocol::AH => {
                    let h = AuthHeader::new_checked(rest).map_err(|e| from_packet_start(e, at))?;
                    // RFC 4302 §3.3.3.2.1: over IPv6 the AH length is a multiple of 8.
                    if h.header_len() % 8 != 0 {
                        return Err(Error::BadAhLen(h.payload_len_field()));
                    }
                    (h.header_len(), h.next_header())
                }
                _ => {
                    let h = ExtHeader::new_checked(rest).map_err(|e| from_packet_start(e, at))?;
                    (h.header_len(), h.next_header())
                }
            };
            let this = next;
            let this_at = at;
            chain.ext_headers += 1;
            at += len;
            next = after;
            chain.next_header = next;
            chain.offset = at;
            chain.next_header_field = this_at;
            // ESP goes after the headers every router on the path (or the reassembler)
            // must see. A Destination Options header before a Routing header is covered:
            // the Routing header after it moves the insertion point past both.
            if matches!(this, IpProtocol::HOP_BY_HOP | IpProtocol::ROUTING | IpProtocol::FRAGMENT) {
                chain.esp_insert =
                    EspInsertPoint { offset: at, next_header_field: this_at, next_header: next };
            }
            if this == IpProtocol::FRAGMENT && chain.fragment.is_some_and(|f| f.frag_offset != 0) {
                // A non-first fragment: what follows is data, whatever Next Header says.
                break;
            }
        }
        Ok(chain)
    }
}

/// Turns a truncation inside a header at `at` into one counted from the packet start.
#[inline]
fn from_packet_start(error: Error, at: usize) -> Error {
    match error {
        Error::Truncated { needed, got } => Error::Truncated { needed: at + needed, got: at + got },
        other => other,
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload (extension headers included), up to the payload length.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.total_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    #[inline]
    fn set_first_word(&mut self, mask: u32, value: u32) {
        let buf = self.buffer.as_mut();
        let old = be32(buf, field::VER_TC_FLOW);
        set_be32(buf, field::VER_TC_FLOW, (old & !mask) | (value & mask));
    }

    /// Sets the version nibble.
    #[inline]
    pub fn set_version(&mut self, version: u8) {
        self.set_first_word(0xf000_0000, u32::from(version) << 28);
    }

    /// Sets the Traffic Class byte.
    #[inline]
    pub fn set_traffic_class(&mut self, tc: u8) {
        self.set_first_word(0x0ff0_0000, u32::from(tc) << 20);
    }

    /// Sets the ECN bits: the lower 2 bits of the Traffic Class (higher bits are dropped).
    #[inline]
    pub fn set_ecn(&mut self, ecn: u8) {
        self.set_first_word(0x0030_0000, u32::from(ecn) << 20);
    }

    /// Sets the Flow Label (20 bits; higher bits are dropped).
    #[inline]
    pub fn set_flow_label(&mut self, label: u32) {
        self.set_first_word(0x000f_ffff, label);
    }

    /// Sets the payload length.
    #[inline]
    pub fn set_payload_len(&mut self, len: u16) {
        set_be16(self.buffer.as_mut(), field::PAYLOAD_LEN, len);
    }

    /// Sets the protocol of the first header after the fixed header.
    #[inline]
    pub fn set_next_header(&mut self, next: IpProtocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = next.0;
    }

    /// Sets the Hop Limit.
    #[inline]
    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hop_limit;
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC..field::SRC + 16].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::DST..field::DST + 16].copy_from_slice(&addr.octets());
    }

    /// Sets the next-header byte at `field` of the header chain, an offset that
    /// [`Packet::walk_extension_headers`] reported ([`EspInsertPoint::next_header_field`]):
    /// the fixed header's own field (6) or an extension header's first byte. Transport
    /// mode rewrites it to name ESP on the way out and the carried protocol on the way in.
    /// `Err(Truncated)` if the buffer ends before `field`.
    #[inline]
    pub fn set_chain_next_header(&mut self, field: usize, next: IpProtocol) -> Result<()> {
        need(self.buffer.as_ref(), field + 1)?;
        self.buffer.as_mut()[field] = next.0;
        Ok(())
    }

    /// The payload, mutable (bounds as for [`Packet::payload`]).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.total_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// Where the extension-header walk stopped, and what it saw on the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeaderChain {
    /// The protocol the walk stopped at: ESP, No Next Header, an upper-layer protocol, or,
    /// after the Fragment header of a non-first fragment, the protocol of the fragmented
    /// packet (whose header is not in this fragment).
    pub next_header: IpProtocol,
    /// Where that header starts, from the start of the IPv6 packet.
    pub offset: usize,
    /// The offset of the Next Header byte that named it: the fixed header's (6) or the last
    /// extension header's first byte (transport mode rewrites it on the way in).
    pub next_header_field: usize,
    /// How many extension headers the walk stepped over.
    pub ext_headers: usize,
    /// The last Fragment header seen, if any.
    pub fragment: Option<Fragment>,
    /// Where ESP goes in transport mode.
    pub esp_insert: EspInsertPoint,
}

impl HeaderChain {
    /// Whether a Fragment header was seen (atomic fragments included).
    #[inline]
    pub fn saw_fragment(&self) -> bool {
        self.fragment.is_some()
    }

    /// Whether the packet is a fragment proper (M set or a non-zero offset); an atomic
    /// fragment (RFC 6946) is a whole packet and is not.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.fragment.is_some_and(|f| f.is_fragment())
    }
}

/// What a Fragment header said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fragment {
    /// Where the Fragment header starts, from the start of the IPv6 packet.
    pub offset: usize,
    /// The fragment offset in bytes.
    pub frag_offset: u16,
    /// The M flag.
    pub more_frags: bool,
    /// The Identification field.
    pub ident: u32,
}

impl Fragment {
    /// Whether this makes a fragment proper (M set or a non-zero offset).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.more_frags || self.frag_offset != 0
    }
}

/// Where ESP goes when transport mode protects this packet (RFC 4303 §3.1.1), simplified:
/// after the headers that are processed hop by hop or before reassembly — Hop-by-Hop
/// Options, Routing, Fragment — and so also after any Destination Options header that comes
/// before a Routing header. Everything after the point (Destination Options after the last
/// of those, AH, the upper layer) is end to end and goes inside ESP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EspInsertPoint {
    /// Where the ESP header goes, from the start of the IPv6 packet.
    pub offset: usize,
    /// The offset of the Next Header byte to rewrite to 50 (ESP): the fixed header's (6) or
    /// that of the extension header just before the point.
    pub next_header_field: usize,
    /// The value that byte held: the Next Header for the ESP trailer.
    pub next_header: IpProtocol,
}

/// The meaning of an IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The source address.
    pub src_addr: Ipv6Addr,
    /// The destination address.
    pub dst_addr: Ipv6Addr,
    /// The first header after the fixed header.
    pub next_header: IpProtocol,
    /// Bytes after the fixed header, extension headers included.
    pub payload_len: usize,
    /// The Hop Limit.
    pub hop_limit: u8,
    /// The DSCP, 6 bits.
    pub dscp: u8,
    /// The ECN bits, 2 bits.
    pub ecn: u8,
    /// The Flow Label, 20 bits.
    pub flow_label: u32,
}

impl Repr {
    /// Parses a fixed header: version 6, buffer long enough for the payload length.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        need(packet.buffer.as_ref(), 1)?;
        if packet.version() != 6 {
            return Err(Error::BadVersion(packet.version()));
        }
        packet.check_len()?;
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            flow_label: packet.flow_label(),
        })
    }

    /// The length of the fixed header.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The length of the whole packet: fixed header and payload.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN.saturating_add(self.payload_len)
    }

    /// Writes the fixed header. The buffer must hold header and payload
    /// ([`buffer_len`](Repr::buffer_len)); the payload is left as it is. DSCP, ECN and the
    /// flow label keep their low 6, 2 and 20 bits.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        if self.payload_len > MAX_PAYLOAD_LEN {
            return Err(Error::TooLong { max: MAX_PAYLOAD_LEN, got: self.payload_len });
        }
        need(packet.buffer.as_ref(), self.buffer_len())?;
        packet.set_version(6);
        packet.set_traffic_class(((self.dscp & 0x3f) << 2) | (self.ecn & 0x03));
        packet.set_flow_label(self.flow_label);
        // Checked above: payload_len <= 0xffff.
        packet.set_payload_len(self.payload_len as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed_header(payload_len: u16, next: u8) -> Vec<u8> {
        let mut p = vec![
            // Version 6, traffic class 0xb8 (DSCP 46, ECN 0), flow label 0x12345.
            0x6b, 0x81, 0x23, 0x45,
        ];
        p.extend(payload_len.to_be_bytes());
        p.extend([next, 64]);
        // 2001:db8::1 -> 2001:db8::2
        p.extend([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.extend([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        p
    }

    /// An ESP packet behind Hop-by-Hop, Routing and Fragment headers, written out byte by
    /// byte (2001:db8::1 -> 2001:db8::2):
    ///
    /// | offset | header |
    /// |---|---|
    /// | 0 | fixed header, next 0 (Hop-by-Hop), payload length 64 |
    /// | 40 | Hop-by-Hop, 8 bytes: a Router Alert option (RFC 2711), next 43 |
    /// | 48 | Routing type 4 (segment routing) with no segments left, 8 bytes, next 44 |
    /// | 56 | Fragment, offset 0 with M clear (atomic), ident 0xcafe, next 50 |
    /// | 64 | ESP: SPI 0x1000, sequence 1, 32 bytes of ciphertext and ICV |
    const HBH_ROUTING_FRAG_ESP: [u8; 104] = [
        // Fixed header.
        0x60, 0x00, 0x00, 0x00, 0x00, 0x40, 0x00, 0x40, //
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, //
        // Hop-by-Hop: next 43, len 0; Router Alert (type 5, len 2, value 0); PadN(0).
        43, 0, 5, 2, 0, 0, 1, 0, //
        // Routing: next 44, len 0, type 4, segments left 0, last entry/flags/tag.
        44, 0, 4, 0, 0, 0, 0, 0, //
        // Fragment: next 50, reserved, offset 0 / M 0, ident.
        50, 0, 0, 0, 0, 0, 0xca, 0xfe, //
        // ESP header.
        0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x01, //
        // IV, ciphertext, ICV (opaque here).
        0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae,
        0xaf, //
        0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf,
    ];

    #[test]
    fn fixed_header_fields() {
        let mut bytes = fixed_header(4, 17);
        bytes.extend([1, 2, 3, 4, 0xee]);
        let p = Packet::new_checked(&bytes[..]).expect("valid");
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.dscp(), 46);
        assert_eq!(p.ecn(), 0);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 4);
        assert_eq!(p.total_len(), 44);
        assert_eq!(p.next_header(), IpProtocol::UDP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), "2001:db8::1".parse::<Ipv6Addr>().expect("address"));
        assert_eq!(p.dst_addr(), "2001:db8::2".parse::<Ipv6Addr>().expect("address"));
        assert_eq!(p.payload(), &[1, 2, 3, 4], "link-layer padding excluded");
    }

    #[test]
    fn set_ecn_keeps_dscp_and_flow_label() {
        let mut bytes = fixed_header(0, 17);
        for ecn in [3, 1, 2, 0, 7] {
            let mut p = Packet::new_unchecked(&mut bytes[..]);
            p.set_ecn(ecn);
            assert_eq!((p.version(), p.dscp(), p.ecn(), p.flow_label()), (6, 46, ecn & 3, 0x12345));
        }
    }

    #[test]
    fn repr_roundtrip() {
        let mut bytes = fixed_header(3, 50);
        bytes.extend([7, 8, 9]);
        let repr = Repr::parse(&Packet::new_unchecked(&bytes[..])).expect("valid");
        assert_eq!(
            repr,
            Repr {
                src_addr: "2001:db8::1".parse().expect("address"),
                dst_addr: "2001:db8::2".parse().expect("address"),
                next_header: IpProtocol::ESP,
                payload_len: 3,
                hop_limit: 64,
                dscp: 46,
                ecn: 0,
                flow_label: 0x12345,
            }
        );
        assert_eq!(repr.header_len(), 40);
        assert_eq!(repr.buffer_len(), 43);
        let mut out = vec![0u8; 43];
        out[40..].copy_from_slice(&[7, 8, 9]);
        repr.emit(&mut Packet::new_unchecked(&mut out[..])).expect("fits");
        assert_eq!(out, bytes);

        let other = Repr { dscp: 0xff, ecn: 0xff, flow_label: 0xfff0_0001, ..repr };
        let mut p = Packet::new_unchecked(&mut out[..]);
        other.emit(&mut p).expect("fits");
        assert_eq!(p.traffic_class(), 0xff);
        assert_eq!(p.flow_label(), 1);
        assert_eq!(p.version(), 6);
        p.payload_mut().fill(0);
        assert_eq!(p.into_inner()[40..], [0, 0, 0]);
    }

    #[test]
    fn parse_errors() {
        let mut bytes = fixed_header(8, 59);
        bytes.extend([0; 8]);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&bytes[..0])),
            Err(Error::Truncated { needed: 1, got: 0 })
        );
        for len in 1..bytes.len() {
            let needed = if len < 40 { 40 } else { 48 };
            assert_eq!(
                Repr::parse(&Packet::new_unchecked(&bytes[..len])),
                Err(Error::Truncated { needed, got: len }),
                "prefix {len}"
            );
            assert_eq!(
                Packet::new_unchecked(&bytes[..len]).walk_extension_headers(),
                Err(Error::Truncated { needed, got: len })
            );
        }
        bytes[0] = 0x45;
        assert_eq!(Repr::parse(&Packet::new_unchecked(&bytes[..])), Err(Error::BadVersion(4)));
    }

    #[test]
    fn emit_errors() {
        let repr = Repr {
            src_addr: Ipv6Addr::LOCALHOST,
            dst_addr: Ipv6Addr::LOCALHOST,
            next_header: IpProtocol::UDP,
            payload_len: 10,
            hop_limit: 1,
            dscp: 0,
            ecn: 0,
            flow_label: 0,
        };
        let mut small = [0u8; 49];
        assert_eq!(
            repr.emit(&mut Packet::new_unchecked(&mut small[..])),
            Err(Error::Truncated { needed: 50, got: 49 })
        );
        let too_long = Repr { payload_len: 65_536, ..repr };
        assert_eq!(
            too_long.emit(&mut Packet::new_unchecked(&mut small[..])),
            Err(Error::TooLong { max: 65_535, got: 65_536 })
        );
        assert_eq!(Repr { payload_len: usize::MAX, ..repr }.buffer_len(), usize::MAX);
    }

    #[test]
    fn walk_hop_by_hop_routing_fragment_esp() {
        let p = Packet::new_checked(&HBH_ROUTING_FRAG_ESP[..]).expect("valid");
        let chain = p.walk_extension_headers().expect("valid");
        assert_eq!(chain.next_header, IpProtocol::ESP);
        assert_eq!(chain.offset, 64);
        assert_eq!(chain.next_header_field, 56, "the Fragment header named ESP");
        assert_eq!(chain.ext_headers, 3);
        assert!(chain.saw_fragment());
        assert!(!chain.is_fragment(), "atomic fragment");
        assert_eq!(
            chain.fragment,
            Some(Fragment { offset: 56, frag_offset: 0, more_frags: false, ident: 0xcafe })
        );
        assert_eq!(
            chain.esp_insert,
            EspInsertPoint { offset: 64, next_header_field: 56, next_header: IpProtocol::ESP }
        );
        let esp = crate::esp::Packet::new_checked(&HBH_ROUTING_FRAG_ESP[chain.offset..]).expect("valid");
        assert_eq!(esp.spi(), 0x1000);
        assert_eq!(esp.sequence_number(), 1);
    }

    #[test]
    fn walk_no_extension_headers() {
        let mut bytes = fixed_header(8, 17);
        bytes.extend([0; 8]);
        let chain = Packet::new_unchecked(&bytes[..]).walk_extension_headers().expect("valid");
        assert_eq!(chain.next_header, IpProtocol::UDP);
        assert_eq!(chain.offset, 40);
        assert_eq!(chain.next_header_field, 6, "the fixed header named UDP");
        assert_eq!(chain.ext_headers, 0);
        assert!(!chain.saw_fragment());
        assert_eq!(
            chain.esp_insert,
            EspInsertPoint { offset: 40, next_header_field: 6, next_header: IpProtocol::UDP }
        );
    }

    /// Builds a packet from extension headers given as (type, bytes) and an upper protocol.
    fn chain_packet(headers: &[(u8, Vec<u8>)], upper: u8, upper_bytes: &[u8]) -> Vec<u8> {
        let mut payload = Vec::new();
        for (i, (_, h)) in headers.iter().enumerate() {
            let mut h = h.clone();
            h[0] = headers.get(i + 1).map_or(upper, |(t, _)| *t);
            payload.extend(h);
        }
        payload.extend(upper_bytes);
        let first = headers.first().map_or(upper, |(t, _)| *t);
        let mut p = fixed_header(payload.len() as u16, first);
        p.extend(payload);
        p
    }

    fn opts(len8: u8) -> Vec<u8> {
        let mut h = vec![0, len8 - 1];
        h.resize(usize::from(len8) * 8, 0);
        h
    }

    #[test]
    fn walk_dest_opts_and_ah() {
        // Dest-opts (16 bytes), Routing, Dest-opts, AH (24 bytes), TCP.
        let mut ah = vec![0, 4, 0, 0, 0, 0, 0x20, 0x02, 0, 0, 0, 1];
        ah.resize(24, 0x5a);
        let headers = vec![(60, opts(2)), (43, opts(1)), (60, opts(1)), (51, ah)];
        let bytes = chain_packet(&headers, 6, &[0; 20]);
        let chain = Packet::new_unchecked(&bytes[..]).walk_extension_headers().expect("valid");
        assert_eq!(chain.next_header, IpProtocol::TCP);
        assert_eq!(chain.offset, 40 + 16 + 8 + 8 + 24);
        assert_eq!(chain.next_header_field, 72, "AH named TCP");
        assert_eq!(chain.ext_headers, 4);
        assert!(!chain.saw_fragment());
        // ESP goes after the Routing header (and so after the Destination Options before
        // it); the second Destination Options and AH stay inside.
        assert_eq!(
            chain.esp_insert,
            EspInsertPoint { offset: 64, next_header_field: 56, next_header: IpProtocol(60) }
        );
    }

    #[test]
    fn walk_dest_opts_only_stay_inside_esp() {
        let bytes = chain_packet(&[(60, opts(1))], 17, &[0; 8]);
        let chain = Packet::new_unchecked(&bytes[..]).walk_extension_headers().expect("valid");
        assert_eq!(chain.offset, 48);
        assert_eq!(
            chain.esp_insert,
            EspInsertPoint { offset: 40, next_header_field: 6, next_header: IpProtocol(60) }
        );
    }

    #[test]
    fn walk_stops_at_no_next_header_and_unknown() {
        for stop in [59u8, 135, 253, 58] {
            let bytes = chain_packet(&[(0, opts(1))], stop, &[0xff; 16]);
            let chain = Packet::new_unchecked(&bytes[..]).walk_extension_headers().expect("valid");
            assert_eq!(chain.next_header, IpProtocol(stop));
            assert_eq!(chain.offset, 48);
        }
    }

    #[test]
    fn walk_stops_after_non_first_fragment() {
        // The data after a non-first fragment's header looks like a Hop-by-Hop header
        // with a huge length; the walk must not read it.
        let frag = vec![0, 0, 0x05, 0xc8, 0, 0, 0, 1];
        let bytes = chain_packet(&[(44, frag)], 0, &[0, 0xff, 0, 0, 0, 0, 0, 0]);
        let chain = Packet::new_unchecked(&bytes[..]).walk_extension_headers().expect("valid");
        assert_eq!(chain.next_header, IpProtocol::HOP_BY_HOP);
        assert_eq!(chain.offset, 48);
        assert!(chain.is_fragment());
        assert_eq!(chain.fragment.map(|f| f.frag_offset), Some(1480));

        // A first fragment (offset 0, M set) is walked through.
        let frag = vec![0, 0, 0, 1, 0, 0, 0, 1];
        let bytes = chain_packet(&[(44, frag), (60, opts(1))], 50, &[0, 0, 0, 1, 0, 0, 0, 1]);
        let chain = Packet::new_unchecked(&bytes[..]).walk_extension_headers().expect("valid");
        assert_eq!(chain.next_header, IpProtocol::ESP);
        assert_eq!(chain.offset, 56);
        assert!(chain.is_fragment());
        assert_eq!(chain.esp_insert.offset, 48);
    }

    #[test]
    fn walk_errors() {
        // Truncated in the middle of a header, counted from the packet start.
        let bytes = chain_packet(&[(0, opts(2))], 17, &[]);
        let mut short = bytes.clone();
        short.truncate(50);
        short[5] = 10;
        assert_eq!(
            Packet::new_unchecked(&short[..]).walk_extension_headers(),
            Err(Error::Truncated { needed: 56, got: 50 })
        );
        // One byte of extension header: not even the length field.
        short[5] = 1;
        assert_eq!(
            Packet::new_unchecked(&short[..]).walk_extension_headers(),
            Err(Error::Truncated { needed: 42, got: 41 })
        );
        // Bytes past the payload length do not count.
        let mut padded = bytes.clone();
        padded[5] -= 8;
        assert_eq!(
            Packet::new_unchecked(&padded[..]).walk_extension_headers(),
            Err(Error::Truncated { needed: 56, got: 48 })
        );
        // A fragment header cut short.
        let bytes = chain_packet(&[(44, vec![0; 8])], 17, &[]);
        let mut short = bytes[..44].to_vec();
        short[5] = 4;
        assert_eq!(
            Packet::new_unchecked(&short[..]).walk_extension_headers(),
            Err(Error::Truncated { needed: 48, got: 44 })
        );

        // Hop-by-Hop after another header.
        let bytes = chain_packet(&[(60, opts(1)), (0, opts(1))], 17, &[]);
        assert_eq!(Packet::new_unchecked(&bytes[..]).walk_extension_headers(), Err(Error::MisplacedHopByHop));
        let bytes = chain_packet(&[(0, opts(1)), (0, opts(1))], 17, &[]);
        assert_eq!(Packet::new_unchecked(&bytes[..]).walk_extension_headers(), Err(Error::MisplacedHopByHop));

        // AH: Payload Len 0 (shorter than the fixed part), and 3 (20 bytes, not a multiple of 8).
        let mut ah = vec![0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1];
        ah.resize(24, 0);
        let bytes = chain_packet(&[(51, ah.clone())], 6, &[]);
        assert_eq!(Packet::new_unchecked(&bytes[..]).walk_extension_headers(), Err(Error::BadAhLen(0)));
        ah[1] = 3;
        let bytes = chain_packet(&[(51, ah.clone())], 6, &[]);
        assert_eq!(Packet::new_unchecked(&bytes[..]).walk_extension_headers(), Err(Error::BadAhLen(3)));
        // AH announcing more than there is.
        ah[1] = 6;
        let bytes = chain_packet(&[(51, ah)], 6, &[]);
        assert_eq!(
            Packet::new_unchecked(&bytes[..]).walk_extension_headers(),
            Err(Error::Truncated { needed: 72, got: 64 })
        );
    }

    #[test]
    fn walk_limits_extension_headers() {
        let at_limit: Vec<(u8, Vec<u8>)> = (0..MAX_EXTENSION_HEADERS).map(|_| (60, opts(1))).collect();
        let bytes = chain_packet(&at_limit, 17, &[0; 8]);
        let chain = Packet::new_unchecked(&bytes[..]).walk_extension_headers().expect("at the limit");
        assert_eq!(chain.ext_headers, MAX_EXTENSION_HEADERS);
        assert_eq!(chain.next_header, IpProtocol::UDP);

        let over: Vec<(u8, Vec<u8>)> = (0..=MAX_EXTENSION_HEADERS).map(|_| (60, opts(1))).collect();
        let bytes = chain_packet(&over, 17, &[0; 8]);
        assert_eq!(
            Packet::new_unchecked(&bytes[..]).walk_extension_headers(),
            Err(Error::TooManyExtensionHeaders)
        );

        // Thousands of 8-byte headers in a maximum-size packet: still stops at the limit.
        let many: Vec<(u8, Vec<u8>)> = (0..8000).map(|_| (43, opts(1))).collect();
        let bytes = chain_packet(&many, 17, &[]);
        assert_eq!(
            Packet::new_unchecked(&bytes[..]).walk_extension_headers(),
            Err(Error::TooManyExtensionHeaders)
        );
    }

    #[test]
    fn setters() {
        let mut bytes = [0u8; 48];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_version(6);
        p.set_traffic_class(0x12);
        p.set_flow_label(0xabcde);
        p.set_payload_len(8);
        p.set_next_header(IpProtocol::ESP);
        p.set_hop_limit(255);
        p.set_src_addr(Ipv6Addr::LOCALHOST);
        p.set_dst_addr(Ipv6Addr::UNSPECIFIED);
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0x12);
        assert_eq!(p.flow_label(), 0xabcde);
        assert_eq!(p.hop_limit(), 255);
        assert_eq!(p.src_addr(), Ipv6Addr::LOCALHOST);
        assert_eq!(p.dst_addr(), Ipv6Addr::UNSPECIFIED);
        assert_eq!(p.into_inner()[..4], [0x61, 0x2a, 0xbc, 0xde]);
    }
}
