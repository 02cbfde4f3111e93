//! Registration by profile string, and what happens to requests in flight when the card goes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ocf::{CipherAlg, Framework, Op, Request, SessionParams};
use ocf_sim::{ProfileError, SimError};

/// A 3DES key whose three subkeys differ and are not weak.
const THREE_DES_KEY: [u8; 24] = *b"0123456789abcdefFEDCBA98";

#[test]
fn register_names_the_driver_after_its_profile() {
    let fw = Framework::new();
    assert_eq!(ocf_sim::register(&fw, "hifn7951").unwrap(), "sim:hifn7951");
    assert_eq!(ocf_sim::register(&fw, " bcm5822,ring=4 ").unwrap(), "sim:bcm5822,ring=4");
    let names: Vec<String> = fw.drivers().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["sim:hifn7951", "sim:bcm5822,ring=4"]);
    let caps = &fw.drivers()[0].capabilities;
    assert!(!caps.synchronous && !caps.named_only && caps.cipher_then_mac);
}

#[test]
fn bad_profiles_register_nothing() {
    let fw = Framework::new();
    for (spec, expected) in [
        ("", ProfileError::Empty),
        ("hifn9999", ProfileError::UnknownProfile("hifn9999".into())),
        ("hifn7951,ring=0", ProfileError::Zero("ring=0".into())),
        ("ring=4,setup=1us,rate=0GB/s", ProfileError::Zero("rate=0GB/s".into())),
        ("ring=4,setup=1us", ProfileError::Missing("rate")),
        ("hifn7951,colour=blue", ProfileError::UnknownKey("colour=blue".into())),
        (
            "hifn7951,setup=1x5us",
            ProfileError::UnknownUnit { part: "setup=1x5us".into(), unit: "x5us".into() },
        ),
    ] {
        match ocf_sim::register(&fw, spec) {
            Err(SimError::Profile(e)) => assert_eq!(e, expected, "{spec:?}"),
            other => panic!("{spec:?}: {other:?}"),
        }
    }
    assert!(fw.drivers().is_empty());
    // The error reads well.
    let e = ocf_sim::register(&fw, "hifn7951,ring=0").unwrap_err();
    assert_eq!(e.to_string(), "bad sim device profile: \"ring=0\": must be greater than zero");
}

/// Before: a second card of a spec was refused as a duplicate name, so two identical cards
/// could not be had (issue 18's "two identical cards" benchmark).
#[test]
fn the_same_card_twice_gets_the_next_free_name() {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let first = ocf_sim::register_driver(&fw, "hifn7951").unwrap();
    let second = ocf_sim::register_driver(&fw, "hifn7951").unwrap();
    let (a, b) = (ocf::Driver::name(&*first).to_owned(), ocf::Driver::name(&*second).to_owned());
    assert_eq!((a.as_str(), b.as_str()), ("sim:hifn7951", "sim:hifn7951#2"));
    assert_eq!(ocf_sim::register(&fw, "hifn7951").unwrap(), "sim:hifn7951#3");
    // Another spec has names of its own.
    assert_eq!(ocf_sim::register(&fw, "bcm5822").unwrap(), "sim:bcm5822");

    // Both serve sessions, with the real results, and count their own requests.
    let params = SessionParams::cipher(CipherAlg::TdesCbc, &THREE_DES_KEY);
    let soft = fw.new_session_on(ocf_soft::NAME, &params).unwrap();
    let req = || Request::new(Op::Encrypt, vec![3; 64]).with_iv(&[4; 8]);
    let expected = soft.run(req()).unwrap().buf.to_vec();
    for (name, n) in [(&a, 2), (&b, 5)] {
        let s = fw.new_session_on(name, &params).unwrap();
        for _ in 0..n {
            assert_eq!(s.run(req()).unwrap().buf.to_vec(), expected, "{name}");
        }
    }
    let (sa, sb) = (first.stats(), second.stats());
    assert_eq!((sa.accepted, sa.completed), (2, 2), "{sa:?}");
    assert_eq!((sb.accepted, sb.completed), (5, 5), "{sb:?}");
    assert_eq!(fw.driver_stats(&b).unwrap().ops, 5);

    // A name freed is the first free again.
    fw.unregister(&b).unwrap();
    assert_eq!(ocf_sim::register(&fw, " hifn7951 ").unwrap(), "sim:hifn7951#2");
    assert_eq!(fw.stats().errors.total(), 0, "finding the free name records no DuplicateDriver");
}

#[test]
fn a_driver_name_registers_its_card() {
    let fw = Framework::new();
    assert_eq!(ocf_sim::register_named(&fw, " sim:qat-like ").unwrap(), "sim:qat-like");
    assert_eq!(ocf_sim::register_named(&fw, "sim:qat-like").unwrap(), "sim:qat-like#2");
    let e = ocf_sim::register_named(&fw, "soft").unwrap_err();
    assert!(matches!(&e, SimError::NotSim(n) if n == "soft"), "{e:?}");
    assert!(e.to_string().contains("\"soft\"") && e.to_string().contains("sim:<profile>"), "{e}");
    let e = ocf_sim::register_named(&fw, "sim:hifn9999").unwrap_err();
    assert_eq!(e.to_string(), "bad sim device profile: unknown device profile \"hifn9999\" (known: hifn7951, hifn7811, bcm5822, qat-like)");
    assert_eq!(fw.drivers().len(), 2);
}

#[test]
fn unregistered_card_finishes_what_it_holds() {
    let fw = Framework::new();
    let name = ocf_sim::register(&fw, "ring=8,setup=3ms,rate=1GB/s").unwrap();
    let session = fw.new_session_on(&name, &SessionParams::cipher(CipherAlg::AesCtr, &[1; 16])).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let callback: ocf::Callback = Arc::new(move |o: ocf::Outcome| {
        assert!(o.is_ok(), "in-flight requests complete normally");
        counter.fetch_add(1, Ordering::SeqCst);
    });
    for _ in 0..8 {
        session.submit(Request::new(Op::Encrypt, vec![0; 32]).with_iv(&[0; 16]), &callback);
    }
    assert!(calls.load(Ordering::SeqCst) < 8, "8 × 3 ms: still in flight");
    // unregister waits (up to ocf's drain timeout) for the card to finish what it holds.
    fw.unregister(&name).unwrap();
    // The session was the driver's last user: dropping it drops the card, which delivers
    // everything it holds before its thread ends.
    drop(session);
    // Delivered before the card's thread ends; ocf's return workers may run the callbacks a
    // little later.
    let start = std::time::Instant::now();
    while calls.load(Ordering::SeqCst) < 8 && start.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 8, "every callback ran once");
}
