//! The security association database.
//!
//! An SA holds its algorithms as one ocf session (keys live there and in the SA's own
//! spec, both wiped when the SA goes), its outbound sequence counter, its inbound replay
//! window, lifetimes and counters. The packet path finds SAs in an immutable snapshot
//! (`ArcSwap`, as the SPD): inbound by SPI and destination, outbound by endpoints; no
//! lookup ever waits for a writer. Writers (the control protocol through
//! [`crate::db::Transaction`], lifetime expiry) change a copy of the tables in place with a
//! `Writer` and swap it in once, on commit.
//!
//! # Sequence numbers never restart under a key
//!
//! The sequence number is the AES-GCM and ChaCha20-Poly1305 nonce (RFC 4106, RFC 7634), so
//! an SA must never start again at 1 under a key it has used:
//!
//! ```text
//! add (in a transaction)
//!  ├─ this transaction removed the SA with the same addresses, SPI, keys and ESN flag
//!  │     └─ Continued: a new version around the first one's session, counter, window
//!  ├─ AEAD key installed before in this process (its keyed hash is in `Keys`)
//!  │     └─ refused: KeyReused (names the SA that used it, never the key)
//!  └─ New: a session, a counter from 1, a window
//! ```
//!
//! A reload or a control request that changes an SA's replay window, lifetimes, mode,
//! reqid or ports deletes and adds it in one transaction: it is continued. Deleting it in
//! one request and adding it in another, or moving its key to another SPI, is refused. A
//! restart of the process cannot be seen from here: ipsecd warns at start-up.
//!
//! # A peer behind a NAT moves (port floating)
//!
//! A NAT may give an ESP-in-UDP peer a new source port at any time (its mapping timed out,
//! the NAT restarted). When the newest authenticated packet of an esp-udp SA comes from
//! another UDP source port than the one known for the peer ([`Sad::float`], called by the
//! packet path after the ICV and replay checks), the SA and every esp-udp SA the other way
//! between the same two addresses learn the new port, and the outbound ones send to it from
//! then on (as IKEv2 does for its own packets, RFC 7296 §2.23). The learned port lives in
//! each SA (`peer_port`, one atomic the packet path reads): a new SA (a reload, a control
//! request) takes it from the SAs the other way, a continued one from its previous version
//! unless its ports changed (the operator said where the peer is); SAs whose keys changed
//! start from the config if nothing is left to learn from. Only the port floats: a packet
//! from another source address is accepted (the SA is found by SPI and destination) but
//! moves nothing, since the address is part of the SA's identity.

use std::hash::BuildHasher;
use std::net::IpAddr;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use ocf::{Callback, Framework, Session};
use rustc_hash::FxHashMap as HashMap;
use subtle::{Choice, ConstantTimeEq};

use crate::control::{Lifetime, Migration, Mode, Proto, SaId, SaSpec, Selector, MAX_REPLAY_WINDOW};
use crate::esp::TransformError;
use crate::pmtu::PathMtu;
use crate::replay::{ReplayWindow, SeqCounter};
use crate::spd::Flow;
use crate::stats::{Counters, Stats};
use crate::transform::Transform;

/// Where an SA is in its life (RFC 2367's mature / dying / dead). It only moves forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum SaState {
    Mature = 0,
    /// Past a soft lifetime: still used, but should be replaced.
    Dying = 1,
    /// Past a hard lifetime (or removed): never used again.
    Dead = 2,
}

/// An SA's [`SaState`] in one atomic byte: the packet path reads it once per packet (one
/// load, as a bare `AtomicU8` was), lifetimes move it on. Only `SaState`s are stored.
struct AtomicSaState(AtomicU8);

impl AtomicSaState {
    const fn new(state: SaState) -> AtomicSaState {
        AtomicSaState(AtomicU8::new(state as u8))
    }

    #[inline]
    fn load(&self) -> SaState {
        Self::state(self.0.load(Ordering::Acquire))
    }

    /// Moves from `from` to `to`; true if the state was `from`.
    fn advance(&self, from: SaState, to: SaState) -> bool {
        self.0.compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Sets `to`; the state it was.
    fn swap(&self, to: SaState) -> SaState {
        Self::state(self.0.swap(to as u8, Ordering::AcqRel))
    }

    #[inline]
    fn state(v: u8) -> SaState {
        match v {
            0 => SaState::Mature,
            1 => SaState::Dying,
            // Only `SaState`s are stored; anything else reads as the safe end.
            _ => SaState::Dead,
        }
    }
}

/// Per SA, the two completions of an asynchronous driver (made when the SA is installed,
/// so the packet path allocates none).
pub(crate) struct SaCallbacks {
    pub(crate) output: Callback,
    pub(crate) input: Callback,
}

/// An installed SA: its spec and transform, and the state that belongs to its key.
///
/// The state that belongs to the key ([`Keyed`]: the crypto session, the outbound sequence
/// counter, the replay window, the counters) is shared by every version of the SA: a
/// change that keeps the addresses, SPI and keys (a reload that changes the replay window
/// or a lifetime) makes a new `Sa` that uses the first version's `Keyed`, so that the
/// sequence number — the AEAD nonce — goes on from where it was, even for a packet that
/// picked up the old version just before the swap. The packet path reaches it through
/// `Deref` (`sa.seq`): in the SA itself for a first version (no pointer to follow: an
/// `Arc<Keyed>` for every SA cost the inbound path measurably), in the first version for
/// a later one.
pub struct Sa {
    pub id: SaId,
    pub spec: SaSpec,
    pub(crate) transform: Transform,
    keyed: KeyedIn,
    /// The packet path's completions for this SA (set by [`crate::Ipsec`] when it installs it).
    pub(crate) callbacks: OnceLock<SaCallbacks>,
    state: AtomicSaState,
    /// The peer's UDP port as learned from its authenticated packets (ESP in UDP only):
    /// `LEARNED | port`, or 0 while the configured port holds (see the module docs).
    peer_port: AtomicU32,
    /// The path MTU learned from ICMP errors about this SA's packets ([`crate::pmtu`]).
    pub(crate) path_mtu: PathMtu,
}

/// The flag in [`Sa`]'s `peer_port` that says a port was learned (port 0 is a port too).
const LEARNED: u32 = 1 << 16;

/// What lives as long as an SA's key (see [`Sa`]); opaque outside the core.
pub struct Keyed {
    pub(crate) session: Session,
    pub(crate) seq: SeqCounter,
    pub(crate) replay: Mutex<ReplayWindow>,
    pub(crate) counters: Counters,
    added: Instant,
    exhausted: AtomicBool,
    /// When the SA last carried traffic, as observed off the packet path ([`Sa::observe`]).
    usage: Mutex<Usage>,
}

/// When an SA last carried traffic each way. The packet path records nothing for it: each
/// observation ([`Sad::tick`], every 200 ms in ipsecd, and each `get`/`dump`) compares
/// the SA's packet counters with the previous observation's, and a counter that grew
/// means traffic since then, stamped with the observation's time. So the time is late by
/// at most the time between observations, and costs the packet path nothing.
#[derive(Clone, Copy, Debug, Default)]
struct Usage {
    packets_in: u64,
    packets_out: u64,
    last_in: Option<Instant>,
    last_out: Option<Instant>,
}

/// When an SA last carried traffic, as of an observation ([`Sa::last_used`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LastUsed {
    /// The last inbound packet accepted (decrypted, authenticated, within the replay
    /// window): what liveness checks need (RFC 7296 §2.4). `None`: none yet.
    pub inbound: Option<Instant>,
    /// The last outbound packet sent.
    pub outbound: Option<Instant>,
}

/// Where an SA's [`Keyed`] is. (Inline on purpose: boxing it is the indirection the
/// packet path was measured to pay for.)
#[allow(clippy::large_enum_variant)]
enum KeyedIn {
    Here(Keyed),
    /// In the first version of the SA (whose own is `Here`).
    First(Arc<Sa>),
}

impl Deref for Sa {
    type Target = Keyed;

    #[inline(always)]
    fn deref(&self) -> &Keyed {
        match &self.keyed {
            KeyedIn::Here(k) => k,
            KeyedIn::First(first) => match &first.keyed {
                KeyedIn::Here(k) => k,
                KeyedIn::First(_) => unreachable!("a first version holds its own state"),
            },
        }
    }
}

impl std::fmt::Debug for Sa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sa").field("id", &self.id).field("state", &self.state()).finish_non_exhaustive()
    }
}

/// Which of a lifetime's limits ran out (RFC 2367's CURRENT lifetime against the HARD or
/// SOFT one): its age, its bytes or its packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Time,
    Bytes,
    Packets,
}

impl Limit {
    pub fn name(self) -> &'static str {
        match self {
            Limit::Time => "time",
            Limit::Bytes => "bytes",
            Limit::Packets => "packets",
        }
    }
}

/// What an ACQUIRE asks for ([`crate::acquire`]): an SA from `src` to `dst` (the policy's
/// tunnel endpoints, or the packet's addresses in transport mode) of `proto` and `mode`,
/// with `reqid` (0: any), for the outbound policy whose selector is `policy`; `flow` is the
/// packet that asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Acquire {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: Proto,
    pub mode: Mode,
    pub reqid: u32,
    pub policy: Selector,
    pub flow: Flow,
}

/// What happened to an SA that its owner should hear about.
///
/// Not `Copy`: an ACQUIRE is boxed, so that an event stays small where the packet path
/// makes one (inline, the 100-byte ACQUIRE cost `esp-input` 2–3% of its share in
/// `benches/esp.rs`, medians of 16 alternating runs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The peer of an ESP-in-UDP SA sent an authenticated packet from another UDP port:
    /// the SAs to it now send there ([`Sad::float`]).
    PeerMoved { sa: SaId, from: u16, to: u16 },
    /// A soft lifetime ran out (`by` says which): re-key soon.
    SoftExpired { sa: SaId, by: Limit },
    /// A hard lifetime ran out (`by` says which): the SA was removed.
    HardExpired { sa: SaId, by: Limit },
    /// The sequence number space is used up: the SA no longer sends.
    SeqExhausted(SaId),
    /// An ICMP error from the path lowered the SA's path MTU to `mtu` ([`crate::pmtu`]).
    PathMtu { sa: SaId, mtu: u32 },
    /// Outbound traffic needs an SA that does not exist: a key manager should make it
    /// ([`crate::acquire`]).
    Acquire(Box<Acquire>),
    /// An SPI that GETSPI reserved was not given keys (UPDATE) in time, and is free again
    /// ([`crate::larval`]).
    LarvalExpired(SaId),
    /// A control request changed the databases ([`crate::changes`]; boxed, as ACQUIRE).
    Changed(Box<crate::changes::Change>),
}

impl Sa {
    pub fn state(&self) -> SaState {
        self.state.load()
    }

    /// The UDP port of the peer as learned from its authenticated packets, if it moved
    /// away from the configured one (ESP in UDP).
    pub fn learned_port(&self) -> Option<u16> {
        let v = self.peer_port.load(Ordering::Relaxed);
        (v & LEARNED != 0).then_some(v as u16)
    }

    /// Where this SA's packets go, as a UDP destination port: the learned port, or the
    /// configured one. `None` for plain ESP.
    #[inline]
    pub fn send_port(&self) -> Option<u16> {
        let n = self.spec.natt?;
        Some(self.learned_port().unwrap_or(n.dport))
    }

    /// The source port the peer's packets on this SA are expected from: the learned port,
    /// or the configured one. `None` for plain ESP.
    pub fn peer_source_port(&self) -> Option<u16> {
        let n = self.spec.natt?;
        Some(self.learned_port().unwrap_or(n.sport))
    }

    /// This SA's counters.
    pub fn stats(&self) -> Stats {
        self.counters.snapshot()
    }

    /// Notes, as of `now`, whether the SA carried traffic since the last observation (see
    /// [`LastUsed`]); returns when it last did each way. A migrated or continued SA goes on
    /// with its predecessor's (they share the state of their key).
    pub fn observe(&self, now: Instant) -> LastUsed {
        let (pin, pout) = (
            self.counters.packets_in.load(Ordering::Relaxed),
            self.counters.packets_out.load(Ordering::Relaxed),
        );
        let mut u = self.usage.lock().unwrap_or_else(PoisonError::into_inner);
        if pin != u.packets_in {
            u.packets_in = pin;
            u.last_in = Some(now);
        }
        if pout != u.packets_out {
            u.packets_out = pout;
            u.last_out = Some(now);
        }
        LastUsed { inbound: u.last_in, outbound: u.last_out }
    }

    /// How long ago the SA was added.
    pub fn age(&self) -> Duration {
        self.added.elapsed()
    }

    /// The name of the ocf driver doing this SA's crypto.
    pub fn driver(&self) -> String {
        self.session.driver_name()
    }

    /// The last outbound sequence number used (0: none yet).
    pub fn last_sequence(&self) -> u64 {
        self.seq.last()
    }

    /// Restores the outbound sequence counter from saved state (the next packet gets
    /// `last + 1`); it never moves back, so no sequence number or nonce is used twice.
    pub fn resume_sequence(&self, last: u64) {
        self.seq.skip_to(last);
    }

    /// The SA's transform: ESP's or AH's (algorithms, IV and ICV lengths).
    pub fn transform(&self) -> &Transform {
        &self.transform
    }

    /// Records that the sequence space ran out; true the first time (report once).
    pub(crate) fn exhausted_first(&self) -> bool {
        !self.exhausted.swap(true, Ordering::AcqRel)
    }

    /// Marks the SA dying; true if it was mature (report once).
    fn to_dying(&self) -> bool {
        self.state.advance(SaState::Mature, SaState::Dying)
    }

    /// Marks the SA dead; true if it was not already.
    fn to_dead(&self) -> bool {
        self.state.swap(SaState::Dead) != SaState::Dead
    }

    /// Whether the SA has packet or byte lifetimes (else [`Sa::charge`] has nothing to do).
    #[inline]
    pub(crate) fn has_volume_limits(&self) -> bool {
        let l = |l: &Lifetime| l.packets.is_some() || l.bytes.is_some();
        l(&self.spec.hard) || l(&self.spec.soft)
    }

    /// Charges the SA's packets and bytes so far against the lifetimes (bytes and packets;
    /// time is [`Sad::tick`]'s). Returns the transition it caused, if any, and which limit
    /// caused it (packets before bytes when one packet crosses both).
    pub(crate) fn charge(&self, packets: u64, bytes: u64) -> Option<(SaState, Limit)> {
        let over = |l: &Lifetime| {
            if l.packets.is_some_and(|n| packets > n) {
                Some(Limit::Packets)
            } else if l.bytes.is_some_and(|n| bytes > n) {
                Some(Limit::Bytes)
            } else {
                None
            }
        };
        if let Some(by) = over(&self.spec.hard) {
            return self.to_dead().then_some((SaState::Dead, by));
        }
        match over(&self.spec.soft) {
            Some(by) if self.to_dying() => Some((SaState::Dying, by)),
            _ => None,
        }
    }
}

/// Why an SA could not be installed, found or removed.
#[derive(Debug, PartialEq, Eq)]
pub enum SadError {
    /// AH is not implemented.
    Unsupported(Proto),
    /// An IPComp SA's SPI is its CPI, which has 16 bits on the wire (RFC 3173 §2.2).
    CpiTooLarge(u32),
    /// An SA with the same addresses, protocol and SPI exists.
    Exists,
    /// Another SA (this one) has the same SPI and destination: inbound packets are told
    /// apart by those two alone (RFC 4301 §4.1), so the two could not both be found.
    SpiTaken(SaId),
    /// The AEAD key was installed before in this process, by this SA: a new SA with it
    /// would start its sequence numbers — the nonces — again at 1.
    KeyReused(SaId),
    NotFound,
    /// SPIs 0–255 are reserved (RFC 4303 §2.1).
    ReservedSpi(u32),
    /// Replay window above [`MAX_REPLAY_WINDOW`].
    ReplayWindow(u32),
    /// The algorithms or keys are wrong.
    Transform(TransformError),
    /// ocf refused the session (no driver, weak key, …).
    Crypto(ocf::Error),
    /// `migrate` to addresses of another family than the SA's.
    MigrateFamily,
    /// `migrate` with ports, of an SA without UDP encapsulation.
    MigratePorts,
}

/// Whether the SAD installs SAs of `proto`.
pub(crate) fn supports(proto: Proto) -> bool {
    matches!(proto, Proto::Esp | Proto::EspUdp | Proto::Ah | Proto::IpComp)
}

/// An SA named in a message: addresses, protocol and SPI (never its keys).
pub fn describe(id: &SaId) -> String {
    format!("{} -> {} {} SPI {:#x}", id.src, id.dst, id.proto.name(), id.spi)
}

impl std::fmt::Display for SadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SadError::Unsupported(p) => {
                write!(f, "{} is not supported (only esp, esp-udp and ipcomp)", p.name())
            }
            SadError::CpiTooLarge(spi) => crate::ipcomp::IpCompError::CpiTooLarge(*spi).fmt(f),
            SadError::Exists => f.write_str("an SA with the same addresses, protocol and SPI already exists"),
            SadError::SpiTaken(other) => write!(
                f,
                "its SPI and destination are those of the SA {} (inbound ESP is matched by SPI and destination alone)",
                describe(other)
            ),
            SadError::KeyReused(by) => write!(
                f,
                "its key was already installed in this ipsecd, by the SA {}: a new SA with it would start its \
                 sequence numbers, the AES-GCM/ChaCha20-Poly1305 nonces, again at 1 (nonce reuse); give it a new key",
                describe(by)
            ),
            SadError::NotFound => f.write_str("no such SA"),
            SadError::ReservedSpi(s) => write!(f, "SPI {s} is reserved (RFC 4303 §2.1: 1-255)"),
            SadError::ReplayWindow(w) => write!(f, "replay window {w} is larger than {MAX_REPLAY_WINDOW}"),
            SadError::Transform(e) => e.fmt(f),
            SadError::Crypto(e) => write!(f, "crypto session: {e}"),
            SadError::MigrateFamily => f.write_str("migrate keeps an SA's address family"),
            SadError::MigratePorts => {
                f.write_str("ports are for an SA with UDP encapsulation (esp-udp, or esp with ports); this one has none")
            }
        }
    }
}

impl std::error::Error for SadError {}

/// The lookup tables: read without locks, changed by a [`Writer`] on a copy.
#[derive(Clone, Default)]
struct Tables {
    by_id: HashMap<SaId, Arc<Sa>>,
    /// Inbound: ESP SPI and destination.
    inbound: HashMap<(u32, IpAddr), Arc<Sa>>,
    /// Outbound: (source, destination) → SAs, oldest first.
    outbound: HashMap<(IpAddr, IpAddr), Vec<Arc<Sa>>>,
    /// IPComp SAs, apart from ESP's (`crate::ipcomp_path`): by CPI and destination, and by
    /// (source, destination), oldest first.
    ipcomp_in: HashMap<(u32, IpAddr), Arc<Sa>>,
    ipcomp_ends: HashMap<(IpAddr, IpAddr), Vec<Arc<Sa>>>,
}

impl Tables {
    fn insert(&mut self, sa: Arc<Sa>) {
        // IPComp SAs have tables of their own: ESP's lookups must never find them.
        let (inbound, outbound) = match sa.id.proto {
            Proto::IpComp => (&mut self.ipcomp_in, &mut self.ipcomp_ends),
            _ => (&mut self.inbound, &mut self.outbound),
        };
        inbound.insert((sa.id.spi, sa.id.dst), sa.clone());
        let v = outbound.entry((sa.id.src, sa.id.dst)).or_default();
        // Oldest first: a continued SA keeps its place.
        let at = v.partition_point(|x| x.added <= sa.added);
        v.insert(at, sa.clone());
        self.by_id.insert(sa.id, sa);
    }

    fn remove(&mut self, id: &SaId) -> Option<Arc<Sa>> {
        let sa = self.by_id.remove(id)?;
        let (inbound, outbound) = match id.proto {
            Proto::IpComp => (&mut self.ipcomp_in, &mut self.ipcomp_ends),
            _ => (&mut self.inbound, &mut self.outbound),
        };
        inbound.remove(&(id.spi, id.dst));
        if let Some(v) = outbound.get_mut(&(id.src, id.dst)) {
            v.retain(|x| x.id != *id);
            if v.is_empty() {
                outbound.remove(&(id.src, id.dst));
            }
        }
        Some(sa)
    }

    fn sorted(&self, proto: Option<Proto>) -> Vec<Arc<Sa>> {
        let mut v: Vec<_> =
            self.by_id.values().filter(|sa| proto.is_none_or(|p| p == sa.id.proto)).cloned().collect();
        v.sort_by_key(|sa| sa.added);
        v
    }
}

/// Every AEAD key this SAD has installed, as a keyed hash (SipHash with this process's
/// random key; never the key itself), and the SA that installed it. Kept for the life of
/// the process: a key that comes back after its SA went (a delete and re-add, a reload
/// that changes the SPI) would start its nonces again at 1, and is refused.
#[derive(Default)]
struct Keys {
    hasher: std::hash::RandomState,
    used: HashMap<u64, SaId>,
}

impl Keys {
    /// The key's fingerprint, for an AEAD (whose nonce is the sequence number).
    fn fingerprint(&self, spec: &SaSpec) -> Option<u64> {
        spec.enc.is_aead().then(|| self.hasher.hash_one((spec.enc.name(), spec.enc_key.as_bytes())))
    }
}

/// The SAD.
pub struct Sad {
    fw: Framework,
    tables: ArcSwap<Tables>,
    /// Serializes writers (lookups never take it).
    writer: Mutex<Keys>,
}

/// How an SA was installed ([`crate::db::Transaction::add_sa`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Installed {
    /// With a new session, sequence counter and replay window.
    New,
    /// In place of the SA with the same addresses, SPI and keys that this change removed:
    /// its session, sequence number, replay window and counters go on.
    Continued,
}

impl Sad {
    /// An empty SAD whose SAs get their crypto sessions from `fw`.
    pub fn new(fw: Framework) -> Sad {
        Sad { fw, tables: ArcSwap::from_pointee(Tables::default()), writer: Mutex::new(Keys::default()) }
    }

    /// One SA (setkey `get`).
    pub fn get(&self, id: &SaId) -> Option<Arc<Sa>> {
        self.tables.load().by_id.get(id).cloned()
    }

    /// Every SA (of `proto`), oldest first (setkey `dump`).
    pub fn dump(&self, proto: Option<Proto>) -> Vec<Arc<Sa>> {
        self.tables.load().sorted(proto)
    }

    /// How many SAs are installed.
    pub fn len(&self) -> usize {
        self.tables.load().by_id.len()
    }

    /// Whether no SA is installed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The inbound SA for an ESP or AH packet's SPI and destination. (Always inlined:
    /// called from ESP's and AH's paths, LLVM made it a call, which cost ESP input about
    /// 5% in `benches/esp.rs`.)
    #[inline(always)]
    pub fn inbound(&self, spi: u32, dst: IpAddr) -> Option<Arc<Sa>> {
        self.tables.load().inbound.get(&(spi, dst)).cloned()
    }

    /// An authenticated packet of `sa` (ESP in UDP, the newest the replay window has seen)
    /// came from UDP source port `port`: if that is not the port known for the peer, `sa`
    /// and every ESP-in-UDP SA the other way between the same addresses learn it, and the
    /// port it replaces is returned (once per change, even if packets race: the change is
    /// one compare-and-swap on `sa`). The caller counts and reports it.
    pub fn float(&self, sa: &Sa, port: u16) -> Option<u16> {
        let from = sa.peer_source_port()?;
        if from == port {
            return None;
        }
        let now = sa.peer_port.load(Ordering::Relaxed);
        let learned = LEARNED | u32::from(port);
        sa.peer_port.compare_exchange(now, learned, Ordering::Relaxed, Ordering::Relaxed).ok()?;
        if let Some(back) = self.tables.load().outbound.get(&(sa.id.dst, sa.id.src)) {
            for other in back.iter().filter(|o| o.spec.natt.is_some()) {
                other.peer_port.store(learned, Ordering::Relaxed);
            }
        }
        Some(from)
    }

    /// The IPComp SA for an inbound IPComp packet's CPI and destination.
    #[inline]
    pub fn ipcomp_inbound(&self, cpi: u16, dst: IpAddr) -> Option<Arc<Sa>> {
        self.tables.load().ipcomp_in.get(&(u32::from(cpi), dst)).cloned()
    }

    /// The newest usable IPComp SA from `src` to `dst` (with `reqid`, if non-zero).
    #[inline]
    pub fn ipcomp_between(&self, src: IpAddr, dst: IpAddr, reqid: u32) -> Option<Arc<Sa>> {
        let t = self.tables.load();
        let v = t.ipcomp_ends.get(&(src, dst))?;
        v.iter()
            .rev()
            .find(|sa| sa.state() != SaState::Dead && (reqid == 0 || sa.spec.reqid == reqid))
            .cloned()
    }

    /// The SA to send with from `src` to `dst`: the newest usable one whose mode fits and,
    /// if `reqid` is non-zero, whose reqid is that (setkey `unique:N`).
    #[inline]
    /// ESP's (or ESP in UDP's): an AH SA is never the answer.
    pub fn outbound(&self, src: IpAddr, dst: IpAddr, mode: Mode, reqid: u32) -> Option<Arc<Sa>> {
        self.outbound_with(src, dst, Proto::Esp, mode, reqid, |sa| sa.cloned())
    }

    /// [`Sad::outbound`] that lends the SA to `f` (the packet path's: a counted reference
    /// per packet is an add and a subtract on a cache line every thread sending through
    /// the SA writes; the batch takes one per run of the SA, `Shared::submit`). `proto` is
    /// the policy rule's: an `ah` rule takes an AH SA, `esp` and `esp-udp` either ESP SA.
    #[inline]
    pub(crate) fn outbound_with<R>(
        &self,
        src: IpAddr,
        dst: IpAddr,
        proto: Proto,
        mode: Mode,
        reqid: u32,
        f: impl FnOnce(Option<&Arc<Sa>>) -> R,
    ) -> R {
        let t = self.tables.load();
        f(t.outbound.get(&(src, dst)).and_then(|v| {
            v.iter().rev().find(|sa| {
                sa.state() != SaState::Dead
                    && (sa.id.proto == Proto::Ah) == (proto == Proto::Ah)
                    && (sa.spec.mode == Mode::Any || mode == Mode::Any || sa.spec.mode == mode)
                    && (reqid == 0 || sa.spec.reqid == reqid)
            })
        }))
    }

    /// Applies time lifetimes as of `now` (call it every second or so): soft expiry marks
    /// the SA dying and reports it; hard expiry removes it. Also removes the SAs that died on
    /// the packet path while a writer held the tables (`Sad::reap`). Ages are taken at `now`
    /// rather than read from the clock, so that a test can step time instead of sleeping.
    pub fn tick(&self, now: Instant) -> Vec<Event> {
        let mut events = Vec::new();
        let mut gone = Vec::new();
        for sa in self.tables.load().by_id.values() {
            sa.observe(now);
            let age = now.saturating_duration_since(sa.added).as_secs();
            if sa.spec.hard.seconds.is_some_and(|s| age >= s) {
                gone.push(sa.id);
                events.push(Event::HardExpired { sa: sa.id, by: Limit::Time });
            } else if sa.state() == SaState::Dead {
                gone.push(sa.id);
            } else if sa.spec.soft.seconds.is_some_and(|s| age >= s) && sa.to_dying() {
                events.push(Event::SoftExpired { sa: sa.id, by: Limit::Time });
            }
        }
        if !gone.is_empty() {
            let mut w = self.writer();
            for id in &gone {
                w.remove(id);
            }
            w.commit();
        }
        events
    }

    /// Removes an SA that died on the packet path (hard byte or packet lifetime). The
    /// packet path does not wait: if a writer holds the tables, the SA (already dead, so
    /// unused) is left for [`Sad::tick`].
    pub(crate) fn reap(&self, id: &SaId) {
        let Ok(keys) = self.writer.try_lock() else { return };
        let mut w = Writer::with(self, keys);
        w.remove(id);
        w.commit();
    }

    /// Starts a change (the only way to make one): waits for any other writer.
    pub(crate) fn writer(&self) -> Writer<'_> {
        Writer::with(self, self.writer.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A new SA for `spec`, with its own session and state.
    fn build(&self, spec: SaSpec) -> Result<Sa, SadError> {
        let (transform, params) = transform_of(&spec)?;
        let session = self.fw.new_session(&params).map_err(SadError::Crypto)?;
        let keyed = Keyed {
            session,
            seq: SeqCounter::new(spec.esn),
            replay: Mutex::new(ReplayWindow::new(spec.replay_window, spec.esn)),
            counters: Counters::default(),
            added: Instant::now(),
            exhausted: AtomicBool::new(false),
            usage: Mutex::new(Usage::default()),
        };
        Ok(Sa::around(spec, transform, KeyedIn::Here(keyed)))
    }
}

/// An SA's transform and ocf session parameters (ESP's, AH's or IPComp's).
fn transform_of(spec: &SaSpec) -> Result<(Transform, ocf::SessionParams), SadError> {
    Transform::new(spec).map_err(SadError::Transform)
}

impl Sa {
    fn around(spec: SaSpec, transform: Transform, keyed: KeyedIn) -> Sa {
        Sa {
            id: SaId { src: spec.src, dst: spec.dst, proto: spec.proto, spi: spec.spi },
            spec,
            transform,
            keyed,
            callbacks: OnceLock::new(),
            state: AtomicSaState::new(SaState::Mature),
            peer_port: AtomicU32::new(0),
            path_mtu: Default::default(),
        }
    }

    /// Whether `spec` has this SA's keys (and sequence number space): then a new version
    /// of it may go on with its state. The keys are compared in constant time, both of
    /// them whatever the algorithms are.
    fn same_keys(&self, spec: &SaSpec) -> bool {
        let auth = match (&self.spec.auth, &spec.auth) {
            (None, None) => Choice::from(1),
            (Some((a, k)), Some((b, l))) => Choice::from(u8::from(a == b)) & k.ct_eq(l),
            _ => Choice::from(0),
        };
        bool::from(self.spec.enc_key.ct_eq(&spec.enc_key) & auth)
            && self.spec.enc == spec.enc
            && self.spec.esn == spec.esn
    }
}

/// A change to the SAD in progress: a copy of the tables, made on the first change and
/// changed in place; nothing is visible to the packet path until [`Writer::commit`], and
/// dropping the writer undoes everything (the sessions it made are freed).
pub(crate) struct Writer<'a> {
    sad: &'a Sad,
    keys: MutexGuard<'a, Keys>,
    tables: Option<Tables>,
    /// The SAs this change removed: an add of the same id and keys continues one.
    retired: HashMap<SaId, Arc<Sa>>,
    /// Continued SAs whose replay window changes size.
    resized: Vec<Arc<Sa>>,
    /// The AEAD keys this change installs.
    new_keys: HashMap<u64, SaId>,
    added: Vec<Arc<Sa>>,
    /// The SAs this change moved to new addresses, as they were (they die at commit).
    migrated: Vec<Arc<Sa>>,
}

impl<'a> Writer<'a> {
    fn with(sad: &'a Sad, keys: MutexGuard<'a, Keys>) -> Writer<'a> {
        Writer {
            sad,
            keys,
            tables: None,
            retired: HashMap::default(),
            resized: Vec::new(),
            new_keys: HashMap::default(),
            added: Vec::new(),
            migrated: Vec::new(),
        }
    }

    fn tables(&mut self) -> &mut Tables {
        let sad = self.sad;
        self.tables.get_or_insert_with(|| Tables::clone(&sad.tables.load()))
    }

    fn read<R>(&self, f: impl FnOnce(&Tables) -> R) -> R {
        match &self.tables {
            Some(t) => f(t),
            None => f(&self.sad.tables.load()),
        }
    }

    /// Installs an SA (setkey `add`). If this change removed an SA with the same addresses,
    /// protocol, SPI and keys, the new one continues its state ([`Installed::Continued`]).
    pub(crate) fn add(&mut self, spec: SaSpec) -> Result<Installed, SadError> {
        if !supports(spec.proto) {
            return Err(SadError::Unsupported(spec.proto));
        }
        if spec.proto == Proto::IpComp && crate::ipcomp::cpi_of(spec.spi).is_err() {
            return Err(SadError::CpiTooLarge(spec.spi));
        }
        if spec.spi < 256 {
            return Err(SadError::ReservedSpi(spec.spi));
        }
        if spec.replay_window > MAX_REPLAY_WINDOW {
            return Err(SadError::ReplayWindow(spec.replay_window));
        }
        let id = SaId { src: spec.src, dst: spec.dst, proto: spec.proto, spi: spec.spi };
        let clash = self.read(|t| {
            if t.by_id.contains_key(&id) {
                Some(SadError::Exists)
            } else if id.proto == Proto::IpComp {
                // CPIs are a space of their own (per destination).
                t.ipcomp_in.get(&(id.spi, id.dst)).map(|other| SadError::SpiTaken(other.id))
            } else {
                t.inbound.get(&(id.spi, id.dst)).map(|other| SadError::SpiTaken(other.id))
            }
        });
        if let Some(e) = clash {
            return Err(e);
        }
        let (sa, how) = match self.retired.get(&id).filter(|old| old.same_keys(&spec)) {
            Some(old) => {
                let (transform, _) = transform_of(&spec)?;
                let first = match &old.keyed {
                    KeyedIn::Here(_) => old.clone(),
                    KeyedIn::First(first) => first.clone(),
                };
                let sa = Arc::new(Sa::around(spec, transform, KeyedIn::First(first)));
                if sa.spec.natt == old.spec.natt {
                    sa.peer_port.store(old.peer_port.load(Ordering::Relaxed), Ordering::Relaxed);
                }
                if sa.spec.replay_window != old.spec.replay_window {
                    self.resized.push(sa.clone());
                }
                self.retired.remove(&id);
                (sa, Installed::Continued)
            }
            None => {
                let fp = self.keys.fingerprint(&spec);
                if let Some(by) = fp.and_then(|k| self.keys.used.get(&k).or(self.new_keys.get(&k))) {
                    return Err(SadError::KeyReused(*by));
                }
                let sa = Arc::new(self.sad.build(spec)?);
                if sa.spec.natt.is_some() {
                    let learned = self.read(|t| {
                        let back = t.outbound.get(&(sa.id.dst, sa.id.src))?;
                        back.iter().rev().find_map(|o| o.spec.natt.and(o.learned_port()))
                    });
                    if let Some(p) = learned {
                        sa.peer_port.store(LEARNED | u32::from(p), Ordering::Relaxed);
                    }
                }
                if let Some(k) = fp {
                    self.new_keys.insert(k, id);
                }
                (sa, Installed::New)
            }
        };
        self.tables().insert(sa.clone());
        self.added.push(sa);
        Ok(how)
    }

    /// Moves the SA `id` to `to`'s addresses (and ports) in place (setkey `migrate`): the
    /// SA under its new id goes on with the old one's session, sequence number, replay
    /// window, counters and last use (as a continued SA does); the old id is gone. A new id
    /// that another SA holds, or whose SPI and destination another SA's are, is refused
    /// (the caller checks larval SPIs). Returns the SA as it now is.
    pub(crate) fn migrate(&mut self, id: &SaId, to: &Migration) -> Result<Arc<Sa>, SadError> {
        let old = self.get(id).ok_or(SadError::NotFound)?;
        if to.src.is_ipv4() != id.src.is_ipv4() || to.dst.is_ipv4() != id.dst.is_ipv4() {
            return Err(SadError::MigrateFamily);
        }
        let mut spec = old.spec.clone();
        spec.src = to.src;
        spec.dst = to.dst;
        match (&mut spec.natt, to.sport.or(to.dport)) {
            (Some(n), _) => {
                n.sport = to.sport.unwrap_or(n.sport);
                n.dport = to.dport.unwrap_or(n.dport);
            }
            (None, Some(_)) => return Err(SadError::MigratePorts),
            (None, None) => {}
        }
        let new_id = SaId { src: spec.src, dst: spec.dst, proto: spec.proto, spi: spec.spi };
        let clash = self.read(|t| {
            if new_id != *id && t.by_id.contains_key(&new_id) {
                return Some(SadError::Exists);
            }
            let holder = match id.proto {
                Proto::IpComp => t.ipcomp_in.get(&(new_id.spi, new_id.dst)),
                _ => t.inbound.get(&(new_id.spi, new_id.dst)),
            };
            holder.filter(|other| other.id != *id).map(|other| SadError::SpiTaken(other.id))
        });
        if let Some(e) = clash {
            return Err(e);
        }
        let (transform, _) = transform_of(&spec)?;
        let first = match &old.keyed {
            KeyedIn::Here(_) => old.clone(),
            KeyedIn::First(first) => first.clone(),
        };
        let moved = Arc::new(Sa::around(spec, transform, KeyedIn::First(first)));
        // A peer port learned on the old path stands only if the operator named none.
        if moved.spec.natt == old.spec.natt {
            moved.peer_port.store(old.peer_port.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        // Its state: as the old SA's (it cannot be revived, nor moved back to life).
        if old.state() == SaState::Dying {
            moved.to_dying();
        }
        let t = self.tables();
        t.remove(id);
        t.insert(moved.clone());
        // The old version dies at commit; its key is the new one's now.
        self.migrated.push(old);
        if let Some(k) = self.keys.fingerprint(&moved.spec) {
            self.new_keys.insert(k, new_id);
        }
        self.added.push(moved.clone());
        Ok(moved)
    }

    /// Removes one SA; whether it was there.
    fn remove(&mut self, id: &SaId) -> bool {
        match self.tables().remove(id) {
            Some(sa) => {
                self.retired.insert(*id, sa);
                true
            }
            None => false,
        }
    }

    /// Removes the SAs `gone` picks; how many.
    fn remove_where(&mut self, gone: impl Fn(&Sa) -> bool) -> usize {
        let ids: Vec<SaId> = self.read(|t| t.by_id.values().filter(|sa| gone(sa)).map(|sa| sa.id).collect());
        ids.iter().filter(|id| self.remove(id)).count()
    }

    /// The SA of `proto`'s number space that holds `spi` at `dst` as this change leaves it,
    /// if one does (GETSPI's search, [`crate::larval`]): IPComp's CPIs are a space of their
    /// own, ESP's SPIs another.
    pub(crate) fn spi_holder(&self, proto: Proto, spi: u32, dst: IpAddr) -> Option<SaId> {
        match proto {
            Proto::IpComp => self.read(|t| t.ipcomp_in.get(&(spi, dst)).map(|sa| sa.id)),
            _ => self.read(|t| t.inbound.get(&(spi, dst)).map(|sa| sa.id)),
        }
    }

    /// How many SAs this change leaves.
    pub(crate) fn len(&self) -> usize {
        self.read(|t| t.by_id.len())
    }

    /// One SA as this change leaves it (setkey `get`).
    pub(crate) fn get(&self, id: &SaId) -> Option<Arc<Sa>> {
        self.read(|t| t.by_id.get(id).cloned())
    }

    /// Removes one SA (setkey `delete`).
    pub(crate) fn delete(&mut self, id: &SaId) -> Result<(), SadError> {
        if self.remove(id) {
            Ok(())
        } else {
            Err(SadError::NotFound)
        }
    }

    /// Removes every SA from `src` to `dst` (setkey `deleteall`); returns how many.
    pub(crate) fn delete_all(&mut self, src: IpAddr, dst: IpAddr, proto: Proto) -> usize {
        self.remove_where(|sa| sa.id.src == src && sa.id.dst == dst && sa.id.proto == proto)
    }

    /// Removes every SA (of `proto`) (setkey `flush`); returns how many.
    pub(crate) fn flush(&mut self, proto: Option<Proto>) -> usize {
        self.remove_where(|sa| proto.is_none_or(|p| p == sa.id.proto))
    }

    /// Every SA (of `proto`) as this change leaves them, oldest first (setkey `dump`).
    pub(crate) fn dump(&self, proto: Option<Proto>) -> Vec<Arc<Sa>> {
        self.read(|t| t.sorted(proto))
    }

    /// Makes the change visible in one swap; the SAs it removed die (those it continued
    /// live on in their successors). Returns the SAs it installed.
    pub(crate) fn commit(mut self) -> Vec<Arc<Sa>> {
        if let Some(t) = self.tables.take() {
            self.sad.tables.store(Arc::new(t));
        }
        for sa in self.retired.values().chain(&self.migrated) {
            sa.to_dead();
        }
        for sa in &self.resized {
            let mut w = sa.replay.lock().unwrap_or_else(PoisonError::into_inner);
            *w = w.resized(sa.spec.replay_window);
        }
        let new_keys = std::mem::take(&mut self.new_keys);
        self.keys.used.extend(new_keys);
        std::mem::take(&mut self.added)
    }
}
