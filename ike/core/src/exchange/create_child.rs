//! CREATE_CHILD_SA rekeying a CHILD_SA (RFC 7296 §1.3.3, §2.8, §2.17), both roles,
//! make-before-break, with §2.8.1's simultaneous rekeying; every CREATE_CHILD_SA message
//! arrives here first.
//!
//! ```text
//!  requester (soft expire, rekey_child)             responder
//!  SK{ N(REKEY_SA, old SPI), SA(ESP, new SPIi),
//!      Ni, [KEi], TSi, TSr }  ───────────────────▶  ICV ─ bad ─▶ dropped, nothing changes
//!                                                   REKEY_SA names no CHILD_SA ─▶ N(CHILD_SA_NOT_FOUND)
//!                                                   no proposal / TS / KE group ─▶ N(NO_PROPOSAL_CHOSEN,
//!                                                     TS_UNACCEPTABLE, INVALID_KE_PAYLOAD)
//!                                                   KEYMAT = prf+(SK_d, [g^ir |] Ni | Nr)
//!  ◀─────────────────── SK{ SA(ESP, new SPIr), Nr, [KEr], TSi, TSr }   Install(new, inbound;
//!  answer inside our offer, same KE group;                               outbound_later)
//!  KEYMAT; Install(new, both directions)
//!  retire(old), queued SK{ D(ESP, old SPI) } ──────▶  InstallOutbound(new), Remove(old)
//!  ◀──────────────────────────────── SK{ D(ESP, old SPI) }  (informational)
//!  Remove(old)
//! ```
//!
//! The responder sends on the new CHILD_SA only once the old one goes (its Delete, or
//! its hard expiry, or any other removal): until it has read the response, the requester
//! has no inbound SA for it (see `crate::io`). The requester sends on the new one at once.
//!
//! Simultaneous rekeying (§2.8.1): each side's request crosses the other's. Each answers
//! the other's (two new CHILD_SAs on both sides) and remembers it in its own
//! [`ChildRekey::collision`]. When its own response comes, each compares the lowest nonce
//! of its own exchange with that of the other: the exchange holding the lowest of the four
//! made the redundant CHILD_SA, and the side that requested it deletes it; the side that
//! requested the other exchange deletes the old one. If the response comes before the
//! peer's request, no collision is seen: the old CHILD_SA is deleted at once, and the
//! peer's request then finds it gone (CHILD_SA_NOT_FOUND), which ends its rekey. The
//! CHILD_SA each side made as a responder gets its outbound SA when the old one goes: at
//! once on the side that deletes the old one, at the peer's Delete on the other. The
//! redundant one, which the peer deletes, never gets it (dropped when our response shows
//! it redundant, or at its removal).
//!
//! An authentic answer that does not fit our request (a proposal we did not make, a
//! selector outside ours, another KE group) ends the rekey, and a Delete with the SPI we
//! offered removes the CHILD_SA the peer installed for it.
//!
//! A request whose SA payload proposes IKE rekeys the IKE SA: [`ike_rekey`]. While the IKE
//! SA is being rekeyed or deleted, a CHILD_SA rekey is answered TEMPORARY_FAILURE (§2.25).
//!
//! INVALID_KE_PAYLOAD naming a group of one of our proposals: the rekey is sent once
//! more with that group's KE (and proposals that have it first).
//!
//! A request without REKEY_SA that proposes ESP makes a new CHILD_SA, and our own such
//! request's response: [`new_child`] (which also holds [`install`], shared by both).
//!
//! Not yet: retrying after TEMPORARY_FAILURE (the rekey ends with [`Event::ChildSaFailed`]; a later soft
//! expiry or command may try again, the hard expiry removes the CHILD_SA).

use std::time::Instant;

use ike_wire::ids::{DhId, ExchangeType, NotifyType, ProtocolId};
use ike_wire::ke::Ke;
use ike_wire::nonce::Nonce;
use ike_wire::notify::Notify;
use ike_wire::sa::Sa;
use ike_wire::ts::Ts;
use ike_wire::{notifies, Message, Payload};

use super::auth::{child_suite, find, lifetimes};
use super::ike_rekey;
use super::new_child::{self, install, Asked, Made};
use crate::child_sa::{alloc_spi, ChildSa};
use crate::config::{Mode, Protocol};
use crate::crypto::{self, encapsulate, ChildKeys, KeMethod, KeyShare};
use crate::ike_sa::{ChildRekey, IkeSa, Queued, State};
use crate::io::{Datagram, Event, Output};
use crate::narrow;
use crate::proposals;
use crate::retransmit::Retransmit;
use crate::stats::Drop;
use crate::Ike;

/// Why [`start`] sent nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StartError {
    /// No CHILD_SA with that inbound SPI (any more), or its child left the configuration.
    NoChild,
    /// A cryptographic operation or the sealing failed.
    Failed,
}

/// Our CREATE_CHILD_SA request rekeying the CHILD_SA `old_spi_in` of IKE SA `spi`, its
/// KE of `group` (one the peer asked for with INVALID_KE_PAYLOAD) or of our first
/// proposal's first group. The window must be free (the caller queues otherwise).
pub(crate) fn start(
    ike: &mut Ike,
    now: Instant,
    spi: u64,
    old_spi_in: u32,
    group: Option<DhId>,
    out: &mut Vec<Output>,
) -> Result<(), StartError> {
    let sa = ike.sas.get(&spi).ok_or(StartError::NoChild)?;
    let old = sa.children.iter().find(|c| c.spi_in == old_spi_in).ok_or(StartError::NoChild)?;
    let cfg = ike.config.connections[sa.conn]
        .children
        .iter()
        .find(|c| c.name == old.name)
        .ok_or(StartError::NoChild)?;
    let mut esp = proposals::usable(&cfg.esp_proposals);
    if let Some(g) = group {
        esp = proposals::prefer_group(&esp, g);
        esp.sort_by_key(|p| !p.dh.contains(&g));
    }
    let prf = sa.suite.as_ref().ok_or(StartError::Failed)?.prf;
    // PFS with our first proposal's first group, if it has one.
    let method = esp.first().and_then(|p| p.dh.first()).and_then(|&g| KeMethod::from_id(g).ok());
    let share = method.map(|m| KeyShare::generate(&ike.fw, m)).transpose().map_err(|_| StartError::Failed)?;
    let ni = crypto::nonce(&ike.fw, prf, ike.settings.nonce_len).map_err(|_| StartError::Failed)?;
    let mut payloads = vec![Payload::Notify(Notify::rekey_sa(ProtocolId::ESP, old_spi_in))];
    if old.mode == Mode::Transport {
        payloads.push(Payload::Notify(Notify::new(NotifyType::USE_TRANSPORT_MODE, vec![])));
    }
    let (local_ts, remote_ts) = (old.local_ts.clone(), old.remote_ts.clone());
    let spi_in = alloc_spi(&ike.fw, &mut ike.child_spis).map_err(|_| StartError::Failed)?;
    payloads.push(Payload::Sa(Sa { proposals: proposals::offer(&esp, &spi_in.to_be_bytes(), true) }));
    payloads.push(Payload::Nonce(Nonce(ni.clone())));
    if let Some(s) = &share {
        payloads.push(Payload::Ke(Ke { group: s.method().id(), data: s.public_value().to_vec() }));
    }
    payloads.push(Payload::TsI(Ts { selectors: local_ts }));
    payloads.push(Payload::TsR(Ts { selectors: remote_ts }));

    let limit = ike.fragment_limit(&ike.sas[&spi], ike.sas[&spi].local);
    let sa = ike.sas.get_mut(&spi).expect("present");
    let Ok(id) = sa.requests.start() else {
        ike.child_spis.remove(&spi_in);
        return Err(StartError::Failed);
    };
    let hdr = sa.header(ExchangeType::CREATE_CHILD_SA, false, id);
    let Ok(datagrams) = sa.seal_fragmented(&hdr, &payloads, limit) else {
        sa.requests.restart();
        ike.child_spis.remove(&spi_in);
        return Err(StartError::Failed);
    };
    sa.child_rekey = Some(ChildRekey { old_spi_in, spi_in, ni, key_share: share, collision: None });
    sa.retransmit = Some(Retransmit::new(now, datagrams.clone(), &ike.settings.retransmit));
    super::send_sealed(&mut ike.stats, out, sa.local, sa.remote, datagrams);
    ike.stats.create_child_sa.requests_sent += 1;
    Ok(())
}

/// The responder's answer: the new CHILD_SA and what the response carries besides its
/// SA payload, or the error notify to answer with.
struct Answer {
    made: Made,
    old_spi_in: u32,
    chosen: proposals::Chosen,
    ni: Vec<u8>,
    nr: Vec<u8>,
    ke: Option<Ke>,
}

fn error(n: NotifyType) -> Notify {
    Notify::new(n, vec![])
}

/// The responder's checks and computations; nothing changes here.
fn answer(ike: &Ike, sa: &IkeSa, inner: &[Payload]) -> Result<Answer, Notify> {
    // §2.25: busy rekeying or deleting the IKE SA.
    if sa.ike_rekey.is_some() || sa.state != State::Established {
        return Err(error(NotifyType::TEMPORARY_FAILURE));
    }
    // Without REKEY_SA only what new_child does not take comes here (no SA payload, or
    // one proposing neither IKE nor ESP): no CHILD_SA of that kind is made.
    let rekey = notifies(inner)
        .find(|n| n.notify_type == NotifyType::REKEY_SA)
        .ok_or_else(|| error(NotifyType::NO_ADDITIONAL_SAS))?;
    if rekey.protocol != ProtocolId::ESP {
        return Err(error(NotifyType::NO_ADDITIONAL_SAS));
    }
    let their_old = rekey.rekey_sa_spi().map_err(|_| error(NotifyType::INVALID_SYNTAX))?;
    let not_found = || Notify {
        protocol: ProtocolId::ESP,
        spi: their_old.to_be_bytes().to_vec(),
        notify_type: NotifyType::CHILD_SA_NOT_FOUND,
        data: Vec::new(),
    };
    // Their inbound SPI is our outbound one.
    let old = sa.children.iter().find(|c| c.spi_out == their_old).ok_or_else(not_found)?;
    let cfg =
        ike.config.connections[sa.conn].children.iter().find(|c| c.name == old.name).ok_or_else(not_found)?;
    let syntax = || error(NotifyType::INVALID_SYNTAX);
    let sa_p = find(inner, |p| if let Payload::Sa(x) = p { Some(x) } else { None }).ok_or_else(syntax)?;
    let ni = find(inner, |p| if let Payload::Nonce(x) = p { Some(x) } else { None }).ok_or_else(syntax)?;
    let tsi = find(inner, |p| if let Payload::TsI(x) = p { Some(x) } else { None }).ok_or_else(syntax)?;
    let tsr = find(inner, |p| if let Payload::TsR(x) = p { Some(x) } else { None }).ok_or_else(syntax)?;
    let kei = find(inner, |p| if let Payload::Ke(x) = p { Some(x) } else { None });
    let prf = sa.suite.as_ref().ok_or_else(syntax)?.prf;
    crypto::check_nonce(prf, ni.0.len()).map_err(|_| syntax())?;

    let mut ours = proposals::usable(&cfg.esp_proposals);
    if let Some(k) = kei {
        ours = proposals::prefer_group(&ours, k.group);
    }
    let chosen = proposals::choose(&ours, &sa_p.proposals, false)
        .ok_or_else(|| error(NotifyType::NO_PROPOSAL_CHOSEN))?;
    let suite = child_suite(&chosen).ok_or_else(|| error(NotifyType::NO_PROPOSAL_CHOSEN))?;
    let (ke, g_ir) = match chosen.ke {
        None => (None, None),
        Some(group) => {
            let k = kei.filter(|k| k.group == group).ok_or_else(|| Notify::invalid_ke_payload(group))?;
            let method = KeMethod::from_id(group).map_err(|_| error(NotifyType::NO_PROPOSAL_CHOSEN))?;
            let (data, g) = encapsulate(&ike.fw, method, &k.data).map_err(|_| syntax())?;
            (Some(Ke { group, data }), Some(g))
        }
    };
    let new_tsi = narrow::narrow(&tsi.selectors, &narrow::resolve(&cfg.remote_ts, sa.remote.ip()));
    let new_tsr = narrow::narrow(&tsr.selectors, &narrow::resolve(&cfg.local_ts, sa.local.ip()));
    if new_tsi.is_empty() || new_tsr.is_empty() {
        return Err(error(NotifyType::TS_UNACCEPTABLE));
    }
    let spi_out = u32::from_be_bytes(chosen.spi.as_slice().try_into().map_err(|_| syntax())?);
    let nr = crypto::nonce(&ike.fw, prf, ike.settings.nonce_len).map_err(|_| syntax())?;
    let sk_d = &sa.keys.as_ref().ok_or_else(syntax)?.sk_d;
    let keys = ChildKeys::derive(&ike.fw, prf, sk_d, &suite, g_ir.as_deref().map(|g| &g[..]), &ni.0, &nr)
        .map_err(|_| syntax())?;
    let (soft, hard) = lifetimes(ike, cfg);
    let child = ChildSa {
        name: old.name.clone(),
        spi_in: 0,
        spi_out,
        suite,
        esn: chosen.esn == Some(ike_wire::ids::EsnId::YES),
        mode: old.mode,
        // The requester's TSi is the remote side for us.
        local_ts: new_tsr,
        remote_ts: new_tsi,
    };
    Ok(Answer {
        made: Made { child, keys, soft, hard },
        old_spi_in: old.spi_in,
        chosen,
        ni: ni.0.clone(),
        nr,
        ke,
    })
}

/// The responder's side of a CREATE_CHILD_SA request.
pub(crate) fn request(
    ike: &mut Ike,
    now: Instant,
    spi: u64,
    d: &Datagram,
    msg: &Message,
    out: &mut Vec<Output>,
) -> Result<(), Drop> {
    let sa = &ike.sas[&spi];
    let inner = sa.open(&d.bytes, msg)?;
    let h = msg.header;
    let sa_p = find(&inner, |p| if let Payload::Sa(x) = p { Some(x) } else { None });
    if sa_p.is_some_and(|x| x.proposals.first().is_some_and(|p| p.protocol == ProtocolId::IKE)) {
        return ike_rekey::request(ike, now, spi, d, h.message_id, &inner, out);
    }
    if new_child::is_new_child(&inner) {
        return new_child::request(ike, spi, d, h.message_id, &inner, out);
    }
    let result = answer(ike, sa, &inner);
    let (payloads, made) = match result {
        Err(n) => (vec![Payload::Notify(n)], None),
        Ok(a) => {
            let spi_in = alloc_spi(&ike.fw, &mut ike.child_spis).map_err(|_| Drop::BadPeerValue)?;
            let mut p = Vec::new();
            if a.made.child.mode == Mode::Transport {
                p.push(Payload::Notify(error(NotifyType::USE_TRANSPORT_MODE)));
            }
            p.push(Payload::Sa(Sa {
                proposals: vec![a.chosen.to_wire(Protocol::Esp, &spi_in.to_be_bytes())],
            }));
            p.push(Payload::Nonce(Nonce(a.nr.clone())));
            if let Some(k) = &a.ke {
                p.push(Payload::Ke(k.clone()));
            }
            // TSi and TSr as the requester sees them: its side first.
            p.push(Payload::TsI(Ts { selectors: a.made.child.remote_ts.clone() }));
            p.push(Payload::TsR(Ts { selectors: a.made.child.local_ts.clone() }));
            let mut a = a;
            a.made.child.spi_in = spi_in;
            (p, Some(a))
        }
    };
    let sa = &ike.sas[&spi];
    let hdr = sa.header(ExchangeType::CREATE_CHILD_SA, true, h.message_id);
    let Ok(datagrams) = sa.seal_fragmented(&hdr, &payloads, ike.fragment_limit(sa, d.local)) else {
        if let Some(a) = &made {
            ike.child_spis.remove(&a.made.child.spi_in);
        }
        return Err(Drop::BadPeerValue);
    };
    let sa = ike.sas.get_mut(&spi).expect("present");
    sa.responses.answered(h.message_id, d.bytes.clone(), datagrams.clone());
    super::send_sealed(&mut ike.stats, out, d.local, d.remote, datagrams);
    ike.stats.create_child_sa.responses_sent += 1;
    let Some(a) = made else {
        ike.stats.create_child_sa.errors_sent += 1;
        return Ok(());
    };
    let sa = ike.sas.get_mut(&spi).expect("present");
    if let Some(r) = sa.child_rekey.as_mut().filter(|r| r.old_spi_in == a.old_spi_in) {
        r.collision = Some((a.ni.clone(), a.nr.clone(), a.made.child.spi_in));
    }
    // The new outbound SA waits for the old CHILD_SA to go: the requester installs its
    // new inbound SA only when it reads this response.
    install(ike, spi, a.made, false, Some(a.old_spi_in), out);
    Ok(())
}

/// The requester's check of the answer to our rekey: within the old CHILD_SA's
/// selectors, in its mode, under its name.
fn accept(ike: &Ike, sa: &IkeSa, r: &ChildRekey, inner: &[Payload]) -> Result<Made, Option<NotifyType>> {
    if let Some(n) = new_child::refusal(inner) {
        return Err(Some(n));
    }
    let old = sa.children.iter().find(|c| c.spi_in == r.old_spi_in).ok_or(None)?;
    let cfg = ike.config.connections[sa.conn].children.iter().find(|c| c.name == old.name).ok_or(None)?;
    let asked = Asked {
        cfg,
        name: &old.name,
        mode: old.mode,
        local_ts: &old.local_ts,
        remote_ts: &old.remote_ts,
        spi_in: r.spi_in,
        ni: &r.ni,
        key_share: r.key_share.as_ref(),
    };
    new_child::accept_answer(ike, sa, &asked, inner)
}

/// The lower of two nonces (§2.8.1 compares them as numbers of the same length;
/// byte-wise comparison is that for equal lengths).
fn lowest<'a>(a: &'a [u8], b: &'a [u8]) -> &'a [u8] {
    a.min(b)
}

/// The requester's side: the CREATE_CHILD_SA response.
pub(crate) fn response(
    ike: &mut Ike,
    now: Instant,
    spi: u64,
    d: &Datagram,
    msg: &Message,
    out: &mut Vec<Output>,
) -> Result<(), Drop> {
    let sa = &ike.sas[&spi];
    let inner = sa.open(&d.bytes, msg)?;
    if sa.ike_rekey.is_some() {
        let sa = ike.sas.get_mut(&spi).expect("present");
        sa.requests.accept(msg.header.message_id);
        sa.retransmit = None;
        return ike_rekey::response(ike, now, spi, &inner, out);
    }
    if sa.child_create.is_some() {
        let sa = ike.sas.get_mut(&spi).expect("present");
        sa.requests.accept(msg.header.message_id);
        sa.retransmit = None;
        new_child::response(ike, now, spi, &inner, out);
        return Ok(());
    }
    let r = sa.child_rekey.as_ref().ok_or(Drop::UnexpectedExchange)?;
    let result = accept(ike, sa, r, &inner);
    let nr = find(&inner, |p| if let Payload::Nonce(x) = p { Some(x) } else { None }).map(|n| n.0.clone());
    let sa = ike.sas.get_mut(&spi).expect("present");
    sa.requests.accept(msg.header.message_id);
    sa.retransmit = None;
    let r = sa.child_rekey.take().expect("checked");
    let made = match result {
        Ok(m) => m,
        Err(notify) => {
            ike.child_spis.remove(&r.spi_in);
            ike.stats.create_child_sa.errors_received += 1;
            if notify.is_none() {
                // An answer that does not fit: the peer installed a CHILD_SA we will not
                // use; a Delete with the SPI we offered removes it there.
                sa.queued.push_back(Queued::DeleteChild(r.spi_in));
            }
            // INVALID_KE_PAYLOAD: once more with the group asked for, if ours allow it and
            // this was not already the retry.
            let asked = notifies(&inner)
                .find(|n| n.notify_type == NotifyType::INVALID_KE_PAYLOAD)
                .and_then(|n| n.invalid_ke_group().ok());
            let old_cfg =
                sa.children.iter().find(|c| c.spi_in == r.old_spi_in).and_then(|old| {
                    ike.config.connections[sa.conn].children.iter().find(|c| c.name == old.name)
                });
            let retry = asked.filter(|&g| {
                r.key_share.as_ref().is_none_or(|s| s.method().id() != g)
                    && old_cfg.is_some_and(|c| {
                        proposals::usable(&c.esp_proposals).iter().any(|p| p.dh.contains(&g))
                    })
            });
            if let Some(g) = retry {
                sa.queued.push_front(Queued::RekeyChildWith(r.old_spi_in, g));
                ike.pump(now, spi, out);
                return Ok(());
            }
            let child = sa.children.iter().find(|c| c.spi_in == r.old_spi_in).map(|c| c.name.clone());
            out.push(Output::Event(Event::ChildSaFailed {
                ike_sa: spi,
                child: child.unwrap_or_default(),
                notify,
            }));
            ike.pump(now, spi, out);
            return Ok(());
        }
    };
    let ours = made.child.spi_in;
    // Ours at once: the peer, which answered, has the new inbound SA already.
    install(ike, spi, made, true, None, out);
    // §2.8.1: which SA goes, and who deletes it.
    let redundant_is_ours = match (&r.collision, &nr) {
        (Some((their_ni, our_nr, _)), Some(nr)) => lowest(&r.ni, nr) < lowest(their_ni, our_nr),
        _ => false,
    };
    let gone = if redundant_is_ours { ours } else { r.old_spi_in };
    if let (false, Some((_, _, theirs))) = (redundant_is_ours, &r.collision) {
        // The CHILD_SA we made answering the peer's request is the redundant one, which
        // the peer deletes: we never send on it, so its held outbound SA is dropped
        // rather than installed when the old one goes now.
        if let Some(sa) = ike.sas.get_mut(&spi) {
            sa.outbound_later.retain(|&(new, _)| new != *theirs);
        }
    }
    ike.retire_child(spi, gone, out);
    ike.pump(now, spi, out);
    Ok(())
}

/// Whether `spi_in` is a CHILD_SA of `sa` that a rekey may start on: present, and not
/// already being rekeyed by us.
pub(crate) fn rekeyable(sa: &IkeSa, spi_in: u32) -> bool {
    sa.state == State::Established
        && sa.children.iter().any(|c| c.spi_in == spi_in)
        && sa.child_rekey.as_ref().is_none_or(|r| r.old_spi_in != spi_in)
        && !sa
            .queued
            .iter()
            .any(|q| matches!(q, Queued::RekeyChild(s) | Queued::RekeyChildWith(s, _) if *s == spi_in))
}
