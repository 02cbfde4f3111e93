//! X25519 (RFC 7748) and ECDH over P-256 / P-384 (SP 800-56A) with aws-lc-rs: 1.8x
//! (X25519), 3.7x (P-256) and 8.5x (P-384) libcrypto 3.0's derive with the peer's value
//! parsed per request (`tools/libbench`).
//!
//! The private key is parsed once; each `Derive` parses the peer's raw value (32 bytes, or
//! the uncompressed point `04 ‖ x ‖ y`) and the library checks it: an EC point off the
//! curve or in another encoding is `InvalidPoint`; an X25519 peer value of small order
//! gives the all-zero secret, which the library refuses (RFC 7748 §6.1): `ZeroSharedSecret`.

use aws_lc_rs::agreement::{self, UnparsedPublicKey};
use ocf::asym::{PrivateFormat, PrivateKey};
use ocf::{AsymAlg, Curve, Error};
use openssl::pkey::{Id, PKey};
use zeroize::Zeroizing;

use super::{bad_key, room};

pub(crate) struct Agreement {
    alg: &'static agreement::Algorithm,
    x25519: bool,
    /// Raw peer values of the right length are `peer_len` bytes.
    peer_len: usize,
    secret_len: usize,
    key: agreement::PrivateKey,
    public: Vec<u8>,
}

impl Agreement {
    pub(crate) fn new(alg: AsymAlg, key: &PrivateKey) -> Result<Agreement, Error> {
        let (lib_alg, peer_len, secret_len) = match alg {
            AsymAlg::X25519 => (&agreement::X25519, 32, 32),
            AsymAlg::Ecdh(Curve::P256) => (&agreement::ECDH_P256, 65, 32),
            AsymAlg::Ecdh(Curve::P384) => (&agreement::ECDH_P384, 97, 48),
            _ => return Err(Error::UnsupportedAsym(alg)),
        };
        let x25519 = alg == AsymAlg::X25519;
        let parsed = match (key.format(), x25519) {
            (PrivateFormat::Raw, _) => agreement::PrivateKey::from_private_key(lib_alg, key.bytes())
                .map_err(bad_key("the raw private key is not a valid scalar for the curve"))?,
            // aws-lc-rs reads no X25519 PKCS#8: libcrypto parses it, aws-lc-rs takes the scalar.
            (PrivateFormat::Pkcs8, true) => {
                let pkey = PKey::private_key_from_pkcs8(key.bytes())
                    .map_err(bad_key("the PKCS#8 key does not parse"))?;
                if pkey.id() != Id::X25519 {
                    return Err(Error::BadKey { why: "the PKCS#8 key is not an X25519 key" });
                }
                let raw =
                    Zeroizing::new(pkey.raw_private_key().map_err(bad_key("no X25519 scalar in the key"))?);
                agreement::PrivateKey::from_private_key(lib_alg, &raw)
                    .map_err(bad_key("the X25519 scalar is not 32 bytes"))?
            }
            (PrivateFormat::Pkcs8, false) => {
                agreement::PrivateKey::from_private_key_der(lib_alg, key.bytes())
                    .map_err(bad_key("the PKCS#8 key does not parse, or is not on the session's curve"))?
            }
        };
        let public = parsed
            .compute_public_key()
            .map_err(bad_key("the public key cannot be computed from the private key"))?
            .as_ref()
            .to_vec();
        Ok(Agreement { alg: lib_alg, x25519, peer_len, secret_len, key: parsed, public })
    }

    pub(crate) fn public_key(&self) -> &[u8] {
        &self.public
    }

    pub(crate) fn derive(&self, peer: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        if self.x25519 && peer.len() != self.peer_len {
            return Err(Error::BadInputLength {
                what: "X25519 peer public value",
                got: peer.len(),
                expected: 32,
            });
        }
        // SEC 1 §2.3.4: the raw form is the uncompressed point; anything else is refused
        // here rather than parsed as whatever aws-lc-rs would also accept (SPKI, compressed).
        if !self.x25519 && (peer.len() != self.peer_len || peer[0] != 0x04) {
            return Err(Error::InvalidPoint);
        }
        room(out, self.secret_len)?;
        let failure = if self.x25519 { Error::ZeroSharedSecret } else { Error::InvalidPoint };
        let n = self.secret_len;
        agreement::agree(&self.key, UnparsedPublicKey::new(self.alg, peer), failure, |secret| {
            out[..n].copy_from_slice(secret);
            Ok(n)
        })
    }
}
