//! The driver interface: what a crypto device (or CPU library) implements to plug into ocf.
//!
//! After FreeBSD's crypto(9) driver methods:
//! - [`Driver::probe_session`] answers whether the driver can serve a session and how well,
//!   as a [`Priority`] class (FreeBSD's CRYPTODEV_PROBE_HARDWARE / ACCEL_SOFTWARE / SOFTWARE);
//! - [`Driver::new_session`] sets a session up and returns a [`DriverSession`] whose
//!   `process` method is the processing function, chosen once per session;
//! - [`Driver::free_session`] tears it down (keys must be wiped);
//! - [`DriverSession::process`] takes a request and either finishes it, accepts it for
//!   later completion through [`SessionContext::done`], or refuses it as momentarily
//!   [`Processed::Busy`] (the paper's ERESTART).
//!
//! A request that fails by the driver's own fault (a device error, a kernel error) fails
//! with [`Error::DriverFailure`] when its buffer is as it came — a routed session then
//! redoes it once on another driver — or with [`Error::DriverFailureMidway`], its buffer
//! wiped, when the driver had already begun writing it (the input is gone; it is not
//! redone). Either way routing counts the driver as failing until it succeeds again. A
//! driver whose own random source failed its health tests answers
//! [`Error::RandomSourceFailed`], the buffer untouched: redone elsewhere the same way, and
//! the driver avoided until it succeeds again (FreeBSD's rndtest took such a source out).
//!
//! Parameters reaching a driver were validated by [`crate::SessionParams::validate`], and
//! requests by the session's request rules: a driver re-checks nothing.
//!
//! This file is the whole contract between ocf and a driver, and a leaf of the crate: it
//! uses only the leaf types (algorithms, parameters, requests, errors), never the
//! framework's internals. The two services a driver needs from the framework — completing
//! a request later and unblocking — reach it through [`SessionContext`], an opaque handle
//! whose other side (`ReturnPath`) the framework implements, so the dependency points
//! one way: the framework knows the contract, the contract knows nothing of the framework.

use std::sync::Arc;

use crate::alg::{CipherAlg, CompAlg, DigestAlg, MacAlg};
use crate::asym::AsymAlg;
use crate::error::Error;
use crate::params::{Mode, SessionParams};
use crate::request::{Outcome, Request};

/// How good a driver is for a session. Higher wins; ties go to the driver with fewer
/// sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Plain software on the CPU.
    Software = 0,
    /// Software using special CPU instructions or many lanes (AES-NI, multi-buffer).
    AcceleratedSoftware = 1,
    /// A device: offload card, kernel driver, GPU.
    Hardware = 2,
}

/// What a driver can do, for listings and quick filtering.
#[derive(Clone, Debug, Default)]
pub struct Capabilities {
    pub ciphers: Vec<CipherAlg>,
    pub aeads: Vec<CipherAlg>,
    pub digests: Vec<DigestAlg>,
    pub macs: Vec<MacAlg>,
    /// Compression algorithms ([`Mode::Compress`]). Not in
    /// [`Capabilities::every_algorithm`]: a driver lists them only if it really compresses.
    pub compression: Vec<CompAlg>,
    /// Public-key algorithms ([`Mode::Asymmetric`]). Not in
    /// [`Capabilities::every_algorithm`]; a driver's `probe_session` may still refuse a key
    /// size its engine does not take.
    pub asymmetric: Vec<AsymAlg>,
    /// The driver serves random bytes ([`Mode::Random`]).
    pub random: bool,
    /// Encrypt-then-MAC sessions are supported for every cipher × MAC listed.
    pub cipher_then_mac: bool,
    /// Every request is finished inside `process` (returns [`Processed::Done`] or
    /// [`Processed::Busy`], never [`Processed::Pending`]). Lets the framework skip all
    /// asynchronous completion machinery (FreeBSD's CRYPTOCAP_F_SYNC).
    pub synchronous: bool,
    /// The registry never picks this driver by itself: it serves only sessions that name it
    /// ([`crate::Framework::new_session_on`]). For drivers whose results are not real
    /// cryptography — the null driver that measures the framework alone, fault injectors.
    pub named_only: bool,
    /// The driver processes multi-part messages ([`crate::Part`]), keeping its state for a
    /// message in the request ([`crate::PartState`]) between parts.
    pub multipart: bool,
    /// Every request that comes *without* the "more follow" hint is finished inside
    /// `process` (`Done` or `Busy`, never `Pending`); with the hint it may be held. Such a
    /// request then takes the framework's synchronous path (no credit, no completion
    /// target): the multi-buffer driver, whose lone requests cost no more than the CPU's.
    pub synchronous_without_hint: bool,
    /// The driver takes a whole run of requests in one call and finishes every one before
    /// it returns ([`DriverSession::process_run`]), though it may hold requests given one
    /// at a time with the hint. For drivers whose cost falls with the run's length (the
    /// multi-buffer driver); a synchronous driver gets runs through the default
    /// `process_run` without it.
    pub runs: bool,
}

impl Capabilities {
    /// Every cipher, digest and MAC ocf defines, in every mode but compression (set the
    /// flags, and compression where the driver really compresses, with struct update syntax).
    pub fn every_algorithm() -> Capabilities {
        Capabilities {
            ciphers: CipherAlg::ALL.into_iter().filter(|c| !c.is_aead()).collect(),
            aeads: CipherAlg::ALL.into_iter().filter(|c| c.is_aead()).collect(),
            digests: DigestAlg::ALL.to_vec(),
            macs: MacAlg::ALL.to_vec(),
            compression: Vec::new(),
            asymmetric: Vec::new(),
            random: false,
            cipher_then_mac: true,
            synchronous: false,
            named_only: false,
            multipart: false,
            synchronous_without_hint: false,
            runs: false,
        }
    }

    /// Whether the parameters name only algorithms this driver lists.
    pub fn covers(&self, p: &SessionParams) -> bool {
        if p.multipart && !self.multipart {
            return false;
        }
        match &p.mode {
            Mode::Cipher { alg, .. } => self.ciphers.contains(alg),
            Mode::Digest { alg } => self.digests.contains(alg),
            Mode::Mac { alg, .. } => self.macs.contains(alg),
            Mode::Aead { alg, .. } => self.aeads.contains(alg),
            Mode::CipherThenMac { cipher, mac, .. } => {
                self.cipher_then_mac && self.ciphers.contains(cipher) && self.macs.contains(mac)
            }
            Mode::Compress { alg } => self.compression.contains(alg),
            Mode::Asymmetric { alg, .. } => self.asymmetric.contains(alg),
            Mode::Random => self.random,
        }
    }
}

/// The dispatcher's hint to a driver (the paper's "more follow" hint for batching).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hint {
    /// More requests follow immediately; a device may wait before kicking its ring.
    pub more: bool,
}

/// What `process` did with a request.
#[must_use]
pub enum Processed {
    /// Finished now; here is the outcome.
    Done(Outcome),
    /// Accepted; the driver will call [`SessionContext::done`] later.
    Pending,
    /// Momentarily full; the request comes back untouched (ERESTART).
    Busy(Request),
}

/// A crypto driver. Implementations must be thread-safe: the framework calls them from any
/// submitting thread.
pub trait Driver: Send + Sync + 'static {
    /// A short unique name (`soft`, `sim`, `afalg`, …).
    fn name(&self) -> &str;

    fn capabilities(&self) -> Capabilities;

    /// Whether and how well this driver serves these (already validated) parameters.
    /// `None`: unsupported.
    fn probe_session(&self, params: &SessionParams) -> Option<Priority>;

    /// Creates the driver's per-session state. `ctx` is how an asynchronous driver
    /// completes this session's requests.
    fn new_session(
        &self,
        params: &SessionParams,
        ctx: SessionContext,
    ) -> Result<Box<dyn DriverSession>, Error>;

    /// Destroys a session. The default drops it; the driver session's `Drop` must wipe keys.
    fn free_session(&self, session: Box<dyn DriverSession>) {
        drop(session)
    }
}

/// A driver's state for one session; its `process` is the processing function chosen once
/// when the session was made.
pub trait DriverSession: Send + Sync {
    fn process(&self, req: Request, hint: Hint) -> Processed;

    /// A run of requests that a client had in hand together ([`crate::Session::run_batch`]):
    /// the batch passed as a value, so a driver that works on many buffers at once needs
    /// neither to hold requests nor to be told when the last one comes. The driver takes
    /// every request out of `run` and pushes each outcome to `done` (in any order) before
    /// it returns: no `Pending`, no `Busy`.
    ///
    /// The framework calls it only for a synchronous driver or one whose capabilities say
    /// [`Capabilities::runs`]. The default, right for a synchronous driver, gives `process`
    /// one request at a time with the hint that more follow on all but the last.
    fn process_run(&self, run: &mut Vec<Request>, done: &mut Vec<Outcome>) {
        let n = run.len();
        for (i, req) in run.drain(..).enumerate() {
            match self.process(req, Hint { more: i + 1 < n }) {
                Processed::Done(o) => done.push(o),
                Processed::Busy(r) => done.push(Err(crate::request::Failed::new(
                    Error::DriverFailure("a driver answered Busy inside a run"),
                    r,
                ))),
                // A synchronous driver that kept a request broke its contract; the run still
                // answers once per request (the request itself is with the driver).
                Processed::Pending => done.push(Err(crate::request::Failed::new(
                    Error::DriverFailure("a synchronous driver left a request pending"),
                    Request::new(crate::Op::Encrypt, Vec::new()),
                ))),
            }
        }
    }
}

/// The framework's side of a [`SessionContext`]: where a session's requests go back to.
/// Implemented by the framework (one per binding of a session to a driver); a driver never
/// sees it, only the handle.
pub(crate) trait ReturnPath: Send + Sync {
    /// Completes a request that `process` answered with [`Processed::Pending`].
    fn done(&self, outcome: Outcome);
    /// The driver has room again after answering [`Processed::Busy`].
    fn unblock(&self);
    /// Runs `f` with completions for return workers collected and handed over together
    /// afterwards (also if `f` panics).
    fn collecting(&self, f: &mut dyn FnMut());
}

/// Given to a driver with each new session: the way back into the framework for requests
/// completed asynchronously (FreeBSD's `crypto_done`).
#[derive(Clone)]
pub struct SessionContext {
    path: Arc<dyn ReturnPath>,
}

impl SessionContext {
    pub(crate) fn new(path: Arc<dyn ReturnPath>) -> SessionContext {
        SessionContext { path }
    }

    /// Completes a request that `process` answered with [`Processed::Pending`]: accounts it
    /// and delivers it to its callback, waiter or future.
    pub fn done(&self, outcome: Outcome) {
        self.path.done(outcome)
    }

    /// Completes many requests at once — an interrupt that reports several finished
    /// descriptors. Same as calling [`SessionContext::done`] for each, except that the
    /// callbacks bound for return workers are handed over together (one queue lock and at
    /// most one wake-up per return worker, instead of one per request).
    ///
    /// If an immediate callback panics, the rest of the batch is still delivered, and then
    /// the (first) panic continues on this thread, as it would from `done`.
    pub fn done_batch(items: impl IntoIterator<Item = (SessionContext, Outcome)>) {
        let mut items = items.into_iter().peekable();
        // Collection is per thread, so any of the batch's contexts can open it.
        let Some(path) = items.peek().map(|(ctx, _)| ctx.path.clone()) else { return };
        let mut panicked = None;
        path.collecting(&mut || {
            for (ctx, outcome) in items.by_ref() {
                let delivered =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ctx.path.done(outcome)));
                if let Err(p) = delivered {
                    panicked.get_or_insert(p);
                }
            }
        });
        if let Some(p) = panicked {
            std::panic::resume_unwind(p);
        }
    }

    /// Tells the framework that this session's driver, which answered
    /// [`Processed::Busy`], can accept requests again (FreeBSD's `crypto_unblock`). The
    /// framework then resumes handing it the requests it queued meanwhile. A driver that
    /// returns Busy must call this once it has room; extra calls are harmless.
    pub fn unblock(&self) {
        self.path.unblock()
    }
}
