//! IKEv2 messages (ike-wire) on arbitrary bytes: `Message::parse`, `parse_chain` and
//! `encrypted::unpad` must return, never panic; and whatever parses must emit, and parse again to the same `Message`
//! (parse(emit(parse(x))) == parse(x)), so that what iked sends is what it read.
#![no_main]

use ike_wire::ids::PayloadType;
use ike_wire::{emit_chain, parse_chain, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ike_wire::encrypted::unpad(data);
    if let Ok(msg) = Message::parse(data) {
        let bytes = msg.to_bytes().expect("a parsed message emits");
        assert_eq!(Message::parse(&bytes).as_ref(), Ok(&msg), "parse(emit(parse(x))) != parse(x)");
    }
    // The first byte as the first payload's type, the rest as an SK payload's plaintext.
    if let Some((&first, chain)) = data.split_first() {
        if let Ok(payloads) = parse_chain(PayloadType(first), chain) {
            let (_, bytes) = emit_chain(&payloads).expect("a parsed chain emits");
            assert_eq!(parse_chain(PayloadType(first), &bytes).as_ref(), Ok(&payloads));
        }
    }
});
