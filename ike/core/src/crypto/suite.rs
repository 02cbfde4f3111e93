//! Negotiated algorithms: the transform IDs of a chosen proposal (`ike_wire::ids`) turned
//! into what the rest of `crypto` needs — key lengths, IV, ICV and block sizes, and the ocf
//! algorithms behind them. An ID this implementation does not offer is a
//! [`CryptoError`] naming it, so that a proposal with it is simply not chosen.
//!
//! ```text
//!  ENCR 20 (+ key length 128/192/256) ─▶ Encr::AesGcm16 { key_len }   AEAD, 4-byte salt
//!  ENCR 28                            ─▶ Encr::ChaCha20Poly1305        AEAD, 4-byte salt
//!  ENCR 12 (+ key length)             ─▶ Encr::AesCbc { key_len }      needs an Integ
//!  INTEG 12/13/14                     ─▶ Integ (HMAC-SHA2, truncated ICV)
//!  PRF 2/5/6/7                        ─▶ Prf (HMAC)
//!  KE 31/19/20/14                     ─▶ KeMethod (X25519, ECP-256, ECP-384, MODP-2048)
//!
//!  IkeSuite  { encr, integ, prf, ke }  the IKE SA's (SK payloads, key schedule)
//!  ChildSuite { encr, integ }          a CHILD_SA's ESP transforms (KEYMAT's split)
//! ```

use ike_wire::ids::{DhId, EncrId, IntegId, PrfId};
use ocf::{CipherAlg, Curve, DigestAlg, ModpGroup};

use super::error::CryptoError;

/// An encryption algorithm (transform type 1), for SK payloads or ESP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encr {
    /// AES-GCM with a 16-byte ICV (RFC 5282 in IKE, RFC 4106 in ESP); key 16, 24 or 32.
    AesGcm16 { key_len: usize },
    /// ChaCha20-Poly1305 (RFC 7634); key 32.
    ChaCha20Poly1305,
    /// AES-CBC (RFC 3602); key 16, 24 or 32; needs an [`Integ`].
    AesCbc { key_len: usize },
}

impl Encr {
    /// The algorithm of transform `id` with its Key Length attribute (`bits`, in bits;
    /// `None` when the transform carries none). AES requires the attribute,
    /// ChaCha20-Poly1305 refuses it (RFC 7634 §2).
    pub fn from_id(id: EncrId, bits: Option<u16>) -> Result<Encr, CryptoError> {
        let aes_len = |bits: Option<u16>| match bits {
            Some(b @ (128 | 192 | 256)) => Ok(usize::from(b) / 8),
            other => Err(CryptoError::UnsupportedKeyLength { encr: id, bits: other }),
        };
        match id {
            EncrId::AES_GCM_16 => Ok(Encr::AesGcm16 { key_len: aes_len(bits)? }),
            EncrId::AES_CBC => Ok(Encr::AesCbc { key_len: aes_len(bits)? }),
            EncrId::CHACHA20_POLY1305 => match bits {
                None => Ok(Encr::ChaCha20Poly1305),
                Some(b) => Err(CryptoError::UnsupportedKeyLength { encr: id, bits: Some(b) }),
            },
            _ => Err(CryptoError::UnsupportedEncr(id)),
        }
    }

    /// The transform ID and Key Length attribute (bits) that name this algorithm.
    pub fn id(self) -> (EncrId, Option<u16>) {
        match self {
            Encr::AesGcm16 { key_len } => (EncrId::AES_GCM_16, Some(key_len as u16 * 8)),
            Encr::ChaCha20Poly1305 => (EncrId::CHACHA20_POLY1305, None),
            Encr::AesCbc { key_len } => (EncrId::AES_CBC, Some(key_len as u16 * 8)),
        }
    }

    /// Whether the algorithm authenticates too (no separate integrity algorithm).
    pub fn is_aead(self) -> bool {
        !matches!(self, Encr::AesCbc { .. })
    }

    /// The cipher key's length in bytes, salt not included.
    pub fn key_len(self) -> usize {
        match self {
            Encr::AesGcm16 { key_len } | Encr::AesCbc { key_len } => key_len,
            Encr::ChaCha20Poly1305 => 32,
        }
    }

    /// The salt taken from the key material after the key (RFC 5282 §7.1, RFC 4106 §8.1,
    /// RFC 7634 §2 and §4): 4 bytes for the AEADs, 0 for CBC.
    pub fn salt_len(self) -> usize {
        if self.is_aead() {
            4
        } else {
            0
        }
    }

    /// Key material taken from prf+ for one direction: key and salt (what SK_e is, and
    /// what ipsecd's setkey takes as the ESP encryption key).
    pub fn keymat_len(self) -> usize {
        self.key_len() + self.salt_len()
    }

    /// The explicit IV carried in each message: 8 for the AEADs (the nonce is
    /// salt ‖ IV), one block (16) for AES-CBC.
    pub fn iv_len(self) -> usize {
        if self.is_aead() {
            8
        } else {
            16
        }
    }

    /// The AEAD's ICV (16), or 0: a CBC ICV is the integrity algorithm's.
    pub fn icv_len(self) -> usize {
        if self.is_aead() {
            16
        } else {
            0
        }
    }

    /// What the padded plaintext must be a multiple of (1 for the AEADs).
    pub fn block_len(self) -> usize {
        if self.is_aead() {
            1
        } else {
            16
        }
    }

    /// ocf's cipher.
    pub fn cipher(self) -> CipherAlg {
        match self {
            Encr::AesGcm16 { .. } => CipherAlg::AesGcm,
            Encr::ChaCha20Poly1305 => CipherAlg::ChaCha20Poly1305,
            Encr::AesCbc { .. } => CipherAlg::AesCbc,
        }
    }
}

/// An integrity algorithm (transform type 3): HMAC-SHA2 truncated to half (RFC 4868).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Integ {
    HmacSha256_128,
    HmacSha384_192,
    HmacSha512_256,
}

impl Integ {
    /// The algorithm of transform `id`; `Ok(None)` for NONE (an AEAD's proposal).
    pub fn from_id(id: IntegId) -> Result<Option<Integ>, CryptoError> {
        match id {
            IntegId::NONE => Ok(None),
            IntegId::HMAC_SHA2_256_128 => Ok(Some(Integ::HmacSha256_128)),
            IntegId::HMAC_SHA2_384_192 => Ok(Some(Integ::HmacSha384_192)),
            IntegId::HMAC_SHA2_512_256 => Ok(Some(Integ::HmacSha512_256)),
            _ => Err(CryptoError::UnsupportedInteg(id)),
        }
    }

    pub fn id(self) -> IntegId {
        match self {
            Integ::HmacSha256_128 => IntegId::HMAC_SHA2_256_128,
            Integ::HmacSha384_192 => IntegId::HMAC_SHA2_384_192,
            Integ::HmacSha512_256 => IntegId::HMAC_SHA2_512_256,
        }
    }

    /// The hash under the HMAC.
    pub fn digest(self) -> DigestAlg {
        match self {
            Integ::HmacSha256_128 => DigestAlg::Sha256,
            Integ::HmacSha384_192 => DigestAlg::Sha384,
            Integ::HmacSha512_256 => DigestAlg::Sha512,
        }
    }

    /// The key length (RFC 4868 §2.1.1: the hash's output length).
    pub fn key_len(self) -> usize {
        self.digest().output_len()
    }

    /// The ICV on the wire: half the hash (RFC 4868 §2.3).
    pub fn icv_len(self) -> usize {
        self.digest().output_len() / 2
    }
}

/// A pseudorandom function (transform type 2): HMAC (RFC 2104, RFC 4868).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prf {
    /// PRF_HMAC_SHA1 (RFC 2104). Kept because NIST's CAVP IKEv2 vectors use it and older
    /// peers still propose it; RFC 8247 §3.1 calls it MUST- for IKEv2.
    HmacSha1,
    HmacSha256,
    HmacSha384,
    HmacSha512,
}

impl Prf {
    pub fn from_id(id: PrfId) -> Result<Prf, CryptoError> {
        match id {
            PrfId::HMAC_SHA1 => Ok(Prf::HmacSha1),
            PrfId::HMAC_SHA2_256 => Ok(Prf::HmacSha256),
            PrfId::HMAC_SHA2_384 => Ok(Prf::HmacSha384),
            PrfId::HMAC_SHA2_512 => Ok(Prf::HmacSha512),
            _ => Err(CryptoError::UnsupportedPrf(id)),
        }
    }

    pub fn id(self) -> PrfId {
        match self {
            Prf::HmacSha1 => PrfId::HMAC_SHA1,
            Prf::HmacSha256 => PrfId::HMAC_SHA2_256,
            Prf::HmacSha384 => PrfId::HMAC_SHA2_384,
            Prf::HmacSha512 => PrfId::HMAC_SHA2_512,
        }
    }

    pub fn digest(self) -> DigestAlg {
        match self {
            Prf::HmacSha1 => DigestAlg::Sha1,
            Prf::HmacSha256 => DigestAlg::Sha256,
            Prf::HmacSha384 => DigestAlg::Sha384,
            Prf::HmacSha512 => DigestAlg::Sha512,
        }
    }

    /// The output length, and the preferred key length (RFC 7296 §2.13: SK_d, SK_pi and
    /// SK_pr are this long; RFC 4868 §2.1.2).
    pub fn output_len(self) -> usize {
        self.digest().output_len()
    }

    /// The shortest nonce allowed with this PRF: at least half its key size and at least
    /// 16 bytes (RFC 7296 §2.10, §3.9).
    pub fn min_nonce_len(self) -> usize {
        (self.output_len() / 2).max(16)
    }
}

/// A key exchange method (transform type 4, "Diffie-Hellman group" before RFC 9370).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeMethod {
    /// Group 31 (RFC 8031).
    X25519,
    /// Group 19 (RFC 5903).
    Ecp256,
    /// Group 20 (RFC 5903).
    Ecp384,
    /// Group 14 (RFC 3526), through ocf's MODP Diffie-Hellman (`AsymAlg::Ffdh`), which
    /// is its modular exponentiation with the peer-value checks of SP 800-56A.
    Modp2048,
}

impl KeMethod {
    pub fn from_id(id: DhId) -> Result<KeMethod, CryptoError> {
        match id {
            DhId::CURVE25519 => Ok(KeMethod::X25519),
            DhId::ECP_256 => Ok(KeMethod::Ecp256),
            DhId::ECP_384 => Ok(KeMethod::Ecp384),
            DhId::MODP_2048 => Ok(KeMethod::Modp2048),
            _ => Err(CryptoError::UnsupportedKe(id)),
        }
    }

    pub fn id(self) -> DhId {
        match self {
            KeMethod::X25519 => DhId::CURVE25519,
            KeMethod::Ecp256 => DhId::ECP_256,
            KeMethod::Ecp384 => DhId::ECP_384,
            KeMethod::Modp2048 => DhId::MODP_2048,
        }
    }

    /// The KE payload's data length (RFC 7296 §3.4): X25519 32, ECP x ‖ y (64, 96), MODP
    /// the prime's length (256).
    pub fn public_len(self) -> usize {
        match self {
            KeMethod::X25519 => 32,
            KeMethod::Ecp256 => 2 * Curve::P256.field_len(),
            KeMethod::Ecp384 => 2 * Curve::P384.field_len(),
            KeMethod::Modp2048 => ModpGroup::Modp2048.bytes(),
        }
    }

    /// The shared secret's length (g^ir): X25519 32, ECP the x coordinate (RFC 5903 §7),
    /// MODP the prime's length.
    pub fn secret_len(self) -> usize {
        match self {
            KeMethod::X25519 | KeMethod::Ecp256 => 32,
            KeMethod::Ecp384 => 48,
            KeMethod::Modp2048 => 256,
        }
    }

    /// ocf's algorithm.
    pub fn asym_alg(self) -> ocf::AsymAlg {
        match self {
            KeMethod::X25519 => ocf::AsymAlg::X25519,
            KeMethod::Ecp256 => ocf::AsymAlg::Ecdh(Curve::P256),
            KeMethod::Ecp384 => ocf::AsymAlg::Ecdh(Curve::P384),
            KeMethod::Modp2048 => ocf::AsymAlg::Ffdh(ModpGroup::Modp2048),
        }
    }
}

/// Checks the AEAD/integrity pairing of a proposal.
fn check_integ(encr: Encr, integ: Option<Integ>) -> Result<(), CryptoError> {
    match (encr.is_aead(), integ) {
        (true, Some(_)) => Err(CryptoError::IntegWithAead),
        (false, None) => Err(CryptoError::MissingInteg),
        _ => Ok(()),
    }
}

/// An IKE SA's algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IkeSuite {
    pub encr: Encr,
    /// `None` with an AEAD.
    pub integ: Option<Integ>,
    pub prf: Prf,
    pub ke: KeMethod,
}

impl IkeSuite {
    /// The suite, checked: an AEAD has no integrity algorithm, a plain cipher has one.
    pub fn new(encr: Encr, integ: Option<Integ>, prf: Prf, ke: KeMethod) -> Result<IkeSuite, CryptoError> {
        check_integ(encr, integ)?;
        Ok(IkeSuite { encr, integ, prf, ke })
    }

    /// The suite of a chosen proposal's transform IDs (`integ` is NONE for an AEAD).
    pub fn from_ids(
        encr: EncrId,
        encr_bits: Option<u16>,
        integ: IntegId,
        prf: PrfId,
        ke: DhId,
    ) -> Result<IkeSuite, CryptoError> {
        IkeSuite::new(
            Encr::from_id(encr, encr_bits)?,
            Integ::from_id(integ)?,
            Prf::from_id(prf)?,
            KeMethod::from_id(ke)?,
        )
    }

    /// Bytes of SK_ai (and SK_ar): the integrity key, 0 with an AEAD.
    pub fn integ_key_len(&self) -> usize {
        self.integ.map_or(0, Integ::key_len)
    }

    /// The ICV of an SK payload: the AEAD's or the integrity algorithm's.
    pub fn icv_len(&self) -> usize {
        self.encr.icv_len() + self.integ.map_or(0, Integ::icv_len)
    }
}

/// A CHILD_SA's (ESP) algorithms; its optional PFS key exchange is chosen apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChildSuite {
    pub encr: Encr,
    pub integ: Option<Integ>,
}

impl ChildSuite {
    /// The suite, checked as [`IkeSuite::new`] checks.
    pub fn new(encr: Encr, integ: Option<Integ>) -> Result<ChildSuite, CryptoError> {
        check_integ(encr, integ)?;
        Ok(ChildSuite { encr, integ })
    }

    pub fn from_ids(encr: EncrId, encr_bits: Option<u16>, integ: IntegId) -> Result<ChildSuite, CryptoError> {
        ChildSuite::new(Encr::from_id(encr, encr_bits)?, Integ::from_id(integ)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_map_to_sizes() {
        let gcm = Encr::from_id(EncrId::AES_GCM_16, Some(256)).unwrap();
        assert_eq!((gcm.key_len(), gcm.salt_len(), gcm.iv_len(), gcm.icv_len()), (32, 4, 8, 16));
        assert_eq!(gcm.id(), (EncrId::AES_GCM_16, Some(256)));
        let cbc = Encr::from_id(EncrId::AES_CBC, Some(128)).unwrap();
        assert_eq!((cbc.keymat_len(), cbc.iv_len(), cbc.block_len()), (16, 16, 16));
        assert_eq!(Encr::from_id(EncrId::CHACHA20_POLY1305, None).unwrap().keymat_len(), 36);
        assert_eq!(Integ::from_id(IntegId::HMAC_SHA2_384_192).unwrap().unwrap().icv_len(), 24);
        assert_eq!(Prf::from_id(PrfId::HMAC_SHA2_512).unwrap().output_len(), 64);
        assert_eq!(KeMethod::from_id(DhId::ECP_384).unwrap().public_len(), 96);
    }

    #[test]
    fn unsupported_ids_are_named() {
        assert_eq!(
            Encr::from_id(EncrId::TRIPLE_DES, None),
            Err(CryptoError::UnsupportedEncr(EncrId::TRIPLE_DES))
        );
        assert_eq!(
            Encr::from_id(EncrId::AES_GCM_16, None),
            Err(CryptoError::UnsupportedKeyLength { encr: EncrId::AES_GCM_16, bits: None })
        );
        assert_eq!(
            Encr::from_id(EncrId::AES_CBC, Some(64)),
            Err(CryptoError::UnsupportedKeyLength { encr: EncrId::AES_CBC, bits: Some(64) })
        );
        assert_eq!(
            Encr::from_id(EncrId::CHACHA20_POLY1305, Some(256)),
            Err(CryptoError::UnsupportedKeyLength { encr: EncrId::CHACHA20_POLY1305, bits: Some(256) })
        );
        assert_eq!(
            Integ::from_id(IntegId::HMAC_SHA1_96),
            Err(CryptoError::UnsupportedInteg(IntegId::HMAC_SHA1_96))
        );
        assert_eq!(Prf::from_id(PrfId::AES128_XCBC), Err(CryptoError::UnsupportedPrf(PrfId::AES128_XCBC)));
        assert_eq!(KeMethod::from_id(DhId::MODP_1024), Err(CryptoError::UnsupportedKe(DhId::MODP_1024)));
        assert_eq!(
            IkeSuite::from_ids(
                EncrId::AES_GCM_16,
                Some(128),
                IntegId::HMAC_SHA2_256_128,
                PrfId::HMAC_SHA2_256,
                DhId::CURVE25519
            ),
            Err(CryptoError::IntegWithAead)
        );
        assert_eq!(
            ChildSuite::from_ids(EncrId::AES_CBC, Some(128), IntegId::NONE),
            Err(CryptoError::MissingInteg)
        );
    }
}
