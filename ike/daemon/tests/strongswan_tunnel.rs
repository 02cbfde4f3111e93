//! ipsecd + iked against strongSwan: charon (Debian's 5.9.8, kernel-libipsec: its own ESP
//! over a TUN, always ESP in UDP — it sends a fake NAT-D hash with `encap = yes`) in the
//! other namespace, the docs' PSK example on both sides. iked as initiator, then as
//! responder: each time the IKE SA comes up on both, iked has moved to port 4500 and
//! installed the CHILD_SA as ESP in UDP through ipsecd, and a ping crosses the tunnel
//! (charon's counters see it); iked's Delete at exit closes charon's side too.
//!
//! ```text
//!  ns ocfs-a<pid>                                            ns ocfs-b<pid>
//!  10.95.1.1 (lo) ─ TUN ─ ipsecd ─ va 10.95.0.1 ══ vb 10.95.0.2 ─ charon (kernel-libipsec) ─ 10.95.2.1 (lo)
//!                          │ relay, ctl
//!                         iked
//! ```
//!
//! Needs root, `ip`, `ping`, strongSwan (`strongswan-charon`, `strongswan-swanctl`,
//! `libcharon-extra-plugins` for kernel-libipsec) and ipsecd built beside this test
//! (`cargo build -p ipsecd`); skipped otherwise, saying why.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ipsecd::ctl::{self, Wait};

mod common;
use common::{must, runnable, Lab};

const IKED: &str = env!("CARGO_BIN_EXE_iked");
const CHARON: &str = "/usr/lib/ipsec/charon";
const PSK: &str = "0x5e1c9f0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6";

/// The common checks, and strongSwan's charon with kernel-libipsec.
fn can_run() -> Result<PathBuf, String> {
    let ipsecd = common::can_run()?;
    if !Path::new(CHARON).exists() || Command::new("swanctl").arg("--version").output().is_err() {
        return Err("no strongSwan (charon, swanctl)".into());
    }
    if !Path::new("/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so").exists() {
        return Err("no kernel-libipsec plugin (libcharon-extra-plugins)".into());
    }
    Ok(ipsecd)
}

impl Lab {
    /// swanctl against B's charon.
    fn swanctl(&self, args: &[&str]) -> std::process::Output {
        self.swanctl_at("b", args)
    }

    fn swanctl_at(&self, side: &str, args: &[&str]) -> std::process::Output {
        let uri = format!("unix://{}", self.dir.join(format!("vici-{side}")).display());
        Command::new("swanctl").args(args).args(["--uri", &uri]).output().unwrap()
    }

    fn logs(&self) -> String {
        ["ipsecd-a.log", "iked-a.log", "charon-a.log", "charon-b.log"]
            .iter()
            .map(|n| format!("--- {n}\n{}", std::fs::read_to_string(self.dir.join(n)).unwrap_or_default()))
            .collect()
    }

    fn iked(&mut self, start: bool) -> usize {
        let conf = self.dir.join("iked.conf");
        std::fs::write(&conf, iked_conf(start)).unwrap();
        let sock = self.dir.join("a-iked.sock");
        let _ = std::fs::remove_file(&sock);
        let log = std::fs::File::create(self.dir.join("iked-a.log")).unwrap();
        self.children.push(
            Command::new("ip")
                .args(["netns", "exec", &self.ns[0], IKED, "-c", conf.to_str().unwrap()])
                .args(["--ike-socket", self.dir.join("a-ike.sock").to_str().unwrap()])
                .args(["--ipsecd-socket", self.dir.join("a.sock").to_str().unwrap()])
                .args(["-s", sock.to_str().unwrap()])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        let until = Instant::now() + Duration::from_secs(10);
        while !sock.exists() {
            assert!(Instant::now() < until, "iked did not start: {}", self.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
        self.children.len() - 1
    }

    /// ipsecd's SA lines.
    fn sas(&self) -> Vec<String> {
        let r = ctl::call(&self.dir.join("a.sock"), &ctl::Request::Setkey("dump;".into()), Wait::default());
        match r {
            Ok(Ok(t)) => t.lines().filter(|l| l.starts_with("add ")).map(str::to_owned).collect(),
            _ => Vec::new(),
        }
    }

    fn ping(&self) -> bool {
        Command::new("ip")
            .args(["netns", "exec", &self.ns[0], "ping", "-q", "-c", "3", "-i", "0.2", "-W", "3"])
            .args(["-I", "10.95.1.1", "10.95.2.1"])
            .output()
            .unwrap()
            .status
            .success()
    }

    /// Both ends up, ESP in UDP on 4500 in ipsecd, a ping through, charon counting it.
    fn check_tunnel(&self, role: &str) {
        let until = Instant::now() + Duration::from_secs(20);
        while self.sas().len() != 2 {
            assert!(Instant::now() < until, "{role}: no CHILD_SA in ipsecd: {}", self.logs());
            std::thread::sleep(Duration::from_millis(100));
        }
        let sas = self.sas();
        assert!(
            sas.iter()
                .all(|l| l.contains("[4500]") && l.contains(" esp-udp ") && l.contains("-E aes-gcm-16")),
            "{role}: {sas:?}"
        );
        let log = std::fs::read_to_string(self.dir.join("iked-a.log")).unwrap();
        assert!(log.contains(&format!("role={role}")), "{role}: {log}");
        // The initiator sees charon's fake NAT-D and moves to 4500 itself; as responder,
        // charon has moved already.
        assert!(role != "initiator" || log.contains("nat-detected ike_sa="), "{role}: {log}");
        assert!(self.ping(), "{role}: ping\n{}", self.logs());
        let raw = String::from_utf8_lossy(&self.swanctl(&["--list-sas", "--raw"]).stdout).into_owned();
        assert!(raw.contains("state=ESTABLISHED") && raw.contains("state=INSTALLED"), "{role}: {raw}");
        assert!(
            raw.contains("encap=yes") && raw.contains("packets-in=3"),
            "{role}: charon saw the ping: {raw}"
        );
    }
}

fn iked_conf(start: bool) -> String {
    format!(
        "connections {{\n site {{\n  local_addrs = 10.95.0.1\n  remote_addrs = 10.95.0.2\n  \
         proposals = aes128gcm16-prfsha256-x25519\n  local {{\n   auth = psk\n   id = gw-a.example.org\n  }}\n  \
         remote {{\n   auth = psk\n   id = gw-b.example.org\n  }}\n  children {{\n   net {{\n    \
         local_ts = 10.95.1.0/24\n    remote_ts = 10.95.2.0/24\n    esp_proposals = aes128gcm16\n    {}\n   }}\n  }}\n }}\n}}\n\
         secrets {{\n ike-site {{\n  id-a = gw-a.example.org\n  id-b = gw-b.example.org\n  secret = {PSK}\n }}\n}}\n",
        if start { "start_action = start" } else { "" }
    )
}

/// strongswan.conf and swanctl.conf of a charon on side B (`a_side`: on side A, the
/// mirror image), its vici socket and log under `dir` with the side in their names.
fn charon_confs(dir: &Path, a_side: bool) -> (String, String) {
    let (side, me, peer, id, peer_id, mine, theirs) = if a_side {
        ("a", "10.95.0.1", "10.95.0.2", "gw-a", "gw-b", "10.95.1.0/24", "10.95.2.0/24")
    } else {
        ("b", "10.95.0.2", "10.95.0.1", "gw-b", "gw-a", "10.95.2.0/24", "10.95.1.0/24")
    };
    let strongswan = format!(
        "charon {{\n load_modular = yes\n plugins {{\n  include /etc/strongswan.d/charon/*.conf\n  \
         kernel-libipsec {{\n   load = 10\n  }}\n  vici {{\n   socket = unix://{vici}\n  }}\n }}\n \
         filelog {{\n  t {{\n   path = {log}\n   time_format = %T\n   default = 1\n  }}\n }}\n \
         syslog {{\n  daemon {{\n   default = -1\n  }}\n }}\n}}\n",
        vici = dir.join(format!("vici-{side}")).display(),
        log = dir.join(format!("charon-{side}.log")).display()
    );
    let swanctl = format!(
        "connections {{\n site {{\n  version = 2\n  local_addrs = {me}\n  remote_addrs = {peer}\n  \
         proposals = aes128gcm16-prfsha256-x25519\n  encap = yes\n  mobike = no\n  \
         local {{\n   auth = psk\n   id = {id}.example.org\n  }}\n  remote {{\n   auth = psk\n   id = {peer_id}.example.org\n  }}\n  \
         children {{\n   net {{\n    mode = tunnel\n    local_ts = {mine}\n    remote_ts = {theirs}\n    \
         esp_proposals = aes128gcm16\n   }}\n  }}\n }}\n}}\n\
         secrets {{\n ike-site {{\n  id-a = gw-a.example.org\n  id-b = gw-b.example.org\n  secret = {PSK}\n }}\n}}\n"
    );
    (strongswan, swanctl)
}

/// Starts a charon in `ns` for side B (`a_side`: A) and loads its connection.
fn start_charon(lab: &mut Lab, ns: &str, a_side: bool) {
    let side = if a_side { "a" } else { "b" };
    let dir = lab.dir.clone();
    let (strongswan, swanctl) = charon_confs(&dir, a_side);
    let conf = dir.join(format!("strongswan-{side}.conf"));
    std::fs::write(&conf, strongswan).unwrap();
    std::fs::write(dir.join(format!("swanctl-{side}.conf")), swanctl).unwrap();
    lab.children.push(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "sh",
                "-c",
                "mount -t tmpfs none /run && STRONGSWAN_CONF=\"$1\" exec \"$2\"",
            ])
            .args(["charon", conf.to_str().unwrap(), CHARON])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join(format!("charon-{side}.out"))).unwrap())
            .spawn()
            .unwrap(),
    );
    let until = Instant::now() + Duration::from_secs(15);
    while !lab.swanctl_at(side, &["--stats"]).status.success() {
        assert!(Instant::now() < until, "charon {side} did not start: {}", lab.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    let file = dir.join(format!("swanctl-{side}.conf"));
    let o = lab.swanctl_at(side, &["--load-all", "--noprompt", "--file", file.to_str().unwrap()]);
    assert!(o.status.success(), "swanctl --load-all: {}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn ipsecd_and_iked_negotiate_with_strongswan_both_ways() {
    let Some(ipsecd) = runnable("strongswan_tunnel", can_run()) else { return };
    let mut lab = Lab::pair("iked-swan", "ocfs", "t", "10.95");
    let a = lab.ns[0].clone();
    let b = lab.ns[1].clone();
    start_charon(&mut lab, &b, false);
    lab.ipsecd(&ipsecd, &a, "a");

    // iked initiates.
    let iked = lab.iked(true);
    lab.check_tunnel("initiator");
    must(&["kill", "-TERM", &lab.children[iked].id().to_string()]);
    assert!(lab.children[iked].wait().unwrap().success(), "iked on SIGTERM: {}", lab.logs());
    assert!(lab.sas().is_empty(), "iked removed its SAs at exit: {:?}", lab.sas());
    // Its Delete reached charon, which closed the IKE SA too.
    let until = Instant::now() + Duration::from_secs(5);
    while String::from_utf8_lossy(&lab.swanctl(&["--list-sas"]).stdout).contains("ESTABLISHED") {
        assert!(Instant::now() < until, "charon kept the IKE SA: {}", lab.logs());
        std::thread::sleep(Duration::from_millis(50));
    }

    // charon initiates.
    lab.iked(false);
    let o = lab.swanctl(&["--initiate", "--child", "net", "--timeout", "15"]);
    assert!(o.status.success(), "swanctl --initiate: {}\n{}", String::from_utf8_lossy(&o.stdout), lab.logs());
    lab.check_tunnel("responder");
}
