//! The cipher table as OpenSSL reads it: every cipher the provider offers ([`CIPHERS`]:
//! OpenSSL's names, key and IV lengths, block size, `EVP_CIPH_*_MODE`), and per cipher a
//! dispatch table of `extern "C"` functions (numbered by `abi`'s `FUNC_CIPHER_*`), each of
//! which takes OpenSSL's pointers apart once (`boundary`) and calls the context
//! (`super::CipherCtx`).
//!
//! ```text
//!  OpenSSL ─ OSSL_FUNC_CIPHER_* ─▶ newctx / init / update / final / … ─▶ CipherCtx
//!  query_operation ─▶ ALGORITHMS[i] = CIPHERS[i]'s names + table::<i>()
//! ```

use std::ffi::{c_int, c_void, CStr};

use ocf::CipherAlg;

use crate::abi::{self, Algorithm, Dispatch, Param};
use crate::boundary::{self, given, slice_mut_or_empty, Io};
use crate::entry;
use crate::params::{self, Params, FAIL, OK};

use super::{CipherCtx, CipherInfo};

const CBC: u32 = abi::CIPH_CBC_MODE;
const CTR: u32 = abi::CIPH_CTR_MODE;
const GCM: u32 = abi::CIPH_GCM_MODE;
const STREAM: u32 = abi::CIPH_STREAM_CIPHER;

const fn info(
    names: &'static CStr,
    alg: CipherAlg,
    key_len: usize,
    iv_len: usize,
    block: usize,
    mode: u32,
) -> CipherInfo {
    CipherInfo { names, alg, key_len, iv_len, block, mode }
}

/// Every cipher the provider offers, in the order of [`ALGORITHMS`].
pub static CIPHERS: [CipherInfo; 11] = [
    info(c"AES-128-CBC:AES128:2.16.840.1.101.3.4.1.2", CipherAlg::AesCbc, 16, 16, 16, CBC),
    info(c"AES-192-CBC:AES192:2.16.840.1.101.3.4.1.22", CipherAlg::AesCbc, 24, 16, 16, CBC),
    info(c"AES-256-CBC:AES256:2.16.840.1.101.3.4.1.42", CipherAlg::AesCbc, 32, 16, 16, CBC),
    info(c"AES-128-CTR", CipherAlg::AesCtr, 16, 16, 1, CTR),
    info(c"AES-192-CTR", CipherAlg::AesCtr, 24, 16, 1, CTR),
    info(c"AES-256-CTR", CipherAlg::AesCtr, 32, 16, 1, CTR),
    info(c"AES-128-GCM:id-aes128-GCM:2.16.840.1.101.3.4.1.6", CipherAlg::AesGcm, 16, 12, 1, GCM),
    info(c"AES-192-GCM:id-aes192-GCM:2.16.840.1.101.3.4.1.26", CipherAlg::AesGcm, 24, 12, 1, GCM),
    info(c"AES-256-GCM:id-aes256-GCM:2.16.840.1.101.3.4.1.46", CipherAlg::AesGcm, 32, 12, 1, GCM),
    info(c"ChaCha20-Poly1305", CipherAlg::ChaCha20Poly1305, 32, 12, 1, STREAM),
    info(c"DES-EDE3-CBC:DES3:1.2.840.113549.3.7", CipherAlg::TdesCbc, 24, 8, 8, CBC),
];

// ---- The dispatch functions: each takes OpenSSL's pointers apart once (see `boundary`),
// under `with_ctx` (a panic is an error, not an abort). Each algorithm's table differs only
// in `newctx` and `get_params`, which know the algorithm (their index into CIPHERS).
//
// What OpenSSL promises every one of them (provider-base(7), provider-cipher(7)): `ctx` is
// a context this table's `newctx` or `dupctx` made and not yet freed, used by one thread
// at a time; a key or IV is NULL or its length in bytes; `in` is NULL or `inl` readable
// bytes; `out` is NULL or `outsize` writable bytes; `outl` is NULL or a writable size_t;
// a parameter array is NULL or ends with a NULL key.

/// # Safety
/// `provctx` is the provider context `OSSL_provider_init` made.
unsafe extern "C" fn newctx<const I: usize>(provctx: *mut c_void) -> *mut c_void {
    // SAFETY: as OpenSSL promises.
    unsafe { boundary::new_ctx("cipher_newctx", provctx, |p| Some(CipherCtx::new(p, &CIPHERS[I]))) }
}

/// `encrypt_init` (`ENCRYPT` true) and `decrypt_init`.
///
/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn init<const ENCRYPT: bool>(
    ctx: *mut c_void,
    key: *const u8,
    keylen: usize,
    iv: *const u8,
    ivlen: usize,
    ps: *const Param,
) -> c_int {
    let what = if ENCRYPT { "cipher_encrypt_init" } else { "cipher_decrypt_init" };
    // SAFETY: as OpenSSL promises; the key, IV and parameters are only read.
    unsafe {
        boundary::with_ctx(what, ctx, FAIL, |c: &mut CipherCtx| {
            let (key, iv) = (given(key, keylen), given(iv, ivlen));
            c.init(ENCRYPT, key, iv, Params::from_raw(ps as *mut Param)) as c_int
        })
    }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn update(
    ctx: *mut c_void,
    out: *mut u8,
    outl: *mut usize,
    outsize: usize,
    input: *const u8,
    inl: usize,
) -> c_int {
    // SAFETY: as OpenSSL promises: the buffers are valid for this call, and nothing else
    // touches them meanwhile.
    unsafe {
        boundary::with_ctx("cipher_update", ctx, FAIL, |c: &mut CipherCtx| {
            let io = match Io::from_raw(out, outsize, input, inl) {
                Ok(io) => io,
                Err(e) => return c.refuse(e),
            };
            match c.update(io) {
                Some(n) => {
                    boundary::put(outl, n);
                    OK
                }
                None => FAIL,
            }
        })
    }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn finalize(ctx: *mut c_void, out: *mut u8, outl: *mut usize, outsize: usize) -> c_int {
    // SAFETY: as OpenSSL promises.
    unsafe {
        boundary::with_ctx("cipher_final", ctx, FAIL, |c: &mut CipherCtx| {
            match c.finish(slice_mut_or_empty(out, outsize)) {
                Some(n) => {
                    boundary::put(outl, n);
                    OK
                }
                None => FAIL,
            }
        })
    }
}

/// `EVP_Cipher`: for block modes, whole blocks with no padding logic; for the others, an
/// update (or, with no input, a final) — as OpenSSL's own ciphers do.
///
/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn cipher(
    ctx: *mut c_void,
    out: *mut u8,
    outl: *mut usize,
    outsize: usize,
    input: *const u8,
    inl: usize,
) -> c_int {
    if input.is_null() {
        // SAFETY: as OpenSSL promises.
        return unsafe { finalize(ctx, out, outl, outsize) };
    }
    // SAFETY: as OpenSSL promises: the buffers are valid for this call, and nothing else
    // touches them meanwhile.
    unsafe {
        boundary::with_ctx("cipher_cipher", ctx, FAIL, |c: &mut CipherCtx| {
            let io = match Io::from_raw(out, outsize, input, inl) {
                Ok(io) => io,
                Err(e) => return c.refuse(e),
            };
            let n = if c.info.padded() {
                if inl % c.info.block != 0 {
                    return c.fail("EVP_Cipher: whole blocks into a large enough buffer") as c_int;
                }
                // As in `CipherCtx::update`: the input moved into the output, then
                // transformed there.
                let Some(out) = c.output(io, inl, 0) else { return FAIL };
                if !c.part(&mut out[..inl], false) {
                    return FAIL;
                }
                inl
            } else {
                match c.update(io) {
                    Some(n) => n,
                    None => return FAIL,
                }
            };
            boundary::put(outl, n);
            OK
        })
    }
}

/// # Safety
/// `ctx` is NULL or a context of this table; OpenSSL frees each once.
unsafe extern "C" fn freectx(ctx: *mut c_void) {
    // SAFETY: as OpenSSL promises.
    unsafe { boundary::free_ctx::<CipherCtx>("cipher_freectx", ctx) }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn dupctx(ctx: *mut c_void) -> *mut c_void {
    // SAFETY: as OpenSSL promises.
    unsafe { boundary::dup_ctx("cipher_dupctx", ctx, CipherCtx::dup) }
}

/// The algorithm's fixed parameters.
///
/// # Safety
/// `ps` is NULL or a parameter array ending with a NULL key.
unsafe extern "C" fn get_params<const I: usize>(ps: *mut Param) -> c_int {
    boundary::guard("cipher_get_params", FAIL, crate::raise_loaded, || {
        // SAFETY: as OpenSSL promises.
        let mut ps = unsafe { Params::from_raw(ps) };
        let info = &CIPHERS[I];
        for (key, v) in [
            (c"mode", i64::from(info.mode)),
            (c"keylen", info.key_len as i64),
            (c"ivlen", info.iv_len as i64),
            (c"blocksize", info.block as i64),
            (c"aead", i64::from(info.aead())),
            (c"custom-iv", i64::from(info.aead())),
            (c"cts", 0),
            (c"tls-multi", 0),
            (c"has-randkey", 0),
        ] {
            if let Some(p) = ps.find(key) {
                if !params::set_int(p, v) {
                    return FAIL;
                }
            }
        }
        OK
    })
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn get_ctx_params(ctx: *mut c_void, ps: *mut Param) -> c_int {
    // SAFETY: as OpenSSL promises.
    unsafe {
        boundary::with_ctx("cipher_get_ctx_params", ctx, FAIL, |c: &mut CipherCtx| {
            c.get_params(Params::from_raw(ps)) as c_int
        })
    }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn set_ctx_params(ctx: *mut c_void, ps: *const Param) -> c_int {
    // SAFETY: as OpenSSL promises; the provider only reads the array's values.
    unsafe {
        boundary::with_ctx("cipher_set_ctx_params", ctx, FAIL, |c: &mut CipherCtx| {
            c.set_params(Params::from_raw(ps as *mut Param)) as c_int
        })
    }
}

static GETTABLE: [Param; 10] = [
    params::describe(c"mode", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"keylen", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"ivlen", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"blocksize", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"aead", abi::PARAM_INTEGER),
    params::describe(c"custom-iv", abi::PARAM_INTEGER),
    params::describe(c"cts", abi::PARAM_INTEGER),
    params::describe(c"tls-multi", abi::PARAM_INTEGER),
    params::describe(c"has-randkey", abi::PARAM_INTEGER),
    params::END,
];

static GETTABLE_CTX: [Param; 10] = [
    params::describe(c"tlsaadpad", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"tls-mac", abi::PARAM_OCTET_PTR),
    params::describe(c"keylen", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"ivlen", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"padding", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"num", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"iv", abi::PARAM_OCTET_STRING),
    params::describe(c"updated-iv", abi::PARAM_OCTET_STRING),
    params::describe(c"tag", abi::PARAM_OCTET_STRING),
    params::END,
];

static SETTABLE_CTX: [Param; 9] = [
    params::describe(c"padding", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"keylen", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"ivlen", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"tag", abi::PARAM_OCTET_STRING),
    params::describe(c"tlsaad", abi::PARAM_OCTET_STRING),
    params::describe(c"tlsivfixed", abi::PARAM_OCTET_STRING),
    params::describe(c"tls-version", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"tls-mac-size", abi::PARAM_UNSIGNED_INTEGER),
    params::END,
];

/// The parameter lists: static, nothing read from OpenSSL's arguments (safe functions,
/// guarded all the same).
extern "C" fn gettable_params(_provctx: *mut c_void) -> *const Param {
    boundary::static_list("cipher_gettable_params", &GETTABLE)
}

/// A static list: nothing read from OpenSSL's arguments.
extern "C" fn gettable_ctx_params(_ctx: *mut c_void, _provctx: *mut c_void) -> *const Param {
    boundary::static_list("cipher_gettable_ctx_params", &GETTABLE_CTX)
}

/// A static list: nothing read from OpenSSL's arguments.
extern "C" fn settable_ctx_params(_ctx: *mut c_void, _provctx: *mut c_void) -> *const Param {
    boundary::static_list("cipher_settable_ctx_params", &SETTABLE_CTX)
}

type InitFn = unsafe extern "C" fn(*mut c_void, *const u8, usize, *const u8, usize, *const Param) -> c_int;
type UpdateFn = unsafe extern "C" fn(*mut c_void, *mut u8, *mut usize, usize, *const u8, usize) -> c_int;
type FinalFn = unsafe extern "C" fn(*mut c_void, *mut u8, *mut usize, usize) -> c_int;
type CtxParamsFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> *const Param;

/// The dispatch table of the cipher at `CIPHERS[I]`.
const fn table<const I: usize>() -> [Dispatch; 15] {
    [
        entry!(abi::FUNC_CIPHER_NEWCTX, newctx::<I>, unsafe extern "C" fn(*mut c_void) -> *mut c_void),
        entry!(abi::FUNC_CIPHER_ENCRYPT_INIT, init::<true>, InitFn),
        entry!(abi::FUNC_CIPHER_DECRYPT_INIT, init::<false>, InitFn),
        entry!(abi::FUNC_CIPHER_UPDATE, update, UpdateFn),
        entry!(abi::FUNC_CIPHER_FINAL, finalize, FinalFn),
        entry!(abi::FUNC_CIPHER_CIPHER, cipher, UpdateFn),
        entry!(abi::FUNC_CIPHER_FREECTX, freectx, unsafe extern "C" fn(*mut c_void)),
        entry!(abi::FUNC_CIPHER_DUPCTX, dupctx, unsafe extern "C" fn(*mut c_void) -> *mut c_void),
        entry!(abi::FUNC_CIPHER_GET_PARAMS, get_params::<I>, unsafe extern "C" fn(*mut Param) -> c_int),
        entry!(
            abi::FUNC_CIPHER_GET_CTX_PARAMS,
            get_ctx_params,
            unsafe extern "C" fn(*mut c_void, *mut Param) -> c_int
        ),
        entry!(
            abi::FUNC_CIPHER_SET_CTX_PARAMS,
            set_ctx_params,
            unsafe extern "C" fn(*mut c_void, *const Param) -> c_int
        ),
        entry!(
            abi::FUNC_CIPHER_GETTABLE_PARAMS,
            gettable_params,
            unsafe extern "C" fn(*mut c_void) -> *const Param
        ),
        entry!(abi::FUNC_CIPHER_GETTABLE_CTX_PARAMS, gettable_ctx_params, CtxParamsFn),
        entry!(abi::FUNC_CIPHER_SETTABLE_CTX_PARAMS, settable_ctx_params, CtxParamsFn),
        abi::END,
    ]
}

static T0: [Dispatch; 15] = table::<0>();
static T1: [Dispatch; 15] = table::<1>();
static T2: [Dispatch; 15] = table::<2>();
static T3: [Dispatch; 15] = table::<3>();
static T4: [Dispatch; 15] = table::<4>();
static T5: [Dispatch; 15] = table::<5>();
static T6: [Dispatch; 15] = table::<6>();
static T7: [Dispatch; 15] = table::<7>();
static T8: [Dispatch; 15] = table::<8>();
static T9: [Dispatch; 15] = table::<9>();
static T10: [Dispatch; 15] = table::<10>();

const fn alg(i: usize, table: &'static [Dispatch; 15]) -> Algorithm {
    Algorithm {
        names: CIPHERS[i].names.as_ptr(),
        properties: crate::PROPERTIES.as_ptr(),
        implementation: table.as_ptr(),
        description: std::ptr::null(),
    }
}

/// The cipher algorithms, as `query_operation` hands them to OpenSSL.
pub static ALGORITHMS: [Algorithm; 12] = [
    alg(0, &T0),
    alg(1, &T1),
    alg(2, &T2),
    alg(3, &T3),
    alg(4, &T4),
    alg(5, &T5),
    alg(6, &T6),
    alg(7, &T7),
    alg(8, &T8),
    alg(9, &T9),
    alg(10, &T10),
    crate::ALGORITHM_END,
];
