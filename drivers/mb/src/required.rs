//! Whether this machine must have what the tests need, so that a lost feature fails the
//! tests instead of leaving them empty: `OCF_REQUIRE_IPSEC_MB=1` (Intel IPsec-MB) here,
//! `OCF_REQUIRE_AVX512=1` (the 16-lane engines) in `testkit`; the tests' IPsec-MB manager,
//! which obeys it, is `ffi::Manager::for_tests`. `scripts/test` sets each where
//! the machine has it, as `OCF_REQUIRE_AFALG=1` is set where the kernel has AF_ALG.

/// Whether `OCF_REQUIRE_IPSEC_MB=1`: IPsec-MB is installed here (`scripts/test` sets it
/// where its header is and `OCF_NO_IPSEC_MB` is not set).
pub(crate) fn ipsec_mb() -> bool {
    std::env::var_os("OCF_REQUIRE_IPSEC_MB").is_some_and(|v| v == "1")
}
