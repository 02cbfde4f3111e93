//! `ipsecctl` as a user runs it: its help, its input limit, a daemon's refusal shown
//! as the daemon worded it, and `monitor`'s lines as they come.

use std::os::unix::net::UnixListener;
use std::process::{Command, Output};
use std::sync::Arc;

use ipsecd::ctl::Reply;
use ipsecd::ctl_server::{Counters, Handler, Limits, Server};

const IPSECCTL: &str = env!("CARGO_BIN_EXE_ipsecctl");

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// `--help` used to say "unknown arguments".
#[test]
fn help_prints_usage() {
    for flag in ["--help", "-h"] {
        let o = Command::new(IPSECCTL).arg(flag).output().unwrap();
        let (out, err) = text(&o);
        assert!(o.status.success(), "{flag}: {:?} {err}", o.status);
        assert!(out.starts_with("usage: ipsecctl [-s SOCKET]"), "{out}");
        assert!(out.contains("Exit status:"), "{out}");
    }
}

/// `ipsecctl -f /dev/zero` read until the kernel killed it (24 GB); now it stops at the
/// request limit, inside 256 MiB of address space, and says so.
#[test]
fn endless_input_stops_at_the_limit() {
    let o = Command::new("sh")
        .args(["-c", "ulimit -v 262144; exec \"$0\" -s /nonexistent/ipsecd.sock -f /dev/zero", IPSECCTL])
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.starts_with("ipsecctl: /dev/zero: more than 4194297 bytes, the most one request"), "{err}");
}

struct Applies;

impl Handler for Applies {
    fn stats(&self, _: &Counters) -> String {
        String::new()
    }
    fn change(&self, _: &str) -> Reply {
        Ok("applied\n".into())
    }
}

/// A request the daemon refuses as too large shows the daemon's reason, not "Broken pipe"
/// (a daemon whose limit is lower than ipsecctl's stands in for one that refuses).
#[test]
fn a_refusal_shows_the_daemons_reason() {
    let dir = std::env::temp_dir().join(format!("ipsecctl-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ctl.sock");
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock).unwrap();
    let server = Server::new(Applies, Limits { max_request: 64 << 10, ..Limits::default() });
    let s = Arc::clone(&server);
    std::thread::spawn(move || s.serve(&listener));
    let big = dir.join("big.conf");
    std::fs::write(&big, "#".repeat(3 << 20)).unwrap();
    let o = Command::new(IPSECCTL).arg("-s").arg(&sock).arg("-f").arg(&big).output().unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        "ipsecctl: request larger than 65536 bytes, the most ipsecd reads in one request; split it\n"
    );
    // And a request it takes is applied and printed.
    let small = dir.join("small.conf");
    std::fs::write(&small, "flush;\n").unwrap();
    let o = Command::new(IPSECCTL).arg("-s").arg(&sock).arg("-f").arg(&small).output().unwrap();
    assert_eq!(text(&o), ("applied\n".into(), String::new()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ipsecctl monitor` prints each event's line as it is published (flushed at once, as a
/// pipe into a key manager needs), and an unreachable daemon is an error.
#[test]
fn monitor_prints_each_event_as_it_comes() {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("ipsecctl-monitor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ctl.sock");
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock).unwrap();
    let server = Server::new(Applies, Limits::default());
    let s = Arc::clone(&server);
    std::thread::spawn(move || s.serve(&listener));
    let mut child = Command::new(IPSECCTL)
        .arg("-s")
        .arg(&sock)
        .arg("monitor")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while server.hub().subscribers() == 0 {
        assert!(t.elapsed() < std::time::Duration::from_secs(60), "ipsecctl monitor did not subscribe");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    for line in ["acquire src=192.0.2.1 dst=192.0.2.2", "hard-expire limit=bytes src=192.0.2.1"] {
        server.hub().publish(line);
        assert_eq!(out.next().unwrap().unwrap(), line, "printed before the next is published");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    let o = Command::new(IPSECCTL).args(["-s", "/nonexistent/ipsecd.sock", "monitor"]).output().unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.starts_with("ipsecctl: cannot reach ipsecd at /nonexistent/ipsecd.sock"), "{err}");
}
