//! Hand-built headers: the view, its meaning, what emit writes.

use super::*;

/// AH with a 12-byte ICV (HMAC-SHA1-96): Payload Len = 24 / 4 - 2 = 4; next header TCP,
/// SPI 0x1001, sequence number 7, ICV 0xab × 12.
pub(crate) fn sha1_ah() -> Vec<u8> {
    let mut bytes = vec![6, 4, 0, 0, 0, 0, 0x10, 0x01, 0, 0, 0, 7];
    bytes.extend([0xab; 12]);
    bytes
}

#[test]
fn header_view() {
    let mut bytes = sha1_ah();
    bytes.extend([1, 2, 3]);
    let h = Packet::new_checked(&bytes[..]).expect("valid");
    assert_eq!(h.next_header(), IpProtocol::TCP);
    assert_eq!(h.payload_len_field(), 4);
    assert_eq!(h.header_len(), 24);
    assert_eq!(h.reserved(), 0);
    assert_eq!(h.spi(), 0x1001);
    assert_eq!(h.sequence_number(), 7);
    assert_eq!(h.icv(), &[0xab; 12]);
    assert_eq!(h.payload(), &[1, 2, 3]);
    assert_eq!(
        Repr::parse(&h),
        Ok(Repr { next_header: IpProtocol::TCP, spi: 0x1001, sequence_number: 7, icv_field_len: 12 })
    );
    assert_eq!(Packet::new_checked(&bytes[..1]), Err(Error::Truncated { needed: 2, got: 1 }));
    assert_eq!(Packet::new_checked(&bytes[..23]), Err(Error::Truncated { needed: 24, got: 23 }));
    bytes[1] = 0;
    assert_eq!(Packet::new_checked(&bytes[..]), Err(Error::BadAhLen(0)));
    // Payload Len 1: the fixed part only, no ICV (well formed, though AH has no NULL
    // integrity).
    bytes[1] = 1;
    let h = Packet::new_checked(&bytes[..]).expect("valid");
    assert!(h.icv().is_empty());
    assert_eq!(h.into_inner().len(), 27);
    let zero_spi = [6, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    assert_eq!(Repr::parse(&Packet::new_unchecked(&zero_spi[..])), Err(Error::ReservedSpi));
}

#[test]
fn icv_field_lengths_are_padded_per_family() {
    // (IV, ICV) -> (IPv4 field, IPv6 field): HMAC-SHA1-96, SHA2-256-128, SHA2-384-192,
    // SHA2-512-256, AES-GMAC (8-byte IV, 16-byte tag).
    for ((iv, icv), (v4, v6)) in [
        ((0, 12), (12, 12)),
        ((0, 16), (16, 20)),
        ((0, 24), (24, 28)),
        ((0, 32), (32, 36)),
        ((8, 16), (24, 28)),
    ] {
        assert_eq!(Repr::icv_field_len(iv, icv, false), v4, "{iv}+{icv} over IPv4");
        assert_eq!(Repr::icv_field_len(iv, icv, true), v6, "{iv}+{icv} over IPv6");
        assert_eq!((FIXED_LEN + v6) % 8, 0);
    }
}

#[test]
fn emit_writes_a_header_with_zero_icv() {
    let repr = Repr { next_header: IpProtocol::IPV4, spi: 0x4321, sequence_number: 9, icv_field_len: 20 };
    assert_eq!(repr.buffer_len(), 32);
    let mut out = [0xffu8; 34];
    repr.emit(&mut Packet::new_unchecked(&mut out[..])).expect("fits");
    assert_eq!(out[..12], [4, 6, 0, 0, 0, 0, 0x43, 0x21, 0, 0, 0, 9]);
    assert_eq!(out[12..32], [0; 20]);
    assert_eq!(out[32..], [0xff, 0xff], "nothing after the header is written");
    assert_eq!(Repr::parse(&Packet::new_checked(&out[..]).expect("valid")), Ok(repr));
    let mut small = [0u8; 31];
    assert_eq!(
        repr.emit(&mut Packet::new_unchecked(&mut small[..])),
        Err(Error::Truncated { needed: 32, got: 31 })
    );
    let odd = Repr { icv_field_len: 13, ..repr };
    assert!(matches!(odd.emit(&mut Packet::new_unchecked(&mut out[..])), Err(Error::TooLong { .. })));
}
