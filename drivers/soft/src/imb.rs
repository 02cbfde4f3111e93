//! ChaCha20-Poly1305 through Intel's IPsec-MB library (`libIPSec_MB`, Debian
//! `libipsec-mb-dev`), when it is installed (`build.rs` sets `cfg(ocf_ipsec_mb)`).
//!
//! Why: it is the fastest per-message ChaCha20-Poly1305 measured here from 512 B up. Whole
//! messages, ns, library calls alone: 1 KiB 407-412 against aws-lc-rs 564 and libcrypto on a
//! kept context 579-596; 8 KiB 2,181-2,238 against libcrypto 2,446-2,474 and aws-lc-rs 3,229
//! (IPsec-MB from a C loop, the others from `examples/chacha_cost`, each beside the same
//! `EVP_EncryptUpdate` stream row, 294-297 ns and 2,173-2,306 ns). Through ocf against
//! `openssl speed` (`examples/vs_openssl`, pinned, 2 x 3 rounds): 1 KiB 0.49x -> 0.59-0.60x,
//! 8 KiB 0.85-0.87x -> 0.96-0.97x. It has no EVP layer and no parameter lookups per message;
//! aws-lc-rs stays ahead below ~512 B (384 B: 343 ns against 356 + ocf's ~40).
//!
//! The library's "direct API" is reached through a manager's function pointers: a small C
//! file (`csrc/ipsec_mb.c`) does the calls against the installed header. One manager, made
//! once, serves every thread: the direct API only reads it. The key stays in the session
//! (`ocf::Key`, wiped on drop) and is passed per message; the C side wipes the message
//! state. Decryption computes the tag and ocf compares it in constant time.

use std::os::raw::c_int;
use std::sync::OnceLock;

use ocf::Error;
use zeroize::Zeroize;

/// `IMB_MGR`, opaque here.
#[repr(C)]
struct ImbMgr {
    _opaque: [u8; 0],
}

extern "C" {
    fn ocf_imb_new() -> *mut ImbMgr;
    fn ocf_imb_chacha20_poly1305(
        m: *const ImbMgr,
        encrypt: c_int,
        key: *const u8,
        iv: *const u8,
        aad: *const u8,
        aad_len: u64,
        data: *mut u8,
        len: u64,
        tag: *mut u8,
    );
}

struct Manager(*mut ImbMgr);

// SAFETY: the manager is set up once (in `manager`) and only read afterwards: the direct
// API calls read its function pointers and keep every message's state on the caller's
// stack. It is never freed (a process-wide static).
unsafe impl Send for Manager {}
// SAFETY: as above; shared reads only.
unsafe impl Sync for Manager {}

fn manager() -> Option<&'static Manager> {
    static M: OnceLock<Option<Manager>> = OnceLock::new();
    M.get_or_init(|| {
        // SAFETY: returns a fully initialised manager or null (checked).
        let m = unsafe { ocf_imb_new() };
        (!m.is_null()).then_some(Manager(m))
    })
    .as_ref()
}

/// Whether IPsec-MB can run here (installed at build time, and its manager set up).
pub fn available() -> bool {
    manager().is_some()
}

/// From this payload length up, IPsec-MB runs whole ChaCha20-Poly1305 messages (below,
/// aws-lc-rs: 156 / 246 ns at 16 / 256 B against IPsec-MB's 224 / 271).
pub const MIN_LEN: usize = 512;

/// Encrypts (`encrypt`) or decrypts `data` in place and writes the message's tag into
/// `tag`. `key` 32 bytes, `nonce` 12, `tag` 16: checked here, as the C side reads and
/// writes exactly those lengths.
fn run(
    encrypt: bool,
    key: &[u8],
    nonce: &[u8],
    aad: &[u8],
    data: &mut [u8],
    tag: &mut [u8; 16],
) -> Result<(), Error> {
    let m = manager().ok_or(Error::DriverFailure("soft: IPsec-MB is unavailable"))?;
    if key.len() != 32 {
        return Err(Error::DriverFailure("soft: IPsec-MB ChaCha20-Poly1305 takes 32-byte keys"));
    }
    if nonce.len() != 12 {
        return Err(Error::BadIvLength { expected: 12, got: nonce.len() });
    }
    // SAFETY: the manager is live (static); key (32), nonce (12) and tag (16) have the
    // lengths the C side reads or writes; it reads `aad.len()` bytes of `aad` and
    // transforms exactly `data.len()` bytes of `data` in place (checked in-place use: the
    // unit test and the conformance suite compare against RFC 8439 and aws-lc-rs).
    unsafe {
        ocf_imb_chacha20_poly1305(
            m.0,
            c_int::from(encrypt),
            key.as_ptr(),
            nonce.as_ptr(),
            aad.as_ptr(),
            aad.len() as u64,
            data.as_mut_ptr(),
            data.len() as u64,
            tag.as_mut_ptr(),
        );
    }
    crate::cpu::clear_upper_vector_state();
    Ok(())
}

/// Seals `data` in place; writes the 16-byte tag.
pub fn seal(key: &[u8], nonce: &[u8], aad: &[u8], data: &mut [u8], tag: &mut [u8]) -> Result<(), Error> {
    let mut t = [0u8; 16];
    run(true, key, nonce, aad, data, &mut t)?;
    let n = tag.len().min(16);
    tag[..n].copy_from_slice(&t[..n]);
    Ok(())
}

/// Opens `data` in place; `AuthFailed` if `tag` does not match (compared in constant time).
/// The caller wipes `data` on failure (it has been decrypted by then).
pub fn open(key: &[u8], nonce: &[u8], aad: &[u8], data: &mut [u8], tag: &[u8]) -> Result<(), Error> {
    let mut mine = [0u8; 16];
    run(false, key, nonce, aad, data, &mut mine)?;
    let verdict = crate::verify(&mine[..tag.len().min(16)], tag);
    // The right tag of a message that may be forged: not left on the stack.
    mine.zeroize();
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305};

    /// IPsec-MB at every length up to 300 B and then some, with AAD of several lengths,
    /// against aws-lc-rs (an independent implementation): the same ciphertext and tag, a
    /// round trip, and a forged tag refused. (Above `MIN_LEN` the driver's own paths are
    /// compared in `aead::tests`.)
    #[test]
    fn agrees_with_aws_lc_at_every_small_length() {
        assert!(available(), "built with IPsec-MB, which must run here");
        let key: Vec<u8> = (0..32u8).map(|i| i ^ 0x3c).collect();
        let aws = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &key).unwrap());
        for len in (0..=300).chain([511, 512, 777, 3000]) {
            for aad_len in [0usize, 1, 12, 16, 17] {
                let nonce = [len as u8, (len >> 8) as u8, aad_len as u8, 0, 0, 0, 0, 0, 0, 0, 0, 1];
                let aad: Vec<u8> = (0..aad_len).map(|i| i as u8).collect();
                let pt: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
                let mut want = pt.clone();
                let want_tag = aws
                    .seal_in_place_separate_tag(
                        Nonce::assume_unique_for_key(nonce),
                        Aad::from(&aad),
                        &mut want,
                    )
                    .unwrap();
                let (mut got, mut tag) = (pt.clone(), [0u8; 16]);
                seal(&key, &nonce, &aad, &mut got, &mut tag).unwrap();
                assert_eq!((&got, &tag[..]), (&want, want_tag.as_ref()), "{len} B, {aad_len} B AAD");
                open(&key, &nonce, &aad, &mut got, &tag).unwrap();
                assert_eq!(got, pt);
                tag[len % 16] ^= 0x40;
                assert_eq!(open(&key, &nonce, &aad, &mut want, &tag), Err(Error::AuthFailed));
            }
        }
    }
}
