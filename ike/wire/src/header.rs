//! The IKE header (RFC 7296 §3.1): the 28 bytes in front of every IKEv2 message.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       IKE SA Initiator's SPI                  |
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       IKE SA Responder's SPI                  |
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Next Payload | MjVer | MnVer | Exchange Type |     Flags     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                          Message ID                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                            Length                             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! [`Packet`] is a view of the fields; [`Repr`] is what iked sets: SPIs, exchange, flags,
//! Message ID. Next Payload and Length are not in the [`Repr`]: they follow from the payloads,
//! so [`Message`](crate::Message) writes them. [`Repr::parse`] checks the Length field
//! against the datagram and the major version: above 2 is its own error
//! ([`Error::HigherMajorVersion`]) because RFC 7296 §2.5 answers it with
//! INVALID_MAJOR_VERSION.

use crate::error::{Error, Result};
use crate::ids::{flags, ExchangeType, PayloadType};

/// The length of the IKE header.
pub const HEADER_LEN: usize = 28;

/// Byte offsets of the header fields.
mod field {
    pub const SPI_I: usize = 0;
    pub const SPI_R: usize = 8;
    pub const NEXT_PAYLOAD: usize = 16;
    pub const VERSION: usize = 17;
    pub const EXCHANGE_TYPE: usize = 18;
    pub const FLAGS: usize = 19;
    pub const MESSAGE_ID: usize = 20;
    pub const LENGTH: usize = 24;
}

/// A view of an IKE message (header and payloads) in a byte buffer.
///
/// Getters on a view made with [`new_unchecked`](Packet::new_unchecked) may panic if the
/// buffer is shorter than 28 bytes; [`new_checked`](Packet::new_checked) rules that out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Packet::check_len).
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the 28-byte header (not the Length field: see
    /// [`Repr::parse`]).
    pub fn check_len(&self) -> Result<()> {
        let got = self.buffer.as_ref().len();
        if got < HEADER_LEN {
            return Err(Error::Truncated { what: "IKE header", needed: HEADER_LEN, got });
        }
        Ok(())
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn bytes<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0; N];
        out.copy_from_slice(&self.buffer.as_ref()[at..at + N]);
        out
    }

    /// The IKE SA initiator's SPI.
    pub fn spi_i(&self) -> u64 {
        u64::from_be_bytes(self.bytes(field::SPI_I))
    }

    /// The IKE SA responder's SPI (0 in an IKE_SA_INIT request).
    pub fn spi_r(&self) -> u64 {
        u64::from_be_bytes(self.bytes(field::SPI_R))
    }

    /// The type of the first payload.
    pub fn next_payload(&self) -> PayloadType {
        PayloadType(self.buffer.as_ref()[field::NEXT_PAYLOAD])
    }

    /// The version octet: major version in the high nibble, minor in the low.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// The exchange type.
    pub fn exchange_type(&self) -> ExchangeType {
        ExchangeType(self.buffer.as_ref()[field::EXCHANGE_TYPE])
    }

    /// The flags octet ([`flags`]).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The Message ID.
    pub fn message_id(&self) -> u32 {
        u32::from_be_bytes(self.bytes(field::MESSAGE_ID))
    }

    /// The Length field: the whole message, header included.
    pub fn length(&self) -> u32 {
        u32::from_be_bytes(self.bytes(field::LENGTH))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the initiator's SPI.
    pub fn set_spi_i(&mut self, spi: u64) {
        self.buffer.as_mut()[field::SPI_I..field::SPI_I + 8].copy_from_slice(&spi.to_be_bytes());
    }

    /// Sets the responder's SPI.
    pub fn set_spi_r(&mut self, spi: u64) {
        self.buffer.as_mut()[field::SPI_R..field::SPI_R + 8].copy_from_slice(&spi.to_be_bytes());
    }

    /// Sets the first payload's type.
    pub fn set_next_payload(&mut self, next: PayloadType) {
        self.buffer.as_mut()[field::NEXT_PAYLOAD] = next.0;
    }

    /// Sets the version octet.
    pub fn set_version(&mut self, version: u8) {
        self.buffer.as_mut()[field::VERSION] = version;
    }

    /// Sets the exchange type.
    pub fn set_exchange_type(&mut self, exchange: ExchangeType) {
        self.buffer.as_mut()[field::EXCHANGE_TYPE] = exchange.0;
    }

    /// Sets the flags octet.
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }

    /// Sets the Message ID.
    pub fn set_message_id(&mut self, id: u32) {
        self.buffer.as_mut()[field::MESSAGE_ID..field::MESSAGE_ID + 4].copy_from_slice(&id.to_be_bytes());
    }

    /// Sets the Length field.
    pub fn set_length(&mut self, length: u32) {
        self.buffer.as_mut()[field::LENGTH..field::LENGTH + 4].copy_from_slice(&length.to_be_bytes());
    }
}

/// The meaning of an IKE header, less the fields the payloads determine (Next Payload,
/// Length).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The IKE SA initiator's SPI.
    pub spi_i: u64,
    /// The IKE SA responder's SPI.
    pub spi_r: u64,
    /// The exchange type.
    pub exchange_type: ExchangeType,
    /// The Initiator flag: the sender is the IKE SA's original initiator.
    pub initiator: bool,
    /// The Response flag.
    pub response: bool,
    /// The Version flag: the sender can speak a higher major version (never set by IKEv2).
    pub higher_version: bool,
    /// The flags octet's other bits, which RFC 7296 says to send as 0 and ignore; kept so
    /// that a message re-emits to its own bytes.
    pub other_flags: u8,
    /// The minor version (0 for RFC 7296; a receiver ignores it).
    pub minor_version: u8,
    /// The Message ID.
    pub message_id: u32,
}

impl Repr {
    /// Parses the header of a whole datagram: at least 28 bytes, a Length field of at least
    /// 28 equal to the datagram's length, major version 2.
    ///
    /// The version is checked first, as soon as 28 bytes are there: a higher major version
    /// is [`Error::HigherMajorVersion`] whatever follows, so that iked can answer it.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        let version = packet.version();
        match version >> 4 {
            2 => {}
            major if major > 2 => {
                return Err(Error::HigherMajorVersion {
                    version,
                    spi_i: packet.spi_i(),
                    spi_r: packet.spi_r(),
                    message_id: packet.message_id(),
                })
            }
            _ => return Err(Error::LowerMajorVersion { version }),
        }
        let length = packet.length();
        if (length as usize) < HEADER_LEN {
            return Err(Error::MessageTooShort { length });
        }
        let datagram = packet.buffer.as_ref().len();
        if length as usize != datagram {
            return Err(Error::LengthMismatch { length, datagram });
        }
        let f = packet.flags();
        Ok(Repr {
            spi_i: packet.spi_i(),
            spi_r: packet.spi_r(),
            exchange_type: packet.exchange_type(),
            initiator: f & flags::INITIATOR != 0,
            response: f & flags::RESPONSE != 0,
            higher_version: f & flags::VERSION != 0,
            other_flags: f & !(flags::INITIATOR | flags::RESPONSE | flags::VERSION),
            minor_version: version & 0x0f,
            message_id: packet.message_id(),
        })
    }

    /// The flags octet this header sends.
    pub fn flags(&self) -> u8 {
        let mut f = self.other_flags & !(flags::INITIATOR | flags::RESPONSE | flags::VERSION);
        if self.initiator {
            f |= flags::INITIATOR;
        }
        if self.response {
            f |= flags::RESPONSE;
        }
        if self.higher_version {
            f |= flags::VERSION;
        }
        f
    }

    /// The length of the header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with the Next Payload and Length fields given (the message's).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
        next_payload: PayloadType,
        length: u32,
    ) -> Result<()> {
        packet.check_len()?;
        packet.set_spi_i(self.spi_i);
        packet.set_spi_r(self.spi_r);
        packet.set_next_payload(next_payload);
        packet.set_version(0x20 | (self.minor_version & 0x0f));
        packet.set_exchange_type(self.exchange_type);
        packet.set_flags(self.flags());
        packet.set_message_id(self.message_id);
        packet.set_length(length);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> [u8; 28] {
        let mut b = [0u8; 28];
        b[..8].copy_from_slice(&0x0102030405060708u64.to_be_bytes());
        b[16] = 33;
        b[17] = 0x20;
        b[18] = 34;
        b[19] = 0x08;
        b[27] = 28;
        b
    }

    #[test]
    fn round_trip() {
        let b = sample();
        let repr = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(repr.spi_i, 0x0102030405060708);
        assert_eq!(repr.exchange_type, ExchangeType::IKE_SA_INIT);
        assert!(repr.initiator && !repr.response);
        let mut out = [0u8; 28];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]), PayloadType::SA, 28).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn versions_and_lengths() {
        let mut b = sample();
        b[17] = 0x30;
        b[20..24].copy_from_slice(&7u32.to_be_bytes());
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..])),
            Err(Error::HigherMajorVersion {
                version: 0x30,
                spi_i: 0x0102030405060708,
                spi_r: 0,
                message_id: 7
            })
        );
        b[17] = 0x10;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..])),
            Err(Error::LowerMajorVersion { version: 0x10 })
        );
        let mut b = sample();
        b[27] = 27;
        assert_eq!(Repr::parse(&Packet::new_unchecked(&b[..])), Err(Error::MessageTooShort { length: 27 }));
        b[27] = 29;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..])),
            Err(Error::LengthMismatch { length: 29, datagram: 28 })
        );
        assert_eq!(
            Packet::new_checked(&b[..27]),
            Err(Error::Truncated { what: "IKE header", needed: 28, got: 27 })
        );
    }
}
