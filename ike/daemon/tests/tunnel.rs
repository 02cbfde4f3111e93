//! Two gateways, each ipsecd + iked, bring up a tunnel with IKEv2 and carry a ping through
//! it — at start-up (`start_action = start`), and on the first packet (`start_action =
//! trap`: trap policies, ipsecd's ACQUIRE, the CHILD_SA under the trap's reqid) — and
//! refuse a wrong pre-shared key with a clear log line and a counter; `ipsecctl ike rekey`
//! under a running ping (CHILD_SA, then IKE SA) loses no packet. The whole chain:
//! ipsecd's relay, iked's loop, ike-core's IKE_SA_INIT and IKE_AUTH (PSK, AES-GCM-16-128,
//! X25519), the CHILD_SA installed through ipsecd's control socket with its policies and
//! routes.
//!
//! ```text
//!  ns ocfi-a<pid>                                             ns ocfi-b<pid>
//!  10.96.1.1 (lo) ─ TUN ─ ipsecd ─ va 10.96.0.1 ══ vb 10.96.0.2 ─ ipsecd ─ TUN ─ 10.96.2.1 (lo)
//!                          │ relay, ctl                                │ relay, ctl
//!                         iked (start_action = start)                 iked (waits)
//! ```
//!
//! iked A runs with `--debug-keys`: tshark (capturing A's veth from before the first IKE
//! message) decrypts IKE_AUTH with the `ikev2_decryption_table` it wrote and finds both
//! AUTH payloads and A's identity, nothing malformed, and checks every ESP packet of the
//! ping with its `esp_sa` records; the log warns at start and at each write. Without tshark
//! that part is skipped, saying so.
//!
//! Needs root (network namespaces, TUN), `ip`, `ping`, and ipsecd built beside this test
//! (`cargo build -p ipsecd`); skipped otherwise, saying why.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ipsecd::ctl::{self, Wait};
use ipsecd::ike_ctl;

mod common;
use common::{can_run, must, runnable, Lab};

const IKED: &str = env!("CARGO_BIN_EXE_iked");

/// One gateway's iked.conf.
fn iked_conf(
    me: &str,
    peer: &str,
    my_net: &str,
    peer_net: &str,
    id: &str,
    peer_id: &str,
    action: &str,
) -> String {
    format!(
        "connections {{\n site {{\n  local_addrs = {me}\n  remote_addrs = {peer}\n  \
         proposals = aes128gcm16-prfsha256-x25519\n  local {{\n   auth = psk\n   id = {id}\n  }}\n  \
         remote {{\n   auth = psk\n   id = {peer_id}\n  }}\n  children {{\n   net {{\n    local_ts = {my_net}\n    \
         remote_ts = {peer_net}\n    esp_proposals = aes128gcm16\n    {}\n   }}\n  }}\n }}\n}}\n\
         secrets {{\n ike-site {{\n  id-a = gw-a.example.org\n  id-b = gw-b.example.org\n  \
         secret = 0x5e1c9f0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6\n }}\n}}\n",
        action
    )
}

fn sas(ctl_sock: &Path) -> String {
    match ctl::call(ctl_sock, &ctl::Request::Setkey("dump;".into()), Wait::default()) {
        Ok(Ok(t)) => t,
        other => format!("{other:?}"),
    }
}

/// Two gateways up: ipsecd and iked on each side, A's child with `a_action`.
struct Gateways {
    lab: Lab,
    dir: PathBuf,
    a: String,
    /// The capture of A's veth, when `debug_keys` asked for it and tshark runs here.
    cap: Option<PathBuf>,
    keys_dir: PathBuf,
}

/// Starts both gateways (`None`: the test cannot run here, and says why); A runs with
/// `--debug-keys` and A's veth is captured when `debug_keys`; B has another pre-shared key
/// when `wrong_psk`; with `web`, each side has a second child between hosts 10.96.11.1
/// (behind A) and 10.96.12.1 (behind B), trapped on A.
fn gateways(tag: &str, a_action: &str, debug_keys: bool, wrong_psk: bool, web: bool) -> Option<Gateways> {
    let ipsecd = runnable("tunnel", can_run())?;
    let mut lab = Lab::pair("iked-tunnel", "ocfi", tag, "10.96");
    let dir = lab.dir.clone();
    let (a, b) = (lab.ns[0].clone(), lab.ns[1].clone());
    let sides = [
        (
            "a",
            &a,
            iked_conf(
                "10.96.0.1",
                "10.96.0.2",
                "10.96.1.0/24",
                "10.96.2.0/24",
                "gw-a.example.org",
                "gw-b.example.org",
                a_action,
            ),
        ),
        (
            "b",
            &b,
            iked_conf(
                "10.96.0.2",
                "10.96.0.1",
                "10.96.2.0/24",
                "10.96.1.0/24",
                "gw-b.example.org",
                "gw-a.example.org",
                "",
            ),
        ),
    ];
    let mut sides = sides;
    if web {
        for (side, ns, conf) in sides.iter_mut() {
            let (me, peer, action) = if *side == "a" {
                ("10.96.11.1", "10.96.12.1", "start_action = trap")
            } else {
                ("10.96.12.1", "10.96.11.1", "")
            };
            must(&["ip", "-n", ns, "addr", "add", &format!("{me}/32"), "dev", "lo"]);
            *conf = conf.replacen(
                "  }\n }\n}\n",
                &format!(
                    "   web {{\n    local_ts = {me}/32\n    remote_ts = {peer}/32\n    \
                     esp_proposals = aes256gcm16-x25519\n    {action}\n   }}\n  }}\n }}\n}}\n"
                ),
                1,
            );
        }
    }
    if wrong_psk {
        sides[1].2 = sides[1].2.replace("secret = 0x5e1c", "secret = 0x0000");
    }
    // ipsecd first, on both sides; then iked, B (the responder) before A.
    for (side, ns, _) in &sides {
        lab.ipsecd(&ipsecd, ns, side);
    }
    // The wire at A, from before the first IKE message.
    let cap = dir.join("cap.pcapng");
    let capture = if !debug_keys {
        Err(std::io::Error::other("not asked for"))
    } else {
        Command::new("ip")
            .args(["netns", "exec", &a, "tshark", "-q", "-i", "va", "-w", cap.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("tshark-cap.log")).unwrap())
            .spawn()
    };
    let capturing = match capture {
        Ok(c) => {
            lab.children.push(c);
            let until = Instant::now() + Duration::from_secs(20);
            let said = |what: &str| {
                std::fs::read_to_string(dir.join("tshark-cap.log")).unwrap_or_default().contains(what)
            };
            while !said("Capturing on") {
                assert!(Instant::now() < until, "tshark did not start capturing");
                std::thread::sleep(Duration::from_millis(50));
            }
            // tshark 4 says "Capturing on" before its capture runs, then "Capture
            // started": the first IKE message could be missed in between.
            let until = Instant::now() + Duration::from_secs(2);
            while !said("Capture started") && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            true
        }
        Err(e) if debug_keys => {
            eprintln!("tunnel: no tshark ({e}): the debugging keys are not checked");
            false
        }
        Err(_) => false,
    };
    let keys_dir = dir.join("keys");
    for (side, ns, conf) in sides.iter().rev() {
        let conf_path = dir.join(format!("iked-{side}.conf"));
        std::fs::write(&conf_path, conf).unwrap();
        let log = std::fs::File::create(dir.join(format!("iked-{side}.log"))).unwrap();
        lab.children.push(
            Command::new("ip")
                .args(["netns", "exec", ns, IKED, "-c", conf_path.to_str().unwrap()])
                .args(["--ike-socket", dir.join(format!("{side}-ike.sock")).to_str().unwrap()])
                .args(["--ipsecd-socket", dir.join(format!("{side}.sock")).to_str().unwrap()])
                .args(["-s", dir.join(format!("{side}-iked.sock")).to_str().unwrap()])
                .args(if *side == "a" && debug_keys {
                    vec!["--debug-keys", keys_dir.to_str().unwrap()]
                } else {
                    vec![]
                })
                .env("RUST_LOG", "debug")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        let until = Instant::now() + Duration::from_secs(10);
        while !dir.join(format!("{side}-iked.sock")).exists() {
            assert!(Instant::now() < until, "iked {side} did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Some(Gateways { lab, dir, a, cap: capturing.then_some(cap), keys_dir })
}

impl Gateways {
    fn logs(&self) -> String {
        ["ipsecd-a", "ipsecd-b", "iked-a", "iked-b"]
            .iter()
            .map(|n| {
                format!(
                    "--- {n}\n{}",
                    std::fs::read_to_string(self.dir.join(format!("{n}.log"))).unwrap_or_default()
                )
            })
            .collect::<String>()
    }

    /// Waits until both ipsecds hold a CHILD_SA's two SAs.
    fn wait_for_sas(&self) {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let (sa_a, sa_b) = (sas(&self.dir.join("a.sock")), sas(&self.dir.join("b.sock")));
            if sa_a.matches(" esp 0x").count() == 2 && sa_b.matches(" esp 0x").count() == 2 {
                return;
            }
            assert!(
                Instant::now() < until,
                "no CHILD_SA on both sides:\nA: {sa_a}\nB: {sa_b}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `count` pings from A's host to B's; whether all were answered.
    fn ping(&self, count: &str) -> bool {
        let o = Command::new("ip")
            .args(["netns", "exec", &self.a, "ping", "-q", "-c", count, "-i", "0.2", "-W", "3"])
            .args(["-I", "10.96.1.1", "10.96.2.1"])
            .output()
            .unwrap();
        if !o.status.success() {
            eprintln!("ping: {}", String::from_utf8_lossy(&o.stdout));
        }
        o.status.success()
    }
}

#[test]
fn two_gateways_negotiate_a_tunnel_and_ping_through_it() {
    let Some(mut g) = gateways("s", "start_action = start", true, false, false) else { return };
    g.wait_for_sas();
    assert!(g.ping("3"), "{}", g.logs());
    let dir = g.dir.clone();
    // The ping went through the negotiated SAs: B's counters show 3 in from A and 3 out
    // (the replies), and the relay carried IKE_SA_INIT and IKE_AUTH each way.
    let stats = ctl::call(&dir.join("b.sock"), &ctl::Request::Stats, Wait::default()).unwrap().unwrap();
    let line = |prefix: &str| stats.lines().find(|l| l.starts_with(prefix)).unwrap_or_default().to_owned();
    let (inbound, outbound) =
        (line("sa 10.96.0.1 10.96.0.2 esp spi"), line("sa 10.96.0.2 10.96.0.1 esp spi"));
    assert!(inbound.contains(": 0 packets 0 bytes out, 3 packets"), "{stats}");
    assert!(
        outbound.contains(": 3 packets") && outbound.contains("bytes out, 0 packets 0 bytes in"),
        "{stats}"
    );
    assert!(stats.contains("ike_relay: key manager attached; in 2, out 2,"), "{stats}");

    if let Some(cap) = g.cap.clone() {
        let keys_dir = g.keys_dir.clone();
        debug_keys_decrypt_the_capture(&mut g.lab, &cap, &keys_dir);
    }
    let log_a = std::fs::read_to_string(dir.join("iked-a.log")).unwrap();
    assert!(
        log_a.contains("WARN") && log_a.contains("--debug-keys: every negotiated IKE and ESP key"),
        "{log_a}"
    );
    assert_eq!(log_a.matches("--debug-keys: keys written to").count(), 2, "one warning per write: {log_a}");

    let list =
        ike_ctl::call(&dir.join("a-iked.sock"), &ike_ctl::Request::List, Wait::default()).unwrap().unwrap();
    assert!(list.starts_with("1: site Established initiator 10.96.0.1:500→10.96.0.2:500"), "{list}");
    let list =
        ike_ctl::call(&dir.join("b-iked.sock"), &ike_ctl::Request::List, Wait::default()).unwrap().unwrap();
    assert!(list.starts_with("1: site Established responder"), "{list}");

    // SIGTERM: iked removes its CHILD_SAs from ipsecd, sends B a Delete, and exits 0.
    let iked_a = g.lab.children.len() - 1;
    let pid = g.lab.children[iked_a].id().to_string();
    // `ip netns exec` runs iked as its own process (exec), so the pid is iked's.
    must(&["kill", "-TERM", &pid]);
    let status = g.lab.children[iked_a].wait().unwrap();
    assert!(status.success(), "iked a on SIGTERM: {status:?}\n{}", g.logs());
    let sa_a = sas(&dir.join("a.sock"));
    assert_eq!(sa_a.matches(" esp 0x").count(), 0, "{sa_a}");
    // Its Delete reached B, which removed its side too.
    let until = Instant::now() + Duration::from_secs(5);
    while sas(&dir.join("b.sock")).contains(" esp 0x") {
        assert!(Instant::now() < until, "B kept its SAs: {}", g.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    let log_b = std::fs::read_to_string(dir.join("iked-b.log")).unwrap();
    assert!(log_b.contains("reason=deleted-by-peer"), "{log_b}");
}

/// `start_action = trap` on A: its policies are installed alone, the first ping's packet
/// makes ipsecd send an ACQUIRE, iked negotiates, the CHILD_SA is installed under the
/// trap's reqid, and the pings are answered (ipsecd holds the first packets meanwhile).
#[test]
fn traffic_brings_up_a_trapped_tunnel() {
    let Some(g) = gateways("t", "start_action = trap", false, false, false) else { return };
    let spd = |side: &str| match ctl::call(
        &g.dir.join(format!("{side}.sock")),
        &ctl::Request::Setkey("spddump;".into()),
        Wait::default(),
    ) {
        Ok(Ok(t)) => t,
        other => format!("{other:?}"),
    };
    let until = Instant::now() + Duration::from_secs(10);
    while spd("a").matches("spdadd").count() != 2 {
        assert!(Instant::now() < until, "no trap policies on A: {}\n{}", spd("a"), g.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(sas(&g.dir.join("a.sock")).matches(" esp 0x").count(), 0, "a trap has no SA");
    let reqid = spd("a")
        .split("unique:")
        .nth(1)
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .to_owned();
    assert!(g.ping("4"), "{}", g.logs());
    g.wait_for_sas();
    let sa_a = sas(&g.dir.join("a.sock"));
    assert_eq!(
        sa_a.matches(&format!("-u {reqid} ")).count(),
        2,
        "the SAs under the trap's reqid {reqid}: {sa_a}"
    );
    assert_eq!(spd("a").matches("spdadd").count(), 2, "no second set of policies: {}", spd("a"));
    let log_a = std::fs::read_to_string(g.dir.join("iked-a.log")).unwrap();
    assert!(log_a.contains("acquire conn=site child=net flow-dst=10.96.2.1"), "{log_a}");
}

/// Stops the capture and gives it to tshark with the keys iked A wrote: the IKE_AUTH
/// exchange decrypts (both AUTH payloads and A's identity seen, nothing malformed) and
/// every ESP packet of the ping has a good ICV.
fn debug_keys_decrypt_the_capture(lab: &mut Lab, cap: &Path, keys: &Path) {
    // The capture is the child started just before the ikeds.
    let tshark = lab.children.len() - 3;
    std::thread::sleep(Duration::from_millis(500));
    must(&["kill", "-INT", &lab.children[tshark].id().to_string()]);
    let _ = lab.children[tshark].wait();
    let ike = std::fs::read_to_string(keys.join("ikev2_decryption_table")).unwrap();
    let esp = std::fs::read_to_string(keys.join("esp_sa")).unwrap();
    assert_eq!((ike.lines().count(), esp.lines().count()), (1, 2), "{ike}{esp}");
    let mut opts = vec![
        "-o".to_owned(),
        format!("uat:ikev2_decryption_table:{}", ike.trim_end()),
        "-o".into(),
        "esp.enable_encryption_decode:TRUE".into(),
        "-o".into(),
        "esp.enable_authentication_check:TRUE".into(),
    ];
    for l in esp.lines() {
        opts.push("-o".into());
        opts.push(format!("uat:esp_sa:{l}"));
    }
    let count = |filter: &str| {
        let o = Command::new("tshark")
            .arg("-r")
            .arg(cap)
            .args(&opts)
            .args(["-Y", filter, "-T", "fields", "-e", "frame.number"])
            .output()
            .unwrap();
        assert!(o.status.success(), "tshark {filter}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).lines().count()
    };
    assert_eq!(count("isakmp"), 4, "IKE_SA_INIT and IKE_AUTH, each way");
    assert_eq!(count("isakmp.auth.method"), 2, "both AUTH payloads decrypted");
    assert_eq!(count("isakmp.id.data.fqdn == \"gw-a.example.org\""), 1, "A's identity, decrypted");
    assert_eq!(count("_ws.malformed || _ws.expert.severity >= error"), 0, "nothing malformed");
    assert_eq!(count("esp.icv_good == 1"), 6, "the ping, decrypted and authenticated");
    assert_eq!(count("esp.icv_bad == 1"), 0);
}

/// B holds another pre-shared key: each side logs a clear `authentication failed: …` line,
/// B's counter says so, and neither ipsecd gets an SA.
#[test]
fn a_wrong_psk_is_refused_with_a_clear_line_on_both_sides() {
    let Some(g) = gateways("p", "start_action = start", false, true, false) else { return };
    let log =
        |side: &str| std::fs::read_to_string(g.dir.join(format!("iked-{side}.log"))).unwrap_or_default();
    let until = Instant::now() + Duration::from_secs(15);
    while !(log("a").contains("authentication failed: ") && log("b").contains("authentication failed: ")) {
        assert!(Instant::now() < until, "no authentication failure logged on both sides:\n{}", g.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(log("b").contains("PSK AUTH value does not match"), "{}", log("b"));
    let stats = ike_ctl::call(&g.dir.join("b-iked.sock"), &ike_ctl::Request::Stats, Wait::default())
        .unwrap()
        .unwrap();
    assert!(stats.contains("authentication failures 1,"), "{stats}");
    for side in ["a", "b"] {
        assert_eq!(sas(&g.dir.join(format!("{side}.sock"))).matches(" esp 0x").count(), 0, "{side}");
    }
}

/// `ipsecctl ike rekey` under traffic: a ping runs (every 20 ms) while A's operator
/// rekeys the CHILD_SA by name and then the IKE SA by its number in `list`; the CHILD_SA's
/// SPIs in ipsecd change on both sides, and no ping is lost (make-before-break; B, the
/// rekey's responder, answers on the new SA only once A's Delete of the old one came).
#[test]
fn ipsecctl_rekey_under_traffic_loses_no_ping() {
    let Some(g) = gateways("r", "start_action = start", false, false, false) else { return };
    g.wait_for_sas();
    assert!(g.ping("2"), "{}", g.logs());
    let spis = |side: &str| -> Vec<String> {
        let mut v: Vec<String> = sas(&g.dir.join(format!("{side}.sock")))
            .split(" esp ")
            .skip(1)
            .map(|t| t.split_whitespace().next().unwrap_or_default().to_owned())
            .collect();
        v.sort();
        v
    };
    let (a0, b0) = (spis("a"), spis("b"));
    assert_eq!(a0.len(), 2, "{a0:?}");
    let ping = Command::new("ip")
        .args(["netns", "exec", &g.a, "ping", "-q", "-c", "200", "-i", "0.02", "-W", "3"])
        .args(["-I", "10.96.1.1", "10.96.2.1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let ike = |what: &str| {
        ike_ctl::call(&g.dir.join("a-iked.sock"), &ike_ctl::Request::Rekey(what.into()), Wait::default())
            .unwrap()
            .unwrap_or_else(|e| panic!("rekey {what}: {e}\n{}", g.logs()))
    };
    std::thread::sleep(Duration::from_millis(800));
    assert!(ike("site/net").starts_with("rekeying CHILD_SA site/net"));
    let until = Instant::now() + Duration::from_secs(10);
    while spis("a").len() != 2
        || spis("a").iter().any(|s| a0.contains(s))
        || spis("b").iter().any(|s| b0.contains(s))
    {
        assert!(Instant::now() < until, "SPIs unchanged: {:?} {:?}\n{}", spis("a"), spis("b"), g.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    let list = |side: &str| {
        ike_ctl::call(&g.dir.join(format!("{side}-iked.sock")), &ike_ctl::Request::List, Wait::default())
            .unwrap()
            .unwrap()
    };
    let ike_before = list("a").lines().next().unwrap().to_owned();
    std::thread::sleep(Duration::from_millis(800));
    assert!(ike("1").starts_with("rekeying IKE SA"));
    let until = Instant::now() + Duration::from_secs(10);
    while list("a").lines().next().unwrap() == ike_before || !list("a").starts_with("1: site Established") {
        assert!(Instant::now() < until, "the IKE SA was not rekeyed: {}\n{}", list("a"), g.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = ping.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("200 packets transmitted, 200 received"), "{text}\n{}", g.logs());
    assert!(list("b").contains("site/net"), "B's CHILD_SA moved to its new IKE SA: {}", list("b"));
}

/// SIGHUP: a file with an error is refused, the log line naming the error, and the
/// running configuration stays; a good file that adds a connection is taken, the log says
/// what changed, and the established SAs (their SPIs in ipsecd) carry on.
#[test]
fn sighup_refuses_a_bad_file_and_keeps_established_sas() {
    let Some(g) = gateways("h", "start_action = start", false, false, false) else { return };
    g.wait_for_sas();
    assert!(g.ping("2"), "{}", g.logs());
    // The SAs' lines (SPIs, reqid, lifetimes), not their ages and counters.
    let sa_lines = || -> Vec<String> {
        sas(&g.dir.join("a.sock")).lines().filter(|l| l.starts_with("add ")).map(str::to_owned).collect()
    };
    let sa_before = sa_lines();
    assert_eq!(sa_before.len(), 2, "{sa_before:?}");
    let conf = g.dir.join("iked-a.conf");
    let good = std::fs::read_to_string(&conf).unwrap();
    let pid = g.lab.children.last().unwrap().id().to_string();
    let log = || std::fs::read_to_string(g.dir.join("iked-a.log")).unwrap();
    let wait_log = |what: &str| {
        let until = Instant::now() + Duration::from_secs(10);
        while !log().contains(what) {
            assert!(Instant::now() < until, "no {what:?} in the log:\n{}", g.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    };

    std::fs::write(&conf, good.replace("esp_proposals = aes128gcm16", "esp_proposal = aes128gcm16")).unwrap();
    must(&["kill", "-HUP", &pid]);
    wait_log("reload refused, the running configuration stays");
    let line = log().lines().find(|l| l.contains("reload refused")).unwrap().to_owned();
    assert!(line.contains("esp_proposal") && line.contains("iked-a.conf"), "the error is named: {line}");

    let added = good.replacen(
        "connections {\n",
        "connections {\n spare {\n  remote_addrs = 10.96.0.9\n  local { auth = psk\n id = gw-a.example.org\n }\n  \
         remote { auth = psk\n id = gw-b.example.org\n }\n  children { c { } }\n }\n",
        1,
    );
    std::fs::write(&conf, added).unwrap();
    must(&["kill", "-HUP", &pid]);
    wait_log("added [\"spare\"], removed [], changed [], 1 unchanged");
    assert_eq!(sa_lines(), sa_before, "the same SAs in ipsecd");
    assert!(g.ping("2"), "{}", g.logs());
}

/// A second child, trapped, on a connection whose IKE SA is up: a ping between the hosts
/// it covers makes ipsecd send an ACQUIRE, and iked negotiates the CHILD_SA on the IKE SA
/// it has (CREATE_CHILD_SA without REKEY_SA, no second IKE SA); the ping is answered and
/// both tunnels carry traffic.
#[test]
fn traffic_on_a_trapped_second_child_makes_it_on_the_ike_sa() {
    let Some(g) = gateways("c", "start_action = start", false, false, true) else { return };
    g.wait_for_sas();
    assert!(g.ping("2"), "{}", g.logs());
    let o = Command::new("ip")
        .args(["netns", "exec", &g.a, "ping", "-q", "-c", "4", "-i", "0.2", "-W", "3"])
        .args(["-I", "10.96.11.1", "10.96.12.1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), g.logs());
    for side in ["a", "b"] {
        let n = sas(&g.dir.join(format!("{side}.sock"))).matches(" esp 0x").count();
        assert_eq!(n, 4, "{side}: two CHILD_SAs\n{}", g.logs());
    }
    let list =
        ike_ctl::call(&g.dir.join("a-iked.sock"), &ike_ctl::Request::List, Wait::default()).unwrap().unwrap();
    assert_eq!(list.lines().filter(|l| l.starts_with("1: ") || l.starts_with("2: ")).count(), 1, "{list}");
    assert!(list.contains("site/net") && list.contains("site/web"), "{list}");
    let log_a = std::fs::read_to_string(g.dir.join("iked-a.log")).unwrap();
    assert!(log_a.contains("acquire conn=site child=web flow-dst=10.96.12.1 ike_sa="), "{log_a}");
    assert!(g.ping("2"), "the first tunnel still carries: {}", g.logs());
}
