//! Builds the IPsec-MB job-API glue (`csrc/mb.c`, see `src/ffi.rs`) when the library's
//! header and library are installed (Debian: `libipsec-mb-dev`) and sets `cfg(ocf_mb)`.
//! Without them the crate still builds and `register` answers that the driver is
//! unavailable. `OCF_NO_IPSEC_MB=1` builds without it on purpose.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ocf_mb)");
    println!("cargo::rerun-if-changed=csrc/mb.c");
    // The manager setup is shared with the soft driver's glue (one definition).
    println!("cargo::rerun-if-changed=../soft/csrc/imb_mgr.h");
    println!("cargo::rerun-if-env-changed=OCF_NO_IPSEC_MB");
    if std::env::var_os("OCF_NO_IPSEC_MB").is_some() {
        return;
    }
    let built = cc::Build::new()
        .file("csrc/mb.c")
        .include("../soft/csrc")
        .opt_level(2)
        .cargo_warnings(false)
        .try_compile("ocf_mb");
    if built.is_ok() {
        println!("cargo::rustc-link-lib=IPSec_MB");
        println!("cargo::rustc-cfg=ocf_mb");
    }
}
