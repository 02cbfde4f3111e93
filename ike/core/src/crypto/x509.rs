//! What X.509 certificates need from ocf: a certificate's (or CRL's) signature checked
//! with the algorithm its `signatureAlgorithm` names, and the SHA-1 hash of a public key
//! that CERTREQ payloads carry (RFC 7296 §3.7). The certificate itself is parsed by
//! [`crate::cert`]; this module sees only DER byte strings, so that every certificate
//! signature of a chain is an ocf request as AUTH signatures are.
//!
//! ```text
//!  signatureAlgorithm (RFC 5280 §4.1.1.2)        ocf
//!  sha256/384/512WithRSAEncryption, NULL|absent  RsaPkcs1 { hash }           (RFC 4055 §5)
//!  id-RSASSA-PSS, params:                        RsaPss { hash }             (RFC 4055 §3.1)
//!     hash SHA-256/384/512, MGF1 with the same hash, salt = hash length, trailer 1
//!  ecdsa-with-SHA256/384/512, absent             Ecdsa { curve of the key, hash, DER }
//!  id-Ed25519, absent                            Ed25519                     (RFC 8410)
//! ```
//!
//! PSS with another salt length or MGF hash is refused as unsupported: ocf's PSS (like
//! TLS 1.3's) takes the salt as long as the hash, what strongSwan's `pki` and openssl with
//! `rsa_pss_saltlen:digest` write.

use der::asn1::{AnyRef, ObjectIdentifier};
use der::{Decode, Sequence};
use ocf::{AsymAlg, AsymKey, Curve, DigestAlg, Framework, PublicKey, Request, SessionParams, SigEncoding};

use super::der::{spki_key_type, KeyType};
use super::error::CryptoError;
use super::ops;

/// An AlgorithmIdentifier (RFC 5280 §4.1.1.2), its parameters kept as they came.
#[derive(Sequence)]
struct AlgId<'a> {
    oid: ObjectIdentifier,
    params: Option<AnyRef<'a>>,
}

/// RSASSA-PSS-params (RFC 4055 §3.1); every field has a default (SHA-1, MGF1-SHA-1, 20, 1).
#[derive(Sequence)]
struct PssParams<'a> {
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT", optional = "true")]
    hash: Option<AlgId<'a>>,
    #[asn1(context_specific = "1", tag_mode = "EXPLICIT", optional = "true")]
    mgf: Option<AlgId<'a>>,
    #[asn1(context_specific = "2", tag_mode = "EXPLICIT", optional = "true")]
    salt_len: Option<u32>,
    #[asn1(context_specific = "3", tag_mode = "EXPLICIT", optional = "true")]
    trailer: Option<u32>,
}

const SHA256_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");
const SHA384_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.12");
const SHA512_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.13");
const RSA_PSS: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.10");
const MGF1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.8");
const ECDSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const ECDSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");
const ECDSA_SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.4");
const ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");
const SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");
const SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.2");
const SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.3");

/// True when an AlgorithmIdentifier's parameters are absent or NULL (RFC 4055 §2.1 allows
/// both for the SHA-2 hashes; RFC 5754 §3.2 asks for NULL with the RSA signatures).
fn absent_or_null(params: &Option<AnyRef<'_>>) -> bool {
    params.as_ref().is_none_or(|p| p.is_null())
}

/// The SHA-2 hash a hash AlgorithmIdentifier names.
fn sha2(alg: &AlgId<'_>) -> Option<DigestAlg> {
    if !absent_or_null(&alg.params) {
        return None;
    }
    match alg.oid {
        SHA256 => Some(DigestAlg::Sha256),
        SHA384 => Some(DigestAlg::Sha384),
        SHA512 => Some(DigestAlg::Sha512),
        _ => None,
    }
}

/// The hash of RSASSA-PSS parameters ocf can check: a SHA-2 hash, MGF1 with the same hash,
/// a salt as long as the hash, the trailer 0xbc.
fn pss_hash(params: Option<AnyRef<'_>>) -> Option<DigestAlg> {
    let params: PssParams<'_> = params?.decode_as().ok()?;
    let hash = sha2(params.hash.as_ref()?)?;
    let mgf = params.mgf?;
    let mgf_hash: AlgId<'_> = mgf.params?.decode_as().ok()?;
    let salt_ok = params.salt_len.map(|s| s as usize) == Some(hash.output_len());
    let trailer_ok = params.trailer.is_none_or(|t| t == 1);
    (mgf.oid == MGF1 && sha2(&mgf_hash) == Some(hash) && salt_ok && trailer_ok).then_some(hash)
}

/// ocf's algorithm for `algorithm_identifier` (DER, as in the certificate) with a key of
/// type `key`.
fn asym_alg(algorithm_identifier: &[u8], key: KeyType) -> Result<AsymAlg, CryptoError> {
    let alg = AlgId::from_der(algorithm_identifier).map_err(|_| CryptoError::UnknownSignatureAlgorithm)?;
    let rsa = |hash| match key {
        KeyType::Rsa => Ok(AsymAlg::RsaPkcs1 { hash }),
        _ => Err(CryptoError::SignatureKeyMismatch),
    };
    let ecdsa = |hash| match key {
        KeyType::EcP256 => Ok(AsymAlg::Ecdsa { curve: Curve::P256, hash, encoding: SigEncoding::Der }),
        KeyType::EcP384 => Ok(AsymAlg::Ecdsa { curve: Curve::P384, hash, encoding: SigEncoding::Der }),
        _ => Err(CryptoError::SignatureKeyMismatch),
    };
    let null = absent_or_null(&alg.params);
    let none = alg.params.is_none();
    match alg.oid {
        SHA256_RSA if null => rsa(DigestAlg::Sha256),
        SHA384_RSA if null => rsa(DigestAlg::Sha384),
        SHA512_RSA if null => rsa(DigestAlg::Sha512),
        RSA_PSS => {
            let hash = pss_hash(alg.params).ok_or(CryptoError::UnknownSignatureAlgorithm)?;
            match key {
                KeyType::Rsa => Ok(AsymAlg::RsaPss { hash }),
                _ => Err(CryptoError::SignatureKeyMismatch),
            }
        }
        ECDSA_SHA256 if none => ecdsa(DigestAlg::Sha256),
        ECDSA_SHA384 if none => ecdsa(DigestAlg::Sha384),
        ECDSA_SHA512 if none => ecdsa(DigestAlg::Sha512),
        ED25519 if none => match key {
            KeyType::Ed25519 => Ok(AsymAlg::Ed25519),
            _ => Err(CryptoError::SignatureKeyMismatch),
        },
        _ => Err(CryptoError::UnknownSignatureAlgorithm),
    }
}

/// Checks an X.509 signature through ocf: `algorithm_identifier` the DER
/// `signatureAlgorithm` of the signed object, `issuer_spki` the signer's DER
/// SubjectPublicKeyInfo, `signed` the DER bytes signed (a certificate's `tbsCertificate`),
/// `signature` the BIT STRING's octets.
pub fn verify_x509_signature(
    fw: &Framework,
    issuer_spki: &[u8],
    algorithm_identifier: &[u8],
    signed: &[u8],
    signature: &[u8],
) -> Result<(), CryptoError> {
    let alg = asym_alg(algorithm_identifier, spki_key_type(issuer_spki)?)?;
    if signature.is_empty() {
        return Err(CryptoError::BadSignature);
    }
    let params = SessionParams::asymmetric(alg, AsymKey::Public(PublicKey::spki(issuer_spki)));
    let session = ops::session(fw, &params)?;
    match ops::run(&session, Request::verify(signed, signature)) {
        Ok(_) => Ok(()),
        Err(ocf::Error::BadSignature | ocf::Error::BadInputLength { .. }) => Err(CryptoError::BadSignature),
        Err(e) => Err(CryptoError::Ocf(e)),
    }
}

/// The SHA-1 hash of a DER SubjectPublicKeyInfo: a CA's entry in a CERTREQ payload's
/// Certification Authority field (RFC 7296 §3.7), through ocf's digest.
pub fn spki_sha1(fw: &Framework, spki: &[u8]) -> Result<[u8; 20], CryptoError> {
    let d = ops::digest(fw, DigestAlg::Sha1, spki)?;
    d.as_slice().try_into().map_err(|_| CryptoError::KeyLength {
        what: "SHA-1 digest",
        got: d.len(),
        expected: 20,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // The RSASSA-PSS AlgorithmIdentifier of RFC 7427 A.4.3 (SHA-256, MGF1-SHA-256, salt 32)
    // is the one signature.rs writes; here as a certificate's signatureAlgorithm.
    #[test]
    fn pss_parameters_are_read() {
        let id = crate::crypto::SignatureScheme::RsaPssSha256.algorithm_identifier();
        assert_eq!(asym_alg(id, KeyType::Rsa), Ok(AsymAlg::RsaPss { hash: DigestAlg::Sha256 }));
        assert_eq!(asym_alg(id, KeyType::EcP256), Err(CryptoError::SignatureKeyMismatch));
        // Salt 20 instead of 32 (the last byte): refused, ocf's PSS takes salt = hash length.
        let mut salt20 = id.to_vec();
        *salt20.last_mut().unwrap() = 20;
        assert_eq!(asym_alg(&salt20, KeyType::Rsa), Err(CryptoError::UnknownSignatureAlgorithm));
        // PSS with every parameter at its default (SHA-1): refused.
        let defaults =
            [0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a, 0x30, 0x00];
        assert_eq!(asym_alg(&defaults, KeyType::Rsa), Err(CryptoError::UnknownSignatureAlgorithm));
    }

    #[test]
    fn rfc7427_identifiers_map_to_ocf() {
        use crate::crypto::SignatureScheme as S;
        let h = |s: S, k| asym_alg(s.algorithm_identifier(), k);
        assert_eq!(h(S::RsaPkcs1Sha384, KeyType::Rsa), Ok(AsymAlg::RsaPkcs1 { hash: DigestAlg::Sha384 }));
        assert_eq!(
            h(S::EcdsaSha384, KeyType::EcP384),
            Ok(AsymAlg::Ecdsa { curve: Curve::P384, hash: DigestAlg::Sha384, encoding: SigEncoding::Der })
        );
        assert_eq!(h(S::Ed25519, KeyType::Ed25519), Ok(AsymAlg::Ed25519));
        assert_eq!(h(S::Ed25519, KeyType::Rsa), Err(CryptoError::SignatureKeyMismatch));
        // sha1WithRSAEncryption: not offered.
        let sha1 = [0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05, 0x05, 0x00];
        assert_eq!(asym_alg(&sha1, KeyType::Rsa), Err(CryptoError::UnknownSignatureAlgorithm));
        for n in 0..16 {
            assert!(asym_alg(&sha1[..n], KeyType::Rsa).is_err());
        }
    }
}
