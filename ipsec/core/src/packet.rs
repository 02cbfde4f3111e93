//! A packet in its buffer, with room in front for the headers encapsulation adds
//! ([`HEADROOM`]) and behind for ESP's trailer ([`TAILROOM`]), and the one place the core
//! writes a fresh IP header ([`emit_ip`]). A leaf: the packet path's modules all use it.

use std::net::IpAddr;

use crate::esp::ESP_HEADER_LEN;

/// Room to leave in front of a packet for the outer IPv6 header, UDP, ESP header and IV.
pub const HEADROOM: usize = 40 + 8 + ESP_HEADER_LEN + 16;
/// Room to leave after a packet for padding, trailer and the longest ICV.
pub const TAILROOM: usize = 16 + 2 + 32;

/// A packet in a buffer: the IP packet is `data[head..]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    pub data: Vec<u8>,
    pub head: usize,
}

impl Packet {
    /// A packet with no headroom.
    pub fn new(bytes: Vec<u8>) -> Packet {
        Packet { data: bytes, head: 0 }
    }

    /// A copy of `bytes` with [`HEADROOM`] in front and [`TAILROOM`] reserved behind.
    pub fn with_headroom(bytes: &[u8]) -> Packet {
        let mut data = Vec::with_capacity(HEADROOM + bytes.len() + TAILROOM);
        data.resize(HEADROOM, 0);
        data.extend_from_slice(bytes);
        Packet { data, head: HEADROOM }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.data[self.head.min(self.data.len())..]
    }
}

/// What a fresh IP header the core writes says besides its addresses: the protocol it
/// carries, its DSCP and ECN byte, and for IPv4 its identification and DF.
#[derive(Clone, Copy)]
pub(crate) struct Fresh {
    pub(crate) proto: ipsec_wire::IpProtocol,
    pub(crate) tos: u8,
    pub(crate) ident: u16,
    pub(crate) dont_frag: bool,
}

/// Writes an IPv4 (20 bytes, TTL 64, with its checksum) or IPv6 (hop limit 64, flow label
/// 0) header from `src` to `dst` over the whole `packet`, whose payload follows it: the
/// outer header of tunnel mode, the header transport mode puts back in front of a payload
/// whose socket took its own off, the header of an ICMP error to an inner sender. `Err`
/// for addresses of two families or a packet too long for its length field.
pub(crate) fn emit_ip(
    packet: &mut [u8],
    src: IpAddr,
    dst: IpAddr,
    h: Fresh,
) -> Result<(), ipsec_wire::Error> {
    use ipsec_wire::{ipv4, ipv6};
    let (dscp, ecn) = (h.tos >> 2, h.tos & 3);
    match (src, dst) {
        (IpAddr::V4(src_addr), IpAddr::V4(dst_addr)) => ipv4::Repr {
            src_addr,
            dst_addr,
            protocol: h.proto,
            payload_len: packet.len().saturating_sub(ipv4::MIN_HEADER_LEN),
            ttl: 64,
            dscp,
            ecn,
            ident: h.ident,
            dont_frag: h.dont_frag,
            more_frags: false,
            frag_offset: 0,
        }
        .emit(&mut ipv4::Packet::new_unchecked(packet)),
        (IpAddr::V6(src_addr), IpAddr::V6(dst_addr)) => ipv6::Repr {
            src_addr,
            dst_addr,
            next_header: h.proto,
            payload_len: packet.len().saturating_sub(ipv6::HEADER_LEN),
            hop_limit: 64,
            dscp,
            ecn,
            flow_label: 0,
        }
        .emit(&mut ipv6::Packet::new_unchecked(packet)),
        _ => Err(ipsec_wire::Error::BadVersion(if src.is_ipv4() { 6 } else { 4 })),
    }
}
