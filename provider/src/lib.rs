//! `ocf` as an OpenSSL 3 provider: unmodified `openssl` and applications reach ocf's
//! drivers through it, as users of FreeBSD's and OpenBSD's crypto framework reached
//! cryptodev through OpenSSL's engine (on a SheevaPlug, on FreeBSD 9.2). Engines are gone
//! from OpenSSL 4; providers are how OpenSSL reaches other implementations now.
//!
//! OpenSSL loads `ocf.so` (`openssl … -provider-path DIR -provider ocf`, or from an
//! openssl.cnf) and calls [`OSSL_provider_init`], which builds an ocf [`Framework`] with
//! its drivers and answers the core's queries from it. The ABI is written out in [`abi`]
//! from OpenSSL's public headers, so building needs none.
//!
//! Which drivers serve the provider's sessions ([`settings`]): the `driver` parameter of the
//! provider's openssl.cnf section, else the `OCF_DRIVER` environment variable (the `openssl`
//! command line has no way to pass provider parameters), pins every session to one driver;
//! `sim:<profile>` registers a simulated card first (`sim:bcm5822`). Without it, ocf chooses
//! among every registered driver with its policy (`policy` / `OCF_POLICY`; the provider's
//! sessions are multi-part, and ocf routes each message as a whole);
//! `drivers` / `OCF_DRIVERS` registers simulated cards beside `soft` for that. A driver or
//! policy that cannot be had stops the provider from loading, with the reason on stderr.
//!
//! Statistics: with `stats = PATH` in that section, or `OCF_STATS=PATH` (`-` for stderr),
//! the provider appends ocf's counters, what routing did and the per-stage profile to PATH
//! when OpenSSL unloads it ([`stats`]).
//!
//! What it offers ([`cipher`], [`digest`]): AES-128/192/256 in CBC, CTR and GCM,
//! ChaCha20-Poly1305, 3DES-CBC; SHA-1, SHA-256, SHA-384, SHA-512, MD5; HMAC. Every
//! operation is an ocf session and requests on it (OpenSSL's update calls become the parts
//! of a multi-part message, [`part`]), so driver choice, statistics and profiling apply.
//! The algorithms carry the property `provider=ocf`: with both providers loaded, pick ocf
//! with `-propquery provider=ocf`.
//!
//! Every function OpenSSL calls goes through [`boundary`]: raw pointers become slices and
//! references there, once, and a panic becomes an error on OpenSSL's error queue and the
//! callback's failure value instead of aborting the host application.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Mutex, OnceLock};

use ocf::{DigestAlg, Framework, Session, SessionParams};

pub mod abi;
pub mod boundary;
pub mod cipher;
pub mod digest;
pub mod params;
pub mod part;
pub mod settings;
pub mod stats;
pub mod tls;

use abi::{CoreGetParams, CoreHandle, Dispatch, Param};
use settings::Settings;

/// The property string of every algorithm here.
pub const PROPERTIES: &CStr = c"provider=ocf";

/// The entry that ends an algorithm table.
pub const ALGORITHM_END: abi::Algorithm = abi::Algorithm {
    names: std::ptr::null(),
    properties: std::ptr::null(),
    implementation: std::ptr::null(),
    description: std::ptr::null(),
};

/// The provider's context: what every operation reaches through `provctx`.
pub struct Provider {
    pub framework: Framework,
    /// The driver every session goes to; `None`: ocf routes each request.
    pub driver: Option<String>,
    /// One shared multi-part session per digest (see [`digest`]).
    digest_sessions: [OnceLock<Session>; 5],
    /// How to put an error on OpenSSL's error queue (absent in unit tests).
    errors: Option<CoreErrors>,
    /// Where the statistics go when OpenSSL unloads the provider (see [`stats`]).
    pub stats_to: Option<String>,
}

/// The core's error functions and this provider's handle.
#[derive(Clone, Copy)]
struct CoreErrors {
    handle: *const CoreHandle,
    new_error: unsafe extern "C" fn(*const CoreHandle),
    vset_error: unsafe extern "C" fn(*const CoreHandle, u32, *const c_char, *mut c_void),
}

// SAFETY: the core handle and functions are OpenSSL's, valid for the provider's lifetime
// and callable from any thread (OpenSSL's error queue is per thread).
unsafe impl Send for CoreErrors {}
// SAFETY: as above; nothing here is mutated after init.
unsafe impl Sync for CoreErrors {}

/// The error functions of the provider loaded last and not yet torn down: where the few
/// callbacks that get neither a provider nor a context (an algorithm's `get_params`)
/// report a panic.
static LOADED: Mutex<Option<CoreErrors>> = Mutex::new(None);

impl CoreErrors {
    /// Puts `why` on OpenSSL's error queue (what `openssl` prints when a call fails).
    fn raise(&self, why: &str) {
        // The message is the format string: '%' doubled so that no conversion reads the
        // (empty) argument list.
        let Ok(fmt) = std::ffi::CString::new(why.replace('%', "%%")) else { return };
        // A `va_list` that no conversion reads. On x86-64 it is a pointer to a register save
        // descriptor; elsewhere the message is printed to stderr instead.
        #[cfg(target_arch = "x86_64")]
        {
            let mut unused = [0u64; 3];
            // SAFETY: the handle and functions came from the core at init and stay valid
            // until teardown; `fmt` is a valid C string with no conversions, so the
            // argument list is never read.
            unsafe {
                (self.new_error)(self.handle);
                (self.vset_error)(self.handle, 1, fmt.as_ptr(), unused.as_mut_ptr() as *mut c_void);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // SAFETY: as above.
            unsafe { (self.new_error)(self.handle) };
            eprintln!("ocf provider: {}", fmt.to_string_lossy());
        }
    }
}

/// Puts `why` on OpenSSL's error queue through the provider loaded last (see [`LOADED`]);
/// for callbacks that have no provider at hand.
pub fn raise_loaded(why: &str) {
    let errors = *LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = errors {
        e.raise(why);
    }
}

impl Provider {
    /// The framework the settings describe: ocf's CPU driver, the simulated cards they
    /// name, their policy, and the driver sessions are pinned to, if any.
    pub fn new(settings: &Settings) -> Result<Provider, String> {
        let (framework, driver) = settings.framework()?;
        Ok(Provider {
            framework,
            driver,
            digest_sessions: Default::default(),
            errors: None,
            stats_to: settings.stats.clone(),
        })
    }

    /// A session on the configured driver, or on ocf's best for `params`.
    pub fn new_session(&self, params: &SessionParams) -> Result<Session, ocf::Error> {
        match &self.driver {
            Some(d) => self.framework.new_session_on(d, params),
            None => self.framework.new_session(params),
        }
    }

    /// The shared multi-part session of a digest, opened on first use.
    pub fn digest_session(&self, alg: DigestAlg) -> Result<Session, ocf::Error> {
        let slot = &self.digest_sessions[DigestAlg::ALL.iter().position(|d| *d == alg).unwrap_or(0)];
        if let Some(s) = slot.get() {
            return Ok(s.clone());
        }
        let s = self.new_session(&SessionParams::digest(alg).multipart())?;
        Ok(slot.get_or_init(|| s).clone())
    }

    /// Puts `why` on OpenSSL's error queue (what `openssl` prints when a call fails).
    pub fn error(&self, why: &str) {
        if let Some(e) = &self.errors {
            e.raise(why);
        }
    }
}

/// The provider's entry point, called by OpenSSL when it loads `ocf.so`.
///
/// # Safety
/// OpenSSL calls it with its core handle, the core's dispatch table (terminated by a zero
/// function id), and two out-pointers it owns.
#[no_mangle]
pub unsafe extern "C" fn OSSL_provider_init(
    handle: *const CoreHandle,
    core: *const Dispatch,
    out: *mut *const Dispatch,
    provctx: *mut *mut c_void,
) -> c_int {
    boundary::install_panic_hook();
    // SAFETY: OpenSSL passes its terminated dispatch table and its handle.
    let errors = unsafe { core_errors(handle, core) };
    let raise = |why: &str| {
        if let Some(e) = &errors {
            e.raise(why)
        }
    };
    boundary::guard("provider_init", params::FAIL, raise, || {
        if out.is_null() || provctx.is_null() {
            return params::FAIL;
        }
        // SAFETY: as above.
        let settings = Settings::find(|key| unsafe { configured(handle, core, key) });
        let mut provider = match Provider::new(&settings) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("ocf provider: {e}");
                return params::FAIL;
            }
        };
        provider.errors = errors;
        if errors.is_some() {
            *LOADED.lock().unwrap_or_else(|e| e.into_inner()) = errors;
        }
        // SAFETY: both out-pointers were checked non-NULL; OpenSSL owns what they point at.
        unsafe {
            *provctx = Box::into_raw(Box::new(provider)) as *mut c_void;
            *out = PROVIDER_DISPATCH.as_ptr();
        }
        params::OK
    })
}

/// The core's error functions, if it offers them.
///
/// # Safety
/// As for [`configured`].
unsafe fn core_errors(handle: *const CoreHandle, core: *const Dispatch) -> Option<CoreErrors> {
    type NewError = unsafe extern "C" fn(*const CoreHandle);
    type VsetError = unsafe extern "C" fn(*const CoreHandle, u32, *const c_char, *mut c_void);
    // SAFETY: as the caller promises.
    let new_error = unsafe { core_function(core, abi::FUNC_CORE_NEW_ERROR)? };
    // SAFETY: as the caller promises.
    let vset_error = unsafe { core_function(core, abi::FUNC_CORE_VSET_ERROR)? };
    // SAFETY: the numbers stand for these types (core_dispatch.h: OSSL_FUNC_core_new_error,
    // OSSL_FUNC_core_vset_error).
    unsafe {
        Some(CoreErrors {
            handle,
            new_error: std::mem::transmute::<unsafe extern "C" fn(), NewError>(new_error),
            vset_error: std::mem::transmute::<unsafe extern "C" fn(), VsetError>(vset_error),
        })
    }
}

/// The core's function number `id`, if its table has it.
///
/// # Safety
/// `core` is NULL or OpenSSL's terminated dispatch table.
unsafe fn core_function(core: *const Dispatch, id: c_int) -> Option<unsafe extern "C" fn()> {
    let mut d = core;
    // SAFETY: the table is terminated by a zero function id.
    unsafe {
        while !d.is_null() && (*d).function_id != 0 {
            if (*d).function_id == id {
                return (*d).function;
            }
            d = d.add(1);
        }
    }
    None
}

/// A parameter (`driver`, `stats`) of the provider's configuration section, if set.
///
/// # Safety
/// `core` is NULL or OpenSSL's terminated dispatch table; `handle` is the core's handle.
unsafe fn configured(handle: *const CoreHandle, core: *const Dispatch, key: &'static CStr) -> Option<String> {
    // SAFETY: as the caller promises; the number stands for this type (core_dispatch.h:
    // OSSL_FUNC_core_get_params).
    let get_params = unsafe {
        std::mem::transmute::<unsafe extern "C" fn(), CoreGetParams>(core_function(
            core,
            abi::FUNC_CORE_GET_PARAMS,
        )?)
    };
    let mut value: *const std::ffi::c_char = std::ptr::null();
    let mut request = [
        params::slot(
            key,
            abi::PARAM_UTF8_PTR,
            &mut value as *mut _ as *mut c_void,
            std::mem::size_of::<*const std::ffi::c_char>(),
        ),
        params::END,
    ];
    // SAFETY: a terminated parameter array whose one slot is a `const char *`.
    if unsafe { get_params(handle, request.as_mut_ptr()) } == 0
        || request[0].return_size == abi::PARAM_UNMODIFIED
    {
        return None;
    }
    params::get_utf8(&request[0])
}

static PROVIDER_DISPATCH: [Dispatch; 5] = [
    entry!(abi::FUNC_PROVIDER_TEARDOWN, teardown, unsafe extern "C" fn(*mut c_void)),
    entry!(
        abi::FUNC_PROVIDER_GETTABLE_PARAMS,
        gettable_params,
        unsafe extern "C" fn(*mut c_void) -> *const Param
    ),
    entry!(abi::FUNC_PROVIDER_GET_PARAMS, get_params, unsafe extern "C" fn(*mut c_void, *mut Param) -> c_int),
    entry!(
        abi::FUNC_PROVIDER_QUERY_OPERATION,
        query_operation,
        unsafe extern "C" fn(*mut c_void, c_int, *mut c_int) -> *const abi::Algorithm
    ),
    abi::END,
];

/// Frees the provider's context (its framework, drivers and sessions), after writing its
/// statistics where `stats` / `OCF_STATS` asked.
///
/// # Safety
/// OpenSSL calls it once, with the provider context `OSSL_provider_init` made, after
/// freeing every algorithm context made from it.
unsafe extern "C" fn teardown(provctx: *mut c_void) {
    if provctx.is_null() {
        return;
    }
    // SAFETY: `provctx` is the box OSSL_provider_init made; OpenSSL calls teardown once.
    let provider = unsafe { Box::from_raw(provctx as *mut Provider) };
    let errors = provider.errors;
    let raise = |why: &str| {
        if let Some(e) = &errors {
            e.raise(why)
        }
    };
    boundary::guard("provider_teardown", (), raise, || {
        if let Some(to) = &provider.stats_to {
            if let Err(e) = stats::write(&provider.framework, to) {
                eprintln!("ocf provider: statistics to {to}: {e}");
            }
        }
        drop(provider);
    });
    // This provider's handle is gone with it: nothing may raise errors through it now.
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if loaded.is_some_and(|l| errors.is_some_and(|e| std::ptr::eq(l.handle, e.handle))) {
        *loaded = None;
    }
}

static GETTABLE: [Param; 5] = [
    params::describe(c"name", abi::PARAM_UTF8_PTR),
    params::describe(c"version", abi::PARAM_UTF8_PTR),
    params::describe(c"buildinfo", abi::PARAM_UTF8_PTR),
    params::describe(c"status", abi::PARAM_INTEGER),
    params::END,
];

/// The provider's parameters (a static list).
///
/// # Safety
/// Nothing to promise: the provider context is not read.
unsafe extern "C" fn gettable_params(_provctx: *mut c_void) -> *const Param {
    boundary::static_list("provider_gettable_params", &GETTABLE)
}

const NAME: &CStr = c"ocf";
const VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
    Ok(s) => s,
    Err(_) => panic!("the package version has no NUL"),
};
const BUILDINFO: &CStr = c"ocf provider: ocf sessions over the soft and sim drivers";

/// The provider's name, version, build information and status.
///
/// # Safety
/// OpenSSL passes NULL or a parameter array ending with a NULL key, its values' buffers
/// as their sizes say.
unsafe extern "C" fn get_params(_provctx: *mut c_void, ps: *mut Param) -> c_int {
    boundary::guard("provider_get_params", params::FAIL, raise_loaded, || {
        // SAFETY: as OpenSSL promises.
        let mut ps = unsafe { params::Params::from_raw(ps) };
        for (key, value) in [(c"name", NAME), (c"version", VERSION), (c"buildinfo", BUILDINFO)] {
            if let Some(p) = ps.find(key) {
                if !params::set_utf8(p, value) {
                    return params::FAIL;
                }
            }
        }
        if let Some(p) = ps.find(c"status") {
            if !params::set_int(p, 1) {
                return params::FAIL;
            }
        }
        params::OK
    })
}

/// The algorithms of an operation: ciphers, digests, MACs.
///
/// # Safety
/// OpenSSL passes NULL or a writable `int` for `no_cache`.
unsafe extern "C" fn query_operation(
    _provctx: *mut c_void,
    operation: c_int,
    no_cache: *mut c_int,
) -> *const abi::Algorithm {
    boundary::guard("provider_query_operation", std::ptr::null(), raise_loaded, || {
        // SAFETY: as OpenSSL promises.
        if let Some(no_cache) = unsafe { no_cache.as_mut() } {
            *no_cache = 0;
        }
        match operation {
            abi::OP_CIPHER => cipher::ALGORITHMS.as_ptr(),
            abi::OP_DIGEST => digest::ALGORITHMS.as_ptr(),
            abi::OP_MAC => digest::MAC_ALGORITHMS.as_ptr(),
            _ => std::ptr::null(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinned_to(driver: &str) -> Settings {
        Settings { driver: Some(driver.to_owned()), ..Settings::default() }
    }

    #[test]
    fn a_driver_that_is_not_there_is_refused_with_the_registered_ones() {
        let e = Provider::new(&pinned_to("nosuch")).err().expect("an unknown driver is refused");
        assert!(e.contains("'nosuch' is not registered") && e.contains("soft"), "{e}");
        let e = Provider::new(&pinned_to("sim:nosuchcard")).err().expect("an unknown card is refused");
        assert!(e.contains("sim:nosuchcard"), "{e}");
    }

    #[test]
    fn a_simulated_card_is_registered_and_chosen() {
        let p = Provider::new(&pinned_to("sim:bcm5822")).expect("bcm5822 is a known profile");
        assert_eq!(p.driver.as_deref(), Some("sim:bcm5822"));
        assert!(p.framework.drivers().iter().any(|d| d.name == "sim:bcm5822"));
        assert_eq!(Provider::new(&Settings::default()).expect("defaults").driver, None);
    }

    #[test]
    fn parameters_are_written_only_into_slots_that_fit() {
        let mut ptr: *const std::ffi::c_char = std::ptr::null();
        // Size 0, as OpenSSL's own callers make pointer slots.
        let mut p = params::slot(c"name", abi::PARAM_UTF8_PTR, &mut ptr as *mut _ as *mut c_void, 0);
        assert!(params::set_utf8(&mut p, NAME));
        assert_eq!(p.return_size, 3);
        // SAFETY: set_utf8 stored a pointer to NAME.
        assert_eq!(unsafe { CStr::from_ptr(ptr) }, NAME);
        let mut small = [0u8; 3];
        let mut s =
            params::slot(c"name", abi::PARAM_UTF8_STRING, small.as_mut_ptr() as *mut c_void, small.len());
        assert!(!params::set_utf8(&mut s, NAME), "no room for the NUL");
        let mut v: i32 = 0;
        let mut i = params::slot(c"status", abi::PARAM_INTEGER, &mut v as *mut i32 as *mut c_void, 4);
        assert!(params::set_int(&mut i, 1) && v == 1);
        assert!(!params::set_int(&mut i, 1 << 40), "too big for 4 bytes");
    }
}
