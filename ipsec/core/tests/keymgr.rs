//! What a key manager (an IKE daemon) drives: ACQUIRE when outbound traffic needs an SA
//! that does not exist (one event, packets held, sent when the SA comes, dropped after a
//! timeout), GETSPI's larval SAs and UPDATE, and their events.

mod common;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipsec_core::acquire::AcquireLimits;
use ipsec_core::control::{Mode, Proto, Request, SaId};
use ipsec_core::db::{ControlError, Response};
use ipsec_core::larval::LarvalError;
use ipsec_core::sad::Event;
use ipsec_core::setkey;
use ipsec_core::stats::Drop;
use ipsec_core::Packet;

use common::gateway::soft as gateway;
use common::packets::udp_packet;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The SA both gateways get (tunnel 192.0.2.1 → 192.0.2.2, AES-GCM).
const SA: &str =
    "add 192.0.2.1 192.0.2.2 esp 0x1000 -m tunnel -E aes-gcm-16 0x0102030405060708090a0b0c0d0e0f1011121314 ;";
const OUT: &str = "spdadd 10.1.0.0/24 10.2.0.0/24 any -P out ipsec esp/tunnel/192.0.2.1-192.0.2.2/require ;";
const IN: &str = "spdadd 10.1.0.0/24 10.2.0.0/24 any -P in ipsec esp/tunnel/192.0.2.1-192.0.2.2/require ;";

fn packet(dst: &str, n: usize) -> Packet {
    Packet::new(udp_packet(ip("10.1.0.1"), ip(dst), n))
}

/// Ten packets to one destination with no SA: one ACQUIRE naming the policy's SA, eight
/// held, two dropped as `acquire_hold_full`; the SA added, the eight go out through it in
/// order and the peer decapsulates them; nothing is left held.
#[test]
fn acquire_asks_once_holds_and_releases_when_the_sa_comes() {
    let (left, ls) = gateway();
    left.setkey(OUT).unwrap();
    let sent: Vec<Vec<u8>> = (0..10).map(|i| udp_packet(ip("10.1.0.1"), ip("10.2.0.7"), 20 + i)).collect();
    let results: Vec<_> = sent.iter().map(|p| left.output(Packet::new(p.clone()))).collect();
    assert_eq!(results[..8], [Ok(()); 8]);
    assert_eq!(results[8..], [Err(Drop::HoldFull); 2]);
    let ev = left.take_events();
    let [Event::Acquire(a)] = ev.as_slice() else { panic!("one ACQUIRE: {ev:?}") };
    assert_eq!(
        (a.src, a.dst, a.proto, a.mode, a.reqid),
        (ip("192.0.2.1"), ip("192.0.2.2"), Proto::Esp, Mode::Tunnel, 0)
    );
    assert_eq!(
        (a.flow.src, a.flow.dst, a.flow.proto, a.flow.dport),
        (ip("10.1.0.1"), ip("10.2.0.7"), 17, 53)
    );
    assert_eq!(a.policy.dst.addr, ip("10.2.0.0"));
    assert!(ls.take_sent().is_empty(), "nothing sent without an SA");
    assert_eq!(left.held_packets(), 8);

    left.setkey(SA).unwrap();
    let esp = ls.take_sent();
    assert_eq!(esp.len(), 8, "the held packets go out when the SA comes");
    assert_eq!(left.held_packets(), 0);
    let (right, rs) = gateway();
    right.setkey(&format!("{SA}\n{IN}")).unwrap();
    for p in esp {
        right.input(Packet::new(p)).unwrap();
    }
    assert_eq!(rs.take_delivered(), sent[..8], "in order, intact");
    assert_eq!(left.stats().drops(Drop::HoldFull), 2);
    assert!(left.take_events().is_empty(), "no second ACQUIRE");
}

/// Held packets whose SA does not come are dropped at the timeout (`acquire_timeout`, one
/// each), and the next packet asks again; two destinations are two ACQUIREs, and past the
/// bound of pending ones a packet is dropped as `acquire_table_full`.
#[test]
fn acquire_times_out_asks_again_and_is_bounded() {
    let (g, _) = gateway();
    g.set_acquire_limits(AcquireLimits { entries: 2, timeout: Duration::from_secs(5), ..Default::default() });
    g.setkey("spdadd 10.1.0.0/24 10.2.0.0/16 any -P out ipsec esp/transport//require ;").unwrap();
    for _ in 0..3 {
        g.output(packet("10.2.0.1", 8)).unwrap();
    }
    g.output(packet("10.2.0.2", 8)).unwrap();
    let ev = g.take_events();
    let dsts: Vec<IpAddr> =
        ev.iter().map(|e| if let Event::Acquire(a) = e { a.dst } else { panic!("{e:?}") }).collect();
    assert_eq!(dsts, [ip("10.2.0.1"), ip("10.2.0.2")], "transport mode: one per destination");
    assert_eq!(g.output(packet("10.2.0.3", 8)), Err(Drop::AcquireTableFull));
    assert!(g.take_events().is_empty(), "no room, no ACQUIRE");

    g.tick_at(Instant::now() + Duration::from_secs(4));
    assert_eq!(g.held_packets(), 4, "not yet");
    g.tick_at(Instant::now() + Duration::from_secs(6));
    assert_eq!(g.held_packets(), 0);
    assert_eq!(g.stats().drops(Drop::HoldTimeout), 4);
    g.output(packet("10.2.0.1", 8)).unwrap();
    assert!(
        matches!(g.take_events().as_slice(), [Event::Acquire(a)] if a.dst == ip("10.2.0.1")),
        "asked again"
    );
}

/// Held packets are bounded in bytes too, whatever their number.
#[test]
fn held_bytes_are_bounded() {
    let (g, _) = gateway();
    let one = packet("10.2.0.1", 1000).data.capacity();
    g.set_acquire_limits(AcquireLimits { bytes: 2 * one, ..Default::default() });
    g.setkey(OUT).unwrap();
    g.output(packet("10.2.0.1", 1000)).unwrap();
    g.output(packet("10.2.0.1", 1000)).unwrap();
    assert_eq!(g.output(packet("10.2.0.1", 1000)), Err(Drop::AcquireTableFull));
    assert_eq!(g.held_packets(), 2);
}

/// A `use` policy sends in the clear without an SA: no ACQUIRE, nothing held.
#[test]
fn a_use_policy_asks_for_nothing() {
    let (g, sink) = gateway();
    g.setkey("spdadd 10.1.0.0/24 10.2.0.0/24 any -P out ipsec esp/tunnel/192.0.2.1-192.0.2.2/use ;").unwrap();
    g.output(packet("10.2.0.1", 8)).unwrap();
    assert_eq!(sink.take_sent().len(), 1);
    assert!(g.take_events().is_empty());
}

fn larval(r: Result<Vec<Response>, ControlError>) -> SaId {
    match r.unwrap().as_slice() {
        [Response::Larval(id)] => *id,
        other => panic!("{other:?}"),
    }
}

/// GETSPI reserves an SPI in its range that nothing else may take; the larval SA matches
/// no traffic; UPDATE gives it keys and it carries packets.
#[test]
fn getspi_reserves_and_update_completes() {
    let (right, rs) = gateway();
    right.setkey(IN).unwrap();
    let id = larval(right.setkey("getspi 192.0.2.1 192.0.2.2 esp min 0x1000 max 0x1000 ;"));
    assert_eq!(id, SaId { src: ip("192.0.2.1"), dst: ip("192.0.2.2"), proto: Proto::Esp, spi: 0x1000 });
    // Taken: by the larval SA for another GETSPI, and for add.
    assert_eq!(
        right.setkey("getspi 192.0.2.9 192.0.2.2 esp min 0x1000 max 0x1000 ;").unwrap_err(),
        ControlError::Larval(LarvalError::NoSpiFree(0x1000, 0x1000))
    );
    let e = right.setkey(SA).unwrap_err();
    assert_eq!(e, ControlError::Larval(LarvalError::Reserved(id)));
    assert!(e.to_string().contains("complete it with update"), "{e}");
    // It matches no traffic: ESP to its SPI is an unknown SPI.
    let (left, ls) = gateway();
    left.setkey(&format!("{SA}\n{OUT}")).unwrap();
    left.output(packet("10.2.0.1", 8)).unwrap();
    let esp = ls.take_sent().remove(0);
    assert_eq!(right.input(Packet::new(esp.clone())), Err(Drop::UnknownSpi));
    // UPDATE: now it does.
    right.setkey(&SA.replacen("add", "update", 1)).unwrap();
    right.input(Packet::new(esp)).unwrap();
    assert_eq!(rs.take_delivered().len(), 1);
    assert!(right.databases().larval.dump().is_empty());
    // Another GETSPI for that destination gets another SPI, in the range.
    let other = larval(right.setkey("getspi 192.0.2.1 192.0.2.2 esp min 0x1000 max 0x1001 ;"));
    assert_eq!(other.spi, 0x1001, "0x1000 is the SA's");
}

/// GETSPI's refusals, UPDATE of nothing, a larval SA deleted, and a transaction that fails
/// reserves nothing.
#[test]
fn getspi_and_update_refusals() {
    let (g, _) = gateway();
    let bad = |t: &str| g.setkey(t).unwrap_err();
    // The parser refuses reserved SPIs; the databases do too, for other callers.
    assert!(setkey::parse("getspi 192.0.2.1 192.0.2.2 esp min 0x10 max 0x1000 ;").is_err());
    let (src, dst) = (ip("192.0.2.1"), ip("192.0.2.2"));
    for range in [(0x10, 0x1000), (0x2000, 0x1000)] {
        let e = g.control(&Request::GetSpi { src, dst, proto: Proto::Esp, range }).unwrap_err();
        assert_eq!(e, ControlError::Larval(LarvalError::BadRange(range.0, range.1)));
    }
    // Every protocol the SAD installs has SPIs to reserve: AH's too.
    let ah = larval(g.setkey("getspi 192.0.2.1 192.0.2.2 ah min 0x3000 max 0x3000 ;"));
    assert_eq!((ah.proto, ah.spi), (Proto::Ah, 0x3000));
    g.setkey("delete 192.0.2.1 192.0.2.2 ah 0x3000 ;").unwrap();
    assert_eq!(bad(&SA.replacen("add", "update", 1)), ControlError::Larval(LarvalError::NotFound));
    // A failed transaction reserved nothing.
    bad("getspi 192.0.2.1 192.0.2.2 esp min 0x2000 max 0x2000 ; spdadd 1.2.3.4 5.6.7.8 any -P out discard ; spdadd 1.2.3.4 5.6.7.8 any -P out discard ;");
    assert!(g.databases().larval.dump().is_empty());
    // delete removes a larval SA.
    let id = larval(g.setkey("getspi 192.0.2.1 192.0.2.2 esp min 0x2000 max 0x2000 ;"));
    g.setkey("delete 192.0.2.1 192.0.2.2 esp 0x2000 ;").unwrap();
    assert!(g.databases().larval.dump().is_empty(), "{id:?} deleted");
    // flush and deleteall take them too (as PF_KEY's do), counted.
    g.setkey("getspi 192.0.2.1 192.0.2.2 esp ; getspi 192.0.2.1 192.0.2.3 esp ;").unwrap();
    let done = g.setkey("flush ah ; deleteall 192.0.2.1 192.0.2.2 esp ;").unwrap();
    assert!(matches!(done.as_slice(), [Response::Done(0), Response::Done(1)]), "{done:?}");
    assert_eq!(g.databases().larval.dump().len(), 1);
    assert!(matches!(g.setkey("flush ;").unwrap().as_slice(), [Response::Done(1)]));
    assert!(g.databases().larval.dump().is_empty());
    // The parser refuses an empty range where it is written.
    let e = setkey::parse("getspi 192.0.2.1 192.0.2.2 esp min 0x2000 max 0x1000 ;").unwrap_err();
    assert_eq!((e.line, e.column), (1, 47), "at the max");
    assert!(e.message.contains("empty"), "{}", e.message);
}

/// GETSPI for IPComp searches 16-bit CPIs only (RFC 3173 §2.4): whatever the range asked
/// for, the CPI it gives fits, and a range wholly above 16 bits is refused.
#[test]
fn getspi_for_ipcomp_gives_a_16_bit_cpi() {
    let (g, _) = gateway();
    for _ in 0..50 {
        let id = larval(g.setkey("getspi 192.0.2.1 192.0.2.2 ipcomp ;"));
        assert_eq!(id.proto, Proto::IpComp);
        assert!((0x100..=0xffff).contains(&id.spi), "CPI {:#x}", id.spi);
    }
    let (src, dst) = (ip("192.0.2.1"), ip("192.0.2.2"));
    let e = g
        .control(&Request::GetSpi { src, dst, proto: Proto::IpComp, range: (0x10000, 0x20000) })
        .unwrap_err();
    assert_eq!(e, ControlError::Larval(LarvalError::BadRange(0x10000, 0xffff)));
}

/// A larval SA not updated within its lifetime goes, with an event, and its SPI is free
/// again.
#[test]
fn a_larval_sa_expires_with_an_event() {
    let (g, _) = gateway();
    g.databases().larval.set_lifetime(Duration::from_secs(30));
    let id = larval(g.setkey("getspi 192.0.2.1 192.0.2.2 esp min 0x1000 max 0x1000 ;"));
    g.tick_at(Instant::now() + Duration::from_secs(29));
    assert!(g.take_events().is_empty());
    g.tick_at(Instant::now() + Duration::from_secs(31));
    assert_eq!(g.take_events(), vec![Event::LarvalExpired(id)]);
    g.setkey(SA).unwrap();
}

/// getspi and update are printed back as they are read (keys hidden where asked).
#[test]
fn getspi_and_update_print_back() {
    for text in [
        "getspi 192.0.2.1 192.0.2.2 esp min 0x100 max 0xffffffff ;",
        "getspi 2001:db8::1 2001:db8::2 esp-udp min 0x4000 max 0x4fff ;",
    ] {
        let r = setkey::parse(text).unwrap().remove(0).item;
        assert_eq!(setkey::format_request(&r), text);
    }
    let r = setkey::parse("getspi 192.0.2.1 192.0.2.2 esp ;").unwrap().remove(0).item;
    assert!(matches!(r, Request::GetSpi { range: (0x100, u32::MAX), .. }));
    let update = setkey::parse(&SA.replacen("add", "update", 1)).unwrap().remove(0).item;
    let printed = setkey::format_request(&update);
    assert!(printed.starts_with("update 192.0.2.1 192.0.2.2 esp 0x1000"), "{printed}");
    assert_eq!(setkey::parse(&printed).unwrap().remove(0).item, update);
    assert!(!setkey::format_redacted(&update).contains("0102030405"));
}

/// A packet that missed the SA just before it was added, and was held just after the
/// change released the others, is not left behind: no packet stays held once the SA is
/// there (a sender races the add, many times).
#[test]
fn a_packet_racing_the_sa_is_not_left_held() {
    for round in 0..200 {
        let (g, _) = gateway();
        let g = Arc::new(g);
        g.setkey(OUT).unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sender = {
            let (g, stop) = (g.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = g.output(packet("10.2.0.1", 8));
                }
            })
        };
        std::thread::sleep(Duration::from_micros(200));
        g.setkey(SA).unwrap();
        std::thread::sleep(Duration::from_micros(200));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        sender.join().unwrap();
        assert_eq!(g.held_packets(), 0, "round {round}: packets left held with the SA there");
    }
}

/// `transact_noting` returns what its transaction changed, in order, as the events announce
/// it (what ipsecd keeps its warnings in step with); a transaction refused returns and
/// announces nothing.
#[test]
fn a_transaction_returns_the_changes_its_events_announce() {
    use ipsec_core::changes::Change;
    let (g, _) = gateway();
    let reqs: Vec<Request> =
        setkey::parse(&format!("{SA}\n{OUT}\n")).unwrap().into_iter().map(|r| r.item).collect();
    let ((), changes) = g.transact_noting(|t| reqs.iter().try_for_each(|r| t.apply(r).map(|_| ()))).unwrap();
    assert!(
        matches!(&changes[..], [Change::SaAdded(s), Change::PolicyAdded(p)]
        if s.id.spi == 0x1000 && p.selector.dst.addr == ip("10.2.0.0")),
        "{changes:?}"
    );
    let announced: Vec<Change> = ipsec_core::Ipsec::take_events(&g)
        .into_iter()
        .filter_map(|e| match e {
            Event::Changed(c) => Some(*c),
            _ => None,
        })
        .collect();
    assert_eq!(announced, changes);
    // The same SA again: refused, nothing returned or announced.
    let again = g.transact_noting(|t| t.apply(&reqs[0]).map(|_| ()));
    assert!(again.is_err());
    assert!(ipsec_core::Ipsec::take_events(&g).iter().all(|e| !matches!(e, Event::Changed(_))));
}
