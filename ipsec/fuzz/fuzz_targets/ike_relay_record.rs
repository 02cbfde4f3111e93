//! The IKE relay's record decoder on arbitrary bytes: a record or a named error, never a
//! panic; and what it accepts encodes back to the same bytes.
#![no_main]

use ipsec_wire::ike_relay::{decode, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = decode(data) {
        let again = encode(&r).expect("a decoded record encodes");
        assert_eq!(again, data, "round trip of {r:?}");
    }
});
