//! Validation: what a session demands of its requests ([`RequestRules`], computed once
//! from the session's parameters), checked in one place before a request reaches a driver
//! (`RequestRules::check`, called by the session's submit path). Drivers trust it.

use std::ops::Range;

use crate::asym::{AsymKey, AsymKind};
use crate::error::Error;
use crate::params::{Mode, SessionParams};

use super::{Aad, Op, Part, RequestFields, TagPlace};

/// What a session demands of its requests, computed once from the session parameters so
/// that checking a request is a handful of comparisons.
#[derive(Clone, Debug)]
pub(crate) struct RequestRules {
    mode: &'static str,
    cipher_ops: bool,
    digest_ops: bool,
    comp_ops: bool,
    /// An asymmetric session: the operations its algorithm and key allow (a bit per
    /// [`Op`] as `1 << op as u32`); 0 for other modes.
    asym_ops: u32,
    random_ops: bool,
    iv_len: usize,
    block_len: usize,
    pub(crate) tag_len: usize,
    aad_ok: bool,
    esn_ok: bool,
    multipart: bool,
}

impl RequestRules {
    pub(crate) fn new(p: &SessionParams) -> RequestRules {
        let (cipher_ops, digest_ops, aad_ok) = match &p.mode {
            Mode::Cipher { .. } => (true, false, false),
            Mode::Digest { .. } | Mode::Mac { .. } => (false, true, false),
            Mode::Aead { .. } | Mode::CipherThenMac { .. } => (true, false, true),
            Mode::Compress { .. } | Mode::Asymmetric { .. } | Mode::Random => (false, false, false),
        };
        let asym_ops = match &p.mode {
            Mode::Asymmetric { alg, key } => asym_ops(alg.kind(), key),
            _ => 0,
        };
        let comp_ops = matches!(p.mode, Mode::Compress { .. });
        let cipher = p.cipher_alg();
        let esn_ok = matches!(p.mode, Mode::Mac { .. } | Mode::CipherThenMac { .. });
        RequestRules {
            mode: p.mode.name(),
            cipher_ops,
            digest_ops,
            comp_ops,
            asym_ops,
            random_ops: matches!(p.mode, Mode::Random),
            iv_len: cipher.map_or(0, |c| c.iv_len()),
            // A power of two for every cipher (a test in `alg` checks), so `check` masks.
            block_len: cipher.map_or(1, |c| c.block_len()),
            tag_len: p.tag_len(),
            aad_ok,
            esn_ok,
            multipart: p.multipart,
        }
    }

    /// The one place a request is checked before it reaches a driver.
    #[inline]
    pub(crate) fn check(&self, r: &RequestFields) -> Result<(), Error> {
        let op_ok = match r.op {
            Op::Encrypt | Op::Decrypt => self.cipher_ops,
            Op::ComputeDigest | Op::VerifyDigest => self.digest_ops,
            Op::Compress | Op::Decompress => self.comp_ops,
            Op::Random => self.random_ops,
            op => self.asym_ops & (1 << op as u32) != 0,
        };
        if !op_ok {
            return Err(Error::BadOperation { op: r.op.name(), mode: self.mode });
        }
        if self.comp_ops {
            return self.check_compression(r);
        }
        if self.asym_ops != 0 || self.random_ops {
            return self.check_asymmetric(r);
        }
        if r.part != Part::Whole {
            self.check_part(r)?;
        }
        if r.iv_len != self.iv_len && r.part.starts() {
            return Err(Error::BadIvLength { expected: self.iv_len, got: r.iv_len });
        }
        if r.esn_set && !self.esn_ok {
            return Err(Error::EsnNotSupported { mode: self.mode });
        }
        let buf_len = r.buf.len();
        let payload = r.payload_range();
        in_bounds("payload", &payload, buf_len)?;
        // Block lengths are powers of two (1, 8, 16): a mask, not a division per request.
        if payload.len() & (self.block_len - 1) != 0 {
            return Err(Error::NotBlockMultiple { len: payload.len(), block: self.block_len });
        }
        let digest_op = matches!(r.op, Op::ComputeDigest | Op::VerifyDigest);
        if let (Some(out), false) = (&r.out, digest_op) {
            let need = r.out_offset.saturating_add(payload.len());
            if need > out.len() {
                return Err(Error::OutputTooShort { need, got: out.len() });
            }
        }
        match &r.aad {
            Aad::None => {}
            Aad::Bytes(b) if b.is_empty() => {}
            Aad::Inline(a) if a.as_bytes().is_empty() => {}
            _ if !self.aad_ok => return Err(Error::AadNotSupported { mode: self.mode }),
            Aad::Bytes(_) | Aad::Inline(_) => {}
            Aad::Region(ar) => {
                in_bounds("AAD", ar, buf_len)?;
                if r.out.is_none() && overlaps(ar, &payload) {
                    return Err(Error::BadRegion {
                        what: "AAD (overlaps the payload)",
                        start: ar.start,
                        end: ar.end,
                        buf_len,
                    });
                }
            }
        }
        if self.tag_len > 0 && r.part.ends() {
            match r.tag_place {
                TagPlace::Separate => {
                    if r.op.checks_tag() && r.tag_len != self.tag_len {
                        return Err(Error::BadTagLength {
                            got: r.tag_len,
                            allowed: tag_len_str(self.tag_len),
                        });
                    }
                }
                TagPlace::InBuffer(off) => {
                    let tr = off..off.saturating_add(self.tag_len);
                    // Computed tags go to the result buffer; checked tags come from `buf`.
                    let (holder, same_as_payload) = match (&r.out, r.op.checks_tag()) {
                        (Some(out), false) => (out.len(), !digest_op),
                        (Some(_), true) => (buf_len, false),
                        (None, _) => (buf_len, true),
                    };
                    in_bounds("tag", &tr, holder)?;
                    let work = match &r.out {
                        Some(_) if same_as_payload => r.out_offset..r.out_offset + payload.len(),
                        _ => payload.clone(),
                    };
                    if same_as_payload && overlaps(&tr, &work) {
                        return Err(Error::BadRegion {
                            what: "tag (overlaps the payload)",
                            start: tr.start,
                            end: tr.end,
                            buf_len: holder,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

impl RequestRules {
    /// A compression request: a payload inside `buf`, an `out` buffer with `out_offset` in
    /// it, and nothing a compression session does not use (IV, AAD, ESN, parts).
    fn check_compression(&self, r: &RequestFields) -> Result<(), Error> {
        self.check_whole_and_plain(r, "compression sessions take whole messages only")?;
        in_bounds("payload", &r.payload_range(), r.buf.len())?;
        check_out(r)
    }

    /// What compression, public-key and random requests share: a whole message (`part`
    /// says why not), and no IV, ESN or AAD (their sessions use none).
    fn check_whole_and_plain(&self, r: &RequestFields, part: &'static str) -> Result<(), Error> {
        if r.part != Part::Whole {
            return Err(Error::BadPart(part));
        }
        if r.iv_len != 0 {
            return Err(Error::BadIvLength { expected: 0, got: r.iv_len });
        }
        if r.esn_set {
            return Err(Error::EsnNotSupported { mode: self.mode });
        }
        if r.aad.separate().is_some_and(|a| !a.is_empty()) || matches!(r.aad, Aad::Region(_)) {
            return Err(Error::AadNotSupported { mode: self.mode });
        }
        Ok(())
    }

    /// An asymmetric or random request: whole, no IV, AAD or ESN; an input inside `buf`; an
    /// `out` buffer for every result but random bytes (written in place); a signature to
    /// verify at the end of `buf`, after the message. The result's room is the driver's to
    /// check (its length depends on the key): [`Error::OutputTooShort`].
    fn check_asymmetric(&self, r: &RequestFields) -> Result<(), Error> {
        self.check_whole_and_plain(r, "asymmetric and random sessions take whole messages only")?;
        let payload = r.payload_range();
        in_bounds("payload", &payload, r.buf.len())?;
        match r.op {
            Op::Random => return Ok(()),
            Op::Verify => {
                let TagPlace::InBuffer(off) = r.tag_place else {
                    return Err(Error::BadRegion {
                        what: "signature (verify takes it in buf, TagPlace::InBuffer)",
                        start: 0,
                        end: 0,
                        buf_len: r.buf.len(),
                    });
                };
                let sig = off..r.buf.len();
                in_bounds("signature", &sig, r.buf.len())?;
                if overlaps(&sig, &payload) {
                    return Err(Error::BadRegion {
                        what: "signature (overlaps the message)",
                        start: sig.start,
                        end: sig.end,
                        buf_len: r.buf.len(),
                    });
                }
                return Ok(());
            }
            _ => {}
        }
        check_out(r)
    }

    /// The rules a part of a multi-part message adds (see [`Part`]).
    fn check_part(&self, r: &RequestFields) -> Result<(), Error> {
        if !self.multipart {
            return Err(Error::BadPart("the session was not opened for multi-part messages"));
        }
        match r.part {
            Part::Middle | Part::Last if r.part_state.is_none() => {
                Err(Error::BadPart("no message in progress in this request: send a First part"))
            }
            Part::First | Part::Middle if matches!(r.tag_place, TagPlace::InBuffer(_)) => {
                Err(Error::BadPart("the tag goes with a message's Last part only"))
            }
            _ => Ok(()),
        }
    }
}

/// The operations an asymmetric session of `kind` holding `key` may ask for, as a bit set.
fn asym_ops(kind: AsymKind, key: &AsymKey) -> u32 {
    let ops: &[Op] = match (kind, key) {
        (AsymKind::ModExp, AsymKey::ModExp { .. }) => &[Op::ModExp],
        (_, AsymKey::Generate { .. }) => &[Op::GenerateKey],
        (AsymKind::Agreement, AsymKey::Private(_)) => &[Op::Derive, Op::PublicKey],
        (AsymKind::Signature, AsymKey::Private(_)) => &[Op::Sign, Op::PublicKey],
        (AsymKind::Signature, AsymKey::Public(_)) => &[Op::Verify],
        (AsymKind::Kem, AsymKey::Private(_)) => &[Op::Decapsulate, Op::PublicKey],
        (AsymKind::Kem, AsymKey::Public(_)) => &[Op::Encapsulate],
        // Refused by `SessionParams::validate`.
        _ => &[],
    };
    ops.iter().fold(0, |set, &op| set | 1 << op as u32)
}

fn tag_len_str(n: usize) -> &'static str {
    match n {
        10 => "10",
        12 => "12",
        16 => "16",
        20 => "20",
        24 => "24",
        32 => "32",
        48 => "48",
        64 => "64",
        _ => "the session's tag length",
    }
}

/// A result written out of place: an `out` buffer with `out_offset` in it.
fn check_out(r: &RequestFields) -> Result<(), Error> {
    let Some(out) = &r.out else {
        return Err(Error::NoOutputBuffer { op: r.op.name() });
    };
    if r.out_offset > out.len() {
        return Err(Error::BadRegion {
            what: "output offset",
            start: r.out_offset,
            end: r.out_offset,
            buf_len: out.len(),
        });
    }
    Ok(())
}

fn in_bounds(what: &'static str, r: &Range<usize>, buf_len: usize) -> Result<(), Error> {
    if r.start > r.end || r.end > buf_len {
        return Err(Error::BadRegion { what, start: r.start, end: r.end, buf_len });
    }
    Ok(())
}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}
