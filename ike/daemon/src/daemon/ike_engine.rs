//! ike-core's state machine (`ike_core::Ike`) as the loop's [`Engine`]: its outputs turned
//! into iked's (the CHILD_SA's setkey form, the relay's datagram, a log line), and the
//! bookkeeping it leaves to the daemon — reqids, what was installed, when to tick.
//!
//! ```text
//!  loop ─▶ IkeEngine ─▶ Ike::{datagram, tick, sa_event, initiate, terminate,
//!                           child_traffic, peer_moved}
//!                          │ core outputs
//!                          ▼
//!         Send(Datagram)          ─▶ Output::Send (nat_t: sent from a port other than 500)
//!         Install(ChildSaInstall) ─▶ reqid allocated ─▶ Output::Install(ChildInstall)
//!                                    │ outbound_later: Sas::Inbound now, the outbound SA held
//!                                    └ installed(Err) ─▶ Ike::terminate (a failed CHILD_SA)
//!         InstallOutbound         ─▶ the held outbound SA ─▶ Output::Install(Sas::Outbound)
//!         Remove(ChildSaRemove)   ─▶ what was installed for that SPI ─▶ Output::Remove
//!         Migrate(ChildSaMigrate) ─▶ installed, ESP-in-UDP ─▶ Output::Migrate
//!         Event(e)                ─▶ Output::Event (severity, one line); IkeSaUp ─▶ IkeKeys
//! ```
//!
//! A new CHILD_SA of a connection replaces the established IKE SAs that connection had
//! with the same peer address and identity (strongSwan's `unique = replace`, the default;
//! what INITIAL_CONTACT says, which the state machine does not act on yet): without it, a
//! peer that restarted could never come back, its new CHILD_SA's policies being the old
//! one's. A connection with `unique = never` keeps them all: `up CONN new` brings up one
//! more IKE SA each time (many tunnels from one initiator, as `bench/ike-setup` does), each
//! CHILD_SA installed under the reqid and policies of the one before (as a rekey's).
//!
//! The responder of a CHILD_SA rekey adds the new inbound SA with its response and the
//! outbound SA when the core says the old CHILD_SA goes (`ike_core::io` says why): iked
//! keeps that SA's setkey form (`held`, keys in zeroizing buffers) until then. Two requests
//! rather than one SA added at once and marked "not preferred yet": ipsecd sends on the
//! newest outbound SA, so adding it later is all it takes, and ipsecd needs nothing new.
//!
//! A removed CHILD_SA that holds its policies hands them to another CHILD_SA under its
//! reqid and selectors (`hand_over`): after crossing rekeys two new CHILD_SAs follow one
//! old one, and the Delete of the collision's loser must not take the winner's policies.
//!
//! Liveness (dpd_delay): when the core says a check is near ([`Ike::quiet`]), the loop
//! reads ipsecd's `dump` (`traffic::last_inbound`) and [`Engine::traffic`] hands each
//! inbound SA's last packet to [`Ike::child_traffic`], so that a peer whose ESP still
//! arrives is not asked. ipsecd's `peer-moved` goes to [`Ike::peer_moved`]; the core's
//! Migrate outputs become setkey `migrate` requests for the ESP-in-UDP CHILD_SAs installed.
//!
//! A connection's children share its IKE SA: the first comes up in IKE_AUTH
//! ([`Ike::initiate`]), the others, kept in `later` until the IKE SA is up, with
//! [`Ike::create_child`] (CREATE_CHILD_SA without REKEY_SA).
//!
//! A reload hands the new file to the running core ([`Ike::reconfigure`]: removed
//! connections' SAs closed, the others kept), then brings the traps in line with it
//! (`sync_traps`) and starts added connections, and changed ones left without an IKE SA.
//!
//! `start_action = trap` is iked's: the child's policies are installed alone under a
//! reqid of their own ([`Output::Trap`]); ipsecd's ACQUIRE with that reqid makes the child
//! on the connection's IKE SA if one is up ([`Ike::create_child`]), after it if one is
//! being negotiated, else starts the connection ([`Ike::initiate`]); the negotiated
//! CHILD_SA is installed under the trap's reqid without policies. At exit the traps are
//! removed.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use ike_core::config::{StartAction, TrafficSelector, TsAddr, Unique};
use ike_core::crypto::{Encr, Integ};
use ike_core::io::{self as core_io, ChildSaInstall, DownReason, Event as CoreEvent, SaEvent};
use ike_core::{Ike, Settings};
use ipsec_core::control::{Lifetime, Mode};
use ipsec_core::sad::Event as IpsecEvent;
use ipsecd::ike_relay::{Datagram, IKE_PORT};

use super::control::Request;
use super::engine::{Engine, Event, IkeKeysOut, Output, Severity};
use super::setkey::{ChildInstall, ChildMigrate, ChildRemove, NatPorts, SaKeys, Sas, Trap, MAX_REQID};
use crate::config::{Config, Diff};

/// How often the state machine's timers are looked at (its retransmissions start at 4 s).
pub const TICK: Duration = Duration::from_millis(500);

/// At most one `dump` to ipsecd this often, for liveness checks' sake.
pub const TRAFFIC_EVERY: Duration = Duration::from_secs(1);

/// The state machine for `config`: ike-core's, its crypto through an ocf framework with the
/// soft driver, with `settings` (iked's `--retransmit-*` and `--no-dos-protection` flags).
pub fn start(config: &Config, settings: Settings) -> Result<IkeEngine, String> {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).map_err(|e| format!("ocf's soft driver: {e:?}"))?;
    IkeEngine::with_settings(fw, config.clone(), settings, Instant::now())
}

/// The state machine's settings without its denial-of-service guard: no cookies however
/// many SAs are half-open (strongSwan's `dos_protection = no`; the limit on half-open SAs
/// stays). For one trusted initiator's burst, which the guard would otherwise measure.
pub fn no_dos_protection() -> Settings {
    let mut s = Settings::default();
    s.half_open.cookie_threshold = usize::MAX;
    s
}

/// The state machine and what iked keeps beside it.
pub struct IkeEngine {
    ike: Ike,
    fw: ocf::Framework,
    config: Config,
    last_tick: Instant,
    /// The time of the call being served (for what the adapter itself asks of the core).
    now: Instant,
    next_reqid: u32,
    next_install: u64,
    /// Installs asked for, by their id: the IKE SA and the removal that undoes them.
    pending: HashMap<u64, (u64, ChildRemove)>,
    /// Installed CHILD_SAs by their inbound SPI.
    installed: HashMap<u32, ChildRemove>,
    /// Outbound SAs held back (a rekey we answered) by their CHILD_SA's inbound SPI, until
    /// the core's InstallOutbound.
    held: HashMap<u32, ChildInstall>,
    /// Held outbound SAs asked for, by their install id: the IKE SA.
    pending_out: HashMap<u64, u64>,
    /// Trap policies installed (`start_action = trap`) by reqid: connection, child, policies.
    traps: HashMap<u32, (String, String, Trap)>,
    scratch: Vec<core_io::Output>,
    /// When ipsecd's `dump` last said what traffic the CHILD_SAs carried.
    last_dump: Option<Instant>,
    /// Outputs that must go before the one being translated (the removals of a replaced
    /// IKE SA's CHILD_SAs before the new install).
    early: Vec<Output>,
    /// Children to bring up on an IKE SA once it is established (CREATE_CHILD_SA without
    /// REKEY_SA): a connection's further children, and trapped ones whose traffic came
    /// while it was negotiated.
    later: HashMap<u64, Vec<String>>,
}

impl IkeEngine {
    /// The state machine for `config`, its crypto through `fw`, ike-core's default settings.
    pub fn new(fw: ocf::Framework, config: Config, now: Instant) -> Result<IkeEngine, String> {
        IkeEngine::with_settings(fw, config, Settings::default(), now)
    }

    /// The state machine for `config` with `settings` (retransmissions, half-open SAs).
    pub fn with_settings(
        fw: ocf::Framework,
        config: Config,
        settings: Settings,
        now: Instant,
    ) -> Result<IkeEngine, String> {
        let ike = Ike::new(fw.clone(), core_config(&fw, &config)?, settings, now)
            .map_err(|e| format!("starting the state machine: {e:?}"))?;
        Ok(IkeEngine {
            ike,
            fw,
            config,
            last_tick: now,
            now,
            next_reqid: 1,
            next_install: 1,
            pending: HashMap::new(),
            installed: HashMap::new(),
            held: HashMap::new(),
            pending_out: HashMap::new(),
            traps: HashMap::new(),
            scratch: Vec::new(),
            last_dump: None,
            early: Vec::new(),
            later: HashMap::new(),
        })
    }

    fn reqid(&mut self) -> u32 {
        // A reqid names the policies of one installed CHILD_SA; 1..=MAX_REQID, reused
        // after a wrap only if free.
        for _ in 0..MAX_REQID {
            let r = self.next_reqid;
            self.next_reqid = if r >= MAX_REQID { 1 } else { r + 1 };
            if !self.installed.values().any(|c| c.reqid == r)
                && !self.pending.values().any(|(_, c)| c.reqid == r)
                && !self.traps.contains_key(&r)
            {
                return r;
            }
        }
        // Every reqid in use (32,767 CHILD_SAs): setkey_text refuses 0, so the install
        // fails and says why.
        0
    }

    /// Carries the core's outputs over into the loop's.
    fn translate(&mut self, out: &mut Vec<Output>) {
        for o in std::mem::take(&mut self.scratch) {
            match o {
                core_io::Output::Send(d) => out.push(Output::Send(Datagram {
                    local: d.local,
                    remote: d.remote,
                    nat_t: d.local.port() != IKE_PORT,
                    bytes: d.bytes,
                })),
                core_io::Output::Install(c) => match self.install(&c) {
                    Ok((mut child, owns_policies)) => {
                        if c.outbound_later {
                            // The inbound SA now, the outbound one at InstallOutbound.
                            if let Ok(h) = child_install(&c, child.reqid) {
                                let h = ChildInstall { policies: false, sas: Sas::Outbound, ..h };
                                self.held.insert(c.spi_in, h);
                                child.sas = Sas::Inbound;
                            }
                        }
                        out.append(&mut self.early);
                        let id = self.next_install;
                        self.next_install += 1;
                        let mut rm = removal(&child);
                        rm.policies = owns_policies;
                        self.pending.insert(id, (c.ike_sa, rm));
                        out.push(Output::Install { id, child });
                    }
                    Err(e) => {
                        out.append(&mut self.early);
                        out.push(event(
                            Severity::Warning,
                            format!("child-sa-refused ike_sa={:016x} {e}", c.ike_sa),
                        ));
                        self.ike.terminate(self.now, c.ike_sa, &mut self.scratch);
                    }
                },
                core_io::Output::InstallOutbound { ike_sa, spi_in } => {
                    if let Some(h) = self.held.remove(&spi_in) {
                        // ipsecd carries out the requests in order: a later removal
                        // deletes the outbound SA too.
                        let record = self.installed.get_mut(&spi_in).or_else(|| {
                            self.pending.values_mut().map(|(_, c)| c).find(|c| c.inbound_spi == spi_in)
                        });
                        if let Some(c) = record {
                            c.outbound = true;
                        }
                        let id = self.next_install;
                        self.next_install += 1;
                        self.pending_out.insert(id, ike_sa);
                        out.push(Output::Install { id, child: h });
                    }
                }
                core_io::Output::Remove(r) => {
                    // An outbound SA still held back is never added.
                    self.held.remove(&r.spi_in);
                    // Installed, or asked for and not yet answered (ipsecd carries out the
                    // requests in order: the removal follows the install).
                    let pending =
                        self.pending.iter().find(|(_, (_, c))| c.inbound_spi == r.spi_in).map(|(id, _)| *id);
                    let c = self
                        .installed
                        .remove(&r.spi_in)
                        .or_else(|| pending.and_then(|id| self.pending.remove(&id)).map(|(_, c)| c));
                    if let Some(mut c) = c {
                        self.hand_over(&mut c);
                        out.push(Output::Remove(c));
                    }
                }
                core_io::Output::Migrate(m) => {
                    // Only what is installed, and only ESP-in-UDP SAs have a port to move;
                    // an outbound SA still held is added at the new port when it comes.
                    if let Some(h) = self.held.get_mut(&m.spi_in).filter(|h| h.natt.is_some()) {
                        h.natt = Some(NatPorts { local: m.local.port(), remote: m.remote.port() });
                    }
                    if let Some(c) = self.installed.get(&m.spi_in).filter(|c| c.natt) {
                        out.push(Output::Migrate(ChildMigrate {
                            local: m.local,
                            remote: m.remote,
                            inbound_spi: m.spi_in,
                            outbound_spi: m.spi_out,
                            outbound: c.outbound,
                        }));
                    }
                }
                core_io::Output::Event(e) => {
                    if let CoreEvent::IkeSaUp { ike_sa, .. } = e {
                        if let Some(k) = self.ike_keys(ike_sa) {
                            out.push(Output::IkeKeys(k));
                        }
                        // Its further children, each a CREATE_CHILD_SA (queued in turn).
                        for child in self.later.remove(&ike_sa).unwrap_or_default() {
                            self.ike.create_child(self.now, ike_sa, &child, &mut self.scratch);
                        }
                    }
                    if let CoreEvent::IkeSaDown { ike_sa, .. } = e {
                        self.later.remove(&ike_sa);
                    }
                    if let CoreEvent::IkeSaRekeyed { old, new } = e {
                        // The CHILD_SAs moved to the new IKE SA: so do the installs
                        // still waiting for ipsecd's answer (a failure terminates the
                        // IKE SA they belong to now), and the new keys go to --debug-keys.
                        for (sa, _) in self.pending.values_mut() {
                            if *sa == old {
                                *sa = new;
                            }
                        }
                        for sa in self.pending_out.values_mut().filter(|sa| **sa == old) {
                            *sa = new;
                        }
                        if let Some(k) = self.ike_keys(new) {
                            out.push(Output::IkeKeys(k));
                        }
                    }
                    out.push(self.event(&e));
                }
            }
        }
        if !self.scratch.is_empty() {
            self.translate(out);
        }
    }

    /// The core's install with its reqid, and whether removing it later removes its
    /// policies: a trapped child's reqid is its trap's, and its policies are the trap's;
    /// a rekeyed child's (the state machine installs the new CHILD_SA before it removes
    /// the old one: make-before-break) is its predecessor's, whose policies it takes over
    /// without adding them again.
    fn install(&mut self, c: &ChildSaInstall) -> Result<(ChildInstall, bool), String> {
        let conn = self.conn_name(c.ike_sa);
        if self.config.connection(&conn).is_none_or(|k| k.unique == Unique::Replace) {
            self.replace_older(&conn, c);
        }
        let trap =
            self.traps.iter().find(|(_, (tc, tch, _))| *tc == conn && *tch == c.child).map(|(r, _)| *r);
        if let Some(reqid) = trap {
            return Ok((ChildInstall { policies: false, ..child_install(c, reqid)? }, false));
        }
        let probe = child_install(c, 1)?;
        let same = |o: &ChildRemove| {
            o.local == probe.local
                && o.remote == probe.remote
                && o.mode == probe.mode
                && o.local_ts == probe.local_ts
                && o.remote_ts == probe.remote_ts
        };
        // The one that holds the policies, if any does: after crossing rekeys (RFC 7296
        // §2.8.1) two new CHILD_SAs follow one old one, and the one that loses the
        // collision is deleted; had the winner taken the old one's (given away already)
        // rather than the loser's, that Delete would take the policies with it.
        let mut olds: Vec<&mut ChildRemove> = self
            .installed
            .values_mut()
            .chain(self.pending.values_mut().map(|(_, r)| r))
            .filter(|o| same(o))
            .collect();
        let at = olds.iter().position(|o| o.policies).unwrap_or(0);
        let predecessor = (!olds.is_empty()).then(|| olds.swap_remove(at));
        match predecessor {
            Some(old) => {
                let owns = std::mem::replace(&mut old.policies, false);
                Ok((ChildInstall { policies: false, ..child_install(c, old.reqid)? }, owns))
            }
            None => Ok((child_install(c, self.reqid())?, true)),
        }
    }

    /// A new CHILD_SA of `conn` with a peer replaces the IKE SAs `conn` had with that peer
    /// before (strongSwan's `unique = replace`): the peer restarted, or lost its SAs, and
    /// negotiated again. Their CHILD_SAs are removed from ipsecd before the new one is
    /// installed, whose policies are the same. (INITIAL_CONTACT says this; the state
    /// machine sends it but does not act on it yet.)
    ///
    /// Only established IKE SAs with the same peer identity count: a half-open one may
    /// still move to another connection in its IKE_AUTH (the responder takes the first
    /// connection whose addresses fit until the identities say which).
    fn replace_older(&mut self, conn: &str, c: &ChildSaInstall) {
        let peer_id = self.ike.ike_sa(c.ike_sa).and_then(|sa| sa.peer_id.clone());
        let older: Vec<u64> = self
            .ike_sas_of(conn)
            .into_iter()
            .filter(|&s| s != c.ike_sa)
            .filter(|&s| {
                self.ike.ike_sa(s).is_some_and(|sa| {
                    sa.remote.ip() == c.remote.ip()
                        && sa.state == ike_core::ike_sa::State::Established
                        && sa.peer_id == peer_id
                })
            })
            .collect();
        for s in older {
            self.ike.terminate(self.now, s, &mut self.scratch);
        }
        // The removals go out before the install: translate handles scratch after this
        // output, so carry them over now.
        let mut removes = Vec::new();
        self.scratch.retain(|o| match o {
            core_io::Output::Remove(r) => {
                removes.push(r.clone());
                false
            }
            _ => true,
        });
        for r in removes {
            if let Some(c) = self.installed.remove(&r.spi_in) {
                self.early.push(Output::Remove(c));
            }
        }
    }

    /// Before `gone` is removed: if it holds its policies and another CHILD_SA under its
    /// reqid and selectors is installed or on its way, that one takes them, and the
    /// removal leaves them. After crossing rekeys (RFC 7296 §2.8.1) two new CHILD_SAs
    /// follow one old one and the loser of the collision is deleted: whichever was
    /// installed last holds the policies, and the winner's traffic needs them.
    fn hand_over(&mut self, gone: &mut ChildRemove) {
        if !gone.policies {
            return;
        }
        let heir = self.installed.values_mut().chain(self.pending.values_mut().map(|(_, r)| r)).find(|o| {
            o.reqid == gone.reqid
                && o.local == gone.local
                && o.remote == gone.remote
                && o.mode == gone.mode
                && o.local_ts == gone.local_ts
                && o.remote_ts == gone.remote_ts
        });
        if let Some(h) = heir {
            h.policies = true;
            gone.policies = false;
        }
    }

    /// Makes the installed traps those of the `start_action = trap` children configured
    /// now: a trap whose connection, child and policies are unchanged stays as it is; one
    /// whose policies changed is replaced under the same reqid (a CHILD_SA installed under
    /// it keeps its policies' reqid); one no longer configured is removed; a new one is
    /// installed under a new reqid.
    fn sync_traps(&mut self, out: &mut Vec<Output>) {
        let mut wanted = Vec::new();
        for c in &self.config.connections {
            let (Some(&local), Some(&remote)) = (c.local_addrs.first(), c.remote_addrs.first()) else {
                continue;
            };
            for ch in c.children.iter().filter(|ch| ch.start_action == StartAction::Trap) {
                let mode = match ch.mode {
                    ike_core::config::Mode::Tunnel => Mode::Tunnel,
                    ike_core::config::Mode::Transport => Mode::Transport,
                };
                let t = Trap {
                    reqid: 0,
                    mode,
                    local,
                    remote,
                    local_ts: ch.local_ts.clone(),
                    remote_ts: ch.remote_ts.clone(),
                };
                wanted.push((c.name.clone(), ch.name.clone(), t));
            }
        }
        let same = |a: &Trap, b: &Trap| {
            (a.mode, a.local, a.remote, &a.local_ts, &a.remote_ts)
                == (b.mode, b.local, b.remote, &b.local_ts, &b.remote_ts)
        };
        let stale: Vec<u32> = self
            .traps
            .iter()
            .filter(|(_, (conn, child, t))| {
                !wanted.iter().any(|(wc, wch, wt)| wc == conn && wch == child && same(wt, t))
            })
            .map(|(&r, _)| r)
            .collect();
        let mut freed = HashMap::new();
        for r in stale {
            let (conn, child, t) = self.traps.remove(&r).expect("listed");
            out.push(Output::Untrap(t));
            freed.insert((conn, child), r);
        }
        for (conn, child, mut t) in wanted {
            if self.traps.values().any(|(c, ch, _)| *c == conn && *ch == child) {
                continue;
            }
            t.reqid = match freed.remove(&(conn.clone(), child.clone())) {
                Some(r) => r,
                None => self.reqid(),
            };
            self.traps.insert(t.reqid, (conn, child, t.clone()));
            out.push(Output::Trap(t));
        }
    }

    /// Initiates connection `conn`'s `start_action = start` children: the first in the new
    /// IKE SA's IKE_AUTH, the others with CREATE_CHILD_SA once it is up.
    fn start_connection(&mut self, now: Instant, conn: &str, out: &mut Vec<Output>) {
        let Some(c) = self.config.connection(conn) else { return };
        let kids: Vec<String> = c
            .children
            .iter()
            .filter(|ch| ch.start_action == StartAction::Start)
            .map(|ch| ch.name.clone())
            .collect();
        if let Err(e) = self.bring_up(now, conn, kids) {
            out.push(event(Severity::Warning, format!("start {conn}: {e}")));
        }
    }

    /// A new IKE SA of `conn` with the first of `children` in IKE_AUTH, the others made
    /// once it is up. Answers the IKE SA's SPI (`None`: no children asked for).
    fn bring_up(&mut self, now: Instant, conn: &str, children: Vec<String>) -> Result<Option<u64>, String> {
        let Some(first) = children.first() else { return Ok(None) };
        let spi = self.ike.initiate(now, conn, first, &mut self.scratch).map_err(|e| format!("{e:?}"))?;
        if children.len() > 1 {
            self.later.insert(spi, children[1..].to_vec());
        }
        Ok(Some(spi))
    }

    /// The IKE SA of `conn` that is established, or failing that, one being negotiated.
    fn ike_sa_of(&self, conn: &str) -> Option<(u64, bool)> {
        let states: Vec<(u64, ike_core::ike_sa::State)> = self
            .ike_sas_of(conn)
            .into_iter()
            .filter_map(|s| self.ike.ike_sa(s).map(|sa| (s, sa.state)))
            .collect();
        use ike_core::ike_sa::State;
        states
            .iter()
            .find(|(_, st)| *st == State::Established)
            .map(|&(s, _)| (s, true))
            .or_else(|| states.iter().find(|(_, st)| *st != State::Deleting).map(|&(s, _)| (s, false)))
    }

    fn untrap_all(&mut self, out: &mut Vec<Output>) {
        for (_, (_, _, t)) in self.traps.drain() {
            out.push(Output::Untrap(t));
        }
    }

    fn ike_keys(&self, spi: u64) -> Option<IkeKeysOut> {
        let sa = self.ike.ike_sa(spi)?;
        let (suite, keys) = (sa.suite.as_ref()?, sa.keys.as_ref()?);
        Some(IkeKeysOut {
            spi_i: sa.spi_i.to_be_bytes(),
            spi_r: sa.spi_r.to_be_bytes(),
            encr: suite.encr,
            integ: suite.integ,
            sk_ei: keys.sk_ei.clone(),
            sk_er: keys.sk_er.clone(),
            sk_ai: keys.sk_ai.clone(),
            sk_ar: keys.sk_ar.clone(),
        })
    }

    fn conn_name(&self, ike_sa: u64) -> String {
        self.ike
            .ike_sa(ike_sa)
            .and_then(|sa| self.ike.connection_of(sa))
            .map_or_else(|| "?".to_owned(), |c| c.name.clone())
    }

    fn event(&self, e: &CoreEvent) -> Output {
        let (sev, line) = match e {
            CoreEvent::IkeSaUp { ike_sa, remote, initiator } => (
                Severity::Info,
                format!(
                    "ike-sa-up conn={} spi={ike_sa:016x} remote={remote} role={}",
                    self.conn_name(*ike_sa),
                    if *initiator { "initiator" } else { "responder" }
                ),
            ),
            CoreEvent::IkeSaDown { ike_sa, reason } => {
                let (sev, why) = match reason {
                    DownReason::PeerDead => (Severity::Warning, "peer-dead"),
                    DownReason::AuthFailed => (Severity::AuthFailure, "auth-failed"),
                    DownReason::NoProposal => (Severity::Warning, "no-proposal"),
                    DownReason::Refused => (Severity::Warning, "refused"),
                    DownReason::Terminated => (Severity::Info, "terminated"),
                    DownReason::DeletedByPeer => (Severity::Info, "deleted-by-peer"),
                    DownReason::HalfOpenTimeout => (Severity::Info, "half-open-timeout"),
                };
                (sev, format!("ike-sa-down spi={ike_sa:016x} reason={why}"))
            }
            CoreEvent::PeerMoved { ike_sa, from, to } => {
                (Severity::Info, format!("peer-moved spi={ike_sa:016x} from={from} to={to}"))
            }
            CoreEvent::AuthFailed { ike_sa, conn, remote, reason } => (
                Severity::AuthFailure,
                format!("peer {remote} (IKE SA {ike_sa:016x}, conn={conn}): {reason}"),
            ),
            CoreEvent::ChildSaUp { ike_sa, child, spi_in, spi_out } => (
                Severity::Info,
                format!("child-sa-up ike_sa={ike_sa:016x} child={child} spi_in={spi_in:#010x} spi_out={spi_out:#010x}"),
            ),
            CoreEvent::ChildSaFailed { ike_sa, child, notify } => (
                Severity::Warning,
                format!(
                    "child-sa-failed ike_sa={ike_sa:016x} child={child} notify={}",
                    notify.map_or_else(|| "none".to_owned(), |n| n.to_string())
                ),
            ),
            CoreEvent::NatDetected { ike_sa, local, remote } => {
                (Severity::Info, format!("nat-detected ike_sa={ike_sa:016x} local={local} remote={remote}"))
            }
            CoreEvent::IkeSaRekeyed { old, new } => (
                Severity::Info,
                format!("ike-sa-rekeyed conn={} old={old:016x} new={new:016x}", self.conn_name(*new)),
            ),
            CoreEvent::IkeSaRekeyFailed { ike_sa, notify } => (
                Severity::Warning,
                format!(
                    "ike-sa-rekey-failed ike_sa={ike_sa:016x} notify={} (retried later)",
                    notify.map_or_else(|| "none".to_owned(), |n| n.to_string())
                ),
            ),
            CoreEvent::Cookies { on } => {
                (if *on { Severity::Warning } else { Severity::Info }, format!("cookies on={on}"))
            }
        };
        event(sev, line)
    }

    /// The IKE SAs in `list`'s order (by connection, then age): `list` numbers them from 1.
    fn listed(&self) -> Vec<&ike_core::ike_sa::IkeSa> {
        let mut sas: Vec<_> = self.ike.ike_sas().collect();
        sas.sort_by_key(|sa| (sa.conn, sa.created, sa.our_spi()));
        sas
    }

    fn list(&self) -> String {
        let mut s = String::new();
        let sas = self.listed();
        for (n, sa) in sas.iter().enumerate() {
            let conn = self.ike.connection_of(sa).map_or("?", |c| c.name.as_str());
            let _ = writeln!(
                s,
                "{}: {conn} {:?} {} {}→{} SPIs {:016x}_i {:016x}_r{}",
                n + 1,
                sa.state,
                if sa.initiator { "initiator" } else { "responder" },
                sa.local,
                sa.remote,
                sa.spi_i,
                sa.spi_r,
                if sa.behind_nat() { " NAT" } else { "" }
            );
            for c in &sa.children {
                let ts = |v: &[ike_wire::ts::TrafficSelector]| {
                    v.iter().map(|t| format!("{}-{}", t.start, t.end)).collect::<Vec<_>>().join(",")
                };
                let _ = writeln!(
                    s,
                    "   {conn}/{} {:?}{} SPIs in {:#010x} out {:#010x} {} === {}",
                    c.name,
                    c.mode,
                    if c.esn { " ESN" } else { "" },
                    c.spi_in,
                    c.spi_out,
                    ts(&c.local_ts),
                    ts(&c.remote_ts)
                );
            }
        }
        if s.is_empty() {
            s.push_str("no IKE SA\n");
        }
        s
    }

    /// `list raw` (`raw_list`'s form), in `list`'s order.
    fn raw_list(&self) -> String {
        let mut sas: Vec<_> = self.ike.ike_sas().collect();
        sas.sort_by_key(|sa| (sa.conn, sa.created));
        super::raw_list::raw_list(sas.into_iter().map(|sa| {
            let c = self.ike.connection_of(sa);
            (sa, c.map_or("?", |c| c.name.as_str()), c.map_or_else(String::new, |c| c.local.id.to_string()))
        }))
    }

    fn gauges(&self) -> super::metrics::Gauges {
        super::metrics::Gauges {
            ike_sas: self.ike.ike_sas().count(),
            child_sas: self.ike.ike_sas().map(|sa| sa.children.len()).sum(),
        }
    }

    fn ike_sas_of(&self, conn: &str) -> Vec<u64> {
        self.ike
            .ike_sas()
            .filter(|sa| self.ike.connection_of(sa).is_some_and(|c| c.name == conn))
            .map(|sa| sa.our_spi())
            .collect()
    }

    /// `ipsecctl ike rekey WHAT`: an IKE SA by its number in `list`, its SPI as `list`
    /// shows it (16 hex digits, either end's) or its connection's name; a CHILD_SA by
    /// `CONN/CHILD` or its inbound SPI (`0x…`, as `list` shows it). Each is rekeyed as the
    /// timers would (make-before-break), sent now or queued behind the outstanding request.
    fn rekey(&mut self, now: Instant, what: &str) -> Result<String, String> {
        let target = self.rekey_target(what)?;
        let mut s = String::new();
        match target {
            RekeyTarget::Ike(spis) => {
                for spi in spis {
                    if self.ike.rekey_ike(now, spi, &mut self.scratch) {
                        let _ = writeln!(s, "rekeying IKE SA {spi:016x} of {}", self.conn_name(spi));
                    } else {
                        let _ = writeln!(s, "IKE SA {spi:016x}: not established, or its rekey is under way");
                    }
                }
            }
            RekeyTarget::Child(children) => {
                for (spi, name, spi_in) in children {
                    if self.ike.rekey_child(now, spi, spi_in, &mut self.scratch) {
                        let _ = writeln!(
                            s,
                            "rekeying CHILD_SA {name} (SPI in {spi_in:#010x}) of IKE SA {spi:016x}"
                        );
                    } else {
                        let _ =
                            writeln!(s, "CHILD_SA {name} (SPI in {spi_in:#010x}): its rekey is under way");
                    }
                }
            }
        }
        if s.lines().all(|l| !l.starts_with("rekeying")) {
            return Err(s);
        }
        Ok(s)
    }

    /// What `rekey WHAT` names (see [`IkeEngine::rekey`]).
    fn rekey_target(&self, what: &str) -> Result<RekeyTarget, String> {
        let sas = self.listed();
        let conn_of = |sa: &ike_core::ike_sa::IkeSa| {
            self.ike.connection_of(sa).map_or("?", |c| c.name.as_str()).to_owned()
        };
        if let Some((conn, child)) = what.split_once('/') {
            let found: Vec<(u64, String, u32)> = sas
                .iter()
                .filter(|sa| conn_of(sa) == conn)
                .flat_map(|sa| {
                    sa.children
                        .iter()
                        .filter(|c| c.name == child)
                        .map(|c| (sa.our_spi(), format!("{conn}/{child}"), c.spi_in))
                })
                .collect();
            if found.is_empty() {
                return Err(format!("no CHILD_SA {what} (ipsecctl ike list)\n"));
            }
            return Ok(RekeyTarget::Child(found));
        }
        if let Some(hex) = what.strip_prefix("0x") {
            let spi_in =
                u32::from_str_radix(hex, 16).map_err(|_| format!("{what:?} is not a CHILD_SA's SPI\n"))?;
            return sas
                .iter()
                .find_map(|sa| {
                    sa.children.iter().find(|c| c.spi_in == spi_in).map(|c| {
                        RekeyTarget::Child(vec![(
                            sa.our_spi(),
                            format!("{}/{}", conn_of(sa), c.name),
                            spi_in,
                        )])
                    })
                })
                .ok_or_else(|| format!("no CHILD_SA with inbound SPI {spi_in:#010x} (ipsecctl ike list)\n"));
        }
        if let Ok(n) = what.parse::<usize>() {
            return match n.checked_sub(1).and_then(|i| sas.get(i)) {
                Some(sa) => Ok(RekeyTarget::Ike(vec![sa.our_spi()])),
                None => Err(format!("no IKE SA number {n} (ipsecctl ike list numbers {})\n", sas.len())),
            };
        }
        if what.len() == 16 {
            if let Ok(spi) = u64::from_str_radix(what, 16) {
                if let Some(sa) = sas.iter().find(|sa| sa.spi_i == spi || sa.spi_r == spi) {
                    return Ok(RekeyTarget::Ike(vec![sa.our_spi()]));
                }
            }
        }
        let of_conn: Vec<u64> = sas.iter().filter(|sa| conn_of(sa) == what).map(|sa| sa.our_spi()).collect();
        if of_conn.is_empty() {
            return Err(format!(
                "no IKE SA or CHILD_SA {what:?}: give a number or an SPI from ipsecctl ike list, a \
                 connection, or CONN/CHILD\n"
            ));
        }
        Ok(RekeyTarget::Ike(of_conn))
    }

    /// `ipsecctl ike up CONN [--new]`: every child of the connection. With an IKE SA up,
    /// the children it lacks are made on it (CREATE_CHILD_SA); without one, or with `new`
    /// (one more IKE SA of the connection, which keeps it with `unique = never`: a
    /// benchmark's many tunnels), a new IKE SA brings up the first in IKE_AUTH and the
    /// others after.
    fn up(&mut self, now: Instant, conn: &str, new: bool) -> Result<String, String> {
        let c = self.config.connection(conn).ok_or_else(|| format!("no connection {conn:?}"))?;
        let children: Vec<String> = c.children.iter().map(|ch| ch.name.clone()).collect();
        match if new { None } else { self.ike_sa_of(conn) } {
            Some((spi, true)) => {
                let made: Vec<String> = children
                    .into_iter()
                    .filter(|ch| self.ike.create_child(now, spi, ch, &mut self.scratch))
                    .collect();
                if made.is_empty() {
                    return Err(format!(
                        "{conn} is up with all its children (ipsecctl ike list; ipsecctl ike up {conn} --new \
                         for another IKE SA)"
                    ));
                }
                Ok(format!("creating {} on IKE SA {spi:016x} of {conn}\n", made.join(", ")))
            }
            Some((spi, false)) => Err(format!(
                "{conn} is being negotiated already (IKE SA {spi:016x}; ipsecctl ike up {conn} --new for another)"
            )),
            None => {
                let spi = self
                    .bring_up(now, conn, children.clone())?
                    .ok_or_else(|| format!("{conn} has no child"))?;
                Ok(format!("initiating {conn} (children {}), IKE SA {spi:016x}\n", children.join(", ")))
            }
        }
    }
}

/// What `ipsecctl ike rekey` named: IKE SAs (our SPIs), or CHILD_SAs (their IKE SA, their
/// `CONN/CHILD` name, their inbound SPI).
enum RekeyTarget {
    Ike(Vec<u64>),
    Child(Vec<(u64, String, u32)>),
}

fn event(severity: Severity, line: String) -> Output {
    Output::Event(Event { severity, line })
}

/// iked's configuration as the state machine takes it, the certificate and key files read.
fn core_config(fw: &ocf::Framework, c: &Config) -> Result<ike_core::Config, String> {
    Ok(ike_core::Config {
        connections: c.connections.clone(),
        secrets: c.secrets.clone(),
        credentials: super::credentials::load(fw, c)?,
    })
}

fn selector(t: &ike_wire::ts::TrafficSelector) -> TrafficSelector {
    TrafficSelector {
        addr: TsAddr::Range { start: t.start, end: t.end },
        proto: t.ip_protocol,
        ports: (t.start_port, t.end_port),
    }
}

fn lifetime(d: Duration) -> Lifetime {
    Lifetime { seconds: Some(d.as_secs()).filter(|&s| s > 0), bytes: None, packets: None }
}

/// The core's install in the setkey module's terms, with its reqid.
pub fn child_install(c: &ChildSaInstall, reqid: u32) -> Result<ChildInstall, String> {
    let encr = Encr::from_id(c.encr, c.encr_bits).map_err(|e| format!("{e:?}"))?;
    let integ = Integ::from_id(c.integ).map_err(|e| format!("{e:?}"))?;
    Ok(ChildInstall {
        reqid,
        mode: match c.mode {
            ike_core::config::Mode::Tunnel => Mode::Tunnel,
            ike_core::config::Mode::Transport => Mode::Transport,
        },
        local: c.local.ip(),
        remote: c.remote.ip(),
        natt: c.udp_encap.map(|(local, remote)| NatPorts { local, remote }),
        encr,
        integ,
        esn: c.esn,
        inbound: SaKeys { spi: c.spi_in, encr: c.encr_key_in.clone(), integ: c.integ_key_in.clone() },
        outbound: SaKeys { spi: c.spi_out, encr: c.encr_key_out.clone(), integ: c.integ_key_out.clone() },
        soft: lifetime(c.soft_lifetime),
        hard: lifetime(c.hard_lifetime),
        local_ts: c.local_ts.iter().map(selector).collect(),
        remote_ts: c.remote_ts.iter().map(selector).collect(),
        policies: true,
        sas: Sas::Both,
    })
}

/// What removes `c` again.
fn removal(c: &ChildInstall) -> ChildRemove {
    ChildRemove {
        reqid: c.reqid,
        local: c.local,
        remote: c.remote,
        natt: c.natt.is_some(),
        inbound_spi: c.inbound.spi,
        outbound_spi: c.outbound.spi,
        mode: c.mode,
        local_ts: c.local_ts.clone(),
        remote_ts: c.remote_ts.clone(),
        policies: c.policies,
        outbound: c.sas != Sas::Inbound,
    }
}

impl Engine for IkeEngine {
    fn start(&mut self, now: Instant, out: &mut Vec<Output>) {
        self.now = now;
        let names: Vec<String> = self.config.connections.iter().map(|c| c.name.clone()).collect();
        for conn in names {
            self.start_connection(now, &conn, out);
        }
        self.sync_traps(out);
        self.translate(out);
    }

    fn datagram(&mut self, now: Instant, d: Datagram, out: &mut Vec<Output>) {
        self.now = now;
        let d = core_io::Datagram { local: d.local, remote: d.remote, bytes: d.bytes };
        // Certificates' validity is checked against the wall clock.
        let unix =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |t| t.as_secs());
        self.ike.set_unix_time(unix);
        self.ike.datagram(now, d, &mut self.scratch);
        self.translate(out);
    }

    fn tick(&mut self, now: Instant, out: &mut Vec<Output>) {
        self.now = now;
        self.last_tick = now;
        self.ike.tick(now, &mut self.scratch);
        self.translate(out);
    }

    fn next_deadline(&self) -> Option<Instant> {
        Some(self.last_tick + TICK)
    }

    /// A liveness check is due within two ticks, and ipsecd was not asked in the last
    /// second (a peer that sends nothing: two dumps per dpd_delay at most).
    fn wants_traffic(&self, now: Instant) -> bool {
        self.ike.quiet(now, 2 * TICK) && self.last_dump.is_none_or(|t| now.duration_since(t) >= TRAFFIC_EVERY)
    }

    fn traffic(&mut self, now: Instant, seen: &[(u32, Duration)]) {
        self.last_dump = Some(now);
        for &(spi, idle) in seen {
            if let Some(at) = now.checked_sub(idle) {
                self.ike.child_traffic(at, spi);
            }
        }
    }

    fn sa_event(&mut self, now: Instant, ev: &IpsecEvent, out: &mut Vec<Output>) {
        self.now = now;
        let e = match ev {
            IpsecEvent::Acquire(a) => {
                // A trap's traffic: its child on the connection's IKE SA if one is up
                // (CREATE_CHILD_SA), after it if one is being negotiated, else on a new
                // one. ipsecd asks again for each destination until the SA comes: what is
                // up or under way already is not asked for twice.
                if let Some((conn, child, _)) = self.traps.get(&a.reqid).cloned() {
                    let line = format!("acquire conn={conn} child={child} flow-dst={}", a.flow.dst);
                    match self.ike_sa_of(&conn) {
                        Some((spi, true)) => {
                            if self.ike.create_child(now, spi, &child, &mut self.scratch) {
                                out.push(event(Severity::Info, format!("{line} ike_sa={spi:016x}")));
                            }
                        }
                        Some((spi, false)) => {
                            let later = self.later.entry(spi).or_default();
                            if !later.contains(&child) {
                                later.push(child);
                                out.push(event(
                                    Severity::Info,
                                    format!("{line} ike_sa={spi:016x} (negotiating)"),
                                ));
                            }
                        }
                        None => {
                            out.push(event(Severity::Info, line));
                            if let Err(e) = self.ike.initiate(now, &conn, &child, &mut self.scratch) {
                                out.push(event(Severity::Warning, format!("acquire {conn}/{child}: {e:?}")));
                            }
                        }
                    }
                }
                SaEvent::Acquire { reqid: a.reqid, src: a.src, dst: a.dst }
            }
            IpsecEvent::SoftExpired { sa, .. } => SaEvent::SoftExpire { spi: sa.spi },
            IpsecEvent::HardExpired { sa, .. } => {
                // ipsecd deleted it: nothing to remove later for that direction's CHILD_SA.
                if let Some(c) = self.installed.remove(&sa.spi) {
                    out.push(event(
                        Severity::Warning,
                        format!("child-sa-expired spi_in={:#010x}", c.inbound_spi),
                    ));
                }
                SaEvent::HardExpire { spi: sa.spi }
            }
            IpsecEvent::PeerMoved { sa, to, .. } => {
                // ipsecd already sends there; the IKE SA follows, and any other CHILD_SA.
                self.ike.peer_moved(now, sa.spi, *to, &mut self.scratch);
                self.translate(out);
                return;
            }
            _ => return,
        };
        self.ike.sa_event(now, e, &mut self.scratch);
        self.translate(out);
    }

    fn installed(&mut self, now: Instant, id: u64, r: Result<(), String>, out: &mut Vec<Output>) {
        self.now = now;
        if let Some(ike_sa) = self.pending_out.remove(&id) {
            // A held outbound SA: refused, the CHILD_SA cannot send, as a failed install.
            if let Err(why) = r {
                out.push(event(
                    Severity::Warning,
                    format!("child-sa-install-failed ike_sa={ike_sa:016x} outbound {why}"),
                ));
                self.ike.terminate(self.now, ike_sa, &mut self.scratch);
                self.translate(out);
            }
            return;
        }
        let Some((ike_sa, c)) = self.pending.remove(&id) else { return };
        match r {
            Ok(()) => {
                self.installed.insert(c.inbound_spi, c);
            }
            Err(why) => {
                out.push(event(
                    Severity::Warning,
                    format!("child-sa-install-failed ike_sa={ike_sa:016x} {why}"),
                ));
                // A failed CHILD_SA: its IKE SA goes too (the peer learns of it by its
                // liveness check until INFORMATIONAL Delete exists).
                self.ike.terminate(self.now, ike_sa, &mut self.scratch);
                self.translate(out);
            }
        }
    }

    fn events_lost(&mut self, _now: Instant, lost: u64, out: &mut Vec<Output>) {
        out.push(event(Severity::Warning, format!("ipsecd-events-lost n={lost}")));
    }

    fn command(&mut self, now: Instant, req: &Request, out: &mut Vec<Output>) -> Result<String, String> {
        self.now = now;
        let r = match req {
            Request::List => Ok(self.list()),
            Request::ListRaw => Ok(self.raw_list()),
            Request::Stats => Ok(super::metrics::text(self.ike.stats(), self.gauges())),
            Request::Up { conn, new } => self.up(now, conn, *new),
            Request::Down(conn) => {
                let spis = self.ike_sas_of(conn);
                if spis.is_empty() {
                    Err(format!("no IKE SA of {conn:?}"))
                } else {
                    for s in &spis {
                        self.ike.terminate(now, *s, &mut self.scratch);
                    }
                    Ok(format!(
                        "closing {} IKE SA(s) of {conn}: their CHILD_SAs removed, a Delete sent to the peer\n",
                        spis.len()
                    ))
                }
            }
            Request::Rekey(what) => self.rekey(now, what),
            Request::Monitor => Err("monitor is served by the loop".to_owned()),
        };
        self.translate(out);
        r
    }

    fn reload(
        &mut self,
        now: Instant,
        config: Config,
        diff: &Diff,
        out: &mut Vec<Output>,
    ) -> Result<(), String> {
        self.now = now;
        // The certificate and key files first: one that cannot be read refuses the reload.
        let core = core_config(&self.fw, &config)?;
        self.ike.reconfigure(now, core, &mut self.scratch);
        self.config = config;
        self.sync_traps(out);
        // Added connections start; so does a changed one that has no IKE SA now.
        for name in diff.added.iter().chain(&diff.changed) {
            let live = self
                .ike_sas_of(name)
                .into_iter()
                .any(|s| self.ike.ike_sa(s).is_some_and(|sa| sa.state != ike_core::ike_sa::State::Deleting));
            if !live {
                self.start_connection(now, name, out);
            }
        }
        self.translate(out);
        Ok(())
    }

    fn metrics(&self) -> String {
        super::metrics::prometheus(self.ike.stats(), self.gauges())
    }

    fn shutdown(&mut self, now: Instant, out: &mut Vec<Output>) {
        self.now = now;
        let spis: Vec<u64> = self.ike.ike_sas().map(|sa| sa.our_spi()).collect();
        for s in spis {
            self.ike.terminate(self.now, s, &mut self.scratch);
        }
        self.translate(out);
        self.untrap_all(out);
    }
}
