//! Signatures on the soft driver: Ed25519 against RFC 8032's vectors, and every signature
//! algorithm cross-checked with the openssl CLI both ways — ocf signs and `openssl
//! pkeyutl -verify` / `openssl dgst -verify` accepts; openssl signs and ocf verifies; an
//! altered message fails with BadSignature on both sides — with keys ocf generated (so
//! `openssl pkey -inform DER` reading them is checked too).

mod asym_common;

use std::path::Path;

use asym_common::*;
use ocf::asym::AsymKey;
use ocf::{AsymAlg, Curve, DigestAlg, ErrorKind, Framework, Op, PrivateKey, PublicKey, Request, SigEncoding};
use openssl::bn::BigNum;
use openssl::ecdsa::EcdsaSig;

/// RFC 8032 §7.1, TEST 1, 2 and 3: (secret key, public key, message, signature).
const RFC8032: [(&str, &str, &str, &str); 3] = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
];

#[test]
fn ed25519_rfc8032_tests_1_to_3() {
    let fw = fw();
    for (sk, pk, msg, sig) in RFC8032 {
        let s = private(&fw, AsymAlg::Ed25519, PrivateKey::raw(&hex(sk)));
        assert_eq!(to_hex(&run(&s, Op::PublicKey, &[], 32)), pk);
        assert_eq!(to_hex(&run(&s, Op::Sign, &hex(msg), 64)), sig);
        let v = public(&fw, AsymAlg::Ed25519, PublicKey::raw(&hex(pk)));
        assert_eq!(verify(&v, &hex(msg), &hex(sig)), Ok(()));
        let mut altered = hex(msg);
        altered.push(0);
        assert_eq!(verify(&v, &altered, &hex(sig)), Err(ErrorKind::BadSignature));
    }
}

/// A key ocf generated, written where openssl reads it: (dir, PEM key, PEM public key,
/// SPKI DER).
struct Keys {
    pem: String,
    pub_pem: String,
    spki: Vec<u8>,
    pkcs8: PrivateKey,
}

fn generated(fw: &Framework, dir: &Path, alg: AsymAlg, bits: usize) -> Keys {
    let key = fw.generate_key(alg, bits).unwrap();
    let der = dir.join(format!("{alg}.der"));
    std::fs::write(&der, key.bytes()).unwrap();
    let pem = dir.join(format!("{alg}.pem"));
    let pub_pem = dir.join(format!("{alg}.pub.pem"));
    // GenerateKey's PKCS#8 DER is what `openssl pkey -inform DER` reads.
    openssl(&["pkey", "-inform", "DER", "-in", path(&der), "-out", path(&pem)]);
    openssl(&["pkey", "-in", path(&pem), "-pubout", "-out", path(&pub_pem)]);
    let spki = openssl(&["pkey", "-in", path(&pem), "-pubout", "-outform", "DER"]);
    Keys { pem: path(&pem).into(), pub_pem: path(&pub_pem).into(), spki, pkcs8: key }
}

fn hash_name(h: DigestAlg) -> &'static str {
    match h {
        DigestAlg::Sha256 => "-sha256",
        DigestAlg::Sha384 => "-sha384",
        DigestAlg::Sha512 => "-sha512",
        _ => unreachable!(),
    }
}

fn der_to_p1363(der: &[u8], field: usize) -> Vec<u8> {
    let s = EcdsaSig::from_der(der).unwrap();
    let mut v = s.r().to_vec_padded(field as i32).unwrap();
    v.extend(s.s().to_vec_padded(field as i32).unwrap());
    v
}

fn p1363_to_der(sig: &[u8]) -> Vec<u8> {
    let (r, s) = sig.split_at(sig.len() / 2);
    EcdsaSig::from_private_components(BigNum::from_slice(r).unwrap(), BigNum::from_slice(s).unwrap())
        .unwrap()
        .to_der()
        .unwrap()
}

const MSG: &[u8] =
    b"ocf soft driver: a message to sign, longer than one hash block would need? no, just some bytes";

/// `openssl dgst` / `pkeyutl` verifies `sig` over `msg` (files under `dir`).
fn openssl_verifies(dir: &Path, alg: AsymAlg, keys: &Keys, msg: &[u8], sig: &[u8]) -> bool {
    let m = dir.join("msg");
    let s = dir.join("sig");
    std::fs::write(&m, msg).unwrap();
    std::fs::write(&s, sig).unwrap();
    let (m, s) = (path(&m).to_string(), path(&s).to_string());
    let args: Vec<&str> = match alg {
        AsymAlg::Ed25519 => {
            vec!["pkeyutl", "-verify", "-pubin", "-inkey", &keys.pub_pem, "-rawin", "-in", &m, "-sigfile", &s]
        }
        AsymAlg::RsaPss { hash } => vec![
            "dgst",
            hash_name(hash),
            "-verify",
            &keys.pub_pem,
            "-sigopt",
            "rsa_padding_mode:pss",
            "-sigopt",
            "rsa_pss_saltlen:digest",
            "-signature",
            &s,
            &m,
        ],
        _ => vec!["dgst", hash_name(alg.hash().unwrap()), "-verify", &keys.pub_pem, "-signature", &s, &m],
    };
    openssl_ok(&args)
}

/// openssl signs `msg` with the key.
fn openssl_signs(dir: &Path, alg: AsymAlg, keys: &Keys, msg: &[u8]) -> Vec<u8> {
    let m = dir.join("msg");
    let s = dir.join("sig");
    std::fs::write(&m, msg).unwrap();
    let (m, s) = (path(&m).to_string(), path(&s).to_string());
    let args: Vec<&str> = match alg {
        AsymAlg::Ed25519 => vec!["pkeyutl", "-sign", "-inkey", &keys.pem, "-rawin", "-in", &m, "-out", &s],
        AsymAlg::RsaPss { hash } => vec![
            "dgst",
            hash_name(hash),
            "-sign",
            &keys.pem,
            "-sigopt",
            "rsa_padding_mode:pss",
            "-sigopt",
            "rsa_pss_saltlen:digest",
            "-out",
            &s,
            &m,
        ],
        _ => vec!["dgst", hash_name(alg.hash().unwrap()), "-sign", &keys.pem, "-out", &s, &m],
    };
    openssl(&args);
    std::fs::read(&s).unwrap()
}

/// Both ways for `alg` with `keys`: ocf signs, openssl verifies (and refuses an altered
/// message); openssl signs, ocf verifies with the SPKI and the raw public key (and refuses
/// an altered message with BadSignature, counted).
fn both_ways(fw: &Framework, dir: &Path, alg: AsymAlg, keys: &Keys) {
    let signer = private(fw, alg, keys.pkcs8.clone());
    let raw_pub = run(&signer, Op::PublicKey, &[], 1024);
    let sig = run(&signer, Op::Sign, MSG, alg.max_output_len(4096));
    // What openssl reads: DER for ECDSA, whatever the session's encoding.
    let as_openssl = |sig: &[u8]| match alg {
        AsymAlg::Ecdsa { encoding: SigEncoding::P1363, curve, .. } => {
            assert_eq!(sig.len(), 2 * curve.field_len(), "{alg}: r ‖ s");
            p1363_to_der(sig)
        }
        _ => sig.to_vec(),
    };
    assert!(
        openssl_verifies(dir, alg, keys, MSG, &as_openssl(&sig)),
        "{alg}: openssl accepts ocf's signature"
    );
    assert!(
        !openssl_verifies(dir, alg, keys, b"altered", &as_openssl(&sig)),
        "{alg}: openssl refuses it altered"
    );

    let theirs = openssl_signs(dir, alg, keys, MSG);
    let theirs = match alg {
        AsymAlg::Ecdsa { encoding: SigEncoding::P1363, curve, .. } => {
            der_to_p1363(&theirs, curve.field_len())
        }
        _ => theirs,
    };
    for key in [PublicKey::spki(&keys.spki), PublicKey::raw(&raw_pub)] {
        let v = public(fw, alg, key);
        assert_eq!(verify(&v, MSG, &theirs), Ok(()), "{alg}: ocf accepts openssl's signature");
        assert_eq!(verify(&v, MSG, &sig), Ok(()), "{alg}: ocf accepts its own signature");
        let before = v.stats().errors.get(ErrorKind::BadSignature);
        assert_eq!(verify(&v, b"altered", &theirs), Err(ErrorKind::BadSignature), "{alg}");
        let mut flipped = theirs.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(verify(&v, MSG, &flipped), Err(ErrorKind::BadSignature), "{alg}: altered signature");
        assert_eq!(
            verify(&v, MSG, &theirs[..last]),
            Err(ErrorKind::BadSignature),
            "{alg}: truncated signature"
        );
        assert_eq!(v.stats().errors.get(ErrorKind::BadSignature), before + 3);
    }
}

#[test]
fn ed25519_with_openssl_both_ways() {
    let fw = fw();
    let dir = tmpdir("ed25519");
    let keys = generated(&fw, &dir, AsymAlg::Ed25519, 0);
    both_ways(&fw, &dir, AsymAlg::Ed25519, &keys);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn ecdsa_with_openssl_both_ways() {
    let fw = fw();
    let dir = tmpdir("ecdsa");
    for curve in [Curve::P256, Curve::P384] {
        let first = AsymAlg::Ecdsa { curve, hash: DigestAlg::Sha256, encoding: SigEncoding::Der };
        let keys = generated(&fw, &dir, first, 0);
        for hash in [DigestAlg::Sha256, DigestAlg::Sha384, DigestAlg::Sha512] {
            for encoding in [SigEncoding::Der, SigEncoding::P1363] {
                both_ways(&fw, &dir, AsymAlg::Ecdsa { curve, hash, encoding }, &keys);
            }
        }
    }
    std::fs::remove_dir_all(dir).ok();
}

/// RSA-2048, PKCS#1 v1.5 and PSS (salt = hash length: openssl verifies with
/// `rsa_pss_saltlen:digest`, which refuses any other salt length) with each SHA-2.
#[test]
fn rsa_with_openssl_both_ways() {
    let fw = fw();
    let dir = tmpdir("rsa");
    let keys = generated(&fw, &dir, AsymAlg::RsaPss { hash: DigestAlg::Sha256 }, 2048);
    for hash in [DigestAlg::Sha256, DigestAlg::Sha384, DigestAlg::Sha512] {
        for alg in [AsymAlg::RsaPkcs1 { hash }, AsymAlg::RsaPss { hash }] {
            both_ways(&fw, &dir, alg, &keys);
        }
    }
    std::fs::remove_dir_all(dir).ok();
}

/// PSS with another salt length than the hash's is refused.
#[test]
fn rsa_pss_with_another_salt_length_is_refused() {
    let fw = fw();
    let dir = tmpdir("pss-salt");
    let alg = AsymAlg::RsaPss { hash: DigestAlg::Sha256 };
    let keys = generated(&fw, &dir, alg, 2048);
    let m = dir.join("msg");
    let s = dir.join("sig");
    std::fs::write(&m, MSG).unwrap();
    openssl(&[
        "dgst",
        "-sha256",
        "-sign",
        &keys.pem,
        "-sigopt",
        "rsa_padding_mode:pss",
        "-sigopt",
        "rsa_pss_saltlen:20",
        "-out",
        path(&s),
        path(&m),
    ]);
    let v = public(&fw, alg, PublicKey::spki(&keys.spki));
    assert_eq!(verify(&v, MSG, &std::fs::read(&s).unwrap()), Err(ErrorKind::BadSignature));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn signing_refusals_are_counted() {
    let fw = fw();
    let ed = private(&fw, AsymAlg::Ed25519, PrivateKey::raw(&[1; 32]));
    expect_error(&ed, Request::asymmetric(Op::Sign, MSG.to_vec(), 63), ErrorKind::OutputTooShort);
    let ec = AsymAlg::Ecdsa { curve: Curve::P256, hash: DigestAlg::Sha256, encoding: SigEncoding::P1363 };
    let s = private(&fw, ec, PrivateKey::raw(&[1; 32]));
    expect_error(&s, Request::asymmetric(Op::Sign, MSG.to_vec(), 63), ErrorKind::OutputTooShort);
    assert_eq!(run(&s, Op::Sign, MSG, 64).len(), 64);

    // Keys that do not parse, or are not the session's: BadKey, counted framework-wide.
    let other_curve = fw.generate_key(AsymAlg::Ecdh(Curve::P384), 0).unwrap();
    expect_session_error(&fw, ec, AsymKey::Private(other_curve), ErrorKind::BadKey);
    expect_session_error(
        &fw,
        AsymAlg::Ed25519,
        AsymKey::Private(PrivateKey::pkcs8(&[0x30, 3, 2, 1, 0])),
        ErrorKind::BadKey,
    );
    expect_session_error(
        &fw,
        AsymAlg::Ed25519,
        AsymKey::Public(PublicKey::spki(&[0x30, 0])),
        ErrorKind::BadKey,
    );
    let not_on_curve = {
        let mut p = vec![4u8; 65];
        p[1..].fill(0x42);
        p
    };
    expect_session_error(&fw, ec, AsymKey::Public(PublicKey::raw(&not_on_curve)), ErrorKind::BadKey);
    // A 2048-bit RSAPublicKey whose exponent is 1: the size passes ocf, aws-lc refuses it.
    let mut e1 = vec![0x30, 0x82, 0x01, 0x08, 0x02, 0x82, 0x01, 0x01, 0x00];
    e1.extend(std::iter::repeat_n(0xc3, 256));
    e1.extend([0x02, 0x01, 0x01]);
    let rsa = AsymAlg::RsaPkcs1 { hash: DigestAlg::Sha256 };
    expect_session_error(&fw, rsa, AsymKey::Public(PublicKey::raw(&e1)), ErrorKind::BadKey);
    let small = [0x30, 0x08, 0x02, 0x03, 0x00, 0xc3, 0xc3, 0x02, 0x01, 0x03];
    expect_session_error(&fw, rsa, AsymKey::Public(PublicKey::raw(&small)), ErrorKind::KeyTooSmall);
}
