//! The framework every conformance test runs against: every driver the workspace has.
//! A new driver is added here once, and gets the whole suite.

use ocf::Framework;

/// The simulated card's profile in the suite: a deep ring and no modelled delay.
pub const SIM: &str = "ring=256,setup=0ns,rate=1000GB/s";

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
    fw
}
