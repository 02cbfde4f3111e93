//! `ipsecd` as a user starts it: `--driver` and `--policy` are documented, and a bad value
//! stops start-up before anything is created, naming it (no root needed: nothing gets as far
//! as the TUN).

use std::process::{Command, Output};

const IPSECD: &str = env!("CARGO_BIN_EXE_ipsecd");

fn ipsecd(args: &[&str]) -> (Output, String) {
    // A socket path nobody serves: start-up would bind it only after the checks.
    let sock = std::env::temp_dir().join(format!("ipsecd-flags-{}.sock", std::process::id()));
    let o = Command::new(IPSECD).args(["-s", sock.to_str().unwrap()]).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(!sock.exists(), "nothing was created: {text}");
    (o, text)
}

#[test]
fn help_documents_driver_and_policy() {
    let o = Command::new(IPSECD).arg("--help").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(out.contains("--driver <SPEC>") && out.contains("sim:qat-like"), "{out}");
    assert!(out.contains("--policy <NAME>") && out.contains("round-robin"), "{out}");
    assert!(out.contains("[default: cost-model]"), "{out}");
}

#[test]
fn help_documents_the_ike_relay() {
    let o = Command::new(IPSECD).arg("--help").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(out.contains("--ike-socket <PATH>") && out.contains("/run/ipsecd-ike.sock"), "{out}");
    assert!(out.contains("--ike-port <PORT>") && out.contains("[default: 500]"), "{out}");
}

#[test]
fn a_bad_policy_or_driver_stops_start_up_naming_it() {
    for (args, expected) in [
        (
            &["--policy", "fastest"][..],
            "invalid value 'fastest' for '--policy <NAME>': unknown routing policy \"fastest\"",
        ),
        (
            &["--driver", "sim:hifn9999"][..],
            "invalid value 'sim:hifn9999' for '--driver <SPEC>': bad sim device profile",
        ),
        (
            &["--driver", "sim:qat-like", "--driver", "sim:ring=0"][..],
            "invalid value 'sim:ring=0' for '--driver <SPEC>'",
        ),
        (
            &["--driver", "soft"][..],
            "invalid value 'soft' for '--driver <SPEC>': \"soft\" is not a driver that can be added",
        ),
    ] {
        let (o, text) = ipsecd(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(expected), "{args:?}: {text}");
    }
}

/// `ipsecd --version`, as `ipsecctl --version`, prints the version.
#[test]
fn version_is_printed() {
    let o = Command::new(IPSECD).arg("--version").output().unwrap();
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout), format!("ipsecd {}\n", env!("CARGO_PKG_VERSION")));
}
