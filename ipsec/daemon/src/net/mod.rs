//! The gateway's I/O: the TUN device on the protected side, raw IP and UDP sockets on the
//! network side, and the loops that hand every batch to the Fast IPsec core.
//!
//! ```text
//!  TUN queue i ─ recv_multiple (GSO split) ─ tun_loop i ─ Ipsec::output(batch) ─┐
//!                                                                                │ Results.transmit
//!            transmit: runs to one peer as one UDP GSO send, the rest ◄──────────┘  one sendmmsg ──► network
//!                      (raw ESP through the packet socket where the next hop is known,
//!                       crate::afpacket; a send refused as too big tells the core's path MTU)
//!  network ─ raw ESP socket ─ esp_loop ─ Ipsec::input(batch, Via::Esp) (IPv4: header kept)
//!                                      └ Ipsec::input_payloads(batch)  (IPv6: header taken off)
//!  network ─ raw AH socket (IPv4, IPv6) ─ ah_loop ─ Ipsec::input(batch, Via::Esp) (the core
//!            finds AH in the packet; IPv6: the header and the extension headers in front of
//!            AH, which the socket reports, written back in front of the payload)
//!  network ─ raw IPComp and IP-in-IP sockets (108, 4, 41; IPv4 and IPv6) ─ ipcomp_loop (one each)
//!            ─ Ipsec::input(batch, Via::IpComp) (IPComp, IP-in-IP between an IPComp SA's ends;
//!              IPv6: a header written in front of the payload the socket returns)
//!  network ─ UDP --ike-port (500) ─ ike_loop ─ Relay::offer ─► key manager (crate::ike_relay)
//!  network ─ UDP --udp-port (GRO), socket i ─ udp_loop i ─ IKE (Non-ESP Marker) ─► Relay::offer
//!                                                        └ Ipsec::input_payloads(batch) ─┐
//!                                                                                        │ Results.deliver
//!            coalesce: runs of one TCP flow as one TUN write (virtio GSO) ◄──────────────┘ ──► TUN, through
//!                                                                                   the flow's queue
//!  asynchronous driver's completions ─ NetSink (one packet at a time) ─► network / TUN
//! ```
//!
//! With `--threads N` there are N TUN queues and N UDP sockets per family, a loop on each
//! (i = 0 … N-1); the kernel spreads packets over them by flow and by SPI ([`spread`]).
//!
//! - [`sockets`]: opening the sockets (raw out with the header included, raw ESP, AH,
//!   IPComp and IP-in-IP in, the UDP socket of ESP in UDP with GRO, packet info and the
//!   outer TOS, the IKE port's UDP socket; AH over IPv6 also the hop limit and extension
//!   headers).
//! - [`receive`]: reading a batch with one recvmmsg into pooled buffers.
//! - `ike`: IKE for the relay ([`crate::ike_relay`]): the IKE port's loop, the split of
//!   IKE from ESP on the NAT-T port, and where the key manager's datagrams leave.
//! - `front`: what an IPv6 raw socket took off (the header, AH's extension headers)
//!   written back in front of its payload, for the core's whole-packet inputs.
//! - `loops`: the loops, each a thread: encryption (the TUN side) and decryption (the
//!   network side) run on different cores. Each reads a batch per system call, hands it to
//!   the core, and sends what came back with as few more as it can.
//! - [`spread`]: `--threads N`: N TUN queues and N UDP sockets per family, the kernel
//!   spreading packets over them by flow (TUN) and by SPI (UDP), a TUN loop and a UDP loop
//!   per family on each.
//! - [`transmit`]: sending a batch's results (UDP GSO runs, the packet socket, the raw IP
//!   sockets), and [`NetSink`] for what an asynchronous driver finishes later.
//! - `counters`: the I/O's own counters.
//!
//! Nothing is rebuilt for ESP: ESP in UDP reaches the core as the datagram's payload with
//! the addresses, ports and ECN field the socket reported ([`ipsec_core::Payload`]), and so
//! does IPv6 ESP (whose raw socket returns only the payload); IPv4 raw sockets return the
//! whole packet, which goes in as it is. AH (whose ICV covers the IPv6 header and the
//! extension headers in front of it) and IPComp over IPv6 get their headers written back
//! (`front`).

mod counters;
mod front;
mod ike;
mod loops;
pub mod receive;
pub mod sockets;
pub mod spread;
pub mod transmit;

pub use counters::IoCounters;
pub use ike::{ike_loop, IkeOut};
pub use loops::{ah_loop, esp_loop, ipcomp_loop, tun_loop, udp_loop};
pub use sockets::{ah_in, esp_in, ike, ipcomp_in, raw_out, udp, udp_group, Family};
pub use spread::TunQueues;
pub use transmit::NetSink;

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
