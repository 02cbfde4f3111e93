//! Distinguished names: the text form strongSwan writes and reads (`C=CH, O=strongSwan,
//! CN=moon.strongswan.org`, the most general RDN first, as the DER has them) parsed into
//! DER for identities given in the configuration; a DER name written back in that form for
//! logs and errors; and two names compared as strongSwan compares them.
//!
//! ```text
//!  "C=CH, O=strongSwan, CN=moon"  ──parse_dn──▶  SEQUENCE { SET { SEQUENCE { OID, string } } … }
//!                                 ◀─dn_text───
//!  dn_matches(a, b): equal DER, or the same attributes in the same order with equal values
//! ```
//!
//! Attribute names taken (case-insensitive), strongSwan's set (`x501rdns` in its
//! `identification.c`): C, ST, L, O, OU, CN, SN, serialNumber, STREET, T (title),
//! D (description), postalCode, N (name), G (givenName), I (initials), dnQualifier,
//! pseudonym, organizationIdentifier, ID (uniqueIdentifier), DC, UID, E/Email/emailAddress,
//! UN/unstructuredName, and any attribute as a dotted OID (`2.5.4.3=moon`). A value is
//! written as a PrintableString when its characters allow, else as a UTF8String; E, DC and
//! UN as IA5String (ASCII only). Separators are commas; a value cannot hold a comma, and
//! multi-valued RDNs (`+`) are not taken.
//!
//! Matching follows strongSwan's `compare_dn`: the string type does not count (openssl
//! writes UTF8String where strongSwan writes PrintableString), values compare byte for
//! byte, ignoring ASCII case where both are PrintableString or both are IA5String e-mail
//! addresses.

use std::fmt;

use der::asn1::ObjectIdentifier;
use der::{Decode, Tag, Tagged};
use x509_cert::name::Name;

use super::encode::tlv;

/// An attribute's names (the first is written), OID and string type when parsed.
struct Attr {
    names: &'static [&'static str],
    oid: &'static str,
    ia5: bool,
}

const fn attr(names: &'static [&'static str], oid: &'static str, ia5: bool) -> Attr {
    Attr { names, oid, ia5 }
}

const ATTRS: &[Attr] = &[
    attr(&["C"], "2.5.4.6", false),
    attr(&["ST"], "2.5.4.8", false),
    attr(&["L"], "2.5.4.7", false),
    attr(&["O"], "2.5.4.10", false),
    attr(&["OU"], "2.5.4.11", false),
    attr(&["CN"], "2.5.4.3", false),
    attr(&["SN"], "2.5.4.4", false),
    attr(&["serialNumber"], "2.5.4.5", false),
    attr(&["STREET"], "2.5.4.9", false),
    attr(&["T", "title"], "2.5.4.12", false),
    attr(&["D", "description"], "2.5.4.13", false),
    attr(&["postalCode"], "2.5.4.17", false),
    attr(&["N", "name"], "2.5.4.41", false),
    attr(&["G", "givenName"], "2.5.4.42", false),
    attr(&["I", "initials"], "2.5.4.43", false),
    attr(&["dnQualifier"], "2.5.4.46", false),
    attr(&["ID", "uniqueIdentifier"], "2.5.4.45", false),
    attr(&["pseudonym"], "2.5.4.65", false),
    attr(&["organizationIdentifier"], "2.5.4.97", false),
    attr(&["DC"], "0.9.2342.19200300.100.1.25", true),
    attr(&["UID"], "0.9.2342.19200300.100.1.1", false),
    attr(&["E", "Email", "emailAddress"], "1.2.840.113549.1.9.1", true),
    attr(&["UN", "unstructuredName"], "1.2.840.113549.1.9.2", true),
];

const EMAIL_OID: &str = "1.2.840.113549.1.9.1";

/// Why a DN's text form does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DnError {
    /// No attribute at all.
    Empty,
    /// A part without `=`.
    NoEquals(String),
    /// An attribute name not in the list above, nor a dotted OID.
    UnknownAttribute(String),
    /// An attribute with an empty value.
    EmptyValue(String),
    /// A value that its type cannot hold (non-ASCII in an IA5String, a country code that is
    /// not printable).
    BadValue(String),
}

impl fmt::Display for DnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnError::Empty => f.write_str("empty distinguished name"),
            DnError::NoEquals(p) => write!(f, "\"{p}\" is not ATTRIBUTE=value"),
            DnError::UnknownAttribute(a) => write!(f, "unknown DN attribute \"{a}\""),
            DnError::EmptyValue(a) => write!(f, "DN attribute {a} has an empty value"),
            DnError::BadValue(a) => write!(f, "DN attribute {a}: the value does not fit its string type"),
        }
    }
}

impl std::error::Error for DnError {}

/// X.680 §41.4's PrintableString characters.
fn printable(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b" '()+,-./:=?".contains(&b))
}

/// The DER of the DN written `text` (see the module doc for the form).
pub fn parse_dn(text: &str) -> Result<Vec<u8>, DnError> {
    if text.trim().is_empty() {
        return Err(DnError::Empty);
    }
    let mut rdns = Vec::new();
    for part in text.split(',').map(str::trim) {
        let (name, value) = part.split_once('=').ok_or_else(|| DnError::NoEquals(part.to_string()))?;
        let (name, value) = (name.trim(), value.trim());
        let (oid, ia5) = match ATTRS.iter().find(|a| a.names.iter().any(|n| n.eq_ignore_ascii_case(name))) {
            Some(a) => (ObjectIdentifier::new_unwrap(a.oid), a.ia5),
            None => {
                let oid =
                    ObjectIdentifier::new(name).map_err(|_| DnError::UnknownAttribute(name.to_string()))?;
                (oid, false)
            }
        };
        if value.is_empty() {
            return Err(DnError::EmptyValue(name.to_string()));
        }
        let tag = if ia5 {
            if !value.is_ascii() {
                return Err(DnError::BadValue(name.to_string()));
            }
            0x16
        } else if printable(value) {
            0x13
        } else if oid.to_string() == "2.5.4.6" {
            return Err(DnError::BadValue(name.to_string()));
        } else {
            0x0c
        };
        let mut atv = Vec::new();
        tlv(&mut atv, 0x06, oid.as_bytes());
        tlv(&mut atv, tag, value.as_bytes());
        let mut seq = Vec::new();
        tlv(&mut seq, 0x30, &atv);
        tlv(&mut rdns, 0x31, &seq);
    }
    let mut out = Vec::new();
    tlv(&mut out, 0x30, &rdns);
    Ok(out)
}

/// One attribute of a name: its OID, string tag and value bytes.
type Atv = (ObjectIdentifier, Tag, Vec<u8>);

/// A DER name's attributes in order (multi-valued RDNs flattened), or `None`.
fn attributes(der: &[u8]) -> Option<Vec<Atv>> {
    let name = Name::from_der(der).ok()?;
    Some(name.iter().map(|a| (a.oid, a.value.tag(), a.value.value().to_vec())).collect())
}

/// A value's text: the string types as text, anything else as `#` and hex.
fn value_text(tag: Tag, value: &[u8]) -> String {
    match tag {
        Tag::PrintableString | Tag::Utf8String | Tag::Ia5String | Tag::VisibleString => {
            String::from_utf8_lossy(value).into_owned()
        }
        Tag::TeletexString => value.iter().map(|&b| char::from(b)).collect(),
        Tag::BmpString => {
            let units: Vec<u16> = value.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
            String::from_utf16_lossy(&units)
        }
        _ => format!("#{}", value.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

/// A DER name written as strongSwan writes it (`C=CH, O=strongSwan, CN=moon`); a name
/// that does not parse is written as `#` and its hex.
pub fn dn_text(der: &[u8]) -> String {
    let Some(attrs) = attributes(der) else {
        return value_text(Tag::OctetString, der);
    };
    let parts: Vec<String> = attrs
        .iter()
        .map(|(oid, tag, value)| {
            let s = oid.to_string();
            let name = ATTRS.iter().find(|a| a.oid == s).map_or(s.clone(), |a| a.names[0].to_string());
            format!("{name}={}", value_text(*tag, value))
        })
        .collect();
    parts.join(", ")
}

/// Whether two DER names are the same name (strongSwan's `compare_dn`, see the module
/// doc). Names that do not parse are equal only byte for byte.
pub fn dn_matches(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    let (Some(x), Some(y)) = (attributes(a), attributes(b)) else {
        return false;
    };
    x.len() == y.len()
        && x.iter().zip(&y).all(|((oa, ta, va), (ob, tb, vb))| {
            let fold = ta == tb
                && (*ta == Tag::PrintableString || (*ta == Tag::Ia5String && oa.to_string() == EMAIL_OID));
            oa == ob && if fold { va.eq_ignore_ascii_case(vb) } else { va == vb }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strongswan_text_round_trips() {
        let der = parse_dn("C=CH, O=strongSwan, CN=moon.strongswan.org").unwrap();
        // Hand-assembled: SET { SEQUENCE { 2.5.4.6, PrintableString "CH" } } …
        let mut expected = vec![0x30, 0x40];
        expected.extend([0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x06, 0x13, 0x02, b'C', b'H']);
        expected.extend([0x31, 0x13, 0x30, 0x11, 0x06, 0x03, 0x55, 0x04, 0x0a, 0x13, 0x0a]);
        expected.extend(b"strongSwan");
        expected.extend([0x31, 0x1c, 0x30, 0x1a, 0x06, 0x03, 0x55, 0x04, 0x03, 0x13, 0x13]);
        expected.extend(b"moon.strongswan.org");
        assert_eq!(der, expected);
        assert_eq!(dn_text(&der), "C=CH, O=strongSwan, CN=moon.strongswan.org");
    }

    #[test]
    fn types_and_errors() {
        let der = parse_dn("cn=Zürich, E=a@b.ch, 2.5.4.11=x").unwrap();
        assert_eq!(dn_text(&der), "CN=Zürich, E=a@b.ch, OU=x");
        let attrs = attributes(&der).unwrap();
        assert_eq!(attrs[0].1, Tag::Utf8String);
        assert_eq!(attrs[1].1, Tag::Ia5String);
        assert_eq!(parse_dn(""), Err(DnError::Empty));
        assert_eq!(parse_dn("CN"), Err(DnError::NoEquals("CN".into())));
        assert_eq!(parse_dn("XX=1"), Err(DnError::UnknownAttribute("XX".into())));
        assert_eq!(parse_dn("CN="), Err(DnError::EmptyValue("CN".into())));
        assert_eq!(parse_dn("E=ü@b"), Err(DnError::BadValue("E".into())));
    }

    #[test]
    fn matching_ignores_string_type_and_printable_case() {
        let ours = parse_dn("C=CH, O=strongSwan, CN=moon").unwrap();
        // The same name with UTF8String values after C, as openssl writes them.
        let mut rdns = Vec::new();
        for (oid, tag, value) in
            [("2.5.4.6", 0x13, "CH"), ("2.5.4.10", 0x0c, "strongSwan"), ("2.5.4.3", 0x0c, "moon")]
        {
            let mut atv = Vec::new();
            tlv(&mut atv, 0x06, ObjectIdentifier::new_unwrap(oid).as_bytes());
            tlv(&mut atv, tag, value.as_bytes());
            let mut seq = Vec::new();
            tlv(&mut seq, 0x30, &atv);
            tlv(&mut rdns, 0x31, &seq);
        }
        let mut utf8 = Vec::new();
        tlv(&mut utf8, 0x30, &rdns);
        assert_ne!(ours, utf8);
        assert!(dn_matches(&ours, &utf8));
        assert!(dn_matches(&ours, &parse_dn("c=ch, o=STRONGSWAN, cn=MOON").unwrap()));
        // Case counts where one side is a UTF8String.
        assert!(!dn_matches(&utf8, &parse_dn("C=CH, O=strongswan, CN=moon").unwrap()));
        assert!(!dn_matches(&ours, &parse_dn("C=CH, O=strongSwan").unwrap()));
        assert!(!dn_matches(&ours, &parse_dn("O=strongSwan, C=CH, CN=moon").unwrap()));
        assert!(!dn_matches(&ours, &parse_dn("C=CH, O=strongSwan, CN=moo").unwrap()));
        assert!(!dn_matches(&ours, b"junk"));
    }
}
