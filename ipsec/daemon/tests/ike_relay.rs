//! The IKE relay end to end, in two network namespaces joined by a veth pair: ipsecd in
//! one, a peer (Python's socket module) in the other.
//!
//! ```text
//!  ns ocfr-a<pid>: ipsecd ── va 10.97.0.1, fd00:97::1 ══ vb 10.97.0.2, fd00:97::2 ── ns ocfr-b<pid>: peer
//!        │ relay socket (a file: this process reaches it from the host namespace)
//!  this test: ipsecd::ike_relay::Client
//! ```
//!
//! Without a key manager, IKE to UDP 500 and to 4500 (behind the Non-ESP Marker) is
//! counted as dropped (`no_key_manager`; on 4500 the core's `ike` too). With one, each
//! datagram reaches it with ipsecd's address and port and the peer's, without the marker;
//! its answers reach the peer from the port the question went to (on 4500 behind the
//! marker); a second key manager is refused with the reason. IPv4 and IPv6.
//!
//! Needs root (network namespaces), `ip` and `python3`; skipped otherwise (it says so).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use ipsecd::ike_relay::{Client, Datagram};

const IPSECD: &str = env!("CARGO_BIN_EXE_ipsecd");
const IPSECCTL: &str = env!("CARGO_BIN_EXE_ipsecctl");

/// The peer: sends an IKE_SA_INIT-looking message to ipsecd's port 500 from its own port
/// 500, and one behind the Non-ESP Marker to 4500 from its 4500, for each family given;
/// with `wait`, then prints each answer as `port-it-came-to from-address from-port hex`.
const PEER: &str = r#"
import socket, sys
fams, wait = sys.argv[1].split(","), sys.argv[2] == "wait"
ike = lambda tag: bytes([tag] * 8) + bytes(8) + bytes([33, 0x20, 34, 0x08]) + bytes(4) + (28).to_bytes(4, "big")
socks = []
for fam in fams:
    af, to = (socket.AF_INET, "10.97.0.1") if fam == "4" else (socket.AF_INET6, "fd00:97::1")
    for port, payload in ((500, ike(0x50 + int(fam))), (4500, bytes(4) + ike(0x45 + int(fam)))):
        s = socket.socket(af, socket.SOCK_DGRAM)
        if fam == "6":
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind(("", port))
        s.settimeout(10)
        s.sendto(payload, (to, port))
        socks.append((port, s))
if wait:
    for port, s in socks:
        data, frm = s.recvfrom(65535)
        print(port, frm[0], frm[1], data.hex(), flush=True)
"#;

fn sh(args: &[&str]) -> Output {
    Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn must(args: &[&str]) {
    let o = sh(args);
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// The two namespaces and ipsecd; all gone when dropped.
struct Lab {
    a: String,
    b: String,
    dir: PathBuf,
    ipsecd: Option<Child>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut c) = self.ipsecd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in [&self.a, &self.b] {
            let _ = sh(&["ip", "netns", "del", ns]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Lab {
    fn new() -> Lab {
        let id = std::process::id();
        let dir = std::env::temp_dir().join(format!("ocf-ike-relay-{id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let lab = Lab { a: format!("ocfr-a{id}"), b: format!("ocfr-b{id}"), dir, ipsecd: None };
        let (a, b) = (lab.a.as_str(), lab.b.as_str());
        must(&["ip", "netns", "add", a]);
        must(&["ip", "netns", "add", b]);
        must(&["ip", "-n", a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", b]);
        for (ns, dev, v4, v6) in
            [(a, "va", "10.97.0.1/24", "fd00:97::1/64"), (b, "vb", "10.97.0.2/24", "fd00:97::2/64")]
        {
            must(&["ip", "-n", ns, "addr", "add", v4, "dev", dev]);
            must(&["ip", "-n", ns, "addr", "add", v6, "dev", dev, "nodad"]);
            must(&["ip", "-n", ns, "link", "set", dev, "up"]);
            must(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        lab
    }

    fn ctl(&self) -> PathBuf {
        self.dir.join("ctl.sock")
    }

    /// The relay socket: the default, beside the control socket.
    fn relay(&self) -> PathBuf {
        self.dir.join("ctl-ike.sock")
    }

    fn start_ipsecd(&mut self) {
        let ctl = self.ctl();
        let log = std::fs::File::create(self.dir.join("ipsecd.log")).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.a, IPSECD, "-s", ctl.to_str().unwrap()])
            .args(["--tun", "ipr0", "--no-routes", "--threads", "1", "--nat-keepalive", "0"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.ipsecd = Some(child);
        let until = Instant::now() + Duration::from_secs(30);
        while !(self.relay().exists() && self.stats().is_some()) {
            assert!(Instant::now() < until, "ipsecd did not start: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ipsecd.log")).unwrap_or_default()
    }

    fn stats(&self) -> Option<String> {
        let o = sh(&[IPSECCTL, "-s", self.ctl().to_str().unwrap(), "stats"]);
        o.status.success().then(|| String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// The peer, in its namespace, for families `fams` ("4,6").
    fn peer(&self, fams: &str, wait: bool) -> Child {
        Command::new("ip")
            .args(["netns", "exec", &self.b, "python3", "-c", PEER, fams, if wait { "wait" } else { "send" }])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

/// A counter in `ipsecctl stats`'s `ike_relay:` line, or a drop reason's count.
fn counter(stats: &str, name: &str) -> u64 {
    let relay = stats.lines().find(|l| l.starts_with("ike_relay:")).expect("an ike_relay line");
    if let Some(n) = relay.split([';', ',']).map(str::trim).find_map(|f| f.strip_prefix(&format!("{name} ")))
    {
        return n.parse().unwrap();
    }
    let line = stats.lines().find(|l| l.split_whitespace().next() == Some(name)).expect(name);
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn can_run() -> Result<(), String> {
    let uid = sh(&["id", "-u"]);
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Err("not root".into());
    }
    for tool in ["ip", "python3"] {
        if Command::new(tool).arg("-V").output().is_err()
            && Command::new(tool).arg("--version").output().is_err()
        {
            return Err(format!("no {tool}"));
        }
    }
    Ok(())
}

fn ike_header(tag: u8) -> Vec<u8> {
    let mut h = vec![tag; 8];
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&[33, 0x20, 34, 0x08, 0, 0, 0, 0, 0, 0, 0, 28]);
    h
}

#[test]
fn ike_reaches_the_key_manager_and_its_answers_the_peer() {
    if let Err(why) = can_run() {
        eprintln!("ike_relay: skipped ({why}; needs root, ip and python3)");
        return;
    }
    let mut lab = Lab::new();
    lab.start_ipsecd();
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(lab.relay()).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    // No key manager: dropped and counted, on 500 and on 4500 (where the core counts `ike`).
    let o = lab.peer("4,6", false).wait_with_output().unwrap();
    assert!(o.status.success(), "peer: {}", String::from_utf8_lossy(&o.stderr));
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let s = lab.stats().unwrap();
        if counter(&s, "no_key_manager") == 4 && counter(&s, "ike") == 2 {
            break;
        }
        assert!(Instant::now() < until, "no_key_manager 4 and ike 2 expected:\n{s}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A key manager; a second one is refused with the reason.
    let mut km = Client::connect(&lab.relay()).unwrap();
    let e = Client::connect(&lab.relay()).err().expect("a second key manager is refused");
    assert!(e.to_string().contains("another key manager is attached"), "{e}");

    let peer = lab.peer("4,6", true);
    km.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut seen = Vec::new();
    for _ in 0..4 {
        let d = km.recv().unwrap_or_else(|e| panic!("{e}; got {seen:?}; ipsecd: {}", lab.log()));
        let fam = if d.remote.is_ipv4() { 4 } else { 6 };
        let (ours, theirs): (&str, &str) =
            if fam == 4 { ("10.97.0.1", "10.97.0.2") } else { ("fd00:97::1", "fd00:97::2") };
        let port = if d.nat_t { 4500 } else { 500 };
        assert_eq!(d.local, SocketAddr::new(ours.parse().unwrap(), port), "{d:?}");
        assert_eq!(d.remote, SocketAddr::new(theirs.parse().unwrap(), port), "{d:?}");
        // The message as sent, without the marker on 4500.
        let tag = if d.nat_t { 0x45 } else { 0x50 } + fam;
        assert_eq!(d.bytes, ike_header(tag), "{d:?}");
        // The answer: the question's header, another message.
        let mut answer = ike_header(tag);
        answer[19] = 0x20; // the Response flag
        km.send(&Datagram { bytes: answer, ..d.clone() }).unwrap();
        seen.push(d);
    }
    let o = peer.wait_with_output().unwrap();
    assert!(o.status.success(), "peer: {}\nipsecd: {}", String::from_utf8_lossy(&o.stderr), lab.log());
    let lines = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut answers: Vec<&str> = lines.lines().collect();
    answers.sort();
    let want = |port: u16, from: &str, fam: u8| {
        let tag = if port == 4500 { 0x45 } else { 0x50 } + fam;
        let mut a = ike_header(tag);
        a[19] = 0x20;
        let marker = if port == 4500 { "00000000" } else { "" };
        let hex: String = a.iter().map(|b| format!("{b:02x}")).collect();
        format!("{port} {from} {port} {marker}{hex}")
    };
    let mut expected = [
        want(500, "10.97.0.1", 4),
        want(4500, "10.97.0.1", 4),
        want(500, "fd00:97::1", 6),
        want(4500, "fd00:97::1", 6),
    ];
    expected.sort();
    assert_eq!(answers, expected.iter().map(String::as_str).collect::<Vec<_>>());
    let s = lab.stats().unwrap();
    assert_eq!((counter(&s, "in"), counter(&s, "out"), counter(&s, "second_clients")), (4, 4, 1), "{s}");
    assert!(s.contains("ike_relay: key manager attached"), "{s}");
    // Nothing of this reached the core as `ike` once the key manager was there.
    assert_eq!(counter(&s, "ike"), 2, "{s}");
}
