//! `ipsecd` itself: start-up (config, TUN, sockets, control and IKE relay sockets), the
//! threads, routes, signals (SIGTERM stops cleanly, SIGHUP re-reads the config), and the
//! tick that applies SA lifetimes and sends NAT-keepalives when due (every 200 ms, with
//! the signal check).

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ipsec_core::changes::Change;
use ipsec_core::{DefaultPolicy, Ipsec};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use tun_rs::{DeviceBuilder, SyncDevice};
use zeroize::Zeroizing;

use crate::config;
use crate::crypto;
use crate::ctl::Reply;
use crate::ctl_server::{self, Handler, Server};
use crate::icmp;
use crate::ike_relay::Relay;
use crate::keepalive::Keepalives;
use crate::lint;
use crate::lint_index::ChangeLint;
use crate::metrics;
use crate::monitor::Hub;
use crate::net::{self, Family, IoCounters, NetSink};
use crate::routing::Routing;
use crate::serve::{self, Counters, Refused};
use crate::service::{self, Keys};

/// The TUN's MTU unless `--mtu` says otherwise: the longest packet that every transform
/// carries in an ESP packet within Ethernet's 1500 bytes, over IPv6 and ESP in UDP too
/// (1390; see [`ipsec_core::esp::max_inner_len`]). It was 1400, which left AES-CBC with
/// HMAC-SHA2-384 or -512 over IPv6 in UDP 4 or 12 bytes short: their full-size packets
/// could not be sent.
pub const DEFAULT_MTU: u16 = ipsec_core::esp::max_inner_len(1500) as u16;

/// How ipsecd is started.
#[derive(Clone, Debug)]
pub struct Options {
    /// The setkey-syntax configuration file (`-f`).
    pub config: Option<PathBuf>,
    /// The TUN device's name.
    pub tun: String,
    /// The TUN device's MTU (default [`DEFAULT_MTU`]).
    pub mtu: u16,
    /// The control socket's path.
    pub socket: PathBuf,
    /// The local UDP port of ESP in UDP.
    pub udp_port: u16,
    /// The IKE relay's socket, for a key manager ([`crate::ike_relay`]).
    pub ike_socket: PathBuf,
    /// The local UDP port of IKE (500), relayed to the key manager; 0 for none (IKE on the
    /// NAT-T port is relayed still).
    pub ike_port: u16,
    /// Install routes into the TUN for the outbound policies' destinations, in `table`,
    /// and the rules that keep ipsecd's own traffic out of it (see [`crate::routing`]).
    pub routes: bool,
    /// The routing table of those routes.
    pub table: u32,
    /// The mark (SO_MARK) on the sockets ipsecd sends through; 0 for none.
    pub fwmark: u32,
    /// Serve the counters in Prometheus' text format on this TCP address.
    pub metrics: Option<std::net::SocketAddr>,
    /// Drivers registered beside `soft` (`sim:<profile>`; see [`crate::crypto`]).
    pub drivers: Vec<String>,
    /// ocf's routing policy.
    pub policy: ocf::Policy,
    /// Send a NAT-keepalive to each ESP-in-UDP peer that was sent nothing for this long
    /// (RFC 3948 §4); zero for none ([`crate::keepalive`]).
    pub nat_keepalive: Duration,
    /// How raw ESP leaves: a packet socket where it can, or always the raw IP socket.
    pub esp_out: crate::afpacket::EspOut,
    /// Workers: TUN queues and UDP sockets per family, each with its loop
    /// ([`crate::net::spread`]); at least 1 (1: a single-queue TUN, as before).
    pub threads: usize,
}

/// The number of workers unless `--threads` says otherwise: one per CPU ipsecd may run on.
/// A gateway's work is its packets, so it should have every core; a flow is one queue's
/// either way, so one flow costs no more with more workers, and an idle worker costs a
/// sleeping thread and its buffers (about 1 MiB).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The NAT-keepalive interval unless `--nat-keepalive` says otherwise (RFC 3948 §4: 20 s).
pub const DEFAULT_NAT_KEEPALIVE: u64 = 20;

/// The packet socket raw ESP leaves through (`--esp-out packet`); `None` (the raw IP
/// socket for everything) when asked, or when the kernel refuses one (no CAP_NET_RAW, no
/// AF_PACKET).
fn packet_socket(esp_out: crate::afpacket::EspOut, mark: u32) -> Option<crate::afpacket::PacketSocket> {
    match esp_out {
        crate::afpacket::EspOut::Ip => None,
        crate::afpacket::EspOut::Packet => crate::afpacket::PacketSocket::open(mark)
            .map_err(|e| tracing::info!("raw ESP through the IP socket only: no packet socket: {e}"))
            .ok(),
    }
}

/// Runs the daemon until SIGTERM or SIGINT. `Err` for a start-up failure (a bad config
/// names its line and column; a second daemon on the same socket is refused).
pub fn run(opts: Options) -> Result<(), String> {
    // The config first: a bad one stops start-up before anything is created.
    let text = match &opts.config {
        // The text holds keys: wiped when it goes.
        Some(p) => {
            Some(Zeroizing::new(std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?))
        }
        None => None,
    };
    if let (Some(p), Some(t)) = (&opts.config, &text) {
        service::parse(&p.display().to_string(), t)?;
    }
    // The drivers too: a card that cannot be had stops start-up before anything is created.
    let fw = crypto::framework(&opts.drivers, opts.policy)?;
    let listener = bind_control(&opts.socket)?;
    let (relay, relay_listener) = Relay::bind(&opts.ike_socket)?;
    let threads = opts.threads.max(1);
    let tun = Arc::new(
        DeviceBuilder::new()
            .name(&opts.tun)
            .mtu(opts.mtu)
            // IFF_VNET_HDR with TSO: TCP super-packets in, coalesced ones out (net::tun_loop).
            .with(|b| {
                b.offload(true);
            })
            // A queue per worker (net::spread); one worker keeps the plain TUN.
            .multi_queue(threads > 1)
            .build_sync()
            .map_err(|e| format!("creating TUN {}: {e}", opts.tun))?,
    );
    let queues = Arc::new(
        net::TunQueues::open(tun.clone(), threads)
            .map_err(|e| format!("opening {threads} queues of TUN {}: {e}", opts.tun))?,
    );
    // No IPv6 link-local address on the TUN: there is no link layer to discover, and the
    // kernel's router solicitations and group reports would only be dropped (see
    // net::IoCounters::tun_link_scope).
    for args in [
        vec!["link", "set", "dev", &opts.tun, "addrgenmode", "none"],
        vec!["-6", "addr", "flush", "dev", &opts.tun, "scope", "link"],
    ] {
        if let Err(e) = crate::routing::ip(&args) {
            tracing::info!("{e}");
        }
    }
    let io = Arc::new(IoCounters::default());
    let raw4 = net::raw_out(Family::V4, opts.fwmark).map_err(|e| format!("raw IPv4 socket: {e}"))?;
    let raw6 = net::raw_out(Family::V6, opts.fwmark).map_err(|e| format!("raw IPv6 socket: {e}"))?;
    let mut inputs = Vec::new();
    for f in [Family::V4, Family::V6] {
        let esp = net::esp_in(f).map_err(|e| format!("raw ESP socket ({f:?}): {e}"))?;
        let udp = net::udp_group(f, opts.udp_port, opts.fwmark, threads)
            .map_err(|e| format!("UDP port {} ({f:?}): {e}", opts.udp_port))?;
        inputs.push((f, esp, udp.into_iter().map(Arc::new).collect::<Vec<_>>()));
    }
    let mut ike = (None, None);
    if opts.ike_port != 0 {
        let open = |f| {
            net::ike(f, opts.ike_port, opts.fwmark)
                .map(Arc::new)
                .map_err(|e| format!("IKE port {} ({f:?}): {e}", opts.ike_port))
        };
        ike = (Some(open(Family::V4)?), Some(open(Family::V6)?));
    }
    let sink = Arc::new(NetSink {
        tun: tun.clone(),
        raw4,
        raw6,
        udp4: inputs[0].2[0].clone(),
        udp6: inputs[1].2[0].clone(),
        udp_port: opts.udp_port,
        io: io.clone(),
        too_big: icmp::SendTooBig::new(opts.fwmark),
        packet: packet_socket(opts.esp_out, opts.fwmark),
    });
    let core = Arc::new(Ipsec::new(fw.clone(), sink.clone()));
    sink.too_big.attach(&core);
    // Only traffic for the tunnels belongs in the TUN: what no policy covers is dropped and
    // counted (`no_policy`), never sent on in clear.
    core.set_default_policy(DefaultPolicy::Discard);

    if let (Some(p), Some(t)) = (&opts.config, &text) {
        service::apply_setkey(&core, &p.display().to_string(), t)?;
        if let Some(w) = config::manual_aead_keys_warning(&core) {
            tracing::warn!("{w}");
        }
        lint::log(&p.display().to_string(), &lint::check(&core, opts.udp_port));
    }
    let reloads = Arc::new(config::Reloads::default());
    let mut routing = Routing::start(&opts.tun, opts.table, opts.fwmark, opts.routes);
    routing.sync(&core);
    let routes = Arc::new(Mutex::new(routing));
    let lint = Arc::new(Mutex::new(ChangeLint::new(opts.udp_port)));
    let drivers: Vec<String> = fw.drivers().into_iter().map(|d| d.name).collect();
    tracing::info!(
        "ipsecd: TUN {} (mtu {}), ESP, AH, IPComp and UDP {} on IPv4 and IPv6, {threads} worker(s), \
         control socket {}, IKE relay {} (IKE port {}), \
         {} SAs, {} policies, drivers {} (policy {})",
        opts.tun,
        opts.mtu,
        opts.udp_port,
        opts.socket.display(),
        opts.ike_socket.display(),
        opts.ike_port,
        core.databases().sad.dump(None).len(),
        core.databases().spd.dump().len(),
        drivers.join(", "),
        opts.policy
    );

    let max = net::max_packet(opts.mtu);
    // Threads are named by worker where there are several: ipsecd-tun, ipsecd-tun1, ….
    let nth = |i: usize| if i == 0 { String::new() } else { i.to_string() };
    for i in 0..threads {
        spawn(&format!("ipsecd-tun{}", nth(i)), {
            let (core, sink, queues) = (core.clone(), sink.clone(), queues.clone());
            move || net::tun_loop(&core, &sink, &queues, i, max)
        })?;
    }
    for (f, esp, udp) in inputs {
        let name = match f {
            Family::V4 => "4",
            Family::V6 => "6",
        };
        spawn(&format!("ipsecd-esp{name}"), {
            let (core, sink, queues) = (core.clone(), sink.clone(), queues.clone());
            move || net::esp_loop(&core, &sink, &queues, &esp, f, max)
        })?;
        for (i, udp) in udp.into_iter().enumerate() {
            spawn(&format!("ipsecd-udp{name}{}", if i == 0 { String::new() } else { format!(".{i}") }), {
                let (core, sink, queues, relay) = (core.clone(), sink.clone(), queues.clone(), relay.clone());
                move || net::udp_loop(&core, &sink, &queues, &relay, &udp, f, max)
            })?;
        }
    }
    // IKE (RFC 7296) on its own port, for the key manager (crate::ike_relay); and the relay
    // socket the key manager connects to, its answers leaving through IkeOut.
    for (sock, name) in [(&ike.0, "ipsecd-ike4"), (&ike.1, "ipsecd-ike6")] {
        let Some(sock) = sock.clone() else { continue };
        let f = if name.ends_with('4') { Family::V4 } else { Family::V6 };
        spawn(name, {
            let (relay, sink) = (relay.clone(), sink.clone());
            move || net::ike_loop(&relay, &sink, &sock, f)
        })?;
    }
    spawn("ipsecd-ike-relay", {
        let out =
            Arc::new(net::IkeOut { sink: sink.clone(), ike4: ike.0, ike6: ike.1, ike_port: opts.ike_port });
        let relay = relay.clone();
        move || relay.serve(&relay_listener, out)
    })?;
    // AH (RFC 4302): whole packets from its raw sockets (IPv6: the headers in front of AH
    // written back, net::ah_loop).
    for (f, v) in [(Family::V4, 4), (Family::V6, 6)] {
        let ah = net::ah_in(f).map_err(|e| format!("raw AH socket ({f:?}): {e}"))?;
        spawn(&format!("ipsecd-ah{v}"), {
            let (core, sink, queues) = (core.clone(), sink.clone(), queues.clone());
            move || net::ah_loop(&core, &sink, &queues, &ah, f, max)
        })?;
    }
    // IPComp (RFC 3173): protocol 108 and the uncompressed IP-in-IP (4, 41) of IPComp
    // peers, opened whether or not IPComp SAs exist yet (a key manager may add one at any
    // time); what is not an IPComp SA's is dropped as not_ipcomp.
    for (f, v) in [(Family::V4, 4), (Family::V6, 6)] {
        let socks = net::ipcomp_in(f).map_err(|e| format!("raw IPComp / IP-in-IP socket ({f:?}): {e}"))?;
        for (proto, sock) in socks {
            spawn(&format!("ipsecd-p{proto}v{v}"), {
                let (core, sink, queues) = (core.clone(), sink.clone(), queues.clone());
                move || net::ipcomp_loop(&core, &sink, &queues, &sock, f, proto, max)
            })?;
        }
    }
    // ICMP path MTU errors from the network side (crate::icmp); without the sockets the
    // gateway still runs, with no path MTU learned.
    for (f, name) in [(icmp::Family::V4, "ipsecd-icmp4"), (icmp::Family::V6, "ipsecd-icmp6")] {
        match icmp::socket(f) {
            Ok(sock) => spawn(name, {
                let (core, io) = (core.clone(), io.clone());
                move || icmp::icmp_loop(&core, &io.recv_errors, &sock, f)
            })?,
            Err(e) => tracing::warn!("ICMP socket ({f:?}): {e}: no path MTU learned"),
        }
    }
    let metrics = Arc::new(Counters::default());
    let hub = Arc::new(Hub::default());
    let control = Server::with_hub(
        Control {
            core: core.clone(),
            fw: fw.clone(),
            io: io.clone(),
            routes: routes.clone(),
            reloads: reloads.clone(),
            metrics: metrics.clone(),
            hub: hub.clone(),
            lint: lint.clone(),
            relay: relay.clone(),
        },
        ctl_server::Limits::default(),
        hub,
    );
    if let Some(addr) = opts.metrics {
        let l = std::net::TcpListener::bind(addr).map_err(|e| format!("metrics address {addr}: {e}"))?;
        tracing::info!("metrics on http://{addr}/metrics");
        spawn("ipsecd-metrics", {
            let sources = Sources {
                core: core.clone(),
                fw: fw.clone(),
                io: io.clone(),
                reloads: reloads.clone(),
                relay: relay.clone(),
            };
            let ctl = control.counters().clone();
            move || serve_metrics(&l, sources, ctl, metrics)
        })?;
    }
    spawn("ipsecd-ctl", {
        let control = control.clone();
        move || control.serve(&listener)
    })?;

    let mut keepalives = Keepalives::new(opts.nat_keepalive);
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
        .map_err(|e| format!("signals: {e}"))?;
    loop {
        for sig in signals.pending() {
            match sig {
                // A reload is a change like a control request's: it takes its turn.
                SIGHUP => {
                    let _turn = control.turn();
                    reload(&opts, &core, &routes, &reloads);
                    lint.lock().unwrap_or_else(|e| e.into_inner()).forget();
                }
                _ => {
                    shutdown(&opts, &core, &tun, &io, &routes);
                    return Ok(());
                }
            }
        }
        core.tick();
        crate::monitor::publish_events(&core, control.hub());
        if let Some(k) = &mut keepalives {
            k.run(&core, &sink);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<(), String> {
    std::thread::Builder::new().name(name.into()).spawn(f).map(|_| ()).map_err(|e| format!("{name}: {e}"))
}

/// Binds the control socket, mode 0600. If a daemon already answers on it, refuses; a
/// socket file nobody answers on is left over from a crash and is replaced.
fn bind_control(path: &Path) -> Result<UnixListener, String> {
    if UnixStream::connect(path).is_ok() {
        return Err(format!("another ipsecd is already serving {}", path.display()));
    }
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path).map_err(|e| format!("control socket {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("control socket {}: {e}", path.display()))?;
    Ok(l)
}

/// What the control socket's requests do (served by [`ctl_server::Server`], which gives
/// changes one at a time).
struct Control {
    core: Arc<Ipsec>,
    /// The framework the SAs' sessions come from, for its routing statistics.
    fw: ocf::Framework,
    io: Arc<IoCounters>,
    routes: Arc<Mutex<Routing>>,
    /// The SIGHUP reloads' outcomes, for `stats`.
    reloads: Arc<config::Reloads>,
    /// The metrics endpoint's counters, for `stats`.
    metrics: Arc<Counters>,
    /// The `monitor` subscribers' hub, for `stats`.
    hub: Arc<Hub>,
    /// The warnings about a change ([`lint_index`]), shared with SIGHUP's reload.
    lint: Arc<Mutex<ChangeLint>>,
    /// The IKE relay, for `stats`.
    relay: Arc<Relay>,
}

impl Handler for Control {
    fn stats(&self, ctl: &Counters) -> String {
        format!(
            "{}{}{}control: {ctl}\nmetrics: {}\nmonitor: {}\n",
            metrics::stats(&self.core, &self.io, &self.reloads),
            self.relay.stats(),
            crypto::stats(&self.fw.routing()),
            self.metrics,
            self.hub
        )
    }

    /// The change, then its routes (when it changed a policy: the routes follow the
    /// outbound policies alone). One at a time, SIGHUP's reload included: both run in the
    /// server's turn ([`Server::turn`]). Warnings the change brings ([`lint_index`]: the
    /// lint's rules applied to what it changed, not to every SA and policy) are logged and
    /// added to the reply as setkey comments (`# warning: …`).
    fn change(&self, body: &str) -> Reply {
        self.apply(body, Keys::Hidden)
    }

    fn change_showing_keys(&self, body: &str) -> Reply {
        self.apply(body, Keys::Shown)
    }
}

impl Control {
    fn apply(&self, body: &str, keys: Keys) -> Reply {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let mut lint = self.lint.lock().unwrap_or_else(|e| e.into_inner());
        lint.prepare(&self.core);
        let (out, changes) = service::apply_setkey_noting(&self.core, "control", body, keys)?;
        if changes.iter().any(Change::is_policy) {
            routes.sync(&self.core);
        }
        let new = lint.change(&self.core, &changes);
        lint::log("control", &new);
        Ok(new.iter().fold(out, |out, w| out + "# warning: " + w + "\n"))
    }
}

/// The metrics endpoint's bounds: connections at once, the time to send the request's
/// head (at most `METRICS_HEAD` bytes), and to take the counters.
const METRICS_CLIENTS: usize = 8;
const METRICS_REQUEST: Duration = Duration::from_secs(2);
const METRICS_REPLY: Duration = Duration::from_secs(10);
const METRICS_HEAD: usize = 16 << 10;

/// What the metrics endpoint reads its counters from.
struct Sources {
    core: Arc<Ipsec>,
    fw: ocf::Framework,
    io: Arc<IoCounters>,
    reloads: Arc<config::Reloads>,
    relay: Arc<Relay>,
}

/// Answers every connection with the counters (any request: a scraper's GET /metrics), each
/// on a thread of its own (up to [`METRICS_CLIENTS`]), so that a silent or slow scraper
/// holds up no other.
fn serve_metrics(
    listener: &std::net::TcpListener,
    sources: Sources,
    ctl: Arc<Counters>,
    counters: Arc<Counters>,
) {
    let busy =
        || b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec();
    let c = counters.clone();
    serve::accept(
        listener.incoming(),
        "ipsecd-metrics-conn",
        METRICS_CLIENTS,
        &counters,
        busy,
        move |mut conn| {
            // The request line and headers are read (to their blank line) and ignored.
            let head = serve::read_by(&mut conn, Instant::now() + METRICS_REQUEST, METRICS_HEAD, |b| {
                b.windows(4).any(|w| w == b"\r\n\r\n")
            });
            match head {
                Ok(_) => {}
                Err(serve::ReadError::Deadline(_)) => return c.count(Refused::RequestDeadline),
                Err(serve::ReadError::TooLarge) => return c.count(Refused::TooLarge),
                Err(serve::ReadError::Io(_)) => return c.count(Refused::Io),
            }
            let body = metrics::prometheus(&sources.core, &sources.io, &sources.reloads)
                + &sources.relay.prometheus()
                + &crypto::prometheus(&sources.fw.routing())
                + &ctl.prometheus("control")
                + &c.prometheus("metrics");
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            match serve::write_by(&mut conn, reply.as_bytes(), Instant::now() + METRICS_REPLY) {
                Ok(()) => c.count_answered(),
                Err(serve::WriteError::Deadline(_)) => c.count(Refused::ReplyDeadline),
                Err(serve::WriteError::Gone) => c.count(Refused::Io),
            }
        },
    );
}

/// SIGHUP: the config file again, applied whole or not at all ([`config::reload_file`]);
/// SAs whose keys did not change keep their sequence numbers. The outcome is counted and
/// shown by `ipsecctl stats` and the metrics, as well as logged.
fn reload(opts: &Options, core: &Ipsec, routes: &Mutex<Routing>, reloads: &config::Reloads) {
    let Some(path) = &opts.config else {
        tracing::info!("SIGHUP: no config file to re-read");
        return;
    };
    let started = Instant::now();
    match config::reload_file(core, path, reloads) {
        Ok(r) => {
            routes.lock().unwrap_or_else(|e| e.into_inner()).sync(core);
            tracing::info!("SIGHUP: {} re-read in {:?}: {r}", path.display(), started.elapsed());
            lint::log(&format!("SIGHUP: {}", path.display()), &lint::check(core, opts.udp_port));
        }
        Err(e) => tracing::error!("SIGHUP: reload failed, nothing was changed: {e}"),
    }
}

fn shutdown(opts: &Options, core: &Ipsec, tun: &SyncDevice, io: &IoCounters, routes: &Mutex<Routing>) {
    let _ = std::fs::remove_file(&opts.socket);
    let _ = std::fs::remove_file(&opts.ike_socket);
    routes.lock().unwrap_or_else(|e| e.into_inner()).stop();
    let _ = tun.enabled(false);
    tracing::info!("ipsecd: stopping; {}; I/O: {io}", core.stats());
}
