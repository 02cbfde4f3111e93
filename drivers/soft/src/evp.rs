//! Reusable libcrypto digest and HMAC contexts, for the algorithms where OpenSSL's
//! assembly wins: SHA-384, SHA-512 and MD5, and HMAC over them.
//!
//! Measured here at 8 KiB (MB/s): SHA-512 802 (libcrypto, context reused) vs 559
//! (RustCrypto); MD5 741 vs 627; HMAC-SHA512 826 vs 545; HMAC-MD5 729 vs 624. The win
//! needs a context that is set up once — fetched algorithm, HMAC pads absorbed — and raw
//! EVP/HMAC calls; the `openssl` crate's per-message objects lose it. SHA-1 and SHA-256
//! stay with RustCrypto (SHA-NI), which is as fast or faster at every size.
//!
//! Like the ChaCha20-Poly1305 contexts, these serve one message at a time behind a
//! `try_lock`; a thread that finds a context busy uses RustCrypto for that message.

use std::ffi::CStr;
use std::os::raw::c_uint;
use std::ptr;

use ocf::Error;
use openssl_sys as ffi;

use crate::digest::Hash;

/// The libcrypto name of a digest this module accelerates.
fn evp_name(hash: Hash) -> Option<&'static CStr> {
    match hash {
        Hash::Sha384 => Some(c"SHA2-384"),
        Hash::Sha512 => Some(c"SHA2-512"),
        Hash::Md5 => Some(c"MD5"),
        Hash::Sha1 | Hash::Sha256 => None,
    }
}

/// The smallest message for which libcrypto is worth it. MD5 and HMAC-MD5 lose to
/// RustCrypto at 16 B (123 vs 102 MB/s, 61 vs 58) and win from 1 KiB; the SHA-512 family
/// wins or ties at every size.
pub fn min_len(hash: Hash) -> usize {
    match hash {
        Hash::Md5 => 512,
        _ => 0,
    }
}

/// A digest context with its fetched algorithm.
pub struct EvpDigest {
    ctx: *mut ffi::EVP_MD_CTX,
    md: *mut ffi::EVP_MD,
}

// SAFETY: libcrypto contexts have no thread affinity; `&mut self` methods (behind a Mutex)
// make sure one thread at a time uses one.
unsafe impl Send for EvpDigest {}

impl EvpDigest {
    /// `None` for digests this module does not accelerate.
    pub fn new(hash: Hash) -> Option<Result<EvpDigest, Error>> {
        let name = evp_name(hash)?;
        ffi::init();
        // SAFETY: EVP_MD_fetch and EVP_MD_CTX_new return owned objects or null; both are
        // checked, and `Drop` frees whatever was allocated.
        Some(unsafe {
            let this = EvpDigest {
                ctx: ffi::EVP_MD_CTX_new(),
                md: ffi::EVP_MD_fetch(ptr::null_mut(), name.as_ptr(), ptr::null()),
            };
            if this.ctx.is_null() || this.md.is_null() {
                Err(Error::DriverFailure("soft: libcrypto digest setup failed"))
            } else {
                Ok(this)
            }
        })
    }

    /// Digest of the concatenation of `pieces` into `out` (at least the digest length).
    pub fn digest<'a>(
        &mut self,
        pieces: impl IntoIterator<Item = &'a [u8]>,
        out: &mut [u8],
    ) -> Result<(), Error> {
        let fail = Error::DriverFailure("soft: libcrypto digest failed");
        let mut full = [0u8; ffi::EVP_MAX_MD_SIZE as usize];
        let mut n: c_uint = 0;
        // SAFETY: the context and algorithm are live and owned. Each update reads exactly
        // the piece's bytes. Final writes at most EVP_MAX_MD_SIZE bytes into `full`.
        unsafe {
            if ffi::EVP_DigestInit_ex(self.ctx, self.md, ptr::null_mut()) != 1 {
                return Err(fail);
            }
            for p in pieces {
                if ffi::EVP_DigestUpdate(self.ctx, p.as_ptr().cast(), p.len()) != 1 {
                    return Err(fail);
                }
            }
            if ffi::EVP_DigestFinal_ex(self.ctx, full.as_mut_ptr(), &mut n) != 1 {
                return Err(fail);
            }
        }
        let n = (n as usize).min(out.len());
        out[..n].copy_from_slice(&full[..n]);
        Ok(())
    }
}

impl Drop for EvpDigest {
    fn drop(&mut self) {
        // SAFETY: owned objects, freed once; the free functions accept null.
        unsafe {
            ffi::EVP_MD_CTX_free(self.ctx);
            ffi::EVP_MD_free(self.md);
        }
    }
}

/// An HMAC context keyed once; each message restarts it from the absorbed pads.
pub struct EvpHmac {
    ctx: *mut ffi::HMAC_CTX,
}

// SAFETY: as for EvpDigest.
unsafe impl Send for EvpHmac {}

impl EvpHmac {
    /// `None` for digests this module does not accelerate.
    pub fn new(hash: Hash, key: &[u8]) -> Option<Result<EvpHmac, Error>> {
        // SAFETY: these return pointers into libcrypto's static digest table.
        let md = unsafe {
            match hash {
                Hash::Sha384 => ffi::EVP_sha384(),
                Hash::Sha512 => ffi::EVP_sha512(),
                Hash::Md5 => ffi::EVP_md5(),
                Hash::Sha1 | Hash::Sha256 => return None,
            }
        };
        ffi::init();
        let fail = Error::DriverFailure("soft: libcrypto HMAC setup failed");
        let Ok(key_len) = key.len().try_into() else { return Some(Err(fail)) };
        // SAFETY: HMAC_CTX_new returns an owned context or null (checked; `Drop` frees it).
        // HMAC_Init_ex copies `key_len` bytes of the key and absorbs the pads.
        Some(unsafe {
            let this = EvpHmac { ctx: ffi::HMAC_CTX_new() };
            if this.ctx.is_null()
                || ffi::HMAC_Init_ex(this.ctx, key.as_ptr().cast(), key_len, md, ptr::null_mut()) != 1
            {
                Err(fail)
            } else {
                Ok(this)
            }
        })
    }

    /// MAC of the concatenation of `pieces`, truncated to `out.len()`.
    pub fn compute<'a>(
        &mut self,
        pieces: impl IntoIterator<Item = &'a [u8]>,
        out: &mut [u8],
    ) -> Result<(), Error> {
        let fail = Error::DriverFailure("soft: libcrypto HMAC failed");
        let mut full = [0u8; ffi::EVP_MAX_MD_SIZE as usize];
        let mut n: c_uint = 0;
        // SAFETY: the context is live and keyed. HMAC_Init_ex with a null key and digest
        // restarts from the stored pads (the documented way to reuse a key). Updates read
        // exactly each piece; Final writes at most EVP_MAX_MD_SIZE bytes into `full`.
        unsafe {
            if ffi::HMAC_Init_ex(self.ctx, ptr::null(), 0, ptr::null(), ptr::null_mut()) != 1 {
                return Err(fail);
            }
            for p in pieces {
                if ffi::HMAC_Update(self.ctx, p.as_ptr(), p.len()) != 1 {
                    return Err(fail);
                }
            }
            if ffi::HMAC_Final(self.ctx, full.as_mut_ptr(), &mut n) != 1 {
                return Err(fail);
            }
        }
        let len = out.len().min(n as usize);
        out[..len].copy_from_slice(&full[..len]);
        Ok(())
    }
}

impl Drop for EvpHmac {
    fn drop(&mut self) {
        // SAFETY: owned, freed once; HMAC_CTX_free cleanses the key material.
        unsafe { ffi::HMAC_CTX_free(self.ctx) }
    }
}
