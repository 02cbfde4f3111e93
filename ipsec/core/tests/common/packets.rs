//! Packets for the tests to send: IPv4 and IPv6, UDP with its checksum.

use std::net::IpAddr;

pub fn checksum(b: &[u8]) -> u16 {
    ipsec_wire::checksum::checksum(b)
}

/// An IPv4 or IPv6 UDP packet from `src` to `dst` with `n` payload bytes.
pub fn udp_packet(src: IpAddr, dst: IpAddr, n: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..n).map(|i| (i * 7 + 1) as u8).collect();
    datagram(src, dst, 12345, 53, &payload)
}

/// An IPv4 or IPv6 UDP packet from `src`:`sport` to `dst`:`dport` carrying `payload`,
/// with its checksum (required over IPv6, RFC 8200 §8.1; left 0 over IPv4).
pub fn datagram(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut udp = udp_header(sport, dport, payload);
    if let (IpAddr::V6(s), IpAddr::V6(d)) = (src, dst) {
        let mut pseudo = s.octets().to_vec();
        pseudo.extend_from_slice(&d.octets());
        pseudo.extend_from_slice(&(udp.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 17]);
        pseudo.extend_from_slice(&udp);
        let c = match checksum(&pseudo) {
            0 => 0xffff,
            c => c,
        };
        udp[6..8].copy_from_slice(&c.to_be_bytes());
    }
    ip_packet(src, dst, 17, &udp)
}

/// `payload` behind a UDP header from `sport` to `dport`, checksum 0.
pub fn udp_header(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut udp = sport.to_be_bytes().to_vec();
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    udp
}

/// An IPv4 or IPv6 packet of protocol `proto` from `src` to `dst` around `payload`.
pub fn ip_packet(src: IpAddr, dst: IpAddr, proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = vec![0x45, 0, 0, 0, 0x12, 0x34, 0, 0, 64, proto, 0, 0];
            h[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            let c = checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut h = vec![0x60, 0, 0, 0];
            h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
            h.extend_from_slice(&[proto, 64]);
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            h
        }
        _ => unreachable!("one family"),
    };
    h.extend_from_slice(payload);
    h
}
