//! The driver's side of a request: contiguous slices of its payload, AAD, IV and tag
//! ([`Views`], through [`Request::with_views`]; [`Request::with_input_output`] for
//! compression), whatever the buffers' shape.
//!
//! ```text
//!  contiguous, in place, tag inline, AAD separate ───────────────────▶ f(views)
//!  otherwise:  tag to verify (in a buffer) ─▶ the inline tag slot
//!              out of place: payload ─▶ out[out_offset..]
//!              segmented payload or AAD ─▶ gathered into a temporary ─▶ f(views)
//!              ─▶ the temporary scattered back; a computed tag ─▶ its place
//! ```
//!
//! The temporaries of the segmented (rare) path hold message bytes, plaintext included:
//! they are [`Zeroizing`], so they are wiped when dropped and no copy of a message is left
//! in freed memory (`ocf/tests/bounce_wipe.rs` watches the allocator for it). The
//! contiguous path allocates nothing and is unchanged.

use std::ops::Range;

use zeroize::Zeroizing;

use crate::buffer::Buffer;
use crate::error::Error;

use super::{Aad, Op, Request, RequestFields, TagPlace, MAX_IV_LEN, MAX_TAG_LEN};

impl Request {
    /// Driver helper for compression requests: runs `f` on the payload (input) and the room
    /// in `out` from `out_offset` (output); `f` returns the result's length, which becomes
    /// [`RequestFields::result_len`] (0 if `f` fails). The request was validated, so `out`
    /// exists. Segmented buffers are gathered into (and a segmented `out` scattered from)
    /// temporary vectors, wiped when dropped: the rare path; contiguous ones copy nothing.
    pub fn with_input_output(
        &mut self,
        f: impl FnOnce(&[u8], &mut [u8]) -> Result<usize, Error>,
    ) -> Result<(), Error> {
        let fields = &mut *self.0;
        fields.result_len = 0;
        let payload = fields.payload.clone().unwrap_or(0..fields.buf.len());
        let Some(out) = fields.out.as_mut() else {
            return Err(Error::NoOutputBuffer { op: fields.op.name() });
        };
        let gathered: Zeroizing<Vec<u8>>;
        let input: &[u8] = match fields.buf.as_contiguous() {
            Some(v) => &v[payload],
            None => {
                let mut g = Zeroizing::new(vec![0; payload.len()]);
                fields.buf.copy_out(payload, &mut g);
                gathered = g;
                &gathered
            }
        };
        let room = fields.out_offset.min(out.len())..out.len();
        let n = run_on_payload(out, room, |o| f(input, o).map(|n| n.min(o.len())))?;
        fields.result_len = n;
        Ok(())
    }

    /// Driver helper: runs `f` on contiguous views of the payload, AAD, IV and tag, hiding
    /// in-place vs out-of-place, contiguous vs scatter-gather, and where the tag lives.
    ///
    /// Before `f`: out of place (ciphers), the payload is copied to `out`; a tag to verify is copied
    /// into the inline tag slot. After `f`: a gathered payload is scattered back and a
    /// computed tag is copied to its place. The request was validated, so every region is in
    /// bounds and the regions are disjoint. Scatter-gather payloads are gathered into a
    /// temporary vector, wiped when dropped: segmented packets are the rare path,
    /// contiguous ones copy nothing.
    pub fn with_views<R>(&mut self, f: impl FnOnce(Views<'_>) -> R) -> R {
        let fields = &mut *self.0;
        let payload = fields.payload.clone().unwrap_or(0..fields.buf.len());
        // Lengths were validated against the session; clamping keeps this function total
        // even if a driver calls it on a request the framework has not checked.
        let tag_len = fields.tag_len.min(MAX_TAG_LEN);
        let iv_len = fields.iv_len.min(MAX_IV_LEN);
        let esn_len = if fields.esn_set { 4 } else { 0 };

        // The common case first: contiguous, in place, tag inline, AAD absent or separate.
        if fields.out.is_none() && fields.tag_place == TagPlace::Separate {
            if let (Some(v), Aad::None | Aad::Bytes(_) | Aad::Inline(_)) =
                (fields.buf.as_contiguous_mut(), &fields.aad)
            {
                let aad: &[u8] = fields.aad.separate().unwrap_or(&[]);
                let iv = &fields.iv[..iv_len];
                let esn = &fields.esn[..esn_len];
                return f(Views { payload: &mut v[payload], aad, iv, tag: &mut fields.tag[..tag_len], esn });
            }
        }

        // A tag to verify that sits in the buffer is copied into the inline slot first.
        if let (true, TagPlace::InBuffer(off)) = (fields.op.checks_tag(), fields.tag_place) {
            fields.buf.copy_out(off..off + tag_len, &mut fields.tag[..tag_len]);
        }

        // Digests read the payload and write nothing but the tag: no copy to `out`.
        let digest_op = matches!(fields.op, Op::ComputeDigest | Op::VerifyDigest);
        let RequestFields { buf, out, out_offset, aad, iv, tag, esn, .. } = &mut *fields;
        let iv = &iv[..iv_len];
        let esn = &esn[..esn_len];
        let tag = &mut tag[..tag_len];
        let gathered_aad: Zeroizing<Vec<u8>>;
        let result = match out.as_mut().filter(|_| !digest_op) {
            // Out of place: the result buffer starts as a copy of the input payload, and
            // the AAD is read from the untouched input.
            Some(out) => {
                let dst = *out_offset..*out_offset + payload.len();
                copy_between(buf, payload.clone(), out, dst.start);
                let aad: &[u8] = match &*aad {
                    Aad::Bytes(b) => b,
                    Aad::Inline(a) => a.as_bytes(),
                    Aad::Region(ar) => match buf.as_contiguous() {
                        Some(v) => &v[ar.clone()],
                        None => {
                            let mut g = Zeroizing::new(vec![0; ar.len()]);
                            buf.copy_out(ar.clone(), &mut g);
                            gathered_aad = g;
                            &gathered_aad
                        }
                    },
                    Aad::None => &[],
                };
                run_on_payload(out, dst, |payload| f(Views { payload, aad, iv, tag, esn }))
            }
            // In place, contiguous, AAD in the same buffer: split it, copy nothing.
            None if matches!(aad, Aad::Region(_)) && buf.as_contiguous().is_some() => {
                let (Aad::Region(ar), Some(v)) = (&*aad, buf.as_contiguous_mut()) else {
                    unreachable!("checked by the match guard")
                };
                let (aad, payload) = disjoint(v, ar.clone(), payload);
                f(Views { payload, aad, iv, tag, esn })
            }
            None => {
                let aad: &[u8] = match &*aad {
                    Aad::Bytes(b) => b,
                    Aad::Inline(a) => a.as_bytes(),
                    Aad::Region(ar) => {
                        let mut g = Zeroizing::new(vec![0; ar.len()]);
                        buf.copy_out(ar.clone(), &mut g);
                        gathered_aad = g;
                        &gathered_aad
                    }
                    Aad::None => &[],
                };
                run_on_payload(buf, payload, |payload| f(Views { payload, aad, iv, tag, esn }))
            }
        };

        // A computed tag that belongs in a buffer is copied there.
        if let (false, TagPlace::InBuffer(off)) = (fields.op.checks_tag(), fields.tag_place) {
            let tag = fields.tag;
            match &mut fields.out {
                Some(out) => out.copy_in(off, &tag[..tag_len]),
                None => fields.buf.copy_in(off, &tag[..tag_len]),
            }
        }
        result
    }
}

/// Runs `f` on the payload as one mutable slice, gathering and scattering segments.
fn run_on_payload<R>(buf: &mut Buffer, range: Range<usize>, f: impl FnOnce(&mut [u8]) -> R) -> R {
    match buf.as_contiguous_mut() {
        Some(v) => f(&mut v[range]),
        None => {
            let mut tmp = Zeroizing::new(vec![0; range.len()]);
            buf.copy_out(range.clone(), &mut tmp);
            let r = f(&mut tmp);
            buf.copy_in(range.start, &tmp);
            r
        }
    }
}

fn copy_between(src: &Buffer, range: Range<usize>, dst: &mut Buffer, dst_off: usize) {
    match (src.as_contiguous(), dst.as_contiguous_mut()) {
        (Some(s), Some(d)) => d[dst_off..dst_off + range.len()].copy_from_slice(&s[range]),
        (Some(s), None) => dst.copy_in(dst_off, &s[range]),
        _ => {
            let mut tmp = Zeroizing::new(vec![0; range.len()]);
            src.copy_out(range, &mut tmp);
            dst.copy_in(dst_off, &tmp);
        }
    }
}

/// Splits one slice into a read-only region and a disjoint mutable region.
fn disjoint(v: &mut [u8], ro: Range<usize>, rw: Range<usize>) -> (&[u8], &mut [u8]) {
    if ro.end <= rw.start {
        let (left, right) = v.split_at_mut(rw.start);
        (&left[ro], &mut right[..rw.len()])
    } else {
        let (left, right) = v.split_at_mut(ro.start);
        (&right[..ro.len()], &mut left[rw])
    }
}

/// What a driver's processing function sees: contiguous, validated views.
pub struct Views<'a> {
    /// The bytes to transform in place (or to digest).
    pub payload: &'a mut [u8],
    pub aad: &'a [u8],
    pub iv: &'a [u8],
    /// The tag slot: write the computed tag here, or read the tag to verify from here.
    pub tag: &'a mut [u8],
    /// Bytes a MAC covers after the payload: the ESN high-order bits (4 bytes) or nothing.
    pub esn: &'a [u8],
}
