//! The packets ACQUIRE holds ([`crate::acquire`] draws the flow and says why these
//! bounds): a table of pending ACQUIREs by (policy, SA endpoints), each with its packets,
//! bounded in entries, packets per entry and bytes. Only the outbound path's no-SA case,
//! the control path (release) and the tick (expiry) come here.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap as HashMap;

use crate::packet::Packet;
use crate::sad::Acquire;
use crate::stats::Drop;

/// How many packets wait for an SA, for how long (see [`crate::acquire`] for why these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcquireLimits {
    /// Packets held per (policy, destination); 0 holds none (each is dropped as
    /// `no_sa`, after the ACQUIRE).
    pub packets: usize,
    /// Pending ACQUIREs at once.
    pub entries: usize,
    /// Bytes of packet buffers held in all (their capacity: what they really take).
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

/// One pending ACQUIRE: the policy's place in match order and the SA's endpoints.
pub(crate) type Key = (u64, IpAddr, IpAddr);

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
    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_limits(&self, limits: AcquireLimits) {
        self.table().limits = limits;
    }

    /// How many packets are held now.
    pub(crate) fn held(&self) -> usize {
        self.table().entries.values().map(|e| e.packets.len()).sum()
    }

    /// Holds `packet` for `key` at `now`: `Ok` if held, else why it was dropped (not yet
    /// counted); and the ACQUIRE to announce if this packet made the entry.
    pub(crate) fn hold(
        &self,
        key: Key,
        acquire: Acquire,
        packet: Packet,
        now: Instant,
    ) -> (Result<(), Drop>, Option<Acquire>) {
        let size = packet.data.capacity();
        let mut t = self.table();
        let limits = t.limits;
        let mut new = None;
        if !t.entries.contains_key(&key) {
            if t.entries.len() >= limits.entries {
                return (Err(Drop::AcquireTableFull), None);
            }
            t.entries.insert(key, Entry { acquire, since: now, packets: VecDeque::new() });
            new = Some(acquire);
        }
        let bytes = t.bytes;
        let outcome = match t.entries.get_mut(&key) {
            _ if limits.packets == 0 => Err(Drop::NoSa),
            Some(e) if e.packets.len() >= limits.packets => Err(Drop::HoldFull),
            Some(_) if bytes + size > limits.bytes => Err(Drop::AcquireTableFull),
            Some(e) => {
                e.packets.push_back(packet);
                t.bytes += size;
                Ok(())
            }
            None => Err(Drop::NoSa),
        };
        (outcome, new)
    }

    /// Removes the entries whose SA `ready` says exists now; their packets, oldest first
    /// per entry.
    pub(crate) fn take_ready(&self, ready: impl Fn(&Acquire) -> bool) -> Vec<Packet> {
        let mut t = self.table();
        let keys: Vec<Key> = t.entries.iter().filter(|(_, e)| ready(&e.acquire)).map(|(k, _)| *k).collect();
        keys.iter().filter_map(|k| t.remove(k)).flat_map(|e| e.packets).collect()
    }

    /// Removes the entries older than the timeout at `now`; how many packets they held.
    pub(crate) fn expire(&self, now: Instant) -> usize {
        let mut t = self.table();
        let timeout = t.limits.timeout;
        let old: Vec<Key> = t
            .entries
            .iter()
            .filter(|(_, e)| now.saturating_duration_since(e.since) >= timeout)
            .map(|(k, _)| *k)
            .collect();
        old.iter().filter_map(|k| t.remove(k)).map(|e| e.packets.len()).sum()
    }
}
