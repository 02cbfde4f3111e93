//! # ipsec-wire — the packet formats Fast IPsec reads and writes
//!
//! (Being written; see the modules.)

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bytes;
pub mod checksum;
mod error;
pub mod esp;
mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6_ext;
pub mod udp;
pub mod udp_encap;

pub use error::{Error, Result};
pub use ip::{ChecksumPolicy, IpProtocol, PseudoHeader};
