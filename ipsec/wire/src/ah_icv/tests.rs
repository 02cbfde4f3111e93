//! Hand-built packets: what the ICV's input zeroes, byte for byte.

use super::*;
use crate::ah::tests::sha1_ah;

/// IPv4 with options, AH (HMAC-SHA1-96) and 4 bytes of TCP: TOS 0xb8 (EF, Not-ECT), DF,
/// TTL 17, a made-up checksum; options NOP, Record Route (7 bytes), Router Alert, End of
/// List and padding.
fn ipv4_with_options() -> Vec<u8> {
    let mut p =
        vec![0x49, 0xb8, 0, 0, 0x12, 0x34, 0x40, 0x00, 17, 51, 0xbe, 0xef, 192, 0, 2, 1, 198, 51, 100, 2];
    p.extend([1, 7, 7, 4, 10, 0, 0, 1, 148, 4, 0, 0, 0, 0, 0, 0]);
    p.extend(sha1_ah());
    p.extend([0xde, 0xad, 0xbe, 0xef]);
    let len = p.len() as u16;
    p[2..4].copy_from_slice(&len.to_be_bytes());
    p
}

#[test]
fn ipv4_mutable_fields_and_options_are_zeroed() {
    let original = ipv4_with_options();
    let mut p = original.clone();
    let loc = zero_mutable(&mut p, 0, 12, Side::Receiving).expect("valid");
    assert_eq!(
        loc,
        Location { offset: 36, header_len: 24, next_header_field: 9, next_header: IpProtocol::TCP }
    );
    let mut expected = original.clone();
    expected[1] = 0; // TOS
    expected[6..8].fill(0); // DF
    expected[8] = 0; // TTL
    expected[10..12].fill(0); // checksum
    expected[21..28].fill(0); // Record Route, whole
    expected[48..60].fill(0); // the ICV
    assert_eq!(p, expected);
    // NOP, Router Alert, End of List: as they were.
    assert_eq!(p[20], 1);
    assert_eq!(p[28..32], [148, 4, 0, 0]);
    // Sending is the same for IPv4.
    let mut q = original.clone();
    zero_mutable(&mut q, 0, 12, Side::Sending).expect("valid");
    assert_eq!(q, expected);
}

#[test]
fn ipv4_security_options_stay_and_others_go() {
    // Every option number Appendix A keeps (with the copy bit and class as sent), and one
    // that goes (Timestamp, 68), each 4 bytes.
    for (kind, kept) in
        [(130, true), (133, true), (134, true), (148, true), (149, true), (68, false), (131, false)]
    {
        let mut p = vec![0x46, 0, 0, 0, 0, 0, 0, 0, 64, 51, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        p.extend([kind, 4, 0xaa, 0xbb]);
        p.extend(sha1_ah());
        let len = p.len() as u16;
        p[2..4].copy_from_slice(&len.to_be_bytes());
        zero_mutable(&mut p, 0, 12, Side::Receiving).expect("valid");
        let want = if kept { [kind, 4, 0xaa, 0xbb] } else { [0; 4] };
        assert_eq!(p[20..24], want, "option {kind}");
    }
}

#[test]
fn ipv4_errors() {
    let good = ipv4_with_options();
    // Record Route's length 1, then one running past the header.
    for (len, at) in [(1u8, 21), (20, 21)] {
        let mut p = good.clone();
        p[22] = len;
        assert_eq!(zero_mutable(&mut p, 0, 12, Side::Receiving), Err(Error::BadOption { offset: at }));
    }
    // An option type in the header's last byte, without its length.
    let mut p = good.clone();
    p[24..36].copy_from_slice(&[1; 12]);
    p[35] = 7;
    assert_eq!(zero_mutable(&mut p, 0, 12, Side::Receiving), Err(Error::BadOption { offset: 35 }));
    let mut p = good.clone();
    p[9] = 50;
    assert_eq!(zero_mutable(&mut p, 0, 12, Side::Receiving), Err(Error::NotAh(50)));
    // An ICV longer than the AH holds (HMAC-SHA2-256's 16 bytes in a 12-byte field).
    let mut p = good.clone();
    assert_eq!(zero_mutable(&mut p, 0, 16, Side::Receiving), Err(Error::BadAhLen(4)));
    let mut p = good.clone();
    assert_eq!(zero_mutable(&mut p, 8, 12, Side::Receiving), Err(Error::BadAhLen(4)));
    // The total length ends inside AH.
    let mut p = good.clone();
    p[2..4].copy_from_slice(&50u16.to_be_bytes());
    assert_eq!(zero_mutable(&mut p, 0, 12, Side::Receiving), Err(Error::Truncated { needed: 60, got: 50 }));
    let mut p = good.clone();
    p[0] = 0x55;
    assert_eq!(zero_mutable(&mut p, 0, 12, Side::Receiving), Err(Error::BadVersion(5)));
    assert_eq!(zero_mutable(&mut [], 0, 12, Side::Receiving), Err(Error::Truncated { needed: 1, got: 0 }));
}

const V6_SRC: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6_DST: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
const HOP1: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11];
const FINAL: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99];

/// IPv6 (traffic class 0xb8, flow label 0x12345, hop limit 9) from V6_SRC to V6_DST, then
/// Hop-by-Hop (an option 0x3e with the change bit and 4 data bytes, one 0x05 without it,
/// and padding), Destination Options (an option 0x1e without the change bit and Pad1s),
/// a type 0 Routing header with two addresses left (HOP1, FINAL), AH with HMAC-SHA2-256
/// (16-byte ICV, 4 bytes of padding: 32 bytes), and 4 bytes of UDP.
fn ipv6_with_headers() -> Vec<u8> {
    let mut p = vec![0x6b, 0x81, 0x23, 0x45, 0, 0, 0, 9];
    p.extend(V6_SRC);
    p.extend(V6_DST);
    // Hop-by-Hop, 16 bytes: next = Destination Options.
    p.extend([60, 1, 0x3e, 4, 0xa1, 0xa2, 0xa3, 0xa4, 0x05, 2, 0xc1, 0xc2, 1, 0, 0, 0]);
    // Destination Options, 8 bytes: next = Routing.
    p.extend([43, 0, 0x1e, 2, 0xd1, 0xd2, 0, 0]);
    // Routing type 0, two addresses, segments left 2: next = AH.
    p.extend([51, 4, 0, 2, 0, 0, 0, 0]);
    p.extend(HOP1);
    p.extend(FINAL);
    // AH: next UDP, Payload Len 32 / 4 - 2 = 6, SPI 0x2002, seq 5, ICV 16 × 0xab, padding.
    p.extend([17, 6, 0, 0, 0, 0, 0x20, 0x02, 0, 0, 0, 5]);
    p.extend([0xab; 16]);
    p.extend([0; 4]);
    p.extend([0xde, 0xad, 0xbe, 0xef]);
    let plen = (p.len() - 40) as u16;
    p[4..6].copy_from_slice(&plen.to_be_bytes());
    p
}

#[test]
fn ipv6_receiving_zeroes_fields_and_changing_options() {
    let original = ipv6_with_headers();
    let mut p = original.clone();
    let loc = zero_mutable(&mut p, 0, 16, Side::Receiving).expect("valid");
    assert_eq!(
        loc,
        Location { offset: 104, header_len: 32, next_header_field: 64, next_header: IpProtocol::UDP }
    );
    let mut expected = original.clone();
    expected[0] = 0x60;
    expected[1..4].fill(0);
    expected[7] = 0;
    expected[44..48].fill(0); // 0x3e's data
    expected[116..132].fill(0); // the ICV, not its padding
    assert_eq!(p, expected);
}

#[test]
fn ipv6_sending_puts_the_routing_header_as_it_will_arrive() {
    let original = ipv6_with_headers();
    let mut p = original.clone();
    zero_mutable(&mut p, 0, 16, Side::Sending).expect("valid");
    assert_eq!(p[24..40], FINAL, "the final destination in the header");
    assert_eq!(p[67], 0, "no segments left");
    assert_eq!(p[72..88], V6_DST, "the first destination first");
    assert_eq!(p[88..104], HOP1);
    // And a receiver of the packet as it arrives computes the same input.
    let mut arrived = original.clone();
    arrived[24..40].copy_from_slice(&FINAL);
    arrived[67] = 0;
    arrived[72..88].copy_from_slice(&V6_DST);
    arrived[88..104].copy_from_slice(&HOP1);
    arrived[7] = 3; // fewer hops left
    arrived[1] = 0x81 | 0x01; // ECN marked on the way
    zero_mutable(&mut arrived, 0, 16, Side::Receiving).expect("valid");
    assert_eq!(arrived, p);
}

#[test]
fn ipv6_errors() {
    let good = ipv6_with_headers();
    // A routing type whose data is no address list, with segments left.
    let mut p = good.clone();
    p[66] = 4;
    assert_eq!(zero_mutable(&mut p, 0, 16, Side::Sending), Err(Error::UnsupportedRouting(4)));
    assert!(zero_mutable(&mut good.clone(), 0, 16, Side::Receiving).is_ok());
    // An option running past its header.
    let mut p = good.clone();
    p[43] = 40;
    assert_eq!(zero_mutable(&mut p, 0, 16, Side::Receiving), Err(Error::BadOption { offset: 42 }));
    // No AH: the chain ends at UDP.
    let mut p = good.clone();
    p[64] = 17;
    assert_eq!(zero_mutable(&mut p, 0, 16, Side::Receiving), Err(Error::NotAh(17)));
    // Hop-by-Hop not first.
    let mut p = good.clone();
    p[40] = 0;
    assert_eq!(zero_mutable(&mut p, 0, 16, Side::Receiving), Err(Error::MisplacedHopByHop));
    // AH of 28 bytes over IPv6 (not a multiple of 8).
    let mut p = good.clone();
    p[105] = 5;
    assert_eq!(zero_mutable(&mut p, 0, 16, Side::Receiving), Err(Error::BadAhLen(5)));
    // The payload length ends inside the Routing header.
    let mut p = good.clone();
    p[4..6].copy_from_slice(&40u16.to_be_bytes());
    assert_eq!(zero_mutable(&mut p, 0, 16, Side::Receiving), Err(Error::Truncated { needed: 104, got: 80 }));
}

#[test]
fn every_prefix_and_every_byte_flip_is_total() {
    for original in [ipv4_with_options(), ipv6_with_headers()] {
        for len in 0..original.len() {
            let mut p = original[..len].to_vec();
            let _ = zero_mutable(&mut p, 0, 16, Side::Sending);
        }
        for at in 0..original.len() {
            for v in [0u8, 1, 0x20, 0x3f, 0xff] {
                let mut p = original.clone();
                p[at] = v;
                for side in [Side::Sending, Side::Receiving] {
                    let _ = zero_mutable(&mut p.clone(), 8, 16, side);
                }
            }
        }
    }
}
