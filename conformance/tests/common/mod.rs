//! The framework every conformance test runs against: every driver the workspace has.
//! A new driver is added here once, and gets the whole suite.

use ocf::Framework;

/// A framework with every driver registered.
pub fn framework_with_all_drivers() -> Framework {
    let fw = Framework::new();
    ocf_soft::register(&fw).expect("registering the soft driver");
    fw
}
