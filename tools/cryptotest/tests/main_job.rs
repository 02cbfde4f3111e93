//! The main job as a newcomer meets it: `cryptotest` with no options shows ocf choosing
//! among this machine's drivers, `--list` names every driver `-d` takes, and `--plot` draws
//! every row the tables show, size distributions included.

use std::process::{Command, Output};

fn cryptotest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cryptotest")).args(args).output().expect("cryptotest runs")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// The forms of `valid drivers: …` in a usage error, split at the commas outside brackets:
/// `soft`, `sim:PROFILE (PROFILE: …)` → `sim:PROFILE`, `afalg:OPTIONS (…)` → `afalg:OPTIONS`.
fn valid_forms(stderr: &str) -> Vec<String> {
    let line = stderr.lines().find_map(|l| l.strip_prefix("valid drivers: ")).expect("a valid drivers line");
    let (mut forms, mut cur, mut depth) = (Vec::new(), String::new(), 0);
    for ch in line.chars() {
        match ch {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => forms.push(std::mem::take(&mut cur)),
            _ => {}
        }
        if !(ch == ',' && depth == 0) {
            cur.push(ch);
        }
    }
    forms.push(cur);
    forms.iter().map(|f| f.split_whitespace().next().unwrap_or("").to_owned()).collect()
}

/// The names `--list` gives drivers: the first word of each line of its driver section that
/// is indented by exactly two spaces, and every named profile (`sim:NAME`) it shows.
fn listed_drivers(list: &str) -> Vec<String> {
    let section: Vec<&str> = list
        .lines()
        .skip_while(|l| !l.starts_with("Drivers (-d NAME)"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    let mut names: Vec<String> = section
        .iter()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    for l in &section {
        // The named profiles (`sim:qat-like`), not the prose about them (`sim:…`).
        let profile = |w: &&str| {
            w.strip_prefix("sim:").is_some_and(|p| {
                !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
        };
        names.extend(l.split_whitespace().filter(profile).map(str::to_owned));
    }
    names
}

/// Whether `value` is listed: by name, or under a listed form whose capital part it fills
/// in (`sim:PROFILE` covers `sim:ring=…`, `afalg:OPTIONS` covers `afalg:sync`).
fn is_listed(value: &str, listed: &[String]) -> bool {
    listed.iter().any(|form| {
        form == value
            || form
                .find(|c: char| c.is_ascii_uppercase())
                .is_some_and(|i| value.len() > i && value.starts_with(&form[..i]))
    })
}

/// Every value `-d` accepts is named by `--list`, and every name `--list` gives is
/// accepted by `-d`. Before the listing was made from the parser's table, `mb` was
/// accepted and not listed.
#[test]
fn list_names_every_driver_that_d_accepts() {
    let out = cryptotest(&["--list"]);
    assert_eq!(out.status.code(), Some(0));
    let (list, _) = text(&out);
    let listed = listed_drivers(&list);

    // Every concrete value: each named profile, a custom card, afalg's paths; then the
    // forms the parser's own usage error gives.
    let mut values: Vec<String> =
        ["soft", "mb", "null", "afalg", "afalg:sync", "afalg:pool", "all", "auto"].map(String::from).to_vec();
    values.extend(["hifn7951", "hifn7811", "bcm5822", "qat-like"].map(|p| format!("sim:{p}")));
    values.push("sim:ring=4,setup=1us,rate=1GB/s".into());
    let (_, usage) = text(&cryptotest(&["-d", "gpu0"]));
    let forms = valid_forms(&usage);
    assert!(forms.len() >= 7, "{forms:?} from {usage}");
    values.extend(forms);
    for value in &values {
        assert!(is_listed(value, &listed), "`-d {value}` is accepted but --list does not name it:\n{list}");
    }
    // And the other way: each concrete name the listing gives is a value -d takes (a usage
    // error exits 2; an afalg or mb this machine lacks is skipped, exit 1, not refused).
    for name in listed.iter().filter(|n| !n.chars().any(|c| c.is_ascii_uppercase())) {
        let out = cryptotest(&["-d", "soft", "-d", name, "-a", "sha1", "-s", "64", "-n", "1"]);
        let (_, stderr) = text(&out);
        assert_ne!(out.status.code(), Some(2), "--list names `{name}` but -d refuses it: {stderr}");
    }
}

/// `--plot` used to draw the fixed sizes only: a size distribution's row, in every table,
/// was missing from the plot. Each distribution is a marker of its own, at the mean size
/// of the requests it did, in the legend by name.
#[test]
fn a_plot_draws_size_distributions_too() {
    let dir = std::env::temp_dir().join(format!("cryptotest-plot-dist-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dist.svg");
    let out = cryptotest(&[
        "-d",
        "soft",
        "-a",
        "sha1",
        "-s",
        "64,256,imix,16..16384",
        "-n",
        "100",
        "--plot",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let svg = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    for label in ["sha1 · soft", "sha1 · soft · imix (mean", "sha1 · soft · 16..16384 (mean"] {
        assert!(svg.contains(label), "{label} missing from the plot");
    }
    // Two fixed sizes on one line, two distributions on their own; a legend marker each.
    assert_eq!(svg.matches("<circle").count(), 2 + 2 + 3, "one marker per row plus one per legend entry");
}

/// With no options: soft, mb where this machine has IPsec-MB, one simulated card, and
/// auto among them, with the routing of every auto case and the summary of what auto
/// chose. (Which driver wins is this machine's business; the structure is the test's.)
#[test]
fn no_options_shows_auto_choosing_among_this_machines_drivers() {
    let out = cryptotest(&[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let drivers_line = stdout.lines().find(|l| l.starts_with("drivers: ")).expect("the drivers line");
    let mut expect = vec!["soft", "sim:", "auto"];
    if ocf_mb::available() {
        expect.push("mb");
    } else {
        assert!(stderr.contains("mb skipped"), "{stderr}");
    }
    for d in expect {
        assert!(drivers_line.contains(d), "{d} missing: {drivers_line}");
    }
    let routings = stdout.matches("\nRouting: ").count();
    assert!(routings >= 4, "a routing table per auto case: {stdout}");
    let summary = stdout.split("\nWhat auto chose").nth(1).expect("the summary of what auto chose");
    let chose: Vec<&str> = summary.lines().filter(|l| l.contains(": auto chose ")).collect();
    assert!(chose.len() >= 2, "a line per algorithm: {summary}");
    // Each auto case is a row of the summary with the fastest driver alone and a ratio.
    let rows = summary.lines().filter(|l| l.starts_with("  ") && l.trim_end().ends_with(char::is_numeric));
    assert_eq!(rows.count(), routings, "{summary}");
}

/// A driver this machine lacks is named once, with its reason, though both the measured
/// drivers and auto's own framework try it (the sweep with no options names mb twice on a
/// machine without IPsec-MB otherwise).
#[test]
fn a_missing_driver_is_reported_once() {
    let mut missing = Vec::new();
    if ocf_afalg::AfalgDriver::probe().is_err() {
        missing.push("afalg");
    }
    if !ocf_mb::available() {
        missing.push("mb");
    }
    for name in missing {
        let out = cryptotest(&["-d", name, "-d", "soft", "-d", "auto", "-a", "sha1", "-s", "64", "-n", "10"]);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
        assert_eq!(stderr.matches(&format!("{name} skipped: ")).count(), 1, "{stderr}");
    }
}
