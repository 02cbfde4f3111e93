//! What the framework costs: the raw library call the soft driver makes, side by side with
//! the same operation through ocf (direct dispatch, immediate completion, the request and
//! its buffer reused), at 16 B, 1 KiB and 8 KiB.
//!
//! Run: `cargo bench -p ocf-soft --bench overhead` (add a filter such as `aes-128-gcm/16`).
//! Each group holds `raw` and `ocf` for one algorithm and size, so criterion's report shows
//! the two in one run; `scripts/overhead-table` turns the results into ratios.

use std::hint::black_box;
use std::time::Duration;

use aws_lc_rs::aead::{self, LessSafeKey, Nonce, UnboundKey};
use cbc::cipher::array::Array;
use cbc::cipher::{BlockModeDecrypt, BlockModeEncrypt, InnerIvInit, KeyInit, StreamCipher};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hmac::{Hmac, Mac};
use ocf::{CipherAlg, DigestAlg, Framework, MacAlg, Op, Request, Session, SessionParams};
use sha2::Digest;

const SIZES: [usize; 3] = [16, 1024, 8192];

/// Runs one request through ocf, reusing the request and its buffer.
fn through_ocf(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    s: &Session,
    op: Op,
    size: usize,
    iv_len: usize,
) {
    let mut slot = Some(Request::new(op, vec![0x5a; size]).with_iv(&vec![1u8; iv_len]));
    c.bench_function(BenchmarkId::new("ocf", size), |b| {
        b.iter(|| {
            let req = slot.take().expect("request");
            slot = Some(s.run(req).expect("ok"));
        })
    });
}

fn group<'a>(
    c: &'a mut Criterion,
    name: &str,
    size: usize,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Bytes(size as u64));
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_millis(1200));
    g.sample_size(30);
    g
}

fn framework() -> Framework {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    fw
}

fn aeads(c: &mut Criterion) {
    let fw = framework();
    for (name, alg, lib, key_len) in [
        ("aes-128-gcm", CipherAlg::AesGcm, &aead::AES_128_GCM, 16),
        ("aes-256-gcm", CipherAlg::AesGcm, &aead::AES_256_GCM, 32),
        ("chacha20-poly1305", CipherAlg::ChaCha20Poly1305, &aead::CHACHA20_POLY1305, 32),
    ] {
        let key = vec![7u8; key_len];
        let s = fw.new_session(&SessionParams::aead(alg, &key[..])).unwrap();
        let raw = LessSafeKey::new(UnboundKey::new(lib, &key).unwrap());
        let ossl = (alg == CipherAlg::ChaCha20Poly1305).then(|| chacha_ctx(&key));
        for size in SIZES {
            let mut g = group(c, name, size);
            let mut buf = vec![0x5au8; size];
            if alg == CipherAlg::ChaCha20Poly1305 && size >= 1024 {
                // The soft driver uses libcrypto with a reused context from 1 KiB up.
                let mut ctx = ossl.as_ref().expect("chacha context").lock().unwrap();
                g.bench_function(BenchmarkId::new("raw", size), |b| {
                    b.iter(|| {
                        let mut tag = [0u8; 16];
                        ctx.encrypt_init(None, None, Some(&[1u8; 12])).unwrap();
                        let n = buf.len();
                        ctx.cipher_update_inplace(&mut buf, n).unwrap();
                        ctx.cipher_final(&mut []).unwrap();
                        ctx.tag(&mut tag).unwrap();
                        black_box(tag)
                    })
                });
            } else {
                g.bench_function(BenchmarkId::new("raw", size), |b| {
                    b.iter(|| {
                        let nonce = Nonce::try_assume_unique_for_key(&[1u8; 12]).unwrap();
                        black_box(
                            raw.seal_in_place_separate_tag(nonce, aead::Aad::empty(), &mut buf).unwrap(),
                        )
                    })
                });
            }
            through_ocf(&mut g, &s, Op::Encrypt, size, 12);
            g.finish();
        }
    }
}

fn chacha_ctx(key: &[u8]) -> std::sync::Mutex<openssl::cipher_ctx::CipherCtx> {
    let mut ctx = openssl::cipher_ctx::CipherCtx::new().unwrap();
    ctx.encrypt_init(Some(openssl::cipher::Cipher::chacha20_poly1305()), Some(key), None).unwrap();
    std::sync::Mutex::new(ctx)
}

fn ciphers(c: &mut Criterion) {
    let fw = framework();
    let aes128 = aes::Aes128::new_from_slice(&[7u8; 16]).unwrap();
    let tdes = des::TdesEde3::new_from_slice(&[7u8; 24]).unwrap();
    let iv16 = Array::from([1u8; 16]);
    let iv8 = Array::from([1u8; 8]);
    let cases: [(&str, CipherAlg, usize, Op); 4] = [
        ("aes-128-cbc-encrypt", CipherAlg::AesCbc, 16, Op::Encrypt),
        ("aes-128-cbc-decrypt", CipherAlg::AesCbc, 16, Op::Decrypt),
        ("aes-128-ctr", CipherAlg::AesCtr, 16, Op::Encrypt),
        ("des-ede3-cbc-encrypt", CipherAlg::TdesCbc, 24, Op::Encrypt),
    ];
    for (name, alg, key_len, op) in cases {
        let s = fw.new_session(&SessionParams::cipher(alg, &vec![7u8; key_len][..])).unwrap();
        for size in SIZES {
            let mut g = group(c, name, size);
            let mut buf = vec![0x5au8; size];
            g.bench_function(BenchmarkId::new("raw", size), |b| {
                b.iter(|| {
                    match name {
                        "aes-128-cbc-encrypt" => {
                            let (blocks, _) = Array::slice_as_chunks_mut(&mut buf);
                            cbc::Encryptor::<&aes::Aes128>::inner_iv_init(&aes128, &iv16)
                                .encrypt_blocks(blocks)
                        }
                        "aes-128-cbc-decrypt" => {
                            let (blocks, _) = Array::slice_as_chunks_mut(&mut buf);
                            cbc::Decryptor::<&aes::Aes128>::inner_iv_init(&aes128, &iv16)
                                .decrypt_blocks(blocks)
                        }
                        "aes-128-ctr" => {
                            let core = ctr::CtrCore::<&aes::Aes128, ctr::flavors::Ctr128BE>::inner_iv_init(
                                &aes128, &iv16,
                            );
                            ctr::Ctr128BE::<&aes::Aes128>::from_core(core).apply_keystream(&mut buf)
                        }
                        _ => {
                            let (blocks, _) = Array::slice_as_chunks_mut(&mut buf);
                            cbc::Encryptor::<&des::TdesEde3>::inner_iv_init(&tdes, &iv8)
                                .encrypt_blocks(blocks)
                        }
                    }
                    black_box(&buf);
                })
            });
            through_ocf(&mut g, &s, op, size, alg.iv_len());
            g.finish();
        }
    }
}

fn digests(c: &mut Criterion) {
    let fw = framework();
    for (name, alg) in [
        ("sha1", DigestAlg::Sha1),
        ("sha256", DigestAlg::Sha256),
        ("sha512", DigestAlg::Sha512),
        ("md5", DigestAlg::Md5),
    ] {
        let s = fw.new_session(&SessionParams::digest(alg)).unwrap();
        for size in SIZES {
            let mut g = group(c, name, size);
            let buf = vec![0x5au8; size];
            g.bench_function(BenchmarkId::new("raw", size), |b| {
                b.iter(|| match alg {
                    DigestAlg::Sha1 => black_box(sha1::Sha1::digest(&buf)).len(),
                    DigestAlg::Sha256 => black_box(sha2::Sha256::digest(&buf)).len(),
                    DigestAlg::Sha512 => black_box(sha2::Sha512::digest(&buf)).len(),
                    _ => black_box(md5::Md5::digest(&buf)).len(),
                })
            });
            through_ocf(&mut g, &s, Op::ComputeDigest, size, 0);
            g.finish();
        }
    }
}

fn macs(c: &mut Criterion) {
    let fw = framework();
    let k20 = [9u8; 20];
    let k32 = [9u8; 32];
    let hs1 = <Hmac<sha1::Sha1> as KeyInit>::new_from_slice(&k20).unwrap();
    let hs256 = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&k32).unwrap();
    for (name, d, key) in
        [("hmac-sha1", DigestAlg::Sha1, &k20[..]), ("hmac-sha256", DigestAlg::Sha256, &k32[..])]
    {
        let s = fw.new_session(&SessionParams::hmac(d, key)).unwrap();
        for size in SIZES {
            let mut g = group(c, name, size);
            let buf = vec![0x5au8; size];
            g.bench_function(BenchmarkId::new("raw", size), |b| {
                b.iter(|| {
                    if d == DigestAlg::Sha1 {
                        let mut m = hs1.clone();
                        m.update(&buf);
                        black_box(m.finalize().into_bytes()).len()
                    } else {
                        let mut m = hs256.clone();
                        m.update(&buf);
                        black_box(m.finalize().into_bytes()).len()
                    }
                })
            });
            through_ocf(&mut g, &s, Op::ComputeDigest, size, 0);
            g.finish();
        }
    }
    // The paper's IPsec transform, as ESP uses it: AES-CBC then HMAC-SHA1-96 over AAD || ct.
    let aes128 = aes::Aes128::new_from_slice(&[7u8; 16]).unwrap();
    let params =
        SessionParams::cipher_then_mac(CipherAlg::AesCbc, &[7u8; 16], MacAlg::Hmac(DigestAlg::Sha1), &k20)
            .with_tag_len(12);
    let s = fw.new_session(&params).unwrap();
    for size in SIZES {
        let mut g = group(c, "aes-128-cbc-hmac-sha1", size);
        let mut buf = vec![0x5au8; size];
        let iv = Array::from([1u8; 16]);
        g.bench_function(BenchmarkId::new("raw", size), |b| {
            b.iter(|| {
                let (blocks, _) = Array::slice_as_chunks_mut(&mut buf);
                cbc::Encryptor::<&aes::Aes128>::inner_iv_init(&aes128, &iv).encrypt_blocks(blocks);
                let mut m = hs1.clone();
                m.update(&buf);
                black_box(m.finalize().into_bytes()).len()
            })
        });
        through_ocf(&mut g, &s, Op::Encrypt, size, 16);
        g.finish();
    }
}

criterion_group!(benches, aeads, ciphers, digests, macs);
criterion_main!(benches);
