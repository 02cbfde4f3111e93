//! The packet path: outbound policy lookup and ESP encapsulation, inbound ESP
//! decapsulation and policy check, as continuations over ocf.
//!
//! ```text
//! output(packet) ─ parse ─ SPD out ─┬─ bypass ─────────────────────────────► sink.transmit
//!                                   ├─ discard ─► drop (policy)
//!                                   └─ protect ─ SA ─ fits the path MTU? ─ seq ─ lay out ESP ─ ocf submit
//!                                                    └─ no: drop, ICMP to the sender ─► sink.deliver (pmtu.rs)
//!                                                                  └─ completion: sink.transmit
//! input(packet, via) ─ parse ─┬─ ESP, ESP in UDP ─ SAD (SPI, dst) ─ encapsulation as the SA's? ─ replay check ─ ocf submit
//!                              │        └─ completion: replay update ─ (UDP: peer moved? ─ float) ─ trailer ─ strip ─ SPD in ─► sink.deliver
//!                              ├─ NAT-keepalive: counted ·  IKE, not ESP, short ESP: drop
//!                              └─ clear (via Ip only) ─ SPD in (ESP required? drop) ──────────► sink.deliver
//! ```
//!
//! Where a packet came from ([`Via`]) decides what it may be. A host's IP stack hands over
//! any packet ([`Via::Ip`]): ESP, ESP in UDP on port 4500, or clear traffic for the inbound
//! policy to judge. A gateway's network sockets carry only ESP ([`Via::Esp`], a raw ESP
//! socket; [`Via::Udp`], the ESP-in-UDP socket on whatever port it listens): nothing from
//! them is ever clear traffic for the protected side. (Delivered there, a stray datagram to
//! the gateway's own address came straight back to its socket through the TUN and looped
//! forever; and which datagrams are ESP in UDP is the socket's to say, not a port number's.)
//!
//! Nothing here does I/O or waits: a packet goes in, and comes out through the [`Sink`] —
//! at once when the crypto driver is synchronous (ocf's `soft`), later from the driver's
//! completion context when it is not. Every drop is counted under its reason, per SA and
//! in total ([`crate::stats::Drop`]).
//!
//! Packets carry headroom ([`Packet::head`]): encapsulation writes the outer headers in
//! front of the payload without moving it when there is room (the gateway reads packets
//! [`HEADROOM`] bytes into its buffers), and decapsulation hands back the inner packet
//! where it lies.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Instant;

use ipsec_wire::{ChecksumPolicy, Encap, EncapPort, PseudoHeader, Summary, Upper as Wire};
use ocf::Buffer;
use ocf::{Callback, Error as OcfError, Flags, Framework, Outcome};

use crate::control::{Action, Dir, Level, Mode, Proto, Request};
use crate::db::{ControlError, Databases, Response, Transaction};
use crate::esp::{self, OpenError, Trailer, ESP_HEADER_LEN};
use crate::ipip;
use crate::pmtu::{self, IcmpFrom, Learned};
use crate::sad::{Event, Sa, SaState};
use crate::spd::Flow;
use crate::stats::{Counters, Drop, Stats};

/// Room to leave in front of a packet for the outer IPv6 header, UDP, ESP header and IV.
pub const HEADROOM: usize = 40 + 8 + ESP_HEADER_LEN + 16;
/// Room to leave after a packet for padding, trailer and the longest ICV.
pub const TAILROOM: usize = 16 + 2 + 32;

const PROTO_IPV4: u8 = 4;
const PROTO_UDP: u8 = 17;
const PROTO_ESP: u8 = 50;
const PROTO_IPV6: u8 = 41;
const PROTO_NONE: u8 = 59;

/// A packet in a buffer: the IP packet is `data[head..]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    pub data: Vec<u8>,
    pub head: usize,
}

impl Packet {
    /// A packet with no headroom.
    pub fn new(bytes: Vec<u8>) -> Packet {
        Packet { data: bytes, head: 0 }
    }

    /// A copy of `bytes` with [`HEADROOM`] in front and [`TAILROOM`] reserved behind.
    pub fn with_headroom(bytes: &[u8]) -> Packet {
        let mut data = Vec::with_capacity(HEADROOM + bytes.len() + TAILROOM);
        data.resize(HEADROOM, 0);
        data.extend_from_slice(bytes);
        Packet { data, head: HEADROOM }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.data[self.head.min(self.data.len())..]
    }
}

/// Where packets go.
pub trait Sink: Send + Sync {
    /// To the network: ESP packets, and packets policy lets through in the clear.
    fn transmit(&self, packet: Packet);
    /// To the protected side: decapsulated packets, and clear ones policy allows.
    fn deliver(&self, packet: Packet);
}

/// The Fast IPsec core: databases, statistics, and the packet path.
pub struct Ipsec {
    shared: Arc<Shared>,
}

struct Shared {
    db: Databases,
    /// What becomes of an outbound packet no policy covers: sent as it is (false), or
    /// dropped as [`Drop::NoPolicy`] (true).
    discard_unmatched: AtomicBool,
    counters: Counters,
    sink: Arc<dyn Sink>,
    events: Mutex<Vec<Event>>,
    /// Path MTU ([`crate::pmtu`]): the coarse clock learned MTUs age on, and the rate of
    /// ICMP errors to inner senders.
    clock: pmtu::Clock,
    icmp_limit: pmtu::RateLimit,
}

/// Per SA, the two completions (made when the SA is installed, so the packet path
/// allocates none).
pub(crate) struct SaCallbacks {
    output: Callback,
    input: Callback,
}

impl Ipsec {
    /// A core whose SAs use `fw`'s drivers, sending what it produces to `sink`.
    pub fn new(fw: Framework, sink: Arc<dyn Sink>) -> Ipsec {
        Ipsec {
            shared: Arc::new(Shared {
                db: Databases::new(fw),
                discard_unmatched: AtomicBool::new(false),
                counters: Counters::default(),
                sink,
                events: Mutex::new(Vec::new()),
                clock: pmtu::Clock::new(),
                icmp_limit: pmtu::RateLimit::new(),
            }),
        }
    }

    /// Carries out a control request (the setkey language and the gateway's socket both
    /// come here).
    pub fn control(&self, req: &Request) -> Result<Response, ControlError> {
        self.transact(|t| t.apply(req))
    }

    /// Changes the databases as one transaction ([`crate::db`]): `edit` applies requests;
    /// if it returns `Ok`, everything it did becomes visible at once, otherwise nothing.
    /// Other writers wait meanwhile (so `edit` must not call [`Ipsec::control`]).
    pub fn transact<T, E>(&self, edit: impl FnOnce(&mut Transaction<'_>) -> Result<T, E>) -> Result<T, E> {
        let mut t = self.shared.db.transaction();
        let r = edit(&mut t)?;
        for sa in t.commit() {
            self.shared.attach(&sa);
        }
        Ok(r)
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

    /// Totals over every SA, and drops that happened before an SA was found.
    pub fn stats(&self) -> Stats {
        self.shared.counters.snapshot()
    }

    /// Applies time lifetimes (whole seconds): call it at least once a second (ipsecd does
    /// every 200 ms, between signal checks).
    pub fn tick(&self) {
        self.tick_at(Instant::now());
    }

    /// [`Ipsec::tick`] with the time given: the clock that learned path MTUs age on
    /// ([`crate::pmtu::PMTU_AGE`]) moves to `now` (never back); lifetimes go by the SAs' age.
    pub fn tick_at(&self, now: Instant) {
        self.shared.clock.set(now);
        let ev = self.shared.db.sad.tick();
        self.shared.push_events(ev);
    }

    /// Lifetime and sequence events since the last call.
    pub fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut *self.shared.events.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Processes a packet leaving the protected side. `Err` if it was dropped (and
    /// counted); otherwise it reaches the sink, now or from the crypto completion.
    pub fn output(&self, packet: Packet) -> Result<(), Drop> {
        self.shared.output(packet)
    }

    /// Processes a packet arriving from the network through an IP stack ([`Via::Ip`]).
    /// `Err` if it was dropped (and counted) before the crypto; a packet that fails later is
    /// counted then.
    pub fn input(&self, packet: Packet) -> Result<(), Drop> {
        self.shared.input(packet, Via::Ip)
    }

    /// [`Ipsec::input`] for a packet that came through `via`: from a socket that carries
    /// only ESP, whatever is not ESP is counted and dropped, never delivered.
    pub fn input_via(&self, packet: Packet, via: Via) -> Result<(), Drop> {
        self.shared.input(packet, via)
    }

    /// An ICMP error from the network (the ICMP message; see [`IcmpFrom`]): a path MTU
    /// error about one of our ESP packets lowers its SA's path MTU ([`crate::pmtu`]).
    /// `Err`: dropped and counted under its reason.
    pub fn icmp_error(&self, msg: &[u8], from: IcmpFrom) -> Result<Learned, Drop> {
        let learned = pmtu::learn(&self.shared.db.sad, msg, from, self.shared.clock.now());
        self.shared.learned(learned)
    }

    /// An ESP packet of ours (`outer`, whole) that the local IP stack refused to send as
    /// larger than `mtu`, its route's MTU (EMSGSIZE): lowers its SA's path MTU as an ICMP
    /// error quoting it would ([`crate::pmtu`]).
    pub fn local_path_mtu(&self, outer: &[u8], mtu: u32) -> Result<Learned, Drop> {
        let learned = pmtu::learn_local(&self.shared.db.sad, outer, mtu, self.shared.clock.now());
        self.shared.learned(learned)
    }

    /// Counts a packet that its reader dropped before the core could look at it (ipsecd:
    /// one its socket cut short, [`Drop::Truncated`]), so that every drop is counted in
    /// one place.
    pub fn count_drop(&self, why: Drop) {
        Shared::drop(&self.shared, None, why);
    }
}

/// Where a packet from the network came from, which decides what it may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// An IP stack's input: any packet, checksums to verify. ESP, ESP in UDP to or from
    /// port 4500 (RFC 3948), or clear traffic that the inbound policy judges.
    Ip,
    /// A raw ESP socket (IP protocol 50; the kernel checked the IPv4 header, or the
    /// reader wrote the IPv6 one): ESP, or a drop.
    Esp,
    /// The ESP-in-UDP socket, on whatever port it listens: the datagram behind the IP and
    /// UDP headers its reader wrote back (the kernel checked its checksum; the UDP
    /// checksum field is not looked at). ESP, a NAT-keepalive (counted), or a drop.
    Udp,
}

/// The outbound default policy: what becomes of a packet no policy covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultPolicy {
    /// Sent as it is.
    Bypass,
    /// Dropped and counted as [`Drop::NoPolicy`].
    Discard,
}

/// What the completion needs to finish an inbound packet, packed into the request's cookie:
/// where the packet and its ESP header start, and whether UDP encapsulation sits between
/// the IP header and ESP. (The sequence number's high half rides in the request itself:
/// in its AAD or its ESN bits.)
#[derive(Clone, Copy)]
struct InCookie {
    head: u32,
    /// ESP's offset from `head` (within one IP packet, so below 2^16).
    esp: u16,
    udp: bool,
}

impl InCookie {
    fn pack(self) -> u64 {
        u64::from(self.head) | u64::from(self.esp) << 32 | u64::from(self.udp) << 48
    }

    fn unpack(v: u64) -> InCookie {
        InCookie { head: v as u32, esp: (v >> 32) as u16, udp: v >> 48 & 1 == 1 }
    }
}

/// The high half of the sequence number a request was opened with.
fn seq_hi_of(req: &ocf::Request) -> u32 {
    if let Some(h) = req.esn_high() {
        return h;
    }
    match req.aad.separate() {
        Some(b) if b.len() == 12 => u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        _ => 0,
    }
}

/// Parses a packet from the network as `via` says: through an IP stack every checksum is
/// verified; from a socket of ours, what the kernel checked or the reader wrote is not
/// checked again (over IPv6 the UDP checksum would be a pass over the whole packet), and
/// the ESP-in-UDP socket's datagrams are ESP in UDP whatever their port.
///
/// (Callers borrow the summary from the result instead of moving it out: the parser writes
/// it field by field, and copying it right after in 16-byte pieces stalled on store
/// forwarding, measured on the ESP packet path. For the same reason there is one call to
/// the parser, with the options chosen first: one call per `via`, whose results were then
/// moved into one place, cost 4 to 10% of `esp-input` in `benches/esp.rs`.)
#[inline(always)]
fn parse(bytes: &[u8], via: Via) -> ipsec_wire::Result<Summary> {
    let (policy, encap) = match via {
        Via::Ip => (ChecksumPolicy::Verify, EncapPort::Port(ipsec_wire::udp_encap::NAT_T_PORT)),
        Via::Esp => (ChecksumPolicy::Ignore, EncapPort::Port(ipsec_wire::udp_encap::NAT_T_PORT)),
        Via::Udp => (ChecksumPolicy::Ignore, EncapPort::Every),
    };
    ipsec_wire::parse_any_encap(bytes, policy, encap)
}

/// Parses a packet whose checksums are not ours to judge: one from the protected side on
/// its way out (its sender's stack wrote them; the receiver checks them), or one just
/// decapsulated (ESP's ICV already covered every byte). Verifying a UDP checksum would
/// read the whole packet again.
#[inline(always)]
fn parse_trusted(bytes: &[u8]) -> ipsec_wire::Result<Summary> {
    ipsec_wire::parse_any_with(bytes, ipsec_wire::ChecksumPolicy::Ignore)
}

/// The flow a packet offers to the SPD (ports from TCP, UDP and SCTP headers).
fn flow(s: &Summary, bytes: &[u8]) -> Flow {
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

impl Shared {
    fn drop(&self, sa: Option<&Sa>, why: Drop) -> Drop {
        self.counters.drop(why);
        if let Some(sa) = sa {
            sa.counters.drop(why);
        }
        why
    }

    fn push_events(&self, ev: impl IntoIterator<Item = Event>) {
        let mut e = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        e.extend(ev);
    }

    /// Charges a packet of `len` bytes to an SA with packet or byte lifetimes; true if the
    /// SA's hard lifetime is now over (it is removed and reported).
    #[inline]
    fn expire_by_volume(&self, sa: &Sa, len: usize) -> bool {
        if !sa.has_volume_limits() {
            return false;
        }
        let st = sa.counters.snapshot();
        match sa.charge(st.packets_out + st.packets_in + 1, st.bytes_out + st.bytes_in + len as u64) {
            Some(SaState::Dead) => {
                self.db.sad.reap(&sa.id);
                self.push_events([Event::HardExpired(sa.id)]);
                true
            }
            Some(SaState::Dying) => {
                self.push_events([Event::SoftExpired(sa.id)]);
                false
            }
            _ => false,
        }
    }

    /// Gives a new SA its completions.
    fn attach(self: &Arc<Shared>, sa: &Arc<Sa>) {
        let (s1, a1) = (Arc::downgrade(self), Arc::downgrade(sa));
        let (s2, a2) = (s1.clone(), a1.clone());
        let output: Callback = Arc::new(move |o| {
            if let (Some(s), Some(sa)) = (Weak::upgrade(&s1), Weak::upgrade(&a1)) {
                s.output_done(&sa, o);
            }
        });
        let input: Callback = Arc::new(move |o| {
            if let (Some(s), Some(sa)) = (Weak::upgrade(&s2), Weak::upgrade(&a2)) {
                s.input_done(&sa, o);
            }
        });
        let _ = sa.callbacks.set(SaCallbacks { output, input });
    }

    // ----- outbound ----------------------------------------------------------------------

    fn output(&self, packet: Packet) -> Result<(), Drop> {
        let parsed = parse_trusted(packet.bytes());
        let Ok(s) = &parsed else {
            return Err(self.drop(None, Drop::Malformed));
        };
        let f = flow(s, packet.bytes());
        let Some(policy) = self.db.spd.lookup(Dir::Out, &f) else {
            if self.discard_unmatched.load(Ordering::Relaxed) {
                return Err(self.drop(None, Drop::NoPolicy));
            }
            self.sink.transmit(packet);
            return Ok(());
        };
        let rule = match &policy.spec.action {
            Action::Bypass => {
                self.sink.transmit(packet);
                return Ok(());
            }
            Action::Discard => return Err(self.drop(None, Drop::Policy)),
            Action::Protect(rules) => match rules.first() {
                Some(r) => *r,
                None => return Err(self.drop(None, Drop::Policy)),
            },
        };
        let (src, dst) = rule.tunnel.unwrap_or((s.src, s.dst));
        let reqid = if let Level::Unique(n) = rule.level { n } else { 0 };
        let Some(sa) = self.db.sad.outbound(src, dst, rule.mode, reqid) else {
            if rule.level == Level::Use {
                self.sink.transmit(packet);
                return Ok(());
            }
            return Err(self.drop(None, Drop::NoSa));
        };
        let tunnel = rule.mode == Mode::Tunnel || (rule.mode == Mode::Any && sa.spec.mode == Mode::Tunnel);
        if !tunnel && s.is_fragment {
            return Err(self.drop(Some(&sa), Drop::Fragment));
        }
        // Does it fit the path (crate::pmtu)? One atomic load while no path MTU is known.
        let keep = || if tunnel { 0 } else { transport_split(packet.bytes(), s).map_or(0, |sp| sp.keep) };
        let fragmentable = match pmtu::check(&sa, packet.bytes(), s, keep, &self.clock) {
            pmtu::Verdict::Fits => false,
            pmtu::Verdict::Fragmentable => true,
            pmtu::Verdict::TooBig(mtu) => return Err(self.too_big_for_path(&sa, &packet, s, mtu)),
        };
        self.seal(&sa, packet, s, tunnel, fragmentable)
    }

    /// `fragmentable`: the packet exceeds the path MTU but may be fragmented, so in tunnel
    /// mode the outer IPv4 header goes without DF and the completion cuts the ESP packet
    /// into fragments ([`crate::pmtu::fragment`]).
    fn seal(
        &self,
        sa: &Arc<Sa>,
        packet: Packet,
        s: &Summary,
        tunnel: bool,
        fragmentable: bool,
    ) -> Result<(), Drop> {
        let seq = match sa.seq.next() {
            Ok(n) => n,
            Err(_) => {
                if sa.exhausted_first() {
                    self.push_events([Event::SeqExhausted(sa.id)]);
                }
                return Err(self.drop(Some(sa), Drop::SeqExhausted));
            }
        };
        if self.expire_by_volume(sa, s.ip_len) {
            return Err(self.drop(Some(sa), Drop::Expired));
        }
        let t = &sa.transform;
        let natt = sa.spec.natt;
        let v6_out = sa.id.dst.is_ipv6();
        let udp = if natt.is_some() { 8 } else { 0 };
        let esp_len = ESP_HEADER_LEN + t.iv_len;
        let Packet { mut data, mut head } = packet;
        data.truncate(head + s.ip_len);
        // What stays in front of ESP, and the next header ESP's trailer names.
        let split = if tunnel {
            // Tunnel mode is two steps, as in Fast IPsec: IP-in-IP gives the inner packet an
            // outer header; ESP then protects that packet as in transport mode.
            let (p, split) =
                ipip::encapsulate(Packet { data, head }, sa.id.src, sa.id.dst, udp + esp_len, seq as u16);
            (data, head) = (p.data, p.head);
            if fragmentable {
                ipip::allow_fragments(&mut data[head..]);
            }
            split
        } else {
            transport_split(&data[head..], s).ok_or_else(|| self.drop(Some(sa), Drop::Malformed))?
        };
        let (outer_len, next_header) = (split.keep, split.next);
        let len = data.len() - head - outer_len;
        let total = outer_len + udp + esp_len + t.padded_len(len) + t.icv_len;
        if total - if v6_out { 40 } else { 0 } > 0xffff {
            return Err(self.drop(Some(sa), Drop::TooBig));
        }
        // The payload must end up right after the ESP header and IV: the IP header moves
        // forward into the headroom, or, without room, everything is copied once.
        let (mut buf, base) = if head >= udp + esp_len {
            let base = head - (udp + esp_len);
            data.copy_within(head..head + outer_len, base);
            (data, base)
        } else {
            let front = outer_len + udp + esp_len;
            let mut v = Vec::with_capacity(front + len + TAILROOM);
            v.resize(front, 0);
            v[..outer_len].copy_from_slice(&data[head..head + outer_len]);
            v.extend_from_slice(&data[head + outer_len..]);
            (v, 0)
        };
        let esp_at = base + outer_len + udp;
        let mut req =
            t.seal(std::mem::take(&mut buf), esp_at, len, next_header, sa.id.spi, seq, sa.spec.esn, None);
        // Outer headers now that every length is known (the ICV is written in place later).
        if let Some(bytes) = req.buf.as_contiguous_mut() {
            let total = bytes.len() - base;
            let proto = if natt.is_some() { PROTO_UDP } else { PROTO_ESP };
            fix_transport_header(&mut bytes[base..], &split, total, proto);
            if let (Some(n), Some(dport)) = (natt, sa.send_port()) {
                // To the port the peer was last heard from (it may have moved behind a NAT).
                write_udp(&mut bytes[base + outer_len..], n.sport, dport, total - outer_len);
            }
        }
        // The completion needs where the packet starts and, for UDP over IPv6, where the UDP
        // header is: its checksum covers the ESP packet, so it is computed after the ICV.
        let udp_at = if natt.is_some() && v6_out { outer_len } else { 0 };
        // And, for a tunnel-mode packet over the path MTU that may be fragmented, that MTU:
        // the completion cuts it into fragments (crate::pmtu::fragment).
        let frag_mtu = match fragmentable && tunnel {
            true => sa.path_mtu.get(self.clock.now()).map_or(0, |m| m.min(0xffff)),
            false => 0,
        };
        req.user = base as u64 | (udp_at as u64) << 32 | u64::from(frag_mtu) << 48;
        req.flags = Flags::CALLBACK_IMMEDIATE;
        sa.counters.sent(len);
        self.counters.sent(len);
        // A synchronous driver hands the outcome straight back: finish here, with the SA
        // in hand; an asynchronous one calls the SA's completion later.
        let done = match sa.callbacks.get() {
            Some(cb) => sa.session.submit_or_finish(req, &cb.output),
            None => Some(sa.session.run(req)),
        };
        if let Some(outcome) = done {
            self.output_done(sa, outcome);
        }
        Ok(())
    }

    fn output_done(&self, sa: &Sa, outcome: Outcome) {
        match outcome {
            Ok(mut req) => {
                let (head, udp_at) = (req.user as u32 as usize, (req.user >> 32) as u16 as usize);
                let frag_mtu = (req.user >> 48) as usize;
                let mut data = into_vec(req.buf.take());
                esp::recycle(req);
                if udp_at != 0 {
                    udp6_checksum(&mut data[head..], udp_at);
                }
                if frag_mtu != 0 {
                    if let Some(fragments) = pmtu::fragment(&data[head..], frag_mtu) {
                        fragments.into_iter().for_each(|f| self.sink.transmit(f));
                        return;
                    }
                }
                self.sink.transmit(Packet { data, head });
            }
            Err(_) => {
                self.drop(Some(sa), Drop::CryptoError);
            }
        }
    }

    /// A packet too big for its SA's path (`mtu`: the largest that fits): dropped, and its
    /// sender told, within the rate limit ([`crate::pmtu`]).
    fn too_big_for_path(&self, sa: &Sa, packet: &Packet, s: &Summary, mtu: u32) -> Drop {
        if let Some(icmp) = pmtu::error_to_sender(packet.bytes(), s, mtu) {
            if self.icmp_limit.allow(Instant::now()) {
                Counters::count(&self.counters.icmp_sent);
                self.to_protected_side(icmp);
            } else {
                Counters::count(&self.counters.icmp_rate_limited);
            }
        }
        self.drop(Some(sa), Drop::PathMtu)
    }

    /// A packet the core itself made for the protected side (an ICMP error to an inner
    /// sender) goes where decapsulated packets go. The one place that sends such packets.
    fn to_protected_side(&self, packet: Packet) {
        self.sink.deliver(packet);
    }

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

    // ----- inbound -----------------------------------------------------------------------

    fn input(&self, packet: Packet, via: Via) -> Result<(), Drop> {
        let parsed = parse(packet.bytes(), via);
        let Ok(s) = &parsed else {
            return Err(self.drop(None, Drop::Malformed));
        };
        let udp = match s.upper {
            Wire::Esp(_) => false,
            Wire::UdpEncap(_, Encap::Esp(_)) => true,
            // NAT keepalives only keep a NAT mapping open: counted, not a drop.
            Wire::UdpEncap(_, Encap::Keepalive) => {
                self.counters.keepalive();
                return Ok(());
            }
            Wire::UdpEncap(_, Encap::Ike) => return Err(self.drop(None, Drop::Ike)),
            Wire::UdpEncap(_, Encap::EspTruncated) | Wire::BadEsp(ipsec_wire::Error::Truncated { .. }) => {
                return Err(self.drop(None, Drop::EspTruncated))
            }
            // SPI 0 is reserved (RFC 4303 §2.1): no SA has it.
            Wire::BadEsp(_) => return Err(self.drop(None, Drop::UnknownSpi)),
            Wire::UdpEncap(_, Encap::Invalid(_)) => return Err(self.drop(None, Drop::NotEsp)),
            // ESP needs whole packets (the kernel reassembles before a socket sees them).
            Wire::Fragment if via != Via::Ip || s.protocol.0 == PROTO_ESP => {
                return Err(self.drop(None, Drop::Fragment))
            }
            _ if via == Via::Ip => return self.clear_input(packet, s),
            _ => return Err(self.drop(None, Drop::NotEsp)),
        };
        let esp_off = s.offset + if udp { 8 } else { 0 };
        let bytes = packet.bytes();
        let (spi, seq_lo) = match bytes.get(esp_off..esp_off + 8) {
            Some(h) => {
                (u32::from_be_bytes([h[0], h[1], h[2], h[3]]), u32::from_be_bytes([h[4], h[5], h[6], h[7]]))
            }
            None => return Err(self.drop(None, Drop::EspTruncated)),
        };
        let Some(sa) = self.db.sad.inbound(spi, s.dst) else {
            return Err(self.drop(None, Drop::UnknownSpi));
        };
        // An SA is ESP in UDP or plain ESP, never both (a peer that switches must say so
        // with a new SA; Linux drops the same).
        if sa.spec.natt.is_some() != udp {
            return Err(self.drop(Some(&sa), Drop::EncapMismatch));
        }
        if sa.state() == SaState::Dead {
            return Err(self.drop(Some(&sa), Drop::Expired));
        }
        // Malformed before replay: a truncated packet says nothing about the window.
        match sa.transform.check_len(s.ip_len - esp_off) {
            Ok(()) => {}
            Err(OpenError::Truncated) => return Err(self.drop(Some(&sa), Drop::EspTruncated)),
            Err(OpenError::NotBlocks) => return Err(self.drop(Some(&sa), Drop::BadLength)),
        }
        let seq = sa.replay.lock().unwrap_or_else(PoisonError::into_inner).check(seq_lo);
        let seq = seq.map_err(|e| self.drop(Some(&sa), e.drop_reason()))?;
        let Packet { mut data, head } = packet;
        data.truncate(head + s.ip_len);
        let esp_at = head + esp_off;
        let mut req = match sa.transform.open(data, esp_at, seq, sa.spec.esn) {
            Ok(r) => r,
            Err((OpenError::Truncated, _)) => return Err(self.drop(Some(&sa), Drop::EspTruncated)),
            Err((OpenError::NotBlocks, _)) => return Err(self.drop(Some(&sa), Drop::BadLength)),
        };
        req.user = InCookie { head: head as u32, esp: esp_off as u16, udp }.pack();
        req.flags = Flags::CALLBACK_IMMEDIATE;
        let done = match sa.callbacks.get() {
            Some(cb) => sa.session.submit_or_finish(req, &cb.input),
            None => Some(sa.session.run(req)),
        };
        if let Some(outcome) = done {
            self.input_done(&sa, outcome);
        }
        Ok(())
    }

    fn input_done(&self, sa: &Sa, outcome: Outcome) {
        let mut req = match outcome {
            Ok(r) => r,
            Err(f) => {
                let why =
                    if f.error() == &OcfError::AuthFailed { Drop::AuthFailed } else { Drop::CryptoError };
                self.drop(Some(sa), why);
                return;
            }
        };
        let c = InCookie::unpack(req.user);
        let payload = req.payload_range();
        let mut data = into_vec(req.buf.take());
        let (head, esp_at) = (c.head as usize, c.head as usize + c.esp as usize);
        let seq_lo =
            u32::from_be_bytes([data[esp_at + 4], data[esp_at + 5], data[esp_at + 6], data[esp_at + 7]]);
        let seq = u64::from(seq_hi_of(&req)) << 32 | u64::from(seq_lo);
        esp::recycle(req);
        // Only now, with the ICV verified, does the window move (RFC 4303 §3.4.3).
        let newest = {
            let mut w = sa.replay.lock().unwrap_or_else(PoisonError::into_inner);
            let newest = seq > w.top();
            if let Err(e) = w.update(seq) {
                drop(w);
                self.drop(Some(sa), e.drop_reason());
                return;
            }
            newest
        };
        // Port floating: only the newest authenticated packet may move the peer (a late one
        // from before a move must not move it back).
        if c.udp && newest {
            self.follow_peer(sa, &data[head..esp_at]);
        }
        let (len, next) = match esp::trailer(&data[payload.clone()]) {
            Ok(t) => t,
            Err(Trailer::BadPadding | Trailer::Short | Trailer::PadTooLong) => {
                self.drop(Some(sa), Drop::BadPadding);
                return;
            }
        };
        let body = payload.start;
        data.truncate(body + len);
        // Counters and volume lifetimes count the payload ESP carried, TFC padding included
        // (as Linux counts an SA's bytes), though the padding is not delivered.
        let stats_len = len;
        let packet = match next {
            // A dummy packet (RFC 4303 §2.6, traffic flow confidentiality): discard quietly.
            PROTO_NONE => return,
            // Tunnel mode: ESP carried an IP packet; IP-in-IP's decapsulation is to start
            // there (the outer header is left behind in the buffer), cuts any TFC padding
            // after it and carries the outer header's ECN mark in (RFC 6040).
            PROTO_IPV4 | PROTO_IPV6 => {
                let outer_ecn = ipip::ecn(&data[head..]);
                match ipip::decapsulate(Packet { data, head: body }, next, outer_ecn) {
                    Ok(p) => p,
                    Err(why) => {
                        self.drop(Some(sa), why);
                        return;
                    }
                }
            }
            _ => {
                // Transport: the IP header (without any UDP encapsulation) moves up to meet
                // the payload.
                let hdr = esp_at - head - if c.udp { 8 } else { 0 };
                let new_head = body - hdr;
                data.copy_within(head..head + hdr, new_head);
                let total = data.len() - new_head;
                if restore_transport_header(&mut data[new_head..], hdr, total, next).is_err() {
                    self.drop(Some(sa), Drop::BadInner);
                    return;
                }
                Packet { data, head: new_head }
            }
        };
        let parsed = parse_trusted(packet.bytes());
        let Ok(inner) = &parsed else {
            self.drop(Some(sa), Drop::BadInner);
            return;
        };
        // The policy check after decapsulation: the packet must be one this SA may carry.
        if let Some(p) = self.db.spd.lookup(Dir::In, &flow(inner, packet.bytes())) {
            let ok = match &p.spec.action {
                Action::Protect(rules) => rules.iter().any(|r| rule_allows(r, sa)),
                Action::Bypass | Action::Discard => false,
            };
            if !ok {
                self.drop(Some(sa), Drop::Policy);
                return;
            }
        }
        if self.expire_by_volume(sa, stats_len) {
            self.drop(Some(sa), Drop::Expired);
            return;
        }
        sa.counters.received(stats_len);
        self.counters.received(stats_len);
        self.sink.deliver(packet);
    }

    /// An authenticated ESP-in-UDP packet (`outer`: its IP and UDP headers) may come from
    /// another UDP source port than the peer's known one: the SAs to the peer follow it
    /// ([`crate::sad::Sad::float`]), counted and reported once per change.
    fn follow_peer(&self, sa: &Sa, outer: &[u8]) {
        let Some(udp) = outer.len().checked_sub(8).and_then(|at| outer.get(at..)) else { return };
        let port = ipsec_wire::udp::Packet::new_unchecked(udp).src_port();
        if let Some(from) = self.db.sad.float(sa, port) {
            self.counters.peer_moved();
            self.push_events([Event::PeerMoved { sa: sa.id, from, to: port }]);
        }
    }

    /// A packet that arrived without ESP: allowed unless policy requires protection.
    fn clear_input(&self, packet: Packet, s: &Summary) -> Result<(), Drop> {
        match self.db.spd.lookup(Dir::In, &flow(s, packet.bytes())).map(|p| p.spec.action.clone()) {
            Some(Action::Protect(rules)) if rules.iter().all(|r| r.level == Level::Use) => {}
            Some(Action::Protect(_) | Action::Discard) => return Err(self.drop(None, Drop::Policy)),
            _ => {}
        }
        self.sink.deliver(packet);
        Ok(())
    }
}

/// A request's buffer as the vector it was made from (ESP requests are always contiguous).
fn into_vec(b: Buffer) -> Vec<u8> {
    match b {
        Buffer::Contiguous(v) => v,
        other => other.to_vec(),
    }
}

/// Whether a policy rule is satisfied by a packet that came through `sa`.
fn rule_allows(r: &crate::control::Rule, sa: &Sa) -> bool {
    matches!(r.proto, Proto::Esp | Proto::EspUdp)
        && match r.tunnel {
            Some((src, dst)) => src == sa.id.src && dst == sa.id.dst,
            None => true,
        }
        && match r.level {
            Level::Unique(n) if n != 0 => sa.spec.reqid == n,
            _ => true,
        }
}

/// Fills in the UDP checksum of an IPv6 packet whose UDP header is at `udp_at` (RFC 8200
/// §8.1: mandatory over IPv6).
fn udp6_checksum(packet: &mut [u8], udp_at: usize) {
    let (Some(src), Some(dst)) = (packet.get(8..24), packet.get(24..40)) else { return };
    let (mut s, mut d) = ([0u8; 16], [0u8; 16]);
    s.copy_from_slice(src);
    d.copy_from_slice(dst);
    let pseudo = PseudoHeader::V6 { src: s.into(), dst: d.into() };
    if let Some(udp) = packet.get_mut(udp_at..) {
        let mut p = ipsec_wire::udp::Packet::new_unchecked(udp);
        p.set_checksum(0);
        p.fill_checksum(&pseudo);
    }
}

fn write_udp(b: &mut [u8], sport: u16, dport: u16, len: usize) {
    b[0..2].copy_from_slice(&sport.to_be_bytes());
    b[2..4].copy_from_slice(&dport.to_be_bytes());
    b[4..6].copy_from_slice(&(len as u16).to_be_bytes());
    // RFC 3948 §2.1: zero over IPv4. Over IPv6 it is required; the completion fills it in.
    b[6..8].copy_from_slice(&[0, 0]);
}

/// Transport mode: what of a packet stays in front of ESP.
#[derive(Clone, Copy)]
pub(crate) struct Split {
    /// Bytes of IP header (IPv4 with options; IPv6 with the headers before ESP's place).
    pub(crate) keep: usize,
    /// The protocol ESP's trailer will name.
    pub(crate) next: u8,
    /// The byte that named it, which will name ESP.
    pub(crate) field: usize,
}

pub(crate) fn transport_split(b: &[u8], s: &Summary) -> Option<Split> {
    if s.src.is_ipv4() {
        Some(Split { keep: s.offset, next: s.protocol.0, field: 9 })
    } else {
        let chain = ipsec_wire::ipv6::Packet::new_checked(b).ok()?.walk_extension_headers().ok()?;
        let p = chain.esp_insert;
        Some(Split { keep: p.offset, next: p.next_header.0, field: p.next_header_field })
    }
}

/// Transport mode: the original IP header, now in front of ESP, gets the new protocol and
/// length (IPv6: in the header just before ESP's place).
fn fix_transport_header(b: &mut [u8], sp: &Split, total: usize, proto: u8) {
    b[sp.field] = proto;
    if b[0] >> 4 == 4 {
        b[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        b[10..12].copy_from_slice(&[0, 0]);
        let sum = ipsec_wire::checksum::checksum(&b[..sp.keep]);
        b[10..12].copy_from_slice(&sum.to_be_bytes());
    } else {
        b[4..6].copy_from_slice(&((total - 40) as u16).to_be_bytes());
    }
}

/// Transport mode inbound: the header in front of the payload gets the protocol that ESP
/// carried and the new length.
fn restore_transport_header(b: &mut [u8], hdr: usize, total: usize, next: u8) -> Result<(), ()> {
    match b.first().map(|v| v >> 4) {
        Some(4) if hdr >= 20 => {
            b[9] = next;
            b[2..4].copy_from_slice(&(total as u16).to_be_bytes());
            b[10..12].copy_from_slice(&[0, 0]);
            let sum = ipsec_wire::checksum::checksum(&b[..hdr]);
            b[10..12].copy_from_slice(&sum.to_be_bytes());
            Ok(())
        }
        Some(6) if hdr >= 40 => {
            b[4..6].copy_from_slice(&((total - 40) as u16).to_be_bytes());
            // The header that named ESP: the fixed header when there are no extension
            // headers before ESP, else the last of them.
            let at = last_next_header_field(&b[..hdr]).ok_or(())?;
            b[at] = next;
            Ok(())
        }
        _ => Err(()),
    }
}

/// In an IPv6 header chain of exactly `chain.len()` bytes, the offset of the next-header
/// byte of its last header.
fn last_next_header_field(chain: &[u8]) -> Option<usize> {
    let (mut at, mut field) = (40, 6);
    while at < chain.len() {
        let len = (usize::from(*chain.get(at + 1)?) + 1) * 8;
        field = at;
        at += len;
    }
    (at == chain.len()).then_some(field)
}
