//! X.509 certificates for IKEv2 authentication (RFC 7296 §2.15 and §3.6-3.7, RFC 4945's
//! profile, RFC 7427 signatures): loading our own certificate and key, validating a
//! peer's chain to a configured CA, checking that it binds the peer's identity, and the
//! CERTREQ hashes. Sans I/O: bytes in (the daemon reads the files), the time passed in.
//!
//! # How IKE_AUTH uses it
//!
//! ```text
//!  configuration:  cas   = load_certificates(ca file bytes)      → TrustStore::new(cas)
//!                  ours  = load_certificates(our cert [+ intermediates])
//!                  key   = load_private_key(key file bytes)      → crypto::SigningKey
//!                  peer  = config::Identity::parse("C=CH, O=strongSwan, CN=moon")? (DN as DER)
//!  IKE_SA_INIT:    CERTREQ data = certreq_data(fw, &store)
//!  IKE_AUTH in:    ee = Certificate::from_der(first CERT), ints = the other CERTs
//!                  chain = store.validate(fw, &ee, &ints, now)?          (CertError)
//!                  Identity::from_payload(IDx).bound_by(&ee), and it matches the configured peer
//!                  crypto::verify_signature(fw, chain.public_key(), method, AUTH data, octets)
//!  IKE_AUTH out:   which = certreq_match(fw, peer's CERTREQ data, &ours)  → CERTs to send
//! ```
//!
//! # Crates, and why
//!
//! Parsing is RustCrypto's `x509-cert` (0.3, over `der` 0.8): strict DER, RFC 5280 types
//! for every extension we read, no crypto of its own, maintained with the other RustCrypto
//! formats crates. Path building is ours (`chain`, some 150 lines): IKE chains are an end
//! entity, a few intermediates from CERT payloads and a configured CA, and the issue
//! requires every signature through ocf. Measured here (a scratch crate per candidate,
//! `cargo build`, dev profile, two jobs, cold): `x509-cert` + `der` with derive, 17
//! packages, 6.8 s wall, 8.2 s CPU; `x509-parser` 0.18, 34 packages, 12.2 s, 18.5 s;
//! `rustls-webpki` 0.103 without a crypto provider, 23 packages, 1.3 s, 1.3 s. Build time
//! did not decide it; fit did:
//! - `rustls-webpki` builds paths and takes pluggable signature verifiers (ocf could be
//!   one), but it is TLS-centred: a subject name is a DNS name or an IP address (no DN, no
//!   e-mail), keyUsage is read only to check CRL signers (not keyCertSign, not
//!   digitalSignature), a trust anchor is reduced to its name and key (its validity and
//!   path length go unchecked), signature algorithms are matched as fixed byte strings,
//!   and its errors do not say which certificate of the chain failed.
//! - `x509-parser` (rusticata) parses as well, with nom, `asn1-rs` and `time`: twice the
//!   build for the same facts; its `verify` feature uses `ring`, not ocf.
//! - `x509-verify` verifies with RustCrypto's own signature crates, which would bypass ocf.
//!
//! # Module layout
//!
//! Each module uses only those on lower layers (named in brackets):
//!
//! ```text
//!   layer 3   certreq (chain, parsed)    load (parsed, encode)
//!   layer 2   chain (parsed, dn)
//!   layer 1   parsed (dn)
//!   layer 0   dn (encode)    encode    error (used by every module that can fail)
//!
//!   chain's signatures and certreq's hashes are crate::crypto calls (ocf requests);
//!   load makes a crypto::SigningKey.
//! ```

mod certreq;
mod chain;
mod dn;
mod encode;
mod error;
mod load;
mod parsed;

pub use certreq::{certreq_data, certreq_match, CA_HASH_LEN};
pub use chain::{TrustStore, ValidatedChain, DEFAULT_MAX_INTERMEDIATES};
pub use dn::{dn_matches, dn_text, parse_dn, DnError};
pub use error::CertError;
pub use load::{load_certificates, load_private_key};
pub use parsed::{AltName, Certificate};
