//! The null driver serves named sessions only, leaves data untouched, and is counted like
//! any driver.

use ocf::{CipherAlg, Error, Framework, Op, Request, SessionParams};

#[test]
fn serves_only_sessions_that_name_it() {
    let fw = Framework::new();
    ocf_null::register(&fw).unwrap();
    let gcm = SessionParams::aead(CipherAlg::AesGcm, &[1u8; 16]);
    // Alone, it is never chosen: a real cipher is unsupported rather than faked.
    assert_eq!(fw.new_session(&gcm).unwrap_err(), Error::UnsupportedCipher(CipherAlg::AesGcm));
    ocf_soft::register(&fw).unwrap();
    assert_eq!(fw.new_session(&gcm).unwrap().driver_name(), "soft");
    // Named, it serves the session and does nothing.
    let s = fw.new_session_on("null", &gcm).unwrap();
    let r = s.run(Request::new(Op::Encrypt, b"plaintext".to_vec()).with_iv(&[0u8; 12])).unwrap();
    assert_eq!(r.buf.to_vec(), b"plaintext");
    assert_eq!(fw.driver_stats("null").unwrap().ops, 1);
}

#[test]
fn requests_are_still_validated() {
    let fw = Framework::new();
    ocf_null::register(&fw).unwrap();
    let s = fw.new_session_on("null", &SessionParams::cipher(CipherAlg::AesCbc, &[1u8; 16])).unwrap();
    let f = s.run(Request::new(Op::Encrypt, vec![0u8; 15]).with_iv(&[0u8; 16])).unwrap_err();
    assert_eq!(*f.error(), Error::NotBlockMultiple { len: 15, block: 16 });
}
