//! Cross-check of encrypt-then-MAC sessions against the `openssl` command-line tool.
//!
//! ocf's cipher+MAC mode (`SessionParams::cipher_then_mac`, as ESP uses it) computes
//! `ciphertext = CBC(plaintext)` and `tag = HMAC(AAD || ciphertext)` truncated to the
//! session's tag length, and verifies before it decrypts. No single published known answer
//! covers that composition, so this module makes random keys, IVs, AAD and payloads from a
//! seeded generator, computes the expected output with an independent implementation
//! (`openssl enc -nopad` and `openssl dgst -mac HMAC`), and runs the resulting cases like
//! any other known answer: on every driver, in every layout, in both directions. Each case
//! also yields forgeries (one byte of ciphertext, AAD or tag changed) that must fail with
//! `AuthFailed` and release nothing.

use std::fmt;
use std::io::Write;
use std::process::{Command, Stdio};

use ocf::{CipherAlg, DigestAlg, Framework, MacAlg, SessionParams};

use crate::case::{Case, Check, Crypt};
use crate::report::{CaseId, Report};
use crate::run;

/// Why the cross-check could not run.
#[derive(Debug)]
pub enum OracleError {
    /// `openssl` is not on `PATH` (or does not run).
    NotInstalled(String),
    /// `openssl` ran but failed or printed something unexpected.
    Failed(String),
}

impl fmt::Display for OracleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OracleError::NotInstalled(why) => write!(f, "the openssl CLI is not available: {why}"),
            OracleError::Failed(why) => write!(f, "the openssl CLI failed: {why}"),
        }
    }
}

impl std::error::Error for OracleError {}

/// A cipher and MAC combination to cross-check, with the tag lengths to use.
struct Combination {
    cipher: CipherAlg,
    key_len: usize,
    digest: DigestAlg,
    /// ESP's truncation (RFC 2404's HMAC-SHA1-96, RFC 4868's HMAC-SHA-256-128) and the
    /// full output.
    tag_lens: [usize; 2],
}

const COMBINATIONS: [Combination; 3] = [
    Combination { cipher: CipherAlg::AesCbc, key_len: 16, digest: DigestAlg::Sha1, tag_lens: [12, 20] },
    Combination { cipher: CipherAlg::AesCbc, key_len: 32, digest: DigestAlg::Sha256, tag_lens: [16, 32] },
    Combination { cipher: CipherAlg::TdesCbc, key_len: 24, digest: DigestAlg::Sha1, tag_lens: [12, 20] },
];

/// The shape of one generated case: payload length in cipher blocks (0 included, up to
/// several KiB so that drivers which switch implementation with the length are checked on
/// both sides), AAD length (ESP's 8-byte SPI + sequence number, 12 with ESN, odd lengths),
/// MAC key length (one byte, and longer than the hash block so HMAC must hash it first).
const SHAPES: [(usize, usize, usize); 7] =
    [(0, 8, 20), (1, 0, 20), (2, 12, 64), (3, 13, 1), (17, 8, 80), (64, 16, 131), (600, 8, 32)];

/// The source name cases from this module are reported under.
pub const SOURCE: &str = "openssl CLI cross-check";

/// Generates the cases from `seed`, computes their expected outputs with the openssl CLI,
/// and runs them on every registered driver that supports cipher+MAC sessions.
pub fn cipher_then_mac(fw: &Framework, seed: u64) -> Result<Report, OracleError> {
    let version = openssl(&["version"], &[]).map_err(|e| OracleError::NotInstalled(e.to_string()))?;
    let source = format!("{SOURCE} ({}, seed {seed:#x})", String::from_utf8_lossy(&version).trim());
    let mut rng = SplitMix64(seed);
    let mut cases = Vec::new();
    for combo in &COMBINATIONS {
        for tag_len in combo.tag_lens {
            for (index, &(blocks, aad_len, mac_key_len)) in SHAPES.iter().enumerate() {
                let cipher_key = rng.bytes(combo.key_len);
                let mac_key = rng.bytes(mac_key_len);
                let iv = rng.bytes(combo.cipher.iv_len());
                let aad = rng.bytes(aad_len);
                let plaintext = rng.bytes(blocks * combo.cipher.block_len());
                let ciphertext = openssl_encrypt(combo, &cipher_key, &iv, &plaintext)?;
                let mut authenticated = aad.clone();
                authenticated.extend_from_slice(&ciphertext);
                let full_tag = openssl_hmac(combo.digest, &mac_key, &authenticated)?;
                let tag = full_tag
                    .get(..tag_len)
                    .ok_or_else(|| OracleError::Failed(format!("HMAC output of {} bytes", full_tag.len())))?
                    .to_vec();
                let params = SessionParams::cipher_then_mac(
                    combo.cipher,
                    &cipher_key[..],
                    MacAlg::Hmac(combo.digest),
                    &mac_key[..],
                )
                .with_tag_len(tag_len);
                let label = format!(
                    "{}-{}+{}/{tag_len} #{index} (payload {}, AAD {aad_len}, MAC key {mac_key_len})",
                    combo.cipher,
                    combo.key_len * 8,
                    MacAlg::Hmac(combo.digest),
                    plaintext.len()
                );
                let crypt = Crypt { iv, aad, plaintext, ciphertext, tag };
                cases.extend(forgeries(&source, &label, &params, &crypt));
                cases.push(Case {
                    id: CaseId { source: source.clone(), label },
                    params,
                    check: Check::RoundTrip(crypt),
                });
            }
        }
    }
    let mut report = Report::new();
    report.count_loaded(&source, cases.len());
    run::run_cases(fw, &fw.drivers(), &cases, &mut report);
    Ok(report)
}

/// The round trip's forgeries: one byte of the ciphertext, the AAD and the tag changed
/// (where there is one to change).
fn forgeries(source: &str, label: &str, params: &SessionParams, crypt: &Crypt) -> Vec<Case> {
    let mut out = Vec::new();
    let mut forge = |what: &str, change: &dyn Fn(&mut Crypt)| {
        let mut forged = crypt.clone();
        change(&mut forged);
        out.push(Case {
            id: CaseId { source: source.to_owned(), label: format!("{label}, {what} changed") },
            params: params.clone(),
            check: Check::Forgery(forged),
        });
    };
    if !crypt.ciphertext.is_empty() {
        forge("ciphertext", &|c| flip_middle_byte(&mut c.ciphertext));
    }
    if !crypt.aad.is_empty() {
        forge("AAD", &|c| flip_middle_byte(&mut c.aad));
    }
    forge("tag", &|c| flip_middle_byte(&mut c.tag));
    out
}

fn flip_middle_byte(bytes: &mut [u8]) {
    let middle = bytes.len() / 2;
    if let Some(b) = bytes.get_mut(middle) {
        *b ^= 0x80;
    }
}

fn openssl_encrypt(
    combo: &Combination,
    key: &[u8],
    iv: &[u8],
    plaintext: &[u8],
) -> Result<Vec<u8>, OracleError> {
    let cipher = match combo.cipher {
        CipherAlg::TdesCbc => "-des-ede3-cbc".to_owned(),
        _ => format!("-aes-{}-cbc", combo.key_len * 8),
    };
    let (key_hex, iv_hex) = (crate::hex::encode(key), crate::hex::encode(iv));
    let out = openssl(&["enc", "-e", &cipher, "-K", &key_hex, "-iv", &iv_hex, "-nopad"], plaintext)
        .map_err(OracleError::Failed)?;
    if out.len() != plaintext.len() {
        return Err(OracleError::Failed(format!("enc gave {} bytes for {}", out.len(), plaintext.len())));
    }
    Ok(out)
}

fn openssl_hmac(digest: DigestAlg, key: &[u8], data: &[u8]) -> Result<Vec<u8>, OracleError> {
    let digest_arg = format!("-{digest}");
    let key_arg = format!("hexkey:{}", crate::hex::encode(key));
    let out = openssl(&["dgst", &digest_arg, "-mac", "HMAC", "-macopt", &key_arg, "-binary"], data)
        .map_err(OracleError::Failed)?;
    if out.len() != digest.output_len() {
        return Err(OracleError::Failed(format!("HMAC gave {} bytes", out.len())));
    }
    Ok(out)
}

/// Runs `openssl ARGS` with `input` on stdin and returns its stdout. The input is written
/// from a second thread so that neither side can block on a full pipe.
pub(crate) fn openssl(args: &[&str], input: &[u8]) -> Result<Vec<u8>, String> {
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run openssl: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("openssl: no stdin pipe")?;
    let output = std::thread::scope(|scope| {
        let writer = scope.spawn(move || stdin.write_all(input));
        let output = child.wait_with_output();
        let written = writer.join().unwrap_or_else(|_| Err(std::io::Error::other("writer thread panicked")));
        (output, written)
    });
    let output = match output {
        (Ok(o), Ok(())) => o,
        (Err(e), _) | (_, Err(e)) => return Err(format!("openssl {}: {e}", args.join(" "))),
    };
    if !output.status.success() {
        return Err(format!(
            "openssl {} exited with {}: {}",
            args.first().unwrap_or(&""),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(output.stdout)
}

/// SplitMix64 (Steele, Lea, Flood 2014): a small, well-mixed generator for test data. Not
/// for keys anyone relies on; deterministic so a failure can be replayed from its seed.
pub(crate) struct SplitMix64(pub u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(n);
        out
    }
}
