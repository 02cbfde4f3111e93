//! The Traffic Selector payloads TSi and TSr (RFC 7296 §3.13): address ranges with an IP
//! protocol and a port range, IPv4 or IPv6.
//!
//! ```text
//! TS body  = Number of TSs (1) | RESERVED (3) | Selector*
//! Selector = TS Type (1) | IP Protocol ID (1) | Selector Length (2) |
//!            Start Port (2) | End Port (2) | Starting Address | Ending Address
//!            (type 7: 4-byte addresses, length 16; type 8: 16-byte addresses, length 40)
//! ```
//!
//! Only the two address-range types exist in RFC 7296; any other type is
//! [`Error::UnknownTsType`], since its length cannot be trusted to mean the same.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::bytes::{len8, Reader, Writer};
use crate::error::{Error, Result};
use crate::ids::TsType;
use crate::payload::Body;

/// The length of an IPv4 address-range selector.
pub const IPV4_LEN: usize = 16;
/// The length of an IPv6 address-range selector.
pub const IPV6_LEN: usize = 40;

/// A TSi or TSr payload.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Ts {
    /// The selectors.
    pub selectors: Vec<TrafficSelector>,
}

/// One traffic selector: addresses `start..=end`, ports `start_port..=end_port`, IP
/// protocol `ip_protocol` (0: any).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TrafficSelector {
    /// The IP protocol (0 for any).
    pub ip_protocol: u8,
    /// The first port (0 for any).
    pub start_port: u16,
    /// The last port (65535 for any).
    pub end_port: u16,
    /// The first address.
    pub start: IpAddr,
    /// The last address (of the same family as `start`).
    pub end: IpAddr,
}

impl TrafficSelector {
    /// All of one address family: every address, protocol and port.
    pub fn any(v6: bool) -> TrafficSelector {
        let (start, end) = if v6 {
            (IpAddr::V6(Ipv6Addr::UNSPECIFIED), IpAddr::V6(Ipv6Addr::from(u128::MAX)))
        } else {
            (IpAddr::V4(Ipv4Addr::UNSPECIFIED), IpAddr::V4(Ipv4Addr::BROADCAST))
        };
        TrafficSelector { ip_protocol: 0, start_port: 0, end_port: u16::MAX, start, end }
    }

    /// The selector's type: IPv4 or IPv6 address range.
    pub fn ts_type(&self) -> TsType {
        if self.start.is_ipv4() {
            TsType::IPV4_ADDR_RANGE
        } else {
            TsType::IPV6_ADDR_RANGE
        }
    }

    fn buffer_len(&self) -> usize {
        if self.start.is_ipv4() {
            IPV4_LEN
        } else {
            IPV6_LEN
        }
    }
}

impl Body for Ts {
    fn parse(body: &[u8]) -> Result<Ts> {
        let mut r = Reader::new(body, "TS payload");
        let declared = r.u8()?;
        r.take(3)?;
        let mut selectors = Vec::new();
        while r.remaining() > 0 {
            let remaining = r.remaining();
            let mut h = r.clone();
            let ts_type = h.u8()?;
            h.u8()?;
            let length = h.u16()?;
            let want = match TsType(ts_type) {
                TsType::IPV4_ADDR_RANGE => IPV4_LEN,
                TsType::IPV6_ADDR_RANGE => IPV6_LEN,
                _ => return Err(Error::UnknownTsType(ts_type)),
            };
            if length as usize != want {
                return Err(Error::TsLength { ts_type, length });
            }
            if want > remaining {
                return Err(Error::SubstructureLength { what: "traffic selector", length: want, remaining });
            }
            let mut s = Reader::new(r.take(want)?, "traffic selector");
            s.take(1)?;
            let ip_protocol = s.u8()?;
            s.take(2)?;
            let start_port = s.u16()?;
            let end_port = s.u16()?;
            let (start, end) = if want == IPV4_LEN {
                (IpAddr::V4(Ipv4Addr::from(s.array::<4>()?)), IpAddr::V4(Ipv4Addr::from(s.array::<4>()?)))
            } else {
                (IpAddr::V6(Ipv6Addr::from(s.array::<16>()?)), IpAddr::V6(Ipv6Addr::from(s.array::<16>()?)))
            };
            selectors.push(TrafficSelector { ip_protocol, start_port, end_port, start, end });
        }
        if selectors.len() != declared as usize {
            return Err(Error::TsCount { declared, found: selectors.len() });
        }
        Ok(Ts { selectors })
    }

    fn buffer_len(&self) -> usize {
        4 + self.selectors.iter().map(TrafficSelector::buffer_len).sum::<usize>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let mut w = Writer::new(buf, "TS payload");
        w.u8(len8("TS count", self.selectors.len())?)?;
        w.put(&[0; 3])?;
        for ts in &self.selectors {
            w.u8(ts.ts_type().0)?;
            w.u8(ts.ip_protocol)?;
            w.u16(ts.buffer_len() as u16)?;
            w.u16(ts.start_port)?;
            w.u16(ts.end_port)?;
            match (ts.start, ts.end) {
                (IpAddr::V4(a), IpAddr::V4(b)) => {
                    w.put(&a.octets())?;
                    w.put(&b.octets())?;
                }
                (IpAddr::V6(a), IpAddr::V6(b)) => {
                    w.put(&a.octets())?;
                    w.put(&b.octets())?;
                }
                _ => return Err(Error::TsFamilies),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Ts {
        Ts {
            selectors: vec![
                TrafficSelector {
                    ip_protocol: 17,
                    start_port: 500,
                    end_port: 500,
                    start: "10.1.0.0".parse().unwrap(),
                    end: "10.1.255.255".parse().unwrap(),
                },
                TrafficSelector::any(true),
            ],
        }
    }

    #[test]
    fn round_trip() {
        let ts = sample();
        let b = ts.to_vec().unwrap();
        assert_eq!(b.len(), 4 + 16 + 40);
        assert_eq!(&b[..12], &[2, 0, 0, 0, 7, 17, 0, 16, 0x01, 0xf4, 0x01, 0xf4]);
        assert_eq!(&b[12..20], &[10, 1, 0, 0, 10, 1, 255, 255]);
        assert_eq!(Ts::parse(&b).unwrap(), ts);
    }

    #[test]
    fn refuses_bad_selectors() {
        let b = sample().to_vec().unwrap();
        let mut c = b.clone();
        c[0] = 3;
        assert_eq!(Ts::parse(&c), Err(Error::TsCount { declared: 3, found: 2 }));
        let mut c = b.clone();
        c[7] = 17;
        assert_eq!(Ts::parse(&c), Err(Error::TsLength { ts_type: 7, length: 17 }));
        let mut c = b.clone();
        c[4] = 9;
        assert_eq!(Ts::parse(&c), Err(Error::UnknownTsType(9)));
        assert_eq!(
            Ts::parse(&b[..b.len() - 1]),
            Err(Error::SubstructureLength { what: "traffic selector", length: 40, remaining: 39 })
        );
        let mixed =
            Ts { selectors: vec![TrafficSelector { end: "::1".parse().unwrap(), ..sample().selectors[0] }] };
        assert_eq!(mixed.to_vec(), Err(Error::TsFamilies));
    }
}
