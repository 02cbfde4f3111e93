//! One X.509 certificate (RFC 5280) parsed by `x509-cert` into what IKE needs of it: its
//! names, validity, key, the extensions that decide whether it may sign (basicConstraints,
//! keyUsage) and which identities it binds (subjectAltName), and the exact bytes its
//! signature covers.
//!
//! ```text
//!  Certificate ::= SEQUENCE {
//!      tbsCertificate  ──▶ tbs (the bytes as received: the signature covers them)
//!        subject, issuer ──▶ DER (compared with dn_matches) and text (for errors)
//!        validity        ──▶ Unix seconds
//!        subjectPublicKeyInfo ──▶ DER (for crypto::verify_signature / verify_x509_signature)
//!        extensions      ──▶ basicConstraints, keyUsage, subjectAltName; others noted
//!      signatureAlgorithm ──▶ DER AlgorithmIdentifier
//!      signatureValue     ──▶ octets }
//! ```
//!
//! Parsing is total: bad DER, a repeated or malformed known extension is a [`CertError`].
//! An unknown *critical* extension is kept, and refused when the certificate is used in a
//! chain ([`super::chain`]).

use der::asn1::ObjectIdentifier;
use der::{Decode, Encode, Reader, SliceReader};
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{BasicConstraints, KeyUsage, SubjectAltName};
use x509_cert::Certificate as X509;

use super::dn::dn_text;
use super::error::CertError;

/// One subjectAltName entry IKE identities can match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AltName {
    Dns(String),
    /// 4 or 16 octets.
    Ip(Vec<u8>),
    Email(String),
    /// A directoryName, DER.
    Dn(Vec<u8>),
}

const BASIC_CONSTRAINTS: &str = "2.5.29.19";
const KEY_USAGE: &str = "2.5.29.15";
const SUBJECT_ALT_NAME: &str = "2.5.29.17";
/// Extensions that may be critical without changing what we decide: the key identifiers
/// and extendedKeyUsage (RFC 4945 §5.1.3.12: IKE does not enforce it), certificatePolicies
/// (no policy is required here, RFC 5280 §6.1 with any-policy).
const UNDERSTOOD: &[&str] = &[
    BASIC_CONSTRAINTS,
    KEY_USAGE,
    SUBJECT_ALT_NAME,
    "2.5.29.14", // subjectKeyIdentifier
    "2.5.29.35", // authorityKeyIdentifier
    "2.5.29.37", // extKeyUsage
    "2.5.29.32", // certificatePolicies
];

/// A parsed certificate.
#[derive(Clone, PartialEq, Eq)]
pub struct Certificate {
    der: Vec<u8>,
    tbs: Vec<u8>,
    subject: Vec<u8>,
    subject_text: String,
    issuer: Vec<u8>,
    spki: Vec<u8>,
    signature_algorithm: Vec<u8>,
    signature: Vec<u8>,
    not_before: u64,
    not_after: u64,
    ca: bool,
    path_len: Option<u8>,
    key_usage: Option<KeyUsage>,
    alt_names: Vec<AltName>,
    unknown_critical: Option<String>,
}

/// Names and flags, not bytes: a certificate in a log or a failed assertion is read by
/// its subject.
impl std::fmt::Debug for Certificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificate")
            .field("subject", &self.subject_text)
            .field("issuer", &dn_text(&self.issuer))
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .field("ca", &self.ca)
            .field("path_len", &self.path_len)
            .field("alt_names", &self.alt_names)
            .finish_non_exhaustive()
    }
}

/// The `tbsCertificate` TLV as it is in `der`, the bytes the signature covers.
fn tbs_bytes(der: &[u8]) -> der::Result<&[u8]> {
    let mut reader = SliceReader::new(der)?;
    reader.sequence(|r| {
        let tbs = r.tlv_bytes()?;
        r.tlv_bytes()?;
        r.tlv_bytes()?;
        Ok(tbs)
    })
}

impl Certificate {
    /// Parses one DER certificate.
    pub fn from_der(der: &[u8]) -> Result<Certificate, CertError> {
        let malformed = |subject: Option<&str>, e: &dyn std::fmt::Display| CertError::Malformed {
            subject: subject.map(str::to_string),
            why: e.to_string(),
        };
        let x = X509::from_der(der).map_err(|e| malformed(None, &e))?;
        let tbs = x.tbs_certificate();
        let subject = tbs.subject().to_der().map_err(|e| malformed(None, &e))?;
        let subject_text = dn_text(&subject);
        let bad = |e: &dyn std::fmt::Display| malformed(Some(&subject_text), e);
        let issuer = tbs.issuer().to_der().map_err(|e| bad(&e))?;
        let spki = tbs.subject_public_key_info().to_der().map_err(|e| bad(&e))?;
        let signature_algorithm = x.signature_algorithm().to_der().map_err(|e| bad(&e))?;
        let signature = x.signature().as_bytes().ok_or_else(|| bad(&"signature with unused bits"))?.to_vec();
        let signed = tbs_bytes(der).map_err(|e| bad(&e))?.to_vec();
        let validity = tbs.validity();
        let mut cert = Certificate {
            der: der.to_vec(),
            tbs: signed,
            issuer,
            spki,
            signature_algorithm,
            signature,
            not_before: validity.not_before.to_unix_duration().as_secs(),
            not_after: validity.not_after.to_unix_duration().as_secs(),
            ca: false,
            path_len: None,
            key_usage: None,
            alt_names: Vec::new(),
            unknown_critical: None,
            subject,
            subject_text: subject_text.clone(),
        };
        let mut seen: Vec<ObjectIdentifier> = Vec::new();
        for ext in tbs.extensions().map(Vec::as_slice).unwrap_or(&[]) {
            let oid = ext.extn_id.to_string();
            let bad_ext =
                || CertError::BadExtension { subject: subject_text.clone(), extension: oid.clone() };
            if seen.contains(&ext.extn_id) {
                return Err(bad_ext());
            }
            seen.push(ext.extn_id);
            let value = ext.extn_value.as_bytes();
            match oid.as_str() {
                BASIC_CONSTRAINTS => {
                    let bc = BasicConstraints::from_der(value).map_err(|_| bad_ext())?;
                    cert.ca = bc.ca;
                    cert.path_len = if bc.ca { bc.path_len_constraint } else { None };
                }
                KEY_USAGE => cert.key_usage = Some(KeyUsage::from_der(value).map_err(|_| bad_ext())?),
                SUBJECT_ALT_NAME => {
                    let san = SubjectAltName::from_der(value).map_err(|_| bad_ext())?;
                    for name in san.0 {
                        cert.alt_names.push(match name {
                            GeneralName::DnsName(s) => AltName::Dns(s.to_string()),
                            GeneralName::Rfc822Name(s) => AltName::Email(s.to_string()),
                            GeneralName::IpAddress(o) => AltName::Ip(o.as_bytes().to_vec()),
                            GeneralName::DirectoryName(n) => AltName::Dn(n.to_der().map_err(|_| bad_ext())?),
                            _ => continue,
                        });
                    }
                }
                _ if ext.critical && !UNDERSTOOD.contains(&oid.as_str()) => {
                    cert.unknown_critical.get_or_insert(oid);
                }
                _ => {}
            }
        }
        Ok(cert)
    }

    /// The certificate as received, DER (what a CERT payload carries).
    pub fn der(&self) -> &[u8] {
        &self.der
    }

    /// The `tbsCertificate` bytes, what the issuer signed.
    pub fn tbs(&self) -> &[u8] {
        &self.tbs
    }

    /// The subject, DER.
    pub fn subject(&self) -> &[u8] {
        &self.subject
    }

    /// The subject as strongSwan writes it (`C=CH, O=strongSwan, CN=moon`).
    pub fn subject_text(&self) -> &str {
        &self.subject_text
    }

    /// The issuer, DER.
    pub fn issuer(&self) -> &[u8] {
        &self.issuer
    }

    /// The public key, a DER SubjectPublicKeyInfo (what `crypto::verify_signature` takes).
    pub fn spki(&self) -> &[u8] {
        &self.spki
    }

    /// The signatureAlgorithm, a DER AlgorithmIdentifier.
    pub fn signature_algorithm(&self) -> &[u8] {
        &self.signature_algorithm
    }

    /// The signature's octets.
    pub fn signature(&self) -> &[u8] {
        &self.signature
    }

    /// notBefore and notAfter, Unix seconds.
    pub fn validity(&self) -> (u64, u64) {
        (self.not_before, self.not_after)
    }

    /// basicConstraints cA.
    pub fn is_ca(&self) -> bool {
        self.ca
    }

    /// basicConstraints pathLenConstraint of a CA.
    pub fn path_len(&self) -> Option<u8> {
        self.path_len
    }

    /// Whether keyUsage allows `digitalSignature` (true when there is no keyUsage).
    pub fn may_sign(&self) -> bool {
        self.key_usage.is_none_or(|k| k.digital_signature())
    }

    /// Whether keyUsage allows `keyCertSign` (true when there is no keyUsage).
    pub fn may_sign_certificates(&self) -> bool {
        self.key_usage.is_none_or(|k| k.key_cert_sign())
    }

    /// The subjectAltName entries of the kinds IKE identities match.
    pub fn alt_names(&self) -> &[AltName] {
        &self.alt_names
    }

    /// The first critical extension not understood here, as a dotted OID.
    pub fn unknown_critical_extension(&self) -> Option<&str> {
        self.unknown_critical.as_deref()
    }

    /// Whether the subject is also the issuer (a self-issued certificate, RFC 5280 §6.1).
    pub fn is_self_issued(&self) -> bool {
        super::dn::dn_matches(&self.subject, &self.issuer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junk_and_truncations_are_errors() {
        assert!(matches!(Certificate::from_der(b""), Err(CertError::Malformed { subject: None, .. })));
        for n in 0..64 {
            let junk: Vec<u8> = (0..n).map(|i| [0x30u8, 0x82, 0x01, 0xff, 0x02, 0x00][i % 6]).collect();
            assert!(Certificate::from_der(&junk).is_err());
        }
    }
}
