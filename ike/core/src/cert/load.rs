//! Certificates and private keys from the bytes of their files (the daemon reads them):
//! PEM (RFC 7468, several blocks in one file) or DER.
//!
//! ```text
//!  certificates  "CERTIFICATE" blocks, or one DER certificate ─▶ Vec<Certificate>
//!  private key   "PRIVATE KEY"      PKCS#8 (RFC 5958)          ─▶ SigningKey
//!                "EC PRIVATE KEY"   SEC1 (RFC 5915) ─ wrapped in PKCS#8 ─┘
//!                "RSA PRIVATE KEY"  PKCS#1 (RFC 8017) ─ wrapped in PKCS#8 ─┘
//!                "ENCRYPTED PRIVATE KEY", legacy encrypted PEM: refused, naming the form
//!                DER: PKCS#8, SEC1 or PKCS#1, told apart by their first fields
//! ```
//!
//! Key bytes are held in `Zeroizing` buffers from the PEM decoding to ocf's `PrivateKey`.

use der::asn1::{BitStringRef, ObjectIdentifier, OctetStringRef};
use der::{Decode, Sequence};
use zeroize::Zeroizing;

use super::encode::{tlv, tlv_len};
use super::error::CertError;
use super::parsed::Certificate;
use crate::crypto::SigningKey;

const PKCS8_FORM: &str = "an unencrypted PKCS#8 \"PRIVATE KEY\" (openssl pkcs8 -topk8 -nocrypt)";

/// One PEM block: its label and its bytes (wiped when dropped: it may be a key).
type PemBlock = (String, Zeroizing<Vec<u8>>);

/// Every PEM block in `input`, text around them skipped.
fn pem_blocks(input: &[u8]) -> Result<Vec<PemBlock>, CertError> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    const END: &[u8] = b"-----END ";
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let mut blocks = Vec::new();
    let mut rest = input;
    while let Some(start) = find(rest, BEGIN) {
        let block = &rest[start..];
        let end = find(block, END).ok_or_else(|| CertError::Pem("a BEGIN line without its END".into()))?;
        let after_end = &block[end + END.len()..];
        let close =
            find(after_end, b"-----").ok_or_else(|| CertError::Pem("an unterminated END line".into()))?;
        let len = end + END.len() + close + 5;
        let (label, data) = der::pem::decode_vec(&block[..len]).map_err(|e| CertError::Pem(e.to_string()))?;
        blocks.push((label.to_string(), Zeroizing::new(data)));
        rest = &block[len..];
    }
    Ok(blocks)
}

fn is_pem(input: &[u8]) -> bool {
    input.windows(11).any(|w| w == b"-----BEGIN ")
}

/// Every certificate in `input`: PEM "CERTIFICATE" blocks (other text around them is
/// skipped), or one DER certificate.
pub fn load_certificates(input: &[u8]) -> Result<Vec<Certificate>, CertError> {
    if !is_pem(input) {
        if input.first() != Some(&0x30) {
            return Err(CertError::NoCertificate);
        }
        return Ok(vec![Certificate::from_der(input)?]);
    }
    let mut certs = Vec::new();
    for (label, der) in pem_blocks(input)? {
        if label != "CERTIFICATE" {
            return Err(CertError::PemLabel { expected: "CERTIFICATE", found: label });
        }
        certs.push(Certificate::from_der(&der)?);
    }
    if certs.is_empty() {
        return Err(CertError::NoCertificate);
    }
    Ok(certs)
}

/// ECPrivateKey (RFC 5915 §3).
#[derive(Sequence)]
struct EcPrivateKey<'a> {
    version: u8,
    private_key: &'a OctetStringRef,
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT", optional = "true")]
    parameters: Option<ObjectIdentifier>,
    // Parsed so that the whole structure is checked; the PKCS#8 wrapping keeps it.
    #[allow(dead_code)]
    #[asn1(context_specific = "1", tag_mode = "EXPLICIT", optional = "true")]
    public_key: Option<BitStringRef<'a>>,
}

const EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const RSA_ENCRYPTION: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");

/// PrivateKeyInfo { version 0, AlgorithmIdentifier { `alg`, `params` }, OCTET STRING `key` }.
fn wrap_pkcs8(alg: ObjectIdentifier, params: &[u8], key: &[u8]) -> Zeroizing<Vec<u8>> {
    let mut alg_id = Vec::new();
    tlv(&mut alg_id, 0x06, alg.as_bytes());
    alg_id.extend_from_slice(params);
    let body_len = 3 + tlv_len(alg_id.len()) + tlv_len(key.len());
    // Sized once, so that the key is never left behind in a reallocated buffer.
    let mut body = Zeroizing::new(Vec::with_capacity(body_len));
    body.extend_from_slice(&[0x02, 0x01, 0x00]);
    tlv(&mut body, 0x30, &alg_id);
    tlv(&mut body, 0x04, key);
    let mut out = Zeroizing::new(Vec::with_capacity(tlv_len(body.len())));
    tlv(&mut out, 0x30, &body);
    out
}

/// A SEC1 EC key as PKCS#8 (its curve from its parameters).
fn sec1_to_pkcs8(der: &[u8]) -> Result<Zeroizing<Vec<u8>>, CertError> {
    let key = EcPrivateKey::from_der(der).map_err(|_| CertError::KeyMalformed("not a SEC1 ECPrivateKey"))?;
    if key.version != 1 || key.private_key.as_bytes().is_empty() {
        return Err(CertError::KeyMalformed("not a SEC1 ECPrivateKey"));
    }
    let curve = key.parameters.ok_or(CertError::KeyMalformed("an EC PRIVATE KEY without its curve"))?;
    let mut params = Vec::new();
    tlv(&mut params, 0x06, curve.as_bytes());
    Ok(wrap_pkcs8(EC_PUBLIC_KEY, &params, der))
}

/// A PKCS#1 RSAPrivateKey as PKCS#8.
fn pkcs1_to_pkcs8(der: &[u8]) -> Zeroizing<Vec<u8>> {
    wrap_pkcs8(RSA_ENCRYPTION, &[0x05, 0x00], der)
}

/// The second field of a DER SEQUENCE's content when the first is INTEGER `version`:
/// its tag. Tells PKCS#8 (0, SEQUENCE), SEC1 (1, OCTET STRING) and PKCS#1 (0, INTEGER)
/// apart.
fn shape(der: &[u8]) -> Option<(u8, u8)> {
    let (body, _) = crate::crypto::der_tlv(der, 0x30)?;
    let (version, rest) = crate::crypto::der_tlv(body, 0x02)?;
    Some((*version.first()?, *rest.first()?))
}

fn signing_key(pkcs8: &[u8]) -> Result<SigningKey, CertError> {
    SigningKey::from_pkcs8(pkcs8)
        .map_err(|_| CertError::KeyMalformed("PKCS#8 of a key that is not RSA, P-256, P-384 or Ed25519"))
}

/// Our private key from its file's bytes (see the module doc for the forms).
pub fn load_private_key(input: &[u8]) -> Result<SigningKey, CertError> {
    if is_pem(input) {
        let blocks = pem_blocks(input).map_err(|e| match e {
            CertError::Pem(why) if input.windows(9).any(|w| w == b"ENCRYPTED") => {
                CertError::KeyForm { found: format!("encrypted PEM ({why})"), use_form: PKCS8_FORM }
            }
            e => e,
        })?;
        let Some((label, der)) = blocks.into_iter().next() else {
            return Err(CertError::KeyMalformed("no PEM block"));
        };
        return match label.as_str() {
            "PRIVATE KEY" => signing_key(&der),
            "EC PRIVATE KEY" => signing_key(&sec1_to_pkcs8(&der)?),
            "RSA PRIVATE KEY" => signing_key(&pkcs1_to_pkcs8(&der)),
            _ => Err(CertError::KeyForm { found: format!("\"{label}\""), use_form: PKCS8_FORM }),
        };
    }
    match shape(input) {
        Some((0, 0x30)) => signing_key(input),
        Some((1, 0x04)) => signing_key(&sec1_to_pkcs8(input)?),
        Some((0, 0x02)) => signing_key(&pkcs1_to_pkcs8(input)),
        _ => Err(CertError::KeyMalformed("neither PEM nor a DER PKCS#8, SEC1 or PKCS#1 key")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_errors_name_the_problem() {
        assert_eq!(load_certificates(b"hello"), Err(CertError::NoCertificate));
        assert!(matches!(load_certificates(b"-----BEGIN CERTIFICATE-----\nAAAA\n"), Err(CertError::Pem(_))));
        let key = b"-----BEGIN PUBLIC KEY-----\nMAA=\n-----END PUBLIC KEY-----\n";
        assert_eq!(
            load_certificates(key),
            Err(CertError::PemLabel { expected: "CERTIFICATE", found: "PUBLIC KEY".into() })
        );
        assert!(matches!(load_private_key(key), Err(CertError::KeyForm { .. })));
        let enc = b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMAA=\n-----END ENCRYPTED PRIVATE KEY-----\n";
        assert!(matches!(load_private_key(enc), Err(CertError::KeyForm { .. })));
        for n in 0..40 {
            assert!(load_private_key(&vec![0x30; n]).is_err());
        }
    }
}
