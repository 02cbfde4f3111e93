//! ocf for the gateway: the framework the SAs get their sessions from — `soft`, the
//! drivers `--driver` names (`mb`: the multi-buffer CPU driver, to which the cost model
//! sends each SA's runs of packets where it beats `soft` on them; `afalg`: the kernel's
//! crypto drivers, a real accelerator where the machine has one; `sim:<profile>`:
//! simulated cards, for experiments: how ocf
//! spreads ESP over a CPU and cards), the routing policy `--policy` chooses — and what
//! routing did, for `ipsecctl stats` ([`stats`]) and the metrics ([`prometheus`]).
//!
//! ```text
//! ipsecd --driver afalg --driver sim:qat-like --policy cost-model
//!    └─ framework(): Config { policy } ─ soft ─ afalg ─ sim:qat-like ─► Ipsec::new(fw) ─►
//!                                                each SA's session routes its requests
//! ipsecctl stats / GET /metrics ◄─ stats() / prometheus() ◄─ Framework::routing()
//! ```

use std::fmt::Write as _;

use ocf::{Config, Framework, Policy, RoutingStats, SizeClass};
use ocf_sim::{SimError, SimProfile};

/// `--driver hwrng`: every hardware random source the machine has (`ocf-hwrng`: RDSEED,
/// `/dev/hwrng`), health-tested, for random sessions.
const HWRNG: &str = "hwrng";

/// Checks a `--driver` value (clap's value parser): `mb`, `hwrng`, `afalg[:<options>]`, or `sim:<profile>`
/// with a profile ocf-sim takes. The error names what is wrong. (Whether the kernel has
/// AF_ALG is found when the framework is made.)
pub fn driver_spec(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s == ocf_mb::NAME || s == HWRNG {
        return Ok(s.to_owned());
    }
    if ocf_afalg::is_afalg_name(s) {
        return ocf_afalg::parse_name(s).map(|_| s.to_owned()).map_err(|e| e.to_string());
    }
    match s.strip_prefix(ocf_sim::NAME_PREFIX) {
        Some(spec) => match SimProfile::parse(spec) {
            Ok(_) => Ok(s.to_owned()),
            Err(e) => Err(SimError::Profile(e).to_string()),
        },
        None => Err(SimError::NotSim(s.to_owned()).to_string()),
    }
}

/// The framework: `policy`, `soft`, then each of `drivers` (`mb`, which fails naming why
/// where Intel IPsec-MB is unavailable; `afalg[:<options>]`, which
/// fails naming why where the kernel has no AF_ALG; `sim:<profile>`, the same profile twice
/// being two cards, `sim:X` and `sim:X#2`).
pub fn framework(drivers: &[String], policy: Policy) -> Result<Framework, String> {
    let fw = Framework::with_config(Config { policy, ..Config::default() });
    ocf_soft::register(&fw).map_err(|e| format!("ocf: {e}"))?;
    for d in drivers {
        let registered = if d == ocf_mb::NAME {
            ocf_mb::register(&fw).map_err(|e| e.to_string())
        } else if d == HWRNG {
            ocf_hwrng::register(&fw).map(drop).map_err(|e| e.to_string())
        } else if ocf_afalg::is_afalg_name(d) {
            ocf_afalg::register_named(&fw, d).map(drop).map_err(|e| e.to_string())
        } else {
            ocf_sim::register_named(&fw, d).map(drop).map_err(|e| e.to_string())
        };
        registered.map_err(|e| format!("--driver '{d}': {e}"))?;
    }
    Ok(fw)
}

/// The size classes a driver got requests in, as `≤64 12, ≤2K 3` (non-zero ones only).
fn routed_classes(routed: &[u64]) -> impl Iterator<Item = (SizeClass, u64)> + '_ {
    SizeClass::all().map(|c| (c, routed[c.index()])).filter(|&(_, n)| n > 0)
}

/// `ipsecctl stats`' routing lines: the policy and its decisions, then per driver what was
/// routed to it (by size class), explored, and skipped, and the model's estimates.
///
/// ```text
/// routing: policy cost-model, 94 full decisions, 41 ns per decision
/// driver soft: routed 1200 (≤128 1000, ≤2K 200), explored 4, skipped 0 blocked 0 unhealthy, in flight 0
///   model aead aes-gcm/128 encrypt: setup 410 ns, 230 ns/KiB, 75 samples
/// driver sim:qat-like: routed 300 (≤2K 300), explored 300, skipped 2 blocked 0 unhealthy, in flight 1
/// ```
pub fn stats(r: &RoutingStats) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "routing: policy {}, {} full decisions, {:.0} ns per decision",
        r.policy, r.decisions, r.decision_ns
    );
    for d in &r.drivers {
        let classes: Vec<String> =
            routed_classes(&d.routed).map(|(c, n)| format!("{} {n}", c.label())).collect();
        let by_size = if classes.is_empty() { String::new() } else { format!(" ({})", classes.join(", ")) };
        let _ = writeln!(
            out,
            "driver {}: routed {}{by_size}, explored {}, skipped {} blocked {} unhealthy, in flight {}",
            d.driver,
            d.routed_total(),
            d.explored,
            d.skipped_blocked,
            d.skipped_unhealthy,
            d.in_flight
        );
        for m in &d.models {
            let _ = writeln!(out, "  model {m}");
        }
    }
    out
}

/// A Prometheus label value: backslash, double quote and newline escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The routing counters in Prometheus' text format, beside ipsecd's own: ocf's, so named
/// `ocf_…`.
pub fn prometheus(r: &RoutingStats) -> String {
    let mut o = String::new();
    for (name, kind, help) in [
        ("routing_policy", "gauge", "ocf's routing policy: 1 for the one in use."),
        (
            "routing_decisions_total",
            "counter",
            "Full routing decisions (the cost model consulted for every driver; between them a session reuses its last choice).",
        ),
        ("routing_decision_ns", "gauge", "Average cost of one full routing decision, ns."),
        (
            "routed_requests_total",
            "counter",
            "Requests a driver completed, by payload size class (routed there or pinned to it).",
        ),
        (
            "explored_requests_total",
            "counter",
            "Requests routed to a driver to explore it (not the predicted best).",
        ),
        (
            "routing_skipped_total",
            "counter",
            "Decisions that left a driver out, by reason: blocked or unhealthy.",
        ),
        ("driver_in_flight", "gauge", "Requests in flight on a driver."),
        (
            "model_setup_ns",
            "gauge",
            "The cost model's fixed cost per request, by driver, algorithm and op, ns.",
        ),
        ("model_ns_per_kib", "gauge", "The cost model's cost per KiB, by driver, algorithm and op, ns."),
        (
            "model_samples_total",
            "counter",
            "Completions the cost model measured, by driver, algorithm and op.",
        ),
    ] {
        let _ = writeln!(o, "# HELP ocf_{name} {help}\n# TYPE ocf_{name} {kind}");
    }
    let _ = writeln!(o, "ocf_routing_policy{{policy=\"{}\"}} 1", r.policy);
    let _ = writeln!(o, "ocf_routing_decisions_total {}", r.decisions);
    let _ = writeln!(o, "ocf_routing_decision_ns {}", r.decision_ns);
    for d in &r.drivers {
        let drv = format!("driver=\"{}\"", label(&d.driver));
        for (c, n) in routed_classes(&d.routed) {
            let _ = writeln!(o, "ocf_routed_requests_total{{{drv},size_class=\"{}\"}} {n}", c.label());
        }
        let _ = writeln!(o, "ocf_explored_requests_total{{{drv}}} {}", d.explored);
        let _ = writeln!(o, "ocf_routing_skipped_total{{{drv},reason=\"blocked\"}} {}", d.skipped_blocked);
        let _ =
            writeln!(o, "ocf_routing_skipped_total{{{drv},reason=\"unhealthy\"}} {}", d.skipped_unhealthy);
        let _ = writeln!(o, "ocf_driver_in_flight{{{drv}}} {}", d.in_flight);
        for m in &d.models {
            let arrival = match m.run_len {
                0 => "alone",
                2 => "run2",
                4 => "run4",
                _ => "run16",
            };
            let l = format!(
                "{drv},algorithm=\"{}\",op=\"{}\",arrival=\"{arrival}\"",
                label(&m.algorithm),
                m.op_name()
            );
            let _ = writeln!(o, "ocf_model_setup_ns{{{l}}} {}", m.setup_ns);
            let _ = writeln!(o, "ocf_model_ns_per_kib{{{l}}} {}", m.ns_per_kib);
            let _ = writeln!(o, "ocf_model_samples_total{{{l}}} {}", m.samples);
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocf::{DriverRouting, ModelEstimate, Op};

    /// Routing statistics as ocf would report them after some traffic.
    fn sample() -> RoutingStats {
        let mut soft = DriverRouting { driver: "soft".into(), explored: 4, ..Default::default() };
        soft.routed[SizeClass::of(100).index()] = 1000;
        soft.routed[SizeClass::of(1400).index()] = 200;
        soft.models.push(ModelEstimate {
            algorithm: "aead AES-GCM-128".into(),
            op: Some(Op::Encrypt),
            setup_ns: 410.4,
            ns_per_kib: 230.0,
            samples: 75,
            classes: Default::default(),
            run_len: 0,
        });
        let mut card = DriverRouting {
            driver: "sim:qat-like".into(),
            explored: 300,
            skipped_blocked: 2,
            in_flight: 1,
            ..Default::default()
        };
        card.routed[SizeClass::of(1400).index()] = 300;
        let idle = DriverRouting { driver: "sim:qat-like#2".into(), ..Default::default() };
        RoutingStats {
            policy: Policy::CostModel,
            decisions: 1500,
            decision_ns: 41.2,
            drivers: vec![soft, card, idle],
        }
    }

    #[test]
    fn stats_show_routed_classes_skips_and_the_model() {
        assert_eq!(
            stats(&sample()),
            "routing: policy cost-model, 1500 full decisions, 41 ns per decision\n\
             driver soft: routed 1200 (≤128 1000, ≤2K 200), explored 4, skipped 0 blocked 0 unhealthy, in flight 0\n\
             \x20 model aead AES-GCM-128 encrypt: setup 410 ns, 230 ns/KiB, 75 samples\n\
             driver sim:qat-like: routed 300 (≤2K 300), explored 300, skipped 2 blocked 0 unhealthy, in flight 1\n\
             driver sim:qat-like#2: routed 0, explored 0, skipped 0 blocked 0 unhealthy, in flight 0\n"
        );
    }

    #[test]
    fn metrics_are_labelled_counters_and_gauges() {
        let m = prometheus(&sample());
        for line in [
            "ocf_routing_policy{policy=\"cost-model\"} 1",
            "ocf_routing_decisions_total 1500",
            "ocf_routed_requests_total{driver=\"soft\",size_class=\"≤128\"} 1000",
            "ocf_routed_requests_total{driver=\"soft\",size_class=\"≤2K\"} 200",
            "ocf_routed_requests_total{driver=\"sim:qat-like\",size_class=\"≤2K\"} 300",
            "ocf_explored_requests_total{driver=\"sim:qat-like\"} 300",
            "ocf_routing_skipped_total{driver=\"sim:qat-like\",reason=\"blocked\"} 2",
            "ocf_routing_skipped_total{driver=\"soft\",reason=\"unhealthy\"} 0",
            "ocf_driver_in_flight{driver=\"sim:qat-like\"} 1",
            "ocf_model_setup_ns{driver=\"soft\",algorithm=\"aead AES-GCM-128\",op=\"encrypt\",arrival=\"alone\"} 410.4",
            "ocf_model_samples_total{driver=\"soft\",algorithm=\"aead AES-GCM-128\",op=\"encrypt\",arrival=\"alone\"} 75",
            "# TYPE ocf_routed_requests_total counter",
            "# TYPE ocf_model_ns_per_kib gauge",
        ] {
            assert!(m.lines().any(|l| l == line), "{line}\n{m}");
        }
        // Only non-zero classes: the idle card has no routed line.
        assert!(!m.contains("ocf_routed_requests_total{driver=\"sim:qat-like#2\""), "{m}");
        // Every sample line is NAME{LABELS} VALUE with a number.
        for l in m.lines().filter(|l| !l.starts_with('#')) {
            let value = l.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{l}");
        }
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn drivers_and_the_policy_make_the_framework() {
        let cards = ["sim:qat-like".to_owned(), "sim:qat-like".to_owned(), " sim:hifn7951,ring=8".to_owned()];
        let fw = framework(&cards, Policy::RoundRobin).unwrap();
        let names: Vec<String> = fw.drivers().into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["soft", "sim:qat-like", "sim:qat-like#2", "sim:hifn7951,ring=8"]);
        assert_eq!(fw.config().policy, Policy::RoundRobin);
        assert_eq!(fw.routing().drivers.len(), 4);
        assert!(stats(&fw.routing()).contains("driver sim:qat-like#2: routed 0"));
    }

    /// Through ocf's routing (issue 18's "ocf: route each request"): every request of a
    /// session that soft and the card can both serve is routed and counted in its class.
    #[test]
    fn routed_requests_are_counted_in_stats_and_metrics() {
        let fw = framework(&["sim:qat-like".to_owned()], Policy::CostModel).unwrap();
        let s = fw.new_session(&ocf::SessionParams::aead(ocf::CipherAlg::AesGcm, &[9; 16])).unwrap();
        for _ in 0..50 {
            s.run(ocf::Request::new(Op::Encrypt, vec![0; 1400]).with_iv(&[1; 12])).unwrap();
        }
        let r = fw.routing();
        assert_eq!(r.drivers.iter().map(|d| d.routed_total()).sum::<u64>(), 50, "{r:?}");
        let text = stats(&r);
        let routed: u64 = text
            .lines()
            .filter_map(|l| l.strip_prefix("driver "))
            .map(|l| {
                l.split("routed ").nth(1).unwrap().split([' ', ',']).next().unwrap().parse::<u64>().unwrap()
            })
            .sum();
        assert_eq!(routed, 50, "{text}");
        let m = prometheus(&r);
        let in_class: u64 = m
            .lines()
            .filter(|l| l.starts_with("ocf_routed_requests_total{") && l.contains("size_class=\"≤2K\""))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(in_class, 50, "{m}");
    }

    #[test]
    fn a_bad_driver_is_named() {
        assert_eq!(driver_spec(" sim:qat-like "), Ok("sim:qat-like".into()));
        let e = driver_spec("sim:hifn9999").unwrap_err();
        assert!(e.contains("bad sim device profile") && e.contains("hifn9999"), "{e}");
        let e = driver_spec("soft").unwrap_err();
        assert!(e.contains("\"soft\"") && e.contains("sim:<profile>"), "{e}");
        assert_eq!(driver_spec("mb"), Ok("mb".into()));
        // mb is registered where IPsec-MB was built in, and refused naming why where not.
        match (ocf_mb::available(), framework(&["mb".into()], Policy::CostModel)) {
            (true, Ok(fw)) => assert!(fw.drivers().iter().any(|d| d.name == "mb")),
            (false, Err(e)) => assert!(e.contains("--driver 'mb'") && e.contains("IPsec-MB"), "{e}"),
            (a, r) => panic!("available {a}, framework {:?}", r.map(|_| ())),
        }
        // hwrng registers every hardware random source, or fails naming why there is none.
        assert_eq!(driver_spec("hwrng"), Ok("hwrng".into()));
        match (ocf_hwrng::probe(), framework(&["hwrng".into()], Policy::CostModel)) {
            (Ok(kinds), Ok(fw)) => assert_eq!(fw.drivers().len(), 1 + kinds.len()),
            (Err(why), Err(e)) => assert_eq!(e, format!("--driver 'hwrng': {why}")),
            (probe, made) => panic!("probe {:?} but framework {:?}", probe.err(), made.err()),
        }
        assert_eq!(driver_spec("afalg:sync"), Ok("afalg:sync".into()));
        let e = driver_spec("afalg:turbo").unwrap_err();
        assert!(e.contains("unknown afalg option `turbo`"), "{e}");
        // afalg is registered where the kernel has AF_ALG, and refused naming why where not.
        match (ocf_afalg::AfalgDriver::probe(), framework(&["afalg".into()], Policy::CostModel)) {
            (Ok(_), Ok(fw)) => assert!(fw.drivers().iter().any(|d| d.name == "afalg")),
            (Err(why), Err(e)) => assert_eq!(e, format!("--driver 'afalg': {why}")),
            (probe, made) => panic!("probe {:?} but framework {:?}", probe.err(), made.err()),
        }
        let e = framework(&["sim:ring=0".into()], Policy::CostModel).err().unwrap();
        assert!(e.starts_with("--driver 'sim:ring=0': bad sim device profile"), "{e}");
    }
}
