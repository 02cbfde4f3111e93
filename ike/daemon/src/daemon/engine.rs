//! What the event loop ([`super::run`]) needs of the IKEv2 state machine, and what the
//! machine hands back: the boundary between iked's I/O and ike-core's sans-I/O engine.
//!
//! ```text
//!  run ── datagram / tick / sa_event / command / reload / shutdown ──▶ Engine
//!  run ◀──────────── Vec<Output>: Send, Install, Remove, IkeKeys, Event ──┘
//!        next_deadline(): when to call tick next
//! ```
//!
//! `super::ike_engine` implements it over ike-core's `Ike`. The loop never looks inside
//! an IKE SA: everything it does is one of the outputs.

use std::time::{Duration, Instant};

use ipsec_core::sad::Event as IpsecEvent;
use ipsecd::ike_relay::Datagram;

use super::control::Request;
use super::debug_keys::IkeSaKeys;
use super::setkey::{ChildInstall, ChildMigrate, ChildRemove, Trap};
use crate::config::{Config, Diff};

/// How much an event matters, and so where it is logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// An IKE SA or CHILD_SA came up, was rekeyed, went down.
    Info,
    /// A peer failed to authenticate, or we failed to (a wrong PSK, an untrusted
    /// certificate): logged as `authentication failed: …`.
    AuthFailure,
    /// Something went wrong that the operator should see (a peer is dead, a negotiation
    /// failed).
    Warning,
}

/// An IKE event: for the log and for `ipsecctl ike monitor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub severity: Severity,
    /// One line, `name key=value …` like ipsecd's monitor lines; never a key.
    pub line: String,
}

/// The IKE SA keys that `--debug-keys` writes, owned.
pub struct IkeKeysOut {
    pub spi_i: [u8; 8],
    pub spi_r: [u8; 8],
    pub encr: ike_core::crypto::Encr,
    pub integ: Option<ike_core::crypto::Integ>,
    pub sk_ei: ike_core::crypto::KeyBytes,
    pub sk_er: ike_core::crypto::KeyBytes,
    pub sk_ai: ike_core::crypto::KeyBytes,
    pub sk_ar: ike_core::crypto::KeyBytes,
}

impl IkeKeysOut {
    pub fn borrow(&self) -> IkeSaKeys<'_> {
        IkeSaKeys {
            spi_i: self.spi_i,
            spi_r: self.spi_r,
            encr: self.encr,
            integ: self.integ,
            sk_ei: &self.sk_ei,
            sk_er: &self.sk_er,
            sk_ai: &self.sk_ai,
            sk_ar: &self.sk_ar,
        }
    }
}

/// What the engine asks the loop to do.
pub enum Output {
    /// Send this datagram through ipsecd's relay.
    Send(Datagram),
    /// Install a CHILD_SA in ipsecd (one request). The loop tells the engine whether it
    /// was refused ([`Engine::installed`]): a refused SPI is a failed CHILD_SA.
    Install {
        id: u64,
        child: ChildInstall,
    },
    /// Remove a CHILD_SA from ipsecd (one request).
    Remove(ChildRemove),
    /// Move a CHILD_SA's SAs to the peer's new port behind its NAT (one request).
    Migrate(ChildMigrate),
    /// Install a trap's policies in ipsecd (one request).
    Trap(Trap),
    /// Remove a trap's policies.
    Untrap(Trap),
    /// An IKE SA's keys are in use (for `--debug-keys` only; the loop drops them otherwise).
    IkeKeys(IkeKeysOut),
    Event(Event),
}

/// The state machine as the loop drives it. Every call appends what it asks for to `out`.
pub trait Engine {
    /// iked is up (its sockets connected): start what the configuration starts.
    fn start(&mut self, now: Instant, out: &mut Vec<Output>);
    /// An IKE datagram from the relay.
    fn datagram(&mut self, now: Instant, d: Datagram, out: &mut Vec<Output>);
    /// The deadline passed (retransmissions, lifetimes, liveness, half-open expiry).
    fn tick(&mut self, now: Instant, out: &mut Vec<Output>);
    /// When `tick` is next needed (`None`: nothing pending).
    fn next_deadline(&self) -> Option<Instant>;
    /// Whether the engine wants to know when its CHILD_SAs last carried inbound traffic
    /// before the next `tick` (a liveness check is near): the loop then asks ipsecd
    /// (`dump`) and calls [`Engine::traffic`].
    fn wants_traffic(&self, _now: Instant) -> bool {
        false
    }
    /// The inbound SAs that carried traffic, each with how long ago (ipsecd's `last-used`
    /// lines; empty when ipsecd could not say).
    fn traffic(&mut self, _now: Instant, _seen: &[(u32, Duration)]) {}
    /// An ipsecd event: ACQUIRE, soft or hard expiry, a peer that moved.
    fn sa_event(&mut self, now: Instant, ev: &IpsecEvent, out: &mut Vec<Output>);
    /// Whether ipsecd took an [`Output::Install`] (`Err`: its reason).
    fn installed(&mut self, now: Instant, id: u64, result: Result<(), String>, out: &mut Vec<Output>);
    /// ipsecd lost monitor lines: the engine should re-check its SAs' lifetimes itself.
    fn events_lost(&mut self, now: Instant, lost: u64, out: &mut Vec<Output>);
    /// `ipsecctl ike list|up|down|rekey|stats` (never `Monitor`, which the loop serves).
    fn command(&mut self, now: Instant, req: &Request, out: &mut Vec<Output>) -> Result<String, String>;
    /// A new configuration (SIGHUP): the SAs of removed connections closed, those of
    /// unchanged and changed ones kept (a changed one's settings apply from its next
    /// negotiation), added ones started as their start actions say. `Err`: the engine
    /// could not take it (a certificate or key file unreadable) and runs on as before.
    fn reload(
        &mut self,
        now: Instant,
        config: Config,
        diff: &Diff,
        out: &mut Vec<Output>,
    ) -> Result<(), String>;
    /// The counters in Prometheus' text format, for the metrics endpoint.
    fn metrics(&self) -> String {
        String::new()
    }
    /// SIGTERM: delete every SA (INFORMATIONAL DELETE to the peers, Remove to ipsecd).
    fn shutdown(&mut self, now: Instant, out: &mut Vec<Output>);
}
