//! cryptotest's public-key cases and `random` from the outside: real short runs on soft
//! with `--verify` (a signature made verifies, a derive equals the peer's), every way of
//! submitting; the null driver's empty results; `--openssl` side by side; `-d auto`; the
//! names `-a` takes and `--list` shows.

mod common;

use serde_json::{json, Value};

use common::{cryptotest, json_cases, text};

/// Every public-key algorithm but the slow RSA sizes, each operation a case.
const ALGS: &str =
    "rsa2048,ecdsap256,ecdsap384,ecdhp256,ecdhp384,ecdhx25519,ed25519,ffdh2048,modexp2048,mlkem768";
const OPS: [(&str, &str); 15] = [
    ("rsa2048", "sign"),
    ("rsa2048", "verify"),
    ("ecdsap256", "sign"),
    ("ecdsap256", "verify"),
    ("ecdsap384", "sign"),
    ("ecdsap384", "verify"),
    ("ecdhp256", "derive"),
    ("ecdhp384", "derive"),
    ("ecdhx25519", "derive"),
    ("ed25519", "sign"),
    ("ed25519", "verify"),
    ("ffdh2048", "derive"),
    ("modexp2048", "modexp"),
    ("mlkem768", "encapsulate"),
    ("mlkem768", "decapsulate"),
];

/// On soft, every result checks out: the deterministic ones equal the reference's (a
/// derive: the peer's derive from our public value), every ECDSA signature verifies, every
/// ML-KEM ciphertext decapsulates to the secret beside it. One at a time, in batches
/// through the dispatch worker, and handed over whole, from two threads.
#[test]
fn every_public_key_case_verifies_on_soft_however_it_is_submitted() {
    for extra in [&[][..], &["-t", "2", "--batch", "4"], &["-t", "2", "--batch", "4", "--direct"]] {
        let mut args = vec!["-d", "soft", "-a", ALGS, "-n", "24", "--verify"];
        args.extend(extra);
        let (out, cases) = json_cases(&args);
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {:?}", text(&out));
        let ops: Vec<(&str, &str)> =
            cases.iter().map(|c| (c["alg"].as_str().unwrap(), c["op"].as_str().unwrap())).collect();
        assert_eq!(ops, OPS, "{extra:?}");
        for c in &cases {
            assert_eq!(
                (&c["ops"], &c["errors"], &c["verified"], &c["checked"]),
                (&json!(24), &json!(0), &json!(true), &json!(24)),
                "{extra:?}: {c}"
            );
            assert!(c["ops_s"].as_f64().unwrap() > 0.0, "{c}");
        }
    }
}

/// The null driver answers every public-key request at once with an empty result: the
/// framework's cost. Without --verify those are operations done (no errors, exit 0); with
/// it they are wrong, as null's symmetric results are (exit 1).
#[test]
fn the_null_drivers_empty_results_count_as_done_and_fail_only_verification() {
    let args = ["-d", "null", "-a", "ecdsap256,ed25519,ecdhp256,mlkem768", "-n", "20"];
    let (out, cases) = json_cases(&args);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert_eq!(cases.len(), 7);
    for c in &cases {
        assert_eq!((&c["ops"], &c["errors"], &c["verified"]), (&json!(20), &json!(0), &Value::Null), "{c}");
    }

    let mut verify = args.to_vec();
    verify.push("--verify");
    let (out, cases) = json_cases(&verify);
    assert_eq!(out.status.code(), Some(1), "{:?}", text(&out));
    for c in &cases {
        // Null's verification of a valid signature succeeds; every result it writes is empty.
        let wrong = c["op"] != "verify";
        assert_eq!(c["verified"], json!(!wrong), "{c}");
    }
    let mismatch = |alg: &str, op: &str| {
        let c = cases.iter().find(|c| c["alg"] == alg && c["op"] == op).unwrap();
        c["first_mismatch"].as_str().unwrap_or_default().to_owned()
    };
    assert!(mismatch("ecdsap256", "sign").contains("signature does not verify on soft"));
    assert!(mismatch("ed25519", "sign").contains("0 bytes instead of 64"));
    assert!(mismatch("ecdhp256", "derive").contains("0 bytes instead of 32"));
    assert!(mismatch("mlkem768", "encapsulate").contains("0 bytes instead of 1120"));
    let (_, stderr) = text(&out);
    assert!(stderr.contains("ecdsap256 sign on null: 20 of 20 results differ from soft"), "{stderr}");
}

/// `random`: MB/s per size on every driver that serves it. Under --verify each result
/// must differ from the one before it in its slot: soft's do, null's (the buffer left as
/// it was) do not.
#[test]
fn random_bytes_per_size_and_a_source_that_repeats_fails_verification() {
    let (out, cases) =
        json_cases(&["-d", "soft", "-d", "null", "-a", "random", "-s", "16,4096", "-n", "50", "--verify"]);
    assert_eq!(out.status.code(), Some(1), "{:?}", text(&out));
    let got: Vec<(&str, u64, &Value)> = cases
        .iter()
        .map(|c| (c["driver"].as_str().unwrap(), c["size"].as_u64().unwrap(), &c["verified"]))
        .collect();
    assert_eq!(
        got,
        [
            ("soft", 16, &json!(true)),
            ("null", 16, &json!(false)),
            ("soft", 4096, &json!(true)),
            ("null", 4096, &json!(false))
        ]
    );
    for c in &cases {
        assert_eq!((&c["op"], &c["ops"], &c["errors"]), (&json!("random"), &json!(50), &json!(0)), "{c}");
        assert_eq!(c["bytes"].as_u64(), Some(50 * c["size"].as_u64().unwrap()));
    }
    assert!(
        text(&out).1.contains("random 16 bytes on null: 50 of 50 results failed the check"),
        "{:?}",
        text(&out)
    );

    let out = cryptotest(&["-d", "soft", "-a", "random", "-s", "64", "-n", "50"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout.contains("Random bytes, MB/s (10^6 bytes) drawn per second of wall-clock time"),
        "{stdout}"
    );
    // A few bytes cannot be told from a repeat: skipped under --verify, with the reason.
    let (out, cases) = json_cases(&["-d", "soft", "-a", "random", "-s", "4,8", "-n", "20", "--verify"]);
    assert_eq!(cases.len(), 1, "{cases:?}");
    assert!(text(&out).1.contains("4-byte results skipped under --verify"), "{:?}", text(&out));
}

/// `--openssl` runs `openssl speed` for a public-key algorithm beside ours and gives
/// the ratio per operation, per CPU second (openssl's own measure) or with `--elapsed`
/// per wall-clock second; for an algorithm openssl lacks it says so.
#[test]
fn openssl_runs_side_by_side_per_operation() {
    let (out, cases) = json_cases(&["-d", "soft", "-a", "ed25519,mlkem768", "-T", "0.05", "--openssl"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert_eq!(cases.len(), 4);
    for c in &cases[..2] {
        let (ours, theirs) = (c["cpu_ops_s"].as_f64().unwrap(), c["openssl_ops_s"].as_f64().unwrap());
        assert!(theirs > 500.0, "openssl measured something: {c}");
        assert_eq!(c["openssl_clock"], "cpu", "{c}");
        assert!((c["ratio"].as_f64().unwrap() - ours / theirs).abs() < 1e-9, "{c}");
    }
    let (elapsed, wall) =
        json_cases(&["-d", "soft", "-a", "ecdhx25519", "-T", "0.05", "--openssl", "--elapsed"]);
    assert_eq!(elapsed.status.code(), Some(0), "{:?}", text(&elapsed));
    let c = &wall[0];
    assert_eq!(c["openssl_clock"], "wall", "{c}");
    let (ours, theirs) = (c["ops_s"].as_f64().unwrap(), c["openssl_ops_s"].as_f64().unwrap());
    assert!((c["ratio"].as_f64().unwrap() - ours / theirs).abs() < 1e-9, "{c}");
    assert!(cases[0]["openssl_ops_s"] != cases[1]["openssl_ops_s"], "sign/s and verify/s apart");
    for c in &cases[2..] {
        assert_eq!((&c["openssl_ops_s"], &c["ratio"]), (&Value::Null, &Value::Null), "{c}");
    }
    assert!(text(&out).1.contains("mlkem768: openssl speed has no such algorithm"), "{:?}", text(&out));

    let out = cryptotest(&["-d", "soft", "-a", "ecdhx25519", "-T", "0.05", "--openssl"]);
    let (stdout, _) = text(&out);
    // The openssl line and the ratio are in the per-CPU-second table.
    let cpu = stdout.split("Public-key operations per CPU second").nth(1).expect("the CPU table");
    let ratio = cpu.lines().find(|l| l.starts_with("ecdhx25519  soft ÷ openssl")).expect("a ratio line");
    assert!(ratio.trim_end().ends_with('x'), "{stdout}");
    assert!(
        cpu.contains("op/s") && stdout.contains("public key: `openssl speed -seconds 1 NAME`"),
        "{stdout}"
    );
}

/// `-d auto` routes each operation among the drivers listed, and the summary says which
/// driver took which operation.
#[test]
fn auto_routes_each_operation_and_says_which_driver_took_it() {
    let args = ["-d", "soft", "-d", "sim:qat-like", "-d", "auto", "-a", "ed25519", "-n", "60", "--verify"];
    let out = cryptotest(&args);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    for says in [
        "Routing: ed25519 sign on auto",
        "Routing: ed25519 verify on auto",
        "What auto chose for each public-key operation",
        // Which driver: the one that took most of each operation's requests (the card's
        // public-key engine and soft both serve Ed25519).
        "ed25519: auto sent sign to ",
    ] {
        assert!(stdout.contains(says), "{says} missing:\n{stdout}");
    }
    let (_, cases) = json_cases(&args);
    for c in cases.iter().filter(|c| c["driver"] == "auto") {
        assert_eq!((&c["ops"], &c["verified"]), (&json!(60), &json!(true)), "{c}");
        // Every request was taken by one of the two drivers, and counted once.
        let drivers = c["routing"]["drivers"].as_array().expect("routing per driver");
        let taken: u64 = drivers.iter().map(|d| d["requests"].as_u64().unwrap()).sum();
        assert_eq!(taken, 60, "{c}");
        assert!(drivers.iter().all(|d| d["driver"] == "soft" || d["driver"] == "sim:qat-like"), "{c}");
    }
}

#[test]
fn public_key_names_parse_and_list_per_driver() {
    let out = cryptotest(&["-a", "rsa1024"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    for says in ["unknown algorithm `rsa1024`", "rsa2048", "ecdhx25519", "mlkem768", "random"] {
        assert!(stderr.contains(says), "{says} missing: {stderr}");
    }
    // Case does not matter; `-a` lists and repeats.
    let (out, cases) =
        json_cases(&["-d", "soft", "-a", "ECDHX25519,Random", "-a", "ecdhx25519", "-s", "64", "-n", "5"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let algs: Vec<&str> = cases.iter().map(|c| c["alg"].as_str().unwrap()).collect();
    assert_eq!(algs, ["ecdhx25519", "random"]);

    let out = cryptotest(&["-a", "ed25519", "--plot", "x.svg"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("public-key cases have none"), "{:?}", text(&out));

    let (list, _) = text(&cryptotest(&["--list"]));
    assert!(list.contains("openssl speed ecdsap256") && list.contains("ml-kem-768"), "{list}");
    let table =
        list.split("Public-key algorithms and random bytes per driver").nth(1).expect("the per-driver table");
    let head: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&head[..2], ["soft", "null"], "{table}");
    for name in ["rsa2048", "ecdsap384", "ffdh3072", "modexp2048", "mlkem768", "random"] {
        let line = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name}: {table}"));
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells[1..3], ["yes", "yes"], "soft and null offer {name}: {line}");
    }
}

/// `-d hwrng`: a column per hardware random source this machine has, each result through
/// the health tests and fresh; where there is none, the reason, and nothing to measure.
#[test]
fn hardware_random_sources_are_columns_of_their_own() {
    let (out, cases) = json_cases(&["-d", "hwrng", "-a", "random", "-s", "64", "-n", "20", "--verify"]);
    match ocf_hwrng::probe() {
        Ok(kinds) => {
            assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
            let drivers: Vec<&str> = cases.iter().map(|c| c["driver"].as_str().unwrap()).collect();
            let want: Vec<&str> = kinds.iter().map(|k| k.driver_name()).collect();
            assert_eq!(drivers, want);
            for c in &cases {
                assert_eq!(
                    (&c["ops"], &c["errors"], &c["verified"]),
                    (&json!(20), &json!(0), &json!(true)),
                    "{c}"
                );
            }
        }
        Err(why) => {
            assert_eq!(out.status.code(), Some(1), "{:?}", text(&out));
            assert!(text(&out).1.contains(&format!("hwrng skipped: {why}")), "{:?}", text(&out));
        }
    }
}
