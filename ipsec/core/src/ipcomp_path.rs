//! IPComp on the packet path: IPComp SAs in tunnel and transport mode (RFC 3173), one hook in
//! `outbound` (a policy rule of protocol ipcomp) and one in `inbound` (IPComp, or IP-in-IP
//! from an IPComp peer).
//!
//! ```text
//! out: packet ─ SPD rule ipcomp/tunnel/A-B ─ SA (A, B) ─ IP-in-IP (ipip) ─ compress (ipcomp)
//!        ─ outer header A → B: IPComp (108) if it shrank, else IPv4/IPv6 (4/41) ─► transmit
//! in:  IPComp (108) to B ─ SA (CPI, B) ─ decompress (limit: 65,535 with the outer header)
//!      IP-in-IP (4/41) from A to B with an IPComp SA A → B ─ (sent as is: RFC 3173 §2.2)
//!        ─ inner packet (ipip, RFC 6040 ECN) ─ SPD in: a rule ipcomp/tunnel/A-B? ─► deliver
//! ```
//!
//! A bundle (IPComp, then ESP or AH over it) runs its IPComp stage through the same two
//! functions, `ipcomp_encap` and `ipcomp_decap` (`crate::bundle`).
//!
//! What is not here: path MTU (IPComp makes packets smaller or sends them as
//! IP-in-IP, 20/40 bytes more, which the outer path fragments as any tunnel packet).
//!
//! Each packet runs its ocf request to the end in the call (`ipcomp`: only CPU drivers
//! compress), with the thread's [`Scratch`]: no allocation per packet except the growth of
//! a decompressed packet's buffer. The SA is cloned out of the SAD (a reference count per
//! packet, against the microseconds DEFLATE costs).

use std::cell::RefCell;
use std::sync::Arc;

use ipsec_wire::{ipcomp as wire, ipv4, ipv6, IpProtocol, Summary};

use crate::control::{Level, Mode, Rule};
use crate::ipcomp::{self, Scratch, Sent, THRESHOLD};
use crate::ipip;
use crate::packet::{emit_ip, Fresh, Packet};
use crate::path::{Batch, Shared, To, Way};
use crate::sad::{Sa, SaState};
use crate::spd::Flow;
use crate::stats::Drop;
use crate::transport::{fix_transport_header, restore_transport_header, transport_split};

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        // Re-entered on this thread (a callback sending through IPComp): a scratch of its own.
        Err(_) => f(&mut Scratch::default()),
    })
}

/// Whether an inbound packet is IPComp's: protocol 108, or IP-in-IP between the ends of
/// an IPComp SA in tunnel mode (a packet its sender did not compress; a transport-mode SA
/// sends those as they are, and IP-in-IP is then some other tunnel's).
pub(crate) fn claims(shared: &Shared, s: &Summary) -> bool {
    match s.protocol {
        IpProtocol::IPCOMP => true,
        IpProtocol::IPV4 | IpProtocol::IPV6 => {
            shared.db.sad.ipcomp_between(s.src, s.dst, 0).is_some_and(|sa| sa.spec.mode != Mode::Transport)
        }
        _ => false,
    }
}

/// Whether `rule` puts a packet through the IPComp SA `sa` in tunnel mode: as the rule
/// says, or (`-m any` rules) as the SA says, tunnel unless it is a transport-mode SA.
pub(crate) fn tunnel(rule: &Rule, sa: &Sa) -> bool {
    match rule.mode {
        Mode::Tunnel => true,
        Mode::Transport => false,
        Mode::Any => sa.spec.mode != Mode::Transport,
    }
}

impl Shared {
    /// Outbound through the IPComp SA `rule` asks for.
    pub(crate) fn ipcomp_output(
        &self,
        packet: Packet,
        s: &Summary,
        f: &Flow,
        rule: Rule,
        b: &mut Batch<'_>,
    ) -> Result<(), Drop> {
        let (src, dst) = rule.tunnel.unwrap_or((s.src, s.dst));
        let reqid = if let Level::Unique(n) = rule.level { n } else { 0 };
        let Some(sa) = self.db.sad.ipcomp_between(src, dst, reqid) else {
            if rule.level == Level::Use {
                b.transmit(packet);
                return Ok(());
            }
            return self.acquire(packet, f, rule, (src, dst));
        };
        let (packet, len) = self.ipcomp_encap(&sa, packet, s, tunnel(&rule, &sa))?;
        self.count(b.tally.as_mut(), &sa, Way::Out, len);
        b.transmit(packet);
        Ok(())
    }

    /// `packet` (summarised by `s`) through the IPComp SA `sa`, compressed if it pays: in
    /// tunnel mode as IP-in-IP, in transport mode behind its own header (sent as it is if
    /// DEFLATE does not pay, RFC 3173 §2.2); and the length the SA is charged. (A bundle's
    /// stage, `crate::bundle`, calls it too.)
    pub(crate) fn ipcomp_encap(
        &self,
        sa: &Sa,
        packet: Packet,
        s: &Summary,
        tunnel: bool,
    ) -> Result<(Packet, usize), Drop> {
        if self.expire_by_volume(sa, s.ip_len) {
            return Err(self.drop(Some(sa), Drop::Expired));
        }
        let Packet { mut data, head } = packet;
        data.truncate(head + s.ip_len);
        let cpi = sa.id.spi as u16;
        if !tunnel {
            // Transport mode needs the whole packet's payload.
            if s.is_fragment {
                return Err(self.drop(Some(sa), Drop::Fragment));
            }
            let split =
                transport_split(&data[head..], s).ok_or_else(|| self.drop(Some(sa), Drop::Malformed))?;
            let at = head + split.keep;
            let next = IpProtocol(split.next);
            let sent = with_scratch(|scratch| {
                ipcomp::compress(&sa.session, cpi, THRESHOLD, scratch, &mut data, at, next)
            })
            .map_err(|why| self.drop(Some(sa), why))?;
            if let Sent::Compressed { .. } = sent {
                fix_transport_header(&mut data[head..], &split, IpProtocol::IPCOMP);
            }
            return Ok((Packet { data, head }, s.ip_len));
        }
        let outer = if sa.id.dst.is_ipv6() { ipv6::HEADER_LEN } else { ipv4::MIN_HEADER_LEN };
        let (p, tos, next) = ipip::encapsulate(Packet { data, head }, outer, 0);
        let Packet { mut data, head } = p;
        let sent = with_scratch(|scratch| {
            ipcomp::compress(&sa.session, cpi, THRESHOLD, scratch, &mut data, head + outer, IpProtocol(next))
        })
        .map_err(|why| self.drop(Some(sa), why))?;
        let proto = match sent {
            Sent::Compressed { .. } => IpProtocol::IPCOMP,
            Sent::BelowThreshold | Sent::NotSmaller => IpProtocol(next),
        };
        // IPv4's identification only has to vary (RFC 6864 §4.1, DF set): the SA's counter.
        let ident = sa.seq.next().map_or(0, |n| n as u16);
        let fresh = Fresh { proto, tos, ident, dont_frag: true };
        emit_ip(&mut data[head..], sa.id.src, sa.id.dst, fresh)
            .map_err(|_| self.drop(Some(sa), Drop::TooBig))?;
        Ok((Packet { data, head }, s.ip_len))
    }

    /// Inbound: an IPComp packet, or IP-in-IP from an IPComp peer ([`claims`]).
    pub(crate) fn ipcomp_input(&self, packet: Packet, s: &Summary, b: &mut Batch<'_>) -> Result<(), Drop> {
        let (sa, inner, len, tunnel) = self.ipcomp_decap(packet, s)?;
        // Delivered, or on to a bundle's next SA (a transport-mode IPComp SA's packet may
        // hold ESP or AH to us).
        let inner = self.accept_inner(&sa, &[], tunnel, inner, len, b.tally.as_mut())?;
        self.take_inner(inner, &mut To::Results(b.results()))
    }

    /// An IPComp packet, or IP-in-IP from an IPComp peer, without IPComp and the outer
    /// header: its SA, the inner packet, the length the SA is charged, and whether an outer
    /// header came off (tunnel mode). (A bundle's stage after ESP or AH, `crate::bundle`,
    /// calls it too.)
    pub(crate) fn ipcomp_decap(
        &self,
        packet: Packet,
        s: &Summary,
    ) -> Result<(Arc<Sa>, Packet, usize, bool), Drop> {
        if s.is_fragment {
            return Err(self.drop(None, Drop::Fragment));
        }
        let Packet { mut data, head } = packet;
        data.truncate(head + s.ip_len);
        let at = head + s.offset;
        let ecn = ipip::ecn(&data[head..]);
        let (sa, next) = if s.protocol == IpProtocol::IPCOMP {
            let Some(h) = data.get(at..).and_then(|h| wire::Packet::new_checked(h).ok()) else {
                return Err(self.drop(None, Drop::IpCompTruncated));
            };
            let cpi = h.cpi();
            let sa =
                self.db.sad.ipcomp_inbound(cpi, s.dst).ok_or_else(|| self.drop(None, Drop::UnknownSpi))?;
            if sa.state() == SaState::Dead {
                return Err(self.drop(Some(&sa), Drop::Expired));
            }
            let next = with_scratch(|scratch| ipcomp::decompress(&sa.session, cpi, scratch, &mut data, at))
                .map_err(|why| self.drop(Some(&sa), why))?;
            (sa, next)
        } else {
            let sa = self
                .db
                .sad
                .ipcomp_between(s.src, s.dst, 0)
                .ok_or_else(|| self.drop(None, Drop::UnknownSpi))?;
            (sa, s.protocol)
        };
        let len = data.len() - at;
        let tunnel = matches!(next, IpProtocol::IPV4 | IpProtocol::IPV6) && sa.spec.mode != Mode::Transport;
        let inner = match next {
            _ if tunnel => ipip::decapsulate(Packet { data, head: at }, next.0, ecn)
                .map_err(|why| self.drop(Some(&sa), why))?,
            // Transport mode: the packet's own header names what IPComp carried.
            _ if sa.spec.mode != Mode::Tunnel => {
                restore_transport_header(&mut data[head..], s.offset, next.0)
                    .map_err(|()| self.drop(Some(&sa), Drop::BadInner))?;
                Packet { data, head }
            }
            // A tunnel-mode SA carries IP packets only.
            _ => return Err(self.drop(Some(&sa), Drop::BadInner)),
        };
        Ok((sa, inner, len, tunnel))
    }
}
