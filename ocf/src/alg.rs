//! Algorithm identifiers and their fixed properties (key, IV, block and output sizes).
//!
//! ocf implements no algorithm itself; these enums only name what a session asks a driver
//! for, and carry the size facts that the framework needs to validate sessions and requests
//! in one place ([`crate::SessionParams::validate`], [`crate::Request`] checks).

use std::fmt;

/// A cipher, or the cipher half of an AEAD.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CipherAlg {
    /// AES in CBC mode (RFC 3602 as ESP uses it); key 16, 24 or 32 bytes.
    AesCbc,
    /// AES in counter mode; the 16-byte IV is the initial counter block, incremented as a
    /// 128-bit big-endian integer (NIST SP 800-38A).
    AesCtr,
    /// Triple DES (EDE, three keys) in CBC mode; key 24 bytes.
    TdesCbc,
    /// The NULL cipher of RFC 2410: output equals input. Any key length (usually none).
    Null,
    /// AES-GCM (NIST SP 800-38D); AEAD only; key 16, 24 or 32 bytes, 12-byte nonce.
    AesGcm,
    /// ChaCha20-Poly1305 (RFC 8439); AEAD only; key 32 bytes, 12-byte nonce.
    ChaCha20Poly1305,
}

impl CipherAlg {
    /// Every cipher, for drivers and tools that iterate.
    pub const ALL: [CipherAlg; 6] = [
        CipherAlg::AesCbc,
        CipherAlg::AesCtr,
        CipherAlg::TdesCbc,
        CipherAlg::Null,
        CipherAlg::AesGcm,
        CipherAlg::ChaCha20Poly1305,
    ];

    /// Whether this is an AEAD (usable only in [`crate::Mode::Aead`]).
    pub fn is_aead(self) -> bool {
        matches!(self, CipherAlg::AesGcm | CipherAlg::ChaCha20Poly1305)
    }

    /// The key lengths the algorithm defines; `None` means any length is acceptable.
    pub fn key_lens(self) -> Option<&'static [usize]> {
        match self {
            CipherAlg::AesCbc | CipherAlg::AesCtr | CipherAlg::AesGcm => Some(&[16, 24, 32]),
            CipherAlg::TdesCbc => Some(&[24]),
            CipherAlg::ChaCha20Poly1305 => Some(&[32]),
            CipherAlg::Null => None,
        }
    }

    /// Length of the IV (or AEAD nonce) a request must carry.
    pub fn iv_len(self) -> usize {
        match self {
            CipherAlg::AesCbc | CipherAlg::AesCtr => 16,
            CipherAlg::TdesCbc => 8,
            CipherAlg::Null => 0,
            CipherAlg::AesGcm | CipherAlg::ChaCha20Poly1305 => 12,
        }
    }

    /// Payload lengths must be a multiple of this (1 for stream modes and AEADs).
    pub fn block_len(self) -> usize {
        match self {
            CipherAlg::AesCbc => 16,
            CipherAlg::TdesCbc => 8,
            _ => 1,
        }
    }

    /// Tag lengths an AEAD accepts (empty for plain ciphers).
    pub fn tag_lens(self) -> &'static [usize] {
        match self {
            // Truncated GCM tags (RFC 4106's 8 and 12) are not offered: the libraries the
            // soft driver measured fastest verify full 16-byte tags only.
            CipherAlg::AesGcm | CipherAlg::ChaCha20Poly1305 => &[16],
            _ => &[],
        }
    }
}

/// A plain (unkeyed) digest.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DigestAlg {
    Md5,
    Sha1,
    Sha256,
    Sha384,
    Sha512,
}

impl DigestAlg {
    pub const ALL: [DigestAlg; 5] =
        [DigestAlg::Md5, DigestAlg::Sha1, DigestAlg::Sha256, DigestAlg::Sha384, DigestAlg::Sha512];

    /// Output length in bytes.
    pub fn output_len(self) -> usize {
        match self {
            DigestAlg::Md5 => 16,
            DigestAlg::Sha1 => 20,
            DigestAlg::Sha256 => 32,
            DigestAlg::Sha384 => 48,
            DigestAlg::Sha512 => 64,
        }
    }

    /// Internal block length in bytes (HMAC pads keys to this).
    pub fn block_len(self) -> usize {
        match self {
            DigestAlg::Md5 | DigestAlg::Sha1 | DigestAlg::Sha256 => 64,
            DigestAlg::Sha384 | DigestAlg::Sha512 => 128,
        }
    }
}

/// A message authentication code. Only HMAC today; the enum leaves room for CMAC/GMAC.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MacAlg {
    /// HMAC (RFC 2104) over the given digest.
    Hmac(DigestAlg),
}

impl MacAlg {
    pub const ALL: [MacAlg; 5] = [
        MacAlg::Hmac(DigestAlg::Md5),
        MacAlg::Hmac(DigestAlg::Sha1),
        MacAlg::Hmac(DigestAlg::Sha256),
        MacAlg::Hmac(DigestAlg::Sha384),
        MacAlg::Hmac(DigestAlg::Sha512),
    ];

    /// Full (untruncated) output length.
    pub fn output_len(self) -> usize {
        match self {
            MacAlg::Hmac(d) => d.output_len(),
        }
    }

    /// The shortest truncation accepted. RFC 2104 §5 advises at least half the output and
    /// not less than 80 bits; ESP's HMAC-SHA1-96 and HMAC-MD5-96 use 12 bytes.
    pub fn min_output_len(self) -> usize {
        (self.output_len() / 2).max(10)
    }
}

/// A lossless compression algorithm ([`crate::Mode::Compress`]).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompAlg {
    /// Raw DEFLATE (RFC 1951): no zlib or gzip wrapper, as IPComp's DEFLATE (RFC 3174 §2)
    /// carries it. The compression level is the driver's choice.
    Deflate,
}

impl CompAlg {
    pub const ALL: [CompAlg; 1] = [CompAlg::Deflate];
}

impl fmt::Display for CompAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompAlg::Deflate => "deflate",
        })
    }
}

impl fmt::Display for CipherAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CipherAlg::AesCbc => "aes-cbc",
            CipherAlg::AesCtr => "aes-ctr",
            CipherAlg::TdesCbc => "des-ede3-cbc",
            CipherAlg::Null => "null",
            CipherAlg::AesGcm => "aes-gcm",
            CipherAlg::ChaCha20Poly1305 => "chacha20-poly1305",
        })
    }
}

impl fmt::Display for DigestAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DigestAlg::Md5 => "md5",
            DigestAlg::Sha1 => "sha1",
            DigestAlg::Sha256 => "sha256",
            DigestAlg::Sha384 => "sha384",
            DigestAlg::Sha512 => "sha512",
        })
    }
}

impl fmt::Display for MacAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MacAlg::Hmac(d) => write!(f, "hmac-{d}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `RequestRules::check` tests whole blocks with a mask, which needs powers of two.
    #[test]
    fn every_cipher_block_length_is_a_power_of_two() {
        for alg in CipherAlg::ALL {
            assert!(alg.block_len().is_power_of_two(), "{alg}: block of {} bytes", alg.block_len());
        }
    }
}
