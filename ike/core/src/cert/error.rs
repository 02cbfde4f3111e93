//! The one error type of certificates: one variant per cause, each naming the certificate
//! it is about by its subject (written as strongSwan writes DNs, `C=CH, O=strongSwan,
//! CN=moon.strongswan.org`), so that a log line says which certificate of a chain was
//! refused and why, and the daemon can count each cause.

use std::fmt;

use crate::crypto::CryptoError;

/// Everything that can go wrong loading, parsing or validating certificates.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertError {
    /// PEM armour that does not decode (RFC 7468).
    Pem(String),
    /// A PEM block of a kind not expected here (`found`), e.g. a key where certificates were
    /// asked for.
    PemLabel { expected: &'static str, found: String },
    /// Neither PEM nor one DER certificate: nothing to load.
    NoCertificate,
    /// A certificate whose DER does not parse (`subject` when it got that far).
    Malformed { subject: Option<String>, why: String },
    /// A private key in a form not taken; `use_form` says which to convert it to.
    KeyForm { found: String, use_form: &'static str },
    /// A private key that does not parse as its label says.
    KeyMalformed(&'static str),
    /// An extension that does not parse, or appears twice.
    BadExtension { subject: String, extension: String },
    /// A critical extension this implementation does not process (RFC 5280 §4.2).
    UnknownCriticalExtension { subject: String, extension: String },
    /// `now` is after the certificate's notAfter.
    Expired { subject: String, not_after: u64, now: u64 },
    /// `now` is before the certificate's notBefore.
    NotYetValid { subject: String, not_before: u64, now: u64 },
    /// No configured CA and no intermediate is named as this certificate's issuer.
    UnknownIssuer { subject: String, issuer: String },
    /// The issuer's key does not verify this certificate's signature.
    BadSignature { subject: String },
    /// A signature algorithm (or RSA-PSS parameters) this implementation does not check.
    UnsupportedSignatureAlgorithm { subject: String },
    /// The certificate's key is not one its signature algorithm can use, or not RSA,
    /// P-256, P-384 or Ed25519.
    UnsupportedKey { subject: String, why: String },
    /// A certificate used as an issuer without basicConstraints cA TRUE.
    IssuerNotCa { subject: String },
    /// A CA whose keyUsage is present without keyCertSign.
    IssuerKeyUsage { subject: String },
    /// An end-entity certificate whose keyUsage is present without digitalSignature.
    EndEntityKeyUsage { subject: String },
    /// More CAs below this one than its pathLenConstraint allows.
    PathLenExceeded { subject: String, path_len: u8, below: usize },
    /// The chain from this certificate would need more intermediates than allowed.
    ChainTooLong { subject: String, max_intermediates: usize },
    /// A CERTREQ Certification Authority field that is not a whole number of SHA-1 hashes.
    CertReqLength(usize),
    /// ocf failed a check for a reason that is not the certificate's (no driver, …).
    Crypto { subject: String, error: CryptoError },
}

impl fmt::Display for CertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use CertError::*;
        match self {
            Pem(why) => write!(f, "PEM does not decode: {why}"),
            PemLabel { expected, found } => {
                write!(f, "PEM block \"{found}\" where \"{expected}\" was expected")
            }
            NoCertificate => f.write_str("neither a PEM nor a DER certificate"),
            Malformed { subject: Some(s), why } => write!(f, "certificate \"{s}\" does not parse: {why}"),
            Malformed { subject: None, why } => write!(f, "certificate does not parse: {why}"),
            KeyForm { found, use_form } => {
                write!(f, "private key as {found} is not taken: convert it to {use_form}")
            }
            KeyMalformed(why) => write!(f, "private key does not parse: {why}"),
            BadExtension { subject, extension } => {
                write!(f, "certificate \"{subject}\": extension {extension} does not parse or is repeated")
            }
            UnknownCriticalExtension { subject, extension } => {
                write!(f, "certificate \"{subject}\": unknown critical extension {extension}")
            }
            Expired { subject, not_after, now } => {
                write!(f, "certificate \"{subject}\" expired (notAfter {not_after}, now {now}, Unix time)")
            }
            NotYetValid { subject, not_before, now } => {
                write!(
                    f,
                    "certificate \"{subject}\" not yet valid (notBefore {not_before}, now {now}, Unix time)"
                )
            }
            UnknownIssuer { subject, issuer } => {
                write!(f, "certificate \"{subject}\": issuer \"{issuer}\" is no trusted CA nor a received intermediate")
            }
            BadSignature { subject } => write!(f, "certificate \"{subject}\": signature does not verify"),
            UnsupportedSignatureAlgorithm { subject } => {
                write!(f, "certificate \"{subject}\": unsupported signature algorithm")
            }
            UnsupportedKey { subject, why } => write!(f, "certificate \"{subject}\": unsupported key: {why}"),
            IssuerNotCa { subject } => {
                write!(f, "certificate \"{subject}\" issues certificates but is not a CA")
            }
            IssuerKeyUsage { subject } => {
                write!(f, "CA certificate \"{subject}\": keyUsage lacks keyCertSign")
            }
            EndEntityKeyUsage { subject } => {
                write!(f, "certificate \"{subject}\": keyUsage lacks digitalSignature")
            }
            PathLenExceeded { subject, path_len, below } => {
                write!(f, "CA certificate \"{subject}\": pathLenConstraint {path_len}, {below} CAs below it")
            }
            ChainTooLong { subject, max_intermediates } => {
                write!(f, "certificate \"{subject}\": chain longer than {max_intermediates} intermediates")
            }
            CertReqLength(n) => {
                write!(f, "CERTREQ authority field of {n} bytes is not a list of SHA-1 hashes")
            }
            Crypto { subject, error } => write!(f, "certificate \"{subject}\": {error}"),
        }
    }
}

impl std::error::Error for CertError {}
