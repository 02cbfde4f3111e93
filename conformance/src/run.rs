//! The runner: executes cases on every registered driver, in every buffer layout, and
//! records the outcome in a [`Report`].
//!
//! One operation in one layout is [`run_op`]; it builds the request the layout calls for,
//! runs it with `Session::run`, checks that nothing outside the payload/tag moved, and
//! hands back the payload and tag bytes. [`evaluate`] composes operations into the checks
//! a [`Check`] asks for.

use ocf::{Aad, Buffer, DriverInfo, Error, Framework, Mode, Op, Request, Session, SessionParams, TagPlace};

use crate::case::{pkcs7_pad, pkcs7_unpad, Case, Check, Crypt, Rejection};
use crate::hex::brief;
use crate::report::{Family, Layout, Report};

/// Bytes around the payload that no operation may touch (filler, out-of-place margins).
pub(crate) const FILL: u8 = 0xA5;
/// Initial content of a tag slot that an operation is to fill in.
const TAG_SLOT_FILL: u8 = 0x5A;
/// Filler bytes before the AAD / payload in the embedded layout, and margins around the
/// out-of-place output: odd numbers so nothing lands on an aligned offset.
pub(crate) const PREFIX_LEN: usize = 3;
pub(crate) const SUFFIX_LEN: usize = 5;

/// Runs `cases` on every registered driver that supports them, in every layout. A family
/// of cases that no driver offers is a failure ("no driver offers …"), not a silent pass.
pub(crate) fn run_cases(fw: &Framework, drivers: &[DriverInfo], cases: &[Case], report: &mut Report) {
    report_unoffered(drivers, cases, report);
    for driver in drivers {
        for case in cases {
            let family = Family::of(&case.params);
            if !driver.capabilities.covers(&case.params) {
                report.skip(&driver.name, family, "not in the driver's capabilities".to_owned());
                continue;
            }
            run_case(&driver.name, |p| fw.new_session_on(&driver.name, p), case, report);
        }
    }
}

/// Runs `cases` on sessions that ocf routes per request over every registered driver
/// (`Framework::new_session`, with the framework's policy), reported as driver
/// [`crate::ROUTED`].
pub(crate) fn run_cases_routed(fw: &Framework, cases: &[Case], report: &mut Report) {
    let drivers = fw.drivers();
    report_unoffered(&drivers, cases, report);
    for case in cases.iter().filter(|c| drivers.iter().any(|d| d.capabilities.covers(&c.params))) {
        run_case(crate::ROUTED, |p| fw.new_session(p), case, report);
    }
}

/// One failure per family of `cases` that none of `drivers` lists, naming the family and
/// the first case's source.
fn report_unoffered(drivers: &[DriverInfo], cases: &[Case], report: &mut Report) {
    let mut named = Vec::new();
    for case in cases {
        let family = Family::of(&case.params);
        if named.contains(&family) || drivers.iter().any(|d| d.capabilities.covers(&case.params)) {
            continue;
        }
        named.push(family);
        report.unoffered(family, &case.id);
    }
}

fn run_case(
    name: &str,
    open: impl Fn(&SessionParams) -> Result<Session, Error>,
    case: &Case,
    report: &mut Report,
) {
    let family = Family::of(&case.params);
    let session = match (open(&case.params), &case.check) {
        (Err(e), Check::RejectSession(r)) if r.matches(&e) => {
            report.reject_at_setup(name, family);
            return;
        }
        (Err(e), Check::RejectSession(r)) => {
            report.fail(name, family, &case.id, None, format!("session creation: expected {r}, got {e:?}"));
            return;
        }
        (Ok(_), Check::RejectSession(r)) => {
            report.fail(name, family, &case.id, None, format!("session created; expected {r}"));
            return;
        }
        (
            Err(
                e @ (Error::UnsupportedCipher(_)
                | Error::UnsupportedDigest(_)
                | Error::UnsupportedMac(_)
                | Error::UnsupportedAsym(_)),
            ),
            _,
        ) => {
            report.skip(name, family, format!("the driver declined the session: {e}"));
            return;
        }
        (Err(e), _) => {
            report.fail(name, family, &case.id, None, format!("session creation failed: {e:?}"));
            return;
        }
        (Ok(s), _) => s,
    };
    for layout in Layout::ALL {
        match evaluate(&session, layout, &case.check) {
            Ok(Verdict::Passed) => report.pass(name, family, layout),
            Ok(Verdict::Rejected) => report.reject(name, family, layout),
            Err(what) => report.fail(name, family, &case.id, Some(layout), what),
        }
    }
}

/// A successful check: the case passed, or was rejected as expected.
pub(crate) enum Verdict {
    Passed,
    Rejected,
}

/// Runs one case's checks in one layout. `Err` says what went wrong.
fn evaluate(session: &Session, layout: Layout, check: &Check) -> Result<Verdict, String> {
    let tag_len = session.params().tag_len();
    match check {
        Check::RoundTrip(c) => {
            let enc = expect_done("encrypt", run_op(session, layout, &OpSpec::encrypt(c, &c.plaintext))?)?;
            expect_eq("encrypt: ciphertext", &enc.payload, &c.ciphertext)?;
            if tag_len > 0 {
                expect_eq("encrypt: tag", &enc.tag, &c.tag)?;
                // The same ciphertext with a wrong tag must be refused, and the session
                // must still decrypt the genuine one afterwards (drivers that reuse a
                // per-session context must reset it after a failure).
                let mut wrong_tag = c.tag.clone();
                flip_first_bit(&mut wrong_tag);
                check_forgery_refused(session, layout, c, &wrong_tag)
                    .map_err(|e| format!("with the tag's first bit flipped: {e}"))?;
            }
            let dec = expect_done("decrypt", run_op(session, layout, &OpSpec::decrypt(c, &c.tag))?)?;
            expect_eq("decrypt: plaintext", &dec.payload, &c.plaintext)?;
            Ok(Verdict::Passed)
        }
        Check::Forgery(c) => {
            check_forgery_refused(session, layout, c, &c.tag)?;
            Ok(Verdict::Passed)
        }
        Check::PaddedRoundTrip(c) => {
            let block = cipher_block(session);
            let padded = pkcs7_pad(&c.plaintext, block);
            let enc = expect_done("encrypt", run_op(session, layout, &OpSpec::encrypt(c, &padded))?)?;
            expect_eq("encrypt(pad(plaintext))", &enc.payload, &c.ciphertext)?;
            let dec = expect_done("decrypt", run_op(session, layout, &OpSpec::decrypt(c, &[]))?)?;
            let unpadded = pkcs7_unpad(&dec.payload, block)
                .map_err(|why| format!("decrypt: padding of {} rejected: {why}", brief(&dec.payload)))?;
            expect_eq("unpad(decrypt(ciphertext))", unpadded, &c.plaintext)?;
            Ok(Verdict::Passed)
        }
        Check::BadPadding(c) => {
            let block = cipher_block(session);
            match run_op(session, layout, &OpSpec::decrypt(c, &[]))? {
                Err(r) if c.ciphertext.len() % block != 0 => {
                    let rejection = Rejection::NotBlockMultiple { len: c.ciphertext.len(), block };
                    if rejection.matches(&r.error) {
                        Ok(Verdict::Rejected)
                    } else {
                        Err(format!("decrypt: expected {rejection}, got {:?}", r.error))
                    }
                }
                Err(r) => Err(format!("decrypt failed: {:?}", r.error)),
                Ok(done) => match pkcs7_unpad(&done.payload, block) {
                    Err(_) => Ok(Verdict::Passed),
                    Ok(_) => Err(format!(
                        "padding of {} was accepted; the case has bad padding",
                        brief(&done.payload)
                    )),
                },
            }
        }
        Check::Digest { message, expected } => {
            let computed = expect_done(
                "compute-digest",
                run_op(session, layout, &OpSpec::digest(Op::ComputeDigest, message, &[]))?,
            )?;
            expect_eq("compute-digest: input buffer", &computed.payload, message)?;
            let prefix = computed.tag.get(..expected.len()).unwrap_or(&computed.tag);
            expect_eq("compute-digest", prefix, expected)?;
            if expected.len() == tag_len {
                let ok = run_op(session, layout, &OpSpec::digest(Op::VerifyDigest, message, expected))?;
                let verified = expect_done("verify-digest of the right tag", ok)?;
                expect_eq("verify-digest: input buffer", &verified.payload, message)?;
                let mut wrong = expected.clone();
                flip_first_bit(&mut wrong);
                let bad = run_op(session, layout, &OpSpec::digest(Op::VerifyDigest, message, &wrong))?;
                expect_auth_failed("verify-digest of a wrong tag", bad)?;
            }
            Ok(Verdict::Passed)
        }
        Check::WrongTag { message, tag } => {
            expect_auth_failed(
                "verify-digest",
                run_op(session, layout, &OpSpec::digest(Op::VerifyDigest, message, tag))?,
            )?;
            Ok(Verdict::Passed)
        }
        Check::RejectRequest(c, rejection) => {
            // The decrypt direction gets a tag of the session's length, so that the only
            // thing wrong with the request is what the case is about.
            let tag = if c.tag.len() == tag_len { c.tag.clone() } else { vec![0; tag_len] };
            for (what, spec) in
                [("encrypt", OpSpec::encrypt(c, &c.plaintext)), ("decrypt", OpSpec::decrypt(c, &tag))]
            {
                match run_op(session, layout, &spec)? {
                    Err(r) if rejection.matches(&r.error) => {}
                    Err(r) => return Err(format!("{what}: expected {rejection}, got {:?}", r.error)),
                    Ok(_) => return Err(format!("{what}: accepted; expected {rejection}")),
                }
            }
            Ok(Verdict::Rejected)
        }
        Check::Asym(steps) => crate::asym::run::evaluate(session, layout, steps),
        Check::RejectSession(r) => Err(format!("internal: {r} is checked at session creation")),
    }
}

/// Decrypting `c`'s ciphertext with `tag` must fail with `AuthFailed` and release no
/// plaintext: the result region must hold zeros or the untouched ciphertext, and an AEAD
/// decrypting in place must have zeroed it.
fn check_forgery_refused(session: &Session, layout: Layout, c: &Crypt, tag: &[u8]) -> Result<(), String> {
    let refused = expect_refused("decrypt of a forgery", run_op(session, layout, &OpSpec::decrypt(c, tag))?)?;
    if refused.error != Error::AuthFailed {
        return Err(format!("decrypt of a forgery: expected AuthFailed, got {:?}", refused.error));
    }
    let zeroed = refused.payload.iter().all(|&b| b == 0);
    let is_aead = matches!(session.params().mode, Mode::Aead { .. });
    if is_aead && layout.in_place() && !zeroed {
        return Err(format!(
            "failed AEAD decrypt left {} in the in-place payload (expected zeros)",
            brief(&refused.payload)
        ));
    }
    if !zeroed && refused.payload != c.ciphertext {
        return Err(format!(
            "failed decrypt released {} (expected zeros or the untouched ciphertext)",
            brief(&refused.payload)
        ));
    }
    Ok(())
}

fn flip_first_bit(bytes: &mut [u8]) {
    if let Some(first) = bytes.first_mut() {
        *first ^= 0x01;
    }
}

fn cipher_block(session: &Session) -> usize {
    session.params().cipher_alg().map_or(1, |c| c.block_len())
}

pub(crate) fn expect_eq(what: &str, got: &[u8], expected: &[u8]) -> Result<(), String> {
    if got == expected {
        Ok(())
    } else {
        Err(format!("{what}: expected {}, got {}", brief(expected), brief(got)))
    }
}

fn expect_done(what: &str, result: Result<Done, Refused>) -> Result<Done, String> {
    result.map_err(|r| format!("{what} failed: {:?}", r.error))
}

fn expect_refused(what: &str, result: Result<Done, Refused>) -> Result<Refused, String> {
    match result {
        Ok(_) => Err(format!("{what} succeeded; expected it to fail")),
        Err(r) => Ok(r),
    }
}

fn expect_auth_failed(what: &str, result: Result<Done, Refused>) -> Result<(), String> {
    match expect_refused(what, result)?.error {
        Error::AuthFailed => Ok(()),
        e => Err(format!("{what}: expected AuthFailed, got {e:?}")),
    }
}

/// One operation to run.
struct OpSpec<'a> {
    op: Op,
    /// The payload: plaintext, ciphertext or message.
    data: &'a [u8],
    iv: &'a [u8],
    aad: &'a [u8],
    /// The tag to verify (decrypt, verify-digest); ignored otherwise.
    tag: &'a [u8],
}

impl<'a> OpSpec<'a> {
    fn encrypt(c: &'a Crypt, plaintext: &'a [u8]) -> OpSpec<'a> {
        OpSpec { op: Op::Encrypt, data: plaintext, iv: &c.iv, aad: &c.aad, tag: &[] }
    }

    fn decrypt(c: &'a Crypt, tag: &'a [u8]) -> OpSpec<'a> {
        OpSpec { op: Op::Decrypt, data: &c.ciphertext, iv: &c.iv, aad: &c.aad, tag }
    }

    fn digest(op: Op, message: &'a [u8], tag: &'a [u8]) -> OpSpec<'a> {
        OpSpec { op, data: message, iv: &[], aad: &[], tag }
    }
}

/// A completed operation: the payload region after it, and the tag it computed (or was
/// given, for verifications).
struct Done {
    payload: Vec<u8>,
    tag: Vec<u8>,
}

/// A failed operation: the error, and what the payload region held afterwards (what a
/// caller would see: must not be unauthenticated plaintext).
struct Refused {
    error: Error,
    payload: Vec<u8>,
}

/// Runs one operation in `layout`. The outer `Err` reports a broken layout invariant (a
/// byte outside the payload and tag changed, or an out-of-place input was modified),
/// whatever the operation's own outcome.
fn run_op(session: &Session, layout: Layout, spec: &OpSpec<'_>) -> Result<Result<Done, Refused>, String> {
    let params = session.params();
    let tag_len = params.tag_len();
    let takes_tag = tag_len > 0 && spec.op.checks_tag();
    let digest_op = matches!(spec.op, Op::ComputeDigest | Op::VerifyDigest);
    let takes_aad = matches!(params.mode, Mode::Aead { .. } | Mode::CipherThenMac { .. });
    let len = spec.data.len();

    // The parts every layout shares: op, IV, and (unless the layout moves them into the
    // buffer) AAD and tag.
    let base = |buf: Buffer, separate_aad_and_tag: bool| {
        let mut req = Request::new(spec.op, buf).with_iv(spec.iv);
        if separate_aad_and_tag {
            if !spec.aad.is_empty() {
                req = req.with_aad(spec.aad);
            }
            if takes_tag {
                req = req.with_tag(spec.tag);
            }
        }
        req
    };

    match layout {
        Layout::InPlace => {
            let outcome = session.run(base(Buffer::from(spec.data.to_vec()), true));
            Ok(match outcome {
                Ok(req) => Ok(Done { payload: req.buf.to_vec(), tag: req.tag().to_vec() }),
                Err(f) => {
                    let (error, req) = f.into_parts();
                    Err(Refused { error, payload: req.buf.to_vec() })
                }
            })
        }
        Layout::OutOfPlace => {
            let out = vec![FILL; PREFIX_LEN + len + SUFFIX_LEN];
            let mut req = base(Buffer::from(spec.data.to_vec()), true).with_output(out);
            req.out_offset = PREFIX_LEN;
            let (req, error) = match session.run(req) {
                Ok(req) => (req, None),
                Err(f) => {
                    let (error, req) = f.into_parts();
                    (req, Some(error))
                }
            };
            if req.buf.to_vec() != spec.data {
                return Err(format!("out-of-place {} modified its input buffer", spec.op.name()));
            }
            let out = req.out.as_ref().map(Buffer::to_vec).unwrap_or_default();
            if out.len() != PREFIX_LEN + len + SUFFIX_LEN {
                return Err(format!("out-of-place output buffer changed length to {}", out.len()));
            }
            let (prefix, rest) = out.split_at(PREFIX_LEN);
            let (result, suffix) = rest.split_at(len);
            if prefix.iter().chain(suffix).any(|&b| b != FILL) {
                return Err("out-of-place output: bytes outside the result region changed".to_owned());
            }
            // Digests write no payload result; their "payload" is the untouched input.
            let payload = if digest_op { spec.data.to_vec() } else { result.to_vec() };
            Ok(match error {
                None => Ok(Done { payload, tag: req.tag().to_vec() }),
                Some(error) => Err(Refused { error, payload }),
            })
        }
        Layout::Segmented => {
            let outcome = session.run(base(Buffer::Segments(split_awkwardly(spec.data)), true));
            Ok(match outcome {
                Ok(req) => Ok(Done { payload: req.buf.to_vec(), tag: req.tag().to_vec() }),
                Err(f) => {
                    let (error, req) = f.into_parts();
                    Err(Refused { error, payload: req.buf.to_vec() })
                }
            })
        }
        Layout::Embedded => {
            // filler | AAD (modes that take it) | payload | tag slot (modes with a tag) | filler
            if !takes_aad && !spec.aad.is_empty() {
                return Err("internal: AAD given to a mode without AAD".to_owned());
            }
            if takes_tag && spec.tag.len() != tag_len {
                return Err(format!("internal: tag of {} bytes, session expects {tag_len}", spec.tag.len()));
            }
            let aad: &[u8] = if takes_aad { spec.aad } else { &[] };
            let aad_range = PREFIX_LEN..PREFIX_LEN + aad.len();
            let payload_range = aad_range.end..aad_range.end + len;
            let tag_range = payload_range.end..payload_range.end + tag_len;
            let mut packet = vec![FILL; PREFIX_LEN];
            packet.extend_from_slice(aad);
            packet.extend_from_slice(spec.data);
            if takes_tag {
                packet.extend_from_slice(spec.tag);
            } else {
                packet.resize(tag_range.end, TAG_SLOT_FILL);
            }
            packet.resize(tag_range.end + SUFFIX_LEN, FILL);
            let before = packet.clone();

            let mut req = base(Buffer::from(packet), false).with_payload(payload_range.clone());
            if takes_aad {
                req.aad = Aad::Region(aad_range.clone());
            }
            if tag_len > 0 {
                req = req.with_tag_place(TagPlace::InBuffer(tag_range.start));
            }
            let (req, error) = match session.run(req) {
                Ok(req) => (req, None),
                Err(f) => {
                    let (error, req) = f.into_parts();
                    (req, Some(error))
                }
            };
            let after = req.buf.to_vec();
            if after.len() != before.len() {
                return Err(format!(
                    "embedded: buffer changed length from {} to {}",
                    before.len(),
                    after.len()
                ));
            }
            // Everything but the payload and a computed tag must be as it was.
            let tag_written = tag_len > 0 && !spec.op.checks_tag();
            let fixed_end = if tag_written { tag_range.start } else { tag_range.end };
            if after[..payload_range.start] != before[..payload_range.start] {
                return Err("embedded: filler or AAD region before the payload changed".to_owned());
            }
            if after[payload_range.end..fixed_end] != before[payload_range.end..fixed_end]
                || after[tag_range.end..] != before[tag_range.end..]
            {
                return Err("embedded: bytes after the payload changed".to_owned());
            }
            let payload = after[payload_range].to_vec();
            Ok(match error {
                None => Ok(Done { payload, tag: after[tag_range].to_vec() }),
                Some(error) => Err(Refused { error, payload }),
            })
        }
    }
}

/// Splits `data` into segments at awkward offsets: 1 byte, an empty segment, 7 bytes, then
/// the rest (each clamped to what there is), so that the first cipher block and the first
/// 3DES block straddle segment boundaries and the driver meets an empty segment.
pub(crate) fn split_awkwardly(data: &[u8]) -> Vec<Vec<u8>> {
    let first = data.len().min(1);
    let second = data.len().min(8);
    vec![data[..first].to_vec(), Vec::new(), data[first..second].to_vec(), data[second..].to_vec()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn awkward_split_keeps_every_byte_in_order() {
        for len in [0usize, 1, 5, 8, 9, 100] {
            let data: Vec<u8> = (0..len as u8).collect();
            let segs = split_awkwardly(&data);
            assert_eq!(segs.concat(), data);
            assert_eq!(segs.len(), 4);
        }
    }
}
