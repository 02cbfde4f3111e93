//! ACQUIRE (RFC 2367 §3.1.6): outbound traffic that a `require` (or `unique`) policy
//! covers, with no SA to send it through, asks the key manager for one and waits for it.
//!
//! ```text
//! outbound: policy requires an SA, none ─► Shared::acquire (this module; the only hook)
//!    ├─ first packet for (policy, SA endpoints): Event::Acquire, the packet held
//!    ├─ later ones: held, up to AcquireLimits::packets per entry ─ past it: drop hold_full
//!    └─ no room for another entry or byte ─ drop acquire_table_full (no event: no entry)
//! Ipsec::transact, after a commit ─► release: entries whose SA now exists give their
//!    packets back to the outbound path (they go out through the new SA, or the sink)
//! Ipsec::tick_at ─► expire: entries older than AcquireLimits::timeout are removed, their
//!    packets dropped as hold_timeout; the next packet makes a new entry and a new ACQUIRE
//! ```
//!
//! So an ACQUIRE goes out once per (policy, destination) and then again only after the
//! timeout while the SA still does not come (FreeBSD's `net.key.blockacq_lifetime` is 20 s
//! too), never once per packet. The bounds, and why:
//! - [`AcquireLimits::packets`], 8 per entry: enough for the opening of a connection (a
//!   TCP SYN and its first retransmissions, a DNS query and its retries, a few pings); a
//!   sender whose traffic overflows it retransmits on its own once the SA is there.
//!   Linux holds up to 100 per policy (`XFRM_MAX_QUEUE_LEN`), for bulk senders.
//! - [`AcquireLimits::entries`], 256: pending negotiations at once; a key manager with
//!   more outstanding is far behind anyway.
//! - [`AcquireLimits::bytes`], 4 MiB: the memory all held packets take at most (counted
//!   by their buffers' capacity, what they really hold), whatever their sizes.
//!
//! Nothing here runs while an SA exists: the packet path calls in only when the SAD had
//! none, so the lock and the allocations are the slow path's alone.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap as HashMap;

use crate::control::{Dir, Mode, Proto, Rule, Selector};
use crate::packet::Packet;
use crate::path::{Batch, Results, Shared};
use crate::sad::Event;
use crate::spd::Flow;
use crate::stats::Drop;

/// What an ACQUIRE asks for: an SA from `src` to `dst` (the policy's tunnel endpoints, or
/// the packet's addresses in transport mode) of `proto` and `mode`, with `reqid` (0: any),
/// for the policy whose selector is `policy`; `flow` is the packet that asked.
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

/// How many packets wait for an SA, for how long (see the module docs for why these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcquireLimits {
    /// Packets held per (policy, destination); 0 holds none (each is dropped as
    /// `no_sa`, after the ACQUIRE).
    pub packets: usize,
    /// Pending ACQUIREs at once.
    pub entries: usize,
    /// Bytes of packet buffers held in all.
    pub bytes: usize,
    /// How long an ACQUIRE waits for its SA before its packets are dropped and a new
    /// packet may ask again.
    pub timeout: Duration,
}

impl Default for AcquireLimits {
    fn default() -> Self {
        AcquireLimits { packets: 8, entries: 256, bytes: 4 << 20, timeout: Duration::from_secs(20) }
    }
}

/// One ACQUIRE waiting: keyed by the policy's place and the SA's endpoints.
type Key = (u64, IpAddr, IpAddr);

struct Entry {
    acquire: Acquire,
    since: Instant,
    packets: VecDeque<Packet>,
}

/// The pending ACQUIREs and their held packets.
#[derive(Default)]
pub(crate) struct Pending {
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    limits: AcquireLimits,
    entries: HashMap<Key, Entry>,
    /// Capacity of the held packets' buffers, in all.
    bytes: usize,
}

impl Table {
    fn remove(&mut self, key: &Key) -> Option<Entry> {
        let e = self.entries.remove(key)?;
        self.bytes -= e.packets.iter().map(|p| p.data.capacity()).sum::<usize>();
        Some(e)
    }
}

impl Pending {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_limits(&self, limits: AcquireLimits) {
        self.table().limits = limits;
    }

    /// How many packets are held now.
    pub(crate) fn held(&self) -> usize {
        self.table().entries.values().map(|e| e.packets.len()).sum()
    }
}

impl Shared {
    /// An outbound packet that `rule` (of the policy `flow` matched) protects, with no SA
    /// from `src` to `dst`: held and, the first time for its policy and destination,
    /// announced ([`Event::Acquire`]). `Ok`: held; `Err`: dropped and counted.
    pub(crate) fn acquire(
        &self,
        packet: Packet,
        flow: &Flow,
        rule: Rule,
        (src, dst): (IpAddr, IpAddr),
    ) -> Result<(), Drop> {
        // The policy again (this is the slow path: the hot one does not carry it out).
        let Some((id, policy)) = self.db.spd.lookup_with(Dir::Out, flow, |p| (p.id, p.spec.selector)) else {
            return Err(self.drop(None, Drop::NoSa));
        };
        let reqid = if let crate::control::Level::Unique(n) = rule.level { n } else { 0 };
        let key = (id, src, dst);
        let size = packet.data.capacity();
        let mut t = self.acquires.table();
        let limits = t.limits;
        if !t.entries.contains_key(&key) {
            if t.entries.len() >= limits.entries {
                return Err(self.drop(None, Drop::AcquireTableFull));
            }
            let acquire =
                Acquire { src, dst, proto: rule.proto, mode: rule.mode, reqid, policy, flow: *flow };
            t.entries.insert(key, Entry { acquire, since: Instant::now(), packets: VecDeque::new() });
            self.push_events([Event::Acquire(acquire)]);
        }
        if limits.packets == 0 {
            return Err(self.drop(None, Drop::NoSa));
        }
        let bytes = t.bytes;
        let Some(e) = t.entries.get_mut(&key) else { return Err(self.drop(None, Drop::NoSa)) };
        if e.packets.len() >= limits.packets {
            return Err(self.drop(None, Drop::HoldFull));
        }
        if bytes + size > limits.bytes {
            return Err(self.drop(None, Drop::AcquireTableFull));
        }
        e.packets.push_back(packet);
        t.bytes += size;
        Ok(())
    }

    /// After a change to the databases: the held packets whose SA now exists go out
    /// through the outbound path again (from the caller's thread; their results to the
    /// sink).
    pub(crate) fn release_acquired(&self) {
        let ready: Vec<Packet> = {
            let mut t = self.acquires.table();
            if t.entries.is_empty() {
                return;
            }
            let keys: Vec<Key> = t
                .entries
                .iter()
                .filter(|(_, e)| {
                    let a = &e.acquire;
                    self.db.sad.outbound_with(a.src, a.dst, a.mode, a.reqid, |sa| sa.is_some())
                })
                .map(|(k, _)| *k)
                .collect();
            keys.iter().filter_map(|k| t.remove(k)).flat_map(|e| e.packets).collect()
        };
        if ready.is_empty() {
            return;
        }
        let mut out = Results::default();
        let mut b = Batch::new(&mut out);
        for p in ready {
            let _ = self.output(p, &mut b);
        }
        self.finish(&mut b);
        out.transmit.into_iter().for_each(|p| self.sink.transmit(p));
        out.deliver.into_iter().for_each(|p| self.sink.deliver(p));
    }

    /// ACQUIREs older than the timeout at `now`: removed, their packets dropped as
    /// [`Drop::HoldTimeout`].
    pub(crate) fn expire_acquires(&self, now: Instant) {
        let mut t = self.acquires.table();
        let timeout = t.limits.timeout;
        let old: Vec<Key> = t
            .entries
            .iter()
            .filter(|(_, e)| now.duration_since(e.since) >= timeout)
            .map(|(k, _)| *k)
            .collect();
        for k in old {
            if let Some(e) = t.remove(&k) {
                e.packets.iter().for_each(|_| {
                    self.drop(None, Drop::HoldTimeout);
                });
            }
        }
    }
}
