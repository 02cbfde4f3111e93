//! The provider's settings: which drivers serve its sessions and how ocf spreads requests
//! over them. Each comes from the provider's openssl.cnf section, else from the environment
//! (the `openssl` command line has no way to pass provider parameters):
//!
//! | section key | environment | meaning |
//! |---|---|---|
//! | `driver = X` | `OCF_DRIVER` | pin every session to driver X (`soft`, or `sim:<profile>`, registered first): what a user measuring one card with `openssl speed` wants |
//! | `drivers = sim:A,sim:B` | `OCF_DRIVERS` | register these simulated cards beside `soft`, without pinning: ocf routes each request with its policy |
//! | `policy = NAME` | `OCF_POLICY` | ocf's routing policy (`ocf::Policy` names: `priority`, `cost-model`, `least-loaded`, `round-robin`); default `cost-model` |
//! | `stats = PATH` | `OCF_STATS` | where the statistics go at unload ([`crate::stats`]) |
//!
//! What "routes" means here: the provider's ciphers, digests and MACs are multi-part
//! sessions (OpenSSL's update calls are the parts of one message), and ocf routes each
//! message as a whole: its first part chooses the driver by the policy, its later parts
//! follow it (the driver's state for the message travels in the request).
//!
//! A list of drivers is separated by commas; a part that is `key=value` and does not start
//! with `sim:` belongs to the profile before it, so `sim:bcm5822,ring=8,sim:qat-like` is two
//! cards. A value that cannot be had stops the provider from loading, with a message
//! naming it.

use ocf::{Config, Framework, Policy};

/// The settings as found (not yet checked).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// `driver` / `OCF_DRIVER`.
    pub driver: Option<String>,
    /// `drivers` / `OCF_DRIVERS`.
    pub drivers: Option<String>,
    /// `policy` / `OCF_POLICY`.
    pub policy: Option<String>,
    /// `stats` / `OCF_STATS`.
    pub stats: Option<String>,
}

impl Settings {
    /// Each setting from `section` (the openssl.cnf key), else from the environment.
    pub fn find(section: impl Fn(&'static std::ffi::CStr) -> Option<String>) -> Settings {
        let get = |key, env| section(key).or_else(|| std::env::var(env).ok());
        Settings {
            driver: get(c"driver", "OCF_DRIVER"),
            drivers: get(c"drivers", "OCF_DRIVERS"),
            policy: get(c"policy", "OCF_POLICY"),
            stats: get(c"stats", "OCF_STATS"),
        }
    }

    /// The driver every session is pinned to, if one is set.
    fn pinned(&self) -> Option<&str> {
        self.driver.as_deref().map(str::trim).filter(|d| !d.is_empty())
    }

    /// The framework these settings describe, with `soft` and the cards registered; and the
    /// name of the driver sessions are pinned to, if any.
    pub fn framework(&self) -> Result<(Framework, Option<String>), String> {
        let policy = match self.policy.as_deref().map(str::trim).filter(|p| !p.is_empty()) {
            None => Policy::default(),
            Some(p) => p.parse::<Policy>().map_err(|e| format!("policy '{p}': {e}"))?,
        };
        let framework = Framework::with_config(Config { policy, ..Config::default() });
        ocf_soft::register(&framework).map_err(|e| format!("the soft driver: {e}"))?;
        for d in driver_list(self.drivers.as_deref().unwrap_or("")) {
            ocf_sim::register_named(&framework, &d).map_err(|e| format!("drivers: '{d}': {e}"))?;
        }
        let Some(d) = self.pinned() else { return Ok((framework, None)) };
        let registered = |name: &str| framework.drivers().iter().any(|i| i.name == name);
        let name = if d.starts_with(ocf_sim::NAME_PREFIX) && !registered(d) {
            ocf_sim::register_named(&framework, d).map_err(|e| format!("driver '{d}': {e}"))?
        } else {
            d.to_owned()
        };
        if !registered(&name) {
            let known: Vec<String> = framework.drivers().into_iter().map(|i| i.name).collect();
            return Err(format!(
                "driver '{d}' is not registered (registered: {}; a simulated card is sim:<profile>)",
                known.join(", ")
            ));
        }
        Ok((framework, Some(name)))
    }
}

/// The drivers of a `drivers` list: split at commas, a `key=value` part that does not start
/// with `sim:` joined to the profile before it.
pub fn driver_list(list: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match out.last_mut() {
            Some(last) if part.contains('=') && !part.starts_with(ocf_sim::NAME_PREFIX) => {
                last.push(',');
                last.push_str(part);
            }
            _ => out.push(part.to_owned()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(driver: Option<&str>, drivers: Option<&str>, policy: Option<&str>) -> Settings {
        Settings {
            driver: driver.map(Into::into),
            drivers: drivers.map(Into::into),
            policy: policy.map(Into::into),
            stats: None,
        }
    }

    #[test]
    fn a_driver_list_keeps_each_profiles_overrides() {
        assert_eq!(driver_list("sim:bcm5822,ring=8, sim:qat-like"), ["sim:bcm5822,ring=8", "sim:qat-like"]);
        assert_eq!(
            driver_list("sim:ring=16,setup=20us,rate=400MB/s,sim:hifn7951"),
            ["sim:ring=16,setup=20us,rate=400MB/s", "sim:hifn7951"]
        );
        assert_eq!(driver_list(" ,, "), Vec::<String>::new());
        assert_eq!(driver_list("sim:a,soft"), ["sim:a", "soft"]);
    }

    #[test]
    fn cards_are_registered_without_pinning_and_the_policy_is_set() {
        let (fw, pinned) =
            settings(None, Some("sim:hifn7951,sim:hifn7951,sim:bcm5822,ring=8"), Some("round-robin"))
                .framework()
                .unwrap();
        assert_eq!(pinned, None);
        let names: Vec<String> = fw.drivers().into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["soft", "sim:hifn7951", "sim:hifn7951#2", "sim:bcm5822,ring=8"]);
        assert_eq!(fw.config().policy, Policy::RoundRobin);
        let (fw, _) = Settings::default().framework().unwrap();
        assert_eq!(fw.config().policy, Policy::CostModel);
    }

    #[test]
    fn the_pinned_driver_may_be_one_of_the_cards() {
        let (fw, pinned) = settings(Some("sim:qat-like"), Some("sim:qat-like"), None).framework().unwrap();
        assert_eq!(pinned.as_deref(), Some("sim:qat-like"));
        assert_eq!(fw.drivers().len(), 2, "the card is not registered twice");
        let (_, pinned) = settings(Some(" soft "), Some("sim:bcm5822"), None).framework().unwrap();
        assert_eq!(pinned.as_deref(), Some("soft"));
    }

    #[test]
    fn bad_values_are_refused_naming_them() {
        let e = settings(None, None, Some("fastest")).framework().err().unwrap();
        assert!(e.starts_with("policy 'fastest': unknown routing policy") && e.contains("cost-model"), "{e}");
        let e = settings(None, Some("sim:qat-like,sim:nosuchcard"), None).framework().err().unwrap();
        assert!(e.starts_with("drivers: 'sim:nosuchcard': bad sim device profile"), "{e}");
        let e = settings(None, Some("soft"), None).framework().err().unwrap();
        assert!(e.starts_with("drivers: 'soft':") && e.contains("sim:<profile>"), "{e}");
        let e = settings(None, Some("sim:bcm5822,colour=blue"), None).framework().err().unwrap();
        assert!(e.starts_with("drivers: 'sim:bcm5822,colour=blue'") && e.contains("colour=blue"), "{e}");
    }
}
