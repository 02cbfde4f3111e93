//! ipsecd's `monitor` lines read back into its own events (`ipsec_core::sad::Event`): what
//! iked hears from the data plane — an ACQUIRE (start a negotiation), a soft expiry
//! (rekey), a hard expiry (the SA is gone), a peer that moved behind its NAT.
//!
//! ```text
//!  ipsecd ── monitor line ──▶ parse ──▶ Line::Event(Event)   acquire, soft-/hard-expire,
//!                                  │                          peer-moved, seq-exhausted,
//!                                  │                          larval-expire, path-mtu
//!                                  ├──▶ Line::Overflow(n)     iked lost n lines: re-read
//!                                  └──▶ Line::Other(name)     sa-*, policy-*: what control
//!                                                             requests changed (iked's own)
//! ```
//!
//! The grammar is `ipsecd::monitor`'s module doc; the tests parse what `ipsecd::monitor::line`
//! prints. Parsing is total: a malformed line is an error naming the field, never a panic.
//! A line of an event this version does not know is [`Line::Other`], so that a newer
//! ipsecd does not stop an older iked.

use std::net::IpAddr;
use std::str::FromStr;

use ipsec_core::control::{Mode, Prefix, Proto, SaId, Selector, Upper};
use ipsec_core::sad::{Acquire, Event, Limit};
use ipsec_core::spd::Flow;

/// One monitor line, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Event(Event),
    /// `overflow lost=N`: N events did not reach iked.
    Overflow(u64),
    /// A line iked does not act on (the changes control requests made), by its name.
    Other(String),
}

/// What is wrong with a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineError {
    Empty,
    /// A field the event needs is not there.
    Missing {
        event: String,
        field: &'static str,
    },
    /// A field's value does not read.
    Bad {
        field: &'static str,
        value: String,
    },
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::Empty => f.write_str("an empty monitor line"),
            LineError::Missing { event, field } => write!(f, "{event} without {field}="),
            LineError::Bad { field, value } => write!(f, "{field}={value:?} does not read"),
        }
    }
}

impl std::error::Error for LineError {}

/// The `key=value` fields of a line after its name.
struct Fields<'a> {
    event: &'a str,
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Fields<'a> {
    fn raw(&self, field: &'static str) -> Result<&'a str, LineError> {
        self.pairs
            .iter()
            .find(|(k, _)| *k == field)
            .map(|(_, v)| *v)
            .ok_or_else(|| LineError::Missing { event: self.event.to_owned(), field })
    }

    fn get<T>(&self, field: &'static str, read: impl Fn(&str) -> Option<T>) -> Result<T, LineError> {
        let v = self.raw(field)?;
        read(v).ok_or_else(|| LineError::Bad { field, value: v.to_owned() })
    }

    fn sa(&self) -> Result<SaId, LineError> {
        Ok(SaId {
            src: self.get("src", parse::<IpAddr>)?,
            dst: self.get("dst", parse::<IpAddr>)?,
            proto: self.get("proto", proto)?,
            spi: self.get("spi", hex_u32)?,
        })
    }
}

fn parse<T: FromStr>(v: &str) -> Option<T> {
    v.parse().ok()
}

fn hex_u32(v: &str) -> Option<u32> {
    u32::from_str_radix(v.strip_prefix("0x")?, 16).ok()
}

fn proto(v: &str) -> Option<Proto> {
    Some(match v {
        "esp" => Proto::Esp,
        "esp-udp" => Proto::EspUdp,
        "ah" => Proto::Ah,
        "ipcomp" => Proto::IpComp,
        _ => return None,
    })
}

fn mode(v: &str) -> Option<Mode> {
    Some(match v {
        "tunnel" => Mode::Tunnel,
        "transport" => Mode::Transport,
        "any" => Mode::Any,
        _ => return None,
    })
}

fn limit(v: &str) -> Option<Limit> {
    Some(match v {
        "time" => Limit::Time,
        "bytes" => Limit::Bytes,
        "packets" => Limit::Packets,
        _ => return None,
    })
}

fn prefix(v: &str) -> Option<Prefix> {
    let (a, l) = v.split_once('/')?;
    let addr: IpAddr = a.parse().ok()?;
    let len: u8 = l.parse().ok()?;
    let most = if addr.is_ipv4() { 32 } else { 128 };
    (len <= most).then_some(Prefix { addr, len })
}

/// `any` or a port.
fn port(v: &str) -> Option<Option<u16>> {
    if v == "any" {
        Some(None)
    } else {
        v.parse().ok().map(Some)
    }
}

/// `any` or a protocol number, as ipsecd's parser names the common ones.
fn upper(v: &str) -> Option<Upper> {
    if v == "any" {
        return Some(Upper::Any);
    }
    Some(match v.parse::<u8>().ok()? {
        6 => Upper::Tcp,
        17 => Upper::Udp,
        1 => Upper::Icmp,
        58 => Upper::Icmp6,
        n => Upper::Number(n),
    })
}

/// Reads one monitor line (without its newline).
pub fn parse_line(line: &str) -> Result<Line, LineError> {
    let mut words = line.split_ascii_whitespace();
    let event = words.next().ok_or(LineError::Empty)?;
    let pairs = words.filter_map(|w| w.split_once('=')).collect();
    let f = Fields { event, pairs };
    let ev = match event {
        "soft-expire" => Event::SoftExpired { sa: f.sa()?, by: f.get("limit", limit)? },
        "hard-expire" => Event::HardExpired { sa: f.sa()?, by: f.get("limit", limit)? },
        "larval-expire" => Event::LarvalExpired(f.sa()?),
        "seq-exhausted" => Event::SeqExhausted(f.sa()?),
        "peer-moved" => {
            Event::PeerMoved { sa: f.sa()?, from: f.get("from", parse)?, to: f.get("to", parse)? }
        }
        "path-mtu" => Event::PathMtu { sa: f.sa()?, mtu: f.get("mtu", parse)? },
        "acquire" => Event::Acquire(Box::new(Acquire {
            src: f.get("src", parse)?,
            dst: f.get("dst", parse)?,
            proto: f.get("proto", proto)?,
            mode: f.get("mode", mode)?,
            reqid: f.get("reqid", parse)?,
            policy: Selector {
                src: f.get("policy-src", prefix)?,
                dst: f.get("policy-dst", prefix)?,
                sport: f.get("policy-sport", port)?,
                dport: f.get("policy-dport", port)?,
                upper: f.get("policy-upper", upper)?,
            },
            flow: Flow {
                src: f.get("flow-src", parse)?,
                dst: f.get("flow-dst", parse)?,
                proto: f.get("flow-proto", parse)?,
                sport: f.get("flow-sport", parse)?,
                dport: f.get("flow-dport", parse)?,
            },
        })),
        "overflow" => return Ok(Line::Overflow(f.get("lost", parse)?)),
        other => return Ok(Line::Other(other.to_owned())),
    };
    Ok(Line::Event(ev))
}
