//! CREATE_CHILD_SA making a new CHILD_SA on an established IKE SA (RFC 7296 §1.3.1): no
//! REKEY_SA, so nothing is replaced; both roles. iked asks for one when traffic hits the
//! trap of a child whose connection's IKE SA is up (ipsecd's ACQUIRE), and for a
//! connection's further children once its IKE SA is up ([`crate::Ike::create_child`]).
//!
//! ```text
//!  requester (create_child)                         responder
//!  SK{ [N(USE_TRANSPORT_MODE)], SA(ESP, SPIi),
//!      Ni, [KEi], TSi, TSr }  ─────────────────────▶ ICV ─ bad ─▶ dropped, nothing changes
//!   (the child's configured selectors and            the first child of the connection whose
//!    proposals; PFS when they name a group)          selectors meet TSi/TSr and whose mode
//!                                                     fits (a tunnel child takes either)
//!                                                     ─ none ─▶ N(TS_UNACCEPTABLE)
//!                                                    its proposals ─ none ─▶ N(NO_PROPOSAL_CHOSEN)
//!                                                    KE of another group ─▶ N(INVALID_KE_PAYLOAD)
//!                                                    KEYMAT = prf+(SK_d, [g^ir |] Ni | Nr)
//!  ◀──────────────────── SK{ SA(ESP, SPIr), Nr, [KEr], TSi', TSr' }   Install
//!  answer inside our offer and selectors, same
//!  KE group ─▶ KEYMAT ─▶ Install
//!  an error notify ─▶ ChildSaFailed (INVALID_KE_PAYLOAD naming one of our groups: once
//!  more with it); an authentic answer that does not fit ─▶ ChildSaFailed, and a Delete
//!  of the SPI we offered (the peer installed it)
//! ```
//!
//! [`create_child`](super::create_child) receives every CREATE_CHILD_SA message and hands
//! this module the requests without REKEY_SA that propose ESP, and the responses to our
//! own requests of this kind. [`install`] and [`Made`] are shared with it: a CHILD_SA made
//! by either exchange is recorded and installed the same way. While the IKE SA is being
//! rekeyed or deleted, a request is answered TEMPORARY_FAILURE (§2.25).

use std::time::{Duration, Instant};

use ike_wire::ids::{DhId, ExchangeType, NotifyType, ProtocolId};
use ike_wire::ke::Ke;
use ike_wire::nonce::Nonce;
use ike_wire::notify::Notify;
use ike_wire::sa::Sa;
use ike_wire::ts::{TrafficSelector, Ts};
use ike_wire::{notifies, Payload};

use super::auth::{child_suite, find, lifetimes};
use crate::child_sa::{alloc_spi, ChildSa, InstallContext};
use crate::config::{Child, Mode, Protocol};
use crate::crypto::{self, encapsulate, ChildKeys, KeMethod, KeyShare};
use crate::ike_sa::{ChildCreate, IkeSa, Queued, State};
use crate::io::{Datagram, Event, Output};
use crate::narrow;
use crate::proposals;
use crate::retransmit::Retransmit;
use crate::stats::Drop;
use crate::Ike;

/// A CHILD_SA made by an exchange (new or rekey), with its keys and lifetimes.
pub(crate) struct Made {
    pub child: ChildSa,
    pub keys: ChildKeys,
    pub soft: Duration,
    pub hard: Duration,
}

/// Records a new CHILD_SA and emits its Install; `we_requested`: we sent the request of
/// the exchange that made it (KEYMAT's first half is the requester's direction).
/// `replaces`: the CHILD_SA (inbound SPI) a rekey we answered replaces; the new one's
/// outbound SA waits for it to go (`IkeSa::outbound_later`, see `crate::io`).
pub(crate) fn install(
    ike: &mut Ike,
    spi: u64,
    m: Made,
    we_requested: bool,
    replaces: Option<u32>,
    out: &mut Vec<Output>,
) {
    let sa = ike.sas.get_mut(&spi).expect("present");
    let ctx = InstallContext {
        ike_sa: spi,
        local: sa.local,
        remote: sa.remote,
        udp_encap: sa.behind_nat().then_some((sa.local.port(), sa.remote.port())),
        soft_lifetime: m.soft,
        hard_lifetime: m.hard,
    };
    let mut install = m.child.install(&m.keys, we_requested, ctx);
    if let Some(old) = replaces {
        install.outbound_later = true;
        sa.outbound_later.push((m.child.spi_in, old));
    }
    out.push(Output::Event(Event::ChildSaUp {
        ike_sa: spi,
        child: m.child.name.clone(),
        spi_in: m.child.spi_in,
        spi_out: m.child.spi_out,
    }));
    out.push(Output::Install(Box::new(install)));
    sa.children.push(m.child);
    ike.stats.child_sas_installed += 1;
}

/// Whether a new CHILD_SA of child `name` may be asked for on `sa`: established and not
/// superseded by a rekey, the child configured, and none of that name up, being made or
/// queued.
pub(crate) fn creatable(ike: &Ike, sa: &IkeSa, name: &str) -> bool {
    sa.state == State::Established
        && !sa.superseded
        && ike.config.connections[sa.conn].children.iter().any(|c| c.name == name)
        && !sa.children.iter().any(|c| c.name == name)
        && sa.child_create.as_ref().is_none_or(|c| c.child != name)
        && !sa.queued.iter().any(|q| matches!(q, Queued::NewChild(n, _) if n == name))
}

/// Our CREATE_CHILD_SA request for a new CHILD_SA of child `name` on IKE SA `spi`, its KE
/// of `group` (asked for by INVALID_KE_PAYLOAD) or of our first proposal's first group.
/// The window must be free (the caller queues otherwise). False: nothing was sent.
pub(crate) fn start(
    ike: &mut Ike,
    now: Instant,
    spi: u64,
    name: &str,
    group: Option<DhId>,
    out: &mut Vec<Output>,
) -> bool {
    let Some(sa) = ike.sas.get(&spi) else { return false };
    let Some(cfg) = ike.config.connections[sa.conn].children.iter().find(|c| c.name == name) else {
        return false;
    };
    if sa.children.iter().any(|c| c.name == name) {
        return false;
    }
    let Some(prf) = sa.suite.as_ref().map(|s| s.prf) else { return false };
    let mut esp = proposals::usable(&cfg.esp_proposals);
    if let Some(g) = group {
        esp = proposals::prefer_group(&esp, g);
        esp.sort_by_key(|p| !p.dh.contains(&g));
    }
    let method = esp.first().and_then(|p| p.dh.first()).and_then(|&g| KeMethod::from_id(g).ok());
    let Ok(share) = method.map(|m| KeyShare::generate(&ike.fw, m)).transpose() else { return false };
    let Ok(ni) = crypto::nonce(&ike.fw, prf, ike.settings.nonce_len) else { return false };
    let local_ts = narrow::resolve(&cfg.local_ts, sa.local.ip());
    let remote_ts = narrow::resolve(&cfg.remote_ts, sa.remote.ip());
    let transport = cfg.mode == Mode::Transport;
    let Ok(spi_in) = alloc_spi(&ike.fw, &mut ike.child_spis) else { return false };
    let mut payloads = Vec::new();
    if transport {
        payloads.push(Payload::Notify(Notify::new(NotifyType::USE_TRANSPORT_MODE, vec![])));
    }
    payloads.push(Payload::Sa(Sa { proposals: proposals::offer(&esp, &spi_in.to_be_bytes(), true) }));
    payloads.push(Payload::Nonce(Nonce(ni.clone())));
    if let Some(s) = &share {
        payloads.push(Payload::Ke(Ke { group: s.method().id(), data: s.public_value().to_vec() }));
    }
    payloads.push(Payload::TsI(Ts { selectors: local_ts }));
    payloads.push(Payload::TsR(Ts { selectors: remote_ts }));

    // Fragmented as a rekey's request is, where the peer takes fragments (RFC 7383).
    let limit = ike.fragment_limit(&ike.sas[&spi], ike.sas[&spi].local);
    let sa = ike.sas.get_mut(&spi).expect("present");
    let Ok(id) = sa.requests.start() else {
        ike.child_spis.remove(&spi_in);
        return false;
    };
    let hdr = sa.header(ExchangeType::CREATE_CHILD_SA, false, id);
    let Ok(datagrams) = sa.seal_fragmented(&hdr, &payloads, limit) else {
        sa.requests.restart();
        ike.child_spis.remove(&spi_in);
        return false;
    };
    sa.child_create = Some(ChildCreate { child: name.to_owned(), spi_in, ni, key_share: share });
    sa.retransmit = Some(Retransmit::new(now, datagrams.clone(), &ike.settings.retransmit));
    super::send_sealed(&mut ike.stats, out, sa.local, sa.remote, datagrams);
    ike.stats.create_child_sa.requests_sent += 1;
    true
}

/// Whether a CREATE_CHILD_SA request's payloads ask for a new CHILD_SA: no REKEY_SA, and
/// an SA payload proposing ESP.
pub(crate) fn is_new_child(inner: &[Payload]) -> bool {
    !notifies(inner).any(|n| n.notify_type == NotifyType::REKEY_SA)
        && find(inner, |p| if let Payload::Sa(x) = p { Some(x) } else { None })
            .is_some_and(|s| s.proposals.first().is_some_and(|p| p.protocol == ProtocolId::ESP))
}

/// The responder's answer: the CHILD_SA and its response payloads (without the SA
/// payload's SPI, allocated after), or the error notify. Nothing changes here.
fn answer(
    ike: &Ike,
    sa: &IkeSa,
    inner: &[Payload],
) -> Result<(Made, proposals::Chosen, Vec<u8>, Option<Ke>), Notify> {
    let error = |n| Notify::new(n, vec![]);
    if sa.ike_rekey.is_some() || sa.state != State::Established {
        return Err(error(NotifyType::TEMPORARY_FAILURE));
    }
    let syntax = || error(NotifyType::INVALID_SYNTAX);
    let sa_p = find(inner, |p| if let Payload::Sa(x) = p { Some(x) } else { None }).ok_or_else(syntax)?;
    let ni = find(inner, |p| if let Payload::Nonce(x) = p { Some(x) } else { None }).ok_or_else(syntax)?;
    let tsi = find(inner, |p| if let Payload::TsI(x) = p { Some(x) } else { None }).ok_or_else(syntax)?;
    let tsr = find(inner, |p| if let Payload::TsR(x) = p { Some(x) } else { None }).ok_or_else(syntax)?;
    let kei = find(inner, |p| if let Payload::Ke(x) = p { Some(x) } else { None });
    let prf = sa.suite.as_ref().ok_or_else(syntax)?.prf;
    crypto::check_nonce(prf, ni.0.len()).map_err(|_| syntax())?;
    let want_transport = notifies(inner).any(|n| n.notify_type == NotifyType::USE_TRANSPORT_MODE);

    // The first child whose selectors meet the request's and whose mode fits.
    let conn = &ike.config.connections[sa.conn];
    let mut ts_met = false;
    let mut found = None;
    for cfg in &conn.children {
        // A transport child takes only a transport request; a tunnel child takes either
        // (and answers tunnel mode, as IKE_AUTH's responder does, RFC 7296 §1.3.1).
        if cfg.mode == Mode::Transport && !want_transport {
            continue;
        }
        let new_tsi = narrow::narrow(&tsi.selectors, &narrow::resolve(&cfg.remote_ts, sa.remote.ip()));
        let new_tsr = narrow::narrow(&tsr.selectors, &narrow::resolve(&cfg.local_ts, sa.local.ip()));
        if new_tsi.is_empty() || new_tsr.is_empty() {
            continue;
        }
        ts_met = true;
        let mut ours = proposals::usable(&cfg.esp_proposals);
        if let Some(k) = kei {
            ours = proposals::prefer_group(&ours, k.group);
        }
        if let Some(chosen) = proposals::choose(&ours, &sa_p.proposals, false) {
            if let Some(suite) = child_suite(&chosen) {
                found = Some((cfg, new_tsi, new_tsr, chosen, suite));
                break;
            }
        }
    }
    let Some((cfg, new_tsi, new_tsr, chosen, suite)) = found else {
        return Err(error(if ts_met { NotifyType::NO_PROPOSAL_CHOSEN } else { NotifyType::TS_UNACCEPTABLE }));
    };
    let (ke, g_ir) = match chosen.ke {
        None => (None, None),
        Some(group) => {
            let k = kei.filter(|k| k.group == group).ok_or_else(|| Notify::invalid_ke_payload(group))?;
            let method = KeMethod::from_id(group).map_err(|_| error(NotifyType::NO_PROPOSAL_CHOSEN))?;
            let (data, g) = encapsulate(&ike.fw, method, &k.data).map_err(|_| syntax())?;
            (Some(Ke { group, data }), Some(g))
        }
    };
    let spi_out = u32::from_be_bytes(chosen.spi.as_slice().try_into().map_err(|_| syntax())?);
    let nr = crypto::nonce(&ike.fw, prf, ike.settings.nonce_len).map_err(|_| syntax())?;
    let sk_d = &sa.keys.as_ref().ok_or_else(syntax)?.sk_d;
    let keys = ChildKeys::derive(&ike.fw, prf, sk_d, &suite, g_ir.as_deref().map(|g| &g[..]), &ni.0, &nr)
        .map_err(|_| syntax())?;
    let (soft, hard) = lifetimes(ike, cfg);
    let child = ChildSa {
        name: cfg.name.clone(),
        spi_in: 0,
        spi_out,
        suite,
        esn: chosen.esn == Some(ike_wire::ids::EsnId::YES),
        mode: cfg.mode,
        // The requester's TSi is the remote side for us.
        local_ts: new_tsr,
        remote_ts: new_tsi,
    };
    Ok((Made { child, keys, soft, hard }, chosen, nr, ke))
}

/// The responder's side: a CREATE_CHILD_SA request for a new CHILD_SA (its payloads opened
/// and authenticated by the caller).
pub(crate) fn request(
    ike: &mut Ike,
    spi: u64,
    d: &Datagram,
    message_id: u32,
    inner: &[Payload],
    out: &mut Vec<Output>,
) -> Result<(), Drop> {
    let sa = &ike.sas[&spi];
    let (payloads, made) = match answer(ike, sa, inner) {
        Err(n) => (vec![Payload::Notify(n)], None),
        Ok((mut made, chosen, nr, ke)) => {
            let spi_in = alloc_spi(&ike.fw, &mut ike.child_spis).map_err(|_| Drop::BadPeerValue)?;
            made.child.spi_in = spi_in;
            let mut p = Vec::new();
            if made.child.mode == Mode::Transport {
                p.push(Payload::Notify(Notify::new(NotifyType::USE_TRANSPORT_MODE, vec![])));
            }
            p.push(Payload::Sa(Sa { proposals: vec![chosen.to_wire(Protocol::Esp, &spi_in.to_be_bytes())] }));
            p.push(Payload::Nonce(Nonce(nr)));
            if let Some(k) = ke {
                p.push(Payload::Ke(k));
            }
            // TSi and TSr as the requester sees them: its side first.
            p.push(Payload::TsI(Ts { selectors: made.child.remote_ts.clone() }));
            p.push(Payload::TsR(Ts { selectors: made.child.local_ts.clone() }));
            (p, Some(made))
        }
    };
    let sa = &ike.sas[&spi];
    let hdr = sa.header(ExchangeType::CREATE_CHILD_SA, true, message_id);
    let Ok(datagrams) = sa.seal_fragmented(&hdr, &payloads, ike.fragment_limit(sa, d.local)) else {
        if let Some(m) = &made {
            ike.child_spis.remove(&m.child.spi_in);
        }
        return Err(Drop::BadPeerValue);
    };
    let sa = ike.sas.get_mut(&spi).expect("present");
    sa.responses.answered(message_id, d.bytes.clone(), datagrams.clone());
    super::send_sealed(&mut ike.stats, out, d.local, d.remote, datagrams);
    ike.stats.create_child_sa.responses_sent += 1;
    match made {
        Some(m) => install(ike, spi, m, false, None, out),
        None => ike.stats.create_child_sa.errors_sent += 1,
    }
    Ok(())
}

/// What a requester asked for in a CREATE_CHILD_SA exchange (a new CHILD_SA, or a rekey
/// of one), to check the answer against.
pub(crate) struct Asked<'a> {
    /// The configured child: its ESP proposals and lifetimes.
    pub cfg: &'a Child,
    /// The CHILD_SA's name, mode and bounds for the answered selectors (ours, TSi and
    /// TSr): the configured ones for a new CHILD_SA, the old CHILD_SA's for a rekey.
    pub name: &'a str,
    pub mode: Mode,
    pub local_ts: &'a [TrafficSelector],
    pub remote_ts: &'a [TrafficSelector],
    /// Our inbound SPI, nonce and key share (PFS) from the request.
    pub spi_in: u32,
    pub ni: &'a [u8],
    pub key_share: Option<&'a KeyShare>,
}

/// The error notify an answer refuses our request with, if it does: checked first, before
/// anything of ours is looked up (a rekeyed CHILD_SA may be gone by then:
/// CHILD_SA_NOT_FOUND).
pub(crate) fn refusal(inner: &[Payload]) -> Option<NotifyType> {
    notifies(inner).find(|n| n.notify_type.is_error()).map(|n| n.notify_type)
}

/// The requester's check of an answer that is not a [`refusal`]: the CHILD_SA (`None`: an
/// answer that does not fit our request). Nothing changes here.
pub(crate) fn accept_answer(
    ike: &Ike,
    sa: &IkeSa,
    asked: &Asked,
    inner: &[Payload],
) -> Result<Made, Option<NotifyType>> {
    let cfg = asked.cfg;
    let sa_p = find(inner, |p| if let Payload::Sa(x) = p { Some(x) } else { None }).ok_or(None)?;
    let nr = find(inner, |p| if let Payload::Nonce(x) = p { Some(x) } else { None }).ok_or(None)?;
    let tsi = find(inner, |p| if let Payload::TsI(x) = p { Some(x) } else { None }).ok_or(None)?;
    let tsr = find(inner, |p| if let Payload::TsR(x) = p { Some(x) } else { None }).ok_or(None)?;
    let ker = find(inner, |p| if let Payload::Ke(x) = p { Some(x) } else { None });
    let prf = sa.suite.as_ref().ok_or(None)?.prf;
    crypto::check_nonce(prf, nr.0.len()).map_err(|_| None)?;
    let chosen =
        proposals::accept(&proposals::usable(&cfg.esp_proposals), &sa_p.proposals, false).ok_or(None)?;
    let suite = child_suite(&chosen).ok_or(None)?;
    let g_ir = match (asked.key_share, chosen.ke) {
        (None, None) => None,
        (Some(share), Some(group)) if share.method().id() == group => {
            let k = ker.filter(|k| k.group == group).ok_or(None)?;
            Some(share.decapsulate(&k.data).map_err(|_| None)?)
        }
        _ => return Err(None),
    };
    let inside = |got: &Ts, ours: &[TrafficSelector]| {
        !got.selectors.is_empty() && got.selectors.iter().all(|t| narrow::within(t, ours))
    };
    if !inside(tsi, asked.local_ts) || !inside(tsr, asked.remote_ts) {
        return Err(None);
    }
    let transport = notifies(inner).any(|n| n.notify_type == NotifyType::USE_TRANSPORT_MODE);
    if transport != (asked.mode == Mode::Transport) {
        return Err(None);
    }
    let spi_out = u32::from_be_bytes(chosen.spi.as_slice().try_into().map_err(|_| None)?);
    let sk_d = &sa.keys.as_ref().ok_or(None)?.sk_d;
    let keys =
        ChildKeys::derive(&ike.fw, prf, sk_d, &suite, g_ir.as_deref().map(|g| &g[..]), asked.ni, &nr.0)
            .map_err(|_| None)?;
    let (soft, hard) = lifetimes(ike, cfg);
    let child = ChildSa {
        name: asked.name.to_owned(),
        spi_in: asked.spi_in,
        spi_out,
        suite,
        esn: chosen.esn == Some(ike_wire::ids::EsnId::YES),
        mode: asked.mode,
        local_ts: tsi.selectors.clone(),
        remote_ts: tsr.selectors.clone(),
    };
    Ok(Made { child, keys, soft, hard })
}

/// The requester's check of the answer to our request for a new CHILD_SA: within the
/// configured child's selectors, in its mode.
fn accept(ike: &Ike, sa: &IkeSa, c: &ChildCreate, inner: &[Payload]) -> Result<Made, Option<NotifyType>> {
    if let Some(n) = refusal(inner) {
        return Err(Some(n));
    }
    let cfg = ike.config.connections[sa.conn].children.iter().find(|x| x.name == c.child).ok_or(None)?;
    let ours_i = narrow::resolve(&cfg.local_ts, sa.local.ip());
    let ours_r = narrow::resolve(&cfg.remote_ts, sa.remote.ip());
    let asked = Asked {
        cfg,
        name: &cfg.name,
        mode: cfg.mode,
        local_ts: &ours_i,
        remote_ts: &ours_r,
        spi_in: c.spi_in,
        ni: &c.ni,
        key_share: c.key_share.as_ref(),
    };
    accept_answer(ike, sa, &asked, inner)
}

/// The requester's side: the response to our request for a new CHILD_SA (its payloads
/// opened and authenticated, the window already advanced by the caller).
pub(crate) fn response(ike: &mut Ike, now: Instant, spi: u64, inner: &[Payload], out: &mut Vec<Output>) {
    let sa = ike.sas.get_mut(&spi).expect("present");
    let Some(c) = sa.child_create.take() else { return };
    let sa = &ike.sas[&spi];
    match accept(ike, sa, &c, inner) {
        Ok(made) => install(ike, spi, made, true, None, out),
        Err(notify) => {
            ike.child_spis.remove(&c.spi_in);
            ike.stats.create_child_sa.errors_received += 1;
            let sa = ike.sas.get_mut(&spi).expect("present");
            if notify.is_none() {
                // The peer installed a CHILD_SA we will not use: a Delete removes it.
                sa.queued.push_back(Queued::DeleteChild(c.spi_in));
            }
            let asked = notifies(inner)
                .find(|n| n.notify_type == NotifyType::INVALID_KE_PAYLOAD)
                .and_then(|n| n.invalid_ke_group().ok());
            let cfg = ike.config.connections[sa.conn].children.iter().find(|x| x.name == c.child);
            let retry = asked.filter(|&g| {
                c.key_share.as_ref().is_none_or(|s| s.method().id() != g)
                    && cfg.is_some_and(|x| {
                        proposals::usable(&x.esp_proposals).iter().any(|p| p.dh.contains(&g))
                    })
            });
            match retry {
                Some(g) => sa.queued.push_front(Queued::NewChild(c.child, Some(g))),
                None => out.push(Output::Event(Event::ChildSaFailed { ike_sa: spi, child: c.child, notify })),
            }
        }
    }
    ike.pump(now, spi, out);
}
