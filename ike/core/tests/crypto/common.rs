//! Helpers: a framework with the soft driver, hex, and the independent implementations
//! (Python from target/peers-venv, the openssl CLI).

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn fw() -> ocf::Framework {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    fw
}

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

/// Whether a missing independent implementation fails the test (CI) instead of skipping.
fn required() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
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

/// A fresh directory for a test's files, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("ike-core-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self, file: &str) -> String {
        self.0.join(file).to_str().unwrap().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
