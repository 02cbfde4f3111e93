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

use std::ffi::{c_int, c_void, CStr};

use ocf::{CipherAlg, Op, Part, Session, SessionParams};
use zeroize::Zeroize;

use crate::abi::{self, Algorithm, Dispatch, Param};
use crate::boundary::{self, given, slice_mut_or_empty, Context, Io, IoError};
use crate::params::{self, Params, FAIL, OK};
use crate::part::{Data, Extras, Feed};
use crate::tls;
use crate::{entry, Provider};

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

const CBC: u32 = 0x2;
const CTR: u32 = 0x5;
const GCM: u32 = 0x6;
const STREAM: u32 = 0x0;

const fn info(
    names: &'static CStr,
    alg: CipherAlg,
    key_len: usize,
    iv_len: usize,
    block: usize,
    mode: u32,
) -> CipherInfo {
    CipherInfo { names, alg, key_len, iv_len, block, mode }
}

/// Every cipher the provider offers, in the order of [`ALGORITHMS`].
pub static CIPHERS: [CipherInfo; 11] = [
    info(c"AES-128-CBC:AES128:2.16.840.1.101.3.4.1.2", CipherAlg::AesCbc, 16, 16, 16, CBC),
    info(c"AES-192-CBC:AES192:2.16.840.1.101.3.4.1.22", CipherAlg::AesCbc, 24, 16, 16, CBC),
    info(c"AES-256-CBC:AES256:2.16.840.1.101.3.4.1.42", CipherAlg::AesCbc, 32, 16, 16, CBC),
    info(c"AES-128-CTR", CipherAlg::AesCtr, 16, 16, 1, CTR),
    info(c"AES-192-CTR", CipherAlg::AesCtr, 24, 16, 1, CTR),
    info(c"AES-256-CTR", CipherAlg::AesCtr, 32, 16, 1, CTR),
    info(c"AES-128-GCM:id-aes128-GCM:2.16.840.1.101.3.4.1.6", CipherAlg::AesGcm, 16, 12, 1, GCM),
    info(c"AES-192-GCM:id-aes192-GCM:2.16.840.1.101.3.4.1.26", CipherAlg::AesGcm, 24, 12, 1, GCM),
    info(c"AES-256-GCM:id-aes256-GCM:2.16.840.1.101.3.4.1.46", CipherAlg::AesGcm, 32, 12, 1, GCM),
    info(c"ChaCha20-Poly1305", CipherAlg::ChaCha20Poly1305, 32, 12, 1, STREAM),
    info(c"DES-EDE3-CBC:DES3:1.2.840.113549.3.7", CipherAlg::TdesCbc, 24, 8, 8, CBC),
];

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

    /// One TLS 1.2 record (see `tls`), announced by `tlsaad`: its payload goes through ocf
    /// as one whole AEAD message, in place. Returns the whole record's length when sealing,
    /// the payload's when opening (as OpenSSL's providers do).
    fn tls_record(&mut self, io: Io<'_>) -> Option<usize> {
        let rec = self.tls_next.take()?;
        let layout = self.tls_layout()?;
        // ChaCha20-Poly1305's fixed nonce may also come as the init IV (libssl does that).
        if !(self.tls_fixed || layout == tls::Layout::ChaCha && self.iv_set) {
            self.fail(&format!("{}: a TLS record before its fixed IV (tlsivfixed)", name(self.info)));
            return None;
        }
        let (plen, overhead, inl) = (rec.payload_len, layout.overhead(), io.input().len());
        if inl != plen + overhead {
            self.fail(&format!(
                "{}: a TLS record of {inl} bytes, where its AAD says {plen} bytes of payload and {overhead} around it",
                name(self.info)
            ));
            return None;
        }
        if layout == tls::Layout::Gcm && !io.in_place() {
            self.fail("AES-GCM TLS records are processed in place (input and output the same)");
            return None;
        }
        let record = &mut self.output(io, inl, 0)?[..inl];
        let nonce: [u8; 12];
        let body = match layout {
            tls::Layout::Gcm => {
                let (explicit, body) = record.split_at_mut(tls::GCM_EXPLICIT_LEN);
                let mut iv: [u8; 12] = self.iv[..12].try_into().expect("12 bytes");
                if self.encrypt {
                    nonce = iv;
                    let Some(e) = tls::gcm_next_explicit(&mut iv, &mut self.tls_sealed) else {
                        self.fail("AES-GCM: 2^64 - 1 TLS records under one key; the nonce would repeat");
                        return None;
                    };
                    explicit.copy_from_slice(&e);
                } else {
                    iv[tls::GCM_FIXED_LEN..].copy_from_slice(explicit);
                    nonce = iv;
                }
                self.iv[..12].copy_from_slice(&iv);
                body
            }
            tls::Layout::ChaCha => {
                let fixed: [u8; 12] = self.iv[..12].try_into().expect("12 bytes");
                nonce = tls::chacha_nonce(&fixed, &rec.aad);
                record
            }
        };
        let (payload, tag) = body.split_at_mut(plen);
        if !self.whole(&nonce, &rec.aad, payload, tag) {
            payload.zeroize();
            return None;
        }
        Some(if self.encrypt { inl } else { plen })
    }

    /// One TLS CBC record (see `tls`), in place: sealing pads it, opening drops the explicit
    /// IV, the padding and the MAC (kept for `tls-mac`) in constant time. The chaining value
    /// runs on from record to record, as one ocf message that never ends.
    fn tls_cbc_record(&mut self, io: Io<'_>) -> Option<usize> {
        let b = self.info.block;
        let (Io::InPlace { buf, inl }, true) = (io, self.padding) else {
            self.fail("TLS CBC records are processed in place, with padding on");
            return None;
        };
        if self.encrypt {
            let pad = tls::cbc_pad_len(inl, b);
            if buf.len() < inl + pad {
                self.fail("output buffer too small for the TLS padding");
                return None;
            }
            let record = &mut buf[..inl + pad];
            record[inl..].fill((pad - 1) as u8);
            return self.part(record, false).then_some(inl + pad);
        }
        if inl == 0 || inl % b != 0 {
            self.fail("a TLS CBC record that is not whole blocks");
            return None;
        }
        let record = &mut buf[..inl];
        if !self.part(record, false) {
            return None;
        }
        let mut random = [0u8; tls::MAX_MAC];
        if self.tls_mac_size > 0 && getrandom::fill(&mut random[..self.tls_mac_size]).is_err() {
            self.fail("no random bytes for a TLS CBC record");
            return None;
        }
        match tls::cbc_open(record, self.tls_version, b, self.tls_mac_size, &random) {
            Ok(opened) => {
                self.tls_mac = opened.mac;
                Some(opened.len)
            }
            Err(why) => {
                self.fail(&format!("{}: {why}", name(self.info)));
                None
            }
        }
    }

    /// The TLS record layout of this cipher, if it has one.
    fn tls_layout(&self) -> Option<tls::Layout> {
        match self.info.alg {
            CipherAlg::AesGcm => Some(tls::Layout::Gcm),
            CipherAlg::ChaCha20Poly1305 => Some(tls::Layout::ChaCha),
            _ => {
                self.fail(&format!("{}: no TLS record mode", name(self.info)));
                None
            }
        }
    }

    /// One whole AEAD message through ocf, in place: sealing writes the tag into `tag`,
    /// opening checks it.
    fn whole(&mut self, nonce: &[u8], aad: &[u8], payload: &mut [u8], tag: &mut [u8]) -> bool {
        let op = self.op();
        let Some(session) = &self.session else {
            return self.fail(&format!("{}: no key set", name(self.info)));
        };
        let mut computed = [0u8; TAG_LEN];
        let sealing = self.encrypt;
        let extras =
            Extras { iv: nonce, aad, tag: if sealing { &[] } else { &*tag }, tag_out: &mut computed };
        match self.feed.run(session, op, Part::Whole, Data::InPlace(payload), extras) {
            Ok(()) => {
                if sealing {
                    tag.copy_from_slice(&computed);
                }
                true
            }
            Err(ocf::Error::AuthFailed) => self.fail(&format!(
                "{}: TLS record tag mismatch (the record or its tag was altered)",
                name(self.info)
            )),
            Err(e) => self.fail(&format!("{}: {e}", name(self.info))),
        }
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
            if params::is(p, c"ivlen") {
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
            } else if params::is(p, c"tls-version") {
                // libssl sets it on every cipher; only block ciphers change behaviour (AEADs
                // ignore it, as OpenSSL's own do).
                if self.info.padded() {
                    match params::get_uint(p) {
                        Some(v) if tls::cbc_version_ok(v) => self.tls_version = v,
                        v => {
                            return self.fail(&format!(
                                "{}: tls-version {v:x?}: ocf takes TLS 1.0-1.2 and DTLS CBC records",
                                name(self.info)
                            ))
                        }
                    }
                }
            } else if params::is(p, c"tls-mac-size") {
                match params::get_uint(p) {
                    Some(n) if n as usize <= tls::MAX_MAC => self.tls_mac_size = n as usize,
                    _ => return self.fail("tls-mac-size: 0 to 64 bytes"),
                }
            } else if params::is(p, c"tlsaad") {
                let Some(layout) = self.tls_layout() else { return false };
                // SAFETY: an OCTET_STRING slot of a `Params` array holds `data_size` bytes
                // for this call (`Params::from_raw`).
                let given = unsafe { params::get_octets(p) }.unwrap_or(&[]);
                match tls::record_aad(given, layout, self.encrypt) {
                    Ok(rec) => self.tls_next = Some(rec),
                    Err(why) => return self.fail(&format!("{}: {why}", name(self.info))),
                }
            } else if params::is(p, c"tlsivfixed") {
                let Some(layout) = self.tls_layout() else { return false };
                // SAFETY: as above.
                let fixed = unsafe { params::get_octets(p) }.unwrap_or(&[]);
                let want = if layout == tls::Layout::Gcm { tls::GCM_FIXED_LEN } else { 12 };
                if fixed.len() != want {
                    return self.fail(&format!(
                        "{}: tlsivfixed of {} bytes; TLS gives {want}",
                        name(self.info),
                        fixed.len()
                    ));
                }
                self.iv[..want].copy_from_slice(fixed);
                if layout == tls::Layout::Gcm && self.encrypt {
                    // The explicit part starts anywhere and counts up (RFC 5288 §3).
                    if getrandom::fill(&mut self.iv[want..12]).is_err() {
                        return self.fail("AES-GCM: no random bytes for the TLS explicit nonce");
                    }
                }
                self.tls_fixed = true;
                self.tls_sealed = 0;
            } else if params::is(p, c"tag") {
                if !self.info.aead() {
                    return self.fail("tag: not an AEAD");
                }
                // SAFETY: as for `tlsaad`.
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

// ---- The dispatch functions: each takes OpenSSL's pointers apart once (see `boundary`),
// under `with_ctx` (a panic is an error, not an abort). Each algorithm's table differs only
// in `newctx` and `get_params`, which know the algorithm (their index into CIPHERS).
//
// What OpenSSL promises every one of them (provider-base(7), provider-cipher(7)): `ctx` is
// a context this table's `newctx` or `dupctx` made and not yet freed, used by one thread
// at a time; a key or IV is NULL or its length in bytes; `in` is NULL or `inl` readable
// bytes; `out` is NULL or `outsize` writable bytes; `outl` is NULL or a writable size_t;
// a parameter array is NULL or ends with a NULL key.

/// # Safety
/// `provctx` is the provider context `OSSL_provider_init` made.
unsafe extern "C" fn newctx<const I: usize>(provctx: *mut c_void) -> *mut c_void {
    // SAFETY: as OpenSSL promises.
    unsafe { boundary::new_ctx("cipher_newctx", provctx, |p| Some(CipherCtx::new(p, &CIPHERS[I]))) }
}

/// `encrypt_init` (`ENCRYPT` true) and `decrypt_init`.
///
/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn init<const ENCRYPT: bool>(
    ctx: *mut c_void,
    key: *const u8,
    keylen: usize,
    iv: *const u8,
    ivlen: usize,
    ps: *const Param,
) -> c_int {
    let what = if ENCRYPT { "cipher_encrypt_init" } else { "cipher_decrypt_init" };
    // SAFETY: as OpenSSL promises; the key, IV and parameters are only read.
    unsafe {
        boundary::with_ctx(what, ctx, FAIL, |c: &mut CipherCtx| {
            let (key, iv) = (given(key, keylen), given(iv, ivlen));
            c.init(ENCRYPT, key, iv, Params::from_raw(ps as *mut Param)) as c_int
        })
    }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn update(
    ctx: *mut c_void,
    out: *mut u8,
    outl: *mut usize,
    outsize: usize,
    input: *const u8,
    inl: usize,
) -> c_int {
    // SAFETY: as OpenSSL promises: the buffers are valid for this call, and nothing else
    // touches them meanwhile.
    unsafe {
        boundary::with_ctx("cipher_update", ctx, FAIL, |c: &mut CipherCtx| {
            let io = match Io::from_raw(out, outsize, input, inl) {
                Ok(io) => io,
                Err(e) => return c.refuse(e),
            };
            match c.update(io) {
                Some(n) => {
                    boundary::put(outl, n);
                    OK
                }
                None => FAIL,
            }
        })
    }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn finalize(ctx: *mut c_void, out: *mut u8, outl: *mut usize, outsize: usize) -> c_int {
    // SAFETY: as OpenSSL promises.
    unsafe {
        boundary::with_ctx("cipher_final", ctx, FAIL, |c: &mut CipherCtx| {
            match c.finish(slice_mut_or_empty(out, outsize)) {
                Some(n) => {
                    boundary::put(outl, n);
                    OK
                }
                None => FAIL,
            }
        })
    }
}

/// `EVP_Cipher`: for block modes, whole blocks with no padding logic; for the others, an
/// update (or, with no input, a final) — as OpenSSL's own ciphers do.
///
/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn cipher(
    ctx: *mut c_void,
    out: *mut u8,
    outl: *mut usize,
    outsize: usize,
    input: *const u8,
    inl: usize,
) -> c_int {
    if input.is_null() {
        // SAFETY: as OpenSSL promises.
        return unsafe { finalize(ctx, out, outl, outsize) };
    }
    // SAFETY: as OpenSSL promises: the buffers are valid for this call, and nothing else
    // touches them meanwhile.
    unsafe {
        boundary::with_ctx("cipher_cipher", ctx, FAIL, |c: &mut CipherCtx| {
            let io = match Io::from_raw(out, outsize, input, inl) {
                Ok(io) => io,
                Err(e) => return c.refuse(e),
            };
            let n = if c.info.padded() {
                if inl % c.info.block != 0 {
                    return c.fail("EVP_Cipher: whole blocks into a large enough buffer") as c_int;
                }
                // As in `CipherCtx::update`: the input moved into the output, then
                // transformed there.
                let Some(out) = c.output(io, inl, 0) else { return FAIL };
                if !c.part(&mut out[..inl], false) {
                    return FAIL;
                }
                inl
            } else {
                match c.update(io) {
                    Some(n) => n,
                    None => return FAIL,
                }
            };
            boundary::put(outl, n);
            OK
        })
    }
}

/// # Safety
/// `ctx` is NULL or a context of this table; OpenSSL frees each once.
unsafe extern "C" fn freectx(ctx: *mut c_void) {
    // SAFETY: as OpenSSL promises.
    unsafe { boundary::free_ctx::<CipherCtx>("cipher_freectx", ctx) }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn dupctx(ctx: *mut c_void) -> *mut c_void {
    // SAFETY: as OpenSSL promises.
    unsafe { boundary::dup_ctx("cipher_dupctx", ctx, CipherCtx::dup) }
}

/// The algorithm's fixed parameters.
///
/// # Safety
/// `ps` is NULL or a parameter array ending with a NULL key.
unsafe extern "C" fn get_params<const I: usize>(ps: *mut Param) -> c_int {
    boundary::guard("cipher_get_params", FAIL, crate::raise_loaded, || {
        // SAFETY: as OpenSSL promises.
        let mut ps = unsafe { Params::from_raw(ps) };
        let info = &CIPHERS[I];
        for (key, v) in [
            (c"mode", i64::from(info.mode)),
            (c"keylen", info.key_len as i64),
            (c"ivlen", info.iv_len as i64),
            (c"blocksize", info.block as i64),
            (c"aead", i64::from(info.aead())),
            (c"custom-iv", i64::from(info.aead())),
            (c"cts", 0),
            (c"tls-multi", 0),
            (c"has-randkey", 0),
        ] {
            if let Some(p) = ps.find(key) {
                if !params::set_int(p, v) {
                    return FAIL;
                }
            }
        }
        OK
    })
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn get_ctx_params(ctx: *mut c_void, ps: *mut Param) -> c_int {
    // SAFETY: as OpenSSL promises.
    unsafe {
        boundary::with_ctx("cipher_get_ctx_params", ctx, FAIL, |c: &mut CipherCtx| {
            c.get_params(Params::from_raw(ps)) as c_int
        })
    }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn set_ctx_params(ctx: *mut c_void, ps: *const Param) -> c_int {
    // SAFETY: as OpenSSL promises; the provider only reads the array's values.
    unsafe {
        boundary::with_ctx("cipher_set_ctx_params", ctx, FAIL, |c: &mut CipherCtx| {
            c.set_params(Params::from_raw(ps as *mut Param)) as c_int
        })
    }
}

static GETTABLE: [Param; 10] = [
    params::describe(c"mode", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"keylen", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"ivlen", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"blocksize", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"aead", abi::PARAM_INTEGER),
    params::describe(c"custom-iv", abi::PARAM_INTEGER),
    params::describe(c"cts", abi::PARAM_INTEGER),
    params::describe(c"tls-multi", abi::PARAM_INTEGER),
    params::describe(c"has-randkey", abi::PARAM_INTEGER),
    params::END,
];

static GETTABLE_CTX: [Param; 10] = [
    params::describe(c"tlsaadpad", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"tls-mac", abi::PARAM_OCTET_PTR),
    params::describe(c"keylen", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"ivlen", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"padding", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"num", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"iv", abi::PARAM_OCTET_STRING),
    params::describe(c"updated-iv", abi::PARAM_OCTET_STRING),
    params::describe(c"tag", abi::PARAM_OCTET_STRING),
    params::END,
];

static SETTABLE_CTX: [Param; 9] = [
    params::describe(c"padding", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"keylen", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"ivlen", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"tag", abi::PARAM_OCTET_STRING),
    params::describe(c"tlsaad", abi::PARAM_OCTET_STRING),
    params::describe(c"tlsivfixed", abi::PARAM_OCTET_STRING),
    params::describe(c"tls-version", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"tls-mac-size", abi::PARAM_UNSIGNED_INTEGER),
    params::END,
];

/// The parameter lists: static, nothing read from OpenSSL's arguments (safe functions,
/// guarded all the same).
extern "C" fn gettable_params(_provctx: *mut c_void) -> *const Param {
    boundary::static_list("cipher_gettable_params", &GETTABLE)
}

/// A static list: nothing read from OpenSSL's arguments.
extern "C" fn gettable_ctx_params(_ctx: *mut c_void, _provctx: *mut c_void) -> *const Param {
    boundary::static_list("cipher_gettable_ctx_params", &GETTABLE_CTX)
}

/// A static list: nothing read from OpenSSL's arguments.
extern "C" fn settable_ctx_params(_ctx: *mut c_void, _provctx: *mut c_void) -> *const Param {
    boundary::static_list("cipher_settable_ctx_params", &SETTABLE_CTX)
}

type InitFn = unsafe extern "C" fn(*mut c_void, *const u8, usize, *const u8, usize, *const Param) -> c_int;
type UpdateFn = unsafe extern "C" fn(*mut c_void, *mut u8, *mut usize, usize, *const u8, usize) -> c_int;
type FinalFn = unsafe extern "C" fn(*mut c_void, *mut u8, *mut usize, usize) -> c_int;
type CtxParamsFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> *const Param;

/// The dispatch table of the cipher at `CIPHERS[I]`.
const fn table<const I: usize>() -> [Dispatch; 15] {
    [
        entry!(1, newctx::<I>, unsafe extern "C" fn(*mut c_void) -> *mut c_void),
        entry!(2, init::<true>, InitFn),
        entry!(3, init::<false>, InitFn),
        entry!(4, update, UpdateFn),
        entry!(5, finalize, FinalFn),
        entry!(6, cipher, UpdateFn),
        entry!(7, freectx, unsafe extern "C" fn(*mut c_void)),
        entry!(8, dupctx, unsafe extern "C" fn(*mut c_void) -> *mut c_void),
        entry!(9, get_params::<I>, unsafe extern "C" fn(*mut Param) -> c_int),
        entry!(10, get_ctx_params, unsafe extern "C" fn(*mut c_void, *mut Param) -> c_int),
        entry!(11, set_ctx_params, unsafe extern "C" fn(*mut c_void, *const Param) -> c_int),
        entry!(12, gettable_params, unsafe extern "C" fn(*mut c_void) -> *const Param),
        entry!(13, gettable_ctx_params, CtxParamsFn),
        entry!(14, settable_ctx_params, CtxParamsFn),
        abi::END,
    ]
}

static T0: [Dispatch; 15] = table::<0>();
static T1: [Dispatch; 15] = table::<1>();
static T2: [Dispatch; 15] = table::<2>();
static T3: [Dispatch; 15] = table::<3>();
static T4: [Dispatch; 15] = table::<4>();
static T5: [Dispatch; 15] = table::<5>();
static T6: [Dispatch; 15] = table::<6>();
static T7: [Dispatch; 15] = table::<7>();
static T8: [Dispatch; 15] = table::<8>();
static T9: [Dispatch; 15] = table::<9>();
static T10: [Dispatch; 15] = table::<10>();

const fn alg(i: usize, table: &'static [Dispatch; 15]) -> Algorithm {
    Algorithm {
        names: CIPHERS[i].names.as_ptr(),
        properties: crate::PROPERTIES.as_ptr(),
        implementation: table.as_ptr(),
        description: std::ptr::null(),
    }
}

/// The cipher algorithms, as `query_operation` hands them to OpenSSL.
pub static ALGORITHMS: [Algorithm; 12] = [
    alg(0, &T0),
    alg(1, &T1),
    alg(2, &T2),
    alg(3, &T3),
    alg(4, &T4),
    alg(5, &T5),
    alg(6, &T6),
    alg(7, &T7),
    alg(8, &T8),
    alg(9, &T9),
    alg(10, &T10),
    crate::ALGORITHM_END,
];
