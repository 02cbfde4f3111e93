//! What ike-core's test binaries share (`cert`, `crypto`, included with `#[path]` from
//! their `common` modules): a framework with the soft driver, the CI rule for missing
//! independent implementations, and a scratch directory removed on drop.
#![allow(dead_code)]

use std::path::PathBuf;

/// A framework with the soft driver registered.
pub fn fw() -> ocf::Framework {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    fw
}

/// Whether a missing independent implementation fails the test (CI) instead of skipping.
pub fn required() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// A fresh directory for a test's files, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `ike-core-{name}-{pid}` under the temporary directory, emptied first.
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("ike-core-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// `file` in this directory, as a string for a command line.
    pub fn path(&self, file: &str) -> String {
        self.0.join(file).to_str().unwrap().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
