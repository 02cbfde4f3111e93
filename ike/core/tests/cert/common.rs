//! Helpers: the openssl CLI and the checks every made certificate goes through; the
//! framework, the CI rule and the scratch directory come from `tests/support`.

#[path = "../support/mod.rs"]
mod support;
pub use support::{fw, required, TempDir};

use std::process::Command;

use ike_core::cert::{load_certificates, Certificate, TrustStore};
use ike_core::config::Identity;

/// The time chains are checked at, Unix seconds: five minutes from now, so that a
/// certificate made a moment ago (notBefore its making, to the second, by the tool's clock)
/// is valid whatever the rounding; every certificate made here is valid for 30 days.
pub fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 300
}

/// Runs `program args` in `dir`, asserting success; its stdout.
pub fn run(dir: &TempDir, program: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(program).args(args).current_dir(&dir.0).output().expect("the tool runs");
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// `openssl verify` of `ee` with `ca` trusted, `untrusted` intermediates and `extra` options.
pub fn openssl_verifies(dir: &TempDir, ca: &str, untrusted: &[&str], ee: &str, extra: &[&str]) -> bool {
    let mut args: Vec<String> = vec!["verify".into(), "-CAfile".into(), ca.into()];
    if !untrusted.is_empty() {
        let bundle = dir.path("untrusted-bundle.pem");
        let pems: Vec<u8> = untrusted.iter().flat_map(|f| std::fs::read(dir.0.join(f)).unwrap()).collect();
        std::fs::write(&bundle, pems).unwrap();
        args.extend(["-untrusted".into(), bundle]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(ee.into());
    Command::new("openssl").args(&args).current_dir(&dir.0).output().expect("openssl runs").status.success()
}

pub fn load(dir: &TempDir, file: &str) -> Certificate {
    let mut certs = load_certificates(&std::fs::read(dir.0.join(file)).unwrap()).unwrap();
    assert_eq!(certs.len(), 1, "{file}");
    certs.remove(0)
}

pub fn loads(dir: &TempDir, files: &[&str]) -> Vec<Certificate> {
    files.iter().map(|f| load(dir, f)).collect()
}

/// Asserts `ee` validates to `store`'s CA through `ints`, binds each of `yes` and none of
/// `no`; returns the end entity's public key.
pub fn assert_valid(
    store: &TrustStore,
    ee: &Certificate,
    ints: &[Certificate],
    yes: &[Identity],
    no: &[Identity],
) -> Vec<u8> {
    let chain =
        store.validate(&fw(), ee, ints, now()).unwrap_or_else(|e| panic!("{}: {e}", ee.subject_text()));
    assert_eq!(chain.end_entity(), ee);
    assert!(store.cas().contains(chain.anchor()));
    assert_eq!(chain.certificates().len(), ints.len() + 2, "{}", ee.subject_text());
    for id in yes {
        assert!(id.bound_by(ee), "{} should bind {id:?}", ee.subject_text());
    }
    for id in no {
        assert!(!id.bound_by(ee), "{} should not bind {id:?}", ee.subject_text());
    }
    chain.public_key().to_vec()
}
