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

#[test]
fn the_driver_comes_from_the_providers_openssl_cnf_section() {
    let dir = module_dir();
    let cnf = dir.path().join("openssl.cnf");
    std::fs::write(
        &cnf,
        format!(
            "openssl_conf = init\n[init]\nproviders = provs\n[provs]\nocf = ocf_sect\n\
             [ocf_sect]\nmodule = {}\ndriver = nosuch\nactivate = 1\n",
            dir.path().join("ocf.so").display()
        ),
    )
    .expect("write openssl.cnf");
    let (ok, text) = openssl(&["list", "-providers"], &[("OPENSSL_CONF", cnf.to_str().expect("utf-8"))]);
    // The configured driver does not exist: the provider refuses to load, and says why.
    assert!(text.contains("ocf provider: driver 'nosuch' is not registered"), "ok {ok}: {text}");
}
