//! Public-key sessions (issue 32): the key parsed once in `new_session`, each request one
//! library call.
//!
//! ```text
//!  Mode::Asymmetric { alg, key }
//!      │  AsymSession::new: parse the key (PKCS#8 / SPKI / raw) ─ fails with BadKey
//!      ▼
//!  AsymSession ── Agreement (X25519, ECDH)      agreement.rs  aws-lc-rs
//!              ── Ffdh (MODP groups 14, 15)     ffdh.rs       libcrypto, BN_mod_exp_mont_consttime
//!              ── ModExp (CRK_MOD_EXP)          modexp.rs     libcrypto, BN_mod_exp_mont_consttime
//!              ── Ed25519, Ecdsa{Signer,Verifier} signature.rs aws-lc-rs (libcrypto for the
//!                                                               curve/hash pairs aws-lc-rs lacks)
//!              ── Rsa{Signer,Verifier}          rsa.rs        aws-lc-rs
//!              ── MlKem{Decap,Encap}            kem.rs        aws-lc-rs (aws-lc-sys for the seed)
//!              ── Generate                      generate.rs   libcrypto / aws-lc-rs / getrandom
//!      │
//!  request: Request::with_input_output (result to out, its length in result_len) or
//!           Request::with_message_and_signature (Verify)
//! ```
//!
//! Each library was chosen by measurement (`tools/libbench`, "Public-key operations" in its
//! REPORT.md): aws-lc-rs was ahead of libcrypto 3.0 in every operation both have, from
//! 1.02x (RSA-2048 sign) to 9x (ECDSA P-384 sign). MODP and `CRK_MOD_EXP` need a bignum
//! API aws-lc-rs does not offer: libcrypto's constant-time Montgomery ladder serves them.
//!
//! Errors are the framework's, one per cause: a key that does not parse is `BadKey`, a
//! result with no room `OutputTooShort`, a peer value off the curve `InvalidPoint`, and so
//! on (see each file).

mod agreement;
mod ffdh;
mod generate;
mod kem;
mod modexp;
mod rsa;
mod signature;

use ocf::asym::AsymKey;
use ocf::{AsymAlg, Error, Op, Request};

/// A public-key session: the algorithm with its parsed key.
pub(crate) enum AsymSession {
    Agreement(agreement::Agreement),
    Ffdh(ffdh::Ffdh),
    ModExp(modexp::ModExp),
    Signer(signature::Signer),
    Verifier(signature::Verifier),
    RsaSigner(rsa::RsaSigner),
    RsaVerifier(rsa::RsaVerifier),
    KemDecap(kem::Decapsulator),
    KemEncap(kem::Encapsulator),
    Generate(generate::Generator),
}

impl AsymSession {
    /// Parses `key` for `alg`. The framework checked the kind of key and raw lengths
    /// (`SessionParams::validate`); what only a library can tell fails here with `BadKey`.
    pub(crate) fn new(alg: AsymAlg, key: &AsymKey) -> Result<AsymSession, Error> {
        if let AsymKey::Generate { bits } = key {
            return Ok(AsymSession::Generate(generate::Generator::new(alg, *bits)));
        }
        Ok(match (alg, key) {
            (AsymAlg::X25519 | AsymAlg::Ecdh(_), AsymKey::Private(k)) => {
                AsymSession::Agreement(agreement::Agreement::new(alg, k)?)
            }
            (AsymAlg::Ffdh(g), AsymKey::Private(k)) => AsymSession::Ffdh(ffdh::Ffdh::new(g, k)?),
            (AsymAlg::ModExp, AsymKey::ModExp { exponent, modulus }) => {
                AsymSession::ModExp(modexp::ModExp::new(exponent.as_bytes(), modulus)?)
            }
            (AsymAlg::Ed25519 | AsymAlg::Ecdsa { .. }, AsymKey::Private(k)) => {
                AsymSession::Signer(signature::Signer::new(alg, k)?)
            }
            (AsymAlg::Ed25519 | AsymAlg::Ecdsa { .. }, AsymKey::Public(k)) => {
                AsymSession::Verifier(signature::Verifier::new(alg, k)?)
            }
            (AsymAlg::RsaPkcs1 { .. } | AsymAlg::RsaPss { .. }, AsymKey::Private(k)) => {
                AsymSession::RsaSigner(rsa::RsaSigner::new(alg, k)?)
            }
            (AsymAlg::RsaPkcs1 { .. } | AsymAlg::RsaPss { .. }, AsymKey::Public(k)) => {
                AsymSession::RsaVerifier(rsa::RsaVerifier::new(alg, k)?)
            }
            (AsymAlg::MlKem768, AsymKey::Private(k)) => AsymSession::KemDecap(kem::Decapsulator::new(k)?),
            (AsymAlg::MlKem768, AsymKey::Public(k)) => AsymSession::KemEncap(kem::Encapsulator::new(k)?),
            _ => return Err(Error::UnsupportedAsym(alg)),
        })
    }

    /// One request. ocf checked that the key allows `req.op` and that `out` is there.
    pub(crate) fn run(&self, req: &mut Request) -> Result<(), Error> {
        let op = req.op;
        match (self, op) {
            (AsymSession::Verifier(v), Op::Verify) => req.with_message_and_signature(|m, s| v.verify(m, s)),
            (AsymSession::RsaVerifier(v), Op::Verify) => {
                req.with_message_and_signature(|m, s| v.verify(m, s))
            }
            _ => req.with_input_output(|input, out| match (self, op) {
                (AsymSession::Agreement(a), Op::Derive) => a.derive(input, out),
                (AsymSession::Agreement(a), Op::PublicKey) => put(out, a.public_key()),
                (AsymSession::Ffdh(f), Op::Derive) => f.derive(input, out),
                (AsymSession::Ffdh(f), Op::PublicKey) => put(out, f.public_key()),
                (AsymSession::ModExp(m), Op::ModExp) => m.run(input, out),
                (AsymSession::Signer(s), Op::Sign) => s.sign(input, out),
                (AsymSession::Signer(s), Op::PublicKey) => put(out, s.public_key()),
                (AsymSession::RsaSigner(s), Op::Sign) => s.sign(input, out),
                (AsymSession::RsaSigner(s), Op::PublicKey) => put(out, s.public_key()),
                (AsymSession::KemDecap(k), Op::Decapsulate) => k.decapsulate(input, out),
                (AsymSession::KemDecap(k), Op::PublicKey) => put(out, k.public_key()),
                (AsymSession::KemEncap(k), Op::Encapsulate) => k.encapsulate(out),
                (AsymSession::Generate(g), Op::GenerateKey) => g.generate(out),
                _ => Err(Error::DriverFailure("soft: an operation the session's key does not allow")),
            }),
        }
    }
}

/// Checks that `out` has room for `need` bytes.
fn room(out: &[u8], need: usize) -> Result<(), Error> {
    if out.len() < need {
        return Err(Error::OutputTooShort { need, got: out.len() });
    }
    Ok(())
}

/// Writes `bytes` to the start of `out`; returns their length.
fn put(out: &mut [u8], bytes: &[u8]) -> Result<usize, Error> {
    room(out, bytes.len())?;
    out[..bytes.len()].copy_from_slice(bytes);
    Ok(bytes.len())
}

/// `map_err` for a key a library refused: `BadKey` saying `why`.
fn bad_key<E>(why: &'static str) -> impl FnOnce(E) -> Error {
    move |_| Error::BadKey { why }
}
