//! The provider as OpenSSL itself loads it: the `openssl` command (Debian's OpenSSL 3) with
//! `-provider-path DIR -provider ocf`, and with an openssl.cnf that sets the driver.

use std::process::Command;

mod common;
use common::module_dir;

fn openssl(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let out = Command::new("openssl").args(args).envs(env.iter().copied()).output().expect("openssl runs");
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
