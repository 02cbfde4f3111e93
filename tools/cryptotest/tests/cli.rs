//! cryptotest from the outside: its options, its output, its exit status.

mod common;

use std::process::{Command, Stdio};

use serde_json::{json, Value};

use common::{cryptotest, json_cases, text};

#[test]
fn json_lines_have_every_documented_key_and_count_what_ran() {
    let (out, cases) =
        json_cases(&["-d", "soft", "-a", "sha256,aes-128-gcm", "-s", "64,1k", "-n", "300", "-t", "2"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert_eq!(cases.len(), 4);
    for c in &cases {
        for key in [
            "driver", "alg", "op", "size", "threads", "batch", "ops", "bytes", "seconds", "mbit_s",
            "kbytes_s", "user_s", "sys_s", "vcsw", "ivcsw", "restarts", "errors", "verified",
        ] {
            assert!(c.get(key).is_some(), "{key} missing in {c}");
        }
        assert_eq!(c["driver"], "soft");
        assert_eq!(c["threads"], 2);
        assert_eq!(c["batch"], 1);
        assert_eq!(c["ops"], 300, "-n counts operations per case over all threads");
        assert_eq!(c["bytes"].as_u64(), Some(300 * c["size"].as_u64().unwrap()));
        assert_eq!(c["errors"], 0);
        assert_eq!(c["verified"], Value::Null, "not asked to verify");
        assert!(c["mbit_s"].as_f64().unwrap() > 0.0);
        let mbit = c["bytes"].as_f64().unwrap() * 8.0 / 1e6 / c["seconds"].as_f64().unwrap();
        assert!((c["mbit_s"].as_f64().unwrap() / mbit - 1.0).abs() < 1e-9);
    }
    let ops: Vec<(&str, &str, u64)> = cases
        .iter()
        .map(|c| (c["alg"].as_str().unwrap(), c["op"].as_str().unwrap(), c["size"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        ops,
        [
            ("sha256", "digest", 64),
            ("sha256", "digest", 1024),
            ("aes-128-gcm", "encrypt", 64),
            ("aes-128-gcm", "encrypt", 1024)
        ]
    );
}

#[test]
fn verify_passes_on_real_drivers_batched_and_decrypting() {
    let (out, cases) = json_cases(&[
        "-d",
        "soft",
        "-d",
        "sim:ring=16,setup=0ns,rate=100GB/s",
        "-a",
        "aes-128-gcm,aes-128-cbc-hmac-sha1,des-ede3-cbc",
        "-s",
        "16,1504",
        "-n",
        "200",
        "--batch",
        "8",
        "--decrypt",
        "--verify",
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert_eq!(cases.len(), 12);
    for c in &cases {
        assert_eq!(c["verified"], true, "{c}");
        assert_eq!(c["op"], "decrypt");
        assert_eq!(c["batch"], 8);
        assert_eq!(c["ops"], 200);
    }
}

#[test]
fn verify_fails_with_exit_1_on_a_faulty_driver() {
    // A simulated card that corrupts one result in 7 without reporting an error.
    let faulty = "sim:ring=8,setup=0ns,rate=100GB/s,corrupt=7";
    let (out, cases) =
        json_cases(&["-d", faulty, "-a", "aes-128-gcm,sha1", "-s", "64", "-n", "70", "--verify"]);
    assert_eq!(out.status.code(), Some(1), "{:?}", text(&out));
    assert_eq!(cases.len(), 2);
    for c in &cases {
        assert_eq!(c["verified"], false, "{c}");
        assert_eq!(c["errors"], 0, "the card reports success");
        assert!(c["first_mismatch"].as_str().unwrap().contains("differs"), "{c}");
    }
    let (_, stderr) = text(&out);
    assert!(stderr.contains("10 of 70 results differ from soft"), "{stderr}");

    // The same card without --verify: nothing checks, nothing fails.
    let out = cryptotest(&["-d", faulty, "-a", "sha1", "-s", "64", "-n", "70"]);
    assert_eq!(out.status.code(), Some(0));

    // The null driver does no cryptography at all.
    let out = cryptotest(&["-d", "null", "-a", "aes-128-cbc", "-s", "64", "-n", "10", "--verify"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn the_table_has_a_row_per_size_a_column_per_driver_and_the_cost_of_each_case() {
    let out = cryptotest(&["-d", "soft", "-d", "null", "-a", "sha1", "-s", "16,256", "-n", "100"]);
    assert_eq!(out.status.code(), Some(0));
    let (stdout, stderr) = text(&out);
    assert!(!stderr.contains('\r'), "no progress bar when stderr is not a terminal: {stderr:?}");
    let lines: Vec<&str> = stdout.lines().collect();
    let head = lines.iter().position(|l| l.trim_start().starts_with("bytes")).expect("table header");
    assert!(lines[head - 1].contains("sha1"));
    assert!(lines[head].contains("soft") && lines[head].contains("null"));
    assert!(lines[head + 1].trim_start().starts_with("16 "));
    assert!(lines[head + 2].trim_start().starts_with("256 "));
    assert!(stdout.contains("per CPU second"), "both wall and CPU by default");
    for col in ["user s", "sys s", "vcsw", "ivcsw", "restarts", "errors", "verified"] {
        assert!(stdout.contains(col), "{col} missing:\n{stdout}");
    }

    let out = cryptotest(&["-d", "soft", "-a", "sha1", "-s", "16", "-n", "100", "--elapsed"]);
    assert!(!text(&out).0.contains("per CPU second"), "--elapsed: wall clock only");

    let out = cryptotest(&["-d", "soft", "-a", "sha1", "-s", "16,64", "-n", "100", "--format", "openssl"]);
    let (stdout, _) = text(&out);
    assert!(stdout.contains("1000s of bytes per second"), "{stdout}");
    let row = stdout.lines().find(|l| l.starts_with("sha1 ")).expect("a sha1 row");
    assert_eq!(row.matches('k').count(), 2, "one figure per size: {row}");
}

#[test]
fn profile_prints_table_1_and_adds_it_to_json() {
    let out =
        cryptotest(&["-d", "sim:ring=8,setup=1us,rate=10GB/s", "-a", "sha1", "-s", "64", "-n", "200", "-p"]);
    assert_eq!(out.status.code(), Some(0));
    let (stdout, _) = text(&out);
    for stage in ["Dispatch", "Invoke", "Done", "Callback"] {
        assert!(stdout.contains(stage), "{stage} missing:\n{stdout}");
    }
    let (_, cases) = json_cases(&["-d", "soft", "-a", "sha1", "-s", "64", "-n", "100", "-p"]);
    assert_eq!(cases[0]["profile"]["invoke"]["count"], 100, "every request is profiled: {}", cases[0]);
}

#[test]
fn openssl_runs_side_by_side_and_gives_a_ratio() {
    let (out, cases) = json_cases(&[
        "-d",
        "soft",
        "-a",
        "sha256,des-ede3-cbc-hmac-sha1",
        "-s",
        "1024",
        "-T",
        "0.05",
        "--openssl",
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let sha = &cases[0];
    let (ours, theirs) = (sha["kbytes_s"].as_f64().unwrap(), sha["openssl_kbytes_s"].as_f64().unwrap());
    assert!(theirs > 1000.0, "openssl measured something: {sha}");
    assert!((sha["ratio"].as_f64().unwrap() - ours / theirs).abs() < 1e-9);
    // openssl speed has no 3DES-then-HMAC: no figure, said so.
    assert_eq!(cases[1]["openssl_kbytes_s"], Value::Null);
    assert_eq!(cases[1]["ratio"], Value::Null);
    assert!(text(&out).1.contains("openssl speed has no such algorithm"));
}

#[test]
fn a_missing_openssl_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_cryptotest"))
        .args(["-a", "sha1", "-s", "64", "-n", "10", "--openssl"])
        .env("OPENSSL", "/nonexistent/openssl")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let (stdout, stderr) = text(&out);
    assert!(stdout.is_empty(), "nothing measured: {stdout}");
    assert!(stderr.contains("--openssl needs the `/nonexistent/openssl` command"), "{stderr}");
}

#[test]
fn bad_arguments_exit_2_and_say_what_is_valid() {
    let cases: [(&[&str], &str); 17] = [
        (&["-a", "rot13"], "valid algorithms: aes-128-gcm"),
        (&["-d", "gpu0"], "valid drivers: soft, null, sim:PROFILE"),
        (&["-d", "sim:hifn9999"], "hifn7951"),
        (&["-s", "16,abc"], "is not a size: give bytes (64, 8k), a range (16..16384) or imix"),
        (&["-s", "0"], "at least 1 byte"),
        (&["-s", "imx"], "`imx` is not a size"),
        (&["-s", "100..10"], "A..B needs A smaller than B"),
        (&["-s", "16..abc"], "`abc` is not a size"),
        (&["-s", "16..128M"], "not a size"),
        (&["-d", "auto"], "-d auto` chooses among the other drivers given with -d"),
        (&["-d", "null", "-d", "auto"], "add them, e.g. -d soft -d sim:qat-like -d auto"),
        (
            &["-d", "soft", "-d", "auto", "--policy", "fastest"],
            "policies: priority, cost-model, least-loaded, round-robin",
        ),
        (&["-d", "soft", "--oracle"], "--oracle compares the auto column with static splits: add -d auto"),
        (&["-T", "1", "-n", "5"], "cannot be used with"),
        (&["-t", "0"], "0"),
        (&["--plot", "out.gif"], ".svg"),
        (&["--frobnicate"], "unexpected argument"),
    ];
    for (args, says) in cases {
        let out = cryptotest(args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?} should say {says:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: nothing measured");
    }
}

#[test]
fn unsupported_sizes_are_skipped_with_a_note() {
    let (out, cases) = json_cases(&["-d", "soft", "-a", "aes-128-cbc", "-s", "8,16", "-n", "10"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(cases.len(), 1, "8 bytes is not an AES block");
    assert_eq!(cases[0]["size"], 16);
    assert!(text(&out).1.contains("not a multiple of its 16-byte block"));
}

#[test]
fn list_names_every_driver_and_algorithm() {
    let out = cryptotest(&["--list"]);
    assert_eq!(out.status.code(), Some(0));
    let (stdout, _) = text(&out);
    for name in [
        "soft",
        "null",
        "sim:hifn7951",
        "sim:qat-like",
        "aes-128-gcm",
        "des-ede3-cbc-hmac-sha1",
        "hmac-sha256",
        "auto ",
        "cost-model, least-loaded",
        "imix (40/576/1500 B weighted 7:4:1)",
        "A..B (log-uniform",
        "two cards",
    ] {
        assert!(stdout.contains(name), "{name} missing:\n{stdout}");
    }
    let help = text(&cryptotest(&["--help"])).0;
    for says in
        ["--policy <NAME>", "--oracle", "multiplies the run time", "rounded up to whole blocks", "imix"]
    {
        assert!(help.contains(says), "--help should say {says:?}:\n{help}");
    }
}

#[test]
fn plots_are_written_as_svg_and_png() {
    let dir = std::env::temp_dir().join(format!("cryptotest-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, magic) in [("t.svg", &b"<"[..]), ("t.png", &b"\x89PNG\r\n\x1a\n"[..])] {
        let path = dir.join(name);
        let out = cryptotest(&[
            "-d",
            "soft",
            "-d",
            "null",
            "-a",
            "sha1,aes-128-gcm",
            "-s",
            "16,256,4096",
            "-n",
            "50",
            "--plot",
            path.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(magic), "{name} is not what its extension says");
        if name.ends_with(".svg") {
            let svg = String::from_utf8(bytes).unwrap();
            assert!(
                svg.contains("</svg>") && svg.contains("sha1 · soft") && svg.contains("aes-128-gcm · null")
            );
        } else {
            assert!(bytes.len() > 1000);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A plot that cannot be written is refused before anything is measured (it used to fail
/// only after the whole benchmark). The case asks for an hour (`-T 3600`), so a tool that
/// measured first could not answer within the test's patience (60 s, generous for a start
/// on a loaded machine): no wall-clock bound on the refusal itself.
#[test]
fn an_unwritable_plot_path_is_refused_up_front() {
    let dir = std::env::temp_dir().join(format!("cryptotest-plot-nodir-{}", std::process::id()));
    let missing = dir.join("x.svg");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cryptotest"))
        .args([
            "-d",
            "soft",
            "-a",
            "aes-128-gcm",
            "-s",
            "16",
            "-T",
            "3600",
            "--plot",
            missing.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cryptotest runs");
    let patience = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > patience {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after 60 s of a 3600 s case: it measured first");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("cannot write plot to {}: No such file or directory", missing.display())),
        "{stderr}"
    );
    assert!(!stdout.contains("Throughput"), "{stdout}");
}

#[test]
fn no_options_runs_the_quick_sweep() {
    let out = cryptotest(&[]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("quick sweep") && stdout.contains("sim:qat-like") && stdout.contains("aes-128-gcm")
    );
    assert!(stdout.contains("Throughput, Mb/s"));
}

/// The quick check of `auto`: the routing and oracle tables appear for every auto
/// case, and every request completed and verified (the cost table's `verified` column).
#[test]
fn auto_with_the_oracle_prints_routing_and_splits_and_verifies() {
    let args = ["-d", "soft", "-d", "sim:qat-like", "-d", "auto", "-a", "aes-128-gcm", "-s", "16,imix"];
    let mut quick = args.to_vec();
    quick.extend(["-T", "0.05", "--oracle", "--verify"]);
    let out = cryptotest(&quick);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("auto: cost-model over soft, sim:qat-like"), "{stdout}");
    for size in ["16 bytes", "imix sizes"] {
        assert!(stdout.contains(&format!("Routing: aes-128-gcm encrypt of {size} on auto")), "{stdout}");
        assert!(
            stdout.contains(&format!("Oracle: aes-128-gcm encrypt of {size}, static splits")),
            "{stdout}"
        );
    }
    assert_eq!(stdout.matches("auto ÷ best = ").count(), 2, "{stdout}");
    for split in ["all A", "30% to B", "all B", "<64 to A", "<1024 to A"] {
        assert!(stdout.contains(split), "{split} missing: {stdout}");
    }
    let cost: Vec<&str> = stdout.lines().filter(|l| l.starts_with("aes-128-gcm ")).collect();
    assert_eq!(cost.len(), 6, "{stdout}");
    for l in cost {
        assert!(l.ends_with("  0  yes"), "no errors, every result verified: {l}");
    }

    // The same in JSON, by count: every request of the case and of each split completed.
    let mut counted = args.to_vec();
    counted.extend(["-n", "240", "--oracle", "--verify", "-t", "2", "--batch", "4"]);
    let (out, cases) = json_cases(&counted);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert_eq!(cases.len(), 6);
    let auto: Vec<&Value> = cases.iter().filter(|c| c["driver"] == "auto").collect();
    assert_eq!(auto.len(), 2);
    for c in &cases {
        assert_eq!((&c["ops"], &c["errors"], &c["verified"]), (&json!(240), &json!(0), &json!(true)), "{c}");
    }
    for c in auto {
        assert_eq!(c["routing"]["policy"], "cost-model");
        let drivers: Vec<&str> = c["routing"]["drivers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["driver"].as_str().unwrap())
            .collect();
        assert_eq!(drivers, ["soft", "sim:qat-like"], "exactly the listed drivers");
        let o = &c["oracle"];
        assert_eq!((&o["a"], &o["b"]), (&json!("soft"), &json!(["sim:qat-like"])));
        let splits = o["splits"].as_array().unwrap();
        assert_eq!(splits.len(), if c["dist"] == "imix" { 7 } else { 11 }, "{o}");
        assert!(splits.iter().all(|s| s["mbit_s"].as_f64().unwrap() > 0.0), "{o}");
        let best = o["best_mbit_s"].as_f64().unwrap();
        let ratio = o["auto_over_best"].as_f64().unwrap();
        assert!((ratio - c["mbit_s"].as_f64().unwrap() / best).abs() < 1e-9, "{o}");
    }
}

#[test]
fn distributions_are_rows_that_count_the_bytes_done() {
    let (out, cases) =
        json_cases(&["-d", "soft", "-a", "aes-128-cbc", "-s", "16,imix,16..16384", "-n", "500"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let dists: Vec<(&Value, &Value)> = cases.iter().map(|c| (&c["size"], &c["dist"])).collect();
    assert_eq!(
        dists,
        [(&json!(16), &Value::Null), (&Value::Null, &json!("imix")), (&Value::Null, &json!("16..16384"))]
    );
    let mean = |c: &Value| c["bytes"].as_f64().unwrap() / c["ops"].as_f64().unwrap();
    // IMIX rounded to AES blocks: 48, 576, 1504 (mean 341.3 over a whole cycle).
    assert!((250.0..450.0).contains(&mean(&cases[1])), "{}", cases[1]);
    assert!((cases[1]["dist_mean"].as_f64().unwrap() - 4084.0 / 12.0).abs() < 1e-9);
    assert!(cases[1]["bytes"].as_u64().unwrap() % 16 == 0, "whole blocks");
    assert!((1000.0..4000.0).contains(&mean(&cases[2])), "{}", cases[2]);
    let table = cryptotest(&["-d", "soft", "-a", "sha1", "-s", "imix,16..16384", "-n", "100"]);
    let (stdout, _) = text(&table);
    assert!(stdout.lines().any(|l| l.trim_start().starts_with("imix ")), "{stdout}");
    assert!(stdout.lines().any(|l| l.trim_start().starts_with("16..16384 ")), "{stdout}");
}

/// Needs the clients engineer's `ocf_sim::register` (issue 18), which names a second card
/// of one spec `sim:<spec>#2`; until it is on main the second card fails to register.
#[test]
fn the_same_card_twice_is_two_columns() {
    let (out, cases) = json_cases(&[
        "-d",
        "sim:hifn7951",
        "-d",
        "sim:hifn7951",
        "-d",
        "auto",
        "-a",
        "des-ede3-cbc",
        "-s",
        "64",
        "-n",
        "50",
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let drivers: Vec<&str> = cases.iter().map(|c| c["driver"].as_str().unwrap()).collect();
    assert_eq!(drivers, ["sim:hifn7951", "sim:hifn7951#2", "auto"]);
    let routed: Vec<&str> = cases[2]["routing"]["drivers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["driver"].as_str().unwrap())
        .collect();
    assert_eq!(routed, ["sim:hifn7951", "sim:hifn7951#2"]);
}

/// Every request of an auto case is a decision counted under the driver it went to (with
/// `-p`, the model's estimates come too). Before ocf routed per request, `routing()`
/// counted nothing and this failed.
#[test]
fn the_routing_table_counts_every_auto_request() {
    let (out, cases) = json_cases(&[
        "-d",
        "soft",
        "-d",
        "sim:qat-like",
        "-d",
        "auto",
        "-a",
        "aes-128-gcm",
        "-s",
        "64,imix",
        "-n",
        "600",
        "-p",
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    for c in cases.iter().filter(|c| c["driver"] == "auto") {
        let r = &c["routing"];
        let drivers = r["drivers"].as_array().unwrap();
        let total: u64 = drivers.iter().map(|d| d["requests"].as_u64().unwrap()).sum();
        assert_eq!(total, 600, "{r}");
        let full = r["decisions"].as_u64().unwrap();
        assert!(full > 0 && full <= 600, "full decisions, some of the requests: {r}");
        let shares: f64 = drivers.iter().map(|d| d["share"].as_f64().unwrap()).sum();
        assert!((shares - 1.0).abs() < 1e-9, "{r}");
        assert!(
            drivers.iter().any(|d| !d["models"].as_array().unwrap().is_empty()),
            "-p: the model's estimates"
        );
    }
}

#[test]
fn a_driver_the_kernel_lacks_is_skipped_with_its_reason_and_nothing_left_is_a_failure() {
    if ocf_afalg::AfalgDriver::probe().is_ok() {
        return; // a kernel with AF_ALG (the kernel machine): afalg registers there
    }
    let out = cryptotest(&["-d", "afalg", "-a", "aes-128-gcm", "-s", "64", "-n", "10"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("afalg skipped: afalg: unavailable: this kernel has no AF_ALG"), "{stderr}");
    assert!(stderr.contains("no driver left to measure"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let out = cryptotest(&["-d", "afalg", "-d", "auto", "-a", "aes-128-gcm", "-s", "64", "-n", "10"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("auto has no driver left to route to"), "{:?}", text(&out));
    // Beside a driver that is there, the run goes on without it.
    let out = cryptotest(&["-d", "afalg", "-d", "soft", "-a", "aes-128-gcm", "-s", "64", "-n", "10"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
}

#[test]
fn deflate_compresses_and_decompresses_verified_and_random_data_is_sent_as_is() {
    for (op, flag) in [("compress", None), ("decompress", Some("--decrypt"))] {
        let mut args = vec!["-d", "soft", "-a", "deflate", "-s", "64,1400", "-n", "200", "--verify"];
        args.extend(flag);
        let (out, cases) = json_cases(&args);
        assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
        assert_eq!(cases.len(), 2);
        for c in &cases {
            assert_eq!(
                (c["op"].as_str(), &c["verified"], &c["ops"]),
                (Some(op), &json!(true), &json!(200)),
                "{c}"
            );
        }
    }
    // Random bytes never shrink: each is answered "send the original" — done, not an error.
    let (out, cases) =
        json_cases(&["-d", "soft", "-a", "deflate-random", "-s", "1400", "-n", "100", "--verify"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert_eq!(
        (&cases[0]["errors"], &cases[0]["ops"], &cases[0]["verified"]),
        (&json!(0), &json!(100), &json!(true))
    );
    // A driver that does not compress has no such session.
    let (out, cases) = json_cases(&["-d", "sim:qat-like", "-a", "deflate", "-s", "1400", "-n", "10"]);
    assert!(cases.is_empty(), "{cases:?}");
    assert!(text(&out).1.contains("no driver supports compression deflate"), "{:?}", text(&out));
}
