//! Many threads, many sessions, every result correct.
//!
//! Expected results are computed first on one thread with sessions of their own; then 8
//! threads hammer a shared set of sessions (one per algorithm, each used by every thread at
//! once) plus sessions of their own, in a mixed order, and compare every output. Sizes reach
//! past 1 KiB so ChaCha20-Poly1305's shared libcrypto context is contended.

use std::sync::Arc;
use std::thread;

use ocf::{CipherAlg, DigestAlg, Framework, MacAlg, Op, Request, Session, SessionParams};

fn all_params() -> Vec<(SessionParams, usize)> {
    let sha1 = MacAlg::Hmac(DigestAlg::Sha1);
    let sha256 = MacAlg::Hmac(DigestAlg::Sha256);
    vec![
        (SessionParams::cipher(CipherAlg::AesCbc, &[1u8; 16]), 16),
        (SessionParams::cipher(CipherAlg::AesCbc, &[2u8; 32]), 16),
        (SessionParams::cipher(CipherAlg::AesCtr, &[3u8; 24]), 16),
        (SessionParams::cipher(CipherAlg::TdesCbc, &b"\x01\x23\x45\x67\x89\xab\xcd\xef\x23\x45\x67\x89\xab\xcd\xef\x01\x45\x67\x89\xab\xcd\xef\x01\x23"[..]), 8),
        (SessionParams::aead(CipherAlg::AesGcm, &[5u8; 16]), 12),
        (SessionParams::aead(CipherAlg::AesGcm, &[6u8; 32]), 12),
        (SessionParams::aead(CipherAlg::ChaCha20Poly1305, &[7u8; 32]), 12),
        (
            SessionParams::cipher_then_mac(CipherAlg::AesCbc, &[8u8; 16], sha1, &[9u8; 20]).with_tag_len(12),
            16,
        ),
        (
            SessionParams::cipher_then_mac(CipherAlg::AesCbc, &[8u8; 32], sha256, &[9u8; 32])
                .with_tag_len(16),
            16,
        ),
        (SessionParams::digest(DigestAlg::Sha256), 0),
        (SessionParams::digest(DigestAlg::Md5), 0),
        (SessionParams::hmac(DigestAlg::Sha1, &[10u8; 20]), 0),
        (SessionParams::hmac(DigestAlg::Sha512, &[11u8; 64]), 0),
    ]
}

#[derive(Clone)]
struct Job {
    param_index: usize,
    op: Op,
    input: Vec<u8>,
    iv: Vec<u8>,
    expect_buf: Vec<u8>,
    expect_tag: Vec<u8>,
}

fn op_for(p: &SessionParams) -> Op {
    match p.mode {
        ocf::Mode::Digest { .. } | ocf::Mode::Mac { .. } => Op::ComputeDigest,
        _ => Op::Encrypt,
    }
}

fn run_job(s: &Session, job: &Job) {
    let req = Request::new(job.op, job.input.clone()).with_iv(&job.iv).with_aad(&[]);
    let done = s.run(req).unwrap();
    assert_eq!(done.buf.to_vec(), job.expect_buf);
    assert_eq!(done.tag(), &job.expect_tag[..]);
}

#[test]
fn many_threads_many_sessions_every_result_correct() {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let params = all_params();

    // Expected results, computed single-threaded on separate sessions.
    let mut jobs = Vec::new();
    for (i, (p, iv_len)) in params.iter().enumerate() {
        let s = fw.new_session(p).unwrap();
        for (k, size) in [16usize, 64, 1024, 1040, 4096].into_iter().enumerate() {
            let input: Vec<u8> = (0..size).map(|b| (b * 7 + i * 13 + k) as u8).collect();
            let iv = vec![(i + k) as u8; *iv_len];
            let op = op_for(p);
            let done = s.run(Request::new(op, input.clone()).with_iv(&iv)).unwrap();
            jobs.push(Job {
                param_index: i,
                op,
                input,
                iv,
                expect_buf: done.buf.to_vec(),
                expect_tag: done.tag().to_vec(),
            });
        }
    }

    let shared: Arc<Vec<Session>> =
        Arc::new(params.iter().map(|(p, _)| fw.new_session(p).unwrap()).collect());
    let jobs = Arc::new(jobs);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (fw, shared, jobs, params) = (fw.clone(), shared.clone(), jobs.clone(), params.clone());
            thread::spawn(move || {
                let own: Vec<Session> = params.iter().map(|(p, _)| fw.new_session(p).unwrap()).collect();
                for round in 0..40 {
                    for j in 0..jobs.len() {
                        // A different order in every thread and round.
                        let job = &jobs[(j * 7 + t * 3 + round) % jobs.len()];
                        let s = if (round + t) % 2 == 0 {
                            &shared[job.param_index]
                        } else {
                            &own[job.param_index]
                        };
                        run_job(s, job);
                    }
                }
                jobs.len() * 40
            })
        })
        .collect();
    let total: usize = threads.into_iter().map(|t| t.join().expect("a worker failed")).sum();

    let stats = fw.driver_stats("soft").unwrap();
    assert_eq!(stats.errors.total(), 0);
    assert_eq!(stats.ops as usize, total + jobs.len());
}
