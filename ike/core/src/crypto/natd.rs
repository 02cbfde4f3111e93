//! NAT detection (RFC 7296 §2.23): the NAT_DETECTION_SOURCE_IP and
//! NAT_DETECTION_DESTINATION_IP notifies carry SHA-1(SPIi | SPIr | IP address | port),
//! hashed through ocf's digest mode.
//!
//! ```text
//!  sender:   source notify = hash(own address, own port)
//!            destination notify = hash(peer's address, peer's port)
//!  receiver: a destination hash ≠ hash(own address) → we are behind a NAT
//!            no source hash = hash(sender's address) → the peer is behind a NAT
//! ```
//!
//! In IKE_SA_INIT's request SPIr is zero. Addresses are 4 bytes (IPv4) or 16 (IPv6), the
//! port 2 bytes, all in network order.

use std::net::{IpAddr, SocketAddr};

use ocf::{DigestAlg, Framework};

use super::error::CryptoError;
use super::ops;

/// The length of a NAT detection hash (SHA-1).
pub const NATD_HASH_LEN: usize = 20;

/// SHA-1(SPIi | SPIr | address | port).
pub fn natd_hash(
    fw: &Framework,
    spi_i: &[u8; 8],
    spi_r: &[u8; 8],
    addr: SocketAddr,
) -> Result<[u8; NATD_HASH_LEN], CryptoError> {
    let mut data = Vec::with_capacity(16 + 16 + 2);
    data.extend_from_slice(spi_i);
    data.extend_from_slice(spi_r);
    match addr.ip() {
        IpAddr::V4(a) => data.extend_from_slice(&a.octets()),
        IpAddr::V6(a) => data.extend_from_slice(&a.octets()),
    }
    data.extend_from_slice(&addr.port().to_be_bytes());
    let d = ops::digest(fw, DigestAlg::Sha1, &data)?;
    let mut out = [0u8; NATD_HASH_LEN];
    if d.len() != NATD_HASH_LEN {
        return Err(CryptoError::Ocf(ocf::Error::DriverFailure("SHA-1 of the wrong length")));
    }
    out.copy_from_slice(&d);
    Ok(out)
}
