//! Runs an asymmetric case's [`Step`]s on its session in one buffer [`Layout`].
//!
//! Public-key requests read their input from `buf`'s payload and write their result to
//! `out[out_offset..]`, its length in `result_len` (`Op`'s docs); a signature to verify
//! sits in `buf` after the message. The layouts, as for the symmetric cases:
//!
//! | layout | `buf` | result |
//! |---|---|---|
//! | in-place | the input, contiguous | `out[0..]` (`out` exactly the room) |
//! | out-of-place | the input, contiguous | `out[3..]`, with margins either side |
//! | segmented | the input split 1 / 0 / 7 / rest | `out[0..]` |
//! | embedded | filler ‖ input ‖ filler, the payload a range; to verify, filler ‖ message ‖ signature (a signature ends `buf`) | `out[0..]` |
//!
//! In every layout `buf` must come back unchanged, and in `out` nothing but the result may
//! change: the margins and the room after the result keep their filler. A failed request
//! must leave the room untouched or wiped to zeros (no partial result released).

use ocf::{Buffer, Error, Mode, Op, Request, Session, TagPlace};

use super::{Expect, Step};
use crate::hex::brief;
use crate::report::Layout;
use crate::run::{expect_eq, split_awkwardly, Verdict, FILL, PREFIX_LEN, SUFFIX_LEN};

/// Runs `steps` in order in `layout`. `Err` says what went wrong.
pub(crate) fn evaluate(session: &Session, layout: Layout, steps: &[Step]) -> Result<Verdict, String> {
    let mut refused = false;
    for step in steps {
        let what = step.op.name();
        match (&step.expect, run_step(session, layout, step)?) {
            (Expect::Output(want), Ok(got)) => expect_eq(what, &got, want)?,
            (Expect::Accepted, Ok(_)) | (Expect::Either { output: None, .. }, Ok(_)) => {}
            (Expect::Length(n), Ok(got)) if got.len() == *n => {}
            (Expect::Length(n), Ok(got)) => {
                return Err(format!("{what}: a result of {} bytes, expected {n}", got.len()))
            }
            (Expect::Either { output: Some(want), .. }, Ok(got)) => expect_eq(what, &got, want)?,
            (Expect::Verified(verifier), Ok(got)) => (verifier.0)(&got)
                .map_err(|why| format!("{what}: result {} not accepted: {why}", brief(&got)))?,
            (Expect::Refused(r), Ok(got)) => {
                return Err(format!("{what}: accepted (result {}); expected {r}", brief(&got)))
            }
            (Expect::Refused(r) | Expect::Either { allowed: r, .. }, Err(e)) if r.matches(&e) => {
                refused = true
            }
            (Expect::Refused(r), Err(e)) => return Err(format!("{what}: expected {r}, got {e:?}")),
            (Expect::Either { allowed, .. }, Err(e)) => {
                return Err(format!("{what}: expected the known answer or {allowed}, got {e:?}"))
            }
            (_, Err(e)) => return Err(format!("{what} failed: {e:?}")),
        }
    }
    Ok(if refused { Verdict::Rejected } else { Verdict::Passed })
}

/// Room for any result of the session's algorithm and key (what a caller sizes `out` by).
fn room(session: &Session) -> usize {
    let params = session.params();
    match &params.mode {
        Mode::Asymmetric { alg, .. } => alg.max_output_len(params.key_bits()),
        _ => 0,
    }
}

/// Runs one step in `layout`: the result bytes, or the error. The outer `Err` reports a
/// broken buffer rule, whatever the operation's own outcome.
fn run_step(session: &Session, layout: Layout, step: &Step) -> Result<Result<Vec<u8>, Error>, String> {
    let what = step.op.name();
    let verify = step.op == Op::Verify;
    let mut whole = step.input.clone();
    whole.extend_from_slice(&step.signature);
    let (buf, start) = match layout {
        Layout::InPlace | Layout::OutOfPlace => (Buffer::from(whole), 0),
        Layout::Segmented => (Buffer::Segments(split_awkwardly(&whole)), 0),
        Layout::Embedded => {
            // A signature must run to the end of `buf`; other inputs get filler after them.
            let mut packet = vec![FILL; PREFIX_LEN];
            packet.extend_from_slice(&whole);
            if !verify {
                packet.resize(packet.len() + SUFFIX_LEN, FILL);
            }
            (Buffer::from(packet), PREFIX_LEN)
        }
    };
    let before = buf.to_vec();
    let message = start..start + step.input.len();
    let mut req = Request::new(step.op, buf).with_payload(message.clone());
    let (room, margin) = if verify {
        req = req.with_tag_place(TagPlace::InBuffer(message.end));
        (0, 0)
    } else {
        let margin = if layout == Layout::OutOfPlace { PREFIX_LEN } else { 0 };
        let after = if layout == Layout::OutOfPlace { SUFFIX_LEN } else { 0 };
        let room = room(session);
        req = req.with_output(vec![FILL; margin + room + after]);
        req.out_offset = margin;
        (room, margin)
    };
    let (req, error) = match session.run(req) {
        Ok(req) => (req, None),
        Err(f) => {
            let (error, req) = f.into_parts();
            (req, Some(error))
        }
    };
    if req.buf.to_vec() != before {
        return Err(format!("{what} changed its input buffer"));
    }
    if verify {
        return Ok(error.map_or(Ok(Vec::new()), Err));
    }
    let out = req.out.as_ref().map(Buffer::to_vec).unwrap_or_default();
    let expected_len = before_len(layout, room);
    if out.len() != expected_len {
        return Err(format!("{what}: the output buffer changed length from {expected_len} to {}", out.len()));
    }
    let (prefix, rest) = out.split_at(margin);
    let (result_room, suffix) = rest.split_at(room);
    if prefix.iter().chain(suffix).any(|&b| b != FILL) {
        return Err(format!("{what}: bytes of the output buffer outside the room changed"));
    }
    if let Some(error) = error {
        if result_room.iter().all(|&b| b == FILL) || result_room.iter().all(|&b| b == 0) {
            return Ok(Err(error));
        }
        return Err(format!("{what} failed ({error:?}) but left {} in its output", brief(result_room)));
    }
    let n = req.result_len();
    if n > room {
        return Err(format!("{what}: result_len {n} is beyond the room of {room}"));
    }
    let (result, unused) = result_room.split_at(n);
    if unused.iter().any(|&b| b != FILL) {
        return Err(format!("{what}: bytes after the {n}-byte result changed"));
    }
    Ok(Ok(result.to_vec()))
}

/// The length `out` was made with in `layout` for `room` bytes of result.
fn before_len(layout: Layout, room: usize) -> usize {
    match layout {
        Layout::OutOfPlace => PREFIX_LEN + room + SUFFIX_LEN,
        _ => room,
    }
}
