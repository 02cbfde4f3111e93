//! The flow-control experiment of Leffler's "Cryptographic Device Support for FreeBSD"
//! (BSDCon 2003, section 3.3): 28 threads
//! submit 3DES requests concurrently to one Hifn 7951, whose command ring (24 descriptors)
//! fills under load. The paper saw 51% of requests restarted; without flow control each
//! would have failed. Here: every result must be correct (checked against the soft driver),
//! none lost, none failed, and restarts counted (> 0). The measured share is printed
//! (`cargo test -p ocf-sim --test paper_experiment -- --nocapture`).

use std::thread;

use ocf::{CipherAlg, Config, Framework, Op, Policy, Request, SessionParams};

const THREADS: usize = 28;
const PER_THREAD: usize = 25;
/// Three distinct, non-weak DES keys (SP 800-67 keying option 1).
const KEY: [u8; 24] =
    *b"\x01\x23\x45\x67\x89\xab\xcd\xef\x23\x45\x67\x89\xab\xcd\xef\x01\x45\x67\x89\xab\xcd\xef\x01\x23";
const IV: [u8; 8] = [7; 8];

#[test]
fn twenty_eight_threads_on_a_hifn7951_restart_but_lose_nothing() {
    // The paper's framework binds each session to one driver (ocf's `Priority` policy); under
    // per-request routing the CPU would take part of the load and the ring need not fill.
    let fw = Framework::with_config(Config { policy: Policy::Priority, ..Config::default() });
    ocf_soft::register(&fw).unwrap();
    let card = ocf_sim::register_driver(&fw, "hifn7951").unwrap();
    let name = ocf::Driver::name(&*card).to_owned();
    let params = SessionParams::cipher(CipherAlg::TdesCbc, &KEY);
    let session = fw.new_session(&params).unwrap();
    assert_eq!(session.drivers(), std::slice::from_ref(&name), "the card outranks the CPU");
    let reference = fw.new_session_on(ocf_soft::NAME, &params).unwrap();

    let wrong: usize = thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (session, reference) = (session.clone(), reference.clone());
                s.spawn(move || {
                    let mut wrong = 0;
                    for i in 0..PER_THREAD {
                        // Sizes like cryptotest's sweep: 64 B to 1 KiB, all 3DES blocks.
                        let len = 64 << (i % 5);
                        let plain: Vec<u8> = (0..len).map(|b| (b + t * 31 + i) as u8).collect();
                        let got = session.run(Request::new(Op::Encrypt, plain.clone()).with_iv(&IV));
                        let want = reference.run(Request::new(Op::Encrypt, plain).with_iv(&IV)).unwrap();
                        match got {
                            Ok(r) if r.buf.to_vec() == want.buf.to_vec() => {}
                            _ => wrong += 1,
                        }
                    }
                    wrong
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });

    let total = (THREADS * PER_THREAD) as u64;
    assert_eq!(wrong, 0, "every result correct, none failed");
    let st = fw.driver_stats(&name).unwrap();
    assert_eq!(st.ops, total, "none lost");
    assert_eq!(st.errors.total(), 0);
    assert_eq!((st.flow.held, st.flow.in_flight), (0, 0));
    let card_stats = card.stats();
    assert!(card_stats.ring_high_water <= 24, "the ring never overflows: {card_stats:?}");
    assert!(st.flow.restarts > 0, "a 24-slot ring under 28 threads must fill: {:?}", st.flow);
    println!(
        "hifn7951, {THREADS} threads, {total} requests: {} restarts ({:.0}% of requests), \
         {} blocked periods, held at most {}, ring high water {}",
        st.flow.restarts,
        100.0 * st.flow.restarts as f64 / total as f64,
        st.flow.blocked_periods,
        st.flow.held_high_water,
        card_stats.ring_high_water,
    );
}
