//! The `connections { }` section: each connection, its two authentication rounds and its
//! children, read setting by setting into ike-core's types, with strongSwan's defaults for
//! what the file leaves out.
//!
//! ```text
//! connections { NAME {                        ─▶ Connection
//!     version local_addrs remote_addrs proposals rekey_time over_time rand_time
//!     dpd_delay encap fragmentation mobike unique
//!     local { auth id certs cacerts }          ─▶ AuthRound   (also local-SUFFIX)
//!     remote { auth id certs cacerts }         ─▶ AuthRound   (also remote-SUFFIX)
//!     children { NAME {                        ─▶ Child
//!         local_ts remote_ts mode esp_proposals rekey_time life_time rand_time
//!         start_action dpd_action } } } }
//! ```
//!
//! A setting or section not listed is an error, never ignored.

use std::time::Duration;

use ike_core::config::{
    parse_duration, parse_proposals, AuthMethod, AuthRound, Child, ChildLifetimes, Connection, DpdAction,
    Fragmentation, Identity, IkeLifetimes, Mode, Protocol, StartAction, TrafficSelector, Unique,
};

use super::error::ErrorKind;
use super::settings::{Item, Pos, Section, Setting};
use super::values::{Ctx, Seen, R};

fn unknown_key(ctx: &Ctx, s: &Setting, section: String) -> crate::config::ConfigError {
    ctx.err(s.pos, ErrorKind::UnknownKey { key: s.key.clone(), section })
}

fn unknown_section(ctx: &Ctx, s: &Section, section: String) -> crate::config::ConfigError {
    ctx.err(s.pos, ErrorKind::UnknownSection { name: s.name.clone(), section })
}

/// Where `key` is set in the section, or the section's own position if it is not.
fn setting_pos(sec: &Section, key: &str) -> Pos {
    sec.items
        .iter()
        .find_map(|i| match i {
            Item::Setting(s) if s.key == key => Some(s.pos),
            _ => None,
        })
        .unwrap_or(sec.pos)
}

fn duration(ctx: &Ctx, s: &Setting) -> R<Duration> {
    ctx.value(s, parse_duration, ErrorKind::Duration)
}

/// `local { }` or `remote { }`.
fn round(ctx: &Ctx, sec: &Section, what: String) -> R<AuthRound> {
    let mut seen = Seen::default();
    let mut method = None;
    let mut id = Identity::Any;
    let (mut certs, mut cacerts) = (Vec::new(), Vec::new());
    for item in &sec.items {
        match item {
            Item::Setting(s) => {
                seen.setting(ctx, s)?;
                match s.key.as_str() {
                    "auth" => {
                        method = Some(ctx.choice(
                            s,
                            &[("psk", AuthMethod::Psk), ("pubkey", AuthMethod::Pubkey)],
                            "psk, pubkey",
                        )?)
                    }
                    "id" => id = ctx.value(s, Identity::parse, ErrorKind::Identity)?,
                    "certs" => certs = ctx.files(s, "x509")?,
                    "cacerts" => cacerts = ctx.files(s, "x509ca")?,
                    _ => return Err(unknown_key(ctx, s, what)),
                }
            }
            Item::Section(x) => return Err(unknown_section(ctx, x, what)),
        }
    }
    let method =
        method.ok_or_else(|| ctx.err(sec.pos, ErrorKind::MissingKey { key: "auth", section: what }))?;
    Ok(AuthRound { method, id, certs, cacerts })
}

/// `children { NAME { } }`'s NAME section.
fn child(ctx: &Ctx, sec: &Section, conn: &str) -> R<Child> {
    let what = format!("child '{}' of connection '{conn}'", sec.name);
    let mut seen = Seen::default();
    let dynamic = || vec![TrafficSelector::parse("dynamic").expect("'dynamic' is a selector")];
    let (mut local_ts, mut remote_ts) = (dynamic(), dynamic());
    let mut mode = Mode::Tunnel;
    let mut esp = None;
    let (mut rekey, mut life, mut rand) = (None, None, None);
    let mut start_action = StartAction::None;
    let mut dpd_action = DpdAction::None;
    for item in &sec.items {
        let s = match item {
            Item::Setting(s) => s,
            Item::Section(x) => return Err(unknown_section(ctx, x, what)),
        };
        seen.setting(ctx, s)?;
        match s.key.as_str() {
            "local_ts" => local_ts = ctx.value(s, TrafficSelector::parse_list, ErrorKind::TrafficSelector)?,
            "remote_ts" => {
                remote_ts = ctx.value(s, TrafficSelector::parse_list, ErrorKind::TrafficSelector)?
            }
            "mode" => {
                mode = match s.value.as_str() {
                    "tunnel" => Mode::Tunnel,
                    "transport" => Mode::Transport,
                    "beet" | "pass" | "drop" => {
                        return Err(ctx.err(
                            s.value_pos,
                            ErrorKind::Unsupported {
                                key: s.key.clone(),
                                value: s.value.clone(),
                                why: "iked negotiates tunnel and transport mode SAs only",
                            },
                        ))
                    }
                    _ => ctx.choice(s, &[], "tunnel, transport")?,
                }
            }
            "esp_proposals" => {
                esp = Some(ctx.value(s, |v| parse_proposals(Protocol::Esp, v), ErrorKind::Proposal)?)
            }
            "rekey_time" => rekey = Some(duration(ctx, s)?),
            "life_time" => life = Some(duration(ctx, s)?),
            "rand_time" => rand = Some(duration(ctx, s)?),
            "start_action" => {
                start_action = ctx.choice(
                    s,
                    &[
                        ("none", StartAction::None),
                        ("trap", StartAction::Trap),
                        ("start", StartAction::Start),
                    ],
                    "none, trap, start",
                )?
            }
            "dpd_action" => {
                dpd_action = ctx.choice(
                    s,
                    &[
                        ("none", DpdAction::None),
                        ("clear", DpdAction::None),
                        ("trap", DpdAction::Trap),
                        ("restart", DpdAction::Restart),
                    ],
                    "none, clear, trap, restart",
                )?
            }
            _ => return Err(unknown_key(ctx, s, what)),
        }
    }
    let lifetimes = ChildLifetimes::resolve(rekey, life, rand)
        .map_err(|e| ctx.err(setting_pos(sec, e.field()), ErrorKind::Lifetime(e)))?;
    let esp_proposals = match esp {
        Some(p) => p,
        None => parse_proposals(Protocol::Esp, "default").expect("the default ESP proposals parse"),
    };
    Ok(Child {
        name: sec.name.clone(),
        local_ts,
        remote_ts,
        mode,
        esp_proposals,
        lifetimes,
        start_action,
        dpd_action,
    })
}

/// Whether a section name is `side` or `side-SUFFIX` (swanctl's round names).
fn is_round(name: &str, side: &str) -> bool {
    name == side || name.strip_prefix(side).is_some_and(|r| r.starts_with('-') && r.len() > 1)
}

/// `connections { NAME { } }`'s NAME section.
pub(super) fn connection(ctx: &Ctx, sec: &Section) -> R<Connection> {
    let name = sec.name.clone();
    let what = format!("connection '{name}'");
    let mut seen = Seen::default();
    let (mut local_addrs, mut remote_addrs) = (Vec::new(), Vec::new());
    let (mut local, mut remote) = (None, None);
    let mut proposals = None;
    let (mut rekey, mut over, mut rand) = (None, None, None);
    let mut dpd_delay = Duration::ZERO;
    let mut encap = false;
    let mut fragmentation = Fragmentation::Yes;
    let mut unique = Unique::Replace;
    let mut children = Vec::new();
    for item in &sec.items {
        match item {
            Item::Setting(s) => {
                seen.setting(ctx, s)?;
                match s.key.as_str() {
                    "version" => {
                        if s.value != "2" {
                            return Err(ctx.err(
                                s.value_pos,
                                ErrorKind::Unsupported {
                                    key: s.key.clone(),
                                    value: s.value.clone(),
                                    why: "iked speaks IKEv2 only: version = 2",
                                },
                            ));
                        }
                    }
                    "local_addrs" => local_addrs = ctx.addrs(s)?,
                    "remote_addrs" => remote_addrs = ctx.addrs(s)?,
                    "proposals" => {
                        proposals =
                            Some(ctx.value(s, |v| parse_proposals(Protocol::Ike, v), ErrorKind::Proposal)?)
                    }
                    "rekey_time" => rekey = Some(duration(ctx, s)?),
                    "over_time" => over = Some(duration(ctx, s)?),
                    "rand_time" => rand = Some(duration(ctx, s)?),
                    "dpd_delay" => dpd_delay = duration(ctx, s)?,
                    "encap" => encap = ctx.boolean(s)?,
                    "fragmentation" => {
                        fragmentation = ctx.choice(
                            s,
                            &[
                                ("yes", Fragmentation::Yes),
                                ("no", Fragmentation::No),
                                ("accept", Fragmentation::Accept),
                                ("force", Fragmentation::Force),
                            ],
                            "yes, no, accept, force",
                        )?
                    }
                    "unique" => {
                        unique = match s.value.as_str() {
                            "no" | "keep" => {
                                return Err(ctx.err(
                                    s.value_pos,
                                    ErrorKind::Unsupported {
                                        key: s.key.clone(),
                                        value: s.value.clone(),
                                        why: "iked replaces a peer's older IKE SAs or keeps them all: \
                                              unique = replace or never",
                                    },
                                ))
                            }
                            _ => ctx.choice(
                                s,
                                &[("replace", Unique::Replace), ("never", Unique::Never)],
                                "replace, never",
                            )?,
                        }
                    }
                    "mobike" => {
                        if ctx.boolean(s)? {
                            return Err(ctx.err(
                                s.value_pos,
                                ErrorKind::Unsupported {
                                    key: s.key.clone(),
                                    value: s.value.clone(),
                                    why: "iked does not do MOBIKE (RFC 4555): mobike = no",
                                },
                            ));
                        }
                    }
                    "children" => return Err(ctx.err(s.pos, ErrorKind::ExpectedSection(s.key.clone()))),
                    k if is_round(k, "local") || is_round(k, "remote") => {
                        return Err(ctx.err(s.pos, ErrorKind::ExpectedSection(s.key.clone())))
                    }
                    _ => return Err(unknown_key(ctx, s, what)),
                }
            }
            Item::Section(x) => {
                seen.section(ctx, x)?;
                let n = x.name.as_str();
                if n == "children" {
                    let mut seen_children = Seen::default();
                    for c in &x.items {
                        match c {
                            Item::Section(c) => {
                                seen_children.section(ctx, c)?;
                                children.push(child(ctx, c, &name)?);
                            }
                            Item::Setting(s) => {
                                return Err(ctx.err(s.pos, ErrorKind::ExpectedSection(s.key.clone())))
                            }
                        }
                    }
                } else if is_round(n, "local") || is_round(n, "remote") {
                    let side = if is_round(n, "local") { &mut local } else { &mut remote };
                    if side.is_some() {
                        return Err(ctx.err(x.pos, ErrorKind::SecondRound(n.to_string())));
                    }
                    *side = Some(round(ctx, x, format!("{n} of connection '{name}'"))?);
                } else {
                    return Err(unknown_section(ctx, x, what));
                }
            }
        }
    }
    let local = local.ok_or_else(|| ctx.err(sec.pos, ErrorKind::MissingRound("local")))?;
    let remote = remote.ok_or_else(|| ctx.err(sec.pos, ErrorKind::MissingRound("remote")))?;
    let lifetimes = IkeLifetimes::resolve(rekey, over, rand)
        .map_err(|e| ctx.err(setting_pos(sec, e.field()), ErrorKind::Lifetime(e)))?;
    let proposals = match proposals {
        Some(p) => p,
        None => parse_proposals(Protocol::Ike, "default").expect("the default IKE proposals parse"),
    };
    Ok(Connection {
        name,
        local_addrs,
        remote_addrs,
        local,
        remote,
        proposals,
        lifetimes,
        dpd_delay,
        encap,
        fragmentation,
        unique,
        children,
    })
}
