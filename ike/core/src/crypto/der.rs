//! Just enough DER to tell what kind of key a `SubjectPublicKeyInfo` or a PKCS#8
//! `PrivateKeyInfo` holds — RSA, EC P-256, EC P-384 or Ed25519 — from its
//! AlgorithmIdentifier (RFC 5280 §4.1.2.7, RFC 5958 §2), so that an AUTH signature is
//! made or checked with the algorithm the key needs. The key itself is parsed by ocf's
//! driver; certificates are parsed elsewhere.
//!
//! ```text
//!  SPKI   SEQUENCE { AlgorithmIdentifier, BIT STRING }
//!  PKCS#8 SEQUENCE { INTEGER version, AlgorithmIdentifier, OCTET STRING, … }
//!  AlgorithmIdentifier SEQUENCE { OID, parameters (the curve's OID for EC) }
//! ```
//!
//! Every function is total: a truncated or malformed encoding is an error, never a panic.

use super::error::CryptoError;

/// The kind of a public or private key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyType {
    Rsa,
    EcP256,
    EcP384,
    Ed25519,
}

const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const OID: u8 = 0x06;

/// One TLV of tag `tag` at the start of `der`: its content and what follows it. Definite
/// lengths of up to four octets only (DER).
pub(crate) fn tlv(der: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&t, rest) = der.split_first()?;
    if t != tag {
        return None;
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return None;
    }
    Some(rest.split_at(len))
}

/// The key type an AlgorithmIdentifier's content (after its SEQUENCE header) names.
fn key_type(alg_id: &[u8]) -> Result<KeyType, CryptoError> {
    let (oid, params) = tlv(alg_id, OID).ok_or(CryptoError::UnsupportedKey("no algorithm OID"))?;
    match oid {
        OID_RSA => Ok(KeyType::Rsa),
        OID_ED25519 => Ok(KeyType::Ed25519),
        OID_EC_PUBLIC_KEY => match tlv(params, OID) {
            Some((OID_P256, _)) => Ok(KeyType::EcP256),
            Some((OID_P384, _)) => Ok(KeyType::EcP384),
            _ => Err(CryptoError::UnsupportedKey("an EC key on a curve other than P-256 or P-384")),
        },
        _ => Err(CryptoError::UnsupportedKey("not an RSA, EC or Ed25519 key")),
    }
}

/// The type of the key in a DER `SubjectPublicKeyInfo`.
pub fn spki_key_type(spki: &[u8]) -> Result<KeyType, CryptoError> {
    let malformed = CryptoError::UnsupportedKey("the SubjectPublicKeyInfo does not parse");
    let (body, _) = tlv(spki, SEQUENCE).ok_or(malformed.clone())?;
    let (alg_id, _) = tlv(body, SEQUENCE).ok_or(malformed)?;
    key_type(alg_id)
}

/// The type of the key in a DER PKCS#8 `PrivateKeyInfo`.
pub fn pkcs8_key_type(der: &[u8]) -> Result<KeyType, CryptoError> {
    let malformed = CryptoError::UnsupportedKey("the PKCS#8 key does not parse");
    let (body, _) = tlv(der, SEQUENCE).ok_or(malformed.clone())?;
    let (_, rest) = tlv(body, INTEGER).ok_or(malformed.clone())?;
    let (alg_id, _) = tlv(rest, SEQUENCE).ok_or(malformed)?;
    key_type(alg_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_and_odd_encodings_are_errors() {
        assert_eq!(tlv(&[0x30, 0x82, 0x01], SEQUENCE), None);
        assert_eq!(tlv(&[0x30, 0x80], SEQUENCE), None);
        assert_eq!(tlv(&[0x30, 0x03, 0x01], SEQUENCE), None);
        assert_eq!(tlv(&[0x30, 0x01, 0x05, 0x09], SEQUENCE), Some((&[0x05][..], &[0x09][..])));
        for n in 0..20 {
            let junk = vec![0x30u8; n];
            assert!(spki_key_type(&junk).is_err());
            assert!(pkcs8_key_type(&junk).is_err());
        }
    }
}
