//! What the provider did, for the person who ran OpenSSL: ocf's counters and per-stage
//! profile, written when OpenSSL unloads the provider (FreeBSD's `cryptostats`, for one
//! process). Asked for with `stats = PATH` in the provider's openssl.cnf section or
//! `OCF_STATS=PATH` in the environment; `-` means stderr. Reports are appended, one per
//! process, so a file can collect a run of commands.
//!
//! ```text
//! ocf provider statistics (pid 4242)
//! driver              sessions  created     requests           bytes  errors
//! soft                       0        2        45312        44040192  0
//! errors of soft: auth_failed 3
//! profile of soft (one request in 64):
//! Task          Count  Avg ns ...
//! ```

use std::fmt::Write as _;
use std::io::Write as _;

use ocf::Framework;

/// The report for `fw`, as text.
pub fn report(fw: &Framework) -> String {
    let stats = fw.stats();
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = writeln!(out, "ocf provider statistics (pid {})", std::process::id());
    let _ = writeln!(
        out,
        "{:<18} {:>9} {:>8} {:>12} {:>15}  errors",
        "driver", "sessions", "created", "requests", "bytes"
    );
    for d in &stats.drivers {
        let _ = writeln!(
            out,
            "{:<18} {:>9} {:>8} {:>12} {:>15}  {}",
            d.name,
            d.sessions,
            d.sessions_created,
            d.ops,
            d.bytes,
            d.errors.total()
        );
    }
    for d in &stats.drivers {
        let causes: Vec<String> = d.errors.nonzero().map(|(k, n)| format!("{} {n}", k.name())).collect();
        if !causes.is_empty() {
            let _ = writeln!(out, "errors of {}: {}", d.name, causes.join(", "));
        }
    }
    let causes: Vec<String> = stats.errors.nonzero().map(|(k, n)| format!("{} {n}", k.name())).collect();
    if !causes.is_empty() {
        let _ = writeln!(out, "errors before any driver: {}", causes.join(", "));
    }
    for d in &stats.drivers {
        if let Some(p) = fw.profile(&d.name).filter(|p| p.get(ocf::Stage::ALL[0]).count > 0) {
            let _ = writeln!(out, "profile of {} (sampled requests):\n{p}", d.name);
        }
    }
    out
}

/// Appends the report to `to` (a path, or `-` for stderr).
pub fn write(fw: &Framework, to: &str) -> std::io::Result<()> {
    let text = report(fw);
    if to == "-" {
        return std::io::stderr().write_all(text.as_bytes());
    }
    std::fs::OpenOptions::new().create(true).append(true).open(to)?.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocf::{CipherAlg, Op, Request, SessionParams};

    #[test]
    fn the_report_counts_requests_and_names_each_error() {
        let p = crate::Provider::new(None).unwrap();
        let s = p.new_session(&SessionParams::aead(CipherAlg::AesGcm, &[7u8; 16])).unwrap();
        let sealed = s.run(Request::new(Op::Encrypt, vec![1u8; 100]).with_iv(&[2; 12])).unwrap();
        let mut forged = sealed.tag().to_vec();
        forged[0] ^= 1;
        let back = Request::new(Op::Decrypt, sealed.buf.to_vec()).with_iv(&[2; 12]).with_tag(&forged);
        assert!(s.run(back).is_err());
        let text = report(&p.framework);
        let soft = text.lines().find(|l| l.starts_with("soft ")).unwrap_or_else(|| panic!("{text}"));
        let cols: Vec<&str> = soft.split_whitespace().collect();
        assert_eq!(cols[3..], ["1", "100", "1"], "requests, bytes, errors:\n{text}");
        assert!(text.contains("errors of soft: auth_failed 1"), "{text}");
    }
}
