//! CPU state hygiene after calls into libcrypto.
//!
//! Measured here: after libcrypto's AVX-512 ChaCha20-Poly1305 ran, RustCrypto's SHA-NI
//! HMAC-SHA1 on the same thread dropped from 1.82 to 1.57 GB/s at 8 KiB, and came back to
//! 1.82 once a `vzeroupper` followed each libcrypto call. libcrypto leaves the upper halves
//! of the vector registers dirty, and the legacy-SSE instructions of the SHA-NI code then
//! pay for the mixed state. `vzeroupper` costs about a cycle.

/// Clears the upper halves of the vector registers (`vzeroupper`) if the CPU has AVX.
#[inline]
pub fn clear_upper_vector_state() {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx")]
        fn vzeroupper() {
            // Safe inside an AVX-enabled function; it zeroes register halves that hold no
            // Rust value across calls.
            std::arch::x86_64::_mm256_zeroupper()
        }
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU supports AVX (checked just above), the only requirement of a
            // `#[target_feature(enable = "avx")]` function.
            unsafe { vzeroupper() }
        }
    }
}
