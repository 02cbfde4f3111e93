//! What IPv4 and IPv6 share: protocol numbers (IPv4 Protocol and IPv6 Next Header draw on one
//! IANA registry) and the pseudo-header that UDP's checksum covers.

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;

/// An IANA "Assigned Internet Protocol Number": the IPv4 Protocol field, the IPv6 Next Header
/// field, the ESP Next Header field.
///
/// A newtype rather than an enum so that every byte value is one representation; the named
/// constants are the ones Fast IPsec looks at.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// IPv6 Hop-by-Hop Options (RFC 8200 §4.3).
    pub const HOP_BY_HOP: IpProtocol = IpProtocol(0);
    /// ICMP.
    pub const ICMP: IpProtocol = IpProtocol(1);
    /// IPv4 encapsulated (ESP tunnel mode carrying IPv4).
    pub const IPV4: IpProtocol = IpProtocol(4);
    /// TCP.
    pub const TCP: IpProtocol = IpProtocol(6);
    /// UDP.
    pub const UDP: IpProtocol = IpProtocol(17);
    /// IPv6 encapsulated (ESP tunnel mode carrying IPv6).
    pub const IPV6: IpProtocol = IpProtocol(41);
    /// IPv6 Routing header (RFC 8200 §4.4).
    pub const ROUTING: IpProtocol = IpProtocol(43);
    /// IPv6 Fragment header (RFC 8200 §4.5).
    pub const FRAGMENT: IpProtocol = IpProtocol(44);
    /// Encapsulating Security Payload (RFC 4303).
    pub const ESP: IpProtocol = IpProtocol(50);
    /// Authentication Header (RFC 4302).
    pub const AH: IpProtocol = IpProtocol(51);
    /// ICMPv6.
    pub const ICMPV6: IpProtocol = IpProtocol(58);
    /// IPv6 No Next Header; in ESP, a dummy packet (RFC 4303 §2.6).
    pub const NO_NEXT_HEADER: IpProtocol = IpProtocol(59);
    /// IPv6 Destination Options (RFC 8200 §4.6).
    pub const DEST_OPTS: IpProtocol = IpProtocol(60);
    /// IP Payload Compression (RFC 3173).
    pub const IPCOMP: IpProtocol = IpProtocol(108);

    /// The short name of a protocol this crate knows, or `None`.
    #[inline]
    pub const fn name(self) -> Option<&'static str> {
        Some(match self {
            IpProtocol::HOP_BY_HOP => "hop-by-hop",
            IpProtocol::ICMP => "icmp",
            IpProtocol::IPV4 => "ipv4",
            IpProtocol::TCP => "tcp",
            IpProtocol::UDP => "udp",
            IpProtocol::IPV6 => "ipv6",
            IpProtocol::ROUTING => "routing",
            IpProtocol::FRAGMENT => "fragment",
            IpProtocol::ESP => "esp",
            IpProtocol::AH => "ah",
            IpProtocol::ICMPV6 => "icmpv6",
            IpProtocol::NO_NEXT_HEADER => "no-next-header",
            IpProtocol::DEST_OPTS => "dest-opts",
            IpProtocol::IPCOMP => "ipcomp",
            _ => return None,
        })
    }
}

impl From<u8> for IpProtocol {
    #[inline]
    fn from(value: u8) -> Self {
        IpProtocol(value)
    }
}

impl From<IpProtocol> for u8 {
    #[inline]
    fn from(value: IpProtocol) -> Self {
        value.0
    }
}

impl fmt::Display for IpProtocol {
    #[inline]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "{}", self.0),
        }
    }
}

impl fmt::Debug for IpProtocol {
    #[inline]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "IpProtocol({}: {name})", self.0),
            None => write!(f, "IpProtocol({})", self.0),
        }
    }
}

/// Whether `parse` functions verify checksums.
///
/// `Verify` is for packets from the network. `Ignore` is for packets whose checksums were
/// already verified (by a NIC) or are about to be rewritten, and for fuzzing, where a
/// checksum gate would hide everything behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChecksumPolicy {
    /// Check every checksum; a wrong one is [`Error::BadChecksum`](crate::Error::BadChecksum).
    #[default]
    Verify,
    /// Check none (including the rule that UDP over IPv6 must carry one).
    Ignore,
}

/// The source and destination addresses of the IP header under a UDP datagram: with the
/// protocol number and the UDP length they make the pseudo-header its checksum covers
/// (RFC 768; RFC 8200 §8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PseudoHeader {
    /// Over IPv4: the checksum is optional (0 = none).
    V4 {
        /// The IPv4 source address.
        src: Ipv4Addr,
        /// The IPv4 destination address.
        dst: Ipv4Addr,
    },
    /// Over IPv6: the checksum is mandatory.
    V6 {
        /// The IPv6 source address.
        src: Ipv6Addr,
        /// The IPv6 destination address (the final one, if a Routing header is present).
        dst: Ipv6Addr,
    },
}

impl PseudoHeader {
    /// The ones' complement sum (not complemented) of the pseudo-header for an upper-layer
    /// packet of `protocol` and `upper_len` bytes.
    #[inline]
    pub fn sum(&self, protocol: IpProtocol, upper_len: u32) -> u16 {
        match self {
            PseudoHeader::V4 { src, dst } => {
                // src, dst, zero, protocol, UDP length (16 bits: the caller's length fits,
                // since it came from or goes into a 16-bit field).
                let len = upper_len.to_be_bytes();
                checksum::combine(&[
                    checksum::sum(&src.octets()),
                    checksum::sum(&dst.octets()),
                    checksum::sum(&[0, protocol.0, len[2], len[3]]),
                ])
            }
            PseudoHeader::V6 { src, dst } => checksum::combine(&[
                checksum::sum(&src.octets()),
                checksum::sum(&dst.octets()),
                checksum::sum(&upper_len.to_be_bytes()),
                checksum::sum(&[0, 0, 0, protocol.0]),
            ]),
        }
    }

    /// Whether this is an IPv6 pseudo-header (where a UDP checksum is mandatory).
    #[inline]
    pub const fn is_v6(&self) -> bool {
        matches!(self, PseudoHeader::V6 { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_names_and_numbers() {
        assert_eq!(IpProtocol::from(50), IpProtocol::ESP);
        assert_eq!(u8::from(IpProtocol::UDP), 17);
        assert_eq!(IpProtocol::ESP.to_string(), "esp");
        assert_eq!(IpProtocol(253).to_string(), "253");
        assert_eq!(format!("{:?}", IpProtocol::AH), "IpProtocol(51: ah)");
        assert_eq!(format!("{:?}", IpProtocol(200)), "IpProtocol(200)");
    }

    #[test]
    fn pseudo_header_sums() {
        // IPv4: 192.0.2.1 -> 198.51.100.2, UDP, length 8, summed by hand:
        // c000 + 0201 + c633 + 6402 + 0011 + 0008 = 0x1ec4f -> 0xec50.
        let v4 = PseudoHeader::V4 { src: Ipv4Addr::new(192, 0, 2, 1), dst: Ipv4Addr::new(198, 51, 100, 2) };
        assert_eq!(v4.sum(IpProtocol::UDP, 8), 0xec50);
        assert!(!v4.is_v6());
        // IPv6: 2001:db8::1 -> 2001:db8::2, UDP, length 8:
        // 2001 + 0db8 + 0001 + 2001 + 0db8 + 0002 + 0008 + 0011 = 0x5b8e.
        let v6 = PseudoHeader::V6 {
            src: "2001:db8::1".parse().expect("address"),
            dst: "2001:db8::2".parse().expect("address"),
        };
        assert_eq!(v6.sum(IpProtocol::UDP, 8), 0x5b8e);
        assert!(v6.is_v6());
    }
}
