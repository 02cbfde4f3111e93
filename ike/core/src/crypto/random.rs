//! Nonces and SPIs, from ocf's random operation (its health-tested source on a device,
//! the kernel's on the CPU), so that IKE draws its randomness where ESP draws its IVs.
//!
//! - Nonces (RFC 7296 §2.10, §3.9): 16 to 256 bytes, and at least half the PRF's key
//!   size; [`DEFAULT_NONCE_LEN`] (32) unless asked otherwise.
//! - IKE SPIs (§3.1): 8 random bytes, never all zero (zero means "not yet known").

use ocf::Framework;

use super::error::CryptoError;
use super::ops;
use super::suite::Prf;

/// The nonce length used unless the caller asks for another: 32 bytes, at least half of
/// every supported PRF's key (SHA-512: 64) and twice RFC 7296's minimum.
pub const DEFAULT_NONCE_LEN: usize = 32;
/// The longest nonce RFC 7296 §3.9 allows.
pub const MAX_NONCE_LEN: usize = 256;

/// A nonce of `len` bytes for an SA whose PRF is `prf` (its minimum checked).
pub fn nonce(fw: &Framework, prf: Prf, len: usize) -> Result<Vec<u8>, CryptoError> {
    check_nonce(prf, len)?;
    let mut n = vec![0u8; len];
    ops::random(fw, &mut n)?;
    Ok(n)
}

/// Whether a nonce of `len` bytes is allowed with `prf` (also for a peer's nonce).
pub fn check_nonce(prf: Prf, len: usize) -> Result<(), CryptoError> {
    let min = prf.min_nonce_len();
    if len < min || len > MAX_NONCE_LEN {
        return Err(CryptoError::NonceLength { got: len, min, max: MAX_NONCE_LEN });
    }
    Ok(())
}

/// A new IKE SPI: 8 random bytes, not all zero.
pub fn ike_spi(fw: &Framework) -> Result<[u8; 8], CryptoError> {
    let mut spi = [0u8; 8];
    while spi == [0; 8] {
        ops::random(fw, &mut spi)?;
    }
    Ok(spi)
}
