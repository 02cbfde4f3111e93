//! How figures are written in the tables, shared by `report` (the throughput table) and
//! `routing` (the routing and oracle tables). It lives apart from both because `report`
//! holds `routing`'s results in its rows: with the formatter in `report`, the two modules
//! imported each other. [`per_second`] names a public-key operation's column, for the
//! tables and `--list`.

/// A number in a table cell: three significant figures or so, never scientific.
pub fn fmt_rate(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// What `openssl speed` calls a public-key operation's rate column (`sign/s`, `op/s`; for
/// ML-KEM, which 3.0 lacks, 3.5's `encaps/s` and `decaps/s`).
pub fn per_second(op: &str) -> &'static str {
    match op {
        "sign" => "sign/s",
        "verify" => "verify/s",
        "encapsulate" => "encaps/s",
        "decapsulate" => "decaps/s",
        _ => "op/s",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_keep_about_three_figures_and_never_go_scientific() {
        assert_eq!(fmt_rate(73283.4), "73283");
        assert_eq!(fmt_rate(1000.0), "1000");
        assert_eq!(fmt_rate(986.04), "986.0");
        assert_eq!(fmt_rate(10.0), "10.0");
        assert_eq!(fmt_rate(4.567), "4.57");
        assert_eq!(fmt_rate(1e-9), "0.00");
        assert_eq!(fmt_rate(1e15), "1000000000000000");
    }
}
