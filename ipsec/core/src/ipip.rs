//! IP-in-IP (RFC 2003, RFC 2473): tunnel mode's first step. Fast IPsec kept it as its own
//! protocol: the inner packet gets an outer header, and ESP then protects the resulting
//! packet as it would in transport mode; on the way in, ESP's result is decapsulated here.
//!
//! ECN crosses the tunnel as RFC 6040 says (its normal mode, what RFC 4301 §5.1.2.1 and
//! Linux do):
//!
//! ```text
//!   encapsulate: inner DSCP+ECN ──copy──▶ outer        (a CE mark on the path lands in the outer)
//!   decapsulate: outer ECN ─┐
//!                inner ECN ─┴─ decap_ecn (RFC 6040 §4.2's table) ─▶ inner ECN, or drop (ce_not_ect)
//! ```
//!
//! The DSCP is copied out and not back: the outer's DSCP belongs to the path between the
//! gateways, and the inner packet keeps its own (RFC 2983's uniform model is not taken).

use ipsec_wire::{ipv4, ipv6};

use crate::packet::{Packet, HEADROOM};
use crate::stats::Drop;

const PROTO_IPV4: u8 = 4;
const PROTO_IPV6: u8 = 41;

/// Makes room for an outer header of `outer` bytes in front of `inner`, with at least
/// `room` bytes of headroom before it for the next step; moves the packet to a new buffer
/// only if it lacks the headroom. Returns the packet starting where the outer header goes,
/// the inner packet's DSCP and ECN byte, which the outer header copies (RFC 4301
/// §5.1.2.1; RFC 6040's normal mode copies ECN), and the protocol ESP's trailer names
/// (the inner IP version's). The outer header itself is written by the caller once the
/// whole packet's length is known (`outbound::emit_outer`).
pub(crate) fn encapsulate(inner: Packet, outer: usize, room: usize) -> (Packet, u8, u8) {
    let Packet { mut data, mut head } = inner;
    if head < outer + room {
        let front = HEADROOM.max(outer + room);
        let mut v = Vec::with_capacity(front + data.len() - head + crate::packet::TAILROOM);
        v.resize(front, 0);
        v.extend_from_slice(&data[head..]);
        (data, head) = (v, front);
    }
    let tos = traffic_class(&data[head..]);
    let proto = if data[head] >> 4 == 6 { PROTO_IPV6 } else { PROTO_IPV4 };
    (Packet { data, head: head - outer }, tos, proto)
}

/// The inner packet, where ESP left it, cut to the length its IP header gives, its ECN
/// field combined with the outer header's `outer_ecn` ([`decap_ecn`]). Errors:
/// [`Drop::BadInner`] unless it is an IP packet of the version the next-header value
/// `proto` names, whose header fits and claims no more than ESP carried;
/// [`Drop::CeNotEct`] where the outer says CE and the inner cannot carry it.
///
/// What follows the inner packet is traffic flow confidentiality padding, which a sender
/// may add in tunnel mode to hide the packet's length (RFC 4303 §2.4: "This length
/// information will enable the receiver to discard the TFC padding"); Linux sends it with
/// `ip xfrm state … tfcpad N`. It is no part of the packet, so it is not delivered.
pub(crate) fn decapsulate(inner: Packet, proto: u8, outer_ecn: u8) -> Result<Packet, Drop> {
    let b = inner.bytes();
    let (len, ecn) = match (proto, b.first().ok_or(Drop::BadInner)? >> 4) {
        (PROTO_IPV4, 4) if b.len() >= 20 => {
            let p = ipv4::Packet::new_unchecked(b);
            (usize::from(p.total_len()), p.ecn())
        }
        (PROTO_IPV6, 6) if b.len() >= 40 => {
            let p = ipv6::Packet::new_unchecked(b);
            (p.total_len(), p.ecn())
        }
        _ => return Err(Drop::BadInner),
    };
    if len > b.len() {
        return Err(Drop::BadInner);
    }
    let marked = decap_ecn(outer_ecn, ecn).ok_or(Drop::CeNotEct)?;
    let Packet { mut data, head } = inner;
    data.truncate(head + len);
    if marked != ecn {
        if proto == PROTO_IPV4 {
            ipv4::Packet::new_unchecked(&mut data[head..]).set_ecn_updating_checksum(marked);
        } else {
            ipv6::Packet::new_unchecked(&mut data[head..]).set_ecn(marked);
        }
    }
    Ok(Packet { data, head })
}

const NOT_ECT: u8 = 0b00;
const ECT1: u8 = 0b01;
const ECT0: u8 = 0b10;
const CE: u8 = 0b11;

/// RFC 6040 §4.2, Figure 4: the ECN field the inner header leaves the tunnel with, given
/// the arriving outer and inner fields; `None`: drop (outer CE, inner Not-ECT). The table's
/// combinations that no compliant tunnel produces ("(!!!)": Not-ECT under ECT, CE under
/// ECT(1)) are forwarded as the table says; RFC 6040's "SHOULD log" is left to the
/// counters, as a per-packet log line is what a flood of them would turn into.
///
/// ```text
///                  outer:  Not-ECT  ECT(0)   ECT(1)   CE
///   inner Not-ECT          Not-ECT  Not-ECT  Not-ECT  drop
///         ECT(0)           ECT(0)   ECT(0)   ECT(1)   CE
///         ECT(1)           ECT(1)   ECT(1)   ECT(1)   CE
///         CE               CE       CE       CE       CE
/// ```
#[inline]
pub(crate) fn decap_ecn(outer: u8, inner: u8) -> Option<u8> {
    match (outer & CE, inner & CE) {
        (CE, NOT_ECT) => None,
        (CE, _) => Some(CE),
        (ECT1, ECT0) => Some(ECT1),
        (_, inner) => Some(inner),
    }
}

/// The ECN field of the IPv4 or IPv6 header that `b` starts with (the outer header ESP
/// arrived in, already parsed: it is whole).
#[inline]
pub(crate) fn ecn(b: &[u8]) -> u8 {
    traffic_class(b) & CE
}

/// The DSCP and ECN byte of an IPv4 or IPv6 header.
fn traffic_class(b: &[u8]) -> u8 {
    match b.first().map(|v| v >> 4) {
        Some(4) if b.len() >= 20 => {
            let p = ipv4::Packet::new_unchecked(b);
            p.dscp() << 2 | p.ecn()
        }
        Some(6) if b.len() >= 40 => ipv6::Packet::new_unchecked(b).traffic_class(),
        _ => 0,
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
                assert_eq!(decapsulate(packet(&b), proto, 0).unwrap().bytes(), &p[..], "pad {pad}");
            }
            // A header claiming a byte more than there is; a header cut short.
            assert_eq!(decapsulate(packet(&p[..p.len() - 1]), proto, 0).err(), Some(Drop::BadInner));
            let hdr = if proto == PROTO_IPV4 { 20 } else { 40 };
            assert_eq!(decapsulate(packet(&p[..hdr - 1]), proto, 0).err(), Some(Drop::BadInner));
        }
        // The next header names the other version; nothing at all.
        assert_eq!(decapsulate(packet(&v4), PROTO_IPV6, 0).err(), Some(Drop::BadInner));
        assert_eq!(decapsulate(packet(&v6), PROTO_IPV4, 0).err(), Some(Drop::BadInner));
        assert_eq!(decapsulate(packet(&[]), PROTO_IPV4, 0).err(), Some(Drop::BadInner));
    }

    /// RFC 6040 §4.2, Figure 4, row by row: (inner, [outer Not-ECT, ECT(0), ECT(1), CE]).
    const FIGURE_4: [(u8, [Option<u8>; 4]); 4] = [
        (NOT_ECT, [Some(NOT_ECT), Some(NOT_ECT), Some(NOT_ECT), None]),
        (ECT0, [Some(ECT0), Some(ECT0), Some(ECT1), Some(CE)]),
        (ECT1, [Some(ECT1), Some(ECT1), Some(ECT1), Some(CE)]),
        (CE, [Some(CE), Some(CE), Some(CE), Some(CE)]),
    ];
    const OUTERS: [u8; 4] = [NOT_ECT, ECT0, ECT1, CE];

    /// An IPv4 (DSCP 46, valid checksum) or IPv6 (DSCP 46, flow label 0x12345) packet of
    /// 8 payload bytes with the ECN field `ecn`, and its next-header value.
    fn inner(v6: bool, ecn: u8) -> (Vec<u8>, u8) {
        if v6 {
            let mut b = vec![0u8; 48];
            let mut p = ipv6::Packet::new_unchecked(&mut b[..]);
            p.set_version(6);
            p.set_traffic_class(46 << 2 | ecn);
            p.set_flow_label(0x12345);
            p.set_payload_len(8);
            (b, PROTO_IPV6)
        } else {
            let mut b = vec![0u8; 28];
            let mut p = ipv4::Packet::new_unchecked(&mut b[..]);
            p.set_version(4);
            p.set_header_len(20);
            p.set_dscp(46);
            p.set_ecn(ecn);
            p.set_total_len(28);
            p.set_ttl(64);
            p.fill_checksum();
            (b, PROTO_IPV4)
        }
    }

    #[test]
    fn decapsulation_follows_rfc6040_figure_4_for_ipv4_and_ipv6_inner() {
        for v6 in [false, true] {
            for (from, row) in FIGURE_4 {
                for (outer, want) in OUTERS.into_iter().zip(row) {
                    let case = format!("v6 {v6}, inner {from:#04b}, outer {outer:#04b}");
                    assert_eq!(decap_ecn(outer, from), want, "{case}");
                    let (b, proto) = inner(v6, from);
                    let got = decapsulate(packet(&b), proto, outer);
                    let Some(want) = want else {
                        assert_eq!(got.err(), Some(Drop::CeNotEct), "{case}");
                        continue;
                    };
                    let got = got.unwrap();
                    // Only the ECN field changed: what the inner header says with the
                    // expected ECN field, checksum recomputed from scratch.
                    let (expect, _) = inner(v6, want);
                    assert_eq!(got.bytes(), &expect[..], "{case}");
                    if !v6 {
                        assert!(ipv4::Packet::new_unchecked(got.bytes()).verify_checksum(), "{case}");
                    }
                }
            }
        }
    }

    #[test]
    fn encapsulation_takes_dscp_and_ecn_out_and_leaves_room() {
        for v6 in [false, true] {
            for outer in [20, 40] {
                for ecn in OUTERS {
                    let (b, proto) = inner(v6, ecn);
                    // From a buffer with no headroom: moved once, with the room asked for.
                    let (out, tos, next) = encapsulate(packet(&b), outer, 24);
                    assert_eq!((tos, next), (46 << 2 | ecn, proto), "v6 {v6}, outer {outer}, ecn {ecn}");
                    assert!(out.head >= 24);
                    assert_eq!(&out.bytes()[outer..], &b[..]);
                }
            }
        }
    }

    #[test]
    fn outer_ecn_is_read_from_either_family() {
        for v6 in [false, true] {
            for e in OUTERS {
                assert_eq!(ecn(&inner(v6, e).0), e);
            }
        }
        assert_eq!(ecn(&[0x45]), 0, "a header cut short");
    }
}
