//! `ipsecctl` as a user runs it: its help, its input limit, a daemon's refusal shown
//! as the daemon worded it, and `monitor`'s lines as they come.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use ipsecd::ctl::Reply;
use ipsecd::ctl_server::{Counters, Handler, Limits, Server};

const IPSECCTL: &str = env!("CARGO_BIN_EXE_ipsecctl");

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A fresh directory `ipsecctl-{name}-{pid}` and a listener bound at `file` in it: the
/// directory, the socket's path, the listener.
fn listen(name: &str, file: &str) -> (PathBuf, PathBuf, UnixListener) {
    let dir = std::env::temp_dir().join(format!("ipsecctl-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join(file);
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock).unwrap();
    (dir, sock, listener)
}

/// `handler` behind ipsecd's control server on a fresh socket, served from a thread: the
/// directory, the socket's path and the server.
fn serve<H: Handler + Send + Sync + 'static>(
    name: &str,
    handler: H,
    limits: Limits,
) -> (PathBuf, PathBuf, Arc<Server<H>>) {
    let (dir, sock, listener) = listen(name, "ctl.sock");
    let server = Server::new(handler, limits);
    let s = Arc::clone(&server);
    std::thread::spawn(move || s.serve(&listener));
    (dir, sock, server)
}

/// `ipsecctl -s sock -c` with `input` on its stdin: its exit code, stdout and stderr.
fn ctl_stdin(sock: &Path, input: &str) -> (Option<i32>, (String, String)) {
    let mut c = Command::new(IPSECCTL)
        .arg("-s")
        .arg(sock)
        .arg("-c")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut c.stdin.take().unwrap(), input.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    (o.status.code(), text(&o))
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
    let (dir, sock, _) = serve("test", Applies, Limits { max_request: 64 << 10, ..Limits::default() });
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
    let (dir, sock, server) = serve("monitor", Applies, Limits::default());
    let mut child =
        Command::new(IPSECCTL).arg("-s").arg(&sock).arg("monitor").stdout(Stdio::piped()).spawn().unwrap();
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

/// `--version` and `-V` used to be refused as unknown arguments.
#[test]
fn version_is_printed() {
    for flag in ["--version", "-V"] {
        let o = Command::new(IPSECCTL).arg(flag).output().unwrap();
        let (out, err) = text(&o);
        assert!(o.status.success(), "{flag}: {:?} {err}", o.status);
        assert_eq!(out, format!("ipsecctl {}\n", env!("CARGO_PKG_VERSION")));
    }
}

/// `ipsecctl -D -X` named both as "unknown arguments [\"-D\", \"-X\"]": only the unknown one
/// is named now, and two commands are told apart from an unknown flag.
#[test]
fn only_the_unknown_argument_is_named() {
    let run = |args: &[&str]| {
        let o = Command::new(IPSECCTL).args(["-s", "/nonexistent/ipsecd.sock"]).args(args).output().unwrap();
        (o.status.code(), text(&o).1)
    };
    for args in [&["-D", "-X"][..], &["-X", "-D"], &["--keys", "-X"]] {
        let (code, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.starts_with("ipsecctl: unknown argument \"-X\"\n"), "{args:?}: {err}");
        assert!(!err.contains("\"-D\""), "{args:?}: {err}");
    }
    let (code, err) = run(&["-D", "-F"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("ipsecctl: -D and -F: one command at a time\n"), "{err}");
    let (code, err) = run(&["-f"]);
    assert_eq!((code, err.lines().next()), (Some(2), Some("ipsecctl: -f needs a file")));
}

/// A core with SA 0x1001 (and 0x1002) whose path MTU is learned as 1400.
mod real {
    use std::sync::Arc;

    use ipsec_core::{Ipsec, Packet, Results, Sink};
    use ipsecd::ctl::Reply;
    use ipsecd::ctl_server::{Counters, Handler};
    use ipsecd::service::{apply_setkey_keys, Keys};

    struct Nowhere;

    impl Sink for Nowhere {
        fn transmit(&self, _: Packet) {}
        fn deliver(&self, _: Packet) {}
    }

    pub const KEY_OUT: &str = "0x0123456789abcdef0123456789abcdef01234567";
    pub const KEY_IN: &str = "0xfedcba9876543210fedcba9876543210fedcba98";

    /// The daemon's handler as `Control` has it: `setkey` with the keys hidden, `setkey
    /// keys` with them shown.
    pub struct Daemon(pub Ipsec);

    impl Handler for Daemon {
        fn stats(&self, _: &Counters) -> String {
            String::new()
        }
        fn change(&self, body: &str) -> Reply {
            apply_setkey_keys(&self.0, "control", body, Keys::Hidden)
        }
        fn change_showing_keys(&self, body: &str) -> Reply {
            apply_setkey_keys(&self.0, "control", body, Keys::Shown)
        }
    }

    pub fn daemon() -> Daemon {
        let fw = ocf::Framework::new();
        ocf_soft::register(&fw).unwrap();
        let core = Ipsec::new(fw, Arc::new(Nowhere));
        let conf = format!(
            "add 10.99.0.1 10.99.0.2 esp 0x1001 -m tunnel -E aes-gcm-16 {KEY_OUT};\n\
             add 10.99.0.2 10.99.0.1 esp 0x1002 -m tunnel -E aes-gcm-16 {KEY_IN};\n\
             spdadd 10.98.1.0/24 10.98.2.0/24 any -P out ipsec esp/tunnel/10.99.0.1-10.99.0.2/require;\n"
        );
        apply_setkey_keys(&core, "conf", &conf, Keys::Shown).unwrap();
        // One 1400-byte packet out on 0x1001, then the local stack refuses its ESP packet
        // (about 1450 bytes) as larger than 1400.
        let mut p = vec![0x45, 0, 0x05, 0x78, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 98, 1, 1, 10, 98, 2, 1];
        let c = ipsec_wire::checksum::checksum(&p);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p.extend_from_slice(&[0x30, 0x39, 0, 53, 0x05, 0x64, 0, 0]);
        p.resize(1400, 7);
        let mut out = Results::default();
        core.output_one(Packet::with_headroom(&p), &mut out).unwrap();
        let esp = out.transmit.pop().expect("an ESP packet");
        let learned = core.local_path_mtu(esp.bytes(), 1400);
        assert_eq!(learned, Ok(ipsec_core::Learned::Lowered(1400)), "{} bytes", esp.bytes().len());
        Daemon(core)
    }
}

/// `ipsecctl -D` printed every key. Now it shows `(key not shown)` in their place, unless
/// `--keys` asks for setkey's form, which installs the SAs again; both show each SA's path
/// MTU (learned: the number; none: `-`).
#[test]
fn a_dump_hides_keys_unless_asked_and_shows_the_path_mtu() {
    let (dir, sock, _) = serve("keys", real::daemon(), Limits::default());
    let ctl = |args: &[&str]| {
        let o = Command::new(IPSECCTL).arg("-s").arg(&sock).args(args).output().unwrap();
        let (out, err) = text(&o);
        assert!(o.status.success(), "{args:?}: {err}");
        out
    };
    let hex = |k: &str| k.trim_start_matches("0x").to_owned();
    let hidden = ctl(&["-D"]);
    assert!(!hidden.contains(&hex(real::KEY_OUT)) && !hidden.contains(&hex(real::KEY_IN)), "{hidden}");
    assert!(hidden.contains("esp 0x1001 -m tunnel") && hidden.contains("(key not shown)"), "{hidden}");
    for line in hidden.lines().filter(|l| l.starts_with("add ")) {
        assert!(line.ends_with(" ;"), "{line}");
    }
    // -c with a dump statement hides them too; --keys shows them.
    let (_, (got, _)) = ctl_stdin(&sock, "get 10.99.0.1 10.99.0.2 esp 0x1001;");
    assert!(got.contains("(key not shown)") && !got.contains(&hex(real::KEY_OUT)), "{got}");
    let shown = ctl(&["-D", "--keys"]);
    assert!(shown.contains(&hex(real::KEY_OUT)) && shown.contains(&hex(real::KEY_IN)), "{shown}");
    assert!(!shown.contains("(key not shown)"), "{shown}");
    ipsecd::service::parse("dump", &shown).expect("--keys prints setkey statements that parse");
    // (The same but for the milliseconds since the SA's last use, which go on.)
    let timeless =
        |d: &str| d.lines().filter(|l| !l.starts_with("#\tlast-used ")).collect::<Vec<_>>().join("\n");
    assert_eq!(timeless(&ctl(&["--keys", "-D"])), timeless(&shown), "--keys before or after -D");
    // The path MTU: 1400 on the SA that learned it, none on the other.
    for dump in [&hidden, &shown] {
        let comment = |spi: &str| {
            let mut lines = dump.lines().skip_while(|l| !l.contains(spi));
            lines.nth(1).unwrap_or_else(|| panic!("{spi}: {dump}")).to_owned()
        };
        assert!(comment("0x1001").contains(", path MTU 1400,"), "{dump}");
        assert!(comment("0x1002").contains(", path MTU -,"), "{dump}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a key manager reads through ipsecctl: each SA's `last-used` line (the SA that sent
/// a packet: its milliseconds since; the one that carried nothing: `never` both ways), and
/// after `migrate` the SA at its new address, its last use and counters carried over; a
/// migrate onto another SA's SPI and destination is refused with the reason.
#[test]
fn get_shows_the_last_use_and_migrate_moves_the_sa() {
    let (dir, sock, _) = serve("migrate", real::daemon(), Limits::default());
    let ctl = |input: &str| ctl_stdin(&sock, input);
    let last_used = |out: &str, spi: &str| -> (String, String) {
        let line = out
            .lines()
            .find(|l| l.starts_with("#\tlast-used ") && l.contains(&format!(" spi={spi} ")))
            .unwrap_or_else(|| panic!("no last-used line for {spi}: {out}"));
        let field = |k: &str| line.split(' ').find_map(|f| f.strip_prefix(k)).unwrap().to_owned();
        (field("in-ms="), field("out-ms="))
    };
    let (code, (out, err)) = ctl("get 10.99.0.1 10.99.0.2 esp 0x1001; get 10.99.0.2 10.99.0.1 esp 0x1002;");
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("#\tlast-used src=10.99.0.1 dst=10.99.0.2 proto=esp spi=0x1001 in-ms=never out-ms="),
        "{out}"
    );
    let (_, sent) = last_used(&out, "0x1001");
    assert!(sent.parse::<u64>().is_ok_and(|ms| ms < 60_000), "{out}");
    assert_eq!(last_used(&out, "0x1002"), ("never".into(), "never".into()));

    let (code, (_, err)) = ctl("migrate 10.99.0.1 10.99.0.2 esp 0x1001 to 10.99.0.7 10.99.0.2;");
    assert_eq!(code, Some(0), "{err}");
    let (_, (dump, _)) = ctl("dump esp;");
    assert!(dump.contains("add 10.99.0.7 10.99.0.2 esp 0x1001 -m tunnel"), "{dump}");
    assert!(!dump.contains("add 10.99.0.1 10.99.0.2 esp 0x1001"), "{dump}");
    assert!(last_used(&dump, "0x1001").1.parse::<u64>().is_ok(), "its last use went with it: {dump}");
    // Onto the other SA's SPI and destination: refused, naming it; nothing changed.
    let (code, (_, err)) = ctl(
        "add 10.99.0.5 10.99.0.1 esp 0x1001 -m tunnel -E aes-gcm-16 0x1111111111111111111111111111111111111111;\n\
         migrate 10.99.0.7 10.99.0.2 esp 0x1001 to 10.99.0.2 10.99.0.1;",
    );
    assert_eq!(code, Some(1));
    assert!(
        err.contains("its SPI and destination are those of the SA 10.99.0.5 -> 10.99.0.1 esp SPI 0x1001"),
        "{err}"
    );
    assert!(err.contains("(nothing was changed)"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ipsecctl ike …` sends iked's requests (ipsecd::ike_ctl's encoding) to `--ike-socket` and
/// prints the reply; a server that answers with what it read stands in for iked, whose own
/// side is tested in the iked crate.
#[test]
fn ike_commands_reach_the_ike_socket() {
    use std::io::{Read, Write};

    use ipsecd::ike_ctl::Request;

    let (dir, sock, listener) = listen("ike", "iked.sock");
    std::thread::spawn(move || {
        for mut c in listener.incoming().map_while(Result::ok) {
            let mut buf = Vec::new();
            let _ = c.read_to_end(&mut buf);
            let reply = match Request::decode(&buf) {
                Ok(Request::Down(c)) if c == "gone" => Err("no connection \"gone\"".to_owned()),
                Ok(r) => Ok(format!("{r:?}\n")),
                Err(e) => Err(e),
            };
            let _ = c.write_all(&ipsecd::ctl::encode_reply(&reply));
        }
    });
    let run = |args: &[&str]| {
        let o = Command::new(IPSECCTL).arg("--ike-socket").arg(&sock).args(args).output().unwrap();
        (o.status.code(), text(&o))
    };
    for (args, want) in [
        (&["ike", "list"][..], "List\n"),
        (&["ike", "up", "site-a"], "Up { conn: \"site-a\", new: false }\n"),
        (&["ike", "up", "site-a", "--new"], "Up { conn: \"site-a\", new: true }\n"),
        (&["ike", "down", "site-a"], "Down(\"site-a\")\n"),
        (&["ike", "rekey", "site-a/net"], "Rekey(\"site-a/net\")\n"),
        (&["ike", "stats"], "Stats\n"),
    ] {
        assert_eq!(run(args), (Some(0), (want.to_owned(), String::new())), "{args:?}");
    }
    assert_eq!(
        run(&["ike", "down", "gone"]),
        (Some(1), (String::new(), "ipsecctl: no connection \"gone\"\n".into()))
    );
    for (args, err) in [
        (&["ike"][..], "ike needs a command"),
        (&["ike", "up"], "ike up needs a connection name"),
        (&["ike", "list", "--new"], "--new goes with ike up only"),
        (&["ike", "frob"], "unknown ike command \"frob\""),
    ] {
        let (code, (_, e)) = run(args);
        assert_eq!(code, Some(2), "{args:?}");
        assert!(e.starts_with(&format!("ipsecctl: {err}")), "{args:?}: {e}");
    }
    let o = Command::new(IPSECCTL)
        .args(["--ike-socket", "/nonexistent/iked.sock", "ike", "list"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).1.starts_with("ipsecctl: cannot reach iked at /nonexistent/iked.sock"),
        "{:?}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
