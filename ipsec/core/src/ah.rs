//! The AH transform (RFC 4302): how an AH SA's algorithm becomes one ocf session, how long
//! its header is, and the request that computes or verifies an ICV. The packet path's AH
//! steps are `ah_path`'s.
//!
//! - HMAC-SHA1-96 (RFC 2404), HMAC-SHA2-256-128 / 384-192 / 512-256 (RFC 4868): an ocf MAC
//!   session truncated to the ICV; inbound, ocf's `VerifyDigest` compares in constant time.
//! - AES-GMAC (RFC 4543 §4): an AES-GCM session; the key material ends with a 4-byte salt,
//!   the nonce is salt ‖ IV, the 8-byte IV is the 64-bit sequence number (it never repeats
//!   under a key: the SA stops first) and sits in the packet right after the sequence
//!   number, covered by the ICV as it is; the whole ICV input is AAD, the payload is
//!   empty, the 16-byte tag is the ICV (ocf's AEAD decryption checks it in constant time).
//!
//! The tag goes with the request ([`ocf::TagPlace::Separate`]), not at its place in the
//! packet: that place is inside the region the MAC reads (zeroed), which ocf rightly
//! refuses.

use std::ops::Range;

use ipsec_wire::ah as wire;
use ocf::{Aad, CipherAlg, Op, Request, SessionParams, TagPlace};

use crate::control::{AuthAlg, EncAlg, SaSpec};
use crate::esp::{self, TransformError};

/// The longest ICV (HMAC-SHA2-512-256).
pub(crate) const MAX_ICV_LEN: usize = 32;
/// AES-GMAC's IV in the packet.
pub(crate) const GMAC_IV_LEN: usize = 8;

/// How an AH SA's packets are authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transform {
    pub alg: AuthAlg,
    /// IV bytes after the sequence number (AES-GMAC: 8).
    pub iv_len: usize,
    /// ICV bytes (without the padding to 4 or 8).
    pub icv_len: usize,
    /// AES-GMAC's nonce salt, zero otherwise.
    salt: [u8; 4],
}

impl Transform {
    /// The transform and the ocf session parameters for an AH SA: `-A` and no `-E`.
    pub fn new(spec: &SaSpec) -> Result<(Transform, SessionParams), TransformError> {
        if spec.enc != EncAlg::Null || !spec.enc_key.as_bytes().is_empty() {
            return Err(TransformError::AuthMismatch("AH only authenticates: no -E"));
        }
        let Some((alg, key)) = &spec.auth else {
            return Err(TransformError::AuthMismatch("AH needs -A aalgo key"));
        };
        let key = key.as_bytes();
        if !alg.key_lens().contains(&key.len()) {
            return Err(TransformError::KeyLength {
                alg: alg.name(),
                got: key.len(),
                allowed: alg.key_lens(),
            });
        }
        let mut t = Transform { alg: *alg, iv_len: 0, icv_len: alg.icv_len(), salt: [0; 4] };
        let params = match esp::digest(*alg) {
            Some(d) => SessionParams::hmac(d, key).with_tag_len(t.icv_len),
            None => {
                let (k, salt) = key.split_at(key.len() - 4);
                t.salt.copy_from_slice(salt);
                t.iv_len = GMAC_IV_LEN;
                SessionParams::aead(CipherAlg::AesGcm, k)
            }
        };
        Ok((t, params))
    }

    /// AH's length over IPv4 or IPv6: 12 fixed bytes, IV, ICV, padding to 4 or 8 bytes.
    pub fn header_len(&self, v6: bool) -> usize {
        wire::FIXED_LEN + wire::Repr::icv_field_len(self.iv_len, self.icv_len, v6)
    }

    pub(crate) fn is_gmac(&self) -> bool {
        self.iv_len != 0
    }

    /// The ocf request over the ICV input `region` of `buf`: computing the ICV, or, given
    /// `icv`, verifying it. `iv` is AES-GMAC's (ignored for HMAC).
    pub(crate) fn request(
        &self,
        buf: Vec<u8>,
        region: Range<usize>,
        iv: [u8; 8],
        icv: Option<&[u8]>,
    ) -> Request {
        let op = match (self.is_gmac(), icv.is_some()) {
            (false, false) => Op::ComputeDigest,
            (false, true) => Op::VerifyDigest,
            (true, false) => Op::Encrypt,
            (true, true) => Op::Decrypt,
        };
        let mut req = esp::spare_request(op, buf).with_tag_place(TagPlace::Separate);
        if self.is_gmac() {
            let mut nonce = [0u8; 12];
            nonce[..4].copy_from_slice(&self.salt);
            nonce[4..].copy_from_slice(&iv);
            let end = region.end;
            req = req.with_payload(end..end).with_iv(&nonce);
            req.aad = Aad::Region(region);
        } else {
            req = req.with_payload(region);
        }
        if let Some(icv) = icv {
            req.set_tag(icv);
        }
        req
    }
}

/// The longest inner packet an AH SA carries in `mtu` bytes: the outer header (`outer`:
/// tunnel mode's, or the `keep` bytes of the packet's own in transport mode) and AH.
pub(crate) fn inner_mtu(t: &Transform, v6: bool, outer: usize, keep: usize, mtu: usize) -> usize {
    (mtu.saturating_sub(outer + t.header_len(v6)) + keep).min(mtu)
}
