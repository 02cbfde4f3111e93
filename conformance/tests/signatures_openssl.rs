//! Signatures cross-checked with the openssl CLI both ways on every driver that offers
//! them (see `ocf_conformance::openssl_sig`): ECDSA P-256/P-384 with SHA-256/384/512 in DER
//! and P1363, RSA PKCS#1 v1.5 and PSS with SHA-256/384/512, Ed25519.
//!
//! The seed is fixed so a failure can be replayed; set `OCF_CONFORMANCE_SEED` (decimal or
//! 0x-hex) to try others.

mod common;

use ocf::{AsymAlg, Curve, DigestAlg, SigEncoding};
use ocf_conformance::openssl_cli::OracleError;
use ocf_conformance::openssl_sig;
use ocf_conformance::{Family, Layout};

const DEFAULT_SEED: u64 = 0x0CF_516;

#[test]
fn signatures_match_openssl_both_ways() {
    let fw = common::framework_with_all_drivers();
    let seed = common::seed(DEFAULT_SEED);
    let report = match openssl_sig::signatures(&fw, seed) {
        Ok(r) => r,
        Err(OracleError::NotInstalled(why)) => {
            eprintln!("\n!!! SKIPPED: signature cross-check against the openssl CLI: {why}");
            eprintln!("!!! Install OpenSSL's command-line tool to run it.\n");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert!(report.is_clean(), "seed {seed:#x}:\n{report}");
    let mut algs = vec![AsymAlg::Ed25519];
    for hash in [DigestAlg::Sha256, DigestAlg::Sha384, DigestAlg::Sha512] {
        algs.extend([AsymAlg::RsaPkcs1 { hash }, AsymAlg::RsaPss { hash }]);
        for curve in [Curve::P256, Curve::P384] {
            for encoding in [SigEncoding::Der, SigEncoding::P1363] {
                algs.push(AsymAlg::Ecdsa { curve, hash, encoding });
            }
        }
    }
    for alg in algs {
        // 3 messages (2 for Ed25519: not the empty one), each signed by openssl and verified
        // by ocf, and signed by ocf and verified (or compared) by openssl.
        let expected = if alg == AsymAlg::Ed25519 { 4 } else { 6 };
        let tally = report.tally(ocf_soft::NAME, Family::Asym(alg));
        for layout in Layout::ALL {
            assert_eq!(tally.passed(layout), expected, "{alg} {}: seed {seed:#x}\n{report}", layout.name());
        }
    }
    println!("{report}");
}
