//! Digests: SHA-1, SHA-256, SHA-384, SHA-512 (NIST SHAVS) and MD5 (RFC 1321).
//!
//! Each case computes the digest, verifies it, and checks that a wrong digest is refused
//! with `AuthFailed`.

use ocf::{DigestAlg, SessionParams};

use crate::case::{Case, Check};
use crate::report::Report;
use crate::suites::{load_rsp, rsp_id};
use crate::vectors::{self, Source};

/// NIST SHAVS ShortMsg/LongMsg files and RFC 1321.
pub(crate) fn digests(report: &mut Report) -> Vec<Case> {
    let mut cases = Vec::new();
    for source in vectors::NIST_SHA.iter().chain([&vectors::RFC1321_MD5]) {
        cases.extend(digest_cases(report, source));
    }
    cases
}

/// A SHAVS-format file: `[L = output bytes]`, then `Len` (bits), `Msg`, `MD` entries.
fn digest_cases(report: &mut Report, source: &Source) -> Vec<Case> {
    load_rsp(report, source, |e| {
        let out_len = e.header_number("L")?;
        let alg = DigestAlg::ALL
            .into_iter()
            .find(|d| d.output_len() == out_len)
            .ok_or_else(|| e.error(format!("no ocf digest has a {out_len}-byte output")))?;
        let bits = e.number("Len")?;
        if bits % 8 != 0 {
            return Err(e.error(format!("Len = {bits} is not whole bytes (bit-oriented file?)")));
        }
        // SHAVS writes the empty message as `Msg = 00` with `Len = 0`.
        let message = e.hex("Msg")?;
        let message = message
            .get(..bits / 8)
            .ok_or_else(|| e.error(format!("Msg is shorter than Len = {bits}")))?
            .to_vec();
        let expected = e.hex("MD")?;
        Ok(vec![Case {
            id: rsp_id(source, e),
            params: SessionParams::digest(alg),
            check: Check::Digest { message, expected },
        }])
    })
}
