//! IP-in-IP (RFC 2003, RFC 2473): tunnel mode's first step. Fast IPsec kept it as its own
//! protocol: the inner packet gets an outer header, and ESP then protects the resulting
//! packet as it would in transport mode; on the way in, ESP's result is decapsulated here.

use std::net::IpAddr;

use crate::datapath::{Packet, Split, HEADROOM};

const PROTO_IPV4: u8 = 4;
const PROTO_IPV6: u8 = 41;

/// Puts an outer header from `src` to `dst` in front of `inner`, leaving at least `room`
/// bytes of headroom before it for the next step. The inner packet's DSCP and ECN are
/// copied out (RFC 4301 §5.1.2.1; RFC 6040's normal mode copies ECN). Moves the packet to
/// a new buffer only if it lacks the headroom. Also returns what of the result stays in
/// front of ESP (the outer header) and the protocol ESP's trailer names (the inner IP
/// version's).
///
/// `id` is the outer IPv4 header's identification. DF is set, so the datagram is atomic
/// and the field only has to vary (RFC 6864 §4.1): the caller passes the low bits of the
/// SA's sequence number, which costs nothing, where a shared counter would be an atomic
/// that every core's packets contend for.
pub(crate) fn encapsulate(inner: Packet, src: IpAddr, dst: IpAddr, room: usize, id: u16) -> (Packet, Split) {
    let outer = if dst.is_ipv6() { 40 } else { 20 };
    let Packet { mut data, mut head } = inner;
    if head < outer + room {
        let front = HEADROOM.max(outer + room);
        let mut v = Vec::with_capacity(front + data.len() - head + crate::datapath::TAILROOM);
        v.resize(front, 0);
        v.extend_from_slice(&data[head..]);
        (data, head) = (v, front);
    }
    let tos = traffic_class(&data[head..]);
    let proto = if data[head] >> 4 == 6 { PROTO_IPV6 } else { PROTO_IPV4 };
    let total = data.len() - head + outer;
    head -= outer;
    write_outer(&mut data[head..head + outer], src, dst, total, proto, tos, id);
    let field = if dst.is_ipv6() { 6 } else { 9 };
    (Packet { data, head }, Split { keep: outer, next: proto, field })
}

/// The inner packet, where ESP left it, cut to the length its IP header gives: `None`
/// unless it is an IP packet of the version the next-header value `proto` names, whose
/// header fits and claims no more than ESP carried.
///
/// What follows the inner packet is traffic flow confidentiality padding, which a sender
/// may add in tunnel mode to hide the packet's length (RFC 4303 §2.4: "This length
/// information will enable the receiver to discard the TFC padding"); Linux sends it with
/// `ip xfrm state … tfcpad N`. It is no part of the packet, so it is not delivered.
pub(crate) fn decapsulate(inner: Packet, proto: u8) -> Option<Packet> {
    let b = inner.bytes();
    let len = match (proto, b.first()? >> 4) {
        (PROTO_IPV4, 4) if b.len() >= 20 => usize::from(u16::from_be_bytes([b[2], b[3]])),
        (PROTO_IPV6, 6) if b.len() >= 40 => 40 + usize::from(u16::from_be_bytes([b[4], b[5]])),
        _ => return None,
    };
    if len > b.len() {
        return None;
    }
    let Packet { mut data, head } = inner;
    data.truncate(head + len);
    Some(Packet { data, head })
}

/// The DSCP and ECN byte of an IPv4 or IPv6 header.
fn traffic_class(b: &[u8]) -> u8 {
    match (b.first(), b.get(1)) {
        (Some(v), Some(&tos)) if v >> 4 == 4 => tos,
        (Some(v), Some(w)) => (v & 0x0f) << 4 | w >> 4,
        _ => 0,
    }
}

/// Writes an outer IPv4 (DF set, TTL 64) or IPv6 (hop limit 64) header of `total` bytes.
fn write_outer(b: &mut [u8], src: IpAddr, dst: IpAddr, total: usize, proto: u8, tos: u8, id: u16) {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            b[0] = 0x45;
            b[1] = tos;
            b[2..4].copy_from_slice(&(total as u16).to_be_bytes());
            b[4..6].copy_from_slice(&id.to_be_bytes());
            b[6..8].copy_from_slice(&[0x40, 0]);
            b[8] = 64;
            b[9] = proto;
            b[10..12].copy_from_slice(&[0, 0]);
            b[12..16].copy_from_slice(&s.octets());
            b[16..20].copy_from_slice(&d.octets());
            // The checksum is filled in once the next step has set protocol and length.
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            b[0] = 0x60 | tos >> 4;
            b[1] = tos << 4;
            b[2..4].copy_from_slice(&[0, 0]);
            b[4..6].copy_from_slice(&((total - 40) as u16).to_be_bytes());
            b[6] = proto;
            b[7] = 64;
            b[8..24].copy_from_slice(&s.octets());
            b[24..40].copy_from_slice(&d.octets());
        }
        // An SA's endpoints are of one family (setkey and the SAD give them so).
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(b: &[u8]) -> Packet {
        Packet { data: [&[0u8; 8][..], b].concat(), head: 8 }
    }

    #[test]
    fn decapsulate_cuts_tfc_padding_and_refuses_short_or_mislabelled_packets() {
        let mut v4 = vec![0u8; 28];
        v4[0] = 0x45;
        v4[3] = 28;
        let mut v6 = vec![0u8; 48];
        v6[0] = 0x60;
        v6[5] = 8;
        for (p, proto) in [(&v4, PROTO_IPV4), (&v6, PROTO_IPV6)] {
            // Exactly the packet, and the packet followed by TFC padding: the packet.
            for pad in [0, 1, 100] {
                let mut b = p.clone();
                b.resize(p.len() + pad, 0xAA);
                assert_eq!(decapsulate(packet(&b), proto).unwrap().bytes(), &p[..], "pad {pad}");
            }
            // A header claiming a byte more than there is; a header cut short.
            assert!(decapsulate(packet(&p[..p.len() - 1]), proto).is_none());
            let hdr = if proto == PROTO_IPV4 { 20 } else { 40 };
            assert!(decapsulate(packet(&p[..hdr - 1]), proto).is_none());
        }
        // The next header names the other version; nothing at all.
        assert!(decapsulate(packet(&v4), PROTO_IPV6).is_none());
        assert!(decapsulate(packet(&v6), PROTO_IPV4).is_none());
        assert!(decapsulate(packet(&[]), PROTO_IPV4).is_none());
    }
}
