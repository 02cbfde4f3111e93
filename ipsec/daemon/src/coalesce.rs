//! Decrypted TCP segments merged back into super-packets for the TUN (the receive side's
//! GRO, done in user space because the packets reach the kernel through a TUN write).
//!
//! The TUN has IFF_VNET_HDR offloads on, so one write can carry a TCP super-packet of up to
//! 64 KiB with a virtio-net header that tells the kernel its segment size: the kernel then
//! takes one trip up its stack for what would have been dozens of writes.
//!
//! The packets of a batch come from the peer's batches, where one TCP super-packet was cut
//! into segments that travelled one after the other; so only *consecutive* segments of one
//! flow are merged (a run), which costs O(1) per packet with no table and no allocation:
//! each packet is copied once into one reused 64 KiB buffer. (tun-rs's GRO table, a port of
//! wireguard-go's, also merges interleaved flows; measured here it copied every packet into
//! a fresh `Vec` and compared headers against every earlier item of the flow, a fifth of the
//! receiving thread.) Every segment's TCP checksum is verified before it joins a run, since
//! the merged packet goes up with the checksum left to be trusted (NEEDS_CSUM) and would
//! otherwise hide a bad one. Order is kept: a packet that cannot join ends the run first.

use ipsec_wire::tcp::{self, flags};
use ipsec_wire::{ipv4, ipv6, virtio, IpProtocol, PseudoHeader};

/// The virtio-net header's length (in front of every packet to and from the TUN).
pub const VIRTIO_HDR: usize = virtio::HEADER_LEN;
/// The largest merged packet: the IP length fields are 16 bits.
const MAX_PACKET: usize = 65_535;

/// One TCP segment that may join a run: where its headers end, its sequence number.
#[derive(Clone, Copy)]
struct Segment {
    v6: bool,
    ip: usize,
    tcp: usize,
    seq: u32,
    psh: bool,
}

impl Segment {
    /// A plain TCP segment with data (IPv4 without options and not a fragment, or IPv6
    /// without extension headers; only ACK, or ACK and PSH, set) whose checksum verifies.
    fn of(b: &[u8]) -> Option<Segment> {
        let (v6, ip) = match b.first()? >> 4 {
            4 => {
                let p = ipv4::Packet::new_checked(b).ok()?;
                let whole = usize::from(p.total_len()) == b.len() && !p.is_fragment();
                if p.header_len() != ipv4::MIN_HEADER_LEN || p.protocol() != IpProtocol::TCP || !whole {
                    return None;
                }
                (false, ipv4::MIN_HEADER_LEN)
            }
            6 => {
                let p = ipv6::Packet::new_checked(b).ok()?;
                if p.next_header() != IpProtocol::TCP || p.total_len() != b.len() {
                    return None;
                }
                (true, ipv6::HEADER_LEN)
            }
            _ => return None,
        };
        let t = tcp::Packet::new_checked(&b[ip..]).ok()?;
        let f = t.flags();
        if t.payload().is_empty() || (f != flags::ACK && f != flags::ACK | flags::PSH) {
            return None;
        }
        if !t.verify_checksum(&pseudo(b, v6)) {
            return None;
        }
        Some(Segment { v6, ip, tcp: t.header_len(), seq: t.seq_number(), psh: f & flags::PSH != 0 })
    }
}

/// The pseudo-header of the IPv4 or IPv6 packet `b` (its header already checked).
fn pseudo(b: &[u8], v6: bool) -> PseudoHeader {
    if v6 {
        let p = ipv6::Packet::new_unchecked(b);
        PseudoHeader::V6 { src: p.src_addr(), dst: p.dst_addr() }
    } else {
        let p = ipv4::Packet::new_unchecked(b);
        PseudoHeader::V4 { src: p.src_addr(), dst: p.dst_addr() }
    }
}

/// Whether two IP headers of one family (checked) are the same but for what each segment
/// of a super-packet has of its own: IPv4's total length, identification and checksum;
/// IPv6's payload length.
fn same_ip_header(a: &[u8], b: &[u8], v6: bool) -> bool {
    if v6 {
        let (a, b) = (ipv6::Packet::new_unchecked(a), ipv6::Packet::new_unchecked(b));
        a.traffic_class() == b.traffic_class()
            && a.flow_label() == b.flow_label()
            && a.hop_limit() == b.hop_limit()
            && a.src_addr() == b.src_addr()
            && a.dst_addr() == b.dst_addr()
    } else {
        let (a, b) = (ipv4::Packet::new_unchecked(a), ipv4::Packet::new_unchecked(b));
        a.dscp() == b.dscp()
            && a.ecn() == b.ecn()
            && a.dont_frag() == b.dont_frag()
            && a.ttl() == b.ttl()
            && a.src_addr() == b.src_addr()
            && a.dst_addr() == b.dst_addr()
    }
}

/// The run being built in the buffer.
struct Run {
    first: Segment,
    /// The first segment's payload size: the run's segment size.
    gso: usize,
    next_seq: u32,
    /// Bytes of the packet in the buffer (after the virtio header).
    len: usize,
    count: usize,
    /// A shorter segment or one with PSH was the last to join: nothing may follow.
    closed: bool,
}

/// Merges runs of consecutive TCP segments; see the module documentation.
pub struct Coalescer {
    buf: Vec<u8>,
    run: Option<Run>,
}

impl Default for Coalescer {
    fn default() -> Self {
        Coalescer { buf: vec![0; VIRTIO_HDR + MAX_PACKET], run: None }
    }
}

impl Coalescer {
    /// Takes the next packet for the TUN. `write` gets each packet to write, virtio header
    /// first, in order; the last run waits for [`Coalescer::finish`].
    pub fn push(&mut self, pkt: &[u8], write: &mut impl FnMut(&[u8])) {
        let seg = Segment::of(pkt);
        if let (Some(s), Some(run)) = (seg, &self.run) {
            if self.joins(run, &s, pkt) {
                let payload = &pkt[s.ip + s.tcp..];
                let at = VIRTIO_HDR + run.len;
                self.buf[at..at + payload.len()].copy_from_slice(payload);
                let run = self.run.as_mut().expect("checked above");
                run.len += payload.len();
                run.count += 1;
                run.next_seq = run.next_seq.wrapping_add(payload.len() as u32);
                run.closed = s.psh || payload.len() < run.gso;
                if s.psh {
                    // PSH belongs on the merged packet (it was on its last segment).
                    let mut t = tcp::Packet::new_unchecked(&mut self.buf[VIRTIO_HDR + s.ip..]);
                    t.set_flags(t.flags() | flags::PSH);
                }
                return;
            }
        }
        self.finish(write);
        if pkt.len() > MAX_PACKET {
            return;
        }
        self.buf[VIRTIO_HDR..VIRTIO_HDR + pkt.len()].copy_from_slice(pkt);
        match seg {
            Some(s) => {
                let gso = pkt.len() - s.ip - s.tcp;
                self.run = Some(Run {
                    first: s,
                    gso,
                    next_seq: s.seq.wrapping_add(gso as u32),
                    len: pkt.len(),
                    count: 1,
                    closed: s.psh,
                });
            }
            None => {
                // A zeroed header: one packet, checksums complete. (Cannot fail: the
                // buffer is longer than the header.)
                let _ = virtio::Repr::default().emit(&mut self.buf);
                write(&self.buf[..VIRTIO_HDR + pkt.len()]);
            }
        }
    }

    /// Whether segment `s` (bytes `pkt`) continues `run`: the same flow and header fields,
    /// the next sequence number, no larger than the run's segment size, and room left.
    fn joins(&self, run: &Run, s: &Segment, pkt: &[u8]) -> bool {
        let f = &run.first;
        let head = &self.buf[VIRTIO_HDR..VIRTIO_HDR + f.ip + f.tcp];
        let payload = pkt.len() - s.ip - s.tcp;
        if run.closed
            || s.v6 != f.v6
            || s.tcp != f.tcp
            || s.seq != run.next_seq
            || payload > run.gso
            || run.len + payload > MAX_PACKET
        {
            return false;
        }
        let (a, b) = (&head[f.ip..], &pkt[s.ip..s.ip + s.tcp]);
        same_ip_header(head, pkt, s.v6)
            && tcp::Packet::new_unchecked(a).same_header_but_seq(&tcp::Packet::new_unchecked(b))
    }

    /// Writes the run in progress, if any: as it came when it is one segment, else as one
    /// super-packet whose TCP checksum the kernel completes.
    pub fn finish(&mut self, write: &mut impl FnMut(&[u8])) {
        let Some(run) = self.run.take() else { return };
        let f = run.first;
        let p = &mut self.buf[VIRTIO_HDR..VIRTIO_HDR + run.len];
        let mut hdr = virtio::Repr::default();
        if run.count > 1 {
            if f.v6 {
                ipv6::Packet::new_unchecked(&mut *p).set_payload_len((run.len - f.ip) as u16);
            } else {
                let mut ip = ipv4::Packet::new_unchecked(&mut *p);
                ip.set_total_len(run.len as u16);
                ip.fill_checksum();
            }
            // With NEEDS_CSUM the checksum field holds the pseudo-header's sum (not
            // complemented), as the kernel's own TCP leaves it for a NIC.
            let ps = pseudo(p, f.v6);
            tcp::Packet::new_unchecked(&mut p[f.ip..]).set_partial_checksum(&ps, run.len - f.ip);
            hdr = virtio::Repr {
                flags: virtio::F_NEEDS_CSUM,
                gso_type: if f.v6 { virtio::gso::TCPV6 } else { virtio::gso::TCPV4 },
                hdr_len: (f.ip + f.tcp) as u16,
                gso_size: run.gso as u16,
                csum_start: f.ip as u16,
                csum_offset: 16,
            };
        }
        // The buffer is longer than the header: emit cannot fail.
        let _ = hdr.emit(&mut self.buf);
        write(&self.buf[..VIRTIO_HDR + run.len]);
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv6Addr;

    use ipsec_wire::checksum;

    use super::*;

    const TCP_ACK: u8 = flags::ACK;
    const TCP_PSH: u8 = flags::PSH;
    const F_NEEDS_CSUM: u8 = virtio::F_NEEDS_CSUM;
    const GSO_TCPV4: u8 = virtio::gso::TCPV4;
    const GSO_TCPV6: u8 = virtio::gso::TCPV6;

    /// A TCP segment from 10.0.0.1:1000 to 10.0.0.2:2000 (IPv4) or fd00::1 to fd00::2, ACK
    /// (and PSH if `psh`), with a timestamp option and `n` bytes of payload, checksums right.
    fn segment(v6: bool, seq: u32, n: usize, psh: bool) -> Vec<u8> {
        let mut tcp = vec![0x03, 0xe8, 0x07, 0xd0];
        tcp.extend_from_slice(&seq.to_be_bytes());
        tcp.extend_from_slice(&[0, 0, 0x55, 0x55, 0x80, TCP_ACK | if psh { TCP_PSH } else { 0 }, 0x01, 0xf5]);
        tcp.extend_from_slice(&[0, 0, 0, 0, 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        tcp.extend((0..n).map(|i| (seq as usize + i) as u8));
        let mut p = if v6 {
            let mut h = vec![0x60, 0, 0, 0];
            h.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
            h.extend_from_slice(&[6, 64]);
            h.extend_from_slice(&"fd00::1".parse::<Ipv6Addr>().unwrap().octets());
            h.extend_from_slice(&"fd00::2".parse::<Ipv6Addr>().unwrap().octets());
            h
        } else {
            let mut h = vec![0x45, 0];
            h.extend_from_slice(&((20 + tcp.len()) as u16).to_be_bytes());
            h.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
            let c = checksum::checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h
        };
        p.extend_from_slice(&tcp);
        refresh(&mut p, v6);
        p
    }

    /// Recomputes the IPv4 header's and the TCP checksums after a change.
    fn refresh(p: &mut [u8], v6: bool) {
        let ip = if v6 { 40 } else { 20 };
        if !v6 {
            p[10..12].fill(0);
            let c = checksum::checksum(&p[..20]);
            p[10..12].copy_from_slice(&c.to_be_bytes());
        }
        p[ip + 16..ip + 18].fill(0);
        let c = !checksum::combine(&[
            pseudo(p, v6).sum(IpProtocol::TCP, (p.len() - ip) as u32),
            checksum::sum(&p[ip..]),
        ]);
        p[ip + 16..ip + 18].copy_from_slice(&c.to_be_bytes());
    }

    fn run(pkts: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut c = Coalescer::default();
        let mut out = Vec::new();
        for p in pkts {
            c.push(p, &mut |b: &[u8]| out.push(b.to_vec()));
        }
        c.finish(&mut |b: &[u8]| out.push(b.to_vec()));
        out
    }

    /// What the kernel does with NEEDS_CSUM: the checksum from csum_start on, written at
    /// csum_start + csum_offset. The result must then verify like any received segment.
    fn complete(w: &[u8]) -> Vec<u8> {
        let start = usize::from(u16::from_le_bytes([w[6], w[7]]));
        let off = usize::from(u16::from_le_bytes([w[8], w[9]]));
        let mut p = w[VIRTIO_HDR..].to_vec();
        let c = checksum::checksum(&p[start..]);
        p[start + off..start + off + 2].copy_from_slice(&c.to_be_bytes());
        p
    }

    #[test]
    fn consecutive_segments_merge_into_one_super_packet_for_both_families() {
        for v6 in [false, true] {
            let pkts =
                [segment(v6, 1000, 100, false), segment(v6, 1100, 100, false), segment(v6, 1200, 60, true)];
            let out = run(&pkts);
            assert_eq!(out.len(), 1, "v6 {v6}");
            let w = &out[0];
            let (ip, hdr) = if v6 { (40, 72) } else { (20, 52) };
            assert_eq!(w[0], F_NEEDS_CSUM);
            assert_eq!(w[1], if v6 { GSO_TCPV6 } else { GSO_TCPV4 });
            assert_eq!(u16::from_le_bytes([w[2], w[3]]), hdr as u16, "hdr_len");
            assert_eq!(u16::from_le_bytes([w[4], w[5]]), 100, "gso_size");
            assert_eq!(u16::from_le_bytes([w[6], w[7]]), ip as u16, "csum_start");
            let p = complete(w);
            assert_eq!(p.len(), hdr + 260);
            // Lengths, the IPv4 header checksum, PSH from the last segment, the payloads in
            // order, and a TCP checksum that verifies once completed.
            if v6 {
                assert_eq!(u16::from_be_bytes([p[4], p[5]]) as usize, p.len() - 40);
            } else {
                assert_eq!(u16::from_be_bytes([p[2], p[3]]) as usize, p.len());
                assert!(checksum::verifies(&p[..20]));
            }
            assert_eq!(p[ip + 13], TCP_ACK | TCP_PSH);
            let want: Vec<u8> = pkts.iter().flat_map(|s| s[hdr..].to_vec()).collect();
            assert_eq!(&p[hdr..], &want[..]);
            assert!(Segment::of(&p).is_some(), "the completed packet's checksum verifies");
        }
    }

    #[test]
    fn a_single_segment_and_other_packets_go_as_they_came() {
        let one = segment(false, 1, 50, false);
        let udp = {
            let mut p = segment(false, 1, 50, false);
            p[9] = 17;
            p
        };
        let out = run(&[one.clone(), udp.clone()]);
        assert_eq!(
            out,
            vec![[&[0u8; VIRTIO_HDR][..], &one].concat(), [&[0u8; VIRTIO_HDR][..], &udp].concat()]
        );
    }

    #[test]
    fn a_run_ends_at_a_gap_a_larger_or_after_a_shorter_segment_psh_or_another_flow() {
        let s = |seq, n, psh| segment(false, seq, n, psh);
        let count = |pkts: &[Vec<u8>]| run(pkts).len();
        assert_eq!(count(&[s(0, 100, false), s(150, 100, false)]), 2, "sequence gap");
        assert_eq!(count(&[s(0, 100, false), s(100, 120, false)]), 2, "larger segment");
        assert_eq!(
            count(&[s(0, 100, false), s(100, 50, false), s(150, 50, false)]),
            2,
            "after a shorter one"
        );
        assert_eq!(count(&[s(0, 100, true), s(100, 100, false)]), 2, "after PSH");
        for (at, what) in
            [(19, "another destination"), (22, "another port"), (8, "another TTL"), (46, "another window")]
        {
            let mut other = s(100, 100, false);
            other[at] ^= 1;
            refresh(&mut other, false);
            assert!(Segment::of(&other).is_some());
            assert_eq!(count(&[s(0, 100, false), other]), 2, "{what}");
        }
        assert_eq!(count(&[s(0, 100, false), s(100, 100, false), s(200, 100, false)]), 1);
    }

    #[test]
    fn a_segment_with_a_bad_checksum_is_not_merged_and_goes_up_unchanged() {
        let a = segment(true, 0, 100, false);
        let mut b = segment(true, 100, 100, false);
        let last = b.len() - 1;
        b[last] ^= 1;
        let out = run(&[a, b.clone()]);
        assert_eq!(out.len(), 2);
        // Left for the kernel to find and count as a bad checksum.
        assert_eq!(&out[1][VIRTIO_HDR..], &b[..]);
        assert_eq!(out[1][0], 0);
    }

    /// Hostile or broken packets (a peer with the keys can send anything inside ESP):
    /// mutated and truncated segments and random bytes, mixed with good runs. Nothing
    /// panics, every packet goes up exactly once (alone, or as one of a run's segments),
    /// and no write exceeds an IP packet.
    #[test]
    fn arbitrary_packets_never_panic_and_none_is_lost() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..300 {
            let v6 = round % 2 == 1;
            let mut pkts = Vec::new();
            let mut seq = 0u32;
            for _ in 0..(rnd() % 40) {
                let n = 1 + (rnd() % 1400) as usize;
                let mut p = segment(v6, seq, n, rnd() % 8 == 0);
                seq = seq.wrapping_add(n as u32);
                match rnd() % 6 {
                    0 => {
                        let i = (rnd() as usize) % p.len();
                        p[i] ^= 1 << (rnd() % 8);
                    }
                    1 => p.truncate((rnd() as usize) % p.len()),
                    2 => p = (0..(rnd() % 200)).map(|_| rnd() as u8).collect(),
                    _ => {}
                }
                pkts.push(p);
            }
            let out = run(&pkts);
            let mut segments = 0;
            for w in &out {
                assert!(w.len() >= VIRTIO_HDR && w.len() - VIRTIO_HDR <= MAX_PACKET);
                let gso = usize::from(u16::from_le_bytes([w[4], w[5]]));
                let hdr = usize::from(u16::from_le_bytes([w[2], w[3]]));
                segments += if w[1] == 0 { 1 } else { (w.len() - VIRTIO_HDR - hdr).div_ceil(gso) };
            }
            assert_eq!(segments, pkts.len(), "round {round}");
        }
    }

    #[test]
    fn runs_stop_at_64_kib() {
        let pkts: Vec<Vec<u8>> = (0..60).map(|i| segment(false, i * 1400, 1400, false)).collect();
        let out = run(&pkts);
        assert!(out.len() == 2 && out.iter().all(|w| w.len() - VIRTIO_HDR <= MAX_PACKET), "{}", out.len());
    }
}
