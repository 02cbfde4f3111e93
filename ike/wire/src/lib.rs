//! # ike-wire — the IKEv2 message formats
//!
//! What iked reads from and writes to the network, with no cryptography and no state: the
//! IANA registries' numbers ([`ids`]) and, per format, a parse that checks every length
//! and an emit that writes what parse reads.
//!
//! - [`ids`]: the IKEv2 registries (RFC 7296 §3 and IANA's "Internet Key Exchange Version 2
//!   (IKEv2) Parameters"): exchange and payload types, transform types and IDs, protocol
//!   IDs, identification types, authentication methods, notify message types, traffic
//!   selector types, certificate encodings, RFC 7427's hash algorithms. Each is a newtype
//!   over its number, so that a value no registry names still parses (a peer may send one)
//!   and prints as its number.

#![forbid(unsafe_code)]

pub mod ids;
