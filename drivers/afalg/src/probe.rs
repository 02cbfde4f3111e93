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
//! ```

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
    /// `socket(AF_ALG)` failed: the kernel has no AF_ALG (or it is forbidden).
    NoAfAlg(Errno),
    /// `/proc/crypto` could not be read.
    ProcCrypto(String),
    /// AF_ALG answers, but no algorithm ocf names is usable.
    NothingUsable(ProbeReport),
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::NoAfAlg(e) => write!(
                f,
                "afalg: unavailable: this kernel has no AF_ALG sockets (socket(AF_ALG): {}); it needs \
                 CONFIG_CRYPTO_USER_API_{{SKCIPHER,AEAD,HASH}} (modules af_alg, algif_skcipher, \
                 algif_aead, algif_hash)",
                e.desc()
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
    af_alg_socket().map_err(Unavailable::NoAfAlg)?;
    let mut bound = Vec::new();
    let mut report = ProbeReport::default();
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
        let e = Unavailable::NoAfAlg(Errno::EAFNOSUPPORT).to_string();
        assert!(e.contains("no AF_ALG") && e.contains("Address family not supported"), "{e}");
    }
}
