//! Inbound: ESP decapsulation and the policy check after it (AH's: `crate::ah_path`, from
//! `input`, sharing `accept_inner`; IPComp's: `crate::ipcomp_path`, from the same match).
//!
//! ```text
//! whole packet (Via) ─ parse ─┬─ ESP, ESP in UDP ───────────────┐
//!                             ├─ NAT-keepalive: counted · IKE, not ESP, short ESP: drop
//!                             ├─ IPComp, or IP-in-IP from an IPComp peer (Via::Ip, Via::IpComp) ─► ipcomp_path
//!                             ├─ clear (Via::Ip only) ─ SPD in (ESP required? drop) ─► results.deliver
//!                             └─ anything else: not_esp (Via::Esp), not_ipcomp (Via::IpComp)
//! payload (headers taken off by the socket) ─ UDP: keepalive? IKE? ─┤
//!                                                                   ▼
//!        SAD (SPI, dst) ─ encapsulation as the SA's? (UDP: to the SA's port?) ─ replay check
//!        ─ batch (ocf) ─ input_done: replay update ─ (UDP: peer moved? ─ float) ─ trailer
//!          ─ tunnel: inner packet (ipip, RFC 6040 ECN) · transport: an IP header in front
//!          ─ accept_inner: another SA's packet inside (a bundle)? ─► bundle
//!          ─ the SA's selectors (RFC 4301 §5.2, `selectors_allow`):
//!              transport: addresses the SA's ends? ─ no: sa_selector
//!              SPD in ─ a policy: its rules met by the SA(s), mode too? ─ no: policy
//!                     └ none: came through a tunnel? ─ yes: no_inbound_policy
//!          ─► results.deliver
//! ```
//!
//! A whole packet says where it came from ([`Via`]): a host's IP stack hands over any
//! packet, a raw ESP socket only ESP, a raw IPComp or IP-in-IP socket only IPComp's. A
//! [`Payload`] is ESP (or, over UDP, what a NAT-T socket carries) whose headers the socket
//! already took off: nothing is rebuilt, the addresses and ports the socket reported stand
//! for them. Which datagrams are ESP in UDP is the socket's to say, not a port number's;
//! the SA then says which port they must have been sent to (`udp_port` otherwise).
//!
//! The check after decapsulation is the same for ESP, AH and IPComp, alone or in a bundle:
//! they all end in `accept_inner`, told whether their SA took an outer header off.

use std::net::IpAddr;
use std::sync::{Arc, PoisonError};

use ipsec_wire::udp_encap::NAT_T_PORT;
use ipsec_wire::Upper as Wire;
use ipsec_wire::{esp as wire_esp, ipv4, ipv6, udp, ChecksumPolicy, Encap, EncapPort, IpProtocol, Summary};
use ocf::{Error as OcfError, Flags, Outcome};

use crate::control::{Action, Dir, Level, Mode};
use crate::esp::{self, OpenError, Trailer};
use crate::ipip;
use crate::packet::{emit_ip, Fresh, Packet};
use crate::path::{
    finish_input, flow, into_vec, parse_trusted, Batch, Inner, Payload, SaRef, Shared, Tally, Via, Way,
};
use crate::sad::{Event, Sa, SaState};
use crate::stats::Drop;
use crate::transport::restore_transport_header;

const PROTO_IPV4: u8 = 4;
const PROTO_ESP: u8 = 50;
const PROTO_IPV6: u8 = 41;
const PROTO_NONE: u8 = 59;

/// How an inbound packet arrived, for its completion.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arrival {
    /// Its IP header is in the buffer, ESP right behind it (or its extension headers).
    Esp,
    /// Its IP and UDP headers are in the buffer.
    Udp,
    /// Only ESP is in the buffer (a [`Payload`]); `udp`: it came over UDP.
    Bare { udp: bool },
}

/// What the completion needs to finish an inbound packet, packed into the request's cookie.
/// (The sequence number's high half rides in the request itself: in its AAD or ESN bits.)
#[derive(Clone, Copy)]
struct InCookie {
    /// Where the packet starts in its buffer (below 2^24: a buffer holds one IP packet).
    head: u32,
    /// ESP's offset from `head` (within one IP packet, so below 2^16; 0 for a payload).
    esp: u16,
    arrival: Arrival,
    /// The outer header's ECN field.
    ecn: u8,
    /// A payload over UDP: the sender's port (a whole packet has it in its UDP header).
    sport: u16,
}

impl InCookie {
    /// The largest `head` the cookie holds.
    const MAX_HEAD: usize = (1 << 24) - 1;

    fn pack(self) -> u64 {
        let arrival = match self.arrival {
            Arrival::Esp => 0u64,
            Arrival::Udp => 1,
            Arrival::Bare { udp: false } => 2,
            Arrival::Bare { udp: true } => 3,
        };
        u64::from(self.head)
            | u64::from(self.esp) << 24
            | arrival << 40
            | u64::from(self.ecn & 3) << 42
            | u64::from(self.sport) << 48
    }

    fn unpack(v: u64) -> InCookie {
        let arrival = match v >> 40 & 3 {
            0 => Arrival::Esp,
            1 => Arrival::Udp,
            2 => Arrival::Bare { udp: false },
            _ => Arrival::Bare { udp: true },
        };
        InCookie {
            head: (v & Self::MAX_HEAD as u64) as u32,
            esp: (v >> 24) as u16,
            arrival,
            ecn: (v >> 42 & 3) as u8,
            sport: (v >> 48) as u16,
        }
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

/// Parses a whole packet from the network as `via` says: through an IP stack every
/// checksum is verified; from a raw ESP socket, what the kernel checked is not checked
/// again.
///
/// (Callers borrow the summary from the result instead of moving it out: the parser writes
/// it field by field, and copying it right after in 16-byte pieces stalled on store
/// forwarding, measured on the ESP packet path. For the same reason there is one call to
/// the parser, with the options chosen first: one call per `via`, whose results were then
/// moved into one place, cost 4 to 10% of `esp-input` in `benches/esp.rs`.)
#[inline(always)]
fn parse(bytes: &[u8], via: Via) -> ipsec_wire::Result<Summary> {
    let policy = match via {
        Via::Ip => ChecksumPolicy::Verify,
        Via::Esp | Via::IpComp => ChecksumPolicy::Ignore,
    };
    ipsec_wire::parse_any_encap(bytes, policy, EncapPort::Port(NAT_T_PORT))
}

impl Shared {
    /// One whole packet from the network.
    pub(crate) fn input(&self, packet: Packet, via: Via, b: &mut Batch<'_>) -> Result<(), Drop> {
        let parsed = parse(packet.bytes(), via);
        let Ok(s) = &parsed else {
            return Err(self.drop(None, Drop::Malformed));
        };
        // IPv6's parser walks past AH, an extension header to it, to what AH carries (a
        // bundle's ESP, UDP to port 4500 in transport mode): AH goes first.
        if s.ext_headers != 0 {
            if let Some(ah) = crate::ah_path::offset(packet.bytes(), s) {
                return self.input_ah(b, packet, s, ah);
            }
        }
        let (arrival, dport) = match s.upper {
            Wire::Esp(_) => (Arrival::Esp, 0),
            Wire::UdpEncap(ref u, Encap::Esp(_)) => (Arrival::Udp, u.dst_port),
            Wire::UdpEncap(_, ref encap) => return self.not_esp_in_udp(encap),
            Wire::BadEsp(ipsec_wire::Error::Truncated { .. }) => {
                return Err(self.drop(None, Drop::EspTruncated))
            }
            // SPI 0 is reserved (RFC 4303 §2.1): no SA has it.
            Wire::BadEsp(_) => return Err(self.drop(None, Drop::UnknownSpi)),
            // ESP needs whole packets (the kernel reassembles before a socket sees them).
            Wire::Fragment if via != Via::Ip || s.protocol.0 == PROTO_ESP => {
                return Err(self.drop(None, Drop::Fragment))
            }
            // Not ESP: AH (looked for only here, off ESP's path), IPComp, clear traffic, or a
            // drop.
            _ => {
                if let Some(ah) = crate::ah_path::offset(packet.bytes(), s) {
                    return self.input_ah(b, packet, s, ah);
                }
                if via != Via::Esp && crate::ipcomp_path::claims(self, s) {
                    return self.ipcomp_input(packet, s, b);
                }
                return match via {
                    Via::Ip => self.clear_input(packet, s, b),
                    Via::Esp => Err(self.drop(None, Drop::NotEsp)),
                    Via::IpComp => Err(self.drop(None, Drop::NotIpComp)),
                };
            }
        };
        let esp = s.offset + if arrival == Arrival::Udp { udp::HEADER_LEN } else { 0 };
        let ecn = ipip::ecn(packet.bytes());
        let cookie = InCookie { head: 0, esp: esp as u16, arrival, ecn, sport: 0 };
        self.open(b, packet, s.ip_len, s.dst, dport, cookie)
    }

    /// One ESP packet (or, over UDP, one datagram's payload) whose headers its socket took
    /// off.
    pub(crate) fn input_payload(&self, p: Payload, b: &mut Batch<'_>) -> Result<(), Drop> {
        let bytes = p.packet.bytes();
        if p.udp {
            match Encap::of(bytes) {
                Encap::Esp(_) => {}
                other => return self.not_esp_in_udp(&other),
            }
        } else {
            match wire_esp::Packet::new_checked(bytes).and_then(|e| wire_esp::Repr::parse(&e)) {
                Ok(_) => {}
                Err(ipsec_wire::Error::Truncated { .. }) => return Err(self.drop(None, Drop::EspTruncated)),
                Err(_) => return Err(self.drop(None, Drop::UnknownSpi)),
            }
        }
        let len = bytes.len();
        let arrival = Arrival::Bare { udp: p.udp };
        let cookie = InCookie { head: 0, esp: 0, arrival, ecn: p.ecn, sport: p.src.port() };
        self.open(b, p.packet, len, p.dst, p.dport, cookie)
    }

    /// What a NAT-T socket carries besides ESP: a NAT-keepalive only keeps a NAT mapping
    /// open (counted, not a drop); the rest is dropped under its cause.
    fn not_esp_in_udp(&self, encap: &Encap) -> Result<(), Drop> {
        Err(self.drop(
            None,
            match encap {
                Encap::Keepalive => {
                    self.counters.keepalive();
                    return Ok(());
                }
                Encap::Ike => Drop::Ike,
                Encap::EspTruncated => Drop::EspTruncated,
                Encap::Esp(_) | Encap::Invalid(_) => Drop::NotEsp,
            },
        ))
    }

    /// The ESP packet at `c.esp` of `packet` (`ip_len` bytes from its head), sent to `dst`
    /// (ESP in UDP: to UDP port `dport`): its SA, the checks before the crypto, and the
    /// request to the batch.
    fn open(
        &self,
        b: &mut Batch<'_>,
        packet: Packet,
        ip_len: usize,
        dst: IpAddr,
        dport: u16,
        c: InCookie,
    ) -> Result<(), Drop> {
        let (sa, req) = self.open_request(packet, ip_len, dst, dport, c)?;
        self.submit(b, SaRef::Owned(sa), req, Way::In, finish_input);
        Ok(())
    }

    /// ESP inside a bundle's outer SA (`crate::bundle`): a whole packet, already
    /// authenticated by that SA, whose ESP is at `s.offset`. Its SA and request.
    pub(crate) fn open_nested(&self, packet: Packet, s: &Summary) -> Result<(Arc<Sa>, ocf::Request), Drop> {
        let ecn = ipip::ecn(packet.bytes());
        let cookie = InCookie { head: 0, esp: s.offset as u16, arrival: Arrival::Esp, ecn, sport: 0 };
        self.open_request(packet, s.ip_len, s.dst, 0, cookie)
    }

    /// [`Shared::open`]'s SA and request, not yet submitted.
    #[inline(always)]
    fn open_request(
        &self,
        packet: Packet,
        ip_len: usize,
        dst: IpAddr,
        dport: u16,
        mut c: InCookie,
    ) -> Result<(Arc<Sa>, ocf::Request), Drop> {
        let esp_off = usize::from(c.esp);
        let Some(h) = packet.bytes().get(esp_off..).and_then(|e| wire_esp::Packet::new_checked(e).ok())
        else {
            return Err(self.drop(None, Drop::EspTruncated));
        };
        let (spi, seq_lo) = (h.spi(), h.sequence_number());
        let Some(sa) = self.db.sad.inbound(spi, dst) else {
            return Err(self.drop(None, Drop::UnknownSpi));
        };
        let Some(t) = sa.transform.esp() else {
            return Err(self.drop(Some(&sa), Drop::WrongProtocol));
        };
        // An SA is ESP in UDP or plain ESP, never both (a peer that switches must say so
        // with a new SA; Linux drops the same).
        let udp = matches!(c.arrival, Arrival::Udp | Arrival::Bare { udp: true });
        match sa.spec.natt {
            Some(_) if !udp => return Err(self.drop(Some(&sa), Drop::EncapMismatch)),
            None if udp => return Err(self.drop(Some(&sa), Drop::EncapMismatch)),
            // ESP in UDP goes to the port the SA names for this end. The source port is not
            // checked here: a peer behind a NAT may appear from another one, which the SA
            // follows once a packet from it authenticates (`follow_peer`).
            Some(n) if n.dport != dport => return Err(self.drop(Some(&sa), Drop::UdpPort)),
            _ => {}
        }
        if sa.state() == SaState::Dead {
            return Err(self.drop(Some(&sa), Drop::Expired));
        }
        // Malformed before replay: a truncated packet says nothing about the window.
        match t.check_len(ip_len - esp_off) {
            Ok(()) => {}
            Err(OpenError::Truncated) => return Err(self.drop(Some(&sa), Drop::EspTruncated)),
            Err(OpenError::NotBlocks) => return Err(self.drop(Some(&sa), Drop::BadLength)),
        }
        if packet.head > InCookie::MAX_HEAD {
            return Err(self.drop(Some(&sa), Drop::TooBig));
        }
        let seq = sa.replay.lock().unwrap_or_else(PoisonError::into_inner).check(seq_lo);
        let seq = seq.map_err(|e| self.drop(Some(&sa), e.drop_reason()))?;
        let Packet { mut data, head } = packet;
        data.truncate(head + ip_len);
        let mut req = match t.open(data, head + esp_off, seq, sa.spec.esn) {
            Ok(r) => r,
            Err((OpenError::Truncated, _)) => return Err(self.drop(Some(&sa), Drop::EspTruncated)),
            Err((OpenError::NotBlocks, _)) => return Err(self.drop(Some(&sa), Drop::BadLength)),
        };
        c.head = head as u32;
        req.user = c.pack();
        req.flags = Flags::CALLBACK_IMMEDIATE;
        Ok((sa, req))
    }

    /// An inbound request's outcome: the inner packet, nothing (a dummy packet), or a drop.
    /// `outer`: the SAs of the bundle this packet came through before `sa`, outermost
    /// first (`crate::bundle`; none for a packet of one SA).
    pub(crate) fn input_done(
        &self,
        sa: &Arc<Sa>,
        outcome: Outcome,
        tally: Option<&mut Tally>,
        outer: &[Arc<Sa>],
    ) -> Result<Option<Inner>, Drop> {
        if sa.transform.ah().is_some() {
            return self.ah_input_done(sa, outcome, tally, outer);
        }
        let mut req = match outcome {
            Ok(r) => r,
            Err(f) => {
                let why =
                    if f.error() == &OcfError::AuthFailed { Drop::AuthFailed } else { Drop::CryptoError };
                return Err(self.drop(Some(sa), why));
            }
        };
        let c = InCookie::unpack(req.user);
        let payload = req.payload_range();
        let mut data = into_vec(req.buf.take());
        let (head, esp_at) = (c.head as usize, c.head as usize + usize::from(c.esp));
        let seq_lo = wire_esp::Packet::new_unchecked(&data[esp_at..]).sequence_number();
        let seq = u64::from(seq_hi_of(&req)) << 32 | u64::from(seq_lo);
        esp::recycle(req);
        // Only now, with the ICV verified, does the window move (RFC 4303 §3.4.3).
        let newest = {
            let mut w = sa.replay.lock().unwrap_or_else(PoisonError::into_inner);
            let newest = seq > w.top();
            if let Err(e) = w.update(seq) {
                drop(w);
                return Err(self.drop(Some(sa), e.drop_reason()));
            }
            newest
        };
        // Port floating: only the newest authenticated packet may move the peer (a late one
        // from before a move must not move it back).
        if newest {
            match c.arrival {
                Arrival::Udp => {
                    let port = udp::Packet::new_unchecked(&data[esp_at - udp::HEADER_LEN..]).src_port();
                    self.follow_peer(sa, port);
                }
                Arrival::Bare { udp: true } => self.follow_peer(sa, c.sport),
                _ => {}
            }
        }
        let (len, next) = match esp::trailer(&data[payload.clone()]) {
            Ok(t) => t,
            Err(Trailer::BadPadding | Trailer::Short | Trailer::PadTooLong) => {
                return Err(self.drop(Some(sa), Drop::BadPadding));
            }
        };
        let body = payload.start;
        data.truncate(body + len);
        // Counters and volume lifetimes count the payload ESP carried, TFC padding included
        // (as Linux counts an SA's bytes), though the padding is not delivered.
        let stats_len = len;
        let tunnel = matches!(next, PROTO_IPV4 | PROTO_IPV6) && sa.spec.mode != Mode::Transport;
        let packet = match next {
            // A dummy packet (RFC 4303 §2.6, traffic flow confidentiality): discard quietly.
            PROTO_NONE => return Ok(None),
            // Tunnel mode: ESP carried an IP packet; IP-in-IP's decapsulation is to start
            // there (the outer header is left behind in the buffer), cuts any TFC padding
            // after it and carries the outer header's ECN mark in (RFC 6040). (Not for a
            // transport-mode SA: its IP-in-IP is a packet of its own, such as the one an
            // IPComp SA inside a bundle sends uncompressed, `crate::bundle`.)
            PROTO_IPV4 | PROTO_IPV6 if tunnel => ipip::decapsulate(Packet { data, head: body }, next, c.ecn)
                .map_err(|why| self.drop(Some(sa), why))?,
            // Transport mode: an IP header in front of the payload again.
            _ => match c.arrival {
                Arrival::Bare { .. } => transport_header_for(data, body, sa, next, c.ecn),
                Arrival::Esp | Arrival::Udp => {
                    // The packet's own IP header (without any UDP encapsulation) moves up
                    // to meet the payload.
                    let hdr = esp_at - head - if c.arrival == Arrival::Udp { udp::HEADER_LEN } else { 0 };
                    let new_head = body - hdr;
                    data.copy_within(head..head + hdr, new_head);
                    restore_transport_header(&mut data[new_head..], hdr, next)
                        .map(|()| Packet { data, head: new_head })
                }
            }
            .map_err(|()| self.drop(Some(sa), Drop::BadInner))?,
        };
        self.accept_inner(sa, outer, tunnel, packet, stats_len, tally).map(Some)
    }

    /// The end of every decapsulated packet (ESP's, AH's and IPComp's): the policy check
    /// after decapsulation, volume lifetimes, the counters. `tunnel`: `sa` took an outer
    /// header off (tunnel mode); `stats_len` is the payload the SA carried; `outer`, the SAs
    /// of a bundle the packet came through before `sa`.
    ///
    /// A packet to this SA's destination from its source that holds ESP, AH or IPComp
    /// (or IP-in-IP between the ends of an IPComp SA) is a bundle's next SA's, not yet
    /// for the policy: it goes on to `crate::bundle`, which checks the policy once every SA
    /// is off. (Inline, as when it was the end of `input_done`.)
    #[inline(always)]
    pub(crate) fn accept_inner(
        &self,
        sa: &Arc<Sa>,
        outer: &[Arc<Sa>],
        tunnel: bool,
        packet: Packet,
        stats_len: usize,
        tally: Option<&mut Tally>,
    ) -> Result<Inner, Drop> {
        let parsed = parse_trusted(packet.bytes());
        let Ok(inner) = &parsed else {
            return Err(self.drop(Some(sa), Drop::BadInner));
        };
        let next = crate::bundle::holds_another_sa(self, sa, inner, packet.bytes());
        if !next {
            if let Err(why) = self.selectors_allow(sa, outer, tunnel, inner, packet.bytes()) {
                return Err(self.drop(Some(sa), why));
            }
        }
        if self.expire_by_volume(sa, stats_len) {
            return Err(self.drop(Some(sa), Drop::Expired));
        }
        self.count(tally, sa, Way::In, stats_len);
        Ok(match next {
            false => Inner::Deliver(packet),
            true => Inner::Next(outer.iter().chain([sa]).cloned().collect(), packet),
        })
    }

    /// The check after decapsulation (RFC 4301 §5.2: the inner headers must match the
    /// selectors of the SA, and of the bundle's SAs, they came through). Our SAs carry no
    /// selectors of their own beyond their ends, so:
    ///
    /// - transport mode: the packet's addresses are the outer header's, and must be the
    ///   SA's ends (its own selector) — else `sa_selector` (a key holder spoofing the outer
    ///   source; Linux: XfrmInStateMismatch);
    /// - the first inbound policy that covers the packet must be `ipsec` with rules that
    ///   this SA, and `outer`, satisfy (`crate::bundle::allows`) — else `policy`;
    /// - no inbound policy covers it: delivered only if no SA on its way took an outer
    ///   header off (transport mode: the addresses are the SA's own, as in the clear); from
    ///   a tunnel, where the inner source is whatever the key holder wrote, it is dropped
    ///   as `no_inbound_policy` (Linux: XfrmInNoPols, `secpath_has_nontransport`).
    #[inline(always)]
    fn selectors_allow(
        &self,
        sa: &Sa,
        outer: &[Arc<Sa>],
        tunnel: bool,
        inner: &Summary,
        bytes: &[u8],
    ) -> Result<(), Drop> {
        if !tunnel && (inner.src != sa.id.src || inner.dst != sa.id.dst) {
            return Err(Drop::SaSelector);
        }
        let verdict = self.db.spd.lookup_with(Dir::In, &flow(inner, bytes), |p| match &p.spec.action {
            Action::Protect(rules) => crate::bundle::allows(rules, sa, tunnel, outer),
            Action::Bypass | Action::Discard => false,
        });
        match verdict {
            Some(true) => Ok(()),
            Some(false) => Err(Drop::Policy),
            None if tunnel || outer.iter().any(|o| o.spec.mode == Mode::Tunnel) => Err(Drop::NoInboundPolicy),
            None => Ok(()),
        }
    }

    /// An authenticated ESP-in-UDP packet may come from another UDP source port than the
    /// peer's known one: the SAs to the peer follow it ([`crate::sad::Sad::float`]),
    /// counted and reported once per change.
    fn follow_peer(&self, sa: &Sa, port: u16) {
        if let Some(from) = self.db.sad.float(sa, port) {
            self.counters.peer_moved();
            self.push_events([Event::PeerMoved { sa: sa.id, from, to: port }]);
        }
    }

    /// A packet that arrived without ESP: allowed unless policy requires protection.
    fn clear_input(&self, packet: Packet, s: &Summary, b: &mut Batch<'_>) -> Result<(), Drop> {
        match self.db.spd.lookup(Dir::In, &flow(s, packet.bytes())).map(|p| p.spec.action.clone()) {
            Some(Action::Protect(rules)) if rules.iter().all(|r| r.level == Level::Use) => {}
            Some(Action::Protect(_) | Action::Discard) => return Err(self.drop(None, Drop::Policy)),
            _ => {}
        }
        b.deliver(packet);
        Ok(())
    }
}

/// Transport mode inbound, for ESP whose socket took the IP header off: a new header in
/// front of the payload at `body`, from the SA's peer to us, naming `next`, with the ECN
/// field the outer header had (TTL and hop limit 64, as a fresh packet; IPv4 with DF).
fn transport_header_for(data: Vec<u8>, body: usize, sa: &Sa, next: u8, ecn: u8) -> Result<Packet, ()> {
    let hdr = if sa.id.dst.is_ipv6() { ipv6::HEADER_LEN } else { ipv4::MIN_HEADER_LEN };
    let (mut data, head) = if body >= hdr {
        (data, body - hdr)
    } else {
        // ESP's header and IV are shorter than an IP header: the payload moves back.
        let mut data = data;
        let len = data.len() - body;
        data.resize(hdr + len, 0);
        data.copy_within(body..body + len, hdr);
        data.truncate(hdr + len);
        (data, 0)
    };
    let fresh = Fresh { proto: IpProtocol(next), tos: ecn & 3, ident: 0, dont_frag: true };
    let emitted = emit_ip(&mut data[head..], sa.id.src, sa.id.dst, fresh);
    emitted.map_err(|_| ())?;
    Ok(Packet { data, head })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_keeps_every_field() {
        for arrival in [Arrival::Esp, Arrival::Udp, Arrival::Bare { udp: false }, Arrival::Bare { udp: true }]
        {
            for (head, esp, ecn, sport) in
                [(0, 0, 0, 0), (InCookie::MAX_HEAD as u32, u16::MAX, 3, u16::MAX), (72, 28, 2, 4500)]
            {
                let c = InCookie::unpack(InCookie { head, esp, arrival, ecn, sport }.pack());
                assert_eq!(
                    (c.head, c.esp, c.arrival == arrival, c.ecn, c.sport),
                    (head, esp, true, ecn, sport)
                );
            }
        }
    }
}
