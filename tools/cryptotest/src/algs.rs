//! The algorithms cryptotest knows, by their openssl-style names: how to make an ocf
//! session for each, what a request looks like, and which `openssl speed` arguments measure
//! the same thing.
//!
//! Three families share the table: the symmetric ones and `random`, measured in bytes per
//! second for each operand size of `-s`, and the public-key ones ([`PublicKeyAlg`]), named
//! as `openssl speed` names them (`rsa2048`, `ecdsap256`, `ecdhx25519`, …) and measured in
//! operations per second for each of their operations (sign and verify, derive,
//! encapsulate and decapsulate); their keys are made per case (`crate::pubkey`).

use ocf::{AsymAlg, CipherAlg, CompAlg, Curve, DigestAlg, MacAlg, ModpGroup, Op, SessionParams, SigEncoding};

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
    /// Random bytes ([`Op::Random`]), written over the request's buffer in place.
    Random,
    /// A public-key algorithm ([`Alg::public_key`]): operations per second, not bytes.
    PublicKey,
}

impl Kind {
    /// Whether `--decrypt` applies: ciphers decrypt, compression decompresses.
    pub fn ciphers(self) -> bool {
        matches!(self, Kind::Cipher | Kind::Aead | Kind::CipherThenMac | Kind::Compress)
    }
}

/// A public-key case: what ocf does, with which key size, which operations are measured,
/// and on what input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublicKeyAlg {
    pub alg: AsymAlg,
    /// The key size in bits: the RSA modulus `generate_key` makes; the curve's, group's or
    /// parameter set's for the others (for the listing and the caveats).
    pub bits: usize,
    /// The operations measured, in the order of `openssl speed`'s columns (sign, verify).
    pub ops: &'static [Op],
    /// The length of the message a signature case signs: `openssl speed` 3.0's (36 bytes
    /// for RSA, 20 for ECDSA and EdDSA; `apps/speed.c`, `RSA_sign_loop` and its
    /// neighbours). 0 where nothing is signed.
    pub message_len: usize,
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
    /// A public-key algorithm (with [`Kind::PublicKey`]).
    pub public_key: Option<PublicKeyAlg>,
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
    .or_else(|| public_key_caveat(alg))
}

/// What `openssl speed` 3.0 does differently for a public-key algorithm or random bytes.
fn public_key_caveat(alg: &Alg) -> Option<&'static str> {
    if alg.kind == Kind::Random {
        return Some(
            "openssl speed rand draws from OpenSSL's own DRBG in user space (seeded once); ocf's \
             drivers draw from their source per request (soft: the kernel's getrandom)",
        );
    }
    match alg.public_key?.alg {
        AsymAlg::RsaPkcs1 { .. } => Some(
            "openssl speed pads its 36-byte input as it is (EVP_PKEY_sign, no digest); ocf hashes \
             the same 36 bytes with SHA-256 and signs the DigestInfo: one SHA-256 block more per \
             signature and verification",
        ),
        AsymAlg::Ecdsa { .. } => Some(
            "openssl speed signs its 20-byte input as the digest (EVP_PKEY_sign); ocf hashes the \
             same 20 bytes first (SHA-256 or SHA-384): one hash block more per operation",
        ),
        _ => None,
    }
}

impl Alg {
    /// The session parameters, with fixed keys (throughput does not depend on the key).
    /// Key bytes all differ, so 3DES's three subkeys are distinct as it requires. `None`
    /// for a public-key algorithm: its sessions hold keys made per case
    /// (`crate::pubkey::Keys::params`).
    pub fn params(&self) -> Option<SessionParams> {
        let ckey: Vec<u8> = (0..self.cipher_key_len).map(|i| 0x4b ^ (i as u8).wrapping_mul(29)).collect();
        let mkey = [0x6d; 20];
        Some(match (self.kind, self.cipher, self.digest) {
            (Kind::PublicKey, _, _) => return None,
            (Kind::Random, _, _) => SessionParams::random(),
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
        })
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
                let tag = self.params().map_or(0, |p| p.tag_len());
                format!("encrypt-then-MAC as ESP, {tag}-byte tag")
            }
            Kind::Digest => "digest".into(),
            Kind::Mac => "MAC".into(),
            Kind::Compress => match self.comp {
                Some((_, Data::Random)) => "compression (raw DEFLATE) of random bytes".into(),
                _ => "compression (raw DEFLATE) of text-like bytes".into(),
            },
            Kind::Random => "random bytes (MB/s)".into(),
            Kind::PublicKey => match self.public_key {
                Some(pk) => {
                    let ops: Vec<&str> = pk.ops.iter().map(|o| crate::units::per_second(o.name())).collect();
                    format!("{} ({})", pk.alg, ops.join(", "))
                }
                None => "public key".into(),
            },
        }
    }

    /// What one row of this algorithm's table measures: an operand size for the bytes-per-
    /// second families, an operation for the public-key ones.
    pub fn per_op(&self) -> bool {
        self.kind == Kind::PublicKey
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
        public_key: None,
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
        public_key: None,
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
        public_key: None,
    }
}

/// A public-key entry: `name` is `openssl speed`'s where it has one (`openssl`).
const fn pk(
    name: &'static str,
    alg: AsymAlg,
    bits: usize,
    ops: &'static [Op],
    message_len: usize,
    openssl: Option<&'static [&'static str]>,
) -> Alg {
    Alg {
        name,
        kind: Kind::PublicKey,
        cipher: None,
        cipher_key_len: 0,
        digest: None,
        tag_len: None,
        openssl,
        comp: None,
        public_key: Some(PublicKeyAlg { alg, bits, ops, message_len }),
    }
}

const SIGN_VERIFY: &[Op] = &[Op::Sign, Op::Verify];
const DERIVE: &[Op] = &[Op::Derive];

/// The public-key algorithms, in `--list` order: `openssl speed`'s names and, where it has
/// none, ocf's own (`ffdh*` are both).
pub fn public_key() -> Vec<Alg> {
    use DigestAlg::{Sha256, Sha384};
    let rsa = AsymAlg::RsaPkcs1 { hash: Sha256 };
    let ecdsa = |curve, hash| AsymAlg::Ecdsa { curve, hash, encoding: SigEncoding::Der };
    vec![
        pk("rsa2048", rsa, 2048, SIGN_VERIFY, 36, Some(&["rsa2048"])),
        pk("rsa3072", rsa, 3072, SIGN_VERIFY, 36, Some(&["rsa3072"])),
        pk("rsa4096", rsa, 4096, SIGN_VERIFY, 36, Some(&["rsa4096"])),
        pk("ecdsap256", ecdsa(Curve::P256, Sha256), 256, SIGN_VERIFY, 20, Some(&["ecdsap256"])),
        pk("ecdsap384", ecdsa(Curve::P384, Sha384), 384, SIGN_VERIFY, 20, Some(&["ecdsap384"])),
        pk("ecdhp256", AsymAlg::Ecdh(Curve::P256), 256, DERIVE, 0, Some(&["ecdhp256"])),
        pk("ecdhp384", AsymAlg::Ecdh(Curve::P384), 384, DERIVE, 0, Some(&["ecdhp384"])),
        pk("ecdhx25519", AsymAlg::X25519, 253, DERIVE, 0, Some(&["ecdhx25519"])),
        pk("ed25519", AsymAlg::Ed25519, 253, SIGN_VERIFY, 20, Some(&["ed25519"])),
        pk("ffdh2048", AsymAlg::Ffdh(ModpGroup::Modp2048), 2048, DERIVE, 0, Some(&["ffdh2048"])),
        pk("ffdh3072", AsymAlg::Ffdh(ModpGroup::Modp3072), 3072, DERIVE, 0, Some(&["ffdh3072"])),
        // The seed's CRK_MOD_EXP: a MODP group 14 Diffie-Hellman step as a bare modular
        // exponentiation (the peer's value to our exponent, mod the 2048-bit prime).
        pk("modexp2048", AsymAlg::ModExp, 2048, &[Op::ModExp], 0, None),
        pk("mlkem768", AsymAlg::MlKem768, 768, &[Op::Encapsulate, Op::Decapsulate], 0, None),
    ]
}

/// `random`: random bytes from the driver's source.
fn random() -> Alg {
    Alg {
        name: "random",
        kind: Kind::Random,
        cipher: None,
        cipher_key_len: 0,
        digest: None,
        tag_len: None,
        openssl: Some(&["rand"]),
        comp: None,
        public_key: None,
    }
}

/// Every algorithm, in `--list` order: the symmetric ones, `random`, the public-key ones.
pub fn all() -> Vec<Alg> {
    let mut v = symmetric();
    v.push(random());
    v.extend(public_key());
    v
}

/// The symmetric algorithms (and compression), in `--list` order.
pub fn symmetric() -> Vec<Alg> {
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
            match a.params() {
                Some(p) => p.validate().unwrap_or_else(|e| panic!("{}: {e}", a.name)),
                None => assert!(a.public_key.is_some() && a.per_op(), "{}", a.name),
            }
        }
    }

    /// The public-key names are `openssl speed`'s (3.0), and each one's operations are what
    /// its ocf algorithm does.
    #[test]
    fn public_key_names_are_openssl_speeds_and_ops_fit_the_algorithm() {
        let names: Vec<&str> = public_key().iter().map(|a| a.name).collect();
        assert_eq!(
            names,
            [
                "rsa2048",
                "rsa3072",
                "rsa4096",
                "ecdsap256",
                "ecdsap384",
                "ecdhp256",
                "ecdhp384",
                "ecdhx25519",
                "ed25519",
                "ffdh2048",
                "ffdh3072",
                "modexp2048",
                "mlkem768"
            ]
        );
        for a in public_key() {
            let pk = a.public_key.unwrap();
            if let Some(args) = a.openssl {
                assert_eq!(args, [a.name], "openssl speed's name is ours");
            }
            let kind = pk.alg.kind();
            for op in pk.ops {
                let fits = match kind {
                    ocf::asym::AsymKind::Signature => matches!(op, Op::Sign | Op::Verify),
                    ocf::asym::AsymKind::Agreement => *op == Op::Derive,
                    ocf::asym::AsymKind::Kem => matches!(op, Op::Encapsulate | Op::Decapsulate),
                    ocf::asym::AsymKind::ModExp => *op == Op::ModExp,
                };
                assert!(fits, "{}: {op:?}", a.name);
            }
            assert_eq!(pk.message_len > 0, kind == ocf::asym::AsymKind::Signature, "{}", a.name);
        }
        let random = resolve(&["random".into()]).unwrap().remove(0);
        assert_eq!((random.kind, random.params().map(|p| p.mode.name())), (Kind::Random, Some("random")));
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
