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
