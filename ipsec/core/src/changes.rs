//! What the control requests changed in the databases, for the key managers and operators
//! that listen (PF_KEY broadcasts each SADB_ADD, SADB_UPDATE, SADB_DELETE, SADB_FLUSH and
//! SADB_X_SPD* to its listeners, which `setkey -x` prints; Linux's XFRM sends
//! XFRM_MSG_NEWSA, UPDSA, DELSA, FLUSHSA and NEWPOLICY, DELPOLICY, FLUSHPOLICY to its
//! multicast group, which `ip xfrm monitor` prints).
//!
//! ```text
//! control request, reload ─ Transaction::apply / add_sa / update_sa ─ done? ─ Change recorded
//!    ─ Ipsec::transact: committed? ─ yes: Event::Changed each, in order ─► take_events
//!                                  └ no (a request refused): nothing happened, nothing said
//! ```
//!
//! Recorded where the control path changes the databases, never on the packet path (which
//! makes its own events: expiry, ACQUIRE, …). One change per request as PF_KEY says it:
//! `flush` is one [`Change::SasFlushed`] (not a delete per SA), `deleteall` a
//! [`Change::SaDeleted`] per SA it removed (larval ones too, as `delete` of one). A change
//! never holds a key: an SA is named by its [`SaSummary`].

use crate::control::{AuthAlg, Dir, EncAlg, Mode, NatT, PolicySpec, Proto, SaId, SaSpec, Selector};

/// One change a committed transaction made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// `add`: an SA installed.
    SaAdded(SaSummary),
    /// `update`: a larval SA given its keys, or an installed SA replaced.
    SaUpdated(SaSummary),
    /// `delete`, `deleteall`: an SA (installed or larval) removed.
    SaDeleted(SaId),
    /// `migrate`: the SA `from` moved to new addresses (and ports), keeping its keys and
    /// state; `to` is the SA as it now is.
    SaMigrated { from: SaId, to: SaSummary },
    /// `flush [proto]`: every SA (of the protocol) removed.
    SasFlushed(Option<Proto>),
    /// `spdadd`.
    PolicyAdded(PolicySpec),
    /// `spddelete`.
    PolicyDeleted { selector: Selector, dir: Dir },
    /// `spdflush`.
    PoliciesFlushed,
}

impl Change {
    /// Whether it changed the SPD (`spdadd`, `spddelete`, `spdflush`).
    pub fn is_policy(&self) -> bool {
        matches!(self, Change::PolicyAdded(_) | Change::PolicyDeleted { .. } | Change::PoliciesFlushed)
    }
}

/// An SA as a change names it: everything that says what it is, without its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaSummary {
    pub id: SaId,
    pub mode: Mode,
    pub reqid: u32,
    /// ESP's encryption (`None` for AH and IPComp).
    pub enc: Option<EncAlg>,
    pub auth: Option<AuthAlg>,
    pub esn: bool,
    pub natt: Option<NatT>,
}

impl SaSummary {
    pub fn of(spec: &SaSpec) -> SaSummary {
        SaSummary {
            id: SaId { src: spec.src, dst: spec.dst, proto: spec.proto, spi: spec.spi },
            mode: spec.mode,
            reqid: spec.reqid,
            enc: matches!(spec.proto, Proto::Esp | Proto::EspUdp).then_some(spec.enc),
            auth: spec.auth.as_ref().map(|(a, _)| *a),
            esn: spec.esn,
            natt: spec.natt,
        }
    }
}
