//! CREATE_CHILD_SA rekeying the IKE SA (RFC 7296 §1.3.2, §2.18), both roles, with
//! §2.8.2's simultaneous rekeying.
//!
//! ```text
//!  requester (rekey time in tick, rekey_ike)        responder
//!  SK{ SA(IKE, new SPIi), Ni, KEi }  ───────────▶  ICV ─ bad ─▶ dropped, nothing changes
//!                                                  our CHILD_SA rekey outstanding ─▶ N(TEMPORARY_FAILURE)
//!                                                  no proposal / KE group ─▶ N(NO_PROPOSAL_CHOSEN,
//!                                                    INVALID_KE_PAYLOAD)
//!                                                  SKEYSEED = prf_old(SK_d old, g^ir | Ni | Nr);
//!                                                  the new IKE SA (SPIi, SPIr new; the requester
//!  ◀───────────────── SK{ SA(IKE, new SPIr), Nr, KEr }    is its initiator), CHILD_SAs moved to it
//!  the new IKE SA, the CHILD_SAs moved;
//!  SK{ D(IKE) } on the old one (terminate) ───────▶  the old one removed (informational)
//! ```
//!
//! Simultaneous rekeying (§2.8.2): each side answers the other's request while its own is
//! outstanding, making a second new IKE SA, and keeps the CHILD_SAs on the old one until
//! its own response. Then both compare nonces as for CHILD_SAs: the exchange holding the
//! lowest of the four made the redundant IKE SA, which its requester deletes (a Delete
//! sent on it); the CHILD_SAs go to the other new IKE SA, and that one's requester
//! deletes the old IKE SA. Should that Delete overtake the loser's response, the loser
//! moves the CHILD_SAs to the winner's new IKE SA as the Delete comes (`old_deleted`), or
//! to its successor if that one was rekeyed meanwhile (the winner may rekey it at once;
//! `move_children` keeps the pending collision pointing at the live IKE SA).
//! Should our request be refused instead (the peer's rekey done, the old IKE SA being
//! deleted), the CHILD_SAs go to the peer's new IKE SA too.
//!
//! An IKE SA whose CHILD_SAs went to a successor (`IkeSa::superseded`, set by
//! `move_children`) only waits for its Delete: no rekey of it and no new CHILD_SA on it
//! start, or a second successor would be made that the peer never pairs with the first.
//!
//! The winner waits for the loser to delete the redundant IKE SA, which the winner made
//! answering the loser's request. If that answer is lost (charon 5.9.8 drops a response
//! that arrives while it processes our request with the same message ID), the loser can
//! only retransmit on the old IKE SA, which the winner deletes meanwhile: the loser then
//! never has the redundant IKE SA and never deletes it. So the winner deletes it itself
//! should it still be there after the half-open timeout (`IkeSa::delete_at`, `Ike::tick`),
//! as charon does (`HALF_OPEN_IKE_SA_TIMEOUT` in its ike_rekey task).

use std::time::Instant;

use ike_wire::ids::{ExchangeType, NotifyType};
use ike_wire::ke::Ke;
use ike_wire::nonce::Nonce;
use ike_wire::notify::Notify;
use ike_wire::sa::Sa;
use ike_wire::{notifies, Payload};

use super::auth::find;
use crate::config::Protocol;
use crate::crypto::{self, encapsulate, IkeKeys, IkeSuite, KeMethod, KeyShare};
use crate::ike_sa::{IkeRekey, IkeSa, Queued, State};
use crate::io::{Datagram, Event, Output};
use crate::proposals::{self, Chosen};
use crate::retransmit::Retransmit;
use crate::stats::Drop;
use crate::Ike;

fn suite_of(c: &Chosen) -> Option<IkeSuite> {
    IkeSuite::from_ids(c.encr.id, c.encr.key_bits, c.integ, c.prf?, c.ke?).ok()
}

/// A fresh SPI of ours, not a key of the table.
fn new_spi(ike: &Ike) -> Option<u64> {
    loop {
        let s = u64::from_be_bytes(crypto::ike_spi(&ike.fw).ok()?);
        if !ike.sas.contains_key(&s) {
            return Some(s);
        }
    }
}

/// Our request rekeying IKE SA `spi`. The window must be free (the caller queues
/// otherwise). False: nothing sent.
pub(crate) fn start(ike: &mut Ike, now: Instant, spi: u64, out: &mut Vec<Output>) -> bool {
    let Some(sa) = ike.sas.get(&spi) else { return false };
    let Some(suite) = sa.suite else { return false };
    let conn = &ike.config.connections[sa.conn];
    // The group in use first: the peer then takes our KE as it is.
    let ours = proposals::prefer_group(&proposals::usable(&conn.proposals), suite.ke.id());
    let Some(method) = ours.first().and_then(|p| p.dh.first()).and_then(|&g| KeMethod::from_id(g).ok())
    else {
        return false;
    };
    let Ok(share) = KeyShare::generate(&ike.fw, method) else { return false };
    let Ok(ni) = crypto::nonce(&ike.fw, suite.prf, ike.settings.nonce_len) else { return false };
    let Some(new) = new_spi(ike) else { return false };
    let payloads = [
        Payload::Sa(Sa { proposals: proposals::offer(&ours, &new.to_be_bytes(), true) }),
        Payload::Nonce(Nonce(ni.clone())),
        Payload::Ke(Ke { group: method.id(), data: share.public_value().to_vec() }),
    ];
    let limit = ike.fragment_limit(&ike.sas[&spi], ike.sas[&spi].local);
    let sa = ike.sas.get_mut(&spi).expect("present");
    let Ok(id) = sa.requests.start() else { return false };
    let hdr = sa.header(ExchangeType::CREATE_CHILD_SA, false, id);
    let Ok(datagrams) = sa.seal_fragmented(&hdr, &payloads, limit) else {
        sa.requests.restart();
        return false;
    };
    sa.ike_rekey = Some(IkeRekey { spi: new, ni, key_share: share, collision: None });
    sa.retransmit = Some(Retransmit::new(now, datagrams.clone(), &ike.settings.retransmit));
    super::send_sealed(&mut ike.stats, out, sa.local, sa.remote, datagrams);
    ike.stats.create_child_sa.requests_sent += 1;
    true
}

/// The IKE SA that replaces `old`: established, its windows at 0, nothing moved yet.
#[allow(clippy::too_many_arguments)]
fn successor(
    ike: &Ike,
    old: &IkeSa,
    we_requested: bool,
    spi_i: u64,
    spi_r: u64,
    suite: IkeSuite,
    keys: IkeKeys,
    now: Instant,
) -> Option<IkeSa> {
    let sk = keys.sk_ciphers(&ike.fw, &suite, we_requested).ok()?;
    let mut n = IkeSa::new(spi_i, we_requested, State::Established, old.conn, old.local, old.remote, now);
    n.spi_r = spi_r;
    n.nat_local = old.nat_local;
    n.nat_remote = old.nat_remote;
    n.suite = Some(suite);
    n.keys = Some(keys);
    n.sk = Some(sk);
    n.peer_fragmentation = old.peer_fragmentation;
    n.peer_hashes = old.peer_hashes.clone();
    n.peer_id = old.peer_id.clone();
    Some(n)
}

/// Moves the CHILD_SAs and the queued requests of IKE SA `from` to `to`; an outstanding
/// Delete of a CHILD_SA goes first in the queue, since the old IKE SA's end loses its
/// answer (and the peer may not have seen it).
///
/// `to` must be established: if it is gone or being deleted, nothing moves, and the
/// CHILD_SAs go (their Removes) with `from`, as they go with `to` on the peer.
///
/// An IKE SA whose crossing rekey still waits (`IkeRekey::collision`) to hand its CHILD_SAs
/// to `from` hands them to `to` instead: `from` was rekeyed in the meantime (by either
/// side; the peer, which knew `from` had won, may rekey it at once), and on the peer
/// the CHILD_SAs are on `to` now. Without this they would land on `from`, whose Delete
/// would remove them here only.
fn move_children(ike: &mut Ike, from: u64, to: u64, out: &mut Vec<Output>) {
    if from == to || !ike.sas.get(&to).is_some_and(|n| n.state == State::Established) {
        return;
    }
    let Some(old) = ike.sas.get_mut(&from) else { return };
    old.superseded = true;
    old.rekey_at = None;
    let children = std::mem::take(&mut old.children);
    let retiring = std::mem::take(&mut old.retiring);
    let outbound_later = std::mem::take(&mut old.outbound_later);
    let mut queued: Vec<Queued> = old.deleting_child.take().map(Queued::DeleteChild).into_iter().collect();
    queued.extend(old.queued.drain(..).filter(|q| *q != Queued::RekeyIke));
    let new = ike.sas.get_mut(&to).expect("checked");
    new.children.extend(children);
    new.outbound_later.extend(outbound_later);
    new.retiring.extend(retiring.into_iter().map(|r| crate::io::ChildSaRemove { ike_sa: to, ..r }));
    new.queued.extend(queued);
    for sa in ike.sas.values_mut() {
        if let Some(c) = sa.ike_rekey.as_mut().and_then(|r| r.collision.as_mut()).filter(|c| c.2 == from) {
            c.2 = to;
        }
    }
    out.push(Output::Event(Event::IkeSaRekeyed { old: from, new: to }));
}

/// The peer deletes the old IKE SA `spi` while our rekey of it is outstanding and crossed
/// theirs: the peer's new IKE SA won (its requester deletes the old one only then), and our
/// response may never come (reordered behind the Delete, it finds no IKE SA). So the
/// CHILD_SAs go to the peer's new IKE SA now instead of dying with the old one (RFC 7296
/// §2.25.2: answer the Delete and forget our own rekey).
pub(crate) fn old_deleted(ike: &mut Ike, now: Instant, spi: u64, out: &mut Vec<Output>) {
    let Some(sa) = ike.sas.get_mut(&spi) else { return };
    let Some(theirs) = sa.ike_rekey.as_ref().and_then(|r| r.collision.as_ref()).map(|c| c.2) else { return };
    sa.ike_rekey = None;
    move_children(ike, spi, theirs, out);
    ike.pump(now, theirs, out);
}

/// The responder's checks and the new IKE SA, or the error notify to answer with.
fn answer(ike: &Ike, sa: &IkeSa, inner: &[Payload], now: Instant) -> Result<(Vec<Payload>, IkeSa), Notify> {
    let error = |n| Notify::new(n, vec![]);
    if sa.child_rekey.is_some() || sa.child_create.is_some() || sa.state != State::Established {
        return Err(error(NotifyType::TEMPORARY_FAILURE));
    }
    let syntax = || error(NotifyType::INVALID_SYNTAX);
    let sa_p = find(inner, |p| if let Payload::Sa(x) = p { Some(x) } else { None }).ok_or_else(syntax)?;
    let ni = find(inner, |p| if let Payload::Nonce(x) = p { Some(x) } else { None }).ok_or_else(syntax)?;
    let kei = find(inner, |p| if let Payload::Ke(x) = p { Some(x) } else { None }).ok_or_else(syntax)?;
    let old_suite = sa.suite.ok_or_else(syntax)?;
    crypto::check_nonce(old_suite.prf, ni.0.len()).map_err(|_| syntax())?;
    let conn = &ike.config.connections[sa.conn];
    let ours = proposals::prefer_group(&proposals::usable(&conn.proposals), kei.group);
    let chosen = proposals::choose(&ours, &sa_p.proposals, false)
        .ok_or_else(|| error(NotifyType::NO_PROPOSAL_CHOSEN))?;
    let suite = suite_of(&chosen).ok_or_else(|| error(NotifyType::NO_PROPOSAL_CHOSEN))?;
    if kei.group != suite.ke.id() {
        return Err(Notify::invalid_ke_payload(suite.ke.id()));
    }
    let their_spi = u64::from_be_bytes(chosen.spi.as_slice().try_into().map_err(|_| syntax())?);
    let (ker, g) = encapsulate(&ike.fw, suite.ke, &kei.data).map_err(|_| syntax())?;
    let nr = crypto::nonce(&ike.fw, old_suite.prf, ike.settings.nonce_len).map_err(|_| syntax())?;
    let ours_spi = new_spi(ike).ok_or_else(syntax)?;
    let old_keys = sa.keys.as_ref().ok_or_else(syntax)?;
    let keys = old_keys
        .rekeyed(
            &ike.fw,
            old_suite.prf,
            &suite,
            &g,
            &ni.0,
            &nr,
            &their_spi.to_be_bytes(),
            &ours_spi.to_be_bytes(),
        )
        .map_err(|_| syntax())?;
    let new = successor(ike, sa, false, their_spi, ours_spi, suite, keys, now).ok_or_else(syntax)?;
    let payloads = vec![
        Payload::Sa(Sa { proposals: vec![chosen.to_wire(Protocol::Ike, &ours_spi.to_be_bytes())] }),
        Payload::Nonce(Nonce(nr)),
        Payload::Ke(Ke { group: suite.ke.id(), data: ker }),
    ];
    Ok((payloads, new))
}

/// The responder's side; `inner` is the request's (authenticated) payloads.
pub(crate) fn request(
    ike: &mut Ike,
    now: Instant,
    spi: u64,
    d: &Datagram,
    message_id: u32,
    inner: &[Payload],
    out: &mut Vec<Output>,
) -> Result<(), Drop> {
    let sa = &ike.sas[&spi];
    let (payloads, new) = match answer(ike, sa, inner, now) {
        Ok((p, n)) => (p, Some(n)),
        Err(n) => (vec![Payload::Notify(n)], None),
    };
    let hdr = sa.header(ExchangeType::CREATE_CHILD_SA, true, message_id);
    let datagrams = sa
        .seal_fragmented(&hdr, &payloads, ike.fragment_limit(sa, d.local))
        .map_err(|_| Drop::BadPeerValue)?;
    let ni = find(inner, |p| if let Payload::Nonce(x) = p { Some(x) } else { None }).map(|n| n.0.clone());
    let sa = ike.sas.get_mut(&spi).expect("present");
    sa.responses.answered(message_id, d.bytes.clone(), datagrams.clone());
    super::send_sealed(&mut ike.stats, out, d.local, d.remote, datagrams);
    ike.stats.create_child_sa.responses_sent += 1;
    let Some(new) = new else {
        ike.stats.create_child_sa.errors_sent += 1;
        return Ok(());
    };
    let new_spi = new.spi_r;
    let nr = match &payloads[1] {
        Payload::Nonce(n) => n.0.clone(),
        _ => Vec::new(),
    };
    ike.sas.insert(new_spi, new);
    ike.stats.ike_sas_up += 1;
    let sa = ike.sas.get_mut(&spi).expect("present");
    if let Some(r) = sa.ike_rekey.as_mut() {
        // Ours is outstanding: the CHILD_SAs wait for its response (§2.8.2).
        r.collision = Some((ni.unwrap_or_default(), nr, new_spi));
    } else {
        move_children(ike, spi, new_spi, out);
        ike.pump(now, new_spi, out);
    }
    Ok(())
}

/// The requester's side: the response; the window is accepted by the caller.
pub(crate) fn response(
    ike: &mut Ike,
    now: Instant,
    spi: u64,
    inner: &[Payload],
    out: &mut Vec<Output>,
) -> Result<(), Drop> {
    let sa = ike.sas.get_mut(&spi).expect("present");
    let r = sa.ike_rekey.take().ok_or(Drop::UnexpectedExchange)?;
    let sa = &ike.sas[&spi];
    let made = accept(ike, sa, &r, inner, now);
    let (new, nr) = match made {
        Ok(x) => x,
        Err(notify) => {
            ike.stats.create_child_sa.errors_received += 1;
            out.push(Output::Event(Event::IkeSaRekeyFailed { ike_sa: spi, notify }));
            if let Some((_, _, theirs)) = r.collision {
                // Ours failed, theirs (answered) stands: the CHILD_SAs go to it, and its
                // requester deletes the old IKE SA.
                move_children(ike, spi, theirs, out);
                ike.pump(now, theirs, out);
                return Ok(());
            }
            ike.pump(now, spi, out);
            return Ok(());
        }
    };
    let ours = new.spi_i;
    ike.sas.insert(ours, new);
    ike.stats.ike_sas_up += 1;
    let redundant_is_ours = match &r.collision {
        Some((their_ni, our_nr, _)) => r.ni.as_slice().min(&nr) < their_ni.as_slice().min(our_nr),
        None => false,
    };
    match (&r.collision, redundant_is_ours) {
        (Some((_, _, theirs)), true) => {
            // The peer's new IKE SA wins; it deletes the old one, we delete ours.
            move_children(ike, spi, *theirs, out);
            ike.terminate(now, ours, out);
            ike.pump(now, *theirs, out);
        }
        (collision, _) => {
            if let Some(theirs) = collision.as_ref().and_then(|c| ike.sas.get_mut(&c.2)) {
                // Redundant: the peer deletes it once it has our answer (and may never
                // have it); charon gives it its half-open timeout too.
                theirs.delete_at = Some(now + ike.settings.half_open.timeout);
            }
            move_children(ike, spi, ours, out);
            ike.terminate(now, spi, out);
            ike.pump(now, ours, out);
        }
    }
    Ok(())
}

/// The requester's check of the answer: the new IKE SA and the responder's nonce, or
/// the error notify (`None`: an answer that does not fit our request).
fn accept(
    ike: &Ike,
    sa: &IkeSa,
    r: &IkeRekey,
    inner: &[Payload],
    now: Instant,
) -> Result<(IkeSa, Vec<u8>), Option<NotifyType>> {
    if let Some(n) = notifies(inner).find(|n| n.notify_type.is_error()) {
        return Err(Some(n.notify_type));
    }
    let sa_p = find(inner, |p| if let Payload::Sa(x) = p { Some(x) } else { None }).ok_or(None)?;
    let nr = find(inner, |p| if let Payload::Nonce(x) = p { Some(x) } else { None }).ok_or(None)?;
    let ker = find(inner, |p| if let Payload::Ke(x) = p { Some(x) } else { None }).ok_or(None)?;
    let old_suite = sa.suite.ok_or(None)?;
    crypto::check_nonce(old_suite.prf, nr.0.len()).map_err(|_| None)?;
    let conn = &ike.config.connections[sa.conn];
    let chosen =
        proposals::accept(&proposals::usable(&conn.proposals), &sa_p.proposals, false).ok_or(None)?;
    let suite = suite_of(&chosen).ok_or(None)?;
    if suite.ke != r.key_share.method() || ker.group != suite.ke.id() {
        return Err(None);
    }
    let their = u64::from_be_bytes(chosen.spi.as_slice().try_into().map_err(|_| None)?);
    let g = r.key_share.decapsulate(&ker.data).map_err(|_| None)?;
    let keys = sa
        .keys
        .as_ref()
        .ok_or(None)?
        .rekeyed(&ike.fw, old_suite.prf, &suite, &g, &r.ni, &nr.0, &r.spi.to_be_bytes(), &their.to_be_bytes())
        .map_err(|_| None)?;
    let new = successor(ike, sa, true, r.spi, their, suite, keys, now).ok_or(None)?;
    Ok((new, nr.0.clone()))
}
