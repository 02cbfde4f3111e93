//! The two-engine harness of the in-memory tests (`handshake.rs`, `rekey.rs`,
//! `new_child.rs`): an
//! initiator and a responder with a PSK configuration, a `Pair` that carries each datagram
//! from one to the other (and may drop, repeat, alter or NAT it), and the checks that two
//! installed CHILD_SAs mirror each other. Included by each test with `#[path]`.

use std::time::{Duration, Instant};

use ike_core::config::{
    parse_proposals, AuthMethod, AuthRound, Child, ChildLifetimes, Connection, DpdAction, Fragmentation,
    Identity, IkeLifetimes, Mode, Protocol, Psk, Secrets, SharedSecret, StartAction, TrafficSelector,
};
use ike_core::io::{ChildSaInstall, Datagram, Event, Output};
use ike_core::{Config, Ike, Settings};

pub const PSK: &str = "a pre-shared key of some length";

pub fn fw() -> ocf::Framework {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    fw
}

pub struct Side<'a> {
    pub addr: &'a str,
    pub id: &'a str,
    pub peer: &'a str,
    pub peer_id: &'a str,
    pub ike: &'a str,
    pub esp: &'a str,
    pub local_ts: &'a str,
    pub remote_ts: &'a str,
    pub psk: &'a str,
}

pub fn config(s: &Side) -> Config {
    let child = Child {
        name: "net".into(),
        local_ts: TrafficSelector::parse_list(s.local_ts).unwrap(),
        remote_ts: TrafficSelector::parse_list(s.remote_ts).unwrap(),
        mode: Mode::Tunnel,
        esp_proposals: parse_proposals(Protocol::Esp, s.esp).unwrap(),
        lifetimes: ChildLifetimes::default(),
        start_action: StartAction::default(),
        dpd_action: DpdAction::default(),
    };
    let conn = Connection {
        name: "gw".into(),
        local_addrs: vec![s.addr.parse().unwrap()],
        remote_addrs: vec![s.peer.parse().unwrap()],
        local: AuthRound::new(AuthMethod::Psk, Identity::parse(s.id).unwrap()),
        remote: AuthRound::new(AuthMethod::Psk, Identity::parse(s.peer_id).unwrap()),
        proposals: parse_proposals(Protocol::Ike, s.ike).unwrap(),
        lifetimes: IkeLifetimes::default(),
        dpd_delay: Duration::ZERO,
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

/// `c` with one more child of the connection: `name`, tunnel mode, these selectors and
/// ESP proposals.
pub fn with_child(mut c: Config, name: &str, local_ts: &str, remote_ts: &str, esp: &str) -> Config {
    c.connections[0].children.push(Child {
        name: name.into(),
        local_ts: TrafficSelector::parse_list(local_ts).unwrap(),
        remote_ts: TrafficSelector::parse_list(remote_ts).unwrap(),
        mode: Mode::Tunnel,
        esp_proposals: parse_proposals(Protocol::Esp, esp).unwrap(),
        lifetimes: ChildLifetimes::default(),
        start_action: StartAction::default(),
        dpd_action: DpdAction::default(),
    });
    c
}

pub const I: Side = Side {
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

pub const R: Side = Side {
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

pub struct Pair {
    pub i: Ike,
    pub r: Ike,
    pub now: Instant,
    /// Everything each side output, in order.
    pub i_out: Vec<Output>,
    pub r_out: Vec<Output>,
}

pub fn sends(out: &[Output]) -> Vec<Datagram> {
    out.iter().filter_map(|o| if let Output::Send(d) = o { Some(d.clone()) } else { None }).collect()
}

pub fn installs(out: &[Output]) -> Vec<&ChildSaInstall> {
    out.iter().filter_map(|o| if let Output::Install(i) = o { Some(&**i) } else { None }).collect()
}

pub fn events(out: &[Output]) -> Vec<&Event> {
    out.iter().filter_map(|o| if let Output::Event(e) = o { Some(e) } else { None }).collect()
}

impl Pair {
    pub fn new(i: &Side, r: &Side, ri: Settings, rs: Settings) -> Pair {
        let now = Instant::now();
        Pair {
            i: Ike::new(fw(), config(i), ri, now).unwrap(),
            r: Ike::new(fw(), config(r), rs, now).unwrap(),
            now,
            i_out: vec![],
            r_out: vec![],
        }
    }

    /// A pair with these configurations (the initiator's first).
    pub fn with_configs(i: Config, r: Config) -> Pair {
        let now = Instant::now();
        Pair {
            i: Ike::new(fw(), i, Settings::default(), now).unwrap(),
            r: Ike::new(fw(), r, Settings::default(), now).unwrap(),
            now,
            i_out: vec![],
            r_out: vec![],
        }
    }

    pub fn start(&mut self) -> (u64, Vec<Datagram>) {
        let mut out = vec![];
        let spi = self.i.initiate(self.now, "gw", "net", &mut out).unwrap();
        let sent = sends(&out);
        self.i_out.extend(out);
        (spi, sent)
    }

    /// Hands `ds` (as the initiator sent them) to the responder; what it sends back.
    pub fn deliver_r(&mut self, ds: Vec<Datagram>) -> Vec<Datagram> {
        let mut out = vec![];
        for d in ds {
            self.r.datagram(self.now, received(d), &mut out);
        }
        let sent = sends(&out);
        self.r_out.extend(out);
        sent
    }

    pub fn deliver_i(&mut self, ds: Vec<Datagram>) -> Vec<Datagram> {
        let mut out = vec![];
        for d in ds {
            self.i.datagram(self.now, received(d), &mut out);
        }
        let sent = sends(&out);
        self.i_out.extend(out);
        sent
    }

    /// Runs the exchange to its end, with `nat` applied to the initiator's datagrams.
    pub fn run(&mut self, first: Vec<Datagram>, nat: &dyn Fn(Datagram, bool) -> Datagram) {
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
pub fn received(d: Datagram) -> Datagram {
    Datagram { local: d.remote, remote: d.local, bytes: d.bytes }
}

pub fn no_nat(d: Datagram, _: bool) -> Datagram {
    d
}

/// Both installs describe one CHILD_SA seen from its two ends.
pub fn assert_mirrored(a: &ChildSaInstall, b: &ChildSaInstall) {
    assert_eq!(a.spi_in, b.spi_out);
    assert_eq!(a.spi_out, b.spi_in);
    assert_ne!(a.spi_in, a.spi_out);
    assert!(a.spi_in >= 256 && b.spi_in >= 256);
    assert_eq!(*a.encr_key_in, *b.encr_key_out);
    assert_eq!(*a.encr_key_out, *b.encr_key_in);
    assert_eq!(*a.integ_key_in, *b.integ_key_out);
    assert_eq!(*a.integ_key_out, *b.integ_key_in);
    assert_ne!(*a.encr_key_in, *a.encr_key_out, "each direction its own key");
    assert_eq!((a.encr, a.encr_bits, a.integ), (b.encr, b.encr_bits, b.integ));
    assert_eq!(a.local_ts, b.remote_ts);
    assert_eq!(a.remote_ts, b.local_ts);
    assert_eq!((a.local.ip(), a.remote.ip()), (b.remote.ip(), b.local.ip()));
    assert_eq!(a.udp_encap.is_some(), b.udp_encap.is_some());
    assert_eq!(a.esn, b.esn);
}
