//! The IKE relay's records: what ipsecd and a key manager (`iked`) exchange over the relay
//! socket, a Unix SOCK_SEQPACKET socket on which one record is one IKE datagram.
//!
//! ipsecd owns UDP 500 and the NAT-T port; the key manager, a process of its own, parses
//! IKE. Every IKE datagram that arrives goes to it as a record with the addresses and ports
//! it came with; every record the key manager sends back leaves as a datagram from the
//! local address and port it names (ipsecd's daemon side: `ipsecd::ike_relay`).
//!
//! ```text
//!  0               1               2               3
//!  +---------------+---------------+---------------+---------------+
//!  |  version (1)  |     kind      |     flags     |  reserved (0) |
//!  +---------------+---------------+---------------+---------------+
//!  |          local port           |          remote port          |
//!  +---------------+---------------+---------------+---------------+
//!  |      local address (16 bytes; IPv4: the first 4, then zeros)  |
//!  +---------------+---------------+---------------+---------------+
//!  |      remote address (16 bytes; IPv4: the first 4, then zeros) |
//!  +---------------+---------------+---------------+---------------+   40 bytes
//!  |  the IKE message (kind 4 or 6), without the Non-ESP Marker;   |
//!  |  or the reason, in UTF-8 (kind 0x81), addresses and ports 0   |
//!  +---------------------------------------------------------------+
//! ```
//!
//! - kind: 4 an IKE datagram over IPv4, 6 over IPv6; 0x80 `attached` and 0x81 `refused`,
//!   the first record ipsecd sends on each connection (a key manager is attached, or
//!   refused with a reason: one is attached already).
//! - flags: [`FLAG_NAT_T`] — the datagram arrived on (ipsecd → key manager), or is to leave
//!   from (key manager → ipsecd), the NAT-T port, where IKE travels behind the 4-byte
//!   Non-ESP Marker (RFC 3948 §2.2). The record never holds the marker: ipsecd takes it off
//!   and puts it back.
//! - Ports and addresses in network byte order; "local" is ipsecd's side whichever way the
//!   record goes, so an answer is the question's header with nothing swapped.
//!
//! [`decode`] is total: a record that is short, of another version or kind, with unknown
//! flags, non-zero reserved bytes or padding, a zero port or no message is refused with an
//! [`Error`] that names the cause (ipsecd counts each), never a panic. [`encode`] refuses
//! what `decode` would.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The format's version, the record's first byte.
pub const VERSION: u8 = 1;
/// The fixed header in front of every record's message.
pub const HEADER_LEN: usize = 40;
/// The flag of a datagram that arrived on, or is to leave from, the NAT-T port (behind the
/// Non-ESP Marker on the wire).
pub const FLAG_NAT_T: u8 = 0x01;
/// The longest IKE message a record carries: the largest UDP payload over IPv4 (65,507
/// bytes) less the Non-ESP Marker, so that any record fits a datagram from either port.
pub const MAX_MESSAGE: usize = 65_507 - 4;
/// The longest record: the header and the longest message.
pub const MAX_RECORD: usize = HEADER_LEN + MAX_MESSAGE;

const KIND_V4: u8 = 4;
const KIND_V6: u8 = 6;
const KIND_ATTACHED: u8 = 0x80;
const KIND_REFUSED: u8 = 0x81;

/// One IKE datagram and where it came from or is to go.
#[derive(Clone, PartialEq, Eq)]
pub struct Datagram {
    /// ipsecd's address and port: where it arrived, or where it is to leave from.
    pub local: SocketAddr,
    /// The peer's address and port.
    pub remote: SocketAddr,
    /// On the NAT-T port (behind the Non-ESP Marker on the wire, never in `bytes`).
    pub nat_t: bool,
    /// The IKE message.
    pub bytes: Vec<u8>,
}

impl fmt::Debug for Datagram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Datagram {{ local: {}, remote: {}, nat_t: {}, {} bytes }}",
            self.local,
            self.remote,
            self.nat_t,
            self.bytes.len()
        )
    }
}

/// A record of the relay socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// An IKE datagram, either way.
    Datagram(Datagram),
    /// ipsecd's first record on a connection: this key manager is attached.
    Attached,
    /// ipsecd's first (and only) record on a connection it refuses, and why.
    Refused(String),
}

/// Why a record was refused: one variant per cause (ipsecd counts each under
/// [`Error::name`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Shorter than the header (its length).
    Truncated(usize),
    /// Longer than [`MAX_RECORD`] (its length, or more where the reader cut it).
    TooLong(usize),
    /// Another version of the format.
    Version(u8),
    /// An unknown kind.
    Kind(u8),
    /// Flags this version does not define.
    Flags(u8),
    /// The reserved byte, or the bytes an IPv4 address leaves in its field, not zero.
    Padding,
    /// A datagram with port 0 on either side.
    ZeroPort,
    /// A datagram without a message.
    Empty,
    /// A datagram whose two addresses are of different families (encode only).
    Families,
    /// A status record (attached, refused) whose addresses, ports or flags are not zero,
    /// or whose reason is not UTF-8.
    Status,
}

impl Error {
    /// Every cause, for counters that list them all.
    pub const ALL: [Error; 10] = [
        Error::Truncated(0),
        Error::TooLong(0),
        Error::Version(0),
        Error::Kind(0),
        Error::Flags(0),
        Error::Padding,
        Error::ZeroPort,
        Error::Empty,
        Error::Families,
        Error::Status,
    ];

    /// The cause's name, for counters and logs.
    pub fn name(self) -> &'static str {
        match self {
            Error::Truncated(_) => "truncated",
            Error::TooLong(_) => "too_long",
            Error::Version(_) => "version",
            Error::Kind(_) => "kind",
            Error::Flags(_) => "flags",
            Error::Padding => "padding",
            Error::ZeroPort => "zero_port",
            Error::Empty => "empty",
            Error::Families => "families",
            Error::Status => "status",
        }
    }

    /// The cause's index in [`Error::ALL`].
    pub fn index(self) -> usize {
        match self {
            Error::Truncated(_) => 0,
            Error::TooLong(_) => 1,
            Error::Version(_) => 2,
            Error::Kind(_) => 3,
            Error::Flags(_) => 4,
            Error::Padding => 5,
            Error::ZeroPort => 6,
            Error::Empty => 7,
            Error::Families => 8,
            Error::Status => 9,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated(n) => {
                write!(f, "a record of {n} bytes, shorter than the {HEADER_LEN}-byte header")
            }
            Error::TooLong(n) => write!(f, "a record of {n} bytes, longer than {MAX_RECORD}"),
            Error::Version(v) => write!(f, "record version {v}, not {VERSION}"),
            Error::Kind(k) => write!(f, "unknown record kind {k}"),
            Error::Flags(x) => write!(f, "unknown flags 0x{x:02x}"),
            Error::Padding => write!(f, "non-zero reserved or padding bytes"),
            Error::ZeroPort => write!(f, "a datagram with port 0"),
            Error::Empty => write!(f, "a datagram without a message"),
            Error::Families => write!(f, "a datagram whose addresses are of two families"),
            Error::Status => write!(f, "a status record with addresses, ports, flags or a reason not UTF-8"),
        }
    }
}

impl std::error::Error for Error {}

/// A datagram's header, for a writer that sends the message from its own buffer behind it
/// (ipsecd: two I/O vectors, no copy). The same checks as [`encode`].
pub fn header(d: &Datagram) -> Result<[u8; HEADER_LEN], Error> {
    header_of(d.local, d.remote, d.nat_t, d.bytes.len())
}

/// The header of a datagram of `len` bytes (see [`header`]).
pub fn header_of(
    local: SocketAddr,
    remote: SocketAddr,
    nat_t: bool,
    len: usize,
) -> Result<[u8; HEADER_LEN], Error> {
    if len == 0 {
        return Err(Error::Empty);
    }
    if len > MAX_MESSAGE {
        return Err(Error::TooLong(HEADER_LEN + len));
    }
    if local.port() == 0 || remote.port() == 0 {
        return Err(Error::ZeroPort);
    }
    let kind = match (local.ip(), remote.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => KIND_V4,
        (IpAddr::V6(_), IpAddr::V6(_)) => KIND_V6,
        _ => return Err(Error::Families),
    };
    let mut h = [0u8; HEADER_LEN];
    h[0] = VERSION;
    h[1] = kind;
    h[2] = if nat_t { FLAG_NAT_T } else { 0 };
    h[4..6].copy_from_slice(&local.port().to_be_bytes());
    h[6..8].copy_from_slice(&remote.port().to_be_bytes());
    put_addr(&mut h[8..24], local.ip());
    put_addr(&mut h[24..40], remote.ip());
    Ok(h)
}

fn put_addr(field: &mut [u8], a: IpAddr) {
    match a {
        IpAddr::V4(a) => field[..4].copy_from_slice(&a.octets()),
        IpAddr::V6(a) => field.copy_from_slice(&a.octets()),
    }
}

/// The record's bytes.
pub fn encode(r: &Record) -> Result<Vec<u8>, Error> {
    match r {
        Record::Datagram(d) => {
            let mut out = Vec::with_capacity(HEADER_LEN + d.bytes.len());
            out.extend_from_slice(&header(d)?);
            out.extend_from_slice(&d.bytes);
            Ok(out)
        }
        Record::Attached => Ok(status(KIND_ATTACHED, "")),
        Record::Refused(why) => {
            if HEADER_LEN + why.len() > MAX_RECORD {
                return Err(Error::TooLong(HEADER_LEN + why.len()));
            }
            Ok(status(KIND_REFUSED, why))
        }
    }
}

fn status(kind: u8, why: &str) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_LEN];
    out[0] = VERSION;
    out[1] = kind;
    out.extend_from_slice(why.as_bytes());
    out
}

/// The record in `b` (one whole SOCK_SEQPACKET record), or why it is refused.
pub fn decode(b: &[u8]) -> Result<Record, Error> {
    if b.len() < HEADER_LEN {
        return Err(Error::Truncated(b.len()));
    }
    if b.len() > MAX_RECORD {
        return Err(Error::TooLong(b.len()));
    }
    if b[0] != VERSION {
        return Err(Error::Version(b[0]));
    }
    let (kind, flags) = (b[1], b[2]);
    if b[3] != 0 {
        return Err(Error::Padding);
    }
    let body = &b[HEADER_LEN..];
    match kind {
        KIND_ATTACHED | KIND_REFUSED => {
            if b[2..HEADER_LEN].iter().any(|&x| x != 0) {
                return Err(Error::Status);
            }
            if kind == KIND_ATTACHED {
                return if body.is_empty() { Ok(Record::Attached) } else { Err(Error::Status) };
            }
            std::str::from_utf8(body).map(|s| Record::Refused(s.to_owned())).map_err(|_| Error::Status)
        }
        KIND_V4 | KIND_V6 => {
            if flags & !FLAG_NAT_T != 0 {
                return Err(Error::Flags(flags));
            }
            let port = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
            let (lport, rport) = (port(4), port(6));
            if lport == 0 || rport == 0 {
                return Err(Error::ZeroPort);
            }
            let addr = |field: &[u8]| -> Result<IpAddr, Error> {
                if kind == KIND_V4 {
                    if field[4..].iter().any(|&x| x != 0) {
                        return Err(Error::Padding);
                    }
                    Ok(IpAddr::V4(Ipv4Addr::new(field[0], field[1], field[2], field[3])))
                } else {
                    let mut o = [0u8; 16];
                    o.copy_from_slice(field);
                    Ok(IpAddr::V6(Ipv6Addr::from(o)))
                }
            };
            let local = SocketAddr::new(addr(&b[8..24])?, lport);
            let remote = SocketAddr::new(addr(&b[24..40])?, rport);
            if body.is_empty() {
                return Err(Error::Empty);
            }
            Ok(Record::Datagram(Datagram {
                local,
                remote,
                nat_t: flags & FLAG_NAT_T != 0,
                bytes: body.to_vec(),
            }))
        }
        other => Err(Error::Kind(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4() -> Datagram {
        Datagram {
            local: "192.0.2.1:500".parse().unwrap(),
            remote: "198.51.100.7:4501".parse().unwrap(),
            nat_t: false,
            bytes: vec![0xab; 28],
        }
    }

    fn v6() -> Datagram {
        Datagram {
            local: "[2001:db8::1]:4500".parse().unwrap(),
            remote: "[2001:db8::2]:61000".parse().unwrap(),
            nat_t: true,
            bytes: (0..=255).collect(),
        }
    }

    /// The header's bytes where the drawing in the module doc puts them.
    #[test]
    fn the_header_is_laid_out_as_drawn() {
        let b = encode(&Record::Datagram(v4())).unwrap();
        let mut want = vec![1, 4, 0, 0, 0x01, 0xf4, 0x11, 0x95, 192, 0, 2, 1];
        want.extend_from_slice(&[0; 12]);
        want.extend_from_slice(&[198, 51, 100, 7]);
        want.extend_from_slice(&[0; 12]);
        assert_eq!(&b[..HEADER_LEN], &want[..]);
        assert_eq!(&b[HEADER_LEN..], &[0xab; 28][..]);
        let b = encode(&Record::Datagram(v6())).unwrap();
        assert_eq!(&b[..8], &[1, 6, FLAG_NAT_T, 0, 0x11, 0x94, 0xee, 0x48]);
        assert_eq!(&b[8..24], &"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        assert_eq!(&b[24..40], &"2001:db8::2".parse::<Ipv6Addr>().unwrap().octets());
    }

    #[test]
    fn every_record_decodes_to_what_was_encoded() {
        for r in [
            Record::Datagram(v4()),
            Record::Datagram(v6()),
            Record::Attached,
            Record::Refused("another key manager is attached".into()),
            Record::Datagram(Datagram { bytes: vec![7; MAX_MESSAGE], ..v4() }),
        ] {
            assert_eq!(decode(&encode(&r).unwrap()), Ok(r));
        }
    }

    #[test]
    fn a_bad_record_is_refused_naming_its_cause() {
        let good = encode(&Record::Datagram(v4())).unwrap();
        let with = |at: usize, v: u8| {
            let mut b = good.clone();
            b[at] = v;
            decode(&b)
        };
        assert_eq!(decode(&good[..39]), Err(Error::Truncated(39)));
        assert_eq!(decode(&[]), Err(Error::Truncated(0)));
        assert_eq!(decode(&good[..HEADER_LEN]), Err(Error::Empty));
        assert_eq!(decode(&vec![0; MAX_RECORD + 1]), Err(Error::TooLong(MAX_RECORD + 1)));
        assert_eq!(with(0, 2), Err(Error::Version(2)));
        assert_eq!(with(1, 5), Err(Error::Kind(5)));
        assert_eq!(with(2, 0x02), Err(Error::Flags(0x02)));
        assert_eq!(with(3, 1), Err(Error::Padding));
        // An IPv4 address's field padded with anything but zeros.
        assert_eq!(with(12, 1), Err(Error::Padding));
        assert_eq!(with(39, 1), Err(Error::Padding));
        let mut b = good.clone();
        b[4..6].copy_from_slice(&[0, 0]);
        assert_eq!(decode(&b), Err(Error::ZeroPort));
        let mut b = good.clone();
        b[6..8].copy_from_slice(&[0, 0]);
        assert_eq!(decode(&b), Err(Error::ZeroPort));
        // Status records: nothing but zeros where a datagram has its header, UTF-8 reasons.
        let attached = encode(&Record::Attached).unwrap();
        let mut b = attached.clone();
        b[5] = 1;
        assert_eq!(decode(&b), Err(Error::Status));
        let mut b = attached.clone();
        b.push(b'x');
        assert_eq!(decode(&b), Err(Error::Status));
        let mut b = encode(&Record::Refused(String::new())).unwrap();
        b.push(0xff);
        assert_eq!(decode(&b), Err(Error::Status));
    }

    #[test]
    fn encode_refuses_what_decode_would() {
        let d = v4();
        assert_eq!(encode(&Record::Datagram(Datagram { bytes: vec![], ..d.clone() })), Err(Error::Empty));
        assert_eq!(
            encode(&Record::Datagram(Datagram { bytes: vec![0; MAX_MESSAGE + 1], ..d.clone() })),
            Err(Error::TooLong(MAX_RECORD + 1))
        );
        assert_eq!(
            encode(&Record::Datagram(Datagram { remote: "198.51.100.7:0".parse().unwrap(), ..d.clone() })),
            Err(Error::ZeroPort)
        );
        assert_eq!(encode(&Record::Datagram(Datagram { remote: v6().remote, ..d })), Err(Error::Families));
    }

    #[test]
    fn each_cause_has_its_own_index_and_name() {
        for (i, e) in Error::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
            assert_eq!(Error::ALL.iter().filter(|o| o.name() == e.name()).count(), 1);
        }
    }
}
