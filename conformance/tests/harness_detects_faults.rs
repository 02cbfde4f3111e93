//! The suite checks the suite: a driver that wraps the soft driver and breaks one rule on
//! purpose must be caught, with the failures attributed to it and named by case and
//! layout. Without this, "zero failures" could also mean "checked nothing".

use std::sync::Arc;

use ocf::{
    AsymAlg, Buffer, Capabilities, CipherAlg, DigestAlg, Driver, DriverSession, Error, Failed, Framework,
    Hint, MacAlg, Mode, Op, Priority, Processed, Request, SessionContext, SessionParams,
};
use ocf_conformance::{run_suite, Family, Layout, Suite};

/// The one rule a [`Faulty`] driver breaks.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Flips the first result byte of every successful encryption.
    CorruptCiphertext,
    /// Reports every failed tag check as a success.
    AcceptForgeries,
    /// After a failed AEAD decryption, leaves bytes that are neither zero nor the
    /// ciphertext in the payload (as if it had released unauthenticated plaintext).
    ReleaseUnauthenticated,
    /// Changes the byte just before the payload (filler, AAD, or out-of-place margin).
    ScribbleBeforePayload,
    /// Reports every signature that failed to verify as verified.
    AcceptBadSignatures,
    /// Flips the first byte of every public-key result (a shared secret, a signature).
    CorruptAsymResult,
    /// Flips the last byte of every signature made.
    CorruptSignature,
    /// Writes a byte just after every public-key result, in the room left in `out`.
    ScribbleAfterResult,
    /// Reports an invalid peer point as a bad key: the right refusal, the wrong error.
    MisnameInvalidPoint,
}

/// The soft driver with one [`Fault`].
struct Faulty {
    inner: ocf_soft::SoftDriver,
    fault: Fault,
}

struct FaultySession {
    inner: Box<dyn DriverSession>,
    fault: Fault,
    aead: bool,
}

impl Driver for Faulty {
    fn name(&self) -> &str {
        "faulty"
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn probe_session(&self, params: &SessionParams) -> Option<Priority> {
        self.inner.probe_session(params)
    }

    fn new_session(
        &self,
        params: &SessionParams,
        ctx: SessionContext,
    ) -> Result<Box<dyn DriverSession>, Error> {
        let aead = matches!(params.mode, Mode::Aead { .. });
        Ok(Box::new(FaultySession { inner: self.inner.new_session(params, ctx)?, fault: self.fault, aead }))
    }
}

impl DriverSession for FaultySession {
    fn process(&self, req: Request, hint: Hint) -> Processed {
        match self.inner.process(req, hint) {
            Processed::Done(outcome) => Processed::Done(self.break_rule(outcome)),
            other => other,
        }
    }
}

impl FaultySession {
    fn break_rule(&self, outcome: ocf::Outcome) -> ocf::Outcome {
        match (self.fault, outcome) {
            (Fault::CorruptCiphertext, Ok(mut req))
                if req.op == Op::Encrypt && !req.payload_range().is_empty() =>
            {
                let (buf, at) = result_position(&mut req);
                flip_byte(buf, at);
                Ok(req)
            }
            (Fault::AcceptForgeries, Err(f)) if *f.error() == Error::AuthFailed => Ok(f.into_parts().1),
            (Fault::ReleaseUnauthenticated, Err(f)) if self.aead && *f.error() == Error::AuthFailed => {
                let (error, mut req) = f.into_parts();
                let len = req.payload_range().len();
                let (buf, at) = result_position(&mut req);
                buf.copy_in(at, &vec![0x42; len]);
                Err(Failed::new(error, req))
            }
            (Fault::AcceptBadSignatures, Err(f)) if *f.error() == Error::BadSignature => Ok(f.into_parts().1),
            (Fault::CorruptAsymResult, Ok(mut req)) if req.op.asymmetric() && req.result_len() > 0 => {
                let at = req.out_offset;
                if let Some(out) = req.out.as_mut() {
                    flip_byte(out, at);
                }
                Ok(req)
            }
            (Fault::CorruptSignature, Ok(mut req)) if req.op == Op::Sign && req.result_len() > 0 => {
                let at = req.out_offset + req.result_len() - 1;
                if let Some(out) = req.out.as_mut() {
                    flip_byte(out, at);
                }
                Ok(req)
            }
            (Fault::ScribbleAfterResult, Ok(mut req)) if req.op.asymmetric() => {
                let at = req.out_offset + req.result_len();
                if let Some(out) = req.out.as_mut().filter(|o| o.len() > at) {
                    flip_byte(out, at);
                }
                Ok(req)
            }
            (Fault::MisnameInvalidPoint, Err(f)) if *f.error() == Error::InvalidPoint => {
                Err(Failed::new(Error::BadKey { why: "misnamed" }, f.into_parts().1))
            }
            (Fault::ScribbleBeforePayload, Ok(mut req)) => {
                let (buf, at) = result_position(&mut req);
                if at > 0 {
                    flip_byte(buf, at - 1);
                }
                Ok(req)
            }
            (_, outcome) => outcome,
        }
    }
}

/// Where the payload's result starts: in `out` when out of place, else in `buf`.
fn result_position(req: &mut Request) -> (&mut Buffer, usize) {
    let start = req.payload_range().start;
    let out_offset = req.out_offset;
    let digest = matches!(req.op, Op::ComputeDigest | Op::VerifyDigest);
    let fields: &mut ocf::RequestFields = req;
    match (&mut fields.out, digest) {
        (Some(out), false) => (out, out_offset),
        _ => (&mut fields.buf, start),
    }
}

fn flip_byte(buf: &mut Buffer, at: usize) {
    let mut b = [0u8];
    buf.copy_out(at..at + 1, &mut b);
    buf.copy_in(at, &[b[0] ^ 0xFF]);
}

/// A framework with the soft driver and a faulty one.
fn framework_with(fault: Fault) -> Framework {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    fw.register(Arc::new(Faulty { inner: ocf_soft::SoftDriver::new(), fault })).unwrap();
    fw
}

/// Every failure is the faulty driver's; the soft driver, run alongside, stays clean.
fn only_faulty_fails(report: &ocf_conformance::Report) {
    assert!(!report.is_clean(), "the fault went unnoticed\n{report}");
    for f in report.failures() {
        assert_eq!(f.driver.as_deref(), Some("faulty"), "{f}");
    }
}

#[test]
fn corrupted_ciphertext_fails_every_case_in_every_layout() {
    let report = run_suite(&framework_with(Fault::CorruptCiphertext), Suite::AesCtr);
    only_faulty_fails(&report);
    let family = Family::Cipher(CipherAlg::AesCtr);
    let faulty = report.tally("faulty", family);
    for layout in Layout::ALL {
        assert_eq!(faulty.passed(layout), 0, "{report}");
        assert_eq!(report.tally(ocf_soft::NAME, family).passed(layout), 12, "{report}");
    }
    assert_eq!(report.failures().len(), 12 * Layout::ALL.len());
    let first = report.failures()[0].to_string();
    assert!(first.contains("rfc/sp800-38a-aes-ctr.txt [ENCRYPT] COUNT = 1"), "{first}");
    assert!(first.contains("encrypt: ciphertext"), "{first}");
}

#[test]
fn accepted_forgeries_are_caught() {
    let fw = framework_with(Fault::AcceptForgeries);
    let aead = run_suite(&fw, Suite::ChaCha20Poly1305);
    only_faulty_fails(&aead);
    // Every case with a 12-byte nonce is caught: the 60 Wycheproof forgeries, and every
    // valid case through its flipped-tag check.
    let faulty = aead.tally("faulty", Family::Cipher(CipherAlg::ChaCha20Poly1305));
    for layout in Layout::ALL {
        assert_eq!(faulty.passed(layout), 0, "{aead}");
    }
    assert_eq!(aead.failures().len(), 318 * Layout::ALL.len(), "{aead}");
    assert!(aead.failures().iter().all(|f| f.what.contains("forgery succeeded")), "{aead}");

    let mac = run_suite(&fw, Suite::Hmac);
    only_faulty_fails(&mac);
    let family = Family::Mac(MacAlg::Hmac(DigestAlg::Sha256));
    assert_eq!(mac.tally("faulty", family).passed(Layout::InPlace), 0, "{mac}");
}

#[test]
fn released_unauthenticated_plaintext_is_caught() {
    let report = run_suite(&framework_with(Fault::ReleaseUnauthenticated), Suite::AesGcm);
    only_faulty_fails(&report);
    assert!(report
        .failures()
        .iter()
        .any(|f| f.layout == Some(Layout::InPlace) && f.what.contains("expected zeros")));
    assert!(report
        .failures()
        .iter()
        .any(|f| f.layout == Some(Layout::OutOfPlace) && f.what.contains("released")));
}

#[test]
fn scribbling_outside_the_payload_is_caught() {
    let report = run_suite(&framework_with(Fault::ScribbleBeforePayload), Suite::Digests);
    only_faulty_fails(&report);
    // In place and segmented, the payload starts at 0: nothing before it to scribble on.
    let family = Family::Digest(DigestAlg::Sha256);
    let faulty = report.tally("faulty", family);
    assert_eq!(faulty.passed(Layout::Embedded), 0, "{report}");
    assert_eq!(faulty.passed(Layout::InPlace), 129, "{report}");

    let report = run_suite(&framework_with(Fault::ScribbleBeforePayload), Suite::Null);
    only_faulty_fails(&report);
    let faulty = report.tally("faulty", Family::Cipher(CipherAlg::Null));
    assert_eq!(faulty.passed(Layout::OutOfPlace), 0, "{report}");
    assert_eq!(faulty.passed(Layout::Embedded), 0, "{report}");
}

#[test]
fn accepted_bad_signatures_are_caught() {
    let report = run_suite(&framework_with(Fault::AcceptBadSignatures), Suite::Ed25519);
    only_faulty_fails(&report);
    // RFC 8032's three flipped signatures and Wycheproof's 63 invalid ones (each with the
    // key raw and as SPKI), in every layout; the valid ones still pass.
    let family = Family::Asym(AsymAlg::Ed25519);
    let (faulty, soft) = (report.tally("faulty", family), report.tally(ocf_soft::NAME, family));
    for layout in Layout::ALL {
        assert_eq!(faulty.rejected(layout), 0, "{report}");
        assert_eq!(faulty.passed(layout), soft.passed(layout), "{report}");
    }
    assert_eq!(report.failures().len(), (3 + 2 * 63) * Layout::ALL.len(), "{report}");
    assert!(report.failures().iter().all(|f| f.what.contains("accepted")), "{report}");
}

#[test]
fn corrupted_shared_secrets_and_signatures_are_caught() {
    let fw = framework_with(Fault::CorruptAsymResult);
    let report = run_suite(&fw, Suite::X25519);
    only_faulty_fails(&report);
    let family = Family::Asym(AsymAlg::X25519);
    let soft = report.tally(ocf_soft::NAME, family);
    for layout in Layout::ALL {
        assert_eq!(report.tally("faulty", family).passed(layout), 0, "{report}");
    }
    // Every case soft computed fails on the faulty driver; the 31 refused ones do not.
    let computed = soft.passed(Layout::InPlace) as usize;
    assert_eq!(report.failures().len(), computed * Layout::ALL.len(), "{report}");
    assert!(report.failures()[0].what.contains("derive: expected"), "{}", report.failures()[0]);

    // RFC 8032's signing cases: the signature, and the public key before it.
    let report = run_suite(&fw, Suite::Ed25519);
    only_faulty_fails(&report);
    assert_eq!(report.failures().len(), 3 * Layout::ALL.len(), "{report}");
    assert!(report.failures().iter().all(|f| f.what.contains("public-key: expected")), "{report}");
}

#[test]
fn scribbling_after_the_result_is_caught() {
    let report = run_suite(&framework_with(Fault::ScribbleAfterResult), Suite::Modp);
    only_faulty_fails(&report);
    // MODP results fill their room (the prime's length): nothing after them to scribble on
    // but the out-of-place margin. ModExp's results are the modulus's length likewise.
    let family = Family::Asym(AsymAlg::Ffdh(ocf::ModpGroup::Modp2048));
    let faulty = report.tally("faulty", family);
    assert_eq!(faulty.passed(Layout::OutOfPlace), 0, "{report}");
    assert_eq!(faulty.passed(Layout::InPlace), 8, "{report}");

    // X25519's 32-byte secret leaves room in an `out` sized by max_output_len (64).
    let report = run_suite(&framework_with(Fault::ScribbleAfterResult), Suite::X25519);
    only_faulty_fails(&report);
    let faulty = report.tally("faulty", Family::Asym(AsymAlg::X25519));
    for layout in Layout::ALL {
        assert_eq!(faulty.passed(layout), 0, "{report}");
    }
    assert!(report.failures().iter().any(|f| f.what.contains("after the 32-byte result")), "{report}");
}

#[test]
fn the_wrong_error_for_an_invalid_point_is_caught() {
    let report = run_suite(&framework_with(Fault::MisnameInvalidPoint), Suite::Ecdh);
    only_faulty_fails(&report);
    let family = Family::Asym(AsymAlg::Ecdh(ocf::Curve::P256));
    let (faulty, soft) = (report.tally("faulty", family), report.tally(ocf_soft::NAME, family));
    for layout in Layout::ALL {
        assert_eq!(faulty.rejected(layout), 0, "{report}");
        assert_eq!(faulty.passed(layout), soft.passed(layout), "{report}");
    }
    assert!(
        // "expected InvalidPoint, got BadKey …", or "… the known answer or InvalidPoint, …"
        report.failures().iter().all(|f| f.what.contains("InvalidPoint, got BadKey")),
        "{report}"
    );
}

/// The soft driver without its public-key algorithms.
struct SymmetricOnly(ocf_soft::SoftDriver);

impl Driver for SymmetricOnly {
    fn name(&self) -> &str {
        "symmetric-only"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { asymmetric: Vec::new(), random: false, ..self.0.capabilities() }
    }

    fn probe_session(&self, params: &SessionParams) -> Option<Priority> {
        self.0.probe_session(params)
    }

    fn new_session(
        &self,
        params: &SessionParams,
        ctx: SessionContext,
    ) -> Result<Box<dyn DriverSession>, Error> {
        self.0.new_session(params, ctx)
    }
}

/// A family that no registered driver offers fails the run, by name, once; routed too.
#[test]
fn a_family_no_driver_offers_is_a_failure() {
    let fw = Framework::new();
    fw.register(Arc::new(SymmetricOnly(ocf_soft::SoftDriver::new()))).unwrap();
    for report in [run_suite(&fw, Suite::X25519), ocf_conformance::run_all_routed(&fw)] {
        let unoffered: Vec<String> =
            report.failures().iter().filter(|f| f.driver.is_none()).map(|f| f.what.clone()).collect();
        assert_eq!(unoffered.iter().filter(|w| *w == "no driver offers x25519").count(), 1, "{report}");
        // Nothing else failed: the symmetric suites pass on the driver, routed.
        assert!(report.failures().iter().all(|f| f.what.starts_with("no driver offers")), "{report}");
    }
}

/// A randomized signature has no known answer: the openssl CLI's verification catches a
/// corrupted one (and the comparison with openssl's, a deterministic one).
#[test]
fn corrupted_signatures_are_caught_by_openssl() {
    let fw = framework_with(Fault::CorruptSignature);
    let report = match ocf_conformance::openssl_sig::signatures(&fw, 1) {
        Ok(r) => r,
        Err(ocf_conformance::openssl_cli::OracleError::NotInstalled(why)) => {
            eprintln!("SKIPPED: no openssl CLI: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    only_faulty_fails(&report);
    // Every "ocf signs" case: 3 messages x 18 algorithms + 2 for Ed25519, in every layout.
    assert_eq!(report.failures().len(), (3 * 18 + 2) * Layout::ALL.len(), "{report}");
    let ecdsa = ocf::AsymAlg::Ecdsa {
        curve: ocf::Curve::P256,
        hash: DigestAlg::Sha256,
        encoding: ocf::SigEncoding::P1363,
    };
    assert!(
        report
            .failures()
            .iter()
            .any(|f| f.family == Some(Family::Asym(ecdsa)) && f.what.contains("not accepted")),
        "{report}"
    );
}
