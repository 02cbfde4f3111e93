//! The packet path's front: what goes in (batches of packets), what comes out (a
//! [`Results`] the caller sends on), and how a batch meets ocf.
//!
//! ```text
//!  output(batch) ─ per packet: outbound.rs (SPD, SA, ESP layout) ─┐
//!  input(batch, via) ─┐                                            │  one ocf request each,
//!  input_payloads(batch) ─ per packet: inbound.rs (SAD, replay) ───┤  gathered into a run
//!                                                                  ▼  per SA and direction
//!                        submit_run: a request for another SA, 16 outbound (RUN_LIMIT)
//!                                or the batch's end sends the run to ocf whole
//!                                                                  │
//!        driver that takes runs (mb), or synchronous (soft): the whole run finished in
//!                                the call ─► Results { transmit, deliver } ─► caller
//!        asynchronous driver: each request with MORE but the last (one doorbell per run),
//!                                the SA's completion later ─► Sink ─► caller's I/O
//! ```
//!
//! A call takes a batch and hands back, in [`Results`], everything that finished before it
//! returned: with ocf's synchronous `soft` driver, every packet that was not dropped. The
//! caller then sends the batch's results with as few system calls as it can. Only what an
//! asynchronous driver finishes later goes through the [`Sink`] fixed at construction (from
//! the driver's completion context, one packet at a time).
//!
//! A run is handed over as a value (`crate::path`): the multi-buffer driver encrypts its
//! packets together, a card gets ocf's "more follow" hint ([`ocf::Flags::MORE`]) on all but
//! the last, exactly. Measured against holding one request and submitting it when the next
//! showed (`cargo bench -p ipsec-core --bench threads`, 1400 B AES-GCM, batches of 64, two
//! alternations): output 512 → 497 ns a packet, input 521 → 492, input by two threads on
//! one SA 689/662 → 560/551. The one-packet calls (`output_one`, …) never gather: 5–8 ns
//! more on `input_one` (`taskset -c 1 cargo bench -p ipsec-core --bench esp`, 507 → 515).
//!
//! Every drop is counted under its reason, per SA and in total ([`crate::stats::Drop`]);
//! the per-packet calls ([`Ipsec::output_one`] …) also return it.
//!
//! Packets carry headroom ([`Packet::head`]): encapsulation writes the outer headers in
//! front of the payload without moving it when there is room (the gateway reads packets
//! [`HEADROOM`] bytes into its buffers), and decapsulation hands back the inner packet
//! where it lies.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};
use std::time::Instant;

use ocf::{Callback, Framework};

use crate::acquire::AcquireLimits;
use crate::changes::Change;
use crate::db::{ControlError, Databases, Response, Transaction};
use crate::path::{Batch, Shared, To};
use crate::pmtu::{IcmpFrom, Learned};
use crate::pmtu_path;
use crate::sad::{Event, Sa, SaCallbacks};
use crate::stats::{Counters, Drop, Stats};

pub use crate::packet::{Packet, HEADROOM, TAILROOM};
pub use crate::path::{DefaultPolicy, Payload, Results, Sink, Via};

/// The Fast IPsec core: databases, statistics, and the packet path.
pub struct Ipsec {
    shared: Arc<Shared>,
}

impl Ipsec {
    /// A core whose SAs use `fw`'s drivers; what an asynchronous driver finishes goes to
    /// `sink`.
    pub fn new(fw: Framework, sink: Arc<dyn Sink>) -> Ipsec {
        Ipsec { shared: Arc::new_cyclic(|me| Shared::new(fw, sink, me.clone())) }
    }

    /// Carries out a control request (the setkey language and the gateway's socket both
    /// come here).
    pub fn control(&self, req: &crate::control::Request) -> Result<Response, ControlError> {
        self.transact(|t| t.apply(req))
    }

    /// Changes the databases as one transaction ([`crate::db`]): `edit` applies requests;
    /// if it returns `Ok`, everything it did becomes visible at once, otherwise nothing.
    /// Other writers wait meanwhile (so `edit` must not call [`Ipsec::control`]). What it
    /// changed becomes events ([`Event::Changed`], [`crate::changes`]). Packets held for an
    /// SA that the change installed then go out ([`crate::acquire`]), from this thread,
    /// their results to the sink.
    pub fn transact<T, E>(&self, edit: impl FnOnce(&mut Transaction<'_>) -> Result<T, E>) -> Result<T, E> {
        self.transact_noting(edit).map(|(r, _)| r)
    }

    /// [`Ipsec::transact`], returning also what the transaction changed, in order (the
    /// changes its events announce): for a caller that keeps something in step with the
    /// databases change by change (ipsecd's warnings and routes) instead of reading them
    /// whole after each.
    pub fn transact_noting<T, E>(
        &self,
        edit: impl FnOnce(&mut Transaction<'_>) -> Result<T, E>,
    ) -> Result<(T, Vec<Change>), E> {
        let mut t = self.shared.db.transaction();
        let r = edit(&mut t)?;
        let changes = t.take_changes();
        for sa in t.commit() {
            self.shared.attach(&sa);
        }
        self.shared.push_events(changes.iter().map(|c| Event::Changed(Box::new(c.clone()))));
        self.shared.release_acquired();
        Ok((r, changes))
    }

    /// What becomes of an outbound packet that no policy covers (FreeBSD's
    /// `net.inet.ipsec.def_policy`): [`DefaultPolicy::Bypass`] (the default, as in a host's
    /// IP stack, where most traffic has no policy) or [`DefaultPolicy::Discard`] (a gateway
    /// whose protected side carries nothing but traffic for its tunnels).
    pub fn set_default_policy(&self, p: DefaultPolicy) {
        self.shared.discard_unmatched.store(p == DefaultPolicy::Discard, Ordering::Relaxed);
    }

    /// The databases (read-only use: lookups, dumps).
    pub fn databases(&self) -> &Databases {
        &self.shared.db
    }

    /// The path MTU the SA `id` has learned ([`crate::pmtu`]), if it has one that has not
    /// aged out: what `ipsecctl -D` shows. `None` also for an SA that does not exist.
    pub fn path_mtu(&self, id: &crate::control::SaId) -> Option<u32> {
        let sa = self.shared.db.sad.get(id)?;
        sa.path_mtu.get(self.shared.clock.now())
    }

    /// Totals over every SA, and drops that happened before an SA was found.
    pub fn stats(&self) -> Stats {
        self.shared.counters.snapshot()
    }

    /// Applies time lifetimes (whole seconds), and the timeouts of held packets
    /// ([`crate::acquire`]) and larval SAs ([`crate::larval`]): call it at least once a
    /// second (ipsecd does every 200 ms, between signal checks).
    pub fn tick(&self) {
        self.tick_at(Instant::now());
    }

    /// [`Ipsec::tick`] with the time given: the clock that learned path MTUs age on
    /// ([`crate::pmtu::PMTU_AGE`]) moves to `now` (never back); lifetimes go by the SAs' age
    /// at `now`; held packets and larval SAs expire by `now`.
    pub fn tick_at(&self, now: Instant) {
        self.shared.clock.set(now);
        let ev = self.shared.db.sad.tick(now);
        self.shared.push_events(ev);
        self.shared.expire_acquires(now);
        let ev = self.shared.db.larval.expire(now);
        self.shared.push_events(ev);
    }

    /// How many packets ACQUIRE holds, for how long ([`crate::acquire`]).
    pub fn set_acquire_limits(&self, limits: AcquireLimits) {
        self.shared.acquires.set_limits(limits);
    }

    /// How many outbound packets wait for an SA now ([`crate::acquire`]).
    pub fn held_packets(&self) -> usize {
        self.shared.acquires.held()
    }

    /// An ICMP error from the network (the ICMP message; see [`IcmpFrom`]): a path MTU
    /// error about one of our ESP packets lowers its SA's path MTU ([`crate::pmtu`]).
    /// `Err`: dropped and counted under its reason.
    pub fn icmp_error(&self, msg: &[u8], from: IcmpFrom) -> Result<Learned, Drop> {
        let learned = pmtu_path::learn(&self.shared.db.sad, msg, from, self.shared.clock.now());
        self.shared.learned(learned)
    }

    /// An ESP packet of ours (`outer`, whole) that the local IP stack refused to send as
    /// larger than `mtu`, its route's MTU (EMSGSIZE): lowers its SA's path MTU as an ICMP
    /// error quoting it would ([`crate::pmtu`]).
    pub fn local_path_mtu(&self, outer: &[u8], mtu: u32) -> Result<Learned, Drop> {
        let learned = pmtu_path::learn_local(&self.shared.db.sad, outer, mtu, self.shared.clock.now());
        self.shared.learned(learned)
    }

    /// The events since the last call: lifetimes, sequence numbers, ACQUIRE, path MTU, peers
    /// that moved, and the control path's changes ([`crate::changes`]).
    pub fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut *self.shared.events.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Processes packets leaving the protected side; what finishes now lands in `out`
    /// (drops are counted).
    pub fn output(&self, packets: impl IntoIterator<Item = Packet>, out: &mut Results) {
        let mut b = Batch::new(out);
        for p in packets {
            let _ = self.shared.output(p, &mut b);
        }
        self.shared.finish(&mut b);
    }

    /// [`Ipsec::output`] for one packet: `Err` if it was dropped (and counted) before or,
    /// with a synchronous driver, after the crypto.
    pub fn output_one(&self, packet: Packet, out: &mut Results) -> Result<(), Drop> {
        let mut b = Batch::one(out);
        let r = self.shared.output(packet, &mut b);
        self.shared.finish(&mut b);
        b.outcome(r)
    }

    /// Processes whole packets from the network that came through `via`; what finishes
    /// now lands in `out`.
    pub fn input(&self, packets: impl IntoIterator<Item = Packet>, via: Via, out: &mut Results) {
        let mut b = Batch::new(out);
        for p in packets {
            let _ = self.shared.input(p, via, &mut b);
        }
        self.shared.finish(&mut b);
    }

    /// [`Ipsec::input`] for one packet: `Err` if it was dropped (and counted) before or,
    /// with a synchronous driver, after the crypto.
    pub fn input_one(&self, packet: Packet, via: Via, out: &mut Results) -> Result<(), Drop> {
        let mut b = Batch::one(out);
        let r = self.shared.input(packet, via, &mut b);
        self.shared.finish(&mut b);
        b.outcome(r)
    }

    /// Processes ESP whose headers the socket took off ([`Payload`]); what finishes now
    /// lands in `out`.
    pub fn input_payloads(&self, payloads: impl IntoIterator<Item = Payload>, out: &mut Results) {
        let mut b = Batch::new(out);
        for p in payloads {
            let _ = self.shared.input_payload(p, &mut b);
        }
        self.shared.finish(&mut b);
    }

    /// [`Ipsec::input_payloads`] for one: `Err` if it was dropped (and counted).
    pub fn input_payload(&self, payload: Payload, out: &mut Results) -> Result<(), Drop> {
        let mut b = Batch::one(out);
        let r = self.shared.input_payload(payload, &mut b);
        self.shared.finish(&mut b);
        b.outcome(r)
    }

    /// Counts a packet that its reader dropped before the core could look at it (ipsecd:
    /// one its socket cut short, [`Drop::Truncated`]), so that every drop is counted in
    /// one place.
    pub fn count_drop(&self, why: Drop) {
        Shared::drop(&self.shared, None, why);
    }
}

impl Shared {
    /// Counts and reports what a path MTU signal did.
    fn learned(&self, outcome: Result<(Learned, Option<Arc<Sa>>), Drop>) -> Result<Learned, Drop> {
        match outcome {
            Ok((learned, sa)) => {
                if let (Learned::Lowered(mtu), Some(sa)) = (learned, &sa) {
                    Counters::count(&self.counters.pmtu_learned);
                    self.push_events([Event::PathMtu { sa: sa.id, mtu }]);
                }
                Ok(learned)
            }
            Err(why) => Err(self.drop(None, why)),
        }
    }

    /// Gives a new SA its completions: an asynchronous driver's outcome is finished as a
    /// synchronous one is, and its packet goes to the sink.
    fn attach(self: &Arc<Shared>, sa: &Arc<Sa>) {
        let (s1, a1) = (Arc::downgrade(self), Arc::downgrade(sa));
        let (s2, a2) = (s1.clone(), a1.clone());
        let output: Callback = Arc::new(move |o| {
            if let (Some(s), Some(sa)) = (Weak::upgrade(&s1), Weak::upgrade(&a1)) {
                let _ = s.output_done(&sa, o, &mut |p| s.sink.transmit(p));
            }
        });
        let input: Callback = Arc::new(move |o| {
            if let (Some(s), Some(sa)) = (Weak::upgrade(&s2), Weak::upgrade(&a2)) {
                if let Ok(Some(inner)) = s.input_done(&sa, o, None, &[]) {
                    let _ = s.take_inner(inner, &mut To::Sink);
                }
            }
        });
        let _ = sa.callbacks.set(SaCallbacks { output, input });
    }
}
