//! Proving our identity and checking the peer's in IKE_AUTH (RFC 7296 §2.15): by a
//! pre-shared key, or by a certificate and a signature (RFC 7427; RFC 4945's profile).
//!
//! ```text
//!  our ID: the configured one; %any: our certificate's subject (pubkey), else our address
//!  ours:  psk     AUTH(PSK) = prf(prf(PSK, pad), octets)
//!         pubkey  CERT per certificate of ours (end entity first),
//!                 AUTH = key.sign(octets): method 14 if the peer sent
//!                 SIGNATURE_HASH_ALGORITHMS, else 9/10 (ECDSA); RSA without 14 refused
//!  peer:  the ID matches the connection's remote id                 ─ no ─▶ refused
//!         psk     the PSK for the pair, AUTH compared
//!         pubkey  CERTs → chain to a configured CA at the caller's Unix time,
//!                 the end entity binds the ID, AUTH verifies with its key
//!                 (a chain or binding refusal is an untrusted certificate)
//! ```
//!
//! A refusal carries its reason as text, for `Event::AuthFailed` and the log.

use ike_wire::auth::Auth;
use ike_wire::cert::Cert;
use ike_wire::id::Id;
use ike_wire::ids::{AuthMethod as WireAuthMethod, CertEncoding, IdType};
use ike_wire::{Body, Payload};

use std::net::SocketAddr;

use super::{id_payload, identity_of};
use crate::cert::{self, Certificate};
use crate::config::{AuthMethod, Identity};
use crate::crypto;
use crate::ike_sa::IkeSa;
use crate::Ike;

/// Why the peer was refused.
pub(crate) struct Refusal {
    pub reason: String,
    /// Its certificate was refused (counted in `untrusted_certs`).
    pub untrusted_cert: bool,
}

fn refuse(reason: impl Into<String>) -> Refusal {
    Refusal { reason: reason.into(), untrusted_cert: false }
}

/// The ID payload's body after its generic header: what prf(SK_p, ·) covers.
fn id_body(id: &Id) -> Vec<u8> {
    id.to_vec().unwrap_or_default()
}

/// The octets an AUTH covers: ours (`mine`) or the peer's, with `id` the signer's ID.
fn octets(ike: &Ike, sa: &IkeSa, id: &Id, mine: bool) -> Result<Vec<u8>, crypto::CryptoError> {
    let (suite, keys) = (sa.suite.as_ref().expect("keys"), sa.keys.as_ref().expect("keys"));
    let (msg, nonce, sk_p) = match (sa.initiator, mine) {
        (true, true) => (&sa.init.msg_i, &sa.init.nr, &keys.sk_pi),
        (false, true) => (&sa.init.msg_r, &sa.init.ni, &keys.sk_pr),
        (true, false) => (&sa.init.msg_r, &sa.init.ni, &keys.sk_pr),
        (false, false) => (&sa.init.msg_i, &sa.init.nr, &keys.sk_pi),
    };
    crypto::signed_octets(&ike.fw, suite.prf, msg, nonce, sk_p, &id_body(id))
}

fn psk_for<'a>(ike: &'a Ike, sa: &IkeSa, peer: &Identity) -> Option<&'a [u8]> {
    let conn = &ike.config.connections[sa.conn];
    ike.config.secrets.psk_for(&conn.local.id, peer).map(|p| p.as_bytes())
}

/// Our ID payload for the connection `conn` at `addr`: the configured identity, or for
/// `%any` our certificate's subject (pubkey) or our address (psk).
pub(crate) fn our_id(ike: &Ike, conn: usize, addr: SocketAddr) -> Option<Id> {
    let c = &ike.config.connections[conn];
    if c.local.id == Identity::Any && c.local.method == AuthMethod::Pubkey {
        let ee = ike.config.credentials.get(&c.name)?.certs.first()?;
        return Some(Id::new(IdType::DER_ASN1_DN, ee.subject().to_vec()));
    }
    id_payload(&c.local.id, addr)
}

/// The CERTREQ we send when the peer proves itself by certificate: hashes of our CAs.
/// `conn` is the connection's index.
pub(crate) fn certreq(ike: &Ike, conn: usize) -> Option<Payload> {
    let conn = &ike.config.connections[conn];
    if conn.remote.method != AuthMethod::Pubkey {
        return None;
    }
    let creds = ike.config.credentials.get(&conn.name)?;
    let data = cert::certreq_data(&ike.fw, &creds.trust).ok()?;
    (!data.is_empty()).then_some(Payload::CertReq(Cert { encoding: CertEncoding::X509_SIGNATURE, data }))
}

/// Our CERT payloads (none for a PSK) and AUTH over our ID payload `id`.
pub(crate) fn ours(ike: &Ike, sa: &IkeSa, id: &Id, peer: &Identity) -> Result<(Vec<Payload>, Auth), String> {
    let conn = &ike.config.connections[sa.conn];
    let octets = octets(ike, sa, id, true).map_err(|e| e.to_string())?;
    match conn.local.method {
        AuthMethod::Psk => {
            let psk = psk_for(ike, sa, peer).ok_or("no pre-shared key for the pair of identities")?;
            let data = crypto::psk_auth(&ike.fw, sa.suite.expect("keys").prf, psk, &octets)
                .map_err(|e| e.to_string())?;
            Ok((Vec::new(), Auth { method: WireAuthMethod::PSK, data: data.to_vec() }))
        }
        AuthMethod::Pubkey => {
            let creds = ike.config.credentials.get(&conn.name).ok_or("no certificate loaded")?;
            let key = creds.key.as_ref().ok_or("no private key loaded")?;
            let scheme = key.choose_scheme(&sa.peer_hashes).map_err(|e| {
                format!("{e}: an RSA key needs the peer's SIGNATURE_HASH_ALGORITHMS (RFC 7427)")
            })?;
            let data = key.sign(&ike.fw, scheme, &octets).map_err(|e| e.to_string())?;
            let certs = creds
                .certs
                .iter()
                .map(|c| {
                    Payload::Cert(Cert { encoding: CertEncoding::X509_SIGNATURE, data: c.der().to_vec() })
                })
                .collect();
            Ok((certs, Auth { method: scheme.method(), data }))
        }
    }
}

/// Checks the peer: its ID `id` against the connection, then its proof (module doc).
/// `inner` is the decrypted message, for its CERT payloads.
pub(crate) fn check_peer(
    ike: &Ike,
    sa: &IkeSa,
    id: &Id,
    auth: &Auth,
    inner: &[Payload],
) -> Result<Identity, Refusal> {
    let conn = &ike.config.connections[sa.conn];
    let peer =
        identity_of(id).ok_or_else(|| refuse(format!("ID of type {:?} not understood", id.id_type)))?;
    if !conn.remote.id.matches(&peer) {
        return Err(refuse(format!("identity {peer} is not the configured {}", conn.remote.id)));
    }
    let octets = octets(ike, sa, id, false).map_err(|e| refuse(e.to_string()))?;
    match conn.remote.method {
        AuthMethod::Psk => {
            let psk =
                psk_for(ike, sa, &peer).ok_or_else(|| refuse(format!("no pre-shared key for {peer}")))?;
            crypto::verify_psk_auth(
                &ike.fw,
                sa.suite.expect("keys").prf,
                psk,
                auth.method,
                &auth.data,
                &octets,
            )
            .map_err(|e| refuse(format!("AUTH of {peer}: {e}")))?;
        }
        AuthMethod::Pubkey => {
            let untrusted = |reason: String| Refusal { reason, untrusted_cert: true };
            let creds =
                ike.config.credentials.get(&conn.name).ok_or_else(|| refuse("no CA certificates loaded"))?;
            let mut certs = inner.iter().filter_map(|p| match p {
                Payload::Cert(c) if c.encoding == CertEncoding::X509_SIGNATURE => Some(c),
                _ => None,
            });
            let ee = certs.next().ok_or_else(|| untrusted(format!("{peer} sent no certificate")))?;
            let ee = Certificate::from_der(&ee.data)
                .map_err(|e| untrusted(format!("certificate of {peer}: {e}")))?;
            let ints: Vec<Certificate> = certs.filter_map(|c| Certificate::from_der(&c.data).ok()).collect();
            let chain = creds
                .trust
                .validate(&ike.fw, &ee, &ints, ike.unix_now)
                .map_err(|e| untrusted(format!("certificate of {peer} not trusted: {e}")))?;
            let bound = peer.bound_by(&ee);
            if !bound {
                return Err(untrusted(format!("certificate '{}' does not bind {peer}", ee.subject_text())));
            }
            crypto::verify_signature(&ike.fw, chain.public_key(), auth.method, &auth.data, &octets)
                .map_err(|e| refuse(format!("AUTH of {peer}: {e}")))?;
        }
    }
    Ok(peer)
}
