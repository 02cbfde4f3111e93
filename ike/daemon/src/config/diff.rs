//! What changed between two configurations, for a reload on SIGHUP: the daemon keeps the
//! established SAs of every connection that is [`Diff::unchanged`], closes those of
//! [`Diff::removed`] connections, keeps those of [`Diff::changed`] ones (the new settings
//! apply from their next negotiation) and starts a changed one that has none;
//! [`Diff::added`] connections start as their start actions say.
//!
//! A connection is compared whole, children included: any difference in any setting makes
//! it changed. Secrets are reported on their own ([`Diff::secrets_changed`]): a new
//! pre-shared key applies to the next authentication and does not tear down SAs
//! authenticated with the old one (an IKE SA rekey does not authenticate again).

use super::Config;

/// Connection names by what happened to them, each list in the order of the file they come
/// from (the new file for added, changed and unchanged ones, the old for removed ones).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
    pub unchanged: Vec<String>,
    /// Whether any pre-shared key or private key entry differs.
    pub secrets_changed: bool,
}

impl Diff {
    /// Whether the reload changes nothing.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty() && !self.secrets_changed
    }
}

/// Compares `old` (running) with `new` (just read).
pub fn diff(old: &Config, new: &Config) -> Diff {
    let mut d = Diff { secrets_changed: old.secrets != new.secrets, ..Diff::default() };
    for c in &new.connections {
        match old.connection(&c.name) {
            None => d.added.push(c.name.clone()),
            Some(o) if o == c => d.unchanged.push(c.name.clone()),
            Some(_) => d.changed.push(c.name.clone()),
        }
    }
    for c in &old.connections {
        if new.connection(&c.name).is_none() {
            d.removed.push(c.name.clone());
        }
    }
    d
}
