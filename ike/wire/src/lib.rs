//! # ike-wire — the IKEv2 message formats
//!
//! What iked reads from and writes to the network, with no cryptography and no state: the
//! IANA registries' numbers ([`ids`]) and, per format, a parse that checks every length
//! and an emit that writes what parse reads. The shape follows `ipsec-wire` (smoltcp's
//! `wire`): a checked `Packet<T>` view where a format sits at fixed offsets (the IKE header,
//! the generic payload header), and a `Repr` per payload with `parse`, `buffer_len` and
//! `emit` ([`Body`]).
//!
//! - [`ids`]: the IKEv2 registries (RFC 7296 §3 and IANA's "Internet Key Exchange Version 2
//!   (IKEv2) Parameters"): exchange and payload types, transform types and IDs, protocol
//!   IDs, identification types, authentication methods, notify message types, traffic
//!   selector types, certificate encodings, configuration types and attributes, RFC 7427's
//!   hash algorithms. Each is a newtype over its number, so that a value no registry names
//!   still parses (a peer may send one) and prints as its number.
//! - [`header`]: the 28-byte IKE header; the Length field against the datagram; major
//!   version 2, a higher one reported apart for INVALID_MAJOR_VERSION.
//! - [`payload`]: the generic payload header, the [`Walker`] along a payload chain (lengths
//!   adding up, SK/SKF last), and the [`Body`] trait of the payloads' `Repr`s.
//! - [`sa`]: SA — proposals, transforms, attributes (KEY_LENGTH in TV form).
//! - [`ke`]: KE — group and public value.
//! - [`id`]: IDi / IDr — type and data.
//! - [`cert`]: CERT / CERTREQ — encoding and data.
//! - [`auth`]: AUTH — method and data.
//! - [`nonce`]: Nonce — 16 to 256 bytes.
//! - [`notify`]: Notify — protocol, SPI, type, data; typed readers for NAT detection,
//!   COOKIE, REKEY_SA, SIGNATURE_HASH_ALGORITHMS, INVALID_KE_PAYLOAD, SET_WINDOW_SIZE.
//! - [`delete`]: Delete — protocol, SPI size, SPIs.
//! - [`ts`]: TSi / TSr — IPv4 and IPv6 address ranges with protocol and ports.
//! - [`cp`]: CP — configuration type and attributes.
//! - [`opaque`]: Vendor ID and EAP, whose bodies the codec does not read.
//! - [`encrypted`]: SK and SKF (RFC 7383) as framing: inner type, fragment numbers, the
//!   encrypted body; the plaintext's padding and Pad Length added ([`encrypted::pad`]) and
//!   taken off ([`encrypted::unpad`]).
//! - [`message`]: a whole [`Message`] (header + [`Payload`]s) and the inner chain of an SK
//!   payload ([`parse_chain`], [`emit_chain`]); unknown payloads skipped, or refused when
//!   critical. [`Message::aad_len`] gives the associated data of a received SK/SKF message.
//! - [`seal`]: [`Sealing`], a message laid out with its final lengths before its encrypted
//!   body is computed in place.
//! - [`fragment`]: cutting an SK plaintext into RFC 7383 fragments.
//!
//! Malformed input is an [`Error`] value, never a panic: every `parse` is total, and each
//! error names the payload, field and lengths at fault.
//!
//! ```
//! use ike_wire::ids::{ExchangeType, NotifyType, PayloadType};
//! use ike_wire::{header, Message, Payload, notify::Notify};
//!
//! let msg = Message {
//!     header: header::Repr {
//!         spi_i: 0x1122334455667788,
//!         spi_r: 0,
//!         exchange_type: ExchangeType::IKE_SA_INIT,
//!         initiator: false,
//!         response: true,
//!         higher_version: false,
//!         other_flags: 0,
//!         minor_version: 0,
//!         message_id: 0,
//!     },
//!     payloads: vec![Payload::Notify(Notify::new(NotifyType::COOKIE, vec![0xc0; 16]))],
//! };
//! let bytes = msg.to_bytes()?;
//! assert_eq!(bytes.len(), 28 + 4 + 4 + 16);
//! assert_eq!(bytes[16], PayloadType::NOTIFY.0);
//! assert_eq!(Message::parse(&bytes)?, msg);
//! # Ok::<(), ike_wire::Error>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
mod bytes;
pub mod cert;
pub mod cp;
pub mod delete;
pub mod encrypted;
mod error;
pub mod fragment;
pub mod header;
pub mod id;
pub mod ids;
pub mod ke;
pub mod message;
pub mod nonce;
pub mod notify;
pub mod opaque;
pub mod payload;
pub mod sa;
pub mod seal;
pub mod ts;

pub use error::{Error, Result};
pub use message::{chain_len, emit_chain, emit_chain_into, notifies, parse_chain, Message, Payload, Unknown};
pub use payload::{Body, RawPayload, Walker};
pub use seal::{Frame, Sealing};
