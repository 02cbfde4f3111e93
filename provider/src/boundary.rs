//! The boundary between OpenSSL and the provider: every function OpenSSL calls goes
//! through here, written once.
//!
//! ```text
//!  OpenSSL (C)                 boundary (this module)                    safe Rust
//!  ───────────                 ──────────────────────                    ─────────
//!  cipher_update(ctx, out, …) ─▶ with_ctx: ctx pointer → &mut CipherCtx ─▶ CipherCtx::update(Io)
//!                                 raw buffers → Io (null, length and
//!                                 overlap checked, the error named)
//!                                 catch_unwind ──panic──▶ error on OpenSSL's queue,
//!                                                         the callback's failure value,
//!                                                         the context marked failed
//! ```
//!
//! Why: a Rust panic that reaches an `extern "C"` function aborts the process, and the
//! process is the host application (`openssl`, a TLS server), not ours. So every callback
//! runs its body under [`guard`] (or [`with_ctx`] when it has a context), which turns a
//! panic into what a C caller understands: an error on OpenSSL's error queue (through the
//! core's `new_error`/`vset_error`, as every other provider error) and the callback's
//! failure return (0, NULL, or nothing for `freectx`). On the path that does not panic,
//! `catch_unwind` is a landing pad, not a check, but it costs each callback a stack frame
//! of its own (no tail call into the code behind it); with the boundary's checks (NULL,
//! lengths, overlap, a failed context) that measured 100 instructions per AES-128-GCM
//! message in `openssl speed`'s loop (callgrind, the provider's callbacks: 3548 -> 3647
//! at 16 bytes, 22040 -> 22142 at 8 KiB). The failure paths are kept out of line. This
//! needs the provider to unwind (a `panic = "abort"` build is refused at compile time
//! below).
//!
//! A panic can leave a context half updated (a partial block kept, the message state half
//! advanced), so the context is marked failed: every later call on it returns an error
//! saying so, until OpenSSL frees it. Other contexts, and the provider, carry on.
//!
//! The panic message: a hook ([`install_panic_hook`], at provider init) keeps the message
//! and its location for the error queue instead of printing it. The host's stderr is the
//! host's; OpenSSL callers read the error queue (`openssl` prints it). Panics on ocf's own
//! threads (named `ocf-…`: dispatch and return workers, the simulated card), where no
//! boundary catches them, and every panic when `RUST_BACKTRACE` is set, still go to the
//! default hook's stderr message. The hook is this library's own: `ocf.so` carries its own
//! copy of Rust's standard library, so a Rust host's hook is untouched.
//!
//! Testing (debug builds only, so `cargo test` has it and release builds do not): with
//! `OCF_PROVIDER_PANIC=<callback>` in the environment, the first call of that callback in
//! the process panics inside its boundary (and says so on stderr, so that a test knows the
//! callback was reached). The names are OpenSSL's for the dispatch functions without the
//! `OSSL_FUNC_` prefix (`cipher_update`, `digest_final`, `mac_init`,
//! `provider_get_params`, ...), and `provider_init` for `OSSL_provider_init`. Debug builds
//! rather than a cargo feature: the tests load the cdylib that `cargo test` builds with the
//! package's own features, and a package cannot turn a feature on for its own tests only.

use std::any::Any;
use std::cell::RefCell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::Provider;

#[cfg(panic = "abort")]
compile_error!(
    "the ocf provider must be built with panic = \"unwind\": its callbacks catch panics so \
     that the host application gets an error instead of an abort"
);

/// Runs one callback's `body`; a panic becomes `fail`, with the panic on OpenSSL's error
/// queue through `raise`. (Inlined into each callback, the failure paths kept out of line:
/// the path that does not panic stays a few instructions.)
#[inline(always)]
pub fn guard<R>(what: &'static str, fail: R, raise: impl FnOnce(&str), body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(|| {
        inject(what);
        body()
    })) {
        Ok(r) => r,
        Err(payload) => {
            raise(&panic_message(what, payload));
            fail
        }
    }
}

/// A `gettable`/`settable` callback's answer: the static `list`, guarded like every other
/// callback (nothing can panic but the injected test panic, which gives NULL).
#[inline(always)]
pub fn static_list(what: &'static str, list: &'static [crate::abi::Param]) -> *const crate::abi::Param {
    guard(what, std::ptr::null(), crate::raise_loaded, || list.as_ptr())
}

/// A context OpenSSL holds for the provider (a cipher, digest or MAC context).
pub trait Context {
    /// The provider that made it, where its errors go.
    fn provider(&self) -> &Provider;
}

/// What OpenSSL's context pointer points at: the context, and whether a panic left it
/// unusable.
pub struct Held<C> {
    ctx: C,
    failed: bool,
}

/// A new context (`newctx`) from `make`, boxed for OpenSSL; NULL if `provctx` is NULL,
/// `make` fails (it raised the error) or panics.
///
/// # Safety
/// `provctx` is NULL or the provider context `OSSL_provider_init` made.
pub unsafe fn new_ctx<C>(
    what: &'static str,
    provctx: *mut c_void,
    make: impl FnOnce(&Provider) -> Option<C>,
) -> *mut c_void {
    // SAFETY: as the caller promises; OpenSSL frees the provider context (teardown) only
    // after every algorithm context made from it.
    let Some(provider) = (unsafe { (provctx as *const Provider).as_ref() }) else {
        return std::ptr::null_mut();
    };
    guard(
        what,
        std::ptr::null_mut(),
        |why| provider.error(why),
        || match make(provider) {
            Some(ctx) => Box::into_raw(Box::new(Held { ctx, failed: false })) as *mut c_void,
            None => std::ptr::null_mut(),
        },
    )
}

/// Runs `body` on the context behind OpenSSL's pointer. `fail` if the pointer is NULL, the
/// context failed before, or `body` panics (then the context is marked failed).
///
/// # Safety
/// `ctx` is NULL or a context [`new_ctx`] or [`dup_ctx`] made for this `C`, not yet freed,
/// and not in use by another call (OpenSSL never uses one context from two threads at
/// once).
#[inline(always)]
pub unsafe fn with_ctx<C: Context, R>(
    what: &'static str,
    ctx: *mut c_void,
    fail: R,
    body: impl FnOnce(&mut C) -> R,
) -> R {
    let ptr = ctx as *mut Held<C>;
    // SAFETY: as the caller promises.
    let Some(held) = (unsafe { ptr.as_mut() }) else { return fail };
    if held.failed {
        failed_before(held.ctx.provider(), what);
        return fail;
    }
    // SAFETY: `raise` runs after `body` has returned (unwound), when nothing else borrows
    // the context.
    let raise = |why: &str| unsafe { poison(&mut *ptr, why) };
    guard(what, fail, raise, || body(&mut held.ctx))
}

/// Marks a context failed after a panic in one of its calls, and says so.
#[cold]
#[inline(never)]
fn poison<C: Context>(held: &mut Held<C>, why: &str) {
    held.failed = true;
    held.ctx.provider().error(&format!("{why}; this context is no longer usable"));
}

/// The error for a call on a context that failed before.
#[cold]
#[inline(never)]
fn failed_before(provider: &Provider, what: &str) {
    provider.error(&format!(
        "ocf: {what}: this context failed earlier (an internal error in ocf); free it and make a new one"
    ));
}

/// Copies a context (`dupctx`) with `dup`; NULL if it failed before, `dup` fails (it raised
/// the error) or panics.
///
/// # Safety
/// As for [`with_ctx`].
pub unsafe fn dup_ctx<C: Context>(
    what: &'static str,
    ctx: *mut c_void,
    dup: impl FnOnce(&C) -> Option<C>,
) -> *mut c_void {
    // SAFETY: as the caller promises.
    unsafe {
        with_ctx(what, ctx, std::ptr::null_mut(), |c: &mut C| match dup(c) {
            Some(copy) => Box::into_raw(Box::new(Held { ctx: copy, failed: false })) as *mut c_void,
            None => std::ptr::null_mut(),
        })
    }
}

/// Frees a context (`freectx`). A panic while dropping it is caught (what was not dropped
/// leaks); `freectx` returns nothing, so it is only reported.
///
/// # Safety
/// `ctx` is NULL or a context [`new_ctx`] or [`dup_ctx`] made for this `C`; OpenSSL frees
/// each once.
pub unsafe fn free_ctx<C: Context>(what: &'static str, ctx: *mut c_void) {
    if ctx.is_null() {
        return;
    }
    // SAFETY: made by `Box::into_raw` in new_ctx or dup_ctx; OpenSSL frees it once.
    let held = unsafe { Box::from_raw(ctx as *mut Held<C>) };
    // The provider outlives its contexts (see new_ctx): its address stays good after the
    // context is gone.
    let provider: *const Provider = held.ctx.provider();
    guard(
        what,
        (),
        // SAFETY: as above.
        |why| unsafe { &*provider }.error(why),
        || drop(held),
    );
}

/// An update's buffers (`out`, `outsize`, `in`, `inl` of a cipher's update), taken once at
/// the boundary so that the cipher code works on slices. In-place updates (`in == out`,
/// which OpenSSL allows and `openssl speed` and TLS use) stay zero-copy: one `&mut`
/// buffer holds the input, since Rust cannot hold `&[u8]` and `&mut [u8]` to the same
/// bytes.
pub enum Io<'a> {
    /// No output buffer (`out` NULL): the input is only read (AEAD associated data).
    NoOutput(&'a [u8]),
    /// `in == out`: the `outsize` bytes at `out`, the first `inl` of them the input.
    InPlace { buf: &'a mut [u8], inl: usize },
    /// Separate buffers: the input, and the output's `outsize` bytes, not overlapping.
    Separate { input: &'a [u8], out: &'a mut [u8] },
}

/// Why an update's buffers were refused at the boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoError {
    /// The input pointer is NULL with a length above zero.
    NullInput { inl: usize },
    /// In place, with less room than input.
    InPlaceTooSmall { inl: usize, outsize: usize },
    /// Input and output overlap without being the same buffer (EVP_EncryptUpdate(3):
    /// "in and out may not partially overlap").
    PartialOverlap,
}

impl std::fmt::Display for IoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IoError::NullInput { inl } => write!(f, "the input is NULL with a length of {inl} bytes"),
            IoError::InPlaceTooSmall { inl, outsize } => {
                write!(f, "an in-place update of {inl} bytes into a buffer of {outsize}")
            }
            IoError::PartialOverlap => {
                f.write_str("input and output overlap without being the same buffer (not allowed)")
            }
        }
    }
}

impl<'a> Io<'a> {
    /// # Safety
    /// `input` is NULL or points at `inl` readable bytes; `out` is NULL or points at
    /// `outsize` writable bytes; both stay valid, and are touched by nothing else, for `'a`
    /// (OpenSSL's contract for a cipher's update).
    #[inline]
    pub unsafe fn from_raw(
        out: *mut u8,
        outsize: usize,
        input: *const u8,
        inl: usize,
    ) -> Result<Io<'a>, IoError> {
        if input.is_null() && inl > 0 {
            return Err(IoError::NullInput { inl });
        }
        // SAFETY: `input` points at `inl` readable bytes (or none are read).
        let read = || unsafe { slice_or_empty(input, inl) };
        if out.is_null() {
            return Ok(Io::NoOutput(read()));
        }
        if std::ptr::eq(input, out) {
            if outsize < inl {
                return Err(IoError::InPlaceTooSmall { inl, outsize });
            }
            // SAFETY: `outsize` writable bytes at `out`, the input among them.
            return Ok(Io::InPlace { buf: unsafe { std::slice::from_raw_parts_mut(out, outsize) }, inl });
        }
        let (i, o) = (input as usize, out as usize);
        if inl > 0 && outsize > 0 && i < o.wrapping_add(outsize) && o < i.wrapping_add(inl) {
            return Err(IoError::PartialOverlap);
        }
        // SAFETY: `outsize` writable bytes at `out`, apart from the input (checked above).
        Ok(Io::Separate { input: read(), out: unsafe { std::slice::from_raw_parts_mut(out, outsize) } })
    }

    /// The input bytes.
    #[inline]
    pub fn input(&self) -> &[u8] {
        match self {
            Io::NoOutput(input) | Io::Separate { input, .. } => input,
            Io::InPlace { buf, inl } => &buf[..*inl],
        }
    }

    #[inline]
    pub fn has_output(&self) -> bool {
        !matches!(self, Io::NoOutput(_))
    }

    #[inline]
    pub fn in_place(&self) -> bool {
        matches!(self, Io::InPlace { .. })
    }

    /// The whole output buffer, with the input's first `n` bytes moved to `at..at + n`:
    /// where a cipher then transforms them in place. From here on only the output is used.
    #[inline]
    pub fn into_output(self, n: usize, at: usize) -> Result<&'a mut [u8], &'static str> {
        match self {
            Io::NoOutput(_) => Err("no output buffer"),
            Io::InPlace { buf, .. } if buf.len() >= at + n => {
                buf.copy_within(..n, at);
                Ok(buf)
            }
            Io::Separate { input, out } if out.len() >= at + n => {
                out[at..at + n].copy_from_slice(&input[..n]);
                Ok(out)
            }
            _ => Err("output buffer too small"),
        }
    }
}

/// The `n` bytes at `p`; empty if `p` is NULL.
///
/// # Safety
/// `p` is NULL or points at `n` readable bytes that stay valid and unchanged for `'a`.
pub unsafe fn slice_or_empty<'a>(p: *const u8, n: usize) -> &'a [u8] {
    if p.is_null() {
        &[]
    } else {
        // SAFETY: as the caller promises.
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

/// The `n` bytes at `p` to write; empty if `p` is NULL (no output buffer holds nothing).
///
/// # Safety
/// `p` is NULL or points at `n` writable bytes, touched by nothing else for `'a`.
pub unsafe fn slice_mut_or_empty<'a>(p: *mut u8, n: usize) -> &'a mut [u8] {
    if p.is_null() {
        &mut []
    } else {
        // SAFETY: as the caller promises.
        unsafe { std::slice::from_raw_parts_mut(p, n) }
    }
}

/// The `n` bytes at `p`, or `None` if `p` is NULL (a key or IV not given).
///
/// # Safety
/// As for [`slice_or_empty`].
pub unsafe fn given<'a>(p: *const u8, n: usize) -> Option<&'a [u8]> {
    // SAFETY: as the caller promises.
    (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, n) })
}

/// The `n` bytes of input at `p`, refusing NULL with a length.
///
/// # Safety
/// As for [`slice_or_empty`].
pub unsafe fn input<'a>(p: *const u8, n: usize) -> Result<&'a [u8], IoError> {
    if p.is_null() && n > 0 {
        return Err(IoError::NullInput { inl: n });
    }
    // SAFETY: as the caller promises.
    Ok(unsafe { slice_or_empty(p, n) })
}

/// Writes `v` through an out-pointer OpenSSL may leave NULL.
///
/// # Safety
/// `p` is NULL or points at a writable `T`.
pub unsafe fn put<T>(p: *mut T, v: T) {
    // SAFETY: as the caller promises.
    if let Some(p) = unsafe { p.as_mut() } {
        *p = v;
    }
}

thread_local! {
    /// The last panic on this thread, as the hook saw it: location and message.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// What goes on the error queue for a panic in `what`.
#[cold]
#[inline(never)]
fn panic_message(what: &str, payload: Box<dyn Any + Send>) -> String {
    let seen = LAST_PANIC.with(|p| p.borrow_mut().take());
    let why = seen.unwrap_or_else(|| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_owned())
    });
    format!("ocf: internal error (a panic) in {what}: {why}")
}

/// Installs (once per process) the hook that keeps a panic's message for the error queue
/// instead of printing it: see the module documentation.
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        let verbose = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| !v.is_empty() && v != "0");
        std::panic::set_hook(Box::new(move |info| {
            let at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_owned());
            let _ = LAST_PANIC.try_with(|p| *p.borrow_mut() = Some(format!("{msg} (at {at})")));
            let ocf_thread = std::thread::current().name().is_some_and(|n| n.starts_with("ocf-"));
            if verbose || ocf_thread {
                default(info);
            }
        }));
    });
}

/// Test builds: panics in `what` the first time it is called, if `OCF_PROVIDER_PANIC`
/// names it (see the module documentation).
#[cfg(debug_assertions)]
fn inject(what: &'static str) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::OnceLock;
    static NAMED: OnceLock<Option<String>> = OnceLock::new();
    static FIRED: AtomicBool = AtomicBool::new(false);
    let named = NAMED.get_or_init(|| std::env::var("OCF_PROVIDER_PANIC").ok());
    if named.as_deref() == Some(what) && !FIRED.swap(true, Ordering::Relaxed) {
        // Says that the callback was reached, for tests whose command succeeds anyway.
        eprintln!("ocf provider: OCF_PROVIDER_PANIC={what}: panicking now");
        panic!("fault injected by OCF_PROVIDER_PANIC={what}");
    }
}

#[cfg(not(debug_assertions))]
#[inline(always)]
fn inject(_what: &'static str) {}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counter {
        provider: Box<Provider>,
        n: u32,
    }

    impl Context for Counter {
        fn provider(&self) -> &Provider {
            &self.provider
        }
    }

    #[test]
    fn a_panic_becomes_the_failure_value_and_an_error() {
        let mut raised = String::new();
        let r = guard("test_callback", -1, |why| raised = why.to_owned(), || -> i32 { panic!("boom") });
        assert_eq!(r, -1);
        assert!(raised.contains("internal error (a panic) in test_callback: boom"), "{raised}");
        let r = guard("test_callback", -1, |_| unreachable!(), || 7);
        assert_eq!(r, 7, "no panic: the body's value");
    }

    #[test]
    fn update_buffers_are_taken_apart_once_and_checked() {
        let mut buf = *b"abcdefgh";
        let p = buf.as_mut_ptr();
        // SAFETY: every pointer below is into `buf` (8 bytes) or NULL, lengths within it.
        unsafe {
            // In place: the input is the buffer's first bytes, moved within it on request.
            let io = Io::from_raw(p, 8, p, 3).expect("in place");
            assert!(io.in_place() && io.has_output());
            assert_eq!(io.input(), b"abc");
            let out = io.into_output(3, 2).expect("room for 2 + 3");
            assert_eq!(&out[..5], b"ababc");
            assert_eq!(Io::from_raw(p, 2, p, 3).err(), Some(IoError::InPlaceTooSmall { inl: 3, outsize: 2 }));
            // Overlapping without the same start: refused, as EVP_EncryptUpdate(3) says.
            assert_eq!(Io::from_raw(p.add(1), 4, p, 3).err(), Some(IoError::PartialOverlap));
            assert_eq!(Io::from_raw(p, 4, p.add(2), 3).err(), Some(IoError::PartialOverlap));
            assert_eq!(Io::from_raw(p, 8, std::ptr::null(), 1).err(), Some(IoError::NullInput { inl: 1 }));
            // Apart: the input copied into the output.
            let io = Io::from_raw(p.add(4), 4, p, 2).expect("apart");
            assert!(!io.in_place());
            let out = io.into_output(2, 0).expect("room");
            assert_eq!((out.len(), &out[..2]), (4, &b"ab"[..]));
            let io = Io::from_raw(p.add(4), 1, p, 2).expect("apart");
            assert_eq!(io.into_output(2, 0).err(), Some("output buffer too small"));
            // No output: associated data, read only.
            let io = Io::from_raw(std::ptr::null_mut(), 0, p, 2).expect("AAD");
            assert!(!io.has_output() && io.input() == b"ab");
            assert_eq!(io.into_output(2, 0).err(), Some("no output buffer"));
            assert!(Io::from_raw(p, 8, std::ptr::null(), 0).expect("nothing").input().is_empty());
        }
    }

    #[test]
    fn a_context_that_panicked_refuses_every_later_call_and_frees() {
        let provider = Box::new(Provider::new(&crate::settings::Settings::default()).expect("provider"));
        let ctx =
            Box::into_raw(Box::new(Held { ctx: Counter { provider, n: 0 }, failed: false })) as *mut c_void;
        let bump = |c: &mut Counter| {
            c.n += 1;
            1
        };
        // SAFETY: `ctx` is a live `Held<Counter>` used from this thread only, freed once.
        unsafe {
            assert_eq!(with_ctx("bump", ctx, 0, bump), 1);
            let half_updated = |c: &mut Counter| -> i32 {
                c.n += 1;
                panic!("half way")
            };
            assert_eq!(with_ctx("bump", ctx, 0, half_updated), 0, "the panic is the failure value");
            assert_eq!(with_ctx("bump", ctx, 0, bump), 0, "a failed context is refused");
            assert_eq!((*(ctx as *mut Held<Counter>)).ctx.n, 2, "the body never ran again");
            assert!(dup_ctx::<Counter>("dup", ctx, |_| unreachable!()).is_null(), "nor copied");
            assert_eq!(with_ctx::<Counter, i32>("bump", std::ptr::null_mut(), 0, bump), 0, "NULL");
            free_ctx::<Counter>("free", ctx);
        }
    }
}
