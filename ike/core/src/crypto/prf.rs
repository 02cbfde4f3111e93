//! IKEv2's pseudorandom function and its expansion prf+ (RFC 7296 §2.13), over ocf MAC
//! sessions: the key is the session's, each prf call one `ComputeDigest` request.
//!
//! ```text
//!  prf(K, S)    = HMAC-H(K, S)
//!  prf+(K, S)   = T1 | T2 | T3 | …   cut to the length asked
//!      T1 = prf(K, S | 0x01)
//!      Tn = prf(K, Tn-1 | S | n)     n ≤ 255
//! ```
//!
//! HMAC takes keys of any length (RFC 2104 §2: a key longer than the hash's block is
//! hashed first, a shorter one zero-padded), and IKE relies on it: SKEYSEED's key is
//! Ni | Nr (32 to 512 bytes), a PSK is whatever the administrator wrote. ocf's parameter
//! rules refuse only the empty key (`Error::BadMacKeyLength`), which IKE never uses: a
//! nonce is at least 16 bytes and a PSK at least [`crate::crypto::MIN_PSK_LEN`].

use ocf::{Framework, Op, Request, Session, SessionParams};
use zeroize::Zeroizing;

use super::error::CryptoError;
use super::ops;
use super::suite::Prf;

/// prf+ stops at 255 blocks (the counter is one octet).
const MAX_BLOCKS: usize = 255;

/// A PRF keyed once: an ocf HMAC session holding the key, for any number of computations.
pub struct PrfSession {
    prf: Prf,
    session: Session,
}

impl PrfSession {
    /// A session of `prf` keyed with `key` (any non-empty length).
    pub fn new(fw: &Framework, prf: Prf, key: &[u8]) -> Result<PrfSession, CryptoError> {
        let session = ops::session(fw, &SessionParams::hmac(prf.digest(), key))?;
        Ok(PrfSession { prf, session })
    }

    pub fn prf(&self) -> Prf {
        self.prf
    }

    /// `prf(K, parts[0] | parts[1] | …)`.
    pub fn compute(&self, parts: &[&[u8]]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        let mut data = Zeroizing::new(Vec::with_capacity(parts.iter().map(|p| p.len()).sum()));
        for p in parts {
            data.extend_from_slice(p);
        }
        let mut done = ops::run(&self.session, Request::new(Op::ComputeDigest, std::mem::take(&mut *data)))?;
        let out = Zeroizing::new(done.tag().to_vec());
        ops::wipe(&mut done);
        Ok(out)
    }

    /// `prf+(K, seed[0] | seed[1] | …)`, `len` bytes.
    pub fn plus(&self, seed: &[&[u8]], len: usize) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        let out_len = self.prf.output_len();
        let max = MAX_BLOCKS * out_len;
        if len > max {
            return Err(CryptoError::PrfPlusTooLong { asked: len, max });
        }
        let mut seed_bytes = Zeroizing::new(Vec::new());
        for p in seed {
            seed_bytes.extend_from_slice(p);
        }
        let mut out = Zeroizing::new(Vec::with_capacity(len + out_len));
        let mut t = Zeroizing::new(Vec::new());
        let mut n: u8 = 1;
        while out.len() < len {
            t = self.compute(&[&t, &seed_bytes, &[n]])?;
            out.extend_from_slice(&t);
            n = n.wrapping_add(1);
        }
        out.truncate(len);
        Ok(out)
    }
}

/// prf(key, data), one session for one call.
pub fn prf(fw: &Framework, prf: Prf, key: &[u8], data: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    PrfSession::new(fw, prf, key)?.compute(&[data])
}

/// prf+(key, seed), `len` bytes.
pub fn prf_plus(
    fw: &Framework,
    prf: Prf,
    key: &[u8],
    seed: &[u8],
    len: usize,
) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    PrfSession::new(fw, prf, key)?.plus(&[seed], len)
}
