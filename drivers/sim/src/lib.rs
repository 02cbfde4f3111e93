//! # ocf-sim — a simulated crypto accelerator
//!
//! A driver that behaves like the PCI offload cards of Leffler's "Cryptographic Device
//! Support for FreeBSD" (BSDCon 2003: Hifn 7951/7811, Broadcom 5822) or a modern one, so that the framework's dispatch, batching and flow
//! control can be exercised and measured on a machine without such a card. Its results are
//! real (computed by the software driver); only its timing is simulated.
//!
//! ## The device model
//!
//! ```text
//!  process(req, hint) ──► descriptor ring (N slots) ──doorbell──► engine ──► interrupt
//!     │   full: Busy            posted │ fetched       serial, timed    ctx.done(outcome)
//!     └── (remembered) ◄──────────────────────────── slot freed: ctx.unblock()
//! ```
//!
//! - **Ring.** The card holds at most N requests (`ring=`), from the moment `process`
//!   posts one until its completion is delivered. `process` never allocates (the ring is
//!   allocated when the card is made) and takes one short lock.
//! - **Doorbell.** Posting is not telling: the device sees new descriptors only when the
//!   doorbell rings. `process` rings it unless the dispatcher's [`ocf::Hint::more`] says
//!   more requests follow at once; it rings anyway when the ring becomes full or a request
//!   is refused. A descriptor left without a doorbell for 1 ms is fetched anyway (counted
//!   as a doorbell timeout), so a dispatcher that promised more and sent nothing cannot
//!   stall the card.
//! - **Engine and timing model.** One serial engine. Request *i* finishes at
//!   `t_i = max(t_{i-1}, doorbell_i) + setup + bytes_i / rate`, where `doorbell_i` is when
//!   the doorbell covering it rang (its arrival, unless the dispatcher held the doorbell
//!   back: a card cannot start on a descriptor it has not been told about), `bytes` is the
//!   payload length, and `rate` is the profile's `hash_rate` for digests and MACs. The
//!   times are absolute: a device thread that wakes late completes everything already
//!   due, and the lateness does not carry over to later requests.
//! - **Real results, simulated time.** The device thread computes each result with an
//!   `ocf-soft` session as soon as it fetches the descriptor, then waits for the modelled
//!   time: it sleeps with a timer slack of 1 ns, wakes early by the wake-up latency it has
//!   measured on itself (30-45 µs on the reference VM), and spins at most the last 4 µs.
//!   The card can be no faster than one CPU thread computing its results: where the model
//!   is faster (a `qat-like` card doing 3DES), completions are late, which
//!   [`SimStats::late_total_ns`] shows.
//! - **Interrupts.** Completions are delivered by "interrupts" on the device thread, each
//!   freeing its slots and calling [`ocf::SessionContext::done`] for every request it
//!   carries. Without coalescing an interrupt fires when a completion is due; with
//!   coalescing (`coalesce=N`, `coalesce_time=T`) when N are due or the oldest has waited
//!   T, whichever comes first.
//! - **Flow control.** A full ring answers [`ocf::Processed::Busy`] with the request
//!   untouched (FreeBSD's ERESTART) and remembers it; the next interrupt that frees a slot
//!   calls [`ocf::SessionContext::unblock`] once (FreeBSD's `crypto_unblock`), as the hifn
//!   and ubsec drivers do.
//! - **Faults** (for testing what a framework does when a card goes wrong; routing tests
//!   use them): [`SimDriver::pause`] stalls the card — it fetches nothing and completes
//!   nothing, its ring fills and answers Busy — and [`SimDriver::resume`] lets it go on
//!   with everything it accepted, the model's clock having stood still meanwhile;
//!   [`SimDriver::fail`] makes it fail every request it takes up with
//!   `Error::DriverFailure("sim: injected device fault")`, buffers untouched, as a card
//!   reporting a hardware fault. [`SimStats::paused`] and
//!   [`SimStats::injected_failures`] show them. (`corrupt=N` in a profile is the other
//!   fault: wrong results reported as right.)
//! - **Shutdown.** When the driver is dropped (after it is unregistered and its last
//!   session is freed) the device fetches, computes and delivers everything it holds at
//!   once, without waiting for the model's times, and its thread is joined. (ocf's session
//!   contexts hold their driver, so the last reference can also go on the device thread
//!   itself, as it drops a delivered request's context: that thread cannot join itself
//!   and ends on its own once it has delivered everything.)
//!
//! Profiles ([`SimProfile`]): `hifn7951`, `hifn7811` and `bcm5822` are fitted to that
//! paper's Table 5; `qat-like` is a modern card; custom ones are written
//! `ring=16,setup=20us,rate=400MB/s`. See [`profile`] and the crate's README.
//!
//! Names: [`register`] names the first card of a profile string `sim:<spec>` and further
//! cards of the same string `sim:<spec>#2`, `#3`, … (the first free name), so that two
//! identical cards can serve one framework; [`register_named`] takes the name itself
//! (`sim:bcm5822`), as tools that take driver names from their users do.
//!
//! ```
//! let fw = ocf::Framework::new();
//! let name = ocf_sim::register(&fw, "bcm5822")?;
//! assert_eq!(name, "sim:bcm5822");
//! let sha1 = fw.new_session_on(&name, &ocf::SessionParams::digest(ocf::DigestAlg::Sha1))?;
//! let done = sha1.run(ocf::Request::new(ocf::Op::ComputeDigest, b"abc".to_vec()))?;
//! assert_eq!(done.tag()[..4], [0xa9, 0x99, 0x3e, 0x36]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod device;
pub mod profile;

use std::fmt;
use std::sync::Arc;
use std::thread::JoinHandle;

use ocf::{
    Capabilities, Driver, DriverSession, Error, Framework, Hint, Priority, Processed, Request,
    SessionContext, SessionParams,
};
use ocf_soft::SoftDriver;

use crate::device::{Device, SessionEngine};
pub use crate::profile::{Coalesce, ProfileError, SimProfile, WorkKind, PROFILE_NAMES};

/// The prefix of the names [`register`] gives: `sim:<profile string>`.
pub const NAME_PREFIX: &str = "sim:";

/// Counters of one simulated card.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Ring slots.
    pub ring_size: usize,
    /// Requests accepted into the ring (answered Pending).
    pub accepted: u64,
    /// Requests refused because the ring was full (answered Busy).
    pub busy: u64,
    /// `unblock` calls made after a Busy period.
    pub unblocks: u64,
    /// Doorbells rung by submitters (each covers one or more descriptors).
    pub doorbells: u64,
    /// Descriptors fetched because no doorbell came within 1 ms (each time covers all
    /// that were waiting).
    pub doorbell_timeouts: u64,
    /// Interrupts raised (each delivers one or more completions).
    pub interrupts: u64,
    /// Completions delivered.
    pub completed: u64,
    /// The most slots ever in use at once.
    pub ring_high_water: usize,
    /// Slots in use now.
    pub in_flight: usize,
    /// Sum over completions of how much later than the model they were delivered.
    pub late_total_ns: u64,
    /// The latest an interrupt was raised after its modelled time.
    pub late_max_ns: u64,
    /// Completion callbacks that panicked (the device carried on).
    pub callback_panics: u64,
    /// The card is paused ([`SimDriver::pause`]).
    pub paused: bool,
    /// Requests completed with the injected fault ([`SimDriver::fail`]); also counted in
    /// `completed`.
    pub injected_failures: u64,
}

/// Why a simulated card could not be made or registered.
#[derive(Debug)]
pub enum SimError {
    /// The profile string is wrong.
    Profile(ProfileError),
    /// The device thread could not be started.
    Spawn(std::io::Error),
    /// The device thread could not be pinned to the profile's `cpu=N`.
    Cpu(String),
    /// The framework refused the driver.
    Framework(Error),
    /// A driver name given to [`register_named`] is not `sim:<profile>`.
    NotSim(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Profile(e) => write!(f, "bad sim device profile: {e}"),
            SimError::Spawn(e) => write!(f, "cannot start the sim device thread: {e}"),
            SimError::Cpu(why) => write!(f, "cannot run the sim device thread on that CPU: {why}"),
            SimError::Framework(e) => e.fmt(f),
            SimError::NotSim(name) => {
                write!(f, "{name:?} is not a driver that can be added (a simulated card is sim:<profile>)")
            }
        }
    }
}

impl std::error::Error for SimError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SimError::Profile(e) => Some(e),
            SimError::Spawn(e) => Some(e),
            SimError::Framework(e) => Some(e),
            SimError::NotSim(_) | SimError::Cpu(_) => None,
        }
    }
}

impl From<ProfileError> for SimError {
    fn from(e: ProfileError) -> SimError {
        SimError::Profile(e)
    }
}

/// Makes a card from a profile string and registers it; returns its name: `sim:<spec>` for
/// the first card of a spec, `sim:<spec>#2`, `#3`, … (the first free name) for more cards of
/// the same spec. Nothing is registered if the string is wrong.
pub fn register(fw: &Framework, spec: &str) -> Result<String, SimError> {
    register_driver(fw, spec).map(|d| d.name().to_owned())
}

/// As [`register`], and returns the driver too, for its [`SimDriver::stats`] and its faults
/// ([`SimDriver::pause`], [`SimDriver::fail`]). Holding it keeps the card (and its thread)
/// alive after it is unregistered.
pub fn register_driver(fw: &Framework, spec: &str) -> Result<Arc<SimDriver>, SimError> {
    let spec = spec.trim();
    let profile = SimProfile::parse(spec)?;
    let base = format!("{NAME_PREFIX}{spec}");
    let mut card = SimDriver::new(&base, profile)?;
    loop {
        card.name = first_free_name(fw, &base);
        let driver = Arc::new(card);
        match fw.register(driver.clone()) {
            Ok(()) => return Ok(driver),
            // Another thread took the name between the look and the registration: the
            // framework dropped its reference, so the card is ours again; try the next name.
            Err(Error::DuplicateDriver(name)) => match Arc::try_unwrap(driver) {
                Ok(again) => card = again,
                Err(_) => return Err(SimError::Framework(Error::DuplicateDriver(name))),
            },
            Err(e) => return Err(SimError::Framework(e)),
        }
    }
}

/// `base` if no registered driver has that name, else `base#2`, `base#3`, …, the first free.
fn first_free_name(fw: &Framework, base: &str) -> String {
    let taken: Vec<String> = fw.drivers().into_iter().map(|d| d.name).collect();
    let free = |name: &String| !taken.contains(name);
    std::iter::once(base.to_owned())
        .chain((2..).map(|n| format!("{base}#{n}")))
        .find(free)
        .unwrap_or_else(|| base.to_owned())
}

/// Registers the driver a name stands for: `sim:<profile>` makes and registers a card of that
/// profile ([`register`]); returns the name it got. For tools that take driver names from
/// their users (`ipsecd --driver`, the OpenSSL provider's `drivers =`).
pub fn register_named(fw: &Framework, name: &str) -> Result<String, SimError> {
    match name.trim().strip_prefix(NAME_PREFIX) {
        Some(spec) => register(fw, spec),
        None => Err(SimError::NotSim(name.trim().to_owned())),
    }
}

/// A simulated crypto card: an [`ocf::Driver`] with a device thread behind it.
pub struct SimDriver {
    name: String,
    device: Arc<Device>,
    thread: Option<JoinHandle<()>>,
}

impl SimDriver {
    /// Makes a card and starts its device thread.
    pub fn new(name: &str, profile: SimProfile) -> Result<SimDriver, SimError> {
        let cpu = profile.cpu();
        let device = Arc::new(Device::new(profile));
        let on_device = device.clone();
        let (pinned_tx, pinned) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("ocf-sim".to_owned())
            .spawn(move || {
                let pinned = cpu.map_or(Ok(()), device::pin_to_cpu);
                let ok = pinned.is_ok();
                let _ = pinned_tx.send(pinned);
                if ok {
                    on_device.run()
                }
            })
            .map_err(SimError::Spawn)?;
        if let Ok(Err(why)) = pinned.recv() {
            let _ = thread.join();
            return Err(SimError::Cpu(why));
        }
        Ok(SimDriver { name: name.to_owned(), device, thread: Some(thread) })
    }

    pub fn profile(&self) -> &SimProfile {
        &self.device.profile
    }

    /// The card's counters.
    pub fn stats(&self) -> SimStats {
        self.device.stats()
    }

    /// Stalls the card (a fault for routing tests): from now on it fetches nothing and
    /// completes nothing, until [`SimDriver::resume`]. Requests it has accepted stay in its
    /// ring, and new ones are accepted while there is room; a full ring answers Busy as
    /// usual. An interrupt already being delivered when this is called still finishes.
    /// Pausing a paused card does nothing.
    pub fn pause(&self) {
        self.device.pause();
    }

    /// Ends a [`SimDriver::pause`]: the card goes on, and everything it accepted completes
    /// with its real result. The model's clock stood still while the card was paused (what
    /// was due then is due as much later). Resuming a running card does nothing.
    pub fn resume(&self) {
        self.device.resume();
    }

    /// Turns the card's hardware fault on or off (a fault for routing tests). While on,
    /// every request the engine takes up is completed as
    /// `Err(Failed::new(Error::DriverFailure("sim: injected device fault"), req))` with its
    /// buffers untouched (no result is computed), counted in
    /// [`SimStats::injected_failures`]; requests whose results were computed before it was
    /// turned on complete normally.
    pub fn fail(&self, on: bool) {
        self.device.fail(on);
    }
}

impl fmt::Debug for SimDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimDriver").field("name", &self.name).field("profile", self.profile()).finish()
    }
}

impl Driver for SimDriver {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        // Multi-part messages: the software session computes every part and its state
        // travels in the request; the card model charges each part as a request of its own,
        // as a real card would (a setup per descriptor).
        Capabilities {
            synchronous: false,
            named_only: false,
            multipart: true,
            ..Capabilities::every_algorithm()
        }
    }

    fn probe_session(&self, _params: &SessionParams) -> Option<Priority> {
        Some(Priority::Hardware)
    }

    fn new_session(
        &self,
        params: &SessionParams,
        ctx: SessionContext,
    ) -> Result<Box<dyn DriverSession>, Error> {
        // The software session holds (and wipes) the keys; this driver keeps no copy. It is
        // synchronous, so the context it is given is never used.
        let soft = SoftDriver::new().new_session(params, ctx.clone())?;
        let engine = Arc::new(SessionEngine { soft, kind: WorkKind::of(params) });
        Ok(Box::new(SimSession { device: self.device.clone(), ctx, engine }))
    }
}

impl Drop for SimDriver {
    fn drop(&mut self) {
        self.device.shut_down();
        if let Some(thread) = self.thread.take() {
            // The last reference can go from the device thread itself, when a completion
            // callback drops the last session: that thread then finishes the shutdown on
            // its own once the callback returns.
            if thread.thread().id() != std::thread::current().id() {
                // A device thread that panicked has nothing left to finish.
                let _ = thread.join();
            }
        }
    }
}

/// One session on the card.
struct SimSession {
    device: Arc<Device>,
    ctx: SessionContext,
    engine: Arc<SessionEngine>,
}

impl DriverSession for SimSession {
    fn process(&self, req: Request, hint: Hint) -> Processed {
        self.device.post(req, hint, &self.ctx, &self.engine)
    }
}

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;
