//! The setkey(8) parser on arbitrary text: an error or requests, never a panic; and what
//! it accepts prints back to text that parses to the same requests.
#![no_main]

use ipsec_core::setkey;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(reqs) = setkey::parse(&text) {
        for r in reqs {
            let again = setkey::format_request(&r.item);
            let back = setkey::parse(&again).expect("formatted request parses");
            assert_eq!(back.len(), 1);
            assert_eq!(back[0].item, r.item, "round trip of {again}");
        }
    }
});
