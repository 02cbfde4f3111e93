//! What an `auto` case did, beside its throughput: how many requests each driver took per
//! size class (the difference of `Framework::routing()` before and after the case), with
//! `-p` the cost model's estimates, and with `--oracle` the static splits it is compared
//! with. Text tables and the JSON fields of the auto case.

use std::fmt::Write as _;

use ocf::routing::{ModelEstimate, RoutingStats, SIZE_CLASSES};
use ocf::SizeClass;
use serde_json::{json, Value};

use crate::units::fmt_rate;

/// One driver's part of an auto case.
#[derive(Clone, Debug, PartialEq)]
pub struct DriverShare {
    pub driver: String,
    /// Requests routed to it during the case, per size class.
    pub routed: [u64; SIZE_CLASSES],
    /// The model's estimates that learned during the case (its algorithm), after it.
    pub models: Vec<ModelEstimate>,
}

impl DriverShare {
    pub fn total(&self) -> u64 {
        self.routed.iter().sum()
    }
}

/// Routing during one auto case.
#[derive(Clone, Debug, PartialEq)]
pub struct Routing {
    pub policy: String,
    pub decisions: u64,
    /// The average decision cost so far (ns), as the framework reports it.
    pub decision_ns: f64,
    pub drivers: Vec<DriverShare>,
}

impl Routing {
    /// What happened between two snapshots of one framework's routing.
    pub fn between(before: &RoutingStats, after: &RoutingStats) -> Routing {
        let drivers = after
            .drivers
            .iter()
            .map(|d| {
                let was = before.drivers.iter().find(|b| b.driver == d.driver);
                let mut routed = d.routed;
                if let Some(was) = was {
                    for (r, w) in routed.iter_mut().zip(was.routed) {
                        *r = r.saturating_sub(w);
                    }
                }
                let samples_before = |m: &ModelEstimate| {
                    was.and_then(|w| {
                        w.models
                            .iter()
                            .find(|o| o.algorithm == m.algorithm && o.op == m.op && o.run_len == m.run_len)
                    })
                    .map_or(0, |o| o.samples)
                };
                let models = d.models.iter().filter(|m| m.samples > samples_before(m)).cloned().collect();
                DriverShare { driver: d.driver.clone(), routed, models }
            })
            .collect();
        Routing {
            policy: after.policy.name().to_owned(),
            decisions: after.decisions.saturating_sub(before.decisions),
            decision_ns: after.decision_ns,
            drivers,
        }
    }

    fn all_requests(&self) -> u64 {
        self.drivers.iter().map(DriverShare::total).sum()
    }

    /// The size classes with any request.
    fn classes(&self) -> Vec<SizeClass> {
        SizeClass::all().filter(|c| self.drivers.iter().any(|d| d.routed[c.index()] > 0)).collect()
    }

    /// The table: one row per driver, one column per size class with requests, and the
    /// driver's share; with `models`, the cost model's estimates below it.
    pub fn table(&self, models: bool) -> String {
        let classes = self.classes();
        let all = self.all_requests();
        let w = self.drivers.iter().map(|d| d.driver.len()).max().unwrap_or(0).max(6);
        let mut out = format!("{:<w$}", "driver");
        for c in &classes {
            let _ = write!(out, "  {:>9}", c.label());
        }
        out.push_str("      share\n");
        for d in &self.drivers {
            let _ = write!(out, "{:<w$}", d.driver);
            for c in &classes {
                let _ = write!(out, "  {:>9}", d.routed[c.index()]);
            }
            let _ = writeln!(out, "  {:>8.1}%", share(d.total(), all));
        }
        if self.decisions == 0 {
            // Priority binds a session to one driver; so does a single capable driver.
            let _ = writeln!(out, "no decisions by {}: each session was bound to one driver", self.policy);
        } else {
            let _ = writeln!(
                out,
                "{} full decisions by {}, {:.1} ns each (between them a session reuses its last choice)",
                self.decisions, self.policy, self.decision_ns
            );
        }
        if models && self.drivers.iter().any(|d| !d.models.is_empty()) {
            let _ = writeln!(
                out,
                "cost model: {:<w$}  {:>10}  {:>10}  {:>8}  algorithm",
                "driver", "setup ns", "ns/KiB", "samples"
            );
            for d in &self.drivers {
                for m in &d.models {
                    let _ = writeln!(
                        out,
                        "            {:<w$}  {:>10.0}  {:>10.0}  {:>8}  {} {}",
                        d.driver,
                        m.setup_ns,
                        m.ns_per_kib,
                        m.samples,
                        m.algorithm,
                        m.op.map_or(String::new(), |o| format!("{o:?}").to_lowercase())
                    );
                }
            }
        }
        out
    }

    /// The `routing` field of the auto case's JSON.
    pub fn json(&self, models: bool) -> Value {
        let all = self.all_requests();
        let drivers: Vec<Value> = self
            .drivers
            .iter()
            .map(|d| {
                let routed: serde_json::Map<String, Value> = SizeClass::all()
                    .filter(|c| d.routed[c.index()] > 0)
                    .map(|c| (c.label(), json!(d.routed[c.index()])))
                    .collect();
                let mut v = json!({
                    "driver": d.driver,
                    "requests": d.total(),
                    "share": share(d.total(), all) / 100.0,
                    "routed": routed,
                });
                if models {
                    v["models"] = d
                        .models
                        .iter()
                        .map(|m| {
                            json!({
                                "algorithm": m.algorithm,
                                "op": m.op.map(|o| format!("{o:?}").to_lowercase()),
                                "setup_ns": m.setup_ns,
                                "ns_per_kib": m.ns_per_kib,
                                "samples": m.samples,
                            })
                        })
                        .collect();
                }
                v
            })
            .collect();
        json!({
            "policy": self.policy,
            "decisions": self.decisions,
            "decision_ns": self.decision_ns,
            "drivers": drivers,
        })
    }
}

fn share(part: u64, all: u64) -> f64 {
    if all == 0 {
        0.0
    } else {
        100.0 * part as f64 / all as f64
    }
}

/// `--oracle` for one auto case: every split's throughput (`None`: it failed to run).
#[derive(Clone, Debug, PartialEq)]
pub struct Oracle {
    /// Driver A and group B, as the table's heading names them.
    pub a: String,
    pub b: Vec<String>,
    pub splits: Vec<(String, Option<f64>)>,
    /// The auto case's own throughput, Mb/s.
    pub auto_mbit_s: f64,
}

impl Oracle {
    /// The best split and its throughput.
    pub fn best(&self) -> Option<(&str, f64)> {
        self.splits.iter().filter_map(|(l, m)| Some((l.as_str(), (*m)?))).max_by(|x, y| x.1.total_cmp(&y.1))
    }

    /// auto ÷ best.
    pub fn ratio(&self) -> Option<f64> {
        let (_, best) = self.best()?;
        (best > 0.0).then(|| self.auto_mbit_s / best)
    }

    pub fn table(&self) -> String {
        let b = if self.b.is_empty() { "(none)".to_owned() } else { self.b.join(" + ") };
        let mut out = format!("A = {}, B = {b} (round-robin)\n", self.a);
        let w = self.splits.iter().map(|(l, _)| l.len()).max().unwrap_or(0).max(10);
        let _ = writeln!(out, "{:<w$}  {:>10}", "split", "Mb/s");
        let best = self.best().map(|(l, _)| l.to_owned());
        for (label, m) in &self.splits {
            let mark = if best.as_deref() == Some(label.as_str()) { "  ← best" } else { "" };
            let _ = writeln!(out, "{label:<w$}  {:>10}{mark}", m.map_or("-".into(), fmt_rate));
        }
        let _ = writeln!(out, "{:<w$}  {:>10}", "auto", fmt_rate(self.auto_mbit_s));
        if let Some(r) = self.ratio() {
            let _ = writeln!(out, "auto ÷ best = {r:.2}");
        }
        out
    }

    /// The `oracle` field of the auto case's JSON.
    pub fn json(&self) -> Value {
        let splits: Vec<Value> = self.splits.iter().map(|(l, m)| json!({"split": l, "mbit_s": m})).collect();
        json!({
            "a": self.a,
            "b": self.b,
            "splits": splits,
            "best": self.best().map(|(l, _)| l),
            "best_mbit_s": self.best().map(|(_, m)| m),
            "auto_over_best": self.ratio(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocf::routing::DriverRouting;

    fn stats(routed: [(usize, u64); 2], decisions: u64) -> RoutingStats {
        let mut a = DriverRouting { driver: "soft".into(), ..Default::default() };
        a.routed[routed[0].0] = routed[0].1;
        let mut b = DriverRouting { driver: "sim:qat-like".into(), ..Default::default() };
        b.routed[routed[1].0] = routed[1].1;
        RoutingStats { decisions, decision_ns: 12.5, drivers: vec![a, b], ..Default::default() }
    }

    #[test]
    fn a_case_counts_the_difference_and_shows_only_classes_with_requests() {
        let before = stats([(0, 10), (6, 5)], 15);
        let after = stats([(0, 40), (6, 35)], 75);
        let r = Routing::between(&before, &after);
        assert_eq!(r.decisions, 60);
        assert_eq!((r.drivers[0].total(), r.drivers[1].total()), (30, 30));
        let t = r.table(false);
        assert!(t.contains("≤16") && t.contains("≤1K") && !t.contains("≤32"), "{t}");
        assert!(t.contains("50.0%") && t.contains("60 full decisions by cost-model, 12.5 ns"), "{t}");
        let none = Routing::between(&before, &before).table(false);
        assert!(none.contains("no decisions by cost-model: each session was bound to one driver"), "{none}");
        let j = r.json(false);
        assert_eq!(j["drivers"][1]["routed"]["≤1K"], 30);
        assert_eq!(j["drivers"][0]["share"], 0.5);
    }

    #[test]
    fn the_oracle_names_the_best_split_and_the_ratio() {
        let o = Oracle {
            a: "soft".into(),
            b: vec!["sim:bcm5822".into()],
            splits: vec![
                ("all A".into(), Some(100.0)),
                ("<256 to A".into(), Some(200.0)),
                ("all B".into(), None),
            ],
            auto_mbit_s: 190.0,
        };
        assert_eq!(o.best(), Some(("<256 to A", 200.0)));
        assert!((o.ratio().unwrap() - 0.95).abs() < 1e-12);
        let t = o.table();
        assert!(t.contains("<256 to A") && t.contains("← best") && t.contains("auto ÷ best = 0.95"), "{t}");
        assert_eq!(o.json()["best"], "<256 to A");
    }
}
