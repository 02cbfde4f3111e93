//! `openssl speed`, run for the same algorithm, direction and operand size as a case, so
//! the two figures come from the same minute on the same machine (`--openssl`).
//!
//! It runs `openssl speed -elapsed -mr -seconds S -bytes N [-multi T] [-decrypt] ARGS`:
//! wall-clock time, as the OCF papers and users measured accelerators (CPU time hides the time a process
//! waits for a device), and the machine-readable `+F:` line, whose last field is bytes per
//! second (with `-multi`, the line without a `Got:` prefix is the sum over the processes).

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
}
