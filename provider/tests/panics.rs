//! A panic inside the provider reaches the host application as an error, not an abort.
//!
//! The provider built for tests (a debug build) panics, once per process, inside the
//! callback that `OCF_PROVIDER_PANIC` names (see `provider/src/boundary.rs`). Each case
//! runs the `openssl` command (Debian's OpenSSL 3) with one callback made to panic, and
//! checks that the panic happened (the provider says so on stderr), that `openssl` ended
//! with an exit status rather than a signal (before the boundary caught panics, unwinding
//! out of an `extern "C"` function aborted: SIGABRT, exit 134 in a shell), that a command
//! whose call failed printed the panic from OpenSSL's error queue, and that nothing else
//! of the panic reached stderr. `evp_aead.py --panic` then shows the same through EVP: the
//! update fails with the error queued, the context refuses its next call, a new context
//! works.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

mod common;
use common::module_dir;

/// What a command does when its callback panics.
#[derive(Clone, Copy, PartialEq)]
enum Then {
    /// It fails, printing OpenSSL's error queue (the panic among the errors).
    Fails,
    /// It succeeds regardless (a free, an algorithm OpenSSL then does without).
    Succeeds,
}

const KEY: &str = "000102030405060708090a0b0c0d0e0f";

/// (callback, command, outcome); `{in}` stands for an input file of 100,000 bytes. The
/// callbacks these commands never call (`dupctx`, most of the static parameter lists) go
/// through the same boundary functions; `boundary.rs`'s unit tests cover `dup_ctx`.
const CASES: &[(&str, &[&str], Then)] = &[
    ("provider_init", ENC, Then::Fails),
    ("provider_query_operation", ENC, Then::Fails),
    ("provider_get_params", LIST, Then::Succeeds),
    ("provider_gettable_params", LIST, Then::Succeeds),
    ("provider_teardown", ENC, Then::Succeeds),
    ("cipher_get_params", ENC, Then::Fails),
    ("cipher_get_ctx_params", ENC, Then::Fails),
    ("cipher_newctx", ENC, Then::Fails),
    ("cipher_encrypt_init", ENC, Then::Fails),
    ("cipher_decrypt_init", DEC, Then::Fails),
    ("cipher_set_ctx_params", ENC_NOPAD, Then::Fails),
    ("cipher_update", ENC, Then::Fails),
    ("cipher_final", ENC, Then::Fails),
    ("cipher_freectx", ENC, Then::Succeeds),
    ("digest_get_params", DGST, Then::Succeeds),
    ("digest_newctx", DGST, Then::Fails),
    ("digest_init", DGST, Then::Fails),
    ("digest_update", DGST, Then::Fails),
    ("digest_final", DGST, Then::Fails),
    ("digest_freectx", DGST, Then::Succeeds),
    ("mac_newctx", MAC, Then::Fails),
    ("mac_init", MAC, Then::Fails),
    ("mac_settable_ctx_params", MAC, Then::Fails),
    ("mac_set_ctx_params", MAC, Then::Fails),
    ("mac_get_ctx_params", MAC, Then::Fails),
    ("mac_update", MAC, Then::Fails),
    ("mac_final", MAC, Then::Fails),
    ("mac_freectx", MAC, Then::Succeeds),
];

const ENC: &[&str] =
    &["enc", "-e", "-aes-128-cbc", "-K", KEY, "-iv", KEY, "-in", "{in}", "-out", "/dev/null"];
const ENC_NOPAD: &[&str] =
    &["enc", "-e", "-aes-128-cbc", "-nopad", "-K", KEY, "-iv", KEY, "-in", "{in}", "-out", "/dev/null"];
const DEC: &[&str] =
    &["enc", "-d", "-aes-128-ctr", "-K", KEY, "-iv", KEY, "-in", "{in}", "-out", "/dev/null"];
const DGST: &[&str] = &["dgst", "-sha256", "{in}"];
const MAC: &[&str] = &["mac", "-macopt", "digest:SHA256", "-macopt", "hexkey:00", "-in", "{in}", "HMAC"];
const LIST: &[&str] = &["list", "-providers", "-verbose"];

#[test]
fn a_panic_in_a_callback_is_an_error_on_openssls_queue_not_an_abort() {
    let dir = module_dir();
    let input = dir.path().join("in");
    std::fs::write(&input, vec![0x5au8; 100_000]).expect("write input");
    let input = input.to_str().expect("utf-8 path");
    let mut failures = Vec::new();
    for &(callback, args, then) in CASES {
        let (cmd, rest) = args.split_first().expect("a command");
        let out = Command::new("openssl")
            .arg(cmd)
            .args(["-provider-path", dir.path().to_str().expect("utf-8 path"), "-provider", "ocf"])
            .args(["-propquery", "provider=ocf"])
            .args(rest.iter().map(|a| if *a == "{in}" { input } else { a }))
            .env("OCF_PROVIDER_PANIC", callback)
            .env_remove("RUST_BACKTRACE")
            .env_remove("OCF_DRIVER")
            .output()
            .expect("openssl runs");
        let err = String::from_utf8_lossy(&out.stderr);
        let case = format!("{callback} in `openssl {}`", args.join(" "));
        let queued = format!("ocf: internal error (a panic) in {callback}: fault injected");
        if let Some(sig) = out.status.signal() {
            failures.push(format!("{case}: killed by signal {sig} (6: SIGABRT, the abort)\n{err}"));
        } else if !err.contains(&format!("OCF_PROVIDER_PANIC={callback}: panicking now")) {
            failures.push(format!("{case}: the callback was never called\n{err}"));
        } else if then == Then::Fails && (out.status.success() || !err.contains(&queued)) {
            failures.push(format!("{case}: {} without the panic on the error queue\n{err}", out.status));
        } else if then == Then::Succeeds && !out.status.success() {
            failures.push(format!("{case}: {}\n{err}", out.status));
        } else if err.contains("panicked at") {
            failures.push(format!("{case}: the panic hook printed on the host's stderr\n{err}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), CASES.len(), failures.join("\n"));
}

#[test]
fn through_evp_the_context_that_panicked_fails_and_a_new_one_works() {
    let dir = module_dir();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/evp_aead.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg("--panic")
        .arg(dir.path())
        .env("OCF_PROVIDER_PANIC", "cipher_update")
        .env_remove("RUST_BACKTRACE")
        .env_remove("OCF_DRIVER")
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), None, "python3 was killed (6: SIGABRT):\n{text}");
    assert!(out.status.success() && text.lines().any(|l| l.starts_with("OK ")), "{text}");
}
