//! The provider's algorithms give what OpenSSL's default provider gives, as `openssl` (Debian's
//! OpenSSL 3) and libcrypto's EVP API see them.
//!
//! Each command runs twice: once with `-provider-path DIR -provider ocf -propquery
//! provider=ocf` (ocf alone: nothing can fall back to the default provider) and once with no
//! provider options (the default provider), and the two results must be identical; where a
//! standard publishes a known answer, ocf must give it too. Inputs, keys and IVs come from a
//! small xorshift generator seeded per case, so a failure names a case that can be rerun.
//!
//! - `list`: every algorithm the provider offers is listed as ocf's.
//! - `enc`: AES-CBC/CTR and 3DES-CBC ciphertexts, decryption across providers, `-nopad`,
//!   bad padding and wrong keys.
//! - `dgst`, `mac`: SHA-1, SHA-2, MD5 digests and HMACs.
//! - AEAD (AES-GCM, ChaCha20-Poly1305) through EVP with AAD and forged tags: `openssl enc`
//!   refuses AEAD ciphers, so `evp_aead.py` (Python's ctypes over libcrypto) drives EVP.
//! - `speed` runs over ocf (with the default provider beside it for the DRBG speed needs).

use std::path::Path;
use std::process::Command;

mod common;
use common::module_dir;

/// Which provider an `openssl` command runs with.
#[derive(Clone, Copy, Debug)]
enum Prov<'a> {
    /// ocf alone, from this module directory.
    Ocf(&'a Path),
    /// ocf alone, on this driver (`OCF_DRIVER`), e.g. a simulated card.
    OcfOn(&'a Path, &'static str),
    /// OpenSSL's default provider (no provider options).
    Default,
}

/// What an `openssl` command gave: success, its stdout, and stdout and stderr together.
struct Out {
    ok: bool,
    stdout: String,
    text: String,
}

/// `openssl CMD [-provider-path DIR -provider ocf -propquery provider=ocf] ARGS...`
///
/// `-propquery` matters: without it OpenSSL 3.0's `dgst -sha256` takes libcrypto's built-in
/// legacy digest (EVP_get_digestbyname) and never calls a provider, ocf loaded alone or not;
/// with a property query the app fetches the digest from the providers.
fn openssl(prov: Prov, cmd: &str, args: &[&str]) -> Out {
    let mut c = Command::new("openssl");
    c.arg(cmd).env_remove("OCF_DRIVER");
    if let Prov::Ocf(dir) | Prov::OcfOn(dir, _) = prov {
        c.arg("-provider-path").arg(dir).args(["-provider", "ocf", "-propquery", "provider=ocf"]);
    }
    if let Prov::OcfOn(_, driver) = prov {
        c.env("OCF_DRIVER", driver);
    }
    let out = c.args(args).output().expect("openssl runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let text = stdout.clone() + &String::from_utf8_lossy(&out.stderr);
    Out { ok: out.status.success(), stdout, text }
}

/// xorshift64* (Vigna), seeded from the case's name with FNV-1a: deterministic test data
/// without a dependency.
struct Rng(u64);

impl Rng {
    fn new(case: &str) -> Rng {
        let seed = case
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        Rng(seed | 1)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            v.extend_from_slice(&self.0.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Why two byte strings differ, without printing megabytes.
fn same_bytes(what: &str, a: &[u8], b: &[u8]) {
    if a != b {
        let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
        panic!("{what}: {} and {} bytes, first difference at byte {at}", a.len(), b.len());
    }
}

/// 3 MiB and 5 bytes: many of `openssl`'s 8 KiB reads, and a partial block at the end.
const BIG: usize = 3 * 1024 * 1024 + 5;

#[test]
fn list_shows_every_algorithm() {
    let dir = module_dir();
    let expected: [(&str, &[&str]); 3] = [
        (
            "-cipher-algorithms",
            &[
                "AES-128-CBC",
                "AES-192-CBC",
                "AES-256-CBC",
                "AES-128-CTR",
                "AES-192-CTR",
                "AES-256-CTR",
                "AES-128-GCM",
                "AES-256-GCM",
                "ChaCha20-Poly1305",
                "DES-EDE3-CBC",
            ],
        ),
        ("-digest-algorithms", &["SHA1", "SHA2-256", "SHA2-384", "SHA2-512", "MD5"]),
        ("-mac-algorithms", &["HMAC"]),
    ];
    for (option, names) in expected {
        let out = openssl(Prov::Ocf(dir.path()), "list", &[option]);
        assert!(out.ok, "{}", out.text);
        // Provided algorithms are listed as `  { OID, NAME, ALIAS } @ ocf` or `  NAME @ ocf`;
        // match whole names, so that AES-128-CBC is not found in AES-128-CBC-HMAC-SHA1.
        let listed: Vec<String> = out
            .stdout
            .lines()
            .filter_map(|l| l.split_once(" @ ").filter(|(_, p)| p.trim() == "ocf").map(|(n, _)| n))
            .flat_map(|n| n.trim().trim_start_matches('{').trim_end_matches('}').split(','))
            .map(|n| n.trim().to_ascii_lowercase())
            .collect();
        let missing: Vec<&str> =
            names.iter().copied().filter(|n| !listed.contains(&n.to_ascii_lowercase())).collect();
        assert!(missing.is_empty(), "openssl list {option}: {missing:?} not listed as ocf's:\n{}", out.text);
    }
}

/// A cipher `openssl enc` takes.
struct Cipher {
    name: &'static str,
    key: usize,
    iv: usize,
    /// The block size for CBC (padding applies); `None` for CTR.
    block: Option<usize>,
    lengths: &'static [usize],
}

/// Every length for one cipher of each kind; fewer for the rest (each length costs several
/// process starts).
const ENC_ALL: &[usize] = &[0, 1, 15, 16, 17, 31, 32, 33, 1000, 4096, BIG];
const ENC_FEW: &[usize] = &[0, 33, 4096];

const ENC_CIPHERS: [Cipher; 7] = [
    Cipher { name: "aes-128-cbc", key: 16, iv: 16, block: Some(16), lengths: ENC_ALL },
    Cipher { name: "aes-192-cbc", key: 24, iv: 16, block: Some(16), lengths: ENC_FEW },
    Cipher { name: "aes-256-cbc", key: 32, iv: 16, block: Some(16), lengths: ENC_FEW },
    Cipher { name: "aes-128-ctr", key: 16, iv: 16, block: None, lengths: ENC_ALL },
    Cipher { name: "aes-192-ctr", key: 24, iv: 16, block: None, lengths: ENC_FEW },
    Cipher { name: "aes-256-ctr", key: 32, iv: 16, block: None, lengths: ENC_FEW },
    Cipher { name: "des-ede3-cbc", key: 24, iv: 8, block: Some(8), lengths: ENC_ALL },
];

/// A cipher with its key and IV (hex), as `openssl enc` takes them.
struct Keyed<'a> {
    c: &'a Cipher,
    key: String,
    iv: String,
}

impl Keyed<'_> {
    /// `openssl enc -e|-d -CIPHER -K KEY -iv IV [extra] -in IN -out OUT`
    fn enc(&self, prov: Prov, mode: &str, extra: &[&str], input: &Path, output: &Path) -> Out {
        let cipher = format!("-{}", self.c.name);
        let mut args = vec![mode, &cipher, "-K", &self.key, "-iv", &self.iv];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-in", path_str(input), "-out", path_str(output)]);
        openssl(prov, "enc", &args)
    }
}

/// Encrypt `data` (written to `BASE.in`) with both providers: the ciphertexts must be
/// identical, and each must decrypt to `data` with the other provider. The ciphertext stays
/// in `BASE.def`.
fn enc_both(ocf: Prov, k: &Keyed, extra: &[&str], data: &[u8], base: &Path) {
    let case = format!("{} {}{} bytes", k.c.name, extra.join(" "), data.len());
    let file = |ext: &str| base.with_extension(ext);
    std::fs::write(file("in"), data).expect("write input");
    let mut cts = Vec::with_capacity(2);
    for (prov, ext) in [(ocf, "ocf"), (Prov::Default, "def")] {
        let out = k.enc(prov, "-e", extra, &file("in"), &file(ext));
        assert!(out.ok, "{case}: encrypt with {prov:?}: {}", out.text);
        cts.push(std::fs::read(file(ext)).expect("ciphertext"));
    }
    same_bytes(&format!("{case}: ciphertext, ocf against default"), &cts[0], &cts[1]);
    for (ct, prov) in [("ocf", Prov::Default), ("def", ocf)] {
        let out = k.enc(prov, "-d", extra, &file(ct), &file("dec"));
        assert!(out.ok, "{case}: decrypt {ct}'s ciphertext with {prov:?}: {}", out.text);
        same_bytes(
            &format!("{case}: {prov:?} decrypting {ct}'s ciphertext"),
            &std::fs::read(file("dec")).expect("plaintext"),
            data,
        );
    }
}

#[test]
fn enc_matches_the_default_provider() {
    let dir = module_dir();
    let ocf = Prov::Ocf(dir.path());
    let work = tempfile::tempdir().expect("temporary directory");
    for c in &ENC_CIPHERS {
        for &n in c.lengths {
            let mut rng = Rng::new(&format!("enc/{}/{n}", c.name));
            let (mut key, iv, data) = (rng.bytes(c.key), hex(&rng.bytes(c.iv)), rng.bytes(n));
            let k = Keyed { c, key: hex(&key), iv: iv.clone() };
            let base = work.path().join(format!("{}-{n}", c.name));
            enc_both(ocf, &k, &[], &data, &base);

            // The key with one bit flipped: CBC fails on the padding almost always, CTR gives
            // garbage; either way the providers must agree, on failure and on what comes out.
            key[0] ^= 1;
            let wrong = Keyed { c, key: hex(&key), iv };
            let [o, d] = [(ocf, "ocf-dec"), (Prov::Default, "def-dec")].map(|(prov, ext)| {
                let out = wrong.enc(prov, "-d", &[], &base.with_extension("def"), &base.with_extension(ext));
                (out.ok, std::fs::read(base.with_extension(ext)).unwrap_or_default())
            });
            let case = format!("{} {n} bytes, decrypted with a wrong key", c.name);
            assert_eq!(o.0, d.0, "{case}: ocf ok {}, default ok {}", o.0, d.0);
            if o.0 {
                same_bytes(&case, &o.1, &d.1);
            }

            let Some(block) = c.block else { continue };
            if n > 4096 {
                continue; // -nopad on a multi-megabyte input shows nothing new.
            }
            if n % block == 0 {
                enc_both(ocf, &k, &["-nopad"], &data, &base);
            } else {
                // Without padding, a partial last block is an error with both providers;
                // `openssl enc` reports a failed final as "bad encrypt".
                for prov in [Prov::Default, ocf] {
                    let out = k.enc(
                        prov,
                        "-e",
                        &["-nopad"],
                        &base.with_extension("in"),
                        &base.with_extension("out"),
                    );
                    assert!(
                        !out.ok && out.text.contains("bad encrypt"),
                        "{} -nopad {n} bytes, {prov:?}: {}",
                        c.name,
                        out.text
                    );
                }
            }
        }

        // Bad padding, deterministically: encrypt with -nopad two blocks whose last byte is 0
        // (PKCS#7 padding is 1..=block), then decrypt with padding checked. `openssl enc`
        // reports the failed final as "bad decrypt".
        let Some(block) = c.block else { continue };
        let mut rng = Rng::new(&format!("enc/{}/bad-padding", c.name));
        let k = Keyed { c, key: hex(&rng.bytes(c.key)), iv: hex(&rng.bytes(c.iv)) };
        let mut data = rng.bytes(2 * block);
        data[2 * block - 1] = 0;
        let base = work.path().join(format!("{}-bad-padding", c.name));
        enc_both(ocf, &k, &["-nopad"], &data, &base);
        for prov in [Prov::Default, ocf] {
            let out = k.enc(prov, "-d", &[], &base.with_extension("def"), &base.with_extension("out"));
            assert!(
                !out.ok && out.text.contains("bad decrypt"),
                "{} bad padding, {prov:?}: {}",
                c.name,
                out.text
            );
        }
    }
}

/// The hex digest `openssl dgst -ALG -r FILE` prints (`HEX *FILE`).
fn dgst(prov: Prov, alg: &str, file: &Path) -> String {
    let out = openssl(prov, "dgst", &[&format!("-{alg}"), "-r", path_str(file)]);
    assert!(out.ok, "dgst -{alg} {} with {prov:?}: {}", file.display(), out.text);
    out.stdout.split_whitespace().next().unwrap_or_default().to_owned()
}

#[test]
fn dgst_matches_the_default_provider() {
    let dir = module_dir();
    let ocf = Prov::Ocf(dir.path());
    let work = tempfile::tempdir().expect("temporary directory");
    // 55 and 56: the last lengths whose padding fits one 64-byte block and the first that
    // needs another (SHA-1, SHA-256, MD5).
    for n in [0, 1, 55, 56, 64, 1000, BIG] {
        let file = work.path().join(format!("{n}.in"));
        std::fs::write(&file, Rng::new(&format!("dgst/{n}")).bytes(n)).expect("write input");
        for (alg, len) in [("sha1", 20), ("sha256", 32), ("sha384", 48), ("sha512", 64), ("md5", 16)] {
            let (o, d) = (dgst(ocf, alg, &file), dgst(Prov::Default, alg, &file));
            assert_eq!(d.len(), 2 * len, "default's {alg} digest of {n} bytes: {d:?}");
            assert_eq!(o, d, "{alg} of {n} bytes: ocf against default");
        }
    }
    // FIPS 180-2, Appendix B.1: SHA-256("abc").
    let abc = work.path().join("abc");
    std::fs::write(&abc, b"abc").expect("write input");
    assert_eq!(dgst(ocf, "sha256", &abc), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/// The HMAC `openssl mac -macopt digest:ALG -macopt hexkey:KEY -in FILE HMAC` prints (hex).
fn hmac(prov: Prov, digest: &str, key: &[u8], file: &Path) -> String {
    let (digest, key) = (format!("digest:{digest}"), format!("hexkey:{}", hex(key)));
    let out = openssl(prov, "mac", &["-macopt", &digest, "-macopt", &key, "-in", path_str(file), "HMAC"]);
    assert!(out.ok, "mac {digest} {} with {prov:?}: {}", file.display(), out.text);
    out.stdout.trim().to_ascii_lowercase()
}

#[test]
fn mac_matches_the_default_provider() {
    let dir = module_dir();
    let ocf = Prov::Ocf(dir.path());
    let work = tempfile::tempdir().expect("temporary directory");
    for n in [0, 1, 1000, 100_000] {
        let file = work.path().join(format!("{n}.in"));
        std::fs::write(&file, Rng::new(&format!("mac/{n}")).bytes(n)).expect("write input");
        for digest in ["SHA1", "SHA256", "SHA384", "SHA512", "MD5"] {
            // Empty (RFC 2104 allows it; TLS 1.3's HKDF-Extract uses one), shorter than,
            // equal to (64: SHA-1, SHA-256, MD5) and longer than the block (200: every
            // digest here; such keys are hashed first).
            for k in [0, 3, 64, 128, 200] {
                let key = Rng::new(&format!("mac/{n}/{digest}/{k}")).bytes(k);
                let (o, d) = (hmac(ocf, digest, &key, &file), hmac(Prov::Default, digest, &key, &file));
                assert!(!d.is_empty(), "default's HMAC-{digest}: empty");
                assert_eq!(o, d, "HMAC-{digest}, {k}-byte key, {n} bytes: ocf against default");
            }
        }
    }
    // RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?".
    let file = work.path().join("jefe");
    std::fs::write(&file, b"what do ya want for nothing?").expect("write input");
    assert_eq!(
        hmac(ocf, "SHA256", b"Jefe", &file),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

#[test]
fn gcm_through_evp_with_aad_and_a_wrong_tag() {
    let dir = module_dir();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/evp_aead.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .env_remove("OCF_DRIVER")
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}:\n{text}", script.display());
    assert!(text.lines().any(|l| l.starts_with("OK ")), "{text}");
}

/// The same through a simulated card (the sim driver: asynchronous, its own completion
/// thread), where every part of a message crosses threads in a buffer lent by the provider.
#[test]
fn a_simulated_card_gives_the_same_bytes() {
    let dir = module_dir();
    let sim = Prov::OcfOn(dir.path(), "sim:bcm5822");
    let work = tempfile::tempdir().expect("temporary directory");
    for (c, n) in
        [(&ENC_CIPHERS[0], BIG), (&ENC_CIPHERS[0], 33), (&ENC_CIPHERS[3], 1000), (&ENC_CIPHERS[6], 4096)]
    {
        let mut rng = Rng::new(&format!("sim/{}/{n}", c.name));
        let k = Keyed { c, key: hex(&rng.bytes(c.key)), iv: hex(&rng.bytes(c.iv)) };
        enc_both(sim, &k, &[], &rng.bytes(n), &work.path().join(format!("{}-{n}", c.name)));
    }
    let file = work.path().join("big.in");
    std::fs::write(&file, Rng::new("sim/dgst").bytes(BIG)).expect("write input");
    assert_eq!(dgst(sim, "sha256", &file), dgst(Prov::Default, "sha256", &file), "SHA-256 on the card");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/evp_aead.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .env("OCF_DRIVER", "sim:bcm5822")
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.lines().any(|l| l.starts_with("OK ")), "AEAD on the card:\n{text}");
}

#[test]
fn speed_runs() {
    let dir = module_dir();
    // `openssl speed` draws each key with EVP_CIPHER_CTX_rand_key, which needs a DRBG; ocf
    // offers none, so with ocf alone 3.0 benchmarks, then fails ("unable to fetch drbg") and
    // prints no table. The default provider supplies the DRBG; `-propquery provider=ocf`
    // (added by `openssl`) keeps the cipher ocf's (an algorithm ocf lacks is "unknown").
    let args = ["-provider", "default", "-evp", "aes-128-gcm", "-elapsed", "-seconds", "1", "-bytes", "1024"];
    let out = openssl(Prov::Ocf(dir.path()), "speed", &args);
    assert!(out.ok, "{}", out.text);
    // The table's row: `AES-128-GCM    270294.02k` (thousands of bytes a second).
    let row = out.stdout.lines().find(|l| l.split_whitespace().next() == Some("AES-128-GCM"));
    let rates: Vec<f64> = row
        .map(|r| r.split_whitespace().skip(1).filter_map(|x| x.trim_end_matches('k').parse().ok()).collect())
        .unwrap_or_default();
    assert!(!rates.is_empty() && rates.iter().all(|&r| r > 0.0), "no AES-128-GCM rates:\n{}", out.text);
}
