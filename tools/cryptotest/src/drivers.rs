//! The drivers cryptotest can measure, by the names given to `-d`: `soft`, `mb`, `null`,
//! `sim:PROFILE`, `afalg` (and `afalg:OPTIONS`), `all`, and `auto`, each a row of [`NAMES`],
//! the one table that the parser, `--list` and the error messages read. Resolving checks
//! every name before anything runs; registering puts them (and `soft`, the reference for
//! `--verify`) into one framework.
//!
//! `auto` is no driver but a column in which ocf chooses among the others: its sessions
//! come from a framework of their own ([`register_routed`]) that holds exactly the other
//! drivers listed (`null` is never routed to), with the routing policy of `--policy`.
//!
//! Each `sim:` value is a card of its own: `-d sim:hifn7951 -d sim:hifn7951` is two cards,
//! named as `ocf_sim::register` names them (`sim:hifn7951`, then `sim:hifn7951#2`); `soft`,
//! `null` and `auto` count once.
//!
//! `afalg` is the Linux kernel's crypto API: where the kernel has no AF_ALG (or offers
//! nothing), registering it prints the reason on stderr and leaves its column out; the
//! run goes on with the other drivers. `-d all` does not include it (it would probe the
//! kernel on every run): name it.
//!
//! `mb` is the multi-buffer driver (Intel IPsec-MB's job API; AES-CBC/CTR, 3DES,
//! HMAC-SHA1/2 alone or after a cipher, AES-GCM): built without the library, registering
//! it prints the reason and leaves its column out; `-d all` includes it where it is
//! available. It batches only what arrives with the "more follow" hint or as a run handed
//! over whole: measure it with `--batch N` (and `--direct`).
//!
//! `hwrng` is every hardware random source this machine has (`ocf-hwrng`: RDSEED,
//! `/dev/hwrng`), each a column of its own (`hwrng:rdseed`, `hwrng:dev`), its raw bytes
//! through the SP 800-90B health tests; it serves only `random`. Where there is none,
//! registering it prints the reason and leaves it out. `-d all` does not include it
//! (every other algorithm would be a note that it has none): name it.

use ocf::Framework;
use ocf_sim::{SimProfile, PROFILE_NAMES};

/// The driver every result is compared with under `--verify`, and that makes the
/// ciphertexts a decrypt case starts from (and the public-key cases' keys).
pub const REFERENCE: &str = ocf_soft::NAME;

/// One `-d` value, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriverSpec {
    Soft,
    Null,
    /// A simulated accelerator with this profile string (as given, after `sim:`).
    Sim(String),
    /// The kernel's crypto API, by its whole name (`afalg`, `afalg:sync`, …).
    Afalg(String),
    /// The multi-buffer driver (`ocf-mb`).
    Mb,
    /// Every hardware random source found (`ocf-hwrng`).
    Hwrng,
    /// ocf's choice among the other drivers listed.
    Auto,
}

/// The column name of `-d auto`.
pub const AUTO: &str = "auto";

/// Which kind of `-d` value a [`DriverName`] is: what [`resolve`] makes of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameKind {
    Soft,
    Null,
    Sim,
    Afalg,
    Mb,
    Hwrng,
    All,
    Auto,
}

/// One kind of `-d` value. [`NAMES`] is the one table of them: [`resolve`] accepts a
/// value only through it, and `--list` and the error messages print it, so a driver the
/// parser takes cannot be missing from the listing.
#[derive(Clone, Copy, Debug)]
pub struct DriverName {
    /// The value itself (`soft`), or what it starts with when it carries options or a
    /// profile (`sim:`, `afalg:`).
    pub name: &'static str,
    /// Whether `name` is a prefix that takes more after it (`sim:PROFILE`, `afalg:OPTIONS`).
    pub prefix: bool,
    /// How `--list` and the error messages write it (`sim:PROFILE`, `afalg:OPTIONS`).
    pub form: &'static str,
    /// What it is, one line for `--list`.
    pub about: &'static str,
    pub kind: NameKind,
}

impl DriverName {
    fn matches(&self, value: &str) -> bool {
        if self.prefix {
            value.starts_with(self.name)
        } else {
            value == self.name
        }
    }
}

/// Every `-d` value, in `--list`'s order. `afalg` is two rows: the bare name and the
/// prefix with options.
pub static NAMES: [DriverName; 9] = [
    DriverName {
        name: ocf_soft::NAME,
        prefix: false,
        form: "soft",
        about: "the CPU: the fastest of aws-lc-rs, OpenSSL libcrypto, Intel IPsec-MB and RustCrypto per algorithm",
        kind: NameKind::Soft,
    },
    DriverName {
        name: ocf_null::NAME,
        prefix: false,
        form: "null",
        about: "does nothing: what the framework alone costs (its results are not cryptography)",
        kind: NameKind::Null,
    },
    DriverName {
        name: "sim:",
        prefix: true,
        form: "sim:PROFILE",
        about: "a simulated accelerator (descriptor ring, doorbell, timed engine, interrupts; its results \
                computed with soft's code on a host thread)",
        kind: NameKind::Sim,
    },
    DriverName {
        name: ocf_afalg::NAME,
        prefix: false,
        form: "afalg",
        about: "the Linux kernel crypto API (AF_ALG): hardware engines, instruction-set code or generic C, \
                as /proc/crypto ranks them; hardware on a worker pool, the rest on the caller's thread; \
                skipped, with the reason, without AF_ALG",
        kind: NameKind::Afalg,
    },
    DriverName {
        name: "afalg:",
        prefix: true,
        form: "afalg:OPTIONS",
        about: "afalg with options: sync or pool (force one path), workers=N, queue=N, zero_copy=BYTES|off",
        kind: NameKind::Afalg,
    },
    DriverName {
        name: ocf_mb::NAME,
        prefix: false,
        form: "mb",
        about: "the multi-buffer CPU driver: up to 16 buffers at once (AES-CBC/CTR, 3DES, HMAC-SHA1/2, \
                cipher+HMAC, AES-GCM); wins on runs handed over whole (--batch N --direct), a lone \
                request runs on soft's code",
        kind: NameKind::Mb,
    },
    DriverName {
        name: "hwrng",
        prefix: false,
        form: "hwrng",
        about: "random bytes from each hardware source found (RDSEED: hwrng:rdseed, /dev/hwrng: \
                hwrng:dev), every raw byte through the SP 800-90B health tests; random only; skipped, \
                with the reason, where there is none",
        kind: NameKind::Hwrng,
    },
    DriverName {
        name: "all",
        prefix: false,
        form: "all",
        about: "soft, null, every named sim profile, and mb where IPsec-MB is built in (not afalg: name it)",
        kind: NameKind::All,
    },
    DriverName {
        name: AUTO,
        prefix: false,
        form: "auto",
        about: "a column in which ocf chooses per request among the other drivers given (not null), by --policy",
        kind: NameKind::Auto,
    },
];

/// The table entry a `-d` value matches, if any.
pub fn lookup(value: &str) -> Option<&'static DriverName> {
    NAMES.iter().find(|n| n.matches(value))
}

/// What `-d all` means: every driver this build has, with each named accelerator profile
/// (and `mb` where IPsec-MB is built in).
pub fn all() -> Vec<DriverSpec> {
    let mut v = vec![DriverSpec::Soft, DriverSpec::Null];
    v.extend(PROFILE_NAMES.iter().map(|p| DriverSpec::Sim((*p).to_owned())));
    if ocf_mb::available() {
        v.push(DriverSpec::Mb);
    }
    v
}

/// The valid `-d` values, for error messages: [`NAMES`]' forms, with the profiles and
/// options spelled out.
pub fn valid_names() -> String {
    let forms: Vec<String> = NAMES
        .iter()
        .map(|n| match n.kind {
            NameKind::Sim => format!(
                "{} (PROFILE: {} or ring=N,setup=TIME,rate=RATE[,…])",
                n.form,
                PROFILE_NAMES.join(", ")
            ),
            NameKind::Afalg if n.prefix => {
                format!("{} (sync|pool,workers=N,queue=N,zero_copy=BYTES|off)", n.form)
            }
            _ => n.form.to_owned(),
        })
        .collect();
    forms.join(", ")
}

/// Checks `-d` values. The error names the bad value and lists the valid ones, or says what
/// `auto` lacks.
pub fn resolve(names: &[String]) -> Result<Vec<DriverSpec>, String> {
    let mut out: Vec<DriverSpec> = Vec::new();
    for raw in names {
        let name = raw.trim();
        let Some(entry) = lookup(name) else {
            return Err(format!("unknown driver `{name}`\nvalid drivers: {}", valid_names()));
        };
        let bad =
            |e: &dyn std::fmt::Display| format!("bad driver `{name}`: {e}\nvalid drivers: {}", valid_names());
        let specs = match entry.kind {
            NameKind::All => all(),
            NameKind::Soft => vec![DriverSpec::Soft],
            NameKind::Null => vec![DriverSpec::Null],
            NameKind::Mb => vec![DriverSpec::Mb],
            NameKind::Hwrng => vec![DriverSpec::Hwrng],
            NameKind::Auto => vec![DriverSpec::Auto],
            NameKind::Afalg => {
                // Check the options now; whether the kernel has AF_ALG is found at registration.
                if let Some(opts) = name.strip_prefix("afalg:") {
                    ocf_afalg::Config::parse(opts).map_err(|e| bad(&e))?;
                }
                vec![DriverSpec::Afalg(name.to_owned())]
            }
            NameKind::Sim => {
                // Parse now so a bad profile is a usage error, not a failure mid-run.
                let profile = &name[entry.name.len()..];
                profile.parse::<SimProfile>().map_err(|e| bad(&e))?;
                vec![DriverSpec::Sim(profile.trim().to_owned())]
            }
        };
        for s in specs {
            // Every sim card counts; the others once.
            if matches!(s, DriverSpec::Sim(_)) || !out.contains(&s) {
                out.push(s);
            }
        }
    }
    if out.contains(&DriverSpec::Auto) && !out.iter().any(routable) {
        return Err(format!(
            "`-d auto` chooses among the other drivers given with -d, and none is given that it can \
             route to ({} never is): add them, e.g. -d soft -d sim:qat-like -d auto",
            ocf_null::NAME
        ));
    }
    Ok(out)
}

/// Whether `auto` routes to this driver.
fn routable(s: &DriverSpec) -> bool {
    matches!(
        s,
        DriverSpec::Soft | DriverSpec::Sim(_) | DriverSpec::Afalg(_) | DriverSpec::Mb | DriverSpec::Hwrng
    )
}

/// Registers one driver; returns the names it registered under (one, several for
/// `hwrng`), or none for an `afalg` the kernel cannot give, an `mb` this build or CPU
/// lacks, an `hwrng` without a source (with `say`, the reason printed on stderr).
fn register_one(fw: &Framework, spec: &DriverSpec, say: bool) -> Result<Vec<String>, String> {
    let skipped = |name: &str, why: &dyn std::fmt::Display| {
        if say {
            eprintln!("cryptotest: {name} skipped: {why}");
        }
        Ok(Vec::new())
    };
    match spec {
        DriverSpec::Soft => {
            ocf_soft::register(fw).map_err(|e| format!("cannot register soft: {e}"))?;
            Ok(vec![ocf_soft::NAME.to_owned()])
        }
        DriverSpec::Null => {
            ocf_null::register(fw).map_err(|e| format!("cannot register null: {e}"))?;
            Ok(vec![ocf_null::NAME.to_owned()])
        }
        DriverSpec::Sim(p) => {
            ocf_sim::register(fw, p).map(|n| vec![n]).map_err(|e| format!("cannot register sim:{p}: {e}"))
        }
        DriverSpec::Afalg(name) => match ocf_afalg::register_named(fw, name) {
            Ok(_) => Ok(vec![name.clone()]),
            Err(ocf_afalg::AfalgError::Unavailable(why)) => skipped(name, &why),
            Err(e) => Err(format!("cannot register {name}: {e}")),
        },
        DriverSpec::Mb => match ocf_mb::register(fw) {
            Ok(()) => Ok(vec![ocf_mb::NAME.to_owned()]),
            Err(e) if !ocf_mb::available() => skipped(ocf_mb::NAME, &e),
            Err(e) => Err(format!("cannot register {}: {e}", ocf_mb::NAME)),
        },
        DriverSpec::Hwrng => match ocf_hwrng::register(fw) {
            Ok(drivers) => Ok(drivers.iter().map(|d| ocf::Driver::name(d.as_ref()).to_owned()).collect()),
            Err(e @ ocf_hwrng::HwrngError::Unavailable(_)) => skipped("hwrng", &e),
            Err(e) => Err(format!("cannot register hwrng: {e}")),
        },
        DriverSpec::Auto => Ok(vec![AUTO.to_owned()]),
    }
}

/// Registers the drivers (and `soft`, always: it is the reference for `--verify`) and
/// returns the column names, in order (`auto` for `-d auto`; a sim card by the name it
/// registered under).
pub fn register(fw: &Framework, specs: &[DriverSpec]) -> Result<Vec<String>, String> {
    register_one(fw, &DriverSpec::Soft, true)?;
    let mut names = Vec::new();
    for s in specs {
        match s {
            DriverSpec::Soft => names.push(ocf_soft::NAME.to_owned()),
            _ => names.extend(register_one(fw, s, true)?),
        }
    }
    Ok(names)
}

/// Registers each driver it can, saying nothing of those this machine lacks (`--list`);
/// returns the names of those registered.
pub fn register_quietly(fw: &Framework, specs: &[DriverSpec]) -> Vec<String> {
    specs.iter().filter_map(|s| register_one(fw, s, false).ok()).flatten().collect()
}

/// Registers, into `auto`'s own framework, exactly the drivers it routes to: those listed
/// but `null` (and `auto`). Returns their names in order (the first is `--oracle`'s A). A
/// driver this machine lacks is left out silently: [`register`], given the same list
/// first, said why.
pub fn register_routed(fw: &Framework, specs: &[DriverSpec]) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for s in specs.iter().filter(|s| routable(s)) {
        names.extend(register_one(fw, s, false)?);
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn soft_null_and_auto_resolve_once_each_sim_cards_every_time() {
        let got = resolve(&names(&["soft", "sim:bcm5822", "soft", "auto", "null", "auto", "null"])).unwrap();
        assert_eq!(
            got,
            [DriverSpec::Soft, DriverSpec::Sim("bcm5822".into()), DriverSpec::Auto, DriverSpec::Null]
        );
        let two = resolve(&names(&["sim:hifn7951", "sim:hifn7951"])).unwrap();
        assert_eq!(two, [DriverSpec::Sim("hifn7951".into()), DriverSpec::Sim("hifn7951".into())]);
        let mb = usize::from(ocf_mb::available());
        assert_eq!(resolve(&names(&["all"])).unwrap().len(), 2 + PROFILE_NAMES.len() + mb);
        let custom = resolve(&names(&["sim:ring=4,setup=1us,rate=1GB/s"])).unwrap();
        let fw = Framework::new();
        assert_eq!(register(&fw, &custom).unwrap(), ["sim:ring=4,setup=1us,rate=1GB/s"]);
    }

    #[test]
    fn auto_needs_a_driver_it_can_route_to() {
        for alone in [&["auto"][..], &["auto", "null"], &["null", "auto", "auto"]] {
            let e = resolve(&names(alone)).unwrap_err();
            assert!(e.contains("-d auto") && e.contains("add them, e.g. -d soft"), "{alone:?}: {e}");
        }
        assert!(resolve(&names(&["soft", "auto"])).is_ok());
        assert!(resolve(&names(&["auto", "sim:bcm5822"])).is_ok(), "order does not matter");
    }

    #[test]
    fn auto_routes_to_exactly_the_listed_drivers_but_null() {
        let specs = resolve(&names(&["sim:bcm5822", "null", "auto"])).unwrap();
        let main = Framework::new();
        assert_eq!(register(&main, &specs).unwrap(), ["sim:bcm5822", "null", "auto"]);
        let routed = Framework::new();
        assert_eq!(register_routed(&routed, &specs).unwrap(), ["sim:bcm5822"]);
        let held: Vec<String> = routed.drivers().into_iter().map(|d| d.name).collect();
        assert_eq!(held, ["sim:bcm5822"], "not the reference soft: it was not listed");
    }

    /// Needs the clients engineer's `ocf_sim::register` (issue 18): a second card of one
    /// spec registers as `sim:<spec>#2`. Until that is on main this fails with "cannot
    /// register sim:hifn7951: … duplicate"; then drop the `ignore`.
    #[test]
    fn the_same_card_twice_is_two_cards() {
        let specs = resolve(&names(&["soft", "sim:hifn7951", "sim:hifn7951", "auto"])).unwrap();
        let main = Framework::new();
        let cols = register(&main, &specs).unwrap();
        assert_eq!(cols, ["soft", "sim:hifn7951", "sim:hifn7951#2", "auto"]);
        let routed = Framework::new();
        assert_eq!(register_routed(&routed, &specs).unwrap(), ["soft", "sim:hifn7951", "sim:hifn7951#2"]);
    }

    #[test]
    fn bad_names_say_what_is_wrong_and_list_the_valid_ones() {
        let e = resolve(&["gpu".into()]).unwrap_err();
        assert!(e.contains("unknown driver `gpu`") && e.contains("sim:PROFILE"), "{e}");
        let e = resolve(&["sim:hifn9999".into()]).unwrap_err();
        assert!(e.contains("hifn9999") && e.contains("hifn7951"), "{e}");
    }

    /// `afalg` resolves (its options checked); where the kernel has no AF_ALG (this host)
    /// registering it skips its column with the reason instead of failing the run.
    #[test]
    fn afalg_resolves_and_skips_where_the_kernel_lacks_it() {
        let specs = resolve(&names(&["soft", "afalg", "afalg:sync", "auto"])).unwrap();
        assert_eq!(specs[1], DriverSpec::Afalg("afalg".into()));
        let e = resolve(&names(&["afalg:turbo"])).unwrap_err();
        assert!(e.contains("afalg:turbo") && e.contains("unknown afalg option"), "{e}");
        let fw = Framework::new();
        let cols = register(&fw, &specs).unwrap();
        match ocf_afalg::AfalgDriver::probe() {
            Ok(_) => assert_eq!(cols, ["soft", "afalg", "afalg:sync", "auto"]),
            Err(_) => assert_eq!(cols, ["soft", "auto"], "afalg left out, the run goes on"),
        }
    }

    /// Every row of the table is a value `-d` takes (a prefix with a valid rest), and a
    /// value reaches exactly one row.
    #[test]
    fn every_row_of_the_table_resolves() {
        for n in &NAMES {
            let value = match (n.kind, n.prefix) {
                (NameKind::Sim, _) => format!("{}qat-like", n.name),
                (NameKind::Afalg, true) => format!("{}sync", n.name),
                _ => n.name.to_owned(),
            };
            assert!(std::ptr::eq(lookup(&value).unwrap(), n), "{value} reaches another row");
            let with = if n.kind == NameKind::Auto { names(&["soft", &value]) } else { names(&[&value]) };
            assert!(resolve(&with).is_ok(), "{value}: {:?}", resolve(&with));
            assert!(valid_names().contains(n.form), "{} missing from {}", n.form, valid_names());
        }
        assert!(lookup("softer").is_none() && lookup("afalgx").is_none() && lookup("sim").is_none());
    }

    #[test]
    fn registered_names_are_the_spec_names() {
        let fw = Framework::new();
        let specs = resolve(&["all".into()]).unwrap();
        let cols = register(&fw, &specs).unwrap();
        let registered: Vec<String> = fw.drivers().into_iter().map(|d| d.name).collect();
        assert_eq!(cols, registered);
        assert_eq!(cols[2], format!("sim:{}", PROFILE_NAMES[0]));
    }
}
