//! The key schedule: the IKE SA's keys (RFC 7296 §2.14), a rekeyed IKE SA's (§2.18), and
//! a CHILD_SA's KEYMAT (§2.17), all through [`super::prf`] and so through ocf.
//!
//! ```text
//!  IKE_SA_INIT:   SKEYSEED = prf(Ni | Nr, g^ir)
//!  IKE SA rekey:  SKEYSEED = prf_old(SK_d (old), g^ir (new) | Ni | Nr)
//!                          (also RFC 9370's SKEYSEED(n) from SK_d(n-1) and SK(n))
//!                     │
//!  {SK_d | SK_ai | SK_ar | SK_ei | SK_er | SK_pi | SK_pr} = prf+(SKEYSEED, Ni | Nr | SPIi | SPIr)
//!     prf len  integ key  integ key  key+salt  key+salt  prf len  prf len
//!              (none with an AEAD)   (salt: 4 bytes for AES-GCM, RFC 5282 §7.1, and
//!                                     ChaCha20-Poly1305, RFC 7634 §4; none for CBC)
//!
//!  CHILD_SA:      KEYMAT = prf+(SK_d, [g^ir (new) |] Ni | Nr)
//!                 = encr i→r | integ i→r | encr r→i | integ r→i     (§2.17: the initiator's
//!                   direction first; in each, encryption then integrity; AEAD: key ‖ salt,
//!                   no integrity key — the lengths ipsecd's setkey takes)
//! ```
//!
//! Ni and Nr are the nonces' data (no payload header), SPIi and SPIr the 8-byte IKE SPIs
//! of the SA being keyed (the new ones when rekeying), g^ir the shared secret of
//! [`super::kex`] as it returns it. Every key is a `Zeroizing` buffer, wiped on drop.

use std::fmt;

use ocf::Framework;
use zeroize::Zeroizing;

use super::error::CryptoError;
use super::prf::{prf, PrfSession};
use super::sk::SkCipher;
use super::suite::{ChildSuite, IkeSuite, Prf};

/// Key bytes, wiped when dropped.
pub type KeyBytes = Zeroizing<Vec<u8>>;

/// SKEYSEED = prf(Ni | Nr, g^ir) (RFC 7296 §2.14).
pub fn skeyseed(
    fw: &Framework,
    prf_alg: Prf,
    ni: &[u8],
    nr: &[u8],
    g_ir: &[u8],
) -> Result<KeyBytes, CryptoError> {
    let mut key = Zeroizing::new(Vec::with_capacity(ni.len() + nr.len()));
    key.extend_from_slice(ni);
    key.extend_from_slice(nr);
    prf(fw, prf_alg, &key, g_ir)
}

/// A rekeyed IKE SA's SKEYSEED = prf(SK_d (old), g^ir (new) | Ni | Nr) (RFC 7296 §2.18),
/// with the **old** IKE SA's PRF (the exchange belongs to the old SA). RFC 9370's
/// additional key exchanges chain the same way (SK_d(n-1), SK(n)).
pub fn rekey_skeyseed(
    fw: &Framework,
    old_prf: Prf,
    old_sk_d: &[u8],
    g_ir_new: &[u8],
    ni: &[u8],
    nr: &[u8],
) -> Result<KeyBytes, CryptoError> {
    PrfSession::new(fw, old_prf, old_sk_d)?.compute(&[g_ir_new, ni, nr])
}

/// An IKE SA's seven keys.
pub struct IkeKeys {
    /// For deriving CHILD_SA keys and the next IKE SA's.
    pub sk_d: KeyBytes,
    /// Integrity, initiator's messages (empty with an AEAD).
    pub sk_ai: KeyBytes,
    /// Integrity, responder's messages (empty with an AEAD).
    pub sk_ar: KeyBytes,
    /// Encryption, initiator's messages: key ‖ salt for an AEAD.
    pub sk_ei: KeyBytes,
    /// Encryption, responder's messages: key ‖ salt for an AEAD.
    pub sk_er: KeyBytes,
    /// The initiator's AUTH (prf(SK_pi, IDi')).
    pub sk_pi: KeyBytes,
    /// The responder's AUTH (prf(SK_pr, IDr')).
    pub sk_pr: KeyBytes,
}

impl IkeKeys {
    /// The total prf+ output for `suite`.
    pub fn dkm_len(suite: &IkeSuite) -> usize {
        3 * suite.prf.output_len() + 2 * suite.integ_key_len() + 2 * suite.encr.keymat_len()
    }

    /// The keys from SKEYSEED: prf+(SKEYSEED, Ni | Nr | SPIi | SPIr), split in RFC 7296
    /// §2.14's order.
    pub fn from_skeyseed(
        fw: &Framework,
        suite: &IkeSuite,
        skeyseed: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: &[u8; 8],
        spi_r: &[u8; 8],
    ) -> Result<IkeKeys, CryptoError> {
        let dkm =
            PrfSession::new(fw, suite.prf, skeyseed)?.plus(&[ni, nr, spi_i, spi_r], Self::dkm_len(suite))?;
        let mut at = 0;
        let mut take = |n: usize| {
            let k = Zeroizing::new(dkm[at..at + n].to_vec());
            at += n;
            k
        };
        let (p, a, e) = (suite.prf.output_len(), suite.integ_key_len(), suite.encr.keymat_len());
        Ok(IkeKeys {
            sk_d: take(p),
            sk_ai: take(a),
            sk_ar: take(a),
            sk_ei: take(e),
            sk_er: take(e),
            sk_pi: take(p),
            sk_pr: take(p),
        })
    }

    /// A new IKE SA's keys (IKE_SA_INIT): SKEYSEED from the nonces and g^ir, then the split.
    pub fn new_sa(
        fw: &Framework,
        suite: &IkeSuite,
        g_ir: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: &[u8; 8],
        spi_r: &[u8; 8],
    ) -> Result<IkeKeys, CryptoError> {
        let seed = skeyseed(fw, suite.prf, ni, nr, g_ir)?;
        IkeKeys::from_skeyseed(fw, suite, &seed, ni, nr, spi_i, spi_r)
    }

    /// The keys of the IKE SA that replaces this one (CREATE_CHILD_SA rekeying the IKE SA):
    /// SKEYSEED with this SA's PRF and SK_d, then the split with the new suite and SPIs.
    #[allow(clippy::too_many_arguments)]
    pub fn rekeyed(
        &self,
        fw: &Framework,
        old_prf: Prf,
        new_suite: &IkeSuite,
        g_ir_new: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: &[u8; 8],
        spi_r: &[u8; 8],
    ) -> Result<IkeKeys, CryptoError> {
        let seed = rekey_skeyseed(fw, old_prf, &self.sk_d, g_ir_new, ni, nr)?;
        IkeKeys::from_skeyseed(fw, new_suite, &seed, ni, nr, spi_i, spi_r)
    }

    /// The SK payload protections for our side: `(outbound, inbound)`. The initiator
    /// sends with SK_ei/SK_ai and receives with SK_er/SK_ar; the responder the reverse.
    pub fn sk_ciphers(
        &self,
        fw: &Framework,
        suite: &IkeSuite,
        initiator: bool,
    ) -> Result<(SkCipher, SkCipher), CryptoError> {
        let i = SkCipher::new(fw, suite.encr, suite.integ, &self.sk_ei, &self.sk_ai)?;
        let r = SkCipher::new(fw, suite.encr, suite.integ, &self.sk_er, &self.sk_ar)?;
        Ok(if initiator { (i, r) } else { (r, i) })
    }
}

impl fmt::Debug for IkeKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IkeKeys {{ sk_d: {} bytes, sk_a: {} bytes, sk_e: {} bytes, sk_p: {} bytes }}",
            self.sk_d.len(),
            self.sk_ai.len(),
            self.sk_ei.len(),
            self.sk_pi.len()
        )
    }
}

/// A CHILD_SA's ESP keys, in the form ipsecd's setkey takes them (`EncAlg::key_lens`:
/// an AEAD's key with its 4-byte salt after it; `AuthAlg::key_lens`: the HMAC key).
pub struct ChildKeys {
    /// Encryption key (‖ salt), initiator → responder.
    pub encr_i: KeyBytes,
    /// Integrity key, initiator → responder (empty with an AEAD).
    pub integ_i: KeyBytes,
    /// Encryption key (‖ salt), responder → initiator.
    pub encr_r: KeyBytes,
    /// Integrity key, responder → initiator (empty with an AEAD).
    pub integ_r: KeyBytes,
}

impl ChildKeys {
    /// KEYMAT = prf+(SK_d, [g^ir (new) |] Ni | Nr) split per RFC 7296 §2.17. `g_ir_new`
    /// is the CREATE_CHILD_SA's shared secret with PFS, `None` without (and for the
    /// CHILD_SA of IKE_AUTH). `prf_alg` and `sk_d` are the IKE SA's.
    pub fn derive(
        fw: &Framework,
        prf_alg: Prf,
        sk_d: &[u8],
        suite: &ChildSuite,
        g_ir_new: Option<&[u8]>,
        ni: &[u8],
        nr: &[u8],
    ) -> Result<ChildKeys, CryptoError> {
        let e = suite.encr.keymat_len();
        let a = suite.integ.map_or(0, |i| i.key_len());
        let keymat =
            PrfSession::new(fw, prf_alg, sk_d)?.plus(&[g_ir_new.unwrap_or(&[]), ni, nr], 2 * (e + a))?;
        let part = |r: std::ops::Range<usize>| Zeroizing::new(keymat[r].to_vec());
        Ok(ChildKeys {
            encr_i: part(0..e),
            integ_i: part(e..e + a),
            encr_r: part(e + a..2 * e + a),
            integ_r: part(2 * e + a..2 * (e + a)),
        })
    }
}

impl fmt::Debug for ChildKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ChildKeys {{ encr: {} bytes, integ: {} bytes }}", self.encr_i.len(), self.integ_i.len())
    }
}
