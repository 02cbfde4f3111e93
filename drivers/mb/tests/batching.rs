//! The batching itself: requests the dispatcher marks "more follow" are held in IPsec-MB's
//! managers and completed later, and every result equals the soft driver's (aws-lc-rs, an
//! independent implementation; the known answers are in the conformance suite).
//! Built with IPsec-MB only: without it `register` refuses (tested in the crate).
#![cfg(ocf_mb)]

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ocf::{Callback, CipherAlg, Flags, Framework, Op, Outcome, Request, Session, SessionParams};

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
            let req = rx.recv_timeout(Duration::from_secs(10)).expect("a request was lost").unwrap();
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

/// Runs of 1…100 handed over whole (`run_batch`): mixed sizes, both directions, and an
/// out-of-place request among them (done on its own), each result equal to soft's; the
/// rest done as jobs of the run, none held.
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
            let jobs = n - usize::from(apart.is_some());
            assert_eq!((after.in_runs - before.in_runs) as usize, jobs, "run {n}: {before:?} -> {after:?}");
            assert_eq!(after.held, before.held, "a run holds nothing");
        }
    }
}

/// A request promised "more" whose follower never comes completes within the flusher's
/// bound (generously checked: 20 ms, against a bound of ~2 x 200 µs plus timer slack).
#[test]
fn a_more_with_no_follower_completes_within_the_bound() {
    let (fw, mb) = frameworks();
    let c = Case { alg: CipherAlg::AesCbc, key: vec![7; 16], op: Op::Encrypt };
    let s = fw.new_session_on(ocf_mb::NAME, &SessionParams::cipher(c.alg, c.key.as_slice())).unwrap();
    let soft = fw.new_session_on(ocf_soft::NAME, &SessionParams::cipher(c.alg, c.key.as_slice())).unwrap();
    let (cb, rx) = collector();
    let mut worst = Duration::ZERO;
    for round in 0..50 {
        let before = mb.stats();
        let t = Instant::now();
        s.submit(request(&c, round).with_flags(Flags::MORE | Flags::CALLBACK_IMMEDIATE), &cb);
        let req = rx.recv_timeout(Duration::from_secs(5)).expect("the held request never completed").unwrap();
        worst = worst.max(t.elapsed());
        assert_eq!(req.buf.to_vec(), soft_result(&soft, &c, round));
        let after = mb.stats();
        assert_eq!(after.held - before.held, 1, "the request was not held");
        assert_eq!(after.timed_flushes - before.timed_flushes, 1, "not completed by the flusher");
    }
    eprintln!("MORE with no follower: worst completion {worst:?} over 50");
    assert!(worst < Duration::from_millis(20), "worst {worst:?}");
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
        let req = rx.recv_timeout(Duration::from_secs(5)).expect("a request was lost").unwrap();
        let w = want.remove(&(req.user as usize)).expect("an unknown or repeated request");
        assert_eq!(req.buf.to_vec(), w);
    }
    assert!(want.is_empty());
    assert!(mb.stats().held - before.held >= 50, "{:?}", mb.stats());
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Known answers through the held path (16 copies in one batch, all but the last marked
/// MORE) and as a run handed over whole: RFC 3602 case 2 (AES-128-CBC) and SP 800-38A
/// F.5.1 (AES-128-CTR), both ways.
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
                let got = rx.recv_timeout(Duration::from_secs(5)).expect("lost").unwrap();
                assert_eq!(got.buf.to_vec(), hex(want), "{alg:?} {op:?}");
            }
            assert_eq!(mb.stats().held - held, 15, "{alg:?} {op:?}: the batch was not held");
            // The same 16 as one run handed over whole.
            let in_runs = mb.stats().in_runs;
            let mut reqs: Vec<Request> =
                (0..16).map(|_| Request::new(op, hex(input)).with_iv(&hex(iv))).collect();
            let mut out = Vec::new();
            s.run_batch(&mut reqs, &mut out);
            for got in out {
                assert_eq!(got.unwrap().buf.to_vec(), hex(want), "{alg:?} {op:?} in a run");
            }
            assert_eq!(mb.stats().in_runs - in_runs, 16, "{alg:?} {op:?}: not done as a run");
        }
    }
}
