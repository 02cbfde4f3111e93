//! The security policy database: ordered policies per direction, first match wins.
//!
//! Fast IPsec's policy lookup was a lock hot spot. Here the packet path reads an immutable
//! snapshot (`ArcSwap`): a lookup takes no lock and never waits for a writer; writers
//! (the control protocol) build a new snapshot and swap it in.

use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use crate::control::{Action, Dir, PolicySpec, Prefix, Selector, Upper};

/// What a packet offers to policy matching: addresses, upper-layer protocol and ports
/// (0 when the protocol has none or they are not visible).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

impl Prefix {
    /// Whether `addr` lies in the prefix (an address of the other family never does).
    pub fn contains(&self, addr: IpAddr) -> bool {
        match (self.addr, addr) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let bits = u32::from(self.len.min(32));
                let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
                u32::from(p) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let bits = u32::from(self.len.min(128));
                let mask = if bits == 0 { 0 } else { u128::MAX << (128 - bits) };
                u128::from(p) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl Upper {
    /// The IP protocol number, or `None` for any.
    pub fn number(self) -> Option<u8> {
        match self {
            Upper::Any => None,
            Upper::Tcp => Some(6),
            Upper::Udp => Some(17),
            Upper::Icmp => Some(1),
            Upper::Icmp6 => Some(58),
            Upper::Number(n) => Some(n),
        }
    }
}

impl Selector {
    /// Whether the selector matches a flow.
    pub fn matches(&self, f: &Flow) -> bool {
        self.src.contains(f.src)
            && self.dst.contains(f.dst)
            && self.upper.number().is_none_or(|p| p == f.proto)
            && self.sport.is_none_or(|p| p == f.sport)
            && self.dport.is_none_or(|p| p == f.dport)
    }
}

/// An installed policy.
#[derive(Debug)]
pub struct Policy {
    pub spec: PolicySpec,
    /// Installation order, for dumps.
    pub id: u64,
}

/// One direction's policies, in match order.
#[derive(Default)]
struct Table {
    policies: Vec<Arc<Policy>>,
}

/// The SPD.
pub struct Spd {
    tables: [ArcSwap<Table>; 3],
    /// Serializes writers (lookups never take it).
    writer: Mutex<u64>,
}

/// Why a policy change was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpdError {
    /// A policy with the same selector and direction exists (setkey: "File exists").
    Exists,
    /// No policy with that selector and direction.
    NotFound,
}

impl std::fmt::Display for SpdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SpdError::Exists => "a policy with this selector and direction already exists",
            SpdError::NotFound => "no policy with this selector and direction",
        })
    }
}

fn index(dir: Dir) -> usize {
    match dir {
        Dir::In => 0,
        Dir::Out => 1,
        Dir::Fwd => 2,
    }
}

impl Default for Spd {
    fn default() -> Spd {
        Spd { tables: Default::default(), writer: Mutex::new(0) }
    }
}

impl Spd {
    /// The first policy of `dir` that matches, if any. Lock-free.
    #[inline]
    pub fn lookup(&self, dir: Dir, flow: &Flow) -> Option<Arc<Policy>> {
        let t = self.tables[index(dir)].load();
        t.policies.iter().find(|p| p.spec.selector.matches(flow)).cloned()
    }

    /// Appends a policy (setkey `spdadd`). More specific policies should be added first;
    /// like KAME's, this SPD does not reorder them.
    pub fn add(&self, spec: PolicySpec) -> Result<(), SpdError> {
        let mut next_id = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = &self.tables[index(spec.dir)];
        let old = slot.load();
        if old.policies.iter().any(|p| p.spec.selector == spec.selector) {
            return Err(SpdError::Exists);
        }
        *next_id += 1;
        let mut policies = old.policies.clone();
        policies.push(Arc::new(Policy { spec, id: *next_id }));
        slot.store(Arc::new(Table { policies }));
        Ok(())
    }

    /// Removes a policy (setkey `spddelete`).
    pub fn delete(&self, selector: &Selector, dir: Dir) -> Result<(), SpdError> {
        let _w = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = &self.tables[index(dir)];
        let old = slot.load();
        let policies: Vec<_> =
            old.policies.iter().filter(|p| &p.spec.selector != selector).cloned().collect();
        if policies.len() == old.policies.len() {
            return Err(SpdError::NotFound);
        }
        slot.store(Arc::new(Table { policies }));
        Ok(())
    }

    /// Removes every policy (setkey `spdflush`).
    pub fn flush(&self) {
        let _w = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        for t in &self.tables {
            t.store(Arc::new(Table::default()));
        }
    }

    /// Every policy, by direction then match order (setkey `spddump`).
    pub fn dump(&self) -> Vec<PolicySpec> {
        [Dir::In, Dir::Out, Dir::Fwd]
            .iter()
            .flat_map(|&d| {
                self.tables[index(d)].load().policies.iter().map(|p| p.spec.clone()).collect::<Vec<_>>()
            })
            .collect()
    }

    /// Whether any policy exists for `dir` (a gateway with none passes traffic in the clear).
    pub fn is_empty(&self, dir: Dir) -> bool {
        self.tables[index(dir)].load().policies.is_empty()
    }
}

/// Whether an action is ESP protection.
pub fn protects(a: &Action) -> bool {
    matches!(a, Action::Protect(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn p4(a: [u8; 4], len: u8) -> Prefix {
        Prefix { addr: IpAddr::V4(Ipv4Addr::from(a)), len }
    }

    fn flow(src: [u8; 4], dst: [u8; 4], proto: u8, dport: u16) -> Flow {
        Flow { src: IpAddr::V4(src.into()), dst: IpAddr::V4(dst.into()), proto, sport: 1000, dport }
    }

    fn sel(src: Prefix, dst: Prefix, upper: Upper, dport: Option<u16>) -> Selector {
        Selector { src, dst, sport: None, dport, upper }
    }

    #[test]
    fn prefixes_match_by_their_length() {
        assert!(p4([10, 1, 0, 0], 16).contains(IpAddr::V4(Ipv4Addr::new(10, 1, 200, 3))));
        assert!(!p4([10, 1, 0, 0], 16).contains(IpAddr::V4(Ipv4Addr::new(10, 2, 0, 3))));
        assert!(p4([0, 0, 0, 0], 0).contains(IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4))));
        assert!(!p4([0, 0, 0, 0], 0).contains(IpAddr::V6(Ipv6Addr::LOCALHOST)), "families never mix");
        let v6 = Prefix { addr: "2001:db8::".parse().unwrap(), len: 32 };
        assert!(v6.contains("2001:db8:1::5".parse().unwrap()));
        assert!(!v6.contains("2001:db9::5".parse().unwrap()));
        assert!(Prefix { addr: "2001:db8::5".parse().unwrap(), len: 128 }
            .contains("2001:db8::5".parse().unwrap()));
    }

    #[test]
    fn first_match_wins_and_writers_do_not_disturb_readers() {
        let spd = Spd::default();
        let web = sel(p4([10, 0, 0, 0], 8), p4([10, 0, 0, 0], 8), Upper::Tcp, Some(443));
        let all = sel(p4([10, 0, 0, 0], 8), p4([10, 0, 0, 0], 8), Upper::Any, None);
        spd.add(PolicySpec { selector: web, dir: Dir::Out, action: Action::Bypass }).unwrap();
        spd.add(PolicySpec { selector: all, dir: Dir::Out, action: Action::Discard }).unwrap();
        assert_eq!(
            spd.add(PolicySpec { selector: all, dir: Dir::Out, action: Action::Bypass }),
            Err(SpdError::Exists)
        );
        let https = flow([10, 0, 0, 1], [10, 0, 0, 2], 6, 443);
        let ssh = flow([10, 0, 0, 1], [10, 0, 0, 2], 6, 22);
        assert_eq!(spd.lookup(Dir::Out, &https).unwrap().spec.action, Action::Bypass);
        assert_eq!(spd.lookup(Dir::Out, &ssh).unwrap().spec.action, Action::Discard);
        assert!(spd.lookup(Dir::In, &ssh).is_none(), "directions are separate");
        assert!(spd.lookup(Dir::Out, &flow([192, 168, 0, 1], [10, 0, 0, 2], 6, 22)).is_none());

        let held = spd.lookup(Dir::Out, &https).unwrap();
        spd.delete(&web, Dir::Out).unwrap();
        assert_eq!(held.spec.action, Action::Bypass, "a reader's policy outlives its removal");
        assert_eq!(spd.lookup(Dir::Out, &https).unwrap().spec.action, Action::Discard);
        assert_eq!(spd.delete(&web, Dir::Out), Err(SpdError::NotFound));
        assert_eq!(spd.dump().len(), 1);
        spd.flush();
        assert!(spd.is_empty(Dir::Out));
    }
}
