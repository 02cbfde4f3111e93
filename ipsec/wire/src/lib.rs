//! # ipsec-wire — the packet formats Fast IPsec reads and writes
//!
//! Zero-copy views of packets in byte buffers with checked lengths, and the meaning of their
//! headers, parsed and emitted. The shape follows smoltcp's `wire` module: per format a
//! `Packet<T: AsRef<[u8]>>` view (`new_unchecked`, `new_checked` = `new_unchecked` +
//! `check_len`, getters, setters when `T: AsMut<[u8]>`) and a `Repr` with `parse`, `emit`,
//! `header_len` and `buffer_len`.
//!
//! - [`ipv4`]: RFC 791 header, options skipped by IHL, header checksum, fragments.
//! - [`ipv6`]: RFC 8200 fixed header and the walk along the extension headers (Hop-by-Hop,
//!   Routing, Fragment, Destination Options, AH) to ESP or the upper layer, bounded by
//!   [`ipv6::MAX_EXTENSION_HEADERS`], with the transport-mode ESP insertion point.
//! - [`ipv6_ext`]: views of those extension headers.
//! - [`esp`]: RFC 4303 header (SPI, sequence number) and the trailer (padding 1, 2, 3, …,
//!   Pad Length, Next Header): parsed after decryption, computed and written before
//!   encryption.
//! - [`ah`]: RFC 4302 header (SPI, sequence number, ICV field padded for IPv4 or IPv6).
//! - [`ah_icv`]: AH's ICV input: an IP packet with its mutable fields and options zeroed in
//!   place (the Routing header put as it will arrive).
//! - [`ipcomp`]: RFC 3173 header (Next Header, reserved Flags, CPI) in front of a
//!   compressed payload.
//! - [`udp`]: RFC 768 header and checksum over the IPv4 or IPv6 pseudo-header.
//! - [`tcp`]: the RFC 9293 header as far as merging a flow's segments needs it, and its
//!   checksum.
//! - [`virtio`]: the virtio-net header a Linux TUN with offloads puts before each packet.
//! - [`udp_encap`]: RFC 3948 — keepalive, IKE behind the Non-ESP Marker, or ESP on the
//!   encapsulation port (4500, or the one the caller names: [`EncapPort`]).
//! - [`icmp`]: the ICMP errors that carry a path MTU — ICMPv4 "fragmentation needed"
//!   (RFC 792, RFC 1191) and ICMPv6 Packet Too Big (RFC 4443) — parsed and emitted.
//! - [`ike_relay`]: the records ipsecd and a key manager exchange over the IKE relay
//!   socket — an IKE datagram with its local and remote address and port.
//! - [`checksum`]: the RFC 1071 Internet checksum.
//! - [`parse_any`]: from raw bytes to a [`Summary`] — version, addresses, the header after
//!   the IP headers and where it starts, fragment or not, ESP/UDP header and what an
//!   ESP-in-UDP payload is — for the core's dispatch and for fuzzing.
//!
//! Malformed input is an [`Error`] value, never a panic: `parse`, `check_len`,
//! `new_checked`, `walk_extension_headers`, `Trailer::parse`, `classify` and `parse_any` are
//! total, and every getter of a view that passed `check_len` is in bounds. Getters of a view
//! made with `new_unchecked` trust the caller, as in smoltcp.
//!
//! ```
//! use ipsec_wire::{esp, parse_any, IpProtocol, Upper};
//!
//! // IPv4 192.0.2.1 -> 198.51.100.2, ESP with SPI 0x1000 and sequence number 1, 4 bytes of
//! // ciphertext.
//! let packet = [
//!     0x45, 0x00, 0x00, 0x20, 0x00, 0x00, 0x40, 0x00, 0x40, 0x32, 0x4e, 0x75, 192, 0, 2, 1, 198, 51, 100, 2,
//!     0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef,
//! ];
//! let summary = parse_any(&packet)?;
//! assert_eq!(summary.protocol, IpProtocol::ESP);
//! assert_eq!(summary.offset, 20);
//! assert_eq!(summary.upper, Upper::Esp(esp::Repr { spi: 0x1000, sequence_number: 1 }));
//! # Ok::<(), ipsec_wire::Error>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod ah;
pub mod ah_icv;
mod bytes;
pub mod checksum;
mod error;
pub mod esp;
pub mod icmp;
pub mod ike_relay;
mod ip;
pub mod ipcomp;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6_ext;
mod summary;
pub mod tcp;
pub mod udp;
pub mod udp_encap;
pub mod virtio;

pub use error::{Error, Result};
pub use ip::{ChecksumPolicy, IpProtocol, PseudoHeader};
pub use summary::{
    destination, parse_any, parse_any_encap, parse_any_with, Encap, EncapPort, Summary, Upper,
};
