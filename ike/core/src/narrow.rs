//! Traffic selectors (RFC 7296 §2.9): the configuration's turned into the wire's (a
//! `dynamic` selector is the IKE SA's own address at that end), the responder's narrowing
//! of what the initiator proposes to what its policy allows, and the initiator's check
//! that the responder's answer lies inside its proposal.
//!
//! ```text
//!  proposed TSi × our remote_ts ─▶ every non-empty intersection ─▶ TSi of the response
//!  proposed TSr × our local_ts  ─▶ every non-empty intersection ─▶ TSr
//!  either empty ─▶ TS_UNACCEPTABLE
//! ```
//!
//! An intersection keeps the common address range (same family), the common port range,
//! and the protocol (0 is any: the other side's wins; two different non-zero ones do not
//! meet). RFC 7296's first "specific" selector (the packet that triggered an acquire) is
//! intersected like the others.

use std::net::IpAddr;

use ike_wire::ts::TrafficSelector;

use crate::config::{TrafficSelector as ConfigTs, TsAddr};

/// The wire selectors of configured ones, `dynamic` being `ike_addr`.
pub fn resolve(cfg: &[ConfigTs], ike_addr: IpAddr) -> Vec<TrafficSelector> {
    cfg.iter()
        .map(|c| {
            let (start, end) = match c.addr {
                TsAddr::Dynamic => (ike_addr, ike_addr),
                TsAddr::Range { start, end } => (start, end),
            };
            TrafficSelector { ip_protocol: c.proto, start_port: c.ports.0, end_port: c.ports.1, start, end }
        })
        .collect()
}

fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}

/// The common part of two selectors, if any.
pub fn intersect(a: &TrafficSelector, b: &TrafficSelector) -> Option<TrafficSelector> {
    if !same_family(a.start, b.start) {
        return None;
    }
    let ip_protocol = match (a.ip_protocol, b.ip_protocol) {
        (0, p) | (p, 0) => p,
        (p, q) if p == q => p,
        _ => return None,
    };
    let start = a.start.max(b.start);
    let end = a.end.min(b.end);
    let start_port = a.start_port.max(b.start_port);
    let end_port = a.end_port.min(b.end_port);
    (start <= end && start_port <= end_port).then_some(TrafficSelector {
        ip_protocol,
        start_port,
        end_port,
        start,
        end,
    })
}

/// Every non-empty intersection of a proposed selector with an allowed one, duplicates
/// removed.
pub fn narrow(proposed: &[TrafficSelector], allowed: &[TrafficSelector]) -> Vec<TrafficSelector> {
    let mut out: Vec<TrafficSelector> = Vec::new();
    for p in proposed {
        for a in allowed {
            if let Some(i) = intersect(p, a) {
                if !out.contains(&i) {
                    out.push(i);
                }
            }
        }
    }
    out
}

/// Whether `ts` lies inside one of `of`.
pub fn within(ts: &TrafficSelector, of: &[TrafficSelector]) -> bool {
    of.iter().any(|o| intersect(ts, o).as_ref() == Some(ts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(proto: u8, ports: (u16, u16), start: &str, end: &str) -> TrafficSelector {
        TrafficSelector {
            ip_protocol: proto,
            start_port: ports.0,
            end_port: ports.1,
            start: start.parse().unwrap(),
            end: end.parse().unwrap(),
        }
    }

    #[test]
    fn narrowing_to_policy() {
        let proposed = [ts(0, (0, 65535), "10.0.0.0", "10.255.255.255")];
        let allowed =
            [ts(6, (80, 80), "10.1.0.0", "10.1.0.255"), ts(0, (0, 65535), "192.168.0.0", "192.168.0.255")];
        assert_eq!(narrow(&proposed, &allowed), vec![ts(6, (80, 80), "10.1.0.0", "10.1.0.255")]);
        assert!(narrow(&[ts(17, (0, 65535), "10.1.0.0", "10.1.0.9")], &allowed[..1]).is_empty(), "udp ≠ tcp");
        assert!(narrow(&[ts(0, (0, 65535), "::", "::ffff")], &allowed).is_empty(), "families");
    }

    #[test]
    fn within_checks_containment() {
        let proposed = [ts(0, (0, 65535), "10.0.0.0", "10.0.0.255")];
        assert!(within(&ts(6, (1, 2), "10.0.0.4", "10.0.0.8"), &proposed));
        assert!(!within(&ts(0, (0, 65535), "10.0.0.4", "10.0.1.8"), &proposed));
    }

    #[test]
    fn dynamic_is_the_ike_address() {
        let cfg = [ConfigTs { addr: TsAddr::Dynamic, proto: 0, ports: (0, 65535) }];
        assert_eq!(
            resolve(&cfg, "192.0.2.7".parse().unwrap()),
            vec![ts(0, (0, 65535), "192.0.2.7", "192.0.2.7")]
        );
    }
}
