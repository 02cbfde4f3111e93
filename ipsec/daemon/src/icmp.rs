//! ICMP errors from the network side, for path MTU ([`ipsec_core::pmtu`]): a router on the
//! path between the gateways that cannot forward one of our ESP or AH packets (DF set, its
//! next link too small) answers with ICMPv4 "fragmentation needed" or ICMPv6 Packet Too
//! Big, which the core turns into the SA's path MTU.
//!
//! ```text
//!  router ── ICMPv4 3/4 ── raw ICMP socket ── icmp_loop ─┐
//!  router ── ICMPv6 2 ──── raw ICMPv6 socket ─ icmp_loop ─┴─► Ipsec::icmp_error ─► SA's path MTU
//! ```
//!
//! Why raw ICMP sockets: the kernel hands every raw ICMP socket a copy of each ICMP message
//! that arrives, whichever of our sockets sent the packet it is about (the IP_HDRINCL
//! socket of raw ESP and of ESP in UDP that carries a mark or ECN, or the UDP socket).
//! `IP_RECVERR` on the sending sockets would only see errors about what each sent, and an
//! IPPROTO_RAW socket receives nothing at all. The kernel itself also caches the path MTU
//! (the raw ESP and UDP sockets' error handlers do) and then refuses our larger sends
//! (EMSGSIZE, seen in the namespaces: a few per learned MTU, in the moment before the core
//! has read the same error; [`SendTooBig`]), but it tells no inner sender anything, and an
//! IP_HDRINCL send over the gateway's own link's MTU fails with no ICMP error at all.
//!
//! One thread per family, blocking on its socket: ICMP errors are rare, and a burst of
//! them costs a read and a parse each. The loop looks only at path MTU errors' type byte
//! before handing them on; every other ICMP message (echo requests to the gateway, port
//! unreachables for the host's own traffic) is read and left to the kernel. (A kernel
//! type filter, ICMP_FILTER / ICMP6_FILTER, would spare those reads, but needs a raw
//! `setsockopt` — `unsafe` — that no measurement asks for.) A raw ICMPv6 socket's kernel
//! verifies the checksum (it always does for ICMPv6), so the core is told so; the ICMPv4
//! checksum is verified in the core.

use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use ipsec_core::{IcmpFrom, Ipsec, Learned};
use ipsec_wire::icmp::{V4_DEST_UNREACHABLE, V6_PACKET_TOO_BIG};
use ipsec_wire::{destination, ipv4};
use nix::sys::socket::{getsockopt, sockopt};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// The address family of an ICMP socket. (Not `net::Family`: `net` holds a
/// [`SendTooBig`], and modules import each other in no cycle.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

/// The raw ICMP (IPv4) or ICMPv6 socket path MTU errors arrive on.
pub fn socket(family: Family) -> std::io::Result<Socket> {
    match family {
        Family::V4 => Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4)),
        Family::V6 => Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6)),
    }
}

/// The ICMP message in what a raw socket of `family` read: an IPv4 raw socket gives the
/// IP header too (the kernel checked it), an ICMPv6 one the message alone. `None` for
/// anything but a path MTU error.
fn path_mtu_error(family: Family, read: &[u8]) -> Option<(&[u8], IcmpFrom)> {
    let (msg, from, path_mtu_type) = match family {
        Family::V4 => {
            let ip = ipv4::Packet::new_checked(read).ok()?;
            (&read[ip.header_len()..usize::from(ip.total_len())], IcmpFrom::V4, V4_DEST_UNREACHABLE)
        }
        Family::V6 => (read, IcmpFrom::V6(None), V6_PACKET_TOO_BIG),
    };
    (msg.first() == Some(&path_mtu_type)).then_some((msg, from))
}

/// Network → core: the path MTU errors of one family, for as long as the daemon runs; a
/// failed read counts in `recv_errors`.
pub fn icmp_loop(core: &Ipsec, recv_errors: &AtomicU64, sock: &Socket, family: Family) {
    // ICMP errors are at most 576 (IPv4) or 1280 (IPv6) bytes; routers that quote more
    // (RFC 4884) are read whole up to the largest IP packet.
    let mut buf = vec![0u8; 65_535];
    let mut reader = sock;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                recv_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("reading the ICMP socket ({family:?}): {e}");
                continue;
            }
        };
        let Some((msg, from)) = path_mtu_error(family, &buf[..n]) else { continue };
        match core.icmp_error(msg, from) {
            // Logged by the daemon's tick with the core's events.
            Ok(Learned::Lowered(_) | Learned::Unchanged | Learned::NotOurs) => {}
            Err(why) => tracing::debug!("an ICMP path MTU error ({family:?}) dropped: {why}"),
        }
    }
}

/// The other path MTU signal: our own kernel refusing a send as larger than the route's
/// MTU (EMSGSIZE; for a UDP GSO send, EINVAL). That happens where the gateway's own link is
/// the narrow one (a PPPoE uplink of 1492 under a TUN sized for 1500): no router is there
/// to send an ICMP error, so without this the packets would be refused for ever and their
/// senders never told. (A path MTU the kernel cached from a router's error refuses our
/// sends too, briefly, until the core has read the same error: learned here as well.)
/// The route's MTU is asked of the kernel (`IP_MTU` on a UDP socket connected to
/// the packet's destination, with ipsecd's mark, as its own sends are routed) and the core
/// learns it for the SA that sent the packet ([`Ipsec::local_path_mtu`]). Only on a
/// refused send: a socket and three system calls each, and once the core knows, the
/// packets that would be refused are no longer sent.
pub struct SendTooBig {
    core: OnceLock<Weak<Ipsec>>,
    mark: u32,
}

impl SendTooBig {
    /// With the mark ipsecd's sends carry (0: none).
    pub fn new(mark: u32) -> SendTooBig {
        SendTooBig { core: OnceLock::new(), mark }
    }

    /// The core to tell (made after the sockets' owner, which holds this).
    pub fn attach(&self, core: &Arc<Ipsec>) {
        let _ = self.core.set(Arc::downgrade(core));
    }

    /// `packet` (a whole outer packet) was refused as too big: learn its route's MTU.
    pub fn refused(&self, packet: &[u8]) {
        let Some(core) = self.core.get().and_then(Weak::upgrade) else { return };
        let Some(dst) = destination(packet) else { return };
        match route_mtu(dst, self.mark) {
            Ok(mtu) => match core.local_path_mtu(packet, mtu) {
                Ok(_) => {}
                Err(why) => tracing::debug!("a send to {dst} refused as too big: {why}"),
            },
            Err(e) => tracing::debug!("the route MTU to {dst}: {e}"),
        }
    }
}

/// The MTU of the kernel's route to `dst` (its cached path MTU, or the device's).
fn route_mtu(dst: IpAddr, mark: u32) -> std::io::Result<u32> {
    let s = Socket::new(Domain::for_address(SocketAddr::new(dst, 0)), Type::DGRAM, Some(Protocol::UDP))?;
    if mark != 0 {
        s.set_mark(mark)?;
    }
    // Connecting a UDP socket sends nothing; it looks the route up. IP_MTU answers for an
    // IPv6 socket too (Linux hands SOL_IP options of UDP sockets to the IPv4 code, which
    // reads the socket's cached route).
    s.connect(&SockAddr::from(SocketAddr::new(dst, 9)))?;
    Ok(getsockopt(&s, sockopt::IpMtu)?.max(0) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_path_mtu_errors_are_handed_on() {
        // IPv4: a 20-byte header (total length 28) in front of an 8-byte ICMP message.
        let mut v4 = vec![0x45, 0, 0, 28, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        v4.extend_from_slice(&[3, 4, 0, 0, 0, 0, 5, 0x14]);
        let (msg, from) = path_mtu_error(Family::V4, &v4).unwrap();
        assert_eq!((msg, from), (&v4[20..], IcmpFrom::V4));
        v4[20] = 8; // an echo request
        assert!(path_mtu_error(Family::V4, &v4).is_none());
        assert!(path_mtu_error(Family::V4, &v4[..10]).is_none());
        let v6 = [2u8, 0, 0, 0, 0, 0, 5, 0x14];
        assert_eq!(path_mtu_error(Family::V6, &v6), Some((&v6[..], IcmpFrom::V6(None))));
        assert!(path_mtu_error(Family::V6, &[128, 0, 0, 0]).is_none());
        assert!(path_mtu_error(Family::V6, &[]).is_none());
    }

    #[test]
    fn the_route_mtu_is_the_kernels() {
        // Loopback's MTU (65536), both families.
        for dst in ["127.0.0.1", "::1"] {
            let mtu = route_mtu(dst.parse().unwrap(), 0).unwrap();
            assert!(mtu >= 1280, "{dst}: {mtu}");
        }
    }
}
