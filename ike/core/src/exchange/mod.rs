//! The exchanges, one file each, as functions over the engine ([`crate::Ike`]): each
//! checks everything it received and computes everything it needs before it changes the
//! IKE SA, so that a message refused half-way leaves no trace but a counter.
//!
//! - [`sa_init`]: IKE_SA_INIT, both roles (proposals, key exchange, cookies,
//!   INVALID_KE_PAYLOAD, NAT detection and the move to port 4500).
//! - [`auth`]: IKE_AUTH, both roles, and the first CHILD_SA; [`proof`] makes our AUTH
//!   and checks the peer's (pre-shared key or certificate).
//! - [`informational`]: the peer's Delete and liveness requests answered; our Delete of
//!   the IKE SA (`terminate`).
//! - [`create_child`]: CREATE_CHILD_SA rekeying a CHILD_SA, both roles, with §2.8.1's
//!   simultaneous rekeying; it hands a request proposing IKE to [`ike_rekey`].
//! - [`ike_rekey`]: CREATE_CHILD_SA rekeying the IKE SA, both roles, with §2.8.2's
//!   simultaneous rekeying.

pub(crate) mod auth;
pub(crate) mod create_child;
pub(crate) mod ike_rekey;
pub(crate) mod informational;
pub(crate) mod proof;
pub(crate) mod sa_init;

use std::net::{IpAddr, SocketAddr};

use ike_wire::id::Id;
use ike_wire::ids::IdType;

use crate::config::Identity;

/// The ID payload for a configured identity; `%any` sends our IKE address.
pub(crate) fn id_payload(identity: &Identity, addr: SocketAddr) -> Option<Id> {
    Some(match identity {
        Identity::Any => match addr.ip() {
            IpAddr::V4(a) => Id::new(IdType::IPV4_ADDR, a.octets().to_vec()),
            IpAddr::V6(a) => Id::new(IdType::IPV6_ADDR, a.octets().to_vec()),
        },
        Identity::Ipv4(a) => Id::new(IdType::IPV4_ADDR, a.octets().to_vec()),
        Identity::Ipv6(a) => Id::new(IdType::IPV6_ADDR, a.octets().to_vec()),
        Identity::Fqdn(s) => Id::new(IdType::FQDN, s.as_bytes().to_vec()),
        Identity::Email(s) => Id::new(IdType::RFC822_ADDR, s.as_bytes().to_vec()),
        Identity::Dn(text) => Id::new(IdType::DER_ASN1_DN, crate::cert::parse_dn(text).ok()?),
    })
}

/// The identity an ID payload names (a DN as its text); `None` for a key ID.
pub(crate) fn identity_of(id: &Id) -> Option<Identity> {
    let text = || std::str::from_utf8(&id.data).ok().map(str::to_string);
    Some(match id.id_type {
        IdType::IPV4_ADDR => Identity::Ipv4(<[u8; 4]>::try_from(id.data.as_slice()).ok()?.into()),
        IdType::IPV6_ADDR => Identity::Ipv6(<[u8; 16]>::try_from(id.data.as_slice()).ok()?.into()),
        IdType::FQDN => Identity::Fqdn(text()?),
        IdType::RFC822_ADDR => Identity::Email(text()?),
        IdType::DER_ASN1_DN => Identity::Dn(crate::cert::dn_text(&id.data)),
        _ => return None,
    })
}
