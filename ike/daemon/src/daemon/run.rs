//! The event loop: one thread polls every descriptor and the engine's deadline, and
//! carries out what the engine asks (IKE is not a hot path, and ocf's crypto is
//! synchronous).
//!
//! ```text
//!  engine.start (the connections that start at once), then
//!  poll(relay, ipsecd monitor, iked ctl listener, SIGHUP pipe, SIGTERM pipe,
//!       ipsecd session (POLLOUT too while requests wait for room);
//!       timeout = engine.next_deadline() − now)
//!    relay readable    ─▶ recv every datagram waiting ─▶ engine.datagram
//!    session readable  ─▶ each reply, in the order of the requests ─▶ for an Install:
//!                          engine.installed, and "child-sa-installed" (or
//!                          "-install-refused") to the subscribers
//!                          └─ debug_keys.child_sa (if on); for the others: logged
//!    monitor readable  ─▶ each whole line ─▶ events::parse_line ─▶ engine.sa_event
//!                          (overflow ─▶ engine.events_lost; ipsecd gone ─▶ exit)
//!    listener readable ─▶ one request ─▶ engine.command, or a new monitor subscriber
//!    SIGHUP            ─▶ Config::load ─▶ diff ─▶ engine.reload (a bad file: logged, kept)
//!    SIGTERM/SIGINT    ─▶ engine.shutdown, outputs carried out, their replies
//!                          awaited, exit
//!    deadline passed   ─▶ engine.tick (first, if engine.wants_traffic: `dump ;` to ipsecd
//!                          ─▶ traffic::last_inbound ─▶ engine.traffic)
//!  after each: carry_out(outputs)
//!    Send     ─▶ relay.send (the relay socket full: wait RELAY_ROOM_WAIT for room, once;
//!                 still full: dropped, counted in `ipsecctl ike stats`)
//!    Install  ─▶ setkey::install_text ─▶ the session (one request; its reply later, above)
//!    Remove   ─▶ setkey::remove_text  ─▶ the session (one request)
//!    Migrate  ─▶ setkey::migrate_text ─▶ the session (one request)
//!    Trap, Untrap ─▶ setkey::trap_text, untrap_text ─▶ the session (policies alone)
//!    IkeKeys  ─▶ debug_keys.ike_sa (if on; dropped otherwise)
//!    Event    ─▶ log (auth failures as "authentication failed: …") and every subscriber
//!  each turn: the metrics endpoint's snapshot (engine.metrics), when PUBLISH_EVERY passed
//!  (with an endpoint, poll waits at most PUBLISH_EVERY)
//! ```
//!
//! Under a flood (thousands of IKE_SA_INIT requests, each answered with a COOKIE) iked
//! reads a whole burst from the relay and answers it at once, faster than ipsecd's relay
//! thread takes the answers: a send that finds the socket full waits a little for room,
//! so that answers are not thrown away after the work of computing them, while ipsecd
//! sheds the load where it costs nothing — new datagrams it cannot hand over are dropped
//! and counted there (`key_manager_full`).
//!
//! Changes go to ipsecd on one session ([`super::ipsecd_session`]) and the loop never
//! waits for their replies: it goes on with IKE work while ipsecd applies them, and each
//! reply comes back as an event. ipsecd carries out a session's requests in the order
//! sent, so a CHILD_SA's install, migration and removal stay in order; the engine holds
//! an install as pending until its reply (a removal meanwhile follows it on the wire). A
//! lost session answers its waiting installs as failed (the outcome unknown) and is
//! opened again. Only `dump` (before a liveness check) is a one-shot request that the
//! loop waits for. A
//! monitor subscriber's writes never wait: one whose socket is full (it reads too slowly)
//! or gone is dropped, and has to subscribe again. When ipsecd goes away (the relay or the
//! monitor stream closes) iked exits with an error, for its supervisor to restart it with
//! ipsecd.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use zeroize::Zeroize;

use ipsecd::ctl::{self, Wait};
use ipsecd::ike_relay::Client;

use super::control::{read_request, Request};
use super::debug_keys::DebugKeys;
use super::engine::{Engine, Output, Severity};
use super::events::{parse_line, Line};
use super::ipsecd_session::Session;
use super::metrics::{Endpoint, PUBLISH_EVERY};
use super::setkey::{install_text, migrate_text, redacted, remove_text, trap_text, untrap_text, Sas};
use super::setkey::{ChildInstall, ChildMigrate, ChildRemove};
use super::traffic::{last_inbound, DUMP};
use crate::config::Config;

/// Where everything is.
#[derive(Clone, Debug)]
pub struct Options {
    pub config: PathBuf,
    /// ipsecd's relay socket (`--ike-socket` of ipsecd).
    pub relay: PathBuf,
    /// ipsecd's control socket.
    pub ipsecd: PathBuf,
    /// iked's own control socket.
    pub control: PathBuf,
    pub debug_keys: Option<PathBuf>,
    /// Serve the counters in Prometheus' text format on this TCP address.
    pub metrics: Option<std::net::SocketAddr>,
}

/// ipsecd's event stream, read without blocking, line by line.
pub struct MonitorConn {
    conn: BufReader<UnixStream>,
    partial: String,
}

impl MonitorConn {
    /// Subscribes to ipsecd's events at `socket` (waits for its `ok`).
    pub fn connect(socket: &Path) -> Result<MonitorConn, String> {
        let mut conn = UnixStream::connect(socket)
            .map_err(|e| format!("cannot reach ipsecd at {}: {e}", socket.display()))?;
        conn.set_read_timeout(Some(ctl::IDLE)).map_err(|e| e.to_string())?;
        conn.write_all(ctl::MONITOR.as_bytes())
            .map_err(|e| format!("subscribing to ipsecd's events: {e}"))?;
        let mut conn = BufReader::new(conn);
        let mut first = String::new();
        conn.read_line(&mut first).map_err(|e| format!("ipsecd's answer to monitor: {e}"))?;
        if first != "ok\n" {
            let mut why = String::new();
            let _ = conn.read_to_string(&mut why);
            return Err(format!("ipsecd refused monitor: {}{why}", first.trim_end()));
        }
        conn.get_ref().set_nonblocking(true).map_err(|e| e.to_string())?;
        Ok(MonitorConn { conn, partial: String::new() })
    }

    /// Every whole line that has arrived; `Err` when ipsecd closed the stream.
    pub fn lines(&mut self) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        loop {
            match self.conn.read_line(&mut self.partial) {
                Ok(0) => return Err("ipsecd closed the monitor stream".to_owned()),
                Ok(_) if self.partial.ends_with('\n') => {
                    out.push(std::mem::take(&mut self.partial).trim_end().to_owned());
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(out),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading ipsecd's events: {e}")),
            }
        }
    }
}

impl AsFd for MonitorConn {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.conn.get_ref().as_fd()
    }
}

/// Binds iked's control socket at `path`, root-only (0600). A socket file left by a
/// daemon that is gone is replaced; one that answers is another iked, and refused.
pub fn bind_control(path: &Path) -> Result<UnixListener, String> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(format!("{} is served by another iked", path.display()));
        }
        std::fs::remove_file(path).map_err(|e| format!("removing the stale {}: {e}", path.display()))?;
    }
    let l = UnixListener::bind(path).map_err(|e| format!("binding {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("chmod {}: {e}", path.display()))?;
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(l)
}

/// The daemon: the engine and its descriptors.
pub struct Daemon<E: Engine> {
    pub engine: E,
    relay: Client,
    monitor: MonitorConn,
    listener: UnixListener,
    subscribers: Vec<UnixStream>,
    hup: UnixStream,
    term: UnixStream,
    opts: Options,
    config: Config,
    debug_keys: Option<DebugKeys>,
    metrics: Option<Endpoint>,
    /// The changes on their way to ipsecd, each with what its reply is for.
    session: Session<Asked>,
    out: Vec<Output>,
    /// Datagrams dropped because the relay socket stayed full.
    relay_drops: u64,
}

/// What a request on the session was for: what its reply is handed to.
enum Asked {
    /// An install: the engine hears the outcome; the CHILD_SA (its keys, for
    /// `--debug-keys`) is kept until then.
    Install {
        id: u64,
        child: Box<ChildInstall>,
    },
    Remove(ChildRemove),
    Migrate(ChildMigrate),
    Trap(u32),
    Untrap(u32),
}

/// How long a send waits for room in a full relay socket before the datagram is dropped.
const RELAY_ROOM_WAIT: Duration = Duration::from_millis(100);

/// A signal's pipe: its read end, non-blocking.
fn signal_pipe(sig: i32) -> Result<UnixStream, String> {
    let (r, w) = UnixStream::pair().map_err(|e| e.to_string())?;
    r.set_nonblocking(true).map_err(|e| e.to_string())?;
    w.set_nonblocking(true).map_err(|e| e.to_string())?;
    signal_hook::low_level::pipe::register(sig, w).map_err(|e| format!("signal {sig}: {e}"))?;
    Ok(r)
}

fn drain(s: &mut UnixStream) -> bool {
    let mut b = [0u8; 64];
    let mut any = false;
    while let Ok(n) = s.read(&mut b) {
        if n == 0 {
            break;
        }
        any = true;
    }
    any
}

impl<E: Engine> Daemon<E> {
    /// Connects to ipsecd (relay and monitor), binds the control socket, installs the
    /// signal handlers.
    pub fn new(engine: E, config: Config, opts: Options) -> Result<Daemon<E>, String> {
        let debug_keys = match &opts.debug_keys {
            Some(dir) => {
                Some(DebugKeys::open(dir).map_err(|e| format!("--debug-keys {}: {e}", dir.display()))?)
            }
            None => None,
        };
        let metrics = opts.metrics.map(Endpoint::start).transpose()?;
        let relay = Client::connect(&opts.relay)
            .map_err(|e| format!("ipsecd's IKE relay at {}: {e}", opts.relay.display()))?;
        relay.set_nonblocking(true).map_err(|e| e.to_string())?;
        let monitor = MonitorConn::connect(&opts.ipsecd)?;
        let session = Session::connect(&opts.ipsecd)?;
        let listener = bind_control(&opts.control)?;
        let hup = signal_pipe(signal_hook::consts::SIGHUP)?;
        let term = signal_pipe(signal_hook::consts::SIGTERM)?;
        signal_hook::low_level::pipe::register(
            signal_hook::consts::SIGINT,
            term.try_clone().map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
        Ok(Daemon {
            engine,
            relay,
            monitor,
            listener,
            subscribers: Vec::new(),
            hup,
            term,
            opts,
            config,
            debug_keys,
            metrics,
            session,
            out: Vec::new(),
            relay_drops: 0,
        })
    }

    /// Runs until SIGTERM (Ok) or until ipsecd goes away (Err).
    pub fn run(&mut self) -> Result<(), String> {
        self.engine.start(Instant::now(), &mut self.out);
        self.carry_out();
        loop {
            let now = Instant::now();
            if let Some(m) = self.metrics.as_mut().filter(|m| m.due(now)) {
                m.publish(now, self.engine.metrics());
            }
            // With a metrics endpoint, the loop turns at least every PUBLISH_EVERY.
            let deadline = match (self.engine.next_deadline(), &self.metrics) {
                (d, None) => d,
                (None, Some(_)) => Some(now + PUBLISH_EVERY),
                (Some(d), Some(_)) => Some(d.min(now + PUBLISH_EVERY)),
            };
            let timeout = match deadline {
                Some(_) if self.engine.next_deadline().is_some_and(|d| d <= now) => {
                    if self.engine.wants_traffic(now) {
                        let seen = self.last_inbound();
                        self.engine.traffic(now, &seen);
                    }
                    self.engine.tick(now, &mut self.out);
                    self.carry_out();
                    continue;
                }
                Some(d) => PollTimeout::try_from((d - now).as_millis().saturating_add(1).min(60_000) as u32)
                    .unwrap_or(PollTimeout::MAX),
                None => PollTimeout::NONE,
            };
            // Replies already in hand (a lost session's) are handed on without waiting.
            let timeout = if self.session.has_ready() { PollTimeout::ZERO } else { timeout };
            let ready = {
                let mut fds = [
                    PollFd::new(self.relay.as_fd(), PollFlags::POLLIN),
                    PollFd::new(self.monitor.as_fd(), PollFlags::POLLIN),
                    PollFd::new(self.listener.as_fd(), PollFlags::POLLIN),
                    PollFd::new(self.hup.as_fd(), PollFlags::POLLIN),
                    PollFd::new(self.term.as_fd(), PollFlags::POLLIN),
                    PollFd::new(
                        self.session.as_fd(),
                        if self.session.wants_write() {
                            PollFlags::POLLIN | PollFlags::POLLOUT
                        } else {
                            PollFlags::POLLIN
                        },
                    ),
                ];
                match poll(&mut fds, timeout) {
                    Ok(_) => {}
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => return Err(format!("poll: {e}")),
                }
                fds.map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            };
            let now = Instant::now();
            if ready[4] && drain(&mut self.term) {
                tracing::info!("stopping: deleting every SA");
                self.engine.shutdown(now, &mut self.out);
                self.carry_out();
                // The removals' replies, and whatever hearing them asks for, until none
                // waits (or ipsecd stops answering).
                while self.session.waiting() > 0 {
                    for (asked, reply) in self.session.finish(ctl::IDLE) {
                        self.replied(asked, reply);
                    }
                    self.carry_out();
                }
                return Ok(());
            }
            if ready[3] && drain(&mut self.hup) {
                self.reload(now);
            }
            if ready[0] {
                self.datagrams(now)?;
            }
            if ready[1] {
                self.ipsecd_events(now)?;
            }
            if ready[2] {
                self.control(now);
            }
            if ready[5] {
                self.session.flush();
            }
            // Also when not readable: a session lost while sending has answered its
            // waiting requests already.
            self.replies();
            self.carry_out();
        }
    }

    fn datagrams(&mut self, now: Instant) -> Result<(), String> {
        loop {
            match self.relay.recv() {
                Ok(d) => self.engine.datagram(now, d, &mut self.out),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::InvalidData => tracing::warn!("relay: {e}"),
                Err(e) => return Err(format!("ipsecd's IKE relay: {e}")),
            }
        }
    }

    fn ipsecd_events(&mut self, now: Instant) -> Result<(), String> {
        for l in self.monitor.lines()? {
            match parse_line(&l) {
                Ok(Line::Event(ev)) => self.engine.sa_event(now, &ev, &mut self.out),
                Ok(Line::Overflow(n)) => {
                    tracing::warn!("ipsecd's monitor lost {n} events for iked");
                    self.engine.events_lost(now, n, &mut self.out);
                }
                Ok(Line::Other(_)) => {}
                Err(e) => tracing::warn!("ipsecd monitor line {l:?}: {e}"),
            }
        }
        Ok(())
    }

    fn reload(&mut self, now: Instant) {
        match Config::load(&self.opts.config) {
            Ok(new) => {
                let diff = Config::diff(&self.config, &new);
                if let Err(e) = self.engine.reload(now, new.clone(), &diff, &mut self.out) {
                    tracing::error!("reload refused, the running configuration stays: {e}");
                    return;
                }
                tracing::info!(
                    "reloaded {}: added {:?}, removed {:?}, changed {:?}, {} unchanged{}",
                    self.opts.config.display(),
                    diff.added,
                    diff.removed,
                    diff.changed,
                    diff.unchanged.len(),
                    if diff.secrets_changed { ", secrets changed" } else { "" }
                );
                self.config = new;
            }
            Err(e) => tracing::error!("reload refused, the running configuration stays: {e}"),
        }
    }

    fn control(&mut self, now: Instant) {
        loop {
            let mut conn = match self.listener.accept() {
                Ok((c, _)) => c,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => {
                    tracing::warn!("control socket: {e}");
                    return;
                }
            };
            let reply = match read_request(&mut conn) {
                Ok(Request::Monitor) => {
                    if conn.write_all(b"ok\n").is_ok() && conn.set_nonblocking(true).is_ok() {
                        self.subscribers.push(conn);
                    }
                    continue;
                }
                Ok(Request::Stats) => self
                    .engine
                    .command(now, &Request::Stats, &mut self.out)
                    .map(|s| format!("{s}relay: datagrams dropped (socket full) {}\n", self.relay_drops)),
                Ok(req) => self.engine.command(now, &req, &mut self.out),
                Err(e) => Err(e),
            };
            let _ = conn.set_write_timeout(Some(ctl::DEADLINE));
            let _ = conn.write_all(&ctl::encode_reply(&reply));
        }
    }

    /// Hands a datagram to ipsecd's relay; a full socket gets RELAY_ROOM_WAIT to make room
    /// (module doc). A drop is logged the first time and every 1000th after.
    fn send(&mut self, d: &ipsecd::ike_relay::Datagram) {
        let mut r = self.relay.send(d);
        if matches!(&r, Err(e) if e.kind() == ErrorKind::WouldBlock) {
            let wait = PollTimeout::try_from(RELAY_ROOM_WAIT.as_millis() as u32).unwrap_or(PollTimeout::MAX);
            let _ = poll(&mut [PollFd::new(self.relay.as_fd(), PollFlags::POLLOUT)], wait);
            r = self.relay.send(d);
        }
        if let Err(e) = r {
            self.relay_drops += 1;
            if self.relay_drops % 1000 == 1 {
                tracing::warn!("sending to {}: {e} ({} dropped so far)", d.remote, self.relay_drops);
            }
        }
    }

    /// Carries out every output, including those the engine adds while hearing how its
    /// installs went.
    fn carry_out(&mut self) {
        while !self.out.is_empty() {
            for o in std::mem::take(&mut self.out) {
                match o {
                    Output::Send(d) => self.send(&d),
                    Output::Install { id, child } => match install_text(&child) {
                        Ok(mut text) => {
                            // Out of its wrapper, the text is wiped in `ask`.
                            let req = ctl::Request::Setkey(std::mem::take(&mut *text));
                            self.ask(req, Asked::Install { id, child: Box::new(child) });
                        }
                        Err(e) => {
                            self.replied(Asked::Install { id, child: Box::new(child) }, Err(e.to_string()))
                        }
                    },
                    Output::Remove(c) => match remove_text(&c) {
                        Ok(t) => self.ask(ctl::Request::Setkey(t), Asked::Remove(c)),
                        Err(e) => self.replied(Asked::Remove(c), Err(e.to_string())),
                    },
                    Output::Migrate(m) => self.ask(ctl::Request::Setkey(migrate_text(&m)), Asked::Migrate(m)),
                    Output::Trap(t) => match trap_text(&t) {
                        Ok(x) => self.ask(ctl::Request::Setkey(x), Asked::Trap(t.reqid)),
                        Err(e) => self.replied(Asked::Trap(t.reqid), Err(e.to_string())),
                    },
                    Output::Untrap(t) => match untrap_text(&t) {
                        Ok(x) => self.ask(ctl::Request::Setkey(x), Asked::Untrap(t.reqid)),
                        Err(e) => self.replied(Asked::Untrap(t.reqid), Err(e.to_string())),
                    },
                    Output::IkeKeys(k) => {
                        if let Some(d) = &self.debug_keys {
                            d.ike_sa(&k.borrow());
                        }
                    }
                    Output::Event(ev) => {
                        match ev.severity {
                            Severity::Info => tracing::info!("{}", ev.line),
                            Severity::AuthFailure => tracing::warn!("authentication failed: {}", ev.line),
                            Severity::Warning => tracing::warn!("{}", ev.line),
                        }
                        self.publish(&ev.line);
                    }
                }
            }
        }
    }

    /// Sends a change to ipsecd on the session; its reply comes to [`Daemon::replied`].
    /// The request's text (an install's holds keys) is wiped once framed.
    fn ask(&mut self, req: ctl::Request, asked: Asked) {
        let bytes = req.encode();
        if let ctl::Request::Setkey(mut body) = req {
            body.zeroize();
        }
        self.session.send(bytes, asked);
    }

    /// Every reply that has come on the session, handed on.
    fn replies(&mut self) {
        for (asked, reply) in self.session.receive() {
            self.replied(asked, reply);
        }
    }

    /// What ipsecd answered (or why the request never reached it), for what it was asked.
    fn replied(&mut self, asked: Asked, reply: ctl::Reply) {
        // What ipsecd printed is not needed (and a reply may hold keys): wiped.
        let reply = reply.map(|mut text| text.zeroize());
        match asked {
            Asked::Install { id, child } => {
                match &reply {
                    Ok(()) => tracing::info!("installed CHILD_SA {}", redacted(&child)),
                    Err(e) => tracing::warn!("ipsecd refused CHILD_SA {}: {e}", redacted(&child)),
                }
                // The loop's own event: the CHILD_SA is in ipsecd (or not).
                self.publish(&match &reply {
                    Ok(()) => format!("child-sa-installed reqid={} {}", child.reqid, spis(&child)),
                    Err(_) => format!("child-sa-install-refused reqid={} {}", child.reqid, spis(&child)),
                });
                // A held outbound SA's keys went out with its inbound SA's.
                if reply.is_ok() && child.sas != Sas::Outbound {
                    if let Some(k) = &self.debug_keys {
                        k.child_sa(&child);
                    }
                }
                self.engine.installed(Instant::now(), id, reply, &mut self.out);
            }
            Asked::Remove(c) => {
                if let Err(e) = &reply {
                    tracing::warn!("removing CHILD_SA {}→{}: {e}", c.local, c.remote);
                }
            }
            Asked::Migrate(m) => {
                if let Err(e) = &reply {
                    tracing::warn!("migrating CHILD_SA {:#x} to {}: {e}", m.inbound_spi, m.remote);
                }
            }
            Asked::Trap(reqid) => match &reply {
                Ok(()) => tracing::info!("trap policies installed for reqid {reqid}"),
                Err(e) => tracing::warn!("trap policies for reqid {reqid}: {e}"),
            },
            Asked::Untrap(reqid) => {
                if let Err(e) = &reply {
                    tracing::warn!("removing the trap policies of reqid {reqid}: {e}");
                }
            }
        }
    }

    /// When each inbound SA last carried traffic (ipsecd's `dump`, its `last-used`
    /// lines); empty if ipsecd did not answer.
    fn last_inbound(&self) -> Vec<(u32, std::time::Duration)> {
        match ctl::call(&self.opts.ipsecd, &ctl::Request::Setkey(DUMP.into()), Wait::default()) {
            Ok(Ok(text)) => {
                let (seen, errors) = last_inbound(&text);
                for e in errors {
                    tracing::warn!("ipsecd's dump: {e}");
                }
                seen
            }
            Ok(Err(e)) => {
                tracing::warn!("ipsecd's dump: {e}");
                Vec::new()
            }
            Err(e) => {
                tracing::warn!("ipsecd's dump: {e}");
                Vec::new()
            }
        }
    }

    fn publish(&mut self, line: &str) {
        let mut l = String::with_capacity(line.len() + 1);
        l.push_str(line);
        l.push('\n');
        // A subscriber that is gone, or whose socket is full, is dropped.
        self.subscribers.retain_mut(|s| s.write_all(l.as_bytes()).is_ok());
    }
}

/// A CHILD_SA's SPIs, for an event line.
fn spis(c: &super::setkey::ChildInstall) -> String {
    format!("spi_in={:#010x} spi_out={:#010x}", c.inbound.spi, c.outbound.spi)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second iked is refused while the first serves the socket; a socket file left by
    /// one that is gone is replaced; the socket is root's.
    #[test]
    fn the_control_socket_is_bound_once() {
        let dir = std::env::temp_dir().join(format!("iked-bind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("iked.sock");
        let first = bind_control(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(bind_control(&path).unwrap_err(), format!("{} is served by another iked", path.display()));
        drop(first);
        assert!(path.exists(), "the file stays behind");
        bind_control(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
