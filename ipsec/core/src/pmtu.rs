//! Path MTU for ESP and AH (RFC 4301 §8): each SA learns the MTU of the path its packets
//! take from the ICMP errors routers on that path send back, and an inner packet that no longer
//! fits once encapsulated is refused with an ICMP error to its sender, whose transport then
//! sends smaller packets (RFC 1191, RFC 8201 path MTU discovery through the tunnel).
//!
//! ```text
//!  learning:  ICMPv4 3/4 or ICMPv6 2 ─ wire::icmp parse (checksum) ─ quoted outer header ─┐
//!             (a router's, about our ESP    ESP: SPI · ESP in UDP: ports, SPI after them ─┤
//!              or AH)                       AH: SPI at its offset 4 ───────────────────────┤
//!                                          SA (SPI, dst; its src, encapsulation, ports) ──┤
//!             MTU below 576 / 1280, or not below the quoted packet: icmp_bogus_mtu ───────┤
//!             lower than the SA's path MTU (or none yet): learned, for PMTU_AGE ──────────┘
//!  acting:    output ─ SA ─ path MTU known? ─ no ────────────────────────────────► seal
//!                                └ outer length fits? ─ yes ─────────────────────► seal
//!                                     └ no ─ inner may be fragmented (IPv4 without DF,
//!                                            IPv6 ≤ 1280)? ─ yes ─ seal, outer fragmented
//!                                                            └ no ─ drop (too_big_for_path)
//!                                                                   + ICMP to the sender
//!                                                                     (rate-limited)
//! ```
//!
//! Two modules: this one holds what needs no SA database — an SA's `PathMtu` and its
//! aging, the core's coarse `Clock`, the ICMP error parsed to its quote, fragmenting, the
//! error to the sender, the rate limit — and `pmtu_path` the steps that find or read an SA
//! (`learn`, `check`, `inner_mtu`), so that the SA database can keep its SAs' path MTU
//! without importing the path that uses it.
//!
//! Choices, and why:
//! - **Which SA.** As Linux's `esp4_err`/`esp6_err` and `ah4_err`/`ah6_err` (RFC 4301
//!   §6.1.2: the SPI and the quoted addresses tie an ICMP error to its SA): the SPI in the
//!   quoted ESP header (or after the quoted UDP header for ESP in UDP; in AH, after its
//!   next header, length and reserved fields: offset 4, still within the 8 bytes an RFC
//!   792 router quotes) and the quoted destination find the SA; its source, protocol,
//!   encapsulation and (UDP) ports must be the quote's too. An ICMP error quoting ESP or AH
//!   that no SA of ours sent is counted (`icmp_no_sa`); one quoting UDP that is not ESP in
//!   UDP of one of our SAs belongs to another application of the host and is left alone
//!   (the kernel handles it), as is every other ICMP message. (The quoted IPv6 header
//!   must name ESP, UDP or AH itself: ours have no extension headers in front of them in
//!   tunnel mode.)
//! - **Trust.** ICMP errors are not authenticated (RFC 4301 §6.1.1): a forged one can at
//!   worst lower an SA's path MTU to the protocol minimum (576 for IPv4, RFC 1122 §3.3.3
//!   and RFC 4459 §3.3; 1280 for IPv6, RFC 8201 §4) for [`PMTU_AGE`]. So values below the
//!   minimum (and an RFC 792 router's 0) and values the quoted packet would have fitted are
//!   refused and counted (`icmp_bogus_mtu`); an ICMP error never raises a path MTU.
//! - **Aging.** A learned MTU is forgotten [`PMTU_AGE`] (10 minutes, RFC 1191 §6.3's
//!   suggestion and Linux's `mtu_expires`) after it was last lowered, so the SA tries the
//!   full size again (RFC 4301 §8.2.2). The age runs on the core's coarse clock, which
//!   [`crate::Ipsec::tick`] moves: the packet path reads one atomic, never the time.
//! - **The overhead** is the SA's own: outer IP header (tunnel mode; in transport mode the
//!   packet's header stays), UDP for ESP in UDP, ESP header, IV, padding to the cipher's
//!   block with the 2-byte trailer, ICV (`inner_mtu`). Linux sizes an XFRM bundle's MTU
//!   the same way (`xfrm_state_mtu`).
//! - **Inner packets that may be fragmented** (IPv4 without DF; IPv6 of at most 1280 bytes,
//!   which every IPv6 link — the tunnel included — must carry, RFC 8200 §5 and RFC 2473
//!   §7.1) are not refused: in tunnel mode the gateway fragments the outer packet to the
//!   path MTU itself (`fragment`, as Linux's XFRM does), the outer IPv4 header without DF
//!   (RFC 4301 §8.1's "copy" of the inner DF; every other outer packet has DF). A router
//!   may not fragment IPv6, and the IP_HDRINCL socket never fragments. In transport mode
//!   (the gateway's own traffic, whose stack does its own path MTU discovery) such a packet
//!   goes out as it is.
//! - **The error's source** is the inner packet's destination. It is sure to be routed
//!   back through the tunnel on the sender's side (that is why the packet came into the
//!   TUN), and it is never one of the gateway's own addresses, which the gateway's own
//!   stack would take for a martian when it arrived from the TUN. Linux's `icmp_send` uses
//!   an address of the forwarding host; ipsecd's TUN has none. Senders (Linux TCP, any
//!   RFC 1191 host) act on a frag-needed or Packet Too Big whatever its source, once the
//!   quoted packet matches one of their connections.
//! - **Rate.** At most [`ICMP_PER_SECOND`] errors a second with a burst of as many
//!   (`RateLimit`, one token bucket per core; RFC 4443 §2.4(f) asks for a limit, Linux's
//!   `icmp_msgs_per_sec` is 1000 per host): one error per flow is enough for TCP to lower
//!   its segment size; what is over is counted (`icmp_rate_limited`).

use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use ipsec_wire::{icmp, ipv4, ipv6, ipv6_ext, IpProtocol, PseudoHeader, Summary};

use crate::packet::{emit_ip, Fresh, Packet, HEADROOM};

/// The smallest path MTU an ICMP error may report for an IPv4 path: what every IPv4 host
/// must accept (RFC 1122 §3.3.3). Linux takes 552 (`min_pmtu`).
pub const MIN_PMTU_V4: u32 = 576;
/// For an IPv6 path: IPv6's minimum link MTU (RFC 8200 §5; RFC 8201 §4 discards less).
pub const MIN_PMTU_V6: u32 = 1280;
/// ICMP errors to inner senders per second (and the burst).
pub const ICMP_PER_SECOND: u32 = 100;

/// How long a learned path MTU holds after it was last lowered (RFC 1191 §6.3: "the
/// timeout … should be set to a value of 10 minutes").
pub const PMTU_AGE: Duration = Duration::from_secs(600);
/// An SA's path MTU (the SA keeps one, `Sa::path_mtu`): unknown (0) until an ICMP error
/// says, then that until `until` on the core's clock.
#[derive(Default)]
pub(crate) struct PathMtu {
    mtu: AtomicU32,
    until: AtomicU64,
}

impl PathMtu {
    /// Whether a path MTU was ever learned (one relaxed load: the packet path's test while
    /// none is).
    #[inline]
    pub(crate) fn ever_learned(&self) -> bool {
        self.mtu.load(Ordering::Relaxed) != 0
    }

    /// The path MTU at time `now`, if one was learned and has not aged out.
    #[inline]
    pub(crate) fn get(&self, now: u64) -> Option<u32> {
        match self.mtu.load(Ordering::Relaxed) {
            0 => None,
            m if now < self.until.load(Ordering::Relaxed) => Some(m),
            _ => None,
        }
    }

    /// Learns `mtu` at time `now` if it is below the path MTU known (or none is): true if
    /// it was. (Two errors at once may race; the lower one may lose, and the next error
    /// about a packet still too big brings it again.)
    pub(crate) fn lower(&self, mtu: u32, now: u64) -> bool {
        if self.get(now).is_some_and(|m| mtu >= m) {
            return false;
        }
        self.until.store(now + PMTU_AGE.as_secs(), Ordering::Relaxed);
        self.mtu.store(mtu, Ordering::Relaxed);
        true
    }
}

/// The core's coarse clock: seconds since the core started, moved by `tick`.
pub(crate) struct Clock {
    base: Instant,
    secs: AtomicU64,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock { base: Instant::now(), secs: AtomicU64::new(0) }
    }

    /// Sets the clock to `now` (never backwards).
    pub(crate) fn set(&self, now: Instant) {
        self.secs.fetch_max(now.saturating_duration_since(self.base).as_secs(), Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.secs.load(Ordering::Relaxed)
    }
}

/// How an ICMP error reached the gateway, which decides what of it is checked here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcmpFrom {
    /// An ICMPv4 message (the IPv4 payload): its checksum is verified here.
    V4,
    /// An ICMPv6 message with the addresses it came with (checksum verified here), or
    /// `None` where the reader's kernel verified it (a raw ICMPv6 socket always does).
    V6(Option<PseudoHeader>),
}

/// What an ICMP error did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learned {
    /// Not a path MTU error about an ESP or AH packet of ours (another ICMP message, or one
    /// about another application's UDP): none of the core's business.
    NotOurs,
    /// About one of our SAs, but its path MTU is already as low or lower.
    Unchanged,
    /// The SA's path MTU is now this.
    Lowered(u32),
}

/// The outer header of one of our ESP or AH packets as an ICMP error quotes it.
pub(crate) struct Quote<'a> {
    pub(crate) v6: bool,
    pub(crate) src: IpAddr,
    pub(crate) dst: IpAddr,
    /// The packet's length as its header gives it (the quote itself is shorter).
    pub(crate) total_len: usize,
    /// What follows the IP header.
    pub(crate) kind: Quoted,
    pub(crate) rest: &'a [u8],
}

/// What a quoted packet carries behind its IP header.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quoted {
    Esp,
    /// UDP (ESP in UDP behind it, or another application's datagram).
    Udp,
    Ah,
    /// Anything else: not ours.
    Other,
}

impl Quoted {
    fn of(next: IpProtocol) -> Quoted {
        match next {
            IpProtocol::ESP => Quoted::Esp,
            IpProtocol::UDP => Quoted::Udp,
            IpProtocol::AH => Quoted::Ah,
            _ => Quoted::Other,
        }
    }

    /// Where the SPI is in what follows the IP header.
    pub(crate) fn spi_at(self) -> usize {
        match self {
            Quoted::Udp => 8,
            Quoted::Ah => 4,
            Quoted::Esp | Quoted::Other => 0,
        }
    }
}

impl<'a> Quote<'a> {
    /// `None` if the quote is too short for its IP header, or is no IP header.
    pub(crate) fn parse(q: &'a [u8]) -> Option<Quote<'a>> {
        match q.first()? >> 4 {
            4 if q.len() >= 20 => {
                let h = ipv4::Packet::new_unchecked(q);
                let hl = h.header_len();
                if hl < 20 || q.len() < hl {
                    return None;
                }
                let (src, dst) = (h.src_addr().into(), h.dst_addr().into());
                let (next, total_len) = (h.protocol(), usize::from(h.total_len()));
                Some(Quote::of(false, src, dst, next, total_len, &q[hl..]))
            }
            6 if q.len() >= 40 => {
                let h = ipv6::Packet::new_unchecked(q);
                let (src, dst) = (h.src_addr().into(), h.dst_addr().into());
                let total_len = 40 + usize::from(h.payload_len());
                Some(Quote::of(true, src, dst, h.next_header(), total_len, &q[40..]))
            }
            _ => None,
        }
    }

    /// A quote of a packet of protocol `next`; one that is not ESP, UDP or AH keeps no
    /// length (it cannot be ours).
    fn of(
        v6: bool,
        src: IpAddr,
        dst: IpAddr,
        next: IpProtocol,
        total_len: usize,
        rest: &'a [u8],
    ) -> Quote<'a> {
        let kind = Quoted::of(next);
        let total_len = if kind == Quoted::Other { 0 } else { total_len };
        Quote { v6, src, dst, total_len, kind, rest }
    }
}

/// What becomes of an outbound packet on an SA whose path MTU is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Its ESP packet fits the path (or no path MTU is known).
    Fits,
    /// It does not fit, but may be fragmented: sent in fragments ([`fragment`]; tunnel
    /// mode), the outer IPv4 header without DF.
    Fragmentable,
    /// It does not fit and may not be fragmented: the largest inner packet that fits.
    TooBig(u32),
}

/// A token bucket of [`ICMP_PER_SECOND`] tokens a second, as many at most.
pub(crate) struct RateLimit {
    state: Mutex<(Instant, f64)>,
}

impl RateLimit {
    pub(crate) fn new() -> RateLimit {
        RateLimit { state: Mutex::new((Instant::now(), f64::from(ICMP_PER_SECOND))) }
    }

    /// Takes a token at time `now`, if there is one. (A lock, but only on the path of a
    /// packet already refused.)
    pub(crate) fn allow(&self, now: Instant) -> bool {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let per_sec = f64::from(ICMP_PER_SECOND);
        let (last, tokens) = *s;
        let tokens = (tokens + now.saturating_duration_since(last).as_secs_f64() * per_sec).min(per_sec);
        let (allowed, left) = if tokens >= 1.0 { (true, tokens - 1.0) } else { (false, tokens) };
        *s = (now.max(last), left);
        allowed
    }
}

/// A tunnel-mode ESP packet (`outer`: the outer IPv4 header without options, or the
/// IPv6 fixed header alone, as `ipip` builds them) cut into fragments of at most `mtu`
/// bytes, for an inner packet that may be fragmented but no longer fits the path whole
/// ([`Verdict::Fragmentable`]): the fragments are the gateway's, as in Linux's
/// `__xfrm6_output`, because a router may not fragment IPv6 (RFC 8200 §5; RFC 2473 §7.1
/// has the tunnel entry point do it) and the IP_HDRINCL socket the gateway sends through
/// never fragments (EMSGSIZE over its link's MTU). IPv4 fragments keep the outer header's
/// Identification (the SA's sequence number's low bits); IPv6 fragments get [`ident6`]'s.
/// `None` if `outer` is not such a packet or `mtu` leaves no room for 8 bytes of payload.
pub(crate) fn fragment(outer: &[u8], mtu: usize) -> Option<Vec<Packet>> {
    let (hl, v6) = match outer.first()? >> 4 {
        4 if outer.len() >= 20 && outer[0] == 0x45 => (20, false),
        6 if outer.len() >= 48 => (40, true),
        _ => return None,
    };
    let frag_hl = if v6 { hl + ipv6_ext::FragmentHeader::LEN } else { hl };
    let chunk = mtu.checked_sub(frag_hl)? & !7;
    if chunk == 0 {
        return None;
    }
    let (header, payload) = outer.split_at(hl);
    // The SPI and sequence number (ESP's, behind UDP for ESP in UDP; AH's after its first
    // four bytes): the IPv6 fragments' identity.
    let next = if v6 { ipv6::Packet::new_unchecked(header).next_header() } else { IpProtocol::ESP };
    let spi_at = match next {
        IpProtocol::UDP => 8,
        IpProtocol::AH => 4,
        _ => 0,
    };
    let be32 =
        |at: usize| payload.get(at..at + 4).map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]));
    let ident = if v6 { ident6(&header[8..40], be32(spi_at), be32(spi_at + 4)) } else { 0 };
    let mut out = Vec::with_capacity(payload.len().div_ceil(chunk));
    for (i, piece) in payload.chunks(chunk).enumerate() {
        let (offset, more) = ((i * chunk) as u16, (i + 1) * chunk < payload.len());
        let mut b = Vec::with_capacity(frag_hl + piece.len());
        b.extend_from_slice(header);
        if v6 {
            b.extend_from_slice(&[0; ipv6_ext::FragmentHeader::LEN]);
            let mut h = ipv6::Packet::new_unchecked(&mut b[..]);
            h.set_payload_len((ipv6_ext::FragmentHeader::LEN + piece.len()) as u16);
            h.set_next_header(IpProtocol::FRAGMENT);
            let mut f = ipv6_ext::FragmentHeader::new_unchecked(&mut b[hl..]);
            f.set_next_header(next);
            f.set_frag_offset_and_more(offset, more);
            f.set_ident(ident);
            b.extend_from_slice(piece);
        } else {
            b.extend_from_slice(piece);
            let mut h = ipv4::Packet::new_unchecked(&mut b[..]);
            h.set_total_len((hl + piece.len()) as u16);
            h.set_dont_frag(false);
            h.set_more_frags(more);
            h.set_frag_offset(offset);
            h.fill_checksum();
        }
        out.push(Packet { data: b, head: 0 });
    }
    Some(out)
}

/// The Identification of the IPv6 fragments of the packet with `spi` and sequence number
/// `seq` between `addrs` (source and destination, 32 bytes): unique and unpredictable, as
/// RFC 7739 asks (§5.3's algorithm, a hash-based offset added to a counter). The counter is
/// the sequence number's low 32 bits, unique among the SA's last 2^32 packets; the offset
/// is a keyed hash of the addresses and SPI (SipHash-1-3 under a key drawn from the OS's
/// random source once per process: std's `RandomState`), so an off-path host can neither
/// predict an ID (to spoil reassembly with forged fragments, or count the SA's packets by
/// probing) nor learn one SA's IDs from another's. (They were the sequence number itself,
/// and for AH its SPI: the same ID on every packet of the SA.)
fn ident6(addrs: &[u8], spi: u32, seq: u32) -> u32 {
    use std::hash::{BuildHasher, RandomState};
    static KEY: std::sync::OnceLock<RandomState> = std::sync::OnceLock::new();
    let offset = KEY.get_or_init(RandomState::new).hash_one((addrs, spi));
    seq.wrapping_add(offset as u32)
}

/// The ICMP error that tells the sender of `inner` (parsed as `s`) that at most `mtu`
/// bytes get through: "fragmentation needed" with that Next-Hop MTU for IPv4, Packet Too
/// Big for IPv6, from the inner destination, quoting as much of the packet as RFC 1812 and
/// RFC 4443 allow. `None` where no error may be sent (RFC 1122 §3.2.2, RFC 4443 §2.4(e)):
/// about an ICMP error, a fragment other than the first, or a packet whose source names no
/// single host.
pub(crate) fn error_to_sender(inner: &[u8], s: &Summary, mtu: u32) -> Option<Packet> {
    let v6 = s.src.is_ipv6();
    let upper = inner.get(s.offset).copied();
    let about_error = match (v6, s.protocol) {
        (false, IpProtocol::ICMP) => upper.is_none_or(|t| matches!(t, 3 | 4 | 5 | 11 | 12)),
        (true, IpProtocol::ICMPV6) => upper.is_none_or(|t| t < 128),
        _ => false,
    };
    let later_fragment = !v6 && ipv4::Packet::new_unchecked(inner).frag_offset() != 0;
    let no_host = match s.src {
        IpAddr::V4(a) => a.is_unspecified() || a.is_multicast() || a.is_broadcast() || a.is_loopback(),
        IpAddr::V6(a) => a.is_unspecified() || a.is_multicast() || a.is_loopback(),
    };
    if about_error || later_fragment || no_host {
        return None;
    }
    let quoted = &inner[..icmp::quote_len(s.ip_len.min(inner.len()), v6)];
    let (ip, repr) = if v6 {
        (40, icmp::Repr::PacketTooBig { mtu, quoted })
    } else {
        (20, icmp::Repr::FragNeeded { mtu: mtu.min(0xffff) as u16, quoted })
    };
    let len = ip + repr.buffer_len();
    let mut data = vec![0u8; HEADROOM + len];
    let b = &mut data[HEADROOM..];
    // From the inner packet's destination, back to its source.
    let pseudo = match (s.dst, s.src) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => PseudoHeader::V4 { src, dst },
        (IpAddr::V6(src), IpAddr::V6(dst)) => PseudoHeader::V6 { src, dst },
        _ => return None,
    };
    let proto = if v6 { IpProtocol::ICMPV6 } else { IpProtocol::ICMP };
    emit_ip(b, s.dst, s.src, Fresh { proto, tos: 0, ident: 0, dont_frag: false }).ok()?;
    repr.emit(&mut icmp::Packet::new_unchecked(&mut b[ip..]), &pseudo).ok()?;
    Some(Packet { data, head: HEADROOM })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_mtu_only_goes_down_and_ages_out_after_pmtu_age() {
        let p = PathMtu::default();
        assert_eq!(p.get(0), None);
        assert!(p.lower(1400, 10));
        assert!(!p.lower(1400, 11) && !p.lower(1500, 11), "never raised, not refreshed by the same");
        assert!(p.lower(1300, 20));
        let age = PMTU_AGE.as_secs();
        assert_eq!(p.get(20 + age - 1), Some(1300));
        assert_eq!(p.get(20 + age), None, "aged out {age} s after it was last lowered");
        // Once aged out, any value is learned again.
        assert!(p.lower(1450, 20 + age));
        assert_eq!(p.get(20 + age), Some(1450));
    }

    #[test]
    fn the_rate_limit_allows_a_burst_then_the_rate() {
        let r = RateLimit::new();
        let t0 = Instant::now();
        let n = ICMP_PER_SECOND as usize;
        assert_eq!((0..n + 10).filter(|_| r.allow(t0)).count(), n, "the burst");
        // A tenth of a second later, a tenth of the rate; a clock that goes back gives none.
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!((0..n).filter(|_| r.allow(t1)).count(), n / 10);
        assert!(!r.allow(t0));
        // After a long quiet, no more than the burst.
        let t2 = t1 + Duration::from_secs(60);
        assert_eq!((0..2 * n).filter(|_| r.allow(t2)).count(), n);
    }

    /// Puts fragments back together: (the header with the whole length, the payload).
    fn reassemble(frags: &[Packet], v6: bool) -> Vec<u8> {
        let mut payload = Vec::new();
        for (i, f) in frags.iter().enumerate() {
            let b = f.bytes();
            let (off, more, body) = if v6 {
                let h = ipv6_ext::FragmentHeader::new_checked(&b[40..48]).unwrap();
                assert_eq!(ipv6::Packet::new_unchecked(b).payload_len() as usize, b.len() - 40);
                (h.frag_offset() as usize, h.more_frags(), &b[48..])
            } else {
                let h = ipv4::Packet::new_checked(b).unwrap();
                assert!(h.verify_checksum() && !h.dont_frag());
                (h.frag_offset() as usize, h.more_frags(), &b[20..])
            };
            assert_eq!(off, payload.len(), "fragment {i}");
            assert_eq!(more, i + 1 < frags.len());
            payload.extend_from_slice(body);
        }
        payload
    }

    #[test]
    fn fragments_fit_the_mtu_and_put_back_together_give_the_packet() {
        for v6 in [false, true] {
            for (len, mtu) in [(1400, 1300), (1500, 1280), (3000, 1000), (100, 1300)] {
                let (hl, mut p) = if v6 {
                    (40, vec![0x60, 0, 0, 0, 0, 0, 50, 64])
                } else {
                    (20, vec![0x45, 0, 0, 0, 0, 7, 0x40, 0, 64, 50, 0, 0])
                };
                p.resize(hl, 9);
                p.extend((0..len - hl).map(|i| i as u8));
                let frags = fragment(&p, mtu).unwrap();
                assert!(frags.iter().all(|f| f.bytes().len() <= mtu), "v6 {v6} {len}/{mtu}");
                assert_eq!(frags.len(), (len - hl).div_ceil((mtu - hl - if v6 { 8 } else { 0 }) & !7));
                assert_eq!(reassemble(&frags, v6), &p[hl..], "v6 {v6} {len}/{mtu}");
                if v6 {
                    let f = ipv6_ext::FragmentHeader::new_unchecked(&frags[0].bytes()[40..48]);
                    assert_eq!(f.next_header(), IpProtocol::ESP);
                    assert!(frags.iter().all(|g| ident_of(g) == f.ident()), "one ID per packet");
                }
            }
        }
        assert!(fragment(&[0x45; 10], 1300).is_none());
        assert!(fragment(&[0x60; 100], 47).is_none());
    }

    /// The Identification of an IPv6 fragment.
    fn ident_of(f: &Packet) -> u32 {
        ipv6_ext::FragmentHeader::new_unchecked(&f.bytes()[40..48]).ident()
    }

    /// An IPv6 packet from `src` carrying `next` (ESP, UDP then ESP, or AH) with `spi` and
    /// sequence number `seq`, 2000 bytes long.
    fn v6_packet(src: u8, next: IpProtocol, spi: u32, seq: u32) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 0, next.0, 64];
        p.extend([0x20, 0x01, 0x0d, 0xb8].iter().chain(&[0; 11]).chain(&[src]));
        p.extend([0x20, 0x01, 0x0d, 0xb8].iter().chain(&[0; 11]).chain(&[2]));
        match next {
            IpProtocol::UDP => p.extend([0x11, 0x94, 0x11, 0x94, 0, 0, 0, 0]),
            IpProtocol::AH => p.extend([50, 4, 0, 0]),
            _ => {}
        }
        p.extend(spi.to_be_bytes());
        p.extend(seq.to_be_bytes());
        p.resize(2000, 0xab);
        p
    }

    /// RFC 7739: IPv6 fragment IDs neither the sequence number (which an off-path host can
    /// guess by counting from 1) nor the same across SAs, SPIs or address pairs; unique
    /// among one SA's packets (consecutive sequence numbers, consecutive IDs); AH's from its
    /// sequence number (its fragments all had the SPI as their ID).
    #[test]
    fn ipv6_fragment_ids_are_unique_per_sa_and_unpredictable() {
        let id = |src, next, spi, seq| ident_of(&fragment(&v6_packet(src, next, spi, seq), 1280).unwrap()[0]);
        for next in [IpProtocol::ESP, IpProtocol::UDP, IpProtocol::AH] {
            let ids: Vec<u32> = (1..=100).map(|seq| id(1, next, 0x1001, seq)).collect();
            assert!(ids.windows(2).all(|w| w[1] == w[0].wrapping_add(1)), "{next:?}: {:x?}", &ids[..4]);
            // A chance of 2^-32 each that a keyed hash gives an offset of 0, or two equal.
            assert_ne!(ids[0], 1, "{next:?}: the ID is the sequence number");
            assert_ne!(id(1, next, 0x1002, 1), ids[0], "{next:?}: another SPI, the same IDs");
            assert_ne!(id(3, next, 0x1001, 1), ids[0], "{next:?}: another source, the same IDs");
        }
    }

    #[test]
    fn the_clock_never_goes_back() {
        let c = Clock::new();
        c.set(c.base + Duration::from_secs(5));
        c.set(c.base);
        assert_eq!(c.now(), 5);
    }
}
