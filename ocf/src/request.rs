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

use std::any::Any;
use std::fmt;
use std::ops::{Deref, DerefMut, Range};

use crate::buffer::Buffer;
use crate::error::Error;
use crate::params::{Mode, SessionParams};

mod trip;

pub use trip::Callback;
pub(crate) use trip::{Notify, RouteTrip, Trip, Waiter};

/// The longest tag, MAC or digest (SHA-512).
pub const MAX_TAG_LEN: usize = 64;
/// The longest IV or nonce (AES block).
pub const MAX_IV_LEN: usize = 16;

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Cipher: encrypt. AEAD and cipher+MAC: encrypt and compute the tag.
    Encrypt,
    /// Cipher: decrypt. AEAD and cipher+MAC: verify the tag, then decrypt.
    Decrypt,
    /// Digest or MAC: compute it.
    ComputeDigest,
    /// Digest or MAC: compare with the given one (in constant time).
    VerifyDigest,
    /// Compression: compress the payload into `out[out_offset..]`. The result must be
    /// shorter than the input and fit the room in `out`, else the request fails with
    /// [`Error::Incompressible`] and the caller sends the original (RFC 3173 §2.2).
    Compress,
    /// Compression: decompress the payload into `out[out_offset..]`. The room there is the
    /// limit: a stream that would produce more fails with [`Error::OutputLimit`], having
    /// written no more than the room and allocated nothing for the rest; a corrupt or
    /// truncated one with [`Error::BadCompressedData`].
    Decompress,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Encrypt => "encrypt",
            Op::Decrypt => "decrypt",
            Op::ComputeDigest => "compute-digest",
            Op::VerifyDigest => "verify-digest",
            Op::Compress => "compress",
            Op::Decompress => "decompress",
        }
    }

    /// Whether this is a compression operation (result out of place, its own length).
    #[inline]
    pub fn compresses(self) -> bool {
        matches!(self, Op::Compress | Op::Decompress)
    }

    /// Whether the tag is an input (checked) rather than an output (written).
    #[inline]
    pub fn checks_tag(self) -> bool {
        matches!(self, Op::Decrypt | Op::VerifyDigest)
    }
}

/// Where the tag/MAC/digest lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagPlace {
    /// Inline in the request: read it with [`RequestFields::tag`], give one to verify with
    /// [`RequestFields::set_tag`].
    Separate,
    /// At this offset of the result buffer (computing) or of `buf` (verifying).
    InBuffer(usize),
}

/// Associated data authenticated but not encrypted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Aad {
    #[default]
    None,
    /// Separate bytes.
    Bytes(Vec<u8>),
    /// A few separate bytes held in the request itself: no allocation per request for
    /// short AAD such as ESP's SPI ‖ ESN high ‖ sequence number (12 bytes) or TLS 1.2's
    /// record header (13). [`Request::with_aad`] picks it when the AAD fits.
    Inline(InlineAad),
    /// A region of `buf`, which must not overlap the payload.
    Region(Range<usize>),
}

impl Aad {
    /// The AAD bytes when they are separate from the buffer (`Bytes` or `Inline`).
    #[inline]
    pub fn separate(&self) -> Option<&[u8]> {
        match self {
            Aad::Bytes(b) => Some(b),
            Aad::Inline(a) => Some(a.as_bytes()),
            Aad::None | Aad::Region(_) => None,
        }
    }
}

/// Up to [`InlineAad::MAX`] AAD bytes, stored without a heap allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InlineAad {
    bytes: [u8; InlineAad::MAX],
    len: u8,
}

impl InlineAad {
    /// The most bytes it holds.
    pub const MAX: usize = 16;

    /// `aad` held inline; `None` if it is longer than [`InlineAad::MAX`].
    #[inline]
    pub fn new(aad: &[u8]) -> Option<InlineAad> {
        let mut bytes = [0; InlineAad::MAX];
        bytes.get_mut(..aad.len())?.copy_from_slice(aad);
        Some(InlineAad { bytes, len: aad.len() as u8 })
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Which piece of a message a request carries.
///
/// Most messages travel whole: an ESP packet, a TLS record. Some arrive in pieces of any
/// size — OpenSSL's `EVP_EncryptUpdate` calls, a file hashed as it is read — and a digest
/// or AEAD tag covers them all. A *multi-part message* is a `First` part, any number of
/// `Middle` parts and a `Last` part, sent one after the other **in the same [`Request`]**:
/// the driver keeps its state for the message (a running hash, a CBC chaining value, a
/// GCM counter and GHASH) in the request ([`PartState`]), so a session serves any number
/// of messages at once, and the next part cannot overtake the previous one.
///
/// Rules, checked by the framework before the driver sees a part (errors are
/// [`Error::BadPart`]):
/// - the session was opened with [`SessionParams::multipart`], so its driver takes parts;
/// - the IV or nonce is read from the `First` part (later parts' IV fields are ignored, so
///   a reused request need not clear it);
/// - the tag (to compute or to verify) belongs to the `Last` part only;
/// - a `Middle` or `Last` part needs a message in progress in its request;
/// - block-mode parts are whole blocks (the caller buffers the rest, as OpenSSL's own
///   ciphers do); stream modes, AEADs and digests take parts of any length;
/// - AEAD associated data comes before the first byte of payload.
///
/// A failed part ends its message: the state is dropped, and the next part must be a
/// `First`. A decrypting AEAD releases plaintext part by part, before the `Last` part
/// checks the tag — as every streaming AEAD interface does; a caller that must not see
/// unauthenticated plaintext sends the message whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Part {
    /// A whole message (the default).
    #[default]
    Whole,
    /// The first piece: starts a message (a new IV, a fresh hash), abandoning any message
    /// still in progress in the request.
    First,
    /// A piece in between.
    Middle,
    /// The last piece: finishes the message and computes or checks the tag.
    Last,
}

impl Part {
    /// Whether this part starts a message (carries the IV).
    #[inline]
    pub fn starts(self) -> bool {
        matches!(self, Part::Whole | Part::First)
    }

    /// Whether this part ends a message (carries the tag).
    #[inline]
    pub fn ends(self) -> bool {
        matches!(self, Part::Whole | Part::Last)
    }
}

/// A driver's state for a multi-part message in progress, carried by the request between
/// parts (see [`Part`]). The framework never looks inside; the driver that made it
/// downcasts it back (`Box<dyn PartState>` upcasts to `Box<dyn Any>`).
pub trait PartState: Any + Send {
    /// An independent copy of the message so far, if the driver can make one: OpenSSL
    /// duplicates digest contexts to hash a common prefix once (`EVP_MD_CTX_copy`).
    fn try_clone(&self) -> Option<Box<dyn PartState>>;
}

/// Per-request flags: how the request travels (see `crate::dispatch`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags(u32);

impl Flags {
    /// No flag: direct dispatch, callback on a return worker.
    pub const NONE: Flags = Flags(0);
    /// The request may be queued and handed to the driver with others by the dispatch
    /// worker, with a hint that more follow (the paper's "batchable" requests). Without
    /// it, a request goes from the caller straight into the driver.
    pub const BATCH: Flags = Flags(1);
    /// Run the callback in the driver's completion context — the submitting thread for a
    /// synchronous driver, the device's completion thread for an asynchronous one —
    /// instead of on a return worker (FreeBSD's CRYPTO_F_CBIMM). For short callbacks that
    /// do not block: it saves a thread hop per request.
    pub const CALLBACK_IMMEDIATE: Flags = Flags(2);
    /// More requests for this session follow from this submitter at once: direct dispatch
    /// hands the driver [`crate::Hint::more`], so a device can post them all and ring its
    /// doorbell once (the paper's "more follow" hint without the dispatch worker's thread
    /// hop). The submitter must send the last of its run without it; a device that was
    /// promised more and got none only learns it from its own timeout.
    pub const MORE: Flags = Flags(4);

    /// These flags without `other`'s.
    pub fn without(self, other: Flags) -> Flags {
        Flags(self.0 & !other.0)
    }

    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, o: Flags) -> Flags {
        Flags(self.0 | o.0)
    }
}

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

    /// How many bytes a compression request's result has at `out[out_offset..]` (FreeBSD's
    /// crp_olen); 0 before it completed and for other operations.
    #[inline]
    pub fn result_len(&self) -> usize {
        self.result_len
    }

    /// The payload's result bytes, as one vector (a convenience for tests and tools).
    pub fn result_payload(&self) -> Vec<u8> {
        if self.op.compresses() {
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

    /// Driver helper for compression requests: runs `f` on the payload (input) and the room
    /// in `out` from `out_offset` (output); `f` returns the result's length, which becomes
    /// [`RequestFields::result_len`] (0 if `f` fails). The request was validated, so `out`
    /// exists. Segmented buffers are gathered into (and a segmented `out` scattered from)
    /// temporary vectors: the rare path; contiguous ones copy nothing.
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
        let gathered: Vec<u8>;
        let input: &[u8] = match fields.buf.as_contiguous() {
            Some(v) => &v[payload],
            None => {
                let mut g = vec![0; payload.len()];
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
    /// temporary vector: segmented packets are the rare path, contiguous ones copy nothing.
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
        let gathered_aad: Vec<u8>;
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
                            let mut g = vec![0; ar.len()];
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
                        let mut g = vec![0; ar.len()];
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

/// Runs `f` on the payload as one mutable slice, gathering and scattering segments.
fn run_on_payload<R>(buf: &mut Buffer, range: Range<usize>, f: impl FnOnce(&mut [u8]) -> R) -> R {
    match buf.as_contiguous_mut() {
        Some(v) => f(&mut v[range]),
        None => {
            let mut tmp = vec![0; range.len()];
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
            let mut tmp = vec![0; range.len()];
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

/// What a session demands of its requests, computed once from the session parameters so
/// that checking a request is a handful of comparisons.
#[derive(Clone, Debug)]
pub(crate) struct RequestRules {
    mode: &'static str,
    cipher_ops: bool,
    digest_ops: bool,
    comp_ops: bool,
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
            Mode::Compress { .. } => (false, false, false),
        };
        let comp_ops = matches!(p.mode, Mode::Compress { .. });
        let cipher = p.cipher_alg();
        let esn_ok = matches!(p.mode, Mode::Mac { .. } | Mode::CipherThenMac { .. });
        RequestRules {
            mode: p.mode.name(),
            cipher_ops,
            digest_ops,
            comp_ops,
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
        };
        if !op_ok {
            return Err(Error::BadOperation { op: r.op.name(), mode: self.mode });
        }
        if self.comp_ops {
            return self.check_compression(r);
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
        if r.part != Part::Whole {
            return Err(Error::BadPart("compression sessions take whole messages only"));
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
        in_bounds("payload", &r.payload_range(), r.buf.len())?;
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

fn in_bounds(what: &'static str, r: &Range<usize>, buf_len: usize) -> Result<(), Error> {
    if r.start > r.end || r.end > buf_len {
        return Err(Error::BadRegion { what, start: r.start, end: r.end, buf_len });
    }
    Ok(())
}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}
