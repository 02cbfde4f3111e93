//! What ocf's session parameters are called in the kernel, and the keys the kernel takes.
//! Pure functions, tested on the host.
//!
//! | ocf mode | socket type | kernel name | key set on the transform |
//! |---|---|---|---|
//! | cipher | `skcipher` | `cbc(aes)`, `ctr(aes)`, `cbc(des3_ede)`, `ecb(cipher_null)` | the cipher key |
//! | aead | `aead` | `gcm(aes)`, `rfc7539(chacha20,poly1305)` | the key; authsize 16 |
//! | cipher+mac | `aead` | `authenc(hmac(D),C)` (`authencesn(…)` for ESN) | [`authenc_key`]; authsize = tag length |
//! | digest | `hash` | `md5`, `sha1`, `sha256`, `sha384`, `sha512` | none |
//! | mac | `hash` | `hmac(D)` | the MAC key |
//!
//! Cipher+MAC maps onto authenc exactly: ocf MACs `AAD ‖ ciphertext` (‖ ESN high bits) and
//! carries the IV separately; authenc takes the AAD as its associated data, the IV by
//! `ALG_SET_IV`, and MACs `AD ‖ ciphertext` — the IV is covered only if the caller put it in
//! the AAD, in both. With ESN, `authencesn` MACs `AD[0..4] ‖ AD[8..] ‖ ciphertext ‖ AD[4..8]`,
//! so ocf's `AAD ‖ ciphertext ‖ hi` is `authencesn` over `AAD[0..4] ‖ hi ‖ AAD[4..]`
//! ([`esn_assoc`]); that needs at least 4 bytes of AAD (ESP has 8).

use ocf::{CipherAlg, DigestAlg, MacAlg, Mode, SessionParams};
use zeroize::Zeroizing;

/// The AF_ALG socket type of a transform.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SockType {
    Skcipher,
    Aead,
    Hash,
}

impl SockType {
    pub fn as_str(self) -> &'static str {
        match self {
            SockType::Skcipher => "skcipher",
            SockType::Aead => "aead",
            SockType::Hash => "hash",
        }
    }
}

/// A kernel algorithm: the socket type and the name to bind.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelAlg {
    pub kind: SockType,
    pub name: String,
}

impl KernelAlg {
    /// The kernel name a session binds (`""` for parameters the kernel has no name for).
    pub fn name_of(p: &SessionParams) -> String {
        kernel_alg(p).map(|a| a.name).unwrap_or_default()
    }
}

/// The kernel's name of a plain cipher (the cipher half of authenc too).
pub fn cipher_name(alg: CipherAlg) -> Option<&'static str> {
    Some(match alg {
        CipherAlg::AesCbc => "cbc(aes)",
        CipherAlg::AesCtr => "ctr(aes)",
        CipherAlg::TdesCbc => "cbc(des3_ede)",
        CipherAlg::Null => "ecb(cipher_null)",
        _ => return None,
    })
}

/// The kernel's name of an AEAD.
pub fn aead_name(alg: CipherAlg) -> Option<&'static str> {
    Some(match alg {
        CipherAlg::AesGcm => "gcm(aes)",
        CipherAlg::ChaCha20Poly1305 => "rfc7539(chacha20,poly1305)",
        _ => return None,
    })
}

/// The kernel's name of a digest.
pub fn digest_name(alg: DigestAlg) -> Option<&'static str> {
    Some(match alg {
        DigestAlg::Md5 => "md5",
        DigestAlg::Sha1 => "sha1",
        DigestAlg::Sha256 => "sha256",
        DigestAlg::Sha384 => "sha384",
        DigestAlg::Sha512 => "sha512",
        #[allow(unreachable_patterns)]
        _ => return None,
    })
}

/// The kernel's name of a MAC.
pub fn mac_name(alg: MacAlg) -> Option<String> {
    match alg {
        MacAlg::Hmac(d) => digest_name(d).map(|d| format!("hmac({d})")),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// The authenc instance for encrypt-then-MAC; `esn`: the `authencesn` variant.
pub fn authenc_name(cipher: CipherAlg, mac: MacAlg, esn: bool) -> Option<String> {
    let template = if esn { "authencesn" } else { "authenc" };
    Some(format!("{template}({},{})", mac_name(mac)?, cipher_name(cipher)?))
}

/// The kernel algorithm a session binds (without ESN).
pub fn kernel_alg(p: &SessionParams) -> Option<KernelAlg> {
    let (kind, name) = match &p.mode {
        Mode::Cipher { alg, .. } => (SockType::Skcipher, cipher_name(*alg)?.to_owned()),
        Mode::Aead { alg, .. } => (SockType::Aead, aead_name(*alg)?.to_owned()),
        Mode::CipherThenMac { cipher, mac, .. } => (SockType::Aead, authenc_name(*cipher, *mac, false)?),
        Mode::Digest { alg } => (SockType::Hash, digest_name(*alg)?.to_owned()),
        Mode::Mac { alg, .. } => (SockType::Hash, mac_name(*alg)?),
        _ => return None,
    };
    Some(KernelAlg { kind, name })
}

/// `CRYPTO_AUTHENC_KEYA_PARAM`, the rtattr type of authenc's key header.
const CRYPTO_AUTHENC_KEYA_PARAM: u16 = 1;

/// The key `authenc` takes (`crypto_authenc_extractkeys`): an rtattr in host byte order
/// (`rta_len` = 8, `rta_type` = `CRYPTO_AUTHENC_KEYA_PARAM`) holding
/// `struct crypto_authenc_key_param { __be32 enckeylen; }`, then the MAC key, then the
/// cipher key. Zeroized when dropped.
pub fn authenc_key(cipher_key: &[u8], mac_key: &[u8]) -> Zeroizing<Vec<u8>> {
    let mut k = Zeroizing::new(Vec::with_capacity(8 + mac_key.len() + cipher_key.len()));
    k.extend_from_slice(&8u16.to_ne_bytes());
    k.extend_from_slice(&CRYPTO_AUTHENC_KEYA_PARAM.to_ne_bytes());
    k.extend_from_slice(&(cipher_key.len() as u32).to_be_bytes());
    k.extend_from_slice(mac_key);
    k.extend_from_slice(cipher_key);
    k
}

/// `authencesn`'s associated data for ocf's `aad` and ESN high bits (see the module docs):
/// `aad[0..4] ‖ hi ‖ aad[4..]`, written into `out`; `None` if `aad` is shorter than 4.
pub fn esn_assoc(aad: &[u8], hi: &[u8], out: &mut Vec<u8>) -> Option<()> {
    if aad.len() < 4 || hi.len() != 4 {
        return None;
    }
    out.clear();
    out.extend_from_slice(&aad[..4]);
    out.extend_from_slice(hi);
    out.extend_from_slice(&aad[4..]);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_every_mode() {
        let k = |p: SessionParams| kernel_alg(&p).map(|a| (a.kind, a.name));
        assert_eq!(
            k(SessionParams::cipher(CipherAlg::AesCbc, &[0u8; 16])),
            Some((SockType::Skcipher, "cbc(aes)".into()))
        );
        assert_eq!(
            k(SessionParams::aead(CipherAlg::ChaCha20Poly1305, &[0u8; 32])),
            Some((SockType::Aead, "rfc7539(chacha20,poly1305)".into()))
        );
        assert_eq!(
            k(SessionParams::cipher_then_mac(
                CipherAlg::TdesCbc,
                &[1u8; 24],
                MacAlg::Hmac(DigestAlg::Sha1),
                &[2u8; 20]
            )),
            Some((SockType::Aead, "authenc(hmac(sha1),cbc(des3_ede))".into()))
        );
        assert_eq!(
            k(SessionParams::hmac(DigestAlg::Sha512, &[1u8; 3])),
            Some((SockType::Hash, "hmac(sha512)".into()))
        );
        assert_eq!(k(SessionParams::digest(DigestAlg::Md5)), Some((SockType::Hash, "md5".into())));
        assert_eq!(
            authenc_name(CipherAlg::AesCbc, MacAlg::Hmac(DigestAlg::Sha256), true).unwrap(),
            "authencesn(hmac(sha256),cbc(aes))"
        );
        assert_eq!(authenc_name(CipherAlg::AesGcm, MacAlg::Hmac(DigestAlg::Sha256), false), None);
    }

    /// The layout `crypto_authenc_extractkeys` parses (include/crypto/authenc.h,
    /// crypto/authenc.c): RTA_LENGTH(4) = 8, type 1, big-endian cipher key length, MAC key,
    /// cipher key — as iproute2 and the kernel's own testmgr vectors lay it out.
    #[test]
    fn authenc_key_is_the_kernels_rtattr_layout() {
        let k = authenc_key(&[0xc0; 16], &[0xa0; 20]);
        let mut want = vec![];
        want.extend_from_slice(&8u16.to_ne_bytes());
        want.extend_from_slice(&1u16.to_ne_bytes());
        want.extend_from_slice(&[0, 0, 0, 16]);
        want.extend_from_slice(&[0xa0; 20]);
        want.extend_from_slice(&[0xc0; 16]);
        assert_eq!(&k[..], &want[..]);
        // On little-endian machines (x86, arm64) the header reads 08 00 01 00 00 00 00 10,
        // as testmgr.h's authenc vectors begin.
        #[cfg(target_endian = "little")]
        assert_eq!(&k[..8], &[8, 0, 1, 0, 0, 0, 0, 16]);
        // The copy holds both keys: it wipes itself when dropped.
        fn wipes_on_drop<T: zeroize::ZeroizeOnDrop>(_: &T) {}
        wipes_on_drop(&k);
    }

    #[test]
    fn esn_assoc_moves_the_high_bits_where_authencesn_takes_them() {
        let mut out = vec![];
        esn_assoc(&[1, 2, 3, 4, 5, 6, 7, 8], &[9, 9, 9, 9], &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4, 9, 9, 9, 9, 5, 6, 7, 8]);
        assert_eq!(esn_assoc(&[1, 2, 3], &[9; 4], &mut out), None);
    }
}
