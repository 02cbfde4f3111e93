//! Hex decoding for vector files, and short hex rendering for failure messages.

use std::fmt::Write;

/// Decodes a hex string (either case, no separators). An empty string is an empty vector,
/// as in NIST files' `PT = ` lines.
pub(crate) fn decode(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    if s.len() % 2 != 0 {
        return Err(format!("odd number of hex digits ({})", s.len()));
    }
    s.as_bytes()
        .chunks(2)
        .map(|pair| {
            let hi = nibble(pair[0]);
            let lo = nibble(pair[1]);
            match (hi, lo) {
                (Some(h), Some(l)) => Ok(h << 4 | l),
                _ => Err(format!("not a hex byte: {:?}", String::from_utf8_lossy(pair))),
            }
        })
        .collect()
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Lower-case hex of all of `bytes`.
pub(crate) fn encode(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Hex for a failure message: long values are cut so one failure stays one readable line.
pub(crate) fn brief(bytes: &[u8]) -> String {
    const SHOWN: usize = 40;
    if bytes.len() <= SHOWN {
        encode(bytes)
    } else {
        format!("{}… ({} bytes)", encode(&bytes[..SHOWN]), bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        assert_eq!(decode("00ffA5").unwrap(), vec![0x00, 0xff, 0xa5]);
        assert_eq!(decode("").unwrap(), Vec::<u8>::new());
        assert!(decode("abc").is_err());
        assert!(decode("zz").is_err());
        assert_eq!(encode(&[0xde, 0xad]), "dead");
        assert!(brief(&[0u8; 100]).ends_with("(100 bytes)"));
    }
}
