//! What `ipsecctl stats` and the metrics endpoint (`--metrics ADDR`, Prometheus' text
//! format) show: the core's totals and drops by reason, per SA, the gateway's I/O counters
//! and the config reloads.

use std::fmt::Write as _;

use ipsec_core::stats::Drop;
use ipsec_core::Ipsec;

use crate::config::Reloads;

/// `ipsecctl stats`: every counter — totals, each drop reason (zero ones too, so the list
/// is the same every time), and each SA.
pub fn stats(core: &Ipsec, io: &crate::net::IoCounters, reloads: &Reloads) -> String {
    let t = core.stats();
    let mut out = String::new();
    let _ = writeln!(out, "io: {io}");
    let (ok, failed) = reloads.counts();
    let _ = write!(out, "reloads: {ok} ok, {} failed (", failed.iter().map(|f| f.1).sum::<u64>());
    for (i, (why, n)) in failed.iter().enumerate() {
        let _ = write!(out, "{}{} {n}", if i > 0 { ", " } else { "" }, why.name());
    }
    let _ = writeln!(out, "); last: {}", reloads.last());
    let _ = writeln!(
        out,
        "total: {} packets {} bytes out, {} packets {} bytes in",
        t.packets_out, t.bytes_out, t.packets_in, t.bytes_in
    );
    let _ = writeln!(out, "keepalives: {}", t.keepalives);
    let _ = writeln!(out, "peer_moved: {}", t.peer_moved);
    let _ = writeln!(out, "pmtu_learned: {}", t.pmtu_learned);
    let _ = writeln!(out, "icmp_sent: {}", t.icmp_sent);
    let _ = writeln!(out, "icmp_rate_limited: {}", t.icmp_rate_limited);
    let _ = writeln!(out, "drops: {}", t.total_drops());
    for d in Drop::ALL {
        let _ = writeln!(out, "  {:<16} {}", d.name(), t.drops(d));
    }
    for sa in core.databases().sad.dump(None) {
        let s = sa.stats();
        let _ = writeln!(
            out,
            "sa {} {} {} spi 0x{:x}: {} packets {} bytes out, {} packets {} bytes in, last seq {}",
            sa.id.src,
            sa.id.dst,
            sa.id.proto.name(),
            sa.id.spi,
            s.packets_out,
            s.bytes_out,
            s.packets_in,
            s.bytes_in,
            sa.last_sequence()
        );
        for (d, n) in s.nonzero_drops() {
            let _ = writeln!(out, "  {:<16} {n}", d.name());
        }
    }
    out
}

/// The counters in Prometheus' text format (`--metrics ADDR`): totals by direction, every
/// drop reason (zeros too), the same per SA, and the gateway's I/O errors.
pub fn prometheus(core: &Ipsec, io: &crate::net::IoCounters, reloads: &Reloads) -> String {
    let t = core.stats();
    let mut o = String::new();
    for (name, kind, help) in [
        ("packets_total", "counter", "Packets through the IPsec core (ESP, AH, IPComp), by direction."),
        ("bytes_total", "counter", "Payload bytes through the IPsec core (ESP, AH, IPComp), by direction."),
        ("keepalives_total", "counter", "NAT-keepalives received (RFC 3948), not dropped: counted apart."),
        (
            "peer_moved_total",
            "counter",
            "ESP-in-UDP peers that moved to another UDP port (an authenticated packet from it): followed.",
        ),
        ("pmtu_learned_total", "counter", "SA path MTUs lowered by an ICMP error from the path."),
        (
            "icmp_sent_total",
            "counter",
            "ICMP frag-needed / Packet Too Big sent to inner senders, by outcome.",
        ),
        ("drops_total", "counter", "Packets dropped, by reason."),
        ("sa_packets_total", "counter", "Packets per SA, by direction."),
        ("sa_drops_total", "counter", "Packets dropped per SA, by reason."),
        ("io_errors_total", "counter", "Errors of the gateway's own I/O, by kind."),
        (
            "tun_link_scope_total",
            "counter",
            "Packets into the TUN to a link-local or multicast address (the kernel's own chatter), dropped.",
        ),
        ("keepalives_sent_total", "counter", "NAT-keepalives sent to ESP-in-UDP peers (--nat-keepalive)."),
        (
            "packet_socket_sent_total",
            "counter",
            "Raw ESP packets sent through the packet socket (--esp-out packet).",
        ),
        (
            "control_cut_total",
            "counter",
            "Packets dropped because what the socket reports with them did not fit (AH over IPv6 with over 1 KiB of extension headers).",
        ),
        ("sas", "gauge", "Installed SAs."),
        ("reloads_total", "counter", "Reloads of the config file (SIGHUP), by outcome: ok or why it failed."),
        ("last_reload_failed", "gauge", "1 if the last reload failed (and changed nothing), else 0."),
    ] {
        let _ = writeln!(o, "# HELP ipsecd_{name} {help}\n# TYPE ipsecd_{name} {kind}");
    }
    let _ = writeln!(o, "ipsecd_packets_total{{dir=\"out\"}} {}", t.packets_out);
    let _ = writeln!(o, "ipsecd_packets_total{{dir=\"in\"}} {}", t.packets_in);
    let _ = writeln!(o, "ipsecd_bytes_total{{dir=\"out\"}} {}", t.bytes_out);
    let _ = writeln!(o, "ipsecd_bytes_total{{dir=\"in\"}} {}", t.bytes_in);
    let _ = writeln!(o, "ipsecd_keepalives_total {}", t.keepalives);
    let _ = writeln!(o, "ipsecd_peer_moved_total {}", t.peer_moved);
    let _ = writeln!(o, "ipsecd_pmtu_learned_total {}", t.pmtu_learned);
    let _ = writeln!(o, "ipsecd_icmp_sent_total{{outcome=\"sent\"}} {}", t.icmp_sent);
    let _ = writeln!(o, "ipsecd_icmp_sent_total{{outcome=\"rate_limited\"}} {}", t.icmp_rate_limited);
    for d in Drop::ALL {
        let _ = writeln!(o, "ipsecd_drops_total{{reason=\"{}\"}} {}", d.name(), t.drops(d));
    }
    let sas = core.databases().sad.dump(None);
    for sa in &sas {
        let s = sa.stats();
        let l = format!("spi=\"0x{:x}\",src=\"{}\",dst=\"{}\"", sa.id.spi, sa.id.src, sa.id.dst);
        let _ = writeln!(o, "ipsecd_sa_packets_total{{{l},dir=\"out\"}} {}", s.packets_out);
        let _ = writeln!(o, "ipsecd_sa_packets_total{{{l},dir=\"in\"}} {}", s.packets_in);
        for d in Drop::ALL {
            let _ = writeln!(o, "ipsecd_sa_drops_total{{{l},reason=\"{}\"}} {}", d.name(), s.drops(d));
        }
    }
    for (kind, n) in io.all() {
        match kind.strip_suffix("_errors") {
            Some(kind) => {
                let _ = writeln!(o, "ipsecd_io_errors_total{{kind=\"{kind}\"}} {n}");
            }
            None => {
                let _ = writeln!(o, "ipsecd_{kind}_total {n}");
            }
        }
    }
    let _ = writeln!(o, "ipsecd_sas {}", sas.len());
    let (ok, failed) = reloads.counts();
    let _ = writeln!(o, "ipsecd_reloads_total{{outcome=\"ok\"}} {ok}");
    for (why, n) in failed {
        let _ = writeln!(o, "ipsecd_reloads_total{{outcome=\"{}\"}} {n}", why.name());
    }
    let _ = writeln!(o, "ipsecd_last_reload_failed {}", u8::from(reloads.last_failed()));
    o
}
