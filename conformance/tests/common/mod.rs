//! The framework every conformance test runs against: every driver the workspace has.
//! A new driver is added here once, and gets the whole suite.

use ocf::Framework;

/// The simulated card's profile in the suite: the QuickAssist-like card, with a deep ring
/// and no modelled delay. Its public-key engine offers what `qat-like`'s does (every
/// algorithm but ML-KEM, no key generation) at no time per operation, so the public-key
/// suites run through it too; and it has its health-tested random number generator.
pub const SIM: &str =
    "qat-like,ring=256,setup=0ns,rate=1000GB/s,hash_rate=1000GB/s,coalesce=off,pk_ring=256,pk=0ns";

/// A framework with every driver registered.
pub fn framework_with_all_drivers() -> Framework {
    framework_with_all_drivers_and(ocf::Policy::default())
}

/// A framework with every driver registered, routing by `policy`.
#[allow(dead_code)] // not every test file uses it
pub fn framework_with_all_drivers_and(policy: ocf::Policy) -> Framework {
    let fw = Framework::with_config(ocf::Config { policy, ..ocf::Config::default() });
    ocf_soft::register(&fw).expect("registering the soft driver");
    // The simulated accelerator with no modelled delay: its results come from the soft
    // driver, but through its own ring, device thread and asynchronous completion, so the
    // suite checks that path end to end.
    ocf_sim::register(&fw, SIM).expect("registering the simulated accelerator");
    register_afalg(&fw);
    register_mb(&fw);
    fw
}

/// The multi-buffer driver (Intel IPsec-MB's job API: AES-CBC/CTR, 3DES, HMAC-SHA1/2,
/// cipher+HMAC, AES-GCM), where the library was built in; elsewhere skipped with the
/// reason, once per process; with `OCF_REQUIRE_IPSEC_MB=1` (`scripts/test`, where the
/// library is installed) a driver that registers nothing fails the test instead.
pub fn register_mb(fw: &Framework) {
    static SAID: std::sync::Once = std::sync::Once::new();
    match ocf_mb::register(fw) {
        Ok(()) => {}
        Err(e) if std::env::var_os("OCF_REQUIRE_IPSEC_MB").is_some_and(|v| v == "1") => {
            panic!("OCF_REQUIRE_IPSEC_MB=1, but: {e}")
        }
        Err(e) => SAID.call_once(|| eprintln!("conformance: mb skipped: {e}")),
    }
}

/// The Linux kernel's crypto API, where the kernel has AF_ALG: it gets every algorithm the
/// kernel offers. Elsewhere (this host) it is skipped with the reason, once per process;
/// with `OCF_REQUIRE_AFALG=1` (the kernel machine's suite, `tests/kernel/afalg`) a driver
/// that registers nothing fails the test instead.
pub fn register_afalg(fw: &Framework) {
    static SAID: std::sync::Once = std::sync::Once::new();
    match ocf_afalg::register(fw) {
        Ok(_) => {}
        Err(e) if std::env::var_os("OCF_REQUIRE_AFALG").is_some_and(|v| v == "1") => {
            panic!("OCF_REQUIRE_AFALG=1, but: {e}")
        }
        Err(e) => SAID.call_once(|| eprintln!("conformance: afalg skipped: {e}")),
    }
}

/// The seed of a randomized cross-check: `default`, or `OCF_CONFORMANCE_SEED` (decimal or
/// 0x-hex) to try others. Fixed by default, so that a failure can be replayed.
#[allow(dead_code)] // not every test file uses it
pub fn seed(default: u64) -> u64 {
    let Ok(s) = std::env::var("OCF_CONFORMANCE_SEED") else { return default };
    let parsed = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.unwrap_or_else(|_| panic!("OCF_CONFORMANCE_SEED={s:?} is not a number"))
}
