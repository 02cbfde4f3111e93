//! The control path's changes on the monitor stream, end to end inside one process: a
//! core behind the control socket (its requests applied as the daemon applies them,
//! `service::apply_setkey`), the daemon's publishing step (`monitor::publish_events`, as
//! its tick), and a subscriber reading over the socket (`ctl::monitor`, what `ipsecctl
//! monitor` runs). Each request's changes come as `sa-*` and `policy-*` lines in order,
//! a refused request's not at all, and no line holds a key.

use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use ipsec_core::{Ipsec, Packet, Sink};
use ipsecd::ctl::{call, Reply, Request, Wait};
use ipsecd::ctl_server::{Counters, Handler, Limits, Server};
use ipsecd::monitor::publish_events;
use ipsecd::service::apply_setkey;

struct Nowhere;

impl Sink for Nowhere {
    fn transmit(&self, _: Packet) {}
    fn deliver(&self, _: Packet) {}
}

/// The daemon's control handler without its routes.
struct Applies(Arc<Ipsec>);

impl Handler for Applies {
    fn stats(&self, _: &Counters) -> String {
        String::new()
    }
    fn change(&self, body: &str) -> Reply {
        apply_setkey(&self.0, "control", body)
    }
}

const GCM_KEY: &str = "0x1111111111111111111111111111111111111111";
const SHA_KEY: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20";

#[test]
fn control_changes_come_as_monitor_lines_in_order_and_refusals_say_nothing() {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let core = Arc::new(Ipsec::new(fw, Arc::new(Nowhere)));
    let dir = std::env::temp_dir().join(format!("ipsecd-monitor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ctl.sock");
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock).unwrap();
    let server = Server::new(Applies(core.clone()), Limits::default());
    let s = server.clone();
    std::thread::spawn(move || s.serve(&listener));
    // The daemon's tick: the core's events to the hub.
    let stop = Arc::new(AtomicBool::new(false));
    let tick = {
        let (core, hub, stop) = (core.clone(), server.hub().clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                publish_events(&core, &hub);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let (tx, rx) = mpsc::channel();
    let path = sock.clone();
    std::thread::spawn(move || ipsecd::ctl::monitor(&path, |l| tx.send(l.to_owned()).is_ok()));
    let t = std::time::Instant::now();
    while server.hub().subscribers() == 0 {
        assert!(t.elapsed() < Duration::from_secs(60), "the monitor did not subscribe");
        std::thread::sleep(Duration::from_millis(5));
    }
    let setkey = |text: &str| call(&sock, &Request::Setkey(text.to_owned()), Wait::default()).unwrap();
    let next = || rx.recv_timeout(Duration::from_secs(60)).expect("a monitor line");

    let sa1 = "src=192.0.2.1 dst=192.0.2.2 proto=esp spi=0x1001";
    let steps: [(String, Vec<String>); 8] = [
        (
            format!(
                "add 192.0.2.1 192.0.2.2 esp 0x1001 -m tunnel -u 7 -E aes-gcm-16 {GCM_KEY};\n\
                 add 192.0.2.2[4500] 192.0.2.1[4501] esp-udp 0x1002 -m tunnel -f esn -E aes-cbc \
                 0x00112233445566778899aabbccddeeff -A hmac-sha2-256 {SHA_KEY};\n\
                 add 2001:db8::1 2001:db8::2 ah 0x2001 -m transport -A hmac-sha2-256 {SHA_KEY};\n\
                 add 192.0.2.1 192.0.2.2 ipcomp 0x3001 -m tunnel -C deflate;\n\
                 spdadd 10.1.0.0/24 10.2.0.0/24[53] udp -P out ipsec esp/tunnel/192.0.2.1-192.0.2.2/unique:7;\n\
                 spdadd 10.2.0.0/24 10.1.0.0/24 any -P in discard;"
            ),
            vec![
                format!("sa-add {sa1} mode=tunnel reqid=7 enc=aes-gcm-16"),
                "sa-add src=192.0.2.2 dst=192.0.2.1 proto=esp-udp spi=0x1002 mode=tunnel reqid=0 enc=aes-cbc \
                 auth=hmac-sha2-256 esn=1 sport=4500 dport=4501"
                    .to_owned(),
                "sa-add src=2001:db8::1 dst=2001:db8::2 proto=ah spi=0x2001 mode=transport reqid=0 \
                 auth=hmac-sha2-256"
                    .to_owned(),
                "sa-add src=192.0.2.1 dst=192.0.2.2 proto=ipcomp spi=0x3001 mode=tunnel reqid=0 comp=deflate"
                    .to_owned(),
                "policy-add dir=out src=10.1.0.0/24 dst=10.2.0.0/24 upper=17 sport=any dport=53 action=ipsec \
                 rules=esp/tunnel/192.0.2.1-192.0.2.2/unique:7"
                    .to_owned(),
                "policy-add dir=in src=10.2.0.0/24 dst=10.1.0.0/24 upper=any sport=any dport=any action=discard"
                    .to_owned(),
            ],
        ),
        // update replaces the installed SA (same keys: it goes on).
        (
            format!("update 192.0.2.1 192.0.2.2 esp 0x1001 -m tunnel -u 7 -r 128 -E aes-gcm-16 {GCM_KEY};"),
            vec![format!("sa-update {sa1} mode=tunnel reqid=7 enc=aes-gcm-16")],
        ),
        // migrate: the peer's NAT gave it a new port (the local port stays).
        (
            "migrate 192.0.2.2 192.0.2.1 esp-udp 0x1002 to 192.0.2.2 192.0.2.1[61000];".to_owned(),
            vec!["sa-migrate src=192.0.2.2 dst=192.0.2.1 proto=esp-udp spi=0x1002 new-src=192.0.2.2 \
                  new-dst=192.0.2.1 new-sport=4500 new-dport=61000"
                .to_owned()],
        ),
        (
            "delete 192.0.2.1 192.0.2.2 esp 0x1001;\nspddelete 10.2.0.0/24 10.1.0.0/24 any -P in;".to_owned(),
            vec![
                format!("sa-delete {sa1}"),
                "policy-delete dir=in src=10.2.0.0/24 dst=10.1.0.0/24 upper=any sport=any dport=any".to_owned(),
            ],
        ),
        // deleteall: one line per SA it removed, the larval one getspi reserved too.
        (
            "getspi 192.0.2.1 192.0.2.2 ipcomp min 0x4000 max 0x4000;\n\
             add 192.0.2.1 192.0.2.2 ipcomp 0x3002 -m tunnel -C deflate;\n\
             deleteall 192.0.2.1 192.0.2.2 ipcomp;\n\
             spdadd 10.3.0.0/24 10.4.0.0/24 any -P fwd none;"
                .to_owned(),
            vec![
                "sa-add src=192.0.2.1 dst=192.0.2.2 proto=ipcomp spi=0x3002 mode=tunnel reqid=0 comp=deflate"
                    .to_owned(),
                "sa-delete src=192.0.2.1 dst=192.0.2.2 proto=ipcomp spi=0x3001".to_owned(),
                "sa-delete src=192.0.2.1 dst=192.0.2.2 proto=ipcomp spi=0x3002".to_owned(),
                "sa-delete src=192.0.2.1 dst=192.0.2.2 proto=ipcomp spi=0x4000".to_owned(),
                "policy-add dir=fwd src=10.3.0.0/24 dst=10.4.0.0/24 upper=any sport=any dport=any action=none"
                    .to_owned(),
            ],
        ),
        // A refused request (its last statement clashes) changed nothing: no line. The
        // marker after it is the next line.
        (
            format!(
                "flush;\nadd 192.0.2.9 192.0.2.2 esp 0x1003 -m tunnel -E aes-gcm-16 0x{};\n\
                 delete 192.0.2.9 192.0.2.9 esp 0x9999;",
                "22".repeat(20)
            ),
            vec![],
        ),
        ("flush esp-udp;\nflush;".to_owned(), vec!["sa-flush proto=esp-udp".to_owned(), "sa-flush proto=any".to_owned()]),
        ("spdflush;".to_owned(), vec!["policy-flush".to_owned()]),
    ];
    for (text, want) in &steps {
        let reply = setkey(text);
        assert_eq!(reply.is_ok(), !want.is_empty(), "{text}: {reply:?}");
        for w in want {
            let got = next();
            assert_eq!(&got, w, "after {text}");
            assert!(!got.contains("1111111111") && !got.contains("0102030405"), "a key in {got}");
        }
    }
    // Nothing more: reads (dump, get, spddump) change nothing. Lines come in order, so the
    // marker after them is the next line (no wait for an absence).
    setkey("dump;\nspddump;").unwrap();
    setkey("add 192.0.2.1 192.0.2.2 ipcomp 0x3009 -m tunnel -C deflate;").unwrap();
    assert_eq!(
        next(),
        "sa-add src=192.0.2.1 dst=192.0.2.2 proto=ipcomp spi=0x3009 mode=tunnel reqid=0 comp=deflate",
        "reads make no line"
    );
    stop.store(true, Ordering::Relaxed);
    tick.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
