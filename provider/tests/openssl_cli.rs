//! The provider as OpenSSL itself loads it: the `openssl` command (Debian's OpenSSL 3) with
//! `-provider-path DIR -provider ocf`, and with an openssl.cnf that sets the driver, the
//! cards ocf routes over and its policy.

use std::process::Command;

mod common;
use common::module_dir;

fn openssl(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let mut c = Command::new("openssl");
    // Only the settings a test gives.
    for var in ["OCF_DRIVER", "OCF_DRIVERS", "OCF_POLICY", "OCF_STATS"] {
        c.env_remove(var);
    }
    let out = c.args(args).envs(env.iter().copied()).output().expect("openssl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn openssl_loads_the_provider_and_reads_its_name_version_and_status() {
    let dir = module_dir();
    let path = dir.path().to_str().expect("utf-8 path");
    let (ok, text) =
        openssl(&["list", "-provider-path", path, "-provider", "ocf", "-providers", "-verbose"], &[]);
    assert!(ok, "{text}");
    let ocf = text.split("  ocf").nth(1).expect("ocf is listed");
    assert!(ocf.contains("name: ocf"), "{text}");
    assert!(ocf.contains(&format!("version: {}", env!("CARGO_PKG_VERSION"))), "{text}");
    assert!(ocf.contains("status: active"), "{text}");
}

#[test]
fn a_driver_that_cannot_be_had_stops_the_provider_from_loading() {
    let dir = module_dir();
    let path = dir.path().to_str().expect("utf-8 path");
    let args = ["list", "-provider-path", path, "-provider", "ocf", "-providers"];
    let (ok, text) = openssl(&args, &[("OCF_DRIVER", "sim:nosuchcard")]);
    assert!(!ok, "{text}");
    assert!(text.contains("ocf provider: driver 'sim:nosuchcard'"), "{text}");
    let (ok, text) = openssl(&args, &[("OCF_DRIVER", "sim:bcm5822")]);
    assert!(ok, "{text}");
}

/// An openssl.cnf in `dir` that loads `dir/ocf.so` with `setting` in its section.
fn provider_cnf(dir: &std::path::Path, setting: &str) -> std::path::PathBuf {
    let cnf = dir.join("openssl.cnf");
    std::fs::write(
        &cnf,
        format!(
            "openssl_conf = init\n[init]\nproviders = provs\n[provs]\nocf = ocf_sect\n\
             [ocf_sect]\nmodule = {}\n{setting}\nactivate = 1\n",
            dir.join("ocf.so").display()
        ),
    )
    .expect("write openssl.cnf");
    cnf
}

#[test]
fn the_driver_comes_from_the_providers_openssl_cnf_section() {
    let dir = module_dir();
    let cnf = provider_cnf(dir.path(), "driver = nosuch");
    let (ok, text) = openssl(&["list", "-providers"], &[("OPENSSL_CONF", cnf.to_str().expect("utf-8"))]);
    // The configured driver does not exist: the provider refuses to load, and says why.
    assert!(text.contains("ocf provider: driver 'nosuch' is not registered"), "ok {ok}: {text}");
}

/// The soft driver's row of a statistics report: (requests, bytes, errors).
fn soft_row(report: &str) -> (u64, u64, u64) {
    let row =
        report.lines().find(|l| l.starts_with("soft ")).unwrap_or_else(|| panic!("no soft row:\n{report}"));
    let n: Vec<u64> = row.split_whitespace().skip(3).map(|x| x.parse().expect("a count")).collect();
    (n[0], n[1], n[2])
}

#[test]
fn statistics_are_written_when_openssl_unloads_the_provider() {
    let dir = module_dir();
    let path = dir.path().to_str().expect("utf-8 path");
    let input = dir.path().join("in");
    std::fs::write(&input, vec![0x5au8; 100_000]).expect("write input");
    let input = input.to_str().expect("utf-8 path");
    let key = "000102030405060708090a0b0c0d0e0f";
    // `openssl enc` through ocf, loaded from the module directory or from openssl.cnf.
    let enc = |from_dir: bool| -> Vec<&str> {
        let mut v = vec!["enc", "-e", "-aes-128-cbc", "-K", key, "-iv", key];
        if from_dir {
            v.extend(["-provider-path", path, "-provider", "ocf"]);
        }
        v.extend(["-propquery", "provider=ocf", "-in", input, "-out", "/dev/null"]);
        v
    };
    // From the environment: 100,000 bytes and their padding block went through soft.
    let report = dir.path().join("stats.txt");
    let (ok, text) = openssl(&enc(true), &[("OCF_STATS", report.to_str().expect("utf-8"))]);
    assert!(ok, "{text}");
    let first = std::fs::read_to_string(&report).expect("a report was written");
    let (requests, bytes, errors) = soft_row(&first);
    assert!(requests > 0 && bytes == 100_016 && errors == 0, "{first}");
    // From openssl.cnf's `stats`: appended after the first report.
    let cnf = provider_cnf(dir.path(), &format!("stats = {}", report.display()));
    let (ok, text) = openssl(&enc(false), &[("OPENSSL_CONF", cnf.to_str().expect("utf-8"))]);
    assert!(ok, "{text}");
    let both = std::fs::read_to_string(&report).expect("report");
    assert_eq!(both.matches("ocf provider statistics").count(), 2, "{both}");
}

/// The rows of a report's routing table: (driver, routed, explored, by size).
fn routing_rows(report: &str) -> Vec<(String, u64, u64, String)> {
    let table = report.split("  by size\n").nth(1).unwrap_or_else(|| panic!("no routing table:\n{report}"));
    table
        .lines()
        .take_while(|l| !l.starts_with("model of ") && !l.starts_with("profile of "))
        .map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            (
                c[0].to_owned(),
                c[1].parse().expect("routed"),
                c[2].parse().expect("explored"),
                c[5..].join(" "),
            )
        })
        .collect()
}

/// `OCF_DRIVERS` registers cards beside soft without pinning, `OCF_POLICY` sets ocf's policy;
/// the output is the default provider's, and the report shows the routing section.
#[test]
fn cards_and_a_policy_from_the_environment_and_the_routing_report() {
    let dir = module_dir();
    let path = dir.path().to_str().expect("utf-8 path");
    let input = dir.path().join("in");
    std::fs::write(&input, vec![0x33u8; 50_000]).expect("write input");
    let input = input.to_str().expect("utf-8 path");
    let key = "000102030405060708090a0b0c0d0e0f";
    let report = dir.path().join("stats.txt");
    let out = |ocf: bool| {
        let mut v = vec!["enc", "-e", "-aes-128-ctr", "-K", key, "-iv", key, "-in", input];
        if ocf {
            v.extend(["-provider-path", path, "-provider", "ocf", "-propquery", "provider=ocf"]);
        }
        v.push("-out");
        v
    };
    let (mine, theirs) = (dir.path().join("ocf.out"), dir.path().join("default.out"));
    let env = [
        ("OCF_DRIVERS", "sim:qat-like,sim:hifn7951,ring=8"),
        ("OCF_POLICY", "round-robin"),
        ("OCF_STATS", report.to_str().expect("utf-8")),
    ];
    let (ok, text) = openssl(&[out(true), vec![mine.to_str().unwrap()]].concat(), &env);
    assert!(ok, "{text}");
    let (ok, text) = openssl(&[out(false), vec![theirs.to_str().unwrap()]].concat(), &[]);
    assert!(ok, "{text}");
    assert_eq!(std::fs::read(&mine).unwrap(), std::fs::read(&theirs).unwrap(), "the same ciphertext");
    let report = std::fs::read_to_string(&report).expect("a report");
    assert!(report.contains("routing: policy round-robin, "), "{report}");
    let rows = routing_rows(&report);
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names, ["soft", "sim:qat-like", "sim:hifn7951,ring=8"], "{report}");
    // The driver table has them too: nothing pinned them away.
    for n in names {
        assert!(report.lines().any(|l| l.starts_with(&format!("{n} "))), "{report}");
    }
}

/// The same settings from the provider's openssl.cnf section.
#[test]
fn cards_and_a_policy_from_openssl_cnf() {
    let dir = module_dir();
    let report = dir.path().join("stats.txt");
    let cnf = provider_cnf(
        dir.path(),
        &format!("drivers = sim:bcm5822\npolicy = least-loaded\nstats = {}", report.display()),
    );
    let cnf = cnf.to_str().expect("utf-8");
    let (ok, text) =
        openssl(&["dgst", "-sha256", "-propquery", "provider=ocf", "/dev/null"], &[("OPENSSL_CONF", cnf)]);
    assert!(ok, "{text}");
    // SHA-256 of the empty string (FIPS 180-2 / NIST's example values).
    assert!(text.contains("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "{text}");
    let report = std::fs::read_to_string(&report).expect("a report");
    assert!(report.contains("routing: policy least-loaded, "), "{report}");
    let names: Vec<String> = routing_rows(&report).into_iter().map(|r| r.0).collect();
    assert_eq!(names, ["soft", "sim:bcm5822"], "{report}");
}

#[test]
fn a_bad_policy_or_card_list_stops_the_provider_from_loading() {
    let dir = module_dir();
    let path = dir.path().to_str().expect("utf-8 path");
    let args = ["list", "-provider-path", path, "-provider", "ocf", "-providers"];
    for (env, expected) in [
        (("OCF_POLICY", "fastest"), "ocf provider: policy 'fastest': unknown routing policy \"fastest\""),
        (
            ("OCF_DRIVERS", "sim:qat-like,sim:nosuchcard"),
            "ocf provider: drivers: 'sim:nosuchcard': bad sim device profile",
        ),
        (
            ("OCF_DRIVERS", "soft"),
            "ocf provider: drivers: 'soft': \"soft\" is not a driver that can be added",
        ),
    ] {
        let (ok, text) = openssl(&args, &[env]);
        assert!(!ok, "{env:?}: {text}");
        assert!(text.contains(expected), "{env:?}: {text}");
    }
    let cnf = provider_cnf(dir.path(), "policy = nosuch");
    let (_, text) = openssl(&["list", "-providers"], &[("OPENSSL_CONF", cnf.to_str().expect("utf-8"))]);
    assert!(text.contains("ocf provider: policy 'nosuch'"), "{text}");
}

/// `OCF_DRIVER` still pins every session to the one driver (a user measuring a card), with
/// cards listed in `OCF_DRIVERS` beside it: soft serves nothing.
#[test]
fn a_pinned_driver_serves_every_session_even_with_more_cards() {
    let dir = module_dir();
    let path = dir.path().to_str().expect("utf-8 path");
    let report = dir.path().join("stats.txt");
    let args = [
        "dgst",
        "-sha1",
        "-provider-path",
        path,
        "-provider",
        "ocf",
        "-propquery",
        "provider=ocf",
        "/dev/null",
    ];
    let env = [
        ("OCF_DRIVER", "sim:bcm5822"),
        ("OCF_DRIVERS", "sim:qat-like"),
        ("OCF_STATS", report.to_str().expect("utf-8")),
    ];
    let (ok, text) = openssl(&args, &env);
    assert!(ok, "{text}");
    // SHA-1 of the empty string (RFC 3174's algorithm; the well-known value).
    assert!(text.contains("da39a3ee5e6b4b0d3255bfef95601890afd80709"), "{text}");
    let report = std::fs::read_to_string(&report).expect("a report");
    let requests = |d: &str| -> u64 {
        let row =
            report.lines().find(|l| l.starts_with(&format!("{d} "))).unwrap_or_else(|| panic!("{report}"));
        row.split_whitespace().nth(3).expect("requests").parse().expect("a count")
    };
    assert!(requests("sim:bcm5822") > 0, "{report}");
    assert_eq!((requests("soft"), requests("sim:qat-like")), (0, 0), "{report}");
    // Pinned sessions make no routing decisions.
    assert!(report.contains(", 0 full decisions"), "{report}");
}

/// The requests and bytes of the soft row of the report at `path`, removed after reading (so that the next command's report is read alone).
fn soft_requests(path: &std::path::Path) -> (u64, u64) {
    let report = std::fs::read_to_string(path).unwrap_or_default();
    let _ = std::fs::remove_file(path);
    let (requests, bytes, _) = soft_row(&report);
    (requests, bytes)
}

/// `openssl dgst -sha256 -provider ocf` printed the right hash while `OCF_STATS` counted 0
/// requests. The statistics were right: OpenSSL 3.0's `dgst -sha256` does not use a
/// provider loaded with `-provider` unless a property query is given (with only the legacy
/// provider, which has no SHA-256, it prints the same hash). `docs/provider.md` says so;
/// this pins what it says: with `-propquery provider=ocf`, as `openssl sha256`, and with the
/// guide's own openssl.cnf (read from the guide), the digest goes through ocf, and its hash
/// is OpenSSL's; with a wrong module path in that file nothing says so but `openssl list
/// -providers`.
#[test]
fn dgst_goes_through_ocf_with_a_property_query_and_the_guides_openssl_cnf() {
    let dir = module_dir();
    let path = dir.path().to_str().expect("utf-8 path");
    let input = dir.path().join("in");
    std::fs::write(&input, vec![0x61u8; 100_000]).expect("write input");
    let input = input.to_str().expect("utf-8 path");
    let report = dir.path().join("stats.txt");
    let stats = [("OCF_STATS", report.to_str().expect("utf-8"))];
    let (ok, reference) = openssl(&["dgst", "-sha256", input], &[]);
    assert!(ok, "{reference}");
    let hash = reference.rsplit("= ").next().expect("a hash").trim().to_owned();
    let load = ["-provider-path", path, "-provider", "ocf"];
    // dgst with ocf loaded but no property query: ocf idle.
    let (ok, text) = openssl(&[&["dgst", "-sha256"][..], &load, &[input]].concat(), &stats);
    assert!(ok && text.contains(&hash), "{text}");
    assert_eq!(soft_requests(&report), (0, 0), "no property query: ocf is not asked");
    // With one, with openssl sha256: through ocf.
    let with_query =
        [&["dgst", "-sha256"][..], &load, &["-provider", "default", "-propquery", "provider=ocf", input]];
    for args in [with_query.concat(), [&["sha256"][..], &load, &[input]].concat()] {
        let (ok, text) = openssl(&args, &stats);
        assert!(ok && text.contains(&hash), "{args:?}: {text}");
        let (requests, bytes) = soft_requests(&report);
        assert!(requests > 0 && bytes == 100_000, "{args:?}: {requests} requests, {bytes} bytes");
    }
    // The guide's openssl.cnf, its module path pointed at this build.
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/provider.md")).unwrap();
    let start = guide.find("```\nopenssl_conf = openssl_init").expect("the guide's openssl.cnf") + 4;
    let cnf_text = &guide[start..start + guide[start..].find("```").unwrap()];
    assert!(cnf_text.contains("module = /tmp/ocf/ocf.so\n"), "{cnf_text}");
    let cnf = dir.path().join("guide.cnf");
    let write = |module: &str| {
        std::fs::write(&cnf, cnf_text.replace("/tmp/ocf/ocf.so", module)).expect("write the cnf");
        [("OPENSSL_CONF", cnf.to_str().expect("utf-8")), stats[0]]
    };
    let env = write(&dir.path().join("ocf.so").display().to_string());
    let (ok, text) = openssl(&["list", "-providers"], &env);
    let ocf = text.split("  ocf\n").nth(1).unwrap_or_else(|| panic!("ocf is not listed: {text}"));
    assert!(ok && ocf.contains("status: active"), "{text}");
    let _ = std::fs::remove_file(&report);
    let (ok, text) = openssl(&["dgst", "-sha256", input], &env);
    assert!(ok && text.contains(&hash), "{text}");
    let (requests, bytes) = soft_requests(&report);
    assert!(requests > 0 && bytes == 100_000, "the guide's cnf: {requests} requests, {bytes} bytes");
    // A wrong module path: OpenSSL loads nothing, says nothing and succeeds on the default
    // provider; `openssl list -providers` is where it shows.
    let env = write("/nonexistent/ocf.so");
    let (ok, text) = openssl(&["list", "-providers"], &env);
    assert!(ok && !text.contains("  ocf\n") && text.contains("  default\n"), "{text}");
    let (ok, text) = openssl(&["dgst", "-sha256", input], &env);
    assert!(ok && text.contains(&hash), "{text}");
    assert!(!report.exists(), "ocf was not loaded, so it wrote no report");
}
