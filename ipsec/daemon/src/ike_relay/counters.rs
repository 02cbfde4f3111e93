//! The IKE relay's counters, and how `ipsecctl stats` and the metrics endpoint show them.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use ipsec_wire::ike_relay::Error as RecordError;

/// What the relay did with every datagram and record. Datagrams that did not reach the key
/// manager, or the network, are counted under one cause each.
#[derive(Default)]
pub struct RelayCounters {
    /// IKE datagrams handed to the key manager.
    pub relayed_in: AtomicU64,
    /// The key manager's datagrams sent to the network.
    pub relayed_out: AtomicU64,
    /// IKE datagrams dropped because no key manager was attached (on the NAT-T port the
    /// core also counts them, as `ike`, as it did before the relay).
    pub no_key_manager: AtomicU64,
    /// IKE datagrams dropped because the key manager's queue was full (it reads too slowly:
    /// the packet path never waits for it).
    pub key_manager_full: AtomicU64,
    /// IKE datagrams the relay socket refused otherwise (the key manager was going away).
    pub key_manager_errors: AtomicU64,
    /// The key manager's datagrams from a local port that is neither the IKE port nor the
    /// NAT-T port its flag names: not sent.
    pub wrong_port: AtomicU64,
    /// The key manager's datagrams the kernel refused to send (an address that is not
    /// ours, no route).
    pub send_errors: AtomicU64,
    /// Status records (attached, refused) from a key manager, which only ipsecd sends.
    pub unexpected: AtomicU64,
    /// Key managers refused because one was attached.
    pub second_clients: AtomicU64,
    /// Key managers attached since start.
    pub attaches: AtomicU64,
    /// Malformed records from the key manager, and datagrams too long for a record
    /// (`too_long`), by cause (ipsec_wire::ike_relay::Error::index).
    refused: [AtomicU64; RecordError::ALL.len()],
}

impl RelayCounters {
    /// Counts a record refused for `e`.
    pub fn refuse(&self, e: RecordError) {
        self.refused[e.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Records refused for `e`'s cause.
    pub fn refused(&self, e: RecordError) -> u64 {
        self.refused[e.index()].load(Ordering::Relaxed)
    }

    /// Every counter but the refused records, by the name stats and metrics give it.
    pub fn all(&self) -> [(&'static str, u64); 10] {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            ("in", r(&self.relayed_in)),
            ("out", r(&self.relayed_out)),
            ("no_key_manager", r(&self.no_key_manager)),
            ("key_manager_full", r(&self.key_manager_full)),
            ("key_manager_errors", r(&self.key_manager_errors)),
            ("wrong_port", r(&self.wrong_port)),
            ("send_errors", r(&self.send_errors)),
            ("unexpected", r(&self.unexpected)),
            ("second_clients", r(&self.second_clients)),
            ("attaches", r(&self.attaches)),
        ]
    }

    /// `ipsecctl stats`'s line: `ike_relay: key manager attached; in 2, out 2, …; refused
    /// records: truncated 0, …` (every counter, zeros too).
    pub fn stats(&self, attached: bool) -> String {
        let mut o = format!("ike_relay: key manager {}; ", if attached { "attached" } else { "none" });
        for (i, (name, n)) in self.all().iter().enumerate() {
            let _ = write!(o, "{}{name} {n}", if i == 0 { "" } else { ", " });
        }
        o += "; refused records: ";
        for (i, e) in RecordError::ALL.iter().enumerate() {
            let _ = write!(o, "{}{} {}", if i == 0 { "" } else { ", " }, e.name(), self.refused(*e));
        }
        o + "\n"
    }

    /// The counters in Prometheus' text format.
    pub fn prometheus(&self, attached: bool) -> String {
        let mut o = String::new();
        for (name, kind, help) in [
            ("ike_relay_attached", "gauge", "1 while a key manager is attached to the IKE relay socket."),
            (
                "ike_relay_datagrams_total",
                "counter",
                "IKE datagrams relayed, in (to the key manager) and out (to the network).",
            ),
            ("ike_relay_dropped_total", "counter", "IKE datagrams not relayed, by reason."),
            (
                "ike_relay_refused_records_total",
                "counter",
                "Malformed records from the key manager, by cause.",
            ),
            ("ike_relay_clients_total", "counter", "Key managers attached, and refused (one was attached)."),
        ] {
            let _ = writeln!(o, "# HELP ipsecd_{name} {help}\n# TYPE ipsecd_{name} {kind}");
        }
        let _ = writeln!(o, "ipsecd_ike_relay_attached {}", u8::from(attached));
        for (name, n) in self.all() {
            let _ = match name {
                "in" | "out" => writeln!(o, "ipsecd_ike_relay_datagrams_total{{dir=\"{name}\"}} {n}"),
                "attaches" => writeln!(o, "ipsecd_ike_relay_clients_total{{outcome=\"attached\"}} {n}"),
                "second_clients" => writeln!(o, "ipsecd_ike_relay_clients_total{{outcome=\"refused\"}} {n}"),
                _ => writeln!(o, "ipsecd_ike_relay_dropped_total{{reason=\"{name}\"}} {n}"),
            };
        }
        for e in RecordError::ALL {
            let _ = writeln!(
                o,
                "ipsecd_ike_relay_refused_records_total{{reason=\"{}\"}} {}",
                e.name(),
                self.refused(e)
            );
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_and_metrics_show_every_counter_under_its_name() {
        let c = RelayCounters::default();
        c.relayed_in.fetch_add(3, Ordering::Relaxed);
        c.no_key_manager.fetch_add(2, Ordering::Relaxed);
        c.refuse(RecordError::Flags(2));
        let s = c.stats(true);
        assert!(s.starts_with("ike_relay: key manager attached; in 3, out 0, no_key_manager 2, "), "{s}");
        assert!(s.contains("refused records: truncated 0, too_long 0, version 0, kind 0, flags 1, "), "{s}");
        let m = c.prometheus(false);
        for line in [
            "ipsecd_ike_relay_attached 0",
            "ipsecd_ike_relay_datagrams_total{dir=\"in\"} 3",
            "ipsecd_ike_relay_dropped_total{reason=\"no_key_manager\"} 2",
            "ipsecd_ike_relay_refused_records_total{reason=\"flags\"} 1",
            "ipsecd_ike_relay_clients_total{outcome=\"refused\"} 0",
        ] {
            assert!(m.lines().any(|l| l == line), "{line} in\n{m}");
        }
    }
}
