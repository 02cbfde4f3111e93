//! Outbound: policy lookup and ESP encapsulation (AH's: `crate::ah_path`, from `seal`;
//! IPComp's: `crate::ipcomp_path`, before the SA lookup).
//!
//! ```text
//! packet ─ parse ─ SPD out ─┬─ bypass ─────────────────────────────────────────► results.transmit
//!                           ├─ discard ─► drop (policy)
//!                           ├─ protect with ipcomp ─► ipcomp_path (IP-in-IP, compressed)
//!                           ├─ protect with several rules ─► bundle (each SA in turn)
//!                           └─ protect ─ no SA: held, ACQUIRE (crate::acquire)
//!                                      ─ SA ─ fits the path MTU? (pmtu) no: drop, ICMP to the sender ─► results.deliver
//!                                         ─ seq ─ tunnel: room for the outer header (ipip)
//!                                                   transport: the header stays in front
//!                              ─ ESP laid out around the payload ─ outer headers emitted
//!                              ─ batch (ocf) ─ output_done: IPv6 UDP checksum ─► results.transmit
//! ```
//!
//! Every header is written through ipsec-wire: the outer IPv4/IPv6 header by its `Repr`,
//! once, with its final protocol and length (both are known before the crypto: ESP's
//! padding depends only on the payload's length), the UDP header of ESP in UDP by its
//! `Repr`, and transport mode's kept header through the packet's setters.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use ipsec_wire::{ipv4, ipv6, udp, IpProtocol, PseudoHeader, Summary};
use ocf::{Flags, Outcome};

use crate::control::{Action, Dir, Level, Mode, Proto};
use crate::esp::{self, ESP_HEADER_LEN};
use crate::ipip;
use crate::packet::{emit_ip, Fresh, Packet, TAILROOM};
use crate::path::{flow, into_vec, parse_trusted, Batch, Results, SaRef, Shared, Tally, Way};
use crate::sad::{Event, Sa};
use crate::stats::{Counters, Drop};
use crate::transform::Transform;
use crate::transport::{fix_transport_header, transport_split, Split};
use crate::{pmtu, pmtu_path};

const PROTO_UDP: u8 = 17;
const PROTO_ESP: u8 = 50;

/// What of a packet stays in front of ESP.
#[derive(Clone, Copy)]
enum Front {
    /// Tunnel mode: the outer header to be written (`len` bytes), the inner packet's DSCP
    /// and ECN byte to copy into it, and the next header ESP's trailer names (4 or 41).
    Tunnel { len: usize, tos: u8, next: u8 },
    /// Transport mode: the packet's own header.
    Transport(Split),
}

impl Front {
    fn keep(self) -> usize {
        match self {
            Front::Tunnel { len, .. } => len,
            Front::Transport(s) => s.keep,
        }
    }

    fn next(self) -> u8 {
        match self {
            Front::Tunnel { next, .. } => next,
            Front::Transport(s) => s.next,
        }
    }
}

impl Shared {
    /// One packet leaving the protected side: to the batch's results at once (bypass), to
    /// ocf (protect), or dropped.
    pub(crate) fn output(&self, packet: Packet, b: &mut Batch<'_>) -> Result<(), Drop> {
        let parsed = parse_trusted(packet.bytes());
        let Ok(s) = &parsed else {
            return Err(self.drop(None, Drop::Malformed));
        };
        let f = flow(s, packet.bytes());
        // The policy's decision and the SA are looked at in place, not taken (see
        // `Spd::lookup_with`, `Sad::outbound_with`).
        // A bundle (several rules) goes to crate::bundle: `None` in the rule's place.
        let decision = self.db.spd.lookup_with(Dir::Out, &f, |policy| match &policy.spec.action {
            Action::Bypass => Ok(None),
            Action::Discard => Err(Drop::Policy),
            Action::Protect(rules) if rules.len() > 1 => Ok(Some(None)),
            Action::Protect(rules) => rules.first().copied().map(|r| Some(Some(r))).ok_or(Drop::Policy),
        });
        let rule = match decision {
            None if self.discard_unmatched.load(Ordering::Relaxed) => {
                return Err(self.drop(None, Drop::NoPolicy));
            }
            None | Some(Ok(None)) => {
                b.transmit(packet);
                return Ok(());
            }
            Some(Err(why)) => return Err(self.drop(None, why)),
            Some(Ok(Some(None))) => return self.bundle_output(packet, s, &f, b),
            Some(Ok(Some(Some(rule)))) => rule,
        };
        if rule.proto == Proto::IpComp {
            return self.ipcomp_output(packet, s, &f, rule, b);
        }
        let (src, dst) = rule.tunnel.unwrap_or((s.src, s.dst));
        let reqid = if let Level::Unique(n) = rule.level { n } else { 0 };
        self.db.sad.outbound_with(src, dst, rule.proto, rule.mode, reqid, |sa| {
            let Some(sa) = sa else {
                if rule.level == Level::Use {
                    b.transmit(packet);
                    return Ok(());
                }
                return self.acquire(packet, &f, rule, (src, dst));
            };
            let tunnel =
                rule.mode == Mode::Tunnel || (rule.mode == Mode::Any && sa.spec.mode == Mode::Tunnel);
            if !tunnel && s.is_fragment {
                return Err(self.drop(Some(sa), Drop::Fragment));
            }
            // Does it fit the path (crate::pmtu)? One atomic load while no path MTU is known.
            let keep = || if tunnel { 0 } else { transport_split(packet.bytes(), s).map_or(0, |sp| sp.keep) };
            let fragmentable = match pmtu_path::check(sa, packet.bytes(), s, keep, &self.clock) {
                pmtu::Verdict::Fits => false,
                pmtu::Verdict::Fragmentable => true,
                pmtu::Verdict::TooBig(mtu) => return Err(self.too_big_for_path(b, sa, &packet, s, mtu)),
            };
            self.seal(b, sa, packet, s, tunnel, fragmentable)
        })
    }

    /// A packet too big for its SA's path (`mtu`: the largest inner packet that fits):
    /// dropped, and its sender told, within the rate limit ([`crate::pmtu`]). The error goes
    /// to the protected side with the batch's results.
    fn too_big_for_path(&self, b: &mut Batch<'_>, sa: &Sa, packet: &Packet, s: &Summary, mtu: u32) -> Drop {
        if let Some(icmp) = pmtu::error_to_sender(packet.bytes(), s, mtu) {
            if self.icmp_limit.allow(Instant::now()) {
                Counters::count(&self.counters.icmp_sent);
                b.deliver(icmp);
            } else {
                Counters::count(&self.counters.icmp_rate_limited);
            }
        }
        self.drop(Some(sa), Drop::PathMtu)
    }

    /// `fragmentable`: the packet exceeds the path MTU but may be fragmented, so in tunnel
    /// mode the outer IPv4 header goes without DF and the completion cuts the ESP packet
    /// into fragments ([`crate::pmtu::fragment`]).
    fn seal(
        &self,
        b: &mut Batch<'_>,
        sa: &Arc<Sa>,
        packet: Packet,
        s: &Summary,
        tunnel: bool,
        fragmentable: bool,
    ) -> Result<(), Drop> {
        let (req, len) = self.seal_request(sa, packet, s, tunnel, fragmentable)?;
        self.count(b.tally.as_mut(), sa, Way::Out, len);
        self.submit(b, SaRef::Lent(sa), req, Way::Out, finish_output);
        Ok(())
    }

    /// The ESP or AH request that protects `packet` with `sa`, ready for ocf, and the
    /// payload length the SA is charged; the packet's sequence number taken. (A bundle's
    /// stages, `crate::bundle`, submit it themselves.)
    #[inline(always)]
    pub(crate) fn seal_request(
        &self,
        sa: &Arc<Sa>,
        packet: Packet,
        s: &Summary,
        tunnel: bool,
        fragmentable: bool,
    ) -> Result<(ocf::Request, usize), Drop> {
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
        let t = match &sa.transform {
            Transform::Esp(t) => t,
            Transform::Ah(t) => return self.seal_ah(sa, t, packet, s, tunnel, fragmentable, seq),
            // IPComp SAs sit in tables of their own (crate::ipcomp_path): never found here.
            Transform::IpComp => return Err(self.drop(Some(sa), Drop::WrongProtocol)),
        };
        let natt = sa.spec.natt;
        let v6_out = sa.id.dst.is_ipv6();
        let udp = if natt.is_some() { udp::HEADER_LEN } else { 0 };
        let esp_len = ESP_HEADER_LEN + t.iv_len;
        let Packet { mut data, mut head } = packet;
        data.truncate(head + s.ip_len);
        let front = if tunnel {
            // Tunnel mode is two steps, as in Fast IPsec: IP-in-IP gives the inner packet an
            // outer header; ESP then protects that packet as in transport mode. The outer
            // header is written below, once every length is known.
            let len = if v6_out { ipv6::HEADER_LEN } else { ipv4::MIN_HEADER_LEN };
            let (p, tos, next) = ipip::encapsulate(Packet { data, head }, len, udp + esp_len);
            (data, head) = (p.data, p.head);
            Front::Tunnel { len, tos, next }
        } else {
            Front::Transport(
                transport_split(&data[head..], s).ok_or_else(|| self.drop(Some(sa), Drop::Malformed))?,
            )
        };
        let keep = front.keep();
        let len = data.len() - head - keep;
        let total = keep + udp + esp_len + t.padded_len(len) + t.icv_len;
        if total - if v6_out { ipv6::HEADER_LEN } else { 0 } > 0xffff {
            return Err(self.drop(Some(sa), Drop::TooBig));
        }
        // The payload must end up right after the ESP header and IV.
        let (mut buf, base) = room_in_front(data, head, keep, udp + esp_len);
        let esp_at = base + keep + udp;
        // CBC: an unpredictable IV from ocf's random operation (AEAD: the sequence number).
        let mut iv = [0u8; ocf::MAX_IV_LEN];
        let iv = if t.enc.is_aead() || t.iv_len == 0 {
            None
        } else {
            let iv = &mut iv[..t.iv_len];
            if self.ivs.fill(iv).is_err() {
                return Err(self.drop(Some(sa), Drop::NoRandom));
            }
            Some(&*iv)
        };
        let mut req =
            t.seal(std::mem::take(&mut buf), esp_at, len, front.next(), sa.id.spi, seq, sa.spec.esn, iv);
        // Outer headers, now that the packet has its whole length (the ICV is written in
        // place later).
        if let Some(bytes) = req.buf.as_contiguous_mut() {
            let packet = &mut bytes[base..base + total];
            let proto = IpProtocol(if natt.is_some() { PROTO_UDP } else { PROTO_ESP });
            match front {
                Front::Tunnel { tos, .. } => emit_outer(packet, sa, proto, tos, seq as u16, !fragmentable),
                Front::Transport(split) => fix_transport_header(packet, &split, proto),
            }
            if let (Some(n), Some(dport)) = (natt, sa.send_port()) {
                // To the port the peer was last heard from (it may have moved behind a NAT).
                // RFC 3948 §2.1: checksum zero over IPv4; over IPv6 it is required, and
                // output_done fills it in once the ICV is there.
                let repr = udp::Repr { src_port: n.sport, dst_port: dport, payload_len: total - keep - udp };
                let _ = repr.emit(&mut udp::Packet::new_unchecked(&mut packet[keep..]), None);
            }
        }
        // The completion needs where the packet starts and, for UDP over IPv6, where the UDP
        // header is.
        let udp_at = if natt.is_some() && v6_out { keep } else { 0 };
        // And, for a tunnel-mode packet over the path MTU that may be fragmented, that MTU:
        // the completion cuts it into fragments (crate::pmtu::fragment).
        let frag_mtu = match fragmentable && tunnel {
            true => sa.path_mtu.get(self.clock.now()).map_or(0, |m| m.min(0xffff)),
            false => 0,
        };
        req.user = base as u64 | (udp_at as u64) << 32 | u64::from(frag_mtu) << 48;
        req.flags = Flags::CALLBACK_IMMEDIATE;
        Ok((req, len))
    }

    /// An outbound request's outcome: the ESP packet (or its fragments) to `emit`, or a
    /// drop.
    pub(crate) fn output_done(
        &self,
        sa: &Sa,
        outcome: Outcome,
        emit: &mut dyn FnMut(Packet),
    ) -> Result<(), Drop> {
        if let Transform::Ah(t) = &sa.transform {
            return self.ah_output_done(sa, t, outcome, emit);
        }
        let mut req = outcome.map_err(|_| self.drop(Some(sa), Drop::CryptoError))?;
        let (head, udp_at) = (req.user as u32 as usize, (req.user >> 32) as u16 as usize);
        let frag_mtu = (req.user >> 48) as usize;
        let mut data = into_vec(req.buf.take());
        esp::recycle(req);
        if udp_at != 0 {
            udp6_checksum(&mut data[head..], udp_at);
        }
        if frag_mtu != 0 {
            if let Some(fragments) = pmtu::fragment(&data[head..], frag_mtu) {
                fragments.into_iter().for_each(emit);
                return Ok(());
            }
        }
        emit(Packet { data, head });
        Ok(())
    }
}

/// The outbound continuation (ESP's and AH's: `output_done` tells them apart): a
/// synchronous driver's outcome into the batch's results.
pub(crate) fn finish_output(
    s: &Shared,
    sa: &Arc<Sa>,
    outcome: Outcome,
    out: &mut Results,
    _: Option<&mut Tally>,
) -> Result<(), Drop> {
    s.output_done(sa, outcome, &mut |p| out.transmit.push(p))
}

/// Tunnel mode's outer header from the SA's source to its destination, carrying `proto`,
/// over the whole `packet`: IPv4 with DF set (so `id` only has to vary, RFC 6864 §4.1: the
/// low bits of the SA's sequence number, where a shared counter would be an atomic every
/// core's packets contend for) and TTL 64, or IPv6 with hop limit 64; the inner packet's
/// DSCP and ECN (`tos`) copied out (RFC 4301 §5.1.2.1, RFC 6040's normal mode).
///
/// `dont_frag` is false only for a packet over the SA's path MTU whose inner packet may be
/// fragmented ([`crate::pmtu`]); its ID is then still unique among the SA's last 65,536
/// packets.
pub(crate) fn emit_outer(packet: &mut [u8], sa: &Sa, proto: IpProtocol, tos: u8, id: u16, dont_frag: bool) {
    // An SA's endpoints are of one family (setkey and the SAD give them so), and the
    // packet is as long as the lengths say: emit cannot refuse.
    let _ = emit_ip(packet, sa.id.src, sa.id.dst, Fresh { proto, tos, ident: id, dont_frag });
}

/// Makes `room` bytes between the first `keep` bytes of the packet at `data[head..]` (the
/// IP header that stays in front) and the rest, for ESP or AH to go there: the header
/// moves forward into the headroom, or, without room, everything is copied once. Returns
/// the buffer and where the packet now starts. (Inline, as when it was part of `seal`.)
#[inline(always)]
pub(crate) fn room_in_front(mut data: Vec<u8>, head: usize, keep: usize, room: usize) -> (Vec<u8>, usize) {
    if head >= room {
        let base = head - room;
        data.copy_within(head..head + keep, base);
        (data, base)
    } else {
        let front = keep + room;
        let mut v = Vec::with_capacity(front + data.len() - head - keep + TAILROOM);
        v.resize(front, 0);
        v[..keep].copy_from_slice(&data[head..head + keep]);
        v.extend_from_slice(&data[head + keep..]);
        (v, 0)
    }
}

/// Fills in the UDP checksum of an IPv6 packet whose UDP header is at `udp_at` (RFC 8200
/// §8.1: mandatory over IPv6).
fn udp6_checksum(packet: &mut [u8], udp_at: usize) {
    if packet.len() < ipv6::HEADER_LEN {
        return;
    }
    let ip = ipv6::Packet::new_unchecked(&*packet);
    let pseudo = PseudoHeader::V6 { src: ip.src_addr(), dst: ip.dst_addr() };
    if let Some(b) = packet.get_mut(udp_at..) {
        let mut p = udp::Packet::new_unchecked(b);
        p.set_checksum(0);
        p.fill_checksum(&pseudo);
    }
}
