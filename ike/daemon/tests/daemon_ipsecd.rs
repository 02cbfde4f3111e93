//! iked's event loop against a real ipsecd: the loop's I/O, with a scripted engine in place
//! of the state machine (which is not on this branch yet).
//!
//! ```text
//!  ns ocfk<pid>: ipsecd (TUN, no routes) ── ctl.sock, ctl-ike.sock (files, reached from here)
//!  this test: Daemon<Scripted> in a thread ── relay attach, monitor subscription, iked.sock
//!             ipsecd::ike_ctl::call ("ipsecctl ike …")  ─▶ iked ─▶ Scripted::command
//!             ipsecd::ctl::call (dump, spddump)          ─▶ what iked installed in ipsecd
//! ```
//!
//! What is checked is real: the SAs and policies ipsecd holds after `up` (its own dump),
//! the refusal of a duplicate install reaching the engine with ipsecd's reason (one
//! transaction: no policy added twice), ipsecd's hard-expire lines reaching the engine as
//! events, the engine's events reaching an `ike monitor` subscriber, `down` leaving ipsecd
//! empty, a SIGHUP reload handing the engine the configuration's difference (and a file
//! that does not read handing it nothing), the metrics endpoint serving the engine's
//! counters, SIGTERM ending the loop after the engine's
//! shutdown. The engine only scripts which outputs to ask for; no assertion here depends
//! on it beyond counting what the loop handed it.
//!
//! Needs root (a network namespace, a TUN) and `ip`, and ipsecd built beside this test
//! (`cargo build -p ipsecd`); skipped otherwise, saying why.

use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ike_core::config::TrafficSelector;
use ike_core::crypto::Encr;
use iked::config::{Config, Diff};
use iked::daemon::control::Request;
use iked::daemon::engine::{Engine, Event, Output, Severity};
use iked::daemon::run::{Daemon, Options};
use iked::daemon::setkey::{ChildInstall, ChildRemove, SaKeys, Sas};
use ipsec_core::control::{Lifetime, Mode};
use ipsec_core::sad::Event as IpsecEvent;
use ipsecd::ctl::{self, Wait};
use ipsecd::ike_ctl;
use ipsecd::ike_relay::Datagram;
use zeroize::Zeroizing;

mod common;
use common::{can_run, runnable, Lab};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A CHILD_SA between 192.0.2.1 and 192.0.2.2 with these SPIs (in, out).
fn child(spis: (u32, u32), hard: Option<u64>, policies: bool) -> ChildInstall {
    // A key per SA (ipsecd refuses a key installed twice: GCM nonces would repeat).
    let keys = |spi: u32| SaKeys {
        spi,
        encr: Zeroizing::new(spi.to_be_bytes().repeat(5)),
        integ: Zeroizing::new(Vec::new()),
    };
    ChildInstall {
        reqid: 7,
        mode: Mode::Tunnel,
        local: ip("192.0.2.1"),
        remote: ip("192.0.2.2"),
        natt: None,
        encr: Encr::AesGcm16 { key_len: 16 },
        integ: None,
        esn: false,
        inbound: keys(spis.0),
        outbound: keys(spis.1),
        soft: Lifetime::default(),
        hard: Lifetime { seconds: hard, bytes: None, packets: None },
        local_ts: TrafficSelector::parse_list("10.1.0.0/24").unwrap(),
        remote_ts: TrafficSelector::parse_list("10.2.0.0/24").unwrap(),
        policies,
        sas: Sas::Both,
    }
}

fn remove(spis: (u32, u32)) -> ChildRemove {
    let c = child(spis, None, true);
    ChildRemove {
        reqid: c.reqid,
        local: c.local,
        remote: c.remote,
        natt: false,
        inbound_spi: spis.0,
        outbound_spi: spis.1,
        mode: c.mode,
        local_ts: c.local_ts,
        remote_ts: c.remote_ts,
        policies: true,
        outbound: true,
    }
}

/// Asks for the outputs each command names; counts what the loop hands it.
#[derive(Default)]
struct Scripted {
    hard_expiries: Arc<AtomicU64>,
    refusals: Arc<Mutex<Vec<String>>>,
    reloads: Arc<Mutex<Vec<Diff>>>,
}

impl Engine for Scripted {
    fn start(&mut self, _: Instant, _: &mut Vec<Output>) {}
    fn datagram(&mut self, _: Instant, _: Datagram, _: &mut Vec<Output>) {}
    fn tick(&mut self, _: Instant, _: &mut Vec<Output>) {}
    fn next_deadline(&self) -> Option<Instant> {
        None
    }
    fn sa_event(&mut self, _: Instant, ev: &IpsecEvent, _: &mut Vec<Output>) {
        if matches!(ev, IpsecEvent::HardExpired { .. }) {
            self.hard_expiries.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn installed(&mut self, _: Instant, id: u64, r: Result<(), String>, out: &mut Vec<Output>) {
        if let Err(e) = &r {
            self.refusals.lock().unwrap().push(e.clone());
        }
        let line = format!("child-installed id={id} ok={}", r.is_ok());
        out.push(Output::Event(Event { severity: Severity::Info, line }));
    }
    fn events_lost(&mut self, _: Instant, _: u64, _: &mut Vec<Output>) {}
    fn command(&mut self, _: Instant, req: &Request, out: &mut Vec<Output>) -> Result<String, String> {
        match req {
            Request::Up { conn, .. } if conn == "site" => {
                out.push(Output::Install { id: 1, child: child((0x1001, 0x2001), None, true) })
            }
            // A rekeyed CHILD_SA that ipsecd expires after a second.
            Request::Rekey(_) => {
                out.push(Output::Install { id: 2, child: child((0x1002, 0x2002), Some(1), false) })
            }
            Request::Down(c) if c == "site" => out.push(Output::Remove(remove((0x1001, 0x2001)))),
            Request::Stats => {
                return Ok(format!("hard-expiries {}\n", self.hard_expiries.load(Ordering::SeqCst)))
            }
            other => return Err(format!("not scripted: {other:?}")),
        }
        Ok("done\n".to_owned())
    }
    fn reload(&mut self, _: Instant, _: Config, diff: &Diff, _: &mut Vec<Output>) -> Result<(), String> {
        self.reloads.lock().unwrap().push(diff.clone());
        Ok(())
    }
    fn metrics(&self) -> String {
        format!("scripted_hard_expiries {}\n", self.hard_expiries.load(Ordering::SeqCst))
    }
    fn shutdown(&mut self, _: Instant, out: &mut Vec<Output>) {
        out.push(Output::Event(Event { severity: Severity::Info, line: "shutting-down".into() }));
    }
}

fn dump(ctl: &Path, what: &str) -> String {
    match ctl::call(ctl, &ctl::Request::Setkey(what.into()), Wait::default()) {
        Ok(Ok(t)) => t,
        other => panic!("{what}: {other:?}"),
    }
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(15);
    while !ok() {
        assert!(Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_loop_installs_removes_and_hears_ipsecd() {
    let Some(ipsecd) = runnable("daemon_ipsecd", can_run()) else { return };
    let id = std::process::id();
    let mut lab = Lab::single(std::env::temp_dir().join(format!("iked-loop-{id}")), format!("ocfk{id}"));
    let dir = lab.dir.clone();
    let ctl_sock = dir.join("ctl.sock");
    let log = std::fs::File::create(dir.join("ipsecd.log")).unwrap();
    lab.children.push(
        Command::new("ip")
            .args(["netns", "exec", &lab.ns[0], ipsecd.to_str().unwrap(), "-s", ctl_sock.to_str().unwrap()])
            .args(["--tun", "ikk0", "--no-routes", "--threads", "1", "--nat-keepalive", "0"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let relay = dir.join("ctl-ike.sock");
    let ipsecd_log = || std::fs::read_to_string(dir.join("ipsecd.log")).unwrap_or_default();
    wait_for("ipsecd starts", || {
        relay.exists() && ctl::call(&ctl_sock, &ctl::Request::Stats, Wait::default()).is_ok()
    });

    let engine = Scripted::default();
    let refusals = engine.refusals.clone();
    let reloads = engine.reloads.clone();
    let iked_sock = dir.join("iked.sock");
    // A free port for the metrics endpoint.
    let metrics_addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let opts = Options {
        config: dir.join("iked.conf"),
        relay: relay.clone(),
        ipsecd: ctl_sock.clone(),
        control: iked_sock.clone(),
        debug_keys: None,
        metrics: Some(metrics_addr),
    };
    let mut daemon =
        Daemon::new(engine, Config::default(), opts).unwrap_or_else(|e| panic!("{e}: {}", ipsecd_log()));
    let loop_thread = std::thread::spawn(move || daemon.run());
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&iked_sock).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "iked's control socket is root's");

    // `ipsecctl ike monitor`: every engine event, as it comes.
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let (s, sock) = (seen.clone(), iked_sock.clone());
    std::thread::spawn(move || {
        let _ = ike_ctl::monitor(&sock, |l| {
            s.lock().unwrap().push(l.to_owned());
            true
        });
    });
    std::thread::sleep(Duration::from_millis(200));

    let call = |r: Request| ike_ctl::call(&iked_sock, &r, Wait::default()).unwrap();
    // The reply comes first (as `up` answers before a negotiation ends), the install after.
    assert_eq!(call(Request::Up { conn: "site".into(), new: false }), Ok("done\n".into()));
    wait_for("the CHILD_SA is installed", || {
        seen.lock().unwrap().iter().any(|l| l == "child-installed id=1 ok=true")
    });
    let sas = dump(&ctl_sock, "dump;");
    assert!(
        sas.contains("192.0.2.1 192.0.2.2 esp 0x2001") && sas.contains("192.0.2.2 192.0.2.1 esp 0x1001"),
        "{sas}"
    );
    assert!(sas.contains("-u 7") && !sas.contains("0000200100002001"), "reqid, and no key in a dump: {sas}");
    let spd = dump(&ctl_sock, "spddump;");
    assert!(spd.contains("10.1.0.0/24") && spd.contains("unique:7"), "{spd}");
    assert_eq!(spd.matches("spdadd").count(), 2, "{spd}");

    // The same SAs again: ipsecd refuses, the engine hears why, nothing was added.
    assert_eq!(call(Request::Up { conn: "site".into(), new: false }), Ok("done\n".into()));
    wait_for("the refusal reaches the engine", || refusals.lock().unwrap().len() == 1);
    let why = refusals.lock().unwrap()[0].clone();
    assert!(why.contains("0x2001") || why.contains("exists"), "ipsecd's reason: {why}");
    assert_eq!(dump(&ctl_sock, "spddump;").matches("spdadd").count(), 2);

    // A CHILD_SA with a 1 s hard lifetime: ipsecd's two hard-expire lines reach the engine.
    assert_eq!(call(Request::Rekey("site/net".into())), Ok("done\n".into()));
    // The loop adds its own counter to the engine's stats.
    let stats = "hard-expiries 2\nrelay: datagrams dropped (socket full) 0\n";
    wait_for("the hard expiries reach the engine", || call(Request::Stats) == Ok(stats.into()));
    // The metrics endpoint serves the engine's counters, at most a few turns old.
    let scrape = || {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(metrics_addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    };
    wait_for("the metrics endpoint shows the counters", || {
        scrape().ends_with("\r\n\r\nscripted_hard_expiries 2\n")
    });
    assert!(scrape().starts_with("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"));
    assert!(call(Request::Up { conn: "elsewhere".into(), new: false }).unwrap_err().contains("not scripted"));

    assert_eq!(call(Request::Down("site".into())), Ok("done\n".into()));
    wait_for("down empties ipsecd", || {
        !dump(&ctl_sock, "dump;").contains("esp 0x") && !dump(&ctl_sock, "spddump;").contains("spdadd")
    });

    wait_for("the monitor saw the installs", || {
        let s = seen.lock().unwrap();
        ["child-installed id=1 ok=true", "child-installed id=1 ok=false", "child-installed id=2 ok=true"]
            .iter()
            .all(|w| s.iter().any(|l| l == w))
    });

    // SIGHUP: the file is read again and the engine gets the difference; a file that does
    // not read is refused, and the running configuration stays.
    let conf = dir.join("iked.conf");
    let sighup = || assert!(Command::new("kill").args(["-HUP", &id.to_string()]).status().unwrap().success());
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/configs/settings.conf"), &conf).unwrap();
    sighup();
    wait_for("the reload reaches the engine", || reloads.lock().unwrap().len() == 1);
    let d = reloads.lock().unwrap()[0].clone();
    assert!(d.added.contains(&"s1".to_owned()) && d.removed.is_empty() && d.unchanged.is_empty(), "{d:?}");
    std::fs::write(&conf, "connections { broken").unwrap();
    sighup();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(call(Request::Stats), Ok(stats.into()), "the loop still answers");
    assert_eq!(reloads.lock().unwrap().len(), 1, "a bad file is not handed to the engine");

    // SIGTERM: the loop asks the engine to shut down, and returns.
    assert!(Command::new("kill").args(["-TERM", &id.to_string()]).status().unwrap().success());
    assert_eq!(loop_thread.join().unwrap(), Ok(()));
    wait_for("the monitor saw the shutdown", || seen.lock().unwrap().iter().any(|l| l == "shutting-down"));
}
