//! The one error type of the crate: every way a packet (or a buffer handed to `emit`) can be
//! wrong, one variant per cause, so that the IPsec core can count and log each separately.

use core::fmt;

/// What is wrong with a packet, or with a buffer given to an `emit` function.
///
/// Parsing never panics on malformed input: it answers one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer ends before the structure does: `needed` bytes were required, `got` were
    /// there. For `emit`, the output buffer is too small.
    Truncated {
        /// Bytes required.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
    /// The IP version nibble is not the one expected (for [`parse_any`](crate::parse_any):
    /// neither 4 nor 6).
    BadVersion(u8),
    /// The IPv4 Internet Header Length (in 32-bit words) is below 5.
    BadHeaderLen(u8),
    /// The IPv4 total length is shorter than the IPv4 header it belongs to.
    BadTotalLen(u16),
    /// The UDP length field is below the 8 bytes of the UDP header.
    BadUdpLen(u16),
    /// A header or UDP checksum does not verify.
    BadChecksum,
    /// A UDP datagram over IPv6 carries checksum 0, which IPv6 forbids (RFC 8200 §8.1).
    MissingUdpChecksum,
    /// An IPv4 fragment offset to emit is not a multiple of 8 bytes.
    BadFragmentOffset(u16),
    /// An IPv6 packet has more extension headers than [`ipv6::MAX_EXTENSION_HEADERS`](crate::ipv6::MAX_EXTENSION_HEADERS).
    TooManyExtensionHeaders,
    /// An IPv6 Hop-by-Hop Options header does not directly follow the fixed header
    /// (RFC 8200 §4.1).
    MisplacedHopByHop,
    /// An Authentication Header's Payload Len field gives a header shorter than its 12 fixed
    /// bytes, or (over IPv6) not a multiple of 8 bytes (RFC 4302 §2.2, §3.3.3.2.1).
    BadAhLen(u8),
    /// An IPv4 option or an IPv6 Hop-by-Hop / Destination option runs past its header, or an
    /// IPv4 option's length is below 2 (RFC 791 §3.1, RFC 8200 §4.2); `offset` is where the
    /// option starts, from the start of the packet. Found where AH walks the options to zero
    /// the mutable ones.
    BadOption {
        /// Where the option starts.
        offset: usize,
    },
    /// AH does not sit where it was looked for: an IPv4 packet whose protocol, or an IPv6
    /// chain whose first header after Hop-by-Hop, Routing, Fragment and Destination Options,
    /// is this other protocol.
    NotAh(u8),
    /// An IPv6 Routing header with segments left, of a type whose addresses AH cannot put
    /// in the order they arrive in (only types 0 and 2 have a plain address list).
    UnsupportedRouting(u8),
    /// An ESP or AH header carries SPI 0, which is reserved and never sent (RFC 4303 §2.1,
    /// RFC 4302 §2.4).
    ReservedSpi,
    /// The ESP padding bytes are not 1, 2, 3, … (RFC 4303 §2.4).
    BadPadding,
    /// The ESP Pad Length is larger than the decrypted data before it.
    PadTooLong,
    /// The ESP alignment asked of the trailer cannot be reached with at most 255 padding
    /// bytes (the block size is above 256).
    BadBlockSize(usize),
    /// A one-byte UDP payload on the NAT-T port is not the NAT-keepalive 0xFF (RFC 3948 §2.3).
    BadKeepalive(u8),
    /// The TCP Data Offset (in 32-bit words) is below 5, or the header it gives runs past
    /// the segment.
    BadTcpHeaderLen(u8),
    /// An ICMP message of another type or code than the path MTU errors
    /// ([`icmp`](crate::icmp): ICMPv4 3/4, ICMPv6 2).
    NotPathMtu {
        /// The ICMP type.
        msg_type: u8,
        /// The ICMP code.
        code: u8,
    },
    /// A length to emit does not fit its field: `got` is above `max`.
    TooLong {
        /// The most that fits.
        max: usize,
        /// The length asked for.
        got: usize,
    },
}

/// The result of every fallible function of this crate.
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Truncated { needed, got } => write!(f, "truncated: needed {needed} bytes, got {got}"),
            Error::BadVersion(v) => write!(f, "bad IP version {v}"),
            Error::BadHeaderLen(ihl) => write!(f, "bad IPv4 header length: IHL {ihl} (minimum 5)"),
            Error::BadTotalLen(len) => write!(f, "bad IPv4 total length {len}: shorter than the header"),
            Error::BadUdpLen(len) => write!(f, "bad UDP length {len}: shorter than the UDP header"),
            Error::BadChecksum => f.write_str("bad checksum"),
            Error::MissingUdpChecksum => f.write_str("UDP checksum 0 over IPv6"),
            Error::BadFragmentOffset(off) => {
                write!(f, "bad IPv4 fragment offset {off}: not a multiple of 8")
            }
            Error::TooManyExtensionHeaders => f.write_str("too many IPv6 extension headers"),
            Error::MisplacedHopByHop => {
                f.write_str("IPv6 Hop-by-Hop Options header not directly after the IPv6 header")
            }
            Error::BadAhLen(len) => write!(f, "bad AH payload length field {len}"),
            Error::BadOption { offset } => write!(f, "malformed IP option at byte {offset}"),
            Error::NotAh(p) => write!(f, "protocol {p} where AH was expected"),
            Error::UnsupportedRouting(t) => {
                write!(f, "IPv6 routing header type {t} with segments left: AH cannot predict it")
            }
            Error::ReservedSpi => f.write_str("SPI 0 is reserved"),
            Error::BadPadding => f.write_str("bad ESP padding: bytes are not 1, 2, 3, ..."),
            Error::PadTooLong => f.write_str("ESP pad length longer than the decrypted data"),
            Error::BadBlockSize(b) => write!(f, "ESP block size {b} cannot be padded to (maximum 256)"),
            Error::BadKeepalive(b) => write!(f, "one-byte NAT-T payload {b:#04x} is not a keepalive (0xff)"),
            Error::BadTcpHeaderLen(off) => {
                write!(f, "bad TCP data offset {off}: below 5 words or past the segment")
            }
            Error::NotPathMtu { msg_type, code } => {
                write!(f, "ICMP type {msg_type} code {code} is not a path MTU error")
            }
            Error::TooLong { max, got } => write!(f, "too long: {got} bytes, at most {max} fit"),
        }
    }
}

impl std::error::Error for Error {}

/// Checks that `buf` holds at least `needed` bytes.
pub(crate) fn need(buf: &[u8], needed: usize) -> Result<()> {
    if buf.len() < needed {
        Err(Error::Truncated { needed, got: buf.len() })
    } else {
        Ok(())
    }
}
