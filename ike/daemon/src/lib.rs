//! # iked — the IKEv2 key manager
//!
//! iked negotiates ipsecd's SAs with IKEv2 (RFC 7296). It runs as its own process so that
//! untrusted IKE and certificate parsing never runs inside the data plane: ipsecd owns the
//! UDP sockets and hands IKE datagrams over; iked runs ike-core's state machine and installs
//! SAs through ipsecd's control socket.
//!
//! [`config`] reads iked's file, written in swanctl.conf's syntax (`docs/iked.md` is the
//! user's guide), into ike-core's policy types, and compares two configurations for a
//! reload on SIGHUP ([`config::Config::diff`]). [`daemon`] is the I/O around the state
//! machine: ipsecd's relay and control sockets, the timer, signals, iked's own control
//! socket (`ipsecctl ike …`), and the opt-in debugging keys.

#![forbid(unsafe_code)]

pub mod config;
pub mod daemon;
