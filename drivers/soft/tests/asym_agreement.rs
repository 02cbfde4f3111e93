//! Key agreement on the soft driver: X25519 against RFC 7748's vectors, X25519 and ECDH
//! P-256 / P-384 secrets equal to `openssl pkeyutl -derive`'s, and every refusal (a small-
//! order X25519 value, a point off the curve or badly encoded, a wrong length, no room)
//! seen as its own error in the session's counters.

mod asym_common;

use asym_common::*;
use ocf::{AsymAlg, Curve, ErrorKind, Op, PrivateKey, Request};

/// RFC 7748 §5.2: the X25519 function on two (scalar, u-coordinate) pairs.
#[test]
fn x25519_rfc7748_section_5_2() {
    let fw = fw();
    for (scalar, u, want) in [
        (
            "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
            "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
            "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552",
        ),
        (
            "4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
            "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
            "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957",
        ),
    ] {
        let s = private(&fw, AsymAlg::X25519, PrivateKey::raw(&hex(scalar)));
        assert_eq!(to_hex(&run(&s, Op::Derive, &hex(u), 32)), want);
    }
}

/// RFC 7748 §6.1: Alice's and Bob's public keys and their shared secret.
#[test]
fn x25519_rfc7748_section_6_1() {
    let fw = fw();
    let alice = private(
        &fw,
        AsymAlg::X25519,
        PrivateKey::raw(&hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")),
    );
    let bob = private(
        &fw,
        AsymAlg::X25519,
        PrivateKey::raw(&hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")),
    );
    let alice_pub = run(&alice, Op::PublicKey, &[], 32);
    let bob_pub = run(&bob, Op::PublicKey, &[], 32);
    assert_eq!(to_hex(&alice_pub), "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
    assert_eq!(to_hex(&bob_pub), "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
    let k = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742";
    assert_eq!(to_hex(&run(&alice, Op::Derive, &bob_pub, 32)), k);
    assert_eq!(to_hex(&run(&bob, Op::Derive, &alice_pub, 32)), k);
}

/// A key pair made by the openssl CLI: (PKCS#8 DER, raw public value, PEM private key
/// file, PEM public key file).
fn openssl_pair(
    dir: &std::path::Path,
    name: &str,
    genpkey: &[&str],
    raw_len: usize,
) -> (Vec<u8>, Vec<u8>, String, String) {
    let pem = dir.join(format!("{name}.pem"));
    let pub_pem = dir.join(format!("{name}.pub.pem"));
    let mut args = vec!["genpkey"];
    args.extend_from_slice(genpkey);
    args.extend_from_slice(&["-out", path(&pem)]);
    openssl(&args);
    openssl(&["pkey", "-in", path(&pem), "-pubout", "-out", path(&pub_pem)]);
    let pkcs8 = openssl(&["pkey", "-in", path(&pem), "-outform", "DER"]);
    let spki = openssl(&["pkey", "-in", path(&pem), "-pubout", "-outform", "DER"]);
    // The raw value (a BIT STRING's contents) ends the SubjectPublicKeyInfo.
    let raw = spki[spki.len() - raw_len..].to_vec();
    (pkcs8, raw, path(&pem).to_string(), path(&pub_pem).to_string())
}

/// X25519 and ECDH with keys made by openssl: ocf's public value is openssl's, and ocf's
/// secret is `openssl pkeyutl -derive`'s.
#[test]
fn secrets_equal_openssl_pkeyutl_derive() {
    let fw = fw();
    let dir = tmpdir("derive");
    for (alg, genpkey, raw_len) in [
        (AsymAlg::X25519, &["-algorithm", "X25519"][..], 32),
        (AsymAlg::Ecdh(Curve::P256), &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"][..], 65),
        (AsymAlg::Ecdh(Curve::P384), &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"][..], 97),
    ] {
        let (a_der, a_raw, a_pem, _) = openssl_pair(&dir, &format!("{alg}-a"), genpkey, raw_len);
        let (_, b_raw, _, b_pub) = openssl_pair(&dir, &format!("{alg}-b"), genpkey, raw_len);
        let s = private(&fw, alg, PrivateKey::pkcs8(&a_der));
        assert_eq!(run(&s, Op::PublicKey, &[], 128), a_raw, "{alg}: public value");
        let ours = run(&s, Op::Derive, &b_raw, 64);
        let theirs = openssl(&["pkeyutl", "-derive", "-inkey", &a_pem, "-peerkey", &b_pub]);
        assert_eq!(ours, theirs, "{alg}: shared secret");
        assert_eq!(ours.len(), if alg == AsymAlg::Ecdh(Curve::P384) { 48 } else { 32 });
    }
    std::fs::remove_dir_all(dir).ok();
}

/// The same secret from the raw scalar as from the PKCS#8 key (the raw form, RFC 7748 /
/// SEC 1): both parties agree.
#[test]
fn raw_keys_agree() {
    let fw = fw();
    for curve in [Curve::P256, Curve::P384] {
        let alg = AsymAlg::Ecdh(curve);
        let a = private(&fw, alg, PrivateKey::raw(&vec![0x11; curve.field_len()]));
        let b = private(&fw, alg, PrivateKey::raw(&vec![0x22; curve.field_len()]));
        let (pa, pb) = (run(&a, Op::PublicKey, &[], 128), run(&b, Op::PublicKey, &[], 128));
        assert_eq!(pa.len(), curve.point_len());
        assert_eq!(run(&a, Op::Derive, &pb, 64), run(&b, Op::Derive, &pa, 64));
    }
}

#[test]
fn refusals_are_named_and_counted() {
    let fw = fw();
    let x = private(&fw, AsymAlg::X25519, PrivateKey::raw(&[7; 32]));
    // RFC 7748 §6.1: small-order u-coordinates (0 and 1) give the all-zero secret.
    for u in [[0u8; 32], {
        let mut one = [0u8; 32];
        one[0] = 1;
        one
    }] {
        expect_error(&x, Request::asymmetric(Op::Derive, u.to_vec(), 32), ErrorKind::ZeroSharedSecret);
    }
    expect_error(&x, Request::asymmetric(Op::Derive, vec![9; 31], 32), ErrorKind::BadInputLength);
    expect_error(&x, Request::asymmetric(Op::Derive, vec![9; 32], 31), ErrorKind::OutputTooShort);
    expect_error(&x, Request::asymmetric(Op::PublicKey, Vec::new(), 16), ErrorKind::OutputTooShort);

    let e = private(&fw, AsymAlg::Ecdh(Curve::P256), PrivateKey::raw(&[0x11; 32]));
    let peer =
        run(&private(&fw, AsymAlg::Ecdh(Curve::P256), PrivateKey::raw(&[0x22; 32])), Op::PublicKey, &[], 65);
    let mut off_curve = peer.clone();
    off_curve[64] ^= 1;
    let mut compressed = vec![0x02 | (peer[64] & 1)];
    compressed.extend_from_slice(&peer[1..33]);
    let mut zero = vec![0u8; 65];
    zero[0] = 4;
    for bad in [off_curve, compressed, zero, peer[..64].to_vec(), vec![]] {
        expect_error(&e, Request::asymmetric(Op::Derive, bad, 32), ErrorKind::InvalidPoint);
    }
    expect_error(&e, Request::asymmetric(Op::Derive, peer.clone(), 31), ErrorKind::OutputTooShort);
    // The valid peer still works after all that.
    assert_eq!(run(&e, Op::Derive, &peer, 32).len(), 32);
}
