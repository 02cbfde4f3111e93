//! AH input on arbitrary bytes: the header view and the ICV's input (mutable fields and
//! options zeroed, a Routing header put as it will arrive) must return, never panic or
//! touch a byte past the packet's IP length, and leave the length unchanged.
#![no_main]

use ipsec_wire::ah;
use ipsec_wire::ah_icv::{self, Side};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = ah::Packet::new_checked(data) {
        let _ = ah::Repr::parse(&p);
        assert_eq!(p.icv().len() + ah::FIXED_LEN, p.header_len());
    }
    // The first byte picks the IV and ICV lengths (HMAC-SHA1-96 … AES-GMAC) and the side.
    let Some((&pick, packet)) = data.split_first() else { return };
    let (iv, icv) = [(0, 12), (0, 16), (0, 24), (0, 32), (8, 16)][usize::from(pick % 5)];
    let side = if pick & 0x80 != 0 { Side::Sending } else { Side::Receiving };
    let mut copy = packet.to_vec();
    if let Ok(loc) = ah_icv::zero_mutable(&mut copy, iv, icv, side) {
        assert!(loc.offset + loc.header_len <= copy.len());
        assert!(loc.header_len >= ah::FIXED_LEN + iv + icv);
        assert_eq!(copy[loc.offset + ah::FIXED_LEN + iv..][..icv], vec![0; icv][..]);
    }
    assert_eq!(copy.len(), packet.len());
});
