//! Multi-part messages ([`ocf::Part`]): the state of a message fed in pieces, kept in the
//! request between its parts.
//!
//! Each mode keeps what its next piece needs, and reuses the session's keyed objects where
//! the one-shot code already does the work:
//! - CBC (AES, 3DES): the chaining value. Each part is whole blocks (ocf checks), run
//!   through the session's one-shot cipher with the chaining value as its IV.
//! - CTR: the counter block and the unused end of the last keystream block, so that parts
//!   of any length line up (the whole blocks go through the session's one-shot CTR).
//! - Digests and HMAC: a RustCrypto hasher, or a copy of the session's keyed HMAC state.
//! - AES-GCM: an aws-lc `EVP_CIPHER_CTX` ([`GcmStream`]). aws-lc-rs offers only one-shot
//!   AEADs; its streaming GCM through aws-lc's EVP interface measured 11 GB/s at 8 KiB
//!   updates against 4.3-4.8 GB/s for libcrypto's (2.2-2.6x; 1.5x at 16 B).
//! - ChaCha20-Poly1305: a libcrypto cipher context (the library measured fastest for it).
//!
//! A message's state is dropped (and its key material wiped) when the message ends, fails,
//! or the request is reset.

use std::any::Any;
use std::ptr;
use std::sync::{Arc, Mutex, PoisonError};

use aws_lc_sys as awslc;
use ocf::{CipherAlg, Error, Op, PartState, Views};
use openssl::cipher_ctx::CipherCtx;
use zeroize::Zeroize;

use crate::cipher::Cipher;
use crate::digest::{HashState, RustHmac};

/// The state of one multi-part message.
pub(crate) struct Stream {
    /// The operation of the first part; every later part must ask for the same.
    op: Op,
    /// Payload bytes seen so far (AEADs: no AAD after the first payload byte).
    payload_seen: bool,
    mode: StreamMode,
}

enum StreamMode {
    /// The next part's IV: the last ciphertext block so far.
    Cbc {
        chain: [u8; 16],
        block: usize,
    },
    /// The next counter block, and the keystream block whose first `used` bytes are spent
    /// (`used == 16`: none left).
    Ctr {
        counter: [u8; 16],
        keystream: [u8; 16],
        used: usize,
    },
    Hash(HashState),
    Hmac(RustHmac),
    Gcm(GcmStream),
    Chacha(CipherCtx),
}

impl PartState for Stream {
    fn try_clone(&self) -> Option<Box<dyn PartState>> {
        let mode = match &self.mode {
            StreamMode::Cbc { chain, block } => StreamMode::Cbc { chain: *chain, block: *block },
            StreamMode::Ctr { counter, keystream, used } => {
                StreamMode::Ctr { counter: *counter, keystream: *keystream, used: *used }
            }
            StreamMode::Hash(h) => StreamMode::Hash(h.clone()),
            StreamMode::Hmac(h) => StreamMode::Hmac(h.clone()),
            // Nobody duplicates an AEAD mid-message; the library contexts stay unique.
            StreamMode::Gcm(_) | StreamMode::Chacha(_) => return None,
        };
        Some(Box::new(Stream { op: self.op, payload_seen: self.payload_seen, mode }))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // CBC's chaining value is ciphertext and CTR's counter public; the spare keystream
        // is not. Hashers and HMAC states wipe themselves (RustCrypto `zeroize` feature);
        // the library contexts are wiped when freed.
        if let StreamMode::Ctr { keystream, .. } = &mut self.mode {
            keystream.zeroize();
        }
    }
}

/// Where a session's streams come from: what a first part needs to start a message.
pub(crate) enum Starter<'a> {
    Cipher(CipherAlg),
    Hash(crate::digest::Hash),
    Hmac(&'a RustHmac),
    /// AES-GCM: the session's pool of keyed contexts.
    Gcm(&'a Arc<GcmPool>),
    /// ChaCha20-Poly1305: the raw key (kept by multi-part sessions only).
    Chacha(&'a [u8]),
}

impl Stream {
    /// Starts a message: `iv` is the first part's IV or nonce (validated by ocf).
    pub(crate) fn start(from: Starter<'_>, op: Op, iv: &[u8]) -> Result<Stream, Error> {
        let mode = match from {
            Starter::Cipher(CipherAlg::AesCtr) => {
                StreamMode::Ctr { counter: block16(iv)?, keystream: [0; 16], used: 16 }
            }
            Starter::Cipher(alg) => {
                let mut chain = [0; 16];
                chain[..iv.len()].copy_from_slice(iv);
                StreamMode::Cbc { chain, block: alg.block_len().max(1) }
            }
            Starter::Hash(h) => StreamMode::Hash(HashState::new(h)),
            Starter::Hmac(k) => StreamMode::Hmac(k.clone()),
            Starter::Gcm(pool) => StreamMode::Gcm(GcmStream::start(pool, iv, op == Op::Encrypt)?),
            Starter::Chacha(key) => StreamMode::Chacha(chacha_start(key, iv, op == Op::Encrypt)?),
        };
        Ok(Stream { op, payload_seen: false, mode })
    }

    /// Starts a new message in this state's place (a finished message's, kept in the
    /// request): as [`Stream::start`], but an AES-GCM context of the same session is kept
    /// and only takes the new nonce, and nothing is allocated.
    pub(crate) fn restart(&mut self, from: Starter<'_>, op: Op, iv: &[u8]) -> Result<(), Error> {
        if let (Starter::Gcm(pool), StreamMode::Gcm(g)) = (&from, &mut self.mode) {
            if Arc::ptr_eq(pool, &g.pool) {
                g.rearm(iv, op == Op::Encrypt)?;
                self.op = op;
                self.payload_seen = false;
                return Ok(());
            }
        }
        *self = Stream::start(from, op, iv)?;
        Ok(())
    }

    /// Processes one part. `last`: finish the message into (or check it against) the tag.
    pub(crate) fn part(
        &mut self,
        cipher: Option<&Cipher>,
        op: Op,
        v: Views<'_>,
        last: bool,
    ) -> Result<(), Error> {
        if op != self.op {
            return Err(Error::BadPart(
                "every part of a message must ask for the operation of its first part",
            ));
        }
        if !v.aad.is_empty() && self.payload_seen {
            return Err(Error::BadPart("associated data must come before the first byte of payload"));
        }
        self.payload_seen |= !v.payload.is_empty();
        match &mut self.mode {
            StreamMode::Cbc { chain, block } => {
                let c = cipher.ok_or(Error::DriverFailure("soft: CBC stream without its cipher"))?;
                let (data, n) = (v.payload, *block);
                if data.is_empty() {
                    return Ok(());
                }
                let mut next = [0; 16];
                let iv = &chain[..n];
                if op == Op::Encrypt {
                    c.encrypt(iv, data)?;
                    next[..n].copy_from_slice(&data[data.len() - n..]);
                } else {
                    next[..n].copy_from_slice(&data[data.len() - n..]);
                    c.decrypt(iv, data)?;
                }
                *chain = next;
                Ok(())
            }
            StreamMode::Ctr { counter, keystream, used } => {
                let c = cipher.ok_or(Error::DriverFailure("soft: CTR stream without its cipher"))?;
                ctr_part(c, counter, keystream, used, v.payload)
            }
            StreamMode::Hash(h) => {
                h.update(v.payload);
                if last {
                    finish_digest(op, h.clone().finalize_into_tag(), v.tag)?;
                }
                Ok(())
            }
            StreamMode::Hmac(k) => {
                k.update(v.payload);
                if last {
                    finish_digest(op, k.clone().finalize_into_tag(), v.tag)?;
                }
                Ok(())
            }
            StreamMode::Gcm(g) => {
                g.update(v.aad, v.payload)?;
                if last {
                    g.finish(op, v.tag)?;
                }
                Ok(())
            }
            StreamMode::Chacha(c) => {
                chacha_part(c, v.aad, v.payload)?;
                if last {
                    chacha_finish(c, op, v.tag)?;
                }
                Ok(())
            }
        }
    }
}

/// Digest or MAC of the finished message: written to `tag`, or compared with it.
fn finish_digest(op: Op, full: ([u8; 64], usize), tag: &mut [u8]) -> Result<(), Error> {
    let (full, _) = full;
    let n = tag.len();
    if op == Op::VerifyDigest {
        crate::verify(&full[..n], tag)
    } else {
        tag.copy_from_slice(&full[..n]);
        Ok(())
    }
}

fn block16(iv: &[u8]) -> Result<[u8; 16], Error> {
    iv.try_into().map_err(|_| Error::BadIvLength { expected: 16, got: iv.len() })
}

/// CTR over one part of any length: the spare keystream first, then whole blocks through
/// the session's one-shot CTR, then one more keystream block for a partial tail.
fn ctr_part(
    c: &Cipher,
    counter: &mut [u8; 16],
    keystream: &mut [u8; 16],
    used: &mut usize,
    mut data: &mut [u8],
) -> Result<(), Error> {
    let spare = (16 - *used).min(data.len());
    for (d, k) in data[..spare].iter_mut().zip(&keystream[*used..]) {
        *d ^= k;
    }
    *used += spare;
    data = &mut data[spare..];
    let whole = data.len() / 16 * 16;
    if whole > 0 {
        c.encrypt(counter, &mut data[..whole])?;
        add_to_counter(counter, (whole / 16) as u128);
        data = &mut data[whole..];
    }
    if !data.is_empty() {
        *keystream = [0; 16];
        c.encrypt(counter, keystream)?;
        add_to_counter(counter, 1);
        for (d, k) in data.iter_mut().zip(keystream.iter()) {
            *d ^= k;
        }
        *used = data.len();
    }
    Ok(())
}

/// Adds to a counter block as a 128-bit big-endian integer (NIST SP 800-38A; what
/// aws-lc's and OpenSSL's CTR do between blocks).
fn add_to_counter(counter: &mut [u8; 16], n: u128) {
    *counter = u128::from_be_bytes(*counter).wrapping_add(n).to_be_bytes();
}

/// An aws-lc AES-GCM context, keyed (raw FFI: aws-lc-rs has no streaming AEAD; see the
/// module docs for the measurement that asked for it).
struct GcmCtx {
    ctx: *mut awslc::EVP_CIPHER_CTX,
}

// SAFETY: the context is owned by this value alone and used through `&mut self` only; an
// aws-lc cipher context has no thread affinity.
unsafe impl Send for GcmCtx {}

impl GcmCtx {
    fn keyed(key: &[u8]) -> Result<GcmCtx, Error> {
        // SAFETY: the EVP_aes_*_gcm functions return static method tables.
        let cipher = unsafe {
            match key.len() {
                16 => awslc::EVP_aes_128_gcm(),
                24 => awslc::EVP_aes_192_gcm(),
                32 => awslc::EVP_aes_256_gcm(),
                _ => return Err(Error::UnsupportedCipher(CipherAlg::AesGcm)),
            }
        };
        // SAFETY: EVP_CIPHER_CTX_new returns an owned context or null (checked; `Drop` frees
        // it). EVP_CipherInit_ex reads the whole key, whose length matches the method.
        unsafe {
            let this = GcmCtx { ctx: awslc::EVP_CIPHER_CTX_new() };
            if this.ctx.is_null()
                || awslc::EVP_CipherInit_ex(this.ctx, cipher, ptr::null_mut(), key.as_ptr(), ptr::null(), 1)
                    != 1
            {
                return Err(Error::DriverFailure("soft: aws-lc GCM setup failed"));
            }
            Ok(this)
        }
    }

    /// Starts a message: the nonce and the direction, on the key schedule and GHASH key
    /// already computed.
    fn arm(&mut self, nonce: &[u8], encrypt: bool) -> Result<(), Error> {
        if nonce.len() != 12 {
            return Err(Error::BadIvLength { expected: 12, got: nonce.len() });
        }
        // SAFETY: the context is live and keyed; a 12-byte nonce is GCM's default IV length,
        // and setting it resets the message state (counter, GHASH, lengths).
        let ok = unsafe {
            awslc::EVP_CipherInit_ex(
                self.ctx,
                ptr::null(),
                ptr::null_mut(),
                ptr::null(),
                nonce.as_ptr(),
                i32::from(encrypt),
            )
        };
        if ok == 1 {
            Ok(())
        } else {
            Err(Error::DriverFailure("soft: aws-lc GCM nonce setup failed"))
        }
    }
}

impl Drop for GcmCtx {
    fn drop(&mut self) {
        // SAFETY: owned, freed once; EVP_CIPHER_CTX_free cleanses the key schedule.
        unsafe { awslc::EVP_CIPHER_CTX_free(self.ctx) }
    }
}

/// A multi-part AES-GCM session's keyed contexts, lent to one message at a time.
///
/// Keying a context (AES key schedule, GHASH key powers) costs more than a 16-byte
/// message; OpenSSL's callers start a message per record (`openssl speed` re-initialises
/// every iteration). A finished message gives its context back, and the next one only
/// sets its nonce.
pub(crate) struct GcmPool {
    key: ocf::Key,
    idle: Mutex<Vec<GcmCtx>>,
}

impl GcmPool {
    /// Contexts kept idle at most (one per thread working on the session, in practice).
    const KEEP: usize = 16;

    pub(crate) fn new(key: &[u8]) -> GcmPool {
        GcmPool { key: ocf::Key::new(key), idle: Mutex::new(Vec::new()) }
    }

    fn take(&self) -> Result<GcmCtx, Error> {
        let idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        match idle {
            Some(c) => Ok(c),
            None => GcmCtx::keyed(self.key.as_bytes()),
        }
    }

    fn give_back(&self, c: GcmCtx) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < GcmPool::KEEP {
            idle.push(c);
        }
    }
}

/// The AES-GCM state of one message: a context borrowed from its session's pool.
pub(crate) struct GcmStream {
    ctx: Option<GcmCtx>,
    pool: Arc<GcmPool>,
}

impl Drop for GcmStream {
    fn drop(&mut self) {
        if let Some(c) = self.ctx.take() {
            self.pool.give_back(c);
        }
    }
}

impl GcmStream {
    fn start(pool: &Arc<GcmPool>, nonce: &[u8], encrypt: bool) -> Result<GcmStream, Error> {
        let mut c = pool.take()?;
        c.arm(nonce, encrypt)?;
        Ok(GcmStream { ctx: Some(c), pool: pool.clone() })
    }

    /// The next message on the same context: a new nonce (a context lost to an earlier
    /// failure is taken from the pool again).
    fn rearm(&mut self, nonce: &[u8], encrypt: bool) -> Result<(), Error> {
        let c = match &mut self.ctx {
            Some(c) => c,
            None => self.ctx.insert(self.pool.take()?),
        };
        c.arm(nonce, encrypt)
    }

    fn raw(&self) -> Result<*mut awslc::EVP_CIPHER_CTX, Error> {
        self.ctx.as_ref().map(|c| c.ctx).ok_or(Error::DriverFailure("soft: GCM stream without a context"))
    }

    fn update(&mut self, aad: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let fail = Error::DriverFailure("soft: aws-lc GCM update failed");
        let ctx = self.raw()?;
        let mut outl = 0;
        for piece in [aad, &*data] {
            if i32::try_from(piece.len()).is_err() {
                return Err(Error::DriverFailure("soft: a part of 2 GiB or more"));
            }
        }
        // SAFETY: the context is live and initialised. With a null output, EVP_CipherUpdate
        // absorbs `aad` as associated data; with output == input it transforms `data` in
        // place, which aws-lc's GCM allows, writing exactly `data.len()` bytes (GCM
        // buffers nothing). Lengths fit in an int (checked above).
        unsafe {
            if !aad.is_empty()
                && awslc::EVP_CipherUpdate(ctx, ptr::null_mut(), &mut outl, aad.as_ptr(), aad.len() as i32)
                    != 1
            {
                return Err(fail);
            }
            if !data.is_empty()
                && awslc::EVP_CipherUpdate(
                    ctx,
                    data.as_mut_ptr(),
                    &mut outl,
                    data.as_ptr(),
                    data.len() as i32,
                ) != 1
            {
                return Err(fail);
            }
        }
        crate::cpu::clear_upper_vector_state();
        Ok(())
    }

    /// Encrypt: writes the 16-byte tag. Decrypt: checks it (aws-lc compares in constant time).
    fn finish(&mut self, op: Op, tag: &mut [u8]) -> Result<(), Error> {
        let fail = Error::DriverFailure("soft: aws-lc GCM final failed");
        let ctx = self.raw()?;
        let mut outl = 0;
        let mut scratch = [0u8; 16];
        // SAFETY: the context is live; GET_TAG writes and SET_TAG reads `tag.len()` bytes
        // (16, validated by ocf); the final call writes nothing for GCM (the scratch block
        // is there in case).
        unsafe {
            if op == Op::Encrypt {
                if awslc::EVP_CipherFinal_ex(ctx, scratch.as_mut_ptr(), &mut outl) != 1
                    || awslc::EVP_CIPHER_CTX_ctrl(
                        ctx,
                        awslc::EVP_CTRL_GCM_GET_TAG,
                        tag.len() as i32,
                        tag.as_mut_ptr().cast(),
                    ) != 1
                {
                    return Err(fail);
                }
                Ok(())
            } else {
                if awslc::EVP_CIPHER_CTX_ctrl(
                    ctx,
                    awslc::EVP_CTRL_GCM_SET_TAG,
                    tag.len() as i32,
                    tag.as_mut_ptr().cast(),
                ) != 1
                {
                    return Err(fail);
                }
                if awslc::EVP_CipherFinal_ex(ctx, scratch.as_mut_ptr(), &mut outl) != 1 {
                    return Err(Error::AuthFailed);
                }
                Ok(())
            }
        }
    }
}

fn chacha_start(key: &[u8], nonce: &[u8], encrypt: bool) -> Result<CipherCtx, Error> {
    let fail = |_| Error::DriverFailure("soft: libcrypto ChaCha20-Poly1305 setup failed");
    let cipher = crate::evp::chacha20_poly1305()
        .ok_or(Error::DriverFailure("soft: libcrypto's ChaCha20-Poly1305 is unavailable"))?;
    let mut c = CipherCtx::new().map_err(fail)?;
    if encrypt {
        c.encrypt_init(Some(cipher), Some(key), Some(nonce)).map_err(fail)?;
    } else {
        c.decrypt_init(Some(cipher), Some(key), Some(nonce)).map_err(fail)?;
    }
    Ok(c)
}

fn chacha_part(c: &mut CipherCtx, aad: &[u8], data: &mut [u8]) -> Result<(), Error> {
    let fail = |_| Error::DriverFailure("soft: libcrypto ChaCha20-Poly1305 update failed");
    if !aad.is_empty() {
        c.cipher_update(aad, None).map_err(fail)?;
    }
    if !data.is_empty() {
        let n = data.len();
        c.cipher_update_inplace(data, n).map_err(fail)?;
    }
    crate::cpu::clear_upper_vector_state();
    Ok(())
}

fn chacha_finish(c: &mut CipherCtx, op: Op, tag: &mut [u8]) -> Result<(), Error> {
    let fail = |_| Error::DriverFailure("soft: libcrypto ChaCha20-Poly1305 final failed");
    if op == Op::Encrypt {
        c.cipher_final(&mut []).map_err(fail)?;
        c.tag(tag).map_err(fail)
    } else {
        c.set_tag(tag).map_err(fail)?;
        // The final call compares the tags in constant time.
        c.cipher_final(&mut []).map(|_| ()).map_err(|_| Error::AuthFailed)
    }
}

/// A state taken out of a request, as ours if it is (another driver's is dropped).
pub(crate) fn ours(state: Box<dyn PartState>) -> Option<Box<Stream>> {
    let any: Box<dyn Any> = state;
    any.downcast::<Stream>().ok()
}
