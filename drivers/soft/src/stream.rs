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
//! - ChaCha20-Poly1305: a libcrypto cipher context ([`ChachaCtx`]; the library measured
//!   fastest for it from 2 KiB, and the only streaming one at hand).
//!
//! The AEAD contexts are keyed once per session and lent to one message at a time
//! (`crate::pool`): a finished message's state stays in the request as spare state, and the
//! next message of the same session only gives it a new nonce.
//!
//! A message's state is dropped when the message ends, fails, or the request is reset (an
//! AEAD context then goes back to its session's pool; everything else is wiped).

use std::any::Any;
use std::ptr;
use std::sync::Arc;

use aws_lc_sys as awslc;
use ocf::{CipherAlg, Error, Op, PartState, Views};
use zeroize::Zeroize;

use crate::chacha::ChachaCtx;
use crate::cipher::Cipher;
use crate::digest::{HashState, RustHmac};
use crate::pool::{Keyed, Lent, Pool};

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
    Gcm(Lent<GcmCtx>),
    Chacha(Lent<ChachaCtx>),
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
    Gcm(&'a Arc<Pool<GcmCtx>>),
    /// ChaCha20-Poly1305: the session's pool of keyed contexts.
    Chacha(&'a Arc<Pool<ChachaCtx>>),
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
            Starter::Gcm(pool) => StreamMode::Gcm(Lent::start(pool, iv, op == Op::Encrypt)?),
            Starter::Chacha(pool) => StreamMode::Chacha(Lent::start(pool, iv, op == Op::Encrypt)?),
        };
        Ok(Stream { op, payload_seen: false, mode })
    }

    /// Starts a new message in this state's place (a finished message's, kept in the
    /// request): as [`Stream::start`], but an AEAD context of the same session (the same
    /// pool, so the same key) is kept and only takes the new nonce, and nothing is
    /// allocated. A context of another session is dropped, never re-armed.
    pub(crate) fn restart(&mut self, from: Starter<'_>, op: Op, iv: &[u8]) -> Result<(), Error> {
        let encrypt = op == Op::Encrypt;
        let rearmed = match (&from, &mut self.mode) {
            (Starter::Gcm(pool), StreamMode::Gcm(g)) if g.is_from(pool) => Some(g.rearm(iv, encrypt)),
            (Starter::Chacha(pool), StreamMode::Chacha(c)) if c.is_from(pool) => Some(c.rearm(iv, encrypt)),
            _ => None,
        };
        match rearmed {
            Some(result) => {
                result?;
                self.op = op;
                self.payload_seen = false;
            }
            None => *self = Stream::start(from, op, iv)?,
        }
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
                let g = g.ctx()?;
                g.update(v.aad, v.payload)?;
                if last {
                    g.finish(op, v.tag)?;
                }
                Ok(())
            }
            StreamMode::Chacha(c) => {
                let c = c.ctx()?;
                c.update(v.aad, v.payload)?;
                if last {
                    c.finish(op, v.tag)?;
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
pub(crate) struct GcmCtx {
    ctx: *mut awslc::EVP_CIPHER_CTX,
}

// SAFETY: the context is owned by this value alone and used through `&mut self` only; an
// aws-lc cipher context has no thread affinity.
unsafe impl Send for GcmCtx {}

impl Keyed for GcmCtx {
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

impl GcmCtx {
    fn update(&mut self, aad: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let fail = Error::DriverFailure("soft: aws-lc GCM update failed");
        let ctx = self.ctx;
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
        let ctx = self.ctx;
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

/// A state taken out of a request, as ours if it is (another driver's is dropped).
pub(crate) fn ours(state: Box<dyn PartState>) -> Option<Box<Stream>> {
    let any: Box<dyn Any> = state;
    any.downcast::<Stream>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305};

    /// One whole message through `s`, returning (payload, tag).
    fn message(s: &mut Stream, op: Op, data: &[u8], tag: &[u8]) -> Result<(Vec<u8>, Vec<u8>), Error> {
        let (mut payload, mut tag) = (data.to_vec(), tag.to_vec());
        if tag.is_empty() {
            tag = vec![0; 16];
        }
        let views = Views { payload: &mut payload, aad: b"header", iv: &[], tag: &mut tag, esn: &[] };
        s.part(None, op, views, true)?;
        Ok((payload, tag))
    }

    fn aws_seal(key: &[u8], nonce: [u8; 12], data: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let k = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, key).unwrap());
        let mut ct = data.to_vec();
        let n = Nonce::assume_unique_for_key(nonce);
        let tag = k.seal_in_place_separate_tag(n, Aad::from(b"header"), &mut ct).unwrap();
        (ct, tag.as_ref().to_vec())
    }

    fn chacha_ctx(s: &mut Stream) -> usize {
        match &mut s.mode {
            StreamMode::Chacha(c) => c.ctx().unwrap().raw() as usize,
            _ => panic!("not a ChaCha20-Poly1305 stream"),
        }
    }

    /// A finished ChaCha20-Poly1305 message's context is re-armed by the next message of
    /// its session (the same libcrypto context, no new one keyed), in either direction, and
    /// after a forged tag; a message of another session never gets it: its pool keys its
    /// own, and the output is that session's key's (checked against aws-lc-rs).
    #[test]
    fn chacha_context_is_recycled_within_its_session_only() {
        let (key_a, key_b) = ([0x11u8; 32], [0x22u8; 32]);
        let (a, b) = (Arc::new(Pool::<ChachaCtx>::new(&key_a)), Arc::new(Pool::<ChachaCtx>::new(&key_b)));
        let data: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        let nonce = |i: u8| [i; 12];

        let mut s = Stream::start(Starter::Chacha(&a), Op::Encrypt, &nonce(1)).unwrap();
        let first = chacha_ctx(&mut s);
        let (ct, tag) = message(&mut s, Op::Encrypt, &data, &[]).unwrap();
        assert_eq!((ct.clone(), tag.clone()), aws_seal(&key_a, nonce(1), &data));

        // Same session: the same context, decrypting now.
        s.restart(Starter::Chacha(&a), Op::Decrypt, &nonce(1)).unwrap();
        assert_eq!(chacha_ctx(&mut s), first, "re-armed, not re-keyed");
        assert_eq!(message(&mut s, Op::Decrypt, &ct, &tag).unwrap().0, data);

        // A forged tag fails; the context still serves the next message correctly.
        s.restart(Starter::Chacha(&a), Op::Decrypt, &nonce(1)).unwrap();
        let mut bad = tag.clone();
        bad[0] ^= 1;
        assert_eq!(message(&mut s, Op::Decrypt, &ct, &bad), Err(Error::AuthFailed));
        s.restart(Starter::Chacha(&a), Op::Encrypt, &nonce(2)).unwrap();
        assert_eq!(chacha_ctx(&mut s), first);
        assert_eq!(message(&mut s, Op::Encrypt, &data, &[]).unwrap(), aws_seal(&key_a, nonce(2), &data));

        // Another session: A's context goes back to A's pool, B keys its own.
        assert_eq!(a.idle_len(), 0);
        s.restart(Starter::Chacha(&b), Op::Encrypt, &nonce(3)).unwrap();
        assert_eq!(a.idle_len(), 1, "A's context went home");
        assert_ne!(chacha_ctx(&mut s), first, "B never runs on A's context");
        assert_eq!(message(&mut s, Op::Encrypt, &data, &[]).unwrap(), aws_seal(&key_b, nonce(3), &data));

        // Back to A: it takes its idle context again.
        s.restart(Starter::Chacha(&a), Op::Encrypt, &nonce(4)).unwrap();
        assert_eq!(chacha_ctx(&mut s), first);
        assert_eq!(message(&mut s, Op::Encrypt, &data, &[]).unwrap(), aws_seal(&key_a, nonce(4), &data));
        drop(s);
        assert_eq!((a.idle_len(), b.idle_len()), (1, 1));
    }
}
