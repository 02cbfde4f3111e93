//! What the framework costs: the library call the soft driver makes (`ocf_soft::raw`, keys
//! set up once), side by side with the same operation through ocf (session, request checks,
//! direct dispatch, immediate completion, counters; the request and its buffer reused), at
//! 16 B, 1 KiB and 8 KiB.
//!
//! Run: `cargo bench -p ocf-soft --bench overhead` (add a filter such as `aes-128-gcm/`).
//! Each group holds `raw` and `ocf` for one algorithm and size; `null` (a cipher that does
//! nothing) shows the framework's cost alone.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use ocf::{CipherAlg, DigestAlg, Framework, MacAlg, Mode, Op, Request, SessionParams};
use ocf_soft::raw;

const SIZES: [usize; 3] = [16, 1024, 8192];

fn group<'a>(c: &'a mut Criterion, name: &str, size: usize) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Bytes(size as u64));
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_millis(1500));
    g.sample_size(30);
    g
}

/// One benchmark case: session parameters, the operation, and the raw call.
struct Case {
    name: &'static str,
    params: SessionParams,
    op: Op,
}

fn cases() -> Vec<Case> {
    let sha1 = MacAlg::Hmac(DigestAlg::Sha1);
    let tdes_key =
        b"\x01\x23\x45\x67\x89\xab\xcd\xef\x23\x45\x67\x89\xab\xcd\xef\x01\x45\x67\x89\xab\xcd\xef\x01\x23";
    let c = |name, params, op| Case { name, params, op };
    vec![
        c("null", SessionParams::cipher(CipherAlg::Null, ocf::Key::empty()), Op::Encrypt),
        c("aes-128-gcm", SessionParams::aead(CipherAlg::AesGcm, &[7u8; 16]), Op::Encrypt),
        c("aes-256-gcm", SessionParams::aead(CipherAlg::AesGcm, &[7u8; 32]), Op::Encrypt),
        c("chacha20-poly1305", SessionParams::aead(CipherAlg::ChaCha20Poly1305, &[7u8; 32]), Op::Encrypt),
        c("aes-128-cbc-encrypt", SessionParams::cipher(CipherAlg::AesCbc, &[7u8; 16]), Op::Encrypt),
        c("aes-128-cbc-decrypt", SessionParams::cipher(CipherAlg::AesCbc, &[7u8; 16]), Op::Decrypt),
        c("aes-128-ctr", SessionParams::cipher(CipherAlg::AesCtr, &[7u8; 16]), Op::Encrypt),
        c("des-ede3-cbc", SessionParams::cipher(CipherAlg::TdesCbc, &tdes_key[..]), Op::Encrypt),
        c("sha1", SessionParams::digest(DigestAlg::Sha1), Op::ComputeDigest),
        c("sha256", SessionParams::digest(DigestAlg::Sha256), Op::ComputeDigest),
        c("sha512", SessionParams::digest(DigestAlg::Sha512), Op::ComputeDigest),
        c("md5", SessionParams::digest(DigestAlg::Md5), Op::ComputeDigest),
        c("hmac-sha1", SessionParams::hmac(DigestAlg::Sha1, &[9u8; 20]), Op::ComputeDigest),
        c("hmac-sha256", SessionParams::hmac(DigestAlg::Sha256, &[9u8; 32]), Op::ComputeDigest),
        c(
            "aes-128-cbc-hmac-sha1",
            SessionParams::cipher_then_mac(CipherAlg::AesCbc, &[7u8; 16], sha1, &[9u8; 20]).with_tag_len(12),
            Op::Encrypt,
        ),
    ]
}

/// A raw library call over a buffer.
type RawCall = Box<dyn FnMut(&mut [u8])>;

/// The raw library call for a case.
fn raw_call(p: &SessionParams, op: Op) -> RawCall {
    let iv = vec![1u8; p.cipher_alg().map_or(0, |c| c.iv_len())];
    let tag_len = p.tag_len();
    match &p.mode {
        Mode::Cipher { alg, key } => {
            let c = raw::Cipher::new(*alg, key.as_bytes()).unwrap();
            Box::new(move |b| match op {
                Op::Encrypt => c.encrypt(&iv, b).unwrap(),
                _ => c.decrypt(&iv, b).unwrap(),
            })
        }
        Mode::Aead { alg, key, .. } => {
            let a = raw::Aead::new(*alg, key.as_bytes(), false).unwrap();
            Box::new(move |b| {
                let mut tag = [0u8; 16];
                a.seal(&iv, &[], b, &mut tag).unwrap();
                black_box(tag);
            })
        }
        Mode::Digest { alg } => {
            let d = raw::Digester::new(*alg).unwrap();
            Box::new(move |b| {
                let mut out = [0u8; 64];
                d.digest(b, &mut out).unwrap();
                black_box(out);
            })
        }
        Mode::Mac { alg, key, .. } => {
            let k = raw::HmacKey::new(*alg, key.as_bytes()).unwrap();
            Box::new(move |b| {
                let mut out = [0u8; 64];
                k.compute(&[b], &mut out[..tag_len]).unwrap();
                black_box(out);
            })
        }
        Mode::CipherThenMac { cipher, cipher_key, mac, mac_key, .. } => {
            let c = raw::Cipher::new(*cipher, cipher_key.as_bytes()).unwrap();
            let k = raw::HmacKey::new(*mac, mac_key.as_bytes()).unwrap();
            Box::new(move |b| {
                c.encrypt(&iv, b).unwrap();
                let mut out = [0u8; 64];
                k.compute(&[b], &mut out[..tag_len]).unwrap();
                black_box(out);
            })
        }
        _ => unreachable!("every mode is listed"),
    }
}

fn overhead(c: &mut Criterion) {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    for case in cases() {
        let s = fw.new_session(&case.params).unwrap();
        let iv = vec![1u8; case.params.cipher_alg().map_or(0, |c| c.iv_len())];
        let mut raw = raw_call(&case.params, case.op);
        for size in SIZES {
            let mut g = group(c, case.name, size);
            let mut buf = vec![0x5au8; size];
            g.bench_function(BenchmarkId::new("raw", size), |b| b.iter(|| raw(black_box(&mut buf))));
            let mut slot = Some(Request::new(case.op, vec![0x5a; size]).with_iv(&iv));
            g.bench_function(BenchmarkId::new("ocf", size), |b| {
                b.iter(|| {
                    let req = slot.take().expect("request");
                    slot = Some(s.run(req).expect("ok"));
                })
            });
            g.finish();
        }
    }
}

/// The framework alone: a request through the null driver, which does nothing (compare
/// with `null/ocf`, the soft driver's NULL cipher, which also sets up its buffer views).
fn null_driver(c: &mut Criterion) {
    let fw = Framework::new();
    ocf_null::register(&fw).unwrap();
    let s = fw.new_session_on("null", &SessionParams::aead(CipherAlg::AesGcm, &[7u8; 16])).unwrap();
    let mut g = group(c, "null-driver", 16);
    let mut slot = Some(Request::new(Op::Encrypt, vec![0x5a; 16]).with_iv(&[1u8; 12]));
    g.bench_function(BenchmarkId::new("ocf", 16), |b| {
        b.iter(|| {
            let req = slot.take().expect("request");
            slot = Some(s.run(req).expect("ok"));
        })
    });
    g.finish();
}

criterion_group!(benches, overhead, null_driver);
criterion_main!(benches);
