//! ike-core's state machine on sequences of messages: two engines, an initiator and a
//! responder with one PSK connection each (built as `ike/core/tests/handshake.rs` builds
//! them), start a real handshake, and the fuzz input is a script of actions on the network
//! between them and on the engines themselves.
//!
//! ```text
//!  input bytes ─▶ ops: deliver / drop / duplicate / reorder / deliver all   (the wire:
//!                      datagrams sent and not yet delivered, each to the other engine)
//!                      truncate / flip a bit in / replay a datagram seen before
//!                      inject bytes under a real IKE SA's SPIs
//!                      advance the clock and tick both engines
//!                      rekey_child, rekey_ike, terminate, soft/hard expiry, initiate
//!       each datagram ─▶ Ike::datagram ─▶ outputs: Send ─▶ the wire
//!                                                   Install / Remove ─▶ `installed`
//!  after each step: the invariants below
//! ```
//!
//! Invariants (a panic is a crash):
//! - no panic in the engine;
//! - a datagram dropped as `Unauthenticated` changes nothing: the summary of every IKE SA
//!   (SPIs, state, CHILD_SAs, message IDs, queued and outstanding work, rekey time) and the
//!   counters (all but the drop counters and the `*_received` ones, which count a message
//!   when it is parsed, before its ICV is checked) are as before, and it has no output;
//! - an Install never brings an inbound SPI that is installed already on that engine;
//! - once both are quiet (nothing on the wire, no request outstanding or queued): what
//!   each engine installed is what its IKE SAs hold, and for every IKE SA established on
//!   both, the CHILD_SAs come in mirrored pairs (SPIs and keys crossed).
//!
//! Reproducibility: ocf's random numbers (SPIs, nonces, key shares, the rekey jitter) are
//! real randomness, so one input does not replay the same bytes twice. The actions address
//! datagrams, IKE SAs and CHILD_SAs by position (sorted by SPI, hence stable in kind if not
//! in value), and no invariant depends on a random value; a crash is reproduced by running
//! its input a few times (`cargo fuzz run ike_exchange CRASH -- -runs=100`).
#![no_main]

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ike_core::config::{
    parse_proposals, AuthMethod, AuthRound, Child, ChildLifetimes, Connection, DpdAction, Fragmentation,
    Identity, IkeLifetimes, Mode, Protocol, Psk, Secrets, SharedSecret, StartAction, TrafficSelector,
};
use ike_core::ike_sa::{IkeSa, State};
use ike_core::io::{ChildSaInstall, Datagram, Output, SaEvent};
use ike_core::stats::{Drop, Stats};
use ike_core::{Config, Ike, Settings};
use libfuzzer_sys::fuzz_target;

const ADDR: [&str; 2] = ["192.0.2.1:500", "192.0.2.2:500"];
const ID: [&str; 2] = ["moon.example", "sun.example"];
const TS: [&str; 2] = ["10.1.0.0/16", "10.2.0.0/16"];
/// Most datagrams kept on the wire and remembered for replay.
const WIRE_MAX: usize = 64;
const SEEN_MAX: usize = 64;
/// Most actions per input.
const OPS_MAX: usize = 256;

/// Side `k`'s configuration: connection "gw" to the other side, child "net".
fn config(k: usize) -> Config {
    let (me, peer) = (k, 1 - k);
    let addr = |i: usize| ADDR[i].parse::<SocketAddr>().unwrap().ip();
    let child = Child {
        name: "net".into(),
        local_ts: TrafficSelector::parse_list(TS[me]).unwrap(),
        remote_ts: TrafficSelector::parse_list(TS[peer]).unwrap(),
        mode: Mode::Tunnel,
        esp_proposals: parse_proposals(Protocol::Esp, "aes128gcm16").unwrap(),
        lifetimes: ChildLifetimes::default(),
        start_action: StartAction::default(),
        dpd_action: DpdAction::default(),
    };
    let conn = Connection {
        name: "gw".into(),
        local_addrs: vec![addr(me)],
        remote_addrs: vec![addr(peer)],
        local: AuthRound::new(AuthMethod::Psk, Identity::parse(ID[me]).unwrap()),
        remote: AuthRound::new(AuthMethod::Psk, Identity::parse(ID[peer]).unwrap()),
        proposals: parse_proposals(Protocol::Ike, "aes128gcm16-prfsha256-x25519").unwrap(),
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
            ids: vec![Identity::parse(ID[0]).unwrap(), Identity::parse(ID[1]).unwrap()],
            secret: Psk::parse("a pre-shared key of some length").unwrap(),
        }],
        private_keys: vec![],
    };
    Config { connections: vec![conn], secrets, ..Default::default() }
}

/// The fuzz input, read a byte at a time; zeros once it runs out.
struct Script<'a>(&'a [u8]);

impl Script<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn usize(&mut self) -> usize {
        usize::from(self.u8())
    }

    fn bytes(&mut self, n: usize) -> &[u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
}

/// What an unauthenticated datagram must not change: one IKE SA.
#[derive(Debug, PartialEq)]
struct SaSummary {
    spi_i: u64,
    spi_r: u64,
    initiator: bool,
    state: State,
    children: Vec<(u32, u32)>,
    next_id: u32,
    outstanding: Option<u32>,
    expected: u32,
    queued: usize,
    pending_child: Option<u32>,
    child_rekey: Option<u32>,
    ike_rekey: Option<u64>,
    rekey_at: Option<Instant>,
    nat: (bool, bool),
}

fn summary(sa: &IkeSa) -> SaSummary {
    SaSummary {
        spi_i: sa.spi_i,
        spi_r: sa.spi_r,
        initiator: sa.initiator,
        state: sa.state,
        children: sa.children.iter().map(|c| (c.spi_in, c.spi_out)).collect(),
        next_id: sa.requests.next_id(),
        outstanding: sa.requests.outstanding(),
        expected: sa.responses.expected(),
        queued: sa.queued.len(),
        pending_child: sa.pending_child.as_ref().map(|p| p.spi_in),
        child_rekey: sa.child_rekey.as_ref().map(|r| r.spi_in),
        ike_rekey: sa.ike_rekey.as_ref().map(|r| r.spi),
        rekey_at: sa.rekey_at,
        nat: (sa.nat_local, sa.nat_remote),
    }
}

/// The counters, less the drop counters and those a message bumps before its ICV check.
fn counters(s: &Stats) -> Vec<u64> {
    let mut v = vec![
        s.half_open,
        s.cookies_sent,
        s.cookies_accepted,
        s.retransmissions,
        s.responses_resent,
        s.auth_failures,
        s.auth_refused_by_peer,
        s.ike_sas_up,
        s.ike_sas_down,
        s.child_sas_installed,
    ];
    for c in [&s.sa_init, &s.auth, &s.create_child_sa, &s.informational, &s.other] {
        v.extend([c.requests_sent, c.responses_sent, c.errors_sent, c.errors_received]);
    }
    v
}

/// One engine's whole state, as far as the invariants look.
fn state(ike: &Ike) -> (Vec<SaSummary>, Vec<u64>, usize) {
    let mut sas: Vec<SaSummary> = ike.ike_sas().map(summary).collect();
    sas.sort_by_key(|s| (s.spi_i, s.spi_r));
    (sas, counters(ike.stats()), ike.half_open())
}

/// An engine's IKE SAs' SPIs (ours), sorted, so that a position picks one.
fn our_spis(ike: &Ike) -> Vec<u64> {
    let mut v: Vec<u64> = ike.ike_sas().map(|sa| sa.our_spi()).collect();
    v.sort_unstable();
    v
}

struct Net {
    ike: [Ike; 2],
    now: Instant,
    /// Datagrams in flight: (receiver, the datagram as the receiver sees it).
    wire: Vec<(usize, Datagram)>,
    /// Datagrams sent so far (the latest SEEN_MAX), for replays and mutations.
    seen: Vec<(usize, Datagram)>,
    /// What each engine has installed in its ipsecd, by inbound SPI.
    installed: [HashMap<u32, Box<ChildSaInstall>>; 2],
}

impl Net {
    fn new() -> Net {
        let now = Instant::now();
        let engine = |k: usize| {
            let fw = ocf::Framework::new();
            ocf_soft::register(&fw).unwrap();
            Ike::new(fw, config(k), Settings::default(), now).unwrap()
        };
        Net {
            ike: [engine(0), engine(1)],
            now,
            wire: vec![],
            seen: vec![],
            installed: [HashMap::new(), HashMap::new()],
        }
    }

    /// Carries out engine `k`'s outputs.
    fn absorb(&mut self, k: usize, out: Vec<Output>) {
        for o in out {
            match o {
                Output::Send(d) => {
                    let d = Datagram { local: d.remote, remote: d.local, bytes: d.bytes };
                    if self.wire.len() == WIRE_MAX {
                        self.wire.remove(0);
                    }
                    self.wire.push((1 - k, d.clone()));
                    if self.seen.len() == SEEN_MAX {
                        self.seen.remove(0);
                    }
                    self.seen.push((1 - k, d));
                }
                Output::Install(i) => {
                    let old = self.installed[k].insert(i.spi_in, i);
                    assert!(old.is_none(), "engine {k}: an Install reuses an installed inbound SPI");
                }
                Output::InstallOutbound { spi_in, .. } => {
                    // Only for an installed CHILD_SA whose outbound SA is held, once.
                    let held = self.installed[k].get_mut(&spi_in).filter(|i| i.outbound_later);
                    let held = held.expect("an InstallOutbound of no held outbound SA");
                    held.outbound_later = false;
                }
                Output::Remove(r) => {
                    self.installed[k].remove(&r.spi_in);
                }
                // A NAT move changes an SA's outer ports, not its keys or SPIs: no
                // invariant here looks at ports (the two engines have no NAT between them).
                Output::Migrate(_) | Output::Event(_) => {}
            }
        }
    }

    /// Hands `d` to engine `k`; checks that an unauthenticated one changed nothing.
    fn deliver(&mut self, k: usize, d: Datagram) {
        let before = state(&self.ike[k]);
        let unauth = self.ike[k].stats().drops(Drop::Unauthenticated);
        let mut out = vec![];
        self.ike[k].datagram(self.now, d, &mut out);
        if self.ike[k].stats().drops(Drop::Unauthenticated) > unauth {
            assert_eq!(
                state(&self.ike[k]),
                before,
                "engine {k}: an unauthenticated datagram changed its state"
            );
            assert!(out.is_empty(), "engine {k}: an unauthenticated datagram had outputs: {out:?}");
        }
        self.absorb(k, out);
    }

    fn quiet(&self) -> bool {
        self.wire.is_empty()
            && self
                .ike
                .iter()
                .all(|e| e.ike_sas().all(|sa| sa.requests.outstanding().is_none() && sa.queued.is_empty()))
    }

    /// The CHILD_SA invariants, once both engines are quiet.
    fn check_pairs(&self) {
        if !self.quiet() {
            return;
        }
        for k in 0..2 {
            let held: HashSet<u32> =
                self.ike[k].ike_sas().flat_map(|sa| sa.children.iter().map(|c| c.spi_in)).collect();
            let told: HashSet<u32> = self.installed[k].keys().copied().collect();
            assert_eq!(held, told, "engine {k}: its CHILD_SAs differ from what it installed");
        }
        for a in self.ike[0].ike_sas().filter(|sa| sa.state == State::Established) {
            let Some(b) = self.ike[1]
                .ike_sas()
                .find(|b| b.spi_i == a.spi_i && b.spi_r == a.spi_r && b.state == State::Established)
            else {
                continue;
            };
            let mut ca: Vec<(u32, u32)> = a.children.iter().map(|c| (c.spi_in, c.spi_out)).collect();
            let mut cb: Vec<(u32, u32)> = b.children.iter().map(|c| (c.spi_out, c.spi_in)).collect();
            ca.sort_unstable();
            cb.sort_unstable();
            assert_eq!(
                ca,
                cb,
                "IKE SA {:x}/{:x}: CHILD_SAs not in pairs\n0: {:#?}\n1: {:#?}",
                a.spi_i,
                a.spi_r,
                state(&self.ike[0]).0,
                state(&self.ike[1]).0
            );
            for (spi_in, spi_out) in ca {
                let (x, y) = (&self.installed[0][&spi_in], &self.installed[1][&spi_out]);
                assert_eq!(*x.encr_key_in, *y.encr_key_out, "CHILD_SA {spi_in:x}: inbound key differs");
                assert_eq!(*x.encr_key_out, *y.encr_key_in, "CHILD_SA {spi_in:x}: outbound key differs");
            }
        }
    }

    /// A CHILD_SA's inbound SPI on engine `k`, by position.
    fn child_spi(&self, k: usize, sa: usize, child: usize) -> Option<(u64, u32)> {
        let spis = our_spis(&self.ike[k]);
        let spi = *spis.get(sa % spis.len().max(1))?;
        let sa = self.ike[k].ike_sa(spi)?;
        let c = sa.children.get(child % sa.children.len().max(1))?;
        Some((spi, c.spi_in))
    }

    fn sa_spi(&self, k: usize, i: usize) -> Option<u64> {
        let spis = our_spis(&self.ike[k]);
        spis.get(i % spis.len().max(1)).copied()
    }

    /// One action from the script.
    fn step(&mut self, s: &mut Script) {
        let op = s.u8();
        let k = usize::from(op >> 7);
        let mut out = vec![];
        match op & 0x0f {
            // Deliver, drop, duplicate, move to the back: the wire's datagram at a position.
            0..=3 if !self.wire.is_empty() => {
                let i = s.usize() % self.wire.len();
                match op & 0x0f {
                    0 => {
                        let (to, d) = self.wire.remove(i);
                        self.deliver(to, d);
                    }
                    1 => {
                        self.wire.remove(i);
                    }
                    2 => {
                        let (to, d) = self.wire[i].clone();
                        self.deliver(to, d);
                    }
                    _ => {
                        let x = self.wire.remove(i);
                        self.wire.push(x);
                    }
                }
            }
            // Everything on the wire, in order.
            4 => {
                for (to, d) in std::mem::take(&mut self.wire) {
                    self.deliver(to, d);
                }
            }
            // Truncate, flip a bit in, or replay a datagram seen before.
            5 | 6 | 15 if !self.seen.is_empty() => {
                let (to, mut d) = self.seen[s.usize() % self.seen.len()].clone();
                let at = usize::from(u16::from_be_bytes([s.u8(), s.u8()]));
                match op & 0x0f {
                    5 => d.bytes.truncate(at % (d.bytes.len() + 1)),
                    6 if !d.bytes.is_empty() => {
                        let bit = at % (d.bytes.len() * 8);
                        d.bytes[bit / 8] ^= 1 << (bit % 8);
                    }
                    _ => {}
                }
                self.deliver(to, d);
            }
            // Arbitrary bytes under one of engine k's IKE SAs' SPIs, from its peer.
            7 => {
                let Some(spi) = self.sa_spi(k, s.usize()) else { return };
                let sa = self.ike[k].ike_sa(spi).unwrap();
                let (spi_i, spi_r, local, remote) = (sa.spi_i, sa.spi_r, sa.local, sa.remote);
                let (next, exchange, flags, id) = (s.u8(), 34 + s.u8() % 4, s.u8(), u32::from(s.u8()));
                let n = s.usize();
                let body = s.bytes(n).to_vec();
                let mut bytes = Vec::with_capacity(28 + body.len());
                bytes.extend(spi_i.to_be_bytes());
                bytes.extend(spi_r.to_be_bytes());
                bytes.extend([next, 0x20, exchange, flags]);
                bytes.extend(id.to_be_bytes());
                bytes.extend((28 + body.len() as u32).to_be_bytes());
                bytes.extend(body);
                self.deliver(k, Datagram { local, remote, bytes });
            }
            // Time passes, 1 s to 9 h, and both engines' timers run.
            8 => {
                self.now += Duration::from_secs(1 << (s.u8() % 16));
                for k in 0..2 {
                    let mut out = vec![];
                    self.ike[k].tick(self.now, &mut out);
                    self.absorb(k, out);
                }
            }
            9 => {
                if let Some((spi, spi_in)) = self.child_spi(k, s.usize(), s.usize()) {
                    self.ike[k].rekey_child(self.now, spi, spi_in, &mut out);
                }
            }
            10 => {
                if let Some(spi) = self.sa_spi(k, s.usize()) {
                    self.ike[k].rekey_ike(self.now, spi, &mut out);
                }
            }
            11 => {
                if let Some(spi) = self.sa_spi(k, s.usize()) {
                    self.ike[k].terminate(self.now, spi, &mut out);
                }
            }
            12 | 13 => {
                if let Some((_, spi)) = self.child_spi(k, s.usize(), s.usize()) {
                    let e = if op & 0x0f == 12 {
                        SaEvent::SoftExpire { spi }
                    } else {
                        SaEvent::HardExpire { spi }
                    };
                    self.ike[k].sa_event(self.now, e, &mut out);
                }
            }
            14 => {
                let _ = self.ike[k].initiate(self.now, "gw", "net", &mut out);
            }
            _ => {}
        }
        self.absorb(k, out);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut s = Script(data);
    let mut net = Net::new();
    let mut out = vec![];
    net.ike[0].initiate(net.now, "gw", "net", &mut out).unwrap();
    net.absorb(0, out);
    // Bit 0 of the first byte: finish the handshake before the script, so that the
    // fuzzer reaches rekeys and deletes without having to find the handshake first.
    if s.u8() & 1 == 1 {
        for _ in 0..8 {
            for (to, d) in std::mem::take(&mut net.wire) {
                net.deliver(to, d);
            }
        }
        assert!(net.quiet(), "the handshake did not end");
    }
    net.check_pairs();
    for _ in 0..OPS_MAX {
        if s.0.is_empty() {
            break;
        }
        net.step(&mut s);
        net.check_pairs();
    }
});
