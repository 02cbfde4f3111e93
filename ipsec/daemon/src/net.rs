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
//! sends them as they are through one raw socket with the header included; the kernel only
//! routes them. Received ESP comes whole from the raw ESP socket (IPv4 raw sockets include
//! the header); ESP in UDP comes as the UDP payload, and the loop puts back the IP and UDP
//! headers the core parses (the local address from IP_PKTINFO).
//!
//! Each loop is its own thread, so encryption (the TUN side) and decryption (the network
//! side) run on different cores. One packet per system call for now: the batched path
//! (recvmmsg/sendmmsg, TUN offloads) is the next step, measured against this one.

use std::io::{IoSliceMut, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ipsec_core::{Ipsec, Packet, Sink, HEADROOM, TAILROOM};
use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrIn};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tun_rs::SyncDevice;

/// The largest IP packet either side reads.
pub const MAX_PACKET: usize = 65535;

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
    pub raw_out: Socket,
    pub io: Arc<IoCounters>,
}

impl Sink for NetSink {
    fn transmit(&self, p: Packet) {
        let b = p.bytes();
        let dst = match b.first().map(|v| v >> 4) {
            Some(4) if b.len() >= 20 => IpAddr::V4(Ipv4Addr::new(b[16], b[17], b[18], b[19])),
            _ => {
                self.io.send_errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        if let Err(e) = self.raw_out.send_to(b, &SockAddr::from(SocketAddr::new(dst, 0))) {
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

/// The raw socket every outbound packet leaves through (IPPROTO_RAW: the header is ours).
pub fn raw_out_v4() -> std::io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(libc_ipproto_raw())))?;
    s.set_header_included_v4(true)?;
    Ok(s)
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

/// The raw socket ESP arrives on (IPv4: with its IP header).
pub fn esp_in_v4() -> std::io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(50)))?;
    big_receive_buffer(&s);
    Ok(s)
}

/// The UDP socket of ESP in UDP (RFC 3948), with IP_PKTINFO so the local address of each
/// datagram is known.
pub fn udp_v4(port: u16) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.bind(&SockAddr::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)))?;
    setsockopt(&s, sockopt::Ipv4PacketInfo, &true).map_err(std::io::Error::from)?;
    big_receive_buffer(&s);
    Ok(s)
}

/// A fresh packet buffer with room for the core's headers in front and trailer behind.
fn buffer() -> Vec<u8> {
    vec![0u8; HEADROOM + MAX_PACKET + TAILROOM]
}

/// Protected side → core: every packet read from the TUN goes to `Ipsec::output`.
pub fn tun_loop(core: &Ipsec, tun: &SyncDevice, io: &IoCounters) {
    loop {
        let mut data = buffer();
        let n = match tun.recv(&mut data[HEADROOM..HEADROOM + MAX_PACKET]) {
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

/// Network → core: ESP from the raw socket, whole IPv4 packets.
pub fn esp_loop(core: &Ipsec, sock: &Socket, io: &IoCounters) {
    loop {
        let mut data = buffer();
        let n = match (&*sock).read(&mut data[..MAX_PACKET]) {
            Ok(n) => n,
            Err(e) => {
                io.recv_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("reading the ESP socket: {e}");
                continue;
            }
        };
        data.truncate(n);
        let _ = core.input(Packet { data, head: 0 });
    }
}

/// Network → core: ESP in UDP. The datagram's payload is read behind room for the IPv4 and
/// UDP headers it came with, which are written back so the core sees the packet as sent.
pub fn udp_loop(core: &Ipsec, sock: &Socket, port: u16, io: &IoCounters) {
    const HDRS: usize = 28;
    loop {
        let mut data = buffer();
        let (n, src, dst) = {
            let mut iov = [IoSliceMut::new(&mut data[HEADROOM + HDRS..HEADROOM + MAX_PACKET])];
            let mut cmsg = nix::cmsg_space!(libc_in_pktinfo);
            match recvmsg::<SockaddrIn>(sock.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::empty()) {
                Ok(m) => {
                    let dst = m.cmsgs().ok().and_then(|mut c| {
                        c.find_map(|c| match c {
                            ControlMessageOwned::Ipv4PacketInfo(pi) => {
                                Some(Ipv4Addr::from(u32::from_be(pi.ipi_addr.s_addr)))
                            }
                            _ => None,
                        })
                    });
                    match (m.address, dst) {
                        (Some(a), Some(d)) => (m.bytes, SocketAddrV4::new(a.ip(), a.port()), d),
                        _ => {
                            io.recv_errors.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    }
                }
                Err(e) => {
                    io.recv_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!("reading the UDP socket: {e}");
                    continue;
                }
            }
        };
        let total = HDRS + n;
        let h = &mut data[HEADROOM..HEADROOM + HDRS];
        h[..12].copy_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        h[12..16].copy_from_slice(&src.ip().octets());
        h[16..20].copy_from_slice(&dst.octets());
        let sum = ipsec_wire::checksum::checksum(&h[..20]);
        h[10..12].copy_from_slice(&sum.to_be_bytes());
        h[20..22].copy_from_slice(&src.port().to_be_bytes());
        h[22..24].copy_from_slice(&port.to_be_bytes());
        h[24..26].copy_from_slice(&((8 + n) as u16).to_be_bytes());
        // Checksum 0: none, as RFC 3948 §2.1 sends it over IPv4 (the kernel verified any).
        h[26..28].copy_from_slice(&[0, 0]);
        data.truncate(HEADROOM + total);
        let _ = core.input(Packet { data, head: HEADROOM });
    }
}

/// `struct in_pktinfo`'s size class for `cmsg_space!`.
#[allow(non_camel_case_types)]
type libc_in_pktinfo = [u8; 12];
