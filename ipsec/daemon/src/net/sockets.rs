//! The sockets of the network side: raw IP out (the core writes every header; the kernel
//! only routes), raw ESP, AH, IPComp and IP-in-IP in, and the UDP socket of ESP in UDP.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use nix::sys::socket::{setsockopt, sockopt};
use nix::{libc, setsockopt_impl, sockopt_impl};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use ipsec_core::{HEADROOM, TAILROOM};

/// The raw socket every outbound packet of `family` leaves through (IPPROTO_RAW: the
/// header is ours; the kernel only routes the packet).
pub fn raw_out(family: Family, mark: u32) -> std::io::Result<Socket> {
    let s = Socket::new(family.domain(), Type::RAW, Some(Protocol::from(libc_ipproto_raw())))?;
    set_mark(&s, mark)?;
    match family {
        Family::V4 => s.set_header_included_v4(true)?,
        Family::V6 => s.set_header_included_v6(true)?,
    }
    Ok(s)
}

/// Marks what `s` sends with `mark` (0: leaves it unmarked), so that the rule ipsecd
/// installs keeps it out of the TUN's routing table (see [`crate::routing`]).
fn set_mark(s: &Socket, mark: u32) -> std::io::Result<()> {
    if mark != 0 {
        s.set_mark(mark)?;
    }
    Ok(())
}

/// The network side's address family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    fn domain(self) -> Domain {
        match self {
            Family::V4 => Domain::IPV4,
            Family::V6 => Domain::IPV6,
        }
    }
}

/// IPPROTO_RAW (255), which socket2 has no constant for.
const fn libc_ipproto_raw() -> i32 {
    255
}

/// Receive buffers of the network sockets. The kernel's default (about 200 KiB, 150
/// full-size packets) overflowed under a TCP transfer while the receiving thread was busy
/// decrypting (TCP then retransmitted a fifth of the packets).
const RECV_BUFFER: usize = 8 << 20;

pub(super) fn big_receive_buffer(s: &Socket) {
    // As root, past net.core.rmem_max; otherwise as large as that allows.
    if setsockopt(s, sockopt::RcvBufForce, &RECV_BUFFER).is_err() {
        let _ = s.set_recv_buffer_size(RECV_BUFFER);
    }
}

/// The raw socket ESP of `family` arrives on, with the packet-info option that tells the
/// local address each packet was sent to.
pub fn esp_in(family: Family) -> std::io::Result<Socket> {
    raw_in(family, 50)
}

/// The raw socket AH (RFC 4302) of `family` arrives on. AH's ICV covers the IP header
/// and the extension headers in front of AH: an IPv4 raw socket returns the whole packet;
/// an IPv6 one returns what follows them, so this one also asks for the hop limit and
/// those headers as control messages (RFC 3542 §4: IPV6_RECVHOPLIMIT, IPV6_RECVHOPOPTS,
/// IPV6_RECVDSTOPTS, IPV6_RECVRTHDR), from which the packet is put back together
/// (`net::front`).
pub fn ah_in(family: Family) -> std::io::Result<Socket> {
    let s = raw_in(family, 51)?;
    if family == Family::V6 {
        setsockopt(&s, sockopt::Ipv6RecvHopLimit, &true)?;
        setsockopt(&s, RecvHopOpts, &true)?;
        setsockopt(&s, RecvDstOpts, &true)?;
        setsockopt(&s, RecvRoutingHeader, &true)?;
    }
    Ok(s)
}

/// The raw sockets of `family` IPComp (RFC 3173) arrives on: protocol 108, and the
/// IP-in-IP (4: IPv4 inside, 41: IPv6 inside) an IPComp peer sends when compressing did
/// not pay (§2.2). The IP-in-IP sockets see every tunnel packet of the host (copies: the
/// kernel's own tunnels still get theirs); the core keeps those between an IPComp SA's
/// ends and drops the rest as `not_ipcomp`.
pub fn ipcomp_in(family: Family) -> std::io::Result<[(u8, Socket); 3]> {
    Ok([(108, raw_in(family, 108)?), (4, raw_in(family, 4)?), (41, raw_in(family, 41)?)])
}

/// A raw socket for IP protocol `proto` of `family`, with packet info (and, IPv6, the
/// traffic class) and a large receive buffer.
fn raw_in(family: Family, proto: i32) -> std::io::Result<Socket> {
    let s = Socket::new(family.domain(), Type::RAW, Some(Protocol::from(proto)))?;
    packet_info(&s, family)?;
    if family == Family::V6 {
        outer_tos(&s, family)?;
    }
    big_receive_buffer(&s);
    Ok(s)
}

/// Asks for the IP header's ECN field with each packet (for RFC 6040 at decapsulation: the
/// core reads it from an IPv4 raw socket's packets itself).
fn outer_tos(s: &Socket, family: Family) -> std::io::Result<()> {
    match family {
        Family::V4 => setsockopt(s, sockopt::IpRecvTos, &true),
        Family::V6 => setsockopt(s, sockopt::Ipv6RecvTClass, &true),
    }
    .map_err(std::io::Error::from)
}

fn packet_info(s: &Socket, family: Family) -> std::io::Result<()> {
    match family {
        Family::V4 => setsockopt(s, sockopt::Ipv4PacketInfo, &true),
        Family::V6 => setsockopt(s, sockopt::Ipv6RecvPacketInfo, &true),
    }
    .map_err(std::io::Error::from)
}

/// The UDP socket of ESP in UDP (RFC 3948) for `family`, with packet info so the local
/// address of each datagram is known.
pub fn udp(family: Family, port: u16, mark: u32) -> std::io::Result<Socket> {
    udp_socket(family, port, mark, false)
}

/// `n` UDP sockets of ESP in UDP on one port, one per worker (`--threads`): for `n` > 1 an
/// SO_REUSEPORT group whose datagrams the kernel spreads by SPI ([`super::spread`]).
pub fn udp_group(family: Family, port: u16, mark: u32, n: usize) -> std::io::Result<Vec<Socket>> {
    if n <= 1 {
        return Ok(vec![udp(family, port, mark)?]);
    }
    let group = (0..n).map(|_| udp_socket(family, port, mark, true)).collect::<std::io::Result<Vec<_>>>()?;
    super::spread::spread_by_spi(&group[0], n as u32)?;
    Ok(group)
}

/// The UDP socket of IKE (`--ike-port`, 500) for `family`: packet info, so that the local
/// address of each datagram is known and answers leave from it; no GRO (every datagram is
/// one IKE message, for the relay, [`crate::ike_relay`]).
pub fn ike(family: Family, port: u16, mark: u32) -> std::io::Result<Socket> {
    bound_udp(family, port, mark, false)
}

/// A UDP socket of `family` bound to `port` on every address, with `mark`, address reuse
/// (and port reuse when `reuse_port`: a group sharing the port) and packet info; what
/// every UDP socket here starts as.
fn bound_udp(family: Family, port: u16, mark: u32, reuse_port: bool) -> std::io::Result<Socket> {
    let s = Socket::new(family.domain(), Type::DGRAM, Some(Protocol::UDP))?;
    set_mark(&s, mark)?;
    s.set_reuse_address(true)?;
    if reuse_port {
        s.set_reuse_port(true)?;
    }
    let any = match family {
        Family::V4 => SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port),
        Family::V6 => {
            s.set_only_v6(true)?;
            SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), port)
        }
    };
    s.bind(&SockAddr::from(any))?;
    packet_info(&s, family)?;
    Ok(s)
}

fn udp_socket(family: Family, port: u16, mark: u32, reuse_port: bool) -> std::io::Result<Socket> {
    let s = bound_udp(family, port, mark, reuse_port)?;
    outer_tos(&s, family)?;
    big_receive_buffer(&s);
    // Coalesced datagrams (udp_loop cuts them up); a kernel without UDP GRO gives them
    // one by one.
    if let Err(e) = setsockopt(&s, sockopt::UdpGroSegment, &true) {
        tracing::info!("UDP GRO not available ({family:?}): {e}");
    }
    Ok(s)
}

/// The size of every packet buffer: room for the core's headers in front, a packet of up
/// to `max` bytes, and the trailer behind.
pub(super) fn buffer_size(max: usize) -> usize {
    HEADROOM + max + TAILROOM
}

// RFC 3542's options that nix has no type for, declared through nix's own macro for that
// (its `setsockopt` then sets them as it sets its own options: an int, 1 or 0).
sockopt_impl!(
    /// IPV6_RECVHOPOPTS: the Hop-by-Hop Options header with each packet.
    RecvHopOpts,
    SetOnly,
    libc::IPPROTO_IPV6,
    libc::IPV6_RECVHOPOPTS,
    bool
);
sockopt_impl!(
    /// IPV6_RECVDSTOPTS: each Destination Options header in front of the payload.
    RecvDstOpts,
    SetOnly,
    libc::IPPROTO_IPV6,
    libc::IPV6_RECVDSTOPTS,
    bool
);
sockopt_impl!(
    /// IPV6_RECVRTHDR: the Routing header, as it arrived.
    RecvRoutingHeader,
    SetOnly,
    libc::IPPROTO_IPV6,
    libc::IPV6_RECVRTHDR,
    bool
);
