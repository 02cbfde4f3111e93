//! UDP encapsulation of ESP (RFC 3948): what a UDP payload on the NAT-T port is.
//!
//! On port 4500 one socket carries three things, told apart by their first bytes:
//!
//! - a NAT-keepalive: exactly one byte, 0xFF (§2.3), to be dropped;
//! - IKE: the 4-byte Non-ESP Marker (all zero, where ESP has its non-zero SPI) and then an
//!   IKE message (§2.2);
//! - ESP: an ESP packet whose SPI is not zero (§2.1).

use crate::error::{Error, Result};
use crate::esp;

/// The UDP port that carries IKE and ESP through NATs (RFC 3948 §2; RFC 7296 §2.23).
pub const NAT_T_PORT: u16 = 4500;
/// The NAT-keepalive payload (RFC 3948 §2.3).
pub const KEEPALIVE: u8 = 0xff;
/// The Non-ESP Marker in front of IKE messages (RFC 3948 §2.2).
pub const NON_ESP_MARKER: [u8; 4] = [0; 4];
/// The IKE header that must follow the marker (RFC 7296 §3.1; the same 28 bytes in IKEv1).
pub const IKE_HEADER_LEN: usize = 28;

/// What a UDP payload on the NAT-T port is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encapsulated<'a> {
    /// A NAT-keepalive: drop it.
    Keepalive,
    /// An IKE message, marker removed: hand it to the key exchange daemon.
    Ike(&'a [u8]),
    /// An ESP packet (SPI not zero, at least the 8-byte header).
    Esp(esp::Packet<&'a [u8]>),
}

/// Classifies a UDP payload received on (or sent to) the NAT-T port.
///
/// Errors: [`Error::Truncated`] for an empty payload, for 2 or 3 bytes, for a marker without
/// a whole IKE header after it, and for ESP shorter than its 8-byte header;
/// [`Error::BadKeepalive`] for a single byte other than 0xFF.
#[inline]
pub fn classify(payload: &[u8]) -> Result<Encapsulated<'_>> {
    match payload {
        [] => Err(Error::Truncated { needed: 1, got: 0 }),
        [KEEPALIVE] => Ok(Encapsulated::Keepalive),
        [other] => Err(Error::BadKeepalive(*other)),
        [_, _] | [_, _, _] => Err(Error::Truncated { needed: NON_ESP_MARKER.len(), got: payload.len() }),
        [0, 0, 0, 0, ike @ ..] => {
            let needed = NON_ESP_MARKER.len() + IKE_HEADER_LEN;
            if payload.len() < needed {
                return Err(Error::Truncated { needed, got: payload.len() });
            }
            Ok(Encapsulated::Ike(ike))
        }
        _ => esp::Packet::new_checked(payload).map(Encapsulated::Esp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IKE_SA_INIT request header as it rides behind the marker: SPIi, SPIr 0, next
    /// payload SA (33), version 2.0, exchange 34, flags Initiator, message ID 0, length 28.
    const IKE_HEADER: [u8; 28] = [
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 33, 0x20, 34, 0x08, 0, 0, 0,
        0, 0, 0, 0, 28,
    ];

    #[test]
    fn keepalive() {
        // RFC 3948 §2.3: a single octet 0xFF.
        assert_eq!(classify(&[0xff]), Ok(Encapsulated::Keepalive));
    }

    #[test]
    fn ike_behind_the_non_esp_marker() {
        let mut payload = NON_ESP_MARKER.to_vec();
        payload.extend(IKE_HEADER);
        assert_eq!(classify(&payload), Ok(Encapsulated::Ike(&IKE_HEADER[..])));
        payload.extend([0xaa; 8]);
        assert!(matches!(classify(&payload), Ok(Encapsulated::Ike(ike)) if ike.len() == 36));
    }

    #[test]
    fn esp() {
        let payload = [0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2a, 0xde, 0xad];
        match classify(&payload) {
            Ok(Encapsulated::Esp(p)) => {
                assert_eq!(p.spi(), 0x100);
                assert_eq!(p.sequence_number(), 42);
                assert_eq!(p.payload(), &[0xde, 0xad]);
            }
            other => panic!("not ESP: {other:?}"),
        }
        // Exactly the header is enough to classify.
        assert!(matches!(classify(&payload[..8]), Ok(Encapsulated::Esp(_))));
        // A first byte of 0xff is an SPI byte when more bytes follow.
        assert!(matches!(classify(&[0xff, 0, 0, 0, 0, 0, 0, 0]), Ok(Encapsulated::Esp(_))));
    }

    #[test]
    fn errors() {
        assert_eq!(classify(&[]), Err(Error::Truncated { needed: 1, got: 0 }));
        assert_eq!(classify(&[0x00]), Err(Error::BadKeepalive(0)));
        assert_eq!(classify(&[0xfe]), Err(Error::BadKeepalive(0xfe)));
        assert_eq!(classify(&[0xff, 0xff]), Err(Error::Truncated { needed: 4, got: 2 }));
        assert_eq!(classify(&[0, 0, 0]), Err(Error::Truncated { needed: 4, got: 3 }));
        // The marker alone, and with a partial IKE header.
        assert_eq!(classify(&[0, 0, 0, 0]), Err(Error::Truncated { needed: 32, got: 4 }));
        let mut short_ike = NON_ESP_MARKER.to_vec();
        short_ike.extend(&IKE_HEADER[..27]);
        assert_eq!(classify(&short_ike), Err(Error::Truncated { needed: 32, got: 31 }));
        // ESP (SPI not zero) shorter than its header.
        for len in 4..8 {
            assert_eq!(
                classify(&[0, 0, 1, 0, 0, 0, 0, 1][..len]),
                Err(Error::Truncated { needed: 8, got: len })
            );
        }
    }
}
