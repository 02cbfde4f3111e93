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
//!       └ below_here::<SESSION_KIB>(): a local that deep, zeroed with volatile stores
//! ```
//!
//! How deep: `drivers/mb/tests/key_wipe.rs` (a debug build, whose frames are the largest)
//! found copies of a session's AES round keys from 8 to 41 KiB below the test's
//! own frame, which is above `bind`'s; 48 KiB covers them with room. Zeroing it costs a
//! few microseconds per session made (not per request); a thread must have that much stack
//! left, which every thread Rust or a C library starts with its default size has
//! (2 MiB or more).

use zeroize::Zeroize;

/// KiB of stack the framework zeroes below its frame after a driver made a session.
pub(crate) const SESSION_KIB: usize = 48;

/// Zeroes `KIB` KiB of the stack below the caller's frame (where the functions it called
/// had theirs), with volatile stores. For code that knows a callee left secrets in its
/// frame: the framework after a session's set-up, the mb driver's engines after a call.
#[inline(never)]
pub fn below_here<const KIB: usize>() {
    let mut area = [[0u64; 128]; KIB];
    // Volatile stores: not removed as dead, as a plain local's would be.
    area.zeroize();
    std::hint::black_box(&area);
}
