//! IKE_AUTH (RFC 7296 §1.2, §2.15), both roles, with a pre-shared key or a certificate
//! ([`super::proof`] makes our AUTH and checks the peer's), and the first CHILD_SA.
//!
//! ```text
//!  initiator                                         responder
//!  SK{ IDi, [CERT…], [CERTREQ], [IDr], AUTH, N(INITIAL_CONTACT),
//!      SA(ESP, SPIi), TSi, TSr, [N(USE_TRANSPORT_MODE)] } ─▶ ICV ─ bad ─▶ dropped, nothing changes
//!                                                     the connection: by IDi (and IDr) among
//!                                                       those whose addresses fit (reselect)
//!                                                     IDi matches the connection's remote id,
//!                                                     psk: a PSK for the pair, AUTH verifies;
//!                                                     pubkey: chain to our CA, binds IDi, AUTH verifies
//!                                                       ─ no ─▶ SK{ N(AUTHENTICATION_FAILED) }, SA deleted
//!                                                     child: TS narrowed to a child's selectors
//!                                                       (TS_UNACCEPTABLE), ESP proposal (NO_PROPOSAL_CHOSEN):
//!                                                       on failure the IKE SA is up without a CHILD_SA
//!  ◀──────── SK{ IDr, [CERT…], AUTH, [N(USE_TRANSPORT_MODE)], SA(ESP, SPIr), TSi, TSr }
//!  IDr, AUTH checked; SA inside ours; TS inside ours       Install (both directions)
//!  Install
//! ```
//!
//! A PSK's AUTH = `prf(prf(PSK, "Key Pad for IKEv2"), octets)`, a certificate's the
//! octets signed (RFC 7427), where the initiator's octets
//! are its IKE_SA_INIT request ‖ Nr ‖ prf(SK_pi, IDi body) and the responder's its
//! IKE_SA_INIT response ‖ Ni ‖ prf(SK_pr, IDr body) — `crypto::signed_octets`. The
//! CHILD_SA's keys: KEYMAT = prf+(SK_d, Ni ‖ Nr), no PFS in IKE_AUTH.
//!
//! Both messages go out as RFC 7383 fragments when they are longer than the fragment size
//! and the peer reassembles ([`crate::Ike::fragment_limit`]); a fragmented message comes
//! here reassembled (the engine's dispatch).
//!
//! Not yet: EAP, INITIAL_CONTACT's effect on the
//! responder (deleting older SAs with the same peer), the Delete an initiator owes a
//! responder whose AUTH failed (RFC 7296 §2.21.2).

use std::time::{Duration, Instant};

use ike_wire::ids::{ExchangeType, NotifyType};
use ike_wire::notify::Notify;
use ike_wire::sa::Sa;
use ike_wire::ts::{TrafficSelector, Ts};
use ike_wire::{notifies, Message, Payload};

use super::{id_payload, proof};
use crate::child_sa::{alloc_spi, random_u32, ChildSa, InstallContext};
use crate::config::{Child, Identity, Mode, Protocol};
use crate::crypto::{ChildKeys, ChildSuite};
use crate::ike_sa::{IkeSa, PendingChild, State};
use crate::io::{Datagram, DownReason, Event, Output};
use crate::narrow;
use crate::proposals::{self, Chosen};
use crate::retransmit::Retransmit;
use crate::stats::Drop;
use crate::Ike;

pub(crate) fn child_suite(c: &Chosen) -> Option<ChildSuite> {
    ChildSuite::from_ids(c.encr.id, c.encr.key_bits, c.integ).ok()
}

pub(crate) fn lifetimes(ike: &Ike, child: &Child) -> (Duration, Duration) {
    let l = child.lifetimes;
    // Jitter: soft = rekey − rand·u, u uniform in [0, 1) from ocf's random source.
    let u = random_u32(&ike.fw).map_or(0.0, |r| f64::from(r) / (f64::from(u32::MAX) + 1.0));
    (l.rekey_time.saturating_sub(l.rand_time.mul_f64(u)), l.life_time)
}

/// The initiator's IKE_AUTH request, right after IKE_SA_INIT.
pub(crate) fn send_request(ike: &mut Ike, now: Instant, spi: u64, out: &mut Vec<Output>) -> Result<(), Drop> {
    let sa = &ike.sas[&spi];
    let conn = &ike.config.connections[sa.conn];
    let pending = sa.pending_child.clone().ok_or(Drop::UnexpectedExchange)?;
    let child = &conn.children[pending.child];
    let idi = proof::our_id(ike, sa.conn, sa.local).ok_or(Drop::UnexpectedExchange)?;
    let remote_id = match &conn.remote.id {
        Identity::Any => None,
        other => id_payload(other, sa.remote),
    };
    let (certs, auth) = match proof::ours(ike, sa, &idi, &conn.remote.id) {
        Ok(x) => x,
        Err(reason) => {
            ike.stats.auth_local_failures += 1;
            let remote = ike.sas[&spi].remote;
            let conn = ike.conn_name(spi);
            out.push(Output::Event(Event::AuthFailed { ike_sa: spi, conn, remote, reason }));
            ike.remove_sa(spi, out);
            out.push(Output::Event(Event::IkeSaDown { ike_sa: spi, reason: DownReason::AuthFailed }));
            return Ok(());
        }
    };
    let certreq = proof::certreq(ike, sa.conn);
    let esp = proposals::usable(&child.esp_proposals);
    let local_ts = narrow::resolve(&child.local_ts, sa.local.ip());
    let remote_ts = narrow::resolve(&child.remote_ts, sa.remote.ip());
    let transport = child.mode == Mode::Transport;

    let spi_in = alloc_spi(&ike.fw, &mut ike.child_spis).map_err(|_| Drop::BadPeerValue)?;
    let mut payloads = vec![Payload::IdI(idi)];
    payloads.extend(certs);
    payloads.extend(certreq);
    if let Some(idr) = remote_id {
        payloads.push(Payload::IdR(idr));
    }
    payloads.push(Payload::Auth(auth));
    payloads.push(Payload::Notify(Notify::new(NotifyType::INITIAL_CONTACT, vec![])));
    if transport {
        payloads.push(Payload::Notify(Notify::new(NotifyType::USE_TRANSPORT_MODE, vec![])));
    }
    payloads.push(Payload::Sa(Sa { proposals: proposals::offer(&esp, &spi_in.to_be_bytes(), false) }));
    payloads.push(Payload::TsI(Ts { selectors: local_ts }));
    payloads.push(Payload::TsR(Ts { selectors: remote_ts }));

    let limit = ike.fragment_limit(&ike.sas[&spi], ike.sas[&spi].local);
    let sa = ike.sas.get_mut(&spi).expect("present");
    let id = sa.requests.start().map_err(|_| Drop::UnexpectedExchange)?;
    let hdr = sa.header(ExchangeType::IKE_AUTH, false, id);
    let datagrams = match sa.seal_fragmented(&hdr, &payloads, limit) {
        Ok(b) => b,
        Err(_) => {
            sa.requests.restart();
            ike.child_spis.remove(&spi_in);
            return Err(Drop::BadPeerValue);
        }
    };
    sa.pending_child = Some(PendingChild { child: pending.child, spi_in });
    sa.state = State::AuthSent;
    sa.retransmit = Some(Retransmit::new(now, datagrams.clone(), &ike.settings.retransmit));
    super::send_sealed(&mut ike.stats, out, sa.local, sa.remote, datagrams);
    ike.stats.auth.requests_sent += 1;
    Ok(())
}

pub(crate) fn find<'a, T>(
    payloads: &'a [Payload],
    f: impl Fn(&'a Payload) -> Option<&'a T>,
) -> Option<&'a T> {
    payloads.iter().find_map(f)
}

/// The responder's connection by the identities: IKE_SA_INIT took the first whose
/// addresses fit; when that one's remote ID does not match IDi (or its local ID the IDr
/// the initiator asked for), the first other connection whose addresses fit, whose IDs
/// match, and whose IKE proposals hold the suite negotiated (strongSwan's responder
/// chooses so too). `None`: keep the current one (it fits, or none does better).
fn reselect(ike: &Ike, sa: &IkeSa, inner: &[Payload], idi: &ike_wire::id::Id, d: &Datagram) -> Option<usize> {
    let peer = super::identity_of(idi)?;
    let idr =
        find(inner, |p| if let Payload::IdR(x) = p { Some(x) } else { None }).and_then(super::identity_of);
    let suite = sa.suite?;
    let ids_fit = |c: &crate::config::Connection| {
        c.remote.id.matches(&peer) && idr.as_ref().is_none_or(|r| c.local.id.matches(r))
    };
    if ids_fit(&ike.config.connections[sa.conn]) {
        return None;
    }
    // Only live connections: a retired one (removed by a reload, its SAs being deleted)
    // takes no new IKE SA.
    ike.live_connections().iter().position(|c| {
        super::addresses_fit(c, d)
            && ids_fit(c)
            && proposals::usable(&c.proposals).iter().any(|p| proposal_holds(p, &suite))
    })
}

/// Whether configured IKE proposal `p` offers every algorithm of `suite`.
fn proposal_holds(p: &crate::config::Proposal, s: &crate::crypto::IkeSuite) -> bool {
    let (encr, bits) = s.encr.id();
    let integ = s.integ.map_or(ike_wire::ids::IntegId::NONE, |i| i.id());
    p.encr.iter().any(|e| e.id == encr && e.key_bits == bits)
        && (p.integ.contains(&integ) || (p.integ.is_empty() && s.integ.is_none()))
        && p.prf.contains(&s.prf.id())
        && p.dh.contains(&s.ke.id())
}

/// The responder's CHILD_SA choice: the first child whose selectors meet the proposed
/// ones and whose mode fits, with its narrowed selectors and ESP proposal.
type ChildChoice = (usize, Vec<TrafficSelector>, Vec<TrafficSelector>, Chosen, bool);

fn choose_child(ike: &Ike, sa: &IkeSa, inner: &[Payload]) -> Result<ChildChoice, NotifyType> {
    let sa_p = find(inner, |p| if let Payload::Sa(x) = p { Some(x) } else { None })
        .ok_or(NotifyType::NO_PROPOSAL_CHOSEN)?;
    let tsi = find(inner, |p| if let Payload::TsI(x) = p { Some(x) } else { None })
        .ok_or(NotifyType::TS_UNACCEPTABLE)?;
    let tsr = find(inner, |p| if let Payload::TsR(x) = p { Some(x) } else { None })
        .ok_or(NotifyType::TS_UNACCEPTABLE)?;
    let want_transport = notifies(inner).any(|n| n.notify_type == NotifyType::USE_TRANSPORT_MODE);
    let conn = &ike.config.connections[sa.conn];
    let mut ts_met = false;
    for (i, child) in conn.children.iter().enumerate() {
        if child.mode == Mode::Transport && !want_transport {
            continue;
        }
        let ni = narrow::narrow(&tsi.selectors, &narrow::resolve(&child.remote_ts, sa.remote.ip()));
        let nr = narrow::narrow(&tsr.selectors, &narrow::resolve(&child.local_ts, sa.local.ip()));
        if ni.is_empty() || nr.is_empty() {
            continue;
        }
        ts_met = true;
        if let Some(c) = proposals::choose(&proposals::usable(&child.esp_proposals), &sa_p.proposals, true) {
            if child_suite(&c).is_some() {
                return Ok((i, ni, nr, c, want_transport && child.mode == Mode::Transport));
            }
        }
    }
    Err(if ts_met { NotifyType::NO_PROPOSAL_CHOSEN } else { NotifyType::TS_UNACCEPTABLE })
}

/// The responder's side: the IKE_AUTH request.
pub(crate) fn request(
    ike: &mut Ike,
    _now: Instant,
    spi: u64,
    d: &Datagram,
    msg: &Message,
    out: &mut Vec<Output>,
) -> Result<(), Drop> {
    let sa = &ike.sas[&spi];
    let inner = sa.open(&d.bytes, msg)?;
    let idi =
        find(&inner, |p| if let Payload::IdI(x) = p { Some(x) } else { None }).ok_or(Drop::MissingPayload)?;
    let auth = find(&inner, |p| if let Payload::Auth(x) = p { Some(x) } else { None })
        .ok_or(Drop::MissingPayload)?;
    let h = msg.header;
    if let Some(ci) = reselect(ike, sa, &inner, idi, d) {
        ike.sas.get_mut(&spi).expect("present").conn = ci;
    }
    let sa = &ike.sas[&spi];
    let conn = &ike.config.connections[sa.conn];

    // From here the message is authentic (its ICV verified): a failure is answered.
    let checked = proof::check_peer(ike, sa, idi, auth, &inner);
    if let Err(refusal) = checked {
        let hdr = sa.header(ExchangeType::IKE_AUTH, true, h.message_id);
        let bytes =
            sa.seal(&hdr, &[Payload::Notify(Notify::new(NotifyType::AUTHENTICATION_FAILED, vec![]))]).ok();
        let remote = sa.remote;
        ike.stats.auth_failures += 1;
        ike.stats.untrusted_certs += u64::from(refusal.untrusted_cert);
        ike.stats.auth.errors_sent += 1;
        if let Some(bytes) = bytes {
            ike.stats.auth.responses_sent += 1;
            out.push(Output::Send(Datagram { local: d.local, remote: d.remote, bytes }));
        }
        let conn = ike.conn_name(spi);
        out.push(Output::Event(Event::AuthFailed { ike_sa: spi, conn, remote, reason: refusal.reason }));
        ike.remove_sa(spi, out);
        out.push(Output::Event(Event::IkeSaDown { ike_sa: spi, reason: DownReason::AuthFailed }));
        return Ok(());
    }
    let peer = checked.ok().expect("checked");
    let idr = proof::our_id(ike, sa.conn, d.local).ok_or(Drop::UnexpectedExchange)?;
    let (certs, our) = proof::ours(ike, sa, &idr, &peer).map_err(|_| Drop::BadPeerValue)?;

    let mut payloads = vec![Payload::IdR(idr)];
    payloads.extend(certs);
    payloads.push(Payload::Auth(our));
    let child = match choose_child(ike, sa, &inner) {
        Ok((ci, tsi, tsr, chosen, transport)) => {
            let suite = child_suite(&chosen).expect("checked");
            let keys = ChildKeys::derive(
                &ike.fw,
                sa.suite.expect("keys").prf,
                &sa.keys.as_ref().expect("keys").sk_d,
                &suite,
                None,
                &sa.init.ni,
                &sa.init.nr,
            )
            .map_err(|_| Drop::BadPeerValue)?;
            let spi_out =
                u32::from_be_bytes(chosen.spi.as_slice().try_into().map_err(|_| Drop::BadProposal)?);
            Some((ci, tsi, tsr, chosen, transport, suite, keys, spi_out))
        }
        Err(n) => {
            payloads.push(Payload::Notify(Notify::new(n, vec![])));
            None
        }
    };
    let spi_in = match &child {
        Some(_) => Some(alloc_spi(&ike.fw, &mut ike.child_spis).map_err(|_| Drop::BadPeerValue)?),
        None => None,
    };
    if let (Some((_, tsi, tsr, chosen, transport, ..)), Some(spi_in)) = (&child, spi_in) {
        if *transport {
            payloads.push(Payload::Notify(Notify::new(NotifyType::USE_TRANSPORT_MODE, vec![])));
        }
        payloads
            .push(Payload::Sa(Sa { proposals: vec![chosen.to_wire(Protocol::Esp, &spi_in.to_be_bytes())] }));
        payloads.push(Payload::TsI(Ts { selectors: tsi.clone() }));
        payloads.push(Payload::TsR(Ts { selectors: tsr.clone() }));
    }
    let hdr = sa.header(ExchangeType::IKE_AUTH, true, h.message_id);
    let Ok(datagrams) = sa.seal_fragmented(&hdr, &payloads, ike.fragment_limit(sa, d.local)) else {
        if let Some(s) = spi_in {
            ike.child_spis.remove(&s);
        }
        return Err(Drop::BadPeerValue);
    };
    let install = match (child, spi_in) {
        (Some((ci, tsi, tsr, chosen, transport, suite, keys, spi_out)), Some(spi_in)) => {
            let c = &conn.children[ci];
            let (soft, hard) = lifetimes(ike, c);
            let child_sa = ChildSa {
                name: c.name.clone(),
                spi_in,
                spi_out,
                suite,
                esn: chosen.esn == Some(ike_wire::ids::EsnId::YES),
                mode: if transport { Mode::Transport } else { Mode::Tunnel },
                // The initiator's TSi is the remote side for us.
                local_ts: tsr,
                remote_ts: tsi,
            };
            Some((child_sa, keys, soft, hard))
        }
        _ => None,
    };

    let sa = ike.sas.get_mut(&spi).expect("present");
    sa.local = d.local;
    sa.remote = d.remote;
    sa.peer_id = Some(peer);
    sa.responses.answered(h.message_id, d.bytes.clone(), datagrams.clone());
    sa.state = State::Established;
    sa.requests = crate::window::RequestWindow::starting_at(0);
    ike.half_open -= 1;
    ike.stats.half_open = ike.half_open as u64;
    ike.stats.auth.responses_sent += 1;
    ike.stats.ike_sas_up += 1;
    super::send_sealed(&mut ike.stats, out, d.local, d.remote, datagrams);
    out.push(Output::Event(Event::IkeSaUp { ike_sa: spi, remote: d.remote, initiator: false }));
    finish_child(ike, spi, install, out);
    let sa = ike.sas.get_mut(&spi).expect("present");
    sa.init.msg_i = Vec::new();
    sa.init.msg_r = Vec::new();
    ike.update_cookies(out);
    Ok(())
}

/// Records an established CHILD_SA and emits its Install.
fn finish_child(
    ike: &mut Ike,
    spi: u64,
    made: Option<(ChildSa, ChildKeys, Duration, Duration)>,
    out: &mut Vec<Output>,
) {
    let Some((child, keys, soft, hard)) = made else { return };
    let sa = ike.sas.get_mut(&spi).expect("present");
    let ctx = InstallContext {
        ike_sa: spi,
        local: sa.local,
        remote: sa.remote,
        udp_encap: sa.behind_nat().then_some((sa.local.port(), sa.remote.port())),
        soft_lifetime: soft,
        hard_lifetime: hard,
    };
    let install = child.install(&keys, sa.initiator, ctx);
    out.push(Output::Event(Event::ChildSaUp {
        ike_sa: spi,
        child: child.name.clone(),
        spi_in: child.spi_in,
        spi_out: child.spi_out,
    }));
    out.push(Output::Install(Box::new(install)));
    sa.children.push(child);
    ike.stats.child_sas_installed += 1;
}

/// The initiator's side: the IKE_AUTH response.
pub(crate) fn response(
    ike: &mut Ike,
    _now: Instant,
    spi: u64,
    d: &Datagram,
    msg: &Message,
    out: &mut Vec<Output>,
) -> Result<(), Drop> {
    let sa = &ike.sas[&spi];
    let inner = sa.open(&d.bytes, msg)?;
    let h = msg.header;
    let conn = &ike.config.connections[sa.conn];
    let down = |ike: &mut Ike, out: &mut Vec<Output>, reason: DownReason, why: Option<proof::Refusal>| {
        if reason == DownReason::AuthFailed {
            if why.is_some() {
                ike.stats.auth_failures += 1;
            } else {
                ike.stats.auth_refused_by_peer += 1;
            }
            let why = why.unwrap_or(proof::Refusal {
                reason: "the peer answered AUTHENTICATION_FAILED".into(),
                untrusted_cert: false,
            });
            ike.stats.untrusted_certs += u64::from(why.untrusted_cert);
            let remote = ike.sas[&spi].remote;
            let conn = ike.conn_name(spi);
            out.push(Output::Event(Event::AuthFailed { ike_sa: spi, conn, remote, reason: why.reason }));
        }
        ike.remove_sa(spi, out);
        out.push(Output::Event(Event::IkeSaDown { ike_sa: spi, reason }));
        Ok(())
    };
    let idr = find(&inner, |p| if let Payload::IdR(x) = p { Some(x) } else { None });
    let auth = find(&inner, |p| if let Payload::Auth(x) = p { Some(x) } else { None });
    let (Some(idr), Some(auth)) = (idr, auth) else {
        // An authentic answer without AUTH: the responder refused us.
        ike.stats.auth.errors_received += 1;
        let refused_auth = notifies(&inner).any(|n| n.notify_type == NotifyType::AUTHENTICATION_FAILED);
        return down(ike, out, if refused_auth { DownReason::AuthFailed } else { DownReason::Refused }, None);
    };
    let peer = match proof::check_peer(ike, sa, idr, auth, &inner) {
        Ok(p) => Some(p),
        Err(refusal) => return down(ike, out, DownReason::AuthFailed, Some(refusal)),
    };
    let pending = sa.pending_child.clone().expect("sent with a child");
    let child = &conn.children[pending.child];
    let made = accept_child(ike, sa, child, pending.spi_in, &inner);

    let sa = ike.sas.get_mut(&spi).expect("present");
    sa.requests.accept(h.message_id);
    sa.retransmit = None;
    sa.peer_id = peer;
    sa.state = State::Established;
    sa.responses = crate::window::ResponseWindow::after(0, None);
    sa.pending_child = None;
    ike.stats.ike_sas_up += 1;
    let remote = sa.remote;
    out.push(Output::Event(Event::IkeSaUp { ike_sa: spi, remote, initiator: true }));
    match made {
        Ok(m) => finish_child(ike, spi, Some(m), out),
        Err(notify) => {
            ike.child_spis.remove(&pending.spi_in);
            out.push(Output::Event(Event::ChildSaFailed { ike_sa: spi, child: child.name.clone(), notify }));
        }
    }
    let sa = ike.sas.get_mut(&spi).expect("present");
    sa.init.msg_i = Vec::new();
    sa.init.msg_r = Vec::new();
    Ok(())
}

/// The initiator's check of the responder's CHILD_SA answer.
fn accept_child(
    ike: &Ike,
    sa: &IkeSa,
    child: &Child,
    spi_in: u32,
    inner: &[Payload],
) -> Result<(ChildSa, ChildKeys, Duration, Duration), Option<NotifyType>> {
    if let Some(n) = notifies(inner).find(|n| n.notify_type.is_error()) {
        return Err(Some(n.notify_type));
    }
    let sa_p = find(inner, |p| if let Payload::Sa(x) = p { Some(x) } else { None }).ok_or(None)?;
    let tsi = find(inner, |p| if let Payload::TsI(x) = p { Some(x) } else { None }).ok_or(None)?;
    let tsr = find(inner, |p| if let Payload::TsR(x) = p { Some(x) } else { None }).ok_or(None)?;
    let chosen =
        proposals::accept(&proposals::usable(&child.esp_proposals), &sa_p.proposals, true).ok_or(None)?;
    let suite = child_suite(&chosen).ok_or(None)?;
    let ours_i = narrow::resolve(&child.local_ts, sa.local.ip());
    let ours_r = narrow::resolve(&child.remote_ts, sa.remote.ip());
    let inside = |got: &Ts, ours: &[TrafficSelector]| {
        !got.selectors.is_empty() && got.selectors.iter().all(|t| narrow::within(t, ours))
    };
    if !inside(tsi, &ours_i) || !inside(tsr, &ours_r) {
        return Err(None);
    }
    let transport = notifies(inner).any(|n| n.notify_type == NotifyType::USE_TRANSPORT_MODE);
    if transport != (child.mode == Mode::Transport) {
        return Err(None);
    }
    let spi_out = u32::from_be_bytes(chosen.spi.as_slice().try_into().map_err(|_| None)?);
    let keys = ChildKeys::derive(
        &ike.fw,
        sa.suite.expect("keys").prf,
        &sa.keys.as_ref().expect("keys").sk_d,
        &suite,
        None,
        &sa.init.ni,
        &sa.init.nr,
    )
    .map_err(|_| None)?;
    let (soft, hard) = lifetimes(ike, child);
    Ok((
        ChildSa {
            name: child.name.clone(),
            spi_in,
            spi_out,
            suite,
            esn: chosen.esn == Some(ike_wire::ids::EsnId::YES),
            mode: child.mode,
            local_ts: tsi.selectors.clone(),
            remote_ts: tsr.selectors.clone(),
        },
        keys,
        soft,
        hard,
    ))
}
