//! The independent check: strongSwan's charon reads our test configurations as we do.
//!
//! charon (Debian's strongSwan 5.9.8) runs in its own mount and network namespaces
//! (`unshare -m -n`, a tmpfs on /run for its pid file, a vici socket in a scratch
//! directory), as `bench/ipsec-throughput` starts it, with `cfg` logging at level 2: on
//! `swanctl --load-all` it then logs every setting of every connection it loaded, proposals
//! in its `%P` form included (`swanctl --list-conns` does not show proposals in 5.9.8).
//!
//! ```text
//!  tests/configs/*.conf, docs/iked.md's PSK examples
//!     │                         │
//!     ▼                         ▼
//!  Config::parse           swanctl --load-all ─▶ charon ─▶ its log (cfg 2)
//!     │                                                     │
//!     └──── proposals, lifetimes, addresses, ids, TS, ──────┘
//!           modes, actions, dpd, encap, fragmentation: equal
//! ```
//!
//! Proposal strings both refuse (unknown keyword, AEAD without PRF, IKE without a key
//! exchange, mixed AEAD and classic) are loaded too: swanctl must fail where we fail.
//!
//! Needs root (namespaces) and strongSwan's packages (`apt-get install -y
//! --no-install-recommends strongswan-swanctl charon-systemd libstrongswan-standard-plugins
//! libstrongswan-extra-plugins`); without either it prints why and passes without checking.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ike_core::config::{
    parse_proposals, DpdAction, Fragmentation, Identity, Mode, Protocol, StartAction, TrafficSelector,
};
use iked::config::Config;

const CHARON: &str = "/usr/lib/ipsec/charon";

fn skip_reason() -> Option<String> {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if uid.as_deref() != Some("0") {
        return Some("not root (charon runs in its own namespaces)".into());
    }
    if !Path::new(CHARON).exists() {
        return Some(format!("{CHARON} missing (install strongswan-charon or charon-systemd)"));
    }
    if Command::new("swanctl").arg("--version").output().is_err() {
        return Some("swanctl missing (install strongswan-swanctl)".into());
    }
    None
}

/// A charon of our own, killed when dropped: we kill the `unshare` we started, and its
/// `--kill-child` takes charon with it.
struct Charon {
    child: Child,
    dir: PathBuf,
    log: PathBuf,
    uri: String,
}

impl Charon {
    /// Starts one; `tag` keeps the scratch directories of tests running at once apart.
    fn start(tag: &str) -> Charon {
        let dir = std::env::temp_dir().join(format!("iked-swan-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("charon.log");
        let vici = dir.join("vici");
        let conf = dir.join("strongswan.conf");
        std::fs::write(
            &conf,
            format!(
                "charon {{\n  load_modular = yes\n  plugins {{\n    include /etc/strongswan.d/charon/*.conf\n    \
                 vici {{\n      socket = unix://{}\n    }}\n  }}\n  filelog {{\n    test {{\n      path = {}\n      \
                 default = 1\n      cfg = 2\n      flush_line = yes\n    }}\n  }}\n  syslog {{\n    daemon {{\n      \
                 default = -1\n    }}\n  }}\n}}\n",
                vici.display(),
                log.display()
            ),
        )
        .unwrap();
        let child = Command::new("unshare")
            .args([
                "-m",
                "-n",
                "sh",
                "-c",
                "mount -t tmpfs none /run && STRONGSWAN_CONF=\"$1\" exec \"$2\"",
                "charon",
            ])
            .arg(&conf)
            .arg(CHARON)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("unshare");
        let charon = Charon { child, dir, log, uri: format!("unix://{}", vici.display()) };
        let deadline = Instant::now() + Duration::from_secs(15);
        while !charon.swanctl(&["--stats"]).0 {
            assert!(Instant::now() < deadline, "charon did not answer on {}", charon.uri);
            std::thread::sleep(Duration::from_millis(100));
        }
        charon
    }

    /// Runs swanctl against this charon: success and output.
    fn swanctl(&self, args: &[&str]) -> (bool, String) {
        match Command::new("swanctl").args(args).args(["--uri", &self.uri]).output() {
            Ok(o) => (
                o.status.success(),
                format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
            ),
            Err(e) => (false, e.to_string()),
        }
    }

    fn log_len(&self) -> usize {
        std::fs::read(&self.log).map(|b| b.len()).unwrap_or(0)
    }

    /// Loads a file's connections and secrets; the log lines charon wrote meanwhile.
    fn load(&self, path: &Path) -> (bool, String, String) {
        let before = self.log_len();
        let (ok, out) = self.swanctl(&["--load-all", "--noprompt", "--file", path.to_str().unwrap()]);
        std::thread::sleep(Duration::from_millis(200));
        let log = std::fs::read(&self.log).unwrap_or_default();
        (ok, out, String::from_utf8_lossy(&log[before.min(log.len())..]).into_owned())
    }
}

impl Drop for Charon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What charon logged of one connection: its settings, its auth rounds' and its children's.
#[derive(Default, Debug)]
struct Logged {
    conn: HashMap<String, String>,
    local: HashMap<String, String>,
    remote: HashMap<String, String>,
    children: HashMap<String, HashMap<String, String>>,
}

/// Reads charon's `cfg 2` dump of loaded connections: `  conn NAME:`, `   child NAME:` and
/// its settings one space deeper, the connection's settings, `   local:`/`   remote:` and
/// their settings.
fn parse_log(log: &str) -> HashMap<String, Logged> {
    let mut out: HashMap<String, Logged> = HashMap::new();
    let (mut conn, mut child, mut round) = (None::<String>, None::<String>, None::<&str>);
    for line in log.lines() {
        let Some(rest) = line.split_once("[CFG] ").map(|(_, r)| r) else { continue };
        let depth = rest.len() - rest.trim_start().len();
        let body = rest.trim_start();
        if depth == 1 && body.starts_with("conn ") {
            let name = body["conn ".len()..].trim_end_matches(':').to_string();
            out.entry(name.clone()).or_default();
            (conn, child, round) = (Some(name), None, None);
            continue;
        }
        let Some(c) = conn.clone() else { continue };
        let entry = out.get_mut(&c).unwrap();
        if depth == 2 && body.starts_with("child ") {
            let name = body["child ".len()..].trim_end_matches(':').to_string();
            entry.children.entry(name.clone()).or_default();
            (child, round) = (Some(name), None);
        } else if depth == 2 && (body == "local:" || body == "remote:") {
            (child, round) = (None, Some(if body == "local:" { "local" } else { "remote" }));
        } else if let Some((k, v)) = body.split_once(" = ") {
            let (k, v) = (k.to_string(), v.to_string());
            match (depth, &child, round) {
                (3, Some(ch), _) => {
                    entry.children.get_mut(ch).unwrap().insert(k, v);
                }
                (2, None, None) => {
                    entry.conn.insert(k, v);
                }
                (3, None, Some("local")) => {
                    entry.local.insert(k, v);
                }
                (3, None, Some("remote")) => {
                    entry.remote.insert(k, v);
                }
                (2, Some(_), _) => {
                    // The connection's settings follow its children.
                    child = None;
                    entry.conn.insert(k, v);
                }
                _ => {}
            }
        } else if depth <= 1 {
            (conn, child, round) = (None, None, None);
        }
    }
    out
}

fn join<T: ToString>(items: &[T], sep: &str) -> String {
    items.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(sep)
}

fn addrs(list: &[std::net::IpAddr]) -> String {
    if list.is_empty() {
        "%any".into()
    } else {
        join(list, ", ")
    }
}

/// charon prints selectors as we do, except that it names ports from /etc/services.
fn ts_list(list: &[TrafficSelector]) -> String {
    join(list, " ")
}

#[track_caller]
fn same(what: &str, ours: String, theirs: Option<&String>) {
    assert_eq!(Some(&ours), theirs, "{what}: ours vs charon's");
}

/// Checks every connection of `config` against charon's log of the same file.
fn compare(file: &str, text: &str, config: &Config, logged: &HashMap<String, Logged>) -> usize {
    let mut checks = 0;
    for c in &config.connections {
        let l =
            logged.get(&c.name).unwrap_or_else(|| panic!("{file}: charon did not log connection {}", c.name));
        let at = |k: &str| format!("{file}: {} {k}", c.name);
        // `default` is each implementation's own list (docs/iked.md): not compared.
        if c.proposals != parse_proposals(Protocol::Ike, "default").unwrap() {
            same(&at("proposals"), join(&c.proposals, ", "), l.conn.get("proposals"));
        }
        same(&at("local_addrs"), addrs(&c.local_addrs), l.conn.get("local_addrs"));
        same(&at("remote_addrs"), addrs(&c.remote_addrs), l.conn.get("remote_addrs"));
        same(&at("rekey_time"), c.lifetimes.rekey_time.as_secs().to_string(), l.conn.get("rekey_time"));
        same(&at("over_time"), c.lifetimes.over_time.as_secs().to_string(), l.conn.get("over_time"));
        same(&at("rand_time"), c.lifetimes.rand_time.as_secs().to_string(), l.conn.get("rand_time"));
        same(&at("dpd_delay"), c.dpd_delay.as_secs().to_string(), l.conn.get("dpd_delay"));
        same(&at("encap"), (c.encap as u8).to_string(), l.conn.get("encap"));
        // strongSwan's fragmentation_t: NO, ACCEPT, YES, FORCE.
        let frag = match c.fragmentation {
            Fragmentation::No => 0,
            Fragmentation::Accept => 1,
            Fragmentation::Yes => 2,
            Fragmentation::Force => 3,
        };
        same(&at("fragmentation"), frag.to_string(), l.conn.get("fragmentation"));
        // iked's version is always 2; swanctl's default, 0, means IKEv1 or IKEv2.
        let version = if text.contains("version = 2") { "2" } else { "0" };
        same(&at("version"), version.into(), l.conn.get("version"));
        if text.contains("mobike = no") {
            same(&at("mobike"), "0".into(), l.conn.get("mobike"));
        }
        for (round, logged) in [(&c.local, &l.local), (&c.remote, &l.remote)] {
            if round.id != Identity::Any {
                same(&at("id"), round.id.to_string(), logged.get("id"));
            }
            same(&at("class"), "pre-shared key".into(), logged.get("class"));
        }
        for ch in &c.children {
            let lc =
                l.children.get(&ch.name).unwrap_or_else(|| panic!("{file}: no child {} logged", ch.name));
            let at = |k: &str| format!("{file}: {}/{} {k}", c.name, ch.name);
            if ch.esp_proposals != parse_proposals(Protocol::Esp, "default").unwrap() {
                same(&at("proposals"), join(&ch.esp_proposals, ", "), lc.get("proposals"));
            }
            same(&at("rekey_time"), ch.lifetimes.rekey_time.as_secs().to_string(), lc.get("rekey_time"));
            same(&at("life_time"), ch.lifetimes.life_time.as_secs().to_string(), lc.get("life_time"));
            same(&at("rand_time"), ch.lifetimes.rand_time.as_secs().to_string(), lc.get("rand_time"));
            let mode = match ch.mode {
                Mode::Tunnel => "TUNNEL",
                Mode::Transport => "TRANSPORT",
            };
            same(&at("mode"), mode.into(), lc.get("mode"));
            let start = match ch.start_action {
                StartAction::None => "none",
                StartAction::Trap => "trap",
                StartAction::Start => "start",
            };
            same(&at("start_action"), start.into(), lc.get("start_action"));
            // charon 5.9.8 prints its action_t for dpd_action = restart as "start".
            let dpd = match ch.dpd_action {
                DpdAction::None => "none",
                DpdAction::Trap => "trap",
                DpdAction::Restart => "start",
            };
            same(&at("dpd_action"), dpd.into(), lc.get("dpd_action"));
            same(&at("local_ts"), ts_list(&ch.local_ts), lc.get("local_ts"));
            same(&at("remote_ts"), ts_list(&ch.remote_ts), lc.get("remote_ts"));
            checks += 1;
        }
        checks += 1;
    }
    checks
}

fn test_files() -> Vec<(String, String)> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<(String, String)> = std::fs::read_dir(here.join("tests/configs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "conf"))
        .map(|p| (p.display().to_string(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    files.sort();
    // docs/iked.md's two-gateway example (the certificate one needs files that do not exist).
    let doc = std::fs::read_to_string(here.join("../../docs/iked.md")).unwrap();
    for (i, block) in doc.split("```swanctl\n").skip(1).take(2).enumerate() {
        let text = block.split("\n```").next().unwrap().to_string();
        files.push((format!("docs/iked.md example {}", i + 1), text));
    }
    files
}

#[test]
fn charon_reads_our_configs_as_we_do() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let charon = Charon::start("read");
    let mut checks = 0;
    for (name, text) in test_files() {
        let ours = Config::parse(&text, Path::new(&name)).unwrap_or_else(|e| panic!("{e}"));
        let path = charon.dir.join("swanctl.conf");
        std::fs::write(&path, &text).unwrap();
        let (ok, out, log) = charon.load(&path);
        assert!(ok, "{name}: swanctl refused what we accept:\n{out}");
        checks += compare(&name, &text, &ours, &parse_log(&log));
    }
    assert!(checks >= 12, "{checks} connections and children compared");
    eprintln!("{checks} connections and children read alike by iked and charon");
}

#[test]
fn charon_refuses_what_we_refuse_for_its_reasons() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let charon = Charon::start("refuse");
    let cases = [
        ("aes128-sha265-x25519", "aes128gcm16"),
        ("aes128gcm16-x25519", "aes128gcm16"),
        ("aes128-sha256", "aes128gcm16"),
        ("sha256-prfsha256-x25519", "aes128gcm16"),
        ("aes128gcm16-aes128-sha256-prfsha256-x25519", "aes128gcm16"),
        ("aes128-sha256-x25519", "aes128gcm16-aes128-sha256"),
        ("aes128-sha256-x25519", "aes128gcm16-bogus"),
    ];
    for (ike, esp) in cases {
        let text = format!(
            "connections {{\n  r {{\n    proposals = {ike}\n    local {{\n      auth = psk\n    }}\n    \
             remote {{\n      auth = psk\n    }}\n    children {{\n      c {{\n        esp_proposals = {esp}\n      \
             }}\n    }}\n  }}\n}}\nsecrets {{\n  ike-r {{\n    secret = 0123456789abcdef\n  }}\n}}\n"
        );
        let ours = Config::parse(&text, Path::new("refused.conf"));
        assert!(ours.is_err(), "we accept {ike} / {esp}");
        let path = charon.dir.join("refused.conf");
        std::fs::write(&path, &text).unwrap();
        let (ok, out, _) = charon.load(&path);
        assert!(!ok, "charon accepts {ike} / {esp} that we refuse ({}):\n{out}", ours.unwrap_err());
    }
}
