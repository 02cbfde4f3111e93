//! The Encrypted and Authenticated payload's protection (RFC 7296 §3.14; RFC 5282 for
//! AES-GCM in IKEv2; RFC 7634 for ChaCha20-Poly1305), one ocf session per direction.
//!
//! ```text
//!  message: IKE header │ SK generic header │ IV │ inner payloads │ padding │ pad len │ ICV
//!           └──────────── aad ────────────┘     └────────── encrypted ──────────┘
//!           └─────────────────── HMAC (CBC + integrity) ──────────────────────────┘
//!           └──────────── AEAD AAD ───────┘  (RFC 5282 §5.1; the IV is the nonce's tail)
//!                                          └────────────── body ────────────────────────┘
//!
//!  seal(aad, inner payloads) ─▶ body = IV │ ciphertext │ ICV
//!  open(aad, body)           ─▶ inner payloads (ICV checked first, then decrypted)
//! ```
//!
//! The caller builds the IKE header and the SK (or SKF) generic header first — with the
//! lengths [`SkCipher::body_len`] gives — and passes those bytes as `aad`; for SKF the
//! fragment number fields are in it too (RFC 7383 §2.5). With cipher + integrity the ICV
//! covers `aad ‖ IV ‖ ciphertext`, which is the message from its first byte to the end of
//! the ciphertext; with an AEAD the AAD is `aad` itself.
//!
//! - AEAD IVs are an 8-byte counter per direction (the nonce is salt ‖ counter, RFC 5282
//!   §3 and RFC 7634 §2): a key never sees a nonce twice, even when a message is
//!   retransmitted — a retransmission resends the stored bytes, it never seals again (if
//!   it did, it would get a new IV). The counter never wraps ([`CryptoError::SkIvExhausted`]).
//! - CBC IVs come from ocf's random operation (RFC 7296 §3.14: unpredictable).
//! - Padding: the least that makes `inner ‖ padding ‖ pad length` a whole number of
//!   blocks (none for the AEADs), zero bytes; the receiver ignores their content.
//! - The ICV is compared by ocf's driver in constant time (the soft driver: `subtle` for
//!   HMACs, aws-lc for the AEADs); a mismatch is [`CryptoError::SkAuthFailed`] and no
//!   plaintext is returned.

use std::sync::atomic::{AtomicU64, Ordering};

use ocf::{Aad, Framework, Op, Request, Session, SessionParams, TagPlace};
use zeroize::Zeroizing;

use super::error::CryptoError;
use super::ops;
use super::suite::{Encr, Integ};

/// One direction's SK protection: its key(s) in an ocf session, and its IV source.
pub struct SkCipher {
    encr: Encr,
    integ: Option<Integ>,
    session: Session,
    /// AEAD: the salt (the key material's last 4 bytes).
    salt: [u8; 4],
    /// AEAD: the next explicit IV.
    next_iv: AtomicU64,
    /// CBC: the random session that gives IVs.
    random: Option<Session>,
}

impl SkCipher {
    /// A direction's protection: `encr_key` is SK_e (key ‖ salt for an AEAD), `integ_key`
    /// SK_a (empty with an AEAD). [`super::IkeKeys::sk_ciphers`] makes both directions.
    pub fn new(
        fw: &Framework,
        encr: Encr,
        integ: Option<Integ>,
        encr_key: &[u8],
        integ_key: &[u8],
    ) -> Result<SkCipher, CryptoError> {
        let check = |what, got: usize, expected| {
            if got == expected {
                Ok(())
            } else {
                Err(CryptoError::KeyLength { what, got, expected })
            }
        };
        check("SK_e", encr_key.len(), encr.keymat_len())?;
        check("SK_a", integ_key.len(), integ.map_or(0, Integ::key_len))?;
        let (key, salt_bytes) = encr_key.split_at(encr.key_len());
        let mut salt = [0; 4];
        let params = match integ {
            None => {
                salt.copy_from_slice(salt_bytes);
                SessionParams::aead(encr.cipher(), key)
            }
            Some(i) => {
                SessionParams::cipher_then_mac(encr.cipher(), key, ocf::MacAlg::Hmac(i.digest()), integ_key)
                    .with_tag_len(i.icv_len())
            }
        };
        let session = ops::session(fw, &params)?;
        let random = match integ {
            Some(_) => Some(ops::session(fw, &SessionParams::random())?),
            None => None,
        };
        Ok(SkCipher { encr, integ, session, salt, next_iv: AtomicU64::new(0), random })
    }

    /// The ICV's length.
    pub fn icv_len(&self) -> usize {
        self.encr.icv_len() + self.integ.map_or(0, Integ::icv_len)
    }

    /// The encrypted part's length for `plaintext_len` bytes of inner payloads: the
    /// payloads, the padding and the pad length byte.
    fn padded_len(&self, plaintext_len: usize) -> usize {
        let b = self.encr.block_len();
        (plaintext_len + 1).div_ceil(b) * b
    }

    /// The SK payload's body length (what follows its generic header: IV, ciphertext and
    /// ICV) for `plaintext_len` bytes of inner payloads: the header's Payload Length is
    /// this plus 4.
    pub fn body_len(&self, plaintext_len: usize) -> usize {
        self.encr.iv_len() + self.padded_len(plaintext_len) + self.icv_len()
    }

    /// The longest inner payloads whose body fits `body_len` bytes (for fragmenting,
    /// RFC 7383 §2.5.1); 0 if none fit.
    pub fn max_plaintext_len(&self, body_len: usize) -> usize {
        let Some(ct) = body_len.checked_sub(self.encr.iv_len() + self.icv_len()) else { return 0 };
        let b = self.encr.block_len();
        (ct / b * b).saturating_sub(1)
    }

    /// The nonce's explicit part for the next message (AEAD) or a random IV (CBC).
    fn next_iv(&self, iv: &mut [u8]) -> Result<(), CryptoError> {
        match &self.random {
            Some(r) => ops::random_from(r, iv),
            None => {
                let n = self
                    .next_iv
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
                    .map_err(|_| CryptoError::SkIvExhausted)?;
                iv.copy_from_slice(&n.to_be_bytes());
                Ok(())
            }
        }
    }

    /// The ocf IV of a message whose explicit IV is `iv`: salt ‖ IV for an AEAD.
    fn request_iv(&self, iv: &[u8]) -> Vec<u8> {
        match self.random {
            Some(_) => iv.to_vec(),
            None => [&self.salt[..], iv].concat(),
        }
    }

    /// Encrypts and authenticates `plaintext` (the inner payloads): the SK body,
    /// `IV ‖ ciphertext ‖ ICV`, [`SkCipher::body_len`] bytes. `aad` is the message up to
    /// the IV: the IKE header and the SK (or SKF) generic header, lengths already set.
    pub fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let iv_len = self.encr.iv_len();
        let padded = self.padded_len(plaintext.len());
        let ct = aad.len() + iv_len..aad.len() + iv_len + padded;
        let mut buf = Zeroizing::new(vec![0u8; ct.end + self.icv_len()]);
        buf[..aad.len()].copy_from_slice(aad);
        self.next_iv(&mut buf[aad.len()..ct.start])?;
        buf[ct.start..ct.start + plaintext.len()].copy_from_slice(plaintext);
        buf[ct.end - 1] = (padded - plaintext.len() - 1) as u8;
        let iv = self.request_iv(&buf[aad.len()..ct.start]);
        let aad_region = if self.random.is_some() { 0..ct.start } else { 0..aad.len() };
        let mut req = Request::new(Op::Encrypt, std::mem::take(&mut *buf))
            .with_payload(ct.clone())
            .with_iv(&iv)
            .with_tag_place(TagPlace::InBuffer(ct.end));
        req.aad = Aad::Region(aad_region);
        let done = ops::run(&self.session, req)?;
        let sealed = done.buf.to_vec();
        Ok(sealed[aad.len()..].to_vec())
    }

    /// Checks and decrypts an SK body (`IV ‖ ciphertext ‖ ICV`, everything after the SK
    /// generic header) received after `aad` (the message up to the IV): the inner
    /// payloads, padding removed.
    pub fn open(&self, aad: &[u8], body: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        let (iv_len, icv_len, block) = (self.encr.iv_len(), self.icv_len(), self.encr.block_len());
        let min = iv_len + block + icv_len;
        if body.len() < min {
            return Err(CryptoError::SkTruncated { got: body.len(), min });
        }
        let ct_len = body.len() - iv_len - icv_len;
        if ct_len % block != 0 {
            return Err(CryptoError::SkNotBlocks { len: ct_len, block });
        }
        let ct = aad.len() + iv_len..aad.len() + iv_len + ct_len;
        let mut buf = Vec::with_capacity(aad.len() + body.len());
        buf.extend_from_slice(aad);
        buf.extend_from_slice(body);
        let iv = self.request_iv(&body[..iv_len]);
        let aad_region = if self.random.is_some() { 0..ct.start } else { 0..aad.len() };
        let mut req = Request::new(Op::Decrypt, buf)
            .with_payload(ct.clone())
            .with_iv(&iv)
            .with_tag_place(TagPlace::InBuffer(ct.end));
        req.aad = Aad::Region(aad_region);
        let mut done = ops::run(&self.session, req).map_err(|e| match e {
            ocf::Error::AuthFailed => CryptoError::SkAuthFailed,
            e => CryptoError::Ocf(e),
        })?;
        let mut plain = Zeroizing::new(vec![0u8; ct_len]);
        done.buf.copy_out(ct.clone(), &mut plain);
        ops::wipe(&mut done);
        let pad_len = usize::from(plain[ct_len - 1]);
        if pad_len + 1 > ct_len {
            return Err(CryptoError::SkBadPadLength { pad_len, room: ct_len - 1 });
        }
        plain.truncate(ct_len - 1 - pad_len);
        Ok(plain)
    }

    /// [`SkCipher::open`] on a whole message whose SK body starts at `body_start` (just
    /// after the SK or SKF generic header).
    pub fn open_message(&self, message: &[u8], body_start: usize) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        let start = body_start.min(message.len());
        self.open(&message[..start], &message[start..])
    }
}
