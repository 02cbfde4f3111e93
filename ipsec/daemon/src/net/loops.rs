//! The loops, one thread each: read a batch, hand it to the core, send its results. With
//! `--threads N` there are N TUN loops and N UDP loops per family, each on its own TUN
//! queue or socket ([`super::spread`]).

use std::net::IpAddr;
use std::sync::atomic::Ordering;

use ipsec_core::stats::Drop;
use ipsec_core::{Ipsec, Packet, Payload, Results, Via, HEADROOM};
use ipsec_wire::{destination, IpProtocol};
use nix::sys::socket::{MultiHeaders, SockaddrIn, SockaddrIn6};
use socket2::Socket;
use tun_rs::VIRTIO_NET_HDR_LEN;

use super::front::{ipv6_in_front, Front};
use super::ike::relayed;
use super::receive::{Received, Receiver, LARGEST};
use super::sockets::{buffer_size, Family};
use super::spread::TunQueues;
use super::transmit::NetSink;
use super::IoCounters;
use crate::afpacket::Links;
use crate::batch::{Pool, BATCH};
use crate::coalesce::{Coalescer, VIRTIO_HDR};
use crate::ike_relay::Relay;

/// Whether a packet the kernel routed into the TUN is for a link-local or multicast
/// address (which no policy of a point-to-point tunnel carries).
fn link_scope(b: &[u8]) -> bool {
    match destination(b) {
        Some(IpAddr::V4(a)) => a.is_multicast() || a.is_broadcast() || a.is_link_local(),
        Some(IpAddr::V6(a)) => a.is_multicast() || a.is_unicast_link_local(),
        None => false,
    }
}

/// What a loop needs for a batch: the packets it read, what the core made of them, the
/// sendmmsg headers per family and the TUN's coalescing table — all kept from one batch to
/// the next, so a batch allocates nothing.
struct Flush<'a> {
    /// The TUN's queues, for decapsulated packets: each goes through its flow's.
    tun: &'a TunQueues,
    batch: Vec<Packet>,
    payloads: Vec<Payload>,
    results: Results,
    out4: MultiHeaders<SockaddrIn>,
    out6: MultiHeaders<SockaddrIn6>,
    /// Next hops for the packet socket (crate::afpacket).
    links: Links,
    coalescer: Coalescer,
}

impl<'a> Flush<'a> {
    fn new(tun: &'a TunQueues) -> Flush<'a> {
        Flush {
            tun,
            batch: Vec::with_capacity(BATCH),
            payloads: Vec::with_capacity(BATCH),
            results: Results::with_capacity(BATCH),
            out4: MultiHeaders::preallocate(BATCH, None),
            out6: MultiHeaders::preallocate(BATCH, None),
            links: Links::new(),
            coalescer: Coalescer::default(),
        }
    }

    /// Sends what the core made of this batch and gives the buffers back to `pool`.
    fn run(&mut self, sink: &NetSink, pool: &mut Pool) {
        let r = &mut self.results;
        if !r.transmit.is_empty() {
            sink.transmit_batch(&mut self.out4, &mut self.out6, &mut self.links, &r.transmit);
            for p in r.transmit.drain(..) {
                pool.put(p.data);
            }
        }
        if !r.deliver.is_empty() {
            // Runs of one TCP flow's segments go up as one super-packet (coalesce.rs),
            // through the flow's queue (behind the virtio header: the IP packet).
            let tun = self.tun;
            let mut write = |b: &[u8]| {
                if let Err(e) = tun.for_packet(&b[VIRTIO_HDR.min(b.len())..]).send(b) {
                    sink.io.tun_write_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!("writing {} bytes to the TUN: {e}", b.len());
                }
            };
            for p in r.deliver.drain(..) {
                self.coalescer.push(p.bytes(), &mut write);
                pool.put(p.data);
            }
            self.coalescer.finish(&mut write);
        }
    }
}

/// Protected side → core. The TUN has offloads on: the kernel hands over TCP super-packets
/// of up to 64 KiB (GSO) with checksums left to us, which `recv_multiple` cuts into
/// MTU-sized segments with their checksums, each in its own buffer behind the core's
/// headroom. One read is thus up to [`BATCH`] packets, and their ESP leaves in one sendmmsg.
/// It reads TUN queue `queue` of `tun`.
pub fn tun_loop(core: &Ipsec, sink: &NetSink, tun: &TunQueues, queue: usize, max: usize) {
    let mut pool = Pool::new(buffer_size(max));
    let mut flush = Flush::new(tun);
    let queue = tun.queue(queue);
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| pool.get()).collect();
    let mut sizes = vec![0usize; BATCH];
    let mut gso = vec![0u8; VIRTIO_NET_HDR_LEN + 65535];
    loop {
        let n = match queue.recv_multiple(&mut gso, &mut bufs, &mut sizes, HEADROOM) {
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
            flush.batch.push(Packet { data, head: HEADROOM });
        }
        // Drops are counted by the core under their reasons.
        core.output(flush.batch.drain(..), &mut flush.results);
        flush.run(sink, &mut pool);
    }
}

/// Network → core: ESP from the raw socket, a batch per recvmmsg. IPv4 raw sockets return
/// the whole packet (its header checked by the kernel: [`Via::Esp`]); IPv6 ones only the
/// payload, which goes in as a [`Payload`] with the addresses.
pub fn esp_loop(core: &Ipsec, sink: &NetSink, tun: &TunQueues, sock: &Socket, family: Family, max: usize) {
    raw_loop(core, sink, tun, sock, Receiver::new(family, max, HEADROOM), Via::Esp, IpProtocol::ESP)
}

/// Network → core: AH (RFC 4302) from its raw socket ([`super::sockets::ah_in`]), whole
/// packets through the same entry as raw ESP's (the core tells AH from ESP by the
/// protocol). An IPv6 socket returns only what follows the extension headers, which AH's
/// ICV covers too: the IPv6 header and the extension headers in front of AH, which the
/// socket reports with each packet, are written back in front of it (`net::front`).
pub fn ah_loop(core: &Ipsec, sink: &NetSink, tun: &TunQueues, sock: &Socket, family: Family, max: usize) {
    let rx = Receiver::with_extension_headers(family, max, HEADROOM);
    raw_loop(core, sink, tun, sock, rx, Via::Esp, IpProtocol::AH)
}

/// Network → core: IPComp or IP-in-IP (`proto`) from a raw socket
/// ([`super::sockets::ipcomp_in`]), whole packets as [`Via::IpComp`]: the core decompresses
/// IPComp, decapsulates IP-in-IP between an IPComp SA's ends, and drops anything else as
/// `not_ipcomp`. An IPv6 socket returns only the payload: an IPv6 header is written in
/// front of it (`net::front`).
pub fn ipcomp_loop(
    core: &Ipsec,
    sink: &NetSink,
    tun: &TunQueues,
    sock: &Socket,
    family: Family,
    proto: u8,
    max: usize,
) {
    let rx = Receiver::new(family, max, HEADROOM);
    raw_loop(core, sink, tun, sock, rx, Via::IpComp, IpProtocol(proto))
}

/// A raw socket of protocol `proto`'s loop, reading with `rx`: whole IPv4 packets as
/// `via` says; IPv6 payloads as [`Payload`]s (ESP) or behind the headers written back for
/// them (AH's and IPComp's sockets).
fn raw_loop(
    core: &Ipsec,
    sink: &NetSink,
    tun: &TunQueues,
    sock: &Socket,
    mut rx: Receiver,
    via: Via,
    proto: IpProtocol,
) {
    let mut flush = Flush::new(tun);
    loop {
        if let Err(e) = rx.receive(sock) {
            sink.io.recv_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("reading the raw {via:?} socket: {e}");
            continue;
        }
        gather(core, &sink.io, &mut rx, proto, &mut flush.batch, &mut flush.payloads);
        core.input(flush.batch.drain(..), via, &mut flush.results);
        core.input_payloads(flush.payloads.drain(..), &mut flush.results);
        flush.run(sink, &mut rx.pool);
    }
}

/// What a raw socket of protocol `proto` read, for the core: whole packets into `batch`
/// (IPv4 as read; IPv6 behind the headers written back for them), IPv6 ESP into
/// `payloads`; what cannot go in is counted (its buffer back to the pool).
fn gather(
    core: &Ipsec,
    io: &IoCounters,
    rx: &mut Receiver,
    proto: IpProtocol,
    batch: &mut Vec<Packet>,
    payloads: &mut Vec<Payload>,
) {
    let family = rx.family();
    for i in 0..rx.got.len() {
        let Received { len, src, dst, truncated, ecn, hop_limit, control_cut, .. } = rx.got[i];
        if truncated {
            core.count_drop(Drop::Truncated);
            tracing::debug!("a {proto:?} packet from {src} longer than {LARGEST} bytes, cut short");
            continue;
        }
        if control_cut {
            io.control_cut.fetch_add(1, Ordering::Relaxed);
            tracing::debug!("a {proto:?} packet from {src} whose headers did not fit the control buffer");
            continue;
        }
        let mut data = rx.take(i, len);
        data.truncate(HEADROOM + len);
        let mut packet = Packet { data, head: HEADROOM };
        match (family, src.ip(), dst) {
            (Family::V4, _, _) if len > 0 => batch.push(packet),
            (Family::V6, _, Some(dst)) if proto == IpProtocol::ESP => {
                payloads.push(Payload { packet, src, dst, dport: 0, udp: false, ecn });
            }
            (Family::V6, IpAddr::V6(src), Some(IpAddr::V6(dst)))
                if ipv6_in_front(
                    &mut packet,
                    &Front { src, dst, proto, ecn, hop_limit, ext: &rx.got[i].ext },
                ) =>
            {
                batch.push(packet)
            }
            _ => {
                io.recv_errors.fetch_add(1, Ordering::Relaxed);
                rx.pool.put(packet.data);
            }
        }
    }
}

/// Network → core: ESP in UDP, a batch per recvmmsg. The socket has UDP GRO on: a run of
/// datagrams from one peer (one UDP GSO send of the peer's, or ones the kernel coalesced)
/// arrives as one message with its segment size, and is cut here into its datagrams. Each
/// datagram's payload is copied into a packet buffer behind the core's headroom and goes to
/// the core as a [`Payload`] with the addresses and ports: every datagram from this socket
/// is ESP in UDP, whatever the port — but IKE behind the Non-ESP Marker, which goes to the
/// key manager where one is attached ([`crate::ike_relay`]; to the core, which drops it as
/// `ike`, where none is).
pub fn udp_loop(
    core: &Ipsec,
    sink: &NetSink,
    tun: &TunQueues,
    relay: &Relay,
    sock: &Socket,
    family: Family,
    max: usize,
) {
    let mut rx = Receiver::coalescing(family, max, UDP_BATCH);
    let mut flush = Flush::new(tun);
    // The port every datagram here was sent to: the core checks it against the SA's.
    let dport = sock.local_addr().ok().and_then(|a| a.as_socket()).map_or(0, |a| a.port());
    loop {
        if let Err(e) = rx.receive(sock) {
            sink.io.recv_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("reading the UDP socket: {e}");
            continue;
        }
        for i in 0..rx.got.len() {
            let Received { len, src, dst, segment, truncated, ecn, .. } = rx.got[i];
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
                if relayed(relay, payload, src, dst, dport) {
                    continue;
                }
                let end = HEADROOM + payload.len();
                let mut data = rx.pool.get();
                if end > data.len() {
                    // Longer than any packet of ours (a peer's kernel fragmented it, ours
                    // reassembled it): a buffer of its own.
                    data.resize(end, 0);
                }
                data[HEADROOM..end].copy_from_slice(payload);
                data.truncate(end);
                let packet = Packet { data, head: HEADROOM };
                flush.payloads.push(Payload { packet, src, dst, dport, udp: true, ecn });
            }
            // A batch of coalesced datagrams can be hundreds: to the core as they come.
            core.input_payloads(flush.payloads.drain(..), &mut flush.results);
        }
        flush.run(sink, &mut rx.pool);
    }
}

/// Messages per recvmmsg on a UDP socket: each may hold up to 64 KiB of coalesced datagrams.
const UDP_BATCH: usize = 8;

#[cfg(test)]
mod tests {
    use std::net::{Ipv6Addr, SocketAddr};
    use std::sync::Arc;

    use ipsec_core::Sink;
    use socket2::SockAddr;

    use super::super::sockets::{ah_in, raw_out};
    use super::*;

    struct Nowhere;

    impl Sink for Nowhere {
        fn transmit(&self, _: Packet) {}
        fn deliver(&self, _: Packet) {}
    }

    /// A core with AH transport mode between ::1 and itself, its policy for `dir`.
    fn core(dir: &str) -> Ipsec {
        let fw = ocf::Framework::new();
        ocf_soft::register(&fw).unwrap();
        let core = Ipsec::new(fw, Arc::new(Nowhere));
        let key = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20";
        let text = format!(
            "add ::1 ::1 ah 0x2001 -m transport -A hmac-sha2-256 {key} ;\n\
             spdadd ::1 ::1 udp -P {dir} ipsec ah/transport//require ;"
        );
        for r in ipsec_core::setkey::parse(&text).unwrap() {
            core.control(&r.item).unwrap();
        }
        core
    }

    /// IPv6 from ::1 to ::1: a Hop-by-Hop header (PadN), a Destination Options header with
    /// an option whose change bit is set (type 0x3e, skipped by whoever does not know it),
    /// a Routing header (RFC 4727's experimental type 253, no segments left), and UDP with
    /// 32 bytes.
    fn plain() -> Vec<u8> {
        let lo = Ipv6Addr::LOCALHOST.octets();
        let mut p = vec![0x60, 0, 0, 0, 0, 0, 0, 64];
        p.extend_from_slice(&lo);
        p.extend_from_slice(&lo);
        p.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
        p.extend_from_slice(&[43, 0, 0x3e, 4, 0xca, 0xfe, 0xba, 0xbe]);
        p.extend_from_slice(&[17, 0, 253, 0, 0, 0, 0, 0]);
        p.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 40, 0, 0]);
        p.extend((0..32).map(|i| i as u8));
        let len = (p.len() - 40) as u16;
        p[4..6].copy_from_slice(&len.to_be_bytes());
        p
    }

    /// AH over IPv6 through the kernel: a packet with three extension headers in front of
    /// AH, sent to ::1 through a raw IPv6 socket with the header included, is read from the AH
    /// socket as ipsecd reads it (the payload, the hop limit and the headers in front of
    /// AH as control messages), put back together byte for byte as it was sent, and its
    /// ICV verifies: the core delivers the packet without AH.
    #[test]
    fn ah_over_ipv6_is_put_back_together_as_sent_and_its_icv_verifies() {
        let rx_sock = match ah_in(Family::V6) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                eprintln!("skipped: a raw socket needs CAP_NET_RAW: {e}");
                return;
            }
            Err(e) => panic!("raw AH socket: {e}"),
        };
        rx_sock.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap(); // generous: a shared machine
        let (sender, receiver) = (core("out"), core("in"));
        let mut out = Results::with_capacity(1);
        sender.output_one(Packet::new(plain()), &mut out).unwrap();
        let wire = out.transmit.pop().expect("AH").bytes().to_vec();
        // The core put AH after the Routing header (RFC 4302 §3.1.1).
        assert_eq!((wire[6], wire[40], wire[48], wire[56]), (0, 60, 43, 51), "HbH, DstOpts, RH, AH");
        let tx = raw_out(Family::V6, 0).unwrap();
        tx.send_to(&wire, &SockAddr::from(SocketAddr::from((Ipv6Addr::LOCALHOST, 0)))).unwrap();

        let mut rx = Receiver::with_extension_headers(Family::V6, 1500, HEADROOM);
        rx.receive(&rx_sock).unwrap();
        assert_eq!(rx.got.len(), 1);
        let ext = [
            (IpProtocol::HOP_BY_HOP, wire[40..48].to_vec()),
            (IpProtocol::DEST_OPTS, wire[48..56].to_vec()),
            (IpProtocol::ROUTING, wire[56..64].to_vec()),
        ];
        assert_eq!(rx.got[0].ext, ext, "the headers in front of AH, in order");
        let io = IoCounters::default();
        let (mut batch, mut payloads) = (Vec::new(), Vec::new());
        gather(&receiver, &io, &mut rx, IpProtocol::AH, &mut batch, &mut payloads);
        assert!(payloads.is_empty());
        assert_eq!(batch.len(), 1);
        assert_eq!(batch[0].bytes(), &wire[..], "the packet as it was sent");
        receiver.input(batch, Via::Esp, &mut out);
        assert_eq!(receiver.stats().total_drops(), 0, "{}", receiver.stats());
        assert_eq!(out.deliver.pop().expect("delivered").bytes(), &plain()[..]);
        assert_eq!(io.to_string(), IoCounters::default().to_string(), "no I/O error");

        // (In the same test: every raw AH socket of the host gets a copy of each packet.)
        too_long_headers_are_counted_as_control_cut(&rx_sock, &mut rx, &receiver);
    }

    /// AH over IPv6 with more extension headers in front of it than the control buffer
    /// holds (a 1,280-byte Hop-by-Hop header): its ICV could not be checked, so it is
    /// dropped and counted as `control_cut`, nothing reaches the core; the next packet is
    /// read whole again.
    fn too_long_headers_are_counted_as_control_cut(rx_sock: &Socket, rx: &mut Receiver, receiver: &Ipsec) {
        let lo = Ipv6Addr::LOCALHOST.octets();
        let packet = |hbh_len: usize| {
            let mut p = vec![0x60, 0, 0, 0, 0, 0, 0, 64];
            p.extend_from_slice(&lo);
            p.extend_from_slice(&lo);
            // Hop-by-Hop: unknown options to skip (type 0x1e, change bit clear) of 253
            // bytes each (Linux refuses more than 7 bytes of padding in a row), then PadN.
            let mut hbh = vec![51u8, (hbh_len / 8 - 1) as u8];
            while hbh_len - hbh.len() >= 255 + 3 {
                hbh.extend_from_slice(&[0x1e, 253]);
                hbh.extend(std::iter::repeat_n(0x77, 253));
            }
            let pad = hbh_len - hbh.len();
            hbh.extend_from_slice(&[1, (pad - 2) as u8]);
            hbh.resize(hbh_len, 0);
            p.extend_from_slice(&hbh);
            // AH (HMAC-SHA1-96's length) with no next header: never verified here.
            p.extend_from_slice(&[59, 4, 0, 0, 0, 0, 0x20, 0x01, 0, 0, 0, 1]);
            p.extend_from_slice(&[0xab; 12]);
            let len = (p.len() - 40) as u16;
            p[4..6].copy_from_slice(&len.to_be_bytes());
            p
        };
        let tx = raw_out(Family::V6, 0).unwrap();
        let to = SockAddr::from(SocketAddr::from((Ipv6Addr::LOCALHOST, 0)));
        let io = IoCounters::default();
        for (hbh_len, cut) in [(1280, true), (8, false)] {
            let sent = packet(hbh_len);
            tx.send_to(&sent, &to).unwrap();
            rx.receive(rx_sock).unwrap();
            assert_eq!((rx.got.len(), rx.got[0].control_cut), (1, cut), "{hbh_len}");
            let (mut batch, mut payloads) = (Vec::new(), Vec::new());
            gather(receiver, &io, rx, IpProtocol::AH, &mut batch, &mut payloads);
            assert_eq!(io.control_cut.load(Ordering::Relaxed), 1);
            match cut {
                true => assert!(batch.is_empty()),
                false => assert_eq!(batch[0].bytes(), &sent[..], "read whole after the cut one"),
            }
        }
    }
}
