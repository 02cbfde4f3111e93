//! Digests (SHA-1, SHA-2, MD5) and HMAC as OpenSSL implementations over ocf sessions.
//!
//! Every update is a part of one ocf message ([`ocf::Part`]) in the context's reusable
//! request; `final` sends the last part and reads the digest or MAC. A digest needs no
//! key, so the provider keeps one multi-part session per digest and every context shares
//! it (the message state is in the context's request, not the session): creating an
//! `EVP_MD_CTX` costs no session setup. An HMAC context opens a session when its key
//! arrives.

use std::ffi::{c_int, c_void, CStr};

use ocf::{DigestAlg, Op, Part, Session, SessionParams};

use crate::abi::{self, Algorithm, Dispatch, Param};
use crate::params::{self, FAIL, OK};
use crate::part::{Data, Extras, Feed};
use crate::{entry, Provider};

/// A digest as OpenSSL names it.
pub struct DigestInfo {
    pub names: &'static CStr,
    pub alg: DigestAlg,
    /// OpenSSL's "algid-absent" flag: the X.509 AlgorithmIdentifier omits the parameters
    /// (SHA-1 and SHA-2 in the default provider; MD5 keeps a NULL).
    pub algid_absent: bool,
}

/// Every digest the provider offers, in the order of [`ALGORITHMS`].
pub static DIGESTS: [DigestInfo; 5] = [
    DigestInfo { names: c"SHA1:SHA-1:SSL3-SHA1:1.3.14.3.2.26", alg: DigestAlg::Sha1, algid_absent: true },
    DigestInfo {
        names: c"SHA2-256:SHA-256:SHA256:2.16.840.1.101.3.4.2.1",
        alg: DigestAlg::Sha256,
        algid_absent: true,
    },
    DigestInfo {
        names: c"SHA2-384:SHA-384:SHA384:2.16.840.1.101.3.4.2.2",
        alg: DigestAlg::Sha384,
        algid_absent: true,
    },
    DigestInfo {
        names: c"SHA2-512:SHA-512:SHA512:2.16.840.1.101.3.4.2.3",
        alg: DigestAlg::Sha512,
        algid_absent: true,
    },
    DigestInfo { names: c"MD5:SSL3-MD5:1.2.840.113549.2.5", alg: DigestAlg::Md5, algid_absent: false },
];

/// The digest a name stands for (any of OpenSSL's names for it, any case).
pub fn by_name(name: &str) -> Option<DigestAlg> {
    DIGESTS.iter().find_map(|d| {
        let names = d.names.to_str().ok()?;
        names.split(':').any(|n| n.eq_ignore_ascii_case(name)).then_some(d.alg)
    })
}

/// A digest or HMAC context: the session, and the message in progress in `feed`.
pub struct HashCtx {
    provider: *const Provider,
    alg: DigestAlg,
    session: Option<Session>,
    feed: Feed,
    /// HMAC: the key, kept to reopen the session when the digest changes (wiped on drop).
    key: Option<ocf::Key>,
}

impl HashCtx {
    fn provider(&self) -> &Provider {
        // SAFETY: the provider context outlives every algorithm context OpenSSL made from it.
        unsafe { &*self.provider }
    }

    fn fail(&self, why: &str) -> bool {
        self.provider().error(why);
        false
    }

    fn update(&mut self, input: &[u8]) -> bool {
        if input.is_empty() {
            return true;
        }
        let Some(session) = self.session.clone() else {
            return self.fail("HMAC: no key set");
        };
        let part = if self.feed.in_message() { Part::Middle } else { Part::First };
        let r = self.feed.run(&session, Op::ComputeDigest, part, Data::Read(input), Extras::default());
        r.map_err(|e| self.fail(&format!("{}: {e}", self.alg))).is_ok()
    }

    /// Finishes the message into `out` (the digest's length, checked by the caller).
    fn finish(&mut self, out: &mut [u8]) -> bool {
        let Some(session) = self.session.clone() else {
            return self.fail("HMAC: no key set");
        };
        let part = if self.feed.in_message() { Part::Last } else { Part::Whole };
        let r = self.feed.run(
            &session,
            Op::ComputeDigest,
            part,
            Data::Read(&[]),
            Extras { tag_out: out, ..Extras::default() },
        );
        self.feed.reset();
        r.map_err(|e| self.fail(&format!("{}: {e}", self.alg))).is_ok()
    }

    /// HMAC: (re)opens the session for the current digest and key.
    fn open_hmac(&mut self) -> bool {
        let Some(key) = &self.key else { return true };
        // ocf refuses empty MAC keys (an IPsec SA with no key is a mistake), but RFC 2104
        // allows them and TLS 1.3 needs one: HKDF-Extract with an empty salt. HMAC pads its
        // key with zeros to the block length, so the empty key and the one-byte key 0x00
        // are the same key.
        let key = if key.is_empty() { ocf::Key::new(&[0u8]) } else { key.clone() };
        let params = SessionParams::hmac(self.alg, key).multipart();
        match self.provider().new_session(&params) {
            Ok(s) => {
                self.session = Some(s);
                // A fresh request: the old session's spare state (and its key) goes now.
                self.feed = Feed::new();
                true
            }
            Err(e) => self.fail(&format!("hmac-{}: {e}", self.alg)),
        }
    }

    fn dup(&self) -> Option<HashCtx> {
        let feed = self.feed.try_clone()?;
        Some(HashCtx {
            provider: self.provider,
            alg: self.alg,
            session: self.session.clone(),
            feed,
            key: self.key.clone(),
        })
    }
}

/// # Safety
/// `ctx` is a context made by this module's `newctx`, not yet freed.
unsafe fn ctx_mut<'a>(ctx: *mut c_void) -> Option<&'a mut HashCtx> {
    // SAFETY: as the caller promises; OpenSSL never uses one context from two threads at once.
    unsafe { (ctx as *mut HashCtx).as_mut() }
}

/// # Safety
/// `p` is NULL or points at `n` readable bytes.
unsafe fn bytes<'a>(p: *const u8, n: usize) -> &'a [u8] {
    if p.is_null() {
        &[]
    } else {
        // SAFETY: as the caller promises.
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

unsafe fn free_ctx(ctx: *mut c_void) {
    if !ctx.is_null() {
        // SAFETY: made by a newctx of this module; OpenSSL frees it once.
        drop(unsafe { Box::from_raw(ctx as *mut HashCtx) });
    }
}

unsafe fn dup_ctx(ctx: *mut c_void) -> *mut c_void {
    // SAFETY: as the caller of a dupctx promises.
    let Some(c) = (unsafe { ctx_mut(ctx) }) else { return std::ptr::null_mut() };
    match c.dup() {
        Some(copy) => Box::into_raw(Box::new(copy)) as *mut c_void,
        None => {
            c.fail("this driver cannot copy a message in progress");
            std::ptr::null_mut()
        }
    }
}

/// Writes `v` into the integer parameters named in `pairs` that `ps` asks for.
///
/// # Safety
/// `ps` is NULL or a terminated array.
unsafe fn answer(ps: *mut Param, pairs: &[(&CStr, i64)]) -> c_int {
    for (key, v) in pairs {
        // SAFETY: as the caller promises.
        if let Some(p) = unsafe { params::find(ps, key) } {
            if !params::set_int(p, *v) {
                return FAIL;
            }
        }
    }
    OK
}

// ---- Digests.

unsafe extern "C" fn digest_newctx<const I: usize>(provctx: *mut c_void) -> *mut c_void {
    // SAFETY: `provctx` is the provider context OSSL_provider_init made.
    let Some(provider) = (unsafe { (provctx as *const Provider).as_ref() }) else {
        return std::ptr::null_mut();
    };
    let alg = DIGESTS[I].alg;
    let session = match provider.digest_session(alg) {
        Ok(s) => s,
        Err(e) => {
            provider.error(&format!("{alg}: {e}"));
            return std::ptr::null_mut();
        }
    };
    let ctx = HashCtx { provider, alg, session: Some(session), feed: Feed::new(), key: None };
    Box::into_raw(Box::new(ctx)) as *mut c_void
}

unsafe extern "C" fn digest_init(ctx: *mut c_void, _ps: *const Param) -> c_int {
    // SAFETY: OpenSSL passes its context.
    let Some(c) = (unsafe { ctx_mut(ctx) }) else { return FAIL };
    c.feed.reset();
    OK
}

unsafe extern "C" fn digest_update(ctx: *mut c_void, input: *const u8, inl: usize) -> c_int {
    // SAFETY: OpenSSL passes its context and `inl` input bytes.
    unsafe {
        let Some(c) = ctx_mut(ctx) else { return FAIL };
        c.update(bytes(input, inl)) as c_int
    }
}

unsafe extern "C" fn digest_final(ctx: *mut c_void, out: *mut u8, outl: *mut usize, outsz: usize) -> c_int {
    // SAFETY: OpenSSL passes its context and an output buffer of `outsz` bytes.
    unsafe {
        let Some(c) = ctx_mut(ctx) else { return FAIL };
        let n = c.alg.output_len();
        if out.is_null() || outsz < n {
            return c.fail("digest: output buffer too small") as c_int;
        }
        let out = std::slice::from_raw_parts_mut(out, n);
        if !c.finish(out) {
            return FAIL;
        }
        if !outl.is_null() {
            *outl = n;
        }
        OK
    }
}

unsafe extern "C" fn digest_freectx(ctx: *mut c_void) {
    // SAFETY: OpenSSL frees its context once.
    unsafe { free_ctx(ctx) }
}

unsafe extern "C" fn digest_dupctx(ctx: *mut c_void) -> *mut c_void {
    // SAFETY: OpenSSL passes a live context.
    unsafe { dup_ctx(ctx) }
}

unsafe extern "C" fn digest_get_params<const I: usize>(ps: *mut Param) -> c_int {
    let d = &DIGESTS[I];
    let pairs = [
        (c"blocksize", d.alg.block_len() as i64),
        (c"size", d.alg.output_len() as i64),
        (c"xof", 0),
        (c"algid-absent", i64::from(d.algid_absent)),
    ];
    // SAFETY: OpenSSL passes a terminated array.
    unsafe { answer(ps, &pairs) }
}

static DIGEST_GETTABLE: [Param; 5] = [
    params::describe(c"blocksize", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"size", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"xof", abi::PARAM_INTEGER),
    params::describe(c"algid-absent", abi::PARAM_INTEGER),
    params::END,
];

unsafe extern "C" fn digest_gettable_params(_provctx: *mut c_void) -> *const Param {
    DIGEST_GETTABLE.as_ptr()
}

const fn digest_table<const I: usize>() -> [Dispatch; 9] {
    [
        entry!(1, digest_newctx::<I>, unsafe extern "C" fn(*mut c_void) -> *mut c_void),
        entry!(2, digest_init, unsafe extern "C" fn(*mut c_void, *const Param) -> c_int),
        entry!(3, digest_update, unsafe extern "C" fn(*mut c_void, *const u8, usize) -> c_int),
        entry!(4, digest_final, unsafe extern "C" fn(*mut c_void, *mut u8, *mut usize, usize) -> c_int),
        entry!(6, digest_freectx, unsafe extern "C" fn(*mut c_void)),
        entry!(7, digest_dupctx, unsafe extern "C" fn(*mut c_void) -> *mut c_void),
        entry!(8, digest_get_params::<I>, unsafe extern "C" fn(*mut Param) -> c_int),
        entry!(11, digest_gettable_params, unsafe extern "C" fn(*mut c_void) -> *const Param),
        abi::END,
    ]
}

static D0: [Dispatch; 9] = digest_table::<0>();
static D1: [Dispatch; 9] = digest_table::<1>();
static D2: [Dispatch; 9] = digest_table::<2>();
static D3: [Dispatch; 9] = digest_table::<3>();
static D4: [Dispatch; 9] = digest_table::<4>();

const fn digest_alg(i: usize, table: &'static [Dispatch; 9]) -> Algorithm {
    Algorithm {
        names: DIGESTS[i].names.as_ptr(),
        properties: crate::PROPERTIES.as_ptr(),
        implementation: table.as_ptr(),
        description: std::ptr::null(),
    }
}

/// The digest algorithms, as `query_operation` hands them to OpenSSL.
pub static ALGORITHMS: [Algorithm; 6] = [
    digest_alg(0, &D0),
    digest_alg(1, &D1),
    digest_alg(2, &D2),
    digest_alg(3, &D3),
    digest_alg(4, &D4),
    crate::ALGORITHM_END,
];

// ---- HMAC.

unsafe extern "C" fn mac_newctx(provctx: *mut c_void) -> *mut c_void {
    let ctx = HashCtx {
        provider: provctx as *const Provider,
        alg: DigestAlg::Sha256,
        session: None,
        feed: Feed::new(),
        key: None,
    };
    Box::into_raw(Box::new(ctx)) as *mut c_void
}

unsafe extern "C" fn mac_dupctx(ctx: *mut c_void) -> *mut c_void {
    // SAFETY: OpenSSL passes a live context.
    unsafe { dup_ctx(ctx) }
}

unsafe extern "C" fn mac_freectx(ctx: *mut c_void) {
    // SAFETY: OpenSSL frees its context once.
    unsafe { free_ctx(ctx) }
}

/// `EVP_MAC_init`: parameters (digest, key) first, then a key given here; with no new key,
/// the message restarts under the key already set.
unsafe extern "C" fn mac_init(ctx: *mut c_void, key: *const u8, keylen: usize, ps: *const Param) -> c_int {
    // SAFETY: OpenSSL passes its context, `keylen` key bytes and a terminated array.
    unsafe {
        let Some(c) = ctx_mut(ctx) else { return FAIL };
        if mac_set_ctx_params(ctx, ps) != OK {
            return FAIL;
        }
        if !key.is_null() {
            c.key = Some(ocf::Key::new(bytes(key, keylen)));
            if !c.open_hmac() {
                return FAIL;
            }
        }
        if c.session.is_none() {
            return c.fail("HMAC: no key set") as c_int;
        }
        c.feed.reset();
        OK
    }
}

unsafe extern "C" fn mac_update(ctx: *mut c_void, input: *const u8, inl: usize) -> c_int {
    // SAFETY: as for digest_update.
    unsafe { digest_update(ctx, input, inl) }
}

unsafe extern "C" fn mac_final(ctx: *mut c_void, out: *mut u8, outl: *mut usize, outsize: usize) -> c_int {
    // SAFETY: OpenSSL passes its context, and an output buffer of `outsize` bytes or NULL
    // (a size query).
    unsafe {
        let Some(c) = ctx_mut(ctx) else { return FAIL };
        let n = c.alg.output_len();
        if out.is_null() {
            if !outl.is_null() {
                *outl = n;
            }
            return OK;
        }
        digest_final(ctx, out, outl, outsize)
    }
}

unsafe extern "C" fn mac_get_ctx_params(ctx: *mut c_void, ps: *mut Param) -> c_int {
    // SAFETY: OpenSSL passes its context and a terminated array.
    unsafe {
        let Some(c) = ctx_mut(ctx) else { return FAIL };
        answer(ps, &[(c"size", c.alg.output_len() as i64), (c"block-size", c.alg.block_len() as i64)])
    }
}

unsafe extern "C" fn mac_set_ctx_params(ctx: *mut c_void, ps: *const Param) -> c_int {
    let ps = ps as *mut Param;
    // SAFETY: OpenSSL passes its context and a terminated array whose values it owns.
    unsafe {
        let Some(c) = ctx_mut(ctx) else { return FAIL };
        let mut reopen = false;
        if let Some(p) = params::find(ps, c"digest") {
            let Some(name) = params::get_utf8(p) else {
                return c.fail("HMAC: digest: not a string") as c_int;
            };
            match by_name(&name) {
                Some(alg) => {
                    reopen |= alg != c.alg;
                    c.alg = alg;
                }
                None => return c.fail(&format!("HMAC: digest '{name}' is not offered by ocf")) as c_int,
            }
        }
        if let Some(p) = params::find(ps, c"key") {
            let Some(k) = params::get_octets(p) else {
                return c.fail("HMAC: key: not an octet string") as c_int;
            };
            c.key = Some(ocf::Key::new(k));
            reopen = true;
        }
        if reopen && !c.open_hmac() {
            return FAIL;
        }
    }
    OK
}

static MAC_GETTABLE_CTX: [Param; 3] = [
    params::describe(c"size", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"block-size", abi::PARAM_UNSIGNED_INTEGER),
    params::END,
];

static MAC_SETTABLE_CTX: [Param; 3] = [
    params::describe(c"digest", abi::PARAM_UTF8_STRING),
    params::describe(c"key", abi::PARAM_OCTET_STRING),
    params::END,
];

unsafe extern "C" fn mac_gettable_ctx_params(_ctx: *mut c_void, _provctx: *mut c_void) -> *const Param {
    MAC_GETTABLE_CTX.as_ptr()
}

unsafe extern "C" fn mac_settable_ctx_params(_ctx: *mut c_void, _provctx: *mut c_void) -> *const Param {
    MAC_SETTABLE_CTX.as_ptr()
}

static HMAC_TABLE: [Dispatch; 11] = [
    entry!(1, mac_newctx, unsafe extern "C" fn(*mut c_void) -> *mut c_void),
    entry!(2, mac_dupctx, unsafe extern "C" fn(*mut c_void) -> *mut c_void),
    entry!(3, mac_freectx, unsafe extern "C" fn(*mut c_void)),
    entry!(4, mac_init, unsafe extern "C" fn(*mut c_void, *const u8, usize, *const Param) -> c_int),
    entry!(5, mac_update, unsafe extern "C" fn(*mut c_void, *const u8, usize) -> c_int),
    entry!(6, mac_final, unsafe extern "C" fn(*mut c_void, *mut u8, *mut usize, usize) -> c_int),
    entry!(8, mac_get_ctx_params, unsafe extern "C" fn(*mut c_void, *mut Param) -> c_int),
    entry!(9, mac_set_ctx_params, unsafe extern "C" fn(*mut c_void, *const Param) -> c_int),
    entry!(11, mac_gettable_ctx_params, unsafe extern "C" fn(*mut c_void, *mut c_void) -> *const Param),
    entry!(12, mac_settable_ctx_params, unsafe extern "C" fn(*mut c_void, *mut c_void) -> *const Param),
    abi::END,
];

/// The MAC algorithms (HMAC), as `query_operation` hands them to OpenSSL.
pub static MAC_ALGORITHMS: [Algorithm; 2] = [
    Algorithm {
        names: c"HMAC".as_ptr(),
        properties: crate::PROPERTIES.as_ptr(),
        implementation: HMAC_TABLE.as_ptr(),
        description: std::ptr::null(),
    },
    crate::ALGORITHM_END,
];
