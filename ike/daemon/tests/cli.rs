//! `iked` as an operator starts it: its help names every socket and warns about
//! `--debug-keys`; `--check` lists a configuration or names the line of its error; without
//! ipsecd it stops at once, naming the relay socket it could not reach.

use std::process::Command;

const IKED: &str = env!("CARGO_BIN_EXE_iked");

fn conf(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("iked-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const GOOD: &str = "connections {\n site {\n  local_addrs = 192.0.2.1\n  remote_addrs = 192.0.2.2\n  \
    local {\n   auth = psk\n   id = a.example\n  }\n  remote {\n   auth = psk\n   id = b.example\n  }\n  \
    children {\n   net {\n    local_ts = 10.1.0.0/24\n    remote_ts = 10.2.0.0/24\n   }\n   voice {\n   }\n  }\n }\n}\n\
    secrets {\n ike-1 {\n  id-a = a.example\n  id-b = b.example\n  secret = \"a pre-shared key of 32 characters!\"\n }\n}\n";

#[test]
fn help_names_the_sockets_and_warns_about_debug_keys() {
    let o = Command::new(IKED).arg("--help").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    for want in [
        "/etc/iked/iked.conf",
        "/run/ipsecd-ike.sock",
        "/run/ipsecd.sock",
        "/run/iked.sock",
        "--debug-keys <DIR>",
        "FOR DEBUGGING ONLY",
        "--check",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
}

#[test]
fn check_lists_a_configuration_or_names_its_error() {
    let good = conf("good.conf", GOOD);
    let o = Command::new(IKED).arg("--check").arg("-c").arg(&good).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(out, format!("{}: 1 connections\n  site: children net, voice\n", good.display()));

    let bad = conf("bad.conf", &GOOD.replace("remote_ts", "remote_tss"));
    let o = Command::new(IKED).arg("--check").arg("-c").arg(&bad).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("iked: ") && err.contains("bad.conf:16:5: unknown setting 'remote_tss'"),
        "{err}"
    );
}

#[test]
fn without_ipsecd_it_stops_naming_the_relay() {
    let good = conf("run.conf", GOOD);
    let o = Command::new(IKED)
        .arg("-c")
        .arg(&good)
        .args(["--ike-socket", "/nonexistent/ipsecd-ike.sock", "-s", "/nonexistent/iked.sock"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("ipsecd's IKE relay at /nonexistent/ipsecd-ike.sock"), "{err}");
}
