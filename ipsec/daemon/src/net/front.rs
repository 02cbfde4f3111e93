//! What an IPv6 raw socket took off, written back in front of the payload it returned.
//!
//! An IPv6 raw socket returns only what follows the IPv6 header and the extension headers
//! the kernel walked (RFC 3542 §3); the core's inputs for IPComp and AH take whole
//! packets. So the loops write an IPv6 header in front of the payload, made of what the
//! socket reported with it (sender, local address, traffic class, hop limit) and of the
//! extension headers the socket hands over as control messages where it is asked to (AH's:
//! [`super::sockets::ah_in`]):
//!
//! ```text
//!  recvmmsg ─ payload at HEADROOM ─┐ src (msg_name), dst (IPV6_PKTINFO), ECN (IPV6_TCLASS),
//!                                  │ hop limit (IPV6_HOPLIMIT), Hop-by-Hop / Destination
//!                                  │ Options / Routing headers (IPV6_HOPOPTS, _DSTOPTS, _RTHDR)
//!                                  ▼
//!  [IPv6 header][extension headers, in the order they came][payload] ─► core (a whole packet)
//! ```
//!
//! Why this is the packet AH's ICV was computed over (RFC 4302 §3.3.3.1.2): the ICV
//! covers the IPv6 header with traffic class, flow label and hop limit zeroed, the
//! extension headers in front of AH (options whose change bit is set zeroed, the Routing
//! header as it arrives at its last destination), AH and what follows. The kernel hands
//! the packet to the raw socket only at its final destination (a Routing header's segments
//! left 0, the destination address final) and after reassembly (no Fragment header: AH is
//! computed before fragmenting); every immutable field comes back as it was sent: the
//! addresses, the next header chain and the payload length, which counts the extension
//! headers and the payload. The flow label, which the socket does not report, is mutable
//! and written as 0; the traffic class's DSCP likewise (its ECN field is kept, for RFC
//! 6040 at decapsulation).

use std::net::Ipv6Addr;

use ipsec_core::{Packet, TAILROOM};
use ipsec_wire::{ipv6, IpProtocol};

/// What the socket reported with a payload: the header to write in front of it.
pub(super) struct Front<'a> {
    pub(super) src: Ipv6Addr,
    pub(super) dst: Ipv6Addr,
    /// The socket's protocol: what follows the header and the extension headers.
    pub(super) proto: IpProtocol,
    pub(super) ecn: u8,
    pub(super) hop_limit: u8,
    /// The extension headers in front of the payload, in order, each with its type.
    pub(super) ext: &'a [(IpProtocol, Vec<u8>)],
}

/// Writes `f`'s IPv6 header and extension headers in front of `packet` (a raw socket's
/// payload) and moves the packet's head onto them; false if the payload length would pass
/// 65,535 (the packet as it was). Where the headroom is too small for them (extension
/// headers longer than about 30 bytes), the packet moves to a buffer of its own.
pub(super) fn ipv6_in_front(packet: &mut Packet, f: &Front<'_>) -> bool {
    let len = packet.data.len() - packet.head;
    let ext_len: usize = f.ext.iter().map(|(_, h)| h.len()).sum();
    let front = ipv6::HEADER_LEN + ext_len;
    if ext_len + len > usize::from(u16::MAX) {
        return false;
    }
    if packet.head < front {
        let mut data = Vec::with_capacity(front + len + TAILROOM);
        data.resize(front, 0);
        data.extend_from_slice(&packet.data[packet.head..]);
        *packet = Packet { data, head: front };
    }
    let head = packet.head - front;
    let repr = ipv6::Repr {
        src_addr: f.src,
        dst_addr: f.dst,
        next_header: f.ext.first().map_or(f.proto, |(kind, _)| *kind),
        payload_len: ext_len + len,
        hop_limit: f.hop_limit,
        dscp: 0,
        ecn: f.ecn & 3,
        flow_label: 0,
    };
    if repr.emit(&mut ipv6::Packet::new_unchecked(&mut packet.data[head..])).is_err() {
        return false;
    }
    let mut at = head + ipv6::HEADER_LEN;
    for (_, h) in f.ext {
        packet.data[at..at + h.len()].copy_from_slice(h);
        at += h.len();
    }
    packet.head = head;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipsec_core::HEADROOM;

    fn addrs() -> (Ipv6Addr, Ipv6Addr) {
        ("fd00:99::1".parse().unwrap(), "fd00:99::2".parse().unwrap())
    }

    /// The header written in front of an IPv6 raw socket's payload parses as what the
    /// socket reported, and the payload is untouched.
    #[test]
    fn an_ipv6_header_in_front_of_a_raw_payload() {
        let (src, dst) = addrs();
        let payload = [0x04, 0x00, 0x10, 0x01, 0xde, 0xad];
        let mut data = vec![0u8; HEADROOM];
        data.extend_from_slice(&payload);
        let mut p = Packet { data, head: HEADROOM };
        let f = Front { src, dst, proto: IpProtocol::IPCOMP, ecn: 3, hop_limit: 64, ext: &[] };
        assert!(ipv6_in_front(&mut p, &f));
        assert_eq!(p.head, HEADROOM - ipv6::HEADER_LEN);
        let h = ipv6::Packet::new_checked(p.bytes()).unwrap();
        let r = ipv6::Repr::parse(&h).unwrap();
        assert_eq!(
            (r.src_addr, r.dst_addr, r.next_header, r.payload_len, r.ecn, r.hop_limit),
            (src, dst, IpProtocol::IPCOMP, 6, 3, 64)
        );
        assert_eq!(&p.bytes()[ipv6::HEADER_LEN..], &payload);
        // No room in front: the packet moves to a buffer of its own, the same bytes.
        let mut q = Packet { data: payload.to_vec(), head: 0 };
        assert!(ipv6_in_front(&mut q, &f));
        assert_eq!(q.bytes(), p.bytes());
        // A payload longer than IPv6's payload length can say: refused, as it was.
        let mut big = Packet { data: vec![0; HEADROOM + 65_536], head: HEADROOM };
        assert!(!ipv6_in_front(&mut big, &f));
        assert_eq!((big.head, big.data.len()), (HEADROOM, HEADROOM + 65_536));
    }

    /// Extension headers go back in the order they came, the IPv6 header naming the first
    /// and counting them in its payload length; longer than the headroom, the packet moves.
    #[test]
    fn extension_headers_go_back_in_front_in_order() {
        let (src, dst) = addrs();
        let ah = [59u8, 4, 0, 0, 0, 0, 0x10, 0x01, 0, 0, 0, 1, 0xaa, 0xbb, 0xcc, 0xdd];
        // Hop-by-Hop (PadN) naming Destination Options, which names AH.
        let hbh = |next: u8| vec![next, 0, 1, 4, 0, 0, 0, 0];
        let mut dst_opts = vec![51u8, 5];
        dst_opts.resize(48, 0);
        let short = vec![(IpProtocol::HOP_BY_HOP, hbh(51))];
        let long = vec![(IpProtocol::HOP_BY_HOP, hbh(60)), (IpProtocol::DEST_OPTS, dst_opts)];
        for (ext, moved) in [(short, false), (long, true)] {
            let mut data = vec![0u8; HEADROOM];
            data.extend_from_slice(&ah);
            let mut p = Packet { data, head: HEADROOM };
            let f = Front { src, dst, proto: IpProtocol::AH, ecn: 2, hop_limit: 7, ext: &ext };
            assert!(ipv6_in_front(&mut p, &f));
            let ext_len: usize = ext.iter().map(|(_, h)| h.len()).sum();
            assert_eq!(HEADROOM.checked_sub(ipv6::HEADER_LEN + ext_len) == Some(p.head), !moved);
            let b = p.bytes();
            let r = ipv6::Repr::parse(&ipv6::Packet::new_checked(b).unwrap()).unwrap();
            assert_eq!(
                (r.next_header, r.payload_len, r.hop_limit),
                (IpProtocol::HOP_BY_HOP, ext_len + 16, 7)
            );
            let mut at = ipv6::HEADER_LEN;
            for (_, h) in &ext {
                assert_eq!(&b[at..at + h.len()], &h[..]);
                at += h.len();
            }
            assert_eq!(&b[at..], &ah);
        }
    }
}
