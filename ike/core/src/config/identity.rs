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
//! A distinguished name is kept as text, normalized to strongSwan's printing (`C=CH, O=x,
//! CN=y`: RDNs separated by ", "); its DER encoding, which the ID payload carries and
//! certificates are compared by, comes with the certificate work. Each RDN must be
//! `ATTRIBUTE=value` with an attribute strongSwan names. strongSwan's typed prefixes
//! (`fqdn:`, `email:`, `asn1dn:`, `keyid:`…) and `@#` key ids are not supported: such a value
//! is refused rather than read as a host name.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ike_wire::ids::IdType;

/// An identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    /// `%any`: matches every identity; never sent.
    Any,
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    Fqdn(String),
    Email(String),
    /// A distinguished name as normalized text (see the module doc).
    Dn(String),
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

/// The attributes strongSwan's DN parser names (`x501rdns` in identification.c), the ones a
/// gateway's certificate uses.
const DN_ATTRIBUTES: &[&str] = &[
    "C",
    "ST",
    "L",
    "O",
    "OU",
    "CN",
    "E",
    "emailAddress",
    "DC",
    "SN",
    "serialNumber",
    "G",
    "GN",
    "I",
    "initials",
    "T",
    "title",
    "UID",
    "N",
    "dnQualifier",
    "D",
    "pseudonym",
    "ID",
    "TCGID",
    "postalCode",
    "street",
    "unstructuredName",
    "UN",
];

fn plain(s: &str) -> Result<(), IdentityError> {
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(IdentityError::BadCharacter(s.to_string()));
    }
    Ok(())
}

fn parse_dn(s: &str) -> Result<String, IdentityError> {
    let mut rdns = Vec::new();
    for rdn in s.split([',', '/']) {
        let rdn = rdn.trim();
        if rdn.is_empty() && rdns.is_empty() {
            // "/C=CH/O=x" (OpenSSL's form) starts with a separator.
            continue;
        }
        let Some((attr, value)) = rdn.split_once('=') else {
            return Err(IdentityError::BadRdn(rdn.to_string()));
        };
        let (attr, value) = (attr.trim(), value.trim());
        if attr.is_empty() || value.is_empty() {
            return Err(IdentityError::BadRdn(rdn.to_string()));
        }
        if !DN_ATTRIBUTES.contains(&attr) {
            return Err(IdentityError::UnknownAttribute(attr.to_string()));
        }
        rdns.push(format!("{attr}={value}"));
    }
    Ok(rdns.join(", "))
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
            return parse_dn(s).map(Identity::Dn);
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
            (a, b) => a == b,
        }
    }
}

impl fmt::Display for Identity {
    /// As strongSwan prints an identity (`%Y`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Any => f.write_str("%any"),
            Identity::Ipv4(a) => write!(f, "{a}"),
            Identity::Ipv6(a) => write!(f, "{a}"),
            Identity::Fqdn(s) | Identity::Email(s) | Identity::Dn(s) => f.write_str(s),
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
        assert_eq!(p("C=CH, O=x, CN=y"), Identity::Dn("C=CH, O=x, CN=y".into()));
        assert_eq!(p("C=CH,O=x,  CN=y"), Identity::Dn("C=CH, O=x, CN=y".into()));
        assert_eq!(p("/C=CH/O=x/CN=y"), Identity::Dn("C=CH, O=x, CN=y".into()));
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
    }
}
