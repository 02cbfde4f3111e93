//! The engine's boundary: what [`crate::Ike`] takes in and what it hands back. Nothing here
//! does I/O; `iked` reads ipsecd's relay socket and control lines, calls the engine, and
//! carries out each [`Output`] in order.
//!
//! ```text
//!   ipsecd relay ─ Datagram ─▶ Ike::datagram(now, d, out) ─┐
//!   iked's timer ─────────────▶ Ike::tick(now, out) ────────┤
//!   ipsecd monitor ─ SaEvent ─▶ Ike::sa_event(now, e, out) ─┼─▶ out: Vec<Output>
//!   ipsecctl ─────────────────▶ Ike::initiate / terminate ──┘     Send(Datagram)    → the relay
//!                                                                 Install(ChildSaInstall) → setkey add + spdadd
//!                                                                 InstallOutbound{..}     → setkey add (held outbound SA)
//!                                                                 Remove(ChildSaRemove)   → setkey delete
//!                                                                 Event(Event)      → log, monitor, counters
//! ```
//!
//! Every call appends to a `&mut Vec<Output>` the caller owns and clears, so an idle tick
//! allocates nothing.
//!
//! Inbound CHILD_SA SPIs are chosen by the core from ocf's random source: non-zero, at
//! least 256 (RFC 4303 §2.1 reserves 1–255), and checked against the core's own table of
//! the SPIs it handed out. iked installs each direction with `add` (not GETSPI/UPDATE):
//! ipsecd refusing the inbound SPI (already in its SAD, from a manual entry) is treated by
//! iked as a failed CHILD_SA — it deletes the CHILD_SA with an INFORMATIONAL Delete.
//!
//! The responder of a CHILD_SA rekey installs the new CHILD_SA's inbound SA at once and
//! its outbound SA only when the old CHILD_SA goes (strongSwan's responder does the same):
//! ipsecd sends with the newest outbound SA, and the requester installs its new inbound
//! SA only when it reads our response, so a packet sent on the new SA before that would
//! be dropped there. Such an install comes with [`ChildSaInstall::outbound_later`] set
//! (its outbound keys in it, for iked to hold), and its outbound SA follows in an
//! [`Output::InstallOutbound`] — before the old CHILD_SA's [`Output::Remove`], so that
//! traffic always has an outbound SA. Splitting the install (rather than installing the
//! outbound SA at once and telling ipsecd not to prefer it yet) needs nothing new of
//! ipsecd: an SA added later is simply the newest one. The core keeps no keys for it:
//! the held outbound SA is iked's, named by the new CHILD_SA's inbound SPI.

use std::net::SocketAddr;
use std::time::Duration;

use ike_wire::ids::{EncrId, IntegId};
use ike_wire::ts::TrafficSelector;
use zeroize::Zeroizing;

use crate::config::Mode;

/// One UDP datagram's IKE message with its addresses and ports: `local` is ours (port 500
/// or 4500), `remote` the peer's. On port 4500 the bytes are after the non-ESP marker
/// (ipsecd strips it on receipt and adds it on sending).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub bytes: Vec<u8>,
}

/// An event from ipsecd's `monitor` stream (`ipsec/daemon/src/monitor.rs`), parsed by iked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaEvent {
    /// `acquire`: outbound traffic matched an `ipsec` policy with no SA; `reqid` is the
    /// policy's, which iked maps to a (connection, child).
    Acquire { reqid: u32, src: std::net::IpAddr, dst: std::net::IpAddr },
    /// `soft-expire`: the SA `spi` (ours, inbound or outbound) should be rekeyed.
    SoftExpire { spi: u32 },
    /// `hard-expire`: ipsecd deleted the SA `spi`.
    HardExpire { spi: u32 },
}

/// A CHILD_SA to install: both directions, as ipsecd's setkey `add` (and `spdadd` for
/// the selectors) takes them.
#[derive(Debug, PartialEq, Eq)]
pub struct ChildSaInstall {
    /// The IKE SA it belongs to (our SPI).
    pub ike_sa: u64,
    /// The configuration's child name.
    pub child: String,
    /// Inbound SPI (chosen by us) and outbound SPI (chosen by the peer).
    pub spi_in: u32,
    pub spi_out: u32,
    pub encr: EncrId,
    /// Key length in bits (AES), `None` where the algorithm has one.
    pub encr_bits: Option<u16>,
    /// NONE with an AEAD.
    pub integ: IntegId,
    /// Inbound keys: encryption key ‖ salt (AEAD), integrity key (empty with an AEAD).
    pub encr_key_in: Zeroizing<Vec<u8>>,
    pub integ_key_in: Zeroizing<Vec<u8>>,
    /// Outbound keys.
    pub encr_key_out: Zeroizing<Vec<u8>>,
    pub integ_key_out: Zeroizing<Vec<u8>>,
    pub mode: Mode,
    /// Our IKE address and the peer's (the tunnel endpoints).
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// ESP in UDP (RFC 3948) with these ports (local, remote) when a NAT was detected.
    pub udp_encap: Option<(u16, u16)>,
    pub esn: bool,
    /// Soft (rekey) and hard lifetimes, jitter already applied.
    pub soft_lifetime: Duration,
    pub hard_lifetime: Duration,
    /// Negotiated selectors: local side then remote side.
    pub local_ts: Vec<TrafficSelector>,
    pub remote_ts: Vec<TrafficSelector>,
    /// Install only the inbound SA now; the outbound one (its keys above) when an
    /// [`Output::InstallOutbound`] with this `spi_in` comes, or never if the CHILD_SA's
    /// [`Output::Remove`] comes first. Set on the responder of a CHILD_SA rekey.
    pub outbound_later: bool,
}

/// A CHILD_SA to delete (both directions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildSaRemove {
    pub ike_sa: u64,
    pub spi_in: u32,
    pub spi_out: u32,
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

/// Why an IKE SA went down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DownReason {
    /// No response after every retransmission.
    PeerDead,
    /// The peer or we refused its authentication.
    AuthFailed,
    /// The peer refused every proposal (NO_PROPOSAL_CHOSEN) or we did.
    NoProposal,
    /// The peer answered with another error notify.
    Refused,
    /// A local `terminate`.
    Terminated,
    /// The peer's INFORMATIONAL Delete.
    DeletedByPeer,
    /// A half-open SA did not complete in time.
    HalfOpenTimeout,
}

/// Something that happened, for logs, `ipsecctl monitor` and counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// An IKE SA completed IKE_AUTH.
    IkeSaUp {
        ike_sa: u64,
        remote: SocketAddr,
        initiator: bool,
    },
    IkeSaDown {
        ike_sa: u64,
        reason: DownReason,
    },
    /// The IKE SA `old` was rekeyed: its CHILD_SAs now belong to `new` (the old one is
    /// deleted next, an IkeSaDown of its own).
    IkeSaRekeyed {
        old: u64,
        new: u64,
    },
    /// Our rekey of the IKE SA failed: the error notify the peer answered with, or `None`
    /// for an answer that did not fit. The IKE SA stays; its rekey is retried later.
    IkeSaRekeyFailed {
        ike_sa: u64,
        notify: Option<ike_wire::ids::NotifyType>,
    },
    /// The peer's AUTH did not verify, or its identity is not the configured one.
    AuthFailed {
        ike_sa: u64,
        /// The connection's name (the IKE SA is gone when the event is read).
        conn: String,
        remote: SocketAddr,
        /// Why, for the log: the certificate refusal, the identity, the AUTH check.
        reason: String,
    },
    ChildSaUp {
        ike_sa: u64,
        child: String,
        spi_in: u32,
        spi_out: u32,
    },
    /// The first CHILD_SA was not made (the IKE SA stays up): the error notify the
    /// responder sent or received (NO_PROPOSAL_CHOSEN, TS_UNACCEPTABLE, …), or the
    /// responder's answer did not fit our proposal.
    ChildSaFailed {
        ike_sa: u64,
        child: String,
        notify: Option<ike_wire::ids::NotifyType>,
    },
    /// A NAT was detected (local: we are behind one; remote: the peer is) and IKE moved to
    /// port 4500.
    NatDetected {
        ike_sa: u64,
        local: bool,
        remote: bool,
    },
    /// The peer's port changed behind its NAT (§2.23): the IKE SA and its CHILD_SAs
    /// (Migrate outputs) now send to `to`.
    PeerMoved {
        ike_sa: u64,
        from: SocketAddr,
        to: SocketAddr,
    },
    /// Cookies turned on (the half-open count reached the threshold) or off.
    Cookies {
        on: bool,
    },
}

/// A CHILD_SA whose peer moved behind its NAT (RFC 7296 §2.23): its outer addresses are
/// now `local` and `remote` (ipsecd's `migrate`; the port is the ESP-in-UDP one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildSaMigrate {
    pub ike_sa: u64,
    pub spi_in: u32,
    pub spi_out: u32,
    pub local: SocketAddr,
    /// The peer's address before the move.
    pub old_remote: SocketAddr,
    pub remote: SocketAddr,
}

/// What a call hands back, in the order to carry out.
#[derive(Debug, PartialEq, Eq)]
pub enum Output {
    Send(Datagram),
    Install(Box<ChildSaInstall>),
    /// The outbound SA of the CHILD_SA `spi_in`, installed before with
    /// [`ChildSaInstall::outbound_later`]: install it now (the CHILD_SA it replaces goes).
    InstallOutbound {
        ike_sa: u64,
        spi_in: u32,
    },
    Remove(ChildSaRemove),
    Migrate(ChildSaMigrate),
    Event(Event),
}
