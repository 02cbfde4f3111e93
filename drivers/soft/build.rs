//! Builds the Intel IPsec-MB glue (`csrc/ipsec_mb.c`, see `src/imb.rs`) when the library's
//! header and library are installed (Debian: `apt-get install libipsec-mb-dev`), and sets
//! `cfg(ocf_ipsec_mb)`. Without them the driver builds as before: ChaCha20-Poly1305 then
//! runs on aws-lc-rs and libcrypto. `OCF_NO_IPSEC_MB=1` builds without it on purpose (to
//! test the fallback). Installed later: `touch drivers/soft/csrc/ipsec_mb.c` to re-probe.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ocf_ipsec_mb)");
    println!("cargo::rerun-if-changed=csrc/ipsec_mb.c");
    println!("cargo::rerun-if-changed=csrc/imb_mgr.h");
    println!("cargo::rerun-if-env-changed=OCF_NO_IPSEC_MB");
    if std::env::var_os("OCF_NO_IPSEC_MB").is_some() {
        return;
    }
    let built = cc::Build::new()
        .file("csrc/ipsec_mb.c")
        .opt_level(2)
        .cargo_warnings(false)
        .try_compile("ocf_ipsec_mb");
    if built.is_ok() {
        println!("cargo::rustc-link-lib=IPSec_MB");
        println!("cargo::rustc-cfg=ocf_ipsec_mb");
    }
}
