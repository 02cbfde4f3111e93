//! The gateway's I/O: the TUN device on the protected side, raw IP and UDP sockets on the
//! network side, and the loops that hand every packet to the Fast IPsec core.
//!
//! ```text
//!  TUN ── tun_loop ── Ipsec::output ──► NetSink::transmit ── raw socket (IP_HDRINCL) ──► network
//!  network ── raw ESP socket ── esp_loop ── Ipsec::input_via(Via::Esp) ─┐
//!  network ── UDP --udp-port ── udp_loop ── Ipsec::input_via(Via::Udp) ─┴─► NetSink::deliver ──► TUN
//! ```
//!
//! The core builds whole outer packets (IP header, UDP for NAT-T, ESP), so the network side
//! sends them as they are through a raw socket per family with the header included; the
//! kernel only routes them. Received ESP comes from a raw ESP socket per family (IPv4 raw
//! sockets include the header; for IPv6 the loop writes it back); ESP in UDP comes as the
//! UDP payload, and the loop puts back the IP and UDP headers the core parses (the local
//! address from the packet-info option). Each loop tells the core which socket a packet
//! came through ([`Via`]): nothing from the network sockets is clear traffic, so nothing
//! but decapsulated ESP ever reaches the TUN (a stray datagram delivered there would come
//! straight back to our own socket, and loop).
//!
//! Each loop is its own thread, so encryption (the TUN side) and decryption (the network
//! side) run on different cores. Each reads a batch per system call (recvmmsg; the TUN
//! with its offloads, see [`tun_loop`]) and sends what the core made of it with one more
//! ([`batch`]). A network packet is read whole up to the largest the socket can deliver
//! (64 KiB: a peer's kernel may fragment ESP and ours reassemble it; jumbo frames): the
//! buffers are sized for the MTU, and what goes past one continues in a spill area of its
//! own (`Receiver`). A packet larger still is cut short by the kernel (MSG_TRUNC) and
//! counted as [`Drop::Truncated`].

use std::io::{IoSlice, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ipsec_core::stats::Drop;
use ipsec_core::{Ipsec, Packet, Sink, Via, HEADROOM, TAILROOM};
use nix::sys::socket::{
    recvmmsg, sendmmsg, sendmsg, setsockopt, sockopt, ControlMessage, ControlMessageOwned, MsgFlags,
    MultiHeaders, SockaddrIn, SockaddrIn6, SockaddrLike,
};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tun_rs::{SyncDevice, VIRTIO_NET_HDR_LEN};

use crate::afpacket::Links;
use crate::batch::{self, Pool, Stash, BATCH};
use crate::coalesce::Coalescer;

/// The largest IP packet a packet buffer holds: the TUN's MTU plus room for ESP's overhead
/// and outer headers on the network side. A larger packet from the network (a peer that
/// lets its kernel fragment ESP, or another MTU) still arrives whole: its read continues
/// in a spill area and the packet gets a buffer of its own (`Receiver`).
///
/// Buffers of this size come from a pool and are reused, not zeroed per packet. (The first
/// cut read into 64 KiB buffers; iperf3 through two gateways measured the same with either,
/// 590 and 608 Mbit/s, but there is no reason to zero and hold 64 KiB per packet in flight.)
pub fn max_packet(mtu: u16) -> usize {
    usize::from(mtu) + 512
}

/// The gateway's own I/O counters (the core counts its drops): errors of the I/O itself,
/// the kernel's link-scope packets the TUN loop drops before the core, and the
/// NAT-keepalives sent.
#[derive(Default)]
pub struct IoCounters {
    pub send_errors: AtomicU64,
    pub tun_write_errors: AtomicU64,
    pub recv_errors: AtomicU64,
    /// Packets into the TUN to a link-local or multicast address: the kernel's own
    /// neighbour discovery and group reports on an interface that has no link layer. No
    /// policy carries them; sent as they are, they would come straight back into the TUN
    /// (or leak out of another interface).
    pub tun_link_scope: AtomicU64,
    /// NAT-keepalives sent ([`crate::keepalive`]).
    pub keepalives_sent: AtomicU64,
    /// Raw ESP packets sent through the packet socket ([`crate::afpacket`]).
    pub packet_socket_sent: AtomicU64,
}

impl IoCounters {
    /// Every counter, by the name `ipsecctl stats` and the metrics give it.
    pub fn all(&self) -> [(&'static str, u64); 6] {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            ("send_errors", r(&self.send_errors)),
            ("tun_write_errors", r(&self.tun_write_errors)),
            ("receive_errors", r(&self.recv_errors)),
            ("tun_link_scope", r(&self.tun_link_scope)),
            ("keepalives_sent", r(&self.keepalives_sent)),
            ("packet_socket_sent", r(&self.packet_socket_sent)),
        ]
    }
}

/// `send_errors 0, tun_write_errors 0, …`: every counter, for `ipsecctl stats` and the log.
impl std::fmt::Display for IoCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (name, n)) in self.all().iter().enumerate() {
            write!(f, "{}{name} {n}", if i == 0 { "" } else { ", " })?;
        }
        Ok(())
    }
}

/// Whether a packet the kernel routed into the TUN is for a link-local or multicast
/// address (which no policy of a point-to-point tunnel carries).
fn link_scope(b: &[u8]) -> bool {
    match destination(b) {
        Some(IpAddr::V4(a)) => a.is_multicast() || a.is_broadcast() || a.is_link_local(),
        Some(IpAddr::V6(a)) => a.is_multicast() || a.is_unicast_link_local(),
        None => false,
    }
}

/// Where the core's results go: ESP to the network, decapsulated packets to the TUN. On a
/// loop's thread they are stashed and sent a batch at a time ([`batch`]); elsewhere (an
/// asynchronous driver's completion) one at a time.
pub struct NetSink {
    pub tun: Arc<SyncDevice>,
    /// Whole IPv4 packets out (IPPROTO_RAW).
    pub raw4: Socket,
    /// Whole IPv6 packets out (IPPROTO_RAW with IPV6_HDRINCL).
    pub raw6: Socket,
    /// The UDP sockets of ESP in UDP (shared with the loops that read them): runs of
    /// datagrams to one peer leave through them as one UDP GSO send.
    pub udp4: Arc<Socket>,
    pub udp6: Arc<Socket>,
    /// Their local port.
    pub udp_port: u16,
    pub io: Arc<IoCounters>,
    /// Raw ESP out past the IP output path where the next hop is known (`--esp-out
    /// packet`, [`crate::afpacket`]); `None`: everything through `raw4`/`raw6`.
    pub packet: Option<crate::afpacket::PacketSocket>,
}

impl Sink for NetSink {
    fn transmit(&self, p: Packet) {
        if let Some(p) = batch::transmit(p) {
            self.transmit_one(&p);
        }
    }

    fn deliver(&self, p: Packet) {
        if let Some(p) = batch::deliver(p) {
            self.deliver_one(p);
        }
    }
}

/// Where a whole outbound packet goes: its family and destination address.
fn destination(b: &[u8]) -> Option<IpAddr> {
    match b.first().map(|v| v >> 4) {
        Some(4) if b.len() >= 20 => Some(IpAddr::V4(Ipv4Addr::new(b[16], b[17], b[18], b[19]))),
        Some(6) if b.len() >= 40 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[24..40]);
            Some(IpAddr::V6(Ipv6Addr::from(a)))
        }
        _ => None,
    }
}

impl NetSink {
    fn transmit_one(&self, p: &Packet) {
        let b = p.bytes();
        let (sock, dst) = match destination(b) {
            Some(dst @ IpAddr::V4(_)) => (&self.raw4, dst),
            Some(dst @ IpAddr::V6(_)) => (&self.raw6, dst),
            None => {
                self.io.send_errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        if let Err(e) = sock.send_to(b, &SockAddr::from(SocketAddr::new(dst, 0))) {
            self.io.send_errors.fetch_add(1, Ordering::Relaxed);
            tracing::debug!("sending {} bytes to {dst}: {e}", b.len());
        }
    }

    /// Sends a batch of whole packets. ESP in UDP from our port goes through the UDP
    /// socket, a run of equal-sized datagrams to one peer as one UDP GSO send (the kernel
    /// cuts it up, possibly in the receiver's device); everything else through the raw
    /// sockets, one sendmmsg per run of one family. Order is kept.
    fn transmit_batch(
        &self,
        out4: &mut MultiHeaders<SockaddrIn>,
        out6: &mut MultiHeaders<SockaddrIn6>,
        links: &mut Links,
        pkts: &[Packet],
    ) {
        let is_v4 = |p: &Packet| matches!(destination(p.bytes()), Some(IpAddr::V4(_)));
        let mut i = 0;
        while i < pkts.len() {
            if let Some(first) = Datagram::of(pkts[i].bytes(), self.udp_port) {
                let run = gso_run(&pkts[i..], &first, self.udp_port);
                self.send_gso(&pkts[i..i + run], &first);
                i += run;
                continue;
            }
            let v4 = is_v4(&pkts[i]);
            let run = pkts[i..]
                .iter()
                .take_while(|p| is_v4(p) == v4 && Datagram::of(p.bytes(), self.udp_port).is_none())
                .count();
            let mut now = &pkts[i..i + run];
            // Raw ESP through the packet socket, past the IP output path (afpacket.rs); what
            // it leaves (an unknown next hop, a check due) goes on below.
            if let Some(ps) = &self.packet {
                match links.send(ps, now, std::time::Instant::now()) {
                    Ok(sent) => {
                        self.io.packet_socket_sent.fetch_add(sent as u64, Ordering::Relaxed);
                        i += sent;
                        continue;
                    }
                    Err(n) => now = &now[..n],
                }
            }
            let sent = if v4 {
                self.sendmmsg(&self.raw4, out4, now, |d| match d {
                    IpAddr::V4(a) => Some(SockaddrIn::from(SocketAddrV4::new(a, 0))),
                    IpAddr::V6(_) => None,
                })
            } else {
                self.sendmmsg(&self.raw6, out6, now, |d| match d {
                    IpAddr::V6(a) => Some(SockaddrIn6::from(SocketAddrV6::new(a, 0, 0, 0))),
                    IpAddr::V4(_) => None,
                })
            };
            // A failure stops sendmmsg at that packet: it is counted and skipped.
            if sent == 0 {
                self.io.send_errors.fetch_add(1, Ordering::Relaxed);
                i += 1;
            } else {
                i += sent;
            }
        }
    }

    /// Sends the UDP payloads (ESP) of a run of datagrams to one peer with one sendmsg: the
    /// payloads as the I/O vector, the segment size in UDP_SEGMENT.
    fn send_gso(&self, run: &[Packet], first: &Datagram) {
        let iovs: Vec<IoSlice<'_>> = run.iter().map(|p| IoSlice::new(&p.bytes()[first.headers..])).collect();
        let segment = first.payload as u16;
        let gso = (run.len() > 1).then_some(&segment);
        if let Err(e) = self.send_udp(&iovs, gso, first.src, first.dst) {
            self.io.send_errors.fetch_add(run.len() as u64, Ordering::Relaxed);
            tracing::debug!("sending {} datagrams to {}: {e}", run.len(), first.dst);
        }
    }

    /// Sends a NAT-keepalive (RFC 3948 §2.3: the one octet 0xFF) from our address `src` and
    /// UDP port to `dst` ([`crate::keepalive`]); counted as sent, or as a send error.
    pub fn send_keepalive(&self, src: IpAddr, dst: SocketAddr) {
        let payload = [ipsec_wire::udp_encap::KEEPALIVE];
        match self.send_udp(&[IoSlice::new(&payload)], None, src, dst) {
            Ok(_) => {
                self.io.keepalives_sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.io.send_errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("sending a NAT-keepalive to {dst}: {e}");
            }
        }
    }

    /// One sendmsg on the UDP socket of `dst`'s family: `iovs` as one datagram, or with
    /// `gso` (UDP_SEGMENT) one per segment, from our address `src` (the packet-info option:
    /// the socket is bound to the wildcard address).
    fn send_udp(
        &self,
        iovs: &[IoSlice<'_>],
        gso: Option<&u16>,
        src: IpAddr,
        dst: SocketAddr,
    ) -> nix::Result<usize> {
        let mut cmsgs = Vec::with_capacity(2);
        if let Some(segment) = gso {
            cmsgs.push(ControlMessage::UdpGsoSegments(segment));
        }
        match (src, dst) {
            (IpAddr::V4(src), SocketAddr::V4(dst)) => {
                let pi = nix::libc::in_pktinfo {
                    ipi_ifindex: 0,
                    ipi_spec_dst: nix::libc::in_addr { s_addr: u32::from(src).to_be() },
                    ipi_addr: nix::libc::in_addr { s_addr: 0 },
                };
                cmsgs.push(ControlMessage::Ipv4PacketInfo(&pi));
                sendmsg(self.udp4.as_raw_fd(), iovs, &cmsgs, MsgFlags::empty(), Some(&SockaddrIn::from(dst)))
            }
            (IpAddr::V6(src), SocketAddr::V6(dst)) => {
                let pi = nix::libc::in6_pktinfo {
                    ipi6_addr: nix::libc::in6_addr { s6_addr: src.octets() },
                    ipi6_ifindex: 0,
                };
                cmsgs.push(ControlMessage::Ipv6PacketInfo(&pi));
                sendmsg(self.udp6.as_raw_fd(), iovs, &cmsgs, MsgFlags::empty(), Some(&SockaddrIn6::from(dst)))
            }
            // An SA's (and a datagram's) two addresses are of one family.
            _ => Err(nix::errno::Errno::EAFNOSUPPORT),
        }
    }

    /// One sendmmsg of `pkts` (all of one family; a packet with no address of it is sent
    /// nowhere and fails); how many the kernel took.
    fn sendmmsg<S: SockaddrLike + Copy>(
        &self,
        sock: &Socket,
        hdrs: &mut MultiHeaders<S>,
        pkts: &[Packet],
        addr: impl Fn(IpAddr) -> Option<S>,
    ) -> usize {
        let pkts = &pkts[..pkts.len().min(BATCH)];
        // One small allocation each per batch: the vectors borrow this batch's packets.
        let iovs: Vec<[IoSlice<'_>; 1]> = pkts.iter().map(|p| [IoSlice::new(p.bytes())]).collect();
        let addrs: Vec<Option<S>> = pkts.iter().map(|p| destination(p.bytes()).and_then(&addr)).collect();
        match sendmmsg(sock.as_raw_fd(), hdrs, &iovs, &addrs, [], MsgFlags::empty()) {
            Ok(r) => r.count(),
            Err(e) => {
                tracing::debug!("sending {} packets: {e}", pkts.len());
                0
            }
        }
    }

    /// Writes one packet to the TUN, behind the (empty) virtio header the TUN's offload
    /// mode expects.
    fn deliver_one(&self, p: Packet) {
        let off = p.head.max(VIRTIO_NET_HDR_LEN);
        let mut data = at_offset(p, off);
        data[off - VIRTIO_NET_HDR_LEN..off].fill(0);
        if let Err(e) = self.tun.send(&data[off - VIRTIO_NET_HDR_LEN..]) {
            self.io.tun_write_errors.fetch_add(1, Ordering::Relaxed);
            tracing::debug!("writing {} bytes to the TUN: {e}", data.len() - off);
        }
    }
}

/// An outbound ESP-in-UDP packet as the core built it, when the UDP socket can send it the
/// same: from our port, with the header the kernel would write itself (IPv4 without
/// options, DSCP/ECN 0; IPv6 with traffic class and flow label 0). Anything else (an ECN or
/// DSCP mark the core copied from the inner packet, another source port) goes out raw.
#[derive(Debug, PartialEq, Eq)]
struct Datagram {
    src: IpAddr,
    dst: SocketAddr,
    /// IP and UDP headers' length: the payload (ESP) starts here.
    headers: usize,
    payload: usize,
}

impl Datagram {
    fn of(b: &[u8], port: u16) -> Option<Datagram> {
        let (src, dst, ip): (IpAddr, IpAddr, usize) = match b.first()? >> 4 {
            4 if b.len() >= 28 && b[0] == 0x45 && b[1] == 0 && b[9] == 17 => (
                Ipv4Addr::new(b[12], b[13], b[14], b[15]).into(),
                Ipv4Addr::new(b[16], b[17], b[18], b[19]).into(),
                20,
            ),
            6 if b.len() >= 48 && b[0] == 0x60 && b[1] == 0 && b[2] == 0 && b[3] == 0 && b[6] == 17 => {
                let mut s = [0u8; 16];
                let mut d = [0u8; 16];
                s.copy_from_slice(&b[8..24]);
                d.copy_from_slice(&b[24..40]);
                (Ipv6Addr::from(s).into(), Ipv6Addr::from(d).into(), 40)
            }
            _ => return None,
        };
        let udp = &b[ip..];
        if u16::from_be_bytes([udp[0], udp[1]]) != port {
            return None;
        }
        let dport = u16::from_be_bytes([udp[2], udp[3]]);
        Some(Datagram { src, dst: SocketAddr::new(dst, dport), headers: ip + 8, payload: b.len() - ip - 8 })
    }
}

/// The most datagrams one UDP GSO send carries (the kernel's UDP_MAX_SEGMENTS was 64 before
/// Linux 6.9), and the most payload bytes (one IP packet's worth).
const GSO_SEGMENTS: usize = 64;
const GSO_BYTES: usize = 65_000;

/// How many packets from the start of `pkts` (which starts with `first`) one UDP GSO send
/// can carry: to the same peer from the same address, all of `first`'s size but the last,
/// which may be shorter.
fn gso_run(pkts: &[Packet], first: &Datagram, port: u16) -> usize {
    let mut n = 1;
    let mut bytes = first.payload;
    while n < pkts.len().min(GSO_SEGMENTS) {
        let Some(d) = Datagram::of(pkts[n].bytes(), port) else { break };
        if d.src != first.src
            || d.dst != first.dst
            || d.payload > first.payload
            || bytes + d.payload > GSO_BYTES
        {
            break;
        }
        n += 1;
        bytes += d.payload;
        if d.payload < first.payload {
            break;
        }
    }
    n
}

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
pub fn udp(family: Family, port: u16, mark: u32) -> std::io::Result<Socket> {
    let s = Socket::new(family.domain(), Type::DGRAM, Some(Protocol::UDP))?;
    set_mark(&s, mark)?;
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
    // Coalesced datagrams (udp_loop cuts them up); a kernel without UDP GRO gives them
    // one by one.
    if let Err(e) = setsockopt(&s, sockopt::UdpGroSegment, &true) {
        tracing::info!("UDP GRO not available ({family:?}): {e}");
    }
    Ok(s)
}

/// The size of every packet buffer: room for the core's headers in front, a packet of up
/// to `max` bytes, and the trailer behind.
fn buffer_size(max: usize) -> usize {
    HEADROOM + max + TAILROOM
}

/// What a loop needs to send a batch's results: the stash it swaps with the thread's, the
/// sendmmsg headers per family, and the TUN's coalescing table.
struct Flush {
    stash: Stash,
    out4: MultiHeaders<SockaddrIn>,
    out6: MultiHeaders<SockaddrIn6>,
    links: Links,
    coalescer: Coalescer,
}

impl Flush {
    fn new() -> Flush {
        batch::open();
        Flush {
            stash: Stash { transmit: Vec::with_capacity(BATCH), deliver: Vec::with_capacity(BATCH) },
            out4: MultiHeaders::preallocate(BATCH, None),
            out6: MultiHeaders::preallocate(BATCH, None),
            links: Links::new(),
            coalescer: Coalescer::default(),
        }
    }

    /// Sends what the core stashed during this batch and gives the buffers back to `pool`.
    fn run(&mut self, sink: &NetSink, pool: &mut Pool) {
        batch::take(&mut self.stash);
        if !self.stash.transmit.is_empty() {
            sink.transmit_batch(&mut self.out4, &mut self.out6, &mut self.links, &self.stash.transmit);
            for p in self.stash.transmit.drain(..) {
                pool.put(p.data);
            }
        }
        if !self.stash.deliver.is_empty() {
            // Runs of one TCP flow's segments go up as one super-packet (coalesce.rs).
            let mut write = |b: &[u8]| {
                if let Err(e) = sink.tun.send(b) {
                    sink.io.tun_write_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!("writing {} bytes to the TUN: {e}", b.len());
                }
            };
            for p in self.stash.deliver.drain(..) {
                self.coalescer.push(p.bytes(), &mut write);
                pool.put(p.data);
            }
            self.coalescer.finish(&mut write);
        }
    }
}

/// The packet's bytes moved to start at `off` in its buffer (the buffer ends where the
/// packet does).
fn at_offset(p: Packet, off: usize) -> Vec<u8> {
    let Packet { mut data, head } = p;
    let len = data.len() - head;
    if off > head {
        data.resize(off + len, 0);
        data.copy_within(head..head + len, off);
    } else if off < head {
        data.copy_within(head.., off);
        data.truncate(off + len);
    }
    data
}

/// Protected side → core. The TUN has offloads on: the kernel hands over TCP super-packets
/// of up to 64 KiB (GSO) with checksums left to us, which `recv_multiple` cuts into
/// MTU-sized segments with their checksums, each in its own buffer behind the core's
/// headroom. One read is thus up to [`BATCH`] packets, and their ESP leaves in one sendmmsg.
pub fn tun_loop(core: &Ipsec, sink: &NetSink, max: usize) {
    let mut pool = Pool::new(buffer_size(max));
    let mut flush = Flush::new();
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| pool.get()).collect();
    let mut sizes = vec![0usize; BATCH];
    let mut gso = vec![0u8; VIRTIO_NET_HDR_LEN + 65535];
    loop {
        let n = match sink.tun.recv_multiple(&mut gso, &mut bufs, &mut sizes, HEADROOM) {
            Ok(n) => n,
            Err(e) => {
                sink.io.recv_errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("reading the TUN: {e}");
                continue;
            }
        };
        for i in 0..n {
            if link_scope(&bufs[i][HEADROOM..HEADROOM + sizes[i]]) {
                sink.io.tun_link_scope.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let mut data = std::mem::replace(&mut bufs[i], pool.get());
            data.truncate(HEADROOM + sizes[i]);
            // A drop is counted by the core under its reason.
            let _ = core.output(Packet { data, head: HEADROOM });
        }
        flush.run(sink, &mut pool);
    }
}

/// One datagram or raw packet as a socket gave it: its length, where it came from (address
/// and port), and the local address it was sent to (if the packet-info option said).
struct Received {
    len: usize,
    src: SocketAddr,
    dst: Option<IpAddr>,
    /// With UDP GRO: the size of the datagrams the kernel coalesced into this one (the
    /// last may be shorter); 0 for a single datagram.
    segment: usize,
    /// Longer than the buffers could take: the kernel cut it short (MSG_TRUNC).
    truncated: bool,
}

/// The most a read takes: the largest IPv4 packet, or the largest IPv6 payload without a
/// jumbogram (an IPv6 raw socket gives the payload). Longer is cut short and counted.
const LARGEST: usize = 65_535;

/// A network loop's receiving side: buffers for a batch and the recvmmsg headers of its
/// family (each with room for a packet-info control message).
///
/// Each message is read into two pieces: its packet buffer (from `at` to `end`, sized for
/// the MTU) and then, for the rare packet longer than that, its own part of a spill area
/// up to [`LARGEST`] in all. The spill is one allocation made once, large enough for the
/// allocator to map it fresh: its pages stay the kernel's zero page until a large packet
/// is written there, and nothing is zeroed per packet. (Reading into 64 KiB buffers instead
/// would zero and hold 64 KiB per packet in flight; peeking at each length would be a
/// system call per packet.)
struct Receiver {
    family: Family,
    pool: Pool,
    bufs: Vec<Vec<u8>>,
    /// Where in each buffer a packet is read to, and where the buffer's piece ends.
    at: usize,
    end: usize,
    /// Each message's continuation, `spill_each` bytes apiece (none when 0).
    spill: Vec<u8>,
    spill_each: usize,
    in4: MultiHeaders<SockaddrIn>,
    in6: MultiHeaders<SockaddrIn6>,
    got: Vec<Received>,
    /// UDP GRO is on (the control messages vary from one message to the next).
    coalescing: bool,
}

impl Receiver {
    /// Reads straight into packet buffers (for packets of up to `max` bytes at `at`), a
    /// batch at a time; a longer packet, up to [`LARGEST`], continues in the spill area.
    fn new(family: Family, max: usize, at: usize) -> Receiver {
        let mut pool = Pool::new(buffer_size(max));
        let bufs = (0..BATCH).map(|_| pool.get()).collect();
        let end = HEADROOM + max;
        let spill_each = LARGEST.saturating_sub(end - at);
        Receiver::with(family, pool, bufs, (at, end), spill_each, false)
    }

    /// Reads into `n` buffers of 64 KiB, for datagrams the kernel coalesced (UDP GRO);
    /// packets are copied out of them into buffers from the pool.
    fn coalescing(family: Family, max: usize, n: usize) -> Receiver {
        let pool = Pool::new(buffer_size(max));
        let bufs = (0..n).map(|_| vec![0u8; 65_536]).collect();
        Receiver::with(family, pool, bufs, (0, 65_536), 0, true)
    }

    fn with(
        family: Family,
        pool: Pool,
        bufs: Vec<Vec<u8>>,
        (at, end): (usize, usize),
        spill_each: usize,
        coalescing: bool,
    ) -> Receiver {
        let n = bufs.len();
        // Room for the packet-info option and UDP GRO's segment size.
        let cmsg = || Some(nix::cmsg_space!(libc_in6_pktinfo, i32));
        Receiver {
            family,
            pool,
            bufs,
            at,
            end,
            spill: vec![0u8; n * spill_each],
            spill_each,
            in4: MultiHeaders::preallocate(if family == Family::V4 { n } else { 0 }, cmsg()),
            in6: MultiHeaders::preallocate(if family == Family::V6 { n } else { 0 }, cmsg()),
            got: Vec::with_capacity(n),
            coalescing,
        }
    }

    /// Reads up to a batch (waiting for the first packet only) into the buffers, each at
    /// `at` (and on into its spill); what came is in `self.got`.
    fn receive(&mut self, sock: &Socket) -> nix::Result<()> {
        self.got.clear();
        if self.coalescing {
            // The kernel shrinks each header's control length to what it wrote, and nix
            // does not set it back: a message with the segment-size option after one
            // without would be cut short. The options vary only here, so only here are
            // the headers made afresh (a few allocations per batch of up to 512 KiB).
            let pool = std::mem::replace(&mut self.pool, Pool::new(0));
            let bufs = std::mem::take(&mut self.bufs);
            *self = Receiver::with(self.family, pool, bufs, (self.at, self.end), 0, true);
        }
        let fd = sock.as_raw_fd();
        let (at, end) = (self.at, self.end);
        // One small allocation per batch: the I/O vectors borrow this batch's buffers.
        let mut spill = self.spill.chunks_mut(self.spill_each.max(1));
        let mut iovs: Vec<[IoSliceMut<'_>; 2]> = self
            .bufs
            .iter_mut()
            .map(|b| [IoSliceMut::new(&mut b[at..end]), IoSliceMut::new(spill.next().unwrap_or(&mut []))])
            .collect();
        let flags = MsgFlags::MSG_WAITFORONE;
        match self.family {
            Family::V4 => {
                for m in recvmmsg(fd, &mut self.in4, iovs.iter_mut(), flags, None)? {
                    let src = m.address.map(|a| SocketAddr::from(SocketAddrV4::new(a.ip(), a.port())));
                    self.got.push(received(&m, src));
                }
            }
            Family::V6 => {
                for m in recvmmsg(fd, &mut self.in6, iovs.iter_mut(), flags, None)? {
                    let src = m.address.map(|a| SocketAddr::from(SocketAddrV6::new(a.ip(), a.port(), 0, 0)));
                    self.got.push(received(&m, src));
                }
            }
        }
        Ok(())
    }

    /// The buffer of the `i`th packet received (`len` bytes from `at`), replaced by a spare
    /// one. A packet that went on into the spill area is joined up behind its start: the
    /// buffer grows (one allocation, for a packet longer than any of ours).
    fn take(&mut self, i: usize, len: usize) -> Vec<u8> {
        let mut data = std::mem::replace(&mut self.bufs[i], self.pool.get());
        let first = self.end - self.at;
        if len > first {
            data.truncate(self.end);
            let from = i * self.spill_each;
            data.extend_from_slice(&self.spill[from..from + len - first]);
        }
        data
    }
}

/// The sender of a packet whose address the kernel did not give (it always does for
/// these sockets; such a packet is counted as a receive error).
const UNKNOWN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));

/// What recvmmsg said of one message: its length and sender, the local address it was sent
/// to (packet-info option), with UDP GRO its segment size, and whether it was cut short.
fn received<S>(m: &nix::sys::socket::RecvMsg<'_, '_, S>, src: Option<SocketAddr>) -> Received {
    let truncated = m.flags.contains(MsgFlags::MSG_TRUNC);
    let Some(src) = src else {
        return Received { len: 0, src: UNKNOWN, dst: None, segment: 0, truncated };
    };
    let mut r = Received { len: m.bytes, src, dst: None, segment: 0, truncated };
    if let Ok(cmsgs) = m.cmsgs() {
        for c in cmsgs {
            match c {
                ControlMessageOwned::Ipv4PacketInfo(pi) => {
                    r.dst = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(pi.ipi_addr.s_addr))))
                }
                ControlMessageOwned::Ipv6PacketInfo(pi) => {
                    r.dst = Some(IpAddr::V6(Ipv6Addr::from(pi.ipi6_addr.s6_addr)))
                }
                ControlMessageOwned::UdpGroSegments(s) => r.segment = s.max(0) as usize,
                _ => {}
            }
        }
    }
    r
}

/// Network → core: ESP from the raw socket, a batch per recvmmsg. IPv4 raw sockets return
/// the whole packet; IPv6 ones only the payload, so its header is written back from the
/// addresses.
pub fn esp_loop(core: &Ipsec, sink: &NetSink, sock: &Socket, family: Family, max: usize) {
    let at = HEADROOM + if family == Family::V6 { 40 } else { 0 };
    let mut rx = Receiver::new(family, max, at);
    let mut flush = Flush::new();
    loop {
        if let Err(e) = rx.receive(sock) {
            sink.io.recv_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("reading the ESP socket: {e}");
            continue;
        }
        for i in 0..rx.got.len() {
            let Received { len, src, dst, truncated, .. } = rx.got[i];
            if truncated {
                core.count_drop(Drop::Truncated);
                tracing::debug!("an ESP packet from {src} longer than {LARGEST} bytes, cut short");
                continue;
            }
            let mut data = rx.take(i, len);
            match (family, dst) {
                (Family::V4, _) if len > 0 => data.truncate(HEADROOM + len),
                (Family::V6, Some(dst)) => {
                    write_ip_header(&mut data[HEADROOM..at], src.ip(), dst, 40 + len, 50);
                    data.truncate(at + len);
                }
                _ => {
                    sink.io.recv_errors.fetch_add(1, Ordering::Relaxed);
                    rx.pool.put(data);
                    continue;
                }
            }
            let _ = core.input_via(Packet { data, head: HEADROOM }, Via::Esp);
        }
        flush.run(sink, &mut rx.pool);
    }
}

/// Network → core: ESP in UDP, a batch per recvmmsg. The socket has UDP GRO on: a run of
/// datagrams from one peer (one UDP GSO send of the peer's, or ones the kernel coalesced)
/// arrives as one message with its segment size, and is cut here into its datagrams. Each
/// datagram is copied into a packet buffer behind room for the IP and UDP headers it came
/// with, which are written back so the core sees the packet as sent ([`Via::Udp`]: the
/// core takes every datagram from this socket for ESP in UDP, whatever the port).
pub fn udp_loop(core: &Ipsec, sink: &NetSink, sock: &Socket, family: Family, port: u16, max: usize) {
    let mut rx = Receiver::coalescing(family, max, UDP_BATCH);
    let mut flush = Flush::new();
    let ip = family.header_len();
    let hdrs = ip + 8;
    loop {
        if let Err(e) = rx.receive(sock) {
            sink.io.recv_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("reading the UDP socket: {e}");
            continue;
        }
        for i in 0..rx.got.len() {
            let Received { len, src, dst, segment, truncated } = rx.got[i];
            if truncated {
                core.count_drop(Drop::Truncated);
                tracing::debug!("a datagram from {src} longer than 64 KiB, cut short");
                continue;
            }
            let Some(dst) = dst else {
                sink.io.recv_errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("a datagram of {len} bytes from {src} without its local address");
                continue;
            };
            let step = if segment == 0 { len.max(1) } else { segment };
            // Every datagram goes to the core, an empty one too (it counts it).
            let mut at = 0;
            while at == 0 || at < len {
                let payload = &rx.bufs[i][at..len.min(at + step)];
                at += step;
                let total = hdrs + payload.len();
                let mut data = rx.pool.get();
                if HEADROOM + total > data.len() {
                    // Longer than any packet of ours (a peer's kernel fragmented it, ours
                    // reassembled it): a buffer of its own.
                    data.resize(HEADROOM + total, 0);
                }
                data[HEADROOM + hdrs..HEADROOM + total].copy_from_slice(payload);
                write_udp_headers(&mut data[HEADROOM..HEADROOM + total], ip, src, dst, port);
                data.truncate(HEADROOM + total);
                let _ = core.input_via(Packet { data, head: HEADROOM }, Via::Udp);
            }
        }
        flush.run(sink, &mut rx.pool);
    }
}

/// Messages per recvmmsg on a UDP socket: each may hold up to 64 KiB of coalesced datagrams.
const UDP_BATCH: usize = 8;

/// Writes back the IP and UDP headers of a datagram from `src` to `dst`:`port` whose
/// payload follows them in `packet` (`ip` is the IP header's length). The UDP checksum is
/// left 0: the kernel verified it, and the core does not look ([`Via::Udp`]); computing
/// it again over IPv6 was a pass over every packet.
fn write_udp_headers(packet: &mut [u8], ip: usize, src: SocketAddr, dst: IpAddr, port: u16) {
    let total = packet.len();
    write_ip_header(&mut packet[..ip], src.ip(), dst, total, 17);
    let udp = &mut packet[ip..];
    let udp_len = udp.len() as u16;
    udp[0..2].copy_from_slice(&src.port().to_be_bytes());
    udp[2..4].copy_from_slice(&port.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A UDP socket on the loopback address, and one that sends to it.
    fn pair() -> (Socket, std::net::UdpSocket) {
        let rx = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        rx.bind(&SockAddr::from(SocketAddr::from(([127, 0, 0, 1], 0)))).unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap().as_socket().unwrap()).unwrap();
        (rx, tx)
    }

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 + i / 251) as u8).collect()
    }

    #[test]
    fn a_packet_longer_than_the_buffers_arrives_whole_through_the_spill() {
        let (sock, tx) = pair();
        // Buffers for 100-byte packets; the largest datagram IPv4 carries, and a small one.
        let mut rx = Receiver::new(Family::V4, 100, HEADROOM);
        for n in [65_507, 3000, 60] {
            let sent = bytes(n);
            tx.send(&sent).unwrap();
            rx.receive(&sock).unwrap();
            assert_eq!(rx.got.len(), 1);
            let Received { len, truncated, .. } = rx.got[0];
            assert_eq!((len, truncated), (n, false));
            let data = rx.take(0, len);
            assert_eq!(&data[HEADROOM..HEADROOM + len], &sent[..], "{n} bytes");
            rx.pool.put(data);
        }
    }

    #[test]
    fn a_packet_longer_than_the_read_is_reported_cut_short() {
        let (sock, tx) = pair();
        // No spill: what does not fit the buffer is cut, and MSG_TRUNC says so.
        let mut pool = Pool::new(buffer_size(100));
        let bufs = (0..4).map(|_| pool.get()).collect();
        let mut rx = Receiver::with(Family::V4, pool, bufs, (HEADROOM, HEADROOM + 100), 0, false);
        tx.send(&bytes(500)).unwrap();
        tx.send(&bytes(100)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        rx.receive(&sock).unwrap();
        let got: Vec<(usize, bool)> = rx.got.iter().map(|r| (r.len, r.truncated)).collect();
        assert_eq!(got, [(100, true), (100, false)]);
    }

    /// What the spill costs a batch of ordinary packets: recvmmsg of 64 datagrams of 1400
    /// bytes into the MTU-sized buffers alone (one I/O vector each, as before the spill)
    /// and with each message's spill behind (two). Run: `cargo test --release -p ipsecd
    /// --lib -- --ignored --nocapture receive_cost`; the two take turns; medians of ns per
    /// packet.
    #[test]
    #[ignore = "a measurement"]
    fn receive_cost() {
        let (sock, tx) = pair();
        big_receive_buffer(&sock);
        let max = max_packet(1400);
        let mut with_spill = Receiver::new(Family::V4, max, HEADROOM);
        let payload = vec![0x5au8; 1400];
        let mut ns: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for round in 0..4000 {
            for _ in 0..BATCH {
                tx.send(&payload).unwrap();
            }
            let spill = round % 2 == 1;
            let t = std::time::Instant::now();
            let got = if spill {
                with_spill.receive(&sock).unwrap();
                with_spill.got.len()
            } else {
                one_iovec(&mut with_spill, &sock)
            };
            let dt = t.elapsed().as_nanos() as f64;
            assert_eq!(got, BATCH);
            ns[usize::from(spill)].push(dt / BATCH as f64);
        }
        for (name, v) in ["one I/O vector", "with the spill"].iter().zip(ns.iter_mut()) {
            v.sort_by(f64::total_cmp);
            println!(
                "{name}: median {:.0} ns per packet (p10 {:.0}, p90 {:.0})",
                v[v.len() / 2],
                v[v.len() / 10],
                v[v.len() * 9 / 10]
            );
        }
    }

    /// The receive as it was: each message into its buffer alone.
    fn one_iovec(rx: &mut Receiver, sock: &Socket) -> usize {
        let (at, end) = (rx.at, rx.end);
        let mut iovs: Vec<[IoSliceMut<'_>; 1]> =
            rx.bufs.iter_mut().map(|b| [IoSliceMut::new(&mut b[at..end])]).collect();
        let r = recvmmsg(sock.as_raw_fd(), &mut rx.in4, iovs.iter_mut(), MsgFlags::MSG_WAITFORONE, None);
        r.unwrap().count()
    }
}
