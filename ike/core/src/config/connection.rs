//! A connection (swanctl.conf's `connections { NAME { … } }`): the IKE SA's policy — the
//! addresses it runs between, how each side authenticates, the IKE proposals and lifetimes,
//! liveness checks, UDP encapsulation and fragmentation, whether its IKE SAs with one peer
//! are unique — and its children.
//!
//! IKEv2 only, one authentication round per side (RFC 4739's multiple rounds are not
//! offered), no MOBIKE. [`Connection::validate`] checks what no single setting shows.

use std::net::IpAddr;
use std::time::Duration;

use super::auth::{AuthMethod, AuthRound};
use super::child::{Child, StartAction};
use super::error::{Invalid, ValidationError};
use super::lifetime::IkeLifetimes;
use super::proposal::Proposal;
use super::secrets::Secrets;

/// IKE fragmentation (RFC 7383; swanctl.conf's `fragmentation`, `yes` by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fragmentation {
    /// Never fragment, and do not announce support.
    No,
    /// Announce support and reassemble fragments, but never send any (strongSwan's
    /// `accept`).
    Accept,
    /// Announce support and fragment large messages when the peer supports it too.
    #[default]
    Yes,
    /// Fragment even before knowing whether the peer supports it.
    Force,
}

/// Whether a connection keeps one IKE SA per peer (swanctl.conf's `unique`). The key
/// manager acts on it when a new IKE SA's CHILD_SA is installed; the state machine itself
/// keeps every IKE SA it negotiated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Unique {
    /// A new IKE SA with a peer replaces the older ones of the connection with that peer
    /// (strongSwan's `replace`): a peer that restarted comes back.
    #[default]
    Replace,
    /// Every IKE SA stays, however many a peer brings up (strongSwan's `never`): many
    /// tunnels of one connection, e.g. a set-up rate measurement.
    Never,
}

/// One connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Connection {
    pub name: String,
    /// The addresses IKE runs from; empty: any (`%any`).
    pub local_addrs: Vec<IpAddr>,
    /// The peer's addresses; empty: any (`%any`, a responder only). An initiator uses the
    /// first.
    pub remote_addrs: Vec<IpAddr>,
    pub local: AuthRound,
    pub remote: AuthRound,
    /// Never empty (`default` by default).
    pub proposals: Vec<Proposal>,
    pub lifetimes: IkeLifetimes,
    /// The interval of liveness checks (an empty INFORMATIONAL) when no traffic arrived;
    /// zero: none (strongSwan's default).
    pub dpd_delay: Duration,
    /// UDP encapsulation even without a NAT (`encap = yes`; `no` by default).
    pub encap: bool,
    pub fragmentation: Fragmentation,
    /// What a new IKE SA with a peer does to the older ones (`replace` by default).
    pub unique: Unique,
    pub children: Vec<Child>,
}

impl Connection {
    fn error(&self, child: Option<&Child>, field: &'static str, invalid: Invalid) -> ValidationError {
        ValidationError {
            connection: self.name.clone(),
            child: child.map(|c| c.name.clone()),
            field,
            invalid,
        }
    }

    /// Checks what no single setting shows; `secrets` are those of the same configuration,
    /// for the check that a `psk` connection has a key.
    pub fn validate(&self, secrets: &Secrets) -> Result<(), ValidationError> {
        if self.children.is_empty() {
            return Err(self.error(None, "children", Invalid::NoChildren));
        }
        for (side, round, certs_field, cacerts_field) in [
            ("local", &self.local, "local.certs", "local.cacerts"),
            ("remote", &self.remote, "remote.certs", "remote.cacerts"),
        ] {
            match round.method {
                AuthMethod::Psk => {
                    if !round.certs.is_empty() {
                        return Err(self.error(None, certs_field, Invalid::CertificateWithPsk));
                    }
                    if !round.cacerts.is_empty() {
                        return Err(self.error(None, cacerts_field, Invalid::CertificateWithPsk));
                    }
                }
                AuthMethod::Pubkey => {
                    if side == "local" && round.certs.is_empty() {
                        return Err(self.error(None, certs_field, Invalid::NoCertificate));
                    }
                    if side == "remote" && round.cacerts.is_empty() {
                        return Err(self.error(None, cacerts_field, Invalid::NoCa));
                    }
                }
            }
        }
        let psk = self.local.method == AuthMethod::Psk || self.remote.method == AuthMethod::Psk;
        if psk && secrets.psk_for(&self.local.id, &self.remote.id).is_none() {
            return Err(self.error(None, "secrets", Invalid::NoSecret));
        }
        for (i, child) in self.children.iter().enumerate() {
            if self.children[..i].iter().any(|c| c.name == child.name) {
                return Err(self.error(Some(child), "children", Invalid::DuplicateChild));
            }
            if child.start_action != StartAction::None && self.remote_addrs.is_empty() {
                return Err(self.error(Some(child), "start_action", Invalid::InitiateToAny));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::auth::Psk;
    use crate::config::child::{DpdAction, Mode};
    use crate::config::identity::Identity;
    use crate::config::lifetime::ChildLifetimes;
    use crate::config::proposal::{parse_proposals, Protocol};
    use crate::config::secrets::SharedSecret;
    use crate::config::ts::TrafficSelector;

    fn child(name: &str, start: StartAction) -> Child {
        Child {
            name: name.into(),
            local_ts: vec![TrafficSelector::parse("dynamic").unwrap()],
            remote_ts: vec![TrafficSelector::parse("dynamic").unwrap()],
            mode: Mode::Tunnel,
            esp_proposals: parse_proposals(Protocol::Esp, "default").unwrap(),
            lifetimes: ChildLifetimes::default(),
            start_action: start,
            dpd_action: DpdAction::None,
        }
    }

    fn conn() -> Connection {
        Connection {
            name: "gw".into(),
            local_addrs: vec!["10.0.0.1".parse().unwrap()],
            remote_addrs: vec!["10.0.0.2".parse().unwrap()],
            local: AuthRound::new(AuthMethod::Psk, Identity::parse("a.example").unwrap()),
            remote: AuthRound::new(AuthMethod::Psk, Identity::parse("b.example").unwrap()),
            proposals: parse_proposals(Protocol::Ike, "default").unwrap(),
            lifetimes: IkeLifetimes::default(),
            dpd_delay: Duration::ZERO,
            encap: false,
            fragmentation: Fragmentation::Yes,
            unique: Unique::Replace,
            children: vec![child("net", StartAction::Start)],
        }
    }

    fn secrets() -> Secrets {
        Secrets {
            shared: vec![SharedSecret {
                name: "gw".into(),
                ids: vec![Identity::parse("b.example").unwrap()],
                secret: Psk::parse("0123456789abcdef").unwrap(),
            }],
            private_keys: Vec::new(),
        }
    }

    #[test]
    fn valid() {
        assert_eq!(conn().validate(&secrets()), Ok(()));
    }

    #[test]
    fn each_error_names_where() {
        let s = secrets();
        let mut c = conn();
        c.children.clear();
        assert_eq!(c.validate(&s).unwrap_err().invalid, Invalid::NoChildren);

        let mut c = conn();
        c.remote_addrs.clear();
        let e = c.validate(&s).unwrap_err();
        assert_eq!(
            (e.child.as_deref(), e.field, &e.invalid),
            (Some("net"), "start_action", &Invalid::InitiateToAny)
        );
        assert!(e.to_string().starts_with("connection 'gw', child 'net', start_action: "), "{e}");
        c.children[0].start_action = StartAction::None;
        assert_eq!(c.validate(&s), Ok(()), "a responder may take any address");

        let mut c = conn();
        c.children.push(child("net", StartAction::None));
        assert_eq!(c.validate(&s).unwrap_err().invalid, Invalid::DuplicateChild);

        assert_eq!(conn().validate(&Secrets::default()).unwrap_err().invalid, Invalid::NoSecret);

        let mut c = conn();
        c.local.method = AuthMethod::Pubkey;
        c.remote.method = AuthMethod::Pubkey;
        let e = c.validate(&Secrets::default()).unwrap_err();
        assert_eq!((e.field, e.invalid), ("local.certs", Invalid::NoCertificate));
        c.local.certs.push("gw.pem".into());
        let e = c.validate(&Secrets::default()).unwrap_err();
        assert_eq!((e.field, e.invalid), ("remote.cacerts", Invalid::NoCa));
        c.remote.cacerts.push("ca.pem".into());
        assert_eq!(c.validate(&Secrets::default()), Ok(()), "pubkey needs no secret");

        let mut c = conn();
        c.remote.cacerts.push("ca.pem".into());
        let e = c.validate(&s).unwrap_err();
        assert_eq!((e.field, e.invalid), ("remote.cacerts", Invalid::CertificateWithPsk));
    }
}
