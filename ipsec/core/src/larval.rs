//! GETSPI and UPDATE (RFC 2367 §3.1.1, §3.1.2): a key manager reserves an SPI before it
//! negotiates, and gives it keys when the negotiation ends.
//!
//! ```text
//! getspi src dst proto [min A max B] ─ an unused SPI in [A, B] for (dst, SPI) ─► larval SA
//!    (no keys, in no lookup table: it matches no traffic; its SPI is refused to `add`
//!     and to other GETSPIs)
//! update <as add> ─┬─ a larval SA with that (src, dst, proto, SPI): becomes a full SA
//!                  ├─ a full SA with that id: replaced (continued if its keys are the same)
//!                  └─ neither: no such SA
//! delete src dst proto spi, deleteall, flush ─ remove larval SAs too
//! tick ─ a larval SA older than its lifetime (LARVAL_LIFETIME) ─► Event::LarvalExpired
//! ```
//!
//! Larval SAs live in their own small table beside the SAD, changed in the same
//! transactions ([`crate::db::Transaction`]): a GETSPI in a transaction that fails reserves
//! nothing. The packet path never reads it.
//!
//! An SPI is unique per destination, as the SAD's inbound table needs (RFC 4301 §4.1):
//! GETSPI picks a random SPI in the range (an unpredictable SPI, as Linux and FreeBSD do),
//! then the next free one after it, wrapping round the range.

use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap as HashMap;

use crate::control::SaId;
use crate::sad::Event;

/// How long a larval SA waits for its UPDATE unless [`Larval::set_lifetime`] says
/// otherwise: 30 s (FreeBSD's `net.key.larval_lifetime` is 30 s too; an IKE_SA_INIT and
/// IKE_AUTH exchange with retransmissions fits in it).
pub const LARVAL_LIFETIME: Duration = Duration::from_secs(30);

/// The SPI range GETSPI uses when none is given: every SPI that is not reserved (RFC 4303
/// §2.1: 1–255 are).
pub const SPI_RANGE: (u32, u32) = (0x100, u32::MAX);

/// Why GETSPI or UPDATE was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum LarvalError {
    /// The range is empty or reaches into the reserved SPIs (below 256).
    BadRange(u32, u32),
    /// Every SPI of the range is taken for that destination.
    NoSpiFree(u32, u32),
    /// `add` of an SPI that GETSPI reserved for this larval SA: complete it with `update`.
    Reserved(SaId),
    /// `update` of an SA that is neither larval nor installed.
    NotFound,
}

impl std::fmt::Display for LarvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LarvalError::BadRange(a, b) => {
                write!(f, "SPI range {a:#x}-{b:#x} is empty or below 0x100 (1-255 are reserved, RFC 4303 §2.1)")
            }
            LarvalError::NoSpiFree(a, b) => write!(f, "every SPI in {a:#x}-{b:#x} is taken for that destination"),
            LarvalError::Reserved(id) => write!(
                f,
                "its SPI and destination are reserved by getspi for the larval SA {}: complete it with update",
                crate::sad::describe(id)
            ),
            LarvalError::NotFound => f.write_str("no such SA, larval or installed, to update"),
        }
    }
}

impl std::error::Error for LarvalError {}

#[derive(Clone, Copy)]
struct Entry {
    id: SaId,
    since: Instant,
}

#[derive(Clone, Default)]
struct Table {
    /// By (SPI, destination), as inbound SAs are found.
    by_spi: HashMap<(u32, IpAddr), Entry>,
}

/// The larval SAs.
pub struct Larval {
    table: Mutex<Table>,
    lifetime: Mutex<Duration>,
}

impl Default for Larval {
    fn default() -> Self {
        Larval { table: Mutex::default(), lifetime: Mutex::new(LARVAL_LIFETIME) }
    }
}

impl Larval {
    /// How long a larval SA waits for its UPDATE ([`LARVAL_LIFETIME`] by default).
    pub fn set_lifetime(&self, d: Duration) {
        *self.lifetime.lock().unwrap_or_else(PoisonError::into_inner) = d;
    }

    /// The larval SAs now, oldest first.
    pub fn dump(&self) -> Vec<SaId> {
        let t = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let mut v: Vec<Entry> = t.by_spi.values().copied().collect();
        v.sort_by_key(|e| e.since);
        v.into_iter().map(|e| e.id).collect()
    }

    /// Removes the larval SAs older than their lifetime at `now`, one event each.
    pub(crate) fn expire(&self, now: Instant) -> Vec<Event> {
        let life = *self.lifetime.lock().unwrap_or_else(PoisonError::into_inner);
        let mut t = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let mut gone = Vec::new();
        t.by_spi.retain(|_, e| {
            let keep = now.saturating_duration_since(e.since) < life;
            if !keep {
                gone.push(Event::LarvalExpired(e.id));
            }
            keep
        });
        gone
    }

    /// Starts a change (inside a [`crate::db::Transaction`]).
    pub(crate) fn writer(&self) -> Writer<'_> {
        Writer { guard: self.table.lock().unwrap_or_else(PoisonError::into_inner), copy: None }
    }
}

/// A change to the larval SAs: made on a copy, visible on [`Writer::commit`].
pub(crate) struct Writer<'a> {
    guard: MutexGuard<'a, Table>,
    copy: Option<Table>,
}

impl Writer<'_> {
    fn read(&self) -> &Table {
        self.copy.as_ref().unwrap_or(&self.guard)
    }

    fn write(&mut self) -> &mut Table {
        let guard = &self.guard;
        self.copy.get_or_insert_with(|| Table::clone(guard))
    }

    /// The larval SA that holds `spi` at `dst`, if one does.
    pub(crate) fn holder(&self, spi: u32, dst: IpAddr) -> Option<SaId> {
        self.read().by_spi.get(&(spi, dst)).map(|e| e.id)
    }

    /// GETSPI: reserves a free SPI in `[min, max]` for `id`'s addresses and protocol
    /// (`taken` says whether the SAD uses an SPI at `id.dst`; it holds `sad_len` SAs).
    /// Returns the larval SA.
    pub(crate) fn reserve(
        &mut self,
        id: SaId,
        (min, max): (u32, u32),
        taken: impl Fn(u32) -> bool,
        sad_len: usize,
    ) -> Result<SaId, LarvalError> {
        if min < SPI_RANGE.0 || min > max {
            return Err(LarvalError::BadRange(min, max));
        }
        let span = u64::from(max - min) + 1;
        let start = rand::random::<u64>() % span;
        // At most this many SPIs are in use: among one more consecutive candidates than
        // that, one is free, so the search ends after as many tries, however wide the range.
        let in_use = (sad_len + self.read().by_spi.len()) as u64;
        for tried in 0..span.min(in_use + 1) {
            let spi = min + ((start + tried) % span) as u32;
            if !taken(spi) && self.holder(spi, id.dst).is_none() {
                let id = SaId { spi, ..id };
                self.write().by_spi.insert((spi, id.dst), Entry { id, since: Instant::now() });
                return Ok(id);
            }
        }
        Err(LarvalError::NoSpiFree(min, max))
    }

    /// Removes the larval SA `id`; whether it was there.
    pub(crate) fn remove(&mut self, id: &SaId) -> bool {
        if self.holder(id.spi, id.dst) != Some(*id) {
            return false;
        }
        self.write().by_spi.remove(&(id.spi, id.dst)).is_some()
    }

    /// Removes the larval SAs `gone` picks; which.
    pub(crate) fn remove_where(&mut self, gone: impl Fn(&SaId) -> bool) -> Vec<SaId> {
        if !self.read().by_spi.values().any(|e| gone(&e.id)) {
            return Vec::new();
        }
        let mut removed = Vec::new();
        self.write().by_spi.retain(|_, e| {
            let go = gone(&e.id);
            if go {
                removed.push(e.id);
            }
            !go
        });
        removed
    }

    /// Makes the change visible.
    pub(crate) fn commit(mut self) {
        if let Some(t) = self.copy.take() {
            *self.guard = t;
        }
    }
}
