//! A full ring refuses requests (Busy, ERESTART) and ends the Busy period with an unblock.
//!
//! ocf holds a refused request (and the ones after it) until the card calls `unblock`, then
//! resumes them, so every request completes, and the framework counts the restarts. A
//! refusal handed back to the caller would be a failure of this test.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ocf::{CipherAlg, Framework, Op, Request, SessionParams};

const THREADS: usize = 4;
const PER_THREAD: usize = 40;
const KEY: [u8; 16] = [5; 16];
const IV: [u8; 16] = [6; 16];

fn message(thread: usize, i: usize) -> Vec<u8> {
    vec![(thread * PER_THREAD + i) as u8; 256]
}

#[test]
fn busy_requests_come_back_intact_and_the_card_unblocks() {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let card = ocf_sim::register_driver(&fw, "ring=4,setup=200us,rate=1GB/s").unwrap();
    let params = SessionParams::cipher(CipherAlg::AesCtr, &KEY);
    let session = fw.new_session_on(ocf::Driver::name(&*card), &params).unwrap();
    let soft = fw.new_session_on(ocf_soft::NAME, &params).unwrap();

    let completed = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let wrong = Arc::new(AtomicUsize::new(0));
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (session, soft) = (session.clone(), soft.clone());
            let (completed, refused, wrong) = (completed.clone(), refused.clone(), wrong.clone());
            s.spawn(move || {
                // The callback knows which message a request carried from its `user` cookie.
                let callback: ocf::Callback = Arc::new(move |outcome: ocf::Outcome| {
                    let (t, i) = match &outcome {
                        Ok(r) => (r.user as usize / PER_THREAD, r.user as usize % PER_THREAD),
                        Err(f) => {
                            (f.request.user as usize / PER_THREAD, f.request.user as usize % PER_THREAD)
                        }
                    };
                    let plain = message(t, i);
                    let ok = match outcome {
                        Ok(req) => {
                            let expected =
                                soft.run(Request::new(Op::Encrypt, plain).with_iv(&IV)).unwrap().buf.to_vec();
                            completed.fetch_add(1, Ordering::SeqCst);
                            req.buf.to_vec() == expected
                        }
                        // Not expected from ocf, which queues refused requests; a refusal
                        // handed back must come with its buffer intact, and is checked
                        // against the card's counters below.
                        Err(failed) => {
                            refused.fetch_add(1, Ordering::SeqCst);
                            failed.request.buf.to_vec() == plain
                        }
                    };
                    if !ok {
                        wrong.fetch_add(1, Ordering::SeqCst);
                    }
                });
                for i in 0..PER_THREAD {
                    let mut req = Request::new(Op::Encrypt, message(t, i)).with_iv(&IV);
                    req.user = (t * PER_THREAD + i) as u64;
                    session.submit(req, &callback);
                    // Submitters faster than the card, but not so fast that every request
                    // after the first few finds the ring full.
                    std::thread::sleep(Duration::from_micros(100));
                }
            });
        }
    });
    let total = THREADS * PER_THREAD;
    let start = Instant::now();
    while completed.load(Ordering::SeqCst) + refused.load(Ordering::SeqCst) < total
        && start.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    let (completed, refused) = (completed.load(Ordering::SeqCst), refused.load(Ordering::SeqCst));
    assert_eq!(completed + refused, total, "every request came back exactly once");
    assert_eq!(refused, 0, "ocf queues refused requests and resumes them on unblock: none fail");
    let flow = fw.driver_stats(ocf::Driver::name(&*card)).unwrap().flow;
    assert!(flow.restarts > 0 && flow.blocked_periods > 0, "{flow:?}");
    assert_eq!(wrong.load(Ordering::SeqCst), 0, "a result was wrong or a refused buffer was touched");

    let s = card.stats();
    assert!(s.busy > 0, "four threads against four slots: the ring filled: {s:?}");
    assert!(s.busy as usize >= refused, "every Busy the caller saw came from the card");
    assert_eq!(s.accepted as usize, completed, "{s:?}");
    assert!(s.unblocks >= 1, "a Busy period ends with an unblock: {s:?}");
    assert!(s.unblocks <= s.busy, "at most one unblock per Busy answer");
    assert!(s.ring_high_water <= 4);
    assert_eq!(session.stats().ops as usize, completed);
}
