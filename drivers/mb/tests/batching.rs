//! The batching itself: requests the dispatcher marks "more follow" are held in IPsec-MB's
//! managers and completed later, and every result equals the soft driver's (aws-lc-rs, an
//! independent implementation; the known answers are in the conformance suite).
//! Built with IPsec-MB only: without it `register` refuses (tested in the crate).
#![cfg(ocf_mb)]

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ocf::{
    Aad, Callback, CipherAlg, DigestAlg, Flags, Framework, MacAlg, Mode, Op, Outcome, Request, Session,
    SessionParams, TagPlace,
};

fn frameworks() -> (Framework, Arc<ocf_mb::MbDriver>) {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let mb = ocf_mb::register_driver(&fw).expect("built with IPsec-MB, which must run here");
    (fw, mb)
}

/// A callback that sends each outcome down a channel.
fn collector() -> (Callback, mpsc::Receiver<Outcome>) {
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    (Arc::new(move |o: Outcome| tx.lock().unwrap().send(o).unwrap()), rx)
}

struct Case {
    alg: CipherAlg,
    key: Vec<u8>,
    op: Op,
}

/// Sessions of every key size, both algorithms, both directions.
fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for alg in [CipherAlg::AesCbc, CipherAlg::AesCtr] {
        for (i, len) in [16usize, 24, 32].into_iter().enumerate() {
            for op in [Op::Encrypt, Op::Decrypt] {
                let key = (0..len).map(|b| (b * 13 + i * 7 + 1) as u8).collect();
                v.push(Case { alg, key, op });
            }
        }
    }
    v
}

fn payload(alg: CipherAlg, i: usize) -> Vec<u8> {
    let sizes = [16usize, 1024, 48, 4096, 112, 1440, 2048, 64];
    let mut n = sizes[i % sizes.len()];
    if alg == CipherAlg::AesCtr {
        n += i % 15; // CTR takes any length
    }
    (0..n).map(|b| (b * 31 + i * 3) as u8).collect()
}

fn iv(i: usize) -> [u8; 16] {
    // Counters well away from wrapping their low 32 bits.
    let mut iv = [0u8; 16];
    iv[0] = i as u8;
    iv[7] = 0x5a;
    iv
}

fn request(c: &Case, i: usize) -> Request {
    let mut r = Request::new(c.op, payload(c.alg, i)).with_iv(&iv(i));
    r.user = i as u64;
    r
}

fn soft_result(soft: &Session, c: &Case, i: usize) -> Vec<u8> {
    soft.run(request(c, i)).map_err(|f| f.error().clone()).unwrap().buf.to_vec()
}

/// Batches of 1…64 requests through `submit_batch`, mixed sizes, keys and directions
/// (sessions interleaved in one batch), each result equal to soft's; and the driver held
/// requests (the batching path ran, not only the flush-at-once path).
#[test]
fn batches_of_1_to_64_match_soft() {
    let (fw, mb) = frameworks();
    let cases = cases();
    let mbs: Vec<Session> = cases
        .iter()
        .map(|c| fw.new_session_on(ocf_mb::NAME, &SessionParams::cipher(c.alg, c.key.as_slice())).unwrap())
        .collect();
    let softs: Vec<Session> = cases
        .iter()
        .map(|c| fw.new_session_on(ocf_soft::NAME, &SessionParams::cipher(c.alg, c.key.as_slice())).unwrap())
        .collect();
    let (cb, rx) = collector();
    let before = mb.stats();
    for n in 1..=64usize {
        // Every request of the batch goes to one session (submit_batch is per session);
        // the batches rotate through the sessions, so lanes hold jobs of several keys.
        let which = n % cases.len();
        let c = &cases[which];
        mbs[which].submit_batch((0..n).map(|i| request(c, i)), &cb);
        // A second session's batch right behind it, before the first completes.
        let other = (which + 5) % cases.len();
        mbs[other].submit_batch((0..n).map(|i| request(&cases[other], i + 1000)), &cb);
        let mut got = 0;
        while got < 2 * n {
            let req = rx.recv_timeout(Duration::from_secs(60)).expect("a request was lost").unwrap();
            let i = req.user as usize;
            let (c, s, i) = if i >= 1000 { (&cases[other], &softs[other], i) } else { (c, &softs[which], i) };
            assert_eq!(
                req.buf.to_vec(),
                soft_result(s, c, i),
                "batch {n}, request {i}, {:?} {:?}",
                c.alg,
                c.op
            );
            got += 1;
        }
    }
    let after = mb.stats();
    assert!(after.held - before.held > 1000, "too few requests held: {before:?} -> {after:?}");
}

/// Runs of 1…100 handed over whole (`run_batch`): mixed sizes, both directions, an
/// out-of-place request and a scatter-gather one (no job covers it: done on its own)
/// among them, each result equal to soft's; the rest done as jobs of the run, none held.
#[test]
fn runs_of_1_to_100_match_soft() {
    let (fw, mb) = frameworks();
    let mut out = Vec::new();
    for (k, c) in cases().iter().enumerate() {
        let params = SessionParams::cipher(c.alg, c.key.as_slice());
        let (m, soft) = (
            fw.new_session_on(ocf_mb::NAME, &params).unwrap(),
            fw.new_session_on(ocf_soft::NAME, &params).unwrap(),
        );
        for n in (1..=100usize).filter(|n| n % cases().len() == k || *n > 60) {
            let before = mb.stats();
            let mut reqs: Vec<Request> = (0..n).map(|i| request(c, i)).collect();
            let apart = (n > 2).then(|| {
                let r = std::mem::replace(&mut reqs[1], Request::new(c.op, Vec::new()));
                let len = r.buf.len();
                reqs[1] = r.with_output(vec![0; len]);
                let mut v = payload(c.alg, 2);
                let tail = v.split_off(v.len() / 2);
                reqs[2] = Request::new(c.op, ocf::Buffer::Segments(vec![v, tail])).with_iv(&iv(2));
                reqs[2].user = 2;
            });
            m.run_batch(&mut reqs, &mut out);
            assert_eq!(out.len(), n, "one outcome per request");
            for o in out.drain(..) {
                let req = o.unwrap();
                let i = req.user as usize;
                let got = if apart.is_some() && i == 1 {
                    req.out.as_ref().unwrap().to_vec()
                } else {
                    req.buf.to_vec()
                };
                assert_eq!(got, soft_result(&soft, c, i), "run {n}, request {i}, {:?} {:?}", c.alg, c.op);
            }
            let after = mb.stats();
            if n == 1 {
                // A run of one is a lone request: soft's code.
                assert_eq!((after.lone - before.lone, after.in_runs - before.in_runs), (1, 0));
                continue;
            }
            let jobs = n - usize::from(apart.is_some());
            // (The out-of-place one is a job too; the scatter-gather one is not.)
            assert_eq!((after.in_runs - before.in_runs) as usize, jobs, "run {n}: {before:?} -> {after:?}");
            // AES-CBC encryption in place goes to the VAES engine where the CPU has it.
            let engine = if c.alg == CipherAlg::AesCbc && c.op == Op::Encrypt && has_vaes() {
                n - 2 * usize::from(apart.is_some())
            } else {
                0
            };
            assert_eq!((after.engine - before.engine) as usize, engine, "run {n}: {before:?} -> {after:?}");
            assert_eq!(after.held, before.held, "a run holds nothing");
        }
    }
}

/// A request promised "more" whose follower never comes is completed by the flusher
/// within the bound the model gives: at the end of the flusher's wait of `FLUSH_BOUND`
/// during which it was held, or of the next one (`MbStats::flusher_waits` counts them).
/// Counted in the flusher's own waits rather than timed: on a shared two-core machine a
/// wall-clock bound measures the scheduler (the wall-clock worst is printed, not asserted).
#[test]
fn a_more_with_no_follower_completes_within_the_bound() {
    let (fw, mb) = frameworks();
    let c = Case { alg: CipherAlg::AesCbc, key: vec![7; 16], op: Op::Encrypt };
    let s = fw.new_session_on(ocf_mb::NAME, &SessionParams::cipher(c.alg, c.key.as_slice())).unwrap();
    let soft = fw.new_session_on(ocf_soft::NAME, &SessionParams::cipher(c.alg, c.key.as_slice())).unwrap();
    let (cb, rx) = collector();
    let (mut worst, mut most_waits) = (Duration::ZERO, 0);
    for round in 0..50 {
        let before = mb.stats();
        let t = Instant::now();
        s.submit(request(&c, round).with_flags(Flags::MORE | Flags::CALLBACK_IMMEDIATE), &cb);
        let req =
            rx.recv_timeout(Duration::from_secs(60)).expect("the held request never completed").unwrap();
        worst = worst.max(t.elapsed());
        assert_eq!(req.buf.to_vec(), soft_result(&soft, &c, round));
        let after = mb.stats();
        assert_eq!(after.held - before.held, 1, "the request was not held");
        assert_eq!(after.timed_flushes - before.timed_flushes, 1, "not completed by the flusher");
        let waits = after.flusher_waits - before.flusher_waits;
        assert!((1..=2).contains(&waits), "round {round}: completed after {waits} flusher waits");
        most_waits = most_waits.max(waits);
    }
    eprintln!(
        "MORE with no follower: at most {most_waits} flusher waits of {:?}; worst completion {worst:?} over 50",
        ocf_mb::FLUSH_BOUND
    );
}

/// A lone request (no hint) is answered at once, never held, and runs on the soft
/// driver's session (no flush of a manager).
#[test]
fn a_lone_request_is_never_held() {
    let (fw, mb) = frameworks();
    let c = Case { alg: CipherAlg::AesCtr, key: vec![9; 32], op: Op::Encrypt };
    let s = fw.new_session_on(ocf_mb::NAME, &SessionParams::cipher(c.alg, c.key.as_slice())).unwrap();
    let soft = fw.new_session_on(ocf_soft::NAME, &SessionParams::cipher(c.alg, c.key.as_slice())).unwrap();
    let before = mb.stats();
    for i in 0..20 {
        let got = s.run(request(&c, i)).map_err(|f| f.error().clone()).unwrap();
        assert_eq!(got.buf.to_vec(), soft_result(&soft, &c, i));
    }
    let after = mb.stats();
    assert_eq!(
        (after.held - before.held, after.run_now - before.run_now, after.lone - before.lone),
        (0, 0, 20)
    );
}

/// Sessions freed while their requests wait in a manager: every request still completes,
/// with the right result (the held requests keep the key schedules alive).
#[test]
fn nothing_is_lost_when_sessions_are_freed_with_requests_in_flight() {
    let (fw, mb) = frameworks();
    let cases = cases();
    let (cb, rx) = collector();
    let before = mb.stats();
    let mut want = std::collections::HashMap::new();
    for (k, c) in cases.iter().enumerate() {
        let soft =
            fw.new_session_on(ocf_soft::NAME, &SessionParams::cipher(c.alg, c.key.as_slice())).unwrap();
        let s = fw.new_session_on(ocf_mb::NAME, &SessionParams::cipher(c.alg, c.key.as_slice())).unwrap();
        for i in 0..5 {
            let id = k * 100 + i;
            want.insert(id, soft_result(&soft, c, id));
            // MORE on each: all five stay in the manager until a flush.
            s.submit(request(c, id).with_flags(Flags::MORE | Flags::CALLBACK_IMMEDIATE), &cb);
        }
        drop(s);
    }
    for _ in 0..want.len() {
        let req = rx.recv_timeout(Duration::from_secs(60)).expect("a request was lost").unwrap();
        let w = want.remove(&(req.user as usize)).expect("an unknown or repeated request");
        assert_eq!(req.buf.to_vec(), w);
    }
    assert!(want.is_empty());
    assert!(mb.stats().held - before.held >= 50, "{:?}", mb.stats());
}

/// Whether this CPU runs the VAES-512 engine (AVX-512F, VAES, AES-NI); with
/// `OCF_REQUIRE_AVX512=1` (set by `scripts/test` where the CPU has it) it must.
fn has_vaes() -> bool {
    let has = is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("vaes")
        && is_x86_feature_detected!("aes");
    assert!(has || !avx512_required(), "OCF_REQUIRE_AVX512=1, but no AVX-512F/VAES for the AES-CBC engine");
    has
}

/// Whether this CPU runs the 3DES engine (AVX-512F, AVX-512BW, AVX-512 VBMI); with
/// `OCF_REQUIRE_AVX512=1` it must.
fn has_vbmi() -> bool {
    let has = is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vbmi");
    assert!(has || !avx512_required(), "OCF_REQUIRE_AVX512=1, but no AVX-512 VBMI for the 3DES engine");
    has
}

/// `OCF_REQUIRE_AVX512=1`: the 16-lane engines must run here.
fn avx512_required() -> bool {
    std::env::var_os("OCF_REQUIRE_AVX512").is_some_and(|v| v == "1")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Known answers through the held path (16 copies in one batch, all but the last marked
/// MORE) and as a run handed over whole: RFC 3602 case 2 (AES-128-CBC), SP 800-38A
/// F.5.1 (AES-128-CTR) and CAVP TCBCMMT3 encrypt COUNT = 1 (3DES-CBC), both ways.
/// (The conformance suite's lone requests run on soft's session; this is IPsec-MB's.)
#[test]
fn known_answers_through_held_jobs() {
    let (fw, mb) = frameworks();
    let vectors = [
        (
            CipherAlg::AesCbc,
            "c286696d887c9aa0611bbb3e2025a45a",
            "562e17996d093d28ddb3ba695a2e6f58",
            "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
            "d296cd94c2cccf8a3a863028b5e1dc0a7586602d253cfff91b8266bea6d61ab1",
        ),
        (
            CipherAlg::AesCtr,
            "2b7e151628aed2a6abf7158809cf4f3c",
            "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff",
            "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710",
            "874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee",
        ),
        (
            CipherAlg::TdesCbc,
            "a49d7564199e97cb529d2c9d97bf2f98d35edf57ba1f7358",
            "c2e999cb6249023c",
            "c689aee38a301bb316da75db36f110b5",
            "e9afaba5ec75ea1bbe65506655bb4ecb",
        ),
    ];
    let (cb, rx) = collector();
    for (alg, key, iv, pt, ct) in vectors {
        let s = fw.new_session_on(ocf_mb::NAME, &SessionParams::cipher(alg, hex(key).as_slice())).unwrap();
        for (op, input, want) in [(Op::Encrypt, pt, ct), (Op::Decrypt, ct, pt)] {
            let held = mb.stats().held;
            for i in 0..16 {
                let more = if i < 15 { Flags::MORE } else { Flags::default() };
                let r = Request::new(op, hex(input))
                    .with_iv(&hex(iv))
                    .with_flags(more | Flags::CALLBACK_IMMEDIATE);
                s.submit(r, &cb);
            }
            for _ in 0..16 {
                let got = rx.recv_timeout(Duration::from_secs(60)).expect("lost").unwrap();
                assert_eq!(got.buf.to_vec(), hex(want), "{alg:?} {op:?}");
            }
            assert_eq!(mb.stats().held - held, 15, "{alg:?} {op:?}: the batch was not held");
            // The same 16 as one run handed over whole.
            let (in_runs, engine) = (mb.stats().in_runs, mb.stats().engine);
            let mut reqs: Vec<Request> =
                (0..16).map(|_| Request::new(op, hex(input)).with_iv(&hex(iv))).collect();
            let mut out = Vec::new();
            s.run_batch(&mut reqs, &mut out);
            for got in out {
                assert_eq!(got.unwrap().buf.to_vec(), hex(want), "{alg:?} {op:?} in a run");
            }
            assert_eq!(mb.stats().in_runs - in_runs, 16, "{alg:?} {op:?}: not done as a run");
            // AES-CBC encryption and 3DES-CBC both ways run on the engines.
            let on_engine = match alg {
                CipherAlg::AesCbc => op == Op::Encrypt && has_vaes(),
                CipherAlg::TdesCbc => has_vbmi(),
                _ => false,
            };
            let want = if on_engine { 16 } else { 0 };
            assert_eq!(mb.stats().engine - engine, want, "{alg:?} {op:?}: not on the engine");
        }
    }
}

// ---------------------------------------------------------------------------------------
// The other session kinds: 3DES, cipher+MAC (encrypt-then-MAC), HMAC alone, AES-GCM.

/// A session of any kind the driver serves, and the direction its requests go.
struct Kind {
    params: SessionParams,
    /// Encrypt or ComputeDigest; the other direction is built from soft's result.
    forward: bool,
}

/// The two operations of a session's kind: (forward, backward).
fn ops(p: &SessionParams) -> (Op, Op) {
    match p.mode {
        Mode::Mac { .. } => (Op::ComputeDigest, Op::VerifyDigest),
        _ => (Op::Encrypt, Op::Decrypt),
    }
}

fn key(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|b| (b * 29 + seed * 11 + 3) as u8).collect()
}

/// Every new kind: 3DES; cipher+MAC over each cipher and each HMAC, truncated and full;
/// HMAC alone with keys shorter and longer than the block; AES-GCM of each key size.
fn kinds() -> Vec<Kind> {
    let hmac = |d| MacAlg::Hmac(d);
    let mut params = vec![SessionParams::cipher(CipherAlg::TdesCbc, key(24, 1).as_slice())];
    for (i, (c, klen, d, tag)) in [
        (CipherAlg::AesCbc, 16, DigestAlg::Sha1, 12),
        (CipherAlg::AesCbc, 32, DigestAlg::Sha256, 16),
        (CipherAlg::AesCtr, 24, DigestAlg::Sha384, 24),
        (CipherAlg::TdesCbc, 24, DigestAlg::Sha512, 32),
        (CipherAlg::AesCbc, 16, DigestAlg::Sha1, 20),
        (CipherAlg::AesCtr, 16, DigestAlg::Sha256, 32),
    ]
    .into_iter()
    .enumerate()
    {
        let p = SessionParams::cipher_then_mac(
            c,
            key(klen, i).as_slice(),
            hmac(d),
            key(20 + i * 7, i).as_slice(),
        );
        params.push(p.with_tag_len(tag));
    }
    for (i, (d, klen)) in
        [(DigestAlg::Sha1, 20), (DigestAlg::Sha256, 100), (DigestAlg::Sha384, 131), (DigestAlg::Sha512, 7)]
            .into_iter()
            .enumerate()
    {
        params.push(SessionParams::hmac(d, key(klen, i).as_slice()));
    }
    params.push(SessionParams::hmac(DigestAlg::Sha256, key(32, 9).as_slice()).with_tag_len(16));
    for klen in [16, 24, 32] {
        params.push(SessionParams::aead(CipherAlg::AesGcm, key(klen, klen).as_slice()));
    }
    params
        .into_iter()
        .flat_map(|p| [true, false].map(|forward| Kind { params: p.clone(), forward }))
        .collect()
}

/// Request `i` of a kind, in one of four layouts: plain (tag inline); ESP-like (an
/// 8-byte header authenticated as AAD region in front of the payload, tag in the buffer
/// after it); separate AAD bytes (cipher+MAC then runs on soft's session); out of place
/// (cipher+MAC encryption then runs on soft's session). The backward
/// direction decrypts or verifies soft's forward result; every fifth has its tag flipped.
fn request_of(k: &Kind, soft: &Session, i: usize) -> Request {
    let p = &k.params;
    let block = p.cipher_alg().map_or(1, |c| c.block_len());
    let sizes = [1024usize, 16, 1440, 64, 4096, 48, 112, 2048];
    let mut n = sizes[i % sizes.len()];
    if block == 1 {
        n += i % 13;
    }
    let iv: Vec<u8> = (0..p.cipher_alg().map_or(0, |c| c.iv_len())).map(|b| (b * 7 + i) as u8).collect();
    let tag_len = p.tag_len();
    let layout = i % 4;
    let data: Vec<u8> = (0..n).map(|b| (b * 31 + i * 3) as u8).collect();
    let aead_or_etm = !matches!(p.mode, Mode::Mac { .. } | Mode::Cipher { .. });
    let build = |op: Op, payload: &[u8], tag: Option<&[u8]>| -> Request {
        let mut r = match layout {
            1 if tag_len > 0 => {
                let mut buf = vec![0xa5u8; 8];
                buf.extend_from_slice(payload);
                buf.resize(8 + n + tag_len, 0);
                if let Some(t) = tag {
                    buf[8 + n..].copy_from_slice(t);
                }
                let mut r =
                    Request::new(op, buf).with_payload(8..8 + n).with_tag_place(TagPlace::InBuffer(8 + n));
                if aead_or_etm {
                    r.aad = Aad::Region(0..8);
                }
                r
            }
            _ => {
                let mut r = Request::new(op, payload.to_vec());
                if let Some(t) = tag {
                    r = r.with_tag(t);
                }
                if layout == 2 && aead_or_etm {
                    r = r.with_aad(&[0x3c; 12]);
                }
                if layout == 3 {
                    r = r.with_output(vec![0u8; n]);
                }
                r
            }
        };
        if !iv.is_empty() {
            r = r.with_iv(&iv);
        }
        r.user = i as u64;
        r
    };
    let (fwd, back) = ops(p);
    if k.forward {
        return build(fwd, &data, None);
    }
    let done = soft.run(build(fwd, &data, None)).map_err(|f| f.error().clone()).unwrap();
    let mut tag = match done.tag_place {
        TagPlace::InBuffer(off) => done.result_buf().to_vec()[off..off + tag_len].to_vec(),
        TagPlace::Separate => done.tag().to_vec(),
    };
    if i % 5 == 4 {
        if let Some(t) = tag.first_mut() {
            *t ^= 1;
        }
    }
    let payload = if fwd == Op::ComputeDigest { data } else { done.result_payload() };
    build(back, &payload, (tag_len > 0).then_some(tag.as_slice()))
}

/// mb's outcome equals soft's: the same bytes and tag, or the same error with no
/// plaintext released (the payload zeroed, or as soft left it).
fn same_as_soft(got: Outcome, want: Outcome, what: &str) {
    match (got, want) {
        (Ok(g), Ok(w)) => {
            assert_eq!(g.buf.to_vec(), w.buf.to_vec(), "{what}: buffer");
            assert_eq!(g.out.as_ref().map(|o| o.to_vec()), w.out.as_ref().map(|o| o.to_vec()), "{what}: out");
            assert_eq!(g.tag(), w.tag(), "{what}: tag");
        }
        (Err(g), Err(w)) => {
            assert_eq!(g.error(), w.error(), "{what}: error");
            let (g, w) = (g.request.result_payload(), w.request.result_payload());
            assert!(g.iter().all(|b| *b == 0) || g == w, "{what}: released plaintext");
        }
        (g, w) => panic!("{what}: mb {:?}, soft {:?}", g.map(|_| ()), w.map(|_| ())),
    }
}

/// Batches of 1…64 through `submit_batch` for every new kind, two sessions' batches in
/// flight at once (keys, algorithms and directions mixed in a lane), mixed sizes and
/// layouts, forged tags among them: every outcome equal to soft's (aws-lc, RustCrypto,
/// libcrypto: independent implementations). And each kind ran as jobs (held, or at once
/// for GCM).
#[test]
fn every_kind_in_batches_of_1_to_64_matches_soft() {
    let (fw, mb) = frameworks();
    let kinds = kinds();
    let mbs: Vec<Session> =
        kinds.iter().map(|k| fw.new_session_on(ocf_mb::NAME, &k.params).unwrap()).collect();
    let softs: Vec<Session> =
        kinds.iter().map(|k| fw.new_session_on(ocf_soft::NAME, &k.params).unwrap()).collect();
    let (cb, rx) = collector();
    for n in 1..=64usize {
        for round in 0..2 {
            let a = (n + round * 7) % kinds.len();
            let b = (a + 5) % kinds.len();
            mbs[a].submit_batch((0..n).map(|i| request_of(&kinds[a], &softs[a], i)), &cb);
            mbs[b].submit_batch((0..n).map(|i| request_of(&kinds[b], &softs[b], i + 1000)), &cb);
            for _ in 0..2 * n {
                let got = rx.recv_timeout(Duration::from_secs(60)).expect("a request was lost");
                let i = match &got {
                    Ok(r) => r.user as usize,
                    Err(f) => f.request.user as usize,
                };
                let k = if i >= 1000 { b } else { a };
                let want = softs[k].run(request_of(&kinds[k], &softs[k], i));
                same_as_soft(got, want, &format!("batch {n}, request {i}, {:?}", kinds[k].params.mode));
            }
        }
    }
    // Each kind runs as jobs: 16 requests of the plain layout (0), then 16 out of place
    // (3; not cipher+MAC encryption), submitted directly (the driver sees them at once),
    // MORE on all but the last: held, or for GCM (which completes on submit) run at once.
    for (k, (s, soft)) in kinds.iter().zip(mbs.iter().zip(&softs)) {
        let etm_encrypt = matches!(k.params.mode, Mode::CipherThenMac { .. }) && k.forward;
        for layout in [0, 3].into_iter().filter(|l| *l == 0 || !etm_encrypt) {
            let reqs: Vec<Request> = (0..16).map(|i| request_of(k, soft, i * 4 + layout)).collect();
            let before = mb.stats();
            for (i, r) in reqs.into_iter().enumerate() {
                let more = if i < 15 { Flags::MORE } else { Flags::default() };
                s.submit(r.with_flags(more | Flags::CALLBACK_IMMEDIATE), &cb);
            }
            for _ in 0..16 {
                let got = rx.recv_timeout(Duration::from_secs(60)).expect("lost");
                let i = got.as_ref().map_or_else(|f| f.request.user, |r| r.user) as usize;
                same_as_soft(got, soft.run(request_of(k, soft, i)), &format!("direct {:?}", k.params.mode));
            }
            let after = mb.stats();
            let jobs = after.held + after.run_now - before.held - before.run_now;
            // (The last one runs on soft's session if the flusher emptied the lane first.)
            let what = format!("{:?} forward {} layout {layout}", k.params.mode, k.forward);
            assert!(jobs >= 15, "{what}: only {jobs} of 16 ran as jobs");
        }
    }
}

/// Every kind in runs of 1…64 handed over whole (`run_batch`), all four layouts and the
/// forged tags of `request_of` mixed in one run, each outcome equal to soft's; the
/// layouts one job covers ran as jobs of the run (tags through the run's own scratch).
#[test]
fn every_kind_in_runs_of_1_to_64_matches_soft() {
    let (fw, mb) = frameworks();
    let mut out = Vec::new();
    for (k, kind) in kinds().iter().enumerate() {
        let s = fw.new_session_on(ocf_mb::NAME, &kind.params).unwrap();
        let soft = fw.new_session_on(ocf_soft::NAME, &kind.params).unwrap();
        for n in (1..=64usize).filter(|n| n % 5 == k % 5 || *n == 64) {
            let before = mb.stats();
            let mut reqs: Vec<Request> = (0..n).map(|i| request_of(kind, &soft, i)).collect();
            s.run_batch(&mut reqs, &mut out);
            assert_eq!(out.len(), n, "one outcome per request");
            for got in out.drain(..) {
                let i = got.as_ref().map_or_else(|f| f.request.user, |r| r.user) as usize;
                let want = soft.run(request_of(kind, &soft, i));
                same_as_soft(got, want, &format!("run {n}, request {i}, {:?}", kind.params.mode));
            }
            let after = mb.stats();
            assert!(after.in_runs > before.in_runs || n < 4, "{:?}: run {n} ran no job", kind.params.mode);
            assert_eq!(after.held, before.held, "a run holds nothing");
            // 3DES-CBC in place, both ways (every layout but the out-of-place one, `i % 4
            // == 3`) goes to the 3DES engine where the CPU has it; nothing else does.
            let tdes = matches!(kind.params.mode, Mode::Cipher { alg: CipherAlg::TdesCbc, .. });
            // (A run of one is a lone request, on soft's code.)
            let engine = if tdes && has_vbmi() && n > 1 { (0..n).filter(|i| i % 4 != 3).count() } else { 0 };
            let what = format!("{:?} forward {}", kind.params.mode, kind.forward);
            assert_eq!((after.engine - before.engine) as usize, engine, "{what}: run {n}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// The conformance suite's known answers, through held jobs.

/// One record of a vector file (`NAME = hex` lines up to a blank line; NIST's `FAIL`).
struct Record {
    fields: std::collections::HashMap<String, Vec<u8>>,
    fail: bool,
    section: String,
}

impl Record {
    fn get(&self, name: &str) -> &[u8] {
        self.fields.get(name).unwrap_or_else(|| panic!("no {name} in a record of [{}]", self.section))
    }
}

/// The records of `conformance/vectors/<path>` (the suite's own files).
fn records(path: &str) -> Vec<Record> {
    let full = format!("{}/../../conformance/vectors/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
    let mut out = Vec::new();
    let mut section = String::new();
    let mut cur = Record { fields: Default::default(), fail: false, section: String::new() };
    for line in text.lines().map(str::trim).chain([""]) {
        if line.starts_with('#') {
            continue;
        }
        if line.is_empty() {
            if !cur.fields.is_empty() {
                let next = Record { fields: Default::default(), fail: false, section: section.clone() };
                out.push(std::mem::replace(&mut cur, next));
            }
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if !s.contains('=') {
                section = s.to_owned();
                cur.section = section.clone();
            }
        } else if line == "FAIL" {
            cur.fail = true;
        } else if let Some((name, value)) = line.split_once('=') {
            let value = value.trim();
            if value.bytes().all(|b| b.is_ascii_hexdigit()) && value.len() % 2 == 0 {
                cur.fields.insert(name.trim().to_ascii_uppercase(), hex(value));
            }
        }
    }
    out
}

/// One known answer: the session, the request, what it must give (payload result and
/// tag; or `AuthFailed`).
struct Known {
    params: SessionParams,
    req: Request,
    want: Result<(Vec<u8>, Vec<u8>), ocf::Error>,
}

/// Runs known answers in runs of 16 requests (each on its own session: keys mixed in
/// the lane), all but the last of a run marked MORE; checks each, and that most ran as
/// jobs, held or (GCM, which completes on submit) at once (the empty messages of GCM's
/// files run on soft's session).
fn check_known(source: &str, cases: Vec<Known>) {
    let (fw, mb) = frameworks();
    let (cb, rx) = collector();
    let total = cases.len();
    assert!(total > 0, "{source}: no cases");
    let jobs = |s: ocf_mb::MbStats| s.held + s.run_now;
    let before = jobs(mb.stats());
    let mut wants = Vec::new();
    let mut chunk = Vec::new();
    for (i, k) in cases.into_iter().enumerate() {
        chunk.push((fw.new_session_on(ocf_mb::NAME, &k.params).unwrap(), k.req));
        wants.push(k.want);
        if chunk.len() < 16 && i + 1 < total {
            continue;
        }
        let n = chunk.len();
        for (j, (s, mut req)) in chunk.drain(..).enumerate() {
            req.user = (i + 1 - n + j) as u64;
            let more = if j + 1 < n { Flags::MORE } else { Flags::default() };
            s.submit(req.with_flags(more | Flags::CALLBACK_IMMEDIATE), &cb);
        }
        for _ in 0..n {
            let got = rx.recv_timeout(Duration::from_secs(60)).expect("lost");
            let (req, err) = match got {
                Ok(r) => (r, None),
                Err(f) => {
                    let (e, r) = f.into_parts();
                    (r, Some(e))
                }
            };
            match (&wants[req.user as usize], err) {
                (Ok((payload, tag)), None) => {
                    assert_eq!(&req.result_payload(), payload, "{source}: case {}", req.user);
                    assert_eq!(req.tag(), &tag[..], "{source}: case {} tag", req.user);
                }
                (Err(w), Some(e)) => assert_eq!(w, &e, "{source}: case {}", req.user),
                (w, e) => panic!("{source}: case {}: want {w:?}, got {e:?}", req.user),
            }
        }
    }
    let ran = jobs(mb.stats()) - before;
    eprintln!("{source}: {total} known answers, {ran} run as jobs");
    assert!(ran as usize * 2 >= total, "{source}: only {ran} of {total} run as jobs");
}

/// NIST CAVP TDES MMT, three keys (`nist/tdes-cbc/TCBCMMT3.rsp`), both directions.
#[test]
fn known_answers_tdes_cbc_in_batches() {
    let mut cases = Vec::new();
    for r in records("nist/tdes-cbc/TCBCMMT3.rsp") {
        let key = [r.get("KEY1"), r.get("KEY2"), r.get("KEY3")].concat();
        let params = SessionParams::cipher(CipherAlg::TdesCbc, key.as_slice());
        let (pt, ct) = (r.get("PLAINTEXT").to_vec(), r.get("CIPHERTEXT").to_vec());
        let (op, input, want) =
            if r.section == "ENCRYPT" { (Op::Encrypt, pt, ct) } else { (Op::Decrypt, ct, pt) };
        cases.push(Known {
            params,
            req: Request::new(op, input).with_iv(r.get("IV")),
            want: Ok((want, vec![])),
        });
    }
    check_known("TCBCMMT3.rsp", cases);
}

/// RFC 2202 (HMAC-SHA1) and RFC 4231 (HMAC-SHA-256/384/512), compute and verify, each
/// truncated as the RFC gives it (truncations below ocf's minimum are skipped: the
/// session refuses them).
#[test]
fn known_answers_hmac_in_batches() {
    for (file, sections) in [
        ("rfc/rfc2202-hmac.txt", &[("HMAC-SHA1", DigestAlg::Sha1)][..]),
        (
            "rfc/rfc4231-hmac-sha2.txt",
            &[
                ("HMAC-SHA256", DigestAlg::Sha256),
                ("HMAC-SHA384", DigestAlg::Sha384),
                ("HMAC-SHA512", DigestAlg::Sha512),
            ],
        ),
    ] {
        let mut cases = Vec::new();
        for r in records(file) {
            let Some((_, d)) = sections.iter().find(|(s, _)| *s == r.section) else { continue };
            let mac = r.get("MAC");
            if mac.len() < MacAlg::Hmac(*d).min_output_len() {
                continue;
            }
            let params = SessionParams::hmac(*d, r.get("KEY")).with_tag_len(mac.len());
            let data = r.get("DATA").to_vec();
            cases.push(Known {
                params: params.clone(),
                req: Request::new(Op::ComputeDigest, data.clone()),
                want: Ok((data.clone(), mac.to_vec())),
            });
            cases.push(Known {
                params: params.clone(),
                req: Request::new(Op::VerifyDigest, data.clone()).with_tag(mac),
                want: Ok((data.clone(), mac.to_vec())),
            });
            let mut bad = mac.to_vec();
            bad[0] ^= 0x80;
            cases.push(Known {
                params,
                req: Request::new(Op::VerifyDigest, data).with_tag(&bad),
                want: Err(ocf::Error::AuthFailed),
            });
        }
        check_known(file, cases);
    }
}

/// NIST CAVP GCM (`nist/aes-gcm/`, the suite's trimmed files), 96-bit IVs and 128-bit
/// tags: encrypt files both ways, decrypt files with their FAIL cases.
#[test]
fn known_answers_aes_gcm_in_batches() {
    for bits in [128, 192, 256] {
        for file in
            [format!("nist/aes-gcm/gcmEncryptExtIV{bits}.rsp"), format!("nist/aes-gcm/gcmDecrypt{bits}.rsp")]
        {
            let mut cases = Vec::new();
            for r in records(&file) {
                let (iv, tag) = (r.get("IV"), r.get("TAG"));
                if iv.len() != 12 || tag.len() != 16 {
                    continue;
                }
                let params = SessionParams::aead(CipherAlg::AesGcm, r.get("KEY"));
                let (aad, ct) = (r.get("AAD"), r.get("CT").to_vec());
                let open = Request::new(Op::Decrypt, ct.clone()).with_iv(iv).with_aad(aad).with_tag(tag);
                if r.fail {
                    cases.push(Known { params, req: open, want: Err(ocf::Error::AuthFailed) });
                    continue;
                }
                let pt = r.get("PT").to_vec();
                cases.push(Known { params: params.clone(), req: open, want: Ok((pt.clone(), tag.to_vec())) });
                let seal = Request::new(Op::Encrypt, pt).with_iv(iv).with_aad(aad);
                cases.push(Known { params, req: seal, want: Ok((ct, tag.to_vec())) });
            }
            check_known(&file, cases);
        }
    }
}
