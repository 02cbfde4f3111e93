//! The virtio-net header (`struct virtio_net_hdr`, virtio 1.2 §5.1.6, without
//! `num_buffers`) that a Linux TUN with IFF_VNET_HDR puts in front of every packet: how a
//! super-packet is to be segmented and where its checksum is to be completed. Its 16-bit
//! fields are little-endian (a modern device's byte order, and what Linux's TUN uses on a
//! little-endian host).

use crate::error::{need, Result};

/// The header's length.
pub const HEADER_LEN: usize = 10;

/// `flags`: the checksum from `csum_start` on is to be completed and written at
/// `csum_start + csum_offset`.
pub const F_NEEDS_CSUM: u8 = 1;

/// `gso_type`: segmentation asked for.
pub mod gso {
    /// None: one packet.
    pub const NONE: u8 = 0;
    /// TCP over IPv4.
    pub const TCPV4: u8 = 1;
    /// TCP over IPv6.
    pub const TCPV6: u8 = 4;
}

/// The meaning of a virtio-net header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Repr {
    /// [`F_NEEDS_CSUM`] or 0.
    pub flags: u8,
    /// One of [`gso`].
    pub gso_type: u8,
    /// The length of the headers in front of each segment's payload.
    pub hdr_len: u16,
    /// The payload bytes per segment.
    pub gso_size: u16,
    /// Where the checksummed part starts.
    pub csum_start: u16,
    /// Where in it the checksum field is.
    pub csum_offset: u16,
}

impl Repr {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        need(buf, HEADER_LEN)?;
        buf[0] = self.flags;
        buf[1] = self.gso_type;
        buf[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        buf[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        buf[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        buf[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        Ok(())
    }

    /// Reads the header from the first [`HEADER_LEN`] bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Repr> {
        need(buf, HEADER_LEN)?;
        let le = |at: usize| u16::from_le_bytes([buf[at], buf[at + 1]]);
        Ok(Repr {
            flags: buf[0],
            gso_type: buf[1],
            hdr_len: le(2),
            gso_size: le(4),
            csum_start: le(6),
            csum_offset: le(8),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCPv4 super-packet with 1448-byte segments behind 20 + 32 bytes of headers, its
    /// TCP checksum (at 20 + 16) to be completed: the layout Linux's
    /// `virtio_net_hdr_from_skb` writes, fields little-endian.
    #[test]
    fn emit_and_parse() {
        let r = Repr {
            flags: F_NEEDS_CSUM,
            gso_type: gso::TCPV4,
            hdr_len: 52,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        let mut b = [0xffu8; HEADER_LEN];
        r.emit(&mut b).unwrap();
        assert_eq!(b, [1, 1, 52, 0, 0xa8, 0x05, 20, 0, 16, 0]);
        assert_eq!(Repr::parse(&b).unwrap(), r);
        assert!(Repr::parse(&b[..9]).is_err());
        assert!(r.emit(&mut [0u8; 9]).is_err());
    }
}
