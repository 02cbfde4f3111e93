//! Loaders: turn each vector source into [`Case`]s. One module per kind of session
//! (plain ciphers, AEADs, digests, MACs) and per public-key family (X25519, ECDH, ECDSA,
//! Ed25519, RSA, ML-KEM, MODP and ModExp); each exposes one function per [`crate::Suite`].
//!
//! Which parameters are "supported" is never hard-coded here: a case whose key, IV or tag
//! length ocf does not define (by `CipherAlg::key_lens`/`iv_len`/`tag_lens` and
//! `MacAlg::min_output_len`) becomes a rejection case that asserts the specific error, so
//! if ocf widens what it accepts, those cases turn into known-answer checks by themselves.

pub(crate) mod aead;
pub(crate) mod cipher;
pub(crate) mod digest;
pub(crate) mod ecdh;
pub(crate) mod ecdsa;
pub(crate) mod eddsa;
pub(crate) mod mac;
pub(crate) mod mlkem;
pub(crate) mod modp;
pub(crate) mod rsa;
pub(crate) mod xdh;

use crate::case::Case;
use crate::report::{CaseId, Report};
use crate::rsp::{self, Entry, RspError};
use crate::vectors::Source;

/// Parses an `.rsp`-format source and builds cases from each entry with `build`. Records
/// how many cases the source gave, or, if it failed to parse or build, a load failure
/// (and then none of its cases: a half-loaded file would pass with fewer checks).
pub(crate) fn load_rsp(
    report: &mut Report,
    source: &Source,
    mut build: impl FnMut(&Entry) -> Result<Vec<Case>, RspError>,
) -> Vec<Case> {
    let built = rsp::parse(source.text).and_then(|entries| {
        let mut cases = Vec::new();
        for entry in &entries {
            cases.extend(build(entry)?);
        }
        Ok(cases)
    });
    record(report, source.name, built.map_err(|e| e.to_string()))
}

/// Records the outcome of loading one source and returns its cases.
pub(crate) fn record(report: &mut Report, source: &str, loaded: Result<Vec<Case>, String>) -> Vec<Case> {
    match loaded {
        Ok(cases) if cases.is_empty() => {
            report.load_failed(source, "no cases".to_owned());
            cases
        }
        Ok(cases) => {
            report.count_loaded(source, cases.len());
            cases
        }
        Err(e) => {
            report.load_failed(source, e);
            Vec::new()
        }
    }
}

/// A case id for an `.rsp` entry.
pub(crate) fn rsp_id(source: &Source, entry: &Entry) -> CaseId {
    CaseId { source: source.name.to_owned(), label: entry.label() }
}

/// A case id for a Wycheproof test.
pub(crate) fn wycheproof_id(file: &str, tc_id: usize) -> CaseId {
    CaseId { source: format!("wycheproof/{file}"), label: format!("tcId {tc_id}") }
}
