//! Reusable libcrypto digest and HMAC contexts, for the algorithms where OpenSSL's
//! assembly wins: SHA-384, SHA-512 and MD5, and HMAC over them.
//!
//! Measured here (MB/s, 1 KiB / 8 KiB): SHA-512 688 / 809 (libcrypto, context reused,
//! algorithm fetched once) vs 497 / 568 (RustCrypto); MD5 660 / 737 vs 582 / 624;
//! HMAC-SHA512 577 / 785 vs 429 / 539; HMAC-MD5 611 / 732 vs 543 / 617. Below the
//! thresholds in [`min_len`] the libraries tie or RustCrypto wins. SHA-1 and SHA-256 stay
//! with RustCrypto (SHA-NI), which is as fast or faster at every size.
//!
//! Digests use the `openssl` crate's `MdCtx` (safe, and as fast as raw calls). HMAC needs
//! raw `HMAC_CTX` calls: the crate offers no reusable keyed HMAC, and its `Signer` costs
//! ~4 µs per message. Like the ChaCha20-Poly1305 contexts, these serve one message at a
//! time behind a `try_lock`; a thread that finds a context busy uses RustCrypto.
//!
//! This module is the libcrypto layer only: it names libcrypto's algorithms ([`EvpMd`]) and
//! knows nothing of the driver's own `Hash`; `digest` decides which of its hashes come here.

use std::os::raw::c_uint;
use std::ptr;
use std::sync::OnceLock;

use foreign_types::ForeignTypeRef;
use ocf::Error;
use openssl::cipher::Cipher;
use openssl::lib_ctx::{LibCtx, LibCtxRef};
use openssl::md::{Md, MdRef};
use openssl::md_ctx::MdCtx;
use openssl::provider::Provider;
use openssl_sys as ffi;

/// The driver's own libcrypto library context, with only OpenSSL's default provider
/// loaded, from which every algorithm the driver uses is fetched.
///
/// Never the application's context: inside an OpenSSL process that loaded ocf's own
/// provider (`openssl … -provider ocf`), fetching "SHA2-512" from the default context
/// could return ocf's SHA-512, which would come back here — a loop. A private context also
/// keeps the application's openssl.cnf (property queries, FIPS mode) from changing what
/// this driver runs. `None` if libcrypto cannot make one; callers fall back to RustCrypto or
/// aws-lc.
pub fn lib_ctx() -> Option<&'static LibCtxRef> {
    static CTX: OnceLock<Option<(LibCtx, Provider)>> = OnceLock::new();
    let (ctx, _default) = CTX
        .get_or_init(|| {
            let ctx = LibCtx::new().ok()?;
            let default = Provider::load(Some(&ctx), "default").ok()?;
            Some((ctx, default))
        })
        .as_ref()?;
    Some(ctx)
}

/// libcrypto's ChaCha20-Poly1305, fetched once from the driver's context.
pub fn chacha20_poly1305() -> Option<&'static Cipher> {
    static CIPHER: OnceLock<Option<Cipher>> = OnceLock::new();
    CIPHER.get_or_init(|| Cipher::fetch(Some(lib_ctx()?), "ChaCha20-Poly1305", None).ok()).as_ref()
}

/// The digests this module runs through libcrypto (the ones where its assembly wins).
#[derive(Clone, Copy, Debug)]
pub enum EvpMd {
    Sha384,
    Sha512,
    Md5,
}

/// A libcrypto digest, fetched once from the driver's context.
fn fetched_md(md: EvpMd) -> Option<&'static MdRef> {
    static MDS: [OnceLock<Option<Md>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let (slot, name) = match md {
        EvpMd::Sha384 => (0, "SHA2-384"),
        EvpMd::Sha512 => (1, "SHA2-512"),
        EvpMd::Md5 => (2, "MD5"),
    };
    MDS[slot].get_or_init(|| Md::fetch(Some(lib_ctx()?), name, None).ok()).as_deref()
}

/// The smallest message for which libcrypto is used (from the measured size sweeps:
/// SHA-384/512 tie up to 64 B and win from 128 B; MD5 and HMAC lose or tie up to 128 B
/// and win from 256 B).
pub fn min_len(md: EvpMd, hmac: bool) -> usize {
    match (md, hmac) {
        (EvpMd::Sha384 | EvpMd::Sha512, false) => 128,
        _ => 256,
    }
}

/// A digest context with its fetched algorithm.
pub struct EvpDigest {
    ctx: MdCtx,
    md: &'static MdRef,
}

impl EvpDigest {
    /// `None` when libcrypto cannot provide the digest.
    pub fn new(md: EvpMd) -> Option<Result<EvpDigest, Error>> {
        let md = fetched_md(md)?;
        let fail = |_| Error::DriverFailure("soft: libcrypto digest setup failed");
        Some(MdCtx::new().map(|ctx| EvpDigest { ctx, md }).map_err(fail))
    }

    /// Digest of `data` into `out` (at least the digest length).
    pub fn digest(&mut self, data: &[u8], out: &mut [u8]) -> Result<(), Error> {
        let fail = |_| Error::DriverFailure("soft: libcrypto digest failed");
        self.ctx.digest_init(self.md).map_err(fail)?;
        self.ctx.digest_update(data).map_err(fail)?;
        self.ctx.digest_final(out).map(|_| ()).map_err(fail)
    }
}

/// An HMAC context keyed once; each message restarts it from the absorbed pads.
pub struct EvpHmac {
    ctx: *mut ffi::HMAC_CTX,
}

// SAFETY: an `HMAC_CTX` belongs to no thread (libcrypto keeps no thread-local state in it);
// this value owns its context alone (made in `new`, freed once in `Drop`, never shared or
// handed out), and every use goes through `&mut self`, so moving it to another thread
// cannot race. Not `Sync`: the driver shares it behind a `Mutex`.
unsafe impl Send for EvpHmac {}

impl EvpHmac {
    /// `None` when libcrypto cannot provide the digest.
    pub fn new(md: EvpMd, key: &[u8]) -> Option<Result<EvpHmac, Error>> {
        // A digest fetched from the driver's own context (see `lib_ctx`): HMAC_Init_ex
        // then runs it without an implicit fetch from the application's context.
        let md = fetched_md(md)?.as_ptr();
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
