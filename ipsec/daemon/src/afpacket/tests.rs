use std::cell::Cell;
use std::net::{Ipv4Addr, Ipv6Addr};

use netlink_packet_route::neighbour::NeighbourHeader;

use super::*;

const A: Link = Link { ifindex: 7, mac: [2, 0, 0, 0, 0, 1] };
const B: Link = Link { ifindex: 7, mac: [2, 0, 0, 0, 0, 2] };

fn v4(a: [u8; 4]) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(a))
}

#[test]
fn a_destination_is_looked_up_once_per_refresh_and_its_first_packet_goes_through_ip() {
    let mut peers = HashMap::new();
    let dst = v4([10, 0, 0, 2]);
    let t0 = Instant::now();
    let asked = Cell::new(0);
    let ask = |link: Link| {
        let asked = &asked;
        move |d: IpAddr| {
            assert_eq!(d, dst);
            asked.set(asked.get() + 1);
            Some(link)
        }
    };
    // First sight: asked, and one packet through the raw socket (the kernel's entry).
    assert_eq!(plan(&mut peers, dst, 5, t0, ask(A)), Plan::Ip(1));
    // Within REFRESH: the whole run through the packet socket, the kernel not asked.
    assert_eq!(plan(&mut peers, dst, 4, t0, ask(A)), Plan::Packet(A, 4));
    assert_eq!(plan(&mut peers, dst, 64, t0 + REFRESH / 2, ask(A)), Plan::Packet(A, 64));
    assert_eq!(asked.get(), 1);
    // REFRESH later the neighbour has moved: asked again, one packet through IP, then the
    // new address.
    assert_eq!(plan(&mut peers, dst, 64, t0 + REFRESH, ask(B)), Plan::Ip(1));
    assert_eq!(plan(&mut peers, dst, 63, t0 + REFRESH, ask(B)), Plan::Packet(B, 63));
    assert_eq!(asked.get(), 2);
}

#[test]
fn an_unknown_next_hop_goes_through_ip_and_is_asked_again_after_retry() {
    let mut peers = HashMap::new();
    let dst = v4([10, 0, 0, 3]);
    let t0 = Instant::now();
    assert_eq!(plan(&mut peers, dst, 8, t0, |_| None), Plan::Ip(1));
    assert_eq!(plan(&mut peers, dst, 8, t0 + RETRY / 2, |_| panic!("asked within RETRY")), Plan::Ip(8));
    // Asked again after RETRY, not a whole REFRESH: the kernel has resolved it by then.
    assert_eq!(plan(&mut peers, dst, 8, t0 + RETRY, |_| Some(A)), Plan::Ip(1));
    assert_eq!(plan(&mut peers, dst, 8, t0 + RETRY, |_| None), Plan::Packet(A, 8));
    // Known, it is asked again only after REFRESH.
    assert_eq!(
        plan(&mut peers, dst, 8, t0 + 2 * RETRY, |_| panic!("asked within REFRESH")),
        Plan::Packet(A, 8)
    );
    // Another destination is its own entry.
    assert_eq!(plan(&mut peers, v4([10, 0, 0, 4]), 3, t0 + REFRESH, |_| None), Plan::Ip(1));
}

fn route(kind: RouteType, attrs: Vec<RouteAttribute>) -> RouteMessage {
    let mut r = RouteMessage::default();
    r.header.kind = kind;
    r.attributes = attrs;
    r
}

#[test]
fn the_next_hop_is_the_gateway_or_the_destination_of_a_unicast_route_only() {
    let dst = v4([192, 0, 2, 9]);
    let gw = Ipv4Addr::new(192, 0, 2, 1);
    let direct = route(RouteType::Unicast, vec![RouteAttribute::Oif(3)]);
    assert_eq!(next_hop(&direct, dst), Some((3, dst)));
    let via = route(
        RouteType::Unicast,
        vec![RouteAttribute::Gateway(RouteAddress::Inet(gw)), RouteAttribute::Oif(4)],
    );
    assert_eq!(next_hop(&via, dst), Some((4, IpAddr::V4(gw))));
    // Our own address, or a blackhole: not for the packet socket.
    assert_eq!(next_hop(&route(RouteType::Local, vec![RouteAttribute::Oif(1)]), dst), None);
    assert_eq!(next_hop(&route(RouteType::BlackHole, vec![]), dst), None);
    // No interface; an IPv6 gateway for IPv4 (RFC 5549): not taken.
    assert_eq!(next_hop(&route(RouteType::Unicast, vec![]), dst), None);
    let v6gw = RouteAttribute::Gateway(RouteAddress::Inet6(Ipv6Addr::LOCALHOST));
    assert_eq!(next_hop(&route(RouteType::Unicast, vec![v6gw, RouteAttribute::Oif(4)]), dst), None);
}

fn neighbour(state: NeighbourState, mac: &[u8]) -> NeighbourMessage {
    let mut n = NeighbourMessage::default();
    n.header = NeighbourHeader { state, ..Default::default() };
    n.attributes.push(NeighbourAttribute::LinkLocalAddress(mac.to_vec()));
    n
}

#[test]
fn only_a_resolved_neighbour_with_an_ethernet_address_is_taken() {
    let mac = [2, 0xaa, 0, 0, 0, 5];
    for s in [
        NeighbourState::Reachable,
        NeighbourState::Stale,
        NeighbourState::Delay,
        NeighbourState::Probe,
        NeighbourState::Permanent,
    ] {
        assert_eq!(neighbour_mac(&neighbour(s, &mac)), Some(mac), "{s:?}");
    }
    for s in [NeighbourState::Incomplete, NeighbourState::Failed, NeighbourState::Noarp, NeighbourState::None]
    {
        assert_eq!(neighbour_mac(&neighbour(s, &mac)), None, "{s:?}");
    }
    // All zeros (an entry being resolved), an InfiniBand-sized address, none at all.
    assert_eq!(neighbour_mac(&neighbour(NeighbourState::Reachable, &[0; 6])), None);
    assert_eq!(neighbour_mac(&neighbour(NeighbourState::Reachable, &[1; 20])), None);
    let mut bare = neighbour(NeighbourState::Reachable, &mac);
    bare.attributes.clear();
    assert_eq!(neighbour_mac(&bare), None);
}

/// The kernel's own answers: the loopback addresses are local, not for the packet socket.
#[test]
fn the_kernel_says_a_local_destination_has_no_link() {
    let mut r = Resolver::open().unwrap();
    assert_eq!(r.link(v4([127, 0, 0, 1]), 0), None);
    assert_eq!(r.link(IpAddr::V6(Ipv6Addr::LOCALHOST), 0x4f43), None);
}

/// IPv4 packets sent through the packet socket to the loopback device (whose link layer is
/// Ethernet's, all-zero addresses) come in again on it, each whole and in order, to a
/// packet socket of the kernel's that takes IPv4 (ETH_P_IP): the link header the kernel
/// wrote named IPv4, and the IP packet is ours byte for byte. (Not up to a raw IP socket:
/// the input path takes 127.0.0.1 arriving on a device for a martian.)
#[test]
fn a_packet_sent_through_the_packet_socket_arrives_whole() {
    let tx = match PacketSocket::open(0x4f43) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            eprintln!("skipped: a packet socket needs CAP_NET_RAW: {e}");
            return;
        }
        r => r.unwrap(),
    };
    let proto = socket2::Protocol::from(i32::from((libc::ETH_P_IP as u16).to_be()));
    let rx: std::net::UdpSocket = Socket::new(Domain::PACKET, Type::DGRAM, Some(proto)).unwrap().into();
    rx.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let lo = nix::net::if_::if_nametoindex("lo").unwrap();
    // Protocol 253 (RFC 3692, for experiments), and a mark of this run in the payload: other
    // IPv4 on the host's interfaces is skipped.
    let run = std::process::id().to_be_bytes();
    let mut pkts = Vec::new();
    for i in 0..3u8 {
        let len = 20 + 100 + usize::from(i);
        let mut b = vec![0x45, 0, 0, len as u8, 0, i, 0x40, 0, 64, 253, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1];
        let sum = ipsec_wire::checksum::checksum(&b);
        b[10..12].copy_from_slice(&sum.to_be_bytes());
        b.extend_from_slice(&run);
        b.extend((4..100 + usize::from(i)).map(|j| (j as u8).wrapping_mul(7) ^ i));
        pkts.push(Packet::new(b));
    }
    let mut hdrs = MultiHeaders::preallocate(pkts.len(), None);
    let link = Link { ifindex: lo, mac: [0; 6] };
    assert_eq!(tx.send(&mut hdrs, &pkts, link).unwrap(), 3);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60); // generous: the machine is shared
    let mut buf = [0u8; 2048];
    while got.len() < pkts.len() && Instant::now() < deadline {
        let Ok(n) = rx.recv(&mut buf) else { continue };
        if n >= 24 && buf[9] == 253 && buf[20..24] == run {
            got.push(buf[..n].to_vec());
        }
    }
    let want: Vec<&[u8]> = pkts.iter().map(|p| p.bytes()).collect();
    assert_eq!(got, want);
}

/// What sending costs per packet, the raw IP socket against the packet socket: batches of
/// 64 IPv4 packets of 1400 bytes (protocol 50) from `OCF_SEND_COST_SRC` to
/// `OCF_SEND_COST_DST`, a neighbour over a veth pair, one sendmmsg per batch, the two ways
/// taking turns. On veth the peer's receive (its IP input, up to its protocol handler)
/// runs in the sender's system call, so the time is the whole kernel's per packet. Run as
/// root (two namespaces, no listener on the peer):
///
/// ```text
/// ip netns add sc-a; ip netns add sc-b; ip link add sc-va netns sc-a type veth peer sc-vb netns sc-b
/// ip -n sc-a addr add 10.77.0.1/24 dev sc-va; ip -n sc-b addr add 10.77.0.2/24 dev sc-vb
/// ip -n sc-a link set sc-va up; ip -n sc-b link set sc-vb up
/// OCF_SEND_COST_SRC=10.77.0.1 OCF_SEND_COST_DST=10.77.0.2 ip netns exec sc-a \
///   cargo test --release -p ipsecd --lib -- --ignored --nocapture send_cost
/// ```
#[test]
#[ignore = "a measurement"]
fn send_cost() {
    use nix::sys::socket::SockaddrIn;
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} not set (see the doc comment)"));
    let src: Ipv4Addr = env("OCF_SEND_COST_SRC").parse().unwrap();
    let dst: Ipv4Addr = env("OCF_SEND_COST_DST").parse().unwrap();
    let pkts: Vec<Packet> = (0..crate::batch::BATCH)
        .map(|i| {
            let mut b = vec![0x45, 0, 0x05, 0x78, 0, i as u8, 0x40, 0, 64, 50, 0, 0];
            b.extend_from_slice(&src.octets());
            b.extend_from_slice(&dst.octets());
            let sum = ipsec_wire::checksum::checksum(&b);
            b[10..12].copy_from_slice(&sum.to_be_bytes());
            b.resize(1400, 0x5a);
            Packet::new(b)
        })
        .collect();
    // As net::sockets::raw_out opens it: IPPROTO_RAW, the header ours.
    let raw = Socket::new(Domain::IPV4, Type::RAW, Some(socket2::Protocol::from(255))).unwrap();
    raw.set_header_included_v4(true).unwrap();
    let ps = PacketSocket::open(0).unwrap();
    let iovs: Vec<[std::io::IoSlice<'_>; 1]> =
        pkts.iter().map(|p| [std::io::IoSlice::new(p.bytes())]).collect();
    let addrs = vec![Some(SockaddrIn::from(std::net::SocketAddrV4::new(dst, 0))); pkts.len()];
    let mut raw_hdrs = MultiHeaders::<SockaddrIn>::preallocate(pkts.len(), None);
    let mut raw_send =
        || sendmmsg(raw.as_raw_fd(), &mut raw_hdrs, &iovs, &addrs, [], MsgFlags::empty()).unwrap().count();
    // The first batch through the raw socket resolves the neighbour.
    raw_send();
    std::thread::sleep(Duration::from_millis(100));
    let link = Resolver::open().unwrap().link(IpAddr::V4(dst), 0).expect("the neighbour's link");
    let mut ll_hdrs = MultiHeaders::<LinkAddr>::preallocate(pkts.len(), None);
    let mut ns: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 0..4000 {
        let packet = round % 2 == 1;
        let t = Instant::now();
        let sent = if packet { ps.send(&mut ll_hdrs, &pkts, link).unwrap() } else { raw_send() };
        ns[usize::from(packet)].push(t.elapsed().as_nanos() as f64 / sent as f64);
        assert_eq!(sent, pkts.len());
    }
    for (name, v) in ["raw IP socket", "packet socket"].iter().zip(ns.iter_mut()) {
        v.sort_by(f64::total_cmp);
        let (p10, med, p90) = (v[v.len() / 10], v[v.len() / 2], v[v.len() * 9 / 10]);
        println!("{name}: median {med:.0} ns per packet (p10 {p10:.0}, p90 {p90:.0}), {:.0} kpps", 1e6 / med);
    }
}

/// A packet longer than the device takes (EMSGSIZE) goes to the raw socket alone, and the
/// link stays: the next packets still leave through the packet socket, with no new question
/// to the kernel. (Forgetting the link cost two netlink requests per batch while such
/// packets came.)
#[test]
fn a_packet_too_long_for_the_device_leaves_the_link_known() {
    let sock = match PacketSocket::open(0) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            eprintln!("skipped: a packet socket needs CAP_NET_RAW: {e}");
            return;
        }
        r => r.unwrap(),
    };
    let lo = nix::net::if_::if_nametoindex("lo").unwrap();
    let dst = v4([127, 0, 0, 1]);
    let mut links = Links::new();
    let now = Instant::now();
    let link = Link { ifindex: lo, mac: [0; 6] };
    links.peers.insert(dst, Peer { link: Some(link), checked: now });
    // Longer than the loopback's MTU (65536), then one of 100 bytes (protocol 253, TTL 0:
    // the loopback's IP input drops it).
    // (The longer one's header says 65,535 bytes, the most it can; the buffer goes on.)
    let packet = |len: usize| {
        let total = len.min(65_535) as u16;
        let mut b = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 0, 253, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1];
        b[2..4].copy_from_slice(&total.to_be_bytes());
        b.resize(len, 0);
        Packet::new(b)
    };
    let pkts = [packet(70_000), packet(100)];
    assert_eq!(links.send(&sock, &pkts, now), Err(1));
    assert_eq!(links.peers.get(&dst).and_then(|p| p.link), Some(link));
    assert_eq!(links.send(&sock, &pkts[1..], now), Ok(1));
}
