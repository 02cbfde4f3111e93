//! Signature authentication (RFC 7296 §2.15 and §3.8): our AUTH data signed, a peer's
//! checked against its public key, every signature an ocf asymmetric session.
//!
//! ```text
//!  method  9  ECDSA with SHA-256 on P-256     AUTH data = r ‖ s (RFC 4754 §7, 64 bytes)
//!  method 10  ECDSA with SHA-384 on P-384     AUTH data = r ‖ s (96 bytes)
//!  method 14  Digital Signature (RFC 7427)    AUTH data = len (1) ‖ AlgorithmIdentifier ‖ signature
//!             sha256/384/512WithRSAEncryption      PKCS#1 v1.5
//!             RSASSA-PSS, SHA-256, MGF1-SHA-256, salt 32
//!             ecdsa-with-SHA256/384/512            DER Ecdsa-Sig-Value (RFC 7427 §3)
//!             Ed25519 (RFC 8420)
//! ```
//!
//! Method 1 (RSA with SHA-1) is not offered: ocf signs no SHA-1, and RFC 8247 §3.2 moves
//! RSA signatures to method 14. The key's type comes from its AlgorithmIdentifier
//! ([`super::der`]): an RSA scheme with an EC key, or ECDSA with the other curve's key, is
//! [`CryptoError::SignatureKeyMismatch`].

use ike_wire::ids::{AuthMethod, HashAlgorithm};
use ocf::{
    AsymAlg, AsymKey, Curve, DigestAlg, Framework, Op, PrivateKey, PublicKey, Request, SessionParams,
    SigEncoding,
};

use super::der::{pkcs8_key_type, spki_key_type, KeyType};
use super::error::CryptoError;
use super::ops;

/// A signature algorithm of RFC 7427 (method 14).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SignatureScheme {
    RsaPkcs1Sha256,
    RsaPkcs1Sha384,
    RsaPkcs1Sha512,
    /// RSASSA-PSS with SHA-256, MGF1 with SHA-256, a 32-byte salt.
    RsaPssSha256,
    EcdsaSha256,
    EcdsaSha384,
    EcdsaSha512,
    Ed25519,
}

// The AlgorithmIdentifiers, DER. The PKCS#1 v1.5 and ECDSA ones are copied from RFC 7427
// Appendix A (A.1.2-A.1.4 sha*WithRSAEncryption, A.3.2-A.3.4 ecdsa-with-sha*); the
// RSASSA-PSS one is RFC 7427 A.4.3's "RSASSA-PSS with SHA-256" (hash SHA-256, MGF1 with
// SHA-256, salt length 32, the trailer field left at its default), checked against
// openssl's encoding in the tests; Ed25519's is RFC 8420 §2 (RFC 8410's id-Ed25519).
const ALG_RSA_SHA256: &[u8] =
    &[0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b, 0x05, 0x00];
const ALG_RSA_SHA384: &[u8] =
    &[0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c, 0x05, 0x00];
const ALG_RSA_SHA512: &[u8] =
    &[0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d, 0x05, 0x00];
const ALG_ECDSA_SHA256: &[u8] = &[0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const ALG_ECDSA_SHA384: &[u8] = &[0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];
const ALG_ECDSA_SHA512: &[u8] = &[0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x04];
const ALG_RSA_PSS_SHA256: &[u8] = &[
    0x30, 0x41, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a, 0x30, 0x34, 0xa0, 0x0f,
    0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0xa1, 0x1c,
    0x30, 0x1a, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x08, 0x30, 0x0d, 0x06, 0x09,
    0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0xa2, 0x03, 0x02, 0x01, 0x20,
];
const ALG_ED25519: &[u8] = &[0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70];

impl SignatureScheme {
    pub const ALL: [SignatureScheme; 8] = [
        SignatureScheme::RsaPkcs1Sha256,
        SignatureScheme::RsaPkcs1Sha384,
        SignatureScheme::RsaPkcs1Sha512,
        SignatureScheme::RsaPssSha256,
        SignatureScheme::EcdsaSha256,
        SignatureScheme::EcdsaSha384,
        SignatureScheme::EcdsaSha512,
        SignatureScheme::Ed25519,
    ];

    /// The DER AlgorithmIdentifier written in the AUTH data.
    pub fn algorithm_identifier(self) -> &'static [u8] {
        match self {
            SignatureScheme::RsaPkcs1Sha256 => ALG_RSA_SHA256,
            SignatureScheme::RsaPkcs1Sha384 => ALG_RSA_SHA384,
            SignatureScheme::RsaPkcs1Sha512 => ALG_RSA_SHA512,
            SignatureScheme::RsaPssSha256 => ALG_RSA_PSS_SHA256,
            SignatureScheme::EcdsaSha256 => ALG_ECDSA_SHA256,
            SignatureScheme::EcdsaSha384 => ALG_ECDSA_SHA384,
            SignatureScheme::EcdsaSha512 => ALG_ECDSA_SHA512,
            SignatureScheme::Ed25519 => ALG_ED25519,
        }
    }

    /// The scheme an AlgorithmIdentifier names, compared byte for byte.
    pub fn from_algorithm_identifier(der: &[u8]) -> Option<SignatureScheme> {
        SignatureScheme::ALL.into_iter().find(|s| s.algorithm_identifier() == der)
    }

    /// The hash of RFC 7427's SIGNATURE_HASH_ALGORITHMS notify this scheme needs the peer
    /// to have announced (IDENTITY for Ed25519, RFC 8420 §2).
    pub fn hash(self) -> HashAlgorithm {
        match self {
            SignatureScheme::RsaPkcs1Sha256
            | SignatureScheme::RsaPssSha256
            | SignatureScheme::EcdsaSha256 => HashAlgorithm::SHA2_256,
            SignatureScheme::RsaPkcs1Sha384 | SignatureScheme::EcdsaSha384 => HashAlgorithm::SHA2_384,
            SignatureScheme::RsaPkcs1Sha512 | SignatureScheme::EcdsaSha512 => HashAlgorithm::SHA2_512,
            SignatureScheme::Ed25519 => HashAlgorithm::IDENTITY,
        }
    }
}

/// How an AUTH payload is signed: its method, and for method 14 the algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthScheme {
    /// Method 9 (RFC 4754).
    EcdsaSha256P256,
    /// Method 10 (RFC 4754).
    EcdsaSha384P384,
    /// Method 14 (RFC 7427).
    Digital(SignatureScheme),
}

impl AuthScheme {
    /// The AUTH payload's Auth Method.
    pub fn method(self) -> AuthMethod {
        match self {
            AuthScheme::EcdsaSha256P256 => AuthMethod::ECDSA_SHA256_P256,
            AuthScheme::EcdsaSha384P384 => AuthMethod::ECDSA_SHA384_P384,
            AuthScheme::Digital(_) => AuthMethod::DIGITAL_SIGNATURE,
        }
    }
}

/// ocf's algorithm for `scheme` with a key of `key`'s type.
fn asym_alg(scheme: AuthScheme, key: KeyType) -> Result<AsymAlg, CryptoError> {
    use SignatureScheme as S;
    let curve = |key| match key {
        KeyType::EcP256 => Ok(Curve::P256),
        KeyType::EcP384 => Ok(Curve::P384),
        _ => Err(CryptoError::SignatureKeyMismatch),
    };
    let ecdsa = |hash, encoding| Ok(AsymAlg::Ecdsa { curve: curve(key)?, hash, encoding });
    let rsa = |alg| if key == KeyType::Rsa { Ok(alg) } else { Err(CryptoError::SignatureKeyMismatch) };
    match scheme {
        AuthScheme::EcdsaSha256P256 if key == KeyType::EcP256 => ecdsa(DigestAlg::Sha256, SigEncoding::P1363),
        AuthScheme::EcdsaSha384P384 if key == KeyType::EcP384 => ecdsa(DigestAlg::Sha384, SigEncoding::P1363),
        AuthScheme::EcdsaSha256P256 | AuthScheme::EcdsaSha384P384 => Err(CryptoError::SignatureKeyMismatch),
        AuthScheme::Digital(s) => match s {
            S::RsaPkcs1Sha256 => rsa(AsymAlg::RsaPkcs1 { hash: DigestAlg::Sha256 }),
            S::RsaPkcs1Sha384 => rsa(AsymAlg::RsaPkcs1 { hash: DigestAlg::Sha384 }),
            S::RsaPkcs1Sha512 => rsa(AsymAlg::RsaPkcs1 { hash: DigestAlg::Sha512 }),
            S::RsaPssSha256 => rsa(AsymAlg::RsaPss { hash: DigestAlg::Sha256 }),
            S::EcdsaSha256 => ecdsa(DigestAlg::Sha256, SigEncoding::Der),
            S::EcdsaSha384 => ecdsa(DigestAlg::Sha384, SigEncoding::Der),
            S::EcdsaSha512 => ecdsa(DigestAlg::Sha512, SigEncoding::Der),
            S::Ed25519 if key == KeyType::Ed25519 => Ok(AsymAlg::Ed25519),
            S::Ed25519 => Err(CryptoError::SignatureKeyMismatch),
        },
    }
}

/// Our private key for AUTH: PKCS#8 DER, wiped when dropped (ocf's `PrivateKey`).
#[derive(Clone, Debug)]
pub struct SigningKey {
    key: PrivateKey,
    key_type: KeyType,
}

impl SigningKey {
    /// A key from its PKCS#8 DER (what `openssl genpkey` and strongSwan's `pki --gen`
    /// write, once PEM is removed).
    pub fn from_pkcs8(der: &[u8]) -> Result<SigningKey, CryptoError> {
        Ok(SigningKey { key_type: pkcs8_key_type(der)?, key: PrivateKey::pkcs8(der) })
    }

    pub fn key_type(&self) -> KeyType {
        self.key_type
    }

    /// The scheme to sign with, given the hashes the peer announced in
    /// SIGNATURE_HASH_ALGORITHMS (empty if it sent none): method 14 with the key's
    /// preferred hash the peer takes, else methods 9/10 for an EC key on their curve.
    /// RSA without RFC 7427 would need method 1 (SHA-1), which is not offered.
    pub fn choose_scheme(&self, peer_hashes: &[HashAlgorithm]) -> Result<AuthScheme, CryptoError> {
        use SignatureScheme as S;
        let prefs: &[S] = match self.key_type {
            KeyType::Rsa => &[S::RsaPkcs1Sha256, S::RsaPkcs1Sha384, S::RsaPkcs1Sha512],
            KeyType::EcP256 => &[S::EcdsaSha256, S::EcdsaSha384, S::EcdsaSha512],
            KeyType::EcP384 => &[S::EcdsaSha384, S::EcdsaSha256, S::EcdsaSha512],
            KeyType::Ed25519 => &[S::Ed25519],
        };
        if let Some(s) = prefs.iter().find(|s| peer_hashes.contains(&s.hash())) {
            return Ok(AuthScheme::Digital(*s));
        }
        match self.key_type {
            KeyType::EcP256 => Ok(AuthScheme::EcdsaSha256P256),
            KeyType::EcP384 => Ok(AuthScheme::EcdsaSha384P384),
            KeyType::Rsa => Err(CryptoError::UnsupportedAuthMethod(AuthMethod::RSA_SIG)),
            KeyType::Ed25519 => Err(CryptoError::UnsupportedAuthMethod(AuthMethod::DIGITAL_SIGNATURE)),
        }
    }

    /// The AUTH payload's Authentication Data for `signed_octets`
    /// ([`super::auth::signed_octets`]) signed with `scheme`; the payload's Auth Method is
    /// `scheme.method()`.
    pub fn sign(
        &self,
        fw: &Framework,
        scheme: AuthScheme,
        signed_octets: &[u8],
    ) -> Result<Vec<u8>, CryptoError> {
        let alg = asym_alg(scheme, self.key_type)?;
        let session = ops::session(fw, &SessionParams::asymmetric(alg, AsymKey::Private(self.key.clone())))?;
        let room = alg.max_output_len(session.params().key_bits());
        let sig = ops::asym(&session, Op::Sign, signed_octets, room)?;
        Ok(match scheme {
            AuthScheme::Digital(s) => {
                let id = s.algorithm_identifier();
                let mut data = Vec::with_capacity(1 + id.len() + sig.len());
                data.push(id.len() as u8);
                data.extend_from_slice(id);
                data.extend_from_slice(&sig);
                data
            }
            AuthScheme::EcdsaSha256P256 | AuthScheme::EcdsaSha384P384 => sig.to_vec(),
        })
    }
}

/// Checks a peer's signature AUTH: `method` and `auth_data` from its AUTH payload,
/// `signed_octets` as [`super::auth::signed_octets`] builds them for the peer, `spki` the
/// peer's public key (DER SubjectPublicKeyInfo, from its certificate).
pub fn verify_signature(
    fw: &Framework,
    spki: &[u8],
    method: AuthMethod,
    auth_data: &[u8],
    signed_octets: &[u8],
) -> Result<(), CryptoError> {
    let key_type = spki_key_type(spki)?;
    let (scheme, sig) = match method {
        AuthMethod::ECDSA_SHA256_P256 => (AuthScheme::EcdsaSha256P256, auth_data),
        AuthMethod::ECDSA_SHA384_P384 => (AuthScheme::EcdsaSha384P384, auth_data),
        AuthMethod::DIGITAL_SIGNATURE => {
            let (&len, rest) = auth_data.split_first().ok_or(CryptoError::AuthDataMalformed("empty"))?;
            let len = usize::from(len);
            if rest.len() < len {
                return Err(CryptoError::AuthDataMalformed("AlgorithmIdentifier longer than the data"));
            }
            let (id, sig) = rest.split_at(len);
            let s = SignatureScheme::from_algorithm_identifier(id)
                .ok_or(CryptoError::UnknownSignatureAlgorithm)?;
            (AuthScheme::Digital(s), sig)
        }
        m => return Err(CryptoError::UnsupportedAuthMethod(m)),
    };
    if sig.is_empty() {
        return Err(CryptoError::AuthDataMalformed("no signature"));
    }
    let alg = asym_alg(scheme, key_type)?;
    let session = ops::session(fw, &SessionParams::asymmetric(alg, AsymKey::Public(PublicKey::spki(spki))))?;
    match ops::run(&session, Request::verify(signed_octets, sig)) {
        Ok(_) => Ok(()),
        Err(ocf::Error::BadSignature | ocf::Error::BadInputLength { .. }) => Err(CryptoError::BadSignature),
        Err(e) => Err(CryptoError::Ocf(e)),
    }
}
