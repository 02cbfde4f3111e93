//! The Delete payload (RFC 7296 §3.11): the SAs the sender has deleted.
//!
//! ```text
//! | Protocol ID (1) | SPI Size (1) | Num of SPIs (2) | SPIs (Num × SPI Size) |
//! ```
//!
//! Deleting the IKE SA: protocol IKE, SPI size 0, no SPIs. Deleting Child SAs: protocol ESP
//! or AH, SPI size 4, the sender's inbound SPIs.

use crate::bytes::{len16, len8, Reader, Writer};
use crate::error::{Error, Result};
use crate::ids::ProtocolId;
use crate::payload::Body;

/// A Delete payload.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Delete {
    /// The protocol of the SAs.
    pub protocol: ProtocolId,
    /// The SPI Size: every SPI in [`spis`](Delete::spis) has this length.
    pub spi_size: u8,
    /// The SPIs.
    pub spis: Vec<Vec<u8>>,
}

impl Delete {
    /// A Delete of the IKE SA this message travels in.
    pub fn ike() -> Delete {
        Delete { protocol: ProtocolId::IKE, spi_size: 0, spis: Vec::new() }
    }

    /// A Delete of these ESP or AH SAs.
    pub fn child(protocol: ProtocolId, spis: &[u32]) -> Delete {
        Delete { protocol, spi_size: 4, spis: spis.iter().map(|s| s.to_be_bytes().to_vec()).collect() }
    }

    /// The SPIs as 32-bit numbers (ESP, AH); [`Error::SpiLength`] for an SPI that is not
    /// 4 bytes.
    pub fn spis_u32(&self) -> Result<Vec<u32>> {
        self.spis
            .iter()
            .map(|s| {
                let spi: [u8; 4] = s.as_slice().try_into().map_err(|_| Error::SpiLength {
                    what: "Delete payload",
                    expected: 4,
                    got: s.len(),
                })?;
                Ok(u32::from_be_bytes(spi))
            })
            .collect()
    }
}

impl Body for Delete {
    fn parse(body: &[u8]) -> Result<Delete> {
        let mut r = Reader::new(body, "Delete payload");
        let protocol = ProtocolId(r.u8()?);
        let spi_size = r.u8()?;
        let count = r.u16()?;
        let rest = r.rest();
        if rest.len() != spi_size as usize * count as usize {
            return Err(Error::DeleteSpis { spi_size, count, remaining: rest.len() });
        }
        let spis = if spi_size == 0 {
            vec![Vec::new(); count as usize]
        } else {
            rest.chunks_exact(spi_size as usize).map(<[u8]>::to_vec).collect()
        };
        Ok(Delete { protocol, spi_size, spis })
    }

    fn buffer_len(&self) -> usize {
        4 + self.spis.iter().map(Vec::len).sum::<usize>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let mut w = Writer::new(buf, "Delete payload");
        w.u8(self.protocol.0)?;
        w.u8(len8("Delete SPI size", self.spi_size as usize)?)?;
        w.u16(len16("Delete SPI count", self.spis.len())?)?;
        for spi in &self.spis {
            if spi.len() != self.spi_size as usize {
                return Err(Error::SpiLength {
                    what: "Delete payload",
                    expected: self.spi_size as usize,
                    got: spi.len(),
                });
            }
            w.put(spi)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_counts() {
        let d = Delete::child(ProtocolId::ESP, &[1, 0xdeadbeef]);
        let b = d.to_vec().unwrap();
        assert_eq!(b, [3, 4, 0, 2, 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(Delete::parse(&b).unwrap(), d);
        assert_eq!(d.spis_u32().unwrap(), vec![1, 0xdeadbeef]);
        let ike = Delete::ike();
        assert_eq!(ike.to_vec().unwrap(), [1, 0, 0, 0]);
        assert_eq!(Delete::parse(&[1, 0, 0, 0]).unwrap(), ike);
        assert_eq!(Delete::parse(&b[..11]), Err(Error::DeleteSpis { spi_size: 4, count: 2, remaining: 7 }));
        assert_eq!(
            Delete::parse(&[3, 4, 0, 0, 1]),
            Err(Error::DeleteSpis { spi_size: 4, count: 0, remaining: 1 })
        );
        let bad = Delete { protocol: ProtocolId::ESP, spi_size: 4, spis: vec![vec![1, 2]] };
        assert_eq!(bad.to_vec(), Err(Error::SpiLength { what: "Delete payload", expected: 4, got: 2 }));
        assert_eq!(bad.spis_u32(), Err(Error::SpiLength { what: "Delete payload", expected: 4, got: 2 }));
    }
}
