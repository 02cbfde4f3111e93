//! # ike-core — IKEv2 without I/O
//!
//! The key manager's protocol logic, in the shape of boringtun's `noise` module: nothing
//! here reads a socket, a clock or a file. The daemon (`iked`) hands in datagrams, the time
//! and SA events, and carries out what comes back (datagrams to send, SAs to install or
//! delete through ipsecd's control socket).
//!
//! Every cryptographic operation — Diffie-Hellman, signatures, the PRF, the SK payloads'
//! protection, nonces and SPIs — goes through ocf sessions, so that ocf's cost model,
//! counters and profile see IKE as they see ESP.

#![forbid(unsafe_code)]

pub mod config;
pub mod crypto;
