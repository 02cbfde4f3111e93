//! Digests and HMAC.
//!
//! SHA-1 and SHA-256 (and HMAC over them) go through RustCrypto, whose SHA-NI code was the
//! fastest here; SHA-384, SHA-512 and MD5 through libcrypto's reusable contexts (see
//! [`crate::evp`]), with RustCrypto as the fallback when a context is busy. An HMAC session
//! keeps the keyed state (the inner and outer pads already absorbed), so a request pays for
//! its own data and two finalizations only.

use std::sync::Mutex;

use hmac::{Hmac, KeyInit, Mac};
use md5::Md5;
use ocf::{DigestAlg, Error, MacAlg};
use sha1::Sha1;
use sha2::digest::Digest;
use sha2::{Sha256, Sha384, Sha512};

use crate::evp::{self, EvpDigest, EvpHmac, EvpMd};

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

    /// The libcrypto digest this hash runs through where libcrypto is faster (SHA-384,
    /// SHA-512, MD5); SHA-1 and SHA-256 stay with RustCrypto (SHA-NI) at every size.
    fn evp(self) -> Option<EvpMd> {
        match self {
            Hash::Sha384 => Some(EvpMd::Sha384),
            Hash::Sha512 => Some(EvpMd::Sha512),
            Hash::Md5 => Some(EvpMd::Md5),
            Hash::Sha1 | Hash::Sha256 => None,
        }
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

/// A digest or MAC in the first bytes of a 64-byte array, with its length.
fn tag_array(r: &[u8]) -> ([u8; 64], usize) {
    let mut o = [0; 64];
    o[..r.len()].copy_from_slice(r);
    (o, r.len())
}

/// A running RustCrypto hash, for multi-part messages.
#[derive(Clone)]
pub enum HashState {
    Md5(Md5),
    Sha1(Sha1),
    Sha256(Sha256),
    Sha384(Sha384),
    Sha512(Sha512),
}

impl HashState {
    pub fn new(alg: Hash) -> HashState {
        match alg {
            Hash::Md5 => HashState::Md5(Md5::new()),
            Hash::Sha1 => HashState::Sha1(Sha1::new()),
            Hash::Sha256 => HashState::Sha256(Sha256::new()),
            Hash::Sha384 => HashState::Sha384(Sha384::new()),
            Hash::Sha512 => HashState::Sha512(Sha512::new()),
        }
    }

    pub fn update(&mut self, data: &[u8]) {
        match self {
            HashState::Md5(h) => Digest::update(h, data),
            HashState::Sha1(h) => Digest::update(h, data),
            HashState::Sha256(h) => Digest::update(h, data),
            HashState::Sha384(h) => Digest::update(h, data),
            HashState::Sha512(h) => Digest::update(h, data),
        }
    }

    /// The digest, in the first bytes of the array, and its length.
    pub fn finalize_into_tag(self) -> ([u8; 64], usize) {
        match self {
            HashState::Md5(h) => tag_array(&h.finalize()),
            HashState::Sha1(h) => tag_array(&h.finalize()),
            HashState::Sha256(h) => tag_array(&h.finalize()),
            HashState::Sha384(h) => tag_array(&h.finalize()),
            HashState::Sha512(h) => tag_array(&h.finalize()),
        }
    }
}

/// A keyed RustCrypto HMAC state.
#[derive(Clone)]
pub enum RustHmac {
    Md5(Hmac<Md5>),
    Sha1(Hmac<Sha1>),
    Sha256(Hmac<Sha256>),
    Sha384(Hmac<Sha384>),
    Sha512(Hmac<Sha512>),
}

impl RustHmac {
    fn new(alg: MacAlg, key: &[u8]) -> Result<RustHmac, Error> {
        let bad = |_| Error::DriverFailure("soft: HMAC key rejected by the library");
        let MacAlg::Hmac(d) = alg else {
            return Err(Error::UnsupportedMac(alg));
        };
        Ok(match Hash::new(d)? {
            Hash::Md5 => RustHmac::Md5(Hmac::new_from_slice(key).map_err(bad)?),
            Hash::Sha1 => RustHmac::Sha1(Hmac::new_from_slice(key).map_err(bad)?),
            Hash::Sha256 => RustHmac::Sha256(Hmac::new_from_slice(key).map_err(bad)?),
            Hash::Sha384 => RustHmac::Sha384(Hmac::new_from_slice(key).map_err(bad)?),
            Hash::Sha512 => RustHmac::Sha512(Hmac::new_from_slice(key).map_err(bad)?),
        })
    }

    /// Absorbs more of a multi-part message (on a copy of the keyed state).
    pub fn update(&mut self, data: &[u8]) {
        match self {
            RustHmac::Md5(m) => m.update(data),
            RustHmac::Sha1(m) => m.update(data),
            RustHmac::Sha256(m) => m.update(data),
            RustHmac::Sha384(m) => m.update(data),
            RustHmac::Sha512(m) => m.update(data),
        }
    }

    /// The full MAC, in the first bytes of the array, and its length.
    pub fn finalize_into_tag(self) -> ([u8; 64], usize) {
        match self {
            RustHmac::Md5(m) => tag_array(&m.finalize().into_bytes()),
            RustHmac::Sha1(m) => tag_array(&m.finalize().into_bytes()),
            RustHmac::Sha256(m) => tag_array(&m.finalize().into_bytes()),
            RustHmac::Sha384(m) => tag_array(&m.finalize().into_bytes()),
            RustHmac::Sha512(m) => tag_array(&m.finalize().into_bytes()),
        }
    }

    /// MAC of the concatenation of `pieces`, truncated to `out.len()`.
    fn compute<'a>(&self, pieces: impl IntoIterator<Item = &'a [u8]>, out: &mut [u8]) {
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
            RustHmac::Md5(k) => run(k, pieces, out),
            RustHmac::Sha1(k) => run(k, pieces, out),
            RustHmac::Sha256(k) => run(k, pieces, out),
            RustHmac::Sha384(k) => run(k, pieces, out),
            RustHmac::Sha512(k) => run(k, pieces, out),
        }
    }
}

/// A digest session's state: the algorithm, and a libcrypto context where that is faster.
pub struct Digester {
    pub(crate) hash: Hash,
    evp: Option<Mutex<EvpDigest>>,
    evp_min_len: usize,
}

impl Digester {
    pub fn new(alg: DigestAlg) -> Result<Digester, Error> {
        let hash = Hash::new(alg)?;
        let md = hash.evp();
        let evp = md.and_then(EvpDigest::new).transpose()?.map(Mutex::new);
        Ok(Digester { hash, evp, evp_min_len: md.map_or(usize::MAX, |md| evp::min_len(md, false)) })
    }

    /// Digest of `data` into `out` (at least the digest length).
    pub fn digest(&self, data: &[u8], out: &mut [u8]) -> Result<(), Error> {
        if data.len() >= self.evp_min_len {
            if let Some(Ok(mut ctx)) = self.evp.as_ref().map(Mutex::try_lock) {
                let result = ctx.digest(data, out);
                crate::cpu::clear_upper_vector_state();
                return result;
            }
        }
        digest(self.hash, std::iter::once(data), out);
        Ok(())
    }
}

/// A keyed HMAC, chosen once per session: RustCrypto's keyed state, plus a keyed libcrypto
/// context where that is faster.
pub struct HmacKey {
    rust: RustHmac,
    evp: Option<Mutex<EvpHmac>>,
    evp_min_len: usize,
}

impl HmacKey {
    pub fn new(alg: MacAlg, key: &[u8]) -> Result<HmacKey, Error> {
        let MacAlg::Hmac(d) = alg else {
            return Err(Error::UnsupportedMac(alg));
        };
        let md = Hash::new(d)?.evp();
        let evp = md.and_then(|md| EvpHmac::new(md, key)).transpose()?.map(Mutex::new);
        let evp_min_len = md.map_or(usize::MAX, |md| evp::min_len(md, true));
        Ok(HmacKey { rust: RustHmac::new(alg, key)?, evp, evp_min_len })
    }

    /// The keyed RustCrypto state, from which multi-part messages start.
    pub fn rust(&self) -> &RustHmac {
        &self.rust
    }

    /// MAC of the concatenation of `pieces`, truncated to `out.len()`.
    pub fn compute(&self, pieces: &[&[u8]], out: &mut [u8]) -> Result<(), Error> {
        if pieces.iter().map(|p| p.len()).sum::<usize>() >= self.evp_min_len {
            if let Some(Ok(mut ctx)) = self.evp.as_ref().map(Mutex::try_lock) {
                let result = ctx.compute(pieces.iter().copied(), out);
                crate::cpu::clear_upper_vector_state();
                return result;
            }
        }
        self.rust.compute(pieces.iter().copied(), out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The libcrypto and RustCrypto paths are independent implementations: they must
    /// agree on every size around the switch-over, for digests and HMAC, plain and truncated.
    #[test]
    fn libcrypto_and_rustcrypto_paths_agree() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 31 % 251) as u8).collect();
        for alg in DigestAlg::ALL {
            let hash = Hash::new(alg).unwrap();
            let d = Digester::new(alg).unwrap();
            let key: Vec<u8> = (0..alg.block_len() as u8 + 7).collect();
            let h = HmacKey::new(MacAlg::Hmac(alg), &key).unwrap();
            // The hashes libcrypto is faster for take its contexts; the others never do.
            let libcrypto = matches!(alg, DigestAlg::Sha384 | DigestAlg::Sha512 | DigestAlg::Md5);
            assert_eq!((d.evp.is_some(), h.evp.is_some()), (libcrypto, libcrypto), "{alg}: libcrypto");
            for len in [0, 1, 55, 64, 511, 512, 513, 1024, 4999] {
                let msg = &data[..len];
                let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
                d.digest(msg, &mut a).unwrap();
                digest(hash, std::iter::once(msg), &mut b);
                assert_eq!(a, b, "{alg} digest of {len} bytes");
                let n = alg.output_len();
                h.compute(&[&msg[..len / 2], &msg[len / 2..]], &mut a[..n]).unwrap();
                h.rust.compute([msg], &mut b[..n]);
                assert_eq!(a[..n], b[..n], "hmac-{alg} of {len} bytes");
                let t = alg.output_len() / 2;
                h.compute(&[msg], &mut a[..t]).unwrap();
                assert_eq!(a[..t], b[..t], "truncated hmac-{alg} of {len} bytes");
            }
        }
    }
}
