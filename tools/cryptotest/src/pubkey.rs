//! A public-key case's keys, and its requests with what each must give.
//!
//! ```text
//!  Keys::generate (once per algorithm, on the measuring framework)
//!    ├─ Framework::generate_key: our private key (and a peer's, for key agreement)
//!    ├─ reference sessions (soft): Op::PublicKey gives the public key and the peer's value
//!    └─ one session per key and operation (Keys::params): private for sign, derive,
//!       decapsulate, modexp; public for verify, encapsulate
//!  Keys::request (per request slot, before the clock starts)
//!    └─ the request, and under --verify what its result must be ([`Check`]), made by the
//!       reference sessions: a deterministic result is compared byte for byte (an RSA
//!       PKCS#1 v1.5 or Ed25519 signature with the reference's; a shared secret, or a
//!       modular power, with what the *peer* derives from our public value); a randomized
//!       one (an ECDSA signature, an ML-KEM encapsulation) is kept and checked after the
//!       clock stops (Keys::check_later): the signature must verify, the ciphertext must
//!       decapsulate to the shared secret beside it.
//! ```
//!
//! What is signed: `openssl speed` 3.0's input lengths (36 bytes for RSA, 20 for ECDSA and
//! Ed25519; `apps/speed.c`). openssl hands them to `EVP_PKEY_sign` as a digest; ocf's
//! operations take a message and hash it (see `algs::openssl_caveat`). A key agreement
//! derives with one fixed peer, as openssl speed does. `modexp2048` is a MODP group 14
//! Diffie-Hellman step as the seed's `CRK_MOD_EXP`: a generated group 14 private value as
//! the exponent, the prime as the modulus, a peer's public value as the base — its result
//! is the `ffdh2048` shared secret of the same keys.
//!
//! The null driver answers every operation with an empty result: under `--verify` that is
//! a mismatch (as its symmetric results are); without it, its operations count as done.

use ocf::asym::{AsymKind, MLKEM768_CIPHERTEXT_LEN, MLKEM_SHARED_LEN};
use ocf::{AsymAlg, AsymKey, Framework, Key, ModpGroup, Op, PublicKey, Request, Session, SessionParams};

use crate::algs::{Alg, PublicKeyAlg};
use crate::drivers::REFERENCE;

/// What a request's result must be under `--verify`.
pub enum Check {
    /// These bytes.
    Exact(Vec<u8>),
    /// Success (a verification of a valid signature).
    Succeeds,
    /// Kept, and checked after the clock by [`Keys::check_later`] with this input (the
    /// message an ECDSA signature signs; empty for an encapsulation).
    Later(Vec<u8>),
}

/// One algorithm's keys and the reference sessions that make inputs and expected results.
pub struct Keys {
    pub alg: PublicKeyAlg,
    name: &'static str,
    /// The key of sign, derive, decapsulate and modexp sessions.
    private: AsymKey,
    /// The key of verify and encapsulate sessions.
    public: Option<AsymKey>,
    /// Derive and modexp: the peer's public value.
    peer: Vec<u8>,
    /// Derive and modexp: the peer's side (a reference session with the peer's private
    /// key) and our public value, whose derive is what ours must equal.
    peer_side: Option<(Session, Vec<u8>)>,
    /// The reference driver's sessions with `private` and `public`.
    ref_private: Session,
    ref_public: Option<Session>,
}

impl Keys {
    /// Makes the keys of `alg` through `fw.generate_key` and the reference's sessions with
    /// them. The error says what failed (no driver generates such keys, the reference
    /// refuses them).
    pub fn generate(fw: &Framework, alg: &Alg) -> Result<Keys, String> {
        let Some(pk) = alg.public_key else {
            return Err(format!("{}: not a public-key algorithm", alg.name));
        };
        let name = alg.name;
        let gen = |a: AsymAlg| {
            fw.generate_key(a, pk.bits).map_err(|e| format!("{name}: skipped: no key: generate_key: {e}"))
        };
        let session = |a: AsymAlg, key: &AsymKey| {
            fw.new_session_on(REFERENCE, &SessionParams::asymmetric(a, key.clone()))
                .map_err(|e| format!("{name}: skipped on {REFERENCE}: {e}"))
        };
        let room = pk.alg.max_output_len(pk.bits);
        let public_of = |s: &Session| {
            s.run(Request::asymmetric(Op::PublicKey, Vec::new(), room))
                .map(|r| r.result_payload())
                .map_err(|e| format!("{name}: {REFERENCE} gave no public key: {}", e.error()))
        };
        // Key agreement: our key and a peer's, each side's public value from its session.
        let agreement = |a: AsymAlg| -> Result<_, String> {
            let (ours, theirs) = (gen(a)?, gen(a)?);
            let peer_session = session(a, &AsymKey::Private(theirs))?;
            let peer = public_of(&peer_session)?;
            let own_public = public_of(&session(a, &AsymKey::Private(ours.clone()))?)?;
            Ok((ours, peer, Some((peer_session, own_public))))
        };
        let (private, peer, peer_side) = match pk.alg.kind() {
            AsymKind::Signature | AsymKind::Kem => (AsymKey::Private(gen(pk.alg)?), Vec::new(), None),
            AsymKind::Agreement => {
                let (ours, peer, side) = agreement(pk.alg)?;
                (AsymKey::Private(ours), peer, side)
            }
            AsymKind::ModExp => {
                // The exponent is a MODP group 14 private value (raw: big-endian).
                let (x, peer, side) = agreement(AsymAlg::Ffdh(ModpGroup::Modp2048))?;
                let key = AsymKey::ModExp {
                    exponent: Key::new(x.bytes()),
                    modulus: ModpGroup::Modp2048.prime().to_vec(),
                };
                (key, peer, side)
            }
        };
        let ref_private = session(pk.alg, &private)?;
        let public = match pk.alg.kind() {
            AsymKind::Signature | AsymKind::Kem => {
                Some(AsymKey::Public(PublicKey::raw(&public_of(&ref_private)?)))
            }
            _ => None,
        };
        let ref_public = public.as_ref().map(|k| session(pk.alg, k)).transpose()?;
        Ok(Keys { alg: pk, name, private, public, peer, peer_side, ref_private, ref_public })
    }

    /// The session parameters of `op`'s sessions.
    pub fn params(&self, op: Op) -> SessionParams {
        let key = match (op, &self.public) {
            (Op::Verify | Op::Encapsulate, Some(public)) => public,
            _ => &self.private,
        };
        SessionParams::asymmetric(self.alg.alg, key.clone())
    }

    /// The bytes of `op`'s input (the message, the peer's value, the ciphertext): what the
    /// cost table's byte count counts per operation.
    pub fn input_len(&self, op: Op) -> usize {
        match op {
            Op::Sign | Op::Verify => self.alg.message_len,
            Op::Derive | Op::ModExp => self.peer.len(),
            Op::Decapsulate => MLKEM768_CIPHERTEXT_LEN,
            _ => 0,
        }
    }

    fn room(&self) -> usize {
        self.alg.alg.max_output_len(self.alg.bits)
    }

    fn reference(&self, req: Request, what: &str) -> Result<Vec<u8>, String> {
        let session = match req.op {
            Op::Encapsulate | Op::Verify => self.ref_public.as_ref().unwrap_or(&self.ref_private),
            _ => &self.ref_private,
        };
        session
            .run(req)
            .map(|r| r.result_payload())
            .map_err(|e| format!("{}: the reference driver failed to {what}: {}", self.name, e.error()))
    }

    /// Request slot `variant` of `thread` for `op` and, with `verify`, what its result must
    /// be. Signature cases sign a message of their own per variant and thread.
    pub fn request(
        &self,
        op: Op,
        variant: usize,
        thread: usize,
        verify: bool,
    ) -> Result<(Request, Option<Check>), String> {
        let message: Vec<u8> = (0..self.alg.message_len)
            .map(|j| (j.wrapping_mul(37) ^ variant.wrapping_mul(151) ^ thread.wrapping_mul(89)) as u8)
            .collect();
        let room = self.room();
        let deterministic = matches!(self.alg.alg, AsymAlg::RsaPkcs1 { .. } | AsymAlg::Ed25519);
        let exact = |req: Request, what: &str| -> Result<Option<Check>, String> {
            Ok(if verify { Some(Check::Exact(self.reference(req, what)?)) } else { None })
        };
        Ok(match op {
            Op::Sign => {
                let check = if deterministic {
                    exact(Request::asymmetric(Op::Sign, message.clone(), room), "sign")?
                } else {
                    verify.then(|| Check::Later(message.clone()))
                };
                (Request::asymmetric(Op::Sign, message, room), check)
            }
            Op::Verify => {
                let sig = self.reference(Request::asymmetric(Op::Sign, message.clone(), room), "sign")?;
                (Request::verify(&message, &sig), verify.then_some(Check::Succeeds))
            }
            Op::Derive | Op::ModExp => {
                // What the peer derives from our public value.
                let check = match (&self.peer_side, verify) {
                    (Some((side, own_public)), true) => {
                        let theirs = side
                            .run(Request::asymmetric(Op::Derive, own_public.clone(), room))
                            .map(|r| r.result_payload())
                            .map_err(|e| format!("{}: the peer's derive failed: {}", self.name, e.error()))?;
                        Some(Check::Exact(theirs))
                    }
                    _ => None,
                };
                (Request::asymmetric(op, self.peer.clone(), room), check)
            }
            Op::Encapsulate => (
                Request::asymmetric(Op::Encapsulate, Vec::new(), room),
                verify.then(|| Check::Later(Vec::new())),
            ),
            Op::Decapsulate => {
                let sealed =
                    self.reference(Request::asymmetric(Op::Encapsulate, Vec::new(), room), "encapsulate")?;
                let (ct, shared) = sealed.split_at(sealed.len().saturating_sub(MLKEM_SHARED_LEN));
                let check = verify.then(|| Check::Exact(shared.to_vec()));
                (Request::asymmetric(Op::Decapsulate, ct.to_vec(), room), check)
            }
            _ => return Err(format!("{}: cryptotest does not measure {}", self.name, op.name())),
        })
    }

    /// Checks a kept result ([`Check::Later`]) with the reference: an ECDSA signature of
    /// `input` must verify; an encapsulation's ciphertext must decapsulate to the shared
    /// secret after it. `None`: it is right; else what is wrong.
    pub fn check_later(&self, op: Op, input: &[u8], result: &[u8]) -> Option<String> {
        match op {
            Op::Sign => {
                let session = self.ref_public.as_ref()?;
                match session.run(Request::verify(input, result)) {
                    Ok(_) => None,
                    Err(e) => Some(format!(
                        "a {}-byte signature does not verify on {REFERENCE}: {}",
                        result.len(),
                        e.error()
                    )),
                }
            }
            Op::Encapsulate => {
                let want = MLKEM768_CIPHERTEXT_LEN + MLKEM_SHARED_LEN;
                if result.len() != want {
                    return Some(format!(
                        "{} bytes instead of {want} (ciphertext ‖ shared secret)",
                        result.len()
                    ));
                }
                let (ct, shared) = result.split_at(MLKEM768_CIPHERTEXT_LEN);
                let room = self.room();
                match self.ref_private.run(Request::asymmetric(Op::Decapsulate, ct.to_vec(), room)) {
                    Ok(r) if r.result_payload() == shared => None,
                    Ok(_) => {
                        Some(format!("{REFERENCE} decapsulates the ciphertext to another shared secret"))
                    }
                    Err(e) => Some(format!("{REFERENCE} cannot decapsulate the ciphertext: {}", e.error())),
                }
            }
            _ => None,
        }
    }
}
