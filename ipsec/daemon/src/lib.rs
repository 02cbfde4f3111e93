//! # ipsecd — a user-space IPsec gateway over TUN
//!
//! The Fast IPsec core (`ipsec-core`) with I/O around it: packets from a TUN device are
//! encapsulated and sent as raw ESP or ESP in UDP; ESP from the network is decapsulated and
//! written to the TUN. Configured in setkey(8) syntax from a file and at run time through
//! a Unix control socket spoken by `ipsecctl`.
//!
//! - [`crypto`]: the ocf framework (`soft`, `--driver` cards, `--policy`) and what routing
//!   did, for stats and metrics.
//! - [`daemon`]: start-up, threads, routes, signals, the lifetime tick.
//! - [`logs`]: the log on stderr, in colour only on a terminal without `NO_COLOR`.
//! - [`net`]: the TUN and sockets, and the loops that feed the core.
//! - [`ike_relay`]: IKE datagrams (UDP 500, and the NAT-T port's behind the Non-ESP
//!   Marker) to a key manager over a Unix socket and its answers back out; its client.
//! - [`icmp`]: ICMP path MTU errors from the network side, for the core's path MTU.
//! - [`afpacket`]: raw ESP out through a packet socket, past the IP output path.
//! - [`keepalive`]: NAT-keepalives to the peers of ESP-in-UDP SAs, from the main loop.
//! - [`batch`]: the batch size and the loops' pools of packet buffers.
//! - [`coalesce`]: decrypted TCP segments merged back into super-packets for the TUN.
//! - [`routing`]: the routes into the TUN and the rule that keeps ipsecd's own ESP out.
//! - [`service`]: control requests (setkey text into the core's control protocol).
//! - [`metrics`]: what `ipsecctl stats` and the metrics endpoint show.
//! - [`config`]: the config file's reload on SIGHUP (atomic, keeps SA state) and its outcomes.
//! - [`lint`]: warnings about configurations that load but cannot work as meant.
//! - [`lint_index`]: the same rules per control request, looking only at what it changed.
//! - [`host_addrs`]: this host's addresses, read again only when the kernel says they changed.
//! - [`ctl`]: the control socket's protocol and its client.
//! - [`ctl_server`]: the control server: concurrent clients, deadlines, changes one at a time.
//! - [`ike_ctl`]: the protocol of iked's control socket and its client (`ipsecctl ike …`).
//! - [`monitor`]: the core's events as lines to `monitor` subscribers (bounded queues).
//! - [`serve`]: a thread per connection up to a bound, whole-request and whole-reply
//!   deadlines (the control socket and the metrics endpoint).

pub mod afpacket;
pub mod batch;
pub mod coalesce;
pub mod config;
pub mod crypto;
pub mod ctl;
pub mod ctl_server;
pub mod daemon;
pub mod host_addrs;
pub mod icmp;
pub mod ike_ctl;
pub mod ike_relay;
pub mod keepalive;
pub mod lint;
pub mod lint_index;
pub mod logs;
pub mod metrics;
pub mod monitor;
pub mod net;
pub mod routing;
pub mod serve;
pub mod service;
