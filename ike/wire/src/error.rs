//! The one error type of the crate: every way an IKEv2 message (or a buffer handed to an
//! `emit`) can be wrong, one variant per cause, each naming the payload, the field and the
//! lengths involved, so that iked can log it, count it, and answer the notify RFC 7296 asks
//! for (INVALID_MAJOR_VERSION, UNSUPPORTED_CRITICAL_PAYLOAD, INVALID_SYNTAX).

use std::fmt;

use crate::ids::{NotifyType, PayloadType};

/// What is wrong with a message, or with a buffer or value given to an `emit` function.
///
/// Parsing never panics on malformed input: it answers one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// A structure ends before its fixed fields do: `what` (the IKE header, a payload's
    /// body, a proposal, a transform, an attribute, a traffic selector…) needed `needed`
    /// bytes and had `got`. For `emit`, the output buffer is too small.
    Truncated {
        /// The structure.
        what: &'static str,
        /// Bytes required.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
    /// The IKE header's Length field is below the 28 bytes of the header itself.
    MessageTooShort {
        /// The Length field.
        length: u32,
    },
    /// The IKE header's Length field is not the datagram's length.
    LengthMismatch {
        /// The Length field.
        length: u32,
        /// The bytes received.
        datagram: usize,
    },
    /// The major version is above 2: the message must be dropped, and RFC 7296 §2.5 says
    /// to answer INVALID_MAJOR_VERSION, with the SPIs and Message ID carried here.
    HigherMajorVersion {
        /// The version octet (major in the high nibble).
        version: u8,
        /// The initiator's SPI of the message.
        spi_i: u64,
        /// The responder's SPI of the message.
        spi_r: u64,
        /// The Message ID of the message.
        message_id: u32,
    },
    /// The major version is below 2 (IKEv1 is 1): not an IKEv2 message, dropped.
    LowerMajorVersion {
        /// The version octet.
        version: u8,
    },
    /// A payload's Length field is below its 4-byte generic header.
    PayloadTooShort {
        /// The payload.
        payload: PayloadType,
        /// The Length field.
        length: u16,
    },
    /// A payload's Length field runs past the end of the chain it is in.
    PayloadOverrun {
        /// The payload.
        payload: PayloadType,
        /// The Length field.
        length: u16,
        /// The bytes left in the chain from the payload's start.
        remaining: usize,
    },
    /// Bytes follow the last payload of a chain (Next Payload 0, or the SK/SKF payload,
    /// which must be last).
    TrailingBytes {
        /// The last payload.
        after: PayloadType,
        /// How many bytes follow it.
        extra: usize,
    },
    /// A payload of a type this codec does not know has its critical bit set: RFC 7296
    /// §2.5 says to reject the message with UNSUPPORTED_CRITICAL_PAYLOAD, whose data is
    /// this type's one octet.
    UnsupportedCriticalPayload {
        /// The unknown payload type.
        payload: PayloadType,
    },
    /// A substructure's length field (proposal, transform, TLV attribute, traffic selector,
    /// configuration attribute) is below its fixed part or runs past its container.
    SubstructureLength {
        /// The substructure.
        what: &'static str,
        /// The length field, or for a TLV attribute its value length.
        length: usize,
        /// The bytes left in the container from the substructure's start.
        remaining: usize,
    },
    /// A "Last Substructure" field is neither the "more follow" value nor 0, or says "last"
    /// before the end of the container, or "more" at its end (RFC 7296 §3.3.1, §3.3.2).
    LastSubstructure {
        /// Proposal (0 or 2) or transform (0 or 3).
        what: &'static str,
        /// The field.
        value: u8,
    },
    /// A proposal's "# of Transforms" field disagrees with the transforms it holds.
    TransformCount {
        /// The Proposal Num.
        proposal: u8,
        /// The field.
        declared: u8,
        /// The transforms found.
        found: usize,
    },
    /// A Nonce's data is outside 16 to 256 bytes (RFC 7296 §3.9).
    NonceLength(usize),
    /// A Delete payload's SPIs do not fill its body: `count` SPIs of `spi_size` bytes in
    /// `remaining` bytes.
    DeleteSpis {
        /// SPI Size.
        spi_size: u8,
        /// Num of SPIs.
        count: u16,
        /// Bytes after the fixed fields.
        remaining: usize,
    },
    /// A Traffic Selector payload's "Number of TSs" disagrees with the selectors it holds.
    TsCount {
        /// The field.
        declared: u8,
        /// The selectors found.
        found: usize,
    },
    /// A traffic selector's length does not match its type's (16 for IPv4, 40 for IPv6).
    TsLength {
        /// The selector type.
        ts_type: u8,
        /// Its Selector Length field.
        length: u16,
    },
    /// A notify's data is not the length its type carries (e.g. 20 bytes for
    /// NAT_DETECTION_*_IP, 2 for INVALID_KE_PAYLOAD).
    NotifyDataLength {
        /// The notify type.
        notify: NotifyType,
        /// What the type carries (for a list, its element size: the data is a multiple).
        expected: usize,
        /// The data's length.
        got: usize,
    },
    /// An SPI is not the length its field or use requires (a REKEY_SA notify's 4 bytes, a
    /// Delete payload's SPI Size).
    SpiLength {
        /// Where.
        what: &'static str,
        /// The length required.
        expected: usize,
        /// The SPI's length.
        got: usize,
    },
    /// A traffic selector of a type other than TS_IPV4_ADDR_RANGE (7) and
    /// TS_IPV6_ADDR_RANGE (8): its layout is unknown, so the payload cannot be read.
    UnknownTsType(u8),
    /// A traffic selector to emit whose start and end addresses are of different families.
    TsFamilies,
    /// A typed notify accessor was asked of a notify of another type.
    WrongNotify {
        /// The type the accessor reads.
        expected: NotifyType,
        /// The notify's type.
        got: NotifyType,
    },
    /// An SKF payload's Fragment Number is 0 or above Total Fragments, or Total Fragments
    /// is 0 (RFC 7383 §2.5).
    FragmentNumber {
        /// Fragment Number.
        number: u16,
        /// Total Fragments.
        total: u16,
    },
    /// A value to emit does not fit its length field: `got` is above `max`.
    TooLong {
        /// The field.
        what: &'static str,
        /// The most that fits.
        max: usize,
        /// The length asked for.
        got: usize,
    },
    /// An attribute in TV form (attribute format bit set) whose value to emit is not the
    /// 2 bytes that form holds.
    TvValueLength {
        /// The attribute type.
        attribute: u16,
        /// The value's length.
        got: usize,
    },
    /// A decrypted SK or SKF plaintext whose Pad Length is longer than the bytes before it.
    PadLength {
        /// The Pad Length byte.
        pad_length: u8,
        /// The plaintext's length, Pad Length included.
        plaintext: usize,
    },
    /// An SK or SKF payload to emit is not the last of its chain (RFC 7296 §3.14).
    EncryptedNotLast,
    /// Splitting into fragments was asked with a fragment size of 0.
    ZeroFragmentSize,
}

/// The result of every fallible function of this crate.
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Truncated { what, needed, got } => {
                write!(f, "{what} truncated: needed {needed} bytes, got {got}")
            }
            Error::MessageTooShort { length } => {
                write!(f, "IKE header length {length} is below the 28-byte header")
            }
            Error::LengthMismatch { length, datagram } => {
                write!(f, "IKE header length {length} but the datagram has {datagram} bytes")
            }
            Error::HigherMajorVersion { version, .. } => {
                write!(f, "IKE major version {} is above 2", version >> 4)
            }
            Error::LowerMajorVersion { version } => {
                write!(f, "IKE major version {} is below 2", version >> 4)
            }
            Error::PayloadTooShort { payload, length } => {
                write!(f, "{payload} payload length {length} is below its 4-byte header")
            }
            Error::PayloadOverrun { payload, length, remaining } => {
                write!(f, "{payload} payload length {length} runs past the {remaining} bytes left")
            }
            Error::TrailingBytes { after, extra } => {
                write!(f, "{extra} bytes after the last payload ({after})")
            }
            Error::UnsupportedCriticalPayload { payload } => {
                write!(f, "unknown payload type {} with the critical bit set", payload.0)
            }
            Error::SubstructureLength { what, length, remaining } => {
                write!(f, "{what} length {length} is below its fixed part or past the {remaining} bytes left")
            }
            Error::LastSubstructure { what, value } => {
                write!(f, "{what}: bad Last Substructure field {value}")
            }
            Error::TransformCount { proposal, declared, found } => {
                write!(f, "proposal {proposal} declares {declared} transforms and holds {found}")
            }
            Error::NonceLength(len) => write!(f, "nonce of {len} bytes: RFC 7296 allows 16 to 256"),
            Error::DeleteSpis { spi_size, count, remaining } => {
                write!(f, "Delete: {count} SPIs of {spi_size} bytes do not fill {remaining} bytes")
            }
            Error::TsCount { declared, found } => {
                write!(f, "traffic selector payload declares {declared} selectors and holds {found}")
            }
            Error::TsLength { ts_type, length } => {
                write!(f, "traffic selector of type {ts_type} with length {length}")
            }
            Error::NotifyDataLength { notify, expected, got } => {
                write!(f, "{notify} notify data of {got} bytes, expected {expected}")
            }
            Error::SpiLength { what, expected, got } => {
                write!(f, "{what}: SPI of {got} bytes, expected {expected}")
            }
            Error::UnknownTsType(t) => write!(f, "unknown traffic selector type {t}"),
            Error::TsFamilies => f.write_str("traffic selector mixes IPv4 and IPv6 addresses"),
            Error::WrongNotify { expected, got } => write!(f, "{got} notify read as {expected}"),
            Error::FragmentNumber { number, total } => {
                write!(f, "SKF fragment {number} of {total}")
            }
            Error::TooLong { what, max, got } => {
                write!(f, "{what} too long: {got} bytes, at most {max} fit")
            }
            Error::TvValueLength { attribute, got } => {
                write!(f, "TV attribute {attribute} with a {got}-byte value (TV holds 2)")
            }
            Error::PadLength { pad_length, plaintext } => {
                write!(f, "SK Pad Length {pad_length} in a plaintext of {plaintext} bytes")
            }
            Error::EncryptedNotLast => f.write_str("SK or SKF payload not last in its message"),
            Error::ZeroFragmentSize => f.write_str("fragment size 0"),
        }
    }
}

impl std::error::Error for Error {}
