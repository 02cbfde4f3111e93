//! Requests: what to do to which bytes, and how the result comes back.
//!
//! A [`Request`] owns its buffers (like an mbuf owned by a `struct cryptop`) and travels by
//! value: caller → framework → driver → framework → caller. It is boxed once when created,
//! so moving it is moving a pointer; a caller that reuses its requests allocates nothing
//! per operation.
//!
//! Layout of a request (FreeBSD's crp_payload/crp_aad/crp_digest regions, simplified):
//! - `buf`: the input. In place, the payload region is overwritten with the result.
//! - `payload`: the bytes to encrypt, decrypt or digest (default: all of `buf`).
//! - `out`: optional out-of-place output; the result of the payload goes to
//!   `out[out_offset..]`, `buf` is left untouched.
//! - `aad`: authenticated-only data for AEAD and cipher+MAC sessions: separate bytes, or a
//!   region of `buf` (e.g. the ESP header in front of the payload).
//! - `iv`: the IV or AEAD nonce, carried inline.
//! - compression ([`Op::Compress`], [`Op::Decompress`]): the input is `buf`'s payload, the
//!   result goes to `out[out_offset..]` (required: its length differs from the input's), the
//!   room there is the limit, and the result's length comes back in
//!   [`RequestFields::result_len`] (FreeBSD's crp_olen).
//! - the tag (AEAD tag, MAC or digest): either carried inline in the request
//!   ([`TagPlace::Separate`]) or at an offset in a buffer ([`TagPlace::InBuffer`]): computed
//!   tags are written to the result buffer (`out` if out of place, else `buf`); tags to
//!   verify are read from `buf`.
//!
//! This file holds the request itself ([`Request`], [`RequestFields`], [`Outcome`],
//! [`Failed`]); the rest, one concern per file:
//!
//! ```text
//!  caller ─ builds ─▶ Request ─ checked by ─▶ rules::RequestRules   (the session's submit)
//!                       │                                            ─▶ driver
//!                       └─ seen by the driver through ─▶ views (with_views, Views)
//!  types: Op, TagPlace, Aad, Part, Flags … what all of them speak of
//!  trip:  the framework's travel state, and where the outcome goes
//! ```

use std::fmt;
use std::ops::{Deref, DerefMut, Range};

use crate::buffer::Buffer;
use crate::error::Error;

mod rules;
mod trip;
mod types;
mod views;

pub(crate) use rules::RequestRules;
pub use trip::Callback;
pub(crate) use trip::{Notify, RouteTrip, Trip, Waiter};
pub use types::{Aad, Flags, InlineAad, Op, Part, PartState, TagPlace, MAX_IV_LEN, MAX_TAG_LEN};
pub use views::Views;

/// The fields of a request, reached through `Request`'s `Deref`.
pub struct RequestFields {
    pub op: Op,
    pub buf: Buffer,
    /// The bytes processed; `None` means all of `buf`.
    pub payload: Option<Range<usize>>,
    /// Out-of-place output; `None` means in place.
    pub out: Option<Buffer>,
    /// Where in `out` the payload result starts.
    pub out_offset: usize,
    pub aad: Aad,
    pub tag_place: TagPlace,
    pub flags: Flags,
    /// The caller's cookie, untouched by ocf (FreeBSD's crp_opaque).
    pub user: u64,
    /// Which piece of a message this is (default: the whole message).
    pub part: Part,
    /// The driver's state of the multi-part message in progress (see [`Part`]).
    part_state: Option<Box<dyn PartState>>,
    /// A finished message's state, kept by its driver for the next message's `First` part
    /// (see [`RequestFields::keep_spare_state`]).
    spare_state: Option<Box<dyn PartState>>,
    iv: [u8; MAX_IV_LEN],
    iv_len: usize,
    tag: [u8; MAX_TAG_LEN],
    tag_len: usize,
    /// ESP extended sequence number, high-order 32 bits, big-endian (valid when `esn_set`).
    esn: [u8; 4],
    esn_set: bool,
    /// The length of a compression request's result in `out` (see [`Op::Compress`]).
    result_len: usize,
    /// Set when the request fails (see [`Failed`]).
    error: Option<Error>,
    /// The framework's bookkeeping while the request travels (completion target, flow
    /// control credit, order, profiling stamps).
    pub(crate) trip: Trip,
}

impl RequestFields {
    /// Sets the IV or nonce. A wrong length is reported when the request is submitted.
    #[inline]
    pub fn set_iv(&mut self, iv: &[u8]) {
        let n = iv.len().min(MAX_IV_LEN);
        self.iv[..n].copy_from_slice(&iv[..n]);
        self.iv_len = iv.len();
    }

    #[inline]
    pub fn iv(&self) -> &[u8] {
        &self.iv[..self.iv_len.min(MAX_IV_LEN)]
    }

    /// Gives the tag to verify (with [`TagPlace::Separate`]).
    #[inline]
    pub fn set_tag(&mut self, tag: &[u8]) {
        let n = tag.len().min(MAX_TAG_LEN);
        self.tag[..n].copy_from_slice(&tag[..n]);
        self.tag_len = tag.len();
    }

    /// Sets the high-order 32 bits of an ESP extended sequence number (RFC 4303 §2.2.1):
    /// MAC and cipher+MAC sessions authenticate them after the payload without their being
    /// part of the buffer (FreeBSD's `crp_esn`). AEAD sessions take them in the AAD instead.
    pub fn set_esn_high(&mut self, high: u32) {
        self.esn = high.to_be_bytes();
        self.esn_set = true;
    }

    /// Driver helper: takes the state of the message in progress out of the request.
    #[inline]
    pub fn take_part_state(&mut self) -> Option<Box<dyn PartState>> {
        self.part_state.take()
    }

    /// Driver helper: keeps the state of the message in progress for its next part.
    #[inline]
    pub fn set_part_state(&mut self, state: Box<dyn PartState>) {
        self.part_state = Some(state);
    }

    /// Driver helper: keeps the state of a message that just ended, for the driver to
    /// recycle at the next `First` part in this request instead of allocating and keying a
    /// new one (OpenSSL callers start a message per record: `openssl speed` does per
    /// 16-byte buffer). It holds the session's key material until it is recycled, replaced,
    /// or dropped with the request or by [`Request::reset`]. Not a message in progress.
    #[inline]
    pub fn keep_spare_state(&mut self, state: Box<dyn PartState>) {
        self.spare_state = Some(state);
    }

    /// Driver helper: the state kept by [`RequestFields::keep_spare_state`], if any. It may
    /// come from another session or driver: the driver checks before reusing it.
    #[inline]
    pub fn take_spare_state(&mut self) -> Option<Box<dyn PartState>> {
        self.spare_state.take()
    }

    /// Whether a multi-part message is in progress in this request.
    #[inline]
    pub fn in_message(&self) -> bool {
        self.part_state.is_some()
    }

    /// A copy of the message in progress, for a second request that continues it
    /// independently (both then go on from the same point). `None` if no message is in
    /// progress or its driver cannot copy its state.
    pub fn try_clone_part_state(&self) -> Option<Box<dyn PartState>> {
        self.part_state.as_ref()?.try_clone()
    }

    /// Abandons the message in progress, if any (its state is dropped and wiped by the
    /// driver's `Drop`).
    #[inline]
    pub fn end_message(&mut self) {
        self.part_state = None;
    }

    /// The ESN high-order bits, if set.
    pub fn esn_high(&self) -> Option<u32> {
        self.esn_set.then(|| u32::from_be_bytes(self.esn))
    }

    /// The separate tag: after a compute, the result; before a verify, what was given.
    #[inline]
    pub fn tag(&self) -> &[u8] {
        &self.tag[..self.tag_len.min(MAX_TAG_LEN)]
    }

    /// The payload range, resolved against `buf`.
    #[inline]
    pub fn payload_range(&self) -> Range<usize> {
        self.payload.clone().unwrap_or(0..self.buf.len())
    }

    /// The result of the payload: `out` when out of place, else `buf`.
    pub fn result_buf(&self) -> &Buffer {
        self.out.as_ref().unwrap_or(&self.buf)
    }

    /// How many bytes a compression or asymmetric request's result has at
    /// `out[out_offset..]` (FreeBSD's crp_olen); 0 before it completed and for other
    /// operations.
    #[inline]
    pub fn result_len(&self) -> usize {
        self.result_len
    }

    /// The payload's result bytes, as one vector (a convenience for tests and tools).
    pub fn result_payload(&self) -> Vec<u8> {
        if self.op.compresses() || self.op.asymmetric() {
            let (Some(out), start) = (&self.out, self.out_offset) else { return Vec::new() };
            let mut v = vec![0; self.result_len];
            out.copy_out(start..start + self.result_len, &mut v);
            return v;
        }
        let r = self.payload_range();
        let (buf, start) = match &self.out {
            Some(o) => (o, self.out_offset),
            None => (&self.buf, r.start),
        };
        let mut v = vec![0; r.len()];
        buf.copy_out(start..start + r.len(), &mut v);
        v
    }
}

/// A crypto request. Create it once, reuse it: [`Request::reset`] keeps its allocations.
pub struct Request(Box<RequestFields>);

impl Request {
    pub fn new(op: Op, buf: impl Into<Buffer>) -> Request {
        Request(Box::new(RequestFields {
            op,
            buf: buf.into(),
            payload: None,
            out: None,
            out_offset: 0,
            aad: Aad::None,
            tag_place: TagPlace::Separate,
            flags: Flags::default(),
            user: 0,
            part: Part::Whole,
            part_state: None,
            spare_state: None,
            iv: [0; MAX_IV_LEN],
            iv_len: 0,
            tag: [0; MAX_TAG_LEN],
            tag_len: 0,
            esn: [0; 4],
            esn_set: false,
            result_len: 0,
            error: None,
            trip: Trip::default(),
        }))
    }

    /// An asymmetric request: `op` on `input` (the message, the peer's public value, the
    /// ciphertext, the base; empty for `Encapsulate`, `PublicKey`, `GenerateKey`), its result
    /// written to a new `out` of `room` bytes ([`crate::AsymAlg::max_output_len`] is always
    /// enough). The result is `out[..result_len()]`.
    pub fn asymmetric(op: Op, input: impl Into<Buffer>, room: usize) -> Request {
        Request::new(op, input).with_output(vec![0u8; room])
    }

    /// A request to verify `signature` over `message`: `buf` is `message ‖ signature`, the
    /// payload the message, the signature at [`TagPlace::InBuffer`] after it (see
    /// [`Op::Verify`]).
    pub fn verify(message: &[u8], signature: &[u8]) -> Request {
        let mut buf = Vec::with_capacity(message.len() + signature.len());
        buf.extend_from_slice(message);
        buf.extend_from_slice(signature);
        Request::new(Op::Verify, buf)
            .with_payload(0..message.len())
            .with_tag_place(TagPlace::InBuffer(message.len()))
    }

    /// A request for `n` random bytes (a random session), written into its `buf`.
    pub fn random(n: usize) -> Request {
        Request::new(Op::Random, vec![0u8; n])
    }

    /// Driver helper for [`Op::Verify`]: runs `f` on the message (the payload) and the
    /// signature (`buf` from the signature's offset to its end). The request was validated,
    /// so both are in bounds and apart. A segmented `buf` is gathered into a temporary.
    pub fn with_message_and_signature<R>(&self, f: impl FnOnce(&[u8], &[u8]) -> R) -> R {
        let payload = self.payload_range();
        let len = self.buf.len();
        let sig = match self.tag_place {
            TagPlace::InBuffer(off) => off.min(len)..len,
            TagPlace::Separate => len..len,
        };
        match self.buf.as_contiguous() {
            Some(v) => f(&v[payload], &v[sig]),
            None => {
                let mut whole = vec![0; len];
                self.buf.copy_out(0..len, &mut whole);
                f(&whole[payload], &whole[sig])
            }
        }
    }

    /// Builder: the IV or nonce.
    pub fn with_iv(mut self, iv: &[u8]) -> Request {
        self.set_iv(iv);
        self
    }

    /// Builder: separate AAD bytes (held inline when they fit, see [`Aad::Inline`]).
    pub fn with_aad(mut self, aad: &[u8]) -> Request {
        self.aad = match InlineAad::new(aad) {
            Some(a) => Aad::Inline(a),
            None => Aad::Bytes(aad.to_vec()),
        };
        self
    }

    /// Builder: the separate tag to verify.
    pub fn with_tag(mut self, tag: &[u8]) -> Request {
        self.set_tag(tag);
        self
    }

    /// Builder: ESN high-order bits (see [`RequestFields::set_esn_high`]).
    pub fn with_esn_high(mut self, high: u32) -> Request {
        self.set_esn_high(high);
        self
    }

    /// Builder: the payload region of `buf`.
    pub fn with_payload(mut self, range: Range<usize>) -> Request {
        self.payload = Some(range);
        self
    }

    /// Builder: out-of-place output into `out`, payload result at offset 0.
    pub fn with_output(mut self, out: impl Into<Buffer>) -> Request {
        self.out = Some(out.into());
        self
    }

    /// Builder: where the tag lives.
    pub fn with_tag_place(mut self, place: TagPlace) -> Request {
        self.tag_place = place;
        self
    }

    /// Builder: which piece of a message this is (see [`Part`]).
    pub fn with_part(mut self, part: Part) -> Request {
        self.part = part;
        self
    }

    /// Builder: flags.
    pub fn with_flags(mut self, flags: Flags) -> Request {
        self.flags = flags;
        self
    }

    /// Prepares the request for reuse with a new operation and buffer, keeping the box.
    pub fn reset(&mut self, op: Op, buf: Buffer) {
        let f = &mut *self.0;
        f.op = op;
        f.buf = buf;
        f.payload = None;
        f.out = None;
        f.out_offset = 0;
        f.aad = Aad::None;
        f.tag_place = TagPlace::Separate;
        f.flags = Flags::default();
        f.part = Part::Whole;
        f.part_state = None;
        f.spare_state = None;
        f.iv_len = 0;
        f.tag_len = 0;
        f.esn_set = false;
        f.result_len = 0;
        f.error = None;
        f.trip = Trip::default();
    }

    #[inline]
    pub(crate) fn trip_mut(&mut self) -> &mut Trip {
        &mut self.0.trip
    }

    #[inline]
    pub(crate) fn trip(&self) -> &Trip {
        &self.0.trip
    }

    pub(crate) fn set_tag_len(&mut self, n: usize) {
        self.0.tag_len = n;
    }
}

impl Deref for Request {
    type Target = RequestFields;
    fn deref(&self) -> &RequestFields {
        &self.0
    }
}

impl DerefMut for Request {
    fn deref_mut(&mut self) -> &mut RequestFields {
        &mut self.0
    }
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("op", &self.op)
            .field("buf_len", &self.buf.len())
            .field("payload", &self.payload)
            .field("out_of_place", &self.out.is_some())
            .field("user", &self.user)
            .field("part", &self.part)
            .finish_non_exhaustive()
    }
}

/// The result of a request: the request back (with its buffers), or the error with the
/// request back.
pub type Outcome = Result<Request, Failed>;

/// A failed request: the request itself (so no buffer is lost), carrying why it failed.
///
/// The error lives in the request's box (like FreeBSD's `crp_etype`), which keeps
/// [`Outcome`] two words wide: moving outcomes through the dispatch and completion layers
/// is then as cheap as moving a pointer.
pub struct Failed {
    pub request: Request,
}

impl Failed {
    pub fn new(error: Error, mut request: Request) -> Failed {
        request.0.error = Some(error);
        Failed { request }
    }

    /// Why the request failed.
    pub fn error(&self) -> &Error {
        // Every constructor stores an error; the fallback only keeps this total.
        self.request.0.error.as_ref().unwrap_or(&Error::DriverFailure("failure without a cause"))
    }

    /// The error and the request, separated.
    pub fn into_parts(mut self) -> (Error, Request) {
        let e = self.request.0.error.take().unwrap_or(Error::DriverFailure("failure without a cause"));
        (e, self.request)
    }
}

impl fmt::Debug for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Failed({:?}, {:?})", self.error(), self.request)
    }
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error().fmt(f)
    }
}

impl std::error::Error for Failed {}
