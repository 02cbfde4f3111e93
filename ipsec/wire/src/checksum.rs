//! The Internet checksum (RFC 1071): the 16-bit ones' complement of the ones' complement sum
//! of 16-bit big-endian words. Used by the IPv4 header and by UDP.
//!
//! Sums of separate pieces combine with [`combine`] as long as every piece but the last has
//! an even length (an odd piece would shift the byte lanes of the next).

/// The ones' complement sum of `data` as 16-bit big-endian words, folded to 16 bits and not
/// complemented. An odd last byte is the high byte of a word whose low byte is zero.
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    // 64 bits cannot overflow: that would take more than 2^48 words.
    let mut acc: u64 = 0;
    let mut words = data.chunks_exact(2);
    for word in &mut words {
        acc += u64::from(u16::from_be_bytes([word[0], word[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    fold(acc)
}

/// The ones' complement sum of partial sums.
#[inline]
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// The checksum of `data`: the complement of its sum. Computed over a header whose checksum
/// field is zero, it is the value to put in that field.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !sum(data)
}

/// Whether `data`, checksum field included, sums to 0xffff (the checksum verifies).
#[inline]
pub fn verifies(data: &[u8]) -> bool {
    sum(data) == 0xffff
}

#[inline]
fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    // The loop leaves acc <= 0xffff.
    acc as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3, "Numerical Examples": bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2,
        // so the checksum is 0x220d.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&data), 0xddf2);
        assert_eq!(checksum(&data), 0x220d);
    }

    #[test]
    fn odd_length_and_pieces() {
        assert_eq!(sum(&[]), 0);
        assert_eq!(sum(&[0xab]), 0xab00);
        assert_eq!(sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        let data = [0xff, 0xff, 0x00, 0x01, 0x80, 0x00, 0x80, 0x00, 0x12];
        assert_eq!(combine(&[sum(&data[..4]), sum(&data[4..])]), sum(&data));
        // Carries wrap around: 0xffff + 0x0001 = 0x0001 after the end-around carry.
        assert_eq!(sum(&[0xff, 0xff, 0x00, 0x01]), 0x0001);
    }

    #[test]
    fn verify_roundtrip() {
        let mut data = [0x45, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34];
        let c = checksum(&data);
        data[4..6].copy_from_slice(&c.to_be_bytes());
        assert!(verifies(&data));
        data[9] ^= 1;
        assert!(!verifies(&data));
    }
}
