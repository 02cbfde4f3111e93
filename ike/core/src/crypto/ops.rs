//! The few ways `crypto` calls ocf, in one place: make a session, run a request and map
//! its failure, read an asymmetric result, draw random bytes, hash. Every operation of IKE
//! goes through here, so that ocf's counters, profile and cost model see it.
//!
//! ```text
//!  prf, keys, sk, kex, auth, signature, random, natd
//!      │ session(fw, params) ─ run(session, request) ─ asym(...) ─ random(...) ─ digest(...)
//!      ▼
//!  ocf::Session::run (synchronous) ─▶ the driver chosen by ocf's policy
//! ```

use ocf::{DigestAlg, Framework, Op, Request, Session, SessionParams};
use zeroize::Zeroizing;

use super::error::CryptoError;

/// A session for `params`.
pub(crate) fn session(fw: &Framework, params: &SessionParams) -> Result<Session, CryptoError> {
    Ok(fw.new_session(params)?)
}

/// Runs `req` on `session`, waiting for it; the request back, or ocf's error.
pub(crate) fn run(session: &Session, req: Request) -> Result<Request, ocf::Error> {
    session.run(req).map_err(|f| {
        let (e, mut r) = f.into_parts();
        wipe(&mut r);
        e
    })
}

/// Wipes a request's buffers (they may hold plaintext or key material).
pub(crate) fn wipe(req: &mut Request) {
    req.buf.wipe();
    if let Some(out) = req.out.as_mut() {
        out.wipe();
    }
}

/// Runs asymmetric `op` on `input` and returns its result (`out[..result_len]`), the
/// request's buffers wiped.
pub(crate) fn asym(
    session: &Session,
    op: Op,
    input: &[u8],
    room: usize,
) -> Result<Zeroizing<Vec<u8>>, ocf::Error> {
    let mut done = run(session, Request::asymmetric(op, input.to_vec(), room))?;
    let result = Zeroizing::new(done.result_payload());
    wipe(&mut done);
    Ok(result)
}

/// Fills `out` with random bytes from ocf's random operation.
pub(crate) fn random(fw: &Framework, out: &mut [u8]) -> Result<(), CryptoError> {
    random_from(&session(fw, &SessionParams::random())?, out)
}

/// Fills `out` with random bytes from `s`, a random session.
pub(crate) fn random_from(s: &Session, out: &mut [u8]) -> Result<(), CryptoError> {
    let mut done = run(s, Request::random(out.len()))?;
    done.buf.copy_out(0..out.len(), out);
    wipe(&mut done);
    Ok(())
}

/// The digest of `data` with `alg`.
pub(crate) fn digest(fw: &Framework, alg: DigestAlg, data: &[u8]) -> Result<Vec<u8>, CryptoError> {
    let s = session(fw, &SessionParams::digest(alg))?;
    let done = run(&s, Request::new(Op::ComputeDigest, data.to_vec()))?;
    Ok(done.tag().to_vec())
}
