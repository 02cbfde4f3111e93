//! ML-KEM-768 against an independent implementation (Python's `cryptography`, which
//! carries its own OpenSSL), key generation for every algorithm (PKCS#8 that `openssl
//! pkey` reads; raw MODP exponents and ML-KEM seeds), and random bytes from the kernel.

mod asym_common;

use std::process::Command;

use asym_common::*;
use ocf::asym::{AsymKey, MLKEM768_CIPHERTEXT_LEN, MLKEM768_PUBLIC_LEN};
use ocf::{
    AsymAlg, Curve, DigestAlg, ErrorKind, ModpGroup, Op, PrivateKey, PublicKey, Request, SessionParams,
    SigEncoding,
};

/// Runs a Python snippet with `cryptography`'s ML-KEM; its stdout lines (hex). `None` when
/// Python or its ML-KEM is missing (the test then says so and checks what it can).
fn python(script: &str, args: &[String]) -> Option<Vec<String>> {
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(script).args(args);
    let out = cmd.output().ok()?;
    if !out.status.success() {
        eprintln!("python cryptography ML-KEM unavailable: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    Some(String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect())
}

const PY_KEYGEN_ENCAP: &str = "
import sys
from cryptography.hazmat.primitives.asymmetric import mlkem
k = mlkem.MLKEM768PrivateKey.from_seed_bytes(bytes.fromhex(sys.argv[1]))
print(k.public_key().public_bytes_raw().hex())
ss, ct = k.public_key().encapsulate()
print(ct.hex()); print(ss.hex())
print(k.decapsulate(bytes.fromhex(sys.argv[2])).hex())
";

/// From the same seed `d ‖ z` both compute the same encapsulation key; each decapsulates
/// the other's ciphertext to the other's secret.
#[test]
fn ml_kem_768_agrees_with_python_cryptography() {
    let fw = fw();
    let seed: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37).wrapping_add(11)).collect();
    let dk = private(&fw, AsymAlg::MlKem768, PrivateKey::raw(&seed));
    let ek = run(&dk, Op::PublicKey, &[], 2048);
    assert_eq!(ek.len(), MLKEM768_PUBLIC_LEN);
    let enc = public(&fw, AsymAlg::MlKem768, PublicKey::raw(&ek));
    let ct_ss = run(&enc, Op::Encapsulate, &[], 2048);
    let (ct, ss) = ct_ss.split_at(MLKEM768_CIPHERTEXT_LEN);
    assert_eq!(ss.len(), 32);
    assert_eq!(run(&dk, Op::Decapsulate, ct, 32), ss, "ocf decapsulates its own ciphertext");
    let Some(lines) = python(PY_KEYGEN_ENCAP, &[to_hex(&seed), to_hex(ct)]) else { return };
    assert_eq!(lines[0], to_hex(&ek), "the same encapsulation key from the seed");
    assert_eq!(
        to_hex(&run(&dk, Op::Decapsulate, &hex(&lines[1]), 32)),
        lines[2],
        "ocf decapsulates Python's"
    );
    assert_eq!(lines[3], to_hex(ss), "Python decapsulates ocf's");
}

#[test]
fn ml_kem_refusals_and_implicit_rejection() {
    let fw = fw();
    let dk = private(&fw, AsymAlg::MlKem768, PrivateKey::raw(&[3; 64]));
    let ek = run(&dk, Op::PublicKey, &[], 2048);
    let enc = public(&fw, AsymAlg::MlKem768, PublicKey::raw(&ek));
    let ct_ss = run(&enc, Op::Encapsulate, &[], 2048);
    let (ct, ss) = ct_ss.split_at(MLKEM768_CIPHERTEXT_LEN);
    // FIPS 203 §6.3: an altered ciphertext decapsulates to another (pseudo-random) secret.
    let mut altered = ct.to_vec();
    altered[0] ^= 1;
    let other = run(&dk, Op::Decapsulate, &altered, 32);
    assert_eq!(other.len(), 32);
    assert_ne!(other, ss);
    expect_error(&dk, Request::asymmetric(Op::Decapsulate, ct[1..].to_vec(), 32), ErrorKind::BadInputLength);
    expect_error(&dk, Request::asymmetric(Op::Decapsulate, ct.to_vec(), 31), ErrorKind::OutputTooShort);
    expect_error(&enc, Request::asymmetric(Op::Encapsulate, Vec::new(), 1119), ErrorKind::OutputTooShort);
    // An encapsulation key whose coefficients are not reduced mod q (FIPS 203 §7.2's check).
    expect_session_error(
        &fw,
        AsymAlg::MlKem768,
        AsymKey::Public(PublicKey::raw(&[0xff; 1184])),
        ErrorKind::BadKey,
    );
}

/// Every algorithm with a PKCS#8 form: GenerateKey's output is what `openssl pkey -inform
/// DER` reads, of the right type, and a session takes it back.
#[test]
fn generated_pkcs8_keys_parse_with_openssl() {
    let fw = fw();
    let dir = tmpdir("genkey");
    let ecdsa = |curve| AsymAlg::Ecdsa { curve, hash: DigestAlg::Sha256, encoding: SigEncoding::Der };
    for (alg, bits, want) in [
        (AsymAlg::X25519, 0, "X25519 Private-Key"),
        (AsymAlg::Ecdh(Curve::P256), 0, "NIST CURVE: P-256"),
        (AsymAlg::Ecdh(Curve::P384), 0, "NIST CURVE: P-384"),
        (AsymAlg::Ed25519, 0, "ED25519 Private-Key"),
        (ecdsa(Curve::P256), 0, "NIST CURVE: P-256"),
        (ecdsa(Curve::P384), 0, "NIST CURVE: P-384"),
        (AsymAlg::RsaPkcs1 { hash: DigestAlg::Sha256 }, 2048, "Private-Key: (2048 bit, 2 primes)"),
        (AsymAlg::RsaPss { hash: DigestAlg::Sha384 }, 3072, "Private-Key: (3072 bit, 2 primes)"),
    ] {
        let key = fw.generate_key(alg, bits).unwrap();
        let der = dir.join("key.der");
        std::fs::write(&der, key.bytes()).unwrap();
        let text =
            String::from_utf8(openssl(&["pkey", "-inform", "DER", "-in", path(&der), "-noout", "-text"]))
                .unwrap();
        assert!(text.contains(want), "{alg}: {want:?} not in {text}");
        // Two keys are different keys.
        assert!(!key.matches(&fw.generate_key(alg, bits).unwrap()), "{alg}");
        let s = private(&fw, alg, key);
        assert!(!run(&s, Op::PublicKey, &[], 1024).is_empty());
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn generated_raw_keys_have_their_lengths() {
    let fw = fw();
    for (alg, len) in [
        (AsymAlg::Ffdh(ModpGroup::Modp2048), 40),
        (AsymAlg::Ffdh(ModpGroup::Modp3072), 53),
        (AsymAlg::MlKem768, 64),
    ] {
        let k = fw.generate_key(alg, 0).unwrap();
        assert_eq!(k.bytes().len(), len, "{alg}");
        assert!(!k.matches(&fw.generate_key(alg, 0).unwrap()), "{alg}");
    }
    // 420 bits in 53 bytes: the top four bits of the first byte are clear.
    for _ in 0..16 {
        assert!(fw.generate_key(AsymAlg::Ffdh(ModpGroup::Modp3072), 0).unwrap().bytes()[0] < 0x10);
    }
    let g = session(&fw, AsymAlg::Ed25519, AsymKey::Generate { bits: 0 });
    expect_error(&g, Request::asymmetric(Op::GenerateKey, Vec::new(), 20), ErrorKind::OutputTooShort);
}

#[test]
fn random_bytes_fill_the_payload() {
    let fw = fw();
    let s = fw.new_session_on("soft", &SessionParams::random()).unwrap();
    let a = s.run(Request::random(4096)).unwrap().buf.to_vec();
    let b = s.run(Request::random(4096)).unwrap().buf.to_vec();
    assert_eq!(a.len(), 4096);
    assert_ne!(a, b);
    // 4096 uniform bytes: every byte value about 16 times; none missing is a weak but
    // real check (the chance of a missing value is about 256·e^-16 ≈ 3e-5).
    let mut seen = [false; 256];
    a.iter().for_each(|&x| seen[x as usize] = true);
    assert!(seen.iter().all(|&x| x), "every byte value appears");
    // Only the payload is written.
    let r = Request::new(Op::Random, vec![0u8; 64]).with_payload(16..48);
    let out = s.run(r).unwrap().buf.to_vec();
    assert!(out[..16].iter().chain(&out[48..]).all(|&x| x == 0));
    assert!(out[16..48].iter().any(|&x| x != 0));
    assert!(fw.new_session(&SessionParams::random()).is_ok(), "soft is chosen for random bytes");
}
