//! The algorithms cryptotest knows, by their openssl-style names: how to make an ocf
//! session for each, what a request looks like, and which `openssl speed` arguments measure
//! the same thing.

use ocf::{CipherAlg, CompAlg, DigestAlg, MacAlg, SessionParams};

/// What kind of work an algorithm does; it decides the request layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A plain cipher (no tag).
    Cipher,
    /// AEAD: a 16-byte tag.
    Aead,
    /// Encrypt-then-MAC, as ESP does it.
    CipherThenMac,
    /// An unkeyed digest.
    Digest,
    /// A MAC.
    Mac,
    /// Compression: `--decrypt` decompresses. The result goes out of place, and an input
    /// that does not shrink is answered "send the original" (counted as done: IPComp's
    /// outcome for it).
    Compress,
}

impl Kind {
    /// Whether `--decrypt` applies: ciphers decrypt, compression decompresses.
    pub fn ciphers(self) -> bool {
        matches!(self, Kind::Cipher | Kind::Aead | Kind::CipherThenMac | Kind::Compress)
    }
}

/// The bytes a compression case works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Data {
    /// Text-like: words of a small vocabulary (compresses to about half).
    Text,
    /// Random bytes (never shrink).
    Random,
}

/// One algorithm as cryptotest names and measures it.
#[derive(Clone, Debug)]
pub struct Alg {
    pub name: &'static str,
    pub kind: Kind,
    pub cipher: Option<CipherAlg>,
    cipher_key_len: usize,
    pub digest: Option<DigestAlg>,
    /// Truncated MAC length for cipher+MAC (ESP's HMAC-SHA1-96 and HMAC-SHA256-128).
    tag_len: Option<usize>,
    /// `openssl speed` arguments for the same operation (`-decrypt` is added for decrypt),
    /// if openssl has one.
    pub openssl: Option<&'static [&'static str]>,
    /// Compression: the algorithm and the data it is measured on.
    pub comp: Option<(CompAlg, Data)>,
}

/// What openssl speed 3.0 measures differently, where it matters for the ratio.
pub fn openssl_caveat(alg: &Alg) -> Option<&'static str> {
    match (alg.cipher, alg.kind) {
        (Some(CipherAlg::AesCbc | CipherAlg::AesCtr), Kind::Cipher)
        | (Some(CipherAlg::ChaCha20Poly1305), _) => Some(
            "openssl speed streams one context through every buffer (no new IV, nonce or tag per \
             buffer); cryptotest makes each request a message of its own, as ESP does, so small sizes \
             favour openssl",
        ),
        (_, Kind::CipherThenMac) => Some(
            "openssl's stitched cipher is TLS's MAC-then-encrypt, ours ESP's encrypt-then-MAC: the same \
             work per byte, different framing",
        ),
        _ => None,
    }
}

impl Alg {
    /// The session parameters, with fixed keys (throughput does not depend on the key).
    /// Key bytes all differ, so 3DES's three subkeys are distinct as it requires.
    pub fn params(&self) -> SessionParams {
        let ckey: Vec<u8> = (0..self.cipher_key_len).map(|i| 0x4b ^ (i as u8).wrapping_mul(29)).collect();
        let mkey = [0x6d; 20];
        match (self.kind, self.cipher, self.digest) {
            (Kind::Cipher, Some(c), _) => SessionParams::cipher(c, &ckey[..]),
            (Kind::Aead, Some(c), _) => SessionParams::aead(c, &ckey[..]),
            (Kind::CipherThenMac, Some(c), Some(d)) => {
                let p = SessionParams::cipher_then_mac(c, &ckey[..], MacAlg::Hmac(d), &mkey[..]);
                match self.tag_len {
                    Some(n) => p.with_tag_len(n),
                    None => p,
                }
            }
            (Kind::Mac, _, Some(d)) => SessionParams::hmac(d, &mkey[..]),
            (Kind::Compress, _, _) if self.comp.is_some() => {
                SessionParams::compress(self.comp.map_or(CompAlg::Deflate, |c| c.0))
            }
            (_, _, Some(d)) => SessionParams::digest(d),
            // The table below gives every entry what its kind needs.
            _ => unreachable!("algorithm table entry {} is incomplete", self.name),
        }
    }

    /// Bytes the payload must be a multiple of (1: any length).
    pub fn block_len(&self) -> usize {
        self.cipher.map_or(1, |c| c.block_len())
    }

    /// IV or nonce length.
    pub fn iv_len(&self) -> usize {
        self.cipher.map_or(0, |c| c.iv_len())
    }

    /// A one-line description for `--list`.
    pub fn describe(&self) -> String {
        match self.kind {
            Kind::Cipher => "cipher".into(),
            Kind::Aead => "AEAD, 16-byte tag".into(),
            Kind::CipherThenMac => {
                format!("encrypt-then-MAC as ESP, {}-byte tag", self.params().tag_len())
            }
            Kind::Digest => "digest".into(),
            Kind::Mac => "MAC".into(),
            Kind::Compress => match self.comp {
                Some((_, Data::Random)) => "compression (raw DEFLATE) of random bytes".into(),
                _ => "compression (raw DEFLATE) of text-like bytes".into(),
            },
        }
    }
}

const fn cipher(name: &'static str, c: CipherAlg, key: usize, openssl: &'static [&'static str]) -> Alg {
    Alg {
        name,
        kind: Kind::Cipher,
        cipher: Some(c),
        cipher_key_len: key,
        digest: None,
        tag_len: None,
        openssl: Some(openssl),
        comp: None,
    }
}

const fn aead(name: &'static str, c: CipherAlg, key: usize, openssl: &'static [&'static str]) -> Alg {
    Alg { kind: Kind::Aead, ..cipher(name, c, key, openssl) }
}

const fn eta(
    name: &'static str,
    c: CipherAlg,
    key: usize,
    d: DigestAlg,
    tag_len: usize,
    openssl: Option<&'static [&'static str]>,
) -> Alg {
    Alg {
        kind: Kind::CipherThenMac,
        digest: Some(d),
        tag_len: Some(tag_len),
        openssl,
        ..cipher(name, c, key, &[])
    }
}

const fn digest(name: &'static str, d: DigestAlg, openssl: &'static [&'static str]) -> Alg {
    Alg {
        name,
        kind: Kind::Digest,
        cipher: None,
        cipher_key_len: 0,
        digest: Some(d),
        tag_len: None,
        openssl: Some(openssl),
        comp: None,
    }
}

const fn mac(name: &'static str, d: DigestAlg, openssl: &'static [&'static str]) -> Alg {
    Alg { kind: Kind::Mac, ..digest(name, d, openssl) }
}

const fn compress(name: &'static str, c: CompAlg, data: Data) -> Alg {
    Alg {
        name,
        kind: Kind::Compress,
        cipher: None,
        cipher_key_len: 0,
        digest: None,
        tag_len: None,
        openssl: None,
        comp: Some((c, data)),
    }
}

/// Every algorithm, in `--list` order.
pub fn all() -> Vec<Alg> {
    use CipherAlg::*;
    use DigestAlg::*;
    vec![
        aead("aes-128-gcm", AesGcm, 16, &["-aead", "-evp", "aes-128-gcm"]),
        aead("aes-192-gcm", AesGcm, 24, &["-aead", "-evp", "aes-192-gcm"]),
        aead("aes-256-gcm", AesGcm, 32, &["-aead", "-evp", "aes-256-gcm"]),
        aead("chacha20-poly1305", ChaCha20Poly1305, 32, &["-aead", "-evp", "chacha20-poly1305"]),
        cipher("aes-128-cbc", AesCbc, 16, &["-evp", "aes-128-cbc"]),
        cipher("aes-192-cbc", AesCbc, 24, &["-evp", "aes-192-cbc"]),
        cipher("aes-256-cbc", AesCbc, 32, &["-evp", "aes-256-cbc"]),
        cipher("aes-128-ctr", AesCtr, 16, &["-evp", "aes-128-ctr"]),
        cipher("aes-192-ctr", AesCtr, 24, &["-evp", "aes-192-ctr"]),
        cipher("aes-256-ctr", AesCtr, 32, &["-evp", "aes-256-ctr"]),
        cipher("des-ede3-cbc", TdesCbc, 24, &["-evp", "des-ede3-cbc"]),
        // openssl's stitched aes-*-cbc-hmac-sha* ciphers do the same work (CBC and HMAC
        // over every byte) as TLS does it, MAC-then-encrypt; ours is ESP's encrypt-then-MAC.
        eta("aes-128-cbc-hmac-sha1", AesCbc, 16, Sha1, 12, Some(&["-evp", "aes-128-cbc-hmac-sha1"])),
        eta("aes-256-cbc-hmac-sha1", AesCbc, 32, Sha1, 12, Some(&["-evp", "aes-256-cbc-hmac-sha1"])),
        eta("aes-128-cbc-hmac-sha256", AesCbc, 16, Sha256, 16, Some(&["-evp", "aes-128-cbc-hmac-sha256"])),
        eta("aes-256-cbc-hmac-sha256", AesCbc, 32, Sha256, 16, Some(&["-evp", "aes-256-cbc-hmac-sha256"])),
        eta("des-ede3-cbc-hmac-sha1", TdesCbc, 24, Sha1, 12, None),
        digest("md5", Md5, &["-evp", "md5"]),
        digest("sha1", Sha1, &["-evp", "sha1"]),
        digest("sha256", Sha256, &["-evp", "sha256"]),
        digest("sha384", Sha384, &["-evp", "sha384"]),
        digest("sha512", Sha512, &["-evp", "sha512"]),
        mac("hmac-md5", Md5, &["-hmac", "md5"]),
        mac("hmac-sha1", Sha1, &["-hmac", "sha1"]),
        mac("hmac-sha256", Sha256, &["-hmac", "sha256"]),
        mac("hmac-sha384", Sha384, &["-hmac", "sha384"]),
        mac("hmac-sha512", Sha512, &["-hmac", "sha512"]),
        // IPComp's DEFLATE (RFC 3174) on compressible and on incompressible packets.
        compress("deflate", CompAlg::Deflate, Data::Text),
        compress("deflate-random", CompAlg::Deflate, Data::Random),
        // The framework alone: a cipher that does nothing, through the chosen driver.
        Alg { openssl: None, ..cipher("null", Null, 0, &[]) },
    ]
}

/// The algorithms measured when `-a` is not given: what IPsec and TLS mostly use, and the
/// 3DES+SHA1 of the tables in Leffler's "Cryptographic Device Support for FreeBSD".
pub const MAIN: [&str; 6] =
    ["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305", "aes-128-cbc", "aes-128-cbc-hmac-sha1", "sha256"];

/// Looks up `-a` values (`all` expands to every algorithm). The error lists the valid names.
pub fn resolve(names: &[String]) -> Result<Vec<Alg>, String> {
    let table = all();
    let mut out: Vec<Alg> = Vec::new();
    for name in names {
        let name = name.trim().to_ascii_lowercase();
        let found: Vec<Alg> = if name == "all" {
            table.clone()
        } else {
            match table.iter().find(|a| a.name == name) {
                Some(a) => vec![a.clone()],
                None => {
                    let valid: Vec<&str> = table.iter().map(|a| a.name).collect();
                    return Err(format!(
                        "unknown algorithm `{name}`\nvalid algorithms: {}, all",
                        valid.join(", ")
                    ));
                }
            }
        };
        for a in found {
            if !out.iter().any(|o| o.name == a.name) {
                out.push(a);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_makes_valid_session_parameters() {
        for a in all() {
            a.params().validate().unwrap_or_else(|e| panic!("{}: {e}", a.name));
        }
    }

    #[test]
    fn names_resolve_and_unknown_names_list_the_valid_ones() {
        let got = resolve(&["AES-128-GCM".into(), "sha1".into(), "aes-128-gcm".into()]).unwrap();
        assert_eq!(got.iter().map(|a| a.name).collect::<Vec<_>>(), ["aes-128-gcm", "sha1"]);
        assert_eq!(resolve(&["all".into()]).unwrap().len(), all().len());
        let err = resolve(&["rot13".into()]).unwrap_err();
        assert!(err.contains("unknown algorithm `rot13`") && err.contains("chacha20-poly1305"), "{err}");
        for m in MAIN {
            assert!(resolve(&[m.into()]).is_ok(), "{m}");
        }
    }
}
