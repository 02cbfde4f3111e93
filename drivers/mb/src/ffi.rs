//! The calls into `csrc/mb.c` (IPsec-MB's job API), the crate's FFI `unsafe`. The C side
//! keeps `IMB_MGR`/`IMB_JOB`; a [`JobDesc`] crosses per request and [`DoneEntry`]s come
//! back, oldest first. The crate's other `unsafe`: the lane's `hold`/`run`/`run_now`
//! (`lane.rs`, whose callers in `lib.rs` promise the held requests' memory; the benchmark
//! harness `benchkit.rs` submits too) and the AVX-512 engines (`cbc16/`, `des16/`: their
//! kernels' intrinsics and the calls into them).

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

/// The cipher of a job (index into `ciphers` in `csrc/mb.c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum CipherKind {
    /// No cipher: a MAC alone.
    Null = 0,
    AesCbc = 1,
    AesCtr = 2,
    /// Three-key 3DES in CBC mode.
    Des3 = 3,
    /// AES-GCM (its GHASH is the job's hash; `hash` is ignored).
    Gcm = 4,
}

/// The MAC of a job (index into `hashes` in `csrc/mb.c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum HashKind {
    Null = 0,
    HmacSha1 = 1,
    HmacSha256 = 2,
    HmacSha384 = 3,
    HmacSha512 = 4,
}

impl HashKind {
    /// The full (untruncated) tag length the job computes.
    pub fn tag_len(self) -> u64 {
        match self {
            HashKind::Null => 0,
            HashKind::HmacSha1 => 20,
            HashKind::HmacSha256 => 32,
            HashKind::HmacSha384 => 48,
            HashKind::HmacSha512 => 64,
        }
    }
}

/// One request as a job (`struct ocf_mb_job`). The cipher reads `src + cipher_off` for
/// `cipher_len` bytes and writes `dst`; the MAC covers `src + hash_off` for `hash_len`
/// bytes; the computed tag (`tag_len` bytes) goes to `tag`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct JobDesc {
    pub src: *const u8,
    pub dst: *mut u8,
    pub cipher_off: u64,
    pub cipher_len: u64,
    pub hash_off: u64,
    pub hash_len: u64,
    pub iv: *const u8,
    pub iv_len: u64,
    pub enc_keys: *const c_void,
    pub dec_keys: *const c_void,
    pub key_len: u64,
    pub ipad: *const u8,
    pub opad: *const u8,
    pub aad: *const u8,
    pub aad_len: u64,
    pub tag: *mut u8,
    pub tag_len: u64,
    pub cipher: CipherKind,
    pub hash: HashKind,
    pub decrypt: u32,
    pub pad: u32,
    pub user: u64,
}

/// A job the manager returned (`struct ocf_mb_done`): its user id and whether it completed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DoneEntry {
    pub user: u64,
    pub ok: u64,
}

/// The longest tag a job computes (HMAC-SHA512): the size of the scratch tags.
pub const MAX_JOB_TAG: usize = 64;

/// An expanded AES key schedule (15 round keys), as IPsec-MB wants it: 16-byte aligned.
#[repr(C, align(16))]
pub struct Schedule(pub [u8; 240]);

impl Drop for Schedule {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

/// Three DES key schedules and the array of pointers to them that a DES3 job takes as
/// its key (both boxed: the pointers stay valid when the value moves).
pub struct Des3Keys {
    schedules: Box<[u64; 48]>,
    ptrs: Box<[*const u64; 3]>,
}

// SAFETY: the pointers point into `schedules`, owned by the same value and never written
// after set-up; sharing or sending the value shares or sends read-only key material.
unsafe impl Send for Des3Keys {}
// SAFETY: as above.
unsafe impl Sync for Des3Keys {}

impl Des3Keys {
    /// What a job's `enc_keys`/`dec_keys` point to.
    pub fn job_keys(&self) -> *const c_void {
        self.ptrs.as_ptr().cast()
    }
}

impl Drop for Des3Keys {
    fn drop(&mut self) {
        self.schedules.zeroize();
    }
}

/// HMAC's precomputed inner and outer states (the digests of one block of key ^ ipad and
/// of key ^ opad), 64 bytes of room each.
#[repr(C, align(16))]
pub struct HmacPads {
    pub ipad: [u8; 64],
    pub opad: [u8; 64],
}

impl Drop for HmacPads {
    fn drop(&mut self) {
        self.ipad.zeroize();
        self.opad.zeroize();
    }
}

/// AES-GCM key data (`struct gcm_key_data`: round keys and GHASH key powers; the C side
/// checks it fits), boxed: 1 KiB.
#[repr(C, align(64))]
pub struct GcmKey(pub [u8; 1024]);

impl Drop for GcmKey {
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
    fn ocf_mb_des3_keys(m: *mut ImbMgr, key: *const u8, ks: *mut u64);
    fn ocf_mb_gcm_key(m: *mut ImbMgr, key: *const u8, key_len: u64, out: *mut c_void) -> i32;
    fn ocf_mb_hmac_pads(
        m: *mut ImbMgr,
        hash: u32,
        key: *const u8,
        key_len: u64,
        ipad: *mut u8,
        opad: *mut u8,
    ) -> i32;
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
    /// A manager for a test; `None` (and a note) where the library is not built in or does
    /// not start, and the test returns; a failure when `OCF_REQUIRE_IPSEC_MB=1`
    /// ([`crate::required::ipsec_mb`]) says it must be there.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Option<Manager> {
        let m = Manager::new();
        if m.is_none() {
            assert!(!crate::required::ipsec_mb(), "OCF_REQUIRE_IPSEC_MB=1, but IPsec-MB is unavailable");
            eprintln!("IPsec-MB is unavailable: nothing to run");
        }
        m
    }

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

    /// The three DES key schedules of a 24-byte 3DES key; `None` for another length (or
    /// without IPsec-MB).
    pub fn des3_keys(&mut self, key: &[u8]) -> Option<Des3Keys> {
        if key.len() != 24 {
            return None;
        }
        #[cfg(ocf_mb)]
        {
            let mut schedules = Box::new([0u64; 48]);
            // SAFETY: the manager is live; `key` has 24 bytes (checked), read 8 per
            // schedule; `schedules` has room for three schedules of 16 words.
            unsafe { ocf_mb_des3_keys(self.0.as_ptr(), key.as_ptr(), schedules.as_mut_ptr()) };
            let base = schedules.as_ptr();
            let ptrs = Box::new([base, base.wrapping_add(16), base.wrapping_add(32)]);
            Some(Des3Keys { schedules, ptrs })
        }
        #[cfg(not(ocf_mb))]
        None
    }

    /// AES-GCM key data for a 16, 24 or 32-byte key; `None` for another length (or
    /// without IPsec-MB).
    pub fn gcm_key(&mut self, key: &[u8]) -> Option<Box<GcmKey>> {
        if !matches!(key.len(), 16 | 24 | 32) {
            return None;
        }
        #[cfg(ocf_mb)]
        {
            let mut out = Box::new(GcmKey([0; 1024]));
            // SAFETY: the manager is live; `key` has the length passed (checked); `out` has
            // the room the C side checks `struct gcm_key_data` fits in, 64-aligned.
            let rc = unsafe {
                ocf_mb_gcm_key(self.0.as_ptr(), key.as_ptr(), key.len() as u64, out.0.as_mut_ptr().cast())
            };
            (rc == 0).then_some(out)
        }
        #[cfg(not(ocf_mb))]
        None
    }

    /// HMAC's precomputed states for `key` (any length) over `hash`; `None` for
    /// [`HashKind::Null`] (or without IPsec-MB).
    pub fn hmac_pads(&mut self, hash: HashKind, key: &[u8]) -> Option<Box<HmacPads>> {
        if hash == HashKind::Null {
            return None;
        }
        #[cfg(ocf_mb)]
        {
            let mut pads = Box::new(HmacPads { ipad: [0; 64], opad: [0; 64] });
            // SAFETY: the manager is live; `key` is read for its length; each pad has the
            // 64 bytes the widest state (SHA-512) takes.
            let rc = unsafe {
                ocf_mb_hmac_pads(
                    self.0.as_ptr(),
                    hash as u32,
                    key.as_ptr(),
                    key.len() as u64,
                    pads.ipad.as_mut_ptr(),
                    pads.opad.as_mut_ptr(),
                )
            };
            (rc == 0).then_some(pads)
        }
        #[cfg(not(ocf_mb))]
        {
            let _ = key;
            None
        }
    }

    /// Submits one job; writes what the manager returned into `out` and returns how many.
    ///
    /// # Safety
    /// Every pointer in `d` must stay valid (and the regions it writes not be used
    /// otherwise) until the job's user id comes back from this or a later
    /// [`Manager::submit`] or [`Manager::flush`]: `src` for the cipher and hash regions,
    /// `dst` for `cipher_len` bytes, `iv` for `iv_len`, `aad` for `aad_len`, `tag` for
    /// `tag_len`, and the key material its kind reads (a [`Schedule`] pair, [`Des3Keys`],
    /// [`GcmKey`], [`HmacPads`]).
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

#[cfg(test)]
mod tests {
    use std::mem::ManuallyDrop;

    use super::*;

    /// Runs `T`'s destructor in place and returns the bytes it left.
    fn bytes_after_drop<T>(value: T) -> Vec<u8> {
        let mut kept = ManuallyDrop::new(value);
        // SAFETY: dropped once, here; its memory stays (ManuallyDrop, on this stack) and is
        // read as plain bytes afterwards: the types tested own no heap memory.
        unsafe {
            ManuallyDrop::drop(&mut kept);
            std::slice::from_raw_parts((&*kept as *const T).cast::<u8>(), size_of::<T>()).to_vec()
        }
    }

    /// AES schedules, HMAC pads and GCM key data are wiped when dropped.
    #[test]
    fn key_material_is_wiped_on_drop() {
        assert!(bytes_after_drop(Schedule([0xa5; 240])).iter().all(|b| *b == 0));
        assert!(bytes_after_drop(HmacPads { ipad: [0x36; 64], opad: [0x5c; 64] }).iter().all(|b| *b == 0));
        assert!(bytes_after_drop(GcmKey([0x77; 1024])).iter().all(|b| *b == 0));
    }

    /// Three distinct DES schedules come from a 24-byte key, none from another length.
    #[test]
    fn des3_schedules_are_made_from_the_key() {
        let Some(mut m) = Manager::for_tests() else { return };
        let key: Vec<u8> = (0..24u8).map(|i| i.wrapping_mul(29) ^ 0x4b).collect();
        let k = m.des3_keys(&key).expect("24 bytes");
        assert!(k.schedules.iter().any(|w| *w != 0));
        assert_ne!(k.schedules[..16], k.schedules[16..32]);
        assert!(m.des3_keys(&key[..16]).is_none());
    }
}
