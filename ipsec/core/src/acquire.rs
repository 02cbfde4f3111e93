//! ACQUIRE (RFC 2367 §3.1.6): outbound traffic that a `require` (or `unique`) policy
//! covers, with no SA to send it through, asks the key manager for one and waits for it.
//!
//! ```text
//! outbound: policy requires an SA, none ─► Shared::acquire (here; the hook's one call)
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
//! none, so the lock and the allocations are the slow path's alone. The table of held
//! packets is `crate::hold`'s; this module is what the packet path, the control path and
//! the tick call.

use std::net::IpAddr;
use std::time::Instant;

use crate::control::{Dir, Level, Mode, Proto, Rule};
use crate::packet::Packet;
use crate::path::{Batch, Results, Shared};
use crate::sad::Event;
use crate::spd::Flow;
use crate::stats::Drop;

pub use crate::hold::AcquireLimits;
pub use crate::sad::Acquire;

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
        // The policy again (the slow path's: the hot one does not carry it out).
        let Some((id, policy)) = self.db.spd.lookup_with(Dir::Out, flow, |p| (p.id, p.spec.selector)) else {
            return Err(self.drop(None, Drop::NoSa));
        };
        let reqid = if let Level::Unique(n) = rule.level { n } else { 0 };
        let acquire = Acquire { src, dst, proto: rule.proto, mode: rule.mode, reqid, policy, flow: *flow };
        let (outcome, new) = self.acquires.hold((id, src, dst), acquire, packet, Instant::now());
        if let Some(a) = new {
            self.push_events([Event::Acquire(Box::new(a))]);
        }
        // The SA may have come between the lookup that missed it and the hold, and its
        // change released what was held before this packet: look again, now that the
        // packet is in the table (a release after this sees it; one before, we undo).
        if outcome.is_ok() && self.sa_exists(rule.proto, (src, dst), rule.mode, reqid) {
            self.release_acquired();
        }
        outcome.map_err(|why| self.drop(None, why))
    }

    /// Whether an SA an ACQUIRE asked for is there now: IPComp's table for an IPComp rule
    /// (crate::ipcomp_path), the SAD's outbound lookup for the rule's protocol otherwise.
    fn sa_exists(&self, proto: Proto, (src, dst): (IpAddr, IpAddr), mode: Mode, reqid: u32) -> bool {
        match proto {
            Proto::IpComp => self.db.sad.ipcomp_between(src, dst, reqid).is_some(),
            _ => self.db.sad.outbound_with(src, dst, proto, mode, reqid, |sa| sa.is_some()),
        }
    }

    /// After a change to the databases: the held packets whose SA now exists go through
    /// the outbound path again, from the caller's thread, their results to the sink.
    pub(crate) fn release_acquired(&self) {
        let ready = self.acquires.take_ready(|a| self.sa_exists(a.proto, (a.src, a.dst), a.mode, a.reqid));
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

    /// ACQUIREs older than the timeout at `now`: removed, each of their packets counted
    /// as [`Drop::HoldTimeout`].
    pub(crate) fn expire_acquires(&self, now: Instant) {
        for _ in 0..self.acquires.expire(now) {
            self.drop(None, Drop::HoldTimeout);
        }
    }
}
