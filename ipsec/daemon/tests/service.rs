//! The daemon's configuration logic without I/O: setkey text applied through the control
//! path, the error that names line and column, and the SIGHUP reload that keeps the state
//! of SAs whose spec did not change.

use std::sync::Arc;

use ipsec_core::{Ipsec, Packet, Results, Sink};
use ipsecd::config::{reload, reload_file, Desired, Reloads};
use ipsecd::metrics::stats;
use ipsecd::service::{apply_setkey, parse};

struct Nowhere;

impl Sink for Nowhere {
    fn transmit(&self, _: Packet) {}
    fn deliver(&self, _: Packet) {}
}

fn core() -> Ipsec {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    Ipsec::new(fw, Arc::new(Nowhere))
}

const CONF: &str = "flush;\nspdflush;\n\
add 10.99.0.1 10.99.0.2 esp 0x1001 -m tunnel -E aes-gcm-16 0x1111111111111111111111111111111111111111;\n\
add 10.99.0.2 10.99.0.1 esp 0x1002 -m tunnel -E aes-gcm-16 0x2222222222222222222222222222222222222222;\n\
spdadd 10.98.1.0/24 10.98.2.0/24 any -P out ipsec esp/tunnel/10.99.0.1-10.99.0.2/require;\n";

/// An IPv4 UDP packet from 10.98.1.1 to 10.98.2.1.
fn packet() -> Packet {
    let mut p = vec![0x45, 0, 0, 48, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 98, 1, 1, 10, 98, 2, 1];
    let c = ipsec_wire::checksum::checksum(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&[0x30, 0x39, 0, 53, 0, 28, 0, 0]);
    p.resize(48, 7);
    Packet::with_headroom(&p)
}

/// A core configured with [`CONF`] that has sent `n` packets on SA 0x1001.
fn configured_after(n: usize) -> Ipsec {
    let c = core();
    apply_setkey(&c, "f", CONF).unwrap();
    for _ in 0..n {
        c.output_one(packet(), &mut Results::default()).unwrap();
    }
    c
}

fn last_seq(core: &Ipsec, spi: u32) -> u64 {
    core.databases().sad.dump(None).iter().find(|sa| sa.id.spi == spi).map(|sa| sa.last_sequence()).unwrap()
}

/// The SAs and policies as `dump` and `spddump` list them, less the `last-used` lines:
/// those give milliseconds since the last packet, which move between two dumps.
fn state(c: &Ipsec) -> String {
    apply_setkey(c, "ctl", "dump;\nspddump;\n")
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("#\tlast-used"))
        .map(|l| format!("{l}\n"))
        .collect()
}
#[test]
fn setkey_text_is_applied_and_dumps_read_back() {
    let c = core();
    assert_eq!(apply_setkey(&c, "f", CONF), Ok(String::new()));
    let dump = apply_setkey(&c, "ctl", "dump;\nspddump;\n").unwrap();
    assert_eq!(dump.matches("add 10.99.0").count(), 2, "{dump}");
    assert!(dump.contains("spdadd 10.98.1.0/24 10.98.2.0/24"), "{dump}");
    // What dump prints is setkey again: it parses.
    parse("dump", &dump).unwrap();
}

#[test]
fn a_malformed_request_names_line_and_column_and_changes_nothing() {
    let c = core();
    apply_setkey(&c, "f", CONF).unwrap();
    let err = apply_setkey(&c, "ctl", "flush;\nadd 10.99.0.1 nowhere esp 1;\n").unwrap_err();
    assert!(err.starts_with("ctl:2:15: expected a destination address"), "{err}");
    assert_eq!(c.databases().sad.dump(None).len(), 2, "the flush before the error did not happen");
    // A statement the databases refuse is named by its line.
    let err = apply_setkey(&c, "ctl", CONF.lines().nth(2).unwrap()).unwrap_err();
    assert!(err.starts_with("ctl:1:1: add 10.99.0.1 10.99.0.2 esp 0x1001"), "{err}");
    assert!(err.contains("already exists"), "{err}");
    assert!(!err.contains("1111111111"), "an error shows no key: {err}");
}

/// Before: an error printed the whole statement, key and all (and the `dump` output
/// before it), and the daemon logs errors; it said "these addresses" clash when only the
/// SPI and destination did. Now no key, and what clashes is named.
#[test]
fn errors_name_what_clashes_and_never_a_key() {
    let c = core();
    apply_setkey(&c, "f", CONF).unwrap();
    let other =
        "add 10.99.0.9 10.99.0.2 esp 0x1001 -E aes-gcm-16 0x4444444444444444444444444444444444444444;";
    let err = apply_setkey(&c, "ctl", &format!("dump;\n{other}\n")).unwrap_err();
    assert_eq!(
        err,
        "ctl:2:1: add 10.99.0.9 10.99.0.2 esp 0x1001 -m any -r 64 -E aes-gcm-16 (key not shown): its SPI and \
         destination are those of the SA 10.99.0.1 -> 10.99.0.2 esp SPI 0x1001 (inbound ESP is matched by SPI and \
         destination alone) (nothing was changed)"
    );
    for key in ["1111111111", "2222222222", "4444444444"] {
        assert!(!err.contains(key), "{err}");
    }
    let bad_len = "add 10.99.0.9 10.99.0.2 esp 0x3001 -E aes-gcm-16 0x5555555555555555555555555555555555;";
    let err = apply_setkey(&c, "ctl", bad_len).unwrap_err();
    assert!(err.contains("17 bytes") && !err.contains("5555555555"), "{err}");
}

/// Before: a control request stopped at the first refused statement, the ones before it
/// applied. Now a request is one transaction.
#[test]
fn a_refused_statement_undoes_the_whole_request() {
    let c = core();
    apply_setkey(&c, "f", CONF).unwrap();
    let before = state(&c);
    let text = "flush;\nspdflush;\n\
        add 10.99.0.1 10.99.0.2 esp 0x2001 -E aes-gcm-16 0x6666666666666666666666666666666666666666;\n\
        add 10.99.0.1 10.99.0.2 esp 0x2001 -E aes-gcm-16 0x7777777777777777777777777777777777777777;\n";
    let err = apply_setkey(&c, "ctl", text).unwrap_err();
    assert!(err.starts_with("ctl:4:1:") && err.contains("already exists"), "{err}");
    assert_eq!(state(&c), before);
    assert_eq!(last_seq(&c, 0x1001), 0);
}

/// Before: deleting an AEAD SA and adding it again with the same key started its sequence
/// numbers, the nonces, at 1 again. Now refused, named, without the key.
#[test]
fn an_aead_key_is_never_installed_twice() {
    let c = configured_after(3);
    apply_setkey(&c, "ctl", "delete 10.99.0.1 10.99.0.2 esp 0x1001;").unwrap();
    let err = apply_setkey(&c, "ctl", CONF.lines().nth(2).unwrap()).unwrap_err();
    assert!(
        err.contains("already installed in this ipsecd, by the SA 10.99.0.1 -> 10.99.0.2 esp SPI 0x1001"),
        "{err}"
    );
    assert!(!err.contains("1111111111"), "{err}");
    // Under another SPI, while the first is installed, too.
    let twin = CONF.lines().nth(3).unwrap().replace("0x1002", "0x1003");
    let err = apply_setkey(&c, "ctl", &twin).unwrap_err();
    assert!(err.contains("nonce reuse"), "{err}");
    // In one request, a delete and an add with the same key continue the SA instead.
    let again = CONF.lines().nth(3).unwrap().replace("-m tunnel", "-m tunnel -r 256");
    apply_setkey(&c, "ctl", &format!("delete 10.99.0.2 10.99.0.1 esp 0x1002;\n{again}")).unwrap();
}

#[test]
fn reload_keeps_unchanged_sas_with_their_sequence_numbers_and_replaces_changed_ones() {
    let c = configured_after(5);
    assert_eq!(last_seq(&c, 0x1001), 5);

    let same = Desired::of(&parse("f", CONF).unwrap());
    let r = reload(&c, &same).unwrap();
    assert_eq!((r.kept, r.updated, r.added, r.removed, r.policies), (2, 0, 0, 0, 1));
    assert_eq!(last_seq(&c, 0x1001), 5, "an unchanged SA keeps its sequence number");
    c.output_one(packet(), &mut Results::default()).unwrap();
    assert_eq!(last_seq(&c, 0x1001), 6);

    // A new key for 0x1001 is a new SA: it starts again at 1 (a new key, so no nonce reuse).
    let changed = CONF
        .replace("0x1111111111111111111111111111111111111111", "0x3333333333333333333333333333333333333333");
    let r = reload(&c, &Desired::of(&parse("f", &changed).unwrap())).unwrap();
    assert_eq!((r.kept, r.added, r.removed), (1, 1, 1));
    assert_eq!(last_seq(&c, 0x1001), 0);
    assert_eq!(c.databases().sad.dump(None).len(), 2);
    assert!(stats(&c, &ipsecd::net::IoCounters::default(), &Reloads::default()).contains("spi 0x1001"));
}

/// Before: a reload that changed anything but the key (`-r 128`, a lifetime) replaced the
/// SA, whose sequence number, the AES-GCM nonce, started again at 1 under the same key.
#[test]
fn reload_continues_the_sequence_of_an_sa_whose_key_stayed() {
    let c = configured_after(5);
    let held = c.databases().sad.dump(None).into_iter().find(|sa| sa.id.spi == 0x1001).unwrap();
    let changed = CONF.replace("0x1001 -m tunnel", "0x1001 -m tunnel -r 128 -lh 3600");
    let r = reload(&c, &Desired::of(&parse("f", &changed).unwrap())).unwrap();
    assert_eq!((r.kept, r.updated, r.added, r.removed), (1, 1, 0, 0));
    let sa = c.databases().sad.dump(None).into_iter().find(|sa| sa.id.spi == 0x1001).unwrap();
    assert_eq!((sa.spec.replay_window, sa.spec.hard.seconds), (128, Some(3600)));
    assert_eq!(sa.last_sequence(), 5, "the sequence number goes on");
    c.output_one(packet(), &mut Results::default()).unwrap();
    assert_eq!(sa.last_sequence(), 6);
    assert_eq!(held.last_sequence(), 6, "the old version (a packet may still hold it) shares the counter");
    assert_ne!(held.state(), ipsec_core::sad::SaState::Dead, "and is not killed under that packet");
    assert_eq!(sa.stats().packets_out, 6, "counters go on too");
    // The same key under another SPI is refused: the whole reload fails, nothing changes.
    let moved = changed.replace("0x1001", "0x1005");
    let err = reload(&c, &Desired::of(&parse("f", &moved).unwrap())).unwrap_err();
    assert!(err.contains("0x1005") && err.contains("nonce reuse") && !err.contains("1111111111"), "{err}");
    assert_eq!(last_seq(&c, 0x1001), 6);
}

/// Item 8: a reload with an error in the middle changes nothing; the failure is counted
/// and shown by `ipsecctl stats` and the metrics.
#[test]
fn a_failed_reload_changes_nothing_and_is_counted() {
    let dir = std::env::temp_dir().join(format!("ipsecd-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("a.conf");
    let c = configured_after(2);
    let reloads = Reloads::default();
    let io = ipsecd::net::IoCounters::default();
    let before = state(&c);
    // Valid setkey whose fourth SA clashes with the first: the first three would have been
    // applied before.
    let bad = CONF.replace("spdadd", "add 10.99.0.7 10.99.0.2 esp 0x4001 -E aes-gcm-16 0x8888888888888888888888888888888888888888;\n\
         add 10.99.0.8 10.99.0.2 esp 0x4001 -E aes-gcm-16 0x9999999999999999999999999999999999999999;\nspdadd")
        .replace("spdadd 10.98.1.0/24 10.98.2.0/24", "spdadd 10.98.1.0/24 10.98.3.0/24");
    std::fs::write(&path, &bad).unwrap();
    let err = reload_file(&c, &path, &reloads).unwrap_err();
    assert!(err.contains("0x4001") && err.contains("SPI and destination"), "{err}");
    assert!(!err.contains("99999999"), "{err}");
    assert_eq!(state(&c), before, "nothing changed");
    std::fs::write(&path, "flush;\nbogus;\n").unwrap();
    reload_file(&c, &path, &reloads).unwrap_err();
    let _ = std::fs::remove_file(&path);
    reload_file(&c, &path, &reloads).unwrap_err();
    std::fs::write(&path, CONF).unwrap();
    let s = stats(&c, &io, &reloads);
    assert!(
        s.contains(
            "reloads: 0 ok, 3 failed (read_error 1, parse_error 1, refused 1); last: FAILED (read_error)"
        ),
        "{s}"
    );
    reload_file(&c, &path, &reloads).unwrap();
    let s = stats(&c, &io, &reloads);
    assert!(s.contains("reloads: 1 ok, 3 failed") && s.contains("last: ok, 0 s ago:"), "{s}");
    let m = ipsecd::metrics::prometheus(&c, &io, &reloads);
    for line in [
        "ipsecd_reloads_total{outcome=\"ok\"} 1",
        "ipsecd_reloads_total{outcome=\"refused\"} 1",
        "ipsecd_reloads_total{outcome=\"parse_error\"} 1",
        "ipsecd_last_reload_failed 0",
    ] {
        assert!(m.contains(line), "{line}: {m}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_desired_state_plays_flush_and_delete_in_order() {
    let text = format!("{CONF}delete 10.99.0.2 10.99.0.1 esp 0x1002;\nspdflush;\n");
    let d = Desired::of(&parse("f", &text).unwrap());
    assert_eq!(d.sas.len(), 1);
    assert_eq!(d.sas[0].spi, 0x1001);
    assert!(d.policies.is_empty());
    let d = Desired::of(&parse("f", &format!("{CONF}flush;\n")).unwrap());
    assert!(d.sas.is_empty());
    assert_eq!(d.policies.len(), 1);
}

#[test]
fn metrics_give_every_counter_in_prometheus_text() {
    let c = configured_after(3);
    let io = ipsecd::net::IoCounters::default();
    let m = ipsecd::metrics::prometheus(&c, &io, &Reloads::default());
    assert!(m.contains("ipsecd_packets_total{dir=\"out\"} 3\n"), "{m}");
    assert!(
        m.contains(
            "ipsecd_sa_packets_total{spi=\"0x1001\",src=\"10.99.0.1\",dst=\"10.99.0.2\",dir=\"out\"} 3\n"
        ),
        "{m}"
    );
    for d in ipsec_core::stats::Drop::ALL {
        assert!(m.contains(&format!("ipsecd_drops_total{{reason=\"{}\"}} 0\n", d.name())), "{d}");
    }
    assert!(m.contains("ipsecd_keepalives_total 0\n"), "{m}");
    io.keepalives_sent.fetch_add(2, std::sync::atomic::Ordering::Relaxed);
    let m = ipsecd::metrics::prometheus(&c, &io, &Reloads::default());
    assert!(m.contains("ipsecd_keepalives_sent_total 2\n"), "{m}");
    io.packet_socket_sent.fetch_add(5, std::sync::atomic::Ordering::Relaxed);
    let m = ipsecd::metrics::prometheus(&c, &io, &Reloads::default());
    assert!(m.contains("ipsecd_packet_socket_sent_total 5\n"), "{m}");
    assert!(m.contains("ipsecd_peer_moved_total 0\n"), "{m}");
    assert!(m.contains("ipsecd_sas 2\n"));
    // Every sample line is NAME{LABELS} VALUE or NAME VALUE, and every family is declared.
    for line in m.lines().filter(|l| !l.starts_with('#')) {
        let (name, value) = line.rsplit_once(' ').unwrap();
        assert!(value.parse::<u64>().is_ok(), "{line}");
        let family = name.split('{').next().unwrap();
        assert!(m.contains(&format!("# TYPE {family} ")), "{family} undeclared");
    }
}

#[test]
fn routes_follow_outbound_protecting_policies_with_a_host_source_as_src() {
    use ipsecd::routing::{protected_routes, Route};
    let c = core();
    apply_setkey(&c, "f", CONF).unwrap();
    apply_setkey(
        &c,
        "f",
        "spdadd 10.99.0.1 10.99.0.2 any -P out ipsec esp/transport//require;\n\
         spdadd fd00:99::1 fd00:99::2 any -P out ipsec esp/transport//require;\n\
         spdadd 10.99.0.2 10.99.0.1 any -P in ipsec esp/transport//require;\n\
         spdadd 10.98.1.0/24 10.97.0.0/16 any -P out none;\n",
    )
    .unwrap();
    let p = |s: &str, len| ipsec_core::control::Prefix { addr: s.parse().unwrap(), len };
    let mut got = protected_routes(&c);
    got.sort_by_key(|r| (r.dst.addr, r.dst.len));
    assert_eq!(
        got,
        vec![
            // A subnet as the source names no address for the kernel to pick.
            Route { dst: p("10.98.2.0", 24), src: None },
            Route { dst: p("10.99.0.2", 32), src: Some("10.99.0.1".parse().unwrap()) },
            Route { dst: p("fd00:99::2", 128), src: Some("fd00:99::1".parse().unwrap()) },
        ]
    );
}

/// The warnings ipsecd logs at start-up, after a reload and after a control change
/// (`ipsecd::lint::check`), with this host's own addresses (127.0.0.1 is one of them;
/// 192.0.2.77 is not): [`CONF`]'s outbound tunnel has no inbound policy back, and its
/// source is not this host's; with the tunnel from 127.0.0.1 and the inbound policy added,
/// nothing is left to warn of, until an `esp-udp` SA to 127.0.0.1 names port 4501.
#[test]
fn warnings_name_what_cannot_work_as_meant() {
    use ipsecd::lint::check;
    let c = core();
    apply_setkey(&c, "test", CONF).unwrap();
    let w = check(&c, 4500);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].starts_with("outbound tunnel policies with no inbound policy back"), "{w:?}");
    assert!(w[1].contains("(tunnel source 10.99.0.1)"), "{w:?}");
    let local = CONF.replace("10.99.0.1", "127.0.0.1")
        + "spdadd 10.98.2.0/24 10.98.1.0/24 any -P in ipsec esp/tunnel/10.99.0.2-127.0.0.1/require;\n";
    let c = core();
    apply_setkey(&c, "test", &local).unwrap();
    assert_eq!(check(&c, 4500), Vec::<String>::new());
    apply_setkey(
        &c,
        "test",
        "add 192.0.2.77[4501] 127.0.0.1[4501] esp-udp 0x3001 -E aes-gcm-16 0x3333333333333333333333333333333333333333;",
    )
    .unwrap();
    let w = check(&c, 4500);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("SPI 0x3001 (destination port 4501)"), "{w:?}");
}
