//! The framework's side of public-key and random sessions, through a driver that completes
//! every request untouched (as `ocf-null` does): which operations a key allows, how requests are
//! laid out and checked, that errors are named and counted, and that the cost model keeps a
//! table per algorithm and key size.

use std::sync::Arc;

use ocf::asym::{AsymKey, PrivateFormat};
use ocf::{
    AsymAlg, Capabilities, Curve, Driver, DriverSession, Error, ErrorKind, Framework, Hint, Op, Priority,
    PrivateKey, Processed, PublicKey, Request, SessionContext, SessionParams,
};

/// Completes every request as it came.
struct Echo(&'static str, bool);

/// A random source whose health tests have taken it out: every request fails.
struct OutRng;

impl Driver for OutRng {
    fn name(&self) -> &str {
        "out-rng"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { synchronous: true, random: true, ..Capabilities::default() }
    }
    fn probe_session(&self, _: &SessionParams) -> Option<Priority> {
        Some(Priority::Hardware)
    }
    fn new_session(&self, _: &SessionParams, _: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(OutRng))
    }
}

impl DriverSession for OutRng {
    fn process(&self, r: Request, _: Hint) -> Processed {
        Processed::Done(Err(ocf::Failed::new(
            Error::RandomSourceFailed { why: "stuck (repetition count)" },
            r,
        )))
    }
}

impl Driver for Echo {
    fn name(&self) -> &str {
        self.0
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            synchronous: true,
            named_only: self.1,
            asymmetric: AsymAlg::all(),
            random: true,
            ..Capabilities::default()
        }
    }
    fn probe_session(&self, _: &SessionParams) -> Option<Priority> {
        Some(Priority::Software)
    }
    fn new_session(&self, _: &SessionParams, _: SessionContext) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(EchoSession))
    }
}

struct EchoSession;

impl DriverSession for EchoSession {
    fn process(&self, r: Request, _: Hint) -> Processed {
        Processed::Done(Ok(r))
    }
}

fn fw() -> Framework {
    let fw = Framework::new();
    fw.register(Arc::new(Echo("null", true))).unwrap();
    fw
}

fn x25519() -> SessionParams {
    SessionParams::asymmetric(AsymAlg::X25519, AsymKey::Private(PrivateKey::raw(&[7; 32])))
}

#[test]
fn a_key_decides_the_operations() {
    let fw = fw();
    let s = fw.new_session_on("null", &x25519()).unwrap();
    s.run(Request::asymmetric(Op::Derive, vec![9; 32], 32)).unwrap();
    s.run(Request::asymmetric(Op::PublicKey, Vec::new(), 32)).unwrap();
    for op in [Op::Sign, Op::Encapsulate, Op::ModExp, Op::Encrypt, Op::Random] {
        let e = s.run(Request::asymmetric(op, Vec::new(), 32)).unwrap_err();
        assert!(matches!(e.error(), Error::BadOperation { .. }), "{op:?}: {e}");
    }
    let verify = SessionParams::asymmetric(AsymAlg::Ed25519, AsymKey::Public(PublicKey::raw(&[1; 32])));
    let v = fw.new_session_on("null", &verify).unwrap();
    v.run(Request::verify(b"message", &[0; 64])).unwrap();
    let e = v.run(Request::asymmetric(Op::Sign, b"m".to_vec(), 64)).unwrap_err();
    assert!(matches!(e.error(), Error::BadOperation { .. }));
    assert_eq!(v.stats().errors.get(ErrorKind::BadOperation), 1);
}

#[test]
fn requests_are_laid_out_and_checked() {
    let fw = fw();
    let s = fw.new_session_on("null", &x25519()).unwrap();
    let e = s.run(Request::new(Op::Derive, vec![9; 32])).unwrap_err();
    assert!(matches!(e.error(), Error::NoOutputBuffer { .. }), "{e}");
    let e = s.run(Request::asymmetric(Op::Derive, vec![9; 32], 32).with_iv(&[0; 12])).unwrap_err();
    assert!(matches!(e.error(), Error::BadIvLength { .. }), "{e}");
    let e = s.run(Request::asymmetric(Op::Derive, vec![9; 32], 32).with_aad(b"x")).unwrap_err();
    assert!(matches!(e.error(), Error::AadNotSupported { .. }), "{e}");

    let sig = SessionParams::asymmetric(AsymAlg::Ed25519, AsymKey::Public(PublicKey::raw(&[1; 32])));
    let v = fw.new_session_on("null", &sig).unwrap();
    // A signature must be given in buf, after the message.
    let e = v.run(Request::new(Op::Verify, b"message".to_vec())).unwrap_err();
    assert!(matches!(e.error(), Error::BadRegion { .. }), "{e}");
    let overlapping = Request::verify(b"message", &[0; 64]).with_payload(0..10);
    assert!(matches!(v.run(overlapping).unwrap_err().error(), Error::BadRegion { .. }));
    // The driver's helper sees the two apart.
    let r = Request::verify(b"message", b"sig");
    r.with_message_and_signature(|m, s| assert_eq!((m, s), (&b"message"[..], &b"sig"[..])));

    let rng = fw.new_session_on("null", &SessionParams::random()).unwrap();
    assert_eq!(rng.run(Request::random(48)).unwrap().buf.len(), 48);
}

#[test]
fn keys_are_checked_where_no_library_is_needed() {
    let bad = |alg, key| SessionParams::asymmetric(alg, key).validate().unwrap_err();
    assert!(matches!(
        bad(AsymAlg::X25519, AsymKey::Private(PrivateKey::raw(&[1; 31]))),
        Error::BadInputLength { got: 31, expected: 32, .. }
    ));
    assert!(matches!(bad(AsymAlg::X25519, AsymKey::Public(PublicKey::raw(&[1; 32]))), Error::BadKey { .. }));
    assert!(matches!(
        bad(
            AsymAlg::Ecdsa {
                curve: Curve::P384,
                hash: ocf::DigestAlg::Sha384,
                encoding: ocf::SigEncoding::Der
            },
            AsymKey::Public(PublicKey::raw(&[4; 65]))
        ),
        Error::BadInputLength { got: 65, expected: 97, .. }
    ));
    assert!(matches!(
        bad(AsymAlg::RsaPss { hash: ocf::DigestAlg::Sha256 }, AsymKey::Generate { bits: 1024 }),
        Error::KeyTooSmall { bits: 1024, min: 2048 }
    ));
    assert!(matches!(
        bad(AsymAlg::RsaPkcs1 { hash: ocf::DigestAlg::Sha256 }, AsymKey::Generate { bits: 8192 }),
        Error::KeyTooLarge { bits: 8192, max: 4096 }
    ));
    assert!(matches!(
        bad(
            AsymAlg::RsaPkcs1 { hash: ocf::DigestAlg::Sha256 },
            AsymKey::Private(PrivateKey::pkcs8(&[0x30, 0x00]))
        ),
        Error::BadKey { .. }
    ));
    let modexp = |e: &[u8], m: &[u8]| AsymKey::ModExp { exponent: ocf::Key::new(e), modulus: m.to_vec() };
    assert!(matches!(bad(AsymAlg::ModExp, modexp(&[3], &[0x10])), Error::BadKey { .. }), "even modulus");
    assert!(matches!(
        bad(AsymAlg::ModExp, modexp(&[3], &[0xff; 513])),
        Error::KeyTooLarge { bits: 4104, .. }
    ));
    assert!(matches!(bad(AsymAlg::ModExp, modexp(&[3, 3], &[0x11])), Error::BadKey { .. }));
    SessionParams::asymmetric(AsymAlg::ModExp, modexp(&[3], &[0x11])).validate().unwrap();
    assert!(matches!(
        bad(AsymAlg::MlKem768, AsymKey::Private(PrivateKey::pkcs8(&[0; 64]))),
        Error::BadKey { .. }
    ));
    assert!(matches!(
        SessionParams::asymmetric(AsymAlg::X25519, AsymKey::Private(PrivateKey::raw(&[7; 32])))
            .multipart()
            .validate(),
        Err(Error::InvalidParams(_))
    ));
    let k = PrivateKey::raw(&[7; 32]);
    assert_eq!(format!("{k:?}"), "PrivateKey(Raw, 32 bytes)");
    assert!(k.matches(&PrivateKey::raw(&[7; 32])) && !k.matches(&PrivateKey::pkcs8(&[7; 32])));
    assert_eq!(PrivateKey::raw(&[1]).format(), PrivateFormat::Raw);
}

#[test]
fn no_driver_for_an_algorithm_is_named() {
    let fw = Framework::new();
    let e = fw.new_session(&x25519()).unwrap_err();
    assert!(matches!(e, Error::NoDriver | Error::UnsupportedAsym(AsymAlg::X25519)), "{e}");
    let fw = fw_with_routable();
    let e = fw.generate_key(AsymAlg::Ed25519, 0).unwrap();
    assert_eq!(e.bytes().len(), 0, "the null driver writes nothing");
}

fn fw_with_routable() -> Framework {
    let fw = Framework::new();
    // Two, so that routing has a choice to make and models to keep.
    fw.register(Arc::new(Echo("echo", false))).unwrap();
    fw.register(Arc::new(Echo("echo2", false))).unwrap();
    fw
}

#[test]
fn the_cost_model_keeps_algorithms_and_key_sizes_apart() {
    let fw = fw_with_routable();
    let s = fw.new_session(&x25519()).unwrap();
    for _ in 0..600 {
        s.run(Request::asymmetric(Op::Derive, vec![9; 32], 32)).unwrap();
    }
    let rsa = |bits| {
        SessionParams::asymmetric(
            AsymAlg::RsaPss { hash: ocf::DigestAlg::Sha256 },
            AsymKey::Generate { bits },
        )
    };
    for bits in [2048, 4096] {
        let s = fw.new_session(&rsa(bits)).unwrap();
        for _ in 0..600 {
            s.run(Request::asymmetric(Op::GenerateKey, Vec::new(), 8)).unwrap();
        }
    }
    let names: Vec<String> = fw
        .routing()
        .drivers
        .iter()
        .flat_map(|d| d.models.iter().map(|e| format!("{} {:?}", e.algorithm, e.op)))
        .collect();
    for want in [
        "asymmetric x25519/256 Some(Derive)",
        "asymmetric rsa-pss-sha256/2048 Some(GenerateKey)",
        "asymmetric rsa-pss-sha256/4096 Some(GenerateKey)",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
}

/// A source out after failing its health tests: alone, its requests fail with
/// `RandomSourceFailed` (counted); beside another random driver, they are redone there.
#[test]
fn a_failed_random_source_is_routed_around() {
    let fw = Framework::new();
    fw.register(Arc::new(OutRng)).unwrap();
    let s = fw.new_session(&SessionParams::random()).unwrap();
    let e = s.run(Request::random(16)).unwrap_err();
    assert!(matches!(e.error(), Error::RandomSourceFailed { .. }), "{e}");
    assert_eq!(fw.driver_stats("out-rng").unwrap().errors.get(ErrorKind::RandomSourceFailed), 1);

    fw.register(Arc::new(Echo("echo", false))).unwrap();
    let s = fw.new_session(&SessionParams::random()).unwrap();
    for _ in 0..50 {
        s.run(Request::random(16)).unwrap();
    }
    assert!(fw.driver_stats("echo").unwrap().ops > 0);
}
