//! Digests and HMAC.
//!
//! An HMAC session keeps the keyed state (the inner and outer pads already absorbed) and
//! clones it per request, so a request pays for its own data and two finalizations only.

use hmac::{Hmac, KeyInit, Mac};
use md5::Md5;
use ocf::{DigestAlg, Error, MacAlg};
use sha1::Sha1;
use sha2::digest::Digest;
use sha2::{Sha256, Sha384, Sha512};

/// The digests this driver implements (ocf's `DigestAlg` may grow; this enum is what a
/// session resolved it to).
#[derive(Clone, Copy, Debug)]
pub enum Hash {
    Md5,
    Sha1,
    Sha256,
    Sha384,
    Sha512,
}

impl Hash {
    pub fn new(alg: DigestAlg) -> Result<Hash, Error> {
        Ok(match alg {
            DigestAlg::Md5 => Hash::Md5,
            DigestAlg::Sha1 => Hash::Sha1,
            DigestAlg::Sha256 => Hash::Sha256,
            DigestAlg::Sha384 => Hash::Sha384,
            DigestAlg::Sha512 => Hash::Sha512,
            _ => return Err(Error::UnsupportedDigest(alg)),
        })
    }
}

/// Computes a digest over `pieces` into `out` (at least the digest's length).
pub fn digest<'a>(alg: Hash, pieces: impl Iterator<Item = &'a [u8]>, out: &mut [u8]) {
    fn run<'a, D: Digest>(pieces: impl Iterator<Item = &'a [u8]>, out: &mut [u8]) {
        let mut d = D::new();
        for p in pieces {
            d.update(p);
        }
        let r = d.finalize();
        out[..r.len()].copy_from_slice(&r);
    }
    match alg {
        Hash::Md5 => run::<Md5>(pieces, out),
        Hash::Sha1 => run::<Sha1>(pieces, out),
        Hash::Sha256 => run::<Sha256>(pieces, out),
        Hash::Sha384 => run::<Sha384>(pieces, out),
        Hash::Sha512 => run::<Sha512>(pieces, out),
    }
}

/// A keyed HMAC state, chosen once per session.
#[derive(Clone)]
pub enum HmacKey {
    Md5(Hmac<Md5>),
    Sha1(Hmac<Sha1>),
    Sha256(Hmac<Sha256>),
    Sha384(Hmac<Sha384>),
    Sha512(Hmac<Sha512>),
}

impl HmacKey {
    pub fn new(alg: MacAlg, key: &[u8]) -> Result<HmacKey, Error> {
        let bad = |_| Error::DriverFailure("soft: HMAC key rejected by the library");
        let MacAlg::Hmac(d) = alg else {
            return Err(Error::UnsupportedMac(alg));
        };
        Ok(match Hash::new(d)? {
            Hash::Md5 => HmacKey::Md5(Hmac::new_from_slice(key).map_err(bad)?),
            Hash::Sha1 => HmacKey::Sha1(Hmac::new_from_slice(key).map_err(bad)?),
            Hash::Sha256 => HmacKey::Sha256(Hmac::new_from_slice(key).map_err(bad)?),
            Hash::Sha384 => HmacKey::Sha384(Hmac::new_from_slice(key).map_err(bad)?),
            Hash::Sha512 => HmacKey::Sha512(Hmac::new_from_slice(key).map_err(bad)?),
        })
    }

    /// MAC of the concatenation of `pieces`, truncated to `out.len()`.
    pub fn compute<'a>(&self, pieces: impl IntoIterator<Item = &'a [u8]>, out: &mut [u8]) {
        fn run<'a, M: Mac + Clone>(keyed: &M, pieces: impl IntoIterator<Item = &'a [u8]>, out: &mut [u8]) {
            let mut m = keyed.clone();
            for p in pieces {
                m.update(p);
            }
            let full = m.finalize().into_bytes();
            let n = out.len();
            out.copy_from_slice(&full[..n]);
        }
        match self {
            HmacKey::Md5(k) => run(k, pieces, out),
            HmacKey::Sha1(k) => run(k, pieces, out),
            HmacKey::Sha256(k) => run(k, pieces, out),
            HmacKey::Sha384(k) => run(k, pieces, out),
            HmacKey::Sha512(k) => run(k, pieces, out),
        }
    }
}
