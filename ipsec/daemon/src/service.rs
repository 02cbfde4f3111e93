//! What the daemon does with configuration: control requests from the socket, the config
//! file at start-up, and its re-reading on SIGHUP — all through the Fast IPsec core's one
//! typed control protocol (`ipsec_core::control`), reached from setkey text.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use ipsec_core::control::{Action, Dir, Located, PolicySpec, Request, SaId, SaSpec};
use ipsec_core::db::{Response, SaInfo};
use ipsec_core::sad::{self, Installed};
use ipsec_core::setkey;
use ipsec_core::stats::Drop;
use ipsec_core::Ipsec;

use crate::ctl::Reply;

/// Parses setkey text; the error names the line and column (`FILE:LINE:COLUMN: …` when
/// `origin` is a file name).
pub fn parse(origin: &str, text: &str) -> Result<Vec<Located<Request>>, String> {
    setkey::parse(text).map_err(|e| format!("{origin}:{}:{}: {}", e.line, e.column, e.message))
}

/// Carries out setkey text as one transaction: parsed whole first (a malformed request
/// changes nothing), then applied in order; if the databases refuse one, nothing changes
/// (its line is named). The reply holds what `get`, `dump` and `spddump` print.
///
/// Errors show a statement without its keys ([`setkey::format_redacted`]): they are logged.
pub fn apply_setkey(core: &Ipsec, origin: &str, text: &str) -> Reply {
    let reqs = parse(origin, text)?;
    core.transact(|t| {
        let mut out = String::new();
        for r in &reqs {
            match t.apply(&r.item) {
                Ok(resp) => print_response(&mut out, &resp),
                Err(e) => {
                    return Err(format!(
                        "{origin}:{}:{}: {}: {e} (nothing was changed)",
                        r.line,
                        r.column,
                        setkey::format_redacted(&r.item)
                    ))
                }
            }
        }
        Ok(out)
    })
}

/// What a response prints: SAs and policies as setkey statements that would install them
/// again, each SA followed by a comment with its state and counters.
fn print_response(out: &mut String, r: &Response) {
    match r {
        Response::Done(_) => {}
        Response::Sa(info) => print_sa(out, info),
        Response::Sas(infos) => infos.iter().for_each(|i| print_sa(out, i)),
        Response::Policies(ps) => {
            for p in ps {
                statement(out, &Request::AddPolicy(p.clone()));
            }
        }
    }
}

/// A request as a setkey statement on its own line.
fn statement(out: &mut String, r: &Request) {
    out.push_str(setkey::format_request(r).trim_end());
    out.push('\n');
}

fn print_sa(out: &mut String, info: &SaInfo) {
    statement(out, &Request::AddSa(info.spec.clone()));
    let _ = writeln!(
        out,
        "#\tstate {:?}, age {} s, driver {}: {}",
        info.state,
        info.age.as_secs(),
        info.driver,
        info.stats
    );
}

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

/// The state a config file describes: its statements played, in order, on empty lists
/// (so `flush;` at the top and later `delete`s mean what they mean to setkey).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Desired {
    pub sas: Vec<SaSpec>,
    pub policies: Vec<PolicySpec>,
}

/// A list in insertion order whose entries are replaced and removed by key in O(1) (a
/// config of 10,000 SAs must not cost 10,000²): a replaced entry moves to the end, as
/// setkey's own lists would have it.
struct Ordered<K, V> {
    entries: Vec<Option<(K, V)>>,
    at: HashMap<K, usize>,
}

impl<K: std::hash::Hash + Eq + Clone, V> Ordered<K, V> {
    fn new() -> Self {
        Ordered { entries: Vec::new(), at: HashMap::new() }
    }

    fn remove(&mut self, k: &K) {
        if let Some(i) = self.at.remove(k) {
            self.entries[i] = None;
        }
    }

    fn insert(&mut self, k: K, v: V) {
        self.remove(&k);
        self.at.insert(k.clone(), self.entries.len());
        self.entries.push(Some((k, v)));
    }

    fn retain(&mut self, keep: impl Fn(&V) -> bool) {
        for e in &mut self.entries {
            if e.as_ref().is_some_and(|(k, v)| !keep(v) && self.at.remove(k).is_some()) {
                *e = None;
            }
        }
    }

    fn values(self) -> Vec<V> {
        self.entries.into_iter().flatten().map(|(_, v)| v).collect()
    }
}

impl Desired {
    pub fn of(reqs: &[Located<Request>]) -> Desired {
        let mut sas = Ordered::new();
        let mut policies = Ordered::new();
        for r in reqs {
            match &r.item {
                Request::AddSa(s) => sas.insert(id(s), s.clone()),
                Request::DeleteSa(i) => sas.remove(i),
                Request::DeleteAllSa { src, dst, proto } => {
                    sas.retain(|x: &SaSpec| !(x.src == *src && x.dst == *dst && x.proto == *proto))
                }
                Request::FlushSa(p) => sas.retain(|x: &SaSpec| p.is_some_and(|p| p != x.proto)),
                Request::AddPolicy(p) => policies.insert((p.selector, p.dir), p.clone()),
                Request::DeletePolicy { selector, dir } => policies.remove(&(*selector, *dir)),
                Request::FlushPolicies => policies = Ordered::new(),
                Request::GetSa(_) | Request::DumpSa(_) | Request::DumpPolicies => {}
            }
        }
        Desired { sas: sas.values(), policies: policies.values() }
    }
}

fn id(s: &SaSpec) -> SaId {
    SaId { src: s.src, dst: s.dst, proto: s.proto, spi: s.spi }
}

/// What a reload did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// SAs whose spec did not change: untouched.
    pub kept: usize,
    /// SAs whose keys stayed but something else changed (replay window, lifetimes, mode):
    /// replaced by a new version that goes on with the sequence number and replay window.
    pub updated: usize,
    /// SAs installed afresh (new, or with new keys).
    pub added: usize,
    /// SAs removed (gone from the file, or replaced with new keys).
    pub removed: usize,
    pub policies: usize,
}

/// Makes the databases hold what `desired` says, as one transaction: everything or, on an
/// error, nothing. An SA whose spec is unchanged is kept as it is; one whose addresses,
/// SPI and keys are unchanged goes on with its sequence number (the AEAD nonce), replay
/// window and counters whatever else changed; the rest are replaced. Policies hold no
/// state: they are replaced as a whole. An AEAD key that an SA of this process has used
/// under another SPI or addresses is refused (its nonces would start again at 1).
pub fn reload(core: &Ipsec, desired: &Desired) -> Result<Reloaded, String> {
    core.transact(|t| {
        let mut r = Reloaded::default();
        let current = t.sas();
        let want: HashMap<SaId, &SaSpec> = desired.sas.iter().map(|s| (id(s), s)).collect();
        let have: HashMap<SaId, &SaSpec> = current.iter().map(|sa| (sa.id, &sa.spec)).collect();
        for sa in &current {
            if want.get(&sa.id) != Some(&&sa.spec) {
                t.apply(&Request::DeleteSa(sa.id))
                    .map_err(|e| format!("removing the SA {}: {e}", sad::describe(&sa.id)))?;
                r.removed += 1;
            }
        }
        for s in &desired.sas {
            if have.get(&id(s)) == Some(&s) {
                r.kept += 1;
                continue;
            }
            match t.add_sa(s.clone()) {
                Ok(Installed::Continued) => {
                    r.updated += 1;
                    r.removed -= 1;
                }
                Ok(Installed::New) => r.added += 1,
                Err(e) => {
                    return Err(format!("{}: {e}", setkey::format_redacted(&Request::AddSa(s.clone()))))
                }
            }
        }
        t.apply(&Request::FlushPolicies).map_err(|e| e.to_string())?;
        for p in &desired.policies {
            t.apply(&Request::AddPolicy(p.clone()))
                .map_err(|e| format!("{}: {e}", setkey::format_redacted(&Request::AddPolicy(p.clone()))))?;
            r.policies += 1;
        }
        Ok(r)
    })
}

/// Why a reload failed: one counter each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReloadError {
    /// The file could not be read.
    Read,
    /// The file is not valid setkey (the error names line and column).
    Parse,
    /// The databases refused a statement (a clash, a key reused, a bad key length …).
    Refused,
}

impl ReloadError {
    pub const ALL: [ReloadError; 3] = [ReloadError::Read, ReloadError::Parse, ReloadError::Refused];

    pub fn name(self) -> &'static str {
        match self {
            ReloadError::Read => "read_error",
            ReloadError::Parse => "parse_error",
            ReloadError::Refused => "refused",
        }
    }
}

/// What reloads (SIGHUP) came to, for `ipsecctl stats` and the metrics: how many went
/// through, how many failed by cause, and the last one's outcome.
#[derive(Default)]
pub struct Reloads(Mutex<ReloadLog>);

#[derive(Default)]
struct ReloadLog {
    ok: u64,
    failed: [u64; ReloadError::ALL.len()],
    last: Option<(Instant, ReloadOutcome)>,
}

/// A reload's summary, or why it failed and the error.
type ReloadOutcome = Result<String, (ReloadError, String)>;

impl Reloads {
    fn record(&self, outcome: &Result<Reloaded, (ReloadError, String)>, summary: impl FnOnce() -> String) {
        let mut l = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let last = match outcome {
            Ok(_) => {
                l.ok += 1;
                Ok(summary())
            }
            Err((why, msg)) => {
                l.failed[*why as usize] += 1;
                Err((*why, msg.clone()))
            }
        };
        l.last = Some((Instant::now(), last));
    }

    /// Reloads that went through, and those that failed by cause.
    pub fn counts(&self) -> (u64, Vec<(ReloadError, u64)>) {
        let l = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (l.ok, ReloadError::ALL.iter().map(|&e| (e, l.failed[e as usize])).collect())
    }

    /// The last reload, as `ipsecctl stats` shows it.
    pub fn last(&self) -> String {
        let l = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match &l.last {
            None => "none".to_owned(),
            Some((at, Ok(s))) => format!("ok, {} s ago: {s}", at.elapsed().as_secs()),
            Some((at, Err((why, msg)))) => {
                format!(
                    "FAILED ({}), {} s ago, nothing was changed: {msg}",
                    why.name(),
                    at.elapsed().as_secs()
                )
            }
        }
    }

    /// Whether the last reload failed.
    pub fn last_failed(&self) -> bool {
        matches!(self.0.lock().unwrap_or_else(PoisonError::into_inner).last, Some((_, Err(_))))
    }
}

impl std::fmt::Display for Reloaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} SAs kept, {} added, {} removed, {} changed in place (their sequence numbers go on); {} policies",
            self.kept, self.added, self.removed, self.updated, self.policies
        )
    }
}

/// Re-reads the config file `path` and applies it ([`reload`]): all of it or, on any
/// error, nothing. The outcome is counted in `reloads`.
pub fn reload_file(core: &Ipsec, path: &std::path::Path, reloads: &Reloads) -> Result<Reloaded, String> {
    let origin = path.display().to_string();
    let outcome = std::fs::read_to_string(path)
        .map_err(|e| (ReloadError::Read, format!("{origin}: {e}")))
        .and_then(|t| parse(&origin, &t).map_err(|e| (ReloadError::Parse, e)))
        .and_then(|reqs| reload(core, &Desired::of(&reqs)).map_err(|e| (ReloadError::Refused, e)));
    reloads.record(&outcome, || {
        format!("{origin}: {}", outcome.as_ref().map(|r| r.to_string()).unwrap_or_default())
    });
    outcome.map_err(|(_, e)| e)
}

/// The warning ipsecd logs at start-up when the config gives AEAD SAs their keys: their
/// sequence numbers — the nonces — start at 1 in every process, so a key that an earlier
/// run (or another gateway) used repeats nonces. ipsecd cannot know; the operator must.
pub fn manual_aead_keys_warning(core: &Ipsec) -> Option<String> {
    let aead: Vec<_> =
        core.databases().sad.dump(None).into_iter().filter(|sa| sa.spec.enc.is_aead()).collect();
    let first = aead.first()?;
    Some(format!(
        "{} SA(s) use AES-GCM or ChaCha20-Poly1305 with keys from the configuration (first: {}): their \
         sequence numbers, which are the nonces, start again at 1 whenever ipsecd starts. If a key was used \
         before (an earlier run, a restart, another gateway), give it a new key: a nonce repeated under one \
         key gives away the authentication key and the XOR of the plaintexts",
        aead.len(),
        sad::describe(&first.id)
    ))
}

/// A route into the TUN: an outbound policy's destination, and the source address the
/// kernel should pick for it when the policy names one host of ours as the source (the
/// usual transport-mode policy, `A B any -P out ipsec esp/transport//require`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Route {
    pub dst: ipsec_core::control::Prefix,
    pub src: Option<std::net::IpAddr>,
}

/// The routes that bring the traffic of outbound policies that protect it to the TUN, one
/// per destination prefix (the first policy's source wins).
pub fn protected_routes(core: &Ipsec) -> Vec<Route> {
    let mut v: Vec<Route> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for p in core.databases().spd.dump() {
        if p.dir == Dir::Out && matches!(p.action, Action::Protect(_)) && seen.insert(p.selector.dst) {
            let host = if p.selector.src.addr.is_ipv4() { 32 } else { 128 };
            let src = (p.selector.src.len == host).then_some(p.selector.src.addr);
            v.push(Route { dst: p.selector.dst, src });
        }
    }
    v
}

/// The counters in Prometheus' text format (`--metrics ADDR`): totals by direction, every
/// drop reason (zeros too), the same per SA, and the gateway's I/O errors.
pub fn prometheus(core: &Ipsec, io: &crate::net::IoCounters, reloads: &Reloads) -> String {
    let t = core.stats();
    let mut o = String::new();
    for (name, kind, help) in [
        ("packets_total", "counter", "Packets through the ESP core, by direction."),
        ("bytes_total", "counter", "Payload bytes through the ESP core, by direction."),
        ("drops_total", "counter", "Packets dropped, by reason."),
        ("sa_packets_total", "counter", "Packets per SA, by direction."),
        ("sa_drops_total", "counter", "Packets dropped per SA, by reason."),
        ("io_errors_total", "counter", "Errors of the gateway's own I/O, by kind."),
        (
            "tun_link_scope_total",
            "counter",
            "Packets into the TUN to a link-local or multicast address (the kernel's own chatter), dropped.",
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
