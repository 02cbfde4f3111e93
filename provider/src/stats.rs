//! What the provider did, for the person who ran OpenSSL: ocf's counters, what routing did
//! (per driver: requests routed by size class, explorations, skips, and the cost model's
//! estimates) and the per-stage profile, written when OpenSSL unloads the provider (FreeBSD's `cryptostats`, for one
//! process). Asked for with `stats = PATH` in the provider's openssl.cnf section or
//! `OCF_STATS=PATH` in the environment; `-` means stderr. Reports are appended, one per
//! process, so a file can collect a run of commands.
//!
//! ```text
//! ocf provider statistics (pid 4242)
//! driver              sessions  created     requests           bytes  errors
//! soft                       0        2        45312        44040192  0
//! errors of soft: auth_failed 3
//! routing: policy cost-model, 2832 full decisions, 38 ns per decision
//! driver                routed  explored   blocked unhealthy  by size
//! soft                   45000         9         0         0  ≤1K 45000
//! sim:qat-like             312       312         0         0  ≤1K 312
//! model of soft: cipher AES-CBC-128 encrypt: setup 210 ns, 1190 ns/KiB, 2803 samples
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
    routing(&mut out, &fw.routing());
    for d in &stats.drivers {
        if let Some(p) = fw.profile(&d.name).filter(|p| p.get(ocf::Stage::ALL[0]).count > 0) {
            let _ = writeln!(out, "profile of {} (sampled requests):\n{p}", d.name);
        }
    }
    out
}

/// The routing section: the policy and its decisions, a row per driver (requests routed to
/// it, of them explorations, decisions that skipped it as blocked or as unhealthy, and the
/// size classes it got, non-zero ones only), and a line per cost-model estimate.
fn routing(out: &mut String, r: &ocf::RoutingStats) {
    let _ = writeln!(
        out,
        "routing: policy {}, {} full decisions, {:.0} ns per decision",
        r.policy, r.decisions, r.decision_ns
    );
    let _ = writeln!(
        out,
        "{:<18} {:>10} {:>9} {:>9} {:>9}  by size",
        "driver", "routed", "explored", "blocked", "unhealthy"
    );
    for d in &r.drivers {
        let classes: Vec<String> = ocf::SizeClass::all()
            .filter(|c| d.routed[c.index()] > 0)
            .map(|c| format!("{} {}", c.label(), d.routed[c.index()]))
            .collect();
        let _ = writeln!(
            out,
            "{:<18} {:>10} {:>9} {:>9} {:>9}  {}",
            d.driver,
            d.routed_total(),
            d.explored,
            d.skipped_blocked,
            d.skipped_unhealthy,
            if classes.is_empty() { "-".to_owned() } else { classes.join(", ") }
        );
    }
    for d in &r.drivers {
        for m in &d.models {
            let _ = writeln!(out, "model of {}: {m}", d.driver);
        }
    }
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
        let p = crate::Provider::new(&crate::settings::Settings::default()).unwrap();
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

    /// A provider with `soft` and a card, not pinned: `n` AES-GCM requests of `len` bytes
    /// through ocf's routing, and the report.
    fn routed_report(n: usize, len: usize) -> String {
        let settings =
            crate::settings::Settings { drivers: Some("sim:qat-like".into()), ..Default::default() };
        let p = crate::Provider::new(&settings).unwrap();
        let s = p.new_session(&SessionParams::aead(CipherAlg::AesGcm, &[7u8; 16])).unwrap();
        for _ in 0..n {
            s.run(Request::new(Op::Encrypt, vec![1u8; len]).with_iv(&[2; 12])).unwrap();
        }
        report(&p.framework)
    }

    /// The row of driver `d` in the report's routing table, split into columns.
    fn routing_row<'a>(text: &'a str, d: &str) -> Vec<&'a str> {
        let table = text.split("  by size\n").nth(1).unwrap_or_else(|| panic!("no routing table:\n{text}"));
        let row = table.lines().find(|l| l.starts_with(&format!("{d} "))).unwrap_or_else(|| panic!("{text}"));
        row.split_whitespace().collect()
    }

    #[test]
    fn the_report_has_a_routing_row_per_driver() {
        let text = routed_report(3, 100);
        assert!(text.contains("routing: policy cost-model, "), "{text}");
        assert!(
            text.contains("driver                 routed  explored   blocked unhealthy  by size"),
            "{text}"
        );
        for d in ["soft", "sim:qat-like"] {
            let row = routing_row(&text, d);
            // driver, routed, explored, blocked, unhealthy, then "-" or the classes.
            assert!(row[1..5].iter().all(|c| c.parse::<u64>().is_ok()), "{row:?}");
            assert!(row[5] == "-" || row[5] == "≤128", "{row:?}");
        }
    }

    /// The counts themselves, through ocf's routing: every request was routed by a decision,
    /// all in the ≤128 class.
    #[test]
    fn the_routing_rows_count_every_request_by_size() {
        let text = routed_report(40, 100);
        let rows = [routing_row(&text, "soft"), routing_row(&text, "sim:qat-like")];
        let routed: u64 = rows.iter().map(|r| r[1].parse::<u64>().unwrap()).sum();
        assert_eq!(routed, 40, "{text}");
        for r in &rows {
            assert!(
                r[5] == "-" || (r[5] == "≤128" && r[6] == r[1] && r.len() == 7),
                "one size class: {r:?}\n{text}"
            );
        }
        assert!(text.contains("routing: policy cost-model, ") && text.contains(" full decisions"), "{text}");
        assert!(text.contains("model of soft: aead "), "the model's estimates are listed:\n{text}");
    }
}
