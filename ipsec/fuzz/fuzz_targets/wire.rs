//! Every wire-format parser on arbitrary bytes: must return, never panic or read out of
//! bounds. Checksums are ignored so that mutated packets reach the deeper parsers.
#![no_main]

use ipsec_wire::{icmp, ipv4, ipv6, udp, udp_encap, ChecksumPolicy, EncapPort};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ipsec_wire::parse_any_with(data, ChecksumPolicy::Ignore);
    let _ = ipsec_wire::parse_any(data);
    let _ = ipsec_wire::parse_any_encap(data, ChecksumPolicy::Ignore, EncapPort::Every);
    if let Ok(p) = ipv4::Packet::new_checked(data) {
        let _ = ipv4::Repr::parse_with(&p, ChecksumPolicy::Ignore);
    }
    if let Ok(p) = ipv6::Packet::new_checked(data) {
        let _ = p.walk_extension_headers();
    }
    if let Ok(p) = udp::Packet::new_checked(data) {
        let _ = udp_encap::classify(p.payload());
    }
    let _ = ipsec_wire::esp::Trailer::parse(data);
    if let Ok(p) = icmp::Packet::new_checked(data) {
        let _ = icmp::Repr::parse_v4(&p, ChecksumPolicy::Ignore);
        let pseudo = ipsec_wire::PseudoHeader::V6 { src: [0; 16].into(), dst: [0; 16].into() };
        let _ = icmp::Repr::parse_v6(&p, &pseudo, ChecksumPolicy::Verify);
    }
});
