//! The batching itself: requests the dispatcher marks "more follow" are held in IPsec-MB's
//! managers and completed later, and every result equals the soft driver's (aws-lc-rs, an
//! independent implementation; the known answers are in the conformance suite).

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
