//! `openssl speed`, run for the same algorithm, direction and operand size as a case, so
//! the two figures come from the same minute on the same machine (`--openssl`).
//!
//! It runs `openssl speed -elapsed -mr -seconds S -bytes N [-multi T] [-decrypt] ARGS`:
//! wall-clock time, as the OCF papers and users measured accelerators (CPU time hides the time a process
//! waits for a device), and the machine-readable `+F:` line, whose last field is bytes per
//! second (with `-multi`, the line without a `Got:` prefix is the sum over the processes).
//!
//! Public-key algorithms ([`speed_public_key`]) run `openssl speed [-elapsed] -seconds S
//! [-multi T] NAME` once for all of an algorithm's operations — without `-elapsed` its
//! figures are per CPU second (user time), which a busy shared machine disturbs far less
//! than wall-clock time — and their table is read
//! ([`parse_public_key_table`]): a line per algorithm, its seconds per operation, then its
//! operations per second (`sign/s verify/s`, or `op/s`), the same with `-multi` (summed).
//! The table, not `-mr`'s lines, because it is what a reader compares our figures with; the
//! parser is tested on captured output of openssl 3.0 (`tests/fixtures/`).

use std::process::Command;

/// The `openssl` command to run: `$OPENSSL` if set, else `openssl` from `PATH`.
pub fn command() -> String {
    std::env::var("OPENSSL").unwrap_or_else(|_| "openssl".to_owned())
}

/// Checks that openssl can run; returns its version line.
pub fn check() -> Result<String, String> {
    let cmd = command();
    let out = Command::new(&cmd).arg("version").output().map_err(|e| {
        format!(
            "--openssl needs the `{cmd}` command, which cannot be run: {e}\n\
             (install it, e.g. `apt-get install openssl`, or set OPENSSL=/path/to/openssl)"
        )
    })?;
    if !out.status.success() {
        return Err(format!("`{cmd} version` failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Runs one measurement; bytes per second.
pub fn speed(args: &[&str], decrypt: bool, size: usize, seconds: u64, threads: usize) -> Result<f64, String> {
    let cmd = command();
    let mut c = Command::new(&cmd);
    c.args(["speed", "-elapsed", "-mr", "-seconds", &seconds.to_string(), "-bytes", &size.to_string()]);
    if threads > 1 {
        c.args(["-multi", &threads.to_string()]);
    }
    if decrypt {
        c.arg("-decrypt");
    }
    c.args(args);
    let out = c.output().map_err(|e| format!("cannot run `{cmd} speed`: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_speed(&text).ok_or_else(|| {
        format!(
            "`{cmd} speed … {}` gave no result (exit {}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or("no message")
        )
    })
}

/// Runs `openssl speed` for a public-key algorithm (`args`: its name, `rsa2048`); its
/// operations per second, in the table's column order (sign, verify; or op): per second
/// of wall-clock time with `elapsed`, else per CPU second (user time, openssl's default).
pub fn speed_public_key(
    args: &[&str],
    seconds: u64,
    threads: usize,
    elapsed: bool,
) -> Result<Vec<f64>, String> {
    let cmd = command();
    let mut c = Command::new(&cmd);
    c.arg("speed");
    if elapsed {
        c.arg("-elapsed");
    }
    c.args(["-seconds", &seconds.to_string()]);
    if threads > 1 {
        c.args(["-multi", &threads.to_string()]);
    }
    c.args(args);
    let out = c.output().map_err(|e| format!("cannot run `{cmd} speed`: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let want = args.last().copied().unwrap_or_default();
    parse_public_key_table(&text)
        .into_iter()
        .find(|(name, _)| name == want)
        .map(|(_, rates)| rates)
        .ok_or_else(|| {
            format!(
                "`{cmd} speed {}` gave no result (exit {}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("no message")
            )
        })
}

/// The lines of `openssl speed`'s public-key table: per algorithm, by `openssl speed`'s
/// name for it, its operations per second in column order. A line is the label, one time
/// per operation (`0.000228s`), one rate per operation; every other line is passed over.
pub fn parse_public_key_table(text: &str) -> Vec<(String, Vec<f64>)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let is_time = |w: &str| w.strip_suffix('s').is_some_and(|n| n.parse::<f64>().is_ok());
        let Some(at) = words.iter().position(|w| is_time(w)) else { continue };
        let times = words[at..].iter().take_while(|w| is_time(w)).count();
        let rates: Option<Vec<f64>> = words[at + times..].iter().map(|w| w.parse::<f64>().ok()).collect();
        match (speed_name(&words[..at]), rates) {
            (Some(name), Some(rates)) if rates.len() == times => out.push((name, rates)),
            _ => {}
        }
    }
    out
}

/// `openssl speed`'s name for a table line's label: `rsa 2048 bits` → `rsa2048`,
/// `256 bits ecdsa (nistp256)` → `ecdsap256`, `253 bits ecdh (X25519)` → `ecdhx25519`,
/// `253 bits EdDSA (Ed25519)` → `ed25519`, `2048 bits ffdh` → `ffdh2048`.
fn speed_name(label: &[&str]) -> Option<String> {
    match label {
        [kind, bits, "bits"] if bits.parse::<u32>().is_ok() => Some(format!("{kind}{bits}")),
        [bits, "bits", kind] if bits.parse::<u32>().is_ok() => Some(format!("{kind}{bits}")),
        [bits, "bits", kind, curve] if bits.parse::<u32>().is_ok() => {
            let curve = curve.strip_prefix('(')?.strip_suffix(')')?.to_ascii_lowercase();
            let curve = curve.strip_prefix("nist").unwrap_or(&curve).to_owned();
            match kind.to_ascii_lowercase().as_str() {
                "eddsa" => Some(curve),
                kind => Some(format!("{kind}{curve}")),
            }
        }
        _ => None,
    }
}

/// The bytes per second of a `-mr` output's result line.
fn parse_speed(text: &str) -> Option<f64> {
    text.lines()
        .rev()
        .filter_map(|l| l.trim().strip_prefix("+F:"))
        .find_map(|rest| rest.rsplit(':').next()?.trim().parse::<f64>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_and_multi_process_output() {
        let single = "+H:1024\n+F:25:AES-128-GCM:1505812480.00\n";
        assert_eq!(parse_speed(single), Some(1505812480.0));
        let multi = "Forked child 0\nGot: +H:1024 from 0\nGot: +F:25:AES-128-GCM:1187705856.00 from 0\n\
                     Got: +F:25:AES-128-GCM:1353932800.00 from 1\n+F:25:AES-128-GCM:2541638656.00\n";
        assert_eq!(parse_speed(multi), Some(2541638656.0));
        assert_eq!(parse_speed("Error setting cipher\n"), None);
    }

    /// The stdout of `openssl speed -seconds 1 rsa2048 ecdsap256 ecdhp256 ecdhx25519 ed25519`
    /// (OpenSSL 3.0.19, this machine, captured once), version and compiler lines included.
    const CAPTURED: &str = include_str!("../tests/fixtures/openssl-speed-3.0-public-key.txt");
    /// `openssl speed -elapsed -seconds 1 -multi 2 rsa2048 ecdhx25519 ed25519`: the
    /// children's `Got:` lines, then the table of their sums.
    const CAPTURED_MULTI: &str = include_str!("../tests/fixtures/openssl-speed-3.0-public-key-multi2.txt");

    #[test]
    fn parses_the_public_key_table_of_openssl_speed_3_0() {
        let got = parse_public_key_table(CAPTURED);
        let want: Vec<(String, Vec<f64>)> = vec![
            ("rsa2048".into(), vec![4382.8, 68991.0]),
            ("ecdsap256".into(), vec![62763.0, 22476.0]),
            ("ecdhp256".into(), vec![28540.0]),
            ("ecdhx25519".into(), vec![37952.0]),
            ("ed25519".into(), vec![40515.0, 15352.0]),
        ];
        assert_eq!(got, want);
        let multi = parse_public_key_table(CAPTURED_MULTI);
        assert_eq!(
            multi,
            [
                ("rsa2048".into(), vec![8693.0, 146817.0]),
                ("ecdhx25519".into(), vec![79992.0]),
                ("ed25519".into(), vec![79900.0, 29992.0])
            ]
        );
    }

    #[test]
    fn names_the_other_table_lines_as_openssl_speed_does() {
        let text = "                       op     op/s\n2048 bits ffdh   0.0002s   4456.6\n\
                    384 bits ecdsa (nistp384)   0.0009s   0.0007s   1098.2   1431.9\n\
                    rsa 4096 bits 0.003215s 0.000049s    311.0  20404.2\n\
                    rsa 4096 bits 0.003215s 0.000049s    311.0\n";
        let got = parse_public_key_table(text);
        assert_eq!(
            got,
            [
                ("ffdh2048".to_owned(), vec![4456.6]),
                ("ecdsap384".to_owned(), vec![1098.2, 1431.9]),
                ("rsa4096".to_owned(), vec![311.0, 20404.2])
            ],
            "a line with fewer rates than times is not a result"
        );
        assert!(parse_public_key_table("version: 3.0.19\noptions: bn(64,64)\n").is_empty());
    }
}
