//! The IKE relay: ipsecd keeps every packet socket, and a key manager (`iked`), a process
//! of its own so that untrusted IKE is never parsed inside the data plane, gets the IKE
//! datagrams over a Unix socket and answers through it.
//!
//! ```text
//!  peer ─ UDP 500 (--ike-port) ──────── ike_loop (net::ike) ─────┐
//!  peer ─ UDP 4500 (--udp-port) ─ udp_loop: 4 zero bytes first? ─┤ marker off
//!          │ no: ESP (SPI ≠ 0) ─► the core, untouched            │ (nat_t flag)
//!          │ marker, no key manager ─► the core: dropped as `ike` ▼
//!          │                            Relay::offer ── no key manager: no_key_manager
//!          │                              │  one non-blocking send (header + message);
//!          │                              │  queue full: key_manager_full, dropped
//!          │                              ▼
//!          │              relay socket (--ike-socket, SOCK_SEQPACKET, mode 0600)
//!          │                one record = one datagram (ipsec_wire::ike_relay)
//!          │                              ▲ │
//!          │                              │ ▼  Client (iked): recv() → Datagram, send(&Datagram)
//!          │              ipsecd-ike-km: decode (malformed: counted by cause, skipped)
//!  peer ◄──┴── Outlet (net::ike): nat_t: from the NAT-T port, marker put back;
//!                                 else from the IKE port; from the record's local address
//! ```
//!
//! One key manager at a time: the first to connect gets an `attached` record; while it
//! stays, any other gets a `refused` record with the reason and is closed. When it goes,
//! the next one may attach.
//!
//! Nothing here can slow the ESP path: ESP in UDP is told from IKE by its first four
//! bytes (an SPI is never zero), and only IKE takes the relay's lock and its send, which
//! never waits — a key manager that reads too slowly loses datagrams (counted), as a peer
//! would over a lossy network, and IKE retransmits.
//!
//! - [`server`]: the listening side: [`Relay`] (bind, attach, offer, the key manager's
//!   reader) and [`Outlet`], where the key manager's datagrams leave.
//! - [`client`]: [`Client`], the key manager's side.
//! - [`counters`]: what `ipsecctl stats` and the metrics show.

pub mod client;
pub mod counters;
pub mod server;

pub use client::Client;
pub use counters::RelayCounters;
pub use ipsec_wire::ike_relay::Datagram;
pub use server::{default_path, Offer, OutError, Outlet, Relay};

/// The relay socket's default path (that of ipsecd's default control socket,
/// [`crate::ctl::DEFAULT_SOCKET`], with `-ike`: [`default_path`]).
pub const DEFAULT_SOCKET: &str = "/run/ipsecd-ike.sock";

/// UDP port of IKE (RFC 7296 §2).
pub const IKE_PORT: u16 = 500;
