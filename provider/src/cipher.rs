//! Ciphers: AES-CBC/CTR/GCM, ChaCha20-Poly1305 and 3DES-CBC as OpenSSL cipher
//! implementations over ocf sessions.
//!
//! An EVP cipher context is a [`CipherCtx`]: an ocf session opened for multi-part messages
//! when the key arrives, and one reusable request that carries the message in progress.
//! Everything OpenSSL's own ciphers do around the algorithm is done here, the same way:
//! - CBC keeps a partial block between updates, pads on encrypt (PKCS#7) unless padding
//!   was turned off, holds back the last block on decrypt until `final` checks the padding;
//! - CTR and the AEADs pass bytes straight through (the driver keeps the keystream
//!   position and the GHASH/Poly1305 state);
//! - AEADs take AAD as an update with no output buffer, before the payload; `final`
//!   computes the tag (read with the "tag" parameter) or checks the tag set before it, and
//!   fails on a mismatch; a finished message needs a new IV before the next (no nonce
//!   reuse by accident, as OpenSSL's GCM also refuses).
//!
//! This file is the EVP state machine; the rest, one concern per file:
//!
//! ```text
//!  OpenSSL ─▶ dispatch (the C tables: CIPHERS, extern "C" functions by OSSL_FUNC_CIPHER_*)
//!                │
//!                ▼
//!  CipherCtx: init, update (CBC blocks, stream, AAD), final, parameters   (this file)
//!                │ a TLS record (tlsaad, tls-version)
//!                ▼
//!  records: TLS 1.2 AEAD records and TLS CBC records (arithmetic in crate::tls)
//! ```

use std::ffi::{c_int, CStr};

use ocf::{CipherAlg, Op, Part, Session, SessionParams};
use zeroize::Zeroize;

use crate::abi::Param;
use crate::boundary::{Context, Io, IoError};
use crate::params::{self, Params, FAIL};
use crate::part::{Data, Extras, Feed};
use crate::tls;
use crate::Provider;

mod dispatch;
mod records;

pub use dispatch::{ALGORITHMS, CIPHERS};

/// An algorithm as OpenSSL sees it.
pub struct CipherInfo {
    /// OpenSSL's names for it (as the default provider lists them), colon-separated.
    pub names: &'static CStr,
    pub alg: CipherAlg,
    pub key_len: usize,
    pub iv_len: usize,
    /// OpenSSL's block size: 1 for stream modes and AEADs.
    pub block: usize,
    /// `EVP_CIPH_*_MODE`.
    pub mode: u32,
}

impl CipherInfo {
    fn aead(&self) -> bool {
        self.alg.is_aead()
    }

    fn padded(&self) -> bool {
        self.block > 1
    }
}

/// The AEAD tag length (ocf computes and checks full 16-byte tags only).
const TAG_LEN: usize = 16;

/// An EVP cipher context.
pub struct CipherCtx {
    provider: *const Provider,
    info: &'static CipherInfo,
    encrypt: bool,
    session: Option<Session>,
    /// The session's key: an init with the same key keeps the session (OpenSSL callers
    /// re-key per message, `openssl speed` among them, and a session costs microseconds).
    key: Option<ocf::Key>,
    iv: [u8; 16],
    /// An IV was given for the next message (AEADs: cleared when a message ends).
    iv_set: bool,
    padding: bool,
    /// CBC: bytes of an incomplete block (decrypt: up to one whole block held back).
    pending: [u8; 16],
    pending_len: usize,
    feed: Feed,
    /// AEAD: associated data given before the payload, sent with the first part.
    aad: Vec<u8>,
    /// AEAD: the tag computed by an encrypting `final`, or given to check by a decrypting one.
    tag: [u8; TAG_LEN],
    tag_ready: bool,
    /// TLS 1.2 record mode (see `tls`): the nonce's fixed part was given (`tlsivfixed`);
    /// AES-GCM's explicit part counts up in `iv[4..12]`.
    tls_fixed: bool,
    /// The next record's AAD (`tlsaad`): the next update is that whole record.
    tls_next: Option<tls::RecordAad>,
    /// AES-GCM: records sealed since `tlsivfixed` (the explicit nonce must not come round).
    tls_sealed: u64,
    /// CBC record mode (`tls-version`, 0: off): each update is one TLS record.
    tls_version: u64,
    /// The MAC length of CBC records (`tls-mac-size`; 0 with encrypt-then-MAC).
    tls_mac_size: usize,
    /// The MAC taken out of the last CBC record opened (`tls-mac`).
    tls_mac: [u8; tls::MAX_MAC],
}

impl Drop for CipherCtx {
    fn drop(&mut self) {
        self.pending.zeroize();
        self.aad.zeroize();
        self.tls_mac.zeroize();
    }
}

impl CipherCtx {
    fn provider(&self) -> &Provider {
        // SAFETY: the provider context outlives every algorithm context OpenSSL made from it.
        unsafe { &*self.provider }
    }

    fn op(&self) -> Op {
        if self.encrypt {
            Op::Encrypt
        } else {
            Op::Decrypt
        }
    }

    /// A new message: nothing pending, no message in progress.
    fn restart(&mut self) {
        self.pending_len = 0;
        self.feed.reset();
        self.aad.clear();
        self.tag_ready = false;
    }

    fn init(&mut self, encrypt: bool, key: Option<&[u8]>, iv: Option<&[u8]>, ps: Params) -> bool {
        self.encrypt = encrypt;
        self.restart();
        if !self.set_params(ps) {
            return false;
        }
        if let Some(iv) = iv {
            if iv.len() != self.info.iv_len {
                return self.fail(&format!(
                    "IV of {} bytes; {} takes {}",
                    iv.len(),
                    name(self.info),
                    self.info.iv_len
                ));
            }
            self.iv[..iv.len()].copy_from_slice(iv);
            self.iv_set = true;
        }
        if let Some(key) = key {
            if key.len() != self.info.key_len {
                return self.fail(&format!(
                    "key of {} bytes; {} takes {}",
                    key.len(),
                    name(self.info),
                    self.info.key_len
                ));
            }
            if self.session.is_some() && self.key.as_ref().is_some_and(|k| same_key(k.as_bytes(), key)) {
                return true;
            }
            let params = if self.info.aead() {
                SessionParams::aead(self.info.alg, key)
            } else {
                SessionParams::cipher(self.info.alg, key)
            }
            .multipart();
            match self.provider().new_session(&params) {
                Ok(s) => {
                    self.session = Some(s);
                    // A fresh request: the old session's spare state (and its key) goes now.
                    self.feed = Feed::new();
                    self.key = Some(ocf::Key::new(key));
                }
                Err(e) => return self.fail(&format!("{}: {e}", name(self.info))),
            }
        }
        true
    }

    /// Refuses a length this cipher does not have (`ivlen`, `keylen`).
    fn fail_fixed(&self, what: &str, len: usize) -> bool {
        self.fail(&format!("{}: ocf takes {len}-byte {what}s only", name(self.info)))
    }

    fn fail(&self, why: &str) -> bool {
        self.provider().error(why);
        false
    }

    /// Sends `data` as the next part of the message, transformed in place.
    fn part(&mut self, data: &mut [u8], last: bool) -> bool {
        let op = self.op();
        let Some(session) = &self.session else {
            return self.fail(&format!("{}: no key set", name(self.info)));
        };
        let starting = !self.feed.in_message();
        if starting && self.info.aead() && !self.iv_set {
            return self.fail(&format!(
                "{}: no IV set for this message (each message needs a new one)",
                name(self.info)
            ));
        }
        let part = match (starting, last) {
            (true, true) => Part::Whole,
            (true, false) => Part::First,
            (false, false) => Part::Middle,
            (false, true) => Part::Last,
        };
        let iv = &self.iv[..self.info.iv_len];
        let mut tag = [0u8; TAG_LEN];
        let extras = Extras {
            iv: if starting { iv } else { &[] },
            aad: if starting { &self.aad } else { &[] },
            tag: if last && !self.encrypt { &self.tag } else { &[] },
            tag_out: &mut tag,
        };
        let result = self.feed.run(session, op, part, Data::InPlace(data), extras);
        if starting {
            self.aad.clear();
        }
        match result {
            Ok(()) => {
                if last && self.info.aead() && self.encrypt {
                    self.tag = tag;
                    self.tag_ready = true;
                }
                true
            }
            Err(ocf::Error::AuthFailed) => {
                self.fail(&format!("{}: tag mismatch (the data or the tag was altered)", name(self.info)))
            }
            Err(e) => self.fail(&format!("{}: {e}", name(self.info))),
        }
    }

    /// `EVP_CipherUpdate`: the input into the output (which may be the same memory:
    /// OpenSSL encrypts in place). Returns the bytes written.
    fn update(&mut self, io: Io<'_>) -> Option<usize> {
        if self.tls_next.is_some() && io.has_output() {
            return self.tls_record(io);
        }
        if self.tls_version != 0 && self.info.padded() {
            return self.tls_cbc_record(io);
        }
        if self.info.aead() && !io.has_output() {
            // Associated data: before the payload, all of it sent with the first part.
            if self.feed.in_message() {
                self.fail(&format!("{}: AAD after the payload", name(self.info)));
                return None;
            }
            self.aad.extend_from_slice(io.input());
            return Some(0);
        }
        if !self.info.padded() {
            let n = io.input().len();
            if n == 0 {
                return Some(0);
            }
            let out = self.output(io, n, 0)?;
            return self.part(&mut out[..n], false).then_some(n);
        }
        self.update_blocks(io)
    }

    /// The output buffer with the input's first `n` bytes moved to `at..` (see
    /// [`Io::into_output`]), or the error raised.
    #[inline]
    fn output<'a>(&self, io: Io<'a>, n: usize, at: usize) -> Option<&'a mut [u8]> {
        io.into_output(n, at).map_err(|why| self.fail(&format!("{}: {why}", name(self.info)))).ok()
    }

    /// CBC update: whole blocks through, a partial block (and on decrypt with padding, the
    /// last whole block) kept for later.
    fn update_blocks(&mut self, io: Io<'_>) -> Option<usize> {
        let b = self.info.block;
        let held = self.pending_len;
        let inl = io.input().len();
        let total = held + inl;
        let mut keep = total % b;
        if keep == 0 && !self.encrypt && self.padding && total > 0 {
            keep = b;
        }
        let send = total - keep;
        if send == 0 {
            self.pending[held..total].copy_from_slice(io.input());
            self.pending_len = total;
            return Some(0);
        }
        // The output is the held bytes, then the input's first `send - held`; the input's
        // last `keep` bytes (at most a block) are held for the next call. The output may
        // be the input itself, so the tail is saved first.
        let used = send - held;
        let mut tail = [0u8; 16];
        tail[..keep].copy_from_slice(&io.input()[used..]);
        let Some(out) = self.output(io, used, held) else {
            tail.zeroize();
            return None;
        };
        out[..held].copy_from_slice(&self.pending[..held]);
        let ok = self.part(&mut out[..send], false);
        self.pending = tail;
        self.pending_len = keep;
        tail.zeroize();
        ok.then_some(send)
    }

    /// `EVP_CipherFinal`. Returns the bytes written.
    fn finish(&mut self, out: &mut [u8]) -> Option<usize> {
        if self.info.aead() {
            let ok = self.part(&mut [], true);
            self.iv_set = false;
            self.feed.reset();
            return ok.then_some(0);
        }
        if !self.info.padded() {
            self.feed.reset();
            return Some(0);
        }
        let b = self.info.block;
        let result = if self.encrypt {
            if !self.padding {
                if self.pending_len != 0 {
                    self.fail("data not multiple of block length");
                    None
                } else {
                    Some(0)
                }
            } else {
                // PKCS#7: 1..=b bytes, each the count.
                let pad = (b - self.pending_len) as u8;
                let mut block = [0u8; 16];
                block[..self.pending_len].copy_from_slice(&self.pending[..self.pending_len]);
                block[self.pending_len..b].fill(pad);
                self.write_block(&block[..b], out)
            }
        } else if !self.padding {
            if self.pending_len != 0 {
                self.fail("data not multiple of block length");
                None
            } else {
                Some(0)
            }
        } else if self.pending_len != b {
            self.fail("wrong final block length");
            None
        } else {
            let mut block = self.pending;
            let ok = self.part(&mut block[..b], false);
            let pad = usize::from(block[b - 1]);
            let n =
                if ok && (1..=b).contains(&pad) && block[b - pad..b].iter().all(|&x| usize::from(x) == pad) {
                    Some(b - pad)
                } else {
                    None
                };
            match n {
                Some(n) if out.len() >= n => {
                    out[..n].copy_from_slice(&block[..n]);
                    block.zeroize();
                    Some(n)
                }
                Some(_) => {
                    self.fail("output buffer too small");
                    None
                }
                None => {
                    block.zeroize();
                    if ok {
                        self.fail("bad decrypt");
                    }
                    None
                }
            }
        };
        self.pending_len = 0;
        self.feed.reset();
        result
    }

    fn write_block(&mut self, block: &[u8], out: &mut [u8]) -> Option<usize> {
        let b = block.len();
        if out.len() < b {
            self.fail("output buffer too small");
            return None;
        }
        let out = &mut out[..b];
        out.copy_from_slice(block);
        self.part(out, false).then_some(b)
    }

    fn set_params(&mut self, mut ps: Params) -> bool {
        for p in ps.iter_mut() {
            if let Some(ok) = self.set_tls_param(p) {
                if !ok {
                    return false;
                }
            } else if params::is(p, c"ivlen") {
                if params::get_uint(p) != Some(self.info.iv_len as u64) {
                    return self.fail_fixed("IV", self.info.iv_len);
                }
            } else if params::is(p, c"padding") {
                match params::get_uint(p) {
                    Some(v) => self.padding = v != 0,
                    None => return self.fail("padding: not an integer"),
                }
            } else if params::is(p, c"keylen") {
                if params::get_uint(p) != Some(self.info.key_len as u64) {
                    return self.fail_fixed("key", self.info.key_len);
                }
            } else if params::is(p, c"tag") {
                if !self.info.aead() {
                    return self.fail("tag: not an AEAD");
                }
                // SAFETY: an OCTET_STRING slot of a `Params` array holds `data_size` bytes
                // for this call (`Params::from_raw`).
                match unsafe { params::get_octets(p) } {
                    // A NULL buffer sets the tag length for encryption.
                    None if p.data.is_null() && p.data_size == TAG_LEN => {}
                    Some(t) if t.len() == TAG_LEN && !self.encrypt => {
                        self.tag.copy_from_slice(t);
                        self.tag_ready = true;
                    }
                    _ => {
                        return self
                            .fail(&format!("{}: ocf checks full {TAG_LEN}-byte tags only", name(self.info)))
                    }
                }
            }
        }
        true
    }

    fn get_params(&self, mut ps: Params) -> bool {
        for p in ps.iter_mut() {
            let int = if params::is(p, c"ivlen") {
                Some(self.info.iv_len as i64)
            } else if params::is(p, c"keylen") {
                Some(self.info.key_len as i64)
            } else if params::is(p, c"padding") {
                Some(i64::from(self.padding))
            } else if params::is(p, c"num") {
                Some(0)
            } else if params::is(p, c"taglen") {
                Some(if self.info.aead() { TAG_LEN as i64 } else { 0 })
            } else if params::is(p, c"tlsaadpad") && self.info.aead() {
                // What a TLS record needs beyond its plaintext: the tag.
                Some(tls::TAG_LEN as i64)
            } else {
                None
            };
            let ok = match int {
                Some(v) => params::set_int(p, v),
                None if params::is(p, c"iv") || params::is(p, c"updated-iv") => {
                    params::set_octets(p, &self.iv[..self.info.iv_len])
                }
                None if params::is(p, c"tag") => self.get_tag(p),
                None if params::is(p, c"tls-mac") => {
                    params::set_octet_ptr(p, &self.tls_mac[..self.tls_mac_size])
                }
                None => true,
            };
            if !ok {
                return false;
            }
        }
        true
    }

    /// The computed tag into a "tag" parameter.
    fn get_tag(&self, p: &mut Param) -> bool {
        if !self.info.aead() || !self.encrypt || !self.tag_ready {
            return self.fail("tag: no tag computed (encrypt and finish a message first)");
        }
        let n = p.data_size;
        if !(1..=TAG_LEN).contains(&n) || p.data.is_null() {
            return self.fail("tag: the buffer must take 1 to 16 bytes");
        }
        params::set_octets(p, &self.tag[..n]) || self.fail("tag: not an octet string")
    }
}

/// Whether two keys are equal, in time that depends on their lengths only.
fn same_key(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The cipher's first OpenSSL name, for messages.
fn name(info: &CipherInfo) -> &'static str {
    let n = info.names.to_str().unwrap_or("cipher");
    n.split(':').next().unwrap_or(n)
}

impl CipherCtx {
    fn new(provider: &Provider, info: &'static CipherInfo) -> CipherCtx {
        CipherCtx {
            provider,
            info,
            encrypt: true,
            session: None,
            key: None,
            iv: [0; 16],
            iv_set: false,
            padding: true,
            pending: [0; 16],
            pending_len: 0,
            feed: Feed::new(),
            aad: Vec::new(),
            tag: [0; TAG_LEN],
            tag_ready: false,
            tls_fixed: false,
            tls_next: None,
            tls_sealed: 0,
            tls_version: 0,
            tls_mac_size: 0,
            tls_mac: [0; tls::MAX_MAC],
        }
    }

    /// A copy between messages (`EVP_CIPHER_CTX_copy`). A message in progress is not
    /// copied: no driver copies AEAD state, and OpenSSL's own callers duplicate contexts
    /// between messages.
    fn dup(&self) -> Option<CipherCtx> {
        if self.feed.in_message() {
            self.fail("copying a cipher context in the middle of a message is not supported");
            return None;
        }
        Some(CipherCtx {
            provider: self.provider,
            info: self.info,
            encrypt: self.encrypt,
            session: self.session.clone(),
            key: self.key.clone(),
            iv: self.iv,
            iv_set: self.iv_set,
            padding: self.padding,
            pending: self.pending,
            pending_len: self.pending_len,
            feed: Feed::new(),
            aad: self.aad.clone(),
            tag: self.tag,
            tag_ready: self.tag_ready,
            tls_fixed: self.tls_fixed,
            tls_next: self.tls_next,
            tls_sealed: self.tls_sealed,
            tls_version: self.tls_version,
            tls_mac_size: self.tls_mac_size,
            tls_mac: self.tls_mac,
        })
    }

    /// An update or `EVP_Cipher` whose buffers the boundary refused.
    fn refuse(&self, e: IoError) -> c_int {
        self.fail(&format!("{}: {e}", name(self.info)));
        FAIL
    }
}

impl Context for CipherCtx {
    fn provider(&self) -> &Provider {
        CipherCtx::provider(self)
    }
}
