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
//!
//! - [`config`]: the policy — connections, children, proposals as strongSwan writes them,
//!   identities, authentication, lifetimes — as validated types (iked parses the file).
//! - [`crypto`]: every cryptographic operation of IKE, each an ocf request.
//! - [`cert`]: X.509 certificates — loading, chain validation to a configured CA (each
//!   signature through [`crypto`]), the identities a certificate binds, CERTREQ hashes.
//! - [`credentials`]: the parsed certificates, private keys and trusted CAs of the `pubkey`
//!   connections, handed in by iked (which reads the files); the wall-clock time their
//!   validity is checked against comes from the caller too ([`Ike::set_unix_time`]).
//! - [`fragments`]: RFC 7383 — the reassembly of SKF fragments (bounded, each fragment
//!   authenticated before it is kept) and the fragment size.
//! - The engine, [`Ike`], and the modules drawn below.
//!
//! # The flow
//!
//! ```text
//!  Ike::datagram(now, Datagram, out)
//!   │ Message::parse ── malformed ─────────────────────────────▶ drop(Malformed)
//!   │ IKE_SA_INIT request, SPIr = 0?
//!   │   ├─ a retransmission (SPIi, address known) ─▶ the cached response again
//!   │   └─ half_open: admit / COOKIE (stateless) / refuse ─▶ exchange::sa_init (responder)
//!   │ the table, by our SPI (SPIr if the I flag is set, else SPIi) ── none ─▶ drop(UnknownSa)
//!   │ response?  window.matches(id) ── no ────────────────────▶ drop(UnexpectedResponse)
//!   │            SKF? reassemble (fragments: each authenticated, kept) ─ more to come ─▶ done
//!   │                 whole: IkeSa::reassembled, taken by the exchange through IkeSa::open
//!   │            IKE_SA_INIT ─▶ sa_init (initiator) ─▶ IKE_AUTH request
//!   │            IKE_AUTH    ─▶ auth (initiator)    ─▶ Install, IkeSaUp
//!   │            CREATE_CHILD_SA ─▶ create_child / new_child / ike_rekey (requester)
//!   │                                                     ─▶ Install, Remove
//!   │            INFORMATIONAL (our Delete of a CHILD_SA, our liveness check)
//!   │                                          ─▶ the next queued request
//!   │            INFORMATIONAL (our Delete of the IKE SA) ─▶ IkeSaDown
//!   │ request?   window.classify(id): Retransmitted ─▶ resend the cached bytes (of a
//!   │                                   fragmented request: known by its fragment 1)
//!   │                                 OutOfWindow   ─▶ drop(OutOfWindow), or for another
//!   │                                   fragment of the answered request drop(FragmentOfAnswered)
//!   │                                 New: SKF? reassemble as above, then
//!   │                                      IKE_AUTH ─▶ auth (responder) ─▶ response, Install
//!   │                                      INFORMATIONAL ─▶ informational ─▶ response,
//!   │                                        [InstallOutbound of its successor,] Remove
//!   │                                      CREATE_CHILD_SA ─▶ create_child (REKEY_SA:
//!   │                                        Install, its outbound SA held until the old
//!   │                                        CHILD_SA goes), new_child (no REKEY_SA), or
//!   │                                        ike_rekey (SA proposes IKE) ─▶ response, Install
//!   ▼            (every SK message: ICV checked before anything else; a failure
//!  out: Send / Install / InstallOutbound /        ─▶ drop(Unauthenticated), nothing changes)
//!       Remove / Migrate / Event
//!
//!  Ike::tick(now, out): each outstanding request's retransmission (Retransmit::poll) or
//!  the IKE SA's death (PeerDead; dpd_action = restart: initiate again); half-open SAs
//!  past their timeout; IKE SAs past their rekey time (rekey_ike); the redundant IKE SA
//!  of a crossing rekey we won that the peer has not deleted (IkeSa::delete_at) ─▶
//!  terminate; IKE SAs that heard nothing for dpd_delay (IkeSa::last_heard) ─▶ an empty
//!  INFORMATIONAL (liveness check); the cookie secret's rotation.
//!  Every accepted message on an SA ─▶ heard: last_heard = now; on an established IKE SA
//!  whose peer is behind a NAT, a new source port ─▶ move_peer (§2.23): the IKE SA's
//!  remote port, a Migrate for each CHILD_SA, PeerMoved.
//!  Ike::child_traffic(at, spi_in): inbound ESP seen at `at` (ipsecd's dump) ─▶ last_heard.
//!  Ike::peer_moved(now, spi_in, port): ipsecd's peer-moved (ESP's ICV verified) ─▶ move_peer.
//!  Ike::initiate(now, conn, child, out): a new IKE SA, its IKE_SA_INIT request.
//!  Ike::terminate(now, ike_sa, out): the CHILD_SAs removed, a Delete of the IKE SA sent.
//!  Ike::sa_event(now, e, out): soft expiry ─▶ rekey_child; hard expiry ─▶ the CHILD_SA
//!  removed, its Delete queued.
//!  Ike::create_child(now, ike_sa, child, out): a new CHILD_SA on an established IKE SA
//!  (CREATE_CHILD_SA without REKEY_SA; iked's answer to an ACQUIRE when the IKE SA is up).
//!  Ike::rekey_child / rekey_ike: queued on the IKE SA (`IkeSa::queued`) and sent when
//!  the window (1) is free (Ike::pump, after every response).
//!  Ike::reconfigure(now, config, out): a reload (`reload`): the SAs of removed
//!  connections terminated, the others kept under their connection's new settings.
//! ```
//!
//! # Modules (each uses only those below it; `scripts/module-cycles` checks)
//!
//! ```text
//!   lib: Ike — the SA table, the dispatch above, tick, initiate; reload: reconfigure
//!    └─ exchange: sa_init ─▶ auth, informational   (one file per exchange)
//!                 sa_init, auth ─▶ proof (our AUTH and CERTs, the peer's checked)
//!                 create_child ─▶ auth (its helpers), ike_rekey, new_child
//!                 new_child ─▶ auth (its helpers)
//!         │
//!         ├─▶ ike_sa ─▶ child_sa ─▶ io      (the SAs; the boundary's types)
//!         │     └─▶ window, retransmit, stats, fragments (reassembly ─▶ stats)
//!         └─▶ proposals, narrow, half_open, cookie
//!   all of them ─▶ config, credentials, crypto, cert, ike-wire
//! ```
//!
//! # Not yet
//!
//! Retrying a rekey after TEMPORARY_FAILURE, or an
//! IKE SA rekey after INVALID_KE_PAYLOAD (a failed IKE SA rekey is tried again at the next
//! rekey time, a failed CHILD_SA rekey at the next soft expiry or command); a peer
//! behind a NAT whose address (not only its port) changes, MOBIKE; fragmenting our
//! INFORMATIONAL messages (they are small; any fragmented message is reassembled),
//! SET_WINDOW_SIZE;
//! with certificates: sending
//! only the certificates a CERTREQ asks for, revocation (CRLs, OCSP).

#![forbid(unsafe_code)]

pub mod cert;
pub mod child_sa;
pub mod config;
pub mod cookie;
pub mod credentials;
pub mod crypto;
mod exchange;
pub mod fragments;
pub mod half_open;
pub mod ike_sa;
pub mod io;
pub mod narrow;
pub mod proposals;
mod reload;
pub mod retransmit;
pub mod stats;
pub mod window;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ike_wire::encrypted::Fragment;
use ike_wire::ids::ExchangeType;
use ike_wire::{parse_chain, Message};
use ocf::Framework;

use crate::config::{Connection, Fragmentation, Secrets};
use crate::cookie::CookieJar;
use crate::fragments::{Added, Piece, Reassembly};
use crate::half_open::HalfOpenConfig;
use crate::ike_sa::{IkeSa, Reassembled, State};
use crate::io::{Datagram, DownReason, Event, Output, SaEvent};
use crate::retransmit::{Due, RetransmitConfig};
use crate::stats::{Drop, Stats};
use crate::window::Incoming;

/// The policy: connections and secrets (from iked's configuration file).
#[derive(Clone, Debug, Default)]
pub struct Config {
    pub connections: Vec<Connection>,
    pub secrets: Secrets,
    /// Parsed certificates and keys of the `pubkey` connections (iked loads the files).
    pub credentials: credentials::Credentials,
}

/// The engine's own settings (strongSwan's `charon.*` equivalents).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    pub retransmit: RetransmitConfig,
    pub half_open: HalfOpenConfig,
    /// How often the cookie secret changes.
    pub cookie_rotate: Duration,
    /// Our nonces' length.
    pub nonce_len: usize,
    /// RFC 7383: the fragment size and the reassembly's bounds.
    pub fragments: fragments::FragmentConfig,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            retransmit: RetransmitConfig::default(),
            half_open: HalfOpenConfig::default(),
            cookie_rotate: cookie::DEFAULT_ROTATE,
            nonce_len: crypto::DEFAULT_NONCE_LEN,
            fragments: fragments::FragmentConfig::default(),
        }
    }
}

/// Why `initiate` did nothing.
#[derive(Debug)]
pub enum InitiateError {
    NoConnection(String),
    NoChild(String),
    /// The connection names no local or no remote address.
    NoAddress,
    /// The connection's proposals name nothing this implementation supports.
    NoUsableProposal,
    Crypto(crypto::CryptoError),
    Wire(ike_wire::Error),
}

/// The engine.
pub struct Ike {
    fw: Framework,
    config: Config,
    /// How many of `config.connections` are configured; those after are retired ones that
    /// an SA being deleted still refers to (`reload`).
    live: usize,
    settings: Settings,
    /// Keyed by our SPI.
    sas: HashMap<u64, IkeSa>,
    /// Responder SAs by the initiator's SPI and address, to spot a retransmitted
    /// IKE_SA_INIT request.
    init_index: HashMap<(u64, SocketAddr), u64>,
    child_spis: HashSet<u32>,
    half_open: usize,
    cookies: CookieJar,
    cookies_on: bool,
    stats: Stats,
    /// Wall-clock time, Unix seconds, as the caller last gave it: certificates' validity
    /// is checked against it.
    unix_now: u64,
}

impl Ike {
    /// An engine with its configuration, using `fw`'s drivers for every operation.
    pub fn new(fw: Framework, config: Config, settings: Settings, now: Instant) -> Result<Ike, ocf::Error> {
        let cookies = CookieJar::new(&fw, now, settings.cookie_rotate)?;
        Ok(Ike {
            fw,
            live: config.connections.len(),
            config,
            settings,
            sas: HashMap::new(),
            init_index: HashMap::new(),
            child_spis: HashSet::new(),
            half_open: 0,
            cookies,
            cookies_on: false,
            stats: Stats::default(),
            unix_now: 0,
        })
    }

    /// Tells the engine the wall-clock time (Unix seconds) for certificate validity; the
    /// caller sets it before handing over datagrams (the engine reads no clock).
    pub fn set_unix_time(&mut self, secs: u64) {
        self.unix_now = secs;
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The connection an IKE SA belongs to (a removed one while its SA is being deleted).
    pub fn connection_of(&self, sa: &IkeSa) -> Option<&Connection> {
        self.config.connections.get(sa.conn)
    }

    /// The IKE SA whose SPI (ours) is `spi`.
    pub fn ike_sa(&self, spi: u64) -> Option<&IkeSa> {
        self.sas.get(&spi)
    }

    /// The name of IKE SA `spi`'s connection ("?" for none).
    pub(crate) fn conn_name(&self, spi: u64) -> String {
        let c = self.sas.get(&spi).and_then(|sa| self.config.connections.get(sa.conn));
        c.map_or_else(|| "?".to_owned(), |c| c.name.clone())
    }

    /// Every IKE SA.
    pub fn ike_sas(&self) -> impl Iterator<Item = &IkeSa> {
        self.sas.values()
    }

    /// Half-open IKE SAs now.
    pub fn half_open(&self) -> usize {
        self.half_open
    }

    /// Starts an IKE SA for connection `conn` and its child `child`: the IKE_SA_INIT
    /// request to the connection's first remote address, port 500. Answers our SPI.
    pub fn initiate(
        &mut self,
        now: Instant,
        conn: &str,
        child: &str,
        out: &mut Vec<Output>,
    ) -> Result<u64, InitiateError> {
        exchange::sa_init::initiate(self, now, conn, child, out)
    }

    /// Deletes an IKE SA and its CHILD_SAs: an established one with an INFORMATIONAL
    /// Delete to the peer (the CHILD_SAs' Removes at once, the IKE SA's end when the peer
    /// answers or the retransmissions run out), any other at once. False: no such SA.
    pub fn terminate(&mut self, now: Instant, ike_sa: u64, out: &mut Vec<Output>) -> bool {
        exchange::informational::terminate(self, now, ike_sa, out)
    }

    /// An event from ipsecd's monitor: a soft expiry rekeys the CHILD_SA (either of its
    /// SPIs), a hard expiry removes it and tells the peer. ACQUIRE is the caller's: it
    /// knows which trap (reqid) is which child, and calls `initiate` (no IKE SA yet) or
    /// `create_child` (the IKE SA is up).
    pub fn sa_event(&mut self, now: Instant, event: SaEvent, out: &mut Vec<Output>) {
        let find = |sas: &HashMap<u64, IkeSa>, spi: u32| {
            sas.iter().find_map(|(&k, sa)| {
                sa.children.iter().find(|c| c.spi_in == spi || c.spi_out == spi).map(|c| (k, c.spi_in))
            })
        };
        match event {
            SaEvent::SoftExpire { spi } => {
                if let Some((ike_sa, spi_in)) = find(&self.sas, spi) {
                    self.rekey_child(now, ike_sa, spi_in, out);
                }
            }
            SaEvent::HardExpire { spi } => {
                if let Some((ike_sa, spi_in)) = find(&self.sas, spi) {
                    self.delete_child(ike_sa, spi_in, out);
                    self.pump(now, ike_sa, out);
                }
            }
            SaEvent::Acquire { .. } => {}
        }
    }

    /// Rekeys the CHILD_SA whose inbound SPI is `spi_in` (make-before-break: the new one
    /// installed, then the old one removed and deleted with the peer). Sent now, or queued
    /// behind the outstanding request. False: no such CHILD_SA, or its rekey is already
    /// under way.
    pub fn rekey_child(&mut self, now: Instant, ike_sa: u64, spi_in: u32, out: &mut Vec<Output>) -> bool {
        let Some(sa) = self.sas.get_mut(&ike_sa) else { return false };
        if !exchange::create_child::rekeyable(sa, spi_in) {
            return false;
        }
        sa.queued.push_back(ike_sa::Queued::RekeyChild(spi_in));
        self.pump(now, ike_sa, out);
        true
    }

    /// A new CHILD_SA of the configured child `child` on the established IKE SA `ike_sa`
    /// (CREATE_CHILD_SA without REKEY_SA): sent now, or queued behind the outstanding
    /// request. False: no such established IKE SA or child, or a CHILD_SA of that child is
    /// up, being made or queued already.
    pub fn create_child(&mut self, now: Instant, ike_sa: u64, child: &str, out: &mut Vec<Output>) -> bool {
        let Some(sa) = self.sas.get(&ike_sa) else { return false };
        if !exchange::new_child::creatable(self, sa, child) {
            return false;
        }
        let sa = self.sas.get_mut(&ike_sa).expect("present");
        sa.queued.push_back(ike_sa::Queued::NewChild(child.to_owned(), None));
        self.pump(now, ike_sa, out);
        true
    }

    /// Rekeys the IKE SA `ike_sa` (RFC 7296 §2.18): a new IKE SA with new SPIs and keys,
    /// the CHILD_SAs moved to it, the old one deleted. Sent now or queued behind the
    /// outstanding request. False: no such established IKE SA, or its rekey is under way.
    pub fn rekey_ike(&mut self, now: Instant, ike_sa: u64, out: &mut Vec<Output>) -> bool {
        let Some(sa) = self.sas.get_mut(&ike_sa) else { return false };
        if sa.state != State::Established
            || sa.superseded
            || sa.ike_rekey.is_some()
            || sa.queued.contains(&ike_sa::Queued::RekeyIke)
        {
            return false;
        }
        sa.queued.push_back(ike_sa::Queued::RekeyIke);
        self.pump(now, ike_sa, out);
        true
    }

    /// Removes a CHILD_SA here at once (its Remove) and queues the Delete to the peer.
    pub(crate) fn delete_child(&mut self, ike_sa: u64, spi_in: u32, out: &mut Vec<Output>) {
        self.drop_child(ike_sa, spi_in, false, out);
    }

    /// A CHILD_SA a rekey replaced: gone from the IKE SA's children now, its Delete
    /// queued, but its SAs removed only when the peer answered that Delete
    /// (`IkeSa::retiring`), so that what the peer still sends on it arrives.
    pub(crate) fn retire_child(&mut self, ike_sa: u64, spi_in: u32, out: &mut Vec<Output>) {
        self.drop_child(ike_sa, spi_in, true, out);
    }

    fn drop_child(&mut self, ike_sa: u64, spi_in: u32, later: bool, out: &mut Vec<Output>) {
        let Some(sa) = self.sas.get_mut(&ike_sa) else { return };
        let Some(i) = sa.children.iter().position(|c| c.spi_in == spi_in) else { return };
        let c = sa.children.remove(i);
        self.child_spis.remove(&c.spi_in);
        sa.child_gone(ike_sa, c.spi_in, out);
        let remove = io::ChildSaRemove {
            ike_sa,
            spi_in: c.spi_in,
            spi_out: c.spi_out,
            local: sa.local,
            remote: sa.remote,
        };
        if later {
            sa.retiring.push(remove);
        } else {
            out.push(Output::Remove(remove));
        }
        sa.queued.retain(|q| !matches!(q, ike_sa::Queued::RekeyChild(s) | ike_sa::Queued::RekeyChildWith(s, _) if *s == spi_in));
        sa.queued.push_back(ike_sa::Queued::DeleteChild(spi_in));
    }

    /// Sends queued requests while the window is free: stops at the first one sent.
    pub(crate) fn pump(&mut self, now: Instant, ike_sa: u64, out: &mut Vec<Output>) {
        loop {
            let Some(sa) = self.sas.get_mut(&ike_sa) else { return };
            if sa.state != State::Established || sa.requests.outstanding().is_some() {
                return;
            }
            let Some(q) = sa.queued.pop_front() else { return };
            let sent = match q {
                ike_sa::Queued::RekeyChild(spi_in) => {
                    exchange::create_child::start(self, now, ike_sa, spi_in, None, out).is_ok()
                }
                ike_sa::Queued::RekeyChildWith(spi_in, group) => {
                    exchange::create_child::start(self, now, ike_sa, spi_in, Some(group), out).is_ok()
                }
                ike_sa::Queued::DeleteChild(spi_in) => {
                    exchange::informational::send_child_delete(self, now, ike_sa, spi_in, out)
                }
                ike_sa::Queued::RekeyIke => exchange::ike_rekey::start(self, now, ike_sa, out),
                ike_sa::Queued::NewChild(child, group) => {
                    exchange::new_child::start(self, now, ike_sa, &child, group, out)
                }
                ike_sa::Queued::Liveness => exchange::informational::send_liveness(self, now, ike_sa, out),
            };
            if sent {
                return;
            }
        }
    }

    /// One received datagram.
    pub fn datagram(&mut self, now: Instant, d: Datagram, out: &mut Vec<Output>) {
        let Ok(msg) = Message::parse(&d.bytes) else {
            self.stats.drop(Drop::Malformed);
            return;
        };
        if let Err(cause) = self.receive(now, &d, &msg, out) {
            self.stats.drop(cause);
            self.stats.exchange(msg.header.exchange_type).dropped += 1;
        }
    }

    fn receive(
        &mut self,
        now: Instant,
        d: &Datagram,
        msg: &Message,
        out: &mut Vec<Output>,
    ) -> Result<(), Drop> {
        let h = msg.header;
        {
            let c = self.stats.exchange(h.exchange_type);
            if h.response {
                c.responses_received += 1;
            } else {
                c.requests_received += 1;
            }
        }
        if h.exchange_type == ExchangeType::IKE_SA_INIT && !h.response && h.spi_r == 0 {
            if !h.initiator || h.message_id != 0 {
                return Err(Drop::Malformed);
            }
            if let Some(spi) = self.init_index.get(&(h.spi_i, d.remote)) {
                let sa = &self.sas[spi];
                if let Incoming::Retransmitted(bytes) = sa.responses.classify(0, &d.bytes) {
                    let bytes = bytes.to_vec();
                    self.resend(sa.local, sa.remote, bytes, out);
                    self.stats.responses_resent += 1;
                    return Ok(());
                }
                return Err(Drop::OutOfWindow);
            }
            return exchange::sa_init::respond(self, now, d, msg, out);
        }
        let ours = if h.initiator { h.spi_r } else { h.spi_i };
        let sa = self.sas.get(&ours).ok_or(Drop::UnknownSa)?;
        if sa.initiator == h.initiator || (!sa.initiator && sa.spi_i != h.spi_i) {
            return Err(Drop::UnknownSa);
        }
        if h.response {
            if !sa.requests.matches(h.message_id) {
                return Err(Drop::UnexpectedResponse);
            }
            if let Some(f) = msg.fragment() {
                if !self.reassemble(ours, d, msg, f)? {
                    return Ok(());
                }
            }
            let r = match (self.sas[&ours].state, h.exchange_type) {
                (State::InitSent, ExchangeType::IKE_SA_INIT) => {
                    exchange::sa_init::response(self, now, ours, d, msg, out)
                }
                (State::AuthSent, ExchangeType::IKE_AUTH) => {
                    exchange::auth::response(self, now, ours, d, msg, out)
                }
                (State::Deleting, ExchangeType::INFORMATIONAL) => {
                    exchange::informational::response(self, ours, d, msg, out)
                }
                (State::Established, ExchangeType::INFORMATIONAL) => {
                    exchange::informational::child_delete_response(self, now, ours, d, msg, out)
                }
                (State::Established, ExchangeType::CREATE_CHILD_SA) => {
                    exchange::create_child::response(self, now, ours, d, msg, out)
                }
                _ => Err(Drop::UnexpectedExchange),
            };
            self.reassembled(ours);
            if r.is_ok() {
                self.heard(now, ours, d.remote, out);
            }
            return r;
        }
        match sa.responses.classify(h.message_id, &d.bytes) {
            Incoming::Retransmitted(bytes) => {
                let bytes = bytes.to_vec();
                let (local, remote) = (sa.local, sa.remote);
                self.resend(local, remote, bytes, out);
                self.stats.responses_resent += 1;
                Ok(())
            }
            // RFC 7383 §2.6.1: of a request already answered, only fragment 1 brings the
            // response again (above); the others are ignored.
            Incoming::OutOfWindow => Err(match msg.fragment() {
                Some(f) if f.number != 1 && h.message_id.wrapping_add(1) == sa.responses.expected() => {
                    Drop::FragmentOfAnswered
                }
                _ => Drop::OutOfWindow,
            }),
            Incoming::New => {
                if let Some(f) = msg.fragment() {
                    if !self.reassemble(ours, d, msg, f)? {
                        return Ok(());
                    }
                }
                let sa = &self.sas[&ours];
                let r = match (sa.state, h.exchange_type) {
                    (State::HalfOpen, ExchangeType::IKE_AUTH) => {
                        exchange::auth::request(self, now, ours, d, msg, out)
                    }
                    (State::Established | State::Deleting, ExchangeType::INFORMATIONAL) => {
                        exchange::informational::request(self, now, ours, d, msg, out)
                    }
                    (State::Established | State::Deleting, ExchangeType::CREATE_CHILD_SA) => {
                        exchange::create_child::request(self, now, ours, d, msg, out)
                    }
                    _ => Err(Drop::UnexpectedExchange),
                };
                self.reassembled(ours);
                if r.is_ok() {
                    self.heard(now, ours, d.remote, out);
                }
                r
            }
        }
    }

    /// Fragment `f` of `msg` (a request in the window, or the response to our outstanding
    /// request) on IKE SA `spi`: checked, authenticated and kept ([`fragments`]). True: the
    /// message is whole, its payloads in `IkeSa::reassembled` for the exchange to take
    /// ([`IkeSa::open`]); false: more fragments are needed.
    fn reassemble(&mut self, spi: u64, d: &Datagram, msg: &Message, f: &Fragment) -> Result<bool, Drop> {
        let cfg = self.settings.fragments;
        let sa = self.sas.get_mut(&spi).expect("looked up by the caller");
        if self.config.connections[sa.conn].fragmentation == Fragmentation::No {
            return Err(Drop::FragmentUnexpected);
        }
        let Some((_, inb)) = sa.sk.as_ref() else { return Err(Drop::FragmentUnexpected) };
        let h = msg.header;
        let slot = &mut sa.reassembly[usize::from(h.response)];
        let restart = Reassembly::precheck(slot, h.message_id, f.number, f.total, &cfg)?;
        let aad_len = msg.aad_len().ok_or(Drop::MissingPayload)?;
        let plain = inb.open_message(&d.bytes, aad_len).map_err(|_| Drop::Unauthenticated)?;
        self.stats.fragments_received += 1;
        let piece = Piece {
            message_id: h.message_id,
            number: f.number,
            total: f.total,
            inner: f.inner,
            plain,
            datagram: &d.bytes,
        };
        match Reassembly::add(slot, restart, piece, &cfg)? {
            Added::Incomplete => Ok(false),
            Added::Complete(whole) => {
                let payloads = parse_chain(whole.inner, &whole.bytes).map_err(|_| Drop::Malformed)?;
                sa.reassembled = Some(Reassembled {
                    message_id: h.message_id,
                    response: h.response,
                    payloads,
                    first: whole.first,
                });
                self.stats.messages_reassembled += 1;
                Ok(true)
            }
        }
    }

    /// The exchange has run on the reassembled message of IKE SA `spi`, if any: it is
    /// forgotten, and a request's retransmission is from now on recognised by its first
    /// fragment (RFC 7383 §2.6.1; the exchange cached its answer under the last one).
    fn reassembled(&mut self, spi: u64) {
        let Some(sa) = self.sas.get_mut(&spi) else { return };
        if let Some(r) = sa.reassembled.take() {
            if !r.response {
                sa.responses.recognised_by(r.message_id, r.first);
            }
        }
    }

    /// The longest message we send to the peer of `sa` from `local` in one piece, when
    /// longer ones go as fragments: our connection fragments (`yes` and the peer announced
    /// support, or `force`). None: never fragmented (`no`, `accept`).
    pub(crate) fn fragment_limit(&self, sa: &IkeSa, local: SocketAddr) -> Option<usize> {
        let on = match self.config.connections[sa.conn].fragmentation {
            Fragmentation::No | Fragmentation::Accept => false,
            Fragmentation::Yes => sa.peer_fragmentation,
            Fragmentation::Force => true,
        };
        on.then(|| fragments::max_message_len(self.settings.fragments.size, local))
    }

    /// A message from the peer of IKE SA `spi` was accepted (on an established IKE SA:
    /// its ICV verified): the peer is alive, and a peer behind a NAT that now sends from
    /// another port has moved there (§2.23; a retransmitted request, answered from the
    /// cache, is not proof and does not come here).
    fn heard(&mut self, now: Instant, spi: u64, from: SocketAddr, out: &mut Vec<Output>) {
        let Some(sa) = self.sas.get_mut(&spi) else { return };
        sa.last_heard = now;
        if sa.state == State::Established {
            self.move_peer(spi, from, out);
        }
    }

    /// The peer of IKE SA `spi`, behind a NAT, now sends from `to`: the IKE SA answers
    /// there, and each CHILD_SA is migrated (Migrate). Only a change of port on the same
    /// address is taken (a NAT's new mapping); nothing without a NAT in front of the peer.
    fn move_peer(&mut self, spi: u64, to: SocketAddr, out: &mut Vec<Output>) {
        let Some(sa) = self.sas.get_mut(&spi) else { return };
        let from = sa.remote;
        if from == to || !sa.nat_remote || from.ip() != to.ip() {
            return;
        }
        sa.remote = to;
        for c in &sa.children {
            out.push(Output::Migrate(io::ChildSaMigrate {
                ike_sa: spi,
                spi_in: c.spi_in,
                spi_out: c.spi_out,
                local: sa.local,
                old_remote: from,
                remote: to,
            }));
        }
        self.stats.peer_moves += 1;
        out.push(Output::Event(Event::PeerMoved { ike_sa: spi, from, to }));
    }

    /// Inbound traffic on the CHILD_SA whose inbound SPI is `spi_in` was last seen at `at`
    /// (iked reads it from ipsecd's `dump`, `last-used … in-ms=N`): the peer is alive then,
    /// and no liveness check goes before `at + dpd_delay`. False: no such CHILD_SA.
    pub fn child_traffic(&mut self, at: Instant, spi_in: u32) -> bool {
        let Some(sa) = self.sas.values_mut().find(|sa| sa.children.iter().any(|c| c.spi_in == spi_in)) else {
            return false;
        };
        sa.last_heard = sa.last_heard.max(at);
        true
    }

    /// ipsecd's `peer-moved`: an authenticated ESP-in-UDP packet on the inbound CHILD_SA
    /// `spi_in` came from the peer's port `port` (ipsecd already sends there). The IKE SA
    /// follows (§2.23: ESP's ICV authenticated the packet) and its other CHILD_SAs are
    /// migrated. False: no such CHILD_SA.
    pub fn peer_moved(&mut self, now: Instant, spi_in: u32, port: u16, out: &mut Vec<Output>) -> bool {
        let Some((&spi, sa)) =
            self.sas.iter_mut().find(|(_, sa)| sa.children.iter().any(|c| c.spi_in == spi_in))
        else {
            return false;
        };
        sa.last_heard = sa.last_heard.max(now);
        let to = SocketAddr::new(sa.remote.ip(), port);
        self.move_peer(spi, to, out);
        true
    }

    /// Whether some established IKE SA with liveness checks on (dpd_delay) has a check
    /// due within `within` (it heard nothing from its peer for dpd_delay − `within`): then
    /// iked asks ipsecd when its CHILD_SAs last saw traffic (`child_traffic`) before the
    /// check goes.
    pub fn quiet(&self, now: Instant, within: Duration) -> bool {
        self.sas.values().any(|sa| {
            let d = self.config.connections[sa.conn].dpd_delay;
            sa.state == State::Established && !d.is_zero() && now.duration_since(sa.last_heard) + within >= d
        })
    }

    /// The established IKE SAs that heard nothing for dpd_delay and have no request out:
    /// a liveness check is queued on each.
    fn liveness_due(&mut self, now: Instant) -> Vec<u64> {
        let mut due = Vec::new();
        for (&spi, sa) in self.sas.iter_mut() {
            let d = self.config.connections[sa.conn].dpd_delay;
            if sa.state != State::Established
                || d.is_zero()
                || now.duration_since(sa.last_heard) < d
                || sa.requests.outstanding().is_some()
                || !sa.queued.is_empty()
            {
                continue;
            }
            sa.queued.push_back(ike_sa::Queued::Liveness);
            due.push(spi);
        }
        due
    }

    fn resend(&self, local: SocketAddr, remote: SocketAddr, bytes: Vec<Vec<u8>>, out: &mut Vec<Output>) {
        for b in bytes {
            out.push(Output::Send(Datagram { local, remote, bytes: b }));
        }
    }

    /// Timers: retransmissions, dead peers, half-open timeouts, rekeys, redundant IKE SAs
    /// left by the peer, liveness checks, the cookie secret.
    pub fn tick(&mut self, now: Instant, out: &mut Vec<Output>) {
        let _ = self.cookies.rotate(&self.fw, now);
        let mut dead: Vec<(u64, DownReason)> = Vec::new();
        let cfg = self.settings.retransmit;
        for sa in self.sas.values_mut() {
            if sa.state == State::HalfOpen
                && now.duration_since(sa.created) >= self.settings.half_open.timeout
            {
                dead.push((sa.our_spi(), DownReason::HalfOpenTimeout));
                self.stats.half_open_expired += 1;
                continue;
            }
            let (local, remote) = (sa.local, sa.remote);
            if let Some(r) = sa.retransmit.as_mut() {
                match r.poll(now, &cfg) {
                    Due::NotYet => {}
                    Due::Resend(bytes) => {
                        for b in bytes {
                            out.push(Output::Send(Datagram { local, remote, bytes: b.clone() }));
                        }
                        self.stats.retransmissions += 1;
                    }
                    Due::GiveUp => {
                        self.stats.retransmit_timeouts += 1;
                        dead.push((sa.our_spi(), sa.init.refused.unwrap_or(DownReason::PeerDead)));
                    }
                }
            }
        }
        for (spi, reason) in dead {
            let restart = if reason == DownReason::PeerDead { self.restart_of(spi) } else { None };
            self.remove_sa(spi, out);
            out.push(Output::Event(Event::IkeSaDown { ike_sa: spi, reason }));
            if let Some((conn, child)) = restart {
                let _ = self.initiate(now, &conn, &child, out);
            }
        }
        for spi in self.rekeys_due(now) {
            self.rekey_ike(now, spi, out);
        }
        for spi in self.redundant_due(now) {
            self.terminate(now, spi, out);
        }
        for spi in self.liveness_due(now) {
            self.pump(now, spi, out);
        }
        self.update_cookies(out);
    }

    /// What a dead peer's IKE SA restarts (`dpd_action = restart`, RFC 7296 §2.4 leaves
    /// it to policy): its connection and the first of its CHILD_SAs whose child says
    /// restart, or, with none up, the connection's first such child. `none` and `trap`
    /// (iked's traps stay installed) restart nothing.
    fn restart_of(&self, spi: u64) -> Option<(String, String)> {
        let sa = self.sas.get(&spi).filter(|sa| sa.state == State::Established)?;
        let conn = &self.config.connections[sa.conn];
        let restarts = |name: &str| {
            conn.children.iter().any(|c| c.name == name && c.dpd_action == config::DpdAction::Restart)
        };
        let child = sa
            .children
            .iter()
            .map(|c| c.name.as_str())
            .find(|n| restarts(n))
            .or_else(|| {
                sa.pending_child
                    .as_ref()
                    .map(|p| conn.children[p.child].name.as_str())
                    .filter(|n| restarts(n))
            })
            .or_else(|| {
                if sa.children.is_empty() {
                    conn.children
                        .iter()
                        .find(|c| c.dpd_action == config::DpdAction::Restart)
                        .map(|c| c.name.as_str())
                } else {
                    None
                }
            })?;
        Some((conn.name.clone(), child.to_string()))
    }

    /// The established IKE SAs whose rekey time has come; each one's next rekey time set
    /// (the first: rekey_time less a random part of rand_time after now; a due one: a
    /// whole rekey_time later, a retry should this rekey fail). A zero rekey_time: never.
    fn rekeys_due(&mut self, now: Instant) -> Vec<u64> {
        let mut due = Vec::new();
        for (&spi, sa) in self.sas.iter_mut() {
            let l = self.config.connections[sa.conn].lifetimes;
            if sa.state != State::Established || sa.superseded || l.rekey_time.is_zero() {
                continue;
            }
            match sa.rekey_at {
                None => {
                    let u = child_sa::random_u32(&self.fw)
                        .map_or(0.0, |r| f64::from(r) / (f64::from(u32::MAX) + 1.0));
                    sa.rekey_at = Some(now + l.rekey_time.saturating_sub(l.rand_time.mul_f64(u)));
                }
                Some(at) if now >= at => {
                    sa.rekey_at = Some(now + l.rekey_time);
                    due.push(spi);
                }
                Some(_) => {}
            }
        }
        due
    }

    /// The redundant IKE SAs of crossing rekeys we won whose peer has not deleted them by
    /// their `delete_at` (see `exchange::ike_rekey`): each is deleted by us now. One that
    /// holds CHILD_SAs after all is kept.
    fn redundant_due(&mut self, now: Instant) -> Vec<u64> {
        let mut due = Vec::new();
        for (&spi, sa) in self.sas.iter_mut() {
            match sa.delete_at {
                Some(at) if now >= at => {
                    sa.delete_at = None;
                    if sa.state == State::Established && sa.children.is_empty() {
                        due.push(spi);
                    }
                }
                _ => {}
            }
        }
        due
    }

    /// Removes an IKE SA, its CHILD_SAs (Remove outputs) and its half-open count.
    fn remove_sa(&mut self, spi: u64, out: &mut Vec<Output>) -> bool {
        let Some(sa) = self.sas.remove(&spi) else { return false };
        if sa.state == State::HalfOpen {
            self.half_open -= 1;
            self.stats.half_open = self.half_open as u64;
        }
        if !sa.initiator {
            self.init_index.remove(&(sa.spi_i, sa.remote));
        }
        if let Some(r) = &sa.child_rekey {
            self.child_spis.remove(&r.spi_in);
        }
        if let Some(p) = &sa.pending_child {
            self.child_spis.remove(&p.spi_in);
        }
        if let Some(c) = &sa.child_create {
            self.child_spis.remove(&c.spi_in);
        }
        for c in &sa.children {
            self.child_spis.remove(&c.spi_in);
            out.push(Output::Remove(io::ChildSaRemove {
                ike_sa: spi,
                spi_in: c.spi_in,
                spi_out: c.spi_out,
                local: sa.local,
                remote: sa.remote,
            }));
        }
        out.extend(sa.retiring.into_iter().map(Output::Remove));
        if matches!(sa.state, State::Established | State::Deleting) {
            self.stats.ike_sas_down += 1;
        }
        true
    }

    /// Announces cookies turning on or off as the half-open count crosses the threshold.
    fn update_cookies(&mut self, out: &mut Vec<Output>) {
        let on = self.settings.half_open.cookies_on(self.half_open);
        if on != self.cookies_on {
            self.cookies_on = on;
            self.stats.cookies_on = u64::from(on);
            out.push(Output::Event(Event::Cookies { on }));
        }
    }
}
