//! A CHILD_SA's policy (swanctl.conf's `children { NAME { … } }`): what traffic it carries,
//! how, with which ESP proposals, for how long, and what starts it.

use super::lifetime::ChildLifetimes;
use super::proposal::Proposal;
use super::ts::TrafficSelector;

/// ESP's mode (swanctl.conf's `mode`; `tunnel` by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    #[default]
    Tunnel,
    Transport,
}

/// When the CHILD_SA is brought up (swanctl.conf's `start_action`; `none` by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StartAction {
    /// Wait for the peer to initiate.
    #[default]
    None,
    /// Install a trap policy and initiate on its first packet (ipsecd's ACQUIRE).
    Trap,
    /// Initiate when the configuration is loaded.
    Start,
}

/// What to do with the CHILD_SA when liveness checks find the peer gone (`dpd_action`;
/// `none` by default, as strongSwan's; strongSwan reads `clear` as `none`, and so does iked).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DpdAction {
    /// Close it, nothing more.
    #[default]
    None,
    /// Close it and install a trap policy, so that traffic brings it back.
    Trap,
    /// Close it and initiate again at once.
    Restart,
}

/// One CHILD_SA's policy.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Child {
    pub name: String,
    /// Never empty (`dynamic` by default).
    pub local_ts: Vec<TrafficSelector>,
    pub remote_ts: Vec<TrafficSelector>,
    pub mode: Mode,
    /// Never empty (`default` by default).
    pub esp_proposals: Vec<Proposal>,
    pub lifetimes: ChildLifetimes,
    pub start_action: StartAction,
    pub dpd_action: DpdAction,
}
