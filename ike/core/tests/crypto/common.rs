//! Helpers: hex, and the independent implementations (Python from target/peers-venv, the
//! openssl CLI); the framework, the CI rule and the scratch directory come from
//! `tests/support`.

#[path = "../support/mod.rs"]
mod support;
pub use support::{fw, required, TempDir};

use std::path::{Path, PathBuf};
use std::process::Command;

/// Bytes of a hex string; whitespace ignored (RFC vectors are printed in groups).
pub fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `script` with Python's `cryptography` (target/peers-venv, installed by
/// scripts/setup) and `args`; its stdout, trimmed. `None` (the test skips) when the venv is
/// missing outside CI.
pub fn python(script: &str, args: &[String]) -> Option<String> {
    let py = repo_root().join("target/peers-venv/bin/python");
    if !py.exists() {
        assert!(!required(), "target/peers-venv is missing: run scripts/setup");
        eprintln!("skipped: target/peers-venv is missing (run scripts/setup)");
        return None;
    }
    let out = Command::new(py).arg("-c").arg(script).args(args).output().expect("python runs");
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8(out.stdout).unwrap().trim().to_string())
}

/// Runs `openssl args`, asserting success; its stdout.
pub fn openssl(args: &[&str]) -> Vec<u8> {
    let out = Command::new("openssl").args(args).output().expect("the openssl CLI runs");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// `openssl args`' exit status, for checks expected to fail.
pub fn openssl_ok(args: &[&str]) -> bool {
    Command::new("openssl").args(args).output().expect("the openssl CLI runs").status.success()
}
