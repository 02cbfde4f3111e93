//! What the root tests beside this module share (`tunnel`, `strongswan_tunnel`,
//! `daemon_ipsecd`): whether they can run here, the CI rule, network namespaces that go
//! away with the test, and ipsecd started in one of them.
//!
//! ```text
//!  runnable(test, can_run())  ── Err(why), CI set  → the test fails (a CI machine must run it)
//!                             ── Err(why), no CI   → "skipped (why)", the test returns
//!                             ── Ok(ipsecd)        → Lab::pair / Lab::single
//!  Lab ── ns[..], dir, children ── on drop: children killed (last first), namespaces
//!         deleted, dir removed unless the test failed (its logs are kept)
//! ```
//!
//! Each test binary uses only part of this, hence `dead_code` allowed.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ipsecd::ctl::{self, Wait};

/// ipsecd built beside this test: target/debug/deps/TEST-… → target/debug/ipsecd.
pub fn ipsecd_binary() -> Option<PathBuf> {
    let p = std::env::current_exe().ok()?.parent()?.parent()?.join("ipsecd");
    p.exists().then_some(p)
}

/// Root, `ip`, and ipsecd built beside the test: its path, or why not.
pub fn can_run() -> Result<PathBuf, String> {
    let uid = Command::new("id").arg("-u").output().map_err(|e| e.to_string())?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Err("not root".into());
    }
    Command::new("ip").arg("-V").output().map_err(|_| "no ip".to_owned())?;
    ipsecd_binary().ok_or_else(|| "no ipsecd binary beside the tests (cargo build -p ipsecd)".to_owned())
}

/// The CI rule: what `check` found, or `None` when `test` cannot run here — said on
/// stderr, or, under `CI`, a failure (a CI machine is meant to run it).
pub fn runnable<T>(test: &str, check: Result<T, String>) -> Option<T> {
    match check {
        Ok(t) => Some(t),
        Err(why) => {
            assert!(std::env::var_os("CI").is_none(), "{test}: CI is set but the test cannot run: {why}");
            eprintln!("{test}: skipped ({why})");
            None
        }
    }
}

/// Runs a command that must succeed.
pub fn must(args: &[&str]) {
    let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// Namespaces, a directory and the processes started in them, all gone on drop.
pub struct Lab {
    pub ns: Vec<String>,
    pub dir: PathBuf,
    pub children: Vec<Child>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Lab {
    /// One namespace `ns`, and the directory `dir` (made).
    pub fn single(dir: PathBuf, ns: String) -> Lab {
        std::fs::create_dir_all(&dir).unwrap();
        let lab = Lab { ns: vec![ns], dir, children: Vec::new() };
        must(&["ip", "netns", "add", &lab.ns[0]]);
        lab
    }

    /// Namespaces `{prefix}-a{id}` and `{prefix}-b{id}` joined by a veth (`va`, `vb`:
    /// `{net}.0.1/24`, `{net}.0.2/24`), a host address behind each gateway (`{net}.1.1`,
    /// `{net}.2.1` on lo); `id` is `tag` and this process's id, the directory
    /// `{dir_prefix}-{id}` under the temporary directory.
    pub fn pair(dir_prefix: &str, prefix: &str, tag: &str, net: &str) -> Lab {
        let id = format!("{tag}{}", std::process::id());
        let dir = std::env::temp_dir().join(format!("{dir_prefix}-{id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let lab =
            Lab { ns: vec![format!("{prefix}-a{id}"), format!("{prefix}-b{id}")], dir, children: Vec::new() };
        let (a, b) = (&lab.ns[0], &lab.ns[1]);
        must(&["ip", "netns", "add", a]);
        must(&["ip", "netns", "add", b]);
        must(&["ip", "-n", a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", b]);
        for (ns, dev, outer, host) in [
            (a, "va", format!("{net}.0.1/24"), format!("{net}.1.1/32")),
            (b, "vb", format!("{net}.0.2/24"), format!("{net}.2.1/32")),
        ] {
            must(&["ip", "-n", ns, "addr", "add", &outer, "dev", dev]);
            must(&["ip", "-n", ns, "addr", "add", &host, "dev", "lo"]);
            must(&["ip", "-n", ns, "link", "set", dev, "up"]);
            must(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        lab
    }

    /// ipsecd (`bin`) in namespace `ns`, with no SAs of its own (iked installs them),
    /// control socket `{side}.sock`, log `ipsecd-{side}.log`; returns once it answers.
    pub fn ipsecd(&mut self, bin: &Path, ns: &str, side: &str) -> PathBuf {
        let empty = self.dir.join("empty.conf");
        std::fs::write(&empty, "# iked installs everything\n").unwrap();
        let sock = self.dir.join(format!("{side}.sock"));
        let log = std::fs::File::create(self.dir.join(format!("ipsecd-{side}.log"))).unwrap();
        self.children.push(
            Command::new("ip")
                .args(["netns", "exec", ns, bin.to_str().unwrap(), "-f", empty.to_str().unwrap()])
                .args(["-s", sock.to_str().unwrap(), "--threads", "1"])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        let until = Instant::now() + Duration::from_secs(30);
        while ctl::call(&sock, &ctl::Request::Stats, Wait::default()).is_err() {
            assert!(Instant::now() < until, "ipsecd {side} did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        sock
    }
}
