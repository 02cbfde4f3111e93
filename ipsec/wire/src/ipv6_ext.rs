//! Views of the IPv6 extension headers that the walk in [`ipv6`](crate::ipv6) steps over:
//! the generic layout shared by Hop-by-Hop Options, Routing and Destination Options
//! ([`ExtHeader`]), the Fragment header ([`FragmentHeader`]), and the Authentication Header
//! ([`AuthHeader`], whose length counts 4-byte units rather than 8: [`crate::ah`]'s view).
//!
//! Each view checks only its own length; where a header may appear is the walk's business.

use crate::bytes::{be16, be32, set_be16, set_be32};
use crate::error::{need, Result};
use crate::ip::IpProtocol;

/// A Hop-by-Hop Options, Routing or Destination Options header: Next Header, Hdr Ext Len
/// in 8-byte units not counting the first 8 bytes, then type-specific data (RFC 8200 §4.3,
/// §4.4, §4.6; RFC 6564 keeps new extension headers to this layout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ExtHeader<T> {
    /// Wraps a buffer that starts with the header, without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> ExtHeader<T> {
        ExtHeader { buffer }
    }

    /// Wraps a buffer after [`check_len`](ExtHeader::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<ExtHeader<T>> {
        let header = ExtHeader::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    /// Checks that the buffer holds the whole header its length field announces.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(self.buffer.as_ref(), 2)?;
        need(self.buffer.as_ref(), self.header_len())
    }

    /// Gives back the buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The protocol of the header after this one.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// The length of this header in bytes: (Hdr Ext Len + 1) × 8.
    #[inline]
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[1]) + 1) * 8
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> ExtHeader<&'a T> {
    /// The bytes after Next Header and Hdr Ext Len: options, or routing type, segments left
    /// and routing data.
    #[inline]
    pub fn data(&self) -> &'a [u8] {
        &self.buffer.as_ref()[2..self.header_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ExtHeader<T> {
    /// Sets the protocol of the header after this one.
    #[inline]
    pub fn set_next_header(&mut self, next: IpProtocol) {
        self.buffer.as_mut()[0] = next.0;
    }
}

/// An IPv6 Fragment header (RFC 8200 §4.5): always 8 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl FragmentHeader<&[u8]> {
    /// The length of a Fragment header.
    pub const LEN: usize = 8;
}

impl<T: AsRef<[u8]>> FragmentHeader<T> {
    /// Wraps a buffer that starts with the header, without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> FragmentHeader<T> {
        FragmentHeader { buffer }
    }

    /// Wraps a buffer after [`check_len`](FragmentHeader::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<FragmentHeader<T>> {
        let header = FragmentHeader::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    /// Checks that the buffer holds the 8 bytes of the header.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        need(self.buffer.as_ref(), FragmentHeader::LEN)
    }

    /// Gives back the buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The protocol of the first header of the fragmentable part.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// The fragment offset in bytes (the field counts 8-byte units in its upper 13 bits).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        be16(self.buffer.as_ref(), 2) & 0xfff8
    }

    /// The M (more fragments) flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        be16(self.buffer.as_ref(), 2) & 1 != 0
    }

    /// The Identification field.
    #[inline]
    pub fn ident(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }

    /// Whether this header makes its packet a fragment proper: M set or a non-zero offset.
    /// Offset 0 without M is an "atomic fragment" (RFC 6946), a whole packet.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> FragmentHeader<T> {
    /// Sets the protocol of the first header of the fragmentable part.
    #[inline]
    pub fn set_next_header(&mut self, next: IpProtocol) {
        self.buffer.as_mut()[0] = next.0;
    }

    /// Sets the offset (in bytes, a multiple of 8: the low 3 bits are dropped) and the M
    /// flag, and clears the reserved fields.
    #[inline]
    pub fn set_frag_offset_and_more(&mut self, offset: u16, more: bool) {
        self.buffer.as_mut()[1] = 0;
        set_be16(self.buffer.as_mut(), 2, (offset & 0xfff8) | u16::from(more));
    }

    /// Sets the Identification field.
    #[inline]
    pub fn set_ident(&mut self, ident: u32) {
        set_be32(self.buffer.as_mut(), 4, ident);
    }
}

/// The Authentication Header's view lives with the rest of AH in [`crate::ah`]; the walk
/// steps over it by this name.
pub use crate::ah::Packet as AuthHeader;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn ext_header() {
        // Destination Options, 16 bytes (Hdr Ext Len 1): a PadN option filling the rest.
        let bytes = [17, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xee];
        let h = ExtHeader::new_checked(&bytes[..]).expect("valid");
        assert_eq!(h.next_header(), IpProtocol(17));
        assert_eq!(h.header_len(), 16);
        assert_eq!(h.data().len(), 14);
        assert_eq!(h.data()[..2], [1, 12]);
        assert_eq!(ExtHeader::new_checked(&bytes[..1]), Err(Error::Truncated { needed: 2, got: 1 }));
        assert_eq!(ExtHeader::new_checked(&bytes[..15]), Err(Error::Truncated { needed: 16, got: 15 }));
        let mut copy = bytes;
        let mut h = ExtHeader::new_unchecked(&mut copy[..]);
        h.set_next_header(IpProtocol::ESP);
        assert_eq!(h.into_inner()[0], 50);
    }

    #[test]
    fn fragment_header() {
        // Next header UDP, offset 185 × 8 = 1480, M set, ident 0x01020304.
        let bytes = [17, 0, 0x05, 0xc9, 1, 2, 3, 4];
        let h = FragmentHeader::new_checked(&bytes[..]).expect("valid");
        assert_eq!(h.next_header(), IpProtocol::UDP);
        assert_eq!(h.frag_offset(), 1480);
        assert!(h.more_frags());
        assert_eq!(h.ident(), 0x0102_0304);
        assert!(h.is_fragment());
        let atomic = [17, 0, 0, 0, 0, 0, 0, 9];
        assert!(!FragmentHeader::new_unchecked(&atomic[..]).is_fragment());
        assert_eq!(FragmentHeader::new_checked(&bytes[..7]), Err(Error::Truncated { needed: 8, got: 7 }));
        let mut copy = bytes;
        let mut h = FragmentHeader::new_unchecked(&mut copy[..]);
        h.set_next_header(IpProtocol::TCP);
        assert_eq!(h.into_inner()[0], 6);
        // Written back from its fields: the same bytes.
        let mut out = [0xffu8; 8];
        let mut h = FragmentHeader::new_unchecked(&mut out[..]);
        h.set_next_header(IpProtocol::UDP);
        h.set_frag_offset_and_more(1480, true);
        h.set_ident(0x0102_0304);
        assert_eq!(out, bytes);
    }
}
