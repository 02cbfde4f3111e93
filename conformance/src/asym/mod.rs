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

use ocf::{AsymAlg, AsymKey, SessionParams};

use crate::case::{Case, Check, Rejection};
pub(crate) use crate::case::{Expect, Step, Verifier};
use crate::report::CaseId;

/// A case running `steps` on a session of `alg` with `key`.
pub(crate) fn case(id: CaseId, alg: AsymAlg, key: AsymKey, steps: Vec<Step>) -> Case {
    Case { id, params: SessionParams::asymmetric(alg, key), check: Check::Asym(steps) }
}

/// A case whose session must be refused with `rejection`.
pub(crate) fn refused_session(id: CaseId, alg: AsymAlg, key: AsymKey, rejection: Rejection) -> Case {
    Case { id, params: SessionParams::asymmetric(alg, key), check: Check::RejectSession(rejection) }
}
