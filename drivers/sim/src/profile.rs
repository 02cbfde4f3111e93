//! Device profiles: the numbers that make the simulated card behave like a particular card.
//!
//! A profile is a ring size, a timing model (`setup + bytes / rate`, with a separate rate for
//! digests and MACs) and an optional interrupt-coalescing rule. It is written as a short
//! string so that tools can take it on the command line (`cryptotest -d sim:bcm5822`):
//!
//! ```text
//! hifn7951                        a named profile
//! hifn7951,ring=4                 a named profile with overrides
//! ring=16,setup=20us,rate=400MB/s a custom profile (ring, setup and rate are required)
//!   optional keys: hash_rate=…  coalesce=N|off  coalesce_time=…  corrupt=N  cpu=N
//!   public-key engine: pk_ring=N  pk=TIME  <class>=TIME|off   (e.g. rsa2048_sign=100us)
//!   random numbers:    rng=on|off  rng_rate=RATE  rng_seed=N
//! ```
//!
//! ## The public-key engine and the random number generator
//!
//! A card may have a second engine for public-key operations ([`crate::pk`]), as the
//! Broadcom 5822 had its modular exponentiation unit and QuickAssist has its PKE slices:
//! its own queue of `pk_ring` requests (full: Busy; drained: `unblock`), its own serial
//! engine and device thread. Each operation takes the engine a fixed time per *class*,
//! named `<algorithm><size>_<operation>` ([`PkClass::NAMES`]: `rsa2048_sign`,
//! `rsa4096_verify`, `ecdsa_p256_sign`, `ecdh_p384`, `x25519`, `ed25519_verify`,
//! `modp2048`, `modexp1024`, …). A profile string sets one class (`rsa2048_sign=80us`),
//! takes one away (`ecdh_p256=off`), or sets every class at once (`pk=0ns`, for tests
//! that want the path without the wait); a custom card needs `pk_ring` for any of it.
//! The card offers exactly the classes its table lists: a session of any other
//! algorithm or key size is refused at probe time, and the framework gives it to another
//! driver.
//!
//! `rng=on` gives the card a random number generator ([`crate::rng`]): raw output of a
//! simulated noise source, health-tested before any byte is given out. Its requests queue
//! on the public-key engine, as the 5822's did on the `ubsec` key queue (MCR2), each taking
//! `bytes / rng_rate`. `rng_seed=N` makes its output a fixed stream, for reproducible
//! tests only: a seeded card's "random" bytes are predictable.
//!
//! Named profiles' tables, beside the soft driver's time per operation on one core of the
//! reference machine (`pk_rates` below; ECDSA P-384 with SHA-384, `ModExp` with a
//! full-length exponent) and which side the table makes faster:
//!
//! | class | `bcm5822` | `qat-like` | soft | `qat-like` vs soft |
//! |---|---:|---:|---:|---|
//! | `rsa2048_sign` / `_verify` | — | 100 / 25 µs | 256-258 / 14 µs | card / CPU |
//! | `rsa3072_sign` / `_verify` | — | 300 / 35 µs | | |
//! | `rsa4096_sign` / `_verify` | — | 650 / 50 µs | 1,437-1,486 / 49 µs | card / tie |
//! | `ecdsa_p256_sign` / `_verify` | — | 40 / 90 µs | 13-14 / 37-63 µs | CPU / CPU |
//! | `ecdsa_p384_sign` / `_verify` | — | 50 / 100 µs | 65-103 / 150-215 µs | card / card |
//! | `ecdh_p256` / `ecdh_p384` | — | 70 / 80 µs | 34-50 / 111-163 µs | CPU / card |
//! | `x25519` | — | 45 µs | 20-21 µs | CPU |
//! | `ed25519_sign` / `_verify` | — | 45 / 60 µs | 6-9 / 27-38 µs | CPU / CPU |
//! | `modp2048` / `modp3072` | 32 ms / — | 150 / 400 µs | 290-293 µs / | card |
//! | `modexp512` … `modexp4096` | 0.5, 4, 32 ms, —, — | 10, 40, 250, 750, 1600 µs | 2048: 1.7-1.8 ms | card |
//! | queue (`pk_ring`) | 60 | 128 | | |
//! | random numbers | 1 MB/s | 100 MB/s | | |
//!
//! The soft column: `taskset -c 0 cargo run --release -p ocf-sim --example pk_rates`, the
//! range of two runs (medians of 3 rounds of 0.5 and 1 s, 4 threads) on a shared two-core
//! VM at load 4-6, which moves the elliptic-curve figures by up to 1.5x between runs;
//! `openssl speed` there gives RSA-2048 3,854 sign/s, i.e. 259 µs, the same. The table
//! keeps every verdict but one clear of that noise ("card": the table faster than soft by
//! 1.3x or more, "CPU": slower by 1.4x or more); RSA-4096 verify is a tie by design.
//!
//! - **`bcm5822`**: the unit did modular exponentiation only (no elliptic curves), with
//!   moduli up to 2048 bits (the `ubsec` driver's `UBS_FLAGS_BIGKEY` parts), so the card
//!   offers `ModExp` up to 2048 bits and MODP group 14, nothing else. No per-operation
//!   figure for the 5822 was found (its product brief is not in any source at hand; the
//!   BSD `ubsec(4)` pages say only "faster version of the BCM5820"); the times are an
//!   assumption of the era's rate: about 1,000 RSA-1024 private-key operations per second
//!   (two 512-bit exponentiations with the CRT, 0.5 ms each), a full-length
//!   exponentiation's cost growing with the cube of the modulus (4 ms at 1024 bits, 32 ms
//!   at 2048). Today's CPU does a 2048-bit exponentiation some 20 times faster (1.7 ms).
//!   The RNG rate (1 MB/s) is an assumption too.
//! - **`qat-like`**: a modern card's PKE engine, per operation. No per-operation figures of
//!   a QuickAssist part were at hand either: the times are assumptions, chosen so that the
//!   card wins where big-number arithmetic dominates (RSA signing, MODP, `ModExp`, the
//!   P-384 curve: 1.3-7x this machine's core) and the CPU wins where a modern library is
//!   fast and a descriptor's round trip is not negligible (RSA-2048 verify, P-256, X25519,
//!   Ed25519), with a tie between (RSA-4096 verify). No ML-KEM (no card of the kind does
//!   it) and no key generation.
//!
//! **What the simulator can honour.** The card's results are computed on its device
//! thread (see the crate docs), so it can be no faster than one CPU thread computing them.
//! Where a class's time is below the CPU's ("card" above: RSA-2048 signing at 100 µs
//! against 258 µs of CPU), the completions are late — [`crate::SimStats`]' `pk` counters
//! show by how much — and the card, measured, runs at best at the CPU's speed: a tie with
//! soft, not a win. What the card still brings is a second core: with `cpu=N` its device
//! threads run on CPU N, and a host that runs its own work on the other core has two
//! cores serving public-key requests, the card's and its own; routing (`-d auto`) should
//! find that sum, whatever the model says of each alone. Where the CPU wins, the card's
//! measured speed is at most its model's.
//!
//! `cpu=N` gives the card silicon of its own: its device thread, which computes the results,
//! runs on host CPU N only. Run the measuring process off that CPU (`taskset -c 0 cryptotest
//! … -d sim:hifn7951,cpu=1`) and a two-core machine emulates a one-core host with a card
//! whose work does not take the host's CPU, as a real card's does not. Without it the card's
//! results are computed on whatever core is free, taking CPU time from the host's own work.
//!
//! `corrupt=N` makes a faulty card: every Nth result it delivers has one byte flipped (the
//! first byte of the tag or digest if the request has a separate one, else the first byte
//! of the payload's result). It exists to prove that verification (`cryptotest --verify`,
//! the conformance suite) catches a card that returns wrong answers without an error.
//!
//! Durations take `ns`, `us` (or `µs`), `ms` or `s`; rates take `B/s`, `KB/s`, `MB/s`,
//! `GB/s` (decimal bytes) or `Kb/s`, `Mb/s`, `Gb/s` (bits). Numbers are plain decimals
//! (`1.5GB/s`); signs and exponents are refused.
//!
//! The named profiles of the 2003 cards are fitted to Table 5 of Leffler's
//! "Cryptographic Device Support for FreeBSD" (BSDCon 2003: cryptotest on FreeBSD 4.8, one
//! synchronous request at a time, so a row's time per operation is `size * 8 / Mb/s`). The
//! fit is `drivers/sim/fit/fit_table5.py`; its output, with the error at every size, is
//! `drivers/sim/fit/table5_fit.txt`.

use std::fmt;
use std::str::FromStr;

use ocf::{Mode, SessionParams};

pub use crate::pk::{PkClass, PkTable};

/// Which engine rate a request is timed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkKind {
    /// Ciphers, AEADs and cipher+MAC: timed at the profile's `rate` (Table 5's 3DES column).
    Cipher,
    /// Digests and MACs: timed at the profile's `hash_rate` (Table 5's SHA1 column).
    Hash,
}

impl WorkKind {
    /// The kind of work a session's requests are.
    pub fn of(params: &SessionParams) -> WorkKind {
        match params.mode {
            Mode::Digest { .. } | Mode::Mac { .. } => WorkKind::Hash,
            // Cipher, AEAD, cipher+MAC, and any mode ocf adds later: the cipher engine.
            _ => WorkKind::Cipher,
        }
    }
}

/// How long the engine works on one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cost {
    /// `setup + payload bytes / rate` (rate in bytes per second, never zero).
    Bytes { setup_ns: u64, rate: u64 },
    /// The same time for every request (a public-key operation).
    Fixed(u64),
}

impl Cost {
    pub(crate) fn ns(self, bytes: usize) -> u64 {
        match self {
            Cost::Bytes { setup_ns, rate } => {
                // Rates are validated non-zero; max(1) keeps the function total anyway.
                let transfer = (bytes as u128 * 1_000_000_000).div_ceil(u128::from(rate.max(1)));
                setup_ns.saturating_add(u64::try_from(transfer).unwrap_or(u64::MAX))
            }
            Cost::Fixed(ns) => ns,
        }
    }
}

/// Interrupt coalescing: completions are delivered in groups of up to `count`, or when the
/// oldest waiting completion has waited `time_ns`, whichever comes first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coalesce {
    pub count: usize,
    pub time_ns: u64,
}

/// The time limit used when a profile asks for coalescing by count alone.
pub const DEFAULT_COALESCE_TIME_NS: u64 = 50_000;

/// The deepest ring a profile may ask for (the ring is allocated up front).
pub const MAX_RING: usize = 65_536;
const MAX_SETUP_NS: u64 = 10_000_000_000;
const MAX_COALESCE_TIME_NS: u64 = 1_000_000_000;
const MAX_RATE: u64 = 10_000_000_000_000;

/// The named profiles, for listings and error messages.
pub const PROFILE_NAMES: [&str; 4] = ["hifn7951", "hifn7811", "bcm5822", "qat-like"];

/// A simulated device: ring depth, timing model, interrupt coalescing. Build one with
/// [`SimProfile::parse`] (or `str::parse`); [`SimProfile::named`] gives the presets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimProfile {
    ring: usize,
    setup_ns: u64,
    rate: u64,
    hash_rate: u64,
    coalesce: Option<Coalesce>,
    /// Flip a byte of every Nth result (a faulty card, for testing verification).
    corrupt: Option<u64>,
    /// Run the device thread on this host CPU only (`cpu=N`).
    cpu: Option<usize>,
    /// The public-key engine, if the card has one.
    pk: Option<PkEngine>,
    /// The random number generator, if the card has one.
    rng: Option<RngSpec>,
}

/// A card's public-key engine: its queue depth and its table of operation times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PkEngine {
    /// Requests the engine's queue holds at once (`pk_ring`).
    pub ring: usize,
    /// The time of every operation class it offers.
    pub table: PkTable,
}

/// A card's random number generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RngSpec {
    /// Bytes per second it makes (`rng_rate`).
    pub rate: u64,
    /// A fixed seed for its noise source (`rng_seed`; tests only), else seeded by the OS.
    pub seed: Option<u64>,
}

/// The `qat-like` card's public-key table (see the module docs).
const QAT_PK: [(&str, u64); 22] = [
    ("rsa2048_sign", 100_000),
    ("rsa2048_verify", 25_000),
    ("rsa3072_sign", 300_000),
    ("rsa3072_verify", 35_000),
    ("rsa4096_sign", 650_000),
    ("rsa4096_verify", 50_000),
    ("ecdsa_p256_sign", 40_000),
    ("ecdsa_p256_verify", 90_000),
    ("ecdsa_p384_sign", 50_000),
    ("ecdsa_p384_verify", 100_000),
    ("ecdh_p256", 70_000),
    ("ecdh_p384", 80_000),
    ("x25519", 45_000),
    ("ed25519_sign", 45_000),
    ("ed25519_verify", 60_000),
    ("modp2048", 150_000),
    ("modp3072", 400_000),
    ("modexp512", 10_000),
    ("modexp1024", 40_000),
    ("modexp2048", 250_000),
    ("modexp3072", 750_000),
    ("modexp4096", 1_600_000),
];

/// The `bcm5822`'s modular exponentiation unit (see the module docs): `ModExp` up to 2048
/// bits and MODP group 14.
const BCM5822_PK: [(&str, u64); 4] =
    [("modexp512", 500_000), ("modexp1024", 4_000_000), ("modexp2048", 32_000_000), ("modp2048", 32_000_000)];

impl SimProfile {
    /// A named profile:
    ///
    /// | name | ring | setup | rate (3DES) | hash_rate (SHA1) | coalescing |
    /// |---|---:|---:|---:|---:|---|
    /// | `hifn7951` | 24 | 34.75 µs | 10.772 MB/s | 9.913 MB/s | off |
    /// | `hifn7811` | 24 | 31.94 µs | 20.260 MB/s | 22.631 MB/s | off |
    /// | `bcm5822` | 60 | 21.97 µs | 55.525 MB/s | 79.772 MB/s | off |
    /// | `qat-like` | 1024 | 5 µs | 12 GB/s | 12 GB/s | 16 or 10 µs |
    ///
    /// The first three are fitted to Table 5 of Leffler's paper (see the module docs). Their
    /// rings: OpenBSD's `hifn7751var.h` gives the Hifn parts 24 command descriptors
    /// (`HIFN_D_CMD_RSIZE`); Broadcom's `ubsec` driver queues about 60 requests on the chip
    /// (`UBS_MAX_NQUEUE`). `qat-like` is a modern offload card of the QuickAssist kind: a
    /// few µs per request, PCIe-class bandwidth, a deep ring and interrupt moderation.
    pub fn named(name: &str) -> Option<SimProfile> {
        let old = |ring, setup_ns, rate, hash_rate| SimProfile {
            ring,
            setup_ns,
            rate,
            hash_rate,
            coalesce: None,
            corrupt: None,
            cpu: None,
            pk: None,
            rng: None,
        };
        Some(match name {
            // Fitted values: drivers/sim/fit/table5_fit.txt.
            "hifn7951" => old(24, 34_750, 10_772_000, 9_913_000),
            "hifn7811" => old(24, 31_940, 20_260_000, 22_631_000),
            // The 5822's key queue: as deep as its cipher queue (`ubsec` bounds both by
            // UBS_MAX_NQUEUE).
            "bcm5822" => SimProfile {
                pk: Some(PkEngine { ring: 60, table: PkTable::from_pairs(&BCM5822_PK) }),
                rng: Some(RngSpec { rate: 1_000_000, seed: None }),
                ..old(60, 21_970, 55_525_000, 79_772_000)
            },
            "qat-like" => SimProfile {
                ring: 1024,
                setup_ns: 5_000,
                rate: 12_000_000_000,
                hash_rate: 12_000_000_000,
                coalesce: Some(Coalesce { count: 16, time_ns: 10_000 }),
                corrupt: None,
                cpu: None,
                pk: Some(PkEngine { ring: 128, table: PkTable::from_pairs(&QAT_PK) }),
                rng: Some(RngSpec { rate: 100_000_000, seed: None }),
            },
            _ => return None,
        })
    }

    /// Parses a profile string (see the module docs). Never panics; the error names the
    /// part of the string that is wrong.
    pub fn parse(spec: &str) -> Result<SimProfile, ProfileError> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(ProfileError::Empty);
        }
        let mut base: Option<SimProfile> = None;
        let mut o = Overrides::default();
        for (i, part) in spec.split(',').map(str::trim).enumerate() {
            let Some((key, value)) = part.split_once('=') else {
                if part.is_empty() {
                    return Err(ProfileError::EmptyPart);
                }
                if i > 0 {
                    return Err(ProfileError::NameNotFirst(part.to_owned()));
                }
                base = Some(
                    SimProfile::named(part).ok_or_else(|| ProfileError::UnknownProfile(part.to_owned()))?,
                );
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            if value.is_empty() {
                return Err(ProfileError::MissingValue(part.to_owned()));
            }
            let slot_taken = match key {
                "ring" => o.ring.replace(parse_count(part, value, "ring", MAX_RING)?).is_some(),
                "setup" => o.setup_ns.replace(parse_duration(part, value, true, MAX_SETUP_NS)?).is_some(),
                "rate" => o.rate.replace(parse_rate(part, value)?).is_some(),
                "hash_rate" => o.hash_rate.replace(parse_rate(part, value)?).is_some(),
                "coalesce" => {
                    let count = if value == "off" {
                        None
                    } else {
                        Some(parse_count(part, value, "coalesce", MAX_RING)?)
                    };
                    o.coalesce.replace(count).is_some()
                }
                "cpu" => o.cpu.replace(parse_cpu(part, value)?).is_some(),
                "corrupt" => {
                    o.corrupt.replace(parse_count(part, value, "corrupt", usize::MAX)? as u64).is_some()
                }
                "coalesce_time" => o
                    .coalesce_time_ns
                    .replace(parse_duration(part, value, false, MAX_COALESCE_TIME_NS)?)
                    .is_some(),
                "pk_ring" => o.pk_ring.replace(parse_count(part, value, "pk_ring", MAX_RING)?).is_some(),
                "pk" => o.pk_all_ns.replace(parse_duration(part, value, true, MAX_SETUP_NS)?).is_some(),
                "rng" => o.rng.replace(parse_switch(part, value)?).is_some(),
                "rng_rate" => o.rng_rate.replace(parse_rate(part, value)?).is_some(),
                "rng_seed" => o.rng_seed.replace(parse_seed(part, value)?).is_some(),
                _ => match PkClass::named(key) {
                    Some(class) => {
                        let ns = if value == "off" {
                            None
                        } else {
                            Some(parse_duration(part, value, true, MAX_SETUP_NS)?)
                        };
                        let taken = o.pk_classes.iter().any(|(c, _)| *c == class);
                        o.pk_classes.push((class, ns));
                        taken
                    }
                    None => return Err(ProfileError::UnknownKey(part.to_owned())),
                },
            };
            if slot_taken {
                return Err(ProfileError::Repeated(key.to_owned()));
            }
        }
        o.apply(base)
    }

    /// Descriptor ring slots: requests the card holds at once (posted or in its engine).
    pub fn ring(&self) -> usize {
        self.ring
    }

    /// Fixed time per request, in nanoseconds.
    pub fn setup_ns(&self) -> u64 {
        self.setup_ns
    }

    /// Cipher, AEAD and cipher+MAC engine rate, bytes per second.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Digest and MAC engine rate, bytes per second.
    pub fn hash_rate(&self) -> u64 {
        self.hash_rate
    }

    /// Interrupt coalescing, if on.
    pub fn coalesce(&self) -> Option<Coalesce> {
        self.coalesce
    }

    /// The host CPU the device thread runs on (`cpu=N`), if pinned.
    pub fn cpu(&self) -> Option<usize> {
        self.cpu
    }

    /// Every how many results one is corrupted (`corrupt=N`), if the card is faulty.
    pub fn corrupt_every(&self) -> Option<u64> {
        self.corrupt
    }

    /// The public-key engine, if the card has one.
    pub fn pk(&self) -> Option<&PkEngine> {
        self.pk.as_ref()
    }

    /// The engine time of a public-key operation class, if the card offers it.
    pub fn pk_time(&self, class: PkClass) -> Option<u64> {
        self.pk.as_ref().and_then(|e| e.table.get(class))
    }

    /// The random number generator, if the card has one.
    pub fn rng(&self) -> Option<RngSpec> {
        self.rng
    }

    /// How long the engine works on one request of `bytes` payload bytes, in nanoseconds:
    /// `setup + bytes / rate` (rounded up).
    pub fn modelled_ns(&self, kind: WorkKind, bytes: usize) -> u64 {
        let rate = match kind {
            WorkKind::Cipher => self.rate,
            WorkKind::Hash => self.hash_rate,
        };
        Cost::Bytes { setup_ns: self.setup_ns, rate }.ns(bytes)
    }
}

impl FromStr for SimProfile {
    type Err = ProfileError;
    fn from_str(s: &str) -> Result<SimProfile, ProfileError> {
        SimProfile::parse(s)
    }
}

/// The canonical custom form, which parses back to the same profile.
impl fmt::Display for SimProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ring={},setup={},rate={},hash_rate={}",
            self.ring,
            Duration(self.setup_ns),
            Rate(self.rate),
            Rate(self.hash_rate)
        )?;
        if let Some(c) = self.coalesce {
            write!(f, ",coalesce={},coalesce_time={}", c.count, Duration(c.time_ns))?;
        }
        if let Some(n) = self.corrupt {
            write!(f, ",corrupt={n}")?;
        }
        if let Some(c) = self.cpu {
            write!(f, ",cpu={c}")?;
        }
        if let Some(pk) = &self.pk {
            write!(f, ",pk_ring={}", pk.ring)?;
            for (class, ns) in pk.table.offered() {
                write!(f, ",{class}={}", Duration(ns))?;
            }
        }
        if let Some(rng) = self.rng {
            write!(f, ",rng=on,rng_rate={}", Rate(rng.rate))?;
            if let Some(seed) = rng.seed {
                write!(f, ",rng_seed={seed}")?;
            }
        }
        Ok(())
    }
}

struct Duration(u64);

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("0ns"),
            ns if ns % 1_000_000 == 0 => write!(f, "{}ms", ns / 1_000_000),
            ns if ns % 1_000 == 0 => write!(f, "{}us", ns / 1_000),
            ns => write!(f, "{ns}ns"),
        }
    }
}

struct Rate(u64);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            r if r % 1_000_000_000 == 0 => write!(f, "{}GB/s", r / 1_000_000_000),
            r if r % 1_000_000 == 0 => write!(f, "{}MB/s", r / 1_000_000),
            r if r % 1_000 == 0 => write!(f, "{}KB/s", r / 1_000),
            r => write!(f, "{r}B/s"),
        }
    }
}

/// The keys given in a profile string, before they are laid over a named profile.
#[derive(Default)]
struct Overrides {
    ring: Option<usize>,
    setup_ns: Option<u64>,
    rate: Option<u64>,
    hash_rate: Option<u64>,
    /// `Some(None)`: `coalesce=off`.
    coalesce: Option<Option<usize>>,
    coalesce_time_ns: Option<u64>,
    corrupt: Option<u64>,
    cpu: Option<usize>,
    pk_ring: Option<usize>,
    /// `pk=…`: every class at this time.
    pk_all_ns: Option<u64>,
    /// `<class>=…` in the order given; `None`: `off`.
    pk_classes: Vec<(PkClass, Option<u64>)>,
    rng: Option<bool>,
    rng_rate: Option<u64>,
    rng_seed: Option<u64>,
}

/// The rate of a generator switched on without `rng_rate` on a card that had none.
const DEFAULT_RNG_RATE: u64 = 100_000_000;

impl Overrides {
    fn apply(self, base: Option<SimProfile>) -> Result<SimProfile, ProfileError> {
        let (ring, setup_ns, rate, hash_rate, coalesce) = match &base {
            Some(b) => (
                self.ring.unwrap_or(b.ring),
                self.setup_ns.unwrap_or(b.setup_ns),
                self.rate.unwrap_or(b.rate),
                self.hash_rate.unwrap_or(b.hash_rate),
                b.coalesce,
            ),
            None => {
                let ring = self.ring.ok_or(ProfileError::Missing("ring"))?;
                let setup_ns = self.setup_ns.ok_or(ProfileError::Missing("setup"))?;
                let rate = self.rate.ok_or(ProfileError::Missing("rate"))?;
                // A custom card hashes as fast as it ciphers unless told otherwise.
                (ring, setup_ns, rate, self.hash_rate.unwrap_or(rate), None)
            }
        };
        let coalesce = match (self.coalesce, self.coalesce_time_ns) {
            (Some(None), Some(_)) => return Err(ProfileError::CoalesceTimeWithoutCoalesce),
            (Some(None), None) => None,
            (Some(Some(count)), time) => Some(Coalesce {
                count,
                time_ns: time.or(coalesce.map(|c| c.time_ns)).unwrap_or(DEFAULT_COALESCE_TIME_NS),
            }),
            // Time alone: group by time; a group is at most a ring's worth.
            (None, Some(time_ns)) => Some(Coalesce { count: coalesce.map_or(ring, |c| c.count), time_ns }),
            (None, None) => coalesce,
        };
        let corrupt = self.corrupt.or(base.as_ref().and_then(|b| b.corrupt));
        let cpu = self.cpu.or(base.as_ref().and_then(|b| b.cpu));
        let base_pk = base.as_ref().and_then(|b| b.pk.clone());
        let base_rng = base.as_ref().and_then(|b| b.rng);
        let pk = Overrides::pk(self.pk_ring, self.pk_all_ns, &self.pk_classes, base_pk)?;
        let rng = match (self.rng, base_rng) {
            (Some(false), _) => {
                if self.rng_rate.is_some() || self.rng_seed.is_some() {
                    return Err(ProfileError::Needs { key: "rng_rate and rng_seed", needs: "rng=on" });
                }
                None
            }
            (Some(true), b) | (None, b @ Some(_)) => {
                let rate = self.rng_rate.or(b.map(|b| b.rate)).unwrap_or(DEFAULT_RNG_RATE);
                Some(RngSpec { rate, seed: self.rng_seed.or(b.and_then(|b| b.seed)) })
            }
            (None, None) => {
                if self.rng_rate.is_some() || self.rng_seed.is_some() {
                    return Err(ProfileError::Needs { key: "rng_rate and rng_seed", needs: "rng=on" });
                }
                None
            }
        };
        if rng.is_some() && pk.is_none() {
            return Err(ProfileError::Needs {
                key: "rng",
                needs: "pk_ring (its requests use the public-key queue)",
            });
        }
        Ok(SimProfile { ring, setup_ns, rate, hash_rate, coalesce, corrupt, cpu, pk, rng })
    }

    /// The public-key engine: the base's, with the queue, `pk=` and the classes laid over
    /// it in that order.
    fn pk(
        ring: Option<usize>,
        all_ns: Option<u64>,
        classes: &[(PkClass, Option<u64>)],
        base: Option<PkEngine>,
    ) -> Result<Option<PkEngine>, ProfileError> {
        let mut engine = match (base, ring) {
            (Some(b), ring) => PkEngine { ring: ring.unwrap_or(b.ring), table: b.table },
            (None, Some(ring)) => PkEngine { ring, table: PkTable::default() },
            (None, None) if all_ns.is_none() && classes.is_empty() => return Ok(None),
            (None, None) => {
                return Err(ProfileError::Needs { key: "public-key operation times", needs: "pk_ring" })
            }
        };
        if let Some(ns) = all_ns {
            engine.table = PkTable::every(ns);
        }
        for &(class, ns) in classes {
            engine.table.set(class, ns);
        }
        Ok(Some(engine))
    }
}

/// What is wrong with a profile string. Every variant names the offending part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileError {
    /// The string is empty.
    Empty,
    /// Two commas in a row, or a trailing comma.
    EmptyPart,
    /// The first part is not `key=value` and not a profile name.
    UnknownProfile(String),
    /// A profile name after the first part.
    NameNotFirst(String),
    /// A key the profile grammar does not have.
    UnknownKey(String),
    /// `key=` with nothing after it.
    MissingValue(String),
    /// A key given twice.
    Repeated(String),
    /// A custom profile without one of `ring`, `setup`, `rate`.
    Missing(&'static str),
    /// Not a plain decimal number.
    BadNumber { part: String, number: String },
    /// A duration or rate without its unit.
    MissingUnit(String),
    /// A unit the key does not take.
    UnknownUnit { part: String, unit: String },
    /// A value that must not be zero (ring, rate, coalesce, coalesce_time).
    Zero(String),
    /// A value past the limit for its key.
    TooLarge { part: String, limit: &'static str },
    /// `coalesce=off` with a `coalesce_time`.
    CoalesceTimeWithoutCoalesce,
    /// A switch (`rng=`) that is neither `on` nor `off`.
    NotOnOff(String),
    /// A key given without another it depends on (`rng=on` without a public-key queue).
    Needs { key: &'static str, needs: &'static str },
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileError::Empty => write!(
                f,
                "empty device profile: give a name ({}) or ring=N,setup=TIME,rate=RATE",
                PROFILE_NAMES.join(", ")
            ),
            ProfileError::EmptyPart => f.write_str("empty part in the device profile (two commas in a row?)"),
            ProfileError::UnknownProfile(p) => {
                write!(f, "unknown device profile {p:?} (known: {})", PROFILE_NAMES.join(", "))
            }
            ProfileError::NameNotFirst(p) => {
                write!(f, "{p:?}: a profile name must come first; later parts are key=value")
            }
            ProfileError::UnknownKey(p) => {
                write!(
                    f,
                    "{p:?}: unknown key (keys: ring, setup, rate, hash_rate, coalesce, coalesce_time, corrupt, \
                     cpu, pk_ring, pk, rng, rng_rate, rng_seed, and the public-key classes {})",
                    PkClass::NAMES.join(", ")
                )
            }
            ProfileError::MissingValue(p) => write!(f, "{p:?}: no value after '='"),
            ProfileError::Repeated(k) => write!(f, "{k} is given twice"),
            ProfileError::Missing(k) => {
                write!(f, "a custom profile needs ring, setup and rate; {k} is missing")
            }
            ProfileError::BadNumber { part, number } => {
                write!(f, "{part:?}: {number:?} is not a plain decimal number")
            }
            ProfileError::MissingUnit(p) => {
                write!(
                    f,
                    "{p:?}: the value needs a unit (ns, us, ms, s; or B/s, KB/s, MB/s, GB/s, Mb/s, Gb/s)"
                )
            }
            ProfileError::UnknownUnit { part, unit } => write!(f, "{part:?}: unknown unit {unit:?}"),
            ProfileError::Zero(p) => write!(f, "{p:?}: must be greater than zero"),
            ProfileError::TooLarge { part, limit } => write!(f, "{part:?}: too large (at most {limit})"),
            ProfileError::CoalesceTimeWithoutCoalesce => {
                f.write_str("coalesce_time given together with coalesce=off")
            }
            ProfileError::Needs { key, needs } => write!(f, "{key} needs {needs}"),
            ProfileError::NotOnOff(p) => write!(f, "{p:?}: the value is on or off"),
        }
    }
}

impl std::error::Error for ProfileError {}

/// A plain decimal: digits with at most one '.', at least one digit. No sign, no exponent,
/// no `inf`/`nan` (which `f64::from_str` would take).
fn parse_decimal(part: &str, number: &str) -> Result<f64, ProfileError> {
    let bad = || ProfileError::BadNumber { part: part.to_owned(), number: number.to_owned() };
    let digits = number.bytes().filter(u8::is_ascii_digit).count();
    let dots = number.bytes().filter(|&b| b == b'.').count();
    if digits == 0 || dots > 1 || digits + dots != number.len() {
        return Err(bad());
    }
    number.parse::<f64>().map_err(|_| bad())
}

/// Splits `12.5us` into `("12.5", "us")`.
fn split_unit(value: &str) -> (&str, &str) {
    let end = value.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(value.len());
    (&value[..end], value[end..].trim())
}

fn parse_count(part: &str, value: &str, _key: &str, max: usize) -> Result<usize, ProfileError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ProfileError::BadNumber { part: part.to_owned(), number: value.to_owned() });
    }
    // All digits: the only parse failure left is overflow.
    let n: usize = value.parse().unwrap_or(usize::MAX);
    if n == 0 {
        return Err(ProfileError::Zero(part.to_owned()));
    }
    if n > max {
        return Err(ProfileError::TooLarge { part: part.to_owned(), limit: "65536" });
    }
    Ok(n)
}

/// A host CPU number (0 is one; at most 1023, the size of the kernel's default CPU set).
fn parse_cpu(part: &str, value: &str) -> Result<usize, ProfileError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ProfileError::BadNumber { part: part.to_owned(), number: value.to_owned() });
    }
    match value.parse::<usize>() {
        Ok(n) if n < 1024 => Ok(n),
        _ => Err(ProfileError::TooLarge { part: part.to_owned(), limit: "1023" }),
    }
}

/// `on` or `off`.
fn parse_switch(part: &str, value: &str) -> Result<bool, ProfileError> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(ProfileError::NotOnOff(part.to_owned())),
    }
}

/// A seed: any 64-bit number, 0 included.
fn parse_seed(part: &str, value: &str) -> Result<u64, ProfileError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ProfileError::BadNumber { part: part.to_owned(), number: value.to_owned() });
    }
    value.parse().map_err(|_| ProfileError::TooLarge { part: part.to_owned(), limit: "18446744073709551615" })
}

fn parse_duration(part: &str, value: &str, zero_ok: bool, max_ns: u64) -> Result<u64, ProfileError> {
    let (number, unit) = split_unit(value);
    let x = parse_decimal(part, number)?;
    let ns_per_unit = match unit {
        "" => return Err(ProfileError::MissingUnit(part.to_owned())),
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(ProfileError::UnknownUnit { part: part.to_owned(), unit: unit.to_owned() }),
    };
    let ns = (x * ns_per_unit).round();
    if ns > max_ns as f64 {
        let limit = if max_ns == MAX_SETUP_NS { "10s" } else { "1s" };
        return Err(ProfileError::TooLarge { part: part.to_owned(), limit });
    }
    if ns == 0.0 && !zero_ok {
        return Err(ProfileError::Zero(part.to_owned()));
    }
    // In range [0, max_ns] after the checks above.
    Ok(ns as u64)
}

fn parse_rate(part: &str, value: &str) -> Result<u64, ProfileError> {
    let (number, unit) = split_unit(value);
    let x = parse_decimal(part, number)?;
    let bytes_per_unit = match unit {
        "" => return Err(ProfileError::MissingUnit(part.to_owned())),
        "B/s" => 1.0,
        "KB/s" | "kB/s" => 1e3,
        "MB/s" => 1e6,
        "GB/s" => 1e9,
        "Kb/s" | "kb/s" => 1e3 / 8.0,
        "Mb/s" => 1e6 / 8.0,
        "Gb/s" => 1e9 / 8.0,
        _ => return Err(ProfileError::UnknownUnit { part: part.to_owned(), unit: unit.to_owned() }),
    };
    let rate = (x * bytes_per_unit).round();
    if rate > MAX_RATE as f64 {
        return Err(ProfileError::TooLarge { part: part.to_owned(), limit: "10TB/s" });
    }
    if rate < 1.0 {
        return Err(ProfileError::Zero(part.to_owned()));
    }
    Ok(rate as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(spec: &str) -> ProfileError {
        match SimProfile::parse(spec) {
            Err(e) => e,
            Ok(p) => panic!("{spec:?} parsed as {p:?}"),
        }
    }

    #[test]
    fn named_profiles() {
        for name in PROFILE_NAMES {
            let p = SimProfile::parse(name).unwrap();
            assert_eq!(Some(p.clone()), SimProfile::named(name));
            assert!(p.ring() > 0 && p.rate() > 0 && p.hash_rate() > 0);
        }
        assert_eq!(SimProfile::parse("hifn7951").unwrap().ring(), 24);
        assert_eq!(SimProfile::parse("hifn7811").unwrap().ring(), 24);
        assert_eq!(SimProfile::parse("bcm5822").unwrap().ring(), 60);
        let qat = SimProfile::parse("qat-like").unwrap();
        assert_eq!((qat.ring(), qat.setup_ns(), qat.rate()), (1024, 5_000, 12_000_000_000));
        assert_eq!(qat.coalesce(), Some(Coalesce { count: 16, time_ns: 10_000 }));
        assert_eq!(SimProfile::parse("bcm5822").unwrap().coalesce(), None);
    }

    #[test]
    fn custom_profile_with_every_key() {
        let p: SimProfile =
            " ring = 16 , setup=20us,rate=400MB/s,hash_rate=1.5GB/s,coalesce=8,coalesce_time=50µs "
                .parse()
                .unwrap();
        assert_eq!(p.ring(), 16);
        assert_eq!(p.setup_ns(), 20_000);
        assert_eq!(p.rate(), 400_000_000);
        assert_eq!(p.hash_rate(), 1_500_000_000);
        assert_eq!(p.coalesce(), Some(Coalesce { count: 8, time_ns: 50_000 }));
    }

    #[test]
    fn custom_defaults() {
        let p = SimProfile::parse("ring=16,setup=20us,rate=400MB/s").unwrap();
        assert_eq!(p.hash_rate(), p.rate(), "hash_rate defaults to rate");
        assert_eq!(p.coalesce(), None);
        let p = SimProfile::parse("ring=16,setup=0ns,rate=1GB/s,coalesce=4").unwrap();
        assert_eq!(p.coalesce(), Some(Coalesce { count: 4, time_ns: DEFAULT_COALESCE_TIME_NS }));
        let p = SimProfile::parse("ring=16,setup=1us,rate=1GB/s,coalesce_time=20us").unwrap();
        assert_eq!(
            p.coalesce(),
            Some(Coalesce { count: 16, time_ns: 20_000 }),
            "time alone: ring-sized groups"
        );
    }

    #[test]
    fn units() {
        let setup = |s: &str| SimProfile::parse(&format!("ring=1,rate=1B/s,setup={s}")).unwrap().setup_ns();
        assert_eq!(setup("7ns"), 7);
        assert_eq!(setup("2.5us"), 2_500);
        assert_eq!(setup("2.5µs"), 2_500);
        assert_eq!(setup("3ms"), 3_000_000);
        assert_eq!(setup("1.25s"), 1_250_000_000);
        assert_eq!(setup("0us"), 0);
        let rate = |s: &str| SimProfile::parse(&format!("ring=1,setup=1us,rate={s}")).unwrap().rate();
        assert_eq!(rate("5B/s"), 5);
        assert_eq!(rate("5KB/s"), 5_000);
        assert_eq!(rate("5kB/s"), 5_000);
        assert_eq!(rate("5MB/s"), 5_000_000);
        assert_eq!(rate("5GB/s"), 5_000_000_000);
        assert_eq!(rate("8Kb/s"), 1_000);
        assert_eq!(rate("400Mb/s"), 50_000_000);
        assert_eq!(rate("1Gb/s"), 125_000_000);
        assert_eq!(rate("0.5 GB/s"), 500_000_000);
    }

    #[test]
    fn overrides_on_named_profiles() {
        let p = SimProfile::parse("hifn7951,ring=4").unwrap();
        let base = SimProfile::named("hifn7951").unwrap();
        assert_eq!(p.ring(), 4);
        assert_eq!((p.setup_ns(), p.rate(), p.hash_rate()), (base.setup_ns(), base.rate(), base.hash_rate()));
        let p = SimProfile::parse("bcm5822,setup=1us,rate=1GB/s,hash_rate=2GB/s,coalesce=8").unwrap();
        assert_eq!(
            (p.ring(), p.setup_ns(), p.rate(), p.hash_rate()),
            (60, 1_000, 1_000_000_000, 2_000_000_000)
        );
        assert_eq!(p.coalesce(), Some(Coalesce { count: 8, time_ns: DEFAULT_COALESCE_TIME_NS }));
        assert_eq!(SimProfile::parse("qat-like,coalesce=off").unwrap().coalesce(), None);
        let p = SimProfile::parse("qat-like,coalesce=4").unwrap();
        assert_eq!(p.coalesce(), Some(Coalesce { count: 4, time_ns: 10_000 }), "keeps the profile's time");
        let p = SimProfile::parse("qat-like,coalesce_time=1ms").unwrap();
        assert_eq!(
            p.coalesce(),
            Some(Coalesce { count: 16, time_ns: 1_000_000 }),
            "keeps the profile's count"
        );
    }

    #[test]
    fn display_round_trips() {
        for spec in PROFILE_NAMES.into_iter().chain(["ring=3,setup=1234ns,rate=777B/s,coalesce=2"]) {
            let p = SimProfile::parse(spec).unwrap();
            let text = p.to_string();
            assert_eq!(SimProfile::parse(&text).unwrap(), p, "{spec} -> {text}");
        }
        let qat = SimProfile::named("qat-like").unwrap().to_string();
        assert!(
            qat.starts_with(
                "ring=1024,setup=5us,rate=12GB/s,hash_rate=12GB/s,coalesce=16,coalesce_time=10us,\
                 pk_ring=128,rsa2048_sign=100us,rsa2048_verify=25us,"
            ),
            "{qat}"
        );
        assert!(qat.ends_with(",modexp4096=1600us,rng=on,rng_rate=100MB/s"), "{qat}");
        let seeded = SimProfile::parse("bcm5822,rng_seed=0").unwrap();
        assert_eq!(SimProfile::parse(&seeded.to_string()).unwrap(), seeded);
        assert_eq!(
            SimProfile::named("bcm5822").unwrap().to_string(),
            "ring=60,setup=21970ns,rate=55525KB/s,hash_rate=79772KB/s,pk_ring=60,modp2048=32ms,\
             modexp512=500us,modexp1024=4ms,modexp2048=32ms,rng=on,rng_rate=1MB/s"
        );
    }

    #[test]
    fn public_key_engines_of_the_named_profiles() {
        let class = |n| PkClass::named(n).unwrap();
        let bcm = SimProfile::named("bcm5822").unwrap();
        let pk = bcm.pk().unwrap();
        assert_eq!(pk.ring, 60);
        let offered: Vec<&str> = pk.table.offered().map(|(c, _)| c.name()).collect();
        assert_eq!(
            offered,
            ["modp2048", "modexp512", "modexp1024", "modexp2048"],
            "no EC, nothing above 2048 bits"
        );
        assert_eq!(bcm.pk_time(class("modexp1024")), Some(4_000_000));
        assert_eq!(bcm.pk_time(class("ecdh_p256")), None);
        assert_eq!(bcm.rng(), Some(RngSpec { rate: 1_000_000, seed: None }));
        let qat = SimProfile::named("qat-like").unwrap();
        assert_eq!(qat.pk().unwrap().ring, 128);
        assert_eq!(qat.pk().unwrap().table.offered().count(), PkClass::COUNT, "every class");
        assert_eq!(qat.pk_time(class("rsa2048_sign")), Some(100_000));
        for old in ["hifn7951", "hifn7811"] {
            let p = SimProfile::named(old).unwrap();
            assert_eq!((p.pk(), p.rng()), (None, None), "{old}: no public-key unit, no RNG");
        }
    }

    #[test]
    fn public_key_and_rng_keys() {
        let class = |n| PkClass::named(n).unwrap();
        // Overrides on a named card.
        let p =
            SimProfile::parse("qat-like,pk_ring=4,rsa2048_sign=1ms,ecdh_p256=off,rng_rate=5MB/s").unwrap();
        assert_eq!(p.pk().unwrap().ring, 4);
        assert_eq!(p.pk_time(class("rsa2048_sign")), Some(1_000_000));
        assert_eq!(p.pk_time(class("ecdh_p256")), None);
        assert_eq!(p.pk_time(class("ecdh_p384")), Some(80_000), "the rest as the profile has them");
        assert_eq!(p.rng(), Some(RngSpec { rate: 5_000_000, seed: None }));
        let p = SimProfile::parse("qat-like,rng=off").unwrap();
        assert_eq!(p.rng(), None);
        assert!(p.pk().is_some());
        // `pk=` sets every class, then the classes given override it.
        let p = SimProfile::parse("ring=8,setup=0ns,rate=1GB/s,pk_ring=2,pk=0ns,x25519=3us").unwrap();
        assert_eq!(p.pk_time(class("rsa4096_verify")), Some(0));
        assert_eq!(p.pk_time(class("x25519")), Some(3_000));
        // An old card given a queue: an engine with what is listed, nothing else.
        let p = SimProfile::parse("hifn7951,pk_ring=8,modexp1024=2ms,rng=on,rng_seed=42").unwrap();
        assert_eq!(p.pk().unwrap().table.offered().count(), 1);
        assert_eq!(p.rng(), Some(RngSpec { rate: DEFAULT_RNG_RATE, seed: Some(42) }));
        // A custom card without pk keys has neither.
        let p = SimProfile::parse("ring=8,setup=0ns,rate=1GB/s").unwrap();
        assert_eq!((p.pk(), p.rng()), (None, None));
    }

    #[test]
    fn bad_public_key_and_rng_keys_name_the_problem() {
        use ProfileError::*;
        let needs_pk = Needs { key: "public-key operation times", needs: "pk_ring" };
        assert_eq!(err("ring=8,setup=0ns,rate=1GB/s,x25519=3us"), needs_pk);
        assert_eq!(err("hifn7951,pk=1us"), needs_pk);
        assert_eq!(
            err("hifn7951,rng=on"),
            Needs { key: "rng", needs: "pk_ring (its requests use the public-key queue)" }
        );
        assert_eq!(err("hifn7951,rng_rate=1MB/s"), Needs { key: "rng_rate and rng_seed", needs: "rng=on" });
        assert_eq!(
            err("qat-like,rng=off,rng_seed=3"),
            Needs { key: "rng_rate and rng_seed", needs: "rng=on" }
        );
        assert_eq!(err("qat-like,rng=maybe"), NotOnOff("rng=maybe".into()));
        assert_eq!(err("qat-like,x25519=1us,x25519=2us"), Repeated("x25519".into()));
        assert_eq!(err("qat-like,pk_ring=0"), Zero("pk_ring=0".into()));
        assert_eq!(err("qat-like,x25519=fast"), BadNumber { part: "x25519=fast".into(), number: "".into() });
        assert_eq!(err("qat-like,x25519=3"), MissingUnit("x25519=3".into()));
        assert_eq!(err("qat-like,rsa1024_sign=1ms"), UnknownKey("rsa1024_sign=1ms".into()));
        assert_eq!(
            err("qat-like,rng_seed=-1"),
            BadNumber { part: "rng_seed=-1".into(), number: "-1".into() }
        );
        assert!(err("qat-like,speed=1").to_string().contains("rsa2048_sign"), "lists the classes");
    }

    #[test]
    fn bad_input_names_the_problem() {
        use ProfileError::*;
        assert_eq!(err(""), Empty);
        assert_eq!(err("   "), Empty);
        assert_eq!(err("hifn7951,,ring=4"), EmptyPart);
        assert_eq!(err("hifn7951,"), EmptyPart);
        assert_eq!(err("hifn9999"), UnknownProfile("hifn9999".into()));
        assert_eq!(err("ring=4,hifn7951"), NameNotFirst("hifn7951".into()));
        assert_eq!(err("hifn7951,speed=3"), UnknownKey("speed=3".into()));
        assert_eq!(err("hifn7951,ring="), MissingValue("ring=".into()));
        assert_eq!(err("hifn7951,ring=4,ring=5"), Repeated("ring".into()));
        assert_eq!(err("setup=1us,rate=1MB/s"), Missing("ring"));
        assert_eq!(err("ring=4,rate=1MB/s"), Missing("setup"));
        assert_eq!(err("ring=4,setup=1us"), Missing("rate"));
        assert_eq!(err("hifn7951,ring=0"), Zero("ring=0".into()));
        assert_eq!(err("hifn7951,rate=0MB/s"), Zero("rate=0MB/s".into()));
        assert_eq!(err("hifn7951,hash_rate=0.0001B/s"), Zero("hash_rate=0.0001B/s".into()));
        assert_eq!(err("hifn7951,coalesce=0"), Zero("coalesce=0".into()));
        assert_eq!(err("hifn7951,coalesce_time=0us"), Zero("coalesce_time=0us".into()));
        assert_eq!(err("hifn7951,ring=-4"), BadNumber { part: "ring=-4".into(), number: "-4".into() });
        assert_eq!(err("hifn7951,ring=4.5"), BadNumber { part: "ring=4.5".into(), number: "4.5".into() });
        assert_eq!(err("hifn7951,ring=four"), BadNumber { part: "ring=four".into(), number: "four".into() });
        assert_eq!(
            err("hifn7951,setup=1.2.3us"),
            BadNumber { part: "setup=1.2.3us".into(), number: "1.2.3".into() }
        );
        assert_eq!(err("hifn7951,setup=-1us"), BadNumber { part: "setup=-1us".into(), number: "".into() });
        assert_eq!(
            err("hifn7951,rate=infMB/s"),
            BadNumber { part: "rate=infMB/s".into(), number: "".into() }
        );
        assert_eq!(
            err("hifn7951,rate=1e9B/s"),
            UnknownUnit { part: "rate=1e9B/s".into(), unit: "e9B/s".into() }
        );
        assert_eq!(err("hifn7951,setup=20"), MissingUnit("setup=20".into()));
        assert_eq!(err("hifn7951,rate=400"), MissingUnit("rate=400".into()));
        assert_eq!(
            err("hifn7951,setup=20min"),
            UnknownUnit { part: "setup=20min".into(), unit: "min".into() }
        );
        assert_eq!(err("hifn7951,rate=4MB"), UnknownUnit { part: "rate=4MB".into(), unit: "MB".into() });
        assert_eq!(err("hifn7951,rate=4us"), UnknownUnit { part: "rate=4us".into(), unit: "us".into() });
        assert_eq!(err("hifn7951,ring=65537"), TooLarge { part: "ring=65537".into(), limit: "65536" });
        assert_eq!(
            err("hifn7951,ring=99999999999999999999999"),
            TooLarge { part: "ring=99999999999999999999999".into(), limit: "65536" }
        );
        assert_eq!(err("hifn7951,setup=11s"), TooLarge { part: "setup=11s".into(), limit: "10s" });
        assert_eq!(
            err("hifn7951,coalesce_time=2s"),
            TooLarge { part: "coalesce_time=2s".into(), limit: "1s" }
        );
        assert_eq!(
            err("hifn7951,rate=11000GB/s"),
            TooLarge { part: "rate=11000GB/s".into(), limit: "10TB/s" }
        );
        assert_eq!(err("qat-like,coalesce=off,coalesce_time=5us"), CoalesceTimeWithoutCoalesce);
        // The messages name the part.
        assert!(err("hifn7951,ring=0").to_string().contains("ring=0"));
        assert!(err("hifn7951,setup=20").to_string().contains("needs a unit"));
        assert!(err("nosuch").to_string().contains("hifn7951"), "lists the known names");
    }

    #[test]
    fn model_arithmetic() {
        let p = SimProfile::parse("ring=1,setup=10us,rate=1GB/s,hash_rate=500MB/s").unwrap();
        assert_eq!(p.modelled_ns(WorkKind::Cipher, 0), 10_000);
        assert_eq!(p.modelled_ns(WorkKind::Cipher, 1000), 11_000);
        assert_eq!(p.modelled_ns(WorkKind::Hash, 1000), 12_000);
        assert_eq!(p.modelled_ns(WorkKind::Cipher, 1), 10_001, "rounded up");
        assert_eq!(p.modelled_ns(WorkKind::Cipher, 1 << 40), 10_000 + (1 << 40));
        let slow = SimProfile::parse("ring=1,setup=10s,rate=1B/s").unwrap();
        assert_eq!(slow.modelled_ns(WorkKind::Cipher, usize::MAX), u64::MAX, "saturates");
    }

    #[test]
    fn work_kind_of_session() {
        use ocf::{CipherAlg, DigestAlg, MacAlg};
        assert_eq!(WorkKind::of(&SessionParams::digest(DigestAlg::Sha1)), WorkKind::Hash);
        assert_eq!(WorkKind::of(&SessionParams::hmac(DigestAlg::Sha1, &[1u8; 20][..])), WorkKind::Hash);
        assert_eq!(WorkKind::of(&SessionParams::aead(CipherAlg::AesGcm, &[1u8; 16][..])), WorkKind::Cipher);
        assert_eq!(
            WorkKind::of(&SessionParams::cipher(CipherAlg::TdesCbc, &[1u8; 24][..])),
            WorkKind::Cipher
        );
        let etm = SessionParams::cipher_then_mac(
            CipherAlg::AesCbc,
            &[1u8; 16][..],
            MacAlg::Hmac(DigestAlg::Sha1),
            &[2u8; 20][..],
        );
        assert_eq!(WorkKind::of(&etm), WorkKind::Cipher);
    }
}
