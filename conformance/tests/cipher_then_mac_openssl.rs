//! Encrypt-then-MAC sessions (AES-128-CBC + HMAC-SHA1, AES-256-CBC + HMAC-SHA-256,
//! 3DES-CBC + HMAC-SHA1) cross-checked against the openssl CLI on every driver.
//!
//! The seed is fixed so a failure can be replayed; set `OCF_CONFORMANCE_SEED` (decimal or
//! 0x-hex) to try others.

mod common;

use ocf::{CipherAlg, DigestAlg, MacAlg};
use ocf_conformance::openssl_cli::{self, OracleError};
use ocf_conformance::{Family, Layout};

const DEFAULT_SEED: u64 = 0x0CF_5EED;

#[test]
fn cipher_then_mac_matches_openssl() {
    let fw = common::framework_with_all_drivers();
    let seed = common::seed(DEFAULT_SEED);
    let report = match openssl_cli::cipher_then_mac(&fw, seed) {
        Ok(r) => r,
        Err(OracleError::NotInstalled(why)) => {
            eprintln!("\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
            eprintln!("!!! SKIPPED: cipher+MAC cross-check against the openssl CLI: {why}");
            eprintln!("!!! Install OpenSSL's command-line tool to run it.");
            eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert!(report.is_clean(), "seed {seed:#x}:\n{report}");
    // Per combination: 2 tag lengths x 7 shapes = 14 round trips, plus 38 forgeries.
    for (cipher, digest) in [
        (CipherAlg::AesCbc, DigestAlg::Sha1),
        (CipherAlg::AesCbc, DigestAlg::Sha256),
        (CipherAlg::TdesCbc, DigestAlg::Sha1),
    ] {
        let family = Family::CipherThenMac(cipher, MacAlg::Hmac(digest));
        let tally = report.tally(ocf_soft::NAME, family);
        for layout in Layout::ALL {
            assert_eq!(tally.passed(layout), 52, "{family} {}: seed {seed:#x}\n{report}", layout.name());
        }
    }
    println!("{report}");
}
