//! IKE identities (RFC 7296 §3.5) as swanctl.conf writes them in `id = …`.
//!
//! The reading is strongSwan's (`identification_create_from_string`):
//!
//! ```text
//! %any                       any identity (a responder's remote id before it is known)
//! 10.0.0.1, 2001:db8::1      ID_IPV4_ADDR, ID_IPV6_ADDR
//! "C=CH, O=x, CN=y"          ID_DER_ASN1_DN: any text with '='
//! user@example.org           ID_RFC822_ADDR: text with '@' (not first)
//! gw.example.org, @gw        ID_FQDN: anything else; a leading '@' forces FQDN
//! ```
//!
//! This is the one identity type of ike-core: configured, carried in ID payloads
//! ([`Identity::from_payload`], [`Identity::to_payload`]) and bound by certificates
//! ([`Identity::bound_by`], RFC 4945 §3.1). A distinguished name is kept as its DER
//! encoding ([`crate::cert::parse_dn`]; OpenSSL's `/C=CH/O=x` form is read too), printed
//! as strongSwan prints it (`C=CH, O=x, CN=y`) and compared as strongSwan compares DNs
//! ([`crate::cert::dn_matches`]). Each RDN must be `ATTRIBUTE=value` with an attribute
//! strongSwan names, or a dotted OID.
//!
//! What a certificate binds (strongSwan's `x509_cert.c` `has_subject`: a name of one type
//! never matches an ID of another, no fall-back to the subject's CN):
//!
//! ```text
//!  Fqdn   ↔ subjectAltName dNSName, ignoring ASCII case
//!  Ipv4   ↔ subjectAltName iPAddress of 4 octets      Ipv6 ↔ of 16 octets
//!  Email  ↔ subjectAltName rfc822Name, ignoring ASCII case
//!  Dn     ↔ the subject, or a subjectAltName directoryName
//! ```
//!
//! strongSwan's typed prefixes
//! (`fqdn:`, `email:`, `asn1dn:`, `keyid:`…) and `@#` key ids are not supported: such a value
//! is refused rather than read as a host name.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ike_wire::ids::IdType;

use crate::cert::{dn_matches, dn_text, parse_dn, AltName, Certificate, DnError};

/// An identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    /// `%any`: matches every identity; never sent.
    Any,
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    Fqdn(String),
    Email(String),
    /// A distinguished name, DER (see the module doc).
    Dn(Vec<u8>),
}

/// What is wrong with an identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdentityError {
    Empty,
    /// Whitespace or a control character in an FQDN or e-mail address.
    BadCharacter(String),
    /// An RDN without `=` or with an empty attribute or value.
    BadRdn(String),
    /// An RDN attribute strongSwan does not name.
    UnknownAttribute(String),
    /// `user@` or `@` alone.
    BadEmail(String),
    /// A strongSwan typed prefix (`fqdn:` …) or key id (`@#`), not supported.
    TypedPrefix(String),
    /// Longer than 255 octets.
    TooLong,
}

impl fmt::Display for IdentityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdentityError::Empty => write!(f, "empty identity"),
            IdentityError::BadCharacter(s) => {
                write!(f, "identity '{s}' has whitespace or a control character")
            }
            IdentityError::BadRdn(s) => write!(f, "'{s}' is not ATTRIBUTE=value in a distinguished name"),
            IdentityError::UnknownAttribute(s) => {
                write!(f, "unknown attribute '{s}' in a distinguished name")
            }
            IdentityError::BadEmail(s) => write!(f, "'{s}' is not an e-mail address (user@domain)"),
            IdentityError::TypedPrefix(s) => {
                write!(f, "identity '{s}': typed prefixes and key ids are not supported")
            }
            IdentityError::TooLong => write!(f, "identity longer than 255 characters"),
        }
    }
}

impl std::error::Error for IdentityError {}

fn plain(s: &str) -> Result<(), IdentityError> {
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(IdentityError::BadCharacter(s.to_string()));
    }
    Ok(())
}

/// A DN's DER from its text: strongSwan's `C=CH, O=x` or OpenSSL's `/C=CH/O=x`.
fn dn(s: &str) -> Result<Vec<u8>, IdentityError> {
    let text = match s.strip_prefix('/') {
        Some(rest) => rest.split('/').collect::<Vec<_>>().join(", "),
        None => s.to_string(),
    };
    parse_dn(&text).map_err(|e| match e {
        DnError::Empty => IdentityError::Empty,
        DnError::UnknownAttribute(a) => IdentityError::UnknownAttribute(a),
        DnError::NoEquals(p) | DnError::EmptyValue(p) | DnError::BadValue(p) => IdentityError::BadRdn(p),
    })
}

impl Identity {
    /// Reads an identity as swanctl.conf writes it (the module doc has the rules).
    pub fn parse(text: &str) -> Result<Identity, IdentityError> {
        let s = text.trim();
        if s.is_empty() {
            return Err(IdentityError::Empty);
        }
        if s.len() > 255 {
            return Err(IdentityError::TooLong);
        }
        if s == "%any" {
            return Ok(Identity::Any);
        }
        if s.contains('=') {
            return dn(s).map(Identity::Dn);
        }
        if let Some(rest) = s.strip_prefix('@') {
            if rest.starts_with('#') || rest.starts_with('@') || rest.is_empty() {
                return Err(IdentityError::TypedPrefix(s.to_string()));
            }
            plain(rest)?;
            return Ok(Identity::Fqdn(rest.to_string()));
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(match ip {
                IpAddr::V4(a) => Identity::Ipv4(a),
                IpAddr::V6(a) => Identity::Ipv6(a),
            });
        }
        if s.contains(':') {
            return Err(IdentityError::TypedPrefix(s.to_string()));
        }
        plain(s)?;
        if let Some((user, domain)) = s.split_once('@') {
            if user.is_empty() || domain.is_empty() || domain.contains('@') {
                return Err(IdentityError::BadEmail(s.to_string()));
            }
            return Ok(Identity::Email(s.to_string()));
        }
        Ok(Identity::Fqdn(s.to_string()))
    }

    /// The ID payload's type, `None` for [`Identity::Any`].
    pub fn id_type(&self) -> Option<IdType> {
        Some(match self {
            Identity::Any => return None,
            Identity::Ipv4(_) => IdType::IPV4_ADDR,
            Identity::Ipv6(_) => IdType::IPV6_ADDR,
            Identity::Fqdn(_) => IdType::FQDN,
            Identity::Email(_) => IdType::RFC822_ADDR,
            Identity::Dn(_) => IdType::DER_ASN1_DN,
        })
    }

    /// Whether `self`, as configured, accepts `other`: `%any` accepts every identity, any
    /// other only an equal one (FQDNs and e-mail domains without regard to case).
    pub fn matches(&self, other: &Identity) -> bool {
        match (self, other) {
            (Identity::Any, _) => true,
            (Identity::Fqdn(a), Identity::Fqdn(b)) => a.eq_ignore_ascii_case(b),
            (Identity::Email(a), Identity::Email(b)) => match (a.rsplit_once('@'), b.rsplit_once('@')) {
                (Some((ua, da)), Some((ub, db))) => ua == ub && da.eq_ignore_ascii_case(db),
                _ => false,
            },
            (Identity::Dn(a), Identity::Dn(b)) => dn_matches(a, b),
            (a, b) => a == b,
        }
    }

    /// The identity an ID payload carries (its type and data); `None` for a type not
    /// supported (key IDs) or data of the wrong shape.
    pub fn from_payload(id_type: IdType, data: &[u8]) -> Option<Identity> {
        let text = || std::str::from_utf8(data).ok().map(str::to_string);
        Some(match id_type {
            IdType::IPV4_ADDR => Identity::Ipv4(<[u8; 4]>::try_from(data).ok()?.into()),
            IdType::IPV6_ADDR => Identity::Ipv6(<[u8; 16]>::try_from(data).ok()?.into()),
            IdType::FQDN => Identity::Fqdn(text()?),
            IdType::RFC822_ADDR => Identity::Email(text()?),
            IdType::DER_ASN1_DN => Identity::Dn(data.to_vec()),
            _ => return None,
        })
    }

    /// The ID payload's type and data; `None` for [`Identity::Any`].
    pub fn to_payload(&self) -> Option<(IdType, Vec<u8>)> {
        let data = match self {
            Identity::Any => return None,
            Identity::Ipv4(a) => a.octets().to_vec(),
            Identity::Ipv6(a) => a.octets().to_vec(),
            Identity::Fqdn(s) | Identity::Email(s) => s.as_bytes().to_vec(),
            Identity::Dn(d) => d.clone(),
        };
        Some((self.id_type()?, data))
    }

    /// Whether `cert` binds this identity (the module doc's table); never for `%any`.
    pub fn bound_by(&self, cert: &Certificate) -> bool {
        if let Identity::Dn(dn) = self {
            if dn_matches(cert.subject(), dn) {
                return true;
            }
        }
        cert.alt_names().iter().any(|name| match (name, self) {
            (AltName::Dns(n), Identity::Fqdn(f)) => n.eq_ignore_ascii_case(f),
            (AltName::Email(n), Identity::Email(e)) => n.eq_ignore_ascii_case(e),
            (AltName::Ip(a), Identity::Ipv4(b)) => a[..] == b.octets()[..],
            (AltName::Ip(a), Identity::Ipv6(b)) => a[..] == b.octets()[..],
            (AltName::Dn(n), Identity::Dn(d)) => dn_matches(n, d),
            _ => false,
        })
    }
}

impl fmt::Display for Identity {
    /// As strongSwan prints an identity (`%Y`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Any => f.write_str("%any"),
            Identity::Ipv4(a) => write!(f, "{a}"),
            Identity::Ipv6(a) => write!(f, "{a}"),
            Identity::Fqdn(s) | Identity::Email(s) => f.write_str(s),
            Identity::Dn(d) => f.write_str(&dn_text(d)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swanctl_forms() {
        let p = |s| Identity::parse(s).unwrap();
        assert_eq!(p("gw.example.org"), Identity::Fqdn("gw.example.org".into()));
        assert_eq!(p("@gw"), Identity::Fqdn("gw".into()));
        assert_eq!(p("10.0.0.1"), Identity::Ipv4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(p("2001:db8::1"), Identity::Ipv6("2001:db8::1".parse().unwrap()));
        let der = parse_dn("C=CH, O=x, CN=y").unwrap();
        assert_eq!(p("C=CH, O=x, CN=y"), Identity::Dn(der.clone()));
        assert_eq!(p("C=CH,O=x,  CN=y"), Identity::Dn(der.clone()));
        assert_eq!(p("/C=CH/O=x/CN=y"), Identity::Dn(der));
        assert_eq!(p("/C=CH/O=x/CN=y").to_string(), "C=CH, O=x, CN=y");
        assert_eq!(p("user@x"), Identity::Email("user@x".into()));
        assert_eq!(p("%any"), Identity::Any);
        assert_eq!(p("gw.example.org").id_type(), Some(IdType::FQDN));
        assert_eq!(p("user@x").id_type(), Some(IdType::RFC822_ADDR));
        assert_eq!(p("C=CH, CN=y").id_type(), Some(IdType::DER_ASN1_DN));
        assert_eq!(p("%any").id_type(), None);
        assert_eq!(p("C=CH,CN=y").to_string(), "C=CH, CN=y");
    }

    #[test]
    fn refused() {
        let e = |s| Identity::parse(s).unwrap_err();
        assert_eq!(e(""), IdentityError::Empty);
        assert_eq!(e("gw example"), IdentityError::BadCharacter("gw example".into()));
        assert_eq!(e("C=CH, CN"), IdentityError::BadRdn("CN".into()));
        assert_eq!(e("C=CH, XX=y"), IdentityError::UnknownAttribute("XX".into()));
        assert_eq!(e("user@"), IdentityError::BadEmail("user@".into()));
        assert_eq!(e("fqdn:gw"), IdentityError::TypedPrefix("fqdn:gw".into()));
        assert_eq!(e("@#0102"), IdentityError::TypedPrefix("@#0102".into()));
        assert_eq!(e(&"a".repeat(256)), IdentityError::TooLong);
    }

    #[test]
    fn matching() {
        let p = |s| Identity::parse(s).unwrap();
        assert!(Identity::Any.matches(&p("gw.example.org")));
        assert!(p("GW.example.org").matches(&p("gw.EXAMPLE.org")));
        assert!(p("u@X.org").matches(&p("u@x.org")));
        assert!(!p("U@x.org").matches(&p("u@x.org")));
        assert!(!p("gw.example.org").matches(&Identity::Any));
        assert!(!p("10.0.0.1").matches(&p("10.0.0.2")));
        assert!(p("C=CH, O=x, CN=y").matches(&p("c=CH, o=x, cn=y")));
        assert!(!p("C=CH, O=x, CN=y").matches(&p("C=CH, O=x, CN=z")));
    }

    #[test]
    fn payloads_round_trip_and_bad_shapes_are_none() {
        for text in ["moon.strongswan.org", "a@b.c", "192.0.2.1", "2001:db8::1", "C=CH, CN=moon"] {
            let id = Identity::parse(text).unwrap();
            let (t, d) = id.to_payload().unwrap();
            assert_eq!(Identity::from_payload(t, &d), Some(id));
        }
        assert_eq!(Identity::Any.to_payload(), None);
        assert_eq!(Identity::from_payload(IdType::IPV4_ADDR, &[1, 2, 3]), None);
        assert_eq!(Identity::from_payload(IdType::FQDN, &[0xff]), None);
        assert_eq!(Identity::from_payload(IdType::KEY_ID, b"x"), None);
    }
}
