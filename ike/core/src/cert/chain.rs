//! Chain validation: from the peer's end-entity certificate, through the intermediates of
//! its CERT payloads, to one of the CA certificates the configuration trusts (RFC 5280 §6,
//! the parts IKE needs), every link's signature checked through ocf.
//!
//! ```text
//!  validate(fw, end_entity, intermediates, now)
//!   end entity: no unknown critical extension, valid at now, keyUsage digitalSignature
//!   loop:  issuers = trusted CAs, then unused intermediates, whose subject is the
//!                    certificate's issuer (dn_matches)             none: UnknownIssuer
//!          per issuer (depth first; the first refusal is reported if none leads to a CA):
//!            more intermediates than max_intermediates ?            ChainTooLong
//!            no unknown critical extension, valid at now            Expired, NotYetValid, …
//!            crypto::verify_x509_signature(issuer key, signature)   BadSignature, …
//!            basicConstraints cA                                    IssuerNotCa
//!            keyUsage keyCertSign (if keyUsage is there)            IssuerKeyUsage
//!            CAs below it ≤ pathLenConstraint                       PathLenExceeded
//!          a trusted CA ends the chain; an intermediate continues the loop
//! ```
//!
//! `now` is the caller's (Unix seconds): nothing here reads a clock. A trusted CA's own
//! signature is not checked (it is trusted as configured) but its validity, basic
//! constraints, key usage and path length are, as openssl does. DNs are compared as
//! strongSwan compares them. The number of signature checks one validation may make is
//! bounded (32; past it the search stops with `ChainTooLong`), so that a peer sending many
//! certificates with one subject cannot make the search exponential.

use super::dn::dn_text;
use super::error::CertError;
use super::parsed::Certificate;
use crate::crypto::{verify_x509_signature, CryptoError};

/// Intermediates allowed between an end entity and a trusted CA when not configured (as
/// openssl's `-verify_depth`, which counts the same way; strongSwan allows 7 links).
pub const DEFAULT_MAX_INTERMEDIATES: usize = 4;

/// Signature checks one validation may make.
const MAX_SIGNATURE_CHECKS: usize = 32;

/// The configured CA certificates and the chain limits.
#[derive(Clone, Debug)]
pub struct TrustStore {
    cas: Vec<Certificate>,
    max_intermediates: usize,
}

/// A chain that validated: the end entity first, the trusted CA last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidatedChain {
    certs: Vec<Certificate>,
}

impl ValidatedChain {
    /// The end-entity certificate.
    pub fn end_entity(&self) -> &Certificate {
        &self.certs[0]
    }

    /// The end entity's public key, DER SubjectPublicKeyInfo: what
    /// `crypto::verify_signature` takes to check the peer's AUTH payload.
    pub fn public_key(&self) -> &[u8] {
        self.certs[0].spki()
    }

    /// The trusted CA the chain ends at.
    pub fn anchor(&self) -> &Certificate {
        &self.certs[self.certs.len() - 1]
    }

    /// Every certificate, the end entity first, the trusted CA last.
    pub fn certificates(&self) -> &[Certificate] {
        &self.certs
    }
}

/// One validation's state: the path so far and the signature checks left.
struct Search<'a> {
    fw: &'a ocf::Framework,
    store: &'a TrustStore,
    intermediates: &'a [Certificate],
    now: u64,
    checks_left: usize,
}

fn check_time(cert: &Certificate, now: u64) -> Result<(), CertError> {
    let (not_before, not_after) = cert.validity();
    let subject = || cert.subject_text().to_string();
    if now < not_before {
        return Err(CertError::NotYetValid { subject: subject(), not_before, now });
    }
    if now > not_after {
        return Err(CertError::Expired { subject: subject(), not_after, now });
    }
    Ok(())
}

fn check_extensions(cert: &Certificate) -> Result<(), CertError> {
    match cert.unknown_critical_extension() {
        Some(oid) => Err(CertError::UnknownCriticalExtension {
            subject: cert.subject_text().to_string(),
            extension: oid.to_string(),
        }),
        None => Ok(()),
    }
}

impl TrustStore {
    /// A store trusting `cas`.
    pub fn new(cas: Vec<Certificate>) -> TrustStore {
        TrustStore { cas, max_intermediates: DEFAULT_MAX_INTERMEDIATES }
    }

    /// The same store allowing at most `n` intermediates in a chain.
    pub fn with_max_intermediates(mut self, n: usize) -> TrustStore {
        self.max_intermediates = n;
        self
    }

    /// The trusted CA certificates.
    pub fn cas(&self) -> &[Certificate] {
        &self.cas
    }

    /// Validates `end_entity` to a trusted CA through any of `intermediates` (in any order,
    /// unused ones ignored) at `now` (Unix seconds). See the module doc for the checks.
    pub fn validate(
        &self,
        fw: &ocf::Framework,
        end_entity: &Certificate,
        intermediates: &[Certificate],
        now: u64,
    ) -> Result<ValidatedChain, CertError> {
        check_extensions(end_entity)?;
        check_time(end_entity, now)?;
        if !end_entity.may_sign() {
            return Err(CertError::EndEntityKeyUsage { subject: end_entity.subject_text().to_string() });
        }
        let mut search = Search { fw, store: self, intermediates, now, checks_left: MAX_SIGNATURE_CHECKS };
        let mut path = vec![end_entity.clone()];
        search.extend(&mut path)?;
        Ok(ValidatedChain { certs: path })
    }
}

impl Search<'_> {
    /// Extends `path` (its last certificate not yet linked) to a trusted CA.
    fn extend(&mut self, path: &mut Vec<Certificate>) -> Result<(), CertError> {
        let cert = path[path.len() - 1].clone();
        let names_issuer = |c: &&Certificate| super::dn::dn_matches(c.subject(), cert.issuer());
        let anchors: Vec<&Certificate> = self.store.cas.iter().filter(names_issuer).collect();
        let inters: Vec<&Certificate> =
            self.intermediates.iter().filter(names_issuer).filter(|c| !path.contains(c)).collect();
        if anchors.is_empty() && inters.is_empty() {
            return Err(CertError::UnknownIssuer {
                subject: cert.subject_text().to_string(),
                issuer: dn_text(cert.issuer()),
            });
        }
        let mut first_err = None;
        for anchor in anchors {
            match self.link(&cert, anchor, path) {
                Ok(()) => {
                    path.push(anchor.clone());
                    return Ok(());
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        for inter in inters {
            // path holds the end entity and path.len() - 1 intermediates; this is one more.
            if path.len() > self.store.max_intermediates {
                first_err.get_or_insert(CertError::ChainTooLong {
                    subject: inter.subject_text().to_string(),
                    max_intermediates: self.store.max_intermediates,
                });
                continue;
            }
            let linked = self.link(&cert, inter, path).and_then(|()| {
                path.push(inter.clone());
                self.extend(path).inspect_err(|_| {
                    path.pop();
                })
            });
            match linked {
                Ok(()) => return Ok(()),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.expect("a candidate was tried"))
    }

    /// Checks that `issuer` may have issued `cert`, the last of `path`, and did.
    fn link(
        &mut self,
        cert: &Certificate,
        issuer: &Certificate,
        path: &[Certificate],
    ) -> Result<(), CertError> {
        let issuer_name = || issuer.subject_text().to_string();
        check_extensions(issuer)?;
        check_time(issuer, self.now)?;
        if self.checks_left == 0 {
            return Err(CertError::ChainTooLong {
                subject: cert.subject_text().to_string(),
                max_intermediates: self.store.max_intermediates,
            });
        }
        self.checks_left -= 1;
        let subject = cert.subject_text().to_string();
        verify_x509_signature(
            self.fw,
            issuer.spki(),
            cert.signature_algorithm(),
            cert.tbs(),
            cert.signature(),
        )
        .map_err(|error| match error {
            CryptoError::BadSignature => CertError::BadSignature { subject },
            CryptoError::UnknownSignatureAlgorithm => CertError::UnsupportedSignatureAlgorithm { subject },
            CryptoError::SignatureKeyMismatch | CryptoError::UnsupportedKey(_) => {
                CertError::UnsupportedKey { subject: issuer_name(), why: error.to_string() }
            }
            error => CertError::Crypto { subject, error },
        })?;
        if !issuer.is_ca() {
            return Err(CertError::IssuerNotCa { subject: issuer_name() });
        }
        if !issuer.may_sign_certificates() {
            return Err(CertError::IssuerKeyUsage { subject: issuer_name() });
        }
        if let Some(path_len) = issuer.path_len() {
            let below = path[1..].iter().filter(|c| !c.is_self_issued()).count();
            if below > usize::from(path_len) {
                return Err(CertError::PathLenExceeded { subject: issuer_name(), path_len, below });
            }
        }
        Ok(())
    }
}
