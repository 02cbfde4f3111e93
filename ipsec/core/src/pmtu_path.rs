//! Path MTU where an SA is involved (see `pmtu` for the whole flow and the choices): an ICMP
//! error (or the local stack's EMSGSIZE) about one of our packets lowers the path MTU of
//! the SA that sent it ([`learn`], [`learn_local`]); an outbound packet is checked against
//! its SA's path MTU before it is sealed ([`check`], [`inner_mtu`]).
//!
//! ```text
//!  ICMP error ─ pmtu::Quote ─ find: SA by SPI, dst (src, encapsulation, ports) ─ lower
//!  output ─ check(sa): fits / fragmentable / too big (pmtu::error_to_sender)
//! ```

use std::sync::Arc;

use ipsec_wire::{icmp, ipv4, ChecksumPolicy, PseudoHeader, Summary};

use crate::control::Proto;
use crate::esp::ESP_HEADER_LEN;
use crate::pmtu::{Clock, IcmpFrom, Learned, Quote, Quoted, Verdict, MIN_PMTU_V4, MIN_PMTU_V6};
use crate::sad::{Sa, Sad};
use crate::stats::Drop;

/// Parses an ICMP error and lowers the path MTU of the SA whose packet it quotes, at time
/// `now`. The SA is returned with the outcome (for its counters and an event), or the drop
/// reason the error is counted under.
pub(crate) fn learn(
    sad: &Sad,
    msg: &[u8],
    from: IcmpFrom,
    now: u64,
) -> Result<(Learned, Option<Arc<Sa>>), Drop> {
    let p = icmp::Packet::new_unchecked(msg);
    let parsed = match from {
        IcmpFrom::V4 => icmp::Repr::parse_v4(&p, ChecksumPolicy::Verify),
        IcmpFrom::V6(Some(pseudo)) => icmp::Repr::parse_v6(&p, &pseudo, ChecksumPolicy::Verify),
        IcmpFrom::V6(None) => {
            let any = PseudoHeader::V6 { src: [0; 16].into(), dst: [0; 16].into() };
            icmp::Repr::parse_v6(&p, &any, ChecksumPolicy::Ignore)
        }
    };
    let repr = match parsed {
        Ok(r) => r,
        Err(ipsec_wire::Error::NotPathMtu { .. }) => return Ok((Learned::NotOurs, None)),
        Err(_) => return Err(Drop::IcmpMalformed),
    };
    let quote = Quote::parse(repr.quoted()).ok_or(Drop::IcmpMalformed)?;
    if quote.v6 != matches!(from, IcmpFrom::V6(_)) {
        return Err(Drop::IcmpMalformed);
    }
    lower(sad, &quote, repr.mtu(), now)
}

/// One of our own ESP or AH packets, `outer`, that the local IP stack refused to send as larger
/// than its route's MTU `mtu` (EMSGSIZE: the gateway's own link is the narrow one, or the
/// kernel cached a smaller path MTU first): learned as if an ICMP error had quoted it.
pub(crate) fn learn_local(
    sad: &Sad,
    outer: &[u8],
    mtu: u32,
    now: u64,
) -> Result<(Learned, Option<Arc<Sa>>), Drop> {
    let quote = Quote::parse(outer).ok_or(Drop::Malformed)?;
    lower(sad, &quote, mtu, now)
}

/// Lowers the path MTU of the SA that sent the `quote`d packet to `mtu`, unless it is
/// bogus ([`Drop::IcmpBogusMtu`]) or higher.
fn lower(sad: &Sad, quote: &Quote<'_>, mtu: u32, now: u64) -> Result<(Learned, Option<Arc<Sa>>), Drop> {
    let sa = match find(quote, sad)? {
        Some(sa) => sa,
        None => return Ok((Learned::NotOurs, None)),
    };
    let min = if quote.v6 { MIN_PMTU_V6 } else { MIN_PMTU_V4 };
    if mtu < min || mtu as usize >= quote.total_len {
        return Err(Drop::IcmpBogusMtu);
    }
    let learned = if sa.path_mtu.lower(mtu, now) { Learned::Lowered(mtu) } else { Learned::Unchanged };
    Ok((learned, Some(sa)))
}

/// The SA that sent the quoted packet. `Ok(None)`: not ESP or AH, or UDP that is not ESP
/// in UDP of ours; `Err(IcmpNoSa)`: ESP (or ESP in UDP with an SPI) or AH that no SA sent.
fn find(quote: &Quote<'_>, sad: &Sad) -> Result<Option<Arc<Sa>>, Drop> {
    let udp = quote.kind == Quoted::Udp;
    if quote.total_len == 0 {
        return Ok(None);
    }
    let at = quote.kind.spi_at();
    let Some(s) = quote.rest.get(at..at + 4) else {
        // RFC 792 routers quote 8 bytes: ESP's and AH's SPIs are there, ESP in UDP's
        // is not.
        return if udp { Ok(None) } else { Err(Drop::IcmpMalformed) };
    };
    let spi = u32::from_be_bytes([s[0], s[1], s[2], s[3]]);
    let sa = sad.inbound(spi, quote.dst).filter(|sa| sa.id.src == quote.src);
    let ours = |sa: &Arc<Sa>| match (quote.kind, sa.spec.natt) {
        (Quoted::Ah, _) => sa.id.proto == Proto::Ah,
        (Quoted::Esp, None) => sa.id.proto != Proto::Ah,
        (Quoted::Udp, Some(n)) => {
            let ports = ipsec_wire::udp::Packet::new_unchecked(quote.rest);
            ports.src_port() == n.sport && Some(ports.dst_port()) == sa.send_port()
        }
        _ => false,
    };
    match sa {
        Some(sa) if ours(&sa) => Ok(Some(sa)),
        _ if udp => Ok(None),
        _ => Err(Drop::IcmpNoSa),
    }
}

/// Whether the packet `bytes` (parsed as `s`) fits `sa`'s path by `clock`. `keep` gives
/// the bytes of it that stay in front of ESP (transport mode; 0 in tunnel mode). While the
/// SA knows no path MTU this is one relaxed load of it: the clock and `keep` are read only
/// when one is known.
#[inline]
pub(crate) fn check(
    sa: &Sa,
    bytes: &[u8],
    s: &Summary,
    keep: impl FnOnce() -> usize,
    clock: &Clock,
) -> Verdict {
    if !sa.path_mtu.ever_learned() {
        return Verdict::Fits;
    }
    let Some(mtu) = sa.path_mtu.get(clock.now()) else { return Verdict::Fits };
    let max = inner_mtu(sa, keep(), mtu as usize);
    if s.ip_len <= max {
        return Verdict::Fits;
    }
    let may_fragment = match bytes.first().map(|b| b >> 4) {
        Some(4) => !ipv4::Packet::new_unchecked(bytes).dont_frag(),
        _ => s.ip_len <= MIN_PMTU_V6 as usize,
    };
    if may_fragment {
        return Verdict::Fragmentable;
    }
    let floor = if s.src.is_ipv6() { MIN_PMTU_V6 } else { 68 };
    Verdict::TooBig((max as u32).max(floor))
}

/// The longest inner packet `sa` carries in an outer packet of at most `mtu` bytes: the
/// outer IP header (tunnel mode; `keep` bytes of the packet's own in transport mode), UDP
/// for ESP in UDP, ESP header and IV in front; padding to the cipher's alignment, the
/// 2-byte trailer and the ICV behind.
pub(crate) fn inner_mtu(sa: &Sa, keep: usize, mtu: usize) -> usize {
    let outer = if keep > 0 {
        keep
    } else if sa.id.dst.is_ipv6() {
        40
    } else {
        20
    };
    let t = match &sa.transform {
        crate::transform::Transform::Esp(t) => t,
        crate::transform::Transform::Ah(t) => {
            return crate::ah::inner_mtu(t, sa.id.dst.is_ipv6(), outer, keep, mtu)
        }
        // IPComp (tunnel mode): a packet that does not shrink goes as plain IP-in-IP.
        crate::transform::Transform::IpComp => return (mtu.saturating_sub(outer) + keep).min(mtu),
    };
    let udp = if sa.spec.natt.is_some() { 8 } else { 0 };
    let room = mtu.saturating_sub(outer + udp + ESP_HEADER_LEN + t.iv_len + t.icv_len);
    ((room & !(t.align - 1)).saturating_sub(2) + keep).min(mtu)
}
