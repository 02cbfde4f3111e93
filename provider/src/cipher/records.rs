//! TLS record modes, the cipher context's side (the record arithmetic is `crate::tls`):
//! TLS 1.2's AEAD records and the CBC records of TLS 1.0-1.2, as libssl drives them.
//!
//! ```text
//!  set_ctx_params: tlsivfixed (once per key), tlsaad (per record), tls-version,
//!                  tls-mac-size ─▶ set_tls_param
//!  update ─▶ tls_record (AEAD: one whole ocf message per record, in place)
//!         ─▶ tls_cbc_record (CBC: one part of a message that never ends)
//! ```

use ocf::{CipherAlg, Part};
use zeroize::Zeroize;

use crate::abi::Param;
use crate::boundary::Io;
use crate::params;
use crate::part::{Data, Extras};
use crate::tls;

use super::{name, CipherCtx, TAG_LEN};

impl CipherCtx {
    /// One TLS 1.2 record (see `tls`), announced by `tlsaad`: its payload goes through ocf
    /// as one whole AEAD message, in place. Returns the whole record's length when sealing,
    /// the payload's when opening (as OpenSSL's providers do).
    pub(super) fn tls_record(&mut self, io: Io<'_>) -> Option<usize> {
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
    pub(super) fn tls_cbc_record(&mut self, io: Io<'_>) -> Option<usize> {
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

    /// A TLS parameter (`tls-version`, `tls-mac-size`, `tlsaad`, `tlsivfixed`) set;
    /// `None` if `p` is none of them, else whether it was taken (the error raised if not).
    pub(super) fn set_tls_param(&mut self, p: &mut Param) -> Option<bool> {
        let tls =
            [c"tls-version", c"tls-mac-size", c"tlsaad", c"tlsivfixed"].iter().any(|k| params::is(p, k));
        tls.then(|| self.set_tls_known(p))
    }

    /// [`CipherCtx::set_tls_param`] for a parameter it knows.
    fn set_tls_known(&mut self, p: &mut Param) -> bool {
        if params::is(p, c"tls-version") {
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
        }
        true
    }
}
