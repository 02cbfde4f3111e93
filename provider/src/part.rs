//! Feeding OpenSSL's update calls to ocf as parts of one message ([`ocf::Part`]).
//!
//! Each EVP context keeps one reusable [`Request`]; the driver's state for the message in
//! progress travels in it between parts. A cipher part is transformed in place in the
//! caller's output buffer, lent to the request for the call ([`Session::run_in`]): no copy
//! in or out (the two copies were 14% of an 8 KiB AES-GCM message). A digest's input is
//! read-only memory of the application, so it is copied into the request's own buffer
//! (its allocation reused).

use ocf::{Aad, Buffer, Error, InlineAad, Op, Part, Request, Session};

/// The bytes of one part.
pub enum Data<'a> {
    /// Transformed in place (ciphers): the caller's buffer, holding the input.
    InPlace(&'a mut [u8]),
    /// Only read (digests and MACs).
    Read(&'a [u8]),
}

/// One reusable request and whether a message is in progress in it.
pub struct Feed {
    req: Option<Request>,
}

/// What a part carries besides its bytes.
#[derive(Default)]
pub struct Extras<'a> {
    pub iv: &'a [u8],
    pub aad: &'a [u8],
    /// The tag to verify (decrypting `Last`/`Whole` parts).
    pub tag: &'a [u8],
    /// Where a computed tag, digest or MAC goes (its first bytes; `Last`/`Whole` parts).
    pub tag_out: &'a mut [u8],
}

impl Feed {
    pub fn new() -> Feed {
        Feed { req: Some(Request::new(Op::Encrypt, Vec::new())) }
    }

    /// Whether a message is in progress (its first part went through).
    pub fn in_message(&self) -> bool {
        self.req.as_ref().is_some_and(|r| r.in_message())
    }

    /// Abandons the message in progress (an init call, or an error).
    pub fn reset(&mut self) {
        if let Some(r) = self.req.as_mut() {
            r.end_message();
        }
    }

    /// A second feed continuing the same message independently (`None` if the driver
    /// cannot copy its state).
    pub fn try_clone(&self) -> Option<Feed> {
        let r = self.req.as_ref()?;
        let mut copy = Request::new(r.op, Vec::new());
        if r.in_message() {
            copy.set_part_state(r.try_clone_part_state()?);
        }
        Some(Feed { req: Some(copy) })
    }

    /// Runs `data` as `part` of the message through `session`; a computed tag goes to
    /// `tag_out`.
    pub fn run(
        &mut self,
        session: &Session,
        op: Op,
        part: Part,
        data: Data<'_>,
        extras: Extras<'_>,
    ) -> Result<(), Error> {
        let tag_out = extras.tag_out;
        let mut req = self.req.take().unwrap_or_else(|| Request::new(op, Vec::new()));
        req.op = op;
        req.part = part;
        req.payload = None;
        req.set_iv(extras.iv);
        // Short AAD (TLS's 13 bytes) is held in the request: no allocation per message.
        req.aad = match (extras.aad.is_empty(), InlineAad::new(extras.aad)) {
            (true, _) => Aad::None,
            (false, Some(inline)) => Aad::Inline(inline),
            (false, None) => Aad::Bytes(extras.aad.to_vec()),
        };
        if op.checks_tag() && part.ends() {
            req.set_tag(extras.tag);
        }
        let outcome = match data {
            // SAFETY: the provider's framework has only ocf's own drivers (soft, and sim when
            // asked for), which keep the driver contract `run_in` requires.
            Data::InPlace(bytes) => unsafe { session.run_in(req, bytes) },
            Data::Read(input) => {
                match &mut req.buf {
                    Buffer::Contiguous(v) => {
                        v.clear();
                        v.extend_from_slice(input);
                    }
                    b => *b = Buffer::Contiguous(input.to_vec()),
                }
                session.run(req)
            }
        };
        match outcome {
            Ok(done) => {
                if !op.checks_tag() && part.ends() {
                    let t = done.tag();
                    let n = t.len().min(tag_out.len());
                    tag_out[..n].copy_from_slice(&t[..n]);
                }
                self.req = Some(done);
                Ok(())
            }
            Err(failed) => {
                let (e, mut req) = failed.into_parts();
                req.end_message();
                self.req = Some(req);
                Err(e)
            }
        }
    }
}

impl Default for Feed {
    fn default() -> Feed {
        Feed::new()
    }
}
