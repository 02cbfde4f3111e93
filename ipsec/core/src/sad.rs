//! The security association database.
//!
//! An SA holds its algorithms as one ocf session (keys live there and in the SA's own
//! spec, both wiped when the SA goes), its outbound sequence counter, its inbound replay
//! window, lifetimes and counters. The packet path finds SAs in an immutable snapshot
//! (`ArcSwap`, as the SPD): inbound by SPI and destination, outbound by endpoints; no
//! lookup ever waits for a writer. Writers (the control protocol, lifetime expiry) build
//! a new snapshot.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use ocf::{Framework, Session};
use rustc_hash::FxHashMap as HashMap;

use crate::control::{Lifetime, Mode, Proto, SaId, SaSpec, MAX_REPLAY_WINDOW};
use crate::esp::{Transform, TransformError};
use crate::replay::{ReplayWindow, SeqCounter};
use crate::stats::{Counters, Stats};

/// Where an SA is in its life (RFC 2367's mature / dying / dead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaState {
    Mature,
    /// Past a soft lifetime: still used, but should be replaced.
    Dying,
    /// Past a hard lifetime (or removed): never used again.
    Dead,
}

/// An installed SA.
pub struct Sa {
    pub id: SaId,
    pub spec: SaSpec,
    pub(crate) transform: Transform,
    pub(crate) session: Session,
    pub(crate) seq: SeqCounter,
    pub(crate) replay: Mutex<ReplayWindow>,
    pub(crate) counters: Counters,
    /// The packet path's completions for this SA (set by [`crate::Ipsec`] when it installs it).
    pub(crate) callbacks: OnceLock<crate::datapath::SaCallbacks>,
    added: Instant,
    state: AtomicU8,
    exhausted: AtomicBool,
}

impl std::fmt::Debug for Sa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sa").field("id", &self.id).field("state", &self.state()).finish_non_exhaustive()
    }
}

/// What happened to an SA that its owner should hear about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A soft lifetime ran out: re-key soon.
    SoftExpired(SaId),
    /// A hard lifetime ran out: the SA was removed.
    HardExpired(SaId),
    /// The sequence number space is used up: the SA no longer sends.
    SeqExhausted(SaId),
}

impl Sa {
    pub fn state(&self) -> SaState {
        match self.state.load(Ordering::Acquire) {
            0 => SaState::Mature,
            1 => SaState::Dying,
            _ => SaState::Dead,
        }
    }

    /// This SA's counters.
    pub fn stats(&self) -> Stats {
        self.counters.snapshot()
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

    /// The ESP transform (algorithms, IV and ICV lengths).
    pub fn transform(&self) -> &Transform {
        &self.transform
    }

    /// Records that the sequence space ran out; true the first time (report once).
    pub(crate) fn exhausted_first(&self) -> bool {
        !self.exhausted.swap(true, Ordering::AcqRel)
    }

    /// Marks the SA dying; true if it was mature (report once).
    fn to_dying(&self) -> bool {
        self.state.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Marks the SA dead; true if it was not already.
    fn to_dead(&self) -> bool {
        self.state.swap(2, Ordering::AcqRel) != 2
    }

    /// Whether the SA has packet or byte lifetimes (else [`Sa::charge`] has nothing to do).
    #[inline]
    pub(crate) fn has_volume_limits(&self) -> bool {
        let l = |l: &Lifetime| l.packets.is_some() || l.bytes.is_some();
        l(&self.spec.hard) || l(&self.spec.soft)
    }

    /// Charges the SA's packets and bytes so far against the lifetimes (bytes and packets;
    /// time is [`Sad::tick`]'s). Returns the transition it caused, if any.
    pub(crate) fn charge(&self, packets: u64, bytes: u64) -> Option<SaState> {
        let over =
            |l: &Lifetime| l.packets.is_some_and(|n| packets > n) || l.bytes.is_some_and(|n| bytes > n);
        if over(&self.spec.hard) {
            return self.to_dead().then_some(SaState::Dead);
        }
        if over(&self.spec.soft) && self.to_dying() {
            return Some(SaState::Dying);
        }
        None
    }
}

/// Why an SA could not be installed, found or removed.
#[derive(Debug, PartialEq, Eq)]
pub enum SadError {
    /// AH and IPComp are not implemented (only ESP).
    Unsupported(Proto),
    /// An SA with the same addresses, protocol and SPI exists.
    Exists,
    NotFound,
    /// SPIs 0–255 are reserved (RFC 4303 §2.1).
    ReservedSpi(u32),
    /// Replay window above [`MAX_REPLAY_WINDOW`].
    ReplayWindow(u32),
    /// The algorithms or keys are wrong.
    Transform(TransformError),
    /// ocf refused the session (no driver, weak key, …).
    Crypto(ocf::Error),
}

impl std::fmt::Display for SadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SadError::Unsupported(p) => write!(f, "{} is not supported (only esp and esp-udp)", p.name()),
            SadError::Exists => f.write_str("an SA with these addresses, protocol and SPI already exists"),
            SadError::NotFound => f.write_str("no such SA"),
            SadError::ReservedSpi(s) => write!(f, "SPI {s} is reserved (RFC 4303 §2.1: 1-255)"),
            SadError::ReplayWindow(w) => write!(f, "replay window {w} is larger than {MAX_REPLAY_WINDOW}"),
            SadError::Transform(e) => e.fmt(f),
            SadError::Crypto(e) => write!(f, "crypto session: {e}"),
        }
    }
}

impl std::error::Error for SadError {}

/// The lookup tables, rebuilt by writers, read without locks.
#[derive(Default)]
struct Tables {
    by_id: HashMap<SaId, Arc<Sa>>,
    /// Inbound: ESP SPI and destination.
    inbound: HashMap<(u32, IpAddr), Arc<Sa>>,
    /// Outbound: (source, destination) → SAs, oldest first.
    outbound: HashMap<(IpAddr, IpAddr), Vec<Arc<Sa>>>,
}

impl Tables {
    fn with(sas: impl Iterator<Item = Arc<Sa>>) -> Tables {
        let mut t = Tables::default();
        let mut all: Vec<Arc<Sa>> = sas.collect();
        all.sort_by_key(|sa| sa.added);
        for sa in all {
            t.inbound.insert((sa.id.spi, sa.id.dst), sa.clone());
            t.outbound.entry((sa.id.src, sa.id.dst)).or_default().push(sa.clone());
            t.by_id.insert(sa.id, sa);
        }
        t
    }
}

/// The SAD.
pub struct Sad {
    fw: Framework,
    tables: ArcSwap<Tables>,
    writer: Mutex<()>,
}

impl Sad {
    /// An empty SAD whose SAs get their crypto sessions from `fw`.
    pub fn new(fw: Framework) -> Sad {
        Sad { fw, tables: ArcSwap::from_pointee(Tables::default()), writer: Mutex::new(()) }
    }

    /// Installs an SA (setkey `add`).
    pub fn add(&self, spec: SaSpec) -> Result<Arc<Sa>, SadError> {
        if !matches!(spec.proto, Proto::Esp | Proto::EspUdp) {
            return Err(SadError::Unsupported(spec.proto));
        }
        if spec.spi < 256 {
            return Err(SadError::ReservedSpi(spec.spi));
        }
        if spec.replay_window > MAX_REPLAY_WINDOW {
            return Err(SadError::ReplayWindow(spec.replay_window));
        }
        let (transform, params) = Transform::new(&spec).map_err(SadError::Transform)?;
        let session = self.fw.new_session(&params).map_err(SadError::Crypto)?;
        let id = SaId { src: spec.src, dst: spec.dst, proto: spec.proto, spi: spec.spi };
        let sa = Arc::new(Sa {
            id,
            seq: SeqCounter::new(spec.esn),
            replay: Mutex::new(ReplayWindow::new(spec.replay_window, spec.esn)),
            spec,
            transform,
            session,
            counters: Counters::default(),
            callbacks: OnceLock::new(),
            added: Instant::now(),
            state: AtomicU8::new(0),
            exhausted: AtomicBool::new(false),
        });
        let _w = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let old = self.tables.load();
        if old.by_id.contains_key(&id) || old.inbound.contains_key(&(id.spi, id.dst)) {
            return Err(SadError::Exists);
        }
        self.tables.store(Arc::new(Tables::with(old.by_id.values().cloned().chain([sa.clone()]))));
        Ok(sa)
    }

    /// One SA (setkey `get`).
    pub fn get(&self, id: &SaId) -> Option<Arc<Sa>> {
        self.tables.load().by_id.get(id).cloned()
    }

    /// Removes SAs matching `keep == false`; returns how many.
    fn remove_where(&self, gone: impl Fn(&Sa) -> bool) -> usize {
        let _w = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let old = self.tables.load();
        let (dead, kept): (Vec<_>, Vec<_>) = old.by_id.values().cloned().partition(|sa| gone(sa));
        for sa in &dead {
            sa.to_dead();
        }
        if !dead.is_empty() {
            self.tables.store(Arc::new(Tables::with(kept.into_iter())));
        }
        dead.len()
    }

    /// Removes one SA (setkey `delete`).
    pub fn delete(&self, id: &SaId) -> Result<(), SadError> {
        match self.remove_where(|sa| sa.id == *id) {
            0 => Err(SadError::NotFound),
            _ => Ok(()),
        }
    }

    /// Removes every SA from `src` to `dst` (setkey `deleteall`); returns how many.
    pub fn delete_all(&self, src: IpAddr, dst: IpAddr, proto: Proto) -> usize {
        self.remove_where(|sa| sa.id.src == src && sa.id.dst == dst && sa.id.proto == proto)
    }

    /// Removes every SA (of `proto`) (setkey `flush`); returns how many.
    pub fn flush(&self, proto: Option<Proto>) -> usize {
        self.remove_where(|sa| proto.is_none_or(|p| p == sa.id.proto))
    }

    /// Every SA (of `proto`), oldest first (setkey `dump`).
    pub fn dump(&self, proto: Option<Proto>) -> Vec<Arc<Sa>> {
        let mut v: Vec<_> = self
            .tables
            .load()
            .by_id
            .values()
            .filter(|sa| proto.is_none_or(|p| p == sa.id.proto))
            .cloned()
            .collect();
        v.sort_by_key(|sa| sa.added);
        v
    }

    /// The inbound SA for an ESP packet's SPI and destination.
    #[inline]
    pub fn inbound(&self, spi: u32, dst: IpAddr) -> Option<Arc<Sa>> {
        self.tables.load().inbound.get(&(spi, dst)).cloned()
    }

    /// The SA to send with from `src` to `dst`: the newest usable one whose mode fits and,
    /// if `reqid` is non-zero, whose reqid is that (setkey `unique:N`).
    #[inline]
    pub fn outbound(&self, src: IpAddr, dst: IpAddr, mode: Mode, reqid: u32) -> Option<Arc<Sa>> {
        let t = self.tables.load();
        t.outbound
            .get(&(src, dst))?
            .iter()
            .rev()
            .find(|sa| {
                sa.state() != SaState::Dead
                    && (sa.spec.mode == Mode::Any || mode == Mode::Any || sa.spec.mode == mode)
                    && (reqid == 0 || sa.spec.reqid == reqid)
            })
            .cloned()
    }

    /// Applies time lifetimes (call it every second or so): soft expiry marks the SA dying
    /// and reports it; hard expiry removes it.
    pub fn tick(&self) -> Vec<Event> {
        let mut events = Vec::new();
        let mut hard = Vec::new();
        for sa in self.tables.load().by_id.values() {
            let age = sa.age().as_secs();
            if sa.spec.hard.seconds.is_some_and(|s| age >= s) {
                hard.push(sa.id);
            } else if sa.spec.soft.seconds.is_some_and(|s| age >= s) && sa.to_dying() {
                events.push(Event::SoftExpired(sa.id));
            }
        }
        if !hard.is_empty() {
            self.remove_where(|sa| hard.contains(&sa.id));
            events.extend(hard.into_iter().map(Event::HardExpired));
        }
        events
    }

    /// Removes an SA that died on the packet path (hard byte or packet lifetime).
    pub(crate) fn reap(&self, id: &SaId) {
        self.remove_where(|sa| sa.id == *id);
    }
}
