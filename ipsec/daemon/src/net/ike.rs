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

#[cfg(test)]
mod tests {
    use std::hint::black_box;
    use std::time::Instant;

    use super::*;

    fn relay() -> Arc<Relay> {
        let path = std::env::temp_dir().join(format!("ipsecd-ike-split-{}.sock", std::process::id()));
        let (relay, _listener) = Relay::bind(&path).unwrap();
        let _ = std::fs::remove_file(path);
        relay
    }

    fn addrs() -> (SocketAddr, IpAddr) {
        ("198.51.100.9:4500".parse().unwrap(), "192.0.2.1".parse().unwrap())
    }

    #[test]
    fn esp_keepalives_and_junk_are_left_to_the_core() {
        let relay = relay();
        let (src, dst) = addrs();
        let esp = [0, 0, 0x10, 0, 0, 0, 0, 1, 0xaa, 0xbb];
        let short_marker = [0, 0, 0, 0, 1, 2];
        for payload in [&esp[..], &[0xff], &[], &short_marker[..]] {
            assert!(!relayed(&relay, payload, src, dst, 4500), "{payload:?}");
        }
        // None of these was IKE: none counted as IKE without a key manager.
        assert_eq!(relay.counters.no_key_manager.load(Ordering::Relaxed), 0);
        // IKE without a key manager: counted, and left to the core (which drops it as `ike`).
        let mut ike = vec![0u8; 4];
        ike.extend_from_slice(&[7; 28]);
        assert!(!relayed(&relay, &ike, src, dst, 4500));
        assert_eq!(relay.counters.no_key_manager.load(Ordering::Relaxed), 1);
    }

    /// What the split costs an ESP datagram on the NAT-T port: `relayed` on a 1,400-byte ESP
    /// payload against the same loop without it. Run: `cargo test --release -p ipsecd --lib
    /// -- --ignored --nocapture ike_split_cost`; medians of ns per datagram over 21 rounds.
    #[test]
    #[ignore = "a measurement"]
    fn ike_split_cost() {
        let relay = relay();
        let (src, dst) = addrs();
        let mut esp = vec![0x5au8; 1400];
        esp[..8].copy_from_slice(&[0, 0, 0x10, 0, 0, 0, 0, 1]);
        const N: usize = 10_000_000;
        let mut ns: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for round in 0..42 {
            let with = round % 2 == 1;
            let t = Instant::now();
            let mut kept = 0usize;
            for _ in 0..N {
                let p = black_box(&esp[..]);
                if !(with && relayed(&relay, p, src, dst, 4500)) {
                    kept += p.len() & 1;
                }
            }
            black_box(kept);
            ns[usize::from(with)].push(t.elapsed().as_nanos() as f64 / N as f64);
        }
        for (name, v) in ["without the split", "with the split"].iter().zip(ns.iter_mut()) {
            v.sort_by(f64::total_cmp);
            println!("{name}: median {:.2} ns per datagram", v[v.len() / 2]);
        }
    }
}
