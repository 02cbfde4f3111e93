//! AH's ICV input (RFC 4302 §3.3.3.1, Appendix A): an IP packet with AH, with what may
//! change on the way zeroed in place ([`zero_mutable`]). The header itself is [`crate::ah`]'s.
//!
//! The ICV covers the whole IP packet as the receiver will see it, with the fields routers
//! may change zeroed:
//!
//! - IPv4: DSCP and ECN, flags and fragment offset, TTL, header checksum; every option but
//!   the immutable ones (End of List, No Operation, Security, Extended Security, Commercial
//!   Security, Router Alert, Sender Directed Multi-Destination Delivery: option numbers 0,
//!   1, 2, 5, 6, 20, 21) is zeroed whole, type and length included. Loose and Strict
//!   Source Route are zeroed like the other mutable options, and the destination address
//!   is taken as it is in the header: the "mutable but predictable" final destination of a
//!   source-routed packet is not computed (a gateway sends no source-routed packets, and
//!   scapy computes none either).
//! - IPv6: traffic class, flow label, hop limit; in the Hop-by-Hop and Destination Options
//!   headers before AH, the data of each option whose type has the change bit (0x20) set;
//!   a Routing header as it will arrive: a sender with segments left (types 0 and 2, whose
//!   data is a list of addresses) authenticates the final destination in the header's
//!   destination, the first destination first in the list and segments left 0
//!   ([`Side::Sending`]); a receiver takes it as it came.
//! - AH itself: the ICV (not its padding, not an AES-GMAC IV) is zeroed.
//!
//! Headers after AH (in transport mode the upper layer, in tunnel mode the inner packet)
//! are covered as they are. With extended sequence numbers the high 32 bits follow the
//! packet in the ICV's input (RFC 4302 §2.5.1); that is the caller's, not the packet's.

use crate::ah::{Packet, FIXED_LEN};
use crate::error::{need, Error, Result};
use crate::ip::IpProtocol;
use crate::ipv6::MAX_EXTENSION_HEADERS;
use crate::ipv6_ext::ExtHeader;

/// Who computes the ICV: it decides how an IPv6 Routing header enters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The sender: a Routing header with segments left is put in the order it will arrive
    /// in.
    Sending,
    /// The receiver: the packet is taken as it arrived.
    Receiving,
}

/// Where [`zero_mutable`] found AH in the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Location {
    /// Where AH starts, from the start of the IP packet.
    pub offset: usize,
    /// AH's length (12 fixed bytes and the ICV field).
    pub header_len: usize,
    /// The offset of the Next Header byte that named AH: the IPv4 protocol (9), the IPv6
    /// fixed header's (6) or that of the extension header before AH.
    pub next_header_field: usize,
    /// The protocol after AH.
    pub next_header: IpProtocol,
}

/// Finds AH in the IP packet `packet` and zeroes, in place, everything the ICV does not
/// cover (see the module docs): the mutable fields and options, and the `icv_len` bytes of
/// the ICV, which start `iv_len` bytes into the ICV field. On [`Side::Sending`] an IPv6
/// Routing header is also put in the order it will arrive in.
///
/// Only the bytes up to the end of AH are read or written. The packet's IP length fields
/// bound the walk: bytes after them (link-layer padding) are not part of it. On `Err`
/// some fields may already be zeroed.
///
/// Errors: [`Error::BadVersion`]; IPv4's [`Error::Truncated`], [`Error::BadHeaderLen`],
/// [`Error::BadTotalLen`], [`Error::BadOption`]; IPv6's [`Error::Truncated`],
/// [`Error::MisplacedHopByHop`], [`Error::TooManyExtensionHeaders`], [`Error::BadOption`],
/// [`Error::UnsupportedRouting`]; [`Error::NotAh`] when no AH is where it belongs; AH's
/// [`Error::Truncated`] and [`Error::BadAhLen`] (also for an AH too short for
/// `iv_len + icv_len`, or over IPv6 not a multiple of 8 bytes).
pub fn zero_mutable(packet: &mut [u8], iv_len: usize, icv_len: usize, side: Side) -> Result<Location> {
    need(packet, 1)?;
    let (offset, next_header_field, end, v6) = match packet[0] >> 4 {
        4 => {
            let (offset, end) = zero_ipv4(packet)?;
            (offset, 9, end, false)
        }
        6 => {
            let (offset, field, end) = zero_ipv6(packet, side)?;
            (offset, field, end, true)
        }
        v => return Err(Error::BadVersion(v)),
    };
    let ah = Packet::new_checked(&packet[offset..end]).map_err(from_packet_start(offset))?;
    let header_len = ah.header_len();
    let next_header = ah.next_header();
    if header_len < FIXED_LEN + iv_len + icv_len || (v6 && header_len % 8 != 0) {
        return Err(Error::BadAhLen(ah.payload_len_field()));
    }
    let icv = offset + FIXED_LEN + iv_len;
    packet[icv..icv + icv_len].fill(0);
    Ok(Location { offset, header_len, next_header_field, next_header })
}

/// Turns a truncation inside a header at `at` into one counted from the packet start.
fn from_packet_start(at: usize) -> impl Fn(Error) -> Error {
    move |e| match e {
        Error::Truncated { needed, got } => Error::Truncated { needed: at + needed, got: at + got },
        other => other,
    }
}

/// IPv4: zeroes TOS, flags and fragment offset, TTL, checksum and the mutable options;
/// returns where AH starts and where the packet ends.
fn zero_ipv4(packet: &mut [u8]) -> Result<(usize, usize)> {
    let p = crate::ipv4::Packet::new_checked(&*packet)?;
    let (header_len, end, protocol) = (p.header_len(), usize::from(p.total_len()), p.protocol());
    if protocol != IpProtocol::AH {
        return Err(Error::NotAh(protocol.0));
    }
    packet[1] = 0; // DSCP and ECN
    packet[6..8].fill(0); // flags and fragment offset
    packet[8] = 0; // TTL
    packet[10..12].fill(0); // header checksum
    let mut at = crate::ipv4::MIN_HEADER_LEN;
    while at < header_len {
        match packet[at] {
            // End of Option List: what follows is padding, covered as it is.
            0 => break,
            // No Operation: one byte.
            1 => at += 1,
            kind => {
                let len = packet.get(at + 1).map_or(0, |&l| usize::from(l));
                if at + 1 >= header_len || len < 2 || at + len > header_len {
                    return Err(Error::BadOption { offset: at });
                }
                // Appendix A: immutable are Security (2), Extended Security (5),
                // Commercial Security (6), Router Alert (20), SDMDD (21), by option number.
                if !matches!(kind & 0x1f, 2 | 5 | 6 | 20 | 21) {
                    packet[at..at + len].fill(0);
                }
                at += len;
            }
        }
    }
    Ok((header_len, end))
}

/// IPv6: zeroes traffic class, flow label, hop limit and the mutable options of the
/// headers before AH, and puts a Routing header as it will arrive (sending); returns where
/// AH starts, the offset of the Next Header byte that named it, and where the packet ends.
fn zero_ipv6(packet: &mut [u8], side: Side) -> Result<(usize, usize, usize)> {
    let p = crate::ipv6::Packet::new_checked(&*packet)?;
    let end = p.total_len();
    let mut next = p.next_header();
    // Version stays; traffic class and flow label go.
    packet[0] &= 0xf0;
    packet[1..4].fill(0);
    packet[7] = 0; // hop limit
    let (mut at, mut field, mut count) = (crate::ipv6::HEADER_LEN, 6, 0);
    loop {
        match next {
            IpProtocol::AH => return Ok((at, field, end)),
            IpProtocol::HOP_BY_HOP | IpProtocol::ROUTING | IpProtocol::FRAGMENT | IpProtocol::DEST_OPTS => {}
            other => return Err(Error::NotAh(other.0)),
        }
        if next == IpProtocol::HOP_BY_HOP && count != 0 {
            return Err(Error::MisplacedHopByHop);
        }
        if count == MAX_EXTENSION_HEADERS {
            return Err(Error::TooManyExtensionHeaders);
        }
        let len = if next == IpProtocol::FRAGMENT {
            need(&packet[at..end], 8).map_err(from_packet_start(at))?;
            8
        } else {
            ExtHeader::new_checked(&packet[at..end]).map_err(from_packet_start(at))?.header_len()
        };
        let header = &mut packet[at..at + len];
        match next {
            IpProtocol::HOP_BY_HOP | IpProtocol::DEST_OPTS => zero_ipv6_options(header, at)?,
            IpProtocol::ROUTING if side == Side::Sending => {
                let (fixed, rest) = packet.split_at_mut(at);
                as_it_will_arrive(&mut fixed[24..40], &mut rest[..len])?;
            }
            _ => {}
        }
        count += 1;
        field = at;
        next = IpProtocol(packet[at]);
        at += len;
    }
}

/// The options of a Hop-by-Hop or Destination Options header (`header` starts at `at` in
/// the packet): the data of each option whose type has the change bit set is zeroed
/// (RFC 4302 §3.3.3.1.2.1, RFC 8200 §4.2).
fn zero_ipv6_options(header: &mut [u8], at: usize) -> Result<()> {
    let mut i = 2;
    while i < header.len() {
        let kind = header[i];
        if kind == 0 {
            // Pad1: one byte, no length.
            i += 1;
            continue;
        }
        let len = header.get(i + 1).map(|&l| usize::from(l));
        let Some(end) = len.map(|l| i + 2 + l).filter(|&e| e <= header.len()) else {
            return Err(Error::BadOption { offset: at + i });
        };
        if kind & 0x20 != 0 {
            header[i + 2..end].fill(0);
        }
        i = end;
    }
    Ok(())
}

/// A sender's Routing header with segments left, and the packet's destination `dst`, as
/// they will arrive: the final destination (the list's last address) in the header, the
/// first destination first in the list, segments left 0. Types 0 and 2 only (their data
/// is four reserved bytes and a list of addresses); any type with no segments left is
/// already as it will arrive.
fn as_it_will_arrive(dst: &mut [u8], routing: &mut [u8]) -> Result<()> {
    let (kind, left) = (routing[2], routing[3]);
    if left == 0 {
        return Ok(());
    }
    if !matches!(kind, 0 | 2) {
        return Err(Error::UnsupportedRouting(kind));
    }
    let addresses = &mut routing[8..];
    let n = addresses.len() / 16;
    if n == 0 {
        return Err(Error::UnsupportedRouting(kind));
    }
    let mut last = [0u8; 16];
    last.copy_from_slice(&addresses[(n - 1) * 16..n * 16]);
    addresses.copy_within(0..(n - 1) * 16, 16);
    addresses[..16].copy_from_slice(dst);
    dst.copy_from_slice(&last);
    routing[3] = 0;
    Ok(())
}

#[cfg(test)]
mod tests;
