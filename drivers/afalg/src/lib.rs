//! # ocf-afalg — the Linux kernel crypto API as an ocf driver
//!
//! What `/dev/crypto` was to the BSDs, AF_ALG sockets are to Linux: the way from user space
//! to the kernel's crypto drivers — hardware engines (Intel QAT, AMD CCP, NXP CAAM,
//! SafeXcel, Atmel…), the CPU's instruction-set code (AES-NI, ARMv8 CE) and its generic C.
//!
//! ```text
//!  AfalgDriver::probe() ─► crate::probe: bind every algorithm, read /proc/crypto
//!        │                    (Unavailable: says why, registers nothing)
//!        ▼
//!  new_session ─► crate::session: bind, set key once (authenc key: crate::names), accept
//!        ▼
//!  process(req) ─┬─ sync:  run on the caller's thread ─► Done
//!                └─ pool:  crate::pool lane ─► worker runs it ─► ctx.done   (full: Busy,
//!                                                                 then unblock)
//!  run: op socket ─► crate::socket: sendmsg (copy) or vmsplice+splice (zero-copy from
//!       `zero_copy_min` bytes) ─► recv into the caller's pages ─► errno → crate::errors
//! ```
//!
//! Each session's algorithm takes the class of the kernel implementation behind it
//! (`/proc/crypto`'s highest-priority entry whose selftest passed): a hardware engine is
//! [`Priority::Hardware`], instruction-set code [`Priority::AcceleratedSoftware`], generic C
//! [`Priority::Software`]. Where the kernel has no AF_ALG, [`AfalgDriver::probe`] returns
//! [`Unavailable`], whose `Display` is the one line to print.
//!
//! Names (as `-d` in cryptotest): `afalg` (hardware-backed sessions on a worker pool, the
//! rest on the caller's thread: [`RunMode::ByClass`]), `afalg:sync` (everything on the
//! caller's thread), `afalg:pool` (everything on the pool), and keys
//! `workers=N,queue=N,zero_copy=BYTES|off`; see [`Config::parse`].
//!
//! The crate denies `unsafe` but in one place: wrapping the descriptor `accept4` returns
//! (`crate::socket::Transform::accept`).

#![deny(unsafe_code)]

mod errors;
mod names;
mod pool;
mod probe;
pub mod proc_crypto;
mod session;
mod socket;

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ocf::{
    Capabilities, CipherAlg, DigestAlg, Driver, DriverSession, Error, Failed, Framework, Hint, MacAlg, Mode,
    Priority, Processed, Request, SessionContext, SessionParams,
};

pub use crate::errors::{Cause, KernelErrors};
pub use crate::names::{authenc_key, KernelAlg, SockType};
use crate::pool::{Job, Pool, PoolCounters};
pub use crate::probe::{deprecates, Missing, ProbeReport, Probed, Unavailable, DEPRECATED_FROM};
use crate::session::SessionCore;
pub use crate::socket::{AEAD_MAX, CHUNK};

/// The name the driver registers under by default.
pub const NAME: &str = "afalg";

/// Payloads from this many bytes go to the kernel by vmsplice+splice instead of a copy.
///
/// Measured side by side (`afalg:sync,zero_copy=off` against `zero_copy=1`, cryptotest,
/// 0.3 s per case): under QEMU TCG with Debian's amd64 kernel (`KVM_MACHINE=qemu`), splicing
/// gained 2-10% from 16 KiB for AES-CBC (64 KiB: 452 vs 414 Mb/s), and from 64 KiB for
/// AES-GCM (281 vs 257) and SHA-256 (455 vs 447), and lost below 4 KiB (1 KiB AES-CBC: 122
/// vs 138). Under user-mode-linux copying won at every size to 1 MiB (64 KiB AES-CBC: 1,012
/// vs 1,402), but there each of the two extra system calls is a ptrace round trip. 64 KiB
/// is where every algorithm measured gained on the real kernel; `zero_copy=BYTES` tunes it.
pub const ZERO_COPY_MIN: usize = 64 * 1024;

/// Where a session's requests run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunMode {
    /// By the class of the kernel implementation: hardware on the pool (the kernel sleeps
    /// while the engine works, so a pool keeps several requests in flight for one
    /// submitter), the rest on the caller's thread (the kernel computes on the calling CPU:
    /// a hop to a worker costs and gains nothing; measured in the kernel machine:
    /// docs/afalg.md, "Measured").
    ByClass,
    /// Every request on the caller's thread (`afalg:sync`).
    Sync,
    /// Every request on the pool (`afalg:pool`).
    Pool,
}

/// How the driver runs requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub run: RunMode,
    /// Worker threads of the pool.
    pub workers: usize,
    /// Requests the pool holds before it answers Busy.
    pub queue: usize,
    /// Payloads from this many bytes are spliced (`usize::MAX`: never).
    pub zero_copy_min: usize,
}

impl Default for Config {
    fn default() -> Config {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Config { run: RunMode::ByClass, workers: cpus.clamp(2, 4), queue: 64, zero_copy_min: ZERO_COPY_MIN }
    }
}

impl Config {
    /// Parses what follows `afalg:` in a driver name: `sync` or `pool`, `workers=N`,
    /// `queue=N` (these two imply `pool` unless `sync` is given), `zero_copy=BYTES` or
    /// `zero_copy=off`, comma-separated. The error names the bad item.
    pub fn parse(spec: &str) -> Result<Config, String> {
        let mut c = Config::default();
        let mut sized = false;
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let number = |v: &str| -> Result<usize, String> {
                v.parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("`{item}`: expected a positive number"))
            };
            match item.split_once('=') {
                None if item == "sync" => c.run = RunMode::Sync,
                None if item == "pool" => c.run = RunMode::Pool,
                Some(("workers", v)) => (c.workers, sized) = (number(v)?, true),
                Some(("queue", v)) => (c.queue, sized) = (number(v)?, true),
                Some(("zero_copy", "off")) => c.zero_copy_min = usize::MAX,
                Some(("zero_copy", v)) => c.zero_copy_min = number(v)?,
                _ => {
                    return Err(format!(
                        "unknown afalg option `{item}` (valid: sync, pool, workers=N, queue=N, zero_copy=BYTES|off)"
                    ))
                }
            }
        }
        if sized && c.run == RunMode::ByClass {
            c.run = RunMode::Pool;
        }
        Ok(c)
    }
}

/// Why a driver named by a user could not be registered.
#[derive(Debug)]
pub enum AfalgError {
    /// The kernel offers nothing (the usual case on machines without AF_ALG).
    Unavailable(Unavailable),
    /// The name is not `afalg` or `afalg:<options>`, or an option is wrong.
    BadName(String),
    /// The worker threads could not be started.
    Spawn(std::io::Error),
    /// The framework refused the driver.
    Framework(Error),
}

impl fmt::Display for AfalgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AfalgError::Unavailable(u) => u.fmt(f),
            AfalgError::BadName(why) => write!(f, "bad afalg driver name: {why}"),
            AfalgError::Spawn(e) => write!(f, "afalg: cannot start the worker threads: {e}"),
            AfalgError::Framework(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for AfalgError {}

/// Counters the framework does not keep.
pub(crate) struct Shared {
    pub errors: KernelErrors,
    pub pool: PoolCounters,
}

/// The driver's own counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AfalgStats {
    /// Kernel errors by cause (non-zero ones).
    pub kernel_errors: Vec<(Cause, u64)>,
    /// Requests refused because every queue was full.
    pub busy: u64,
    /// `unblock` calls after Busy.
    pub unblocks: u64,
    /// Completion callbacks that panicked on a worker (the worker went on).
    pub callback_panics: u64,
}

/// The AF_ALG driver. Make it with [`AfalgDriver::probe`] (or [`AfalgDriver::with_config`]).
pub struct AfalgDriver {
    name: String,
    config: Config,
    report: ProbeReport,
    caps: Capabilities,
    shared: Arc<Shared>,
    pool: Option<Arc<Pool>>,
}

impl fmt::Debug for AfalgDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfalgDriver").field("name", &self.name).field("config", &self.config).finish()
    }
}

impl AfalgDriver {
    /// Probes the kernel with the default configuration (a worker pool).
    pub fn probe() -> Result<AfalgDriver, Unavailable> {
        AfalgDriver::with_config(NAME, Config::default()).map_err(|e| match e {
            AfalgError::Unavailable(u) => u,
            // Thread creation failing is not a kernel matter, but the caller of `probe`
            // asked for a driver or a reason; this one reads as the reason.
            other => Unavailable::ProcCrypto(other.to_string()),
        })
    }

    /// Probes the kernel and makes a driver named `name` that runs as `config` says.
    pub fn with_config(name: &str, config: Config) -> Result<AfalgDriver, AfalgError> {
        let report = probe::probe_kernel().map_err(AfalgError::Unavailable)?;
        let any_hardware = report.probed.iter().any(|p| p.class == Priority::Hardware);
        let pooled = match config.run {
            RunMode::Sync => false,
            RunMode::Pool => true,
            RunMode::ByClass => any_hardware,
        };
        let caps = capabilities_of(&report, !pooled);
        let shared = Arc::new(Shared { errors: KernelErrors::default(), pool: PoolCounters::default() });
        let pool = match pooled {
            false => None,
            true => Some(Arc::new(
                Pool::new(config.workers, config.queue, shared.clone()).map_err(AfalgError::Spawn)?,
            )),
        };
        Ok(AfalgDriver { name: name.to_owned(), config, report, caps, shared, pool })
    }

    /// What the kernel offers and what runs each algorithm.
    pub fn report(&self) -> &ProbeReport {
        &self.report
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The driver's counters.
    pub fn stats(&self) -> AfalgStats {
        let p = &self.shared.pool;
        AfalgStats {
            kernel_errors: self.shared.errors.nonzero(),
            busy: p.busy.load(Ordering::Relaxed),
            unblocks: p.unblocks.load(Ordering::Relaxed),
            callback_panics: p.callback_panics.load(Ordering::Relaxed),
        }
    }

    /// Counters of kernel errors by cause.
    pub fn kernel_errors(&self) -> &KernelErrors {
        &self.shared.errors
    }
}

/// What the probed algorithms make ocf capabilities of. Encrypt-then-MAC is claimed only if
/// every listed cipher × MAC has its authenc (ocf's `Capabilities` has one flag for it);
/// `probe_session` answers per combination anyway.
fn capabilities_of(r: &ProbeReport, synchronous: bool) -> Capabilities {
    let has = |n: Option<String>| n.is_some_and(|n| r.find(&n).is_some());
    let ciphers: Vec<CipherAlg> =
        CipherAlg::ALL.into_iter().filter(|c| has(names::cipher_name(*c).map(str::to_owned))).collect();
    let macs: Vec<MacAlg> = MacAlg::ALL.into_iter().filter(|m| has(names::mac_name(*m))).collect();
    let cipher_then_mac = !ciphers.is_empty()
        && !macs.is_empty()
        && ciphers.iter().all(|c| macs.iter().all(|m| has(names::authenc_name(*c, *m, false))));
    Capabilities {
        aeads: CipherAlg::ALL.into_iter().filter(|c| has(names::aead_name(*c).map(str::to_owned))).collect(),
        digests: DigestAlg::ALL
            .into_iter()
            .filter(|d| has(names::digest_name(*d).map(str::to_owned)))
            .collect(),
        ciphers,
        macs,
        // AF_ALG has no socket type for the kernel's compression algorithms.
        compression: Vec::new(),
        // The kernel's RSA and ECDH (akcipher, kpp) have no AF_ALG socket type, and its
        // `rng` type is a DRBG, not a source to health-test: the CPU's getrandom is the same.
        asymmetric: Vec::new(),
        random: false,
        cipher_then_mac,
        synchronous,
        named_only: false,
        multipart: false,
        synchronous_without_hint: false,
        runs: false,
    }
}

impl Driver for AfalgDriver {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        self.caps.clone()
    }

    fn probe_session(&self, params: &SessionParams) -> Option<Priority> {
        if params.multipart {
            return None;
        }
        // A MAC truncated below what the kernel's authenc accepts is still fine: authsize
        // takes any length up to the digest's.
        let alg = names::kernel_alg(params)?;
        let probed = self.report.find(&alg.name)?;
        if let Mode::Cipher { alg: CipherAlg::Null, .. } = params.mode {
            // Copying through the kernel is never better than the CPU copying.
            return Some(Priority::Software);
        }
        Some(probed.class)
    }

    fn new_session(
        &self,
        params: &SessionParams,
        ctx: SessionContext,
    ) -> Result<Box<dyn DriverSession>, Error> {
        let core =
            SessionCore::new(params, self.config.zero_copy_min).map_err(|c| self.shared.errors.record(c))?;
        let pooled = match self.config.run {
            RunMode::Sync => false,
            RunMode::Pool => true,
            RunMode::ByClass => self.probe_session(params) == Some(Priority::Hardware),
        };
        let pool = self.pool.clone().filter(|_| pooled);
        Ok(Box::new(AfalgSession { core: Arc::new(core), ctx, shared: self.shared.clone(), pool }))
    }
}

/// One session: its kernel state, and where its requests run.
struct AfalgSession {
    core: Arc<SessionCore>,
    ctx: SessionContext,
    shared: Arc<Shared>,
    /// `None`: synchronous.
    pool: Option<Arc<Pool>>,
}

impl DriverSession for AfalgSession {
    fn process(&self, mut req: Request, _hint: Hint) -> Processed {
        match &self.pool {
            Some(pool) => {
                pool.submit(Job { core: self.core.clone(), req, ctx: self.ctx.clone() }, &self.shared)
            }
            None => Processed::Done(match self.core.run(&mut req, &self.shared.errors) {
                Ok(()) => Ok(req),
                Err(e) => Err(Failed::new(e, req)),
            }),
        }
    }
}

/// The configuration a driver name stands for: `afalg` or `afalg:<options>`
/// ([`Config::parse`]), without probing the kernel (for checking a command line early).
pub fn parse_name(name: &str) -> Result<Config, AfalgError> {
    let name = name.trim();
    match name.strip_prefix(NAME) {
        Some("") => Ok(Config::default()),
        Some(rest) => match rest.strip_prefix(':') {
            Some(spec) => Config::parse(spec).map_err(AfalgError::BadName),
            None => Err(AfalgError::BadName(format!("{name:?} is not afalg or afalg:<options>"))),
        },
        None => Err(AfalgError::BadName(format!("{name:?} is not afalg or afalg:<options>"))),
    }
}

/// Whether a driver name is this driver's (`afalg` or `afalg:…`), good or bad.
pub fn is_afalg_name(name: &str) -> bool {
    let name = name.trim();
    name == NAME || name.strip_prefix(NAME).is_some_and(|r| r.starts_with(':'))
}

/// Makes the driver a name stands for: `afalg` or `afalg:<options>` ([`Config::parse`]).
pub fn driver_named(name: &str) -> Result<AfalgDriver, AfalgError> {
    AfalgDriver::with_config(name.trim(), parse_name(name)?)
}

/// Registers the driver `name` stands for (see [`driver_named`]); returns it.
pub fn register_named(fw: &Framework, name: &str) -> Result<Arc<AfalgDriver>, AfalgError> {
    let driver = Arc::new(driver_named(name)?);
    fw.register(driver.clone()).map_err(AfalgError::Framework)?;
    Ok(driver)
}

/// Registers the default `afalg` driver.
pub fn register(fw: &Framework) -> Result<Arc<AfalgDriver>, AfalgError> {
    register_named(fw, NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_into_configs_and_bad_ones_say_why() {
        assert_eq!(Config::parse("").unwrap().run, RunMode::ByClass);
        assert_eq!(Config::parse("sync").unwrap().run, RunMode::Sync);
        assert_eq!(Config::parse("pool").unwrap().run, RunMode::Pool);
        let c = Config::parse("workers=3,queue=9,zero_copy=4096").unwrap();
        assert_eq!((c.workers, c.queue, c.zero_copy_min, c.run), (3, 9, 4096, RunMode::Pool));
        assert_eq!(Config::parse("sync,workers=3").unwrap().run, RunMode::Sync);
        assert_eq!(Config::parse("zero_copy=off").unwrap().zero_copy_min, usize::MAX);
        let e = Config::parse("workers=0").unwrap_err();
        assert!(e.contains("workers=0"), "{e}");
        let e = Config::parse("turbo").unwrap_err();
        assert!(e.contains("unknown afalg option `turbo`"), "{e}");
        for bad in ["afalgx", "soft", "afalg:turbo"] {
            match driver_named(bad) {
                Err(AfalgError::BadName(why)) => assert!(!why.is_empty()),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
