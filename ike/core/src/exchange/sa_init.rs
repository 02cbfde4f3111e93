//! IKE_SA_INIT (RFC 7296 §1.2), both roles.
//!
//! ```text
//!  initiator                                   responder
//!  HDR(SPIi,0), [N(COOKIE)], SA, KEi, Ni,
//!    N(NAT_D_SRC), N(NAT_D_DST) ──────────────▶ cookie check (half_open) ─▶ HDR, N(COOKIE)
//!                                              proposal (our order)  ─ none ─▶ N(NO_PROPOSAL_CHOSEN)
//!                                              KEi's group ≠ chosen ───────▶ N(INVALID_KE_PAYLOAD)
//!                                              (these three keep no state)
//!  ◀────────────────────────────────────────── HDR(SPIi,SPIr), SA, KEr, Nr, N(NAT_D_SRC), N(NAT_D_DST)
//!  COOKIE: same request with the cookie first; INVALID_KE_PAYLOAD: a new share of the
//!  asked group (if we proposed it); SA checked against ours; g^ir; keys; NAT-D compared:
//!  a NAT on either side moves IKE (and ESP, in UDP) to port 4500 from IKE_AUTH on.
//! ```
//!
//! An error notify in the response (NO_PROPOSAL_CHOSEN, …) is unauthenticated: it is
//! counted and remembered, the request keeps being retransmitted, and the IKE SA goes
//! down with that reason only when the retransmissions run out.
//!
//! IKEV2_FRAGMENTATION_SUPPORTED (RFC 7383 §2.3) is sent when our connection reassembles
//! (`fragmentation` other than `no`; the responder only when the request had it too) and
//! recorded from the peer: it decides whether our large messages go out fragmented.
//! SIGNATURE_HASH_ALGORITHMS (RFC 7427) is sent when our authentication is by signature
//! and recorded from the peer.
//!
//! The responder takes the first connection whose addresses fit; its IKE_AUTH may move to
//! another whose addresses fit too, by the identities (auth.rs). So the response's
//! SIGNATURE_HASH_ALGORITHMS and CERTREQs are those of every connection that fits: a
//! peer authenticating by certificate is asked for it whichever connection it means.

use std::net::SocketAddr;
use std::time::Instant;

use ike_wire::ids::{ExchangeType, HashAlgorithm, NotifyType};
use ike_wire::ke::Ke;
use ike_wire::nonce::Nonce;
use ike_wire::notify::Notify;
use ike_wire::sa::Sa;
use ike_wire::{header, Message, Payload};

use crate::config::{AuthMethod, Connection, Fragmentation};
use crate::crypto::{self, natd_hash, IkeKeys, IkeSuite, KeMethod, KeyShare, Prf};
use crate::half_open::Admission;
use crate::ike_sa::{IkeSa, PendingChild, State};
use crate::io::{Datagram, DownReason, Event, Output};
use crate::proposals::{self, Chosen};
use crate::retransmit::Retransmit;
use crate::stats::Drop;
use crate::window::ResponseWindow;
use crate::{Ike, InitiateError};

/// IKE's port, and the one it moves to when a NAT is found (RFC 3948).
pub(crate) const IKE_PORT: u16 = 500;
pub(crate) const NAT_T_PORT: u16 = 4500;

/// The hash algorithms we verify (RFC 7427), when we authenticate by signature.
const OUR_HASHES: [HashAlgorithm; 3] =
    [HashAlgorithm::SHA2_256, HashAlgorithm::SHA2_384, HashAlgorithm::SHA2_512];

fn spi_bytes(spi: u64) -> [u8; 8] {
    spi.to_be_bytes()
}

fn natd(
    ike: &Ike,
    spi_i: u64,
    spi_r: u64,
    addr: SocketAddr,
    t: NotifyType,
) -> Result<Payload, crypto::CryptoError> {
    Ok(Payload::Notify(Notify::with_nat_detection(
        t,
        natd_hash(&ike.fw, &spi_bytes(spi_i), &spi_bytes(spi_r), addr)?,
    )))
}

/// Whether a NAT sits (local: at our end, remote: at the peer's) from the NAT-D notifies
/// of `msg`; `None` when the peer sent none (it does not do NAT traversal).
fn nat_detect(
    ike: &Ike,
    msg: &Message,
    spi_i: u64,
    spi_r: u64,
    d: &Datagram,
) -> Result<Option<(bool, bool)>, Drop> {
    let src: Vec<[u8; 20]> = msg
        .notifies()
        .filter(|n| n.notify_type == NotifyType::NAT_DETECTION_SOURCE_IP)
        .map(|n| n.nat_detection_hash().map_err(|_| Drop::Malformed))
        .collect::<Result<_, _>>()?;
    let dst = match msg.notify(NotifyType::NAT_DETECTION_DESTINATION_IP) {
        Some(n) => n.nat_detection_hash().map_err(|_| Drop::Malformed)?,
        None if src.is_empty() => return Ok(None),
        None => return Err(Drop::MissingPayload),
    };
    let h = |a| natd_hash(&ike.fw, &spi_bytes(spi_i), &spi_bytes(spi_r), a).map_err(|_| Drop::BadPeerValue);
    let local = dst != h(d.local)?;
    let remote_hash = h(d.remote)?;
    let remote = !src.contains(&remote_hash);
    Ok(Some((local, remote)))
}

/// The initiator's request as it stands (cookie, group, nonce in `sa.init`).
fn request_bytes(ike: &Ike, sa: &IkeSa, conn: &Connection) -> Result<Vec<u8>, InitiateError> {
    let share = sa.init.key_share.as_ref().expect("a key share before the request");
    let mut payloads = Vec::with_capacity(8);
    if let Some(c) = &sa.init.cookie {
        payloads.push(Payload::Notify(Notify::new(NotifyType::COOKIE, c.clone())));
    }
    payloads.push(Payload::Sa(Sa {
        proposals: proposals::offer(&proposals::usable(&conn.proposals), &[], true),
    }));
    payloads.push(Payload::Ke(Ke { group: share.method().id(), data: share.public_value().to_vec() }));
    payloads.push(Payload::Nonce(Nonce(sa.init.ni.clone())));
    payloads.push(
        natd(ike, sa.spi_i, 0, sa.local, NotifyType::NAT_DETECTION_SOURCE_IP)
            .map_err(InitiateError::Crypto)?,
    );
    payloads.push(
        natd(ike, sa.spi_i, 0, sa.remote, NotifyType::NAT_DETECTION_DESTINATION_IP)
            .map_err(InitiateError::Crypto)?,
    );
    if conn.fragmentation != Fragmentation::No {
        payloads.push(Payload::Notify(Notify::new(NotifyType::IKEV2_FRAGMENTATION_SUPPORTED, vec![])));
    }
    if conn.local.method == AuthMethod::Pubkey {
        payloads.push(Payload::Notify(Notify::with_signature_hash_algorithms(&OUR_HASHES)));
    }
    Message { header: sa.header(ExchangeType::IKE_SA_INIT, false, 0), payloads }
        .to_bytes()
        .map_err(InitiateError::Wire)
}

/// (Re)sends the IKE_SA_INIT request of the SA `spi` as it stands.
fn send_request(ike: &mut Ike, now: Instant, spi: u64, out: &mut Vec<Output>) -> Result<(), InitiateError> {
    let sa = &ike.sas[&spi];
    let bytes = request_bytes(ike, sa, &ike.config.connections[sa.conn])?;
    let sa = ike.sas.get_mut(&spi).expect("present");
    sa.requests.restart();
    let _ = sa.requests.start();
    sa.init.msg_i = bytes.clone();
    sa.retransmit = Some(Retransmit::new(now, vec![bytes.clone()], &ike.settings.retransmit));
    out.push(Output::Send(Datagram { local: sa.local, remote: sa.remote, bytes }));
    ike.stats.sa_init.requests_sent += 1;
    Ok(())
}

pub(crate) fn initiate(
    ike: &mut Ike,
    now: Instant,
    conn: &str,
    child: &str,
    out: &mut Vec<Output>,
) -> Result<u64, InitiateError> {
    let ci = ike
        .live_connections()
        .iter()
        .position(|c| c.name == conn)
        .ok_or_else(|| InitiateError::NoConnection(conn.into()))?;
    let c = &ike.config.connections[ci];
    let child = c
        .children
        .iter()
        .position(|x| x.name == child)
        .ok_or_else(|| InitiateError::NoChild(child.into()))?;
    let (Some(&l), Some(&r)) = (c.local_addrs.first(), c.remote_addrs.first()) else {
        return Err(InitiateError::NoAddress);
    };
    let usable = proposals::usable(&c.proposals);
    let first = usable.first().ok_or(InitiateError::NoUsableProposal)?;
    let method = KeMethod::from_id(first.dh[0]).map_err(InitiateError::Crypto)?;
    // The nonce must suit every PRF we offer: its length is checked against the strongest.
    let prf = usable
        .iter()
        .flat_map(|p| &p.prf)
        .filter_map(|&p| Prf::from_id(p).ok())
        .max_by_key(|p| p.output_len());
    let ni = crypto::nonce(&ike.fw, prf.unwrap_or(Prf::HmacSha256), ike.settings.nonce_len)
        .map_err(InitiateError::Crypto)?;
    let share = KeyShare::generate(&ike.fw, method).map_err(InitiateError::Crypto)?;
    let spi_i = loop {
        let s = u64::from_be_bytes(crypto::ike_spi(&ike.fw).map_err(InitiateError::Crypto)?);
        if !ike.sas.contains_key(&s) {
            break s;
        }
    };
    let mut sa = IkeSa::new(
        spi_i,
        true,
        State::InitSent,
        ci,
        SocketAddr::new(l, IKE_PORT),
        SocketAddr::new(r, IKE_PORT),
        now,
    );
    sa.init.ni = ni;
    sa.init.ke_group = Some(method.id());
    sa.init.key_share = Some(share);
    sa.pending_child = Some(PendingChild { child, spi_in: 0 });
    ike.sas.insert(spi_i, sa);
    if let Err(e) = send_request(ike, now, spi_i, out) {
        ike.sas.remove(&spi_i);
        return Err(e);
    }
    Ok(spi_i)
}

/// A response that keeps no state: COOKIE, INVALID_KE_PAYLOAD, NO_PROPOSAL_CHOSEN.
fn stateless_reply(ike: &mut Ike, d: &Datagram, h: &header::Repr, n: Notify, out: &mut Vec<Output>) {
    let header = header::Repr { spi_r: 0, initiator: false, response: true, other_flags: 0, ..*h };
    if n.notify_type.is_error() {
        ike.stats.sa_init.errors_sent += 1;
    }
    if let Ok(bytes) = (Message { header, payloads: vec![Payload::Notify(n)] }).to_bytes() {
        ike.stats.sa_init.responses_sent += 1;
        out.push(Output::Send(Datagram { local: d.local, remote: d.remote, bytes }));
    }
}

fn find<'a, T>(msg: &'a Message, f: impl Fn(&'a Payload) -> Option<&'a T>) -> Result<&'a T, Drop> {
    msg.payloads.iter().find_map(f).ok_or(Drop::MissingPayload)
}

/// The responder's side: a new IKE_SA_INIT request (not a retransmission).
pub(crate) fn respond(
    ike: &mut Ike,
    now: Instant,
    d: &Datagram,
    msg: &Message,
    out: &mut Vec<Output>,
) -> Result<(), Drop> {
    let h = msg.header;
    let sa_p = find(msg, |p| if let Payload::Sa(x) = p { Some(x) } else { None })?;
    let ke = find(msg, |p| if let Payload::Ke(x) = p { Some(x) } else { None })?;
    let ni = &find(msg, |p| if let Payload::Nonce(x) = p { Some(x) } else { None })?.0;

    let valid_cookie = match msg.notify(NotifyType::COOKIE) {
        Some(n) => ike.cookies.verify(&ike.fw, &n.data, ni, d.remote.ip(), h.spi_i),
        None => false,
    };
    match ike.settings.half_open.admit(ike.half_open, valid_cookie) {
        Admission::Refuse => return Err(Drop::HalfOpenFull),
        Admission::RequireCookie => {
            let c = ike.cookies.make(&ike.fw, ni, d.remote.ip(), h.spi_i).map_err(|_| Drop::BadPeerValue)?;
            ike.stats.cookies_sent += 1;
            stateless_reply(ike, d, &h, Notify::new(NotifyType::COOKIE, c.to_vec()), out);
            return Ok(());
        }
        Admission::Admit => {}
    }
    if valid_cookie {
        ike.stats.cookies_accepted += 1;
    }

    let Some(ci) = ike.live_connections().iter().position(|c| super::addresses_fit(c, d)) else {
        stateless_reply(ike, d, &h, Notify::new(NotifyType::NO_PROPOSAL_CHOSEN, vec![]), out);
        return Ok(());
    };
    let conn = &ike.config.connections[ci];
    let ours = proposals::prefer_group(&proposals::usable(&conn.proposals), ke.group);
    let Some(chosen) = proposals::choose(&ours, &sa_p.proposals, false) else {
        stateless_reply(ike, d, &h, Notify::new(NotifyType::NO_PROPOSAL_CHOSEN, vec![]), out);
        return Ok(());
    };
    let group = chosen.ke.expect("an IKE proposal has a KE");
    if group != ke.group {
        stateless_reply(ike, d, &h, Notify::invalid_ke_payload(group), out);
        return Ok(());
    }
    let suite = suite_of(&chosen).ok_or(Drop::BadProposal)?;
    crypto::check_nonce(suite.prf, ni.len()).map_err(|_| Drop::BadPeerValue)?;
    let (ker, g_ir) = crypto::encapsulate(&ike.fw, suite.ke, &ke.data).map_err(|_| Drop::BadPeerValue)?;
    let nr = crypto::nonce(&ike.fw, suite.prf, ike.settings.nonce_len).map_err(|_| Drop::BadPeerValue)?;
    let spi_r = loop {
        let s = u64::from_be_bytes(crypto::ike_spi(&ike.fw).map_err(|_| Drop::BadPeerValue)?);
        if !ike.sas.contains_key(&s) {
            break s;
        }
    };
    let keys = IkeKeys::new_sa(&ike.fw, &suite, &g_ir, ni, &nr, &spi_bytes(h.spi_i), &spi_bytes(spi_r))
        .map_err(|_| Drop::BadPeerValue)?;
    let sk = keys.sk_ciphers(&ike.fw, &suite, false).map_err(|_| Drop::BadPeerValue)?;
    let nat = nat_detect(ike, msg, h.spi_i, 0, d)?;

    let mut payloads = vec![
        Payload::Sa(Sa { proposals: vec![chosen.to_wire(crate::config::Protocol::Ike, &[])] }),
        Payload::Ke(Ke { group, data: ker }),
        Payload::Nonce(Nonce(nr.clone())),
    ];
    if nat.is_some() {
        let natd_err = |_| Drop::BadPeerValue;
        payloads
            .push(natd(ike, h.spi_i, spi_r, d.local, NotifyType::NAT_DETECTION_SOURCE_IP).map_err(natd_err)?);
        payloads.push(
            natd(ike, h.spi_i, spi_r, d.remote, NotifyType::NAT_DETECTION_DESTINATION_IP)
                .map_err(natd_err)?,
        );
    }
    if conn.fragmentation != Fragmentation::No
        && msg.notify(NotifyType::IKEV2_FRAGMENTATION_SUPPORTED).is_some()
    {
        payloads.push(Payload::Notify(Notify::new(NotifyType::IKEV2_FRAGMENTATION_SUPPORTED, vec![])));
    }
    // IKE_AUTH may settle on another connection with these addresses (the identities
    // decide: auth.rs), so what a certificate round needs is offered for all of them: our
    // hashes where one of them signs, and a CERTREQ for each one's CAs.
    let candidates: Vec<usize> = (0..ike.live_connections().len())
        .filter(|&i| super::addresses_fit(&ike.config.connections[i], d))
        .collect();
    if candidates.iter().any(|&i| ike.config.connections[i].local.method == AuthMethod::Pubkey) {
        payloads.push(Payload::Notify(Notify::with_signature_hash_algorithms(&OUR_HASHES)));
    }
    for i in candidates {
        if let Some(req) = super::proof::certreq(ike, i) {
            if !payloads.contains(&req) {
                payloads.push(req);
            }
        }
    }
    let header = header::Repr { spi_r, initiator: false, response: true, other_flags: 0, ..h };
    let bytes = Message { header, payloads }.to_bytes().map_err(|_| Drop::Malformed)?;

    let mut sa = IkeSa::new(h.spi_i, false, State::HalfOpen, ci, d.local, d.remote, now);
    sa.spi_r = spi_r;
    (sa.nat_local, sa.nat_remote) = nat.unwrap_or((false, false));
    record_extensions(&mut sa, msg);
    sa.init.ni = ni.clone();
    sa.init.nr = nr;
    sa.init.msg_i = d.bytes.clone();
    sa.init.msg_r = bytes.clone();
    sa.suite = Some(suite);
    sa.keys = Some(keys);
    sa.sk = Some(sk);
    sa.requests = crate::window::RequestWindow::starting_at(0);
    sa.responses = ResponseWindow::after(1, Some((d.bytes.clone(), vec![bytes.clone()])));
    ike.sas.insert(spi_r, sa);
    ike.init_index.insert((h.spi_i, d.remote), spi_r);
    ike.half_open += 1;
    ike.stats.half_open = ike.half_open as u64;
    ike.stats.sa_init.responses_sent += 1;
    out.push(Output::Send(Datagram { local: d.local, remote: d.remote, bytes }));
    ike.update_cookies(out);
    Ok(())
}

fn suite_of(c: &Chosen) -> Option<IkeSuite> {
    IkeSuite::from_ids(c.encr.id, c.encr.key_bits, c.integ, c.prf?, c.ke?).ok()
}

fn record_extensions(sa: &mut IkeSa, msg: &Message) {
    sa.peer_fragmentation = msg.notify(NotifyType::IKEV2_FRAGMENTATION_SUPPORTED).is_some();
    if let Some(n) = msg.notify(NotifyType::SIGNATURE_HASH_ALGORITHMS) {
        sa.peer_hashes = n.signature_hash_algorithms().unwrap_or_default();
    }
}

/// The initiator's side: the response to our IKE_SA_INIT.
pub(crate) fn response(
    ike: &mut Ike,
    now: Instant,
    spi: u64,
    d: &Datagram,
    msg: &Message,
    out: &mut Vec<Output>,
) -> Result<(), Drop> {
    let sa = &ike.sas[&spi];
    let conn = &ike.config.connections[sa.conn];
    if let Some(n) = msg.notify(NotifyType::COOKIE) {
        let c = n.cookie().map_err(|_| Drop::Malformed)?;
        if c.is_empty() || c.len() > 64 || sa.init.cookie.as_deref() == Some(c) {
            return Err(Drop::BadPeerValue);
        }
        let c = c.to_vec();
        ike.sas.get_mut(&spi).expect("present").init.cookie = Some(c);
        return send_request(ike, now, spi, out).map_err(|_| Drop::BadPeerValue);
    }
    if let Some(n) = msg.notify(NotifyType::INVALID_KE_PAYLOAD) {
        let group = n.invalid_ke_group().map_err(|_| Drop::Malformed)?;
        let offered = proposals::usable(&conn.proposals).iter().any(|p| p.dh.contains(&group));
        if !offered || Some(group) == sa.init.ke_group {
            return Err(Drop::BadProposal);
        }
        let method = KeMethod::from_id(group).map_err(|_| Drop::BadProposal)?;
        let share = KeyShare::generate(&ike.fw, method).map_err(|_| Drop::BadPeerValue)?;
        let sa = ike.sas.get_mut(&spi).expect("present");
        sa.init.key_share = Some(share);
        sa.init.ke_group = Some(group);
        return send_request(ike, now, spi, out).map_err(|_| Drop::BadPeerValue);
    }
    if let Some(n) = msg.notifies().find(|n| n.notify_type.is_error()) {
        // Unprotected, so possibly forged by anyone who saw our request: noted, not acted
        // on (Build point 7). The retransmissions go on; a genuine answer still completes
        // the exchange, and if none comes the IKE SA goes down for this reason.
        let reason = if n.notify_type == NotifyType::NO_PROPOSAL_CHOSEN {
            DownReason::NoProposal
        } else {
            DownReason::Refused
        };
        ike.stats.sa_init.errors_received += 1;
        ike.sas.get_mut(&spi).expect("present").init.refused = Some(reason);
        return Ok(());
    }
    let h = msg.header;
    let sa_p = find(msg, |p| if let Payload::Sa(x) = p { Some(x) } else { None })?;
    let ke = find(msg, |p| if let Payload::Ke(x) = p { Some(x) } else { None })?;
    let nr = &find(msg, |p| if let Payload::Nonce(x) = p { Some(x) } else { None })?.0;
    let chosen = proposals::accept(&proposals::usable(&conn.proposals), &sa_p.proposals, false)
        .ok_or(Drop::BadProposal)?;
    let suite = suite_of(&chosen).ok_or(Drop::BadProposal)?;
    let share = sa.init.key_share.as_ref().ok_or(Drop::UnexpectedExchange)?;
    if h.spi_r == 0 || ke.group != share.method().id() || chosen.ke != Some(ke.group) {
        return Err(Drop::BadProposal);
    }
    crypto::check_nonce(suite.prf, nr.len()).map_err(|_| Drop::BadPeerValue)?;
    let g_ir = share.decapsulate(&ke.data).map_err(|_| Drop::BadPeerValue)?;
    let keys =
        IkeKeys::new_sa(&ike.fw, &suite, &g_ir, &sa.init.ni, nr, &spi_bytes(sa.spi_i), &spi_bytes(h.spi_r))
            .map_err(|_| Drop::BadPeerValue)?;
    let sk = keys.sk_ciphers(&ike.fw, &suite, true).map_err(|_| Drop::BadPeerValue)?;
    let nat = nat_detect(ike, msg, sa.spi_i, h.spi_r, d)?;

    let sa = ike.sas.get_mut(&spi).expect("present");
    sa.requests.accept(h.message_id);
    sa.retransmit = None;
    sa.spi_r = h.spi_r;
    sa.suite = Some(suite);
    sa.keys = Some(keys);
    sa.sk = Some(sk);
    sa.init.nr = nr.clone();
    sa.init.msg_r = d.bytes.clone();
    sa.init.key_share = None;
    record_extensions(sa, msg);
    if let Some((local, remote)) = nat {
        (sa.nat_local, sa.nat_remote) = (local, remote);
        if local || remote {
            sa.local.set_port(NAT_T_PORT);
            sa.remote.set_port(NAT_T_PORT);
            out.push(Output::Event(Event::NatDetected { ike_sa: spi, local, remote }));
        }
    }
    super::auth::send_request(ike, now, spi, out)
}
