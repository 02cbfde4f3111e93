//! Sending: a batch's results with as few system calls as possible, and [`NetSink`] for
//! the packets an asynchronous driver finishes later, one at a time.

use std::io::IoSlice;
use std::net::{IpAddr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ipsec_core::{Packet, Sink};
use ipsec_wire::{destination, ipv4, ipv6, udp, IpProtocol};
use nix::sys::socket::{
    sendmmsg, sendmsg, ControlMessage, MsgFlags, MultiHeaders, SockaddrIn, SockaddrIn6, SockaddrLike,
};
use socket2::{SockAddr, Socket};
use tun_rs::{SyncDevice, VIRTIO_NET_HDR_LEN};

use super::counters::IoCounters;
use crate::afpacket::Links;
use crate::batch::BATCH;

/// Where the core's results go: ESP to the network, decapsulated packets to the TUN. The
/// loops send a batch's results together (`transmit_batch`, and the coalescer for the
/// TUN); as the core's [`Sink`], it sends what an asynchronous driver finishes later, one
/// packet at a time.
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
    /// Sends the kernel refuses as too big, for the core's path MTU ([`crate::icmp`]).
    pub too_big: crate::icmp::SendTooBig,
    /// Raw ESP out past the IP output path where the next hop is known (`--esp-out
    /// packet`, [`crate::afpacket`]); `None`: everything through `raw4`/`raw6`.
    pub packet: Option<crate::afpacket::PacketSocket>,
}

/// An asynchronous driver's completions, one packet at a time (the loops send what the
/// core finished at once as a batch: `transmit_batch`, the coalescer).
impl Sink for NetSink {
    fn transmit(&self, p: Packet) {
        self.transmit_one(&p);
    }

    fn deliver(&self, p: Packet) {
        self.deliver_one(p);
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
            if e.raw_os_error() == Some(nix::libc::EMSGSIZE) {
                self.too_big.refused(b);
            }
            tracing::debug!("sending {} bytes to {dst}: {e}", b.len());
        }
    }

    /// Sends a batch of whole packets. ESP in UDP from our port goes through the UDP
    /// socket, a run of equal-sized datagrams to one peer as one UDP GSO send (the kernel
    /// cuts it up, possibly in the receiver's device); everything else through the raw
    /// sockets, one sendmmsg per run of one family. Order is kept.
    pub(super) fn transmit_batch(
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
            // A GSO send whose segments exceed the route's MTU is EINVAL.
            if e == nix::errno::Errno::EMSGSIZE || (gso.is_some() && e == nix::errno::Errno::EINVAL) {
                self.too_big.refused(run[0].bytes());
            }
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
    /// `gso` (UDP_SEGMENT) one per segment, from our address `src` ([`send_from`]).
    fn send_udp(
        &self,
        iovs: &[IoSlice<'_>],
        gso: Option<&u16>,
        src: IpAddr,
        dst: SocketAddr,
    ) -> nix::Result<usize> {
        let sock = if dst.is_ipv4() { &self.udp4 } else { &self.udp6 };
        send_from(sock, iovs, gso, src, dst)
    }

    /// Sends an IKE message from our address `src` and the NAT-T port to `dst`, behind the
    /// Non-ESP Marker (RFC 3948 §2.2): the key manager's answers ([`crate::ike_relay`]).
    pub fn send_ike(&self, src: IpAddr, dst: SocketAddr, message: &[u8]) -> nix::Result<usize> {
        let marker = ipsec_wire::udp_encap::NON_ESP_MARKER;
        self.send_udp(&[IoSlice::new(&marker), IoSlice::new(message)], None, src, dst)
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
                // An error is about the first packet (sendmmsg reports later ones as a
                // shorter count, and the next call starts at the failed one).
                if e == nix::errno::Errno::EMSGSIZE {
                    self.too_big.refused(pkts[0].bytes());
                }
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

/// One sendmsg on `sock`, a UDP socket of `dst`'s family bound to the wildcard address:
/// `iovs` as one datagram, or with `gso` (UDP_SEGMENT) one per segment, from our address
/// `src` (the packet-info option).
pub(super) fn send_from(
    sock: &Socket,
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
            sendmsg(sock.as_raw_fd(), iovs, &cmsgs, MsgFlags::empty(), Some(&SockaddrIn::from(dst)))
        }
        (IpAddr::V6(src), SocketAddr::V6(dst)) => {
            let pi = nix::libc::in6_pktinfo {
                ipi6_addr: nix::libc::in6_addr { s6_addr: src.octets() },
                ipi6_ifindex: 0,
            };
            cmsgs.push(ControlMessage::Ipv6PacketInfo(&pi));
            sendmsg(sock.as_raw_fd(), iovs, &cmsgs, MsgFlags::empty(), Some(&SockaddrIn6::from(dst)))
        }
        // A datagram's two addresses are of one family.
        _ => Err(nix::errno::Errno::EAFNOSUPPORT),
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
            4 => {
                let p = ipv4::Packet::new_checked(b).ok()?;
                // Not a fragment either (the core fragments packets over a path MTU:
                // ipsec_core::pmtu).
                let plain = p.header_len() == ipv4::MIN_HEADER_LEN
                    && p.dscp() == 0
                    && p.ecn() == 0
                    && !p.is_fragment();
                if !plain || p.protocol() != IpProtocol::UDP {
                    return None;
                }
                (p.src_addr().into(), p.dst_addr().into(), ipv4::MIN_HEADER_LEN)
            }
            6 => {
                let p = ipv6::Packet::new_checked(b).ok()?;
                if p.traffic_class() != 0 || p.flow_label() != 0 || p.next_header() != IpProtocol::UDP {
                    return None;
                }
                (p.src_addr().into(), p.dst_addr().into(), ipv6::HEADER_LEN)
            }
            _ => return None,
        };
        let u = udp::Packet::new_checked(&b[ip..]).ok()?;
        if u.src_port() != port {
            return None;
        }
        let headers = ip + udp::HEADER_LEN;
        Some(Datagram { src, dst: SocketAddr::new(dst, u.dst_port()), headers, payload: b.len() - headers })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fragment_is_no_datagram_for_the_udp_socket() {
        // IPv4 10.0.0.1 -> 10.0.0.2, UDP 4500 -> 4500, 4 bytes: a datagram; the same with
        // More Fragments set (the core fragments packets over a path MTU) is not.
        let mut b = vec![0x45, 0, 0, 32, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        b.extend_from_slice(&[0x11, 0x94, 0x11, 0x94, 0, 12, 0, 0, 1, 2, 3, 4]);
        assert!(Datagram::of(&b, 4500).is_some());
        b[6] = 0x20;
        assert_eq!(Datagram::of(&b, 4500), None);
    }
}
