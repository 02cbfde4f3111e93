//! Two more things a key manager (an IKE daemon) needs from the databases: when an SA last
//! carried traffic (liveness checks, RFC 7296 §2.4), and `migrate`, which moves an SA to
//! new outer addresses and ports in place (a peer behind a NAT moved, RFC 7296 §2.23;
//! MOBIKE, RFC 4555), keeping its keys, sequence number, replay window and counters, and
//! is refused whole when the new addresses clash.

mod common;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ipsec_core::changes::Change;
use ipsec_core::control::{Migration, Proto, Request, SaId};
use ipsec_core::db::{ControlError, Response, SaInfo};
use ipsec_core::larval::LarvalError;
use ipsec_core::sad::{Event, SadError};
use ipsec_core::setkey;
use ipsec_core::stats::Drop;
use ipsec_core::Packet;

use common::gateway::{soft as gateway, Collect, Gateway};
use common::packets::udp_packet;

type Gw = Gateway<Collect>;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

const KEY: &str = "0x0102030405060708090a0b0c0d0e0f1011121314";

/// An SA from `a` to `b` (AES-GCM, SPI 0x1000) and the policies of a gateway that sends
/// through it (`dir` out) or takes it in (`dir` in), between 10.1.0.0/24 and 10.2.0.0/24.
fn tunnel(a: &str, b: &str, dir: &str) -> String {
    format!(
        "add {a} {b} esp 0x1000 -m tunnel -E aes-gcm-16 {KEY} ;\n\
         spdadd 10.1.0.0/24 10.2.0.0/24 any -P {dir} ipsec esp/tunnel/{a}-{b}/require ;"
    )
}

/// Moves the SA from `a` to `b` onto `na` and the policy with it, in one request.
fn moved(a: &str, b: &str, na: &str, dir: &str) -> String {
    format!(
        "migrate {a} {b} esp 0x1000 to {na} {b} ;\n\
         spddelete 10.1.0.0/24 10.2.0.0/24 any -P {dir} ;\n\
         spdadd 10.1.0.0/24 10.2.0.0/24 any -P {dir} ipsec esp/tunnel/{na}-{b}/require ;"
    )
}

fn get(g: &Gw, src: &str, dst: &str) -> Result<SaInfo, ControlError> {
    match g.setkey(&format!("get {src} {dst} esp 0x1000 ;"))?.remove(0) {
        Response::Sa(info) => Ok(*info),
        r => panic!("{r:?}"),
    }
}

fn send(g: &Gw, sent: &Collect) -> Vec<u8> {
    g.output(Packet::new(udp_packet(ip("10.1.0.1"), ip("10.2.0.1"), 16))).unwrap();
    sent.take_sent().remove(0)
}

/// An outer IPv4 packet's source, and its ESP sequence number.
fn outer(p: &[u8]) -> (IpAddr, u32) {
    (IpAddr::from([p[12], p[13], p[14], p[15]]), u32::from_be_bytes([p[24], p[25], p[26], p[27]]))
}

/// Both ends move the SA from 192.0.2.1 to 198.51.100.1: the sender goes on at sequence
/// number 4 from the new address under the same key, the receiver decrypts it, a packet
/// replayed from before the move is still a replay, the counters go on, the old id is
/// gone, and each side's monitor hears `SaMigrated`.
#[test]
fn migrate_moves_an_sa_keeping_its_key_sequence_replay_window_and_counters() {
    let (left, ls) = gateway();
    let (right, rs) = gateway();
    left.setkey(&tunnel("192.0.2.1", "192.0.2.2", "out")).unwrap();
    right.setkey(&tunnel("192.0.2.1", "192.0.2.2", "in")).unwrap();
    let before: Vec<Vec<u8>> = (0..3).map(|_| send(&left, &ls)).collect();
    for p in &before {
        right.input(Packet::new(p.clone())).unwrap();
    }
    assert_eq!(rs.take_delivered().len(), 3);
    ipsec_core::Ipsec::take_events(&left);
    ipsec_core::Ipsec::take_events(&right);

    left.setkey(&moved("192.0.2.1", "192.0.2.2", "198.51.100.1", "out")).unwrap();
    right.setkey(&moved("192.0.2.1", "192.0.2.2", "198.51.100.1", "in")).unwrap();
    let after = send(&left, &ls);
    assert_eq!(outer(&after), (ip("198.51.100.1"), 4), "the new source, the next sequence number");
    right.input(Packet::new(after)).unwrap();
    assert_eq!(rs.take_delivered().len(), 1);
    // A packet from before the move, replayed (from the new address too): still a replay.
    let mut replayed = before[1].clone();
    replayed[12..16].copy_from_slice(&[198, 51, 100, 1]);
    // (The outer header's checksum, for the new source.)
    replayed[10..12].fill(0);
    let sum = ipsec_wire::checksum::checksum(&replayed[..20]);
    replayed[10..12].copy_from_slice(&sum.to_be_bytes());
    assert_eq!(right.input(Packet::new(replayed)), Err(Drop::Replay));
    // The counters went on; the old id is gone.
    let l = get(&left, "198.51.100.1", "192.0.2.2").unwrap();
    let r = get(&right, "198.51.100.1", "192.0.2.2").unwrap();
    assert_eq!((l.stats.packets_out, r.stats.packets_in), (4, 4));
    assert_eq!(get(&left, "192.0.2.1", "192.0.2.2").unwrap_err(), ControlError::Sad(SadError::NotFound));
    let from = SaId { src: ip("192.0.2.1"), dst: ip("192.0.2.2"), proto: Proto::Esp, spi: 0x1000 };
    for g in [&left, &right] {
        // (The core's own events: the gateway's take_events leaves the control path's out.)
        let migrated: Vec<_> = ipsec_core::Ipsec::take_events(g)
            .into_iter()
            .filter_map(|e| match e {
                Event::Changed(c) => match *c {
                    Change::SaMigrated { from, to } => Some((from, to.id)),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        assert_eq!(migrated, [(from, SaId { src: ip("198.51.100.1"), ..from })]);
    }
}

/// An ESP-in-UDP SA moved to a new port of the peer's (its NAT's new mapping): the next
/// packet goes to that port, from the same local port (the one not given stays).
#[test]
fn migrate_moves_the_ports_of_esp_in_udp() {
    let (g, sent) = gateway();
    g.setkey(&format!(
        "add 192.0.2.1[4500] 192.0.2.2[4500] esp-udp 0x1000 -m tunnel -E aes-gcm-16 {KEY} ;\n\
             spdadd 10.1.0.0/24 10.2.0.0/24 any -P out ipsec esp/tunnel/192.0.2.1-192.0.2.2/require ;"
    ))
    .unwrap();
    let ports = |p: &[u8]| (u16::from_be_bytes([p[20], p[21]]), u16::from_be_bytes([p[22], p[23]]));
    assert_eq!(ports(&send(&g, &sent)), (4500, 4500));
    g.setkey("migrate 192.0.2.1 192.0.2.2 esp-udp 0x1000 to 192.0.2.1 192.0.2.2[61001] ;").unwrap();
    assert_eq!(ports(&send(&g, &sent)), (4500, 61001));
    let info = get_udp(&g);
    assert_eq!(info.spec.natt.map(|n| (n.sport, n.dport)), Some((4500, 61001)));
    assert_eq!(info.stats.packets_out, 2);
}

fn get_udp(g: &Gw) -> SaInfo {
    match g.setkey("get 192.0.2.1 192.0.2.2 esp-udp 0x1000 ;").unwrap().remove(0) {
        Response::Sa(info) => *info,
        r => panic!("{r:?}"),
    }
}

/// Every refusal names its cause and changes nothing: new addresses another SA holds, an
/// SPI another SA (or a larval SA) holds at the new destination, another family, ports
/// for an SA without UDP encapsulation, no such SA; and a request whose later statement
/// fails leaves the migrate in it undone.
#[test]
fn migrate_is_refused_whole_when_the_new_addresses_clash() {
    let (g, _) = gateway();
    g.setkey(&tunnel("192.0.2.1", "192.0.2.2", "out")).unwrap();
    g.setkey(&format!(
        "add 198.51.100.1 192.0.2.9 esp 0x1000 -m tunnel -E aes-gcm-16 0x{} ;",
        "11".repeat(20)
    ))
    .unwrap();
    let bad = |t: &str| g.setkey(t).unwrap_err();
    let other = |src: &str, dst: &str| SaId { src: ip(src), dst: ip(dst), proto: Proto::Esp, spi: 0x1000 };
    assert_eq!(
        bad("migrate 192.0.2.1 192.0.2.2 esp 0x1000 to 198.51.100.1 192.0.2.9 ;"),
        ControlError::Sad(SadError::Exists)
    );
    let e = bad("migrate 192.0.2.1 192.0.2.2 esp 0x1000 to 192.0.2.7 192.0.2.9 ;");
    assert_eq!(e, ControlError::Sad(SadError::SpiTaken(other("198.51.100.1", "192.0.2.9"))));
    assert!(e.to_string().contains("198.51.100.1 -> 192.0.2.9 esp SPI 0x1000"), "{e}");
    let larval = match g.setkey("getspi 192.0.2.1 192.0.2.5 esp min 0x1000 max 0x1000 ;").unwrap().remove(0) {
        Response::Larval(id) => id,
        r => panic!("{r:?}"),
    };
    assert_eq!(
        bad("migrate 192.0.2.1 192.0.2.2 esp 0x1000 to 192.0.2.1 192.0.2.5 ;"),
        ControlError::Larval(LarvalError::Reserved(larval))
    );
    assert_eq!(
        bad("migrate 192.0.2.1 192.0.2.2 esp 0x1000 to 192.0.2.1 192.0.2.2[4501] ;"),
        ControlError::Sad(SadError::MigratePorts)
    );
    assert_eq!(
        bad("migrate 192.0.2.1 192.0.2.3 esp 0x1000 to 192.0.2.1 192.0.2.4 ;"),
        ControlError::Sad(SadError::NotFound)
    );
    let to6 = Migration { src: ip("2001:db8::1"), dst: ip("2001:db8::2"), sport: None, dport: None };
    let e = g.control(&Request::MigrateSa { id: other("192.0.2.1", "192.0.2.2"), to: to6 }).unwrap_err();
    assert_eq!(e, ControlError::Sad(SadError::MigrateFamily));
    // Parsed whole, applied whole: the second statement fails, the first is undone.
    bad("migrate 192.0.2.1 192.0.2.2 esp 0x1000 to 192.0.2.7 192.0.2.2 ; delete 192.0.2.1 192.0.2.3 esp 0x1000 ;");
    assert!(get(&g, "192.0.2.1", "192.0.2.2").is_ok());
    assert!(get(&g, "192.0.2.7", "192.0.2.2").is_err());
    assert_eq!(g.databases().sad.len(), 2);
}

/// `migrate` in setkey text: printed back as written; the parser refuses another family
/// and ports for AH, where they are written.
#[test]
fn migrate_parses_and_prints_back() {
    for text in [
        "migrate 192.0.2.1 192.0.2.2 esp 0x1000 to 198.51.100.1 192.0.2.2 ;",
        "migrate 192.0.2.1 192.0.2.2 esp-udp 0x1000 to 192.0.2.1[4500] 192.0.2.2[61001] ;",
        "migrate 2001:db8::1 2001:db8::2 ah 0x2000 to 2001:db8::3 2001:db8::2 ;",
    ] {
        let r = setkey::parse(text).unwrap().remove(0).item;
        assert_eq!(setkey::format_request(&r), text);
    }
    let e = setkey::parse("migrate 192.0.2.1 192.0.2.2 esp 0x1000 to 2001:db8::1 2001:db8::2 ;").unwrap_err();
    assert_eq!((e.line, e.column), (1, 43));
    assert!(e.message.contains("keeps the SA's address family"), "{}", e.message);
    let e = setkey::parse("migrate 192.0.2.1 192.0.2.2 ah 0x1000 to 192.0.2.3[500] 192.0.2.2 ;").unwrap_err();
    assert!(e.message.contains("only for esp and esp-udp"), "{}", e.message);
    let e = setkey::parse("migrate 192.0.2.1 192.0.2.2 esp 0x1000 192.0.2.3 192.0.2.2 ;").unwrap_err();
    assert!(e.message.contains("`to`"), "{}", e.message);
}

/// When an SA last carried traffic: never, until a packet goes out (then out only); in
/// after the peer's packet is accepted; a packet refused (replayed) is not use. A tick
/// observes it too, and `get` later reports the time since then.
#[test]
fn the_last_use_each_way_is_reported() {
    let (left, ls) = gateway();
    let (right, _) = gateway();
    left.setkey(&tunnel("192.0.2.1", "192.0.2.2", "out")).unwrap();
    right.setkey(&tunnel("192.0.2.1", "192.0.2.2", "in")).unwrap();
    let l = get(&left, "192.0.2.1", "192.0.2.2").unwrap();
    assert_eq!((l.idle_in, l.idle_out), (None, None));
    let p = send(&left, &ls);
    left.tick();
    let t = Instant::now();
    std::thread::sleep(Duration::from_millis(60));
    let l = get(&left, "192.0.2.1", "192.0.2.2").unwrap();
    let idle = l.idle_out.expect("sent");
    assert!(idle >= Duration::from_millis(60) && idle <= t.elapsed() + Duration::from_millis(60), "{idle:?}");
    assert_eq!(l.idle_in, None);
    let r = get(&right, "192.0.2.1", "192.0.2.2").unwrap();
    assert_eq!((r.idle_in, r.idle_out), (None, None));
    right.input(Packet::new(p.clone())).unwrap();
    let r = get(&right, "192.0.2.1", "192.0.2.2").unwrap();
    assert!(r.idle_in.expect("received") < Duration::from_millis(60), "{:?}", r.idle_in);
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(right.input(Packet::new(p)), Err(Drop::Replay));
    let r = get(&right, "192.0.2.1", "192.0.2.2").unwrap();
    assert!(r.idle_in.unwrap() >= Duration::from_millis(60), "a replay is not use: {:?}", r.idle_in);
}
