//! The daemon: ike-core's state machine with its I/O around it. ipsecd owns every packet
//! socket; iked talks to it over Unix sockets (the IKE relay, the event monitor, a control session
//! for its changes), and to `ipsecctl` over its own.
//!
//! ```text
//!                 ┌──────────────────────────── iked (one thread) ───────────────────────────┐
//!  ipsecd relay ──┤ Datagram ─▶                                        ─▶ Send(Datagram) ─────┼─▶ relay
//!  (SEQPACKET)    │                                                                          │
//!  ipsecd ctl  ───┤ monitor line ─▶ events::parse_line ─▶ ┌────────┐ ─▶ Install/Remove        │
//!  (monitor)      │                                       │ Engine │    ─▶ setkey::*_text ──┼─▶ ipsecd ctl
//!  timer ─────────┤ next deadline ─▶ tick ──────────────▶ │ (core) │    (one request each)  │  (session)
//!  ipsecd ctl  ───┤ reply, in order ─▶ installed ───────▶ │        │                        │
//!  (session)      │                                       │        │                        │
//!  signals ───────┤ HUP: reload (Config::diff)            └────────┘ ─▶ Event ─▶ log,        │
//!  iked ctl ──────┤ control::Request ─▶ list/up/down/rekey/stats        monitor subscribers  │
//!  metrics ◀──────┤ metrics::Endpoint ◀─ Engine::metrics (a snapshot every 250 ms)          │
//!                 │                                                  ─▶ debug_keys (opt-in) │
//!                 └──────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! One concern per file:
//! - [`setkey`]: a CHILD_SA's install and removal as setkey text for ipsecd.
//! - [`events`]: ipsecd's monitor lines read back into its events.
//! - [`ipsecd_session`]: the one connection to ipsecd's control socket that carries the
//!   changes, pipelined, their replies matched in order.
//! - [`traffic`]: when each CHILD_SA last carried inbound traffic (ipsecd's `dump`).
//! - [`debug_keys`]: `--debug-keys`, the keys in Wireshark's tables.
//! - [`control`]: iked's control protocol (what `ipsecctl ike …` sends).
//! - [`metrics`]: the counters as `ipsecctl ike stats` and the metrics endpoint show them.
//! - [`raw_list`]: `ipsecctl ike list --raw`, the SAs under charon's field names.
//! - [`engine`]: what the loop needs of the state machine, and what it gives back.
//! - [`ike_engine`]: ike-core's state machine as that engine.
//! - [`credentials`]: the certificate, CA and private key files of `pubkey` connections,
//!   read and parsed for ike-core.
//! - [`run`]: the event loop over the sockets, the timer and the signals.

pub mod control;
pub mod credentials;
pub mod debug_keys;
pub mod engine;
pub mod events;
pub mod ike_engine;
pub mod ipsecd_session;
pub mod metrics;
pub mod raw_list;
pub mod run;
pub mod setkey;
pub mod traffic;
