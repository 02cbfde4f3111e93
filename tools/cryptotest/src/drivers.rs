//! The drivers cryptotest can measure, by the names given to `-d`: `soft`, `null`,
//! `sim:PROFILE`, `all`. Resolving checks every name before anything runs; registering
//! puts them (and `soft`, the reference for `--verify`) into one framework.

use ocf::Framework;
use ocf_sim::{SimProfile, PROFILE_NAMES};

/// One `-d` value, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriverSpec {
    Soft,
    Null,
    /// A simulated accelerator with this profile string (as given, after `sim:`).
    Sim(String),
}

impl DriverSpec {
    /// The name the driver registers under, which tables and JSON show.
    pub fn name(&self) -> String {
        match self {
            DriverSpec::Soft => ocf_soft::NAME.to_owned(),
            DriverSpec::Null => ocf_null::NAME.to_owned(),
            DriverSpec::Sim(p) => format!("sim:{p}"),
        }
    }
}

/// What `-d all` means: every driver this build has, with each named accelerator profile.
pub fn all() -> Vec<DriverSpec> {
    let mut v = vec![DriverSpec::Soft, DriverSpec::Null];
    v.extend(PROFILE_NAMES.iter().map(|p| DriverSpec::Sim((*p).to_owned())));
    v
}

/// The valid `-d` values, for error messages and `--list`.
pub fn valid_names() -> String {
    format!(
        "soft, null, sim:PROFILE (PROFILE: {} or ring=N,setup=TIME,rate=RATE[,…]), all",
        PROFILE_NAMES.join(", ")
    )
}

/// Checks `-d` values. The error names the bad value and lists the valid ones.
pub fn resolve(names: &[String]) -> Result<Vec<DriverSpec>, String> {
    let mut out: Vec<DriverSpec> = Vec::new();
    for raw in names {
        let name = raw.trim();
        let specs = match name {
            "all" => all(),
            "soft" => vec![DriverSpec::Soft],
            "null" => vec![DriverSpec::Null],
            _ => match name.strip_prefix("sim:") {
                Some(profile) => {
                    // Parse now so a bad profile is a usage error, not a failure mid-run.
                    profile
                        .parse::<SimProfile>()
                        .map_err(|e| format!("bad driver `{name}`: {e}\nvalid drivers: {}", valid_names()))?;
                    vec![DriverSpec::Sim(profile.trim().to_owned())]
                }
                None => return Err(format!("unknown driver `{name}`\nvalid drivers: {}", valid_names())),
            },
        };
        for s in specs {
            if !out.iter().any(|o| o.name() == s.name()) {
                out.push(s);
            }
        }
    }
    Ok(out)
}

/// Registers the drivers (and `soft`, always: it is the reference for `--verify`).
pub fn register(fw: &Framework, specs: &[DriverSpec]) -> Result<(), String> {
    ocf_soft::register(fw).map_err(|e| format!("cannot register soft: {e}"))?;
    for s in specs {
        match s {
            DriverSpec::Soft => {}
            DriverSpec::Null => ocf_null::register(fw).map_err(|e| format!("cannot register null: {e}"))?,
            DriverSpec::Sim(p) => {
                ocf_sim::register(fw, p).map_err(|e| format!("cannot register sim:{p}: {e}"))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_once_each() {
        let got = resolve(&["soft".into(), "sim:bcm5822".into(), "soft".into()]).unwrap();
        assert_eq!(got, [DriverSpec::Soft, DriverSpec::Sim("bcm5822".into())]);
        assert_eq!(resolve(&["all".into()]).unwrap().len(), 2 + PROFILE_NAMES.len());
        let custom = resolve(&["sim:ring=4,setup=1us,rate=1GB/s".into()]).unwrap();
        assert_eq!(custom[0].name(), "sim:ring=4,setup=1us,rate=1GB/s");
    }

    #[test]
    fn bad_names_say_what_is_wrong_and_list_the_valid_ones() {
        let e = resolve(&["gpu".into()]).unwrap_err();
        assert!(e.contains("unknown driver `gpu`") && e.contains("sim:PROFILE"), "{e}");
        let e = resolve(&["sim:hifn9999".into()]).unwrap_err();
        assert!(e.contains("hifn9999") && e.contains("hifn7951"), "{e}");
    }

    #[test]
    fn registered_names_are_the_spec_names() {
        let fw = Framework::new();
        let specs = resolve(&["all".into()]).unwrap();
        register(&fw, &specs).unwrap();
        let names: Vec<String> = fw.drivers().into_iter().map(|d| d.name).collect();
        for s in &specs {
            assert!(names.contains(&s.name()), "{} not in {names:?}", s.name());
        }
    }
}
