//! `ipsecd`: the gateway daemon. See the crate documentation and `docs/gateway.md`.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ipsecd::afpacket::EspOut;
use ipsecd::crypto;
use ipsecd::ctl::DEFAULT_SOCKET;
use ipsecd::daemon::{default_threads, run, Options, DEFAULT_MTU, DEFAULT_NAT_KEEPALIVE};
use ipsecd::routing::{DEFAULT_MARK, DEFAULT_TABLE};

/// A user-space IPsec gateway over TUN: raw ESP and ESP in UDP, configured in setkey syntax.
#[derive(Parser, Debug)]
#[command(name = "ipsecd", version)]
struct Args {
    /// setkey(8)-syntax configuration file (SAs and policies); re-read on SIGHUP.
    #[arg(short = 'f', long = "file")]
    config: Option<PathBuf>,
    /// TUN device to create (or attach to).
    #[arg(long, default_value = "ipsec0")]
    tun: String,
    /// MTU of the TUN device (room for ESP's overhead below the network's MTU; the default
    /// leaves room for every transform's below 1500 bytes).
    #[arg(long, default_value_t = DEFAULT_MTU)]
    mtu: u16,
    /// Control socket (mode 0600).
    #[arg(short = 's', long, default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Local UDP port of ESP in UDP (RFC 3948). What arrives on it is ESP, a NAT-keepalive,
    /// IKE behind the Non-ESP Marker (to the key manager on --ike-socket; counted and
    /// dropped as `ike` when none is attached), or counted and dropped. The
    /// esp-udp SAs name the port (`add 10.0.0.1[4501] 10.0.0.2[4501] esp-udp …`); without
    /// one they send from and to 4500.
    #[arg(long, default_value_t = 4500)]
    udp_port: u16,
    /// Unix socket (SOCK_SEQPACKET, mode 0600) a key manager such as iked connects to: it
    /// gets every IKE datagram (from --ike-port, and from --udp-port without the Non-ESP
    /// Marker) with its local and remote address and port, one record each, and sends its
    /// own back the same way. One key manager at a time; another is refused with the
    /// reason. Default: the control socket's path with -ike before .sock
    /// (/run/ipsecd-ike.sock).
    #[arg(long, value_name = "PATH")]
    ike_socket: Option<PathBuf>,
    /// Local UDP port of IKE (RFC 7296), relayed to the key manager; 0 for none (IKE on
    /// --udp-port is relayed still).
    #[arg(long, value_name = "PORT", default_value_t = ipsecd::ike_relay::IKE_PORT)]
    ike_port: u16,
    /// Do not route the outbound policies' destinations into the TUN (route them yourself;
    /// ipsecd's own sockets still carry --fwmark).
    #[arg(long)]
    no_routes: bool,
    /// Routing table of the routes into the TUN; a rule `not fwmark MARK lookup TABLE` puts
    /// it before the main table for everything but ipsecd's own traffic.
    #[arg(long, default_value_t = DEFAULT_TABLE)]
    table: u32,
    /// Mark (SO_MARK) on the sockets ipsecd sends ESP through, which keeps them out of
    /// TABLE; 0 for none.
    #[arg(long, default_value_t = DEFAULT_MARK)]
    fwmark: u32,
    /// Serve every counter in Prometheus' text format on this address (e.g. 127.0.0.1:9530).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// Register another driver beside `soft`: `mb` is the multi-buffer CPU driver (Intel
    /// IPsec-MB), to which the cost model sends each SA's runs of packets where it beats
    /// soft on them (start-up fails naming why without IPsec-MB); `afalg` (or `afalg:OPTIONS`) is the kernel's
    /// crypto API, a real accelerator where the machine has one (start-up fails naming why
    /// if the kernel has no AF_ALG); `sim:PROFILE` is a simulated card, for experiments
    /// (`sim:qat-like`, `sim:hifn7951,ring=8`: a profile string of ocf-sim). Repeatable; a
    /// profile given twice is two cards (`sim:X` and `sim:X#2`); `hwrng` is every hardware
    /// random source (RDSEED, /dev/hwrng), health-tested, for random sessions. ocf spreads each SA's
    /// requests over the drivers with --policy; `ipsecctl stats` shows how.
    #[arg(long = "driver", value_name = "SPEC", value_parser = crypto::driver_spec)]
    drivers: Vec<String>,
    /// How ocf chooses a driver for each request: cost-model (the least predicted time,
    /// learned from measured completions), priority (one driver per SA, the best),
    /// least-loaded or round-robin.
    #[arg(long, value_name = "NAME", default_value = "cost-model")]
    policy: ocf::Policy,
    /// Send a NAT-keepalive (RFC 3948: one octet 0xFF over UDP) to each peer of an esp-udp
    /// SA that ipsecd sent nothing else for this many seconds, so that a NAT in between
    /// keeps its mapping; 0 for none.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_NAT_KEEPALIVE)]
    nat_keepalive: u64,
    /// How raw ESP leaves: `packet` through a packet socket straight to the device (no
    /// route lookup and no netfilter OUTPUT/POSTROUTING per packet) where the next hop's
    /// link address is known, the raw IP socket elsewhere; `ip` always through the raw IP
    /// socket (for netfilter rules on ESP leaving this host).
    #[arg(long, value_name = "WAY", value_enum, default_value_t = EspOut::Packet)]
    esp_out: EspOut,
    /// Workers, each reading its own TUN queue and its own UDP socket per family: the
    /// kernel spreads flows over the TUN queues and ESP-in-UDP SAs (by SPI) over the
    /// sockets; 1 keeps a single-queue TUN. Default: one per CPU ipsecd may run on.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: Option<u16>,
}

fn main() -> ExitCode {
    ipsecd::logs::init();
    let a = Args::parse();
    let opts = Options {
        config: a.config,
        tun: a.tun,
        mtu: a.mtu,
        ike_socket: a.ike_socket.unwrap_or_else(|| ipsecd::ike_relay::default_path(&a.socket)),
        socket: a.socket,
        udp_port: a.udp_port,
        ike_port: a.ike_port,
        routes: !a.no_routes,
        table: a.table,
        fwmark: a.fwmark,
        metrics: a.metrics,
        drivers: a.drivers,
        policy: a.policy,
        nat_keepalive: std::time::Duration::from_secs(a.nat_keepalive),
        esp_out: a.esp_out,
        threads: a.threads.map_or_else(default_threads, usize::from),
    };
    match run(opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ipsecd: {e}");
            ExitCode::FAILURE
        }
    }
}
