//! The gateway's own I/O counters (the core counts its drops).

use std::sync::atomic::{AtomicU64, Ordering};

/// The gateway's own I/O counters (the core counts its drops): errors of the I/O itself,
/// the kernel's link-scope packets the TUN loop drops before the core, packets whose
/// control messages were cut short, and the NAT-keepalives sent.
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
    /// Packets dropped because their control messages did not fit the buffer for them
    /// (MSG_CTRUNC): AH over IPv6 with more than 1 KiB of extension headers in front of
    /// AH, which its ICV covers and which the socket could not hand over whole
    /// (`net::receive::EXTENSION_ROOM`).
    pub control_cut: AtomicU64,
}

impl IoCounters {
    /// Every counter, by the name `ipsecctl stats` and the metrics give it.
    pub fn all(&self) -> [(&'static str, u64); 7] {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            ("send_errors", r(&self.send_errors)),
            ("tun_write_errors", r(&self.tun_write_errors)),
            ("receive_errors", r(&self.recv_errors)),
            ("tun_link_scope", r(&self.tun_link_scope)),
            ("keepalives_sent", r(&self.keepalives_sent)),
            ("packet_socket_sent", r(&self.packet_socket_sent)),
            ("control_cut", r(&self.control_cut)),
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
