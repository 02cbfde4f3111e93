//! The Notify payload (RFC 7296 §3.10) and typed readers and builders for the notify data
//! iked acts on.
//!
//! ```text
//! | Protocol ID (1) | SPI Size (1) | Notify Message Type (2) | SPI (SPI Size) | Notification Data ... |
//! ```
//!
//! | type                              | data                                   | reader                                   |
//! |-----------------------------------|----------------------------------------|------------------------------------------|
//! | NAT_DETECTION_{SOURCE,DESTINATION}_IP | SHA-1(SPIi, SPIr, IP, port), 20 bytes | [`Notify::nat_detection_hash`]          |
//! | COOKIE                            | opaque, 1 to 64 bytes                  | [`Notify::cookie`]                       |
//! | REKEY_SA                          | none; the SPI field is the SA's SPI    | [`Notify::rekey_sa_spi`]                 |
//! | SIGNATURE_HASH_ALGORITHMS (7427)  | a list of 16-bit hash algorithm IDs    | [`Notify::signature_hash_algorithms`]   |
//! | INVALID_KE_PAYLOAD                | the 16-bit group the responder wants   | [`Notify::invalid_ke_group`]             |
//! | SET_WINDOW_SIZE                   | a 32-bit window size                   | [`Notify::window_size`]                  |

use crate::bytes::{len8, Reader, Writer};
use crate::error::{Error, Result};
use crate::ids::{DhId, HashAlgorithm, NotifyType, ProtocolId};
use crate::payload::Body;

/// A Notify payload.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Notify {
    /// The protocol of the SA the notify is about (0 when about none or the IKE SA).
    pub protocol: ProtocolId,
    /// The SPI of that SA (empty when about none or the IKE SA).
    pub spi: Vec<u8>,
    /// The notify type.
    pub notify_type: NotifyType,
    /// The notification data.
    pub data: Vec<u8>,
}

impl Notify {
    /// A notify about no SA in particular (protocol 0, no SPI), with its data.
    pub fn new(notify_type: NotifyType, data: impl Into<Vec<u8>>) -> Notify {
        Notify { protocol: ProtocolId::NONE, spi: Vec::new(), notify_type, data: data.into() }
    }

    /// A NAT_DETECTION_SOURCE_IP or NAT_DETECTION_DESTINATION_IP notify with its hash.
    pub fn with_nat_detection(notify_type: NotifyType, hash: [u8; 20]) -> Notify {
        Notify::new(notify_type, hash.to_vec())
    }

    /// A REKEY_SA notify for the ESP or AH SA with this (inbound) SPI.
    pub fn rekey_sa(protocol: ProtocolId, spi: u32) -> Notify {
        Notify {
            protocol,
            spi: spi.to_be_bytes().to_vec(),
            notify_type: NotifyType::REKEY_SA,
            data: Vec::new(),
        }
    }

    /// A SIGNATURE_HASH_ALGORITHMS notify listing these algorithms.
    pub fn with_signature_hash_algorithms(algorithms: &[HashAlgorithm]) -> Notify {
        Notify::new(
            NotifyType::SIGNATURE_HASH_ALGORITHMS,
            algorithms.iter().flat_map(|a| a.0.to_be_bytes()).collect::<Vec<_>>(),
        )
    }

    /// An INVALID_KE_PAYLOAD notify naming the group the responder wants.
    pub fn invalid_ke_payload(group: DhId) -> Notify {
        Notify::new(NotifyType::INVALID_KE_PAYLOAD, group.0.to_be_bytes().to_vec())
    }

    /// A SET_WINDOW_SIZE notify.
    pub fn set_window_size(size: u32) -> Notify {
        Notify::new(NotifyType::SET_WINDOW_SIZE, size.to_be_bytes().to_vec())
    }

    fn expect(&self, expected: NotifyType) -> Result<()> {
        if self.notify_type == expected {
            Ok(())
        } else {
            Err(Error::WrongNotify { expected, got: self.notify_type })
        }
    }

    fn data_exactly<const N: usize>(&self) -> Result<[u8; N]> {
        self.data.as_slice().try_into().map_err(|_| Error::NotifyDataLength {
            notify: self.notify_type,
            expected: N,
            got: self.data.len(),
        })
    }

    /// The hash of a NAT_DETECTION_SOURCE_IP or NAT_DETECTION_DESTINATION_IP notify.
    pub fn nat_detection_hash(&self) -> Result<[u8; 20]> {
        if self.notify_type != NotifyType::NAT_DETECTION_SOURCE_IP {
            self.expect(NotifyType::NAT_DETECTION_DESTINATION_IP)?;
        }
        self.data_exactly()
    }

    /// A COOKIE notify's cookie, 1 to 64 bytes (RFC 7296 §2.6).
    pub fn cookie(&self) -> Result<&[u8]> {
        self.expect(NotifyType::COOKIE)?;
        if self.data.is_empty() || self.data.len() > 64 {
            return Err(Error::NotifyDataLength {
                notify: self.notify_type,
                expected: 64,
                got: self.data.len(),
            });
        }
        Ok(&self.data)
    }

    /// A REKEY_SA notify's SPI: 4 bytes, for ESP or AH.
    pub fn rekey_sa_spi(&self) -> Result<u32> {
        self.expect(NotifyType::REKEY_SA)?;
        let spi: [u8; 4] = self.spi.as_slice().try_into().map_err(|_| Error::SpiLength {
            what: "REKEY_SA notify",
            expected: 4,
            got: self.spi.len(),
        })?;
        Ok(u32::from_be_bytes(spi))
    }

    /// A SIGNATURE_HASH_ALGORITHMS notify's list (RFC 7427 §4).
    pub fn signature_hash_algorithms(&self) -> Result<Vec<HashAlgorithm>> {
        self.expect(NotifyType::SIGNATURE_HASH_ALGORITHMS)?;
        if self.data.len() % 2 != 0 {
            return Err(Error::NotifyDataLength {
                notify: self.notify_type,
                expected: 2,
                got: self.data.len(),
            });
        }
        Ok(self.data.chunks_exact(2).map(|c| HashAlgorithm(u16::from_be_bytes([c[0], c[1]]))).collect())
    }

    /// An INVALID_KE_PAYLOAD notify's group.
    pub fn invalid_ke_group(&self) -> Result<DhId> {
        self.expect(NotifyType::INVALID_KE_PAYLOAD)?;
        Ok(DhId(u16::from_be_bytes(self.data_exactly()?)))
    }

    /// A SET_WINDOW_SIZE notify's window size.
    pub fn window_size(&self) -> Result<u32> {
        self.expect(NotifyType::SET_WINDOW_SIZE)?;
        Ok(u32::from_be_bytes(self.data_exactly()?))
    }
}

impl Body for Notify {
    fn parse(body: &[u8]) -> Result<Notify> {
        let mut r = Reader::new(body, "Notify payload");
        let protocol = ProtocolId(r.u8()?);
        let spi_size = r.u8()?;
        let notify_type = NotifyType(r.u16()?);
        let spi = r.take(spi_size as usize)?.to_vec();
        Ok(Notify { protocol, spi, notify_type, data: r.rest().to_vec() })
    }

    fn buffer_len(&self) -> usize {
        4 + self.spi.len() + self.data.len()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let mut w = Writer::new(buf, "Notify payload");
        w.u8(self.protocol.0)?;
        w.u8(len8("Notify SPI", self.spi.len())?)?;
        w.u16(self.notify_type.0)?;
        w.put(&self.spi)?;
        w.put(&self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_short() {
        let n = Notify::rekey_sa(ProtocolId::ESP, 0xc0ffee01);
        let b = n.to_vec().unwrap();
        assert_eq!(b, [3, 4, 0x40, 0x09, 0xc0, 0xff, 0xee, 0x01]);
        assert_eq!(Notify::parse(&b).unwrap(), n);
        assert_eq!(n.rekey_sa_spi().unwrap(), 0xc0ffee01);
        assert_eq!(
            Notify::parse(&[3, 4, 0x40, 0x09, 1, 2]),
            Err(Error::Truncated { what: "Notify payload", needed: 8, got: 6 })
        );
        assert_eq!(
            Notify::parse(&[0, 0, 0]),
            Err(Error::Truncated { what: "Notify payload", needed: 4, got: 3 })
        );
    }

    #[test]
    fn typed_data() {
        let nat = Notify::with_nat_detection(NotifyType::NAT_DETECTION_DESTINATION_IP, [5; 20]);
        assert_eq!(nat.nat_detection_hash().unwrap(), [5; 20]);
        let short = Notify::new(NotifyType::NAT_DETECTION_SOURCE_IP, vec![0; 19]);
        assert_eq!(
            short.nat_detection_hash(),
            Err(Error::NotifyDataLength {
                notify: NotifyType::NAT_DETECTION_SOURCE_IP,
                expected: 20,
                got: 19
            })
        );
        assert_eq!(
            nat.cookie(),
            Err(Error::WrongNotify {
                expected: NotifyType::COOKIE,
                got: NotifyType::NAT_DETECTION_DESTINATION_IP
            })
        );
        assert_eq!(Notify::new(NotifyType::COOKIE, vec![1, 2]).cookie().unwrap(), &[1, 2]);
        assert!(Notify::new(NotifyType::COOKIE, vec![]).cookie().is_err());
        let algs = [HashAlgorithm::SHA2_256, HashAlgorithm::SHA2_384, HashAlgorithm::IDENTITY];
        let sha = Notify::with_signature_hash_algorithms(&algs);
        assert_eq!(sha.data, [0, 2, 0, 3, 0, 5]);
        assert_eq!(sha.signature_hash_algorithms().unwrap(), algs);
        assert_eq!(Notify::invalid_ke_payload(DhId::MODP_2048).invalid_ke_group().unwrap(), DhId::MODP_2048);
        assert_eq!(Notify::set_window_size(10).window_size().unwrap(), 10);
        assert_eq!(
            Notify::new(NotifyType::REKEY_SA, vec![]).rekey_sa_spi(),
            Err(Error::SpiLength { what: "REKEY_SA notify", expected: 4, got: 0 })
        );
    }
}
