//! The Nonce payload (RFC 7296 §3.9): 16 to 256 random bytes, nothing else.

use crate::error::{Error, Result};
use crate::payload::Body;

/// The shortest nonce RFC 7296 §3.9 allows.
pub const MIN_LEN: usize = 16;
/// The longest nonce RFC 7296 §3.9 allows.
pub const MAX_LEN: usize = 256;

/// A Nonce payload: the nonce data, 16 to 256 bytes (checked by parse and emit).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Nonce(pub Vec<u8>);

fn check(len: usize) -> Result<()> {
    if (MIN_LEN..=MAX_LEN).contains(&len) {
        Ok(())
    } else {
        Err(Error::NonceLength(len))
    }
}

impl Body for Nonce {
    fn parse(body: &[u8]) -> Result<Nonce> {
        check(body.len())?;
        Ok(Nonce(body.to_vec()))
    }

    fn buffer_len(&self) -> usize {
        self.0.len()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<()> {
        check(self.0.len())?;
        crate::bytes::Writer::new(buf, "Nonce payload").put(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths() {
        for len in [16, 32, 256] {
            let n = Nonce(vec![3; len]);
            assert_eq!(Nonce::parse(&n.to_vec().unwrap()).unwrap(), n);
        }
        assert_eq!(Nonce::parse(&[0; 15]), Err(Error::NonceLength(15)));
        assert_eq!(Nonce::parse(&[0; 257]), Err(Error::NonceLength(257)));
        assert_eq!(Nonce::parse(&[]), Err(Error::NonceLength(0)));
        assert_eq!(Nonce(vec![0; 8]).to_vec(), Err(Error::NonceLength(8)));
    }
}
