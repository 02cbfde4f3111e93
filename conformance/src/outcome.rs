//! What the runners share (`run` for the symmetric cases, `asym::run` for the public-key
//! ones): the filler and margins of the buffer layouts, a check's verdict, and the
//! comparison that names what differs. A leaf: it uses nothing of either runner.

use crate::hex::brief;

/// Bytes around the payload that no operation may touch (filler, out-of-place margins).
pub(crate) const FILL: u8 = 0xA5;
/// Filler bytes before the AAD / payload in the embedded layout, and margins around the
/// out-of-place output: odd numbers so nothing lands on an aligned offset.
pub(crate) const PREFIX_LEN: usize = 3;
pub(crate) const SUFFIX_LEN: usize = 5;

/// A successful check: the case passed, or was rejected as expected.
pub(crate) enum Verdict {
    Passed,
    Rejected,
}

pub(crate) fn expect_eq(what: &str, got: &[u8], expected: &[u8]) -> Result<(), String> {
    if got == expected {
        Ok(())
    } else {
        Err(format!("{what}: expected {}, got {}", brief(expected), brief(got)))
    }
}

/// Splits `data` into segments at awkward offsets: 1 byte, an empty segment, 7 bytes, then
/// the rest (each clamped to what there is), so that the first cipher block and the first
/// 3DES block straddle segment boundaries and the driver meets an empty segment.
pub(crate) fn split_awkwardly(data: &[u8]) -> Vec<Vec<u8>> {
    let first = data.len().min(1);
    let second = data.len().min(8);
    vec![data[..first].to_vec(), Vec::new(), data[first..second].to_vec(), data[second..].to_vec()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn awkward_split_keeps_every_byte_in_order() {
        for len in [0usize, 1, 5, 8, 9, 100] {
            let data: Vec<u8> = (0..len as u8).collect();
            let segs = split_awkwardly(&data);
            assert_eq!(segs.concat(), data);
            assert_eq!(segs.len(), 4);
        }
    }
}
