//! Reading a batch: one recvmmsg into pooled packet buffers, with each message's length,
//! sender, local address, GRO segment size and outer ECN field (and, where the socket asks
//! for them, IPv6's hop limit and the extension headers in front of the payload).

use std::io::IoSliceMut;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

use nix::sys::socket::{recvmmsg, ControlMessageOwned, MsgFlags, MultiHeaders, SockaddrIn, SockaddrIn6};
use socket2::Socket;

use ipsec_core::HEADROOM;
use ipsec_wire::IpProtocol;
use nix::libc;

use super::sockets::{buffer_size, Family};
use crate::batch::{Pool, BATCH};

/// One datagram or raw packet as a socket gave it: its length, where it came from (address
/// and port), and the local address it was sent to (if the packet-info option said).
pub(super) struct Received {
    pub(super) len: usize,
    pub(super) src: SocketAddr,
    pub(super) dst: Option<IpAddr>,
    /// With UDP GRO: the size of the datagrams the kernel coalesced into this one (the
    /// last may be shorter); 0 for a single datagram.
    pub(super) segment: usize,
    /// Longer than the buffers could take: the kernel cut it short (MSG_TRUNC).
    pub(super) truncated: bool,
    /// The ECN field of the IP header it came in (IP_RECVTOS / IPV6_RECVTCLASS; 0 where
    /// the socket does not say). UDP GRO coalesces only datagrams whose headers agree.
    pub(super) ecn: u8,
    /// IPv6: the hop limit it arrived with (IPV6_RECVHOPLIMIT; 64 where the socket does
    /// not say).
    pub(super) hop_limit: u8,
    /// IPv6, where the socket asks for them (AH's, [`super::sockets::ah_in`]): the
    /// extension headers in front of the payload, in the order they came, each with its
    /// type. Empty (no allocation) for a packet without them.
    pub(super) ext: Vec<(IpProtocol, Vec<u8>)>,
    /// The control messages did not fit their buffer (MSG_CTRUNC): the local address or
    /// the extension headers are not known.
    pub(super) control_cut: bool,
}

/// Room for the control messages of a message: the packet-info option, UDP GRO's segment
/// size, the TOS or traffic class and the hop limit.
fn control_space() -> usize {
    nix::cmsg_space!(libc_in6_pktinfo, i32, i32, i32).capacity()
}

/// More room per message on a socket that asks for IPv6's extension headers
/// ([`Receiver::with_extension_headers`]): a Hop-by-Hop, a Routing and two Destination
/// Options headers of 232 bytes each, with their control message headers. A packet whose
/// headers in front of AH are longer is dropped and counted (`control_cut`); they are
/// rare, and seldom longer than 8 bytes apiece (a padding option).
pub(super) const EXTENSION_ROOM: usize = 1024;

/// Messages per read on a socket that asks for IPv6's extension headers: their control
/// buffers (about 1.1 KiB each) are made afresh for every read, so fewer than [`BATCH`].
pub(super) const EXTENSION_BATCH: usize = 16;

/// The most a read takes: the largest IPv4 packet, or the largest IPv6 payload without a
/// jumbogram (an IPv6 raw socket gives the payload). Longer is cut short and counted.
pub(super) const LARGEST: usize = 65_535;

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
pub(super) struct Receiver {
    family: Family,
    pub(super) pool: Pool,
    pub(super) bufs: Vec<Vec<u8>>,
    /// Where in each buffer a packet is read to, and where the buffer's piece ends.
    at: usize,
    end: usize,
    /// Each message's continuation, `spill_each` bytes apiece (none when 0).
    spill: Vec<u8>,
    spill_each: usize,
    in4: MultiHeaders<SockaddrIn>,
    in6: MultiHeaders<SockaddrIn6>,
    pub(super) got: Vec<Received>,
    /// Each message's room for control messages.
    control: usize,
    /// The control messages vary from one message to the next (UDP GRO's segment size,
    /// IPv6's extension headers): the headers are made afresh before each read.
    varying: bool,
}

impl Receiver {
    /// Reads straight into packet buffers (for packets of up to `max` bytes at `at`), a
    /// batch at a time; a longer packet, up to [`LARGEST`], continues in the spill area.
    pub(super) fn new(family: Family, max: usize, at: usize) -> Receiver {
        Receiver::raw(family, max, at, BATCH)
    }

    /// [`Receiver::new`] with `n` messages a read.
    fn raw(family: Family, max: usize, at: usize, n: usize) -> Receiver {
        let mut pool = Pool::new(buffer_size(max));
        let bufs = (0..n).map(|_| pool.get()).collect();
        let end = HEADROOM + max;
        let spill_each = LARGEST.saturating_sub(end - at);
        Receiver::with(family, pool, bufs, (at, end), spill_each, false)
    }

    /// [`Receiver::new`] for a socket that asks for IPv6's extension headers (AH's): room
    /// for them in each message's control messages ([`EXTENSION_ROOM`]), and
    /// [`EXTENSION_BATCH`] messages a read, whose control buffers are made afresh for
    /// each read (see [`Receiver::fresh_headers`]).
    pub(super) fn with_extension_headers(family: Family, max: usize, at: usize) -> Receiver {
        let mut rx = Receiver::raw(family, max, at, EXTENSION_BATCH);
        rx.control += EXTENSION_ROOM;
        rx.varying = true;
        rx.fresh_headers();
        rx
    }

    /// Reads into `n` buffers of 64 KiB, for datagrams the kernel coalesced (UDP GRO);
    /// packets are copied out of them into buffers from the pool.
    pub(super) fn coalescing(family: Family, max: usize, n: usize) -> Receiver {
        let pool = Pool::new(buffer_size(max));
        let bufs = (0..n).map(|_| vec![0u8; 65_536]).collect();
        Receiver::with(family, pool, bufs, (0, 65_536), 0, true)
    }

    pub(super) fn with(
        family: Family,
        pool: Pool,
        bufs: Vec<Vec<u8>>,
        (at, end): (usize, usize),
        spill_each: usize,
        coalescing: bool,
    ) -> Receiver {
        let n = bufs.len();
        let control = control_space();
        let cmsg = || Some(vec![0u8; control]);
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
            control,
            // UDP GRO's segment size comes with some messages and not others.
            varying: coalescing,
        }
    }

    /// New recvmmsg headers, each with `self.control` bytes for control messages. The
    /// kernel shrinks each header's control length to what it wrote, and nix does not set
    /// it back: where the control messages vary from one message to the next (UDP GRO's
    /// segment size, IPv6's extension headers), one with more after one with fewer would
    /// be cut short. There, the headers are made afresh before each read: a few
    /// allocations per batch, on those sockets only.
    fn fresh_headers(&mut self) {
        let (n, control) = (self.bufs.len(), self.control);
        let cmsg = || Some(Vec::with_capacity(control));
        match self.family {
            Family::V4 => self.in4 = MultiHeaders::preallocate(n, cmsg()),
            Family::V6 => self.in6 = MultiHeaders::preallocate(n, cmsg()),
        }
    }

    /// The family of the socket it reads.
    pub(super) fn family(&self) -> Family {
        self.family
    }

    /// Reads up to a batch (waiting for the first packet only) into the buffers, each at
    /// `at` (and on into its spill); what came is in `self.got`.
    pub(super) fn receive(&mut self, sock: &Socket) -> nix::Result<()> {
        self.got.clear();
        if self.varying {
            self.fresh_headers();
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
    pub(super) fn take(&mut self, i: usize, len: usize) -> Vec<u8> {
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
    let mut r = Received {
        len: m.bytes,
        src: src.unwrap_or(UNKNOWN),
        dst: None,
        segment: 0,
        truncated,
        ecn: 0,
        hop_limit: 64,
        ext: Vec::new(),
        control_cut: m.flags.contains(MsgFlags::MSG_CTRUNC),
    };
    if src.is_none() {
        r.len = 0;
        return r;
    }
    // (`cmsgs` refuses a message whose control messages were cut short: `control_cut`.)
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
                ControlMessageOwned::Ipv4Tos(tos) => r.ecn = tos & 3,
                ControlMessageOwned::Ipv6TClass(tc) => r.ecn = (tc & 3) as u8,
                ControlMessageOwned::Ipv6HopLimit(h) => r.hop_limit = h.clamp(0, 255) as u8,
                // The extension headers nix has no type for (a copy each: only packets
                // that carry them, on the one socket that asks).
                ControlMessageOwned::Unknown(u) if u.cmsg_header.cmsg_level == libc::IPPROTO_IPV6 => {
                    let kind = match u.cmsg_header.cmsg_type {
                        libc::IPV6_HOPOPTS => IpProtocol::HOP_BY_HOP,
                        libc::IPV6_DSTOPTS => IpProtocol::DEST_OPTS,
                        libc::IPV6_RTHDR => IpProtocol::ROUTING,
                        _ => continue,
                    };
                    r.ext.push((kind, u.data_bytes));
                }
                _ => {}
            }
        }
    }
    r
}

/// `struct in6_pktinfo`'s size class for `cmsg_space!` (it also fits `in_pktinfo`).
#[allow(non_camel_case_types)]
type libc_in6_pktinfo = [u8; 20];

#[cfg(test)]
mod tests {
    use socket2::{Domain, Protocol, SockAddr, Type};

    use super::super::max_packet;
    use super::super::sockets::big_receive_buffer;
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
        // Both, in as many reads as they take to arrive (a minute at most), rather than one
        // read after a 50 ms sleep that a loaded machine may not have delivered both by.
        sock.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
        let mut got: Vec<(usize, bool)> = Vec::new();
        while got.len() < 2 {
            rx.receive(&sock).unwrap();
            got.extend(rx.got.iter().map(|r| (r.len, r.truncated)));
        }
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

    /// What making the recvmmsg headers afresh costs a read on AH's IPv6 socket
    /// ([`Receiver::with_extension_headers`]: 16 messages with 1 KiB more control room
    /// each) and on a UDP socket (8 messages), against the 1400-byte packets' receive of
    /// `receive_cost`. Run: `cargo test --release -p ipsecd --lib -- --ignored --nocapture
    /// fresh_headers_cost`; medians of ns per call.
    #[test]
    #[ignore = "a measurement"]
    fn fresh_headers_cost() {
        let mut ah6 = Receiver::with_extension_headers(Family::V6, max_packet(1400), HEADROOM);
        let mut udp = Receiver::coalescing(Family::V4, max_packet(1400), 8);
        let mut ns: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for round in 0..20_000 {
            let t = std::time::Instant::now();
            if round % 2 == 0 {
                ah6.fresh_headers();
            } else {
                udp.fresh_headers();
            }
            ns[round % 2].push(t.elapsed().as_nanos() as f64);
        }
        for (name, v) in ["AH over IPv6 (16 messages)", "UDP (8 messages)"].iter().zip(ns.iter_mut()) {
            v.sort_by(f64::total_cmp);
            println!(
                "{name}: median {:.0} ns per read (p10 {:.0}, p90 {:.0})",
                v[v.len() / 2],
                v[v.len() / 10],
                v[v.len() * 9 / 10]
            );
        }
    }
}
