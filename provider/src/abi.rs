//! The OpenSSL 3 provider ABI, written out from OpenSSL's public headers (`core.h`,
//! `core_dispatch.h`, `core_names.h`) so that building the provider needs no OpenSSL
//! headers. The ABI is C structs of pointers and sizes plus stable function numbers;
//! OpenSSL promises to keep both across 3.x.

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `OSSL_DISPATCH`: one function of a table, by number. A table ends with `{0, NULL}`.
#[repr(C)]
pub struct Dispatch {
    pub function_id: c_int,
    pub function: Option<unsafe extern "C" fn()>,
}

/// `OSSL_ALGORITHM`: an algorithm's names (colon-separated), properties and dispatch
/// table. A table ends with all fields NULL.
#[repr(C)]
pub struct Algorithm {
    pub names: *const c_char,
    pub properties: *const c_char,
    pub implementation: *const Dispatch,
    pub description: *const c_char,
}

// SAFETY: an `Algorithm` only points at 'static, immutable data (string literals and
// static dispatch tables); sharing it between threads shares nothing mutable.
unsafe impl Sync for Algorithm {}
// SAFETY: as for `Algorithm`: a dispatch table is immutable static data.
unsafe impl Sync for Dispatch {}

/// `OSSL_PARAM`: a named, typed value in a caller's buffer. An array ends with a NULL key.
#[repr(C)]
pub struct Param {
    pub key: *const c_char,
    pub data_type: c_uint,
    pub data: *mut c_void,
    pub data_size: usize,
    pub return_size: usize,
}

// SAFETY: as for `Algorithm`: the parameter descriptions the provider hands out
// (gettable/settable lists) are static and never written.
unsafe impl Sync for Param {}

/// `OSSL_PARAM_UNMODIFIED`: `return_size` before anybody set the parameter.
pub const PARAM_UNMODIFIED: usize = usize::MAX;

// OSSL_PARAM data types (core.h).
pub const PARAM_INTEGER: c_uint = 1;
pub const PARAM_UNSIGNED_INTEGER: c_uint = 2;
pub const PARAM_UTF8_STRING: c_uint = 4;
pub const PARAM_OCTET_STRING: c_uint = 5;
pub const PARAM_UTF8_PTR: c_uint = 6;
pub const PARAM_OCTET_PTR: c_uint = 7;

// Functions the core offers the provider (core_dispatch.h).
pub const FUNC_CORE_GET_PARAMS: c_int = 2;
pub const FUNC_CORE_NEW_ERROR: c_int = 5;
pub const FUNC_CORE_VSET_ERROR: c_int = 7;

// Functions the provider offers the core.
pub const FUNC_PROVIDER_TEARDOWN: c_int = 1024;
pub const FUNC_PROVIDER_GETTABLE_PARAMS: c_int = 1025;
pub const FUNC_PROVIDER_GET_PARAMS: c_int = 1026;
pub const FUNC_PROVIDER_QUERY_OPERATION: c_int = 1027;

// Operations.
pub const OP_DIGEST: c_int = 1;
pub const OP_CIPHER: c_int = 2;
pub const OP_MAC: c_int = 3;

// A digest's functions (`OSSL_FUNC_DIGEST_*`).
pub const FUNC_DIGEST_NEWCTX: c_int = 1;
pub const FUNC_DIGEST_INIT: c_int = 2;
pub const FUNC_DIGEST_UPDATE: c_int = 3;
pub const FUNC_DIGEST_FINAL: c_int = 4;
pub const FUNC_DIGEST_FREECTX: c_int = 6;
pub const FUNC_DIGEST_DUPCTX: c_int = 7;
pub const FUNC_DIGEST_GET_PARAMS: c_int = 8;
pub const FUNC_DIGEST_GETTABLE_PARAMS: c_int = 11;

// A cipher's functions (`OSSL_FUNC_CIPHER_*`).
pub const FUNC_CIPHER_NEWCTX: c_int = 1;
pub const FUNC_CIPHER_ENCRYPT_INIT: c_int = 2;
pub const FUNC_CIPHER_DECRYPT_INIT: c_int = 3;
pub const FUNC_CIPHER_UPDATE: c_int = 4;
pub const FUNC_CIPHER_FINAL: c_int = 5;
pub const FUNC_CIPHER_CIPHER: c_int = 6;
pub const FUNC_CIPHER_FREECTX: c_int = 7;
pub const FUNC_CIPHER_DUPCTX: c_int = 8;
pub const FUNC_CIPHER_GET_PARAMS: c_int = 9;
pub const FUNC_CIPHER_GET_CTX_PARAMS: c_int = 10;
pub const FUNC_CIPHER_SET_CTX_PARAMS: c_int = 11;
pub const FUNC_CIPHER_GETTABLE_PARAMS: c_int = 12;
pub const FUNC_CIPHER_GETTABLE_CTX_PARAMS: c_int = 13;
pub const FUNC_CIPHER_SETTABLE_CTX_PARAMS: c_int = 14;

// A MAC's functions (`OSSL_FUNC_MAC_*`).
pub const FUNC_MAC_NEWCTX: c_int = 1;
pub const FUNC_MAC_DUPCTX: c_int = 2;
pub const FUNC_MAC_FREECTX: c_int = 3;
pub const FUNC_MAC_INIT: c_int = 4;
pub const FUNC_MAC_UPDATE: c_int = 5;
pub const FUNC_MAC_FINAL: c_int = 6;
pub const FUNC_MAC_GET_CTX_PARAMS: c_int = 8;
pub const FUNC_MAC_SET_CTX_PARAMS: c_int = 9;
pub const FUNC_MAC_GETTABLE_CTX_PARAMS: c_int = 11;
pub const FUNC_MAC_SETTABLE_CTX_PARAMS: c_int = 12;

// `EVP_CIPH_*_MODE` (evp.h): what a cipher's "mode" parameter says.
pub const CIPH_STREAM_CIPHER: u32 = 0x0;
pub const CIPH_CBC_MODE: u32 = 0x2;
pub const CIPH_CTR_MODE: u32 = 0x5;
pub const CIPH_GCM_MODE: u32 = 0x6;

/// The core's handle for this provider, opaque to us.
pub type CoreHandle = c_void;

/// `OSSL_FUNC_core_get_params`: reads the provider's configuration parameters (its section
/// of openssl.cnf) into `params`.
pub type CoreGetParams = unsafe extern "C" fn(handle: *const CoreHandle, params: *mut Param) -> c_int;

/// A dispatch table entry: function number `$id`, function `$f` of C type `$ty`.
#[macro_export]
macro_rules! entry {
    ($id:expr, $f:expr, $ty:ty) => {{
        // Typed outside the unsafe block, so that only the cast below is unsafe. (A `let`,
        // not a `const` item: tables built in generic const fns name generic functions.)
        let f: $ty = $f;
        $crate::abi::Dispatch {
            function_id: $id,
            // SAFETY: a dispatch table stores every function as `void (*)(void)`; OpenSSL
            // casts it back to the type its number stands for, which `$ty` spells out
            // from core_dispatch.h. Both are plain function pointers of the same size.
            function: Some(unsafe { std::mem::transmute::<$ty, unsafe extern "C" fn()>(f) }),
        }
    }};
}

/// The entry that ends a dispatch table.
pub const END: Dispatch = Dispatch { function_id: 0, function: None };

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// `#define NAME value` lines of an OpenSSL header, numbers only.
    fn defines(header: &str) -> HashMap<String, i64> {
        let path = format!("/usr/include/openssl/{header}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!("{path}: {e} (OpenSSL's headers: libssl-dev, which the workspace needs)")
        });
        let mut out = HashMap::new();
        for line in text.lines() {
            let Some(rest) = line.trim_start().strip_prefix('#') else { continue };
            let Some(rest) = rest.trim_start().strip_prefix("define") else { continue };
            let mut w = rest.split_whitespace();
            if let (Some(name), Some(v)) = (w.next(), w.next()) {
                let v = v.trim_start_matches('(').trim_end_matches(')').trim_end_matches('L');
                let n = match v.strip_prefix("0x") {
                    Some(h) => i64::from_str_radix(h, 16).ok(),
                    None => v.parse().ok(),
                };
                if let Some(n) = n {
                    out.insert(name.to_string(), n);
                }
            }
        }
        out
    }

    /// Every number written out here is the one OpenSSL's own headers give (the ABI is
    /// copied from them, so a typo would misroute a call with no compiler to notice).
    #[test]
    fn the_numbers_are_openssls() {
        let d = defines("core_dispatch.h");
        let core = defines("core.h");
        let evp = defines("evp.h");
        let cases: &[(&HashMap<String, i64>, &str, i64)] = &[
            (&core, "OSSL_PARAM_INTEGER", PARAM_INTEGER.into()),
            (&core, "OSSL_PARAM_UNSIGNED_INTEGER", PARAM_UNSIGNED_INTEGER.into()),
            (&core, "OSSL_PARAM_UTF8_STRING", PARAM_UTF8_STRING.into()),
            (&core, "OSSL_PARAM_OCTET_STRING", PARAM_OCTET_STRING.into()),
            (&core, "OSSL_PARAM_UTF8_PTR", PARAM_UTF8_PTR.into()),
            (&core, "OSSL_PARAM_OCTET_PTR", PARAM_OCTET_PTR.into()),
            (&d, "OSSL_FUNC_CORE_GET_PARAMS", FUNC_CORE_GET_PARAMS.into()),
            (&d, "OSSL_FUNC_CORE_NEW_ERROR", FUNC_CORE_NEW_ERROR.into()),
            (&d, "OSSL_FUNC_CORE_VSET_ERROR", FUNC_CORE_VSET_ERROR.into()),
            (&d, "OSSL_FUNC_PROVIDER_TEARDOWN", FUNC_PROVIDER_TEARDOWN.into()),
            (&d, "OSSL_FUNC_PROVIDER_GETTABLE_PARAMS", FUNC_PROVIDER_GETTABLE_PARAMS.into()),
            (&d, "OSSL_FUNC_PROVIDER_GET_PARAMS", FUNC_PROVIDER_GET_PARAMS.into()),
            (&d, "OSSL_FUNC_PROVIDER_QUERY_OPERATION", FUNC_PROVIDER_QUERY_OPERATION.into()),
            (&d, "OSSL_OP_DIGEST", OP_DIGEST.into()),
            (&d, "OSSL_OP_CIPHER", OP_CIPHER.into()),
            (&d, "OSSL_OP_MAC", OP_MAC.into()),
            (&d, "OSSL_FUNC_DIGEST_NEWCTX", FUNC_DIGEST_NEWCTX.into()),
            (&d, "OSSL_FUNC_DIGEST_INIT", FUNC_DIGEST_INIT.into()),
            (&d, "OSSL_FUNC_DIGEST_UPDATE", FUNC_DIGEST_UPDATE.into()),
            (&d, "OSSL_FUNC_DIGEST_FINAL", FUNC_DIGEST_FINAL.into()),
            (&d, "OSSL_FUNC_DIGEST_FREECTX", FUNC_DIGEST_FREECTX.into()),
            (&d, "OSSL_FUNC_DIGEST_DUPCTX", FUNC_DIGEST_DUPCTX.into()),
            (&d, "OSSL_FUNC_DIGEST_GET_PARAMS", FUNC_DIGEST_GET_PARAMS.into()),
            (&d, "OSSL_FUNC_DIGEST_GETTABLE_PARAMS", FUNC_DIGEST_GETTABLE_PARAMS.into()),
            (&d, "OSSL_FUNC_CIPHER_NEWCTX", FUNC_CIPHER_NEWCTX.into()),
            (&d, "OSSL_FUNC_CIPHER_ENCRYPT_INIT", FUNC_CIPHER_ENCRYPT_INIT.into()),
            (&d, "OSSL_FUNC_CIPHER_DECRYPT_INIT", FUNC_CIPHER_DECRYPT_INIT.into()),
            (&d, "OSSL_FUNC_CIPHER_UPDATE", FUNC_CIPHER_UPDATE.into()),
            (&d, "OSSL_FUNC_CIPHER_FINAL", FUNC_CIPHER_FINAL.into()),
            (&d, "OSSL_FUNC_CIPHER_CIPHER", FUNC_CIPHER_CIPHER.into()),
            (&d, "OSSL_FUNC_CIPHER_FREECTX", FUNC_CIPHER_FREECTX.into()),
            (&d, "OSSL_FUNC_CIPHER_DUPCTX", FUNC_CIPHER_DUPCTX.into()),
            (&d, "OSSL_FUNC_CIPHER_GET_PARAMS", FUNC_CIPHER_GET_PARAMS.into()),
            (&d, "OSSL_FUNC_CIPHER_GET_CTX_PARAMS", FUNC_CIPHER_GET_CTX_PARAMS.into()),
            (&d, "OSSL_FUNC_CIPHER_SET_CTX_PARAMS", FUNC_CIPHER_SET_CTX_PARAMS.into()),
            (&d, "OSSL_FUNC_CIPHER_GETTABLE_PARAMS", FUNC_CIPHER_GETTABLE_PARAMS.into()),
            (&d, "OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS", FUNC_CIPHER_GETTABLE_CTX_PARAMS.into()),
            (&d, "OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS", FUNC_CIPHER_SETTABLE_CTX_PARAMS.into()),
            (&d, "OSSL_FUNC_MAC_NEWCTX", FUNC_MAC_NEWCTX.into()),
            (&d, "OSSL_FUNC_MAC_DUPCTX", FUNC_MAC_DUPCTX.into()),
            (&d, "OSSL_FUNC_MAC_FREECTX", FUNC_MAC_FREECTX.into()),
            (&d, "OSSL_FUNC_MAC_INIT", FUNC_MAC_INIT.into()),
            (&d, "OSSL_FUNC_MAC_UPDATE", FUNC_MAC_UPDATE.into()),
            (&d, "OSSL_FUNC_MAC_FINAL", FUNC_MAC_FINAL.into()),
            (&d, "OSSL_FUNC_MAC_GET_CTX_PARAMS", FUNC_MAC_GET_CTX_PARAMS.into()),
            (&d, "OSSL_FUNC_MAC_SET_CTX_PARAMS", FUNC_MAC_SET_CTX_PARAMS.into()),
            (&d, "OSSL_FUNC_MAC_GETTABLE_CTX_PARAMS", FUNC_MAC_GETTABLE_CTX_PARAMS.into()),
            (&d, "OSSL_FUNC_MAC_SETTABLE_CTX_PARAMS", FUNC_MAC_SETTABLE_CTX_PARAMS.into()),
            (&evp, "EVP_CIPH_STREAM_CIPHER", CIPH_STREAM_CIPHER.into()),
            (&evp, "EVP_CIPH_CBC_MODE", CIPH_CBC_MODE.into()),
            (&evp, "EVP_CIPH_CTR_MODE", CIPH_CTR_MODE.into()),
            (&evp, "EVP_CIPH_GCM_MODE", CIPH_GCM_MODE.into()),
        ];
        for (defs, name, ours) in cases {
            assert_eq!(defs.get(*name), Some(ours), "{name}");
        }
    }
}
