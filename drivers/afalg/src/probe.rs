//! What the running kernel offers: bind every algorithm ocf names (the kernel instantiates
//! templates as they are bound), then read `/proc/crypto` for the implementation behind
//! each name and its class (`crate::proc_crypto`).
//!
//! ```text
//!  socket(AF_ALG) ── EAFNOSUPPORT ─► Unavailable::NoAfAlg (nothing registered)
//!     │
//!  bind each candidate ── ENOENT: not offered (listed as such)
//!     │
//!  /proc/crypto ─► best entry per bound name ─► selftest passed? ─► class ─► Probed
//!                                               └ no: refused (listed with the reason)
//!     │
//!  /proc/sys/kernel/osrelease ─► 7.2 or later? ─► ProbeReport::deprecated (a warning first)
//! ```
//!
//! **AF_ALG's deprecation.** Linux 7.2 deprecates AF_ALG (Eric Biggers' patches "crypto:
//! af_alg - Document the deprecation of AF_ALG" and the ones after it, April–June 2026) and
//! drops its zero-copy path and its use of off-CPU accelerators: from 7.2 AF_ALG runs only
//! the kernel's software implementations. A running kernel announces this nowhere but in
//! its documentation and Kconfig help (no `/proc/crypto` field, sysfs file or log line marks
//! it), so the probe goes by the release the kernel reports: 7.2 or later is taken as
//! deprecating. A distribution kernel that backports the change under an older number is
//! not recognised, and one that reverts it is still warned about. `/proc/crypto` still
//! lists the engines on such a kernel, so a `hardware` class in the report says what the
//! kernel has, not what AF_ALG will use: the warning says so.

use std::fmt;

use nix::errno::Errno;
use ocf::{CipherAlg, DigestAlg, MacAlg, Priority};

use crate::names::{self, KernelAlg, SockType};
use crate::proc_crypto::{self, Refusal};
use crate::socket::{af_alg_socket, Transform};

/// An algorithm the kernel serves, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probed {
    pub alg: KernelAlg,
    /// The kernel's implementation (`/proc/crypto`'s `driver`).
    pub driver: String,
    pub module: String,
    pub kernel_priority: i64,
    pub class: Priority,
}

/// An algorithm the kernel does not serve, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    pub alg: KernelAlg,
    pub why: String,
}

/// The probe's findings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeReport {
    pub probed: Vec<Probed>,
    pub missing: Vec<Missing>,
    /// The kernel's release, where it is one that deprecates AF_ALG ([`deprecates`]).
    pub deprecated: Option<String>,
}

/// The first release that deprecates AF_ALG, without zero-copy or off-CPU accelerators.
pub const DEPRECATED_FROM: (u32, u32) = (7, 2);

/// Whether a kernel release string (`uname -r`: `7.2.0-1-amd64`, `6.1.0-28-amd64`,
/// `7.2-rc3`) is one that deprecates AF_ALG: its major.minor is at least
/// [`DEPRECATED_FROM`]. `None` where the string does not start with `MAJOR.MINOR`.
pub fn deprecates(release: &str) -> Option<bool> {
    let (major, rest) = release.trim().split_once('.')?;
    let major: u32 = major.parse().ok()?;
    let minor = &rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len())];
    let minor: u32 = minor.parse().ok()?;
    Some((major, minor) >= DEPRECATED_FROM)
}

/// The running kernel's release if it deprecates AF_ALG.
fn running_kernel_deprecates() -> Option<String> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let release = release.trim();
    deprecates(release)?.then(|| release.to_owned())
}

/// The warning a deprecating kernel gets, first in the report and in [`Unavailable`].
fn deprecation_warning(release: &str) -> String {
    format!(
        "warning: Linux {release} deprecates AF_ALG (from {}.{}): no zero-copy and no off-CPU \
         accelerators through it, only the kernel's software code; a `hardware` class below is \
         what /proc/crypto lists, not what AF_ALG will use. On the CPU, soft or mb are faster \
         (docs/afalg.md)",
        DEPRECATED_FROM.0, DEPRECATED_FROM.1
    )
}

impl ProbeReport {
    pub fn find(&self, name: &str) -> Option<&Probed> {
        self.probed.iter().find(|p| p.alg.name == name)
    }
}

fn class_name(p: Priority) -> &'static str {
    match p {
        Priority::Hardware => "hardware",
        Priority::AcceleratedSoftware => "accelerated software",
        Priority::Software => "software",
    }
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(release) = &self.deprecated {
            writeln!(f, "  {}", deprecation_warning(release))?;
        }
        for p in &self.probed {
            writeln!(
                f,
                "  {:<9} {:<36} {:<52} prio {:>4}  {}",
                p.alg.kind.as_str(),
                p.alg.name,
                p.driver,
                p.kernel_priority,
                class_name(p.class)
            )?;
        }
        for m in &self.missing {
            writeln!(f, "  {:<9} {:<36} not used: {}", m.alg.kind.as_str(), m.alg.name, m.why)?;
        }
        Ok(())
    }
}

/// Why the driver registers nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// `socket(AF_ALG)` failed: the kernel has no AF_ALG (or it is forbidden). With the
    /// kernel's release where it is one that deprecates AF_ALG.
    NoAfAlg(Errno, Option<String>),
    /// `/proc/crypto` could not be read.
    ProcCrypto(String),
    /// AF_ALG answers, but no algorithm ocf names is usable.
    NothingUsable(ProbeReport),
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::NoAfAlg(e, None) => write!(
                f,
                "afalg: unavailable: this kernel has no AF_ALG sockets (socket(AF_ALG): {}); it needs \
                 CONFIG_CRYPTO_USER_API_{{SKCIPHER,AEAD,HASH}} (modules af_alg, algif_skcipher, \
                 algif_aead, algif_hash)",
                e.desc()
            ),
            Unavailable::NoAfAlg(e, Some(release)) => write!(
                f,
                "afalg: unavailable: this kernel has no AF_ALG sockets (socket(AF_ALG): {}); Linux \
                 {release} deprecates AF_ALG (from {}.{}) and may be built without it: use soft or mb \
                 (docs/afalg.md)",
                e.desc(),
                DEPRECATED_FROM.0,
                DEPRECATED_FROM.1
            ),
            Unavailable::ProcCrypto(why) => write!(f, "afalg: unavailable: cannot read /proc/crypto: {why}"),
            Unavailable::NothingUsable(r) => {
                write!(f, "afalg: unavailable: AF_ALG answers but no algorithm ocf names is usable:\n{r}")
            }
        }
    }
}

impl std::error::Error for Unavailable {}

/// Every kernel algorithm ocf could use, in listing order; with the ocf algorithms each
/// stands for.
pub(crate) fn candidates() -> Vec<KernelAlg> {
    let mut v = Vec::new();
    let k = |kind, name: &str| KernelAlg { kind, name: name.to_owned() };
    for c in CipherAlg::ALL {
        if let Some(n) = names::cipher_name(c) {
            v.push(k(SockType::Skcipher, n));
        }
        if let Some(n) = names::aead_name(c) {
            v.push(k(SockType::Aead, n));
        }
    }
    for d in DigestAlg::ALL {
        v.extend(names::digest_name(d).map(|n| k(SockType::Hash, n)));
    }
    for m in MacAlg::ALL {
        v.extend(names::mac_name(m).map(|n| k(SockType::Hash, &n)));
    }
    for c in CipherAlg::ALL.into_iter().filter(|c| names::cipher_name(*c).is_some()) {
        for m in MacAlg::ALL {
            v.extend(names::authenc_name(c, m, false).map(|n| k(SockType::Aead, &n)));
        }
    }
    v
}

/// Probes the running kernel (see the module docs).
pub fn probe_kernel() -> Result<ProbeReport, Unavailable> {
    let deprecated = running_kernel_deprecates();
    af_alg_socket().map_err(|e| Unavailable::NoAfAlg(e, deprecated.clone()))?;
    let mut bound = Vec::new();
    let mut report = ProbeReport { deprecated, ..ProbeReport::default() };
    for alg in candidates() {
        match Transform::bind(alg.kind, &alg.name) {
            Ok(t) => bound.push((alg, t)),
            Err(e) => report.missing.push(Missing { alg, why: format!("bind: {}", e.desc()) }),
        }
    }
    let text = std::fs::read_to_string("/proc/crypto").map_err(|e| Unavailable::ProcCrypto(e.to_string()))?;
    let report = classify_bound(&text, bound.into_iter().map(|(a, _t)| a), report);
    if report.probed.is_empty() {
        return Err(Unavailable::NothingUsable(report));
    }
    Ok(report)
}

/// The bound algorithms against `/proc/crypto`'s text: each gets its best entry's class, or
/// is listed as missing with the reason (pure: tested on samples).
pub(crate) fn classify_bound(
    proc_crypto: &str,
    bound: impl IntoIterator<Item = KernelAlg>,
    mut report: ProbeReport,
) -> ProbeReport {
    let entries = proc_crypto::parse(proc_crypto);
    for alg in bound {
        match proc_crypto::best(&entries, &alg.name) {
            Ok(e) => report.probed.push(Probed {
                driver: e.driver.clone(),
                module: e.module.clone(),
                kernel_priority: e.priority,
                class: proc_crypto::classify(&e.driver),
                alg,
            }),
            Err(Refusal::NotListed) => {
                report.missing.push(Missing { alg, why: "bound, but /proc/crypto does not list it".into() })
            }
            Err(Refusal::SelftestNotPassed { driver, selftest }) => report
                .missing
                .push(Missing { alg, why: format!("refused: {driver} has selftest {selftest}, not passed") }),
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_cover_every_mode() {
        let c = candidates();
        let has = |n: &str| c.iter().any(|a| a.name == n);
        for n in [
            "cbc(aes)",
            "ctr(aes)",
            "cbc(des3_ede)",
            "gcm(aes)",
            "rfc7539(chacha20,poly1305)",
            "sha256",
            "hmac(sha1)",
        ] {
            assert!(has(n), "{n}");
        }
        assert!(has("authenc(hmac(sha256),cbc(aes))") && has("authenc(hmac(sha1),cbc(des3_ede))"));
    }

    #[test]
    fn classify_bound_refuses_failed_selftests_and_unlisted_names() {
        let text = "name : sha256\ndriver : sha256-qat\nmodule : qat\npriority : 300\nselftest : passed\ntype : ahash\n\n\
                    name : sha1\ndriver : sha1-broken\nmodule : x\npriority : 300\nselftest : failed\ntype : shash\n";
        let k = |n: &str| KernelAlg { kind: SockType::Hash, name: n.into() };
        let r = classify_bound(text, [k("sha256"), k("sha1"), k("md5")], ProbeReport::default());
        assert_eq!(r.probed.len(), 1);
        assert_eq!((r.probed[0].driver.as_str(), r.probed[0].class), ("sha256-qat", Priority::Hardware));
        assert_eq!(r.missing.len(), 2);
        assert!(r.missing[0].why.contains("selftest failed"), "{}", r.missing[0].why);
        assert!(r.missing[1].why.contains("does not list"), "{}", r.missing[1].why);
        let shown = r.to_string();
        assert!(
            shown.contains("sha256-qat") && shown.contains("hardware") && shown.contains("refused"),
            "{shown}"
        );
    }

    #[test]
    fn unavailable_says_why() {
        let e = Unavailable::NoAfAlg(Errno::EAFNOSUPPORT, None).to_string();
        assert!(e.contains("no AF_ALG") && e.contains("Address family not supported"), "{e}");
        assert!(!e.contains("deprecates"), "{e}");
        let e = Unavailable::NoAfAlg(Errno::EAFNOSUPPORT, Some("7.2.0-1-amd64".into())).to_string();
        assert!(e.contains("Linux 7.2.0-1-amd64 deprecates AF_ALG") && e.contains("soft or mb"), "{e}");
    }

    /// Releases as `uname -r` prints them: Debian's, Fedora's, release candidates, a
    /// two-digit minor, the 7.x boundary; and what is not a release.
    #[test]
    fn deprecation_is_read_from_the_release() {
        for (release, want) in [
            ("6.1.0-28-amd64", Some(false)),
            ("6.19.3", Some(false)),
            ("7.0.0", Some(false)),
            ("7.1.9-200.fc44.x86_64", Some(false)),
            ("7.2-rc1", Some(true)),
            ("7.2.0-1-amd64", Some(true)),
            ("7.10.1", Some(true)),
            ("8.0.0-arch1-1", Some(true)),
            ("10.1", Some(true)),
            (" 7.2.0\n", Some(true)),
            ("6.1.0-28-amd64\n", Some(false)),
            ("", None),
            ("linux", None),
            ("7", None),
            ("7-2", None),
            ("7.x", None),
        ] {
            assert_eq!(deprecates(release), want, "{release:?}");
        }
    }

    /// A deprecating kernel's report starts with the warning; another's has none.
    #[test]
    fn a_deprecating_kernel_is_warned_about_first() {
        let text = "name : sha256\ndriver : sha256-qat\nmodule : qat\npriority : 300\nselftest : passed\ntype : ahash\n";
        let k = KernelAlg { kind: SockType::Hash, name: "sha256".into() };
        let old = classify_bound(text, [k.clone()], ProbeReport::default()).to_string();
        assert!(!old.contains("deprecates"), "{old}");
        let new = ProbeReport { deprecated: Some("7.2.0-1-amd64".into()), ..ProbeReport::default() };
        let new = classify_bound(text, [k], new).to_string();
        let first = new.lines().next().unwrap();
        assert!(first.contains("warning: Linux 7.2.0-1-amd64 deprecates AF_ALG"), "{new}");
        assert!(first.contains("not what AF_ALG will use"), "{first}");
        assert!(new.lines().nth(1).unwrap().contains("sha256-qat"), "{new}");
    }
}
