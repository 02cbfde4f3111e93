//! The outcome of a conformance run: per driver × algorithm family × buffer layout counts,
//! the failures by case name, what was skipped and why, and how many cases each vector
//! source contributed (so a test can tell "passed" from "silently loaded nothing").

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use ocf::{AsymAlg, CipherAlg, DigestAlg, MacAlg, Mode, SessionParams};

/// The algorithm family a case belongs to, as the report groups them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// A plain cipher or an AEAD.
    Cipher(CipherAlg),
    Digest(DigestAlg),
    Mac(MacAlg),
    CipherThenMac(CipherAlg, MacAlg),
    /// A public-key algorithm (with its parameters: curve, hash, encoding).
    Asym(AsymAlg),
    /// A mode this suite does not know yet (`Mode` is non-exhaustive), by its name.
    Other(&'static str),
}

impl Family {
    /// The family of a session's parameters.
    pub fn of(params: &SessionParams) -> Family {
        match &params.mode {
            Mode::Cipher { alg, .. } | Mode::Aead { alg, .. } => Family::Cipher(*alg),
            Mode::Digest { alg } => Family::Digest(*alg),
            Mode::Mac { alg, .. } => Family::Mac(*alg),
            Mode::CipherThenMac { cipher, mac, .. } => Family::CipherThenMac(*cipher, *mac),
            Mode::Asymmetric { alg, .. } => Family::Asym(*alg),
            // `Mode` is non-exhaustive; a mode added later is reported under its name.
            _ => Family::Other(params.mode.name()),
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Family::Cipher(a) => write!(f, "{a}"),
            Family::Digest(d) => write!(f, "{d}"),
            Family::Mac(m) => write!(f, "{m}"),
            Family::CipherThenMac(c, m) => write!(f, "{c}+{m}"),
            Family::Asym(a) => write!(f, "{a}"),
            Family::Other(name) => f.write_str(name),
        }
    }
}

/// How a case's buffers are laid out when it is run. Every case runs in every layout,
/// because the framework's buffer handling is part of what is tested. (Public-key requests
/// always write their result to `out`: for them the layouts vary how the input lies in
/// `buf` and where the result goes in `out`; see the `asym::run` module.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Layout {
    /// One contiguous buffer, processed in place; AAD and tag passed separately.
    InPlace,
    /// Contiguous input, result written to a separate output buffer at a non-zero offset
    /// (`Request::with_output`); the input must stay untouched.
    OutOfPlace,
    /// A scatter-gather buffer split at awkward offsets: 1 byte, an empty segment,
    /// 7 bytes, then the rest; processed in place.
    Segmented,
    /// The payload embedded in a packet, processed in place: filler | AAD | payload |
    /// tag | filler, with the AAD as `Aad::Region` (AEAD and cipher+MAC sessions) and the
    /// tag at `TagPlace::InBuffer` (every mode with a tag). The filler must stay untouched.
    Embedded,
}

impl Layout {
    pub const ALL: [Layout; 4] = [Layout::InPlace, Layout::OutOfPlace, Layout::Segmented, Layout::Embedded];

    pub fn name(self) -> &'static str {
        match self {
            Layout::InPlace => "in-place",
            Layout::OutOfPlace => "out-of-place",
            Layout::Segmented => "segmented",
            Layout::Embedded => "embedded",
        }
    }

    /// Whether the result overwrites the input buffer.
    pub fn in_place(self) -> bool {
        !matches!(self, Layout::OutOfPlace)
    }
}

/// Counts for one driver and family.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Cases whose every check passed, per layout (indexed like [`Layout::ALL`]).
    passed: [u64; 4],
    /// Cases with parameters ocf does not support, rejected at submission with the
    /// expected error, per layout.
    rejected: [u64; 4],
    /// Cases rejected at session creation with the expected error (layout-independent).
    pub rejected_at_setup: u64,
    /// Cases the driver does not support (not counted as passed or failed).
    pub skipped: u64,
    /// Failed checks (one case can fail in several layouts).
    pub failed: u64,
}

impl Tally {
    pub fn passed(&self, layout: Layout) -> u64 {
        self.passed[layout as usize]
    }

    pub fn rejected(&self, layout: Layout) -> u64 {
        self.rejected[layout as usize]
    }

    /// The smallest per-layout pass count: the number of cases known to pass everywhere
    /// when there are no failures.
    pub fn passed_in_every_layout(&self) -> u64 {
        self.passed.iter().copied().min().unwrap_or(0)
    }

    /// Cases rejected as expected, at setup or in every layout.
    pub fn rejected_in_every_layout(&self) -> u64 {
        self.rejected_at_setup + self.rejected.iter().copied().min().unwrap_or(0)
    }

    fn add(&mut self, other: &Tally) {
        for i in 0..4 {
            self.passed[i] += other.passed[i];
            self.rejected[i] += other.rejected[i];
        }
        self.rejected_at_setup += other.rejected_at_setup;
        self.skipped += other.skipped;
        self.failed += other.failed;
    }
}

/// Names one case: where it comes from and which entry it is there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseId {
    /// The vector source, e.g. `nist/aes-cbc/CBCMMT128.rsp`, `wycheproof/aes_gcm_test.json`.
    pub source: String,
    /// The entry within it, e.g. `[DECRYPT] COUNT = 3`, `tcId 17`.
    pub label: String,
}

impl fmt::Display for CaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.source, self.label)
    }
}

/// One failed check.
#[derive(Clone, Debug)]
pub struct Failure {
    /// `None` for failures before any driver ran (a vector file that did not load).
    pub driver: Option<String>,
    pub family: Option<Family>,
    pub case: CaseId,
    /// `None` for failures not tied to a layout (session creation, loading).
    pub layout: Option<Layout>,
    pub what: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.case)?;
        if let Some(d) = &self.driver {
            write!(f, " [driver {d}]")?;
        }
        if let Some(fam) = &self.family {
            write!(f, " [{fam}]")?;
        }
        if let Some(l) = self.layout {
            write!(f, " [{}]", l.name())?;
        }
        write!(f, ": {}", self.what)
    }
}

/// The result of a conformance run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Keyed by (driver, family display name) so the table prints in a stable order.
    tallies: BTreeMap<(String, String), (Family, Tally)>,
    failures: Vec<Failure>,
    /// (driver, family, reason) for skipped cases, deduplicated.
    skips: BTreeSet<(String, String, String)>,
    /// Cases contributed by each vector source.
    loaded: BTreeMap<String, usize>,
    /// Tests a loader left out, by (source, why): parameters ocf does not name, or inputs
    /// the harness cannot hand to ocf's API (see each suite's docs).
    left_out: BTreeMap<(String, String), usize>,
}

impl Report {
    pub fn new() -> Report {
        Report::default()
    }

    /// Every failure, in the order found.
    pub fn failures(&self) -> &[Failure] {
        &self.failures
    }

    /// Whether nothing failed.
    pub fn is_clean(&self) -> bool {
        self.failures.is_empty()
    }

    /// The counts for one driver and family (all zero if it never ran).
    pub fn tally(&self, driver: &str, family: Family) -> Tally {
        self.tallies.get(&(driver.to_owned(), family.to_string())).map(|(_, t)| *t).unwrap_or_default()
    }

    /// Every (driver, family, tally), ordered by driver then family name.
    pub fn tallies(&self) -> impl Iterator<Item = (&str, Family, &Tally)> {
        self.tallies.iter().map(|((d, _), (f, t))| (d.as_str(), *f, t))
    }

    /// How many cases each vector source contributed.
    pub fn loaded(&self) -> &BTreeMap<String, usize> {
        &self.loaded
    }

    /// Tests left out when loading, with why: (source, reason, how many).
    pub fn left_out(&self) -> impl Iterator<Item = (&str, &str, usize)> {
        self.left_out.iter().map(|((s, r), n)| (s.as_str(), r.as_str(), *n))
    }

    /// Why cases were skipped: (driver, family, reason).
    pub fn skips(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.skips.iter().map(|(d, f, r)| (d.as_str(), f.as_str(), r.as_str()))
    }

    /// Adds another report's counts, failures and notes to this one.
    pub fn merge(&mut self, other: Report) {
        for ((d, name), (family, t)) in other.tallies {
            self.tallies.entry((d, name)).or_insert((family, Tally::default())).1.add(&t);
        }
        self.failures.extend(other.failures);
        self.skips.extend(other.skips);
        for (source, n) in other.loaded {
            *self.loaded.entry(source).or_default() += n;
        }
        for (key, n) in other.left_out {
            *self.left_out.entry(key).or_default() += n;
        }
    }

    fn tally_mut(&mut self, driver: &str, family: Family) -> &mut Tally {
        &mut self
            .tallies
            .entry((driver.to_owned(), family.to_string()))
            .or_insert((family, Tally::default()))
            .1
    }

    pub(crate) fn count_loaded(&mut self, source: &str, cases: usize) {
        *self.loaded.entry(source.to_owned()).or_default() += cases;
    }

    pub(crate) fn leave_out(&mut self, source: &str, why: &str) {
        *self.left_out.entry((source.to_owned(), why.to_owned())).or_default() += 1;
    }

    pub(crate) fn pass(&mut self, driver: &str, family: Family, layout: Layout) {
        self.tally_mut(driver, family).passed[layout as usize] += 1;
    }

    pub(crate) fn reject(&mut self, driver: &str, family: Family, layout: Layout) {
        self.tally_mut(driver, family).rejected[layout as usize] += 1;
    }

    pub(crate) fn reject_at_setup(&mut self, driver: &str, family: Family) {
        self.tally_mut(driver, family).rejected_at_setup += 1;
    }

    pub(crate) fn skip(&mut self, driver: &str, family: Family, reason: String) {
        self.tally_mut(driver, family).skipped += 1;
        self.skips.insert((driver.to_owned(), family.to_string(), reason));
    }

    pub(crate) fn fail(
        &mut self,
        driver: &str,
        family: Family,
        case: &CaseId,
        layout: Option<Layout>,
        what: String,
    ) {
        self.tally_mut(driver, family).failed += 1;
        self.failures.push(Failure {
            driver: Some(driver.to_owned()),
            family: Some(family),
            case: case.clone(),
            layout,
            what,
        });
    }

    /// Cases of `family` that no driver offers: a failure of the run, not a silent pass.
    pub(crate) fn unoffered(&mut self, family: Family, first: &CaseId) {
        self.failures.push(Failure {
            driver: None,
            family: Some(family),
            case: CaseId { source: first.source.clone(), label: "(every case)".to_owned() },
            layout: None,
            what: format!("no driver offers {family}"),
        });
    }

    /// A vector source that could not be loaded: a failure of the suite itself.
    pub(crate) fn load_failed(&mut self, source: &str, what: String) {
        self.loaded.entry(source.to_owned()).or_default();
        self.failures.push(Failure {
            driver: None,
            family: None,
            case: CaseId { source: source.to_owned(), label: "(loading)".to_owned() },
            layout: None,
            what,
        });
    }
}

/// A table: one row per driver × family with the per-layout pass counts and the
/// rejections (at session creation; at submission, the same in every layout when nothing
/// failed), then the sources, skips and failures.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<8} {:<24} | {:>8} {:>12} {:>9} {:>8} | {:>9} {:>10} | {:>7} {:>6}",
            "driver",
            "family",
            "in-place",
            "out-of-place",
            "segmented",
            "embedded",
            "rej@setup",
            "rej@submit",
            "skipped",
            "failed"
        )?;
        for (driver, family, t) in self.tallies() {
            let p = |l| t.passed(l);
            writeln!(
                f,
                "{:<8} {:<24} | {:>8} {:>12} {:>9} {:>8} | {:>9} {:>10} | {:>7} {:>6}",
                driver,
                family.to_string(),
                p(Layout::InPlace),
                p(Layout::OutOfPlace),
                p(Layout::Segmented),
                p(Layout::Embedded),
                t.rejected_at_setup,
                t.rejected.iter().min().copied().unwrap_or(0),
                t.skipped,
                t.failed
            )?;
        }
        writeln!(f, "vector sources:")?;
        for (source, n) in &self.loaded {
            writeln!(f, "  {n:>5}  {source}")?;
        }
        for (source, why, n) in self.left_out() {
            writeln!(f, "left out: {n:>5}  {source}: {why}")?;
        }
        for (driver, family, reason) in self.skips() {
            writeln!(f, "skipped: driver {driver}, {family}: {reason}")?;
        }
        writeln!(f, "{} failure(s)", self.failures.len())?;
        for failure in &self.failures {
            writeln!(f, "  FAIL {failure}")?;
        }
        Ok(())
    }
}
