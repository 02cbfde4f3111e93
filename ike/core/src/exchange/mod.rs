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
//!   simultaneous rekeying; it hands a request proposing IKE to [`ike_rekey`], and one
//!   without REKEY_SA to [`new_child`].
//! - [`new_child`]: CREATE_CHILD_SA making a new CHILD_SA on an established IKE SA, both
//!   roles (and the install of a CHILD_SA made by either exchange).
//! - [`ike_rekey`]: CREATE_CHILD_SA rekeying the IKE SA, both roles, with §2.8.2's
//!   simultaneous rekeying.
//!
//! A fragmented message (RFC 7383) reaches its exchange reassembled, through
//! `IkeSa::open` like any other; IKE_AUTH and CREATE_CHILD_SA messages longer than the
//! fragment size go out in fragments when the peer reassembles ([`send_sealed`]).

pub(crate) mod auth;
pub(crate) mod create_child;
pub(crate) mod ike_rekey;
pub(crate) mod informational;
pub(crate) mod new_child;
pub(crate) mod proof;
pub(crate) mod sa_init;

use std::net::{IpAddr, SocketAddr};

use crate::io::{Datagram, Output};
use crate::stats::Stats;

use ike_wire::id::Id;
use ike_wire::ids::IdType;

use crate::config::Identity;

/// Sends a sealed message from `local` to `remote`: its one datagram, or its fragments
/// (counted in `fragments_sent`).
pub(crate) fn send_sealed(
    stats: &mut Stats,
    out: &mut Vec<Output>,
    local: SocketAddr,
    remote: SocketAddr,
    datagrams: Vec<Vec<u8>>,
) {
    if datagrams.len() > 1 {
        stats.fragments_sent += datagrams.len() as u64;
    }
    for bytes in datagrams {
        out.push(Output::Send(Datagram { local, remote, bytes }));
    }
}

/// The ID payload for a configured identity; `%any` sends our IKE address.
pub(crate) fn id_payload(identity: &Identity, addr: SocketAddr) -> Option<Id> {
    let (id_type, data) = match identity {
        Identity::Any => match addr.ip() {
            IpAddr::V4(a) => (IdType::IPV4_ADDR, a.octets().to_vec()),
            IpAddr::V6(a) => (IdType::IPV6_ADDR, a.octets().to_vec()),
        },
        other => other.to_payload()?,
    };
    Some(Id::new(id_type, data))
}

/// Whether connection `c` takes an IKE SA between the datagram's addresses (a responder's
/// first choice in IKE_SA_INIT, and the candidates IKE_AUTH may move to).
pub(crate) fn addresses_fit(c: &crate::config::Connection, d: &crate::io::Datagram) -> bool {
    (c.local_addrs.is_empty() || c.local_addrs.contains(&d.local.ip()))
        && (c.remote_addrs.is_empty() || c.remote_addrs.contains(&d.remote.ip()))
}

/// The identity an ID payload names; `None` for a key ID.
pub(crate) fn identity_of(id: &Id) -> Option<Identity> {
    Identity::from_payload(id.id_type, &id.data)
}
