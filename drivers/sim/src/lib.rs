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
//! ## Public-key engine and random numbers
//!
//! ```text
//!  symmetric sessions ──▶ Device (ring=, setup + bytes/rate)   ── device thread 1
//!  public-key sessions ─┬▶ Device (pk_ring=, a time per class) ── device thread 2
//!  random sessions ─────┘     └ CardRng: noise ─▶ SP 800-90B tests ─▶ payload
//! ```
//!
//! A profile with a public-key engine ([`profile`]'s module docs, [`pk`]) has a second
//! device of the same model — its own queue that answers Busy when full and unblocks when
//! it drains, its own serial engine timed by a table of per-operation times, its own
//! interrupts — and a second device thread, so a long RSA signature does not hold up the
//! cipher engine's completions. Only the classes in the table are offered: the probe
//! refuses other algorithms and key sizes, and the framework routes them elsewhere.
//! A profile with a random number generator ([`rng`]) serves `Mode::Random` from a
//! simulated noise source through the SP 800-90B health tests, on the public-key queue;
//! [`SimDriver::rng_fault`] makes the source stuck or biased while the card runs, and
//! [`SimStats::rng`] counts what the tests saw. With `cpu=N` both device threads run on
//! CPU N.
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
pub mod pk;
pub mod profile;
pub mod rng;

use std::fmt;
use std::sync::Arc;
use std::thread::JoinHandle;

use ocf::{
    Capabilities, Driver, DriverSession, Error, Framework, Hint, Mode, Priority, Processed, Request,
    SessionContext, SessionParams,
};
use ocf_soft::SoftDriver;

use crate::device::{Device, DeviceConfig, SessionEngine, Work};
pub use crate::pk::{PkClass, PkTable};
use crate::profile::Cost;
pub use crate::profile::{Coalesce, PkEngine, ProfileError, RngSpec, SimProfile, WorkKind, PROFILE_NAMES};
use crate::rng::CardRng;
pub use crate::rng::{RngFault, RngStats};

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
    /// The public-key engine's counters (its own queue), if the card has one; the fields
    /// above are the symmetric engine's.
    pub pk: Option<PkStats>,
    /// The random number generator's health counters, if the card has one.
    pub rng: Option<RngStats>,
}

/// Counters of a card's public-key engine (random requests included: they share its
/// queue). The fields mean what [`SimStats`]' of the same names do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PkStats {
    pub ring_size: usize,
    pub accepted: u64,
    pub busy: u64,
    pub unblocks: u64,
    pub interrupts: u64,
    pub completed: u64,
    pub ring_high_water: usize,
    pub in_flight: usize,
    pub late_total_ns: u64,
    pub late_max_ns: u64,
    pub injected_failures: u64,
}

impl PkStats {
    fn of(s: &SimStats) -> PkStats {
        PkStats {
            ring_size: s.ring_size,
            accepted: s.accepted,
            busy: s.busy,
            unblocks: s.unblocks,
            interrupts: s.interrupts,
            completed: s.completed,
            ring_high_water: s.ring_high_water,
            in_flight: s.in_flight,
            late_total_ns: s.late_total_ns,
            late_max_ns: s.late_max_ns,
            injected_failures: s.injected_failures,
        }
    }
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

/// A simulated crypto card: an [`ocf::Driver`] with a device thread behind it (two with a
/// public-key engine).
pub struct SimDriver {
    name: String,
    profile: SimProfile,
    /// The symmetric engine.
    device: Engine,
    /// The public-key engine (random requests too), if the profile has one.
    pk: Option<Engine>,
    rng: Option<Arc<CardRng>>,
}

/// One engine: the device model and the thread that plays it.
struct Engine {
    device: Arc<Device>,
    thread: Option<JoinHandle<()>>,
}

impl Engine {
    /// Makes a device and starts its thread, on host CPU `cpu` if given.
    fn start(config: DeviceConfig, cpu: Option<usize>, name: &str) -> Result<Engine, SimError> {
        let device = Arc::new(Device::new(config));
        let on_device = device.clone();
        let (pinned_tx, pinned) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
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
        Ok(Engine { device, thread: Some(thread) })
    }
}

impl Drop for Engine {
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

impl SimDriver {
    /// Makes a card and starts its device threads.
    pub fn new(name: &str, profile: SimProfile) -> Result<SimDriver, SimError> {
        let cpu = profile.cpu();
        let config = DeviceConfig {
            ring: profile.ring(),
            coalesce: profile.coalesce(),
            corrupt: profile.corrupt_every(),
        };
        let device = Engine::start(config, cpu, "ocf-sim")?;
        // The public-key engine raises an interrupt per completion: its operations take
        // tens of microseconds or more, where coalescing would only add latency. `corrupt=`
        // is the cipher engine's fault only.
        let pk = match profile.pk() {
            Some(pk) => Some(Engine::start(
                DeviceConfig { ring: pk.ring, coalesce: None, corrupt: None },
                cpu,
                "ocf-sim-pk",
            )?),
            None => None,
        };
        let rng = profile.rng().map(|r| Arc::new(CardRng::new(r.seed)));
        Ok(SimDriver { name: name.to_owned(), profile, device, pk, rng })
    }

    pub fn profile(&self) -> &SimProfile {
        &self.profile
    }

    /// The card's counters.
    pub fn stats(&self) -> SimStats {
        SimStats {
            pk: self.pk.as_ref().map(|e| PkStats::of(&e.device.stats())),
            rng: self.rng.as_ref().map(|r| r.stats()),
            ..self.device.device.stats()
        }
    }

    /// Switches a fault of the card's random number generator on (`Some`) or off (`None`),
    /// as the card runs: the next raw bytes its noise source makes are stuck or biased
    /// ([`RngFault`]). The health tests take the source out when they catch it; it comes
    /// back once the fault is off and a start-up test passes. Does nothing on a card
    /// without a generator.
    pub fn rng_fault(&self, fault: Option<RngFault>) {
        if let Some(rng) = &self.rng {
            rng.set_fault(fault);
        }
    }

    fn engines(&self) -> impl Iterator<Item = &Device> {
        std::iter::once(&self.device).chain(self.pk.as_ref()).map(|e| &*e.device)
    }

    /// Stalls the card (a fault for routing tests): from now on it fetches nothing and
    /// completes nothing, until [`SimDriver::resume`]. Requests it has accepted stay in its
    /// ring, and new ones are accepted while there is room; a full ring answers Busy as
    /// usual. An interrupt already being delivered when this is called still finishes.
    /// Pausing a paused card does nothing.
    pub fn pause(&self) {
        self.engines().for_each(Device::pause);
    }

    /// Ends a [`SimDriver::pause`]: the card goes on, and everything it accepted completes
    /// with its real result. The model's clock stood still while the card was paused (what
    /// was due then is due as much later). Resuming a running card does nothing.
    pub fn resume(&self) {
        self.engines().for_each(Device::resume);
    }

    /// Turns the card's hardware fault on or off (a fault for routing tests). While on,
    /// every request the engine takes up is completed as
    /// `Err(Failed::new(Error::DriverFailure("sim: injected device fault"), req))` with its
    /// buffers untouched (no result is computed), counted in
    /// [`SimStats::injected_failures`]; requests whose results were computed before it was
    /// turned on complete normally.
    pub fn fail(&self, on: bool) {
        self.engines().for_each(|d| d.fail(on));
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
            asymmetric: self.profile.pk().map(|pk| pk.table.algorithms()).unwrap_or_default(),
            random: self.rng.is_some(),
            ..Capabilities::every_algorithm()
        }
    }

    fn probe_session(&self, params: &SessionParams) -> Option<Priority> {
        match &params.mode {
            Mode::Asymmetric { .. } => self.pk_time(params).map(|_| Priority::Hardware),
            Mode::Random => self.rng.as_ref().map(|_| Priority::Hardware),
            _ => Some(Priority::Hardware),
        }
    }

    fn new_session(
        &self,
        params: &SessionParams,
        ctx: SessionContext,
    ) -> Result<Box<dyn DriverSession>, Error> {
        let (device, engine) = match &params.mode {
            Mode::Random => {
                let (Some(pk), Some(rng), Some(spec)) = (&self.pk, &self.rng, self.profile.rng()) else {
                    return Err(Error::DriverFailure("sim: the card has no random number generator"));
                };
                let cost = Cost::Bytes { setup_ns: 0, rate: spec.rate };
                (&pk.device, SessionEngine { work: Work::Random(rng.clone()), cost })
            }
            mode => {
                let (device, cost) = match mode {
                    Mode::Asymmetric { alg, .. } => match (&self.pk, self.pk_time(params)) {
                        (Some(pk), Some(ns)) => (&pk.device, Cost::Fixed(ns)),
                        _ => return Err(Error::UnsupportedAsym(*alg)),
                    },
                    _ => {
                        let p = &self.profile;
                        let rate = match WorkKind::of(params) {
                            WorkKind::Cipher => p.rate(),
                            WorkKind::Hash => p.hash_rate(),
                        };
                        (&self.device.device, Cost::Bytes { setup_ns: p.setup_ns(), rate })
                    }
                };
                // The software session holds (and wipes) the keys; this driver keeps no
                // copy. It is synchronous, so the context it is given is never used.
                let soft = SoftDriver::new().new_session(params, ctx.clone())?;
                (device, SessionEngine { work: Work::Soft(soft), cost })
            }
        };
        Ok(Box::new(SimSession { device: device.clone(), ctx, engine: Arc::new(engine) }))
    }
}

impl SimDriver {
    /// The engine time of an asymmetric session's operations, if the card offers its
    /// algorithm at its key size.
    fn pk_time(&self, params: &SessionParams) -> Option<u64> {
        let Mode::Asymmetric { alg, key } = &params.mode else { return None };
        self.profile.pk_time(PkClass::of(*alg, key, params.key_bits())?)
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
