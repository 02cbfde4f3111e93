//! `/proc/crypto`: which implementation the kernel would use for an algorithm, and what
//! class of device that is. Pure functions over the text, so they are tested on samples.
//!
//! ```text
//!  /proc/crypto text ──parse──► [Entry] ──best(name)──► the highest-priority entry with that
//!                                                        name whose selftest passed
//!                                                        └─classify(driver)──► Priority
//! ```
//!
//! An entry looks like this (one blank line between entries):
//!
//! ```text
//! name         : gcm(aes)
//! driver       : gcm_base(ctr(aes-generic),ghash-generic)
//! module       : gcm
//! priority     : 100
//! selftest     : passed
//! internal     : no
//! type         : aead
//! ```
//!
//! The driver name says what runs the algorithm. Hardware engines register names of their
//! own (`qat_aes_gcm`, `gcm-aes-ccp`, `gcm-aes-caam`, `safexcel-gcm-aes`, `atmel-gcm-aes`);
//! instruction-set code is named after the instructions (`generic-gcm-aesni`,
//! `sha256-avx2`, `cbc-aes-ce`, `sha256-neon`, `aes-x86_64`); the portable C ends in
//! `-generic`. A template instance names its parts (`authenc(hmac(sha256-ni),cbc-aes-aesni)`):
//! its class is the best of its parts', since an accelerated part is what the kernel adds
//! over plain C.

use ocf::Priority;

/// One entry of `/proc/crypto` (the fields the driver uses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub driver: String,
    pub module: String,
    pub priority: i64,
    /// `passed`, `unknown` (still being tested) or `failed`… as the kernel prints it.
    pub selftest: String,
    /// The kernel's internal helpers (`internal : yes`) cannot be bound from user space.
    pub internal: bool,
    pub kind: String,
}

impl Entry {
    pub fn passed(&self) -> bool {
        self.selftest == "passed"
    }
}

/// Parses the whole text. Lines that are not `key : value` and entries without a name are
/// skipped; a missing priority reads as 0.
pub fn parse(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut e = Entry {
            name: String::new(),
            driver: String::new(),
            module: String::new(),
            priority: 0,
            selftest: String::new(),
            internal: false,
            kind: String::new(),
        };
        for line in block.lines() {
            let Some((key, value)) = line.split_once(':') else { continue };
            let value = value.trim();
            match key.trim() {
                "name" => e.name = value.to_owned(),
                "driver" => e.driver = value.to_owned(),
                "module" => e.module = value.to_owned(),
                "priority" => e.priority = value.parse().unwrap_or(0),
                "selftest" => e.selftest = value.to_owned(),
                "internal" => e.internal = value == "yes",
                "type" => e.kind = value.to_owned(),
                _ => {}
            }
        }
        if !e.name.is_empty() {
            out.push(e);
        }
    }
    out
}

/// Why no entry serves an algorithm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `/proc/crypto` lists no usable entry of that name.
    NotListed,
    /// Entries exist, but none passed its selftest; the best one's driver and status.
    SelftestNotPassed { driver: String, selftest: String },
}

/// The entry the kernel would bind for `name`: the highest priority among the entries of
/// that name that passed their selftest and are not internal. Entries that did not pass
/// are refused, even when their priority is higher.
pub fn best<'a>(entries: &'a [Entry], name: &str) -> Result<&'a Entry, Refusal> {
    let named = || entries.iter().filter(|e| e.name == name && !e.internal);
    match named().filter(|e| e.passed()).max_by_key(|e| e.priority) {
        Some(e) => Ok(e),
        None => match named().max_by_key(|e| e.priority) {
            Some(e) => {
                Err(Refusal::SelftestNotPassed { driver: e.driver.clone(), selftest: e.selftest.clone() })
            }
            None => Err(Refusal::NotListed),
        },
    }
}

/// Prefixes of driver-name parts that hardware engines use.
const HARDWARE: &[&str] = &[
    "qat",
    "ccp",
    "caam",
    "safexcel",
    "atmel",
    "hisi",
    "talitos",
    "omap",
    "stm32",
    "sun4i",
    "sun8i",
    "rk",
    "mtk",
    "qce",
    "artpec",
    "n2",
    "nx",
    "mv",
    "virtio",
    "ixp4xx",
    "img",
    "keembay",
    "zynqmp",
    "aspeed",
    "amlogic",
    "octeon",
    "cpt",
    "otx",
    "chcr",
    "sec",
    "hifn",
    "ubsec",
    "geode",
    "s5p",
    "mxs",
    "sahara",
    "dcp",
    "marvell",
    "ux500",
    "crypto4xx",
    "ppc4xx",
    "bcm",
    "iproc",
    "ccree",
];

/// Driver-name parts that name CPU instruction sets.
const INSTRUCTIONS: &[&str] = &[
    "aesni", "ni", "avx", "avx2", "avx512", "vaes", "clmul", "clmulni", "ssse3", "sse2", "sse3", "x86_64",
    "ce", "neon", "asm", "arm64", "arm", "ppc", "spe", "vmx", "p8", "cpacf", "s390", "padlock", "zvkned",
    "riscv64", "mb", "simd", "neonbs",
];

/// The class of the implementation a driver name stands for (see the module docs).
pub fn classify(driver: &str) -> Priority {
    let parts = driver.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').filter(|p| !p.is_empty());
    let mut class = Priority::Software;
    for part in parts {
        let lower = part.to_ascii_lowercase();
        // `qat_aes_gcm`, `sun8i_ce`: the prefix before an underscore names the engine.
        let head = lower.split('_').next().unwrap_or("");
        let words: Vec<&str> = lower.split('_').collect();
        if HARDWARE.contains(&head) {
            return Priority::Hardware;
        }
        if INSTRUCTIONS.contains(&lower.as_str()) || words.iter().any(|w| INSTRUCTIONS.contains(w)) {
            class = Priority::AcceleratedSoftware;
        }
    }
    class
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From Debian 6.1 under user-mode-linux (generic C only), plus a hardware engine's
    /// entry as the QAT driver registers it and an x86 AES-NI entry, and one that failed
    /// its selftest with a higher priority.
    const SAMPLE: &str = "\
name         : gcm(aes)
driver       : gcm_base(ctr(aes-generic),ghash-generic)
module       : gcm
priority     : 100
refcnt       : 1
selftest     : passed
internal     : no
type         : aead
async        : no
blocksize    : 1
ivsize       : 12
maxauthsize  : 16
geniv        : <none>

name         : gcm(aes)
driver       : qat_aes_gcm
module       : intel_qat
priority     : 4001
refcnt       : 1
selftest     : passed
internal     : no
type         : aead
async        : yes

name         : cbc(aes)
driver       : cbc-aes-aesni
module       : aesni_intel
priority     : 400
refcnt       : 1
selftest     : passed
internal     : no
type         : skcipher

name         : cbc(aes)
driver       : cbc-aes-broken
module       : broken_engine
priority     : 9000
refcnt       : 1
selftest     : failed
internal     : no
type         : skcipher

name         : __cbc(aes)
driver       : __cbc-aes-aesni
module       : aesni_intel
priority     : 400
selftest     : passed
internal     : yes
type         : skcipher

name         : sha256
driver       : sha256-generic
module       : kernel
priority     : 100
refcnt       : 1
selftest     : passed
internal     : no
type         : shash
blocksize    : 64
digestsize   : 32

name         : md5
driver       : md5-broken
module       : kernel
priority     : 100
selftest     : unknown
internal     : no
type         : shash
";

    #[test]
    fn parses_every_entry_and_its_fields() {
        let e = parse(SAMPLE);
        assert_eq!(e.len(), 7);
        assert_eq!(e[0].name, "gcm(aes)");
        assert_eq!(e[0].driver, "gcm_base(ctr(aes-generic),ghash-generic)");
        assert_eq!((e[0].priority, e[0].passed(), e[0].kind.as_str()), (100, true, "aead"));
        assert_eq!(e[1].module, "intel_qat");
        assert!(e[4].internal);
        assert_eq!(e[6].selftest, "unknown");
    }

    #[test]
    fn best_takes_the_highest_priority_that_passed_and_refuses_the_rest() {
        let e = parse(SAMPLE);
        assert_eq!(best(&e, "gcm(aes)").unwrap().driver, "qat_aes_gcm");
        // The failed engine has the higher priority: refused, AES-NI chosen.
        assert_eq!(best(&e, "cbc(aes)").unwrap().driver, "cbc-aes-aesni");
        assert_eq!(
            best(&e, "md5"),
            Err(Refusal::SelftestNotPassed { driver: "md5-broken".into(), selftest: "unknown".into() })
        );
        assert_eq!(best(&e, "ctr(aes)"), Err(Refusal::NotListed));
        assert_eq!(best(&e, "__cbc(aes)"), Err(Refusal::NotListed), "internal entries are not bindable");
    }

    #[test]
    fn classifies_hardware_instruction_sets_and_generic_c() {
        for hw in [
            "qat_aes_gcm",
            "gcm-aes-ccp",
            "cbc-aes-caam",
            "safexcel-cbc-aes",
            "atmel-cbc-aes",
            "sun8i_ce_cbc",
        ] {
            assert_eq!(classify(hw), Priority::Hardware, "{hw}");
        }
        for accel in [
            "cbc-aes-aesni",
            "generic-gcm-aesni",
            "sha256-avx2",
            "sha256-ni",
            "cbc-aes-ce",
            "sha256-neon",
            "aes-x86_64",
            "authenc(hmac(sha256-ni),cbc-aes-aesni)",
            "rfc7539(chacha20-simd,poly1305-x86_64)",
        ] {
            assert_eq!(classify(accel), Priority::AcceleratedSoftware, "{accel}");
        }
        for soft in [
            "sha256-generic",
            "gcm_base(ctr(aes-generic),ghash-generic)",
            "authenc(hmac(sha1-generic),cbc(des3_ede-generic))",
            "ecb(cipher_null-generic)",
            "rfc7539(chacha20-generic,poly1305-generic)",
        ] {
            assert_eq!(classify(soft), Priority::Software, "{soft}");
        }
    }
}
