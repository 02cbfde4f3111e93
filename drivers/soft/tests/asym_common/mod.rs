//! Helpers shared by the public-key tests: a framework with the soft driver, requests run
//! and their results read, errors checked against the session's counters, and the
//! `openssl` CLI (3.0) as the independent implementation.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use ocf::asym::AsymKey;
use ocf::{AsymAlg, ErrorKind, Framework, Op, PrivateKey, PublicKey, Request, Session, SessionParams};

pub fn fw() -> Framework {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    fw
}

pub fn session(fw: &Framework, alg: AsymAlg, key: AsymKey) -> Session {
    fw.new_session_on("soft", &SessionParams::asymmetric(alg, key)).unwrap()
}

pub fn private(fw: &Framework, alg: AsymAlg, key: PrivateKey) -> Session {
    session(fw, alg, AsymKey::Private(key))
}

pub fn public(fw: &Framework, alg: AsymAlg, key: PublicKey) -> Session {
    session(fw, alg, AsymKey::Public(key))
}

/// Runs `op` on `input` with `room` bytes of output; the result.
pub fn run(s: &Session, op: Op, input: &[u8], room: usize) -> Vec<u8> {
    let done = s
        .run(Request::asymmetric(op, input.to_vec(), room))
        .unwrap_or_else(|f| panic!("{op:?}: {}", f.error()));
    done.result_payload()
}

/// Runs `req`, expects it to fail with `kind`, counted once on the session.
pub fn expect_error(s: &Session, req: Request, kind: ErrorKind) {
    let before = s.stats().errors.get(kind);
    let failed = s.run(req).expect_err("the request must fail");
    assert_eq!(failed.error().kind(), kind, "{}", failed.error());
    assert!(!failed.error().to_string().is_empty());
    assert_eq!(s.stats().errors.get(kind), before + 1, "{kind:?} counted on the session");
}

/// Verifies `sig` over `msg`: Ok, or the error's kind.
pub fn verify(s: &Session, msg: &[u8], sig: &[u8]) -> Result<(), ErrorKind> {
    s.run(Request::verify(msg, sig)).map(|_| ()).map_err(|f| f.error().kind())
}

/// A fresh temporary directory for one test's files.
pub fn tmpdir(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "ocf-soft-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the `openssl` CLI; its stdout. Panics with its stderr when it fails.
pub fn openssl(args: &[&str]) -> Vec<u8> {
    let out = Command::new("openssl").args(args).output().expect("the openssl CLI runs");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// Runs the `openssl` CLI; whether it succeeded.
pub fn openssl_ok(args: &[&str]) -> bool {
    Command::new("openssl").args(args).output().expect("the openssl CLI runs").status.success()
}

pub fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn path(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// Opening a soft session with `key` fails with `kind`, counted once: on the soft
/// driver when its library refused the key, framework-wide when `validate` did.
pub fn expect_session_error(fw: &Framework, alg: AsymAlg, key: ocf::asym::AsymKey, kind: ErrorKind) {
    let count = || fw.stats().errors.get(kind) + fw.driver_stats("soft").unwrap().errors.get(kind);
    let before = count();
    let e =
        fw.new_session_on("soft", &SessionParams::asymmetric(alg, key)).expect_err("the key must be refused");
    assert_eq!(e.kind(), kind, "{alg}: {e}");
    assert_eq!(count(), before + 1, "{alg}: {kind:?} counted");
}
