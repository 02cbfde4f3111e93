//! The config file over the daemon's life: the state it describes ([`Desired`]), its
//! re-reading on SIGHUP ([`reload_file`]) — all of it or nothing, SAs whose keys stayed
//! going on with their sequence numbers — the count of reloads by outcome ([`Reloads`],
//! for `ipsecctl stats` and the metrics), and the start-up warning about AEAD keys written
//! in the file ([`manual_aead_keys_warning`]).
//!
//! ```text
//! SIGHUP ─ read ─ parse ─ Desired ─ reload: one transaction ─┬─ ok: swap, routes ─ Reloads.ok
//!            └─ read_error   └─ parse_error                  └─ refused: nothing changed
//! ```

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use ipsec_core::control::{Located, PolicySpec, Request, SaId, SaSpec};
use ipsec_core::sad::{self, Installed};
use ipsec_core::setkey;
use ipsec_core::Ipsec;
use zeroize::Zeroizing;

use crate::service::parse;

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
        self.take(k);
    }

    /// Removes the entry of `k`, and returns its value.
    fn take(&mut self, k: &K) -> Option<V> {
        let i = self.at.remove(k)?;
        self.entries[i].take().map(|(_, v)| v)
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
                // In a file, update says what the SA is, as add does.
                Request::AddSa(s) | Request::UpdateSa(s) => sas.insert(id(s), s.clone()),
                Request::DeleteSa(i) => sas.remove(i),
                // In a file, migrate moves the SA as the request would (a migrate of an SA
                // the file has not added is refused when applied, not here).
                Request::MigrateSa { id: i, to } => {
                    if let Some(mut s) = sas.take(i) {
                        (s.src, s.dst) = (to.src, to.dst);
                        if let Some(n) = &mut s.natt {
                            n.sport = to.sport.unwrap_or(n.sport);
                            n.dport = to.dport.unwrap_or(n.dport);
                        }
                        sas.insert(id(&s), s);
                    }
                }
                Request::DeleteAllSa { src, dst, proto } => {
                    sas.retain(|x: &SaSpec| !(x.src == *src && x.dst == *dst && x.proto == *proto))
                }
                Request::FlushSa(p) => sas.retain(|x: &SaSpec| p.is_some_and(|p| p != x.proto)),
                Request::AddPolicy(p) => policies.insert((p.selector, p.dir), p.clone()),
                Request::DeletePolicy { selector, dir } => policies.remove(&(*selector, *dir)),
                Request::FlushPolicies => policies = Ordered::new(),
                // getspi reserves for a key manager at run time: nothing a file keeps.
                Request::GetSa(_) | Request::DumpSa(_) | Request::DumpPolicies | Request::GetSpi { .. } => {}
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
    fn record(
        &self,
        outcome: &Result<Reloaded, (ReloadError, String)>,
        summary: impl FnOnce(&Reloaded) -> String,
    ) {
        let mut l = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let last = match outcome {
            Ok(r) => {
                l.ok += 1;
                Ok(summary(r))
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
    // The text holds keys: wiped when it goes.
    let outcome = std::fs::read_to_string(path)
        .map(Zeroizing::new)
        .map_err(|e| (ReloadError::Read, format!("{origin}: {e}")))
        .and_then(|t| parse(&origin, &t).map_err(|e| (ReloadError::Parse, e)))
        .and_then(|reqs| reload(core, &Desired::of(&reqs)).map_err(|e| (ReloadError::Refused, e)));
    reloads.record(&outcome, |r| format!("{origin}: {r}"));
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
