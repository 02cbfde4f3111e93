//! [`parse_any`]: one call from raw bytes to what the IPsec core dispatches on — IP version,
//! addresses, the protocol after the IP headers and where it starts, whether the packet is a
//! fragment, and the ESP or UDP header if that is what comes next. Total on any input, so a
//! fuzz target can call it directly.

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
    /// UDP with NAT-T port 4500 as source or destination (RFC 3948), and what its payload is.
    UdpEncap(udp::Repr, Encap),
    /// Other UDP.
    Udp(udp::Repr),
    /// A fragment: the upper-layer packet is not whole here, so it was not parsed.
    Fragment,
    /// Another protocol, not parsed.
    Other,
}

/// What a UDP payload on the NAT-T port is (the owned form of [`Encapsulated`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encap {
    /// A NAT-keepalive.
    Keepalive,
    /// An IKE message behind the Non-ESP Marker.
    Ike,
    /// ESP in UDP.
    Esp(esp::Repr),
}

/// Parses a packet from the network, checksums verified: [`parse_any_with`] with
/// [`ChecksumPolicy::Verify`].
#[inline]
pub fn parse_any(bytes: &[u8]) -> Result<Summary> {
    parse_any_with(bytes, ChecksumPolicy::Verify)
}

/// Parses an IPv4 or IPv6 packet (by its version nibble) down to the ESP or upper-layer
/// header: IPv4 header (checksum as `policy` says), or IPv6 fixed header and extension
/// headers; then, unless the packet is a fragment, the ESP header, or the UDP header
/// (checksum as `policy` says) and, on the NAT-T port, the RFC 3948 classification.
///
/// Every error of the formats involved can come back; [`Error::BadVersion`] when the
/// version is neither 4 nor 6.
#[inline]
pub fn parse_any_with(bytes: &[u8], policy: ChecksumPolicy) -> Result<Summary> {
    let Some(first) = bytes.first() else {
        return Err(Error::Truncated { needed: 1, got: 0 });
    };
    match first >> 4 {
        4 => parse_ipv4(bytes, policy),
        6 => parse_ipv6(bytes, policy),
        version => Err(Error::BadVersion(version)),
    }
}

#[inline(always)]
fn parse_ipv4(bytes: &[u8], policy: ChecksumPolicy) -> Result<Summary> {
    let packet = ipv4::Packet::new_unchecked(bytes);
    let repr = ipv4::Repr::parse_with(&packet, policy)?;
    let pseudo = PseudoHeader::V4 { src: repr.src_addr, dst: repr.dst_addr };
    let upper = if repr.is_fragment() {
        Upper::Fragment
    } else {
        parse_upper(repr.protocol, packet.payload(), &pseudo, policy)?
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
fn parse_ipv6(bytes: &[u8], policy: ChecksumPolicy) -> Result<Summary> {
    let packet = ipv6::Packet::new_unchecked(bytes);
    let repr = ipv6::Repr::parse(&packet)?;
    let chain = packet.walk_extension_headers()?;
    let ip_len = packet.total_len();
    let pseudo = PseudoHeader::V6 { src: repr.src_addr, dst: repr.dst_addr };
    let upper = if chain.is_fragment() {
        Upper::Fragment
    } else {
        // The walk keeps chain.offset within the packet, and the packet within bytes.
        parse_upper(chain.next_header, &bytes[chain.offset..ip_len], &pseudo, policy)?
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
) -> Result<Upper> {
    match protocol {
        IpProtocol::ESP => esp::Repr::parse(&esp::Packet::new_unchecked(bytes)).map(Upper::Esp),
        IpProtocol::UDP => {
            let datagram = udp::Packet::new_unchecked(bytes);
            let repr = match udp::Repr::parse_with(&datagram, pseudo, policy) {
                // ESP in UDP over IPv6 may carry a zero checksum (RFC 6935/6936 allow it for
                // tunnel protocols, whose payload is protected by its own integrity check:
                // here ESP's ICV); scapy and Linux's encapsulation sockets send it.
                Err(Error::MissingUdpChecksum)
                    if datagram.src_port() == udp_encap::NAT_T_PORT
                        || datagram.dst_port() == udp_encap::NAT_T_PORT =>
                {
                    udp::Repr::parse_with(&datagram, pseudo, ChecksumPolicy::Ignore)?
                }
                other => other?,
            };
            if repr.src_port != udp_encap::NAT_T_PORT && repr.dst_port != udp_encap::NAT_T_PORT {
                return Ok(Upper::Udp(repr));
            }
            let encap = match udp_encap::classify(datagram.payload())? {
                Encapsulated::Keepalive => Encap::Keepalive,
                Encapsulated::Ike(_) => Encap::Ike,
                Encapsulated::Esp(esp) => Encap::Esp(esp::Repr::parse(&esp)?),
            };
            Ok(Upper::UdpEncap(repr, encap))
        }
        _ => Ok(Upper::Other),
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
}
