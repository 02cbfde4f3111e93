//! Public-key cases (issue 32): every operation the soft driver serves, once per library
//! that has it, each doing what the driver does per request with a key parsed once:
//!
//! - aws-lc-rs: its safe API (`signature`, `agreement::agree`), key pairs built once;
//! - openssl (libcrypto 3.0, the library `openssl speed` measures): a `PKey` parsed once,
//!   a fresh `EVP_PKEY_CTX` per operation (a context is not shareable between threads, and
//!   a session is), the message hashed with `openssl::sha`.
//!
//! The message is 32 bytes (`openssl speed` signs 36 bytes, unhashed). Cross-checks before
//! timing: each library verifies the other's signature, both derive the same secret.
//! The unit is one operation (`size` column 0); figures print as ns/op.

use std::hint::black_box;

use aws_lc_rs as awslc;
use awslc::agreement;
use awslc::rand::SystemRandom;
use awslc::signature::{self, KeyPair};
use openssl::bn::{BigNum, BigNumContext};
use openssl::derive::Deriver;
use openssl::ec::{EcGroup, EcKey};
use openssl::md::Md;
use openssl::nid::Nid;
use openssl::pkey::{Id, PKey, Private, Public};
use openssl::pkey_ctx::PkeyCtx;
use openssl::rsa::Padding;

use crate::{Kind, Reg};

const MSG: [u8; 32] = *b"ocf libbench asymmetric message.";

fn ossl_sign(pkey: &PKey<Private>, md: Option<&openssl::md::MdRef>, pss: bool, data: &[u8], sig: &mut [u8]) -> usize {
    let mut ctx = PkeyCtx::new(pkey).unwrap();
    ctx.sign_init().unwrap();
    if let Some(md) = md {
        ctx.set_signature_md(md).unwrap();
    }
    if pss {
        ctx.set_rsa_padding(Padding::PKCS1_PSS).unwrap();
        ctx.set_rsa_pss_saltlen(openssl::sign::RsaPssSaltlen::DIGEST_LENGTH).unwrap();
    }
    ctx.sign(data, Some(sig)).unwrap()
}

fn ossl_verify(pkey: &PKey<Public>, md: Option<&openssl::md::MdRef>, pss: bool, data: &[u8], sig: &[u8]) -> bool {
    let mut ctx = PkeyCtx::new(pkey).unwrap();
    ctx.verify_init().unwrap();
    if let Some(md) = md {
        ctx.set_signature_md(md).unwrap();
    }
    if pss {
        ctx.set_rsa_padding(Padding::PKCS1_PSS).unwrap();
        ctx.set_rsa_pss_saltlen(openssl::sign::RsaPssSaltlen::DIGEST_LENGTH).unwrap();
    }
    ctx.verify(data, sig).unwrap_or(false)
}

fn public_of(pkey: &PKey<Private>) -> PKey<Public> {
    PKey::public_key_from_der(&pkey.public_key_to_der().unwrap()).unwrap()
}

pub fn register(r: &mut Reg) {
    rsa(r, "rsa2048-pkcs1-sha256", 2048, false);
    rsa(r, "rsa2048-pss-sha256", 2048, true);
    rsa(r, "rsa4096-pkcs1-sha256", 4096, false);
    ecdsa(r, "ecdsa-p256-sha256", Nid::X9_62_PRIME256V1, &signature::ECDSA_P256_SHA256_ASN1_SIGNING, &signature::ECDSA_P256_SHA256_ASN1, false);
    ecdsa(r, "ecdsa-p384-sha384", Nid::SECP384R1, &signature::ECDSA_P384_SHA384_ASN1_SIGNING, &signature::ECDSA_P384_SHA384_ASN1, true);
    ed25519(r);
    ecdh(r, "ecdh-p256", Some(Nid::X9_62_PRIME256V1), &agreement::ECDH_P256);
    ecdh(r, "ecdh-p384", Some(Nid::SECP384R1), &agreement::ECDH_P384);
    ecdh(r, "x25519", None, &agreement::X25519);
    modexp(r, "modexp-modp2048", 2048);
    modexp(r, "modexp-modp3072", 3072);
    mlkem(r);
}

fn rsa(r: &mut Reg, alg: &'static str, bits: u32, pss: bool) {
    let rsa = openssl::rsa::Rsa::generate(bits).unwrap();
    let pkey = PKey::from_rsa(rsa).unwrap();
    let pkcs8 = pkey.private_key_to_pkcs8().unwrap();
    let pubkey = public_of(&pkey);
    let rsa_pub_der = pkey.rsa().unwrap().public_key_to_der_pkcs1().unwrap();
    let kp = signature::RsaKeyPair::from_pkcs8(&pkcs8).unwrap();
    let (sign_enc, verify_alg): (&'static dyn signature::RsaEncoding, &'static signature::RsaParameters) = if pss {
        (&signature::RSA_PSS_SHA256, &signature::RSA_PSS_2048_8192_SHA256)
    } else {
        (&signature::RSA_PKCS1_SHA256, &signature::RSA_PKCS1_2048_8192_SHA256)
    };
    let n = (bits / 8) as usize;
    // cross-check
    let mut sig = vec![0; n];
    kp.sign(sign_enc, &SystemRandom::new(), &MSG, &mut sig).unwrap();
    assert!(ossl_verify(&pubkey, Some(Md::sha256()), pss, &openssl::sha::sha256(&MSG), &sig), "{alg}: openssl rejects aws-lc-rs");
    let mut sig2 = vec![0; n];
    ossl_sign(&pkey, Some(Md::sha256()), pss, &openssl::sha::sha256(&MSG), &mut sig2);
    signature::UnparsedPublicKey::new(verify_alg, &rsa_pub_der).verify(&MSG, &sig2).expect("aws-lc-rs rejects openssl");

    let rng = SystemRandom::new();
    let mut s = vec![0; n];
    r.add(alg_sign(alg), "aws-lc-rs (RsaKeyPair::sign)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        kp.sign(sign_enc, &rng, black_box(&MSG), &mut s).unwrap();
    }));
    let mut s = vec![0; n];
    let pk = pkey.clone();
    r.add(alg_sign(alg), "openssl (EVP_PKEY_sign, ctx per op)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        ossl_sign(&pk, Some(Md::sha256()), pss, &openssl::sha::sha256(black_box(&MSG)), &mut s);
    }));
    let key = signature::ParsedPublicKey::new(verify_alg, &rsa_pub_der).unwrap();
    let sig_a = sig.clone();
    r.add(alg_verify(alg), "aws-lc-rs (ParsedPublicKey::verify_sig)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        key.verify_sig(black_box(&MSG), &sig_a).unwrap();
    }));
    r.add(alg_verify(alg), "openssl (EVP_PKEY_verify, ctx per op)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        assert!(ossl_verify(&pubkey, Some(Md::sha256()), pss, &openssl::sha::sha256(black_box(&MSG)), &sig));
    }));
}

fn alg_sign(alg: &'static str) -> &'static str {
    Box::leak(format!("{alg} sign").into_boxed_str())
}
fn alg_verify(alg: &'static str) -> &'static str {
    Box::leak(format!("{alg} verify").into_boxed_str())
}

fn ecdsa(
    r: &mut Reg,
    alg: &'static str,
    nid: Nid,
    sign_alg: &'static signature::EcdsaSigningAlgorithm,
    verify_alg: &'static signature::EcdsaVerificationAlgorithm,
    sha384: bool,
) {
    let group = EcGroup::from_curve_name(nid).unwrap();
    let pkey = PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap();
    let pkcs8 = pkey.private_key_to_pkcs8().unwrap();
    let pubkey = public_of(&pkey);
    let kp = signature::EcdsaKeyPair::from_pkcs8(sign_alg, &pkcs8).unwrap();
    let point = kp.public_key().as_ref().to_vec();
    let md = if sha384 { Md::sha384() } else { Md::sha256() };
    let hash = move |m: &[u8]| -> Vec<u8> {
        if sha384 { openssl::sha::sha384(m).to_vec() } else { openssl::sha::sha256(m).to_vec() }
    };
    let sig = kp.sign(&SystemRandom::new(), &MSG).unwrap().as_ref().to_vec();
    assert!(ossl_verify(&pubkey, Some(md), false, &hash(&MSG), &sig), "{alg}: openssl rejects aws-lc-rs");
    let mut sig2 = vec![0; 128];
    let l = ossl_sign(&pkey, Some(md), false, &hash(&MSG), &mut sig2);
    signature::UnparsedPublicKey::new(verify_alg, &point).verify(&MSG, &sig2[..l]).expect("aws-lc-rs rejects openssl");

    let rng = SystemRandom::new();
    r.add(alg_sign(alg), "aws-lc-rs (EcdsaKeyPair::sign)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        black_box(kp.sign(&rng, black_box(&MSG)).unwrap());
    }));
    let pk = pkey.clone();
    let mut s = vec![0; 128];
    r.add(alg_sign(alg), "openssl (EVP_PKEY_sign, ctx per op)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        ossl_sign(&pk, Some(md), false, &hash(black_box(&MSG)), &mut s);
    }));
    let key = signature::ParsedPublicKey::new(verify_alg, &point).unwrap();
    let sig_a = sig.clone();
    r.add(alg_verify(alg), "aws-lc-rs (ParsedPublicKey::verify_sig)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        key.verify_sig(black_box(&MSG), &sig_a).unwrap();
    }));
    r.add(alg_verify(alg), "openssl (EVP_PKEY_verify, ctx per op)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        assert!(ossl_verify(&pubkey, Some(md), false, &hash(black_box(&MSG)), &sig));
    }));
}

fn ed25519(r: &mut Reg) {
    let pkey = PKey::generate_ed25519().unwrap();
    let pkcs8 = pkey.private_key_to_pkcs8().unwrap();
    let pubkey = public_of(&pkey);
    let kp = signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(&pkcs8).unwrap();
    let raw_pub = kp.public_key().as_ref().to_vec();
    let sig = kp.sign(&MSG).as_ref().to_vec();
    let mut sig2 = vec![0; 64];
    openssl::sign::Signer::new_without_digest(&pkey).unwrap().sign_oneshot(&mut sig2, &MSG).unwrap();
    assert_eq!(sig, sig2, "ed25519 is deterministic: both libraries sign alike");

    r.add("ed25519 sign", "aws-lc-rs (Ed25519KeyPair::sign)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        black_box(kp.sign(black_box(&MSG)));
    }));
    let pk = pkey.clone();
    let mut s = vec![0; 64];
    r.add("ed25519 sign", "openssl (EVP_PKEY_sign, ctx per op)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        // EVP_DigestSign: Ed25519 signs the message itself (one-shot).
        let mut signer = openssl::sign::Signer::new_without_digest(&pk).unwrap();
        signer.sign_oneshot(&mut s, black_box(&MSG)).unwrap();
    }));
    let key = signature::ParsedPublicKey::new(&signature::ED25519, &raw_pub).unwrap();
    let sig_a = sig.clone();
    r.add("ed25519 verify", "aws-lc-rs (ParsedPublicKey::verify_sig)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        key.verify_sig(black_box(&MSG), &sig_a).unwrap();
    }));
    r.add("ed25519 verify", "openssl (EVP_DigestVerify, ctx per op)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        let mut v = openssl::sign::Verifier::new_without_digest(&pubkey).unwrap();
        assert!(v.verify_oneshot(&sig, black_box(&MSG)).unwrap());
    }));
}

fn ecdh(r: &mut Reg, alg: &'static str, nid: Option<Nid>, aws_alg: &'static agreement::Algorithm) {
    let make = || match nid {
        Some(n) => PKey::from_ec_key(EcKey::generate(&EcGroup::from_curve_name(n).unwrap()).unwrap()).unwrap(),
        None => PKey::generate_x25519().unwrap(),
    };
    let mine = make();
    let peer = make();
    let peer_pub = public_of(&peer);
    let peer_raw: Vec<u8> = match nid {
        Some(n) => {
            let ec = peer.ec_key().unwrap();
            let mut ctx = BigNumContext::new().unwrap();
            ec.public_key()
                .to_bytes(&EcGroup::from_curve_name(n).unwrap(), openssl::ec::PointConversionForm::UNCOMPRESSED, &mut ctx)
                .unwrap()
        }
        None => peer.raw_public_key().unwrap(),
    };
    let mine_key = match nid {
        Some(_) => agreement::PrivateKey::from_private_key_der(aws_alg, &mine.ec_key().unwrap().private_key_to_der().unwrap()).unwrap(),
        None => agreement::PrivateKey::from_private_key(aws_alg, &mine.raw_private_key().unwrap()).unwrap(),
    };
    let want = {
        let mut d = Deriver::new(&mine).unwrap();
        d.set_peer(&peer_pub).unwrap();
        d.derive_to_vec().unwrap()
    };
    let got = agreement::agree(&mine_key, agreement::UnparsedPublicKey::new(aws_alg, &peer_raw), (), |s| Ok(s.to_vec())).unwrap();
    assert_eq!(want, got, "{alg}: the two libraries derive the same secret");

    let raw = peer_raw.clone();
    let name = Box::leak(format!("{alg} derive").into_boxed_str());
    r.add(name, "aws-lc-rs (agreement::agree, peer parsed per op)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        agreement::agree(&mine_key, agreement::UnparsedPublicKey::new(aws_alg, black_box(&raw)), (), |s| {
            black_box(s);
            Ok(())
        })
        .unwrap();
    }));
    let mut out = vec![0; 64];
    r.add(name, "openssl (EVP_PKEY_derive, peer parsed per op)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        // The peer's value arrives raw with each request: parse it as the driver must.
        let peer = match nid {
            Some(n) => {
                let group = EcGroup::from_curve_name(n).unwrap();
                let mut ctx = BigNumContext::new().unwrap();
                let p = openssl::ec::EcPoint::from_bytes(&group, black_box(&peer_raw), &mut ctx).unwrap();
                PKey::from_ec_key(EcKey::from_public_key(&group, &p).unwrap()).unwrap()
            }
            None => PKey::public_key_from_raw_bytes(black_box(&peer_raw), Id::X25519).unwrap(),
        };
        let mut d = Deriver::new(&mine).unwrap();
        d.set_peer(&peer).unwrap();
        d.derive(&mut out).unwrap();
    }));
}

fn modexp(r: &mut Reg, alg: &'static str, bits: usize) {
    // libcrypto only (aws-lc-rs has no bignum API): BN_mod_exp_mont_consttime, the exponent
    // a full-length secret as RSA's would be and an SP 800-56A-sized one as MODP DH uses.
    let p = if bits == 2048 { BigNum::get_rfc3526_prime_2048().unwrap() } else { BigNum::get_rfc3526_prime_3072().unwrap() };
    for (label, ebits) in [("full exponent", bits), ("256-bit exponent", 256usize)] {
        let mut e = BigNum::new().unwrap();
        e.rand(ebits as i32, openssl::bn::MsbOption::MAYBE_ZERO, false).unwrap();
        let mut base = BigNum::new().unwrap();
        p.rand_range(&mut base).unwrap();
        let p2 = p.to_owned().unwrap();
        let name = Box::leak(format!("{alg} ({label})").into_boxed_str());
        let mut ctx = BigNumContext::new().unwrap();
        r.add(name, "openssl (BN_mod_exp_mont_consttime)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
            let mut out = BigNum::new().unwrap();
            crate::asym::mod_exp_consttime(&mut out, &base, &e, &p2, &mut ctx);
            black_box(out);
        }));
    }
}

unsafe extern "C" {
    // libcrypto 3.0 exports it; openssl-sys does not declare it.
    fn BN_mod_exp_mont_consttime(
        rr: *mut openssl_sys::BIGNUM,
        a: *const openssl_sys::BIGNUM,
        p: *const openssl_sys::BIGNUM,
        m: *const openssl_sys::BIGNUM,
        ctx: *mut openssl_sys::BN_CTX,
        in_mont: *mut openssl_sys::BN_MONT_CTX,
    ) -> std::ffi::c_int;
}

/// `BN_mod_exp_mont_consttime` (the safe `openssl` crate's `mod_exp` is `BN_mod_exp`, which
/// takes the constant-time path only with `BN_FLG_CONSTTIME` set on the exponent).
pub fn mod_exp_consttime(out: &mut BigNum, base: &BigNum, e: &BigNum, m: &BigNum, ctx: &mut BigNumContext) {
    use foreign_types::ForeignTypeRef;
    // SAFETY: all four are valid, live BIGNUMs and a live BN_CTX; out is distinct from the inputs.
    let ok = unsafe {
        BN_mod_exp_mont_consttime(
            out.as_ptr(),
            base.as_ref().as_ptr(),
            e.as_ref().as_ptr(),
            m.as_ref().as_ptr(),
            ctx.as_ptr(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(ok, 1);
}

fn mlkem(r: &mut Reg) {
    use awslc::kem::{DecapsulationKey, ML_KEM_768};
    // aws-lc-rs only (libcrypto 3.0 has no ML-KEM).
    let dk = DecapsulationKey::generate(&ML_KEM_768).unwrap();
    let ek = dk.encapsulation_key().unwrap();
    let (ct, ss) = ek.encapsulate().unwrap();
    assert_eq!(dk.decapsulate(ct.as_ref().into()).unwrap().as_ref(), ss.as_ref());
    let ct = ct.as_ref().to_vec();
    r.add("ml-kem-768 encapsulate", "aws-lc-rs (kem)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        black_box(ek.encapsulate().unwrap());
    }));
    r.add("ml-kem-768 decapsulate", "aws-lc-rs (kem)", 0, Kind::Asym, 0, None, Box::new(move |_c, _b, _n, _o| {
        black_box(dk.decapsulate(black_box(&ct[..]).into()).unwrap());
    }));
}
