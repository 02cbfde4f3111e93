//! The packet path's shared parts: what crosses the core's API besides the packets
//! themselves (`crate::packet`): results, payloads, where a packet came from; the state
//! both directions use; and how a batch's requests meet ocf ([`Batch`]).
//!
//! A batch's requests go to ocf as *runs*: the requests for one SA and direction in a row
//! are gathered until a request for another SA comes, an outbound run has [`RUN_LIMIT`]
//! (16), or the batch ends, then handed over together (`ocf::Session::submit_run`). A driver that takes runs whole (the multi-buffer
//! driver, which encrypts 16 packets at once) gets the run in one call; a synchronous
//! driver finishes it in the call too; an asynchronous card gets each request with ocf's
//! "more follow" hint ([`ocf::Flags::MORE`]) on all but the last — one doorbell per run —
//! and completes them later through the SA's callbacks. A run of one request takes the
//! single-request path (`submit_or_finish`). Which code finishes a request is chosen when it
//! is made and is the same for a run (its SA and direction decide it: Fast IPsec's
//! continuations, `outbound`'s or `inbound`'s).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use ocf::{Framework, Outcome, Request};

use ipsec_wire::Summary;

use crate::db::Databases;
use crate::hold;
use crate::packet::Packet;
use crate::pmtu;
use crate::sad::{Event, Sa, SaState};
use crate::spd::Flow;
use crate::stats::{Counters, Drop};

/// What a call made of its batch, in the order packets finished: for the network (ESP, and
/// packets policy lets through in the clear) and for the protected side (decapsulated
/// packets, and clear ones policy allows). The caller sends them and clears it (its
/// vectors keep their capacity, so a loop allocates nothing per batch).
#[derive(Debug, Default)]
pub struct Results {
    pub transmit: Vec<Packet>,
    pub deliver: Vec<Packet>,
}

impl Results {
    /// Results with room for `n` packets each way.
    pub fn with_capacity(n: usize) -> Results {
        Results { transmit: Vec::with_capacity(n), deliver: Vec::with_capacity(n) }
    }

    pub fn is_empty(&self) -> bool {
        self.transmit.is_empty() && self.deliver.is_empty()
    }
}

/// Where packets that an asynchronous driver finishes go (from its completion context).
/// A synchronous driver's results come back in the call's [`Results`] instead.
pub trait Sink: Send + Sync {
    /// To the network.
    fn transmit(&self, packet: Packet);
    /// To the protected side.
    fn deliver(&self, packet: Packet);
}

/// An ESP packet from a socket that took its IP header (and, for ESP in UDP, its UDP
/// header) off, with what those headers said: the ESP packet (or, over UDP, the datagram's
/// payload: ESP, a NAT-keepalive or IKE) is `packet.bytes()`. Nothing is rebuilt: the core
/// reads ESP where the socket put it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payload {
    pub packet: Packet,
    /// The sender: its address, and for ESP in UDP its port (0 for raw ESP).
    pub src: SocketAddr,
    /// The local address it was sent to (the packet-info option).
    pub dst: IpAddr,
    /// For ESP in UDP, the local UDP port it was sent to (the socket's); 0 for raw ESP.
    pub dport: u16,
    /// ESP in UDP (RFC 3948) rather than raw ESP.
    pub udp: bool,
    /// The outer header's ECN field (IP_RECVTOS / IPV6_RECVTCLASS), which RFC 6040 carries
    /// into a tunnel-mode inner packet.
    pub ecn: u8,
}

/// Where a whole packet from the network came from, which decides what it may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// An IP stack's input: any packet, checksums to verify. ESP, ESP in UDP to or from
    /// port 4500 (RFC 3948), or clear traffic that the inbound policy judges.
    Ip,
    /// A raw ESP socket that returns the IP header (IPv4; the kernel checked it): ESP, or
    /// a drop. Nothing from a gateway's network sockets is ever clear traffic for the
    /// protected side (delivered there, a stray datagram to the gateway's own address came
    /// straight back to its socket through the TUN and looped forever).
    Esp,
    /// A raw IPComp (108) or IP-in-IP (4, 41) socket that returns the IP header (IPv4; the
    /// kernel checked it): IPComp, IP-in-IP between the ends of an IPComp SA (what an
    /// IPComp peer sends uncompressed, RFC 3173 §2.2), or a drop ([`Drop::NotIpComp`]:
    /// such a socket sees every tunnel packet of the host, and none of the others is ours
    /// to deliver).
    ///
    /// [`Drop::NotIpComp`]: crate::stats::Drop::NotIpComp
    IpComp,
}

/// The outbound default policy: what becomes of a packet no policy covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultPolicy {
    /// Sent as it is.
    Bypass,
    /// Dropped and counted as [`Drop::NoPolicy`].
    Discard,
}

pub(crate) struct Shared {
    /// Itself, for the continuations a bundle's stages hand ocf (`crate::bundle`).
    pub(crate) me: Weak<Shared>,
    pub(crate) db: Databases,
    /// What becomes of an outbound packet no policy covers: sent as it is (false), or
    /// dropped as [`Drop::NoPolicy`] (true).
    pub(crate) discard_unmatched: AtomicBool,
    pub(crate) counters: Counters,
    pub(crate) sink: Arc<dyn Sink>,
    pub(crate) events: Mutex<Vec<Event>>,
    /// Path MTU ([`crate::pmtu`]): the coarse clock learned MTUs age on, and the rate of
    /// ICMP errors to inner senders.
    pub(crate) clock: pmtu::Clock,
    pub(crate) icmp_limit: pmtu::RateLimit,
    /// Packets waiting for an SA a key manager was asked for ([`crate::acquire`]). Boxed,
    /// as the larval SAs in [`Databases`] are: only slow paths use them, and inline (with
    /// `Event`'s ACQUIRE inline too) `esp-input`'s share in `benches/esp.rs` fell from
    /// 0.685 to 0.66 (medians of 16 alternating runs); boxed, 0.69.
    pub(crate) acquires: Box<hold::Pending>,
    /// Outbound CBC IVs ([`crate::ivs`]); boxed, as `acquires`, to keep the hot fields'
    /// layout.
    pub(crate) ivs: Box<crate::ivs::IvSource>,
}

/// What finishes a synchronous driver's outcome for `sa` into the batch's results (the
/// direction's continuation), counting into the batch's tally; `Err`: dropped, and counted.
pub(crate) type Finish = fn(&Shared, &Arc<Sa>, Outcome, &mut Results, Option<&mut Tally>) -> Result<(), Drop>;

/// The packets and payload bytes a batch sent or received through one SA in a row, counted
/// into the SA's counters and the core's totals once per run instead of once per packet.
///
/// Each count is an atomic add on a cache line that every thread using the SA (the SA's)
/// or the core (the totals) writes: with two threads encrypting for one SA, the four adds
/// per packet were a quarter of `Shared::output`'s own time (perf annotate of
/// `benches/threads.rs`, "output, 2 threads, 1 SA"). An SA with packet or byte lifetimes
/// is counted at once, since its lifetime check reads the counts; so is a one-packet call's
/// packet (`Batch::one`), for which the tally would only add work.
#[derive(Default)]
pub(crate) struct Tally {
    sa: Option<Arc<Sa>>,
    way: Option<Way>,
    packets: u64,
    bytes: u64,
}

/// Which way a request goes: which of the SA's completions an asynchronous driver calls.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    Out,
    In,
}

/// The SA of a request handed to [`Shared::submit`]: lent by a lookup (a reference is
/// taken only if the batch holds none to it yet) or one the caller already owns.
pub(crate) enum SaRef<'s> {
    Lent(&'s Arc<Sa>),
    Owned(Arc<Sa>),
}

/// What a decapsulation made of an inbound packet that passed.
pub(crate) enum Inner {
    /// For the protected side.
    Deliver(Packet),
    /// A packet for a bundle's next SA (`crate::bundle`), and the SAs it came through so
    /// far, outermost first.
    Next(Arc<[Arc<Sa>]>, Packet),
}

/// Where a finished packet goes: into the call's results (a synchronous driver finished it
/// in the call), or to the sink (an asynchronous driver's completion).
pub(crate) enum To<'a> {
    Results(&'a mut Results),
    Sink,
}

impl Shared {
    /// A packet for the network, to `to`.
    pub(crate) fn transmit_to(&self, to: &mut To<'_>, p: Packet) {
        match to {
            To::Results(r) => r.transmit.push(p),
            To::Sink => self.sink.transmit(p),
        }
    }

    /// What an inbound packet's decapsulation made of it, to `to` or on to the bundle's
    /// next SA.
    #[inline]
    pub(crate) fn take_inner(&self, inner: Inner, to: &mut To<'_>) -> Result<(), Drop> {
        match inner {
            Inner::Deliver(p) => {
                match to {
                    To::Results(r) => r.deliver.push(p),
                    To::Sink => self.sink.deliver(p),
                }
                Ok(())
            }
            Inner::Next(path, p) => self.bundle_input(path, p, to),
        }
    }
}

/// The inbound continuation (ESP's and AH's: `input_done` tells them apart): a synchronous
/// driver's outcome into the batch's results.
pub(crate) fn finish_input(
    s: &Shared,
    sa: &Arc<Sa>,
    outcome: Outcome,
    out: &mut Results,
    t: Option<&mut Tally>,
) -> Result<(), Drop> {
    match s.input_done(sa, outcome, t, &[])? {
        Some(inner) => s.take_inner(inner, &mut To::Results(out)),
        None => Ok(()),
    }
}

/// The SA and direction of the run being gathered, and what finishes its requests. Its
/// first request waits here, and joins the batch's vector only when a second comes: a
/// one-packet call never touches the vector.
struct RunHead {
    sa: Arc<Sa>,
    way: Way,
    finish: Finish,
    first: Option<Request>,
}

/// The most outbound requests a run gathers before it goes to ocf; the SA's next packets
/// start another. A run takes its packets' sequence numbers in one burst before any is
/// encrypted and sent: with two threads sending for one SA (`--threads 2`), a run of a
/// whole batch (64) that a smaller batch of the other thread overtook arrived 64 or more
/// behind it, and the peer's 64-packet replay window dropped one as `too_old` (scripts/e2e,
/// 32 TCP connections over two TUN loops, in one CI run). 16 fills the multi-buffer
/// driver's lanes (longer runs of equal sizes gain it nothing) and takes sequence numbers
/// about as gradually as one packet at a time did. Inbound runs take no sequence numbers
/// and are not capped.
pub(crate) const RUN_LIMIT: usize = 16;

thread_local! {
    /// A run's requests and outcomes, kept between batches (no allocation per batch).
    static SPARE: std::cell::Cell<(Vec<Request>, Vec<Outcome>)> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

/// One call's batch on its way through ocf: where finished packets go, and the run of
/// requests for one SA not yet submitted.
pub(crate) struct Batch<'a> {
    out: &'a mut Results,
    head: Option<RunHead>,
    run: Vec<Request>,
    outcomes: Vec<Outcome>,
    /// None for a one-packet call.
    pub(crate) tally: Option<Tally>,
    /// The last drop after the crypto (a synchronous driver's), for the per-packet calls.
    dropped: Option<Drop>,
}

impl<'a> Batch<'a> {
    pub(crate) fn new(out: &'a mut Results) -> Batch<'a> {
        let (run, outcomes) = SPARE.with(|s| s.take());
        Batch { out, head: None, run, outcomes, tally: Some(Tally::default()), dropped: None }
    }

    /// A batch of one packet (the per-packet calls): counted at once, without a tally.
    pub(crate) fn one(out: &'a mut Results) -> Batch<'a> {
        Batch { out, head: None, run: Vec::new(), outcomes: Vec::new(), tally: None, dropped: None }
    }

    /// For the network, now (a packet policy lets through).
    pub(crate) fn transmit(&mut self, p: Packet) {
        self.out.transmit.push(p);
    }

    /// For the protected side, now (a clear packet policy allows).
    pub(crate) fn deliver(&mut self, p: Packet) {
        self.out.deliver.push(p);
    }

    /// The call's results, for a continuation that finishes packets into them.
    pub(crate) fn results(&mut self) -> &mut Results {
        self.out
    }

    /// `result`, or the drop after the crypto if there was one (the per-packet calls).
    pub(crate) fn outcome(&self, result: Result<(), Drop>) -> Result<(), Drop> {
        result.and(self.dropped.map_or(Ok(()), Err))
    }
}

impl Shared {
    pub(crate) fn new(fw: Framework, sink: Arc<dyn Sink>, me: Weak<Shared>) -> Shared {
        Shared {
            me,
            ivs: Box::new(crate::ivs::IvSource::new(fw.clone())),
            db: Databases::new(fw),
            discard_unmatched: AtomicBool::new(false),
            counters: Counters::default(),
            sink,
            events: Mutex::new(Vec::new()),
            clock: pmtu::Clock::new(),
            icmp_limit: pmtu::RateLimit::new(),
            acquires: Box::default(),
        }
    }

    pub(crate) fn drop(&self, sa: Option<&Sa>, why: Drop) -> Drop {
        self.counters.drop(why);
        if let Some(sa) = sa {
            sa.counters.drop(why);
        }
        why
    }

    pub(crate) fn push_events(&self, ev: impl IntoIterator<Item = Event>) {
        let mut e = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        e.extend(ev);
    }

    /// Charges a packet of `len` bytes to an SA with packet or byte lifetimes; true if the
    /// SA's hard lifetime is now over (it is removed and reported).
    #[inline]
    pub(crate) fn expire_by_volume(&self, sa: &Sa, len: usize) -> bool {
        if !sa.has_volume_limits() {
            return false;
        }
        let st = sa.counters.snapshot();
        match sa.charge(st.packets_out + st.packets_in + 1, st.bytes_out + st.bytes_in + len as u64) {
            Some((SaState::Dead, by)) => {
                self.db.sad.reap(&sa.id);
                self.push_events([Event::HardExpired { sa: sa.id, by }]);
                true
            }
            Some((SaState::Dying, by)) => {
                self.push_events([Event::SoftExpired { sa: sa.id, by }]);
                false
            }
            _ => false,
        }
    }

    /// Hands `req` for `sa` to the batch: it joins the run being gathered if that is for
    /// the same SA and direction; otherwise that run goes to ocf now and this request starts
    /// the next. A run takes one reference to its SA, not one per packet (every thread
    /// using the SA writes its count).
    #[inline]
    pub(crate) fn submit(&self, b: &mut Batch<'_>, sa: SaRef<'_>, req: Request, way: Way, finish: Finish) {
        let next = match &sa {
            SaRef::Lent(s) => *s,
            SaRef::Owned(s) => s,
        };
        if let Some(h) = b.head.as_mut().filter(|h| Arc::ptr_eq(&h.sa, next) && h.way == way) {
            b.run.extend(h.first.take());
            b.run.push(req);
            if way == Way::Out && b.run.len() >= RUN_LIMIT {
                self.submit_run(b);
            }
            return;
        }
        self.submit_run(b);
        let sa = match sa {
            SaRef::Owned(s) => s,
            SaRef::Lent(s) => s.clone(),
        };
        b.head = Some(RunHead { sa, way, finish, first: Some(req) });
    }

    /// The end of a batch: the last run goes to ocf, and the tally is counted. The run's
    /// vectors go back to this thread for its next batch.
    pub(crate) fn finish(&self, b: &mut Batch<'_>) {
        self.submit_run(b);
        if let Some(t) = &mut b.tally {
            self.settle(t);
        }
        if b.run.capacity() > 0 {
            let kept = (std::mem::take(&mut b.run), std::mem::take(&mut b.outcomes));
            SPARE.with(|s| s.set(kept));
        }
    }

    /// Submits the run gathered so far; what the driver finishes in the call is finished
    /// here, with the SA in hand, into the batch's results; an asynchronous driver calls
    /// the SA's completion later.
    fn submit_run(&self, b: &mut Batch<'_>) {
        let Some(RunHead { sa, way, finish, first }) = b.head.take() else { return };
        if let Some(req) = first {
            let done = match sa.callbacks.get() {
                Some(cb) => {
                    sa.session.submit_or_finish(req, if way == Way::Out { &cb.output } else { &cb.input })
                }
                None => Some(sa.session.run(req)),
            };
            if let Some(outcome) = done {
                if let Err(why) = finish(self, &sa, outcome, b.out, b.tally.as_mut()) {
                    b.dropped = Some(why);
                }
            }
            return;
        }
        match sa.callbacks.get() {
            Some(cb) => {
                let callback = if way == Way::Out { &cb.output } else { &cb.input };
                sa.session.submit_run(&mut b.run, callback, &mut b.outcomes)
            }
            None => sa.session.run_batch(&mut b.run, &mut b.outcomes),
        }
        for outcome in b.outcomes.drain(..) {
            if let Err(why) = finish(self, &sa, outcome, b.out, b.tally.as_mut()) {
                b.dropped = Some(why);
            }
        }
    }

    /// Counts a packet of `len` payload bytes that `sa` sent (`Way::Out`) or received:
    /// into `tally` (counted when the run of `sa` ends), or at once without one (an
    /// asynchronous driver's completion) or for an SA with volume lifetimes.
    #[inline]
    pub(crate) fn count(&self, tally: Option<&mut Tally>, sa: &Arc<Sa>, way: Way, len: usize) {
        match tally {
            Some(t) if !sa.has_volume_limits() => {
                if !t.sa.as_ref().is_some_and(|s| Arc::ptr_eq(s, sa)) || t.way != Some(way) {
                    self.settle(t);
                    t.sa = Some(sa.clone());
                    t.way = Some(way);
                }
                t.packets += 1;
                t.bytes += len as u64;
            }
            _ => {
                let (c, g) = (&sa.counters, &self.counters);
                match way {
                    Way::Out => (c.sent(1, len as u64), g.sent(1, len as u64)),
                    Way::In => (c.received(1, len as u64), g.received(1, len as u64)),
                };
            }
        }
    }

    /// Counts what `tally` holds and empties it.
    pub(crate) fn settle(&self, t: &mut Tally) {
        let Some(sa) = t.sa.take() else { return };
        let (c, g) = (&sa.counters, &self.counters);
        match t.way.take() {
            Some(Way::Out) => (c.sent(t.packets, t.bytes), g.sent(t.packets, t.bytes)),
            Some(Way::In) => (c.received(t.packets, t.bytes), g.received(t.packets, t.bytes)),
            None => ((), ()),
        };
        (t.packets, t.bytes) = (0, 0);
    }
}

/// Parses a packet whose checksums are not ours to judge: one from the protected side on
/// its way out (its sender's stack wrote them; the receiver checks them), or one just
/// decapsulated (ESP's ICV already covered every byte). Verifying a UDP checksum would
/// read the whole packet again.
#[inline(always)]
pub(crate) fn parse_trusted(bytes: &[u8]) -> ipsec_wire::Result<Summary> {
    ipsec_wire::parse_any_with(bytes, ipsec_wire::ChecksumPolicy::Ignore)
}

/// The flow a packet offers to the SPD (ports from TCP, UDP and SCTP headers).
pub(crate) fn flow(s: &Summary, bytes: &[u8]) -> Flow {
    let proto = s.protocol.0;
    let (sport, dport) = match (proto, s.is_fragment) {
        (6 | 17 | 132, false) => match bytes.get(s.offset..s.offset + 4) {
            Some(p) => (u16::from_be_bytes([p[0], p[1]]), u16::from_be_bytes([p[2], p[3]])),
            None => (0, 0),
        },
        _ => (0, 0),
    };
    // The addresses are read again from the header, not copied from the summary: the
    // parser has just written those piecewise, and copying them whole stalled on store
    // forwarding (measured: 6% of the outbound path's own time).
    let (src, dst) = match (s.src, bytes) {
        (IpAddr::V4(_), [_, _, _, _, _, _, _, _, _, _, _, _, a, b, c, d, e, f, g, h, ..]) => {
            (IpAddr::from([*a, *b, *c, *d]), IpAddr::from([*e, *f, *g, *h]))
        }
        (IpAddr::V6(_), b) if b.len() >= 40 => {
            let (mut src, mut dst) = ([0u8; 16], [0u8; 16]);
            src.copy_from_slice(&b[8..24]);
            dst.copy_from_slice(&b[24..40]);
            (IpAddr::from(src), IpAddr::from(dst))
        }
        _ => (s.src, s.dst),
    };
    Flow { src, dst, proto, sport, dport }
}

/// A request's buffer as the vector it was made from (ESP requests are always contiguous).
pub(crate) fn into_vec(b: ocf::Buffer) -> Vec<u8> {
    match b {
        ocf::Buffer::Contiguous(v) => v,
        other => other.to_vec(),
    }
}
