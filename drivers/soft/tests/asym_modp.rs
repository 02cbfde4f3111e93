//! Finite-field Diffie-Hellman over the RFC 3526 groups and `CRK_MOD_EXP` on the soft
//! driver: the primes ocf carries are libcrypto's, two parties agree on a secret that
//! Python's `pow()` computes too, values are padded to the prime's length (RFC 7296
//! §2.14), ModExp equals `pow()`, and out-of-range inputs are refused and counted.

mod asym_common;

use std::process::Command;

use asym_common::*;
use ocf::asym::AsymKey;
use ocf::{AsymAlg, ErrorKind, Key, ModpGroup, Op, PrivateKey, Request};
use openssl::bn::BigNum;

/// `pow(b, e, m)` by Python, big-endian hex in and out.
fn python_pow(b: &[u8], e: &[u8], m: &[u8]) -> Vec<u8> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys; b, e, m = (int(x, 16) for x in sys.argv[1:]); print(format(pow(b, e, m), 'x'))",
            &to_hex(b),
            &to_hex(e),
            &to_hex(m),
        ])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut h = String::from_utf8(out.stdout).unwrap().trim().to_string();
    if h.len() % 2 == 1 {
        h.insert(0, '0');
    }
    hex(&h)
}

fn left_pad(v: &[u8], len: usize) -> Vec<u8> {
    let mut out = vec![0; len - v.len()];
    out.extend_from_slice(v);
    out
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut v = vec![0; n];
    openssl::rand::rand_bytes(&mut v).unwrap();
    v
}

/// RFC 3526's primes as ocf carries them are libcrypto's (BN_get_rfc3526_prime_2048/3072).
#[test]
fn rfc3526_primes_are_libcryptos() {
    assert_eq!(ModpGroup::Modp2048.prime(), &BigNum::get_rfc3526_prime_2048().unwrap().to_vec()[..]);
    assert_eq!(ModpGroup::Modp3072.prime(), &BigNum::get_rfc3526_prime_3072().unwrap().to_vec()[..]);
}

/// Two parties with generated exponents agree, on the value Python computes, padded to the
/// prime's length.
#[test]
fn two_parties_agree_with_python_pow() {
    let fw = fw();
    for g in [ModpGroup::Modp2048, ModpGroup::Modp3072] {
        let alg = AsymAlg::Ffdh(g);
        let xa = fw.generate_key(alg, 0).unwrap();
        let xb = fw.generate_key(alg, 0).unwrap();
        // The exponent lengths chosen (RFC 3526 §8's larger estimates): 320 and 420 bits.
        assert_eq!(xa.bytes().len(), if g == ModpGroup::Modp2048 { 40 } else { 53 });
        let (a, b) = (private(&fw, alg, xa.clone()), private(&fw, alg, xb));
        let (ya, yb) = (run(&a, Op::PublicKey, &[], 512), run(&b, Op::PublicKey, &[], 512));
        assert_eq!((ya.len(), yb.len()), (g.bytes(), g.bytes()), "{g}: public values padded");
        assert_eq!(ya, left_pad(&python_pow(&[2], xa.bytes(), g.prime()), g.bytes()), "{g}: 2^x mod p");
        let ka = run(&a, Op::Derive, &yb, 512);
        let kb = run(&b, Op::Derive, &ya, 512);
        assert_eq!(ka, kb, "{g}: both parties agree");
        assert_eq!(ka.len(), g.bytes());
        assert_eq!(ka, left_pad(&python_pow(&yb, xa.bytes(), g.prime()), g.bytes()), "{g}: yb^xa mod p");
    }
}

/// A secret with leading zero bytes keeps them (RFC 7296 §2.14): x = 1 against peer value
/// y = 2 gives 2, written as 255 zero bytes and a 2.
#[test]
fn secrets_are_left_padded() {
    let fw = fw();
    let g = ModpGroup::Modp2048;
    let s = private(&fw, AsymAlg::Ffdh(g), PrivateKey::raw(&[1]));
    assert_eq!(run(&s, Op::PublicKey, &[], 256), left_pad(&[2], 256));
    assert_eq!(run(&s, Op::Derive, &left_pad(&[2], 256), 256), left_pad(&[2], 256));
}

#[test]
fn peer_values_outside_2_to_p_minus_2_are_refused() {
    let fw = fw();
    let g = ModpGroup::Modp2048;
    let s = private(&fw, AsymAlg::Ffdh(g), PrivateKey::raw(&[0x5a; 32]));
    let p = BigNum::from_slice(g.prime()).unwrap();
    let minus = |k: u32| {
        let mut v = p.to_owned().unwrap();
        v.sub_word(k).unwrap();
        v.to_vec_padded(256).unwrap()
    };
    for bad in [left_pad(&[0], 256), left_pad(&[1], 256), minus(1), minus(0), vec![0xff; 256]] {
        expect_error(&s, Request::asymmetric(Op::Derive, bad, 256), ErrorKind::PeerValueOutOfRange);
    }
    // The ends of the range are taken.
    assert_eq!(run(&s, Op::Derive, &left_pad(&[2], 256), 256).len(), 256);
    assert_eq!(run(&s, Op::Derive, &minus(2), 256).len(), 256);
    expect_error(&s, Request::asymmetric(Op::Derive, vec![2; 255], 256), ErrorKind::BadInputLength);
    expect_error(&s, Request::asymmetric(Op::Derive, left_pad(&[2], 256), 255), ErrorKind::OutputTooShort);
}

fn modexp_key(e: &[u8], m: &[u8]) -> AsymKey {
    AsymKey::ModExp { exponent: Key::new(e), modulus: m.to_vec() }
}

/// ModExp equals Python's `pow()` for random odd moduli of 512 to 4096 bits.
#[test]
fn modexp_equals_python_pow() {
    let fw = fw();
    for bits in [512, 1024, 2048, 3072, 4096] {
        let n = bits / 8;
        let mut m = random_bytes(n);
        m[0] |= 0x80;
        m[n - 1] |= 1;
        let e = random_bytes(n);
        let mut base = random_bytes(n);
        base[0] &= 0x7f; // below the modulus
        let s = session(&fw, AsymAlg::ModExp, modexp_key(&e, &m));
        let got = run(&s, Op::ModExp, &base, n);
        assert_eq!(got.len(), n, "{bits}: written with the modulus's length");
        assert_eq!(got, left_pad(&python_pow(&base, &e, &m), n), "{bits}-bit modulus");
    }
}

#[test]
fn modexp_refusals_are_counted() {
    let fw = fw();
    let m = ModpGroup::Modp2048.prime();
    let s = session(&fw, AsymAlg::ModExp, modexp_key(&[3], m));
    expect_error(&s, Request::asymmetric(Op::ModExp, m.to_vec(), 256), ErrorKind::ModExpBaseTooLarge);
    expect_error(&s, Request::asymmetric(Op::ModExp, vec![0xff; 257], 256), ErrorKind::ModExpBaseTooLarge);
    expect_error(&s, Request::asymmetric(Op::ModExp, vec![2], 255), ErrorKind::OutputTooShort);
    // 2^3 = 8, padded.
    assert_eq!(run(&s, Op::ModExp, &[2], 256), left_pad(&[8], 256));
}

/// Exponents 0 and p-1 are degenerate (the public value would be 1): BadKey, counted.
#[test]
fn degenerate_exponents_are_refused() {
    let fw = fw();
    let g = ModpGroup::Modp2048;
    let mut p_minus_1 = g.prime().to_vec();
    p_minus_1[255] -= 1;
    for x in [vec![0u8], vec![0u8; 256], p_minus_1] {
        expect_session_error(&fw, AsymAlg::Ffdh(g), AsymKey::Private(PrivateKey::raw(&x)), ErrorKind::BadKey);
    }
}
