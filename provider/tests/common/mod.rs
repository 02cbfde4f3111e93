//! What the provider's integration tests share.

use std::path::PathBuf;

/// The cdylib Cargo built for this test (in `target/<profile>/deps`, beside the test
/// executable), installed as `DIR/ocf.so`.
pub fn module_dir() -> tempfile::TempDir {
    let exe = std::env::current_exe().expect("test executable");
    let lib: PathBuf = exe.parent().expect("target/<profile>/deps").join("libocf_provider.so");
    assert!(lib.exists(), "{} was not built", lib.display());
    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::copy(&lib, dir.path().join("ocf.so")).expect("install ocf.so");
    dir
}
