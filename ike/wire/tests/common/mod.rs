//! Helpers shared by ike-wire's integration tests.
#![allow(dead_code)]

use ike_wire::header;
use ike_wire::ids::ExchangeType;

/// Bytes from a hex string (whitespace ignored); panics on bad hex, which is a test bug.
pub fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

/// A header with these fields and no flags besides `initiator` / `response`.
pub fn header(exchange_type: ExchangeType, initiator: bool, response: bool, message_id: u32) -> header::Repr {
    header::Repr {
        spi_i: 0x0102030405060708,
        spi_r: if exchange_type == ExchangeType::IKE_SA_INIT && !response { 0 } else { 0xa1a2a3a4a5a6a7a8 },
        exchange_type,
        initiator,
        response,
        higher_version: false,
        other_flags: 0,
        minor_version: 0,
        message_id,
    }
}
