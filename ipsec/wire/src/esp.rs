//! ESP (RFC 4303): a checked view of the header (SPI, sequence number) and what follows it,
//! its meaning ([`Repr`]), and the trailer that ends the encrypted part ([`Trailer`]).
//!
//! The view knows nothing of IVs or ICVs: their lengths belong to the SA's algorithms, so
//! [`Packet::payload`] is everything after the 8-byte header. The trailer is parsed after
//! decryption and written before encryption.

use crate::bytes::{be32, set_be32};
use crate::error::{need, Error, Result};
use crate::ip::IpProtocol;

/// The length of the ESP header: SPI and sequence number.
pub const HEADER_LEN: usize = 8;

/// Byte offsets of the header fields (RFC 4303 §2).
mod field {
    pub const SPI: usize = 0;
    pub const SEQUENCE_NUMBER: usize = 4;
}

/// A view of an ESP packet (header and what follows) in a byte buffer.
///
/// Getters on a view made with [`new_unchecked`](Packet::new_unchecked) may panic if the
/// buffer is shorter than 8 bytes; [`new_checked`](Packet::new_checked) rules that out.
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

    /// Checks that the buffer holds the 8-byte header.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(self.buffer.as_ref(), HEADER_LEN)
    }

    /// Gives back the buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The Security Parameters Index.
    #[inline]
    pub fn spi(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SPI)
    }

    /// The sequence number (its low 32 bits when the SA uses extended sequence numbers).
    #[inline]
    pub fn sequence_number(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEQUENCE_NUMBER)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Everything after the header: IV (if any), ciphertext, ICV (if any).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the SPI.
    #[inline]
    pub fn set_spi(&mut self, spi: u32) {
        set_be32(self.buffer.as_mut(), field::SPI, spi);
    }

    /// Sets the sequence number.
    #[inline]
    pub fn set_sequence_number(&mut self, seq: u32) {
        set_be32(self.buffer.as_mut(), field::SEQUENCE_NUMBER, seq);
    }

    /// Everything after the header, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The meaning of an ESP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The Security Parameters Index (never 0).
    pub spi: u32,
    /// The sequence number (low 32 bits with ESN).
    pub sequence_number: u32,
}

impl Repr {
    /// Parses an ESP header; SPI 0 is reserved and never sent (RFC 4303 §2.1), so it is
    /// [`Error::ReservedSpi`].
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        let spi = packet.spi();
        if spi == 0 {
            return Err(Error::ReservedSpi);
        }
        Ok(Repr { spi, sequence_number: packet.sequence_number() })
    }

    /// The length of the header.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The length [`emit`](Repr::emit) writes: the header only (the rest depends on the
    /// algorithms and the trailer).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        packet.check_len()?;
        packet.set_spi(self.spi);
        packet.set_sequence_number(self.sequence_number);
        Ok(())
    }
}

/// The ESP trailer: Padding, Pad Length, Next Header, at the end of the encrypted part
/// (RFC 4303 §2.4–2.6). The ICV, if any, comes after it and is not part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Trailer {
    /// The bytes before the padding: the protected payload (with any TFC padding).
    pub payload_len: usize,
    /// The number of padding bytes.
    pub pad_len: u8,
    /// The protocol of the payload: IPv4 or IPv6 in tunnel mode, the upper layer in
    /// transport mode, No Next Header for a dummy packet.
    pub next_header: IpProtocol,
}

impl Trailer {
    /// Pad Length and Next Header.
    pub const FIXED_LEN: usize = 2;
    /// ESP aligns the end of the trailer to 4 bytes whatever the cipher (RFC 4303 §2.4).
    pub const MIN_ALIGNMENT: usize = 4;
    /// The largest block size whose alignment at most 255 padding bytes always reach.
    pub const MAX_BLOCK_SIZE: usize = 256;

    /// Parses the trailer at the end of `decrypted` (payload ‖ padding ‖ pad length ‖ next
    /// header, ICV already removed), checking that the padding is 1, 2, 3, … as RFC 4303
    /// §2.4 prescribes by default.
    ///
    /// Errors: [`Error::Truncated`] under 2 bytes, [`Error::PadTooLong`] when the pad length
    /// reaches before the start of `decrypted`, [`Error::BadPadding`].
    #[inline]
    pub fn parse(decrypted: &[u8]) -> Result<Trailer> {
        let [rest @ .., pad_len, next_header] = decrypted else {
            return Err(Error::Truncated { needed: Trailer::FIXED_LEN, got: decrypted.len() });
        };
        let payload_len = rest.len().checked_sub(usize::from(*pad_len)).ok_or(Error::PadTooLong)?;
        let padding = &rest[payload_len..];
        // Padding byte i (from 0) is i + 1. At most 255 of them: an inclusive range (a
        // `1u8..` range would overflow computing the value after 255).
        if !padding.iter().zip(1..=u8::MAX).all(|(&b, expected)| b == expected) {
            return Err(Error::BadPadding);
        }
        Ok(Trailer { payload_len, pad_len: *pad_len, next_header: IpProtocol(*next_header) })
    }

    /// The trailer for a payload of `payload_len` bytes encrypted with a cipher of
    /// `block_size` bytes (1 or 0 for stream and counter modes): the fewest padding bytes that
    /// make payload, padding and the 2 fixed bytes a multiple of max(`block_size`, 4).
    ///
    /// Errors: [`Error::BadBlockSize`] above [`Trailer::MAX_BLOCK_SIZE`];
    /// [`Error::TooLong`] if the padded length does not fit a `usize`.
    #[inline]
    pub fn for_payload(payload_len: usize, block_size: usize, next_header: IpProtocol) -> Result<Trailer> {
        if block_size > Trailer::MAX_BLOCK_SIZE {
            return Err(Error::BadBlockSize(block_size));
        }
        let align = block_size.max(Trailer::MIN_ALIGNMENT);
        // Reduced first so that nothing overflows for any payload_len.
        let used = (payload_len % align + Trailer::FIXED_LEN) % align;
        let pad = (align - used) % align;
        let trailer = Trailer {
            payload_len,
            // pad < align <= 256.
            pad_len: pad as u8,
            next_header,
        };
        match payload_len.checked_add(trailer.trailer_len()) {
            Some(_) => Ok(trailer),
            None => Err(Error::TooLong { max: usize::MAX, got: payload_len }),
        }
    }

    /// Padding, Pad Length and Next Header: the bytes [`emit`](Trailer::emit) writes.
    #[inline]
    pub fn trailer_len(&self) -> usize {
        usize::from(self.pad_len) + Trailer::FIXED_LEN
    }

    /// Payload and trailer: the length of the encrypted part (before any ICV). Saturates on
    /// a hand-made trailer whose sum would not fit (which `for_payload` and `parse` never
    /// give).
    #[inline]
    pub fn total_len(&self) -> usize {
        self.payload_len.saturating_add(self.trailer_len())
    }

    /// Whether this is a dummy packet to be dropped (Next Header 59, RFC 4303 §2.6).
    #[inline]
    pub fn is_dummy(&self) -> bool {
        self.next_header == IpProtocol::NO_NEXT_HEADER
    }

    /// Writes padding 1, 2, 3, …, Pad Length and Next Header into the first
    /// [`trailer_len`](Trailer::trailer_len) bytes of `out` (the bytes right after the
    /// payload).
    #[inline]
    pub fn emit(&self, out: &mut [u8]) -> Result<()> {
        let len = self.trailer_len();
        let Some(out) = out.get_mut(..len) else {
            return Err(Error::Truncated { needed: len, got: out.len() });
        };
        let (padding, fixed) = out.split_at_mut(usize::from(self.pad_len));
        for (b, value) in padding.iter_mut().zip(1..=u8::MAX) {
            *b = value;
        }
        fixed.copy_from_slice(&[self.pad_len, self.next_header.0]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ESP header of the AES-128-GCM test case with SPI 0x00004321 and sequence number
    /// 0x87654321 in draft-mcgrew-gcm-test-01 §4 (its AAD is exactly this header).
    const GCM_TEST_ESP_HEADER: [u8; 8] = [0x00, 0x00, 0x43, 0x21, 0x87, 0x65, 0x43, 0x21];

    /// The plaintext of the same test case: an IPv4/UDP packet (a DNS query), then padding
    /// 01 02, Pad Length 2, Next Header 1. (The draft's inner packet claims to be 72 bytes
    /// itself; only the trailer matters here.)
    const GCM_TEST_PLAINTEXT: [u8; 72] = [
        0x45, 0x00, 0x00, 0x48, 0x69, 0x9a, 0x00, 0x00, 0x80, 0x11, 0x4d, 0xb7, 0xc0, 0xa8, 0x01,
        0x02, //
        0xc0, 0xa8, 0x01, 0x01, 0x0a, 0x9b, 0xf1, 0x56, 0x38, 0xd3, 0x01, 0x00, 0x00, 0x01, 0x00,
        0x00, //
        0x00, 0x00, 0x00, 0x00, 0x04, 0x5f, 0x73, 0x69, 0x70, 0x04, 0x5f, 0x75, 0x64, 0x70, 0x03,
        0x73, //
        0x69, 0x70, 0x09, 0x63, 0x79, 0x62, 0x65, 0x72, 0x63, 0x69, 0x74, 0x79, 0x02, 0x64, 0x6b,
        0x00, //
        0x00, 0x21, 0x00, 0x01, 0x01, 0x02, 0x02, 0x01,
    ];

    #[test]
    fn header_view() {
        let mut bytes = GCM_TEST_ESP_HEADER.to_vec();
        bytes.extend([0xfe, 0xcf, 0x53, 0x7e]);
        let p = Packet::new_checked(&bytes[..]).expect("valid");
        assert_eq!(p.spi(), 0x4321);
        assert_eq!(p.sequence_number(), 0x8765_4321);
        assert_eq!(p.payload(), &[0xfe, 0xcf, 0x53, 0x7e]);
        assert_eq!(Repr::parse(&p), Ok(Repr { spi: 0x4321, sequence_number: 0x8765_4321 }));
        let header_only = Packet::new_checked(&GCM_TEST_ESP_HEADER[..]).expect("valid");
        assert!(header_only.payload().is_empty());
    }

    #[test]
    fn header_errors() {
        for len in 0..HEADER_LEN {
            let p = Packet::new_unchecked(&GCM_TEST_ESP_HEADER[..len]);
            assert_eq!(Repr::parse(&p), Err(Error::Truncated { needed: 8, got: len }));
            assert_eq!(
                Packet::new_checked(&GCM_TEST_ESP_HEADER[..len]),
                Err(Error::Truncated { needed: 8, got: len })
            );
        }
        let zero_spi = [0, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(Repr::parse(&Packet::new_unchecked(&zero_spi[..])), Err(Error::ReservedSpi));
    }

    #[test]
    fn header_emit() {
        let repr = Repr { spi: 0x4321, sequence_number: 0x8765_4321 };
        assert_eq!(repr.header_len(), 8);
        assert_eq!(repr.buffer_len(), 8);
        let mut out = [0u8; 12];
        let mut p = Packet::new_unchecked(&mut out[..]);
        repr.emit(&mut p).expect("fits");
        p.payload_mut().copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(out[..8], GCM_TEST_ESP_HEADER);
        assert_eq!(out[8..], [1, 2, 3, 4]);
        let mut small = [0u8; 7];
        assert_eq!(
            repr.emit(&mut Packet::new_unchecked(&mut small[..])),
            Err(Error::Truncated { needed: 8, got: 7 })
        );
        let mut p = Packet::new_unchecked([0u8; 8]);
        p.set_spi(1);
        p.set_sequence_number(2);
        assert_eq!(p.into_inner(), [0, 0, 0, 1, 0, 0, 0, 2]);
    }

    #[test]
    fn trailer_of_the_gcm_test_case() {
        let t = Trailer::parse(&GCM_TEST_PLAINTEXT).expect("valid");
        assert_eq!(t, Trailer { payload_len: 68, pad_len: 2, next_header: IpProtocol::ICMP });
        assert_eq!(t.trailer_len(), 4);
        assert_eq!(t.total_len(), 72);
        assert!(!t.is_dummy());
        // And it is what for_payload computes for 68 bytes with a 4-byte alignment.
        assert_eq!(Trailer::for_payload(68, 1, IpProtocol::ICMP), Ok(t));
        let mut out = [0u8; 4];
        t.emit(&mut out).expect("fits");
        assert_eq!(out, GCM_TEST_PLAINTEXT[68..]);
    }

    #[test]
    fn trailer_without_padding() {
        let t = Trailer::parse(&[0xaa, 0xbb, 0, 4]).expect("valid");
        assert_eq!(t, Trailer { payload_len: 2, pad_len: 0, next_header: IpProtocol::IPV4 });
        let t = Trailer::parse(&[0, 59]).expect("valid");
        assert_eq!(t.payload_len, 0);
        assert!(t.is_dummy());
    }

    #[test]
    fn trailer_parse_errors() {
        assert_eq!(Trailer::parse(&[]), Err(Error::Truncated { needed: 2, got: 0 }));
        assert_eq!(Trailer::parse(&[4]), Err(Error::Truncated { needed: 2, got: 1 }));
        // Pad length 3 with only 2 bytes before it.
        assert_eq!(Trailer::parse(&[1, 2, 3, 41]), Err(Error::PadTooLong));
        assert_eq!(Trailer::parse(&[255, 41]), Err(Error::PadTooLong));
        // Exactly as many bytes as the pad length: an empty payload is fine.
        assert_eq!(Trailer::parse(&[1, 2, 2, 41]).map(|t| t.payload_len), Ok(0));
        // Wrong padding bytes: not starting at 1, not increasing, a zero.
        assert_eq!(Trailer::parse(&[9, 2, 3, 2, 41]), Err(Error::BadPadding));
        assert_eq!(Trailer::parse(&[9, 1, 1, 2, 41]), Err(Error::BadPadding));
        assert_eq!(Trailer::parse(&[9, 1, 2, 0, 3, 41]), Err(Error::BadPadding));
        // The longest padding: 255 bytes 1..=255.
        let mut long: Vec<u8> = (1..=255).collect();
        long.extend([255, 50]);
        assert_eq!(Trailer::parse(&long).map(|t| (t.payload_len, t.pad_len)), Ok((0, 255)));
        long[254] = 0;
        assert_eq!(Trailer::parse(&long), Err(Error::BadPadding));
    }

    #[test]
    fn trailer_for_payload_alignment() {
        for block in [0, 1, 4, 8, 16, 3, 12, 256] {
            let align = block.max(4);
            for payload_len in 0..600 {
                let t = Trailer::for_payload(payload_len, block, IpProtocol::TCP).expect("valid");
                assert_eq!(t.total_len() % align, 0, "block {block} payload {payload_len}");
                assert!(usize::from(t.pad_len) < align, "fewest bytes");
                let mut buf = vec![0xee; payload_len];
                buf.resize(t.total_len(), 0);
                t.emit(&mut buf[payload_len..]).expect("fits");
                assert_eq!(Trailer::parse(&buf), Ok(t));
            }
        }
        // AES-CBC: 13 + 1 + 2 = 16.
        assert_eq!(Trailer::for_payload(13, 16, IpProtocol::UDP).map(|t| t.pad_len), Ok(1));
        assert_eq!(Trailer::for_payload(14, 16, IpProtocol::UDP).map(|t| t.pad_len), Ok(0));
        assert_eq!(Trailer::for_payload(15, 16, IpProtocol::UDP).map(|t| t.pad_len), Ok(15));
    }

    #[test]
    fn trailer_for_payload_errors() {
        assert_eq!(Trailer::for_payload(10, 257, IpProtocol::TCP), Err(Error::BadBlockSize(257)));
        assert_eq!(
            Trailer::for_payload(usize::MAX, 4, IpProtocol::TCP),
            Err(Error::TooLong { max: usize::MAX, got: usize::MAX })
        );
        // usize::MAX - 2 is 1 (mod 4): it needs 1 padding byte and the 2 fixed ones, one more
        // than fits. usize::MAX - 5 is 2 (mod 4): no padding, and the 2 fixed bytes fit.
        assert_eq!((usize::MAX - 2) % 4, 1);
        assert!(Trailer::for_payload(usize::MAX - 2, 4, IpProtocol::TCP).is_err());
        assert_eq!(Trailer::for_payload(usize::MAX - 5, 4, IpProtocol::TCP).map(|t| t.pad_len), Ok(0));
        let t = Trailer { payload_len: usize::MAX, pad_len: 3, next_header: IpProtocol::TCP };
        assert_eq!(t.total_len(), usize::MAX);
    }

    #[test]
    fn trailer_emit_errors() {
        let t = Trailer::for_payload(5, 8, IpProtocol::UDP).expect("valid");
        assert_eq!(t.pad_len, 1);
        let mut small = [0u8; 2];
        assert_eq!(t.emit(&mut small), Err(Error::Truncated { needed: 3, got: 2 }));
        let mut bigger = [0xffu8; 5];
        t.emit(&mut bigger).expect("fits");
        assert_eq!(bigger, [1, 1, 17, 0xff, 0xff]);
    }
}
