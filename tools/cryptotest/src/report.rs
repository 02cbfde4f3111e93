//! What cryptotest prints: the throughput table in the layout of "Cryptographic Device
//! Support for FreeBSD" (rows: operand
//! size or size distribution; columns: algorithm × driver), openssl speed's layout, the
//! cost of each case, the summary of what `auto` chose ([`auto_summary`]: the fastest
//! driver alone per algorithm and size, where auto sent its requests, auto ÷ that driver),
//! and JSON Lines (an auto case's routing and oracle: `crate::routing`). Public-key cases
//! have tables of their own in operations per second, in `openssl speed`'s layout
//! ([`public_key_table`], [`public_key_auto_summary`]); random bytes are the throughput
//! table in MB/s ([`Unit::MByte`]).

use std::fmt::Write as _;

use ocf::{ProfileStats, Stage};
use serde_json::{json, Value};

use crate::bench::{CaseResult, Skipped};
use crate::drivers::AUTO;
use crate::routing::{Oracle, Routing};
use crate::sizes::SizeSpec;
use crate::units::{fmt_rate, per_second};

/// One measured (or skipped) case and what goes with it.
pub struct Row {
    pub alg: String,
    pub driver: String,
    pub op: &'static str,
    /// A public-key case: one operation, measured in operations per second (`size` is its
    /// input's length).
    pub per_op: bool,
    pub size: SizeSpec,
    pub threads: usize,
    pub batch: usize,
    pub result: Result<CaseResult, Skipped>,
    pub verify: bool,
    /// `openssl speed` for the same algorithm, direction and size, in 1000s of bytes per
    /// second (`None`: not asked for, or openssl has no such algorithm).
    pub openssl_kbytes_s: Option<f64>,
    /// `openssl speed` for the same public-key operation, operations per second of
    /// `openssl_clock`: per CPU second (`openssl speed`'s own measure) or, with
    /// `--elapsed` or threads, of wall-clock time (`-elapsed`).
    pub openssl_ops_s: Option<f64>,
    pub openssl_clock: Clock,
    pub profile: Option<ProfileStats>,
    /// An auto case's routing, and with `--oracle` its static splits.
    pub routing: Option<Routing>,
    pub oracle: Option<Oracle>,
}

impl Row {
    pub fn measured(&self) -> Option<&CaseResult> {
        self.result.as_ref().ok()
    }

    /// Ours ÷ openssl, both in wall-clock bytes per second; public key: operations per
    /// second of `openssl_clock`, both.
    pub fn ratio(&self) -> Option<f64> {
        let (ours, theirs) = if self.per_op {
            let m = self.measured()?;
            let ours = if self.openssl_clock == Clock::Cpu { m.cpu_ops_s() } else { m.ops_s() };
            (ours, self.openssl_ops_s?)
        } else {
            (self.measured()?.kbytes_s(), self.openssl_kbytes_s?)
        };
        (theirs > 0.0).then(|| ours / theirs)
    }

    /// The JSON Lines object of a measured case (`None` for a skipped one). `size` is the
    /// fixed size (null for a distribution), `dist` the distribution's name (null for a
    /// fixed size); `models`: the cost model's estimates in `routing` (`-p`).
    pub fn json(&self, with_openssl: bool, models: bool) -> Option<Value> {
        let r = self.measured()?;
        let dist = match self.size {
            SizeSpec::Fixed(_) => None,
            d => Some(d.to_string()),
        };
        let mut v = json!({
            "driver": self.driver,
            "alg": self.alg,
            "op": self.op,
            "size": self.size.fixed(),
            "dist": dist,
            "dist_mean": (self.size.fixed().is_none()).then(|| self.size.mean()),
            "threads": self.threads,
            "batch": self.batch,
            "ops": r.ops,
            "bytes": r.bytes,
            "seconds": r.seconds,
            "mbit_s": r.mbit_s(),
            "kbytes_s": r.kbytes_s(),
            "cpu_mbit_s": r.cpu_mbit_s(),
            "user_s": r.usage.user_s,
            "sys_s": r.usage.sys_s,
            "vcsw": r.usage.vcsw,
            "ivcsw": r.usage.ivcsw,
            "restarts": r.restarts,
            "errors": r.errors,
            "verified": r.verified(self.verify),
        });
        let obj = v.as_object_mut()?;
        if let Some(e) = &r.first_error {
            obj.insert("first_error".into(), json!(e));
        }
        if let Some(m) = &r.first_mismatch {
            obj.insert("first_mismatch".into(), json!(m));
        }
        if self.per_op {
            obj.insert("ops_s".into(), json!(r.ops_s()));
            obj.insert("cpu_ops_s".into(), json!(r.cpu_ops_s()));
            obj.insert("checked".into(), json!(r.checked));
        }
        if with_openssl {
            if self.per_op {
                obj.insert("openssl_ops_s".into(), json!(self.openssl_ops_s));
                let clock = if self.openssl_clock == Clock::Cpu { "cpu" } else { "wall" };
                obj.insert("openssl_clock".into(), json!(clock));
            } else {
                obj.insert("openssl_kbytes_s".into(), json!(self.openssl_kbytes_s));
            }
            obj.insert("ratio".into(), json!(self.ratio()));
        }
        if let Some(p) = &self.profile {
            let stages: serde_json::Map<String, Value> = Stage::ALL
                .iter()
                .map(|&s| {
                    let st = p.get(s);
                    let v = json!({
                        "count": st.count, "avg_ns": st.avg_ns, "min_ns": st.min_ns, "max_ns": st.max_ns,
                        "p50_ns": st.p50_ns, "p90_ns": st.p90_ns, "p99_ns": st.p99_ns, "p999_ns": st.p999_ns,
                    });
                    (s.name().to_ascii_lowercase(), v)
                })
                .collect();
            obj.insert("profile".into(), Value::Object(stages));
        }
        if let Some(routing) = &self.routing {
            obj.insert("routing".into(), routing.json(models));
        }
        if let Some(oracle) = &self.oracle {
            obj.insert("oracle".into(), oracle.json());
        }
        Some(v)
    }
}

/// A column of the throughput table.
struct Column {
    group: String,
    label: String,
    cells: Vec<String>,
}

/// Which figure the throughput table shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    Wall,
    Cpu,
}

/// The throughput table's unit.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Megabits per second (the paper's: payload).
    Mbit,
    /// Megabytes (10^6 bytes) per second (random bytes).
    MByte,
}

impl Unit {
    fn of_mbit(self, mbit_s: f64) -> f64 {
        match self {
            Unit::Mbit => mbit_s,
            Unit::MByte => mbit_s / 8.0,
        }
    }
}

/// The throughput table: one row per operand size, per algorithm one column per driver
/// (then `openssl` and a ratio per driver with `--openssl`). Tables wider than 120
/// characters are split between algorithms.
pub fn throughput_table(
    rows: &[Row],
    algs: &[String],
    drivers: &[String],
    sizes: &[SizeSpec],
    clock: Clock,
    unit: Unit,
) -> String {
    let find = |alg: &str, driver: &str, size: SizeSpec| {
        rows.iter().find(|r| r.alg == alg && r.driver == driver && r.size == size && !r.per_op)
    };
    let with_openssl = rows.iter().any(|r| r.openssl_kbytes_s.is_some());
    let mut groups: Vec<Vec<Column>> = Vec::new();
    for alg in algs {
        let mut cols = Vec::new();
        for d in drivers {
            let cells = sizes
                .iter()
                .map(|&s| match find(alg, d, s).and_then(Row::measured) {
                    Some(r) => {
                        fmt_rate(unit.of_mbit(if clock == Clock::Wall { r.mbit_s() } else { r.cpu_mbit_s() }))
                    }
                    None => "-".into(),
                })
                .collect();
            cols.push(Column { group: alg.clone(), label: d.clone(), cells });
        }
        if with_openssl && clock == Clock::Wall {
            let openssl =
                |s: SizeSpec| drivers.iter().find_map(|d| find(alg, d, s).and_then(|r| r.openssl_kbytes_s));
            let cells = sizes
                .iter()
                .map(|&s| openssl(s).map_or("n/a".into(), |k| fmt_rate(unit.of_mbit(k * 8.0 / 1e3))))
                .collect();
            cols.push(Column { group: alg.clone(), label: "openssl".into(), cells });
            for d in drivers {
                let cells = sizes
                    .iter()
                    .map(|&s| find(alg, d, s).and_then(Row::ratio).map_or("-".into(), |x| format!("{x:.2}x")))
                    .collect();
                let label = if drivers.len() == 1 { "ratio".into() } else { format!("{d}/openssl") };
                cols.push(Column { group: alg.clone(), label, cells });
            }
        }
        groups.push(cols);
    }

    let width = |c: &Column| c.label.len().max(c.cells.iter().map(String::len).max().unwrap_or(0)).max(7);
    let group_width = |g: &[Column]| {
        let w: usize = g.iter().map(|c| width(c) + 2).sum();
        w.max(g.first().map_or(0, |c| c.group.len() + 2))
    };
    let labels: Vec<String> = sizes.iter().map(SizeSpec::to_string).collect();
    let lw = labels.iter().map(String::len).max().unwrap_or(0).max(6);
    let mut out = String::new();
    let mut start = 0;
    while start < groups.len() {
        // As many algorithms as fit in 120 columns (at least one).
        let (mut end, mut used) = (start, lw);
        while end < groups.len() && (end == start || used + group_width(&groups[end]) <= 120) {
            used += group_width(&groups[end]);
            end += 1;
        }
        let part = &groups[start..end];
        let _ = write!(out, "{:>lw$}", "");
        for g in part {
            let w = group_width(g);
            let name = g.first().map_or("", |c| c.group.as_str());
            let _ = write!(out, "  {name:<w$}", w = w - 2);
        }
        out.push('\n');
        let _ = write!(out, "{:>lw$}", "bytes");
        for g in part {
            let extra = group_width(g) - g.iter().map(|c| width(c) + 2).sum::<usize>();
            for (i, c) in g.iter().enumerate() {
                let w = width(c) + if i + 1 == g.len() { extra } else { 0 };
                let _ = write!(out, "  {:>w$}", c.label, w = w.max(1));
            }
        }
        out.push('\n');
        for (i, s) in labels.iter().enumerate() {
            let _ = write!(out, "{s:>lw$}");
            for g in part {
                let extra = group_width(g) - g.iter().map(|c| width(c) + 2).sum::<usize>();
                for (j, c) in g.iter().enumerate() {
                    let w = width(c) + if j + 1 == g.len() { extra } else { 0 };
                    let _ = write!(out, "  {:>w$}", c.cells[i]);
                }
            }
            out.push('\n');
        }
        start = end;
        if start < groups.len() {
            out.push('\n');
        }
    }
    out
}

/// One (algorithm, size) of [`auto_summary`]: the fastest driver alone, and what auto did.
struct Chosen<'a> {
    size: SizeSpec,
    fastest: Option<(&'a str, f64)>,
    auto_mbit_s: f64,
    /// auto's requests per driver, most first, with their share (%).
    shares: Vec<(&'a str, f64)>,
}

impl Chosen<'_> {
    /// The driver that took most of auto's requests.
    fn main_choice(&self) -> Option<&str> {
        self.shares.first().map(|&(d, _)| d)
    }
}

/// A share as the summary writes it: `100%`, `99.8%`, `97%`, `0.4%`, `<0.1%`.
fn pct(share: f64) -> String {
    if share >= 99.95 {
        "100%".into()
    } else if (10.0..99.5).contains(&share) {
        format!("{share:.0}%")
    } else if share >= 0.05 {
        format!("{share:.1}%")
    } else {
        "<0.1%".into()
    }
}

/// What `auto` chose, for a newcomer: per algorithm and size, the fastest driver alone (of
/// those auto routes to), where auto sent its requests, and auto ÷ that fastest driver
/// (wall clock); then a line per algorithm naming the driver auto chose at each size.
/// `None` without an auto case.
pub fn auto_summary(rows: &[Row], algs: &[String], sizes: &[SizeSpec]) -> Option<String> {
    let mut by_alg: Vec<(&str, Vec<Chosen>)> = Vec::new();
    for alg in algs {
        let mut chosen = Vec::new();
        for &size in sizes {
            let auto = rows.iter().find(|r| &r.alg == alg && r.driver == AUTO && r.size == size && !r.per_op);
            let Some((auto, routing)) = auto.and_then(|r| Some((r.measured()?, r.routing.as_ref()?))) else {
                continue;
            };
            let routed: Vec<&str> = routing.drivers.iter().map(|d| d.driver.as_str()).collect();
            let fastest = rows
                .iter()
                .filter(|r| &r.alg == alg && r.size == size && routed.contains(&r.driver.as_str()))
                .filter_map(|r| Some((r.driver.as_str(), r.measured()?.mbit_s())))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            let shares = shares(routing);
            chosen.push(Chosen { size, fastest, auto_mbit_s: auto.mbit_s(), shares });
        }
        if !chosen.is_empty() {
            by_alg.push((alg, chosen));
        }
    }
    if by_alg.is_empty() {
        return None;
    }
    let sent = |c: &Chosen| {
        let big: Vec<String> =
            c.shares.iter().filter(|s| s.1 >= 1.0).map(|(d, s)| format!("{d} {}", pct(*s))).collect();
        let small: f64 = c.shares.iter().filter(|s| s.1 < 1.0).map(|s| s.1).sum();
        if small > 0.0 {
            format!("{} (+{} elsewhere)", big.join(", "), pct(small))
        } else {
            big.join(", ")
        }
    };
    let alg_w = by_alg.iter().map(|(a, _)| a.len()).max().unwrap_or(0).max(9);
    let size_w = sizes.iter().map(|s| s.to_string().len()).max().unwrap_or(0).max(5);
    let drv_w = by_alg
        .iter()
        .flat_map(|(_, c)| c.iter().filter_map(|c| c.fastest.map(|f| f.0.len())))
        .max()
        .unwrap_or(0)
        .max(13);
    let sent_w = by_alg.iter().flat_map(|(_, c)| c.iter().map(|c| sent(c).len())).max().unwrap_or(0).max(9);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  {:<alg_w$}  {:>size_w$}  {:<drv_w$}  {:>9}  {:<sent_w$}  {:>9}  {:>6}",
        "algorithm", "bytes", "fastest alone", "Mb/s", "auto sent", "auto Mb/s", "÷ fastest"
    );
    for (alg, chosen) in &by_alg {
        for (i, c) in chosen.iter().enumerate() {
            let (fd, fm) = match c.fastest {
                Some((d, m)) => (d, fmt_rate(m)),
                None => ("-", "-".into()),
            };
            let ratio = match c.fastest {
                Some((_, m)) if m > 0.0 => format!("{:.2}", c.auto_mbit_s / m),
                _ => "-".into(),
            };
            let _ = writeln!(
                out,
                "  {:<alg_w$}  {:>size_w$}  {fd:<drv_w$}  {fm:>9}  {:<sent_w$}  {:>9}  {ratio:>9}",
                if i == 0 { alg } else { "" },
                c.size.to_string(),
                sent(c),
                fmt_rate(c.auto_mbit_s)
            );
        }
    }
    for (alg, chosen) in &by_alg {
        // Sizes grouped by the driver that took most of auto's requests, in size order.
        let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
        for c in chosen {
            let Some(d) = c.main_choice() else { continue };
            let size = match c.size {
                SizeSpec::Fixed(n) => format!("{n} B"),
                d => d.to_string(),
            };
            match groups.iter_mut().find(|(g, _)| *g == d) {
                Some((_, v)) => v.push(size),
                None => groups.push((d, vec![size])),
            }
        }
        let phrases: Vec<String> = groups.iter().map(|(d, v)| format!("{d} at {}", and_list(v))).collect();
        let ratios: Vec<f64> = chosen
            .iter()
            .filter_map(|c| c.fastest.filter(|f| f.1 > 0.0).map(|f| c.auto_mbit_s / f.1))
            .collect();
        let range = match (ratios.iter().copied().reduce(f64::min), ratios.iter().copied().reduce(f64::max)) {
            (Some(lo), Some(hi)) if (hi - lo) < 0.005 => format!("{lo:.2}"),
            (Some(lo), Some(hi)) => format!("{lo:.2}–{hi:.2}"),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "{alg}: auto chose {}; auto ÷ the fastest driver alone: {range}",
            phrases.join(", ")
        );
    }
    Some(out)
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(v: &[String]) -> String {
    match v {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Public-key operations per second, as `openssl speed` prints them: a line per algorithm
/// and driver, a column per operation (`sign/s verify/s`, `op/s`, …), the column heads
/// again where the operations change. Where openssl's figures are of this table's clock,
/// a line of them and a line of ratios per driver follow each algorithm.
pub fn public_key_table(rows: &[Row], algs: &[String], drivers: &[String], clock: Clock) -> String {
    let mut lines: Vec<(Vec<&str>, String, String, Vec<String>)> = Vec::new();
    for alg in algs {
        let mine: Vec<&Row> = rows.iter().filter(|r| &r.alg == alg && r.per_op).collect();
        let mut ops: Vec<&str> = Vec::new();
        for r in &mine {
            if !ops.contains(&r.op) {
                ops.push(r.op);
            }
        }
        if ops.is_empty() {
            continue;
        }
        let find = |d: &str, op: &str| mine.iter().find(|r| r.driver == d && r.op == op);
        let cells = |f: &dyn Fn(&str) -> String| ops.iter().map(|op| f(op)).collect::<Vec<String>>();
        for d in drivers {
            let figure = |op: &str| match find(d, op).and_then(|r| r.measured()) {
                Some(m) => fmt_rate(if clock == Clock::Wall { m.ops_s() } else { m.cpu_ops_s() }),
                None => "-".into(),
            };
            lines.push((ops.clone(), alg.clone(), d.clone(), cells(&figure)));
        }
        let openssl = |op: &str| {
            mine.iter().filter(|r| r.op == op && r.openssl_clock == clock).find_map(|r| r.openssl_ops_s)
        };
        if ops.iter().any(|op| openssl(op).is_some()) {
            let figure = |op: &str| openssl(op).map_or("n/a".into(), fmt_rate);
            lines.push((ops.clone(), alg.clone(), "openssl".into(), cells(&figure)));
            for d in drivers {
                let ratio =
                    |op: &str| find(d, op).and_then(|r| r.ratio()).map_or("-".into(), |x| format!("{x:.2}x"));
                lines.push((ops.clone(), alg.clone(), format!("{d} ÷ openssl"), cells(&ratio)));
            }
        }
    }
    let alg_w = lines.iter().map(|l| l.1.len()).max().unwrap_or(0).max(9);
    let drv_w = lines.iter().map(|l| l.2.chars().count()).max().unwrap_or(0).max(6);
    let mut out = String::new();
    let mut heads: Option<&Vec<&str>> = None;
    for (ops, alg, driver, cells) in &lines {
        if heads != Some(ops) {
            let _ = write!(out, "{:<alg_w$}  {:<drv_w$}", "algorithm", "driver");
            for op in ops {
                let _ = write!(out, "  {:>10}", per_second(op));
            }
            out.push('\n');
            heads = Some(ops);
        }
        let pad = drv_w - driver.chars().count();
        let _ = write!(out, "{alg:<alg_w$}  {driver}{:pad$}", "");
        for c in cells {
            let _ = write!(out, "  {c:>10}");
        }
        out.push('\n');
    }
    out
}

/// What `auto` chose for each public-key operation: the fastest driver alone (of those
/// auto routes to), where auto sent the requests, auto ÷ that driver (operations per
/// second, wall clock); then a line per algorithm naming the driver that took each
/// operation. `None` without a public-key auto case.
pub fn public_key_auto_summary(rows: &[Row], algs: &[String]) -> Option<String> {
    let mut table: Vec<[String; 7]> = Vec::new();
    let mut took: Vec<String> = Vec::new();
    for alg in algs {
        let mut by_op: Vec<String> = Vec::new();
        let mut first = true;
        for auto in rows.iter().filter(|r| &r.alg == alg && r.per_op && r.driver == AUTO) {
            let (Some(m), Some(routing)) = (auto.measured(), auto.routing.as_ref()) else { continue };
            let routed: Vec<&str> = routing.drivers.iter().map(|d| d.driver.as_str()).collect();
            let fastest = rows
                .iter()
                .filter(|r| {
                    &r.alg == alg && r.per_op && r.op == auto.op && routed.contains(&r.driver.as_str())
                })
                .filter_map(|r| Some((r.driver.as_str(), r.measured()?.ops_s())))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            let shares = shares(routing);
            let sent: Vec<String> = shares.iter().map(|(d, s)| format!("{d} {}", pct(*s))).collect();
            if let Some((d, _)) = shares.first() {
                by_op.push(format!("{} to {d}", auto.op));
            }
            let (fd, fr, ratio) = match fastest {
                Some((d, f)) if f > 0.0 => (d.to_owned(), fmt_rate(f), format!("{:.2}", m.ops_s() / f)),
                _ => ("-".into(), "-".into(), "-".into()),
            };
            // The algorithm's name on its first line only.
            let name = if std::mem::take(&mut first) { alg.clone() } else { String::new() };
            table.push([name, auto.op.to_owned(), fd, fr, sent.join(", "), fmt_rate(m.ops_s()), ratio]);
        }
        if !by_op.is_empty() {
            took.push(format!("{alg}: auto sent {}", and_list(&by_op)));
        }
    }
    if table.is_empty() {
        return None;
    }
    let head = ["algorithm", "op", "fastest alone", "op/s", "auto sent", "auto op/s", "÷ fastest"];
    let w: Vec<usize> = (0..7)
        .map(|i| {
            table.iter().map(|l| l[i].chars().count()).chain([head[i].chars().count()]).max().unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in std::iter::once(head.map(String::from)).chain(table) {
        out.push(' ');
        for (i, cell) in line.iter().enumerate() {
            let pad = w[i] - cell.chars().count();
            // Text left, figures right.
            if matches!(i, 3 | 5 | 6) {
                let _ = write!(out, " {:pad$}{cell}", "");
            } else {
                let _ = write!(out, " {cell}{:pad$}", "");
            }
            out.push(' ');
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
    }
    for t in took {
        let _ = writeln!(out, "{t}");
    }
    Some(out)
}

/// What each case cost: operations, wall and CPU time, context switches, flow control,
/// errors and verification.
pub fn cost_table(rows: &[Row]) -> String {
    let measured: Vec<(&Row, &CaseResult)> = rows.iter().filter_map(|r| Some((r, r.measured()?))).collect();
    let alg_w = measured.iter().map(|(r, _)| r.alg.len()).max().unwrap_or(0).max(9);
    let drv_w = measured.iter().map(|(r, _)| r.driver.len()).max().unwrap_or(0).max(6);
    // The bytes of a case, or the operation of a public-key one.
    let case = |r: &Row| if r.per_op { r.op.to_owned() } else { r.size.to_string() };
    let sw = measured.iter().map(|(r, _)| case(r).len()).max().unwrap_or(0).max(6);
    let mut out = format!(
        "{:<alg_w$}  {:<drv_w$}  {:>sw$}  {:>10}  {:>6}  {:>6}  {:>6}  {:>5}  {:>8}  {:>8}  {:>8}  {:>6}  {}\n",
        "algorithm",
        "driver",
        "size/op",
        "ops",
        "wall s",
        "user s",
        "sys s",
        "CPU%",
        "vcsw",
        "ivcsw",
        "restarts",
        "errors",
        "verified"
    );
    for (row, r) in measured {
        let cpu = r.usage.user_s + r.usage.sys_s;
        let pct = if r.seconds > 0.0 { 100.0 * cpu / r.seconds } else { 0.0 };
        let verified = match r.verified(row.verify) {
            None => "-",
            Some(true) => "yes",
            Some(false) => "NO",
        };
        let _ = writeln!(
            out,
            "{:<alg_w$}  {:<drv_w$}  {:>sw$}  {:>10}  {:>6.2}  {:>6.2}  {:>6.2}  {:>5.0}  {:>8}  {:>8}  {:>8}  {:>6}  {}",
            row.alg,
            row.driver,
            case(row),
            r.ops,
            r.seconds,
            r.usage.user_s,
            r.usage.sys_s,
            pct,
            r.usage.vcsw,
            r.usage.ivcsw,
            r.restarts,
            r.errors,
            verified
        );
    }
    out
}

/// openssl speed's layout: one line per algorithm (and driver), one column per size, in
/// 1000s of bytes per second.
pub fn openssl_layout(
    rows: &[Row],
    algs: &[String],
    drivers: &[String],
    sizes: &[SizeSpec],
    clock: Clock,
) -> String {
    let mut lines: Vec<(String, Vec<String>)> = Vec::new();
    for alg in algs {
        for d in drivers {
            let name = if drivers.len() == 1 { alg.clone() } else { format!("{alg} ({d})") };
            let cells = sizes
                .iter()
                .map(|&s| {
                    let r = rows.iter().find(|r| &r.alg == alg && &r.driver == d && r.size == s);
                    match r.and_then(Row::measured) {
                        Some(m) => {
                            let k = match clock {
                                Clock::Wall => m.kbytes_s(),
                                Clock::Cpu => m.cpu_mbit_s() * 1e3 / 8.0,
                            };
                            format!("{k:.2}k")
                        }
                        None => "-".into(),
                    }
                })
                .collect();
            lines.push((name, cells));
        }
        let openssl: Vec<Option<f64>> = sizes
            .iter()
            .map(|&s| rows.iter().find(|r| &r.alg == alg && r.size == s).and_then(|r| r.openssl_kbytes_s))
            .collect();
        if openssl.iter().any(Option::is_some) {
            let cells = openssl.iter().map(|k| k.map_or("-".into(), |k| format!("{k:.2}k"))).collect();
            lines.push((format!("{alg} (openssl)"), cells));
        }
    }
    let name_w = lines.iter().map(|(n, _)| n.len()).max().unwrap_or(0).max(13);
    let mut out = String::from("The 'numbers' are in 1000s of bytes per second processed.\n");
    let _ = write!(out, "{:<name_w$}", "type");
    for s in sizes {
        let unit = if s.fixed().is_some() { " bytes" } else { "" };
        let _ = write!(out, " {:>13}", format!("{s}{unit}"));
    }
    out.push('\n');
    for (name, cells) in lines {
        let _ = write!(out, "{name:<name_w$}");
        for c in cells {
            let _ = write!(out, " {c:>13}");
        }
        out.push('\n');
    }
    out
}

/// Each driver's share of an auto case's requests, in percent, the largest first.
fn shares(routing: &Routing) -> Vec<(&str, f64)> {
    let all: u64 = routing.drivers.iter().map(|d| d.total()).sum();
    let mut shares: Vec<(&str, f64)> = routing
        .drivers
        .iter()
        .filter(|d| d.total() > 0)
        .map(|d| (d.driver.as_str(), 100.0 * d.total() as f64 / all.max(1) as f64))
        .collect();
    shares.sort_by(|a, b| b.1.total_cmp(&a.1));
    shares
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::DriverShare;
    use crate::rusage::Usage;

    fn row(alg: &str, driver: &str, size: usize, bytes: u64) -> Row {
        Row {
            alg: alg.into(),
            driver: driver.into(),
            op: "encrypt",
            size: SizeSpec::Fixed(size),
            threads: 1,
            batch: 1,
            result: Ok(CaseResult {
                ops: bytes / size as u64,
                bytes,
                seconds: 1.0,
                usage: Usage { user_s: 0.5, sys_s: 0.0, vcsw: 3, ivcsw: 1 },
                ..CaseResult::default()
            }),
            verify: false,
            openssl_kbytes_s: Some(bytes as f64 / 2e3),
            openssl_ops_s: None,
            openssl_clock: Clock::Wall,
            per_op: false,
            profile: None,
            routing: None,
            oracle: None,
        }
    }

    #[test]
    fn the_table_has_a_row_per_size_and_a_column_per_driver_with_ratios() {
        let rows =
            vec![row("aes-128-gcm", "soft", 16, 1_000_000), row("aes-128-gcm", "soft", 1024, 125_000_000)];
        let t = throughput_table(
            &rows,
            &["aes-128-gcm".into()],
            &["soft".into()],
            &[SizeSpec::Fixed(16), SizeSpec::Fixed(1024)],
            Clock::Wall,
            Unit::Mbit,
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].contains("aes-128-gcm"));
        assert!(lines[1].contains("soft") && lines[1].contains("openssl") && lines[1].contains("ratio"));
        // 1,000,000 bytes in 1 s = 8 Mb/s; openssl did half: 4 Mb/s, ratio 2.
        assert!(lines[2].trim_start().starts_with("16") && lines[2].contains("8.00"), "{t}");
        assert!(lines[2].contains("4.00") && lines[2].contains("2.00x"), "{t}");
        assert!(lines[3].contains("1000"), "{t}");
        let cpu = throughput_table(
            &rows,
            &["aes-128-gcm".into()],
            &["soft".into()],
            &[SizeSpec::Fixed(16), SizeSpec::Fixed(1024)],
            Clock::Cpu,
            Unit::Mbit,
        );
        assert!(cpu.contains("16.0") && !cpu.contains("openssl"), "{cpu}");
    }

    /// A case at `mbit_s` Mb/s: 1 s of `size`-byte requests.
    fn at(alg: &str, driver: &str, size: usize, mbit_s: f64) -> Row {
        row(alg, driver, size, (mbit_s * 1e6 / 8.0) as u64 / size as u64 * size as u64)
    }

    fn routed(shares: &[(&str, u64)]) -> Routing {
        let drivers = shares
            .iter()
            .map(|&(d, n)| {
                let mut routed = [0; ocf::routing::SIZE_CLASSES];
                routed[0] = n;
                DriverShare { driver: d.into(), routed, models: Vec::new() }
            })
            .collect();
        Routing { policy: "cost-model".into(), decisions: 1, decision_ns: 1.0, drivers }
    }

    #[test]
    fn the_summary_names_the_fastest_driver_and_what_auto_chose() {
        let mut auto16 = at("cbc", AUTO, 16, 96.0);
        auto16.routing = Some(routed(&[("soft", 9990), ("mb", 6), ("sim", 4)]));
        let mut auto1k = at("cbc", AUTO, 1024, 2900.0);
        auto1k.routing = Some(routed(&[("soft", 100), ("mb", 9900), ("sim", 0)]));
        let rows = vec![
            at("cbc", "soft", 16, 100.0),
            at("cbc", "mb", 16, 80.0),
            at("cbc", "sim", 16, 2.0),
            // null is faster, but auto does not route to it: not the fastest "alone".
            at("cbc", "null", 16, 5000.0),
            auto16,
            at("cbc", "soft", 1024, 1000.0),
            at("cbc", "mb", 1024, 3000.0),
            at("cbc", "sim", 1024, 100.0),
            auto1k,
        ];
        let sizes = [SizeSpec::Fixed(16), SizeSpec::Fixed(1024)];
        let t = auto_summary(&rows, &["cbc".into()], &sizes).unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].contains("fastest alone") && lines[0].contains("÷ fastest"), "{t}");
        fn cells(l: &str) -> Vec<&str> {
            l.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect()
        }
        assert_eq!(
            cells(lines[1]),
            ["cbc", "16", "soft", "100.0", "soft 99.9% (+0.1% elsewhere)", "96.0", "0.96"]
        );
        assert_eq!(cells(lines[2]), ["1024", "mb", "3000", "mb 99%, soft 1.0%", "2900", "0.97"]);
        assert_eq!(
            lines[3],
            "cbc: auto chose soft at 16 B, mb at 1024 B; auto ÷ the fastest driver alone: 0.96–0.97"
        );
        // Without an auto case there is nothing to summarise.
        assert!(auto_summary(&rows[..4], &["cbc".into()], &sizes).is_none());
    }

    /// A public-key case: `ops` operations in 1 s of wall clock and 0.5 s of CPU.
    fn op_row(alg: &str, driver: &str, op: &'static str, ops: u64, openssl: Option<f64>) -> Row {
        Row {
            op,
            per_op: true,
            size: SizeSpec::Fixed(32),
            openssl_kbytes_s: None,
            openssl_ops_s: openssl,
            result: Ok(CaseResult { ops, bytes: 32 * ops, ..row(alg, driver, 32, 32 * ops).result.unwrap() }),
            ..row(alg, driver, 32, 32 * ops)
        }
    }

    #[test]
    fn the_public_key_table_is_operations_per_second_with_openssl_and_ratios() {
        let rows = vec![
            op_row("rsa2048", "soft", "sign", 3900, Some(4000.0)),
            op_row("rsa2048", "soft", "verify", 70000, Some(56000.0)),
            op_row("ecdhx25519", "soft", "derive", 30000, Some(30000.0)),
        ];
        let algs = ["rsa2048".to_owned(), "ecdhx25519".to_owned()];
        let t = public_key_table(&rows, &algs, &["soft".into()], Clock::Wall);
        let cells = |l: &str| {
            l.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect::<Vec<_>>()
        };
        let lines: Vec<Vec<String>> = t.lines().map(cells).collect();
        assert_eq!(
            lines,
            [
                vec!["algorithm", "driver", "sign/s", "verify/s"],
                vec!["rsa2048", "soft", "3900", "70000"],
                vec!["rsa2048", "openssl", "4000", "56000"],
                vec!["rsa2048", "soft ÷ openssl", "0.97x", "1.25x"],
                vec!["algorithm", "driver", "op/s"],
                vec!["ecdhx25519", "soft", "30000"],
                vec!["ecdhx25519", "openssl", "30000"],
                vec!["ecdhx25519", "soft ÷ openssl", "1.00x"],
            ],
            "{t}"
        );
        // Per CPU second (0.5 s of CPU): twice the figures, and no openssl.
        let cpu = public_key_table(&rows, &algs, &["soft".into()], Clock::Cpu);
        assert!(cpu.contains("7800") && cpu.contains("140000") && !cpu.contains("openssl"), "{cpu}");
        // Rows by size are not this table's.
        assert!(public_key_table(
            &[row("sha1", "soft", 16, 16)],
            &["sha1".into()],
            &["soft".into()],
            Clock::Wall
        )
        .is_empty());
        let v = rows[0].json(true, false).unwrap();
        assert_eq!((v["ops_s"].as_f64(), v["openssl_ops_s"].as_f64()), (Some(3900.0), Some(4000.0)));
        assert_eq!(v["ratio"].as_f64(), Some(3900.0 / 4000.0));
        assert!(v.get("openssl_kbytes_s").is_none(), "{v}");
    }

    #[test]
    fn the_public_key_summary_says_which_driver_took_which_operation() {
        let mut sign = op_row("ed25519", AUTO, "sign", 9000, None);
        sign.routing = Some(routed(&[("soft", 9000), ("sim", 0)]));
        let mut verify = op_row("ed25519", AUTO, "verify", 5000, None);
        verify.routing = Some(routed(&[("soft", 100), ("sim", 4900)]));
        let rows = vec![
            op_row("ed25519", "soft", "sign", 10000, None),
            op_row("ed25519", "sim", "sign", 2000, None),
            sign,
            op_row("ed25519", "soft", "verify", 3000, None),
            op_row("ed25519", "sim", "verify", 5200, None),
            verify,
        ];
        let t = public_key_auto_summary(&rows, &["ed25519".into()]).unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        fn cells(l: &str) -> Vec<&str> {
            l.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect()
        }
        assert_eq!(cells(lines[1]), ["ed25519", "sign", "soft", "10000", "soft 100%", "9000", "0.90"]);
        assert_eq!(cells(lines[2]), ["verify", "sim", "5200", "sim 98%, soft 2.0%", "5000", "0.96"]);
        assert_eq!(lines[3], "ed25519: auto sent sign to soft and verify to sim");
        assert!(public_key_auto_summary(&rows[..2], &["ed25519".into()]).is_none());
        // The size-by-size summary leaves public-key rows alone.
        assert!(auto_summary(&rows, &["ed25519".into()], &[SizeSpec::Fixed(32)]).is_none());
    }

    #[test]
    fn openssl_layout_is_kbytes_per_second_per_size() {
        let rows = vec![row("sha1", "soft", 16, 1_000_000)];
        let t =
            openssl_layout(&rows, &["sha1".into()], &["soft".into()], &[SizeSpec::Fixed(16)], Clock::Wall);
        assert!(t.contains("16 bytes") && t.contains("1000.00k") && t.contains("sha1 (openssl)"), "{t}");
    }

    #[test]
    fn json_has_the_documented_keys() {
        let v = row("sha1", "soft", 16, 1_000_000).json(true, false).unwrap();
        for key in [
            "driver",
            "alg",
            "op",
            "size",
            "dist",
            "threads",
            "batch",
            "ops",
            "bytes",
            "seconds",
            "mbit_s",
            "kbytes_s",
            "user_s",
            "sys_s",
            "vcsw",
            "ivcsw",
            "restarts",
            "errors",
            "verified",
            "openssl_kbytes_s",
            "ratio",
        ] {
            assert!(v.get(key).is_some(), "{key} missing from {v}");
        }
        assert_eq!(v["verified"], Value::Null);
        assert_eq!(v["ratio"], json!(2.0));
        assert_eq!((&v["size"], &v["dist"]), (&json!(16), &Value::Null));
        let imix = Row { size: SizeSpec::Imix, ..row("sha1", "soft", 16, 1_000_000) };
        let v = imix.json(false, false).unwrap();
        assert_eq!((&v["size"], &v["dist"]), (&Value::Null, &json!("imix")));
    }
}
