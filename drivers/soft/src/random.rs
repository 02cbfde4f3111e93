//! Random bytes (`Mode::Random`, `Op::Random`) from the kernel: `getrandom(2)` through the
//! `getrandom` crate, which blocks only until the kernel's pool is first seeded. The
//! kernel's CSPRNG conditions and checks its own sources, so the SP 800-90B health tests
//! ocf runs on a device's raw source are not repeated here.
//!
//! `getrandom` leaves its destination unspecified when it fails, and `Op::Random` promises
//! the caller's buffer untouched then: the bytes are drawn into a temporary (wiped when
//! dropped) and copied over only once they are all there: one copy per request is the price
//! of that promise.

use ocf::Error;
use zeroize::Zeroizing;

/// Fills `buf` from the kernel; on failure `buf` may hold anything (see [`fill_in_place`]).
pub(crate) fn fill(buf: &mut [u8]) -> Result<(), Error> {
    getrandom::fill(buf).map_err(|_| Error::RandomSourceFailed { why: "getrandom(2) failed" })
}

/// Overwrites `payload` with random bytes, or fails leaving it as it was.
pub(crate) fn fill_in_place(payload: &mut [u8]) -> Result<(), Error> {
    let mut tmp = Zeroizing::new(vec![0u8; payload.len()]);
    fill(&mut tmp)?;
    payload.copy_from_slice(&tmp);
    Ok(())
}
