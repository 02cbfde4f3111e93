//! Ed25519 (RFC 8032) and ECDSA over P-256 / P-384 (FIPS 186-5) signatures.
//!
//! aws-lc-rs signs and verifies: 4.6x libcrypto 3.0 for Ed25519 sign, 1.5x for ECDSA P-256
//! sign, 9x for P-384 (`tools/libbench`). It signs only the curve's own hash (P-256 with
//! SHA-256, P-384 with SHA-384); the other pairs ocf names (P-256 with SHA-384/512, P-384
//! with SHA-256/512) are signed by libcrypto over the digest, with a context per request.
//! Verification is aws-lc-rs for every pair.
//!
//! ```text
//!  Sign:   message ─▶ aws-lc-rs (own hash) or hash + libcrypto ─▶ DER ─▶ (P1363: r ‖ s) ─▶ out
//!  Verify: signature ─▶ (P1363: r ‖ s ─▶ DER) ─▶ aws-lc-rs ─▶ ok | BadSignature
//! ```
//!
//! The ECDSA nonce is drawn by the library from its own RNG (not deterministic, RFC 6979
//! is not used by either library); Ed25519 is deterministic.

use aws_lc_rs::agreement;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self as sig, EcdsaKeyPair, Ed25519KeyPair, KeyPair, ParsedPublicKey};
use ocf::asym::{PrivateFormat, PrivateKey, PublicKey};
use ocf::{AsymAlg, Curve, DigestAlg, Error, SigEncoding};
use openssl::bn::BigNum;
use openssl::ecdsa::EcdsaSig;
use openssl::hash::MessageDigest;
use openssl::md::{Md, MdRef};
use openssl::pkey::{PKey, Private};
use openssl::pkey_ctx::PkeyCtx;

use super::{bad_key, room};

/// What signs: an Ed25519 key, or an ECDSA key with its encoding.
pub(crate) enum Signer {
    Ed25519(Ed25519KeyPair),
    Ecdsa(EcdsaSigner),
}

pub(crate) struct EcdsaSigner {
    curve: Curve,
    encoding: SigEncoding,
    kp: EcdsaKeyPair,
    /// The key for libcrypto when the hash is not the curve's own (aws-lc-rs cannot sign it).
    other_hash: Option<(PKey<Private>, &'static MdRef, MessageDigest)>,
    rng: SystemRandom,
}

/// aws-lc-rs's signing algorithm for the curve (with the curve's own hash, DER).
fn own_signing(curve: Curve) -> &'static sig::EcdsaSigningAlgorithm {
    match curve {
        Curve::P256 => &sig::ECDSA_P256_SHA256_ASN1_SIGNING,
        Curve::P384 => &sig::ECDSA_P384_SHA384_ASN1_SIGNING,
    }
}

fn own_hash(curve: Curve) -> DigestAlg {
    match curve {
        Curve::P256 => DigestAlg::Sha256,
        Curve::P384 => DigestAlg::Sha384,
    }
}

/// aws-lc-rs's DER verification algorithm for the pair.
fn verification(curve: Curve, hash: DigestAlg) -> Option<&'static sig::EcdsaVerificationAlgorithm> {
    Some(match (curve, hash) {
        (Curve::P256, DigestAlg::Sha256) => &sig::ECDSA_P256_SHA256_ASN1,
        (Curve::P256, DigestAlg::Sha384) => &sig::ECDSA_P256_SHA384_ASN1,
        (Curve::P256, DigestAlg::Sha512) => &sig::ECDSA_P256_SHA512_ASN1,
        (Curve::P384, DigestAlg::Sha256) => &sig::ECDSA_P384_SHA256_ASN1,
        (Curve::P384, DigestAlg::Sha384) => &sig::ECDSA_P384_SHA384_ASN1,
        (Curve::P384, DigestAlg::Sha512) => &sig::ECDSA_P384_SHA512_ASN1,
        _ => return None,
    })
}

fn md(hash: DigestAlg) -> Option<(&'static MdRef, MessageDigest)> {
    Some(match hash {
        DigestAlg::Sha256 => (Md::sha256(), MessageDigest::sha256()),
        DigestAlg::Sha384 => (Md::sha384(), MessageDigest::sha384()),
        DigestAlg::Sha512 => (Md::sha512(), MessageDigest::sha512()),
        _ => return None,
    })
}

impl Signer {
    pub(crate) fn new(alg: AsymAlg, key: &PrivateKey) -> Result<Signer, Error> {
        match alg {
            AsymAlg::Ed25519 => Ok(Signer::Ed25519(match key.format() {
                PrivateFormat::Raw => Ed25519KeyPair::from_seed_unchecked(key.bytes())
                    .map_err(bad_key("the Ed25519 seed is not 32 bytes"))?,
                PrivateFormat::Pkcs8 => Ed25519KeyPair::from_pkcs8_maybe_unchecked(key.bytes())
                    .map_err(bad_key("the PKCS#8 key does not parse as Ed25519"))?,
            })),
            AsymAlg::Ecdsa { curve, hash, encoding } => {
                let signing = own_signing(curve);
                let kp = match key.format() {
                    PrivateFormat::Pkcs8 => EcdsaKeyPair::from_pkcs8(signing, key.bytes()).map_err(
                        bad_key("the PKCS#8 key does not parse, or is not on the session's curve"),
                    )?,
                    PrivateFormat::Raw => {
                        // aws-lc-rs builds an ECDSA key from the scalar and its point: the
                        // point comes from the same scalar as an ECDH key.
                        let ecdh = match curve {
                            Curve::P256 => &agreement::ECDH_P256,
                            Curve::P384 => &agreement::ECDH_P384,
                        };
                        let scalar = agreement::PrivateKey::from_private_key(ecdh, key.bytes())
                            .map_err(bad_key("the raw private key is not a valid scalar for the curve"))?;
                        let point = scalar.compute_public_key().map_err(|_| Error::BadKey {
                            why: "the public point cannot be computed from the scalar",
                        })?;
                        EcdsaKeyPair::from_private_key_and_public_key(signing, key.bytes(), point.as_ref())
                            .map_err(bad_key("the raw private key is not a valid scalar for the curve"))?
                    }
                };
                let other_hash = if hash == own_hash(curve) {
                    None
                } else {
                    let (md, digest) = md(hash).ok_or(Error::UnsupportedAsym(alg))?;
                    let der =
                        kp.to_pkcs8v1().map_err(|_| Error::DriverFailure("soft: PKCS#8 export failed"))?;
                    let pkey = PKey::private_key_from_pkcs8(der.as_ref())
                        .map_err(|_| Error::DriverFailure("soft: libcrypto refused aws-lc-rs's PKCS#8"))?;
                    Some((pkey, md, digest))
                };
                Ok(Signer::Ecdsa(EcdsaSigner { curve, encoding, kp, other_hash, rng: SystemRandom::new() }))
            }
            _ => Err(Error::UnsupportedAsym(alg)),
        }
    }

    pub(crate) fn public_key(&self) -> &[u8] {
        match self {
            Signer::Ed25519(kp) => kp.public_key().as_ref(),
            Signer::Ecdsa(s) => s.kp.public_key().as_ref(),
        }
    }

    pub(crate) fn sign(&self, message: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        match self {
            Signer::Ed25519(kp) => {
                room(out, 64)?;
                out[..64].copy_from_slice(kp.sign(message).as_ref());
                Ok(64)
            }
            Signer::Ecdsa(s) => s.sign(message, out),
        }
    }
}

impl EcdsaSigner {
    fn sign(&self, message: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        let field = self.curve.field_len();
        // DER: SEQUENCE of two INTEGERs of up to field + 1 bytes (see AsymAlg::max_output_len).
        let need = match self.encoding {
            SigEncoding::P1363 => 2 * field,
            SigEncoding::Der => self.curve.point_len() + 8,
        };
        room(out, need)?;
        let failed = |_| Error::DriverFailure("soft: ECDSA signing failed");
        let der_owned;
        let der: &[u8] = match &self.other_hash {
            None => {
                der_owned = self.kp.sign(&self.rng, message).map_err(failed)?;
                der_owned.as_ref()
            }
            Some((pkey, md, digest)) => {
                let h = openssl::hash::hash(*digest, message)
                    .map_err(|_| Error::DriverFailure("soft: hash failed"))?;
                let mut ctx =
                    PkeyCtx::new(pkey).map_err(|_| Error::DriverFailure("soft: EVP_PKEY_CTX_new failed"))?;
                ctx.sign_init().map_err(|_| Error::DriverFailure("soft: EVP_PKEY_sign_init failed"))?;
                ctx.set_signature_md(md)
                    .map_err(|_| Error::DriverFailure("soft: EVP_PKEY_CTX_set_signature_md failed"))?;
                let mut buf = [0u8; 120];
                let n = ctx
                    .sign(&h, Some(&mut buf))
                    .map_err(|_| Error::DriverFailure("soft: EVP_PKEY_sign failed"))?;
                return self.encode(&buf[..n], out);
            }
        };
        self.encode(der, out)
    }

    /// Writes the DER signature `der` in the session's encoding.
    fn encode(&self, der: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        match self.encoding {
            SigEncoding::Der => {
                out[..der.len()].copy_from_slice(der);
                Ok(der.len())
            }
            SigEncoding::P1363 => {
                let field = self.curve.field_len();
                let bad = |_| Error::DriverFailure("soft: the library's DER signature does not parse");
                let s = EcdsaSig::from_der(der).map_err(bad)?;
                out[..field].copy_from_slice(&s.r().to_vec_padded(field as i32).map_err(bad)?);
                out[field..2 * field].copy_from_slice(&s.s().to_vec_padded(field as i32).map_err(bad)?);
                Ok(2 * field)
            }
        }
    }
}

/// A public key that verifies: aws-lc-rs parsed it once (raw or SPKI).
pub(crate) struct Verifier {
    key: ParsedPublicKey,
    /// ECDSA in P1363 form: signatures are `r ‖ s` of this field length, rewritten as DER.
    p1363_field: Option<usize>,
}

impl Verifier {
    pub(crate) fn new(alg: AsymAlg, key: &PublicKey) -> Result<Verifier, Error> {
        let (lib_alg, p1363_field): (&'static dyn sig::VerificationAlgorithm, _) = match alg {
            AsymAlg::Ed25519 => (&sig::ED25519, None),
            AsymAlg::Ecdsa { curve, hash, encoding } => (
                verification(curve, hash).ok_or(Error::UnsupportedAsym(alg))?,
                (encoding == SigEncoding::P1363).then_some(curve.field_len()),
            ),
            _ => return Err(Error::UnsupportedAsym(alg)),
        };
        let key = ParsedPublicKey::new(lib_alg, key.bytes())
            .map_err(bad_key("the public key does not parse, or is not on the session's curve"))?;
        Ok(Verifier { key, p1363_field })
    }

    pub(crate) fn verify(&self, message: &[u8], signature: &[u8]) -> Result<(), Error> {
        let der;
        let signature = match self.p1363_field {
            None => signature,
            Some(field) => {
                if signature.len() != 2 * field {
                    return Err(Error::BadSignature);
                }
                der = p1363_to_der(&signature[..field], &signature[field..]).ok_or(Error::BadSignature)?;
                &der
            }
        };
        self.key.verify_sig(message, signature).map_err(|_| Error::BadSignature)
    }
}

fn p1363_to_der(r: &[u8], s: &[u8]) -> Option<Vec<u8>> {
    let r = BigNum::from_slice(r).ok()?;
    let s = BigNum::from_slice(s).ok()?;
    EcdsaSig::from_private_components(r, s).ok()?.to_der().ok()
}
