//! How `--threads N` spreads the work over N workers, each a TUN loop and a UDP loop of its
//! own per family, without a thread hop: the kernel hands each worker its share.
//!
//! ```text
//!  protected side: TUN queue i ─ tun_loop i          (the kernel picks the queue per flow)
//!  network side:   UDP socket i of the port ─ udp_loop i    (reuseport group: socket SPI % N)
//!  decapsulated:   written to TUN queue flow_queue(packet) ─┘ which is the queue the kernel
//!                  then reads that flow's outbound packets from
//! ```
//!
//! - **TUN, by flow.** A multi-queue TUN (IFF_MULTI_QUEUE) has one file per queue, and the
//!   kernel sends each packet routed into it to one queue: its "automq" keeps a table of
//!   flows (a hash of addresses and ports, the same both ways) and gives a flow the queue
//!   that its packets were last *written* through, or one by hash if none was. So the
//!   network-side loops write each decapsulated packet through the queue that
//!   [`flow_queue`] picks for its flow: a TCP connection's data then leaves through that
//!   queue too, always the same one, and different connections spread over the queues by
//!   our hash. (Writing everything through one queue, as any fixed choice would, drew every
//!   flow with return traffic to that queue's single reader.)
//! - **ESP in UDP, by SPI.** The N UDP sockets of the port form an SO_REUSEPORT group, and
//!   a classic BPF program ([`spi_program`]) picks the socket for each datagram: SPI mod N.
//!   The kernel's default, a hash of the 4-tuple, would give every packet from one peer to
//!   one socket (NAT-T peers send from 4500 to 4500); by SPI, a peer's SAs spread over the
//!   workers while each SA stays on one (its packets in order, its replay window's lock
//!   held by one thread at a time). A datagram too short to have an SPI (a NAT-keepalive)
//!   goes to socket 0, whose worker counts it. One SA is one worker's: a single tunnel's
//!   inbound traffic does not spread (its packets are one sequence; see the README).
//! - **Raw ESP** stays one socket and one thread per family: every raw socket of a protocol
//!   gets its own copy of every packet, so N of them would cost N copies per packet.
//!
//! With `--threads 1` nothing here is used: one plain TUN queue and one UDP socket per
//! family, as before.

use std::sync::Arc;

use nix::libc::{sock_filter, sock_fprog, BPF_A, BPF_ABS, BPF_ALU, BPF_K, BPF_LD, BPF_MOD, BPF_RET, BPF_W};
use nix::sys::socket::{setsockopt, sockopt};
use socket2::Socket;
use tun_rs::SyncDevice;

/// The TUN's queues, one per worker (one, the device itself, without `--threads`).
pub struct TunQueues {
    queues: Vec<Arc<SyncDevice>>,
}

impl TunQueues {
    /// `first` (a TUN made with multi-queue on if `n` > 1) and `n - 1` more queues of it.
    pub fn open(first: Arc<SyncDevice>, n: usize) -> std::io::Result<TunQueues> {
        let mut queues = vec![first];
        for _ in 1..n {
            queues.push(Arc::new(queues[0].try_clone()?));
        }
        Ok(TunQueues { queues })
    }

    /// Queue `i`, which worker `i` reads.
    pub fn queue(&self, i: usize) -> &Arc<SyncDevice> {
        &self.queues[i]
    }

    pub fn len(&self) -> usize {
        self.queues.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// The queue to write the IP packet `ip` through: its flow's ([`flow_queue`]).
    #[inline]
    pub fn for_packet(&self, ip: &[u8]) -> &SyncDevice {
        &self.queues[flow_queue(ip, self.queues.len())]
    }
}

/// The queue among `n` for the IP packet `ip`'s flow: a hash of its addresses, protocol
/// and (TCP, UDP, SCTP, not a fragment) ports, the same for both directions of a flow.
/// Anything unparsable goes to queue 0.
pub fn flow_queue(ip: &[u8], n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    let word = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let (addrs, proto, l4) = match ip.first().map(|b| b >> 4) {
        Some(4) if ip.len() >= 20 => {
            let whole = ip[6] & 0x3f == 0 && ip[7] == 0;
            let ihl = usize::from(ip[0] & 0xf) * 4;
            (word(&ip[12..16]) ^ word(&ip[16..20]), ip[9], whole.then_some(ihl))
        }
        Some(6) if ip.len() >= 40 => {
            let fold = ip[8..40].chunks_exact(4).fold(0, |h, w| h ^ word(w));
            (fold, ip[6], Some(40))
        }
        _ => return 0,
    };
    let ports = match (proto, l4) {
        (6 | 17 | 132, Some(at)) if ip.len() >= at + 4 => {
            u32::from(u16::from_be_bytes([ip[at], ip[at + 1]]) ^ u16::from_be_bytes([ip[at + 2], ip[at + 3]]))
        }
        _ => 0,
    };
    // Fibonacci hashing: the high half of the product spreads all the input bits.
    let h = (addrs ^ ports.rotate_left(16) ^ u32::from(proto)).wrapping_mul(0x9e37_79b9);
    ((u64::from(h) * n as u64) >> 32) as usize
}

/// The reuseport program of a group of `n` sockets: the socket for a datagram is its first
/// four payload bytes (ESP's SPI) mod `n`. The kernel runs it with the UDP header pulled,
/// so offset 0 is the payload; a load past the end ends the program with 0: socket 0.
pub fn spi_program(n: u32) -> [sock_filter; 3] {
    let op = |code: u32, k: u32| sock_filter { code: code as u16, jt: 0, jf: 0, k };
    [
        op(BPF_LD | BPF_W | BPF_ABS, 0),  // A = SPI
        op(BPF_ALU | BPF_MOD | BPF_K, n), // A %= n
        op(BPF_RET | BPF_A, 0),           // socket A
    ]
}

/// Attaches [`spi_program`] to the reuseport group `sock` belongs to (one socket of the
/// group is enough: the program is the group's).
pub fn spread_by_spi(sock: &Socket, n: u32) -> std::io::Result<()> {
    let mut prog = spi_program(n);
    let fprog = sock_fprog { len: prog.len() as u16, filter: prog.as_mut_ptr() };
    setsockopt(sock, sockopt::AttachReusePortCbpf, &fprog).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, proto, 0, 0];
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.resize(40, 0);
        p
    }

    fn v6(src: u8, dst: u8, proto: u8, sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 8, proto, 64];
        p.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, src]);
        p.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, dst]);
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.resize(48, 0);
        p
    }

    #[test]
    fn both_directions_of_a_flow_take_one_queue() {
        for n in 2..=8 {
            for port in 40000..40100 {
                let (a, b) = ([10, 98, 1, 1], [10, 98, 2, 1]);
                assert_eq!(flow_queue(&v4(a, b, 6, port, 5201), n), flow_queue(&v4(b, a, 6, 5201, port), n));
                assert_eq!(flow_queue(&v6(1, 2, 17, port, 53), n), flow_queue(&v6(2, 1, 17, 53, port), n));
            }
        }
    }

    #[test]
    fn flows_spread_over_every_queue() {
        for n in 2..=8 {
            let mut seen = vec![0usize; n];
            for port in 40000..41000 {
                seen[flow_queue(&v4([10, 98, 1, 1], [10, 98, 2, 1], 6, port, 5201), n)] += 1;
            }
            // 1000 flows over n queues: each gets its share within a third.
            for (q, &c) in seen.iter().enumerate() {
                assert!(c * n > 666 && c * n < 1334, "queue {q} of {n}: {c} flows of 1000 ({seen:?})");
            }
        }
    }

    #[test]
    fn one_queue_and_what_cannot_be_parsed_go_to_queue_0() {
        assert_eq!(flow_queue(&v4([1, 2, 3, 4], [5, 6, 7, 8], 6, 1, 2), 1), 0);
        assert_eq!(flow_queue(&[], 4), 0);
        assert_eq!(flow_queue(&[0x45, 0, 0], 4), 0);
        assert_eq!(flow_queue(&[0x70; 60], 4), 0);
    }

    #[test]
    fn fragments_and_portless_protocols_hash_by_address_only() {
        let n = 64;
        let mut frag = v4([10, 0, 0, 1], [10, 0, 0, 2], 17, 1, 2);
        frag[6] = 0x20; // more fragments: the ports may not be there
        let mut other = frag.clone();
        other[20..24].copy_from_slice(&[9, 9, 9, 9]);
        assert_eq!(flow_queue(&frag, n), flow_queue(&other, n));
        let icmp = v4([10, 0, 0, 1], [10, 0, 0, 2], 1, 0x0800, 0);
        let mut icmp2 = icmp.clone();
        icmp2[20..24].copy_from_slice(&[0, 0, 0x12, 0x34]);
        assert_eq!(flow_queue(&icmp, n), flow_queue(&icmp2, n));
    }

    /// The program against the kernel: a reuseport group of four UDP sockets on loopback,
    /// datagrams whose first four bytes are SPIs 256..=271 each reach socket SPI % 4, and
    /// a one-byte datagram (a NAT-keepalive: no SPI) socket 0. Needs nothing but a free
    /// port (no privilege).
    #[test]
    fn the_kernel_picks_the_socket_by_spi() {
        use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
        use std::time::Duration;

        use socket2::{Domain, Protocol, SockAddr, Type};

        let n = 4;
        let first = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        first.set_reuse_port(true).unwrap();
        first.bind(&SockAddr::from(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))).unwrap();
        let at = first.local_addr().unwrap();
        let mut group = vec![first];
        for _ in 1..n {
            let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
            s.set_reuse_port(true).unwrap();
            s.bind(&at).unwrap();
            group.push(s);
        }
        spread_by_spi(&group[0], n as u32).unwrap();
        let group: Vec<UdpSocket> = group.into_iter().map(UdpSocket::from).collect();
        for s in &group {
            s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        }
        let tx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let to = at.as_socket().unwrap();
        let mut buf = [0u8; 64];
        for spi in 256u32..272 {
            let mut d = spi.to_be_bytes().to_vec();
            d.extend_from_slice(&[0; 12]);
            tx.send_to(&d, to).unwrap();
            let want = spi as usize % n;
            let (len, _) = group[want].recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..len], &d[..], "SPI {spi} on socket {want}");
        }
        tx.send_to(&[0xff], to).unwrap();
        assert_eq!(group[0].recv_from(&mut buf).unwrap().0, 1, "a keepalive on socket 0");
        for s in &group {
            s.set_nonblocking(true).unwrap();
            assert!(s.recv_from(&mut buf).is_err(), "nothing left anywhere");
        }
    }
}
