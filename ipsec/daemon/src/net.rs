//! The gateway's I/O: the TUN device on the protected side, raw IP and UDP sockets on the
//! network side, and the loops that hand every packet to the Fast IPsec core.
//!
//! ```text
//!  TUN ── tun_loop ── Ipsec::output ──► NetSink::transmit ── raw socket (IP_HDRINCL) ──► network
//!  network ── raw ESP socket ── esp_loop ─┐
//!  network ── UDP 4500 ──────── udp_loop ─┴─ Ipsec::input ──► NetSink::deliver ──► TUN
//! ```
//!
//! The core builds whole outer packets (IP header, UDP for NAT-T, ESP), so the network side
//! sends them as they are through a raw socket per family with the header included; the
//! kernel only routes them. Received ESP comes from a raw ESP socket per family (IPv4 raw
//! sockets include the header; for IPv6 the loop writes it back); ESP in UDP comes as the
//! UDP payload, and the loop puts back the IP and UDP headers the core parses (the local
//! address from the packet-info option).
//!
//! Each loop is its own thread, so encryption (the TUN side) and decryption (the network
//! side) run on different cores. One packet per system call for now: the batched path
//! (recvmmsg/sendmmsg, TUN offloads) is the next step, measured against this one.

use std::io::{IoSliceMut, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ipsec_core::{Ipsec, Packet, Sink, HEADROOM, TAILROOM};
use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrIn, SockaddrIn6,
};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tun_rs::SyncDevice;

/// The largest IP packet either side reads: the TUN's MTU plus room for ESP's overhead and
/// outer headers on the network side. A larger packet from the network is cut short by the
/// read and then dropped as malformed (counted); both gateways use the same MTU.
///
/// Every packet gets a fresh zeroed buffer of this size. (The first cut read into 64 KiB
/// buffers; iperf3 through two gateways measured the same with either, 590 and 608 Mbit/s,
/// but there is no reason to zero and hold 64 KiB per packet in flight.)
pub fn max_packet(mtu: u16) -> usize {
    usize::from(mtu) + 512
}

/// Errors of the I/O itself (the core counts its own drops).
#[derive(Default)]
pub struct IoCounters {
    pub send_errors: AtomicU64,
    pub tun_write_errors: AtomicU64,
    pub recv_errors: AtomicU64,
}

/// Where the core's results go: ESP to the network, decapsulated packets to the TUN.
pub struct NetSink {
    pub tun: Arc<SyncDevice>,
    /// Whole IPv4 packets out (IPPROTO_RAW).
    pub raw4: Socket,
    /// Whole IPv6 packets out (IPPROTO_RAW with IPV6_HDRINCL).
    pub raw6: Socket,
    pub io: Arc<IoCounters>,
}

impl Sink for NetSink {
    fn transmit(&self, p: Packet) {
        let b = p.bytes();
        let (sock, dst) = match b.first().map(|v| v >> 4) {
            Some(4) if b.len() >= 20 => (&self.raw4, IpAddr::V4(Ipv4Addr::new(b[16], b[17], b[18], b[19]))),
            Some(6) if b.len() >= 40 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(&b[24..40]);
                (&self.raw6, IpAddr::V6(Ipv6Addr::from(a)))
            }
            _ => {
                self.io.send_errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        if let Err(e) = sock.send_to(b, &SockAddr::from(SocketAddr::new(dst, 0))) {
            self.io.send_errors.fetch_add(1, Ordering::Relaxed);
            tracing::debug!("sending {} bytes to {dst}: {e}", b.len());
        }
    }

    fn deliver(&self, p: Packet) {
        if let Err(e) = self.tun.send(p.bytes()) {
            self.io.tun_write_errors.fetch_add(1, Ordering::Relaxed);
            tracing::debug!("writing {} bytes to the TUN: {e}", p.bytes().len());
        }
    }
}

/// The raw socket every outbound packet of `family` leaves through (IPPROTO_RAW: the
/// header is ours; the kernel only routes the packet).
pub fn raw_out(family: Family) -> std::io::Result<Socket> {
    let s = Socket::new(family.domain(), Type::RAW, Some(Protocol::from(libc_ipproto_raw())))?;
    match family {
        Family::V4 => s.set_header_included_v4(true)?,
        Family::V6 => s.set_header_included_v6(true)?,
    }
    Ok(s)
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

    /// The IP header the loops write back in front of what a socket returns.
    fn header_len(self) -> usize {
        match self {
            Family::V4 => 20,
            Family::V6 => 40,
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

fn big_receive_buffer(s: &Socket) {
    // As root, past net.core.rmem_max; otherwise as large as that allows.
    if setsockopt(s, sockopt::RcvBufForce, &RECV_BUFFER).is_err() {
        let _ = s.set_recv_buffer_size(RECV_BUFFER);
    }
}

/// The raw socket ESP of `family` arrives on, with the packet-info option that tells the
/// local address each packet was sent to.
pub fn esp_in(family: Family) -> std::io::Result<Socket> {
    let s = Socket::new(family.domain(), Type::RAW, Some(Protocol::from(50)))?;
    packet_info(&s, family)?;
    big_receive_buffer(&s);
    Ok(s)
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
pub fn udp(family: Family, port: u16) -> std::io::Result<Socket> {
    let s = Socket::new(family.domain(), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    let any = match family {
        Family::V4 => SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port),
        Family::V6 => {
            s.set_only_v6(true)?;
            SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), port)
        }
    };
    s.bind(&SockAddr::from(any))?;
    packet_info(&s, family)?;
    big_receive_buffer(&s);
    Ok(s)
}

/// A fresh packet buffer for packets of up to `max` bytes, with room for the core's
/// headers in front and trailer behind.
fn buffer(max: usize) -> Vec<u8> {
    vec![0u8; HEADROOM + max + TAILROOM]
}

/// Protected side → core: every packet read from the TUN goes to `Ipsec::output`.
pub fn tun_loop(core: &Ipsec, tun: &SyncDevice, max: usize, io: &IoCounters) {
    loop {
        let mut data = buffer(max);
        let n = match tun.recv(&mut data[HEADROOM..HEADROOM + max]) {
            Ok(n) => n,
            Err(e) => {
                io.recv_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("reading the TUN: {e}");
                continue;
            }
        };
        data.truncate(HEADROOM + n);
        // A drop is counted by the core under its reason.
        let _ = core.output(Packet { data, head: HEADROOM });
    }
}

/// One datagram or raw packet as a socket gave it: its length, where it came from (address
/// and port), and the local address it was sent to.
struct Received {
    len: usize,
    src: SocketAddr,
    dst: IpAddr,
}

/// Reads into `buf` with recvmsg, collecting the sender and the packet-info local address.
fn receive(sock: &Socket, family: Family, buf: &mut [u8]) -> nix::Result<Option<Received>> {
    let mut iov = [IoSliceMut::new(buf)];
    let mut cmsg = nix::cmsg_space!(libc_in6_pktinfo);
    let fd = sock.as_raw_fd();
    let flags = MsgFlags::empty();
    Ok(match family {
        Family::V4 => {
            let m = recvmsg::<SockaddrIn>(fd, &mut iov, Some(&mut cmsg), flags)?;
            let dst = local_address(&m);
            match (m.address, dst) {
                (Some(a), Some(dst)) => {
                    Some(Received { len: m.bytes, src: SocketAddrV4::new(a.ip(), a.port()).into(), dst })
                }
                _ => None,
            }
        }
        Family::V6 => {
            let m = recvmsg::<SockaddrIn6>(fd, &mut iov, Some(&mut cmsg), flags)?;
            let dst = local_address(&m);
            match (m.address, dst) {
                (Some(a), Some(dst)) => Some(Received {
                    len: m.bytes,
                    src: SocketAddrV6::new(a.ip(), a.port(), 0, 0).into(),
                    dst,
                }),
                _ => None,
            }
        }
    })
}

/// The local address a packet was sent to, from its packet-info control message.
fn local_address<S>(m: &nix::sys::socket::RecvMsg<'_, '_, S>) -> Option<IpAddr> {
    m.cmsgs().ok()?.find_map(|c| match c {
        ControlMessageOwned::Ipv4PacketInfo(pi) => {
            Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(pi.ipi_addr.s_addr))))
        }
        ControlMessageOwned::Ipv6PacketInfo(pi) => Some(IpAddr::V6(Ipv6Addr::from(pi.ipi6_addr.s6_addr))),
        _ => None,
    })
}

/// Network → core: ESP from the raw socket. IPv4 raw sockets return the whole packet; IPv6
/// ones only the payload, so its header is written back from the addresses.
pub fn esp_loop(core: &Ipsec, sock: &Socket, family: Family, max: usize, io: &IoCounters) {
    loop {
        let mut data = buffer(max);
        let packet = match family {
            Family::V4 => match (&*sock).read(&mut data[HEADROOM..HEADROOM + max]) {
                Ok(n) => {
                    data.truncate(HEADROOM + n);
                    Packet { data, head: HEADROOM }
                }
                Err(e) => {
                    io.recv_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!("reading the ESP socket: {e}");
                    continue;
                }
            },
            Family::V6 => {
                let at = HEADROOM + 40;
                match receive(sock, family, &mut data[at..HEADROOM + max]) {
                    Ok(Some(r)) => {
                        write_ip_header(&mut data[HEADROOM..at], r.src.ip(), r.dst, 40 + r.len, 50);
                        data.truncate(at + r.len);
                        Packet { data, head: HEADROOM }
                    }
                    other => {
                        io.recv_errors.fetch_add(1, Ordering::Relaxed);
                        if let Err(e) = other {
                            tracing::warn!("reading the ESP socket: {e}");
                        }
                        continue;
                    }
                }
            }
        };
        let _ = core.input(packet);
    }
}

/// Network → core: ESP in UDP. The datagram's payload is read behind room for the IP and
/// UDP headers it came with, which are written back so the core sees the packet as sent.
pub fn udp_loop(core: &Ipsec, sock: &Socket, family: Family, port: u16, max: usize, io: &IoCounters) {
    let ip = family.header_len();
    let hdrs = ip + 8;
    loop {
        let mut data = buffer(max);
        let r = match receive(sock, family, &mut data[HEADROOM + hdrs..HEADROOM + max]) {
            Ok(Some(r)) => r,
            other => {
                io.recv_errors.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = other {
                    tracing::warn!("reading the UDP socket: {e}");
                }
                continue;
            }
        };
        let total = hdrs + r.len;
        write_ip_header(&mut data[HEADROOM..HEADROOM + ip], r.src.ip(), r.dst, total, 17);
        let udp = &mut data[HEADROOM + ip..HEADROOM + total];
        udp[0..2].copy_from_slice(&r.src.port().to_be_bytes());
        udp[2..4].copy_from_slice(&port.to_be_bytes());
        udp[4..6].copy_from_slice(&((8 + r.len) as u16).to_be_bytes());
        // Over IPv4, 0: none, as RFC 3948 §2.1 sends it (the kernel verified any). Over
        // IPv6 a checksum is required, so it is computed again.
        udp[6..8].copy_from_slice(&[0, 0]);
        if let (IpAddr::V6(src), IpAddr::V6(dst)) = (r.src.ip(), r.dst) {
            ipsec_wire::udp::Packet::new_unchecked(&mut *udp)
                .fill_checksum(&ipsec_wire::PseudoHeader::V6 { src, dst });
        }
        data.truncate(HEADROOM + total);
        let _ = core.input(Packet { data, head: HEADROOM });
    }
}

/// Writes the IPv4 (20 bytes, with its checksum) or IPv6 (40 bytes) header of a packet of
/// `total` bytes from `src` to `dst` carrying `proto`.
fn write_ip_header(h: &mut [u8], src: IpAddr, dst: IpAddr, total: usize, proto: u8) {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            h[..12].copy_from_slice(&[
                0x45,
                0,
                (total >> 8) as u8,
                total as u8,
                0,
                0,
                0x40,
                0,
                64,
                proto,
                0,
                0,
            ]);
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let sum = ipsec_wire::checksum::checksum(&h[..20]);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let plen = total - 40;
            h[..8].copy_from_slice(&[0x60, 0, 0, 0, (plen >> 8) as u8, plen as u8, proto, 64]);
            h[8..24].copy_from_slice(&s.octets());
            h[24..40].copy_from_slice(&d.octets());
        }
        // A socket of one family reports addresses of that family.
        _ => {}
    }
}

/// `struct in6_pktinfo`'s size class for `cmsg_space!` (it also fits `in_pktinfo`).
#[allow(non_camel_case_types)]
type libc_in6_pktinfo = [u8; 20];
