//! AH's steps on the packet path (RFC 4302; the transform is [`crate::ah`]'s), which hook
//! into `outbound` (after the SA and its sequence number are chosen) and `inbound` (before
//! ESP's dispatch) and share their completions.
//!
//! ```text
//! out: packet ─ tunnel: room for the outer header (ipip) · transport: the header stays
//!      ─ AH after the IP header(s) ─ outer / transport header written (proto 51)
//!      ─ buffer: packet ‖ seq_hi (ESN) ‖ copy of the IP header(s)
//!      ─ mutable fields zeroed in place (ipsec_wire::ah_icv::zero_mutable, Sending)
//!      ─ ocf: MAC (HMAC) or GCM with it all as AAD (AES-GMAC) over packet ‖ seq_hi
//!      ─ ah_output_done: header(s) copied back, ICV written ─► results.transmit
//! in:  packet ─ AH found (IPv4 protocol 51, or in the IPv6 chain) ─ SAD (SPI, dst): an AH SA?
//!      ─ lengths for its ICV ─ replay check ─ ICV (and AES-GMAC's IV) copied out
//!      ─ buffer: packet ‖ seq_hi (ESN) ‖ copy of the IP header(s) (transport)
//!      ─ mutable fields zeroed (Receiving) ─ ocf verifies (constant time)
//!      ─ ah_input_done: replay update ─ tunnel: inner packet (ipip, RFC 6040 ECN)
//!        · transport: header(s) copied back, AH cut out, next header and length fixed
//!      ─ the policy check after decapsulation ─► results.deliver
//! ```
//!
//! The ICV's input is the packet itself with its mutable fields zeroed, so the fields have
//! to come back afterwards: the bytes in front of AH are copied behind the packet in its own
//! buffer and travel with the request to the completion, which copies them back; an
//! asynchronous driver's completion finds everything in the request. The ESN high bits ride
//! in the same place, right after the packet, where the ICV's input wants them (RFC 4302
//! §2.5.1, Appendix B): one contiguous region for HMAC and for GMAC's AAD. That room is the
//! buffer's tail room ([`crate::TAILROOM`], 50 bytes: an IPv4 header with ESN, an IPv6
//! header); a longer front (IPv4 options, IPv6 extension headers in transport mode) grows
//! the buffer once. A received packet's buffer has more (ipsecd's are sized for the MTU
//! and 512 bytes more).

use std::ops::Range;
use std::sync::{Arc, PoisonError};

use ipsec_wire::ah as wire;
use ipsec_wire::ah_icv::{self, Side};
use ipsec_wire::{ipv4, ipv6, Error as WireError, IpProtocol, Summary};
use ocf::{Error as OcfError, Flags, Outcome};

use crate::ah::{Transform, GMAC_IV_LEN, MAX_ICV_LEN};
use crate::control::Mode;
use crate::esp;
use crate::ipip;
use crate::outbound::{emit_outer, room_in_front};
use crate::packet::Packet;
use crate::path::{finish_input, into_vec, Batch, Inner, SaRef, Shared, Tally, Way};
use crate::pmtu;
use crate::sad::{Sa, SaState};
use crate::stats::Drop;
use crate::transform::Transform as SaTransform;
use crate::transport::{fix_transport_header, transport_split};

const PROTO_IPV4: u8 = 4;
const PROTO_IPV6: u8 = 41;

/// Where AH starts in a parsed packet, if it carries one: an IPv4 packet of protocol 51,
/// or an IPv6 packet with AH in its extension-header chain (the parser walks past it).
/// One comparison for every other packet.
#[inline]
pub(crate) fn offset(bytes: &[u8], s: &Summary) -> Option<usize> {
    if s.src.is_ipv4() {
        return (s.protocol == IpProtocol::AH).then_some(s.offset);
    }
    if s.ext_headers == 0 {
        return None;
    }
    // The parser checked the chain up to s.offset: each step is in bounds.
    let (mut at, mut next) = (ipv6::HEADER_LEN, IpProtocol(*bytes.get(6)?));
    while at < s.offset {
        if next == IpProtocol::AH {
            return Some(at);
        }
        let len = match next {
            IpProtocol::FRAGMENT => 8,
            _ => (usize::from(*bytes.get(at + 1)?) + 1) * 8,
        };
        next = IpProtocol(*bytes.get(at)?);
        at += len;
    }
    None
}

/// Packs what an outbound completion needs: where the packet starts (below 2^24), how
/// many bytes in front of AH were saved behind it (below 2^16), and the path MTU to cut a
/// fragmentable tunnel-mode packet to (0: none).
fn out_cookie(base: usize, front: usize, frag_mtu: u32) -> u64 {
    base as u64 | (front as u64) << 24 | u64::from(frag_mtu.min(0xffff)) << 48
}

/// Packs what an inbound completion needs: where the packet starts, AH's offset in it, the
/// offset of the Next Header byte that named AH, and the outer header's ECN field.
fn in_cookie(head: usize, ah: usize, field: usize, ecn: u8) -> u64 {
    head as u64 | (ah as u64) << 24 | (field as u64 & 0xffff) << 40 | u64::from(ecn & 3) << 56
}

/// The largest packet start the cookies hold.
const MAX_HEAD: usize = (1 << 24) - 1;

/// The entry points from ESP's functions are `#[inline(never)]`: inlined, they made
/// `Shared::input` and `Shared::seal` larger and moved LLVM's inlining on ESP's path
/// (`benches/esp.rs`: ESP input 30 ns a packet slower, `Sad::inbound` no longer inlined).
impl Shared {
    /// Outbound, for an AH SA (from `Shared::seal`, with the packet's sequence number
    /// taken): lays AH out, writes the headers, zeroes the mutable fields, and returns the
    /// ICV's request (finished by `output_done`, as ESP's is) and the length charged.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn seal_ah(
        &self,
        sa: &Arc<Sa>,
        t: &Transform,
        packet: Packet,
        s: &Summary,
        tunnel: bool,
        fragmentable: bool,
        seq: u64,
    ) -> Result<(ocf::Request, usize), Drop> {
        let v6 = if tunnel { sa.id.dst.is_ipv6() } else { s.src.is_ipv6() };
        let ah_len = t.header_len(v6);
        let Packet { mut data, mut head } = packet;
        data.truncate(head + s.ip_len);
        // What stays in front of AH: tunnel mode's outer header (written below, with the
        // inner packet's DSCP and ECN), or transport mode's own header(s).
        let (keep, next, split, tos) = if tunnel {
            let len = if v6 { ipv6::HEADER_LEN } else { ipv4::MIN_HEADER_LEN };
            let (p, tos, next) = ipip::encapsulate(Packet { data, head }, len, ah_len);
            (data, head) = (p.data, p.head);
            (len, next, None, tos)
        } else {
            let sp = transport_split(&data[head..], s).ok_or_else(|| self.drop(Some(sa), Drop::Malformed))?;
            (sp.keep, sp.next, Some(sp), 0)
        };
        let len = data.len() - head - keep;
        let total = keep + ah_len + len;
        if total - if v6 { ipv6::HEADER_LEN } else { 0 } > 0xffff {
            return Err(self.drop(Some(sa), Drop::TooBig));
        }
        let (mut buf, base) = room_in_front(data, head, keep, ah_len);
        if base > MAX_HEAD {
            return Err(self.drop(Some(sa), Drop::TooBig));
        }
        let ah_at = base + keep;
        let repr = wire::Repr {
            next_header: IpProtocol(next),
            spi: sa.id.spi,
            sequence_number: seq as u32,
            icv_field_len: ah_len - wire::FIXED_LEN,
        };
        // The buffer holds the whole header: emit cannot refuse.
        let _ = repr.emit(&mut wire::Packet::new_unchecked(&mut buf[ah_at..ah_at + ah_len]));
        let iv = seq.to_be_bytes();
        if t.is_gmac() {
            buf[ah_at + wire::FIXED_LEN..][..GMAC_IV_LEN].copy_from_slice(&iv);
        }
        let packet = &mut buf[base..base + total];
        match split {
            None => emit_outer(packet, sa, IpProtocol::AH, tos, seq as u16, !fragmentable),
            Some(sp) => fix_transport_header(packet, &sp, IpProtocol::AH),
        }
        let (region, _) = self.icv_input(sa, &mut buf, base, total, keep, seq, Side::Sending, t)?;
        let frag_mtu = match fragmentable && tunnel {
            true => sa.path_mtu.get(self.clock.now()).unwrap_or(0),
            false => 0,
        };
        let mut req = t.request(buf, region, iv, None);
        req.user = out_cookie(base, keep, frag_mtu);
        req.flags = Flags::CALLBACK_IMMEDIATE;
        Ok((req, len))
    }

    /// Makes `buf[base..base + total]` (a packet with AH) the ICV's input: the ESN high
    /// bits after it, then a copy of its first `front` bytes to restore, then its mutable
    /// fields zeroed. Returns the region to authenticate (the packet and the ESN bits) and
    /// the offset of the Next Header byte that names AH.
    #[allow(clippy::too_many_arguments)]
    fn icv_input(
        &self,
        sa: &Sa,
        buf: &mut Vec<u8>,
        base: usize,
        total: usize,
        front: usize,
        seq: u64,
        side: Side,
        t: &Transform,
    ) -> Result<(Range<usize>, usize), Drop> {
        buf.truncate(base + total);
        if sa.spec.esn {
            buf.extend_from_slice(&((seq >> 32) as u32).to_be_bytes());
        }
        let end = buf.len();
        buf.extend_from_within(base..base + front);
        match ah_icv::zero_mutable(&mut buf[base..base + total], t.iv_len, t.icv_len, side) {
            Ok(loc) => Ok((base..end, loc.next_header_field)),
            Err(WireError::BadAhLen(_)) => Err(self.drop(Some(sa), Drop::AhBadLength)),
            Err(_) => Err(self.drop(Some(sa), Drop::AhMalformed)),
        }
    }

    /// An outbound AH request's outcome: the header(s) in front of AH copied back, the
    /// ICV written, the packet (or its fragments) to `emit`.
    #[inline(never)]
    pub(crate) fn ah_output_done(
        &self,
        sa: &Sa,
        t: &Transform,
        outcome: Outcome,
        emit: &mut dyn FnMut(Packet),
    ) -> Result<(), Drop> {
        let mut req = outcome.map_err(|_| self.drop(Some(sa), Drop::CryptoError))?;
        let (base, front, frag_mtu) = (
            (req.user & MAX_HEAD as u64) as usize,
            (req.user >> 24) as u16 as usize,
            (req.user >> 48) as usize,
        );
        let mut icv = [0u8; MAX_ICV_LEN];
        let tag = req.tag();
        if tag.len() != t.icv_len {
            return Err(self.drop(Some(sa), Drop::CryptoError));
        }
        icv[..t.icv_len].copy_from_slice(tag);
        let mut data = into_vec(req.buf.take());
        esp::recycle(req);
        let saved = data.len() - front;
        data.copy_within(saved.., base);
        data.truncate(saved - if sa.spec.esn { 4 } else { 0 });
        let at = base + front + wire::FIXED_LEN + t.iv_len;
        data[at..at + t.icv_len].copy_from_slice(&icv[..t.icv_len]);
        if frag_mtu != 0 {
            if let Some(fragments) = pmtu::fragment(&data[base..], frag_mtu) {
                fragments.into_iter().for_each(emit);
                return Ok(());
            }
        }
        emit(Packet { data, head: base });
        Ok(())
    }

    /// Inbound: a whole packet with AH at `ah` (from [`offset`]): its SA, the checks
    /// before the crypto, and the request to the batch.
    #[inline(never)]
    pub(crate) fn input_ah(
        &self,
        b: &mut Batch<'_>,
        packet: Packet,
        s: &Summary,
        ah: usize,
    ) -> Result<(), Drop> {
        let (sa, req) = self.ah_request(packet, s, ah)?;
        self.submit(b, SaRef::Owned(sa), req, Way::In, finish_input);
        Ok(())
    }

    /// [`Shared::input_ah`]'s SA and request, not yet submitted (a bundle's stage,
    /// `crate::bundle`, submits it itself).
    pub(crate) fn ah_request(
        &self,
        packet: Packet,
        s: &Summary,
        ah: usize,
    ) -> Result<(Arc<Sa>, ocf::Request), Drop> {
        if s.is_fragment {
            return Err(self.drop(None, Drop::Fragment));
        }
        let bytes = &packet.bytes()[..s.ip_len];
        let repr = match wire::Packet::new_checked(&bytes[ah..]).and_then(|h| wire::Repr::parse(&h)) {
            Ok(r) => r,
            Err(WireError::Truncated { .. }) => return Err(self.drop(None, Drop::AhTruncated)),
            // SPI 0 is reserved (RFC 4302 §2.4): no SA has it.
            Err(WireError::ReservedSpi) => return Err(self.drop(None, Drop::UnknownSpi)),
            Err(_) => return Err(self.drop(None, Drop::AhBadLength)),
        };
        let Some(sa) = self.db.sad.inbound(repr.spi, s.dst) else {
            return Err(self.drop(None, Drop::UnknownSpi));
        };
        let SaTransform::Ah(t) = sa.transform else {
            return Err(self.drop(Some(&sa), Drop::WrongProtocol));
        };
        if sa.state() == SaState::Dead {
            return Err(self.drop(Some(&sa), Drop::Expired));
        }
        // Malformed before replay: lengths first.
        let v6 = s.src.is_ipv6();
        if repr.header_len() < wire::FIXED_LEN + t.iv_len + t.icv_len || (v6 && repr.header_len() % 8 != 0) {
            return Err(self.drop(Some(&sa), Drop::AhBadLength));
        }
        if packet.head > MAX_HEAD {
            return Err(self.drop(Some(&sa), Drop::TooBig));
        }
        let seq = sa.replay.lock().unwrap_or_else(PoisonError::into_inner).check(repr.sequence_number);
        let seq = seq.map_err(|e| self.drop(Some(&sa), e.drop_reason()))?;
        let ecn = ipip::ecn(bytes);
        let tunnel = carries_ip(&sa, repr.next_header.0);
        let icv_at = ah + wire::FIXED_LEN + t.iv_len;
        let mut icv = [0u8; MAX_ICV_LEN];
        icv[..t.icv_len].copy_from_slice(&bytes[icv_at..icv_at + t.icv_len]);
        let mut iv = [0u8; GMAC_IV_LEN];
        if t.is_gmac() {
            iv.copy_from_slice(&bytes[ah + wire::FIXED_LEN..][..GMAC_IV_LEN]);
        }
        let ip_len = s.ip_len;
        let Packet { mut data, head } = packet;
        // Tunnel mode leaves the outer header behind: nothing to restore.
        let front = if tunnel { 0 } else { ah };
        let (region, field) =
            self.icv_input(&sa, &mut data, head, ip_len, front, seq, Side::Receiving, &t)?;
        let mut req = t.request(data, region, iv, Some(&icv[..t.icv_len]));
        req.user = in_cookie(head, ah, field, ecn);
        req.flags = Flags::CALLBACK_IMMEDIATE;
        Ok((sa, req))
    }

    /// An inbound AH request's outcome: the inner packet (tunnel), the packet without AH
    /// (transport), or a drop.
    #[inline(never)]
    pub(crate) fn ah_input_done(
        &self,
        sa: &Arc<Sa>,
        outcome: Outcome,
        tally: Option<&mut Tally>,
        outer: &[Arc<Sa>],
    ) -> Result<Option<Inner>, Drop> {
        let mut req = match outcome {
            Ok(r) => r,
            Err(f) => {
                let why =
                    if f.error() == &OcfError::AuthFailed { Drop::AuthFailed } else { Drop::CryptoError };
                return Err(self.drop(Some(sa), why));
            }
        };
        let v = req.user;
        let (head, ah, field, ecn) = (
            (v & MAX_HEAD as u64) as usize,
            (v >> 24) as u16 as usize,
            (v >> 40) as u16 as usize,
            (v >> 56) as u8,
        );
        let mut data = into_vec(req.buf.take());
        esp::recycle(req);
        // The AH header itself was not zeroed (its ICV was, and is no longer needed).
        let h = wire::Packet::new_unchecked(&data[head + ah..]);
        let (seq_lo, next, ah_len) = (h.sequence_number(), h.next_header().0, h.header_len());
        let tunnel = carries_ip(sa, next);
        let saved = data.len() - if tunnel { 0 } else { ah };
        let end = saved - if sa.spec.esn { 4 } else { 0 };
        let seq_hi = match sa.spec.esn {
            true => u32::from_be_bytes([data[end], data[end + 1], data[end + 2], data[end + 3]]),
            false => 0,
        };
        // Only now, with the ICV verified, does the window move (RFC 4302 §3.4.3).
        let seq = u64::from(seq_hi) << 32 | u64::from(seq_lo);
        let moved = sa.replay.lock().unwrap_or_else(PoisonError::into_inner).update(seq);
        moved.map_err(|e| self.drop(Some(sa), e.drop_reason()))?;
        let body = head + ah + ah_len;
        let stats_len = end - body;
        let packet = if tunnel {
            data.truncate(end);
            ipip::decapsulate(Packet { data, head: body }, next, ecn)
                .map_err(|why| self.drop(Some(sa), why))?
        } else {
            // The header(s) as they arrived, then moved up to meet the payload.
            data.copy_within(saved.., head);
            data.truncate(end);
            data.copy_within(head..head + ah, body - ah);
            let packet = Packet { data, head: body - ah };
            without_ah(packet, field, next).ok_or_else(|| self.drop(Some(sa), Drop::BadInner))?
        };
        self.accept_inner(sa, outer, tunnel, packet, stats_len, tally).map(Some)
    }
}

/// Whether an inbound AH packet whose next header is `next` is tunnel mode's: an IP packet
/// under AH, unless the SA is in transport mode (then IP-in-IP is a packet of its own, such
/// as the one an IPComp SA inside a bundle sends uncompressed, `crate::bundle`).
fn carries_ip(sa: &Sa, next: u8) -> bool {
    matches!(next, PROTO_IPV4 | PROTO_IPV6) && sa.spec.mode != Mode::Transport
}

/// Transport mode inbound: the packet's header(s), now right before the payload, name
/// `next` instead of AH (IPv4: the protocol; IPv6: the byte at `field`) and get the new
/// length. `None` if the header is not one.
fn without_ah(mut packet: Packet, field: usize, next: u8) -> Option<Packet> {
    let bytes = &mut packet.data[packet.head..];
    let total = bytes.len();
    match bytes.first()? >> 4 {
        4 if total >= ipv4::MIN_HEADER_LEN => {
            let mut p = ipv4::Packet::new_unchecked(bytes);
            p.set_protocol(IpProtocol(next));
            p.set_total_len(total as u16);
            p.fill_checksum();
        }
        6 if total >= ipv6::HEADER_LEN => {
            let mut p = ipv6::Packet::new_unchecked(bytes);
            p.set_payload_len((total - ipv6::HEADER_LEN) as u16);
            p.set_chain_next_header(field, IpProtocol(next)).ok()?;
        }
        _ => return None,
    }
    Some(packet)
}
