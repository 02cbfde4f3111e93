//! Traffic selectors (RFC 7296 §3.13.1) as swanctl.conf writes `local_ts` and `remote_ts`.
//!
//! ```text
//! ts      addr [ "[" proto [ "/" port ] "]" ]
//! addr    dynamic | a.b.c.d/len | a.b.c.d-e.f.g.h | a.b.c.d    (and the IPv6 forms)
//! proto   tcp | udp | icmp | ipv6-icmp | sctp | gre | %any | 0–255
//! port    %any | n | n-m
//! ```
//!
//! `dynamic` is the address of the IKE SA's own end, known only when the SA is up (a
//! host-to-host tunnel, or transport mode). A subnet's host bits are cleared (strongSwan does
//! the same). Port names (`tcp/http`) are not resolved: the core reads no `/etc/services`,
//! so a port is a number. Display writes strongSwan's form (`10.0.0.0/24[tcp/80]`,
//! `10.0.0.1..10.0.0.9`, `dynamic`).

use std::fmt;
use std::net::IpAddr;

/// The address part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TsAddr {
    /// The IKE SA's own address at this end.
    Dynamic,
    /// An inclusive range, both ends of one family, `start <= end`.
    Range { start: IpAddr, end: IpAddr },
}

/// A traffic selector: addresses, an IP protocol (0: any) and a port range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TrafficSelector {
    pub addr: TsAddr,
    pub proto: u8,
    /// Inclusive; `(0, 65535)` for any port.
    pub ports: (u16, u16),
}

/// What is wrong with a traffic selector; each names the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TsError {
    BadAddress(String),
    BadPrefix(String),
    /// A range whose ends differ in family or whose start is after its end.
    BadRange(String),
    /// `[` without `]`, or text after `]`.
    BadBrackets(String),
    UnknownProtocol(String),
    BadPort(String),
    /// A port on a protocol without ports (only tcp, udp and sctp have them here).
    PortWithoutProtocol(String),
}

impl fmt::Display for TsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TsError::BadAddress(s) => write!(f, "'{s}' is not an IP address, subnet, range or 'dynamic'"),
            TsError::BadPrefix(s) => write!(f, "bad prefix length in '{s}'"),
            TsError::BadRange(s) => write!(f, "range '{s}' mixes families or runs backwards"),
            TsError::BadBrackets(s) => {
                write!(f, "'{s}': protocol and port go in one [proto/port] at the end")
            }
            TsError::UnknownProtocol(s) => write!(f, "unknown protocol '{s}' (a name such as tcp, or 0-255)"),
            TsError::BadPort(s) => {
                write!(f, "'{s}' is not a port, a port range or %any (names are not resolved)")
            }
            TsError::PortWithoutProtocol(s) => {
                write!(f, "'{s}': a port needs tcp, udp or sctp")
            }
        }
    }
}

impl std::error::Error for TsError {}

const PROTOCOLS: &[(&str, u8)] =
    &[("icmp", 1), ("tcp", 6), ("udp", 17), ("gre", 47), ("ipv6-icmp", 58), ("sctp", 132)];

fn parse_proto(s: &str) -> Result<u8, TsError> {
    if s == "%any" {
        return Ok(0);
    }
    if let Some(&(_, n)) = PROTOCOLS.iter().find(|(name, _)| *name == s) {
        return Ok(n);
    }
    s.parse::<u8>().map_err(|_| TsError::UnknownProtocol(s.to_string()))
}

fn parse_ports(s: &str) -> Result<(u16, u16), TsError> {
    if s == "%any" {
        return Ok((0, 65535));
    }
    let bad = || TsError::BadPort(s.to_string());
    let (lo, hi) = match s.split_once('-') {
        Some((a, b)) => (a.parse::<u16>().map_err(|_| bad())?, b.parse::<u16>().map_err(|_| bad())?),
        None => {
            let p = s.parse::<u16>().map_err(|_| bad())?;
            (p, p)
        }
    };
    if lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

fn to_bits(a: IpAddr) -> (u128, u32) {
    match a {
        IpAddr::V4(v) => (u32::from(v) as u128, 32),
        IpAddr::V6(v) => (u128::from(v), 128),
    }
}

fn from_bits(like: IpAddr, bits: u128) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4((bits as u32).into()),
        IpAddr::V6(_) => IpAddr::V6(bits.into()),
    }
}

fn parse_addr(s: &str) -> Result<TsAddr, TsError> {
    if s == "dynamic" {
        return Ok(TsAddr::Dynamic);
    }
    let ip = |t: &str| t.parse::<IpAddr>().map_err(|_| TsError::BadAddress(s.to_string()));
    if let Some((a, len)) = s.split_once('/') {
        let a = ip(a)?;
        let (bits, width) = to_bits(a);
        let len: u32 = len.parse().map_err(|_| TsError::BadPrefix(s.to_string()))?;
        if len > width {
            return Err(TsError::BadPrefix(s.to_string()));
        }
        let host = if len == width { 0 } else { (u128::MAX >> (128 - width)) >> len };
        return Ok(TsAddr::Range { start: from_bits(a, bits & !host), end: from_bits(a, bits | host) });
    }
    // IPv6 addresses contain no '-', so the first '-' splits a range.
    if let Some((a, b)) = s.split_once('-') {
        let (a, b) = (ip(a)?, ip(b)?);
        if a.is_ipv4() != b.is_ipv4() || a > b {
            return Err(TsError::BadRange(s.to_string()));
        }
        return Ok(TsAddr::Range { start: a, end: b });
    }
    let a = ip(s)?;
    Ok(TsAddr::Range { start: a, end: a })
}

impl TrafficSelector {
    /// Reads one selector (the module doc has the grammar).
    pub fn parse(text: &str) -> Result<TrafficSelector, TsError> {
        let s = text.trim();
        let (addr, spec) = match s.split_once('[') {
            None => (s, None),
            Some((a, rest)) => match rest.strip_suffix(']') {
                Some(inner) if !inner.contains(['[', ']']) => (a.trim(), Some(inner.trim())),
                _ => return Err(TsError::BadBrackets(s.to_string())),
            },
        };
        if addr.contains(']') {
            return Err(TsError::BadBrackets(s.to_string()));
        }
        let addr = parse_addr(addr)?;
        let (proto, ports) = match spec {
            None => (0, (0, 65535)),
            Some(spec) => {
                let (p, port) = match spec.split_once('/') {
                    Some((p, port)) => (parse_proto(p.trim())?, Some(parse_ports(port.trim())?)),
                    None => (parse_proto(spec)?, None),
                };
                match port {
                    None | Some((0, 65535)) => (p, (0, 65535)),
                    Some(range) if matches!(p, 6 | 17 | 132) => (p, range),
                    Some(_) => return Err(TsError::PortWithoutProtocol(s.to_string())),
                }
            }
        };
        Ok(TrafficSelector { addr, proto, ports })
    }

    /// Reads a comma-separated list (`10.0.0.0/24, 10.1.0.0/24[tcp/80]`).
    pub fn parse_list(text: &str) -> Result<Vec<TrafficSelector>, TsError> {
        text.split(',').map(TrafficSelector::parse).collect()
    }
}

impl fmt::Display for TrafficSelector {
    /// strongSwan's `%R`, with numbers for ports.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            TsAddr::Dynamic => f.write_str("dynamic")?,
            TsAddr::Range { start, end } => {
                let (s, width) = to_bits(start);
                let (e, _) = to_bits(end);
                let span = s ^ e;
                let host_bits = 128 - span.leading_zeros();
                // A CIDR block: the ends differ in exactly the low host bits, all 0 then all 1
                // (and are of one family: the fields are public, so check).
                let is_subnet = start.is_ipv4() == end.is_ipv4()
                    && host_bits <= width
                    && (span.wrapping_add(1) & span) == 0
                    && s & span == 0
                    && e & span == span;
                if start == end {
                    write!(f, "{start}/{width}")?;
                } else if is_subnet {
                    write!(f, "{start}/{}", width - host_bits)?;
                } else {
                    write!(f, "{start}..{end}")?;
                }
            }
        }
        if self.proto != 0 || self.ports != (0, 65535) {
            let name = PROTOCOLS.iter().find(|(_, n)| *n == self.proto).map(|(s, _)| *s);
            match name {
                Some(n) => write!(f, "[{n}")?,
                None => write!(f, "[{}", self.proto)?,
            }
            match self.ports {
                (0, 65535) => {}
                (a, b) if a == b => write!(f, "/{a}")?,
                (a, b) => write!(f, "/{a}-{b}")?,
            }
            f.write_str("]")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(s: &str) -> String {
        TrafficSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}")).to_string()
    }

    #[test]
    fn swanctl_forms() {
        assert_eq!(show("10.0.0.0/24"), "10.0.0.0/24");
        assert_eq!(show("10.0.0.7/24"), "10.0.0.0/24");
        assert_eq!(show("10.0.0.0/24[tcp/80]"), "10.0.0.0/24[tcp/80]");
        assert_eq!(show("10.0.0.0/24[udp]"), "10.0.0.0/24[udp]");
        assert_eq!(show("10.0.0.0/24[tcp/%any]"), "10.0.0.0/24[tcp]");
        assert_eq!(show("10.0.0.0/24[6/1000-2000]"), "10.0.0.0/24[tcp/1000-2000]");
        assert_eq!(show("dynamic"), "dynamic");
        assert_eq!(show("dynamic[udp/1701]"), "dynamic[udp/1701]");
        assert_eq!(show("10.0.0.1"), "10.0.0.1/32");
        assert_eq!(show("10.0.0.1-10.0.0.9"), "10.0.0.1..10.0.0.9");
        assert_eq!(show("10.0.0.0-10.0.0.255"), "10.0.0.0/24");
        assert_eq!(show("0.0.0.0/0"), "0.0.0.0/0");
        assert_eq!(show("::/0"), "::/0");
        assert_eq!(show("2001:db8::/32[ipv6-icmp]"), "2001:db8::/32[ipv6-icmp]");
        let ts = TrafficSelector::parse("10.0.0.0/24[tcp/80]").unwrap();
        assert_eq!(ts.proto, 6);
        assert_eq!(ts.ports, (80, 80));
        assert_eq!(
            ts.addr,
            TsAddr::Range { start: "10.0.0.0".parse().unwrap(), end: "10.0.0.255".parse().unwrap() }
        );
        assert_eq!(TrafficSelector::parse_list("10.0.0.0/24, dynamic").unwrap().len(), 2);
    }

    /// The fields are public: a selector parse would refuse still prints, never panics.
    #[test]
    fn display_is_total() {
        let odd = TrafficSelector {
            addr: TsAddr::Range { start: "10.0.0.0".parse().unwrap(), end: "ffff::".parse().unwrap() },
            proto: 99,
            ports: (7, 3),
        };
        assert_eq!(odd.to_string(), "10.0.0.0..ffff::[99/7-3]");
    }

    #[test]
    fn refused() {
        let e = |s| TrafficSelector::parse(s).unwrap_err();
        assert_eq!(e("10.0.0.300/24"), TsError::BadAddress("10.0.0.300/24".into()));
        assert_eq!(e("10.0.0.0/33"), TsError::BadPrefix("10.0.0.0/33".into()));
        assert_eq!(e("10.0.0.9-10.0.0.1"), TsError::BadRange("10.0.0.9-10.0.0.1".into()));
        assert_eq!(e("10.0.0.1-::1"), TsError::BadRange("10.0.0.1-::1".into()));
        assert_eq!(e("10.0.0.0/24[tcp"), TsError::BadBrackets("10.0.0.0/24[tcp".into()));
        assert_eq!(e("10.0.0.0/24[foo]"), TsError::UnknownProtocol("foo".into()));
        assert_eq!(e("10.0.0.0/24[tcp/http]"), TsError::BadPort("http".into()));
        assert_eq!(e("10.0.0.0/24[icmp/8]"), TsError::PortWithoutProtocol("10.0.0.0/24[icmp/8]".into()));
        assert_eq!(e(""), TsError::BadAddress("".into()));
    }
}
