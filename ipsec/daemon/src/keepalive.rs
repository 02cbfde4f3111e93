//! NAT-keepalives (RFC 3948 §2.3, §4): a NAT forgets a UDP mapping that carries nothing
//! for a while, and the peer behind it can no longer be reached. So every peer of an
//! ESP-in-UDP SA that ipsecd sends on gets the one-octet 0xFF datagram from ipsecd's UDP
//! socket when nothing else went to it for `--nat-keepalive` seconds (20 by default, 0 =
//! none).
//!
//! ```text
//! main loop (every 200 ms) ─ Keepalives::run, every interval/4 at most:
//!   SAD: ESP-in-UDP SAs from one of our addresses ─ per peer (our address, its address
//!   and port): packets sealed so far ─ Schedule::due ─ NetSink::send_keepalive
//! ```
//!
//! No thread of its own, and nothing on the packet path: the daemon's main loop already
//! wakes every 200 ms (signals, SA lifetimes), and whether a peer was sent anything is read
//! from the SAs' own counters (a peer is quiet while the sum of its SAs' packets out stays
//! the same) rather than stamped per packet. The price is resolution: a keepalive goes at
//! most a quarter of the interval (or 200 ms) late.
//!
//! A peer is an SA's destination address and the port it is sent to, which is the port
//! learned by port floating when the peer moved ([`ipsec_core::sad::Sa::send_port`]),
//! with our address (the SA's source) to send from: several SAs to one peer (both
//! directions' pairs, a rekeyed one beside the old) make one peer.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use ipsec_core::sad::SaState;
use ipsec_core::Ipsec;

use crate::net::NetSink;

/// A peer to keep a NAT mapping open to: from our address `local` (our UDP port) to
/// `remote`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Peer {
    pub local: IpAddr,
    pub remote: SocketAddr,
}

/// When each peer is due a keepalive: the pure part.
pub struct Schedule {
    interval: Duration,
    peers: HashMap<Peer, Seen>,
}

/// What was last seen of a peer: the packets sent to it by then, and since when that
/// number has not changed (or the last keepalive went).
struct Seen {
    sent: u64,
    quiet_since: Instant,
}

impl Schedule {
    pub fn new(interval: Duration) -> Schedule {
        Schedule { interval, peers: HashMap::new() }
    }

    /// The peers due a keepalive at `now`, given every peer with the packets sent to it so
    /// far (`traffic`; a peer may come more than once, one entry per SA: they add up). A
    /// peer is due when the count has not moved for the interval, or since its last
    /// keepalive; a new peer starts quiet now; a peer no longer listed is forgotten.
    pub fn due(&mut self, now: Instant, traffic: impl IntoIterator<Item = (Peer, u64)>) -> Vec<Peer> {
        let mut sent: HashMap<Peer, u64> = HashMap::new();
        for (p, n) in traffic {
            *sent.entry(p).or_default() += n;
        }
        self.peers.retain(|p, _| sent.contains_key(p));
        let mut due = Vec::new();
        for (peer, n) in sent {
            let seen = self.peers.entry(peer).or_insert(Seen { sent: n, quiet_since: now });
            if seen.sent != n {
                *seen = Seen { sent: n, quiet_since: now };
            } else if now.duration_since(seen.quiet_since) >= self.interval {
                seen.quiet_since = now;
                due.push(peer);
            }
        }
        due
    }
}

/// The keepalives of a running daemon: when to look next, and the schedule.
pub struct Keepalives {
    schedule: Schedule,
    every: Duration,
    next: Instant,
}

impl Keepalives {
    /// Keepalives every `interval`; `None` for 0 (off).
    pub fn new(interval: Duration) -> Option<Keepalives> {
        if interval.is_zero() {
            return None;
        }
        let every = (interval / 4).max(Duration::from_millis(200));
        Some(Keepalives { schedule: Schedule::new(interval), every, next: Instant::now() })
    }

    /// Sends the keepalives that are due (call it often; it looks every quarter interval).
    pub fn run(&mut self, core: &Ipsec, sink: &NetSink) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + self.every;
        let local = match local_addresses() {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!("listing the local addresses for NAT-keepalives: {e}");
                return;
            }
        };
        for peer in self.schedule.due(now, traffic(core, &local)) {
            sink.send_keepalive(peer.local, peer.remote);
        }
    }
}

/// Every peer of an ESP-in-UDP SA that we send on (its source is one of our addresses),
/// with the packets the SA sent.
fn traffic(core: &Ipsec, local: &HashSet<IpAddr>) -> Vec<(Peer, u64)> {
    core.databases()
        .sad
        .dump(None)
        .iter()
        .filter(|sa| sa.state() != SaState::Dead && local.contains(&sa.id.src))
        .filter_map(|sa| {
            let port = sa.send_port()?;
            let peer = Peer { local: sa.id.src, remote: SocketAddr::new(sa.id.dst, port) };
            Some((peer, sa.stats().packets_out))
        })
        .collect()
}

/// This host's addresses (in ipsecd's network namespace).
pub(crate) fn local_addresses() -> nix::Result<HashSet<IpAddr>> {
    Ok(nix::ifaddrs::getifaddrs()?
        .filter_map(|i| {
            let a = i.address?;
            if let Some(v4) = a.as_sockaddr_in() {
                Some(IpAddr::V4(v4.ip()))
            } else {
                a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(port: u16) -> Peer {
        Peer { local: "192.0.2.1".parse().unwrap(), remote: SocketAddr::from(([192, 0, 2, 2], port)) }
    }

    #[test]
    fn a_quiet_peer_is_due_once_per_interval() {
        let s0 = Instant::now();
        let at = |ms: u64| s0 + Duration::from_millis(ms);
        let mut s = Schedule::new(Duration::from_secs(1));
        let p = peer(4500);
        // New: quiet from now on, not due yet.
        assert!(s.due(at(0), [(p, 5)]).is_empty());
        assert!(s.due(at(999), [(p, 5)]).is_empty());
        assert_eq!(s.due(at(1000), [(p, 5)]), [p]);
        // The keepalive restarts the interval.
        assert!(s.due(at(1500), [(p, 5)]).is_empty());
        assert_eq!(s.due(at(2000), [(p, 5)]), [p]);
    }

    #[test]
    fn a_peer_that_was_sent_something_is_not_due() {
        let s0 = Instant::now();
        let at = |ms: u64| s0 + Duration::from_millis(ms);
        let mut s = Schedule::new(Duration::from_secs(1));
        let p = peer(4500);
        assert!(s.due(at(0), [(p, 5)]).is_empty());
        // Traffic at 900 ms: quiet from then.
        assert!(s.due(at(900), [(p, 6)]).is_empty());
        assert!(s.due(at(1800), [(p, 6)]).is_empty());
        assert_eq!(s.due(at(1900), [(p, 6)]), [p]);
    }

    #[test]
    fn sas_to_one_peer_are_one_peer_and_a_gone_peer_is_forgotten() {
        let s0 = Instant::now();
        let at = |ms: u64| s0 + Duration::from_millis(ms);
        let mut s = Schedule::new(Duration::from_secs(1));
        let (p, q) = (peer(4500), peer(4600));
        assert!(s.due(at(0), [(p, 1), (p, 2), (q, 0)]).is_empty());
        // One SA of p sends, the other not: p was sent something.
        let mut due = s.due(at(1000), [(p, 2), (p, 2), (q, 0)]);
        assert_eq!(due, [q]);
        // q goes (its SA was removed, or the peer moved to another port) and comes back:
        // it starts quiet afresh.
        assert!(s.due(at(1500), [(p, 5)]).is_empty());
        due = s.due(at(2000), [(p, 5), (q, 0)]);
        assert!(due.is_empty(), "{due:?}");
        assert_eq!(s.due(at(3000), [(p, 5), (q, 0)]).len(), 2);
    }
}
