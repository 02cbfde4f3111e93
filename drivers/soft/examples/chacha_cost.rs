//! Where a ChaCha20-Poly1305 message's time goes: what `openssl speed` times, libcrypto's
//! per-message call sequence piece by piece, aws-lc-rs, and the soft driver through ocf
//! (whole messages, and the multi-part path the OpenSSL provider uses), side by side in one
//! process, taking turns within each round.
//!
//! Run: `taskset -c 1 cargo run --release -p ocf-soft --example chacha_cost -- [--ms 200]
//! [--rounds 5] [--sizes 16,256,1024,8192] [--only SUBSTRING,…]`. Prints ns per message:
//! the median and the range over the rounds.
//!
//! `openssl speed -evp chacha20-poly1305` (OpenSSL 3.0, `-aead` or not) keys one context
//! once and then times `EVP_EncryptUpdate` alone, message after message: no nonce, no
//! Poly1305 key, no tag. The first row repeats exactly that, so it can be compared with the
//! per-message rows without another process.

use std::os::raw::{c_int, c_void};
use std::ptr;
use std::time::{Duration, Instant};

use ocf::{CipherAlg, Framework, Op, Part, Request, SessionParams};
use openssl_sys as ffi;

extern "C" {
    // Not declared by openssl-sys.
    fn EVP_CipherFinal_ex(c: *mut ffi::EVP_CIPHER_CTX, out: *mut u8, outl: *mut c_int) -> c_int;
}

/// A keyed libcrypto ChaCha20-Poly1305 encryption context (freed at exit).
fn libcrypto_ctx(key: &[u8; 32], nonce: &[u8; 12]) -> *mut ffi::EVP_CIPHER_CTX {
    // SAFETY: the fetch returns an owned method or null, the context is owned or null (both
    // checked); the init reads 32 key bytes and 12 nonce bytes, the lengths of this cipher.
    unsafe {
        let cipher = ffi::EVP_CIPHER_fetch(ptr::null_mut(), c"ChaCha20-Poly1305".as_ptr(), ptr::null());
        let ctx = ffi::EVP_CIPHER_CTX_new();
        assert!(!cipher.is_null() && !ctx.is_null());
        assert_eq!(ffi::EVP_CipherInit_ex(ctx, cipher, ptr::null_mut(), key.as_ptr(), nonce.as_ptr(), 1), 1);
        ctx
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, default: &str| -> String {
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or(default.into())
    };
    let ms: u64 = opt("--ms", "200").parse().expect("--ms N");
    let rounds: usize = opt("--rounds", "5").parse().expect("--rounds N");
    let sizes: Vec<usize> =
        opt("--sizes", "16,256,1024,8192").split(',').map(|s| s.parse().expect("--sizes a,b")).collect();
    let only = opt("--only", "");
    let key = [7u8; 32];
    let nonce = [1u8; 12];

    let ctx = libcrypto_ctx(&key, &nonce);
    let fw = Framework::new();
    ocf_soft::register(&fw).expect("register soft");
    let params = SessionParams::aead(CipherAlg::ChaCha20Poly1305, &key);
    let whole = fw.new_session(&params).expect("session");
    let multipart = fw.new_session(&params.clone().multipart()).expect("multi-part session");
    let aws = aws_lc_rs::aead::LessSafeKey::new(
        aws_lc_rs::aead::UnboundKey::new(&aws_lc_rs::aead::CHACHA20_POLY1305, &key).expect("key"),
    );
    let mut crate_ctx = openssl::cipher_ctx::CipherCtx::new().expect("ctx");
    crate_ctx
        .encrypt_init(Some(openssl::cipher::Cipher::chacha20_poly1305()), Some(&key), None)
        .expect("init");

    // Each step: libcrypto's calls on the context, raw.
    // SAFETY (every `unsafe` below): `ctx` is live and keyed; the nonce is 12 bytes; each
    // update reads and writes `b.len()` bytes of `b` in place (a stream cipher: no more);
    // the final call writes nothing for this cipher (a 16-byte buffer is given anyway);
    // the tag call writes 16 bytes.
    let init = |()| unsafe {
        ffi::EVP_CipherInit_ex(ctx, ptr::null(), ptr::null_mut(), ptr::null(), nonce.as_ptr(), -1);
    };
    let update = |b: &mut [u8]| unsafe {
        let mut outl = 0;
        ffi::EVP_CipherUpdate(ctx, b.as_mut_ptr(), &mut outl, b.as_ptr(), b.len() as c_int);
    };
    let finish = |tag: &mut [u8; 16]| unsafe {
        let mut outl = 0;
        EVP_CipherFinal_ex(ctx, tag.as_mut_ptr(), &mut outl);
    };
    let get_tag = |tag: &mut [u8; 16]| unsafe {
        ffi::EVP_CIPHER_CTX_ctrl(ctx, ffi::EVP_CTRL_GCM_GET_TAG, 16, tag.as_mut_ptr() as *mut c_void);
    };

    type Case<'a> = (&'static str, Box<dyn FnMut(&mut [u8]) + 'a>);
    for &size in &sizes {
        let mut buf = vec![0x5au8; size];
        let mut slot = Some(Request::new(Op::Encrypt, vec![0x5a; size]).with_iv(&nonce));
        let mut parts = Some(Request::new(Op::Encrypt, vec![0x5a; size]).with_iv(&nonce));
        let mut cases: Vec<Case> = vec![
            ("libcrypto update only (what openssl speed times)", Box::new(update)),
            ("libcrypto nonce only", Box::new(|_| init(()))),
            (
                "libcrypto nonce + update",
                Box::new(|b| {
                    init(());
                    update(b);
                }),
            ),
            (
                "libcrypto nonce + update + final",
                Box::new(|b| {
                    init(());
                    update(b);
                    finish(&mut [0; 16]);
                }),
            ),
            (
                "libcrypto nonce + update + final + tag (raw)",
                Box::new(|b| {
                    let mut tag = [0; 16];
                    init(());
                    update(b);
                    finish(&mut tag);
                    get_tag(&mut tag);
                }),
            ),
            (
                "libcrypto, the same through the openssl crate",
                Box::new(|b| {
                    let mut tag = [0u8; 16];
                    crate_ctx.encrypt_init(None, None, Some(&nonce)).expect("nonce");
                    let n = b.len();
                    crate_ctx.cipher_update_inplace(b, n).expect("update");
                    crate_ctx.cipher_final(&mut []).expect("final");
                    crate_ctx.tag(&mut tag).expect("tag");
                }),
            ),
            (
                "aws-lc-rs seal_in_place_separate_tag",
                Box::new(|b| {
                    let n = aws_lc_rs::aead::Nonce::assume_unique_for_key(nonce);
                    let _tag =
                        aws.seal_in_place_separate_tag(n, aws_lc_rs::aead::Aad::empty(), b).expect("seal");
                }),
            ),
            (
                "ocf soft, whole message (Session::run)",
                Box::new(|_| {
                    let r = slot.take().expect("request");
                    slot = Some(whole.run(r).expect("ok"));
                }),
            ),
            (
                "ocf soft multi-part: First(data) + Last(empty)",
                Box::new(|_| {
                    let mut r = parts.take().expect("request");
                    r.part = Part::First;
                    r.payload = None;
                    let mut r = multipart.run(r).expect("first part");
                    r.part = Part::Last;
                    r.payload = Some(size..size);
                    parts = Some(multipart.run(r).expect("last part"));
                }),
            ),
        ];
        cases.retain(|(name, _)| only.split(',').any(|o| name.contains(o)));
        let mut results: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
        for _ in 0..rounds {
            for (i, (_, f)) in cases.iter_mut().enumerate() {
                let start = Instant::now();
                let mut n = 0u64;
                while start.elapsed() < Duration::from_millis(ms) {
                    for _ in 0..256 {
                        f(&mut buf);
                    }
                    n += 256;
                }
                results[i].push(start.elapsed().as_nanos() as f64 / n as f64);
            }
        }
        println!("{size} B: ns per message, median [range] of {rounds} rounds; MB/s at the median");
        for ((name, _), v) in cases.iter().zip(&mut results) {
            v.sort_by(|a, b| a.total_cmp(b));
            let med = v[v.len() / 2];
            println!(
                "  {name:<50} {med:>8.1} [{:.1}-{:.1}] {:>6.0} MB/s",
                v[0],
                v[v.len() - 1],
                size as f64 / med * 1e3
            );
        }
    }
}
