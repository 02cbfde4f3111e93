//! IKE identities (RFC 7296 §3.5) and whether a certificate binds one, the check of
//! RFC 4945 §3.1 that the peer's ID payload names the holder of the certificate's key.
//!
//! ```text
//!  ID_FQDN          ↔ subjectAltName dNSName, ignoring ASCII case
//!  ID_IPV4_ADDR     ↔ subjectAltName iPAddress of 4 octets
//!  ID_IPV6_ADDR     ↔ subjectAltName iPAddress of 16 octets
//!  ID_RFC822_ADDR   ↔ subjectAltName rfc822Name, ignoring ASCII case
//!  ID_DER_ASN1_DN   ↔ the subject, or a subjectAltName directoryName (dn_matches)
//! ```
//!
//! What strongSwan does, read in its `x509_cert.c` (`has_subject`, master of May 2026): it matches
//! the ID against the subject DN and each subjectAltName, and a name of one type never
//! matches an ID of another; there is no fall-back to the subject's CN for an FQDN or an
//! e-mail ID when the certificate has no subjectAltName. We do the same: an FQDN ID is
//! bound only by a dNSName. Neither side's wildcards are expanded (strongSwan's apply to
//! IDs in its configuration, matched elsewhere).

use ike_wire::ids::IdType;

use super::dn::dn_matches;
use super::parsed::{AltName, Certificate};

/// An identity IKE can authenticate with a certificate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    Fqdn(String),
    Ipv4([u8; 4]),
    Ipv6([u8; 16]),
    Email(String),
    /// A DER distinguished name.
    Dn(Vec<u8>),
}

impl Identity {
    /// The identity an ID payload carries (its type and data), or `None` for a type that
    /// certificates do not bind here or data of the wrong shape.
    pub fn from_payload(id_type: IdType, data: &[u8]) -> Option<Identity> {
        match id_type {
            IdType::FQDN => std::str::from_utf8(data).ok().map(|s| Identity::Fqdn(s.to_string())),
            IdType::RFC822_ADDR => std::str::from_utf8(data).ok().map(|s| Identity::Email(s.to_string())),
            IdType::IPV4_ADDR => data.try_into().ok().map(Identity::Ipv4),
            IdType::IPV6_ADDR => data.try_into().ok().map(Identity::Ipv6),
            IdType::DER_ASN1_DN => Some(Identity::Dn(data.to_vec())),
            _ => None,
        }
    }

    /// The ID payload's type and data for this identity.
    pub fn to_payload(&self) -> (IdType, Vec<u8>) {
        match self {
            Identity::Fqdn(s) => (IdType::FQDN, s.as_bytes().to_vec()),
            Identity::Email(s) => (IdType::RFC822_ADDR, s.as_bytes().to_vec()),
            Identity::Ipv4(a) => (IdType::IPV4_ADDR, a.to_vec()),
            Identity::Ipv6(a) => (IdType::IPV6_ADDR, a.to_vec()),
            Identity::Dn(d) => (IdType::DER_ASN1_DN, d.clone()),
        }
    }
}

impl Certificate {
    /// Whether this certificate binds `id` (see the module doc).
    pub fn binds(&self, id: &Identity) -> bool {
        if let Identity::Dn(dn) = id {
            if dn_matches(self.subject(), dn) {
                return true;
            }
        }
        self.alt_names().iter().any(|name| match (name, id) {
            (AltName::Dns(n), Identity::Fqdn(f)) => n.eq_ignore_ascii_case(f),
            (AltName::Email(n), Identity::Email(e)) => n.eq_ignore_ascii_case(e),
            (AltName::Ip(a), Identity::Ipv4(b)) => a[..] == b[..],
            (AltName::Ip(a), Identity::Ipv6(b)) => a[..] == b[..],
            (AltName::Dn(n), Identity::Dn(d)) => dn_matches(n, d),
            _ => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_bad_shapes_are_none() {
        for id in [
            Identity::Fqdn("moon.strongswan.org".into()),
            Identity::Email("a@b.c".into()),
            Identity::Ipv4([192, 0, 2, 1]),
            Identity::Ipv6([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            Identity::Dn(vec![0x30, 0x00]),
        ] {
            let (t, d) = id.to_payload();
            assert_eq!(Identity::from_payload(t, &d), Some(id));
        }
        assert_eq!(Identity::from_payload(IdType::IPV4_ADDR, &[1, 2, 3]), None);
        assert_eq!(Identity::from_payload(IdType::FQDN, &[0xff]), None);
        assert_eq!(Identity::from_payload(IdType::KEY_ID, b"x"), None);
    }
}
