//! The known-answer suite on every driver of the workspace (soft, the simulated card, and
//! afalg where the kernel has AF_ALG: see `common`).
//!
//! Each suite is its own test so they run in parallel. Each asserts that nothing failed,
//! and that the soft driver passed at least the expected number of cases in every layout
//! and rejected the expected number of unsupported-parameter cases: if a vector file
//! stopped loading, or a loader started skipping entries, the counts would drop and the
//! test would fail instead of passing on fewer checks.

mod common;

use ocf::{CipherAlg, DigestAlg, MacAlg};
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
fn run_and_check(suite: Suite, expected: &[Expected], sources: &[&str]) {
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
