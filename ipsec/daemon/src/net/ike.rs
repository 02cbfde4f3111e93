//! IKE on the network side, for the relay ([`crate::ike_relay`]): the loop that reads the
//! IKE port (500) and offers each datagram to the key manager, and [`IkeOut`], where the
//! key manager's datagrams leave (the IKE socket, or the NAT-T socket behind the Non-ESP
//! Marker). IKE on the NAT-T port is split from ESP in `udp_loop` (`loops.rs`).

use std::io::IoSlice;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ipsec_wire::udp_encap::{classify, Encapsulated, NON_ESP_MARKER};
use socket2::Socket;

use super::receive::{Received, Receiver, LARGEST};
use super::sockets::Family;
use super::transmit::{send_from, NetSink};
use crate::batch::Pool;
use crate::ike_relay::{Datagram, Offer, OutError, Outlet, Relay};

/// Datagrams per read on the IKE port (IKE is a few messages a second per peer).
const IKE_BATCH: usize = 4;

/// The IKE port's loop: each datagram to the key manager, with the local address it was
/// sent to and the peer's; without a key manager it is dropped (`no_key_manager`).
pub fn ike_loop(relay: &Relay, sink: &NetSink, sock: &Socket, family: Family) {
    let port = sock.local_addr().ok().and_then(|a| a.as_socket()).map_or(0, |a| a.port());
    // A few buffers for the largest datagram: nothing is cut, nothing needs the core's room.
    let mut pool = Pool::new(LARGEST);
    let bufs = (0..IKE_BATCH).map(|_| pool.get()).collect();
    let mut rx = Receiver::with(family, pool, bufs, (0, LARGEST), 0, false);
    loop {
        if let Err(e) = rx.receive(sock) {
            sink.io.recv_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("reading the IKE socket: {e}");
            continue;
        }
        for i in 0..rx.got.len() {
            let Received { len, src, dst, truncated, .. } = rx.got[i];
            let Some(dst) = dst.filter(|_| !truncated) else {
                sink.io.recv_errors.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let data = rx.take(i, len);
            relay.offer(SocketAddr::new(dst, port), src, false, &data[..len]);
            rx.pool.put(data);
        }
    }
}

/// Whether `payload`, a datagram on the NAT-T port from `src` to `dst`, port `dport`, is IKE
/// that the key manager took (or that was dropped on its way there). False for ESP and
/// everything else, and for IKE without a key manager: the core counts those as before.
/// ESP costs one comparison of four bytes.
#[inline]
pub(super) fn relayed(relay: &Relay, payload: &[u8], src: SocketAddr, dst: IpAddr, dport: u16) -> bool {
    if !payload.starts_with(&NON_ESP_MARKER) {
        return false;
    }
    match classify(payload) {
        Ok(Encapsulated::Ike(message)) => {
            relay.offer(SocketAddr::new(dst, dport), src, true, message) != Offer::Unattached
        }
        _ => false,
    }
}

/// Where the key manager's datagrams leave: from the IKE port's socket of their family, or
/// from the NAT-T port's (the sink's) behind the Non-ESP Marker; from the record's local
/// address either way (packet info).
pub struct IkeOut {
    pub sink: Arc<NetSink>,
    /// The IKE port's sockets (none with `--ike-port 0`) and their port.
    pub ike4: Option<Arc<Socket>>,
    pub ike6: Option<Arc<Socket>>,
    pub ike_port: u16,
}

impl Outlet for IkeOut {
    fn send(&self, d: &Datagram) -> Result<(), OutError> {
        let sent = if d.nat_t {
            if d.local.port() != self.sink.udp_port {
                return Err(OutError::WrongPort);
            }
            self.sink.send_ike(d.local.ip(), d.remote, &d.bytes)
        } else {
            let sock = if d.remote.is_ipv4() { &self.ike4 } else { &self.ike6 };
            match sock {
                Some(sock) if d.local.port() == self.ike_port => {
                    send_from(sock, &[IoSlice::new(&d.bytes)], None, d.local.ip(), d.remote)
                }
                _ => return Err(OutError::WrongPort),
            }
        };
        sent.map(|_| ()).map_err(OutError::Io)
    }
}
