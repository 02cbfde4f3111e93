//! [`parse_any`]: one call from raw bytes to what the IPsec core dispatches on — IP version,
//! addresses, the protocol after the IP headers and where it starts, whether the packet is a
//! fragment, and the ESP or UDP header if that is what comes next, with what an ESP-in-UDP
//! payload is. Total on any input, so a fuzz target can call it directly.
//!
//! Only the IP and UDP headers can fail the parse. What rides in them is classified, not
//! refused: ESP too short for its header is [`Upper::BadEsp`], and a datagram on the
//! encapsulation port that is neither ESP, a keepalive nor IKE is [`Encap::Invalid`], so
//! that the core can count each under its own cause. Which datagrams are ESP in UDP is the
//! caller's to say ([`EncapPort`]): RFC 3948's port 4500 ([`parse_any`]), the port a
//! gateway listens on, or every datagram when the caller read it from its own ESP-in-UDP
//! socket.

use std::net::IpAddr;

use crate::error::{Error, Result};
use crate::ip::{ChecksumPolicy, IpProtocol, PseudoHeader};
use crate::udp_encap::{self, Encapsulated};
use crate::{esp, ipv4, ipv6, udp};

/// What [`parse_any`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Summary {
    /// The source address (its family is the IP version).
    pub src: IpAddr,
    /// The destination address.
    pub dst: IpAddr,
    /// The length of the IP packet (the bytes after it, if any, were link-layer padding).
    pub ip_len: usize,
    /// The protocol after the IP header and (IPv6) the extension headers walked.
    pub protocol: IpProtocol,
    /// Where that protocol's header starts, from the start of the packet.
    pub offset: usize,
    /// IPv6 extension headers walked (0 for IPv4).
    pub ext_headers: usize,
    /// Whether the packet is a fragment proper (IPv4: MF or an offset; IPv6: a Fragment
    /// header with M or an offset — atomic fragments are whole packets).
    pub is_fragment: bool,
    /// What follows the IP headers, as far as it was parsed.
    pub upper: Upper,
}

/// What follows the IP headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Upper {
    /// ESP directly over IP.
    Esp(esp::Repr),
    /// ESP directly over IP that is not a valid ESP header: shorter than its 8 bytes
    /// ([`Error::Truncated`]), or with the reserved SPI 0 ([`Error::ReservedSpi`]).
    BadEsp(Error),
    /// UDP to or from the encapsulation port (RFC 3948), and what its payload is.
    UdpEncap(udp::Repr, Encap),
    /// Other UDP.
    Udp(udp::Repr),
    /// A fragment: the upper-layer packet is not whole here, so it was not parsed.
    Fragment,
    /// Another protocol, not parsed.
    Other,
}

/// What a UDP payload on the encapsulation port is (the owned form of [`Encapsulated`],
/// and what [`udp_encap::classify`] refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encap {
    /// A NAT-keepalive.
    Keepalive,
    /// An IKE message behind the Non-ESP Marker.
    Ike,
    /// ESP in UDP.
    Esp(esp::Repr),
    /// ESP (the first four bytes, an SPI, are not zero) shorter than its 8-byte header.
    EspTruncated,
    /// None of those: empty, one byte other than 0xFF, two or three bytes, or the Non-ESP
    /// Marker without a whole IKE header; the error says which.
    Invalid(Error),
}

/// Which UDP datagrams are ESP in UDP, for [`parse_any_encap`] to classify as such.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EncapPort {
    /// Those to or from this port: 4500 (RFC 3948 §2; what [`parse_any`] uses), or the
    /// port a gateway was told to listen on.
    Port(u16),
    /// Every datagram: the caller read it from its own ESP-in-UDP socket.
    Every,
}

impl EncapPort {
    #[inline(always)]
    fn covers(self, src_port: u16, dst_port: u16) -> bool {
        match self {
            EncapPort::Port(p) => src_port == p || dst_port == p,
            EncapPort::Every => true,
        }
    }
}

/// Parses a packet from the network, checksums verified: [`parse_any_with`] with
/// [`ChecksumPolicy::Verify`].
#[inline]
pub fn parse_any(bytes: &[u8]) -> Result<Summary> {
    parse_any_with(bytes, ChecksumPolicy::Verify)
}

/// [`parse_any_encap`] with ESP in UDP on RFC 3948's port 4500.
#[inline]
pub fn parse_any_with(bytes: &[u8], policy: ChecksumPolicy) -> Result<Summary> {
    parse_any_encap(bytes, policy, EncapPort::Port(udp_encap::NAT_T_PORT))
}

/// Parses an IPv4 or IPv6 packet (by its version nibble) down to the ESP or upper-layer
/// header: IPv4 header (checksum as `policy` says), or IPv6 fixed header and extension
/// headers; then, unless the packet is a fragment, the ESP header, or the UDP header
/// (checksum as `policy` says) and, for a datagram `encap` covers, the RFC 3948
/// classification of its payload.
///
/// Every error of the IP and UDP formats can come back; [`Error::BadVersion`] when the
/// version is neither 4 nor 6. ESP and ESP-in-UDP payloads are classified, never refused
/// ([`Upper::BadEsp`], [`Encap`]).
#[inline]
pub fn parse_any_encap(bytes: &[u8], policy: ChecksumPolicy, encap: EncapPort) -> Result<Summary> {
    let Some(first) = bytes.first() else {
        return Err(Error::Truncated { needed: 1, got: 0 });
    };
    match first >> 4 {
        4 => parse_ipv4(bytes, policy, encap),
        6 => parse_ipv6(bytes, policy, encap),
        version => Err(Error::BadVersion(version)),
    }
}

#[inline(always)]
fn parse_ipv4(bytes: &[u8], policy: ChecksumPolicy, encap: EncapPort) -> Result<Summary> {
    let packet = ipv4::Packet::new_unchecked(bytes);
    let repr = ipv4::Repr::parse_with(&packet, policy)?;
    let pseudo = PseudoHeader::V4 { src: repr.src_addr, dst: repr.dst_addr };
    let upper = if repr.is_fragment() {
        Upper::Fragment
    } else {
        parse_upper(repr.protocol, packet.payload(), &pseudo, policy, encap)?
    };
    Ok(Summary {
        src: repr.src_addr.into(),
        dst: repr.dst_addr.into(),
        ip_len: usize::from(packet.total_len()),
        protocol: repr.protocol,
        offset: packet.header_len(),
        ext_headers: 0,
        is_fragment: repr.is_fragment(),
        upper,
    })
}

#[inline(always)]
fn parse_ipv6(bytes: &[u8], policy: ChecksumPolicy, encap: EncapPort) -> Result<Summary> {
    let packet = ipv6::Packet::new_unchecked(bytes);
    let repr = ipv6::Repr::parse(&packet)?;
    let chain = packet.walk_extension_headers()?;
    let ip_len = packet.total_len();
    let pseudo = PseudoHeader::V6 { src: repr.src_addr, dst: repr.dst_addr };
    let upper = if chain.is_fragment() {
        Upper::Fragment
    } else {
        // The walk keeps chain.offset within the packet, and the packet within bytes.
        parse_upper(chain.next_header, &bytes[chain.offset..ip_len], &pseudo, policy, encap)?
    };
    Ok(Summary {
        src: repr.src_addr.into(),
        dst: repr.dst_addr.into(),
        ip_len,
        protocol: chain.next_header,
        offset: chain.offset,
        ext_headers: chain.ext_headers,
        is_fragment: chain.is_fragment(),
        upper,
    })
}

#[inline(always)]
fn parse_upper(
    protocol: IpProtocol,
    bytes: &[u8],
    pseudo: &PseudoHeader,
    policy: ChecksumPolicy,
    encap: EncapPort,
) -> Result<Upper> {
    match protocol {
        IpProtocol::ESP => Ok(match esp::Repr::parse(&esp::Packet::new_unchecked(bytes)) {
            Ok(r) => Upper::Esp(r),
            Err(e) => Upper::BadEsp(e),
        }),
        IpProtocol::UDP => {
            let datagram = udp::Packet::new_unchecked(bytes);
            let repr = match udp::Repr::parse_with(&datagram, pseudo, policy) {
                // ESP in UDP over IPv6 may carry a zero checksum (RFC 6935/6936 allow it for
                // tunnel protocols, whose payload is protected by its own integrity check:
                // here ESP's ICV); scapy and Linux's encapsulation sockets send it.
                Err(Error::MissingUdpChecksum) if encap.covers(datagram.src_port(), datagram.dst_port()) => {
                    udp::Repr::parse_with(&datagram, pseudo, ChecksumPolicy::Ignore)?
                }
                other => other?,
            };
            if !encap.covers(repr.src_port, repr.dst_port) {
                return Ok(Upper::Udp(repr));
            }
            Ok(Upper::UdpEncap(repr, classify(datagram.payload())))
        }
        _ => Ok(Upper::Other),
    }
}

/// Where a whole IPv4 or IPv6 packet goes: its destination address, read through the
/// checked view (the fixed header and the length it claims must be there); `None` for
/// anything else. What a sender needs to pick a socket and an address for a packet it did
/// not parse.
#[inline]
pub fn destination(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.first()? >> 4 {
        4 => ipv4::Packet::new_checked(bytes).ok().map(|p| IpAddr::V4(p.dst_addr())),
        6 => ipv6::Packet::new_checked(bytes).ok().map(|p| IpAddr::V6(p.dst_addr())),
        _ => None,
    }
}

impl Encap {
    /// What an ESP-in-UDP payload is (for a caller whose socket took the IP and UDP headers
    /// off): [`udp_encap::classify`]'s answer, with what it refuses told apart into short
    /// ESP and the rest.
    #[inline]
    pub fn of(payload: &[u8]) -> Encap {
        classify(payload)
    }
}

/// What an ESP-in-UDP payload is; what [`udp_encap::classify`] refuses is told apart into
/// short ESP (an SPI, so ESP by RFC 3948 §2.1, but no whole header) and the rest.
#[inline(always)]
fn classify(payload: &[u8]) -> Encap {
    match udp_encap::classify(payload) {
        Ok(Encapsulated::Keepalive) => Encap::Keepalive,
        Ok(Encapsulated::Ike(_)) => Encap::Ike,
        // classify checked the header's length and a non-zero SPI: parse cannot refuse.
        Ok(Encapsulated::Esp(p)) => match esp::Repr::parse(&p) {
            Ok(r) => Encap::Esp(r),
            Err(_) => Encap::EspTruncated,
        },
        Err(_) if payload.len() >= 4 && payload[..4] != udp_encap::NON_ESP_MARKER => Encap::EspTruncated,
        Err(e) => Encap::Invalid(e),
    }
}

#[cfg(test)]
mod zero_checksum_tests {
    use super::*;

    /// IPv6 UDP datagram with checksum 0 on `port`, carrying an ESP header.
    fn v6_udp_zero(port: u16) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 16, 17, 64];
        p.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        p.extend_from_slice(&port.to_be_bytes());
        p.extend_from_slice(&port.to_be_bytes());
        p.extend_from_slice(&[0, 16, 0, 0]);
        p.extend_from_slice(&[0, 0, 0x10, 0, 0, 0, 0, 1]);
        p
    }

    #[test]
    fn a_zero_udp_checksum_over_ipv6_is_accepted_only_for_esp_in_udp() {
        let s = parse_any(&v6_udp_zero(4500)).unwrap();
        assert!(matches!(s.upper, Upper::UdpEncap(_, Encap::Esp(_))), "{s:?}");
        assert_eq!(parse_any(&v6_udp_zero(53)), Err(Error::MissingUdpChecksum));
    }

    #[test]
    fn the_encapsulation_port_is_the_callers() {
        // Port 4501 is plain UDP to parse_any, ESP in UDP when the caller says so.
        let mut p = v6_udp_zero(4501);
        assert_eq!(parse_any(&p), Err(Error::MissingUdpChecksum));
        for encap in [EncapPort::Port(4501), EncapPort::Every] {
            let s = parse_any_encap(&p, ChecksumPolicy::Verify, encap).unwrap();
            assert!(matches!(s.upper, Upper::UdpEncap(_, Encap::Esp(_))), "{encap:?}: {s:?}");
        }
        // With a checksum, 4501 is other UDP to parse_any.
        let udp = PseudoHeader::V6 {
            src: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1].into(),
            dst: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2].into(),
        };
        udp::Packet::new_unchecked(&mut p[40..]).fill_checksum(&udp);
        assert!(matches!(parse_any(&p).unwrap().upper, Upper::Udp(_)));
    }
}

#[cfg(test)]
mod classification_tests {
    use super::*;

    /// An IPv4 packet of protocol `proto` from 192.0.2.1 to 192.0.2.2 around `payload`.
    fn v4(proto: u8, payload: &[u8]) -> Vec<u8> {
        let total = (20 + payload.len()) as u16;
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2];
        p[2..4].copy_from_slice(&total.to_be_bytes());
        let sum = crate::checksum::checksum(&p);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
        p.extend_from_slice(payload);
        p
    }

    /// A UDP datagram from port 1024 to `port` (checksum 0: none, over IPv4) around `payload`.
    fn v4_udp(port: u16, payload: &[u8]) -> Vec<u8> {
        let mut d = vec![4, 0];
        d.extend_from_slice(&port.to_be_bytes());
        d.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        d.extend_from_slice(&[0, 0]);
        d.extend_from_slice(payload);
        v4(17, &d)
    }

    fn encap(port: u16, payload: &[u8]) -> Encap {
        match parse_any_encap(&v4_udp(port, payload), ChecksumPolicy::Verify, EncapPort::Port(port)) {
            Ok(Summary { upper: Upper::UdpEncap(_, e), .. }) => e,
            other => panic!("{payload:?}: {other:?}"),
        }
    }

    #[test]
    fn every_esp_in_udp_payload_is_classified_not_refused() {
        let mut ike = vec![0; 32];
        ike[4] = 1;
        let esp = [0, 0, 0x30, 1, 0, 0, 0, 1, 0xaa, 0xbb];
        for port in [4500, 4501] {
            assert_eq!(encap(port, &[0xff]), Encap::Keepalive);
            assert_eq!(encap(port, &ike), Encap::Ike);
            // The repro: 32 zero bytes are the marker and a (zero) IKE header.
            assert_eq!(encap(port, &[0; 32]), Encap::Ike);
            assert_eq!(encap(port, &esp), Encap::Esp(esp::Repr { spi: 0x3001, sequence_number: 1 }));
            for len in 4..8 {
                assert_eq!(encap(port, &esp[..len]), Encap::EspTruncated, "{len} bytes");
            }
            assert_eq!(encap(port, &[]), Encap::Invalid(Error::Truncated { needed: 1, got: 0 }));
            assert_eq!(encap(port, &[0x7f]), Encap::Invalid(Error::BadKeepalive(0x7f)));
            assert_eq!(encap(port, &[1, 2, 3]), Encap::Invalid(Error::Truncated { needed: 4, got: 3 }));
            assert_eq!(encap(port, &ike[..20]), Encap::Invalid(Error::Truncated { needed: 32, got: 20 }));
        }
    }

    #[test]
    fn esp_over_ip_too_short_or_with_spi_0_is_bad_esp() {
        let s = parse_any(&v4(50, &[0, 0, 0x30, 1, 0, 0])).unwrap();
        assert_eq!(s.upper, Upper::BadEsp(Error::Truncated { needed: 8, got: 6 }));
        let s = parse_any(&v4(50, &[0; 16])).unwrap();
        assert_eq!(s.upper, Upper::BadEsp(Error::ReservedSpi));
        // A broken IP header still fails the parse.
        let mut p = v4(50, &[0, 0, 0x30, 1, 0, 0, 0, 1]);
        p[10] ^= 1;
        assert_eq!(parse_any(&p), Err(Error::BadChecksum));
    }
}

#[cfg(test)]
mod destination_tests {
    use std::net::Ipv6Addr;

    use super::*;

    #[test]
    fn the_destination_is_read_from_a_whole_ipv4_or_ipv6_packet_only() {
        let mut v4p = vec![0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 50, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        v4p.resize(28, 0);
        assert_eq!(destination(&v4p), Some(IpAddr::from([10, 0, 0, 2])));
        let mut v6p = vec![0x60, 0, 0, 0, 0, 8, 50, 64];
        v6p.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        v6p.extend_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2).octets());
        v6p.resize(48, 0);
        assert_eq!(destination(&v6p), Some("2001:db8::2".parse().unwrap()));
        // Cut short, claiming more than there is, another version, nothing.
        assert_eq!(destination(&v4p[..19]), None);
        assert_eq!(destination(&v6p[..47]), None);
        assert_eq!(destination(&[0x50; 40]), None);
        assert_eq!(destination(&[]), None);
    }
}
