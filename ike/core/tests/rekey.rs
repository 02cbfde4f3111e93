//! CHILD_SA rekeying (CREATE_CHILD_SA, RFC 7296 §1.3.3, §2.8) between two engines in
//! memory: with and without PFS, started by a command and by ipsecd's soft expiry; both
//! ends rekeying at once with the requests crossing (§2.8.1); a hard expiry; a replayed or
//! forged rekey request dropped and counted. Each test checks the keys of the new CHILD_SA
//! on both ends against each other and against the old one, and that every SPI installed
//! and not removed has its partner on the other side.

use std::time::Duration;

use ike_core::io::{ChildSaInstall, Datagram, Event, Output, SaEvent};
use ike_core::stats::Drop;
use ike_core::Settings;
use ike_wire::ids::{EncrId, IntegId, NotifyType};

#[allow(dead_code)]
#[path = "support/pair.rs"]
mod pair;
use pair::*;

fn removes(out: &[Output]) -> Vec<&ike_core::io::ChildSaRemove> {
    out.iter().filter_map(|o| if let Output::Remove(r) = o { Some(r) } else { None }).collect()
}

/// The SAs installed on one side and not removed since: (spi_in, spi_out).
fn live(out: &[Output]) -> Vec<(u32, u32)> {
    let gone: Vec<u32> = removes(out).iter().map(|r| r.spi_in).collect();
    installs(out).iter().filter(|i| !gone.contains(&i.spi_in)).map(|i| (i.spi_in, i.spi_out)).collect()
}

/// Whether the CHILD_SA `spi_in` has its outbound SA in `out`: installed with it, or
/// later by its InstallOutbound.
fn has_outbound(out: &[Output], spi_in: u32) -> bool {
    installs(out).iter().any(|i| i.spi_in == spi_in && !i.outbound_later)
        || out.iter().any(|o| matches!(o, Output::InstallOutbound { spi_in: s, .. } if *s == spi_in))
}

/// Where in `out` the InstallOutbound of `spi_in` is.
fn outbound_at(out: &[Output], spi_in: u32) -> Option<usize> {
    out.iter().position(|o| matches!(o, Output::InstallOutbound { spi_in: s, .. } if *s == spi_in))
}

/// Where in `out` the Remove of `spi_in` is.
fn remove_at(out: &[Output], spi_in: u32) -> Option<usize> {
    out.iter().position(|o| matches!(o, Output::Remove(r) if r.spi_in == spi_in))
}

impl Pair {
    /// An established pair: the IKE SA's SPI on each side.
    fn up(i: &Side, r: &Side) -> (Pair, u64, u64) {
        let mut p = Pair::new(i, r, Settings::default(), Settings::default());
        let (spi, first) = p.start();
        p.run(first, &no_nat);
        let rspi = p.r.ike_sas().next().unwrap().our_spi();
        assert_eq!(live(&p.i_out).len(), 1);
        (p, spi, rspi)
    }

    /// Carries datagrams both ways until neither side sends anything.
    fn settle(&mut self, mut to_r: Vec<Datagram>, mut to_i: Vec<Datagram>) {
        for _ in 0..16 {
            if to_r.is_empty() && to_i.is_empty() {
                return;
            }
            let from_r = self.deliver_r(std::mem::take(&mut to_r));
            let from_i = self.deliver_i(std::mem::take(&mut to_i));
            to_i = from_r;
            to_r = from_i;
        }
        panic!("the exchanges did not end");
    }

    fn rekey_on_i(&mut self, ike_sa: u64, spi_in: u32) -> Vec<Datagram> {
        let mut out = vec![];
        assert!(self.i.rekey_child(self.now, ike_sa, spi_in, &mut out));
        let s = sends(&out);
        self.i_out.extend(out);
        s
    }
}

/// After a rekey: one CHILD_SA on each side, mirrored, with keys other than `old`'s.
fn assert_rekeyed(p: &Pair, old: &ChildSaInstall) -> (u32, u32) {
    let (li, lr) = (live(&p.i_out), live(&p.r_out));
    assert_eq!(li.len(), 1, "one CHILD_SA left on the initiator: {li:?}");
    assert_eq!(lr.len(), 1, "one CHILD_SA left on the responder: {lr:?}");
    assert_eq!(li[0], (lr[0].1, lr[0].0), "the same pair on both sides");
    let ni = installs(&p.i_out).into_iter().find(|x| x.spi_in == li[0].0).unwrap();
    let nr = installs(&p.r_out).into_iter().find(|x| x.spi_in == lr[0].0).unwrap();
    assert_mirrored(ni, nr);
    assert_ne!(ni.spi_in, old.spi_in);
    assert_ne!(*ni.encr_key_in, *old.encr_key_in, "new keys");
    assert_ne!(*ni.encr_key_out, *old.encr_key_out, "new keys");
    assert_eq!(ni.local_ts, old.local_ts);
    // The engines' own tables agree with what they output.
    let ci: Vec<_> = p.i.ike_sas().flat_map(|s| s.children.iter().map(|c| (c.spi_in, c.spi_out))).collect();
    let cr: Vec<_> = p.r.ike_sas().flat_map(|s| s.children.iter().map(|c| (c.spi_in, c.spi_out))).collect();
    assert_eq!((ci, cr), (li.clone(), lr.clone()));
    // Each side sends on it: its outbound SA is installed.
    assert!(has_outbound(&p.i_out, li[0].0), "the initiator's outbound SA");
    assert!(has_outbound(&p.r_out, lr[0].0), "the responder's outbound SA");
    // An SA held for later is installed at most once, and never after its CHILD_SA's Remove.
    for out in [&p.i_out, &p.r_out] {
        for i in installs(out).iter().filter(|i| i.outbound_later) {
            let n = out
                .iter()
                .filter(|o| matches!(o, Output::InstallOutbound { spi_in, .. } if *spi_in == i.spi_in))
                .count();
            assert!(n <= 1, "one InstallOutbound of {:#x}", i.spi_in);
            if let (Some(a), Some(r)) = (outbound_at(out, i.spi_in), remove_at(out, i.spi_in)) {
                assert!(a < r, "the outbound SA of {:#x} after its Remove", i.spi_in);
            }
        }
    }
    li[0]
}

#[test]
fn rekey_without_pfs_replaces_the_child_sa_before_removing_it() {
    let (mut p, spi, _) = Pair::up(&I, &R);
    let old = installs(&p.i_out)[0].spi_in;
    let old_install = installs(&p.i_out)[0];
    let old_keys = (old_install.encr_key_in.clone(), old_install.encr_key_out.clone());
    let old_spi_out = old_install.spi_out;
    let req = p.rekey_on_i(spi, old);
    assert_eq!(req.len(), 1);
    assert!(!p.i.rekey_child(p.now, spi, old, &mut vec![]), "a second rekey of the same SA refused");
    p.settle(req, vec![]);
    let old_install = installs(&p.i_out)[0];
    assert_eq!((old_install.encr_key_in.clone(), old_install.encr_key_out.clone()), old_keys);
    assert_rekeyed(&p, old_install);
    // Make-before-break: on each side the new SA's Install comes before the old one's Remove.
    for (out, old_in) in [(&p.i_out, old), (&p.r_out, old_spi_out)] {
        let inst = out.iter().rposition(|o| matches!(o, Output::Install(_))).unwrap();
        let rem = out.iter().position(|o| matches!(o, Output::Remove(r) if r.spi_in == old_in)).unwrap();
        assert!(inst < rem);
    }
    assert_eq!(p.i.stats().create_child_sa.requests_sent, 1);
    assert_eq!(p.r.stats().create_child_sa.responses_sent, 1);
    assert_eq!(p.i.stats().drops_total() + p.r.stats().drops_total(), 0);
}

/// The rekey's initiator keeps the old CHILD_SA's SAs until the peer answered its Delete:
/// the peer sends on the old SA until it has read that Delete (RFC 7296 §2.8), and what
/// it sent must still arrive. Step by step: the CREATE_CHILD_SA response installs the new
/// pair and sends the Delete, but removes nothing; the Delete's response removes the old.
#[test]
fn the_old_child_sa_stays_until_the_peer_answered_its_delete() {
    let (mut p, spi, _) = Pair::up(&I, &R);
    let old = installs(&p.i_out)[0].spi_in;
    let req = p.rekey_on_i(spi, old);
    let resp = p.deliver_r(req);
    let before = p.i_out.len();
    let delete = p.deliver_i(resp);
    assert_eq!(delete.len(), 1, "the Delete of the old CHILD_SA");
    assert_eq!(installs(&p.i_out[before..]).len(), 1, "the new pair installed");
    assert!(removes(&p.i_out[before..]).is_empty(), "the old SAs kept while the Delete is out");
    assert!(p.i.ike_sas().all(|s| s.children.iter().all(|c| c.spi_in != old)), "no longer listed");
    let answer = p.deliver_r(delete);
    let before = p.i_out.len();
    assert!(p.deliver_i(answer).is_empty());
    let gone: Vec<u32> = removes(&p.i_out[before..]).iter().map(|r| r.spi_in).collect();
    assert_eq!(gone, [old], "the answer removes the old SAs");
    assert_rekeyed(&p, installs(&p.i_out)[0]);
}

/// The rekey's responder installs the new CHILD_SA's inbound SA with its response and its
/// outbound SA only when the requester's Delete of the old CHILD_SA comes (strongSwan's
/// responder does the same): the requester has no inbound SA for the new one until it
/// has read the response, and ipsecd sends on the newest outbound SA. The requester's
/// own install has both directions at once. On the responder, the InstallOutbound comes
/// before the old CHILD_SA's Remove, so that traffic always has an outbound SA.
#[test]
fn the_rekey_responder_sends_on_the_new_child_sa_only_after_the_old_ones_delete() {
    let (mut p, spi, _) = Pair::up(&I, &R);
    let old_i = installs(&p.i_out)[0].spi_in;
    let old_r = installs(&p.r_out)[0].spi_in;
    let req = p.rekey_on_i(spi, old_i);
    let before_r = p.r_out.len();
    let resp = p.deliver_r(req);
    let made = installs(&p.r_out[before_r..]);
    assert_eq!(made.len(), 1, "the new CHILD_SA installed with the response");
    let new_r = made[0].spi_in;
    assert!(made[0].outbound_later, "inbound only, the outbound SA held");
    assert!(outbound_at(&p.r_out, new_r).is_none());
    let before_i = p.i_out.len();
    let delete = p.deliver_i(resp);
    let mine = installs(&p.i_out[before_i..]);
    assert_eq!(mine.len(), 1);
    assert!(!mine[0].outbound_later, "the requester sends on the new SA at once");
    assert!(outbound_at(&p.r_out, new_r).is_none(), "not before the Delete");
    let before_r = p.r_out.len();
    let answer = p.deliver_r(delete);
    let after = &p.r_out[before_r..];
    let at = outbound_at(after, new_r).expect("the Delete releases the outbound SA");
    let rm = remove_at(after, old_r).expect("the Delete removes the old CHILD_SA");
    assert!(at < rm, "the new outbound SA before the old one's Remove");
    assert!(
        matches!(after[at], Output::InstallOutbound { ike_sa, .. } if ike_sa == p.r.ike_sas().next().unwrap().our_spi())
    );
    p.settle(vec![], answer);
    assert_rekeyed(&p, installs(&p.i_out)[0]);
    assert!(p.r.ike_sas().all(|s| s.outbound_later.is_empty()));
}

/// If the old CHILD_SA goes before the requester's Delete comes (here its hard expiry on
/// the responder), the new one's outbound SA is installed then: a CHILD_SA never stays
/// without one. One whose own CHILD_SA goes first never gets it.
#[test]
fn the_held_outbound_sa_comes_when_the_old_child_sa_expires_and_never_after_its_own_removal() {
    let (mut p, spi, _) = Pair::up(&I, &R);
    let old_i = installs(&p.i_out)[0].spi_in;
    let old_r = installs(&p.r_out)[0].spi_in;
    let req = p.rekey_on_i(spi, old_i);
    let _resp = p.deliver_r(req);
    let new_r = installs(&p.r_out).last().unwrap().spi_in;
    let mut out = vec![];
    p.r.sa_event(p.now, SaEvent::HardExpire { spi: old_r }, &mut out);
    let at = outbound_at(&out, new_r).expect("the expiry releases the outbound SA");
    assert!(at < remove_at(&out, old_r).unwrap());

    // Again, but the new CHILD_SA expires first: its held outbound SA is dropped, and the
    // old one's later removal installs nothing.
    let (mut p, spi, _) = Pair::up(&I, &R);
    let old_i = installs(&p.i_out)[0].spi_in;
    let old_r = installs(&p.r_out)[0].spi_in;
    let req = p.rekey_on_i(spi, old_i);
    let _resp = p.deliver_r(req);
    let new_r = installs(&p.r_out).last().unwrap().spi_in;
    let mut out = vec![];
    p.r.sa_event(p.now, SaEvent::HardExpire { spi: new_r }, &mut out);
    p.r.sa_event(p.now, SaEvent::HardExpire { spi: old_r }, &mut out);
    assert!(remove_at(&out, new_r).is_some() && remove_at(&out, old_r).is_some());
    assert!(!out.iter().any(|o| matches!(o, Output::InstallOutbound { .. })), "{out:?}");
}

const I_PFS: Side = Side { esp: "aes256gcm16-x25519, aes128gcm16-modp2048", ..I };
const R_PFS: Side = Side { esp: "aes256gcm16-x25519, aes128gcm16-modp2048", ..R };

#[test]
fn rekey_with_pfs_from_the_responders_soft_expiry() {
    let (mut p, _, _) = Pair::up(&I_PFS, &R_PFS);
    let old = installs(&p.r_out)[0];
    let (old_spi_in, old_key) = (old.spi_in, old.encr_key_in.clone());
    let mut out = vec![];
    // ipsecd reports the outbound SA's soft expiry: the CHILD_SA is found by either SPI.
    p.r.sa_event(p.now, SaEvent::SoftExpire { spi: old.spi_out }, &mut out);
    let req = sends(&out);
    p.r_out.extend(out);
    assert_eq!(req.len(), 1);
    let before = p.r.stats().create_child_sa.requests_sent;
    assert_eq!(before, 1);
    p.settle(vec![], req);
    let old = installs(&p.i_out)[0];
    let (spi_in, _) = assert_rekeyed(&p, old);
    let new = installs(&p.i_out).into_iter().find(|x| x.spi_in == spi_in).unwrap();
    assert_eq!((new.encr, new.encr_bits), (EncrId::AES_GCM_16, Some(256)));
    let r_new = installs(&p.r_out).into_iter().find(|x| x.spi_out == spi_in).unwrap();
    assert_ne!(r_new.spi_in, old_spi_in);
    assert_ne!(*r_new.encr_key_in, *old_key);
}

/// The keys of a PFS rekey depend on the new Diffie-Hellman: the same nonces' KEYMAT
/// without g^ir differs (checked through ike-core's key schedule, ocf underneath).
#[test]
fn pfs_keymat_differs_from_the_keymat_without_it() {
    use ike_core::crypto::{ChildKeys, ChildSuite, Prf};
    let f = fw();
    let suite = ChildSuite::from_ids(EncrId::AES_GCM_16, Some(128), IntegId::NONE).unwrap();
    let sk_d = [7u8; 32];
    let (ni, nr, g) = ([1u8; 32], [2u8; 32], [3u8; 32]);
    let a = ChildKeys::derive(&f, Prf::HmacSha256, &sk_d, &suite, None, &ni, &nr).unwrap();
    let b = ChildKeys::derive(&f, Prf::HmacSha256, &sk_d, &suite, Some(&g), &ni, &nr).unwrap();
    assert_ne!(*a.encr_i, *b.encr_i);
}

#[test]
fn simultaneous_rekeys_leave_exactly_one_child_sa() {
    for round in 0..6 {
        let (mut p, _, _) = Pair::up(&I_PFS, &R_PFS);
        let old = installs(&p.i_out)[0];
        let (ispi, rspi) = (old.spi_in, old.spi_out);
        let (mut oi, mut or) = (vec![], vec![]);
        p.i.sa_event(p.now, SaEvent::SoftExpire { spi: ispi }, &mut oi);
        p.r.sa_event(p.now, SaEvent::SoftExpire { spi: rspi }, &mut or);
        let (qi, qr) = (sends(&oi), sends(&or));
        p.i_out.extend(oi);
        p.r_out.extend(or);
        assert_eq!((qi.len(), qr.len()), (1, 1), "both requests in flight");
        // Crossing: each request reaches the other side before any response.
        let ri = p.deliver_r(qi);
        let rr = p.deliver_i(qr);
        assert_eq!((installs(&p.i_out).len(), installs(&p.r_out).len()), (2, 2), "round {round}");
        p.settle(rr, ri);
        let old = installs(&p.i_out)[0];
        assert_rekeyed(&p, old);
        assert_eq!(installs(&p.i_out).len(), 3, "the redundant SA made and removed");
        // On each side the CHILD_SA made as the responder held its outbound SA until the
        // old one went (deleted by this side or by the peer), or never got it if it was
        // the redundant one; the old one's Remove follows its InstallOutbound.
        for (out, old_in) in [(&p.i_out, ispi), (&p.r_out, rspi)] {
            let held: Vec<u32> =
                installs(out).iter().filter(|i| i.outbound_later).map(|i| i.spi_in).collect();
            assert_eq!(held.len(), 1, "round {round}: one request answered on each side");
            let live = live(out);
            let rm = remove_at(out, old_in).expect("the old CHILD_SA removed");
            match outbound_at(out, held[0]) {
                Some(at) => {
                    assert!(live.iter().any(|l| l.0 == held[0]), "round {round}: released, so kept");
                    assert!(at < rm, "round {round}: the new outbound SA before the old one's Remove");
                }
                None => assert!(!live.iter().any(|l| l.0 == held[0]), "round {round}: the redundant one"),
            }
        }
        assert_eq!(p.i.stats().drops_total() + p.r.stats().drops_total(), 0);
    }
}

#[test]
fn a_response_before_the_crossing_request_ends_the_other_rekey() {
    let (mut p, _, _) = Pair::up(&I, &R);
    let old = installs(&p.i_out)[0];
    let (ispi, rspi) = (old.spi_in, old.spi_out);
    let (mut oi, mut or) = (vec![], vec![]);
    p.i.sa_event(p.now, SaEvent::SoftExpire { spi: ispi }, &mut oi);
    p.r.sa_event(p.now, SaEvent::SoftExpire { spi: rspi }, &mut or);
    let (qi, qr) = (sends(&oi), sends(&or));
    p.i_out.extend(oi);
    p.r_out.extend(or);
    // I's exchange completes first; R's request reaches I only after.
    let resp = p.deliver_r(qi);
    let del = p.deliver_i(resp);
    let late = p.deliver_i(qr);
    // Both go to R: I's Delete of the old SA, then I's answer to R's late request.
    p.settle([del, late].concat(), vec![]);
    let old = installs(&p.i_out)[0];
    assert_rekeyed(&p, old);
    assert!(events(&p.r_out).iter().any(|e| matches!(
        e,
        Event::ChildSaFailed { notify: Some(n), .. } if *n == NotifyType::CHILD_SA_NOT_FOUND
    )));
}

#[test]
fn a_hard_expiry_removes_the_child_sa_on_both_sides() {
    let (mut p, _, _) = Pair::up(&I, &R);
    let old = installs(&p.i_out)[0];
    let spi_in = old.spi_in;
    let mut out = vec![];
    p.i.sa_event(p.now, SaEvent::HardExpire { spi: spi_in }, &mut out);
    let del = sends(&out);
    p.i_out.extend(out);
    assert_eq!(del.len(), 1);
    p.settle(del, vec![]);
    assert!(live(&p.i_out).is_empty() && live(&p.r_out).is_empty());
    assert!(p.i.ike_sas().all(|s| s.children.is_empty()) && p.r.ike_sas().all(|s| s.children.is_empty()));
}

#[test]
fn a_replayed_or_forged_rekey_request_is_dropped_and_counted() {
    let (mut p, spi, _) = Pair::up(&I, &R);
    let old = installs(&p.i_out)[0].spi_in;
    let req = p.rekey_on_i(spi, old);
    let mut forged = req[0].clone();
    let n = forged.bytes.len();
    forged.bytes[n - 5] ^= 1;
    assert!(p.deliver_r(vec![forged]).is_empty());
    assert_eq!(p.r.stats().drops(Drop::Unauthenticated), 1);
    assert_eq!(installs(&p.r_out).len(), 1, "nothing installed");
    p.settle(req.clone(), vec![]);
    let installed = installs(&p.r_out).len();
    // Replayed after the Delete's exchange: neither new nor the last answered.
    assert!(p.deliver_r(req).is_empty());
    assert_eq!(p.r.stats().drops(Drop::OutOfWindow), 1);
    assert_eq!(installs(&p.r_out).len(), installed, "nothing installed");
    let old = installs(&p.i_out)[0];
    assert_rekeyed(&p, old);
}

/// The one IKE SA each side has left, and that it carries the CHILD_SA pair `pair`.
fn one_ike_sa_with(p: &Pair, pair: (u32, u32)) -> (u64, u64) {
    let (si, sr): (Vec<_>, Vec<_>) = (p.i.ike_sas().collect(), p.r.ike_sas().collect());
    assert_eq!((si.len(), sr.len()), (1, 1), "one IKE SA on each side");
    let (a, b) = (si[0], sr[0]);
    assert_eq!((a.spi_i, a.spi_r), (b.spi_i, b.spi_r), "the same IKE SA");
    let ca: Vec<_> = a.children.iter().map(|c| (c.spi_in, c.spi_out)).collect();
    let cb: Vec<_> = b.children.iter().map(|c| (c.spi_out, c.spi_in)).collect();
    assert_eq!((ca.clone(), cb), (vec![pair], vec![pair]));
    (a.our_spi(), b.our_spi())
}

/// Deletes the CHILD_SA through IKE SA `spi` from the initiator: both sides remove it.
fn delete_child_through(p: &mut Pair, spi_in: u32) {
    let mut out = vec![];
    p.i.sa_event(p.now, SaEvent::HardExpire { spi: spi_in }, &mut out);
    let del = sends(&out);
    p.i_out.extend(out);
    assert_eq!(del.len(), 1);
    p.settle(del, vec![]);
    assert!(live(&p.i_out).is_empty() && live(&p.r_out).is_empty());
    assert!(p.r.ike_sas().all(|s| s.children.is_empty()), "the responder removed it too");
    assert_eq!(p.i.stats().drops_total() + p.r.stats().drops_total(), 0);
}

#[test]
fn ike_sa_rekey_moves_the_child_sa_to_the_new_ike_sa() {
    let (mut p, old_i, old_r) = Pair::up(&I, &R);
    let child = live(&p.i_out)[0];
    let old_keys = p.i.ike_sa(old_i).unwrap().keys.as_ref().unwrap().sk_d.clone();
    let mut out = vec![];
    assert!(p.i.rekey_ike(p.now, old_i, &mut out));
    let req = sends(&out);
    p.i_out.extend(out);
    p.settle(req, vec![]);
    let (new_i, new_r) = one_ike_sa_with(&p, child);
    assert!(new_i != old_i && new_r != old_r, "new SPIs");
    assert!(p.i.ike_sa(new_i).unwrap().initiator && !p.r.ike_sa(new_r).unwrap().initiator);
    let (ki, kr) = (
        p.i.ike_sa(new_i).unwrap().keys.as_ref().unwrap(),
        p.r.ike_sa(new_r).unwrap().keys.as_ref().unwrap(),
    );
    assert_eq!(*ki.sk_d, *kr.sk_d);
    assert_eq!(*ki.sk_ei, *kr.sk_ei);
    assert_ne!(*ki.sk_d, *old_keys, "new keys");
    assert!(events(&p.i_out).contains(&&Event::IkeSaRekeyed { old: old_i, new: new_i }));
    // The CHILD_SA keeps working: it is rekeyed and deleted through the new IKE SA.
    let req = p.rekey_on_i(new_i, child.0);
    p.settle(req, vec![]);
    let pair = live(&p.i_out)[0];
    assert_ne!(pair, child);
    one_ike_sa_with(&p, pair);
    delete_child_through(&mut p, pair.0);
}

/// The responder of an IKE SA rekey moves the CHILD_SAs to the new IKE SA at once, and
/// the old one waits for the requester's Delete: until then nothing new starts on it — no
/// rekey of it (by the operator or its timer), no new CHILD_SA — which would make a second
/// successor holding nothing while the peer settles on the first (found by the
/// ike_exchange fuzz target: two engines with the CHILD_SA under different new IKE SAs).
#[test]
fn an_ike_sa_rekeyed_by_the_peer_starts_nothing_new_before_its_delete() {
    let (mut p, old_i, old_r) = Pair::up(&I, &R);
    let child = live(&p.i_out)[0];
    let mut out = vec![];
    assert!(p.i.rekey_ike(p.now, old_i, &mut out));
    let req = sends(&out);
    p.i_out.extend(out);
    // R answers; I's response and its Delete of the old IKE SA are held back.
    let resp = p.deliver_r(req);
    assert!(p.r.ike_sa(old_r).unwrap().children.is_empty(), "the CHILD_SA moved at once");
    assert!(p.r.ike_sa(old_r).unwrap().superseded);
    let mut out = vec![];
    assert!(!p.r.rekey_ike(p.now, old_r, &mut out), "no rekey of a superseded IKE SA");
    p.r.tick(p.now + Duration::from_secs(5 * 3600), &mut out);
    assert!(
        sends(&out)
            .iter()
            .all(|d| d.bytes[..8] != old_r.to_be_bytes()[..] && d.bytes[8..16] != old_r.to_be_bytes()[..]),
        "nothing sent on the old IKE SA"
    );
    // The requester's side ends it as usual: one IKE SA each, with the CHILD_SA.
    p.r_out.extend(out);
    p.settle(vec![], resp);
    one_ike_sa_with(&p, child);
    assert_eq!(p.i.stats().drops_total() + p.r.stats().drops_total(), 0);
}

#[test]
fn the_ike_sa_is_rekeyed_at_its_rekey_time() {
    let (mut p, old_i, _) = Pair::up(&I, &R);
    let child = live(&p.i_out)[0];
    let mut out = vec![];
    p.i.tick(p.now, &mut out);
    // The default IKE rekey time is 4 h less up to its random part (rand_time, 10 % of it).
    p.i.tick(p.now + Duration::from_secs(4 * 3600 * 9 / 10 - 1), &mut out);
    assert!(sends(&out).is_empty(), "not before rekey_time - rand_time");
    p.i.tick(p.now + Duration::from_secs(4 * 3600 + 1), &mut out);
    let req = sends(&out);
    assert_eq!(req.len(), 1, "one rekey request by rekey_time");
    p.i_out.extend(out);
    p.settle(req, vec![]);
    let (new_i, _) = one_ike_sa_with(&p, child);
    assert_ne!(new_i, old_i);
}

#[test]
fn simultaneous_ike_sa_rekeys_leave_one_ike_sa() {
    for round in 0..6 {
        let (mut p, old_i, old_r) = Pair::up(&I, &R);
        let child = live(&p.i_out)[0];
        let (mut oi, mut or) = (vec![], vec![]);
        assert!(p.i.rekey_ike(p.now, old_i, &mut oi));
        assert!(p.r.rekey_ike(p.now, old_r, &mut or));
        let (qi, qr) = (sends(&oi), sends(&or));
        p.i_out.extend(oi);
        p.r_out.extend(or);
        let ri = p.deliver_r(qi);
        let rr = p.deliver_i(qr);
        p.settle(rr, ri);
        let (ni, _) = one_ike_sa_with(&p, child);
        assert!(ni != old_i, "round {round}");
        // Both exchanges made an IKE SA on both sides (one of them redundant, deleted).
        assert_eq!((p.i.stats().ike_sas_up, p.r.stats().ike_sas_up), (3, 3), "round {round}");
        assert_eq!(p.i.stats().drops_total() + p.r.stats().drops_total(), 0, "round {round}");
        delete_child_through(&mut p, child.0);
    }
}

#[test]
fn a_child_sa_rekey_during_the_ike_sa_rekey_is_refused_for_now() {
    let (mut p, old_i, old_r) = Pair::up(&I, &R);
    let child = live(&p.r_out)[0];
    let mut oi = vec![];
    assert!(p.i.rekey_ike(p.now, old_i, &mut oi));
    let qi = sends(&oi);
    p.i_out.extend(oi);
    let req = p.r_out.len();
    let mut or = vec![];
    assert!(p.r.rekey_child(p.now, old_r, child.0, &mut or));
    let qr = sends(&or);
    p.r_out.extend(or);
    assert!(req < p.r_out.len());
    // R's CHILD_SA rekey reaches I first: TEMPORARY_FAILURE; then I's IKE SA rekey goes on.
    let back = p.deliver_i(qr);
    p.settle([back, qi].concat(), vec![]);
    assert!(events(&p.r_out).iter().any(|e| matches!(
        e,
        Event::ChildSaFailed { notify: Some(n), .. } if *n == NotifyType::TEMPORARY_FAILURE
    )));
    let li = live(&p.i_out);
    assert_eq!(li.len(), 1);
    one_ike_sa_with(&p, li[0]);
}

#[test]
fn invalid_ke_payload_makes_the_rekey_use_the_asked_group() {
    // I's first ESP proposal's group is MODP-2048, which R does not take; R takes
    // X25519 from I's second proposal and asks for it.
    let i = Side { esp: "aes128gcm16-modp2048, aes128gcm16-x25519", ..I };
    let r = Side { esp: "aes128gcm16-x25519", ..R };
    let (mut p, spi, _) = Pair::up(&i, &r);
    let old = installs(&p.i_out)[0].spi_in;
    let req = p.rekey_on_i(spi, old);
    let answer = p.deliver_r(req);
    let retry = p.deliver_i(answer);
    assert_eq!(retry.len(), 1, "the rekey sent again");
    assert_eq!(p.r.stats().create_child_sa.errors_sent, 1, "INVALID_KE_PAYLOAD answered");
    assert_eq!(p.i.stats().create_child_sa.errors_received, 1, "and heard");
    p.settle(retry, vec![]);
    let old = installs(&p.i_out)[0];
    assert_rekeyed(&p, old);
    assert_eq!(p.i.stats().create_child_sa.requests_sent, 2);
    assert!(!events(&p.i_out).iter().any(|e| matches!(e, Event::ChildSaFailed { .. })));
}

#[test]
fn a_replayed_rekey_response_is_dropped_and_counted() {
    let (mut p, spi, _) = Pair::up(&I, &R);
    let old = installs(&p.i_out)[0].spi_in;
    let req = p.rekey_on_i(spi, old);
    let answer = p.deliver_r(req);
    let del = p.deliver_i(answer.clone());
    p.settle(del, vec![]);
    let installed = installs(&p.i_out).len();
    assert!(p.deliver_i(answer).is_empty());
    assert_eq!(p.i.stats().drops(Drop::UnexpectedResponse), 1);
    assert_eq!(installs(&p.i_out).len(), installed, "nothing installed");
    let old = installs(&p.i_out)[0];
    assert_rekeyed(&p, old);
}

/// Crossing IKE SA rekeys whose winner's Delete of the old IKE SA overtakes the loser's
/// response (UDP reorders): the loser must move its CHILD_SA to the winner's new IKE SA
/// as the Delete comes, not remove it with the old one. Found by the `ike_exchange` fuzz
/// target (ipsec/fuzz): the initiator kept the CHILD_SA, the responder had none.
#[test]
fn a_delete_of_the_old_ike_sa_before_the_crossing_response_keeps_the_child_sa() {
    for round in 0..8 {
        let (mut p, old_i, old_r) = Pair::up(&I, &R);
        let child = live(&p.i_out)[0];
        let (mut oi, mut or) = (vec![], vec![]);
        assert!(p.i.rekey_ike(p.now, old_i, &mut oi));
        assert!(p.r.rekey_ike(p.now, old_r, &mut or));
        let (qi, qr) = (sends(&oi), sends(&or));
        p.i_out.extend(oi);
        p.r_out.extend(or);
        let ri = p.deliver_r(qi);
        let rr = p.deliver_i(qr);
        // The initiator's response first; whatever it sends then overtakes `rr`.
        let from_i = p.deliver_i(ri);
        let from_r = p.deliver_r(from_i);
        let mut to_r = p.deliver_i(from_r);
        to_r.extend(rr);
        p.settle(to_r, vec![]);
        assert_eq!(live(&p.i_out), vec![child], "round {round}: the initiator keeps the CHILD_SA");
        assert_eq!(live(&p.r_out), vec![(child.1, child.0)], "round {round}: so does the responder");
        let holder = p.i.ike_sas().find(|s| !s.children.is_empty()).expect("an IKE SA holds it");
        let peer = p.r.ike_sas().find(|s| (s.spi_i, s.spi_r) == (holder.spi_i, holder.spi_r));
        let peer = peer.expect("the same IKE SA on the responder");
        let ca: Vec<_> = holder.children.iter().map(|c| (c.spi_in, c.spi_out)).collect();
        let cb: Vec<_> = peer.children.iter().map(|c| (c.spi_out, c.spi_in)).collect();
        assert_eq!((ca, cb), (vec![child], vec![child]), "round {round}");
        assert!(
            p.i.ike_sa(old_i).is_none() && p.r.ike_sa(old_r).is_none(),
            "round {round}: the old one is gone"
        );
    }
}

/// Our Delete of a CHILD_SA is outstanding (here: lost) when the peer rekeys the IKE SA:
/// the Delete must be sent again on the new IKE SA, or the peer keeps a CHILD_SA we no
/// longer have. Found by the `ike_exchange` fuzz target (ipsec/fuzz).
#[test]
fn a_child_delete_outstanding_across_the_peers_ike_sa_rekey_is_sent_again() {
    let (mut p, _, old_r) = Pair::up(&I, &R);
    let child = live(&p.i_out)[0];
    let mut out = vec![];
    p.i.sa_event(p.now, SaEvent::HardExpire { spi: child.0 }, &mut out);
    assert_eq!(sends(&out).len(), 1, "the Delete, lost");
    p.i_out.extend(out);
    let mut out = vec![];
    assert!(p.r.rekey_ike(p.now, old_r, &mut out));
    let req = sends(&out);
    p.r_out.extend(out);
    p.settle(vec![], req);
    assert!(live(&p.i_out).is_empty());
    assert!(live(&p.r_out).is_empty(), "the responder removed it on the new IKE SA's Delete");
    assert!(p.r.ike_sas().all(|s| s.children.is_empty()));
    assert!(p.r.ike_sa(old_r).is_none(), "the IKE SA was rekeyed");
}

/// Crossing IKE SA rekeys where the initiator's completes before the responder's request
/// reaches it: that request is refused (TEMPORARY_FAILURE, the old IKE SA is being
/// deleted), and the responder's CHILD_SA must go to the initiator's new IKE SA, which it
/// answered, not die with the old one. Found by the `ike_exchange` fuzz target.
#[test]
fn a_refused_crossing_ike_sa_rekey_moves_the_child_sa_to_the_peers() {
    let (mut p, old_i, old_r) = Pair::up(&I, &R);
    let child = live(&p.i_out)[0];
    let (mut oi, mut or) = (vec![], vec![]);
    assert!(p.i.rekey_ike(p.now, old_i, &mut oi));
    assert!(p.r.rekey_ike(p.now, old_r, &mut or));
    let (qi, qr) = (sends(&oi), sends(&or));
    p.i_out.extend(oi);
    p.r_out.extend(or);
    let ri = p.deliver_r(qi);
    let delete = p.deliver_i(ri);
    let refused = p.deliver_i(qr);
    let mut to_r = refused;
    to_r.extend(delete);
    p.settle(to_r, vec![]);
    assert!(events(&p.r_out).iter().any(|e| matches!(e, Event::IkeSaRekeyFailed { .. })));
    one_ike_sa_with(&p, child);
}

/// The side (0: initiator, 1: responder) whose IKE SA rekey wins a crossing (§2.8.2: the
/// exchange holding the lowest of the four nonces made the redundant IKE SA), read from
/// both engines' state once each has answered the other's request.
fn crossing_winner(p: &Pair, old_i: u64, old_r: u64) -> usize {
    // (our Ni, the Nr we answered the peer's request with)
    let nonces = |ike: &ike_core::Ike, spi: u64| {
        let r = ike.ike_sa(spi).unwrap().ike_rekey.as_ref().unwrap();
        let (_, our_nr, _) = r.collision.as_ref().expect("the crossing seen");
        (r.ni.clone(), our_nr.clone())
    };
    let (ri, rr) = (nonces(&p.i, old_i), nonces(&p.r, old_r));
    // An exchange's nonces: its requester's Ni, the Nr its responder answered with.
    let i_low = ri.0.as_slice().min(rr.1.as_slice());
    let r_low = rr.0.as_slice().min(ri.1.as_slice());
    if i_low < r_low {
        1
    } else {
        0
    }
}

/// Crossing IKE SA rekeys: the winner's new IKE SA is rekeyed again (by either side)
/// before the loser has its own response, and the winner's Delete of the old IKE SA
/// comes to the loser only after that: the loser must move its CHILD_SA to the newest
/// IKE SA, which the peer moved it to, not to the winner's first one, which is being
/// deleted. Found by the `ike_exchange` fuzz target
/// (ipsec/fuzz/known-crashes/ike_exchange-unpaired-children): the loser's CHILD_SA died
/// with the intermediate IKE SA, the winner kept its end. Both sides win in turn (the
/// nonces decide; the test reads them) and both rekey the intermediate IKE SA.
#[test]
fn a_crossing_ike_sa_rekey_whose_winner_is_rekeyed_before_the_delete_keeps_the_child_sa() {
    let mut seen = [[false; 2]; 2];
    for round in 0..16 {
        let (mut p, old_i, old_r) = Pair::up(&I, &R);
        let child = live(&p.i_out)[0];
        let (mut oi, mut or) = (vec![], vec![]);
        assert!(p.i.rekey_ike(p.now, old_i, &mut oi));
        assert!(p.r.rekey_ike(p.now, old_r, &mut or));
        let (qi, qr) = (sends(&oi), sends(&or));
        p.i_out.extend(oi);
        p.r_out.extend(or);
        // Each answers the other's request: [answer to the initiator's, to the responder's].
        let answers = [p.deliver_r(qi), p.deliver_i(qr)];
        let w = crossing_winner(&p, old_i, old_r);
        let l = 1 - w;
        let rekeyer = round % 2;
        seen[w][rekeyer] = true;
        // The winner's response: its new IKE SA gets the CHILD_SA, the old one's Delete
        // goes (held back). The loser's response is lost.
        let [a_i, a_r] = answers;
        let delete_old = if w == 0 { p.deliver_i(a_i) } else { p.deliver_r(a_r) };
        assert_eq!(delete_old.len(), 1, "round {round}: the winner deletes the old IKE SA");
        assert_eq!(delete_old[0].bytes[..8], old_i.to_be_bytes(), "round {round}: on the old IKE SA");
        let won = |ike: &ike_core::Ike| {
            ike.ike_sas().find(|s| !s.children.is_empty()).map(|s| s.our_spi()).expect("holds the CHILD_SA")
        };
        let (ike_w, ike_l) = if w == 0 { (&p.i, &p.r) } else { (&p.r, &p.i) };
        let on_w = won(ike_w);
        let (si, sr) = {
            let s = ike_w.ike_sa(on_w).unwrap();
            (s.spi_i, s.spi_r)
        };
        let on_l = ike_l.ike_sas().find(|s| (s.spi_i, s.spi_r) == (si, sr)).unwrap().our_spi();
        // One side rekeys the winner's new IKE SA, to its end.
        let mut out = vec![];
        let spi = if rekeyer == w { on_w } else { on_l };
        let ike = if rekeyer == 0 { &mut p.i } else { &mut p.r };
        assert!(ike.rekey_ike(p.now, spi, &mut out), "round {round}");
        let q = sends(&out);
        if rekeyer == 0 {
            p.i_out.extend(out);
            p.settle(q, vec![]);
        } else {
            p.r_out.extend(out);
            p.settle(vec![], q);
        }
        // The old IKE SA's Delete reaches the loser only now.
        if l == 0 {
            p.settle(vec![], delete_old);
        } else {
            p.settle(delete_old, vec![]);
        }
        assert_eq!(live(&p.i_out), vec![child], "round {round}: the initiator keeps the CHILD_SA");
        assert_eq!(live(&p.r_out), vec![(child.1, child.0)], "round {round}: so does the responder");
        let holder = p.i.ike_sas().find(|s| !s.children.is_empty()).expect("an IKE SA holds it");
        assert_eq!(holder.state, ike_core::ike_sa::State::Established, "round {round}");
        let peer = p.r.ike_sas().find(|s| (s.spi_i, s.spi_r) == (holder.spi_i, holder.spi_r));
        let peer = peer.expect("the same IKE SA on the responder");
        let ca: Vec<_> = holder.children.iter().map(|c| (c.spi_in, c.spi_out)).collect();
        let cb: Vec<_> = peer.children.iter().map(|c| (c.spi_out, c.spi_in)).collect();
        assert_eq!((ca, cb), (vec![child], vec![child]), "round {round}");
        assert!(
            (holder.spi_i, holder.spi_r) != (si, sr),
            "round {round}: on the winner's IKE SA's successor"
        );
        assert!(
            p.i.ike_sa(old_i).is_none() && p.r.ike_sa(old_r).is_none(),
            "round {round}: the old one is gone"
        );
        assert_eq!(p.i.stats().drops_total() + p.r.stats().drops_total(), 0, "round {round}");
    }
    assert!(seen.iter().flatten().filter(|&&x| x).count() >= 2, "both rekeyers exercised: {seen:?}");
}

/// Crossing IKE SA rekeys where the loser never gets the winner's answer to its request
/// (lost; charon 5.9.8 drops one that arrives while it processes a request with the same
/// message ID) and the winner's Delete of the old IKE SA comes first: the loser adopts
/// the winner's new IKE SA and never has the redundant one the winner made answering it,
/// so never deletes it (§2.8.2 leaves that to the loser). The winner deletes it itself
/// after the half-open timeout, as charon does.
#[test]
fn the_winner_deletes_the_redundant_ike_sa_the_loser_never_had() {
    for round in 0..4 {
        let (mut p, old_i, old_r) = Pair::up(&I, &R);
        let child = live(&p.i_out)[0];
        let (mut oi, mut or) = (vec![], vec![]);
        assert!(p.i.rekey_ike(p.now, old_i, &mut oi));
        assert!(p.r.rekey_ike(p.now, old_r, &mut or));
        let (qi, qr) = (sends(&oi), sends(&or));
        p.i_out.extend(oi);
        p.r_out.extend(or);
        let [a_i, a_r] = [p.deliver_r(qi), p.deliver_i(qr)];
        let w = crossing_winner(&p, old_i, old_r);
        // The winner's response, its Delete of the old IKE SA to the loser; the loser's
        // response lost.
        if w == 0 {
            let del = p.deliver_i(a_i);
            p.settle(del, vec![]);
        } else {
            let del = p.deliver_r(a_r);
            p.settle(vec![], del);
        }
        let established = |ike: &ike_core::Ike| {
            ike.ike_sas().filter(|s| s.state == ike_core::ike_sa::State::Established).count()
        };
        let (ike_w, ike_l) = if w == 0 { (&p.i, &p.r) } else { (&p.r, &p.i) };
        assert_eq!((established(ike_w), established(ike_l)), (2, 1), "round {round}: the redundant one left");
        let redundant = ike_w.ike_sas().find(|s| s.children.is_empty()).unwrap().our_spi();
        // Nothing before the timeout; the Delete at it.
        let timeout = Settings::default().half_open.timeout;
        let mut out = vec![];
        let ike_w = if w == 0 { &mut p.i } else { &mut p.r };
        ike_w.tick(p.now + timeout - Duration::from_secs(1), &mut out);
        assert!(sends(&out).is_empty(), "round {round}: not before the timeout");
        ike_w.tick(p.now + timeout, &mut out);
        let del = sends(&out);
        assert_eq!(del.len(), 1, "round {round}: the Delete of the redundant IKE SA");
        assert_eq!(ike_w.ike_sa(redundant).unwrap().state, ike_core::ike_sa::State::Deleting);
        // The loser knows no such IKE SA: the Delete goes unanswered, and the winner
        // drops the IKE SA when its retransmissions run out.
        let before =
            if w == 0 { p.r.stats().drops(Drop::UnknownSa) } else { p.i.stats().drops(Drop::UnknownSa) };
        let back = if w == 0 { p.deliver_r(del) } else { p.deliver_i(del) };
        assert!(back.is_empty());
        let after =
            if w == 0 { p.r.stats().drops(Drop::UnknownSa) } else { p.i.stats().drops(Drop::UnknownSa) };
        assert_eq!(after, before + 1, "round {round}");
        let ike_w = if w == 0 { &mut p.i } else { &mut p.r };
        let mut out = vec![];
        for m in 1..=40 {
            ike_w.tick(p.now + timeout + Duration::from_secs(30 * m), &mut out);
        }
        assert!(ike_w.ike_sa(redundant).is_none(), "round {round}: gone");
        assert!(events(&out).contains(&&Event::IkeSaDown {
            ike_sa: redundant,
            reason: ike_core::io::DownReason::Terminated
        }));
        assert!(removes(&out).is_empty(), "round {round}: it held no CHILD_SA");
        // What is left: one IKE SA on each side, the same, with the CHILD_SA.
        one_ike_sa_with(&p, child);
    }
}
