//! Zeroing the stack a driver's key set-up used.
//!
//! Key schedules are values, and Rust moves values by copying them: a library that builds
//! one in a local and returns it leaves a copy in every frame it passes through (aws-lc-rs
//! builds an `AES_KEY` pair in `SymmetricCipherKey::aes`, returns it, moves it into an
//! `EncryptingKey`, which the soft driver moves into its session, which is boxed), and a
//! dead frame is overwritten only when the stack grows that deep again. ocf's own drivers
//! expand keys where they stay (the mb driver's engines, into their box), but a library's
//! moves are out of their hands. So, after a driver made a session (or failed to), the
//! framework zeroes the stack below its own frame, as deep as set-up goes:
//!
//! ```text
//!  Registry::bind ─ driver.new_session(params) ─ … ─ a library's key set-up
//!       │            (returned: its dead frames below bind's hold key copies)
//!       └ below_here::<SESSION_KIB>(): a zeroed local that deep
//! ```
//!
//! How deep: without it, `drivers/mb/tests/key_wipe.rs` finds a session's AES round keys
//! 10 KiB below the test's own frame (which is above `bind`'s) in a release build, and
//! from 8 to 41 KiB below it in a debug build (larger frames): 16 KiB and 48 KiB cover
//! them with room. A thread must have that much stack left, which every thread Rust or a
//! C library starts with its default size has (2 MiB or more). Cost, per session made (not
//! per request): AES-128-GCM on soft, made and dropped 20,000 times on one busy core, five
//! rounds, three runs each: 1,050–1,930 ns without, 1,310–2,710 with (medians 1,580 and
//! 1,930: about 0.3 µs).

/// KiB of stack the framework zeroes below its frame after a driver made a session.
pub(crate) const SESSION_KIB: usize = if cfg!(debug_assertions) { 48 } else { 16 };

/// Zeroes `KIB` KiB of the stack below the caller's frame (where the functions it called
/// had theirs). For code that knows a callee left secrets in its frame: the framework after
/// a session's set-up, the mb driver's engines after a call.
#[inline(never)]
pub fn below_here<const KIB: usize>() {
    // A plain zeroed local (a memset), handed to `black_box`, whose opaque read makes the
    // stores happen; `zeroize`'s volatile stores go one word at a time.
    // `drivers/mb/tests/key_wipe.rs` checks the effect, in debug and release builds.
    let area = [[0u64; 128]; KIB];
    std::hint::black_box(&area);
}
