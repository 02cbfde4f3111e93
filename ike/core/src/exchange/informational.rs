//! INFORMATIONAL (RFC 7296 §1.4): Delete and liveness, on an established IKE SA.
//!
//! ```text
//!  peer's request                        our response (SK, same message ID)
//!  SK{ }                  (liveness) ──▶ SK{ }
//!  SK{ D(IKE) }                      ──▶ SK{ }            IKE SA and its CHILD_SAs removed
//!  SK{ D(ESP, their SPIs) }          ──▶ SK{ D(ESP, ours) } those CHILD_SAs removed
//!  other payloads, status notifies   ──▶ ignored (an unknown status notify is ignored)
//!
//!  terminate(ike_sa): Remove for every CHILD_SA now; SK{ D(IKE) } sent; the IKE SA
//!  waits in Deleting for the response (or the retransmissions' end), then goes.
//!
//!  send_child_delete(spi_in): SK{ D(ESP, spi_in) } for a CHILD_SA already removed here
//!  (the old one after a rekey, a hard expiry); its response frees the window for the next
//!  queued request (Ike::pump).
//!
//!  send_liveness: SK{ } (our liveness check, dpd_delay); its response, like a Delete's
//!  (child_delete_response), frees the window, and as every accepted message it sets
//!  IkeSa::last_heard (Ike::heard); no response: the retransmissions run out and the IKE
//!  SA goes down, PeerDead (Ike::tick).
//! ```
//!
//! Not yet: INITIAL_CONTACT's effect.

use std::time::Instant;

use ike_wire::delete::Delete;
use ike_wire::ids::{ExchangeType, ProtocolId};
use ike_wire::{Message, Payload};

use crate::ike_sa::State;
use crate::io::{ChildSaRemove, Datagram, DownReason, Event, Output};
use crate::retransmit::Retransmit;
use crate::stats::Drop;
use crate::Ike;

/// The responder's side of an INFORMATIONAL request.
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
    let deletes: Vec<&Delete> =
        inner.iter().filter_map(|p| if let Payload::Delete(x) = p { Some(x) } else { None }).collect();
    let delete_ike = deletes.iter().any(|x| x.protocol == ProtocolId::IKE);
    // Their inbound SPIs are our outbound ones.
    let mut theirs: Vec<u32> = Vec::new();
    for x in deletes.iter().filter(|x| x.protocol == ProtocolId::ESP) {
        theirs.extend(x.spis_u32().map_err(|_| Drop::Malformed)?);
    }
    let gone: Vec<usize> = if delete_ike {
        Vec::new()
    } else {
        (0..sa.children.len()).filter(|&i| theirs.contains(&sa.children[i].spi_out)).collect()
    };
    let mut payloads = Vec::new();
    if !gone.is_empty() {
        let ours: Vec<u32> = gone.iter().map(|&i| sa.children[i].spi_in).collect();
        payloads.push(Payload::Delete(Delete::child(ProtocolId::ESP, &ours)));
    }
    let hdr = sa.header(ExchangeType::INFORMATIONAL, true, h.message_id);
    let bytes = sa.seal(&hdr, &payloads).map_err(|_| Drop::BadPeerValue)?;

    out.push(Output::Send(Datagram { local: d.local, remote: d.remote, bytes: bytes.clone() }));
    ike.stats.informational.responses_sent += 1;
    if delete_ike {
        super::ike_rekey::old_deleted(ike, now, spi, out);
        ike.remove_sa(spi, out);
        out.push(Output::Event(Event::IkeSaDown { ike_sa: spi, reason: DownReason::DeletedByPeer }));
        return Ok(());
    }
    let sa = ike.sas.get_mut(&spi).expect("present");
    sa.responses.answered(h.message_id, d.bytes.clone(), vec![bytes]);
    let (local, remote) = (sa.local, sa.remote);
    let mut removed = Vec::with_capacity(gone.len());
    for i in gone.into_iter().rev() {
        removed.push(sa.children.remove(i));
    }
    for c in removed {
        ike.child_spis.remove(&c.spi_in);
        sa.child_gone(spi, c.spi_in, out);
        out.push(Output::Remove(ChildSaRemove {
            ike_sa: spi,
            spi_in: c.spi_in,
            spi_out: c.spi_out,
            local,
            remote,
        }));
    }
    Ok(())
}

/// Deletes an established IKE SA with the peer: its CHILD_SAs removed at once, the Delete
/// sent, the SA kept (Deleting) until the response. Other states: removed at once.
pub(crate) fn terminate(ike: &mut Ike, now: Instant, spi: u64, out: &mut Vec<Output>) -> bool {
    let Some(sa) = ike.sas.get_mut(&spi) else { return false };
    if sa.state != State::Established {
        ike.remove_sa(spi, out);
        out.push(Output::Event(Event::IkeSaDown { ike_sa: spi, reason: DownReason::Terminated }));
        return true;
    }
    let Ok(id) = sa.requests.start() else {
        // An exchange is outstanding (window 1): delete locally.
        ike.remove_sa(spi, out);
        out.push(Output::Event(Event::IkeSaDown { ike_sa: spi, reason: DownReason::Terminated }));
        return true;
    };
    let hdr = sa.header(ExchangeType::INFORMATIONAL, false, id);
    let bytes = sa.seal(&hdr, &[Payload::Delete(Delete::ike())]);
    let (local, remote) = (sa.local, sa.remote);
    // Every CHILD_SA goes: no held outbound SA is installed.
    sa.outbound_later.clear();
    for c in std::mem::take(&mut sa.children) {
        ike.child_spis.remove(&c.spi_in);
        out.push(Output::Remove(ChildSaRemove {
            ike_sa: spi,
            spi_in: c.spi_in,
            spi_out: c.spi_out,
            local,
            remote,
        }));
    }
    match bytes {
        Ok(bytes) => {
            let sa = ike.sas.get_mut(&spi).expect("present");
            sa.state = State::Deleting;
            sa.init.refused = Some(DownReason::Terminated);
            sa.retransmit = Some(Retransmit::new(now, vec![bytes.clone()], &ike.settings.retransmit));
            ike.stats.informational.requests_sent += 1;
            out.push(Output::Send(Datagram { local, remote, bytes }));
        }
        Err(_) => {
            ike.remove_sa(spi, out);
            out.push(Output::Event(Event::IkeSaDown { ike_sa: spi, reason: DownReason::Terminated }));
        }
    }
    true
}

/// Our INFORMATIONAL request telling the peer that the CHILD_SA whose inbound SPI is
/// `spi_in` is gone (already removed here). The window must be free.
pub(crate) fn send_child_delete(
    ike: &mut Ike,
    now: Instant,
    spi: u64,
    spi_in: u32,
    out: &mut Vec<Output>,
) -> bool {
    let Some(sa) = ike.sas.get_mut(&spi) else { return false };
    let Ok(id) = sa.requests.start() else { return false };
    let hdr = sa.header(ExchangeType::INFORMATIONAL, false, id);
    let Ok(bytes) = sa.seal(&hdr, &[Payload::Delete(Delete::child(ProtocolId::ESP, &[spi_in]))]) else {
        sa.requests.restart();
        return false;
    };
    sa.retransmit = Some(Retransmit::new(now, vec![bytes.clone()], &ike.settings.retransmit));
    sa.deleting_child = Some(spi_in);
    ike.stats.informational.requests_sent += 1;
    out.push(Output::Send(Datagram { local: sa.local, remote: sa.remote, bytes }));
    true
}

/// Our liveness check: an empty INFORMATIONAL request (RFC 7296 §1.4, §2.4). The window
/// must be free.
pub(crate) fn send_liveness(ike: &mut Ike, now: Instant, spi: u64, out: &mut Vec<Output>) -> bool {
    let Some(sa) = ike.sas.get_mut(&spi) else { return false };
    let Ok(id) = sa.requests.start() else { return false };
    let hdr = sa.header(ExchangeType::INFORMATIONAL, false, id);
    let Ok(bytes) = sa.seal(&hdr, &[]) else {
        sa.requests.restart();
        return false;
    };
    sa.retransmit = Some(Retransmit::new(now, vec![bytes.clone()], &ike.settings.retransmit));
    ike.stats.informational.requests_sent += 1;
    ike.stats.liveness_checks += 1;
    out.push(Output::Send(Datagram { local: sa.local, remote: sa.remote, bytes }));
    true
}

/// The response to our Delete of a CHILD_SA or to our liveness check (its content, the peer's SPIs, adds nothing:
/// the CHILD_SA is gone here already); the next queued request goes.
pub(crate) fn child_delete_response(
    ike: &mut Ike,
    now: Instant,
    spi: u64,
    d: &Datagram,
    msg: &Message,
    out: &mut Vec<Output>,
) -> Result<(), Drop> {
    let sa = ike.sas.get_mut(&spi).expect("present");
    sa.open(&d.bytes, msg)?;
    sa.requests.accept(msg.header.message_id);
    sa.retransmit = None;
    // A CHILD_SA a rekey replaced leaves ipsecd now that the peer has read our Delete.
    if let Some(gone) = sa.deleting_child.take() {
        if let Some(i) = sa.retiring.iter().position(|r| r.spi_in == gone) {
            out.push(Output::Remove(sa.retiring.remove(i)));
        }
    }
    ike.pump(now, spi, out);
    Ok(())
}

/// The response to our Delete: the IKE SA goes.
pub(crate) fn response(
    ike: &mut Ike,
    spi: u64,
    d: &Datagram,
    msg: &Message,
    out: &mut Vec<Output>,
) -> Result<(), Drop> {
    let sa = &ike.sas[&spi];
    sa.open(&d.bytes, msg)?;
    ike.remove_sa(spi, out);
    out.push(Output::Event(Event::IkeSaDown { ike_sa: spi, reason: DownReason::Terminated }));
    Ok(())
}
