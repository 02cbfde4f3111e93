//! Signature AUTH against the openssl CLI: keys made by openssl, our signatures verified
//! by openssl and openssl's verified here, for RFC 4754's methods 9 and 10 and RFC 7427's
//! method 14 with each algorithm; the AlgorithmIdentifiers compared with the ones openssl
//! writes into certificates.

use ike_core::crypto::{verify_signature, AuthScheme, CryptoError, KeyType, SignatureScheme, SigningKey};
use ike_wire::ids::{AuthMethod, HashAlgorithm};

use crate::common::{fw, openssl, openssl_ok, TempDir};

/// A key made by openssl: its PEM file, PKCS#8 DER and SPKI DER.
struct Key {
    pem: String,
    pub_pem: String,
    pkcs8: Vec<u8>,
    spki: Vec<u8>,
}

fn key(dir: &TempDir, name: &str, genpkey: &[&str]) -> Key {
    let pem = dir.path(&format!("{name}.pem"));
    let pub_pem = dir.path(&format!("{name}.pub.pem"));
    openssl(&[&["genpkey", "-out", &pem][..], genpkey].concat());
    openssl(&["pkey", "-in", &pem, "-pubout", "-out", &pub_pem]);
    let pkcs8 = openssl(&["pkcs8", "-topk8", "-nocrypt", "-in", &pem, "-outform", "DER"]);
    let spki = openssl(&["pkey", "-in", &pem, "-pubout", "-outform", "DER"]);
    Key { pem, pub_pem, pkcs8, spki }
}

/// openssl's options for a scheme's digest and padding (`None`: Ed25519, signed raw).
fn dgst_opts(s: SignatureScheme) -> Option<Vec<&'static str>> {
    use SignatureScheme as S;
    Some(match s {
        S::RsaPkcs1Sha256 | S::EcdsaSha256 => vec!["-sha256"],
        S::RsaPkcs1Sha384 | S::EcdsaSha384 => vec!["-sha384"],
        S::RsaPkcs1Sha512 | S::EcdsaSha512 => vec!["-sha512"],
        S::RsaPssSha256 => {
            vec!["-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32"]
        }
        S::Ed25519 => return None,
    })
}

fn openssl_verifies(dir: &TempDir, k: &Key, s: SignatureScheme, data: &str, sig: &[u8]) -> bool {
    let sig_file = dir.path("sig.bin");
    std::fs::write(&sig_file, sig).unwrap();
    match dgst_opts(s) {
        Some(opts) => openssl_ok(
            &[&["dgst"][..], &opts, &["-verify", &k.pub_pem, "-signature", &sig_file, data]].concat(),
        ),
        None => openssl_ok(&[
            "pkeyutl", "-verify", "-pubin", "-inkey", &k.pub_pem, "-rawin", "-in", data, "-sigfile",
            &sig_file,
        ]),
    }
}

fn openssl_signs(k: &Key, s: SignatureScheme, data: &str) -> Vec<u8> {
    match dgst_opts(s) {
        Some(opts) => openssl(&[&["dgst"][..], &opts, &["-sign", &k.pem, data]].concat()),
        None => openssl(&["pkeyutl", "-sign", "-inkey", &k.pem, "-rawin", "-in", data]),
    }
}

/// DER Ecdsa-Sig-Value ↔ r ‖ s (RFC 4754's form), for `len`-byte integers.
fn der_to_raw(der: &[u8], len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 2 + usize::from(der[1] == 0x81);
    for _ in 0..2 {
        let n = usize::from(der[at + 1]);
        let int = &der[at + 2..at + 2 + n];
        let int = &int[int.len().saturating_sub(len)..];
        out.extend(std::iter::repeat_n(0, len - int.len()));
        out.extend_from_slice(int);
        at += 2 + n;
    }
    out
}

fn raw_to_der(raw: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    for half in raw.chunks(raw.len() / 2) {
        let trimmed: Vec<u8> = half.iter().copied().skip_while(|&b| b == 0).collect();
        let mut int = if trimmed.first().is_some_and(|&b| b & 0x80 != 0) { vec![0] } else { vec![] };
        int.extend(trimmed);
        body.extend([0x02, int.len() as u8]);
        body.extend(int);
    }
    let mut der = vec![0x30];
    if body.len() >= 0x80 {
        der.push(0x81);
    }
    der.push(body.len() as u8);
    der.extend(body);
    der
}

fn method14(s: SignatureScheme, sig: &[u8]) -> Vec<u8> {
    let id = s.algorithm_identifier();
    [&[id.len() as u8][..], id, sig].concat()
}

#[test]
fn method_14_against_openssl_both_ways() {
    use SignatureScheme as S;
    let fw = fw();
    let dir = TempDir::new("sig14");
    let rsa = key(&dir, "rsa", &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]);
    let p256 = key(&dir, "p256", &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]);
    let p384 = key(&dir, "p384", &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"]);
    let ed = key(&dir, "ed", &["-algorithm", "ED25519"]);
    let octets: Vec<u8> = (0..500u32).map(|i| (i * 11) as u8).collect();
    let data = dir.path("octets.bin");
    std::fs::write(&data, &octets).unwrap();
    let cases = [
        (&rsa, KeyType::Rsa, vec![S::RsaPkcs1Sha256, S::RsaPkcs1Sha384, S::RsaPkcs1Sha512, S::RsaPssSha256]),
        (&p256, KeyType::EcP256, vec![S::EcdsaSha256, S::EcdsaSha384, S::EcdsaSha512]),
        (&p384, KeyType::EcP384, vec![S::EcdsaSha384, S::EcdsaSha256]),
        (&ed, KeyType::Ed25519, vec![S::Ed25519]),
    ];
    for (k, kt, schemes) in cases {
        let signer = SigningKey::from_pkcs8(&k.pkcs8).unwrap();
        assert_eq!(signer.key_type(), kt);
        for s in schemes {
            let auth = signer.sign(&fw, AuthScheme::Digital(s), &octets).unwrap();
            let id = s.algorithm_identifier();
            assert_eq!((usize::from(auth[0]), &auth[1..1 + id.len()]), (id.len(), id), "{s:?}");
            assert!(
                openssl_verifies(&dir, k, s, &data, &auth[1 + id.len()..]),
                "{s:?}: openssl verifies ours"
            );
            verify_signature(&fw, &k.spki, AuthMethod::DIGITAL_SIGNATURE, &auth, &octets).unwrap();
            let theirs = openssl_signs(k, s, &data);
            verify_signature(&fw, &k.spki, AuthMethod::DIGITAL_SIGNATURE, &method14(s, &theirs), &octets)
                .unwrap_or_else(|e| panic!("{s:?}: openssl's signature: {e}"));
            let mut tampered = octets.clone();
            tampered[100] ^= 1;
            assert_eq!(
                verify_signature(&fw, &k.spki, AuthMethod::DIGITAL_SIGNATURE, &auth, &tampered),
                Err(CryptoError::BadSignature),
                "{s:?}"
            );
        }
    }
    // The wrong key for the algorithm, and identifiers no one defined.
    let ecdsa_auth = SigningKey::from_pkcs8(&p256.pkcs8)
        .unwrap()
        .sign(&fw, AuthScheme::Digital(S::EcdsaSha256), &octets)
        .unwrap();
    assert_eq!(
        verify_signature(&fw, &rsa.spki, AuthMethod::DIGITAL_SIGNATURE, &ecdsa_auth, &octets),
        Err(CryptoError::SignatureKeyMismatch)
    );
    assert_eq!(
        verify_signature(&fw, &p384.spki, AuthMethod::DIGITAL_SIGNATURE, &ecdsa_auth, &octets),
        Err(CryptoError::BadSignature),
        "ecdsa-with-SHA256 on the other curve's key: a signature that does not verify"
    );
    let mut unknown = ecdsa_auth.clone();
    unknown[12] ^= 0x40; // ecdsa-with-SHA256 (…03 02) becomes …03 42, which no one defined
    assert_eq!(
        verify_signature(&fw, &p256.spki, AuthMethod::DIGITAL_SIGNATURE, &unknown, &octets),
        Err(CryptoError::UnknownSignatureAlgorithm)
    );
    for short in [&[][..], &[40u8, 1, 2][..], &ecdsa_auth[..13]] {
        assert!(matches!(
            verify_signature(&fw, &p256.spki, AuthMethod::DIGITAL_SIGNATURE, short, &octets),
            Err(CryptoError::AuthDataMalformed(_))
        ));
    }
    assert_eq!(
        SigningKey::from_pkcs8(&rsa.pkcs8).unwrap().sign(&fw, AuthScheme::Digital(S::EcdsaSha256), &octets),
        Err(CryptoError::SignatureKeyMismatch)
    );
}

/// RFC 4754: methods 9 and 10 carry r ‖ s, 64 and 96 bytes.
#[test]
fn methods_9_and_10_against_openssl_both_ways() {
    let fw = fw();
    let dir = TempDir::new("sig4754");
    let octets = b"RealMessage | Nonce | prf(SK_p, ID')".to_vec();
    let data = dir.path("octets.bin");
    std::fs::write(&data, &octets).unwrap();
    let cases = [
        (
            "P-256",
            AuthScheme::EcdsaSha256P256,
            AuthMethod::ECDSA_SHA256_P256,
            SignatureScheme::EcdsaSha256,
            32,
        ),
        (
            "P-384",
            AuthScheme::EcdsaSha384P384,
            AuthMethod::ECDSA_SHA384_P384,
            SignatureScheme::EcdsaSha384,
            48,
        ),
    ];
    for (curve, scheme, method, as_14, len) in cases {
        let k = key(&dir, curve, &["-algorithm", "EC", "-pkeyopt", &format!("ec_paramgen_curve:{curve}")]);
        let signer = SigningKey::from_pkcs8(&k.pkcs8).unwrap();
        assert_eq!(scheme.method(), method);
        let auth = signer.sign(&fw, scheme, &octets).unwrap();
        assert_eq!(auth.len(), 2 * len, "{curve}: r ‖ s");
        assert!(
            openssl_verifies(&dir, &k, as_14, &data, &raw_to_der(&auth)),
            "{curve}: openssl verifies ours"
        );
        verify_signature(&fw, &k.spki, method, &auth, &octets).unwrap();
        let theirs = der_to_raw(&openssl_signs(&k, as_14, &data), len);
        verify_signature(&fw, &k.spki, method, &theirs, &octets).unwrap();
        assert_eq!(
            verify_signature(&fw, &k.spki, method, &theirs[1..], &octets),
            Err(CryptoError::BadSignature)
        );
    }
    let rsa = key(&dir, "rsa", &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]);
    assert_eq!(
        verify_signature(&fw, &rsa.spki, AuthMethod::RSA_SIG, &[1; 256], &octets),
        Err(CryptoError::UnsupportedAuthMethod(AuthMethod::RSA_SIG))
    );
}

/// Our AlgorithmIdentifiers are byte for byte those openssl writes as a certificate's
/// signatureAlgorithm (an independent DER encoder of RFC 4055 / RFC 5758 / RFC 8410).
#[test]
fn algorithm_identifiers_match_openssl_certificates() {
    use SignatureScheme as S;
    let dir = TempDir::new("algid");
    let rsa = key(&dir, "rsa", &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]);
    let ec = key(&dir, "ec", &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]);
    let ed = key(&dir, "ed", &["-algorithm", "ED25519"]);
    for s in SignatureScheme::ALL {
        let k = match s {
            S::RsaPkcs1Sha256 | S::RsaPkcs1Sha384 | S::RsaPkcs1Sha512 | S::RsaPssSha256 => &rsa,
            S::EcdsaSha256 | S::EcdsaSha384 | S::EcdsaSha512 => &ec,
            S::Ed25519 => &ed,
        };
        let opts = dgst_opts(s).unwrap_or_default();
        let cert = openssl(
            &[
                &["req", "-x509", "-new", "-key", &k.pem, "-subj", "/CN=t", "-days", "1", "-outform", "DER"]
                    [..],
                &opts,
            ]
            .concat(),
        );
        let id = s.algorithm_identifier();
        assert!(cert.windows(id.len()).any(|w| w == id), "{s:?}: not in openssl's certificate");
        assert_eq!(SignatureScheme::from_algorithm_identifier(id), Some(s));
    }
}

#[test]
fn the_scheme_follows_the_key_and_the_peers_hashes() {
    use SignatureScheme as S;
    let dir = TempDir::new("choose");
    let rsa = SigningKey::from_pkcs8(&key(&dir, "rsa", &["-algorithm", "RSA"]).pkcs8).unwrap();
    let p384 = SigningKey::from_pkcs8(
        &key(&dir, "p384", &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"]).pkcs8,
    )
    .unwrap();
    let all = [HashAlgorithm::SHA2_256, HashAlgorithm::SHA2_384, HashAlgorithm::SHA2_512];
    assert_eq!(rsa.choose_scheme(&all), Ok(AuthScheme::Digital(S::RsaPkcs1Sha256)));
    assert_eq!(rsa.choose_scheme(&[HashAlgorithm::SHA2_512]), Ok(AuthScheme::Digital(S::RsaPkcs1Sha512)));
    assert_eq!(rsa.choose_scheme(&[]), Err(CryptoError::UnsupportedAuthMethod(AuthMethod::RSA_SIG)));
    assert_eq!(p384.choose_scheme(&all), Ok(AuthScheme::Digital(S::EcdsaSha384)));
    assert_eq!(p384.choose_scheme(&[]), Ok(AuthScheme::EcdsaSha384P384));
    assert!(matches!(
        SigningKey::from_pkcs8(&[0x30, 0x03, 0x02, 0x01, 0x00]),
        Err(CryptoError::UnsupportedKey(_))
    ));
}
