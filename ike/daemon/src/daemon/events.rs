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

#[cfg(test)]
mod tests {
    //! Lines as ipsecd itself prints them (`ipsecd::monitor::line`), read back.

    use ipsec_core::changes::Change;
    use ipsecd::monitor::line;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn id(proto: Proto) -> SaId {
        SaId { src: ip("192.0.2.1"), dst: ip("2001:db8::2"), proto, spi: 0xdead_beef }
    }

    #[test]
    fn every_event_ipsecd_prints_reads_back() {
        let acquire = Acquire {
            src: ip("192.0.2.1"),
            dst: ip("192.0.2.2"),
            proto: Proto::Esp,
            mode: Mode::Tunnel,
            reqid: 7,
            policy: Selector {
                src: Prefix { addr: ip("10.1.0.0"), len: 24 },
                dst: Prefix { addr: ip("2001:db8::"), len: 48 },
                sport: None,
                dport: Some(53),
                upper: Upper::Udp,
            },
            flow: Flow { src: ip("10.1.0.1"), dst: ip("10.2.0.7"), proto: 17, sport: 40000, dport: 53 },
        };
        let any = Acquire {
            mode: Mode::Any,
            proto: Proto::EspUdp,
            policy: Selector { upper: Upper::Any, sport: Some(22), dport: None, ..acquire.policy },
            ..acquire
        };
        let events = [
            Event::SoftExpired { sa: id(Proto::Esp), by: Limit::Time },
            Event::SoftExpired { sa: id(Proto::EspUdp), by: Limit::Bytes },
            Event::HardExpired { sa: id(Proto::Esp), by: Limit::Packets },
            Event::LarvalExpired(id(Proto::Esp)),
            Event::SeqExhausted(id(Proto::EspUdp)),
            Event::PeerMoved { sa: id(Proto::EspUdp), from: 4500, to: 1024 },
            Event::PathMtu { sa: id(Proto::Esp), mtu: 1400 },
            Event::Acquire(Box::new(acquire)),
            Event::Acquire(Box::new(any)),
            Event::Acquire(Box::new(Acquire {
                policy: Selector { upper: Upper::Number(132), ..acquire.policy },
                ..acquire
            })),
        ];
        for ev in events {
            let l = line(&ev);
            assert_eq!(parse_line(&l), Ok(Line::Event(ev)), "{l}");
        }
        let flushed = line(&Event::Changed(Box::new(Change::SasFlushed(None))));
        assert_eq!(parse_line(&flushed), Ok(Line::Other("sa-flush".into())));
        assert_eq!(parse_line("overflow lost=12"), Ok(Line::Overflow(12)));
        assert_eq!(parse_line("mobike-something x=1"), Ok(Line::Other("mobike-something".into())));
    }

    #[test]
    fn malformed_lines_name_the_field() {
        let s = "src=192.0.2.1 dst=192.0.2.2 proto=esp spi=0x1000";
        assert_eq!(parse_line(""), Err(LineError::Empty));
        assert_eq!(parse_line("   "), Err(LineError::Empty));
        assert_eq!(
            parse_line(&format!("soft-expire {s}")),
            Err(LineError::Missing { event: "soft-expire".into(), field: "limit" })
        );
        assert_eq!(
            parse_line(&format!("soft-expire limit=moons {s}")),
            Err(LineError::Bad { field: "limit", value: "moons".into() })
        );
        assert_eq!(
            parse_line("hard-expire limit=time src=192.0.2.1 dst=192.0.2.2 proto=esp spi=4096"),
            Err(LineError::Bad { field: "spi", value: "4096".into() }),
            "SPIs are hex with 0x"
        );
        assert_eq!(
            parse_line("hard-expire limit=time src=192.0.2.1 dst=192.0.2.2 proto=esp spi=0x1ffffffff"),
            Err(LineError::Bad { field: "spi", value: "0x1ffffffff".into() })
        );
        assert_eq!(
            parse_line(&format!("peer-moved {s} from=4500 to=70000")),
            Err(LineError::Bad { field: "to", value: "70000".into() })
        );
        let acq = "acquire src=192.0.2.1 dst=192.0.2.2 proto=esp mode=tunnel reqid=7 policy-src=10.1.0.0/33 \
                   policy-dst=10.2.0.0/24 policy-upper=any policy-sport=any policy-dport=any flow-src=10.1.0.1 \
                   flow-dst=10.2.0.7 flow-proto=17 flow-sport=1 flow-dport=2";
        assert_eq!(parse_line(acq), Err(LineError::Bad { field: "policy-src", value: "10.1.0.0/33".into() }));
        assert_eq!(
            parse_line("overflow"),
            Err(LineError::Missing { event: "overflow".into(), field: "lost" })
        );
        // Junk never panics.
        for junk in ["=", "acquire ==== =x", "peer-moved spi=0x", "\u{0}\u{ffff} a=b", "soft-expire limit="] {
            let _ = parse_line(junk);
        }
    }
}
