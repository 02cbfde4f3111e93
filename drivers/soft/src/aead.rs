//! AEADs: AES-GCM and ChaCha20-Poly1305.
//!
//! AES-GCM goes through aws-lc-rs: measured here it is 1.9-2.5x every other library at
//! 16 B, 1 KiB and 8 KiB (10 GB/s at 8 KiB).
//!
//! ChaCha20-Poly1305 goes through aws-lc-rs below 512 B and through Intel's IPsec-MB from
//! 512 B up where the driver was built with it (`crate::imb`, the fastest per message).
//! Without IPsec-MB: aws-lc-rs below 2 KiB and OpenSSL's libcrypto from 2 KiB up, with one
//! libcrypto context per session and direction, keyed once and re-armed with only the nonce
//! per message ([`ChachaCtx`]). Measured per message
//! (`examples/chacha_cost`, pinned, ns at 16 B / 256 B / 1 KiB / 8 KiB): aws-lc-rs 156 / 246 /
//! 564 / 3,229; libcrypto on a kept context 409 / 448 / 596 / 2,474. libcrypto pays ~320 ns
//! per message over its bulk speed (the nonce setup ~70 ns, a separate ChaCha20 call for the
//! Poly1305 key, the final call and the tag parameter), and wins once its faster AVX-512
//! ChaCha20 amortizes that: the two cross between 1 and 2 KiB. No library here reaches
//! `openssl speed -evp chacha20-poly1305` per message: that (OpenSSL 3.0, even with
//! `-aead`) streams one `EVP_EncryptUpdate` per "message" with no nonce, Poly1305 key or
//! tag: 296 ns at 1 KiB, 2,173 ns at 8 KiB on the same machine (IPsec-MB: 410, 2,200).
//!
//! A libcrypto context serves one message at a time. It is taken with `try_lock`, so a
//! session used by several threads at once never waits: the thread that loses the race
//! uses aws-lc-rs for that message (same result, a little slower).

use std::sync::{Arc, Mutex};

use aws_lc_rs::aead::{self, LessSafeKey, Nonce, UnboundKey};
use ocf::{CipherAlg, Error};

use crate::chacha::ChachaCtx;
use crate::pool::{Keyed, Pool};
use crate::stream::GcmCtx;

/// From this payload length up, ChaCha20-Poly1305 uses libcrypto (see the module docs).
pub const CHACHA_LIBCRYPTO_MIN_LEN: usize = 2048;

/// Multi-part sessions: the session's pool of keyed contexts its messages start from (see
/// `crate::pool` and `crate::stream`).
pub(crate) enum StreamSource {
    Gcm(Arc<Pool<GcmCtx>>),
    Chacha(Arc<Pool<ChachaCtx>>),
}

pub struct Aead {
    alg: CipherAlg,
    key: LessSafeKey,
    /// Multi-part sessions only: where each message's streaming state comes from.
    pub(crate) streams: Option<StreamSource>,
    /// ChaCha20-Poly1305 with IPsec-MB: the key, passed per message (see `crate::imb`).
    #[cfg(ocf_ipsec_mb)]
    imb_key: Option<ocf::Key>,
    /// ChaCha20-Poly1305 without IPsec-MB: libcrypto contexts, keyed once.
    libcrypto: Option<ChachaContexts>,
}

struct ChachaContexts {
    seal: Mutex<ChachaCtx>,
    open: Mutex<ChachaCtx>,
}

impl Aead {
    /// `multipart`: keep a pool of keyed contexts for streaming messages (see `crate::stream`).
    pub fn new(alg: CipherAlg, key: &[u8], multipart: bool) -> Result<Aead, Error> {
        let lib_alg = match (alg, key.len()) {
            (CipherAlg::AesGcm, 16) => &aead::AES_128_GCM,
            (CipherAlg::AesGcm, 24) => &aead::AES_192_GCM,
            (CipherAlg::AesGcm, 32) => &aead::AES_256_GCM,
            (CipherAlg::ChaCha20Poly1305, 32) => &aead::CHACHA20_POLY1305,
            _ => return Err(Error::UnsupportedCipher(alg)),
        };
        let unbound = UnboundKey::new(lib_alg, key)
            .map_err(|_| Error::DriverFailure("soft: aws-lc-rs rejected the AEAD key"))?;
        let chacha = alg == CipherAlg::ChaCha20Poly1305;
        #[cfg(ocf_ipsec_mb)]
        let imb_key = (chacha && crate::imb::available()).then(|| ocf::Key::new(key));
        #[cfg(ocf_ipsec_mb)]
        let with_libcrypto = chacha && imb_key.is_none();
        #[cfg(not(ocf_ipsec_mb))]
        let with_libcrypto = chacha;
        let libcrypto = match with_libcrypto {
            true => Some(ChachaContexts {
                seal: Mutex::new(ChachaCtx::keyed(key)?),
                open: Mutex::new(ChachaCtx::keyed(key)?),
            }),
            false => None,
        };
        let streams = multipart.then(|| match alg {
            CipherAlg::AesGcm => StreamSource::Gcm(Arc::new(Pool::new(key))),
            _ => StreamSource::Chacha(Arc::new(Pool::new(key))),
        });
        Ok(Aead {
            alg,
            key: LessSafeKey::new(unbound),
            streams,
            #[cfg(ocf_ipsec_mb)]
            imb_key,
            libcrypto,
        })
    }

    pub fn alg(&self) -> CipherAlg {
        self.alg
    }

    /// The key for IPsec-MB, if it runs messages of `len` bytes.
    #[cfg(ocf_ipsec_mb)]
    fn imb_key(&self, len: usize) -> Option<&[u8]> {
        self.imb_key.as_ref().filter(|_| len >= crate::imb::MIN_LEN).map(|k| k.as_bytes())
    }

    /// The libcrypto context for a message of `len` bytes, if that is the faster path and
    /// the context is free.
    fn libcrypto_ctx(
        &self,
        len: usize,
        pick: fn(&ChachaContexts) -> &Mutex<ChachaCtx>,
    ) -> Option<std::sync::MutexGuard<'_, ChachaCtx>> {
        let ctxs = self.libcrypto.as_ref().filter(|_| len >= CHACHA_LIBCRYPTO_MIN_LEN)?;
        pick(ctxs).try_lock().ok()
    }

    /// Encrypts `data` in place and writes the 16-byte tag.
    pub fn seal(&self, nonce: &[u8], aad: &[u8], data: &mut [u8], tag: &mut [u8]) -> Result<(), Error> {
        #[cfg(ocf_ipsec_mb)]
        if let Some(k) = self.imb_key(data.len()) {
            return crate::imb::seal(k, nonce, aad, data, tag);
        }
        if let Some(mut ctx) = self.libcrypto_ctx(data.len(), |c| &c.seal) {
            return ctx.seal(nonce, aad, data, tag);
        }
        let nonce = Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| Error::BadIvLength { expected: 12, got: nonce.len() })?;
        let t = self
            .key
            .seal_in_place_separate_tag(nonce, aead::Aad::from(aad), data)
            .map_err(|_| Error::DriverFailure("soft: AEAD seal failed"))?;
        tag.copy_from_slice(t.as_ref());
        Ok(())
    }

    /// Verifies `tag` and decrypts `data` in place. On failure `data` is zeroed so that no
    /// unauthenticated plaintext is released (both libraries decrypt before they compare).
    pub fn open(&self, nonce: &[u8], aad: &[u8], data: &mut [u8], tag: &[u8]) -> Result<(), Error> {
        let result = self.open_unchecked(nonce, aad, data, tag);
        if result.is_err() {
            data.fill(0);
        }
        result
    }

    fn open_unchecked(&self, nonce: &[u8], aad: &[u8], data: &mut [u8], tag: &[u8]) -> Result<(), Error> {
        #[cfg(ocf_ipsec_mb)]
        if let Some(k) = self.imb_key(data.len()) {
            return crate::imb::open(k, nonce, aad, data, tag);
        }
        if let Some(mut ctx) = self.libcrypto_ctx(data.len(), |c| &c.open) {
            return ctx.open(nonce, aad, data, tag);
        }
        let nonce = Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| Error::BadIvLength { expected: 12, got: nonce.len() })?;
        self.key
            .open_in_place_separate_tag(nonce, aead::Aad::from(aad), tag, data)
            .map(|_| ())
            .map_err(|_| Error::AuthFailed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// Every ChaCha20-Poly1305 path of a session, each forced: aws-lc-rs alone, libcrypto
    /// (from its threshold), and IPsec-MB (from its threshold) where it is built.
    fn chacha_paths(key: &[u8]) -> Vec<(&'static str, Aead)> {
        let plain = |libcrypto: bool| {
            let mut a = Aead::new(CipherAlg::ChaCha20Poly1305, key, false).unwrap();
            #[cfg(ocf_ipsec_mb)]
            {
                a.imb_key = None;
            }
            a.libcrypto = libcrypto.then(|| ChachaContexts {
                seal: Mutex::new(ChachaCtx::keyed(key).unwrap()),
                open: Mutex::new(ChachaCtx::keyed(key).unwrap()),
            });
            a
        };
        #[allow(unused_mut)]
        let mut paths = vec![("aws-lc-rs", plain(false)), ("libcrypto", plain(true))];
        #[cfg(ocf_ipsec_mb)]
        {
            let a = Aead::new(CipherAlg::ChaCha20Poly1305, key, false).unwrap();
            assert!(a.imb_key.is_some(), "built with IPsec-MB, which must run here");
            paths.push(("IPsec-MB", a));
        }
        paths
    }

    /// RFC 8439 §2.8.2's key, nonce, AAD and plaintext (repeated past every threshold: a
    /// stream cipher, so the RFC's ciphertext is the prefix) through every path; all paths
    /// give the same ciphertext and tag; each opens it; a forged tag fails on each and
    /// wipes the buffer.
    #[test]
    fn every_chacha_path_agrees_with_rfc8439() {
        let key = hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f");
        let nonce = hex("070000004041424344454647");
        let aad = hex("50515253c0c1c2c3c4c5c6c7");
        let sunscreen: &[u8] = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
        let want_ct = hex(
            "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b\
             1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc\
             3ff4def08e4b7a9de576d26586cec64b6116",
        );
        let want_tag = hex("1ae10b594f09e26a7e902ecbd0600691");
        let pt: Vec<u8> = sunscreen.iter().cycle().take(CHACHA_LIBCRYPTO_MIN_LEN + 100).copied().collect();
        let mut sealed: Option<(Vec<u8>, [u8; 16])> = None;
        for (name, a) in chacha_paths(&key) {
            // The RFC message itself (114 bytes: aws-lc-rs on every path).
            let mut short = sunscreen.to_vec();
            let mut tag = [0u8; 16];
            a.seal(&nonce, &aad, &mut short, &mut tag).unwrap();
            assert_eq!((&short, &tag[..]), (&want_ct, &want_tag[..]), "{name}: RFC 8439 2.8.2");
            // The long message, on this path.
            let mut buf = pt.clone();
            a.seal(&nonce, &aad, &mut buf, &mut tag).unwrap();
            assert_eq!(buf[..want_ct.len()], want_ct[..], "{name}: keystream");
            match &sealed {
                None => sealed = Some((buf.clone(), tag)),
                Some(first) => assert_eq!(first, &(buf.clone(), tag), "{name} agrees with aws-lc-rs"),
            }
            let mut b = buf.clone();
            a.open(&nonce, &aad, &mut b, &tag).unwrap();
            assert_eq!(b, pt, "{name}: round trip");
            let mut b = buf.clone();
            let mut bad = tag;
            bad[15] ^= 1;
            assert_eq!(a.open(&nonce, &aad, &mut b, &bad), Err(Error::AuthFailed), "{name}");
            assert!(b.iter().all(|x| *x == 0), "{name}: a forged message is wiped");
        }
    }

    /// Lengths around every block, keystream and threshold edge, with and without AAD:
    /// every path seals to what aws-lc-rs seals, and opens it.
    #[test]
    fn every_chacha_path_agrees_at_every_edge() {
        let key: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(37) ^ 0x5c).collect();
        let paths = chacha_paths(&key);
        let lens =
            [0, 1, 15, 16, 17, 63, 64, 65, 255, 256, 511, 512, 513, 1000, 1024, 2047, 2048, 2049, 4097, 8195];
        for len in lens {
            for aad_len in [0usize, 8, 12, 13, 33] {
                let nonce = [len as u8, aad_len as u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
                let aad: Vec<u8> = (0..aad_len).map(|i| i as u8 ^ 0xa5).collect();
                let pt: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
                let mut want = (pt.clone(), [0u8; 16]);
                paths[0].1.seal(&nonce, &aad, &mut want.0, &mut want.1).unwrap();
                for (name, a) in &paths[1..] {
                    let mut got = (pt.clone(), [0u8; 16]);
                    a.seal(&nonce, &aad, &mut got.0, &mut got.1).unwrap();
                    assert_eq!(got, want, "{name}: {len} B, {aad_len} B AAD");
                    a.open(&nonce, &aad, &mut got.0, &got.1).unwrap();
                    assert_eq!(got.0, pt, "{name}: {len} B, {aad_len} B AAD, round trip");
                }
            }
        }
    }
}
