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
use crate::boundary::{self, given, slice_mut_or_empty, Context};
use crate::params::{self, Params, FAIL, OK};
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

    /// A copy, the message in progress included (`EVP_MD_CTX_copy`).
    fn dup(&self) -> Option<HashCtx> {
        let Some(feed) = self.feed.try_clone() else {
            self.fail("this driver cannot copy a message in progress");
            return None;
        };
        Some(HashCtx {
            provider: self.provider,
            alg: self.alg,
            session: self.session.clone(),
            feed,
            key: self.key.clone(),
        })
    }
}

impl Context for HashCtx {
    fn provider(&self) -> &Provider {
        HashCtx::provider(self)
    }
}

/// Writes `v` into the integer parameters named in `pairs` that `ps` asks for.
fn answer(mut ps: Params, pairs: &[(&CStr, i64)]) -> c_int {
    for (key, v) in pairs {
        if let Some(p) = ps.find(key) {
            if !params::set_int(p, *v) {
                return FAIL;
            }
        }
    }
    OK
}

/// `digest_update` and `mac_update`: `inl` bytes at `input` into the message.
///
/// # Safety
/// As OpenSSL promises (see below).
unsafe fn update(what: &'static str, ctx: *mut c_void, input: *const u8, inl: usize) -> c_int {
    // SAFETY: as OpenSSL promises.
    unsafe {
        boundary::with_ctx(what, ctx, FAIL, |c: &mut HashCtx| match boundary::input(input, inl) {
            Ok(input) => c.update(input) as c_int,
            Err(e) => c.fail(&format!("{}: {e}", c.alg)) as c_int,
        })
    }
}

/// `digest_final` and `mac_final`: the digest or MAC into `out`.
fn finish(c: &mut HashCtx, out: &mut [u8], outl: *mut usize) -> c_int {
    let n = c.alg.output_len();
    if out.len() < n {
        return c.fail(&format!("{}: output buffer too small", c.alg)) as c_int;
    }
    if !c.finish(&mut out[..n]) {
        return FAIL;
    }
    // SAFETY: OpenSSL passes NULL or a writable size_t.
    unsafe { boundary::put(outl, n) };
    OK
}

// ---- Digests. What OpenSSL promises each of these functions (provider-base(7),
// provider-digest(7), provider-mac(7)): `ctx` is a context this table's `newctx` or
// `dupctx` made and not yet freed, used by one thread at a time; `in` is NULL or `inl`
// readable bytes; `out` is NULL or `outsz` writable bytes; `outl` is NULL or a writable
// size_t; a parameter array is NULL or ends with a NULL key.

/// # Safety
/// `provctx` is the provider context `OSSL_provider_init` made.
unsafe extern "C" fn digest_newctx<const I: usize>(provctx: *mut c_void) -> *mut c_void {
    let make = |provider: &Provider| {
        let alg = DIGESTS[I].alg;
        let session = match provider.digest_session(alg) {
            Ok(s) => s,
            Err(e) => {
                provider.error(&format!("{alg}: {e}"));
                return None;
            }
        };
        Some(HashCtx { provider, alg, session: Some(session), feed: Feed::new(), key: None })
    };
    // SAFETY: as OpenSSL promises.
    unsafe { boundary::new_ctx("digest_newctx", provctx, make) }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn digest_init(ctx: *mut c_void, _ps: *const Param) -> c_int {
    // SAFETY: as OpenSSL promises.
    unsafe {
        boundary::with_ctx("digest_init", ctx, FAIL, |c: &mut HashCtx| {
            c.feed.reset();
            OK
        })
    }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn digest_update(ctx: *mut c_void, input: *const u8, inl: usize) -> c_int {
    // SAFETY: as OpenSSL promises.
    unsafe { update("digest_update", ctx, input, inl) }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn digest_final(ctx: *mut c_void, out: *mut u8, outl: *mut usize, outsz: usize) -> c_int {
    // SAFETY: as OpenSSL promises.
    unsafe {
        boundary::with_ctx("digest_final", ctx, FAIL, |c: &mut HashCtx| {
            finish(c, slice_mut_or_empty(out, outsz), outl)
        })
    }
}

/// # Safety
/// `ctx` is NULL or a context of this table; OpenSSL frees each once.
unsafe extern "C" fn digest_freectx(ctx: *mut c_void) {
    // SAFETY: as OpenSSL promises.
    unsafe { boundary::free_ctx::<HashCtx>("digest_freectx", ctx) }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn digest_dupctx(ctx: *mut c_void) -> *mut c_void {
    // SAFETY: as OpenSSL promises.
    unsafe { boundary::dup_ctx("digest_dupctx", ctx, HashCtx::dup) }
}

/// The digest's fixed parameters.
///
/// # Safety
/// `ps` is NULL or a parameter array ending with a NULL key.
unsafe extern "C" fn digest_get_params<const I: usize>(ps: *mut Param) -> c_int {
    boundary::guard("digest_get_params", FAIL, crate::raise_loaded, || {
        let d = &DIGESTS[I];
        let pairs = [
            (c"blocksize", d.alg.block_len() as i64),
            (c"size", d.alg.output_len() as i64),
            (c"xof", 0),
            (c"algid-absent", i64::from(d.algid_absent)),
        ];
        // SAFETY: as OpenSSL promises.
        answer(unsafe { Params::from_raw(ps) }, &pairs)
    })
}

static DIGEST_GETTABLE: [Param; 5] = [
    params::describe(c"blocksize", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"size", abi::PARAM_UNSIGNED_INTEGER),
    params::describe(c"xof", abi::PARAM_INTEGER),
    params::describe(c"algid-absent", abi::PARAM_INTEGER),
    params::END,
];

/// A static list: nothing read from OpenSSL's arguments (a safe function, guarded all the
/// same).
extern "C" fn digest_gettable_params(_provctx: *mut c_void) -> *const Param {
    boundary::static_list("digest_gettable_params", &DIGEST_GETTABLE)
}

const fn digest_table<const I: usize>() -> [Dispatch; 9] {
    [
        entry!(abi::FUNC_DIGEST_NEWCTX, digest_newctx::<I>, unsafe extern "C" fn(*mut c_void) -> *mut c_void),
        entry!(abi::FUNC_DIGEST_INIT, digest_init, unsafe extern "C" fn(*mut c_void, *const Param) -> c_int),
        entry!(
            abi::FUNC_DIGEST_UPDATE,
            digest_update,
            unsafe extern "C" fn(*mut c_void, *const u8, usize) -> c_int
        ),
        entry!(
            abi::FUNC_DIGEST_FINAL,
            digest_final,
            unsafe extern "C" fn(*mut c_void, *mut u8, *mut usize, usize) -> c_int
        ),
        entry!(abi::FUNC_DIGEST_FREECTX, digest_freectx, unsafe extern "C" fn(*mut c_void)),
        entry!(abi::FUNC_DIGEST_DUPCTX, digest_dupctx, unsafe extern "C" fn(*mut c_void) -> *mut c_void),
        entry!(
            abi::FUNC_DIGEST_GET_PARAMS,
            digest_get_params::<I>,
            unsafe extern "C" fn(*mut Param) -> c_int
        ),
        entry!(
            abi::FUNC_DIGEST_GETTABLE_PARAMS,
            digest_gettable_params,
            unsafe extern "C" fn(*mut c_void) -> *const Param
        ),
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

// ---- HMAC. OpenSSL promises what it promises the digests' functions (see above); a key
// is NULL (not given) or `keylen` bytes.

/// # Safety
/// `provctx` is the provider context `OSSL_provider_init` made.
unsafe extern "C" fn mac_newctx(provctx: *mut c_void) -> *mut c_void {
    let make = |provider: &Provider| {
        Some(HashCtx { provider, alg: DigestAlg::Sha256, session: None, feed: Feed::new(), key: None })
    };
    // SAFETY: as OpenSSL promises.
    unsafe { boundary::new_ctx("mac_newctx", provctx, make) }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn mac_dupctx(ctx: *mut c_void) -> *mut c_void {
    // SAFETY: as OpenSSL promises.
    unsafe { boundary::dup_ctx("mac_dupctx", ctx, HashCtx::dup) }
}

/// # Safety
/// `ctx` is NULL or a context of this table; OpenSSL frees each once.
unsafe extern "C" fn mac_freectx(ctx: *mut c_void) {
    // SAFETY: as OpenSSL promises.
    unsafe { boundary::free_ctx::<HashCtx>("mac_freectx", ctx) }
}

/// `EVP_MAC_init`: parameters (digest, key) first, then a key given here; with no new key,
/// the message restarts under the key already set.
///
/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn mac_init(ctx: *mut c_void, key: *const u8, keylen: usize, ps: *const Param) -> c_int {
    // SAFETY: as OpenSSL promises; the key and parameters are only read.
    unsafe {
        boundary::with_ctx("mac_init", ctx, FAIL, |c: &mut HashCtx| {
            if !c.set_params(Params::from_raw(ps as *mut Param)) {
                return FAIL;
            }
            if let Some(key) = given(key, keylen) {
                c.key = Some(ocf::Key::new(key));
                if !c.open_hmac() {
                    return FAIL;
                }
            }
            if c.session.is_none() {
                return c.fail("HMAC: no key set") as c_int;
            }
            c.feed.reset();
            OK
        })
    }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn mac_update(ctx: *mut c_void, input: *const u8, inl: usize) -> c_int {
    // SAFETY: as OpenSSL promises.
    unsafe { update("mac_update", ctx, input, inl) }
}

/// # Safety
/// As OpenSSL promises (see above); `out` NULL asks for the MAC's size only.
unsafe extern "C" fn mac_final(ctx: *mut c_void, out: *mut u8, outl: *mut usize, outsize: usize) -> c_int {
    // SAFETY: as OpenSSL promises.
    unsafe {
        boundary::with_ctx("mac_final", ctx, FAIL, |c: &mut HashCtx| {
            if out.is_null() {
                boundary::put(outl, c.alg.output_len());
                return OK;
            }
            finish(c, slice_mut_or_empty(out, outsize), outl)
        })
    }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn mac_get_ctx_params(ctx: *mut c_void, ps: *mut Param) -> c_int {
    // SAFETY: as OpenSSL promises.
    unsafe {
        boundary::with_ctx("mac_get_ctx_params", ctx, FAIL, |c: &mut HashCtx| {
            let pairs = [(c"size", c.alg.output_len() as i64), (c"block-size", c.alg.block_len() as i64)];
            answer(Params::from_raw(ps), &pairs)
        })
    }
}

/// # Safety
/// As OpenSSL promises (see above).
unsafe extern "C" fn mac_set_ctx_params(ctx: *mut c_void, ps: *const Param) -> c_int {
    // SAFETY: as OpenSSL promises; the parameters are only read.
    unsafe {
        boundary::with_ctx("mac_set_ctx_params", ctx, FAIL, |c: &mut HashCtx| {
            c.set_params(Params::from_raw(ps as *mut Param)) as c_int
        })
    }
}

impl HashCtx {
    /// HMAC's parameters: the digest and the key (the session reopens when either changes).
    fn set_params(&mut self, mut ps: Params) -> bool {
        let mut reopen = false;
        if let Some(p) = ps.find(c"digest") {
            let Some(name) = params::get_utf8(p) else {
                return self.fail("HMAC: digest: not a string");
            };
            match by_name(&name) {
                Some(alg) => {
                    reopen |= alg != self.alg;
                    self.alg = alg;
                }
                None => return self.fail(&format!("HMAC: digest '{name}' is not offered by ocf")),
            }
        }
        if let Some(p) = ps.find(c"key") {
            // SAFETY: an OCTET_STRING slot of a `Params` array holds `data_size` bytes for
            // this call (`Params::from_raw`).
            let Some(k) = (unsafe { params::get_octets(p) }) else {
                return self.fail("HMAC: key: not an octet string");
            };
            self.key = Some(ocf::Key::new(k));
            reopen = true;
        }
        !reopen || self.open_hmac()
    }
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

/// Static lists: nothing read from OpenSSL's arguments (safe functions, guarded all the
/// same).
extern "C" fn mac_gettable_ctx_params(_ctx: *mut c_void, _provctx: *mut c_void) -> *const Param {
    boundary::static_list("mac_gettable_ctx_params", &MAC_GETTABLE_CTX)
}

/// A static list: nothing read from OpenSSL's arguments.
extern "C" fn mac_settable_ctx_params(_ctx: *mut c_void, _provctx: *mut c_void) -> *const Param {
    boundary::static_list("mac_settable_ctx_params", &MAC_SETTABLE_CTX)
}

static HMAC_TABLE: [Dispatch; 11] = [
    entry!(abi::FUNC_MAC_NEWCTX, mac_newctx, unsafe extern "C" fn(*mut c_void) -> *mut c_void),
    entry!(abi::FUNC_MAC_DUPCTX, mac_dupctx, unsafe extern "C" fn(*mut c_void) -> *mut c_void),
    entry!(abi::FUNC_MAC_FREECTX, mac_freectx, unsafe extern "C" fn(*mut c_void)),
    entry!(
        abi::FUNC_MAC_INIT,
        mac_init,
        unsafe extern "C" fn(*mut c_void, *const u8, usize, *const Param) -> c_int
    ),
    entry!(abi::FUNC_MAC_UPDATE, mac_update, unsafe extern "C" fn(*mut c_void, *const u8, usize) -> c_int),
    entry!(
        abi::FUNC_MAC_FINAL,
        mac_final,
        unsafe extern "C" fn(*mut c_void, *mut u8, *mut usize, usize) -> c_int
    ),
    entry!(
        abi::FUNC_MAC_GET_CTX_PARAMS,
        mac_get_ctx_params,
        unsafe extern "C" fn(*mut c_void, *mut Param) -> c_int
    ),
    entry!(
        abi::FUNC_MAC_SET_CTX_PARAMS,
        mac_set_ctx_params,
        unsafe extern "C" fn(*mut c_void, *const Param) -> c_int
    ),
    entry!(
        abi::FUNC_MAC_GETTABLE_CTX_PARAMS,
        mac_gettable_ctx_params,
        unsafe extern "C" fn(*mut c_void, *mut c_void) -> *const Param
    ),
    entry!(
        abi::FUNC_MAC_SETTABLE_CTX_PARAMS,
        mac_settable_ctx_params,
        unsafe extern "C" fn(*mut c_void, *mut c_void) -> *const Param
    ),
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
