//! Splitting an SK payload's plaintext into RFC 7383 fragments.
//!
//! The sender of a message too large for the path builds the plaintext of its SK payload
//! (the inner payload chain, [`emit_chain`](crate::emit_chain)), cuts it into pieces of at
//! most M bytes, and encrypts each piece into an SKF payload numbered 1 to N of N, the first
//! carrying the first inner type (RFC 7383 §2.5). This is the cutting; encryption and
//! reassembly are the core's.

use crate::error::{Error, Result};

/// Cuts `plaintext` into pieces of at most `max` bytes, in order: ⌈len / max⌉ pieces, and
/// one empty piece for an empty plaintext (a message still has one fragment).
/// [`Error::ZeroFragmentSize`] for `max` 0; [`Error::TooLong`] when more than 65535 pieces
/// (the Total Fragments field) would be needed.
pub fn split(plaintext: &[u8], max: usize) -> Result<Vec<&[u8]>> {
    if max == 0 {
        return Err(Error::ZeroFragmentSize);
    }
    if plaintext.is_empty() {
        return Ok(vec![plaintext]);
    }
    let pieces: Vec<&[u8]> = plaintext.chunks(max).collect();
    if pieces.len() > u16::MAX as usize {
        return Err(Error::TooLong { what: "fragment count", max: u16::MAX as usize, got: pieces.len() });
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces() {
        let data: Vec<u8> = (0..10).collect();
        let p = split(&data, 4).unwrap();
        assert_eq!(p, vec![&data[0..4], &data[4..8], &data[8..10]]);
        assert_eq!(split(&data, 10).unwrap(), vec![&data[..]]);
        assert_eq!(split(&[], 4).unwrap(), vec![&[][..]]);
        assert_eq!(split(&data, 0), Err(Error::ZeroFragmentSize));
        let big = vec![0u8; 65536];
        assert_eq!(split(&big, 1), Err(Error::TooLong { what: "fragment count", max: 65535, got: 65536 }));
    }
}
