//! The loops, one thread each: read a batch, hand it to the core, send its results. With
//! `--threads N` there are N TUN loops and N UDP loops per family, each on its own TUN
//! queue or socket ([`super::spread`]).

use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::Ordering;

use ipsec_core::stats::Drop;
use ipsec_core::{Ipsec, Packet, Payload, Results, Via, HEADROOM};
use ipsec_wire::{destination, ipv6, IpProtocol};
use nix::sys::socket::{MultiHeaders, SockaddrIn, SockaddrIn6};
use socket2::Socket;
use tun_rs::VIRTIO_NET_HDR_LEN;

use super::receive::{Received, Receiver, LARGEST};
use super::sockets::{buffer_size, Family};
use super::spread::TunQueues;
use super::transmit::NetSink;
use crate::afpacket::Links;
use crate::batch::{Pool, BATCH};
use crate::coalesce::{Coalescer, VIRTIO_HDR};

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
    raw_loop(core, sink, tun, sock, family, Via::Esp, IpProtocol::ESP, max)
}

/// Network → core: IPComp or IP-in-IP (`proto`) from a raw socket
/// ([`super::sockets::ipcomp_in`]), whole packets as [`Via::IpComp`]: the core decompresses
/// IPComp, decapsulates IP-in-IP between an IPComp SA's ends, and drops anything else as
/// `not_ipcomp`. An IPv6 socket returns only the payload: an IPv6 header is written in
/// front of it ([`ipv6_in_front`]).
pub fn ipcomp_loop(
    core: &Ipsec,
    sink: &NetSink,
    tun: &TunQueues,
    sock: &Socket,
    family: Family,
    proto: u8,
    max: usize,
) {
    raw_loop(core, sink, tun, sock, family, Via::IpComp, IpProtocol(proto), max)
}

/// A raw socket of protocol `proto`'s loop: whole IPv4 packets as `via` says; IPv6
/// payloads as [`Payload`]s (ESP) or behind a header written for them (IPComp's sockets).
#[allow(clippy::too_many_arguments)]
fn raw_loop(
    core: &Ipsec,
    sink: &NetSink,
    tun: &TunQueues,
    sock: &Socket,
    family: Family,
    via: Via,
    proto: IpProtocol,
    max: usize,
) {
    let mut rx = Receiver::new(family, max, HEADROOM);
    let mut flush = Flush::new(tun);
    loop {
        if let Err(e) = rx.receive(sock) {
            sink.io.recv_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("reading the raw {via:?} socket: {e}");
            continue;
        }
        for i in 0..rx.got.len() {
            let Received { len, src, dst, truncated, .. } = rx.got[i];
            if truncated {
                core.count_drop(Drop::Truncated);
                tracing::debug!("a {via:?} packet from {src} longer than {LARGEST} bytes, cut short");
                continue;
            }
            let mut data = rx.take(i, len);
            data.truncate(HEADROOM + len);
            let mut packet = Packet { data, head: HEADROOM };
            let ecn = rx.got[i].ecn;
            match (family, src.ip(), dst) {
                (Family::V4, _, _) if len > 0 => flush.batch.push(packet),
                (Family::V6, _, Some(dst)) if via == Via::Esp => {
                    flush.payloads.push(Payload { packet, src, dst, udp: false, ecn });
                }
                (Family::V6, IpAddr::V6(s), Some(IpAddr::V6(d)))
                    if ipv6_in_front(&mut packet, s, d, proto, ecn) =>
                {
                    flush.batch.push(packet)
                }
                _ => {
                    sink.io.recv_errors.fetch_add(1, Ordering::Relaxed);
                    rx.pool.put(packet.data);
                }
            }
        }
        core.input(flush.batch.drain(..), via, &mut flush.results);
        core.input_payloads(flush.payloads.drain(..), &mut flush.results);
        flush.run(sink, &mut rx.pool);
    }
}

/// Writes an IPv6 header from `src` to `dst` carrying `proto` (with the ECN field `ecn`
/// and hop limit 64) in front of `packet`, which an IPv6 raw socket returned without one,
/// and moves the packet's head onto it; false if there is no room in front or the payload
/// is longer than an IPv6 payload length says. The core's IPComp input takes whole
/// packets, and of the header it reads the addresses, the protocol, the length and the
/// ECN field (RFC 6040) — all of them what the socket reported. (Extension headers the
/// kernel took off are not rebuilt: nothing after decapsulation reads them.)
fn ipv6_in_front(packet: &mut Packet, src: Ipv6Addr, dst: Ipv6Addr, proto: IpProtocol, ecn: u8) -> bool {
    let len = packet.data.len() - packet.head;
    let Some(head) = packet.head.checked_sub(ipv6::HEADER_LEN) else {
        return false;
    };
    let repr = ipv6::Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: proto,
        payload_len: len,
        hop_limit: 64,
        dscp: 0,
        ecn: ecn & 3,
        flow_label: 0,
    };
    if len > usize::from(u16::MAX)
        || repr.emit(&mut ipv6::Packet::new_unchecked(&mut packet.data[head..])).is_err()
    {
        return false;
    }
    packet.head = head;
    true
}

/// Network → core: ESP in UDP, a batch per recvmmsg. The socket has UDP GRO on: a run of
/// datagrams from one peer (one UDP GSO send of the peer's, or ones the kernel coalesced)
/// arrives as one message with its segment size, and is cut here into its datagrams. Each
/// datagram's payload is copied into a packet buffer behind the core's headroom and goes to
/// the core as a [`Payload`] with the addresses and ports: every datagram from this socket
/// is ESP in UDP, whatever the port.
pub fn udp_loop(core: &Ipsec, sink: &NetSink, tun: &TunQueues, sock: &Socket, family: Family, max: usize) {
    let mut rx = Receiver::coalescing(family, max, UDP_BATCH);
    let mut flush = Flush::new(tun);
    loop {
        if let Err(e) = rx.receive(sock) {
            sink.io.recv_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("reading the UDP socket: {e}");
            continue;
        }
        for i in 0..rx.got.len() {
            let Received { len, src, dst, segment, truncated, ecn } = rx.got[i];
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
                flush.payloads.push(Payload { packet, src, dst, udp: true, ecn });
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
    use super::*;

    /// The header written in front of an IPv6 raw socket's payload parses as what the
    /// socket reported, and the payload is untouched.
    #[test]
    fn an_ipv6_header_in_front_of_a_raw_payload() {
        let (src, dst): (Ipv6Addr, Ipv6Addr) = ("fd00:99::1".parse().unwrap(), "fd00:99::2".parse().unwrap());
        let payload = [0x04, 0x00, 0x10, 0x01, 0xde, 0xad];
        let mut data = vec![0u8; HEADROOM];
        data.extend_from_slice(&payload);
        let mut p = Packet { data, head: HEADROOM };
        assert!(ipv6_in_front(&mut p, src, dst, IpProtocol::IPCOMP, 3));
        assert_eq!(p.head, HEADROOM - ipv6::HEADER_LEN);
        let h = ipv6::Packet::new_checked(p.bytes()).unwrap();
        let r = ipv6::Repr::parse(&h).unwrap();
        assert_eq!(
            (r.src_addr, r.dst_addr, r.next_header, r.payload_len, r.ecn),
            (src, dst, IpProtocol::IPCOMP, 6, 3)
        );
        assert_eq!(&p.bytes()[ipv6::HEADER_LEN..], &payload);
        // No room in front: refused, the packet as it was.
        let mut q = Packet { data: payload.to_vec(), head: 0 };
        assert!(!ipv6_in_front(&mut q, src, dst, IpProtocol::IPCOMP, 0));
        assert_eq!((q.head, q.data.as_slice()), (0, &payload[..]));
    }
}
