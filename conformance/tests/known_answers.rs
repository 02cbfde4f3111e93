//! The known-answer suite on every driver of the workspace (soft, the simulated card, and
//! afalg where the kernel has AF_ALG: see `common`), symmetric and public-key.
//!
//! Each suite is its own test so they run in parallel. Each asserts that nothing failed,
//! and that the soft driver passed at least the expected number of cases in every layout
//! and rejected the expected number of unsupported-parameter cases: if a vector file
//! stopped loading, or a loader started skipping entries, the counts would drop and the
//! test would fail instead of passing on fewer checks.

mod common;

use ocf::{AsymAlg, AsymKey, CipherAlg, Curve, DigestAlg, MacAlg, ModpGroup, Op, SigEncoding};
use ocf_conformance::{run_suite, Family, Layout, Report, Suite};

/// What the soft driver must reach for one family: cases passed in each layout, and
/// cases rejected as expected (at session creation, and at submission in each layout).
struct Expected {
    family: Family,
    passed: u64,
    rejected_at_setup: u64,
    rejected_at_submit: u64,
}

const fn expect(family: Family, passed: u64, rejected_at_setup: u64, rejected_at_submit: u64) -> Expected {
    Expected { family, passed, rejected_at_setup, rejected_at_submit }
}

/// Runs `suite` on every driver and checks the soft driver's counts.
fn run_and_check(suite: Suite, expected: &[Expected], sources: &[&str]) -> Report {
    let fw = common::framework_with_all_drivers();
    let report = run_suite(&fw, suite);
    assert!(report.is_clean(), "{suite:?}: {} failure(s)\n{report}", report.failures().len());
    check_sources(&report, sources);
    for e in expected {
        let tally = report.tally(ocf_soft::NAME, e.family);
        for layout in Layout::ALL {
            assert!(
                tally.passed(layout) >= e.passed,
                "{}: {} cases passed {}, expected at least {}\n{report}",
                e.family,
                tally.passed(layout),
                layout.name(),
                e.passed
            );
            assert!(
                tally.rejected(layout) >= e.rejected_at_submit,
                "{}: {} cases rejected at submission {}, expected at least {}\n{report}",
                e.family,
                tally.rejected(layout),
                layout.name(),
                e.rejected_at_submit
            );
        }
        assert!(
            tally.rejected_at_setup >= e.rejected_at_setup,
            "{}: {} cases rejected at session creation, expected at least {}\n{report}",
            e.family,
            tally.rejected_at_setup,
            e.rejected_at_setup
        );
        assert_eq!(tally.skipped, 0, "{}: the soft driver skipped cases\n{report}", e.family);
        // Every other driver that lists the family passes every case soft passes (afalg in
        // the kernel machine: the kernel's implementation on every known answer).
        for d in fw.drivers().iter().filter(|d| d.name != ocf_soft::NAME && lists(&d.capabilities, e.family))
        {
            let theirs = report.tally(&d.name, e.family);
            for layout in Layout::ALL {
                assert_eq!(
                    theirs.passed(layout),
                    tally.passed(layout),
                    "{}: {} passed {} cases {}, soft {}\n{report}",
                    e.family,
                    d.name,
                    theirs.passed(layout),
                    layout.name(),
                    tally.passed(layout)
                );
            }
        }
    }
    report
}

/// What the soft driver must do with a public-key family's cases: pass the `valid` ones,
/// refuse the `invalid` ones at submission and the `setup` ones at session creation, each
/// with the case's error, and do either with the `either` ones (Wycheproof's "acceptable"),
/// and nothing else: every case is one of these.
struct AsymExpected {
    family: Family,
    valid: u64,
    invalid: u64,
    setup: u64,
    either: u64,
}

const fn asym(alg: AsymAlg, valid: u64, invalid: u64, setup: u64, either: u64) -> AsymExpected {
    AsymExpected { family: Family::Asym(alg), valid, invalid, setup, either }
}

/// Runs a public-key `suite` and checks the soft driver's counts, and that `left_out`
/// (source, count) tests were left out by the loaders and no others.
fn run_and_check_asym(suite: Suite, expected: &[AsymExpected], sources: &[&str], left_out: &[(&str, usize)]) {
    let minimums: Vec<Expected> =
        expected.iter().map(|e| expect(e.family, e.valid, e.setup, e.invalid)).collect();
    let report = run_and_check(suite, &minimums, sources);
    for e in expected {
        let tally = report.tally(ocf_soft::NAME, e.family);
        assert_eq!(tally.rejected_at_setup, e.setup, "{}\n{report}", e.family);
        for layout in Layout::ALL {
            assert_eq!(
                tally.passed(layout) + tally.rejected(layout),
                e.valid + e.invalid + e.either,
                "{}: cases passed or rejected {}\n{report}",
                e.family,
                layout.name()
            );
        }
    }
    let mut got: Vec<(&str, usize)> = report.left_out().map(|(s, _, n)| (s, n)).collect();
    got.sort();
    assert_eq!(got, left_out, "tests left out\n{report}");
    println!("{report}");
}

/// Whether a driver's capabilities list the algorithm of `family`.
fn lists(caps: &ocf::Capabilities, family: Family) -> bool {
    match family {
        Family::Cipher(c) => caps.ciphers.contains(&c) || caps.aeads.contains(&c),
        Family::Digest(d) => caps.digests.contains(&d),
        Family::Mac(m) => caps.macs.contains(&m),
        Family::CipherThenMac(c, m) => {
            caps.cipher_then_mac && caps.ciphers.contains(&c) && caps.macs.contains(&m)
        }
        Family::Asym(a) => caps.asymmetric.contains(&a),
        Family::Other(_) => false,
    }
}

/// Every named source must have contributed cases.
fn check_sources(report: &Report, sources: &[&str]) {
    for source in sources {
        let loaded = report.loaded().get(*source).copied().unwrap_or(0);
        assert!(loaded > 0, "no cases loaded from {source}\n{report}");
    }
}

#[test]
fn aes_cbc() {
    // RFC 3602: 4; NIST AESAVS CBC: 2138; Wycheproof: 216 (144 of them bad padding).
    run_and_check(
        Suite::AesCbc,
        &[expect(Family::Cipher(CipherAlg::AesCbc), 2358, 0, 0)],
        &["rfc/rfc3602-aes-cbc.txt", "nist/aes-cbc/CBCMMT256.rsp", "wycheproof/aes_cbc_pkcs5_test.json"],
    );
}

#[test]
fn aes_ctr() {
    // SP 800-38A F.5: 3; RFC 3686: 9.
    run_and_check(
        Suite::AesCtr,
        &[expect(Family::Cipher(CipherAlg::AesCtr), 12, 0, 0)],
        &["rfc/sp800-38a-aes-ctr.txt", "rfc/rfc3686-aes-ctr.txt"],
    );
}

#[test]
fn tdes_cbc() {
    // Three-key known answers: TCBCMMT3 (20) and TECBMMT3 block by block (110). Single-DES
    // (KEYs files, MMT1) and two-key (MMT2) keys must be refused with WeakKey: 510.
    run_and_check(
        Suite::TdesCbc,
        &[expect(Family::Cipher(CipherAlg::TdesCbc), 130, 510, 0)],
        &["nist/tdes-cbc/TCBCMMT3.rsp", "nist/tdes-ecb/TECBMMT3.rsp", "nist/tdes-cbc/TCBCvarkey.rsp"],
    );
}

#[test]
fn null() {
    run_and_check(
        Suite::Null,
        &[expect(Family::Cipher(CipherAlg::Null), 4, 0, 0)],
        &["rfc/rfc2410-null.txt"],
    );
}

#[test]
fn aes_gcm() {
    // NIST (trimmed): 6 x 375 cases with 96-bit IV and 128-bit tag, plus 6 x 24 tag-length
    // and 6 x 8 IV-length rejections. Wycheproof: 197 with a 12-byte nonce (81 invalid),
    // 119 with other nonce sizes (rejected).
    run_and_check(
        Suite::AesGcm,
        &[expect(Family::Cipher(CipherAlg::AesGcm), 2447, 144, 167)],
        &[
            "nist/aes-gcm/gcmEncryptExtIV128.rsp",
            "nist/aes-gcm/gcmDecrypt256.rsp",
            "wycheproof/aes_gcm_test.json",
        ],
    );
}

#[test]
fn chacha20_poly1305() {
    // RFC 8439: 2; Wycheproof: 316 with a 12-byte nonce (60 invalid), 9 other nonce sizes.
    run_and_check(
        Suite::ChaCha20Poly1305,
        &[expect(Family::Cipher(CipherAlg::ChaCha20Poly1305), 318, 0, 9)],
        &["rfc/rfc8439-chacha20-poly1305.txt", "wycheproof/chacha20_poly1305_test.json"],
    );
}

#[test]
fn digests() {
    // SHAVS ShortMsg (+ LongMsg for SHA-1 and SHA-256); RFC 1321 for MD5.
    run_and_check(
        Suite::Digests,
        &[
            expect(Family::Digest(DigestAlg::Md5), 7, 0, 0),
            expect(Family::Digest(DigestAlg::Sha1), 129, 0, 0),
            expect(Family::Digest(DigestAlg::Sha256), 129, 0, 0),
            expect(Family::Digest(DigestAlg::Sha384), 129, 0, 0),
            expect(Family::Digest(DigestAlg::Sha512), 129, 0, 0),
        ],
        &[
            "nist/sha/SHA1LongMsg.rsp",
            "nist/sha/SHA256LongMsg.rsp",
            "nist/sha/SHA512ShortMsg.rsp",
            "rfc/rfc1321-md5.txt",
        ],
    );
}

#[test]
fn hmac() {
    // RFC 2202: 8 per hash (case 5 full and 96-bit); RFC 4231: 7 per hash, where case 5's
    // 128-bit truncation is below ocf's minimum for SHA-384/512 (rejected, then checked as
    // a prefix of the full MAC); Wycheproof: 170 (SHA-1) or 174 per hash.
    run_and_check(
        Suite::Hmac,
        &[
            expect(Family::Mac(MacAlg::Hmac(DigestAlg::Md5)), 8, 0, 0),
            expect(Family::Mac(MacAlg::Hmac(DigestAlg::Sha1)), 178, 0, 0),
            expect(Family::Mac(MacAlg::Hmac(DigestAlg::Sha256)), 181, 0, 0),
            expect(Family::Mac(MacAlg::Hmac(DigestAlg::Sha384)), 181, 1, 0),
            expect(Family::Mac(MacAlg::Hmac(DigestAlg::Sha512)), 181, 1, 0),
        ],
        &["rfc/rfc2202-hmac.txt", "rfc/rfc4231-hmac-sha2.txt", "wycheproof/hmac_sha512_test.json"],
    );
}

const fn ecdsa(curve: Curve, hash: DigestAlg, encoding: SigEncoding) -> AsymAlg {
    AsymAlg::Ecdsa { curve, hash, encoding }
}

#[test]
fn x25519() {
    // RFC 7748: 5. Wycheproof: 264 valid; 254 acceptable, of which the 31 with an all-zero
    // shared secret must be refused (ZeroSharedSecret) and the rest may go either way.
    run_and_check_asym(
        Suite::X25519,
        &[asym(AsymAlg::X25519, 5 + 264, 31, 0, 254 - 31)],
        &["rfc/rfc7748-x25519.txt", "wycheproof/x25519_test.json"],
        &[],
    );
}

#[test]
fn ecdh() {
    // Raw points: P-256 330 valid, 24 invalid, 1 acceptable; P-384 771, 18, 1. SPKI: the
    // same valid tests, the invalid and acceptable ones whose SPKI names the curve (P-256:
    // 26 and 7, P-384: 20 and 7); 249 per file left out (see src/suites/ecdh.rs).
    run_and_check_asym(
        Suite::Ecdh,
        &[
            asym(AsymAlg::Ecdh(Curve::P256), 330 * 2, 24 + 26, 0, 1 + 7),
            asym(AsymAlg::Ecdh(Curve::P384), 771 * 2, 18 + 20, 0, 1 + 7),
        ],
        &[
            "wycheproof/ecdh_secp256r1_ecpoint_test.json",
            "wycheproof/ecdh_secp384r1_ecpoint_test.json",
            "wycheproof/ecdh_secp256r1_test.json",
            "wycheproof/ecdh_secp384r1_test.json",
        ],
        &[("wycheproof/ecdh_secp256r1_test.json", 249), ("wycheproof/ecdh_secp384r1_test.json", 249)],
    );
}

#[test]
fn ecdsa_verify() {
    // Wycheproof, valid and invalid per file (no acceptable ones), each with the key raw
    // and as SPKI; refused keys: per file the first key off the curve, raw and as SPKI,
    // and in the first file of each curve the other curve's SPKI.
    use {Curve::*, DigestAlg::*, SigEncoding::*};
    run_and_check_asym(
        Suite::Ecdsa,
        &[
            asym(ecdsa(P256, Sha256, Der), 2 * 174, 2 * 310, 2 + 1, 0),
            asym(ecdsa(P256, Sha512, Der), 2 * 243, 2 * 311, 2, 0),
            asym(ecdsa(P256, Sha256, P1363), 2 * 173, 2 * 89, 2, 0),
            asym(ecdsa(P256, Sha512, P1363), 2 * 242, 2 * 90, 2, 0),
            asym(ecdsa(P384, Sha256, Der), 2 * 162, 2 * 310, 2 + 1, 0),
            asym(ecdsa(P384, Sha384, Der), 2 * 194, 2 * 310, 2, 0),
            asym(ecdsa(P384, Sha512, Der), 2 * 231, 2 * 311, 2, 0),
            asym(ecdsa(P384, Sha384, P1363), 2 * 193, 2 * 87, 2, 0),
            asym(ecdsa(P384, Sha512, P1363), 2 * 230, 2 * 88, 2, 0),
        ],
        &["wycheproof/ecdsa_secp256r1_sha256_test.json", "wycheproof/ecdsa_secp384r1_sha512_p1363_test.json"],
        &[],
    );
}

#[test]
fn ed25519() {
    // RFC 8032 TEST 1-3: sign and verify each, and refuse it with a bit flipped.
    // Wycheproof: 88 valid, 63 invalid, each with the key raw and as SPKI.
    run_and_check_asym(
        Suite::Ed25519,
        &[asym(AsymAlg::Ed25519, 3 * 2 + 2 * 88, 3 + 2 * 63, 0, 0)],
        &["rfc/rfc8032-ed25519.txt", "wycheproof/ed25519_test.json"],
        &[],
    );
}

#[test]
fn rsa() {
    // PKCS#1 v1.5, 2048/3072/4096 bits: valid, invalid and one acceptable per file; the
    // 8192-bit key of each hash refused (KeyTooLarge), and the four 1024- and four
    // 1536-bit keys of rsa_oaep_misc refused (KeyTooSmall) as SPKI (PKCS#1 v1.5 SHA-256)
    // and as PKCS#8 (PSS SHA-256). PSS: the six files with ocf's parameters. NIST
    // SigGen15: 30 messages per hash (10 per key size), each signed and verified (+60).
    use DigestAlg::*;
    let pkcs1 = |hash| AsymAlg::RsaPkcs1 { hash };
    let pss = |hash| AsymAlg::RsaPss { hash };
    run_and_check_asym(
        Suite::Rsa,
        &[
            asym(pkcs1(Sha256), 9 + 8 + 7 + 60, 249 + 250 + 250, 1 + 8, 3),
            asym(pkcs1(Sha384), 7 + 7 + 7 + 60, 250 + 251 + 251, 1, 3),
            asym(pkcs1(Sha512), 8 + 8 + 7 + 60, 250 + 251 + 251, 1, 3),
            asym(pss(Sha256), 63 * 3, 45 * 3, 8, 0),
            asym(pss(Sha384), 95 * 2, 46 * 2, 0, 0),
            asym(pss(Sha512), 132, 47, 0, 0),
        ],
        &[
            "wycheproof/rsa_signature_2048_sha256_test.json",
            "wycheproof/rsa_signature_4096_sha512_test.json",
            "wycheproof/rsa_signature_8192_sha384_test.json",
            "wycheproof/rsa_pss_4096_sha512_mgf1_64_test.json",
            "wycheproof/rsa_oaep_misc_test.json",
            "nist/rsa/SigGen15_186-2.txt",
        ],
        &[],
    );
}

#[test]
fn mlkem768() {
    // mlkem_768_test: 161 valid; 20 seeds of the wrong length (refused at setup) and 20
    // ciphertexts of the wrong length. keygen_seed: 100. encaps: 133 valid keys; 112 not
    // reduced mod q and 20 of the wrong length (refused at setup).
    run_and_check_asym(
        Suite::MlKem768,
        &[asym(AsymAlg::MlKem768, 161 + 100 + 133, 20, 20 + 112 + 20, 0)],
        &[
            "wycheproof/mlkem_768_test.json",
            "wycheproof/mlkem_768_keygen_seed_test.json",
            "wycheproof/mlkem_768_encaps_test.json",
        ],
        &[],
    );
}

#[test]
fn modp_and_modexp() {
    // Per group: 3 exponent sizes x 2 parties, peer values 2 and p-2; 0, 1, p-1, p and
    // 2^n-1 refused; an empty and an over-long exponent refused at setup. ModExp: 3 moduli
    // x 6 exponents (4 bases each), 2 bases too large per modulus; an even and a 4097-bit
    // modulus refused at setup.
    run_and_check_asym(
        Suite::Modp,
        &[
            asym(AsymAlg::Ffdh(ModpGroup::Modp2048), 8, 5, 2, 0),
            asym(AsymAlg::Ffdh(ModpGroup::Modp3072), 8, 5, 2, 0),
            asym(AsymAlg::ModExp, 18, 6, 2, 0),
        ],
        &["computed/rfc3526-modp (num-bigint)", "computed/modexp (num-bigint)"],
        &[],
    );
}

/// RFC 7748 §5.2's iterated X25519, 1,000 times through the framework: each step a new
/// session with the last result as its key (k = X25519(k, u), u = the old k).
#[test]
fn x25519_iterated_1000_times() {
    let fw = common::framework_with_all_drivers();
    let drivers: Vec<_> =
        fw.drivers().into_iter().filter(|d| d.capabilities.asymmetric.contains(&AsymAlg::X25519)).collect();
    assert!(!drivers.is_empty(), "no driver offers x25519");
    for driver in &drivers {
        let (mut k, mut u) = ([0u8; 32], [0u8; 32]);
        (k[0], u[0]) = (9, 9);
        for i in 1..=1000 {
            let params =
                ocf::SessionParams::asymmetric(AsymAlg::X25519, AsymKey::Private(ocf::PrivateKey::raw(&k)));
            let session = fw.new_session_on(&driver.name, &params).unwrap();
            let done = session.run(ocf::Request::asymmetric(Op::Derive, u.to_vec(), 64)).unwrap();
            u = k;
            k.copy_from_slice(&done.result_payload());
            if i == 1 {
                assert_eq!(hex(&k), "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079");
            }
        }
        // RFC 7748 §5.2, "After 1,000 iterations".
        assert_eq!(
            hex(&k),
            "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51",
            "{}",
            driver.name
        );
    }
}

/// What the ML-KEM suite cannot check by known answer (ocf draws the encapsulation's
/// randomness): an encapsulation to a Wycheproof key decapsulates, with the key's seed, to
/// the same secret; and two encapsulations differ.
#[test]
fn mlkem768_encapsulation_decapsulates_to_its_secret() {
    use wycheproof::mlkem::{TestName, TestSet};
    let fw = common::framework_with_all_drivers();
    let set = TestSet::load(TestName::MlKem768KeyGenSeed).unwrap();
    let drivers: Vec<_> =
        fw.drivers().into_iter().filter(|d| d.capabilities.asymmetric.contains(&AsymAlg::MlKem768)).collect();
    assert!(!drivers.is_empty(), "no driver offers ml-kem-768");
    for driver in &drivers {
        for test in set.test_groups[0].tests.iter().take(10) {
            let session = |key| {
                fw.new_session_on(&driver.name, &ocf::SessionParams::asymmetric(AsymAlg::MlKem768, key))
                    .unwrap()
            };
            let ek = test.encaps_key.as_deref().unwrap();
            let seed = test.seed.as_deref().unwrap();
            let encaps = session(AsymKey::Public(ocf::PublicKey::raw(ek)));
            let decaps = session(AsymKey::Private(ocf::PrivateKey::raw(seed)));
            let room = AsymAlg::MlKem768.max_output_len(768);
            let first = encaps
                .run(ocf::Request::asymmetric(Op::Encapsulate, Vec::new(), room))
                .unwrap()
                .result_payload();
            let second = encaps
                .run(ocf::Request::asymmetric(Op::Encapsulate, Vec::new(), room))
                .unwrap()
                .result_payload();
            assert_ne!(first, second, "tcId {}: two encapsulations are equal", test.tc_id);
            let (ct, secret) = first.split_at(ocf::asym::MLKEM768_CIPHERTEXT_LEN);
            let got = decaps
                .run(ocf::Request::asymmetric(Op::Decapsulate, ct.to_vec(), room))
                .unwrap()
                .result_payload();
            assert_eq!(got, secret, "{}: tcId {}", driver.name, test.tc_id);
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `run_all` is every suite: clean on every registered driver, and nothing skipped by a
/// driver that lists the algorithm.
#[test]
fn run_all_is_clean_on_every_driver() {
    let fw = common::framework_with_all_drivers();
    let report = ocf_conformance::run_all(&fw);
    assert!(report.is_clean(), "{report}");
    for driver in fw.drivers() {
        assert!(
            report.tallies().any(|(d, _, t)| d == driver.name && t.passed_in_every_layout() > 0),
            "{report}"
        );
    }
    let failed_sources: Vec<_> = report.loaded().iter().filter(|(_, n)| **n == 0).collect();
    assert!(failed_sources.is_empty(), "sources with no cases: {failed_sources:?}");
    println!("{report}");
}

/// Every suite on sessions routed per request over `soft` and the simulated card, under
/// every routing policy: results do not depend on which driver serves which request.
#[test]
fn run_all_routed_is_clean_under_every_policy() {
    for policy in ocf::Policy::ALL {
        let fw = common::framework_with_all_drivers_and(policy);
        let report = ocf_conformance::run_all_routed(&fw);
        assert!(report.is_clean(), "{policy}: {report}");
        let passed: u64 = report
            .tallies()
            .filter(|(d, _, _)| *d == ocf_conformance::ROUTED)
            .map(|(_, _, t)| t.passed_in_every_layout())
            .sum();
        assert!(passed > 500, "{policy}: {passed} cases passed routed\n{report}");
        let routed = fw.routing();
        let used = routed.drivers.iter().filter(|d| d.routed_total() > 0).count();
        if policy == ocf::Policy::RoundRobin {
            // soft and the simulated card, and afalg where the kernel has it.
            let drivers = fw.drivers().len();
            assert_eq!(used, drivers, "round-robin uses every driver: {routed:?}");
        }
    }
}
