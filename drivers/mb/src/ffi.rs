//! The only `unsafe` of the crate: the calls into `csrc/mb.c` (IPsec-MB's job API). The
//! C side keeps `IMB_MGR`/`IMB_JOB`; a [`JobDesc`] crosses per request and [`DoneEntry`]s
//! come back, oldest first.

use std::os::raw::c_void;
use std::ptr::NonNull;

use zeroize::Zeroize;

/// `IMB_MGR`, opaque here.
#[repr(C)]
pub struct ImbMgr {
    _opaque: [u8; 0],
}

/// Jobs a manager can hold (`IMB_MAX_JOBS` is 128); completions are read into an array
/// of this size, so one call can always return all of them.
pub const MAX_JOBS: usize = 128;

/// What the C side does with a job (`OCF_MB_*` in `csrc/mb.c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum JobMode {
    CbcEncrypt = 0,
    CbcDecrypt = 1,
    Ctr = 2,
}

/// One request as a job (`struct ocf_mb_job`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct JobDesc {
    pub src: *const u8,
    pub dst: *mut u8,
    pub len: u64,
    pub iv: *const u8,
    pub iv_len: u64,
    pub enc_keys: *const c_void,
    pub dec_keys: *const c_void,
    pub key_len: u64,
    pub mode: JobMode,
    pub user: u64,
}

/// A job the manager returned (`struct ocf_mb_done`): its user id and whether it completed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DoneEntry {
    pub user: u64,
    pub ok: u64,
}

/// An expanded AES key schedule (15 round keys), as IPsec-MB wants it: 16-byte aligned.
#[repr(C, align(16))]
pub struct Schedule(pub [u8; 240]);

impl Drop for Schedule {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

#[cfg(ocf_mb)]
extern "C" {
    fn ocf_mb_new() -> *mut ImbMgr;
    fn ocf_mb_free(m: *mut ImbMgr);
    fn ocf_mb_keyexp(m: *mut ImbMgr, key: *const u8, key_len: u64, enc: *mut c_void, dec: *mut c_void)
        -> i32;
    fn ocf_mb_submit(m: *mut ImbMgr, d: *const JobDesc, out: *mut DoneEntry, max: u64) -> u64;
    fn ocf_mb_flush(m: *mut ImbMgr, out: *mut DoneEntry, max: u64) -> u64;
}

/// One IPsec-MB manager (its job ring and lanes). Not thread-safe: used under a lock.
// Built without IPsec-MB, no manager is ever made and the pointer is never read.
#[cfg_attr(not(ocf_mb), allow(dead_code))]
pub struct Manager(NonNull<ImbMgr>);

// SAFETY: a manager is plain memory owned by this value; moving it to another thread is
// fine as long as only one thread uses it at a time, which `&mut self` on every call that
// touches its jobs (and the `Mutex` around each lane) guarantees.
unsafe impl Send for Manager {}

impl Manager {
    /// A manager for the best code path this CPU runs; `None` when IPsec-MB was not built
    /// in or refuses to start.
    pub fn new() -> Option<Manager> {
        #[cfg(ocf_mb)]
        {
            // SAFETY: returns a fully initialised manager or null (checked).
            NonNull::new(unsafe { ocf_mb_new() }).map(Manager)
        }
        #[cfg(not(ocf_mb))]
        None
    }

    /// Expands `key` (16, 24 or 32 bytes) into encryption and decryption schedules.
    pub fn expand(&mut self, key: &[u8], enc: &mut Schedule, dec: &mut Schedule) -> bool {
        if !matches!(key.len(), 16 | 24 | 32) {
            return false;
        }
        #[cfg(ocf_mb)]
        {
            // SAFETY: the manager is live; `key` has the length passed (checked above);
            // both schedules are 240 bytes, 16-aligned, as the key expansion writes.
            let rc = unsafe {
                ocf_mb_keyexp(
                    self.0.as_ptr(),
                    key.as_ptr(),
                    key.len() as u64,
                    enc.0.as_mut_ptr().cast(),
                    dec.0.as_mut_ptr().cast(),
                )
            };
            rc == 0
        }
        #[cfg(not(ocf_mb))]
        {
            let _ = (enc, dec);
            false
        }
    }

    /// Submits one job; writes what the manager returned into `out` and returns how many.
    ///
    /// # Safety
    /// Every pointer in `d` must stay valid (and `src`/`dst` not be used otherwise) until
    /// the job's user id comes back from this or a later [`Manager::submit`] or
    /// [`Manager::flush`]: `src`/`dst` for `len` bytes, `iv` for `iv_len`, the schedules
    /// for 240 bytes each.
    pub unsafe fn submit(&mut self, d: &JobDesc, out: &mut [DoneEntry; MAX_JOBS]) -> usize {
        #[cfg(ocf_mb)]
        {
            // SAFETY: the caller keeps the job's memory valid (above); `out` has room for
            // MAX_JOBS entries, every job a manager can hold.
            unsafe { ocf_mb_submit(self.0.as_ptr(), d, out.as_mut_ptr(), MAX_JOBS as u64) as usize }
        }
        #[cfg(not(ocf_mb))]
        {
            let _ = (d, out);
            0
        }
    }

    /// Completes every job in the manager; as [`Manager::submit`] for `out`.
    pub fn flush(&mut self, out: &mut [DoneEntry; MAX_JOBS]) -> usize {
        #[cfg(ocf_mb)]
        {
            // SAFETY: the manager is live and used by this thread alone (`&mut self`); the
            // jobs' memory is kept valid by the callers of `submit` until they come back,
            // which is here; `out` has room for every job.
            unsafe { ocf_mb_flush(self.0.as_ptr(), out.as_mut_ptr(), MAX_JOBS as u64) as usize }
        }
        #[cfg(not(ocf_mb))]
        {
            let _ = out;
            0
        }
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        #[cfg(ocf_mb)]
        // SAFETY: made by `ocf_mb_new`, freed once; the lane that owns it flushed it first.
        unsafe {
            ocf_mb_free(self.0.as_ptr())
        }
    }
}
