//! Reading and writing OpenSSL parameter arrays (`OSSL_PARAM`), as `params.c` in OpenSSL
//! does: a value is written only if the caller's slot has the right type and room, and
//! `return_size` says how much was (or would have been) written.

use std::ffi::{c_char, c_int, CStr};
use std::marker::PhantomData;

use crate::abi::{self, Param};

/// A caller's parameter array (NULL, or `OSSL_PARAM`s ending with a NULL key), taken once
/// at the boundary: the code behind it reads and writes parameters with no raw pointers.
pub struct Params<'a> {
    ptr: *mut Param,
    _array: PhantomData<&'a mut [Param]>,
}

impl<'a> Params<'a> {
    /// # Safety
    /// `ptr` is NULL or points at an array of valid `OSSL_PARAM`s ending with a NULL key
    /// (each key a NUL-terminated string, each `data` as its type and size say), which
    /// nothing else touches for `'a`.
    pub unsafe fn from_raw(ptr: *mut Param) -> Params<'a> {
        Params { ptr, _array: PhantomData }
    }

    /// The parameter named `key`, if any. Keys are compared byte by byte up to the first
    /// difference (never past a key's NUL): OpenSSL asks for parameters on every
    /// operation, and a strlen per key showed in profiles.
    pub fn find(&mut self, key: &CStr) -> Option<&mut Param> {
        self.iter_mut().find(|p| is(p, key))
    }

    /// The parameters in order: one pass over a caller's array instead of a [`find`]
    /// per known key (OpenSSL reads and writes a cipher context's parameters several
    /// times per message).
    ///
    /// [`find`]: Params::find
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Param> + '_ {
        let mut p = self.ptr;
        std::iter::from_fn(move || {
            // SAFETY: as `from_raw`'s caller promised: every element up to the terminator
            // is valid, and the iterator stops at the terminator. Each element is handed
            // out once, borrowed from `self`.
            unsafe {
                if p.is_null() || (*p).key.is_null() {
                    return None;
                }
                let this = &mut *p;
                p = p.add(1);
                Some(this)
            }
        })
    }
}

/// Whether the parameter's key is `key` (compared up to the first difference, never past
/// the key's NUL).
pub fn is(p: &Param, key: &CStr) -> bool {
    let want = key.to_bytes_with_nul();
    let k = p.key as *const u8;
    // SAFETY: a parameter's key is a NUL-terminated string (OpenSSL's arrays, and `each`
    // yields no terminator); the loop stops at the first byte that differs, and `want` ends
    // with NUL, so it never reads past the key's NUL.
    unsafe {
        let mut i = 0;
        while i < want.len() {
            if *k.add(i) != want[i] {
                return false;
            }
            i += 1;
        }
    }
    true
}

/// Writes a static string: as a pointer (UTF8_PTR) or copied with its NUL (UTF8_STRING).
/// False if the slot has another type or too little room.
pub fn set_utf8(p: &mut Param, s: &'static CStr) -> bool {
    let len = s.to_bytes().len();
    p.return_size = len;
    match p.data_type {
        abi::PARAM_UTF8_PTR => {
            if p.data.is_null() {
                return true; // a size query
            }
            // `data_size` is not checked: OpenSSL's own callers build pointer slots with a
            // size of 0 (`OSSL_PARAM_construct_utf8_ptr(key, &p, 0)`, as `openssl list`
            // does), and OpenSSL's setter ignores it too.
            // SAFETY: the slot's type says it is a `const char *`.
            unsafe { *(p.data as *mut *const c_char) = s.as_ptr() };
            true
        }
        abi::PARAM_UTF8_STRING => {
            if p.data.is_null() {
                return true;
            }
            if p.data_size < len + 1 {
                return false;
            }
            // SAFETY: the caller's buffer holds `data_size` bytes, at least `len + 1`.
            unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), p.data as *mut c_char, len + 1) };
            true
        }
        _ => false,
    }
}

/// Writes an integer into a signed or unsigned slot of 4 or 8 bytes. False if it does not
/// fit the slot.
pub fn set_int(p: &mut Param, v: i64) -> bool {
    let size = p.data_size;
    let ok = match (p.data_type, size) {
        (abi::PARAM_INTEGER, 4) => i32::try_from(v).is_ok(),
        (abi::PARAM_INTEGER, 8) => true,
        (abi::PARAM_UNSIGNED_INTEGER, 4) => u32::try_from(v).is_ok(),
        (abi::PARAM_UNSIGNED_INTEGER, 8) => v >= 0,
        _ => false,
    };
    if !ok {
        return false;
    }
    p.return_size = size;
    if p.data.is_null() {
        return true;
    }
    // SAFETY: the slot is an integer of `size` bytes (4 or 8, checked above); the caller's
    // buffer may be unaligned, so the bytes are written as they are.
    unsafe {
        if size == 4 {
            std::ptr::write_unaligned(p.data as *mut i32, v as i32);
        } else {
            std::ptr::write_unaligned(p.data as *mut i64, v);
        }
    }
    true
}

/// Reads a string parameter (UTF8_PTR or UTF8_STRING) as Rust text.
pub fn get_utf8(p: &Param) -> Option<String> {
    if p.data.is_null() {
        return None;
    }
    let bytes = match p.data_type {
        // SAFETY: a UTF8_PTR slot holds a pointer to `return_size` (or NUL-terminated) bytes;
        // the core filled it.
        abi::PARAM_UTF8_PTR => unsafe {
            let s = *(p.data as *const *const c_char);
            if s.is_null() {
                return None;
            }
            CStr::from_ptr(s).to_bytes().to_vec()
        },
        // SAFETY: a UTF8_STRING slot holds `data_size` bytes, the string NUL-terminated
        // within them or filling them.
        abi::PARAM_UTF8_STRING => unsafe {
            let b = std::slice::from_raw_parts(p.data as *const u8, p.data_size);
            b.split(|&c| c == 0).next().unwrap_or(&[]).to_vec()
        },
        _ => return None,
    };
    String::from_utf8(bytes).ok()
}

/// A slot for a value to be read or written: `data_size` bytes at `data` (OpenSSL's
/// `OSSL_PARAM_construct_*`), not yet set.
pub fn slot(
    key: &'static CStr,
    data_type: std::ffi::c_uint,
    data: *mut std::ffi::c_void,
    data_size: usize,
) -> Param {
    Param { key: key.as_ptr(), data_type, data, data_size, return_size: abi::PARAM_UNMODIFIED }
}

/// A parameter description for a gettable/settable list.
pub const fn describe(key: &'static CStr, data_type: std::ffi::c_uint) -> Param {
    Param { key: key.as_ptr(), data_type, data: std::ptr::null_mut(), data_size: 0, return_size: 0 }
}

/// The entry that ends a parameter list.
pub const END: Param =
    Param { key: std::ptr::null(), data_type: 0, data: std::ptr::null_mut(), data_size: 0, return_size: 0 };

/// OpenSSL's success and failure.
pub const OK: c_int = 1;
pub const FAIL: c_int = 0;

/// Writes bytes into an OCTET_STRING slot. False if the slot has another type or too little
/// room (a NULL `data` is a size query: only `return_size` is set).
pub fn set_octets(p: &mut Param, v: &[u8]) -> bool {
    if p.data_type != abi::PARAM_OCTET_STRING {
        return false;
    }
    p.return_size = v.len();
    if p.data.is_null() {
        return true;
    }
    if p.data_size < v.len() {
        return false;
    }
    // SAFETY: the caller's buffer holds `data_size` bytes, at least `v.len()`.
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p.data as *mut u8, v.len()) };
    true
}

/// Points an OCTET_PTR slot at `v` (which must outlive the caller's use of it: libssl
/// reads the TLS MAC from the cipher context right after the update that produced it).
/// False if the slot has another type.
pub fn set_octet_ptr(p: &mut Param, v: &[u8]) -> bool {
    if p.data_type != abi::PARAM_OCTET_PTR {
        return false;
    }
    p.return_size = v.len();
    if p.data.is_null() {
        return true;
    }
    // SAFETY: the slot's type says `data` is a `const void *` to write.
    unsafe { *(p.data as *mut *const u8) = v.as_ptr() };
    true
}

/// Reads an integer slot (signed or unsigned, 4 or 8 bytes) as a non-negative number.
pub fn get_uint(p: &Param) -> Option<u64> {
    if p.data.is_null() {
        return None;
    }
    // SAFETY: the slot's type and size say what `data` holds; it may be unaligned.
    unsafe {
        match (p.data_type, p.data_size) {
            (abi::PARAM_UNSIGNED_INTEGER, 4) => {
                Some(u64::from(std::ptr::read_unaligned(p.data as *const u32)))
            }
            (abi::PARAM_UNSIGNED_INTEGER, 8) => Some(std::ptr::read_unaligned(p.data as *const u64)),
            (abi::PARAM_INTEGER, 4) => u64::try_from(std::ptr::read_unaligned(p.data as *const i32)).ok(),
            (abi::PARAM_INTEGER, 8) => u64::try_from(std::ptr::read_unaligned(p.data as *const i64)).ok(),
            _ => None,
        }
    }
}

/// The bytes of an OCTET_STRING slot (`None` for another type or a NULL buffer).
///
/// # Safety
/// `p.data` points at `p.data_size` readable bytes that outlive the returned slice.
pub unsafe fn get_octets<'a>(p: &Param) -> Option<&'a [u8]> {
    if p.data_type != abi::PARAM_OCTET_STRING || p.data.is_null() {
        return None;
    }
    // SAFETY: as the caller promises.
    Some(unsafe { std::slice::from_raw_parts(p.data as *const u8, p.data_size) })
}
