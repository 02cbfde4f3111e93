//! CERTREQ's Certification Authority field (RFC 7296 §3.7): the SHA-1 hashes of the
//! SubjectPublicKeyInfo of the CAs we trust, and, for one the peer sent, the CA of our own
//! chain it names, so that we send the certificates up to it.
//!
//! ```text
//!  ours:   certreq_data(fw, store)   = SHA-1(spki of CA 1) ‖ SHA-1(spki of CA 2) ‖ …
//!  theirs: certreq_match(fw, data, [ee, int…, ca]) = index of the first CA (from the
//!          end entity up) whose key hash is in data, or None
//! ```
//!
//! Every hash is an ocf digest ([`crate::crypto::spki_sha1`]).

use super::chain::TrustStore;
use super::error::CertError;
use super::parsed::Certificate;
use crate::crypto::{spki_sha1, CryptoError};

/// The length of one hash in the field.
pub const CA_HASH_LEN: usize = 20;

/// The Certification Authority field of our CERTREQ: one SHA-1 hash per trusted CA.
pub fn certreq_data(fw: &ocf::Framework, store: &TrustStore) -> Result<Vec<u8>, CryptoError> {
    let mut out = Vec::with_capacity(store.cas().len() * CA_HASH_LEN);
    for ca in store.cas() {
        out.extend_from_slice(&spki_sha1(fw, ca.spki())?);
    }
    Ok(out)
}

/// Which certificate of `chain` (ours: the end entity first) a received CERTREQ's
/// Certification Authority field names: the index of the first one after the end entity
/// whose key hash is in `data`. `None` if it names none of them (then we send our chain
/// anyway, RFC 7296 §3.7 lets us).
pub fn certreq_match(
    fw: &ocf::Framework,
    data: &[u8],
    chain: &[Certificate],
) -> Result<Option<usize>, CertError> {
    if data.len() % CA_HASH_LEN != 0 {
        return Err(CertError::CertReqLength(data.len()));
    }
    for (i, cert) in chain.iter().enumerate().skip(1) {
        let hash = spki_sha1(fw, cert.spki())
            .map_err(|error| CertError::Crypto { subject: cert.subject_text().to_string(), error })?;
        if data.chunks_exact(CA_HASH_LEN).any(|h| h == hash) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}
