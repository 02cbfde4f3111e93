//! Key exchange, modelled as a KEM — generate, encapsulate, decapsulate — so that
//! RFC 9370's post-quantum methods (ML-KEM) fit later without a new shape. Diffie-Hellman
//! takes this shape as follows, every operation an ocf asymmetric session:
//!
//! ```text
//!  initiator                                     responder
//!  share = KeyShare::generate(method)
//!  KEi = share.public_value()        ──KEi──▶   (KEr, g^ir) = encapsulate(method, KEi)
//!                                               (DH: a new key pair; KEr its public value;
//!                                                g^ir derived with KEi)
//!  g^ir = share.decapsulate(KEr)    ◀──KEr──
//!  (DH: derived with KEr)
//! ```
//!
//! (For ML-KEM, `generate` makes the decapsulation key, `encapsulate` returns the
//! ciphertext and the secret, `decapsulate` opens the ciphertext: the same three calls.)
//!
//! Wire formats (RFC 7296 §3.4): X25519 the 32-byte u-coordinate (RFC 8031 §2); ECP
//! `x ‖ y` with no SEC 1 prefix (RFC 5903 §7; ocf's raw form is `04 ‖ x ‖ y`, added and
//! removed here); MODP the value big-endian, padded to the prime's length (ocf pads it).
//! The shared secret is what §2.14 calls g^ir: the x coordinate for ECP (RFC 5903 §7), the
//! value padded to the prime's length for MODP.
//!
//! Peer values are validated by ocf: a point off the curve ([`CryptoError::KePointNotOnCurve`]),
//! a MODP value outside 2..=p-2 ([`CryptoError::KeValueOutOfRange`]), an X25519 value of
//! small order ([`CryptoError::KeZeroSharedSecret`]); a wrong length is refused here
//! ([`CryptoError::KeDataLength`]).

use ocf::{AsymKey, Framework, Op, PrivateKey, Session, SessionParams};
use zeroize::Zeroizing;

use super::error::CryptoError;
use super::ops;
use super::suite::KeMethod;

/// A shared secret (g^ir), wiped when dropped.
pub type SharedSecret = Zeroizing<Vec<u8>>;

/// Our half of a key exchange: the private key (in its ocf session) and the public value
/// to send. Kept by the initiator until the responder's value arrives; dropped (and
/// wiped by ocf) after.
pub struct KeyShare {
    method: KeMethod,
    session: Session,
    public: Vec<u8>,
}

impl KeyShare {
    /// A new key pair for `method` (the initiator's `generate`).
    ///
    /// X25519's private key is 32 random bytes in ocf's raw form: any 32 bytes are one
    /// (RFC 7748 §5: the scalar is clamped where it is used). ocf's `GenerateKey` would
    /// write it as PKCS#8 for the session to parse again, both through libcrypto's
    /// encoder and decoder, whose look-ups under locks were half of iked's CPU time per
    /// tunnel (`bench/ike-setup`'s profile, docs/measurements.md).
    pub fn generate(fw: &Framework, method: KeMethod) -> Result<KeyShare, CryptoError> {
        let key = match method {
            KeMethod::X25519 => {
                let mut scalar = Zeroizing::new([0u8; 32]);
                ops::random(fw, &mut scalar[..])?;
                PrivateKey::raw(&scalar[..])
            }
            _ => fw.generate_key(method.asym_alg(), 0)?,
        };
        KeyShare::from_private_key(fw, method, key)
    }

    /// A share with a given private key: ocf's raw form (an X25519 or EC scalar, a MODP
    /// exponent) or PKCS#8. For known-answer tests and for reusing a key a caller chose to
    /// keep; a negotiation uses [`KeyShare::generate`].
    pub fn from_private_key(
        fw: &Framework,
        method: KeMethod,
        key: PrivateKey,
    ) -> Result<KeyShare, CryptoError> {
        let alg = method.asym_alg();
        let session = ops::session(fw, &SessionParams::asymmetric(alg, AsymKey::Private(key)))?;
        let raw = ops::asym(&session, Op::PublicKey, &[], method.public_len() + 1)?;
        let public = match method {
            // SEC 1 uncompressed point: drop the 0x04 (RFC 5903 §7).
            KeMethod::Ecp256 | KeMethod::Ecp384 => raw.get(1..).unwrap_or_default().to_vec(),
            KeMethod::X25519 | KeMethod::Modp2048 => raw.to_vec(),
        };
        if public.len() != method.public_len() {
            return Err(CryptoError::Ocf(ocf::Error::DriverFailure("public value of the wrong length")));
        }
        Ok(KeyShare { method, session, public })
    }

    pub fn method(&self) -> KeMethod {
        self.method
    }

    /// The KE payload's Key Exchange Data.
    pub fn public_value(&self) -> &[u8] {
        &self.public
    }

    /// The shared secret from the peer's KE data (the initiator's `decapsulate`; for DH
    /// the same computation the responder's `encapsulate` made).
    pub fn decapsulate(&self, peer: &[u8]) -> Result<SharedSecret, CryptoError> {
        let m = self.method;
        if peer.len() != m.public_len() {
            return Err(CryptoError::KeDataLength {
                method: m.id(),
                got: peer.len(),
                expected: m.public_len(),
            });
        }
        let input = match m {
            KeMethod::Ecp256 | KeMethod::Ecp384 => [&[0x04][..], peer].concat(),
            KeMethod::X25519 | KeMethod::Modp2048 => peer.to_vec(),
        };
        ops::asym(&self.session, Op::Derive, &input, m.public_len() + 1).map_err(|e| match e {
            ocf::Error::InvalidPoint => CryptoError::KePointNotOnCurve,
            ocf::Error::PeerValueOutOfRange => CryptoError::KeValueOutOfRange,
            ocf::Error::ZeroSharedSecret => CryptoError::KeZeroSharedSecret,
            e => CryptoError::Ocf(e),
        })
    }
}

/// The responder's `encapsulate`: against the initiator's KE data, our KE data and the
/// shared secret. For Diffie-Hellman: a new key pair, its public value, and the secret
/// derived with the initiator's value.
pub fn encapsulate(
    fw: &Framework,
    method: KeMethod,
    peer: &[u8],
) -> Result<(Vec<u8>, SharedSecret), CryptoError> {
    let share = KeyShare::generate(fw, method)?;
    let secret = share.decapsulate(peer)?;
    Ok((share.public, secret))
}
