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
//!                                    └ installed(Err) ─▶ Ike::terminate (a failed CHILD_SA)
//!         Remove(ChildSaRemove)   ─▶ what was installed for that SPI ─▶ Output::Remove
//!         Migrate(ChildSaMigrate) ─▶ installed, ESP-in-UDP ─▶ Output::Migrate
//!         Event(e)                ─▶ Output::Event (severity, one line); IkeSaUp ─▶ IkeKeys
//! ```
//!
//! A new CHILD_SA of a connection replaces the IKE SAs that connection had with the same
//! peer (strongSwan's `unique = replace`; what INITIAL_CONTACT says, which the state
//! machine does not act on yet): without it, a peer that restarted could never come back,
//! its new CHILD_SA's policies being the old one's.
//!
//! Liveness (dpd_delay): when the core says a check is near ([`Ike::quiet`]), the loop
//! reads ipsecd's `dump` (`traffic::last_inbound`) and [`Engine::traffic`] hands each
//! inbound SA's last packet to [`Ike::child_traffic`], so that a peer whose ESP still
//! arrives is not asked. ipsecd's `peer-moved` goes to [`Ike::peer_moved`]; the core's
//! Migrate outputs become setkey `migrate` requests for the ESP-in-UDP CHILD_SAs installed.
//!
//! What the state machine does not do yet, and so neither does iked (each says so where
//! asked): more than one CHILD_SA per IKE SA (`up` brings up the connection's first
//! child), and taking a new configuration while IKE SAs are up (a reload applies when
//! none is left).
//!
//! `start_action = trap` is iked's: the child's policies are installed alone under a
//! reqid of their own ([`Output::Trap`]); ipsecd's ACQUIRE with that reqid starts the
//! connection (the core's `sa_event` does not act on it yet), and the negotiated CHILD_SA
//! is installed under the trap's reqid without policies. At exit the traps are removed.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use ike_core::config::{StartAction, TrafficSelector, TsAddr};
use ike_core::crypto::{Encr, Integ};
use ike_core::io::{self as core_io, ChildSaInstall, DownReason, Event as CoreEvent, SaEvent};
use ike_core::stats::Drop;
use ike_core::{Ike, Settings};
use ipsec_core::control::{Lifetime, Mode};
use ipsec_core::sad::Event as IpsecEvent;
use ipsecd::ike_relay::{Datagram, IKE_PORT};

use super::control::Request;
use super::engine::{Engine, Event, IkeKeysOut, Output, Severity};
use super::setkey::{ChildInstall, ChildMigrate, ChildRemove, NatPorts, SaKeys, Trap, MAX_REQID};
use crate::config::{Config, Diff};

/// How often the state machine's timers are looked at (its retransmissions start at 4 s).
pub const TICK: Duration = Duration::from_millis(500);

/// At most one `dump` to ipsecd this often, for liveness checks' sake.
pub const TRAFFIC_EVERY: Duration = Duration::from_secs(1);

/// The state machine for `config`: ike-core's, its crypto through an ocf framework with the
/// soft driver.
pub fn start(config: &Config) -> Result<IkeEngine, String> {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).map_err(|e| format!("ocf's soft driver: {e:?}"))?;
    IkeEngine::new(fw, config.clone(), Instant::now())
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
    /// Trap policies installed (`start_action = trap`) by reqid: connection, child, policies.
    traps: HashMap<u32, (String, String, Trap)>,
    scratch: Vec<core_io::Output>,
    /// When ipsecd's `dump` last said what traffic the CHILD_SAs carried.
    last_dump: Option<Instant>,
    /// Outputs that must go before the one being translated (the removals of a replaced
    /// IKE SA's CHILD_SAs before the new install).
    early: Vec<Output>,
}

impl IkeEngine {
    /// The state machine for `config`, its crypto through `fw`.
    pub fn new(fw: ocf::Framework, config: Config, now: Instant) -> Result<IkeEngine, String> {
        let ike = Ike::new(fw.clone(), core_config(&fw, &config)?, Settings::default(), now)
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
            traps: HashMap::new(),
            scratch: Vec::new(),
            last_dump: None,
            early: Vec::new(),
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
                    Ok((child, owns_policies)) => {
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
                core_io::Output::Remove(r) => {
                    if let Some(c) = self.installed.remove(&r.spi_in) {
                        out.push(Output::Remove(c));
                    }
                }
                core_io::Output::Migrate(m) => {
                    // Only what is installed, and only ESP-in-UDP SAs have a port to move.
                    if self.installed.get(&m.spi_in).is_some_and(|c| c.natt) {
                        out.push(Output::Migrate(ChildMigrate {
                            local: m.local,
                            remote: m.remote,
                            inbound_spi: m.spi_in,
                            outbound_spi: m.spi_out,
                        }));
                    }
                }
                core_io::Output::Event(e) => {
                    if let CoreEvent::IkeSaUp { ike_sa, .. } = e {
                        if let Some(k) = self.ike_keys(ike_sa) {
                            out.push(Output::IkeKeys(k));
                        }
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
        self.replace_older(&conn, c);
        let trap =
            self.traps.iter().find(|(_, (tc, tch, _))| *tc == conn && *tch == c.child).map(|(r, _)| *r);
        if let Some(reqid) = trap {
            return Ok((ChildInstall { policies: false, ..child_install(c, reqid)? }, false));
        }
        let probe = child_install(c, 1)?;
        let predecessor =
            self.installed.values_mut().chain(self.pending.values_mut().map(|(_, r)| r)).find(|o| {
                o.local == probe.local
                    && o.remote == probe.remote
                    && o.mode == probe.mode
                    && o.local_ts == probe.local_ts
                    && o.remote_ts == probe.remote_ts
            });
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
    fn replace_older(&mut self, conn: &str, c: &ChildSaInstall) {
        let older: Vec<u64> = self
            .ike_sas_of(conn)
            .into_iter()
            .filter(|&s| s != c.ike_sa)
            .filter(|&s| self.ike.ike_sa(s).is_some_and(|sa| sa.remote.ip() == c.remote.ip()))
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

    /// Installs the trap policies of every `start_action = trap` child.
    fn trap_all(&mut self, out: &mut Vec<Output>) {
        let mut traps = Vec::new();
        for c in &self.config.connections {
            let (Some(&local), Some(&remote)) = (c.local_addrs.first(), c.remote_addrs.first()) else {
                continue;
            };
            for ch in c.children.iter().filter(|ch| ch.start_action == StartAction::Trap) {
                traps.push((
                    c.name.clone(),
                    ch.name.clone(),
                    local,
                    remote,
                    ch.mode,
                    ch.local_ts.clone(),
                    ch.remote_ts.clone(),
                ));
            }
        }
        for (conn, child, local, remote, mode, local_ts, remote_ts) in traps {
            let reqid = self.reqid();
            let mode = match mode {
                ike_core::config::Mode::Tunnel => Mode::Tunnel,
                ike_core::config::Mode::Transport => Mode::Transport,
            };
            let t = Trap { reqid, mode, local, remote, local_ts, remote_ts };
            self.traps.insert(reqid, (conn, child, t.clone()));
            out.push(Output::Trap(t));
        }
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
            .and_then(|sa| self.config.connections.get(sa.conn))
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
            CoreEvent::AuthFailed { ike_sa, remote, reason } => (
                Severity::AuthFailure,
                format!(
                    "peer {remote} (IKE SA {ike_sa:016x}, conn={}): {reason}",
                    self.conn_name(*ike_sa)
                ),
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

    fn list(&self) -> String {
        let mut s = String::new();
        let mut sas: Vec<_> = self.ike.ike_sas().collect();
        sas.sort_by_key(|sa| (sa.conn, sa.created));
        for (n, sa) in sas.iter().enumerate() {
            let conn = self.config.connections.get(sa.conn).map_or("?", |c| c.name.as_str());
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

    fn stats(&self) -> String {
        let st = self.ike.stats();
        let mut s = String::new();
        for (name, e) in [
            ("IKE_SA_INIT", &st.sa_init),
            ("IKE_AUTH", &st.auth),
            ("CREATE_CHILD_SA", &st.create_child_sa),
            ("INFORMATIONAL", &st.informational),
            ("other", &st.other),
        ] {
            let _ = writeln!(
                s,
                "{name}: requests sent {}, received {}; responses sent {}, received {}; errors {}",
                e.requests_sent, e.requests_received, e.responses_sent, e.responses_received, e.errors
            );
        }
        let _ = writeln!(
            s,
            "half-open {}, cookies sent {}, accepted {}, retransmissions {}, responses resent {}, \
             liveness checks {}, peer moves {}, \
             authentication failures {}, untrusted certificates {}, IKE SAs up {}, down {}, \
             CHILD_SAs installed {}",
            st.half_open,
            st.cookies_sent,
            st.cookies_accepted,
            st.retransmissions,
            st.responses_resent,
            st.liveness_checks,
            st.peer_moves,
            st.auth_failures,
            st.untrusted_certs,
            st.ike_sas_up,
            st.ike_sas_down,
            st.child_sas_installed
        );
        s.push_str("dropped:");
        for (i, d) in Drop::ALL.iter().enumerate() {
            let _ = write!(s, "{} {} {}", if i == 0 { "" } else { "," }, d.name(), st.drops(*d));
        }
        s.push('\n');
        s
    }

    fn ike_sas_of(&self, conn: &str) -> Vec<u64> {
        let Some(idx) = self.config.connections.iter().position(|c| c.name == conn) else {
            return Vec::new();
        };
        self.ike.ike_sas().filter(|sa| sa.conn == idx).map(|sa| sa.our_spi()).collect()
    }

    fn up(&mut self, now: Instant, conn: &str) -> Result<String, String> {
        let c = self.config.connection(conn).ok_or_else(|| format!("no connection {conn:?}"))?;
        let live = self
            .ike_sas_of(conn)
            .into_iter()
            .filter(|&s| self.ike.ike_sa(s).is_some_and(|sa| sa.state != ike_core::ike_sa::State::Deleting))
            .count();
        if live > 0 {
            return Err(format!("{conn} has an IKE SA already (ipsecctl ike list)"));
        }
        let child =
            c.children.first().ok_or_else(|| format!("connection {conn:?} has no child"))?.name.clone();
        let spi =
            self.ike.initiate(now, conn, &child, &mut self.scratch).map_err(|e| format!("{conn}: {e:?}"))?;
        Ok(format!("initiating {conn} (child {child}), IKE SA {spi:016x}\n"))
    }
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
    }
}

impl Engine for IkeEngine {
    fn start(&mut self, now: Instant, out: &mut Vec<Output>) {
        self.now = now;
        let starts: Vec<(String, Vec<String>)> = self
            .config
            .connections
            .iter()
            .map(|c| {
                let kids = c.children.iter().filter(|ch| ch.start_action == StartAction::Start);
                (c.name.clone(), kids.map(|ch| ch.name.clone()).collect())
            })
            .filter(|(_, kids): &(String, Vec<String>)| !kids.is_empty())
            .collect();
        for (conn, kids) in starts {
            match self.ike.initiate(now, &conn, &kids[0], &mut self.scratch) {
                Ok(_) => {}
                Err(e) => out.push(event(Severity::Warning, format!("start {conn}: {e:?}"))),
            }
            for k in &kids[1..] {
                out.push(event(
                    Severity::Warning,
                    format!("start {conn}/{k}: a second CHILD_SA on one IKE SA (CREATE_CHILD_SA without REKEY_SA) is not in the state machine yet"),
                ));
            }
        }
        self.trap_all(out);
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
                // A trap's traffic: negotiate its child, unless its connection has an IKE
                // SA already (ipsecd asks again for each destination until the SA comes).
                if let Some((conn, child, _)) = self.traps.get(&a.reqid).cloned() {
                    if self.ike_sas_of(&conn).is_empty() {
                        out.push(event(
                            Severity::Info,
                            format!("acquire conn={conn} child={child} flow-dst={}", a.flow.dst),
                        ));
                        if let Err(e) = self.ike.initiate(now, &conn, &child, &mut self.scratch) {
                            out.push(event(Severity::Warning, format!("acquire {conn}/{child}: {e:?}")));
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
            Request::Stats => Ok(self.stats()),
            Request::Up(conn) => self.up(now, conn),
            Request::Down(conn) => {
                let spis = self.ike_sas_of(conn);
                if spis.is_empty() {
                    Err(format!("no IKE SA of {conn:?}"))
                } else {
                    for s in &spis {
                        self.ike.terminate(now, *s, &mut self.scratch);
                    }
                    Ok(format!(
                        "closed {} IKE SA(s) of {conn} (no Delete sent to the peer yet)\n",
                        spis.len()
                    ))
                }
            }
            Request::Rekey(_) => {
                Err("rekeying on demand is not wired to iked's control socket yet: the core rekeys a \
                     CHILD_SA on its soft expiry and the IKE SA at its rekey time"
                    .to_owned())
            }
            Request::Monitor => Err("monitor is served by the loop".to_owned()),
        };
        self.translate(out);
        r
    }

    fn reload(&mut self, now: Instant, config: Config, diff: &Diff, out: &mut Vec<Output>) {
        self.now = now;
        for name in diff.removed.iter().chain(&diff.changed) {
            for s in self.ike_sas_of(name) {
                self.ike.terminate(self.now, s, &mut self.scratch);
            }
        }
        self.translate(out);
        // IKE SAs whose Delete is out count as gone: a new state machine drops the answer.
        if self.ike.ike_sas().all(|sa| sa.state == ike_core::ike_sa::State::Deleting) {
            let made = core_config(&self.fw, &config).and_then(|c| {
                Ike::new(self.fw.clone(), c, Settings::default(), now).map_err(|e| format!("{e:?}"))
            });
            match made {
                Ok(ike) => {
                    self.untrap_all(out);
                    self.ike = ike;
                    self.config = config;
                    self.start(now, out);
                }
                Err(e) => out.push(event(Severity::Warning, format!("reload: {e}"))),
            }
        } else if !(diff.added.is_empty() && diff.changed.is_empty() && !diff.secrets_changed) {
            out.push(event(
                Severity::Warning,
                "reload: the state machine cannot take a new configuration while IKE SAs are up yet; \
                 added and changed connections and new secrets apply once none is left"
                    .to_owned(),
            ));
        }
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
