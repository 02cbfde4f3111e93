//! What a session's requests are as IPsec-MB jobs: the session kinds the driver serves,
//! their key material (made once per session, wiped on drop) and, per request, the job
//! descriptor and the finishing step after the job came back.
//!
//! ```text
//!  kind            job                                    tag (scratch, 64 B per slot)
//!  cipher          CBC/CTR/DES3 on the payload            -
//!  mac             NULL cipher, HMAC over the payload     compute: copied out; verify: compared
//!  cipher+mac      encrypt then HMAC(AAD ‖ ciphertext),   encrypt: copied out (truncated);
//!                  decrypt: HMAC first (HASH_CIPHER)      decrypt: compared, payload wiped if bad
//!  aead (GCM)      GCM with the AAD pointer               as cipher+mac
//! ```
//!
//! A job hashes one contiguous region of its source and ciphers a region inside it, into
//! the source (in place) or another buffer. So a job covers requests whose buffers are
//! contiguous, whose cipher+MAC AAD is absent or a region of the buffer ending where the
//! payload starts (ESP's header and IV), and that carry no ESN (its 4 bytes follow the
//! payload without being in the buffer); out of place, all but cipher+MAC encryption
//! (whose MAC would cover the source: the plaintext). Others run on the soft driver's
//! session ([`Keys::desc`] answers `None`).
//!
//! The job always computes the full tag into the lane's scratch: truncation (HMAC-SHA1-96,
//! HMAC-SHA256-128) is a prefix, and ocf — not the library — compares tags to verify, in
//! constant time ([`finish`]). A decrypt job hashes the ciphertext and decrypts in one go;
//! when the tag then does not match, the decrypted payload is wiped before the request
//! fails with `AuthFailed`, so no unauthenticated plaintext is released.

use std::ffi::c_void;

use ocf::{CipherAlg, DigestAlg, Error, MacAlg, Mode, Op, Request, SessionParams, TagPlace};
use subtle::ConstantTimeEq;
use zeroize::Zeroize;

use crate::ffi::{CipherKind, Des3Keys, GcmKey, HashKind, HmacPads, JobDesc, Manager, Schedule, MAX_JOB_TAG};

/// The cipher keys of a session.
enum CipherKeys {
    None,
    Aes { enc: Box<Schedule>, dec: Box<Schedule>, len: u64, kind: CipherKind },
    Des3(Des3Keys),
    Gcm(Box<GcmKey>, u64),
}

/// What a session asks of each request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Cipher,
    Mac,
    CipherThenMac,
    Aead,
}

/// A session's key material (kept by its held requests too, through an `Arc`).
pub struct Keys {
    shape: Shape,
    cipher: CipherKeys,
    hash: HashKind,
    pads: Option<Box<HmacPads>>,
}

fn hash_kind(mac: MacAlg) -> Option<HashKind> {
    match mac {
        MacAlg::Hmac(DigestAlg::Sha1) => Some(HashKind::HmacSha1),
        MacAlg::Hmac(DigestAlg::Sha256) => Some(HashKind::HmacSha256),
        MacAlg::Hmac(DigestAlg::Sha384) => Some(HashKind::HmacSha384),
        MacAlg::Hmac(DigestAlg::Sha512) => Some(HashKind::HmacSha512),
        _ => None,
    }
}

/// The plain ciphers a job runs.
pub const CIPHERS: [CipherAlg; 3] = [CipherAlg::AesCbc, CipherAlg::AesCtr, CipherAlg::TdesCbc];
/// The AEADs a job runs.
pub const AEADS: [CipherAlg; 1] = [CipherAlg::AesGcm];
/// The MACs a job runs, alone or after a cipher.
pub const MACS: [MacAlg; 4] = [
    MacAlg::Hmac(DigestAlg::Sha1),
    MacAlg::Hmac(DigestAlg::Sha256),
    MacAlg::Hmac(DigestAlg::Sha384),
    MacAlg::Hmac(DigestAlg::Sha512),
];

/// Whether the driver serves these (validated) parameters: whole messages of the
/// algorithms above.
pub fn serves(params: &SessionParams) -> bool {
    if params.multipart {
        return false;
    }
    match &params.mode {
        Mode::Cipher { alg, .. } => CIPHERS.contains(alg),
        Mode::Mac { alg, .. } => MACS.contains(alg),
        Mode::CipherThenMac { cipher, mac, .. } => CIPHERS.contains(cipher) && MACS.contains(mac),
        Mode::Aead { alg, .. } => AEADS.contains(alg),
        _ => false,
    }
}

impl Keys {
    /// Sets up the key material of a session; named errors for what the driver does not
    /// serve (the framework validated lengths already; they are checked again here, as
    /// the C side reads exactly those).
    pub fn new(mgr: &mut Manager, params: &SessionParams) -> Result<Keys, Error> {
        if params.multipart {
            return Err(Error::InvalidParams("mb: whole messages only (no multi-part sessions)"));
        }
        let (shape, cipher, mac) = match &params.mode {
            Mode::Cipher { alg, key } => (Shape::Cipher, Some((*alg, key)), None),
            Mode::Mac { alg, key, .. } => (Shape::Mac, None, Some((*alg, key))),
            Mode::CipherThenMac { cipher, cipher_key, mac, mac_key, .. } => {
                (Shape::CipherThenMac, Some((*cipher, cipher_key)), Some((*mac, mac_key)))
            }
            Mode::Aead { alg, key, .. } => (Shape::Aead, Some((*alg, key)), None),
            _ => return Err(Error::InvalidParams("mb: cipher, MAC, cipher+MAC and AEAD sessions only")),
        };
        let cipher = match cipher {
            None => CipherKeys::None,
            Some((alg @ (CipherAlg::AesCbc | CipherAlg::AesCtr), key)) => {
                let (mut enc, mut dec) = (Box::new(Schedule([0; 240])), Box::new(Schedule([0; 240])));
                if !mgr.expand(key.as_bytes(), &mut enc, &mut dec) {
                    return Err(Error::BadKeyLength {
                        what: "mb: AES key",
                        got: key.len(),
                        allowed: &[16, 24, 32],
                    });
                }
                let kind = if alg == CipherAlg::AesCtr { CipherKind::AesCtr } else { CipherKind::AesCbc };
                CipherKeys::Aes { enc, dec, len: key.len() as u64, kind }
            }
            Some((CipherAlg::TdesCbc, key)) => {
                CipherKeys::Des3(mgr.des3_keys(key.as_bytes()).ok_or(Error::BadKeyLength {
                    what: "mb: 3DES key",
                    got: key.len(),
                    allowed: &[24],
                })?)
            }
            Some((CipherAlg::AesGcm, key)) if shape == Shape::Aead => CipherKeys::Gcm(
                mgr.gcm_key(key.as_bytes()).ok_or(Error::BadKeyLength {
                    what: "mb: AES-GCM key",
                    got: key.len(),
                    allowed: &[16, 24, 32],
                })?,
                key.len() as u64,
            ),
            Some((alg, _)) => return Err(Error::UnsupportedCipher(alg)),
        };
        let (hash, pads) = match mac {
            None => (HashKind::Null, None),
            Some((alg, key)) => {
                let hash = hash_kind(alg).ok_or(Error::InvalidParams("mb: HMAC over SHA-1 or SHA-2 only"))?;
                let pads = mgr
                    .hmac_pads(hash, key.as_bytes())
                    .ok_or(Error::DriverFailure("mb: IPsec-MB cannot set up the HMAC key"))?;
                (hash, Some(pads))
            }
        };
        Ok(Keys { shape, cipher, hash, pads })
    }

    /// Whether `op` fits the session (a named error otherwise).
    pub fn check_op(&self, op: Op) -> Result<(), Error> {
        let ok = match self.shape {
            Shape::Mac => matches!(op, Op::ComputeDigest | Op::VerifyDigest),
            _ => matches!(op, Op::Encrypt | Op::Decrypt),
        };
        let mode = match self.shape {
            Shape::Cipher => "cipher",
            Shape::Mac => "mac",
            Shape::CipherThenMac => "cipher+mac",
            Shape::Aead => "aead",
        };
        if ok {
            Ok(())
        } else {
            Err(Error::BadOperation { op: op.name(), mode })
        }
    }

    /// Whether IPsec-MB completes the session's jobs as they are submitted (GCM).
    pub fn completes_on_submit(&self) -> bool {
        self.shape == Shape::Aead
    }

    /// Whether the session computes or checks a tag.
    pub fn tagged(&self) -> bool {
        self.shape != Shape::Cipher
    }

    /// A job descriptor for the payload `data` with its IV (any layout: the caller
    /// gathered it), cipher sessions only. Its `user` is for the lane to set, as every
    /// descriptor's (a slot, or a run's place).
    pub fn cipher_desc(&self, op: Op, data: &mut [u8], iv: &[u8]) -> JobDesc {
        let mut d = self.base(op, iv);
        d.src = data.as_ptr();
        d.dst = data.as_mut_ptr();
        d.cipher_len = data.len() as u64;
        d
    }

    /// The job descriptor for `req` when one job covers its layout (see the module
    /// docs), else `None`. Its pointers point into the request's buffer and boxed fields
    /// and into `self`; `tag` is left for the lane to point at its scratch.
    pub fn desc(&self, req: &mut Request) -> Option<JobDesc> {
        if self.tagged() && req.esn_high().is_some() {
            return None;
        }
        // Out of place, the job reads `buf` and writes `out` (a MAC writes no payload).
        // Not for cipher+MAC encryption: its MAC would cover `buf`, the plaintext.
        let out_of_place = req.out.is_some() && self.shape != Shape::Mac;
        if out_of_place && self.shape == Shape::CipherThenMac && req.op == Op::Encrypt {
            return None;
        }
        let payload = req.payload_range();
        let (aad_ptr, aad_len, hash_start) = match (self.shape, &req.aad) {
            (Shape::Aead, a) => match (a.separate(), a) {
                (Some(bytes), _) => (bytes.as_ptr(), bytes.len(), payload.start),
                (None, ocf::Aad::Region(r)) => (std::ptr::null(), r.len(), r.start),
                (None, _) => (std::ptr::null(), 0, payload.start),
            },
            (Shape::CipherThenMac, ocf::Aad::None) => (std::ptr::null(), 0, payload.start),
            (Shape::CipherThenMac, ocf::Aad::Region(r)) if r.end == payload.start => {
                (std::ptr::null(), 0, r.start)
            }
            (Shape::CipherThenMac, _) => return None,
            (_, _) => (std::ptr::null(), 0, payload.start),
        };
        let mut d = self.base(req.op, req.iv());
        let region_aad = self.shape == Shape::Aead && matches!(req.aad, ocf::Aad::Region(_));
        let buf = req.buf.as_contiguous_mut()?.as_mut_ptr();
        d.src = buf;
        let fields: &mut ocf::RequestFields = req;
        d.dst = match fields.out.as_mut().filter(|_| out_of_place) {
            None => buf.wrapping_add(payload.start),
            Some(out) => {
                let at = fields.out_offset;
                out.as_contiguous_mut()?.get_mut(at..at + payload.len())?.as_mut_ptr()
            }
        };
        d.cipher_off = payload.start as u64;
        d.cipher_len = if self.shape == Shape::Mac { 0 } else { payload.len() as u64 };
        d.hash_off = hash_start as u64;
        d.hash_len = (payload.end - hash_start) as u64;
        if self.shape == Shape::Aead {
            // GCM's AAD goes by pointer; its hash region is the payload.
            d.aad = if region_aad { buf.wrapping_add(hash_start) } else { aad_ptr };
            d.aad_len = aad_len as u64;
            d.hash_off = payload.start as u64;
            d.hash_len = payload.len() as u64;
        }
        Some(d)
    }

    /// The fields every job of the session shares.
    fn base(&self, op: Op, iv: &[u8]) -> JobDesc {
        let (cipher, enc, dec, key_len): (_, *const c_void, *const c_void, _) = match &self.cipher {
            CipherKeys::None => (CipherKind::Null, std::ptr::null(), std::ptr::null(), 0),
            CipherKeys::Aes { enc, dec, len, kind } => {
                (*kind, enc.0.as_ptr().cast(), dec.0.as_ptr().cast(), *len)
            }
            CipherKeys::Des3(k) => (CipherKind::Des3, k.job_keys(), k.job_keys(), 24),
            CipherKeys::Gcm(k, len) => (CipherKind::Gcm, k.0.as_ptr().cast(), k.0.as_ptr().cast(), *len),
        };
        let (ipad, opad) = self
            .pads
            .as_ref()
            .map_or((std::ptr::null(), std::ptr::null()), |p| (p.ipad.as_ptr(), p.opad.as_ptr()));
        let tag_len = match self.shape {
            Shape::Aead => 16,
            _ => self.hash.tag_len(),
        };
        JobDesc {
            src: std::ptr::null(),
            dst: std::ptr::null_mut(),
            cipher_off: 0,
            cipher_len: 0,
            hash_off: 0,
            hash_len: 0,
            iv: iv.as_ptr(),
            iv_len: iv.len() as u64,
            enc_keys: enc,
            dec_keys: dec,
            key_len,
            ipad,
            opad,
            aad: std::ptr::null(),
            aad_len: 0,
            tag: std::ptr::null_mut(),
            tag_len,
            cipher,
            hash: self.hash,
            decrypt: u32::from(op == Op::Decrypt),
            pad: 0,
            // Set by the lane: a held slot, or a place in a run (`lane::RUN`).
            user: 0,
        }
    }
}

/// After a request's job completed: a computed tag (in `computed`, the job's scratch) is
/// copied to its place, truncated to the session's length; a tag to verify is compared
/// in constant time, and a decrypt whose tag does not match has its payload wiped and
/// fails with `AuthFailed`. Cipher sessions (no tag): nothing.
///
/// A tag computed to verify is wiped from the scratch afterwards (when it did not match,
/// it is the valid tag of a forgery); a computed tag is the request's output anyway, and
/// is overwritten by the slot's next job. (Wiping 64 bytes the `zeroize` way, a volatile
/// store per byte, on every request is measurable beside a 1 KiB job's ~370 ns.)
pub fn finish(req: &mut Request, computed: &mut [u8; MAX_JOB_TAG]) -> Result<(), Error> {
    let n = req.tag().len();
    if n == 0 {
        return Ok(());
    }
    let mine = &computed[..n];
    if !req.op.checks_tag() {
        // As `Request::with_views` does: the tag is inline, and copied to its place.
        req.set_tag(mine);
        if let TagPlace::InBuffer(off) = req.tag_place {
            let fields: &mut ocf::RequestFields = req;
            fields.out.as_mut().unwrap_or(&mut fields.buf).copy_in(off, mine);
        }
        return Ok(());
    }
    if let TagPlace::InBuffer(off) = req.tag_place {
        // As `Request::with_views` does: the tag read from the buffer is the inline one.
        let mut given = [0u8; MAX_JOB_TAG];
        req.buf.copy_out(off..off + n, &mut given[..n]);
        req.set_tag(&given[..n]);
    }
    let matched = bool::from(mine.ct_eq(req.tag()));
    computed[..n].zeroize();
    if matched {
        return Ok(());
    }
    if req.op == Op::Decrypt {
        // The payload's result (in `out` when out of place) holds unauthenticated plaintext.
        let payload = req.payload_range();
        let at = if req.out.is_some() { req.out_offset } else { payload.start };
        let fields: &mut ocf::RequestFields = req;
        if let Some(b) = fields.out.as_mut().unwrap_or(&mut fields.buf).as_contiguous_mut() {
            b[at..at + payload.len()].zeroize();
        }
    }
    Err(Error::AuthFailed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocf::Key;

    fn etm(c: CipherAlg, klen: usize, d: DigestAlg) -> SessionParams {
        SessionParams::cipher_then_mac(c, &vec![0x11; klen][..], MacAlg::Hmac(d), &[2u8; 20][..])
    }

    /// Every kind the capabilities list is served (probe) and set up; what is not listed
    /// is neither, and set-up names why.
    #[test]
    fn serves_what_it_lists_and_names_what_it_refuses() {
        let tdes: Vec<u8> = (0..24u8).map(|i| i.wrapping_mul(29) ^ 0x4b).collect();
        let served = [
            SessionParams::cipher(CipherAlg::TdesCbc, tdes.as_slice()),
            SessionParams::cipher(CipherAlg::AesCtr, &[1u8; 24][..]),
            etm(CipherAlg::AesCbc, 16, DigestAlg::Sha1),
            etm(CipherAlg::AesCtr, 32, DigestAlg::Sha512),
            SessionParams::cipher_then_mac(
                CipherAlg::TdesCbc,
                tdes.as_slice(),
                MacAlg::Hmac(DigestAlg::Sha384),
                &[3u8; 200][..],
            ),
            SessionParams::hmac(DigestAlg::Sha256, &[4u8; 65][..]),
            SessionParams::aead(CipherAlg::AesGcm, &[5u8; 24][..]),
        ];
        for p in &served {
            assert!(serves(p), "{p:?}");
            if let Some(mut m) = Manager::new() {
                Keys::new(&mut m, p).unwrap_or_else(|e| panic!("{p:?}: {e:?}"));
            }
        }
        let refused = [
            (
                SessionParams::hmac(DigestAlg::Md5, &[1u8; 16][..]),
                Error::InvalidParams("mb: HMAC over SHA-1 or SHA-2 only"),
            ),
            (
                SessionParams::aead(CipherAlg::ChaCha20Poly1305, &[1u8; 32][..]),
                Error::UnsupportedCipher(CipherAlg::ChaCha20Poly1305),
            ),
            (SessionParams::cipher(CipherAlg::Null, Key::empty()), Error::UnsupportedCipher(CipherAlg::Null)),
            (
                SessionParams::digest(DigestAlg::Sha256),
                Error::InvalidParams("mb: cipher, MAC, cipher+MAC and AEAD sessions only"),
            ),
            (
                SessionParams::cipher(CipherAlg::AesCbc, &[1u8; 16][..]).multipart(),
                Error::InvalidParams("mb: whole messages only (no multi-part sessions)"),
            ),
            (
                etm(CipherAlg::AesCbc, 16, DigestAlg::Md5),
                Error::InvalidParams("mb: HMAC over SHA-1 or SHA-2 only"),
            ),
        ];
        for (p, want) in refused {
            assert!(!serves(&p), "{p:?}");
            if let Some(mut m) = Manager::new() {
                assert_eq!(Keys::new(&mut m, &p).err(), Some(want), "{p:?}");
            }
        }
    }

    /// An operation of the wrong kind is refused by name.
    #[test]
    fn wrong_operations_are_named() {
        let Some(mut m) = crate::ffi::Manager::for_tests() else { return };
        let mac = Keys::new(&mut m, &SessionParams::hmac(DigestAlg::Sha1, &[1u8; 20][..])).unwrap();
        assert_eq!(mac.check_op(Op::Encrypt), Err(Error::BadOperation { op: "encrypt", mode: "mac" }));
        mac.check_op(Op::VerifyDigest).unwrap();
        let gcm = Keys::new(&mut m, &SessionParams::aead(CipherAlg::AesGcm, &[1u8; 16][..])).unwrap();
        assert_eq!(
            gcm.check_op(Op::ComputeDigest),
            Err(Error::BadOperation { op: "compute-digest", mode: "aead" })
        );
    }
}
