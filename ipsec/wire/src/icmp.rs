//! The ICMP errors that carry a path MTU: ICMPv4 Destination Unreachable, "fragmentation
//! needed and DF set" (RFC 792 type 3 code 4, with RFC 1191's Next-Hop MTU field) and
//! ICMPv6 Packet Too Big (RFC 4443 §3.2, type 2). Both quote the packet that did not fit
//! (the "invoking packet") behind an 8-byte header:
//!
//! ```text
//!  0        1        2                 4                 6                 8
//!  ┌────────┬────────┬─────────────────┬─────────────────┬─────────────────┬───────────────
//!  │ type   │ code   │ checksum        │ ICMPv4: unused  │ Next-Hop MTU    │ invoking packet
//!  │ 3 / 2  │ 4 / 0  │                 │ ICMPv6: MTU (32 bits) ─────────────┤ (as much as fits)
//!  └────────┴────────┴─────────────────┴─────────────────┴─────────────────┴───────────────
//! ```
//!
//! The ICMPv4 checksum covers the ICMP message; the ICMPv6 one also the IPv6 pseudo-header
//! (RFC 4443 §2.3). An error quotes as much of the invoking packet as keeps the whole IP
//! packet within 576 bytes over IPv4 (RFC 1812 §4.3.2.3) and 1280 over IPv6 (RFC 4443
//! §2.4(c)): [`quote_len`].

use crate::bytes::{be16, be32, set_be16, set_be32};
use crate::checksum;
use crate::error::{need, Error, Result};
use crate::ip::{ChecksumPolicy, IpProtocol, PseudoHeader};

/// The ICMP header in front of the invoking packet.
pub const HEADER_LEN: usize = 8;
/// ICMPv4 Destination Unreachable.
pub const V4_DEST_UNREACHABLE: u8 = 3;
/// Its code "fragmentation needed and DF set".
pub const V4_FRAG_NEEDED: u8 = 4;
/// ICMPv6 Packet Too Big.
pub const V6_PACKET_TOO_BIG: u8 = 2;
/// The longest ICMPv4 error an IPv4 router sends, IP header included (RFC 1812 §4.3.2.3).
pub const V4_MAX_ERROR_LEN: usize = 576;
/// The longest ICMPv6 error, IPv6 header included (RFC 4443 §2.4(c): the IPv6 minimum MTU).
pub const V6_MAX_ERROR_LEN: usize = 1280;

/// Byte offsets of the header fields.
mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    /// ICMPv4 type 3: unused (2 bytes), then the Next-Hop MTU (RFC 1191 §4).
    pub const V4_UNUSED: usize = 4;
    pub const V4_MTU: usize = 6;
    /// ICMPv6 type 2: the MTU (4 bytes).
    pub const V6_MTU: usize = 4;
}

/// How many bytes of an invoking packet of `len` bytes an error over IPv4 (`v6` false) or
/// IPv6 quotes: as many as keep the error within [`V4_MAX_ERROR_LEN`] or
/// [`V6_MAX_ERROR_LEN`] with its IP header (20 or 40 bytes) and ICMP header.
pub const fn quote_len(len: usize, v6: bool) -> usize {
    let room = if v6 { V6_MAX_ERROR_LEN - 40 - HEADER_LEN } else { V4_MAX_ERROR_LEN - 20 - HEADER_LEN };
    if len < room {
        len
    } else {
        room
    }
}

/// A view of an ICMP or ICMPv6 message (header and what follows) in a byte buffer.
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

    /// Checks that the buffer holds the 8-byte header (the whole buffer is the message).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(self.buffer.as_ref(), HEADER_LEN)
    }

    /// Gives back the buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The message type.
    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// The code.
    #[inline]
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// The checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// ICMPv4 type 3 code 4: the Next-Hop MTU (0 from a router older than RFC 1191).
    #[inline]
    pub fn next_hop_mtu(&self) -> u16 {
        be16(self.buffer.as_ref(), field::V4_MTU)
    }

    /// ICMPv6 Packet Too Big: the MTU.
    #[inline]
    pub fn mtu_v6(&self) -> u32 {
        be32(self.buffer.as_ref(), field::V6_MTU)
    }

    /// What follows the header: the invoking packet, as much of it as was quoted.
    #[inline]
    pub fn quoted(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// Whether the checksum verifies: over the message alone (ICMPv4, `pseudo` `None`) or
    /// with the IPv6 pseudo-header (ICMPv6).
    #[inline]
    pub fn verify_checksum(&self, pseudo: Option<&PseudoHeader>) -> bool {
        let b = self.buffer.as_ref();
        match pseudo {
            None => checksum::verifies(b),
            Some(p) => {
                checksum::combine(&[p.sum(IpProtocol::ICMPV6, b.len() as u32), checksum::sum(b)]) == 0xffff
            }
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the message type.
    #[inline]
    pub fn set_msg_type(&mut self, value: u8) {
        self.buffer.as_mut()[field::TYPE] = value;
    }

    /// Sets the code.
    #[inline]
    pub fn set_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// ICMPv4 type 3: sets the Next-Hop MTU and clears the unused field before it.
    #[inline]
    pub fn set_next_hop_mtu(&mut self, value: u16) {
        set_be16(self.buffer.as_mut(), field::V4_UNUSED, 0);
        set_be16(self.buffer.as_mut(), field::V4_MTU, value);
    }

    /// ICMPv6 Packet Too Big: sets the MTU.
    #[inline]
    pub fn set_mtu_v6(&mut self, value: u32) {
        set_be32(self.buffer.as_mut(), field::V6_MTU, value);
    }

    /// What follows the header, to write the quoted packet into.
    #[inline]
    pub fn quoted_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    /// Computes and writes the checksum over the whole buffer (see
    /// [`verify_checksum`](Packet::verify_checksum) for `pseudo`).
    #[inline]
    pub fn fill_checksum(&mut self, pseudo: Option<&PseudoHeader>) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let sum = match pseudo {
            None => checksum::sum(b),
            Some(p) => checksum::combine(&[p.sum(IpProtocol::ICMPV6, b.len() as u32), checksum::sum(b)]),
        };
        self.set_checksum(!sum);
    }
}

/// A path MTU error: what it says and the part of the invoking packet it quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    /// ICMPv4 type 3 code 4: the packet needed fragmenting, had DF set, and the link after
    /// the router that says so carries at most `mtu` bytes (0: the router did not say).
    FragNeeded {
        /// The Next-Hop MTU.
        mtu: u16,
        /// The invoking packet, as much as was quoted.
        quoted: &'a [u8],
    },
    /// ICMPv6 type 2: the link after the router carries at most `mtu` bytes.
    PacketTooBig {
        /// The MTU.
        mtu: u32,
        /// The invoking packet, as much as was quoted.
        quoted: &'a [u8],
    },
}

impl<'a> Repr<'a> {
    /// Parses an ICMPv4 message (the IPv4 payload): Destination Unreachable with code 4,
    /// checksum verified unless `policy` says not. Another type or code is
    /// [`Error::NotPathMtu`].
    pub fn parse_v4<T: AsRef<[u8]> + ?Sized>(
        packet: &Packet<&'a T>,
        policy: ChecksumPolicy,
    ) -> Result<Repr<'a>> {
        packet.check_len()?;
        if policy == ChecksumPolicy::Verify && !packet.verify_checksum(None) {
            return Err(Error::BadChecksum);
        }
        if (packet.msg_type(), packet.code()) != (V4_DEST_UNREACHABLE, V4_FRAG_NEEDED) {
            return Err(Error::NotPathMtu { msg_type: packet.msg_type(), code: packet.code() });
        }
        Ok(Repr::FragNeeded { mtu: packet.next_hop_mtu(), quoted: &packet.buffer.as_ref()[HEADER_LEN..] })
    }

    /// Parses an ICMPv6 message (after the IPv6 headers) that came with the addresses of
    /// `pseudo`: Packet Too Big (any code: RFC 4443 §3.2 says the receiver ignores it),
    /// checksum verified unless `policy` says not. Another type is [`Error::NotPathMtu`].
    pub fn parse_v6<T: AsRef<[u8]> + ?Sized>(
        packet: &Packet<&'a T>,
        pseudo: &PseudoHeader,
        policy: ChecksumPolicy,
    ) -> Result<Repr<'a>> {
        packet.check_len()?;
        if policy == ChecksumPolicy::Verify && !packet.verify_checksum(Some(pseudo)) {
            return Err(Error::BadChecksum);
        }
        if packet.msg_type() != V6_PACKET_TOO_BIG {
            return Err(Error::NotPathMtu { msg_type: packet.msg_type(), code: packet.code() });
        }
        Ok(Repr::PacketTooBig { mtu: packet.mtu_v6(), quoted: &packet.buffer.as_ref()[HEADER_LEN..] })
    }

    /// The MTU the error reports.
    pub fn mtu(&self) -> u32 {
        match *self {
            Repr::FragNeeded { mtu, .. } => u32::from(mtu),
            Repr::PacketTooBig { mtu, .. } => mtu,
        }
    }

    /// The quoted invoking packet.
    pub fn quoted(&self) -> &'a [u8] {
        match *self {
            Repr::FragNeeded { quoted, .. } | Repr::PacketTooBig { quoted, .. } => quoted,
        }
    }

    /// The message's length: header and quote.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.quoted().len()
    }

    /// Writes the message with its checksum into a buffer of exactly
    /// [`buffer_len`](Repr::buffer_len) bytes. Packet Too Big needs the IPv6 pseudo-header
    /// it will be sent under (another is [`Error::BadVersion`]); the ICMPv4 checksum covers
    /// the message alone and `pseudo` is not looked at.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
        pseudo: &PseudoHeader,
    ) -> Result<()> {
        let len = self.buffer_len();
        let got = packet.buffer.as_ref().len();
        if got != len {
            return Err(if got < len {
                Error::Truncated { needed: len, got }
            } else {
                Error::TooLong { max: len, got }
            });
        }
        let pseudo = match *self {
            Repr::FragNeeded { mtu, .. } => {
                packet.set_msg_type(V4_DEST_UNREACHABLE);
                packet.set_code(V4_FRAG_NEEDED);
                packet.set_next_hop_mtu(mtu);
                None
            }
            Repr::PacketTooBig { mtu, .. } => {
                if !pseudo.is_v6() {
                    return Err(Error::BadVersion(4));
                }
                packet.set_msg_type(V6_PACKET_TOO_BIG);
                packet.set_code(0);
                packet.set_mtu_v6(mtu);
                Some(pseudo)
            }
        };
        packet.quoted_mut().copy_from_slice(self.quoted());
        packet.fill_checksum(pseudo);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// An ICMPv4 "fragmentation needed" built by scapy 2.8
    /// (`bytes(ICMP(type=3, code=4, nexthopmtu=1300)/IP(src="10.99.0.1", dst="10.99.1.2",
    /// proto=50, flags="DF", len=1452, id=7)/b"\x00\x00\x10\x01\x00\x00\x00\x07")`): the
    /// quote is an outer ESP header of SPI 0x1001, sequence number 7.
    const SCAPY_FRAG_NEEDED: [u8; 36] = [
        0x03, 0x04, 0xe7, 0xdf, 0x00, 0x00, 0x05, 0x14, // type, code, checksum, unused, MTU 1300
        0x45, 0x00, 0x05, 0xac, 0x00, 0x07, 0x40, 0x00, 0x40, 0x32, 0x1f, 0x51, 10, 99, 0, 1, 10, 99, 1,
        2, //
        0x00, 0x00, 0x10, 0x01, 0x00, 0x00, 0x00, 0x07,
    ];

    /// An ICMPv6 Packet Too Big built by scapy 2.8 (`ICMPv6PacketTooBig(mtu=1300)` from
    /// fd00:99:1::fe to fd00:99::1, quoting an IPv6 header of ESP, SPI 0x1001, seq 7).
    const SCAPY_PTB_SRC: &str = "fd00:99:1::fe";
    const SCAPY_PTB_DST: &str = "fd00:99::1";
    const SCAPY_PTB: [u8; 56] = [
        0x02, 0x00, 0x59, 0x41, 0x00, 0x00, 0x05, 0x14, // type, code, checksum, MTU 1300
        0x60, 0x00, 0x00, 0x00, 0x05, 0x84, 0x32, 0x40, // IPv6, payload 1412, ESP, hop limit 64
        0xfd, 0x00, 0x00, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
        0xfd, 0x00, 0x00, 0x99, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, //
        0x00, 0x00, 0x10, 0x01, 0x00, 0x00, 0x00, 0x07,
    ];

    fn v6_pseudo(src: &str, dst: &str) -> PseudoHeader {
        PseudoHeader::V6 { src: src.parse().unwrap(), dst: dst.parse().unwrap() }
    }

    #[test]
    fn parses_a_scapy_frag_needed_and_emits_it_byte_for_byte() {
        let p = Packet::new_checked(&SCAPY_FRAG_NEEDED[..]).unwrap();
        let r = Repr::parse_v4(&p, ChecksumPolicy::Verify).unwrap();
        assert_eq!(r, Repr::FragNeeded { mtu: 1300, quoted: &SCAPY_FRAG_NEEDED[8..] });
        assert_eq!(r.mtu(), 1300);
        let mut out = vec![0xaa; r.buffer_len()];
        let any = PseudoHeader::V4 { src: Ipv4Addr::LOCALHOST, dst: Ipv4Addr::LOCALHOST };
        r.emit(&mut Packet::new_unchecked(&mut out[..]), &any).unwrap();
        assert_eq!(out, SCAPY_FRAG_NEEDED);
    }

    #[test]
    fn parses_a_scapy_packet_too_big_and_emits_it_byte_for_byte() {
        let pseudo = v6_pseudo(SCAPY_PTB_SRC, SCAPY_PTB_DST);
        let p = Packet::new_checked(&SCAPY_PTB[..]).unwrap();
        let r = Repr::parse_v6(&p, &pseudo, ChecksumPolicy::Verify).unwrap();
        assert_eq!(r, Repr::PacketTooBig { mtu: 1300, quoted: &SCAPY_PTB[8..] });
        let mut out = vec![0; r.buffer_len()];
        r.emit(&mut Packet::new_unchecked(&mut out[..]), &pseudo).unwrap();
        assert_eq!(out, SCAPY_PTB);
        // The pseudo-header counts: other addresses, another checksum.
        let other = v6_pseudo(SCAPY_PTB_SRC, "fd00:99::2");
        assert_eq!(Repr::parse_v6(&p, &other, ChecksumPolicy::Verify), Err(Error::BadChecksum));
        // Packet Too Big needs an IPv6 pseudo-header to be emitted.
        let v4 = PseudoHeader::V4 { src: Ipv4Addr::LOCALHOST, dst: Ipv4Addr::LOCALHOST };
        assert_eq!(r.emit(&mut Packet::new_unchecked(&mut out[..]), &v4), Err(Error::BadVersion(4)));
    }

    #[test]
    fn refuses_bad_checksums_other_messages_and_short_buffers() {
        let mut bad = SCAPY_FRAG_NEEDED;
        bad[7] ^= 1;
        let p = Packet::new_unchecked(&bad[..]);
        assert_eq!(Repr::parse_v4(&p, ChecksumPolicy::Verify), Err(Error::BadChecksum));
        assert!(Repr::parse_v4(&p, ChecksumPolicy::Ignore).is_ok());
        // Port unreachable (3/3), an echo request: not path MTU errors.
        let mut port = SCAPY_FRAG_NEEDED;
        port[1] = 3;
        let p = Packet::new_unchecked(&port[..]);
        assert_eq!(
            Repr::parse_v4(&p, ChecksumPolicy::Ignore),
            Err(Error::NotPathMtu { msg_type: 3, code: 3 })
        );
        let echo = [128u8, 0, 0, 0, 0, 0, 0, 0];
        let pseudo = v6_pseudo("::1", "::1");
        assert_eq!(
            Repr::parse_v6(&Packet::new_unchecked(&echo[..]), &pseudo, ChecksumPolicy::Ignore),
            Err(Error::NotPathMtu { msg_type: 128, code: 0 })
        );
        for n in 0..HEADER_LEN {
            let p = Packet::new_unchecked(&SCAPY_FRAG_NEEDED[..n]);
            assert_eq!(
                Repr::parse_v4(&p, ChecksumPolicy::Ignore),
                Err(Error::Truncated { needed: 8, got: n })
            );
            assert!(Packet::new_checked(&SCAPY_PTB[..n]).is_err());
        }
        // emit wants the exact length.
        let r = Repr::FragNeeded { mtu: 1300, quoted: &[1, 2, 3] };
        let any = PseudoHeader::V6 { src: Ipv6Addr::LOCALHOST, dst: Ipv6Addr::LOCALHOST };
        assert_eq!(
            r.emit(&mut Packet::new_unchecked(&mut [0u8; 10][..]), &any),
            Err(Error::Truncated { needed: 11, got: 10 })
        );
        assert_eq!(
            r.emit(&mut Packet::new_unchecked(&mut [0u8; 12][..]), &any),
            Err(Error::TooLong { max: 11, got: 12 })
        );
    }

    #[test]
    fn quotes_as_much_as_fits_576_or_1280_bytes() {
        assert_eq!(quote_len(100, false), 100);
        assert_eq!(quote_len(1500, false), 576 - 28);
        assert_eq!(quote_len(1500, true), 1280 - 48);
        assert_eq!(quote_len(1232, true), 1232);
    }
}
