//! Liveness checks (RFC 7296 §2.4, strongSwan's dpd_delay and dpd_action) and a peer that
//! moves behind its NAT (§2.23), between two engines in memory: a peer that stops
//! answering is declared dead when the retransmission schedule runs out, its CHILD_SAs
//! removed; an answering one stays; traffic on a CHILD_SA (`Ike::child_traffic`) puts the
//! check off; `dpd_action = restart` initiates again; ipsecd's `peer-moved` and an
//! authenticated IKE message from the NAT's new port move the IKE SA and migrate its
//! CHILD_SAs, a forged one moves nothing.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use ike_core::config::{
    parse_proposals, AuthMethod, AuthRound, Child, ChildLifetimes, Connection, DpdAction, Fragmentation,
    Identity, IkeLifetimes, Mode, Protocol, Psk, Secrets, SharedSecret, StartAction, TrafficSelector,
};
use ike_core::io::{ChildSaInstall, ChildSaMigrate, Datagram, DownReason, Event, Output};
use ike_core::retransmit::RetransmitConfig;
use ike_core::stats::Drop;
use ike_core::{Config, Ike, Settings};

/// The initiator's dpd_delay (the responder checks too, with the same delay).
const DPD: Duration = Duration::from_secs(10);

/// Retransmissions at 1 and 3 s after the first send, dead at 7 s.
fn settings() -> Settings {
    Settings {
        retransmit: RetransmitConfig { timeout: Duration::from_secs(1), base: 2.0, tries: 2, limit: None },
        ..Settings::default()
    }
}

const PSK: &str = "a pre-shared key of some length";

fn fw() -> ocf::Framework {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    fw
}

struct Side<'a> {
    addr: &'a str,
    id: &'a str,
    peer: &'a str,
    peer_id: &'a str,
    ike: &'a str,
    esp: &'a str,
    local_ts: &'a str,
    remote_ts: &'a str,
    psk: &'a str,
}

fn config(s: &Side, dpd_delay: Duration, dpd_action: DpdAction) -> Config {
    let child = Child {
        name: "net".into(),
        local_ts: TrafficSelector::parse_list(s.local_ts).unwrap(),
        remote_ts: TrafficSelector::parse_list(s.remote_ts).unwrap(),
        mode: Mode::Tunnel,
        esp_proposals: parse_proposals(Protocol::Esp, s.esp).unwrap(),
        lifetimes: ChildLifetimes::default(),
        start_action: StartAction::default(),
        dpd_action,
    };
    let conn = Connection {
        name: "gw".into(),
        local_addrs: vec![s.addr.parse().unwrap()],
        remote_addrs: vec![s.peer.parse().unwrap()],
        local: AuthRound::new(AuthMethod::Psk, Identity::parse(s.id).unwrap()),
        remote: AuthRound::new(AuthMethod::Psk, Identity::parse(s.peer_id).unwrap()),
        proposals: parse_proposals(Protocol::Ike, s.ike).unwrap(),
        lifetimes: IkeLifetimes::default(),
        dpd_delay,
        encap: false,
        fragmentation: Fragmentation::default(),
        unique: ike_core::config::Unique::default(),
        children: vec![child],
    };
    let secrets = Secrets {
        shared: vec![SharedSecret {
            name: "psk".into(),
            ids: vec![Identity::parse("moon.example").unwrap(), Identity::parse("sun.example").unwrap()],
            secret: Psk::parse(s.psk).unwrap(),
        }],
        private_keys: vec![],
    };
    Config { connections: vec![conn], secrets, ..Default::default() }
}

const I: Side = Side {
    addr: "192.0.2.1",
    id: "moon.example",
    peer: "192.0.2.2",
    peer_id: "sun.example",
    ike: "aes128gcm16-prfsha256-x25519",
    esp: "aes128gcm16",
    local_ts: "10.1.0.0/16",
    remote_ts: "10.2.0.0/16",
    psk: PSK,
};

const R: Side = Side {
    addr: "192.0.2.2",
    id: "sun.example",
    peer: "192.0.2.1",
    peer_id: "moon.example",
    ike: "aes128gcm16-prfsha256-x25519",
    esp: "aes128gcm16",
    local_ts: "10.2.0.0/16",
    remote_ts: "10.1.0.0/16",
    psk: PSK,
};

struct Pair {
    i: Ike,
    r: Ike,
    now: Instant,
    /// Everything each side output, in order.
    i_out: Vec<Output>,
    r_out: Vec<Output>,
}

fn sends(out: &[Output]) -> Vec<Datagram> {
    out.iter().filter_map(|o| if let Output::Send(d) = o { Some(d.clone()) } else { None }).collect()
}

fn installs(out: &[Output]) -> Vec<&ChildSaInstall> {
    out.iter().filter_map(|o| if let Output::Install(i) = o { Some(&**i) } else { None }).collect()
}

fn events(out: &[Output]) -> Vec<&Event> {
    out.iter().filter_map(|o| if let Output::Event(e) = o { Some(e) } else { None }).collect()
}

impl Pair {
    fn new(i: &Side, r: &Side, action: DpdAction) -> Pair {
        let now = Instant::now();
        Pair {
            i: Ike::new(fw(), config(i, DPD, action), settings(), now).unwrap(),
            r: Ike::new(fw(), config(r, DPD, DpdAction::None), settings(), now).unwrap(),
            now,
            i_out: vec![],
            r_out: vec![],
        }
    }

    fn start(&mut self) -> (u64, Vec<Datagram>) {
        let mut out = vec![];
        let spi = self.i.initiate(self.now, "gw", "net", &mut out).unwrap();
        let sent = sends(&out);
        self.i_out.extend(out);
        (spi, sent)
    }

    /// Hands `ds` (as the initiator sent them) to the responder; what it sends back.
    fn deliver_r(&mut self, ds: Vec<Datagram>) -> Vec<Datagram> {
        let mut out = vec![];
        for d in ds {
            self.r.datagram(self.now, received(d), &mut out);
        }
        let sent = sends(&out);
        self.r_out.extend(out);
        sent
    }

    fn deliver_i(&mut self, ds: Vec<Datagram>) -> Vec<Datagram> {
        let mut out = vec![];
        for d in ds {
            self.i.datagram(self.now, received(d), &mut out);
        }
        let sent = sends(&out);
        self.i_out.extend(out);
        sent
    }

    /// Runs the exchange to its end, with `nat` applied to the initiator's datagrams.
    fn run(&mut self, first: Vec<Datagram>, nat: &dyn Fn(Datagram, bool) -> Datagram) {
        let mut to_r = first;
        for _ in 0..8 {
            if to_r.is_empty() {
                return;
            }
            let back = self.deliver_r(to_r.into_iter().map(|d| nat(d, true)).collect());
            to_r = self.deliver_i(back.into_iter().map(|d| nat(d, false)).collect());
        }
        panic!("the exchange did not end");
    }
}

/// A datagram as its receiver sees it: our local address is the sender's remote one.
fn received(d: Datagram) -> Datagram {
    Datagram { local: d.remote, remote: d.local, bytes: d.bytes }
}

fn no_nat(d: Datagram, _: bool) -> Datagram {
    d
}

fn removes(out: &[Output]) -> Vec<&ike_core::io::ChildSaRemove> {
    out.iter().filter_map(|o| if let Output::Remove(r) = o { Some(r) } else { None }).collect()
}

fn migrates(out: &[Output]) -> Vec<&ChildSaMigrate> {
    out.iter().filter_map(|o| if let Output::Migrate(m) = o { Some(m) } else { None }).collect()
}

impl Pair {
    /// An established pair: the IKE SA's SPI on each side.
    fn up(action: DpdAction) -> (Pair, u64, u64) {
        let mut p = Pair::new(&I, &R, action);
        let (spi, first) = p.start();
        p.run(first, &no_nat);
        let rspi = p.r.ike_sas().next().unwrap().our_spi();
        assert_eq!(installs(&p.i_out).len(), 1);
        (p, spi, rspi)
    }

    /// Moves the clock to `t` after the start and ticks the initiator: what it output.
    fn tick_i(&mut self, start: Instant, t: u64) -> Vec<Output> {
        self.now = start + Duration::from_secs(t);
        let mut out = vec![];
        self.i.tick(self.now, &mut out);
        out
    }
}

#[test]
fn a_silent_peer_is_declared_dead_when_the_schedule_runs_out() {
    let (mut p, spi, _) = Pair::up(DpdAction::None);
    let t0 = p.now;
    let spi_in = installs(&p.i_out)[0].spi_in;
    assert!(sends(&p.tick_i(t0, 9)).is_empty(), "no check before dpd_delay");
    let second = Duration::from_secs(1);
    assert!(!p.i.quiet(t0 + Duration::from_secs(8), second));
    assert!(p.i.quiet(t0 + Duration::from_secs(9), second), "a check due within a second");
    let check = sends(&p.tick_i(t0, 10));
    assert_eq!(check.len(), 1, "the liveness check at dpd_delay");
    assert_eq!(p.i.stats().liveness_checks, 1);
    // The peer is gone: nothing is delivered. Resends at +1 s and +3 s, byte for byte.
    let mut resent = vec![];
    for t in 11..17 {
        let out = p.tick_i(t0, t);
        assert!(events(&out).is_empty(), "declared dead early, at {t} s");
        resent.extend(sends(&out).into_iter().map(|d| (t, d.bytes)));
    }
    assert_eq!(resent, vec![(11, check[0].bytes.clone()), (13, check[0].bytes.clone())]);
    let out = p.tick_i(t0, 17);
    assert_eq!(events(&out), vec![&Event::IkeSaDown { ike_sa: spi, reason: DownReason::PeerDead }]);
    assert_eq!(removes(&out).iter().map(|r| r.spi_in).collect::<Vec<_>>(), vec![spi_in]);
    assert_eq!(p.i.ike_sas().count(), 0);
    assert!(sends(&out).is_empty(), "dpd_action = none: no restart");
}

#[test]
fn an_answering_peer_stays_up_and_is_checked_again_later() {
    let (mut p, _, _) = Pair::up(DpdAction::None);
    let t0 = p.now;
    let check = sends(&p.tick_i(t0, 10));
    assert_eq!(check.len(), 1);
    let answer = p.deliver_r(check);
    assert_eq!(answer.len(), 1, "the responder answers the empty INFORMATIONAL");
    assert!(p.deliver_i(answer).is_empty());
    for t in 11..20 {
        let out = p.tick_i(t0, t);
        assert!(out.is_empty(), "{t} s: {out:?}");
    }
    assert_eq!(sends(&p.tick_i(t0, 20)).len(), 1, "the next check, dpd_delay after the answer");
    assert_eq!(p.i.stats().liveness_checks, 2);
    assert_eq!(p.i.ike_sas().count(), 1);
}

#[test]
fn inbound_traffic_puts_the_check_off() {
    let (mut p, _, _) = Pair::up(DpdAction::None);
    let t0 = p.now;
    let spi_in = installs(&p.i_out)[0].spi_in;
    let spi_out = installs(&p.i_out)[0].spi_out;
    assert!(p.i.child_traffic(t0 + Duration::from_secs(8), spi_in));
    assert!(!p.i.child_traffic(t0, spi_out), "the outbound SPI is not an inbound one");
    assert!(!p.i.child_traffic(t0 + Duration::from_secs(9), 0x1234_5678));
    assert!(sends(&p.tick_i(t0, 10)).is_empty(), "traffic seen at 8 s: no check at 10 s");
    assert!(sends(&p.tick_i(t0, 17)).is_empty());
    assert_eq!(sends(&p.tick_i(t0, 18)).len(), 1, "dpd_delay after the traffic");
}

#[test]
fn dpd_action_restart_initiates_the_connection_again() {
    let (mut p, spi, _) = Pair::up(DpdAction::Restart);
    let t0 = p.now;
    assert_eq!(sends(&p.tick_i(t0, 10)).len(), 1);
    for t in 11..17 {
        p.tick_i(t0, t);
    }
    let out = p.tick_i(t0, 17);
    assert_eq!(events(&out), vec![&Event::IkeSaDown { ike_sa: spi, reason: DownReason::PeerDead }]);
    let again = sends(&out);
    assert_eq!(again.len(), 1, "a new IKE_SA_INIT");
    let new = p.i.ike_sas().next().unwrap().our_spi();
    assert_ne!(new, spi);
    // The peer answers now: a new IKE SA and CHILD_SA.
    p.run(again, &no_nat);
    assert_eq!(installs(&p.i_out).len(), 2);
    assert!(events(&p.i_out).iter().any(|e| matches!(e, Event::IkeSaUp { ike_sa, .. } if *ike_sa == new)));
}

/// The initiator behind a NAT (192.0.2.1 seen as 203.0.113.9, ports + 40000); the
/// responder at 198.51.100.2. The NAT's mapping for port 4500 changes to `port`.
fn behind_nat() -> (Pair, u64, u64, IpAddr) {
    let i = Side { peer: "198.51.100.2", ..I };
    let r = Side { addr: "198.51.100.2", peer: "203.0.113.9", ..R };
    let mut p = Pair::new(&i, &r, DpdAction::None);
    let public: IpAddr = "203.0.113.9".parse().unwrap();
    let (spi, first) = p.start();
    p.run(first, &|d, outbound| nat(d, outbound, 40000));
    let rspi = p.r.ike_sas().next().unwrap().our_spi();
    assert_eq!(p.r.ike_sa(rspi).unwrap().remote, SocketAddr::new(public, 44500));
    (p, spi, rspi, public)
}

fn nat(mut d: Datagram, outbound: bool, shift: u16) -> Datagram {
    let public: IpAddr = "203.0.113.9".parse().unwrap();
    let private: IpAddr = "192.0.2.1".parse().unwrap();
    if outbound {
        d.local = SocketAddr::new(public, d.local.port() + shift);
    } else {
        d.remote = SocketAddr::new(private, d.remote.port() - shift);
    }
    d
}

#[test]
fn ipsecds_peer_moved_moves_the_ike_sa_and_migrates_the_child_sas() {
    let (mut p, _, rspi, public) = behind_nat();
    let child = installs(&p.r_out)[0];
    let mut out = vec![];
    assert!(p.r.peer_moved(p.now, child.spi_in, 50123, &mut out));
    let to = SocketAddr::new(public, 50123);
    assert_eq!(
        migrates(&out),
        vec![&ChildSaMigrate {
            ike_sa: rspi,
            spi_in: child.spi_in,
            spi_out: child.spi_out,
            local: child.local,
            old_remote: SocketAddr::new(public, 44500),
            remote: to,
        }]
    );
    assert!(events(&out).contains(&&Event::PeerMoved {
        ike_sa: rspi,
        from: SocketAddr::new(public, 44500),
        to
    }));
    assert_eq!(p.r.ike_sa(rspi).unwrap().remote, to);
    assert_eq!(p.r.stats().peer_moves, 1);
    // Again from the same port: nothing more.
    let mut out = vec![];
    assert!(p.r.peer_moved(p.now, child.spi_in, 50123, &mut out));
    assert!(out.is_empty());
    assert!(!p.r.peer_moved(p.now, 0x1234_5678, 1, &mut out));
}

#[test]
fn peer_moved_without_a_nat_in_front_of_the_peer_moves_nothing() {
    let (mut p, _, rspi) = Pair::up(DpdAction::None);
    let child = installs(&p.r_out)[0];
    let before = p.r.ike_sa(rspi).unwrap().remote;
    let mut out = vec![];
    assert!(p.r.peer_moved(p.now, child.spi_in, 50123, &mut out));
    assert!(out.is_empty());
    assert_eq!(p.r.ike_sa(rspi).unwrap().remote, before);
}

#[test]
fn an_authenticated_ike_message_from_a_new_port_moves_the_peer_a_forged_one_does_not() {
    let (mut p, spi, rspi, public) = behind_nat();
    let t0 = p.now;
    // The initiator's liveness check, through a NAT that now maps 4500 to 54500.
    let check = sends(&p.tick_i(t0, 10));
    assert_eq!(check.len(), 1);
    let moved = nat(check[0].clone(), true, 50000);
    let mut forged = moved.clone();
    let n = forged.bytes.len();
    forged.bytes[n - 1] ^= 1;
    let mut out = vec![];
    p.r.datagram(p.now, received(forged), &mut out);
    assert!(out.is_empty(), "a forged message is not answered and moves nothing");
    assert_eq!(p.r.stats().drops(Drop::Unauthenticated), 1);
    assert_eq!(p.r.ike_sa(rspi).unwrap().remote.port(), 44500);
    let mut out = vec![];
    p.r.datagram(p.now, received(moved), &mut out);
    let to = SocketAddr::new(public, 54500);
    assert_eq!(p.r.ike_sa(rspi).unwrap().remote, to);
    assert_eq!(migrates(&out).len(), 1);
    let answer = sends(&out);
    assert_eq!(answer.len(), 1);
    assert_eq!(answer[0].remote, to, "the answer goes to the new port");
    assert!(p.deliver_i(vec![nat(answer[0].clone(), false, 50000)]).is_empty());
    assert_eq!(p.i.ike_sa(spi).unwrap().remote.port(), 4500, "the initiator's view does not change");
}
