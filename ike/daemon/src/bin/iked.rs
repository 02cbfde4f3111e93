//! `iked`: the IKEv2 key manager beside ipsecd. See `iked --help` and `docs/iked.md`.
//!
//! ```text
//!  args ─▶ logs (ipsecd's: stderr, RUST_LOG) ─▶ Config::load ─▶ --check? print, exit
//!       ─▶ ike_engine::start (ike-core's state machine) ─▶ Daemon::new (relay, monitor,
//!          control socket, signals, --debug-keys) ─▶ Daemon::run until SIGTERM
//! ```

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use iked::config::Config;
use iked::daemon::control::DEFAULT_SOCKET;
use iked::daemon::run::Options;

/// The IKEv2 key manager for ipsecd: negotiates and rekeys ipsecd's SAs with its peers
/// (strongSwan, Linux, another iked), installing them through ipsecd's control socket.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The configuration file (swanctl.conf's syntax; docs/iked.md).
    #[arg(short, long, value_name = "FILE", default_value = "/etc/iked/iked.conf")]
    config: PathBuf,
    /// ipsecd's IKE relay socket (ipsecd's --ike-socket).
    #[arg(long, value_name = "PATH", default_value = ipsecd::ike_relay::DEFAULT_SOCKET)]
    ike_socket: PathBuf,
    /// ipsecd's control socket.
    #[arg(long, value_name = "PATH", default_value = ipsecd::ctl::DEFAULT_SOCKET)]
    ipsecd_socket: PathBuf,
    /// iked's own control socket (ipsecctl ike …), root-only.
    #[arg(short, long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// FOR DEBUGGING ONLY: write every negotiated IKE and ESP key under DIR, in Wireshark's
    /// ikev2_decryption_table and esp_sa files. Anyone who can read them can decrypt the
    /// traffic; the log warns at start and at every write.
    #[arg(long, value_name = "DIR")]
    debug_keys: Option<PathBuf>,
    /// No cookies however many IKE SAs are half-open (strongSwan's dos_protection = no):
    /// for a benchmark's single trusted initiator, never on an exposed gateway.
    #[arg(long)]
    no_dos_protection: bool,
    /// Serve the counters in Prometheus' text format on this TCP address (e.g.
    /// 127.0.0.1:9101), as ipsecd's --metrics does.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// The first wait for an answer before a request is sent again, in seconds (strongSwan's
    /// charon.retransmit_timeout); each next wait is 1.8 times the previous one.
    #[arg(long, value_name = "SECONDS", default_value_t = 4.0)]
    retransmit_timeout: f64,
    /// How many times a request is sent again before the peer counts as gone (charon's
    /// retransmit_tries): with the defaults, about 165 s.
    #[arg(long, value_name = "N", default_value_t = 5)]
    retransmit_tries: u32,
    /// Read the configuration, say what it holds, and exit (0: it is valid).
    #[arg(long)]
    check: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    ipsecd::logs::init();
    let config = match Config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("iked: {e}");
            return ExitCode::from(1);
        }
    };
    if args.check {
        println!("{}: {} connections", args.config.display(), config.connections.len());
        for c in &config.connections {
            let children: Vec<&str> = c.children.iter().map(|ch| ch.name.as_str()).collect();
            println!("  {}: children {}", c.name, children.join(", "));
        }
        return ExitCode::SUCCESS;
    }
    let opts = Options {
        config: args.config,
        relay: args.ike_socket,
        ipsecd: args.ipsecd_socket,
        control: args.socket,
        debug_keys: args.debug_keys,
        metrics: args.metrics,
    };
    if !(args.retransmit_timeout.is_finite() && (0.05..=3600.0).contains(&args.retransmit_timeout)) {
        eprintln!("iked: --retransmit-timeout must be between 0.05 and 3600 seconds");
        return ExitCode::from(2);
    }
    let mut settings = if args.no_dos_protection {
        iked::daemon::ike_engine::no_dos_protection()
    } else {
        ike_core::Settings::default()
    };
    settings.retransmit.timeout = std::time::Duration::from_secs_f64(args.retransmit_timeout);
    settings.retransmit.tries = args.retransmit_tries;
    let r = iked::daemon::ike_engine::start(&config, settings).and_then(|engine| {
        let mut d = iked::daemon::run::Daemon::new(engine, config, opts)?;
        d.run()
    });
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::from(1)
        }
    }
}
