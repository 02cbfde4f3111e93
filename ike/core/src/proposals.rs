//! SA payload proposals: ours as offered (from the configuration's proposals), the one a
//! responder chooses from the initiator's, and the check an initiator makes on the answer.
//!
//! ```text
//!  initiator: offer(config proposals) ─▶ SA payload, proposals numbered 1, 2, …
//!  responder: choose(our config, their SA) ─▶ Chosen: one transform per type
//!             ── in OUR order of preference (as strongSwan's default,
//!                charon.prefer_configured_proposals = yes): for each of our proposals,
//!                each of theirs; the first that intersects wins, its number kept
//!  initiator: accept(our config, answer) ─▶ the answer has one proposal with one transform
//!             per type, all inside one of our proposals
//! ```
//!
//! A proposal carrying a transform type we do not know, or lacking a mandatory one (ENCR;
//! PRF and KE for IKE; ESN for ESP), is unacceptable (RFC 7296 §3.3.6). In IKE_AUTH the
//! CHILD_SA's proposals carry no KE transform (the first CHILD_SA has no PFS; strongSwan
//! strips them the same way) and the responder ignores any it finds (`ignore_ke`).

use ike_wire::ids::{DhId, EncrId, EsnId, IntegId, PrfId, ProtocolId, TransformType};
use ike_wire::sa::{Proposal as WireProposal, Transform};

use crate::config::{Encr, Proposal, Protocol};
use crate::crypto;

/// Our proposals with every transform this implementation cannot run removed (so that a
/// peer never chooses one), and proposals left without a mandatory type dropped.
pub fn usable(ours: &[Proposal]) -> Vec<Proposal> {
    ours.iter()
        .filter_map(|p| {
            let mut q = p.clone();
            q.encr.retain(|e| crypto::Encr::from_id(e.id, e.key_bits).is_ok());
            q.integ.retain(|&i| matches!(crypto::Integ::from_id(i), Ok(Some(_))));
            q.prf.retain(|&x| crypto::Prf::from_id(x).is_ok());
            q.dh.retain(|&d| crypto::KeMethod::from_id(d).is_ok());
            let ok = !q.encr.is_empty()
                && (q.is_aead() || !q.integ.is_empty())
                && match q.protocol {
                    Protocol::Ike => !q.prf.is_empty() && !q.dh.is_empty(),
                    Protocol::Esp => p.dh.is_empty() || !q.dh.is_empty(),
                };
            ok.then_some(q)
        })
        .collect()
}

/// `ours` with `group` moved first in each KE list that has it: the responder then keeps
/// the initiator's KE when a proposal allows it, instead of asking for another group
/// (INVALID_KE_PAYLOAD costs a round trip).
pub fn prefer_group(ours: &[Proposal], group: DhId) -> Vec<Proposal> {
    ours.iter()
        .map(|p| {
            let mut q = p.clone();
            if let Some(i) = q.dh.iter().position(|&d| d == group) {
                q.dh.remove(i);
                q.dh.insert(0, group);
            }
            q
        })
        .collect()
}

/// One transform of each type: a negotiated proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chosen {
    /// The proposal number it answers (the initiator's).
    pub number: u8,
    /// The SPI of the proposal it came from (the peer's, for ESP).
    pub spi: Vec<u8>,
    pub encr: Encr,
    /// NONE with an AEAD.
    pub integ: IntegId,
    /// IKE only.
    pub prf: Option<PrfId>,
    /// IKE: the key exchange; ESP: the PFS group, if any.
    pub ke: Option<DhId>,
    /// ESP only.
    pub esn: Option<EsnId>,
}

fn wire_protocol(p: Protocol) -> ProtocolId {
    match p {
        Protocol::Ike => ProtocolId::IKE,
        Protocol::Esp => ProtocolId::ESP,
    }
}

/// Our proposals as an SA payload's, numbered from 1, each with `spi` (empty for
/// IKE_SA_INIT, our inbound SPI for ESP). `with_ke`: include KE transforms.
pub fn offer(ours: &[Proposal], spi: &[u8], with_ke: bool) -> Vec<WireProposal> {
    ours.iter()
        .enumerate()
        .map(|(i, p)| {
            let mut t: Vec<Transform> = p.encr.iter().map(|e| Transform::encr(e.id, e.key_bits)).collect();
            t.extend(p.prf.iter().map(|&x| Transform::prf(x)));
            t.extend(p.integ.iter().map(|&x| Transform::integ(x)));
            if with_ke {
                t.extend(p.dh.iter().map(|&x| Transform::ke(x)));
            }
            t.extend(p.esn.iter().map(|&x| Transform::esn(x)));
            WireProposal {
                number: (i + 1).min(255) as u8,
                protocol: wire_protocol(p.protocol),
                spi: spi.to_vec(),
                transforms: t,
            }
        })
        .collect()
}

impl Chosen {
    /// As the single proposal of a response's SA payload, with `spi` (ours, for ESP).
    pub fn to_wire(&self, protocol: Protocol, spi: &[u8]) -> WireProposal {
        let mut t = vec![Transform::encr(self.encr.id, self.encr.key_bits)];
        if let Some(prf) = self.prf {
            t.push(Transform::prf(prf));
        }
        if self.integ != IntegId::NONE {
            t.push(Transform::integ(self.integ));
        }
        if let Some(ke) = self.ke {
            t.push(Transform::ke(ke));
        }
        if let Some(esn) = self.esn {
            t.push(Transform::esn(esn));
        }
        WireProposal {
            number: self.number,
            protocol: wire_protocol(protocol),
            spi: spi.to_vec(),
            transforms: t,
        }
    }
}

fn known(t: TransformType) -> bool {
    matches!(
        t,
        TransformType::ENCR
            | TransformType::PRF
            | TransformType::INTEG
            | TransformType::KE
            | TransformType::ESN
    )
}

fn encr_of(t: &Transform) -> Encr {
    Encr { id: EncrId(t.id), key_bits: t.key_length() }
}

fn of_type(p: &WireProposal, ty: TransformType) -> impl Iterator<Item = &Transform> {
    p.transforms.iter().filter(move |t| t.transform_type == ty)
}

fn spi_ok(p: &WireProposal, protocol: Protocol) -> bool {
    match protocol {
        Protocol::Ike => p.spi.is_empty() || p.spi.len() == 8,
        Protocol::Esp => p.spi.len() == 4 && p.spi != [0; 4],
    }
}

/// The intersection of our proposal `q` with their proposal `p`, if every type meets.
fn intersect(q: &Proposal, p: &WireProposal, ignore_ke: bool) -> Option<Chosen> {
    if p.protocol != wire_protocol(q.protocol) || !spi_ok(p, q.protocol) {
        return None;
    }
    if p.transforms.iter().any(|t| !known(t.transform_type)) {
        return None;
    }
    let encr = q.encr.iter().copied().find(|e| of_type(p, TransformType::ENCR).any(|t| encr_of(t) == *e))?;
    let their_integ: Vec<IntegId> =
        of_type(p, TransformType::INTEG).map(|t| IntegId(t.id)).filter(|&i| i != IntegId::NONE).collect();
    let integ = if q.integ.is_empty() {
        if !their_integ.is_empty() {
            return None;
        }
        IntegId::NONE
    } else {
        *q.integ.iter().find(|i| their_integ.contains(i))?
    };
    let prf = match q.protocol {
        Protocol::Ike => Some(*q.prf.iter().find(|&&x| of_type(p, TransformType::PRF).any(|t| t.id == x.0))?),
        Protocol::Esp => None,
    };
    let their_ke: Vec<DhId> =
        of_type(p, TransformType::KE).map(|t| DhId(t.id)).filter(|&d| d != DhId::NONE).collect();
    let ke = if ignore_ke {
        None
    } else if q.dh.is_empty() {
        if !their_ke.is_empty() {
            return None;
        }
        None
    } else {
        Some(*q.dh.iter().find(|d| their_ke.contains(d))?)
    };
    let esn = match q.protocol {
        Protocol::Esp => {
            let theirs: Vec<EsnId> = of_type(p, TransformType::ESN).map(|t| EsnId(t.id)).collect();
            Some(*q.esn.iter().find(|e| theirs.contains(e))?)
        }
        Protocol::Ike => None,
    };
    Some(Chosen { number: p.number, spi: p.spi.clone(), encr, integ, prf, ke, esn })
}

/// The responder's choice among `theirs`, in our order of preference.
pub fn choose(ours: &[Proposal], theirs: &[WireProposal], ignore_ke: bool) -> Option<Chosen> {
    ours.iter().find_map(|q| theirs.iter().find_map(|p| intersect(q, p, ignore_ke)))
}

/// The initiator's check of the responder's answer: exactly one proposal, one transform of
/// each type present, and that set inside one of `ours`.
pub fn accept(ours: &[Proposal], answer: &[WireProposal], ignore_ke: bool) -> Option<Chosen> {
    let [p] = answer else { return None };
    for ty in
        [TransformType::ENCR, TransformType::PRF, TransformType::INTEG, TransformType::KE, TransformType::ESN]
    {
        if of_type(p, ty).count() > 1 {
            return None;
        }
    }
    let got = choose(ours, std::slice::from_ref(p), ignore_ke)?;
    // choose() may have found the intersection of a sub-set; the answer must be exactly it.
    (got.to_wire(ours_protocol(ours)?, &p.spi).transforms.len() == p.transforms.len()).then_some(got)
}

fn ours_protocol(ours: &[Proposal]) -> Option<Protocol> {
    ours.first().map(|p| p.protocol)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_proposals;

    #[test]
    fn our_order_wins() {
        let ours =
            parse_proposals(Protocol::Ike, "aes256gcm16-prfsha384-ecp384, aes128gcm16-prfsha256-x25519")
                .unwrap();
        let theirs_cfg =
            parse_proposals(Protocol::Ike, "aes128gcm16-prfsha256-x25519, aes256gcm16-prfsha384-ecp384")
                .unwrap();
        let theirs = offer(&theirs_cfg, &[], true);
        let c = choose(&ours, &theirs, false).unwrap();
        assert_eq!(c.number, 2, "their second proposal is our first");
        assert_eq!(c.encr, Encr { id: EncrId::AES_GCM_16, key_bits: Some(256) });
        assert_eq!(c.ke, Some(DhId::ECP_384));
        assert_eq!(c.prf, Some(PrfId::HMAC_SHA2_384));
        assert_eq!(c.integ, IntegId::NONE);
        let answer = vec![c.to_wire(Protocol::Ike, &[])];
        assert_eq!(accept(&theirs_cfg, &answer, false), Some(c));
    }

    #[test]
    fn unusable_transforms_removed() {
        // The configuration parser refuses these keywords already; a Proposal built by
        // hand (or a parser grown past the crypto) must still never offer them.
        let mut cfg =
            parse_proposals(Protocol::Ike, "aes128gcm16-prfsha256-x25519, aes128-sha256-prfsha256-modp2048")
                .unwrap();
        cfg[0].dh.push(DhId::ECP_521);
        cfg[1].dh = vec![DhId::MODP_1024];
        let u = usable(&cfg);
        assert_eq!(u.len(), 1, "the second proposal has no KE left");
        assert_eq!(u[0].dh, vec![DhId::CURVE25519]);
    }

    #[test]
    fn the_initiators_group_kept_where_allowed() {
        let ours = parse_proposals(Protocol::Ike, "aes128gcm16-prfsha256-x25519-ecp256").unwrap();
        let theirs =
            offer(&parse_proposals(Protocol::Ike, "aes128gcm16-prfsha256-ecp256-x25519").unwrap(), &[], true);
        assert_eq!(choose(&ours, &theirs, false).unwrap().ke, Some(DhId::CURVE25519));
        assert_eq!(
            choose(&prefer_group(&ours, DhId::ECP_256), &theirs, false).unwrap().ke,
            Some(DhId::ECP_256)
        );
    }

    #[test]
    fn nothing_in_common() {
        let ours = parse_proposals(Protocol::Ike, "aes128gcm16-prfsha256-x25519").unwrap();
        let theirs =
            offer(&parse_proposals(Protocol::Ike, "aes128gcm16-prfsha256-ecp256").unwrap(), &[], true);
        assert_eq!(choose(&ours, &theirs, false), None);
        let mut odd = offer(&ours, &[], true);
        odd[0].transforms.push(Transform::new(TransformType(200), 1));
        assert_eq!(choose(&ours, &odd, false), None, "an unknown transform type");
    }

    #[test]
    fn esp_needs_spi_and_esn_and_ignores_ke_in_auth() {
        let ours = parse_proposals(Protocol::Esp, "aes128gcm16-x25519").unwrap();
        let mut theirs = offer(&ours, &[1, 2, 3, 4], false);
        let c = choose(&ours, &theirs, true).unwrap();
        assert_eq!((c.esn, c.ke, c.spi.clone()), (Some(EsnId::NO), None, vec![1, 2, 3, 4]));
        theirs[0].spi = vec![0; 4];
        assert_eq!(choose(&ours, &theirs, true), None, "a zero ESP SPI");
        let no_esn = offer(&parse_proposals(Protocol::Esp, "aes128gcm16").unwrap(), &[9, 9, 9, 9], false);
        let mut stripped = no_esn.clone();
        stripped[0].transforms.retain(|t| t.transform_type != TransformType::ESN);
        assert_eq!(choose(&ours, &stripped, true), None, "ESN is mandatory in ESP");
    }

    #[test]
    fn accept_refuses_an_answer_with_choices_left() {
        let ours = parse_proposals(Protocol::Ike, "aes128gcm16-aes256gcm16-prfsha256-x25519").unwrap();
        let whole = offer(&ours, &[], true);
        assert_eq!(accept(&ours, &whole, false), None, "two ENCR transforms");
        let other =
            offer(&parse_proposals(Protocol::Ike, "aes128-sha256-prfsha256-x25519").unwrap(), &[], true);
        assert_eq!(accept(&ours, &other, false), None, "not what we offered");
    }
}
