//! Raw ESP out through a packet socket (AF_PACKET), past the kernel's IP output path.
//!
//! ```text
//!  net::transmit_batch ── a run of raw ESP packets to one peer ──► Links::send
//!     next hop known and checked within REFRESH ──► sendmmsg on AF_PACKET SOCK_DGRAM
//!                                                   ──► the device's queue
//!     unknown, or time to check again ──► the raw IP socket, as before (the kernel routes it)
//! ```
//!
//! Why: in bench/ipsec-throughput's raw ESP case (perf, whole machine, 2 cores both busy)
//! the sending thread's `sendmmsg` through the IPPROTO_RAW socket was 43% of all CPU time;
//! of it a fifth was routing each packet on its own (fib rules, a route lookup and a fresh
//! route entry per packet: `ip_route_output_flow` 6.3%, `dst_alloc`) and more the IP output
//! path (`ip_output`, netfilter's hooks, the neighbour lookup). A packet socket hands each
//! packet to the device's queue with the link header from the address given: no route, no
//! netfilter. Measured (`tests::send_cost`, 64 packets of 1400 bytes per sendmmsg over
//! veth, the peer's IP input included): 3461 ns per packet through the raw socket, 2597
//! through this one; bench/ipsec-throughput raw ESP 1.32x the raw socket's throughput.
//!
//! There is no segmentation offload for raw ESP (UDP_SEGMENT is UDP's; a packet socket's
//! virtio header knows only TCP and UDP segmentation; ESP's GSO is only for the kernel's
//! own XFRM states), so one packet is still one skb: what this saves is work per skb. Not
//! used: a TX ring (`PACKET_TX_RING`) would save the per-message header copy (about 2% of
//! CPU in the profile) but lends the ring's pages to the skb, and a frame is handed back
//! when the skb is freed, while a clone (the peer's raw socket on veth) may still read it.

//! What a packet socket needs that the raw socket did not: the interface and the next
//! hop's link-layer address. Both come from the kernel (`Resolver`): the route to the
//! destination with ipsecd's mark (RTM_GETROUTE, so policy rules count as for the raw
//! socket), then the neighbour entry of its gateway or of the destination itself
//! (RTM_GETNEIGH). Only a unicast route over a device with 6-byte link addresses
//! (Ethernet and its kin) in a usable neighbour state is taken; anything else (a local or
//! unreachable destination, a tunnel device, a neighbour not yet resolved) goes through the
//! raw socket, which makes the kernel resolve it.
//!
//! How the answer stays right: it is asked again every [`REFRESH`] per destination (every
//! [`RETRY`] while there is none), and the packet that comes due then goes through the raw
//! socket. That packet passes through the
//! kernel's neighbour entry like any routed packet, so the kernel keeps the entry alive as
//! it would for its own traffic: a stale entry is probed (unicast, then broadcast) and a
//! neighbour that changed its address is learnt anew, which the next check picks up. A
//! neighbour that moves is thus followed within the kernel's own probe time plus
//! [`REFRESH`]; until then packets go to the old address, as the kernel's own do while its
//! entry is being probed. A failed send through the packet socket (the interface gone)
//! forgets the destination's link and sends the run through the raw socket.
//!
//! What an operator should know: raw ESP sent this way does not pass netfilter's OUTPUT
//! and POSTROUTING hooks (taps such as tcpdump and the egress qdisc still see it), and its
//! size is checked against the device's MTU, not a route's. `--esp-out ip` keeps every
//! packet on the raw socket.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use ipsec_core::Packet;
use ipsec_wire::destination;
use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_REQUEST};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteType};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use nix::libc;
use nix::sys::socket::{sendmmsg, LinkAddr, MsgFlags, MultiHeaders, SockaddrLike};
use socket2::{Domain, Socket, Type};

/// How raw ESP leaves (`--esp-out`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EspOut {
    /// Through a packet socket where the next hop is known, the raw IP socket elsewhere.
    #[default]
    Packet,
    /// Always through the raw IP socket (netfilter's OUTPUT and POSTROUTING see every packet).
    Ip,
}

/// How often a destination's link is asked of the kernel again (and one packet sent
/// through the raw socket to keep the kernel's neighbour entry alive).
pub const REFRESH: Duration = Duration::from_secs(1);

/// How soon a destination without a link is asked again: the kernel resolves a new
/// neighbour within milliseconds of the first packet the raw socket sends it (a transfer
/// that starts with an unresolved neighbour waited a whole [`REFRESH`] on the slow path).
/// A destination that never has one (a tunnel device, a local address) costs two netlink
/// requests per retry, about 20 a second.
pub const RETRY: Duration = Duration::from_millis(50);

/// Where the packets to one destination leave: the interface and the next hop's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub ifindex: u32,
    pub mac: [u8; 6],
}

/// The packet socket raw ESP leaves through (shared by the loops: a send takes `&self`).
pub struct PacketSocket {
    sock: Socket,
    /// ipsecd's mark, for the route lookups (policy rules see it as on the raw socket).
    mark: u32,
}

impl PacketSocket {
    /// A SOCK_DGRAM packet socket (the kernel writes the link header) that receives nothing
    /// (protocol 0); it carries `mark` like ipsecd's other sockets.
    ///
    /// Not `PACKET_QDISC_BYPASS`: on veth (no queue) it measured the same (`send_cost`:
    /// 2773 against 2831 ns per packet, the raw socket 3700 and 3806 in the same runs),
    /// and it would hide what we send from the device's taps (tcpdump on the gateway, the
    /// kernel suite's capture) and from the egress qdisc (shaping).
    pub fn open(mark: u32) -> io::Result<PacketSocket> {
        let sock = Socket::new(Domain::PACKET, Type::DGRAM, None)?;
        if mark != 0 {
            sock.set_mark(mark)?;
        }
        Ok(PacketSocket { sock, mark })
    }

    /// Sends `pkts` (whole IP packets of one family) to `link` with one sendmmsg; how many
    /// the kernel took.
    fn send(&self, hdrs: &mut MultiHeaders<LinkAddr>, pkts: &[Packet], link: Link) -> nix::Result<usize> {
        let Some(first) = pkts.first() else { return Ok(0) };
        let addr = link_addr(link, first.bytes()[0] >> 4 == 6);
        // One small allocation each per batch: the vectors borrow this batch's packets.
        let iovs: Vec<[std::io::IoSlice<'_>; 1]> =
            pkts.iter().map(|p| [std::io::IoSlice::new(p.bytes())]).collect();
        let addrs = vec![Some(addr); pkts.len()];
        sendmmsg(self.sock.as_raw_fd(), hdrs, &iovs, &addrs, [], MsgFlags::empty()).map(|r| r.count())
    }
}

/// The link-layer address of `link` for an IPv4 (or, `v6`, IPv6) packet.
fn link_addr(link: Link, v6: bool) -> LinkAddr {
    let mut addr = [0u8; 8];
    addr[..6].copy_from_slice(&link.mac);
    let ll = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: (if v6 { libc::ETH_P_IPV6 } else { libc::ETH_P_IP } as u16).to_be(),
        sll_ifindex: link.ifindex as i32,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 6,
        sll_addr: addr,
    };
    let len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: `ll` is a fully initialised sockaddr_ll that lives across the call, and `len`
    // is its size; from_raw copies it.
    unsafe { LinkAddr::from_raw((&ll as *const libc::sockaddr_ll).cast(), Some(len)) }
        .expect("a sockaddr_ll of AF_PACKET is a LinkAddr")
}

/// What to do with the run of packets at the front of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Send the first `n` through the packet socket to this link.
    Packet(Link, usize),
    /// Send the first `n` through the raw IP socket.
    Ip(usize),
}

/// What a destination's link was at the last check.
struct Peer {
    link: Option<Link>,
    checked: Instant,
}

/// A loop's next hops, one entry per destination, and its sendmmsg headers. Per thread: no
/// lock on the send path.
pub struct Links {
    peers: HashMap<IpAddr, Peer>,
    resolver: Option<Resolver>,
    hdrs: MultiHeaders<LinkAddr>,
}

impl Default for Links {
    fn default() -> Links {
        Links::new()
    }
}

impl Links {
    pub fn new() -> Links {
        Links {
            peers: HashMap::new(),
            resolver: None,
            hdrs: MultiHeaders::preallocate(crate::batch::BATCH, None),
        }
    }

    /// Sends the run of packets to one destination at the front of `pkts` (all raw IP
    /// packets, none for the UDP socket) through `sock` when its link is known: `Ok(n)`,
    /// the kernel took `n`. `Err(n)`: the first `n` are for the raw socket (after a failed
    /// send the link is forgotten and asked again, but for a packet too long for the device).
    pub fn send(&mut self, sock: &PacketSocket, pkts: &[Packet], now: Instant) -> Result<usize, usize> {
        let Some(dst) = pkts.first().and_then(|p| destination(p.bytes())) else {
            return Err(1);
        };
        let run = pkts.iter().take_while(|p| destination(p.bytes()) == Some(dst)).count();
        let mark = sock.mark;
        let resolver = &mut self.resolver;
        let plan = plan(&mut self.peers, dst, run, now, |d| {
            if resolver.is_none() {
                *resolver = Resolver::open()
                    .map_err(|e| tracing::info!("netlink for the packet socket's next hops: {e}"))
                    .ok();
            }
            resolver.as_mut().and_then(|r| r.link(d, mark))
        });
        match plan {
            Plan::Ip(n) => Err(n),
            Plan::Packet(link, n) => {
                match sock.send(&mut self.hdrs, &pkts[..n.min(crate::batch::BATCH)], link) {
                    Ok(sent) if sent > 0 => Ok(sent),
                    // The first packet is longer than the device takes: its fault, not the
                    // link's. It goes to the raw socket, which fails it as before (counted
                    // as a send error); the link stays (forgetting it would cost two
                    // netlink requests per batch while such packets come).
                    Err(nix::errno::Errno::EMSGSIZE) => Err(1),
                    r => {
                        tracing::debug!("packet socket to {dst} ({link:?}): {r:?}; through the IP socket");
                        self.peers.remove(&dst);
                        Err(n)
                    }
                }
            }
        }
    }
}

/// The plan for a run of `run` packets to `dst` at `now`: a destination not checked within
/// [`REFRESH`] ([`RETRY`] if it had no link) is looked up again (`resolve`) and its first
/// packet goes through the raw socket; one without a link goes there whole.
fn plan(
    peers: &mut HashMap<IpAddr, Peer>,
    dst: IpAddr,
    run: usize,
    now: Instant,
    resolve: impl FnOnce(IpAddr) -> Option<Link>,
) -> Plan {
    match peers.get(&dst) {
        Some(p) if now.duration_since(p.checked) < if p.link.is_some() { REFRESH } else { RETRY } => {
            match p.link {
                Some(link) => Plan::Packet(link, run),
                None => Plan::Ip(run),
            }
        }
        _ => {
            peers.insert(dst, Peer { link: resolve(dst), checked: now });
            Plan::Ip(1)
        }
    }
}

/// Asks the kernel for routes and neighbours over rtnetlink, one request at a time.
struct Resolver {
    socket: netlink_sys::Socket,
    seq: u32,
}

impl Resolver {
    fn open() -> io::Result<Resolver> {
        let mut socket = netlink_sys::Socket::new(netlink_sys::constants::NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&netlink_sys::SocketAddr::new(0, 0))?;
        Ok(Resolver { socket, seq: 0 })
    }

    /// The link packets to `dst` with `mark` leave by, if a packet socket can send them.
    fn link(&mut self, dst: IpAddr, mark: u32) -> Option<Link> {
        let route = match self.ask(RouteNetlinkMessage::GetRoute(route_query(dst, mark))) {
            Ok(RouteNetlinkMessage::NewRoute(r)) => r,
            other => {
                tracing::debug!("route to {dst}: {other:?}");
                return None;
            }
        };
        let (ifindex, hop) = next_hop(&route, dst)?;
        match self.ask(RouteNetlinkMessage::GetNeighbour(neighbour_query(ifindex, hop))) {
            Ok(RouteNetlinkMessage::NewNeighbour(n)) => neighbour_mac(&n).map(|mac| Link { ifindex, mac }),
            other => {
                tracing::debug!("neighbour {hop} on {ifindex}: {other:?}");
                None
            }
        }
    }

    /// Sends one request and returns the kernel's answer to it.
    fn ask(&mut self, m: RouteNetlinkMessage) -> io::Result<RouteNetlinkMessage> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST;
        header.sequence_number = self.seq;
        let mut msg = NetlinkMessage::new(header, NetlinkPayload::from(m));
        msg.finalize();
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.serialize(&mut buf);
        self.socket.send(&buf, 0)?;
        let mut rx = vec![0u8; 16 * 1024];
        loop {
            let n = self.socket.recv(&mut &mut rx[..], 0)?;
            let reply = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[..n])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            if reply.header.sequence_number != self.seq {
                continue;
            }
            return match reply.payload {
                NetlinkPayload::InnerMessage(m) => Ok(m),
                NetlinkPayload::Error(e) => Err(e.to_io()),
                other => Err(io::Error::other(format!("unexpected netlink answer {other:?}"))),
            };
        }
    }
}

/// `ip route get DST mark MARK`.
fn route_query(dst: IpAddr, mark: u32) -> RouteMessage {
    let mut m = RouteMessage::default();
    m.header.address_family = family(dst);
    m.header.destination_prefix_length = if dst.is_ipv4() { 32 } else { 128 };
    m.attributes.push(RouteAttribute::Destination(RouteAddress::from(dst)));
    if mark != 0 {
        m.attributes.push(RouteAttribute::Mark(mark));
    }
    m
}

/// `ip neigh get HOP dev IFINDEX`.
fn neighbour_query(ifindex: u32, hop: IpAddr) -> NeighbourMessage {
    let mut m = NeighbourMessage::default();
    m.header.family = family(hop);
    m.header.ifindex = ifindex;
    m.attributes.push(NeighbourAttribute::Destination(match hop {
        IpAddr::V4(a) => NeighbourAddress::Inet(a),
        IpAddr::V6(a) => NeighbourAddress::Inet6(a),
    }));
    m
}

fn family(a: IpAddr) -> AddressFamily {
    if a.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    }
}

/// The interface and next hop (the gateway, or `dst` itself on a link) of a unicast route;
/// `None` for any other kind (local, unreachable, …) or a gateway of another family.
fn next_hop(route: &RouteMessage, dst: IpAddr) -> Option<(u32, IpAddr)> {
    if route.header.kind != RouteType::Unicast {
        return None;
    }
    let mut oif = None;
    let mut hop = dst;
    for a in &route.attributes {
        match a {
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Gateway(RouteAddress::Inet(g)) => hop = IpAddr::V4(*g),
            RouteAttribute::Gateway(RouteAddress::Inet6(g)) => hop = IpAddr::V6(*g),
            RouteAttribute::Gateway(_) | RouteAttribute::Via(_) => return None,
            _ => {}
        }
    }
    (hop.is_ipv4() == dst.is_ipv4()).then_some(())?;
    Some((oif?, hop))
}

/// The neighbour's 6-byte link address, if the entry is in a state the kernel itself would
/// send to (resolved: reachable, stale, delay, probe, permanent).
fn neighbour_mac(n: &NeighbourMessage) -> Option<[u8; 6]> {
    use NeighbourState as S;
    if !matches!(n.header.state, S::Reachable | S::Stale | S::Delay | S::Probe | S::Permanent) {
        return None;
    }
    n.attributes.iter().find_map(|a| match a {
        NeighbourAttribute::LinkLocalAddress(b) if b.len() == 6 && b.iter().any(|&x| x != 0) => {
            b.as_slice().try_into().ok()
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests;
