//! The Authentication payload (RFC 7296 §3.8): a method and the signature or MAC.
//!
//! ```text
//! | Auth Method (1) | RESERVED (3) | Authentication Data ... |
//! ```

use crate::bytes::{Reader, Writer};
use crate::error::Result;
use crate::ids::AuthMethod;
use crate::payload::Body;

/// An AUTH payload.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Auth {
    /// The method.
    pub method: AuthMethod,
    /// The signature or MAC (with RFC 7427's method 14, the AlgorithmIdentifier first).
    pub data: Vec<u8>,
}

impl Body for Auth {
    fn parse(body: &[u8]) -> Result<Auth> {
        let mut r = Reader::new(body, "AUTH payload");
        let method = AuthMethod(r.u8()?);
        r.take(3)?;
        Ok(Auth { method, data: r.rest().to_vec() })
    }

    fn buffer_len(&self) -> usize {
        4 + self.data.len()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let mut w = Writer::new(buf, "AUTH payload");
        w.u8(self.method.0)?;
        w.put(&[0; 3])?;
        w.put(&self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn round_trip_and_short() {
        let auth = Auth { method: AuthMethod::PSK, data: vec![0xab; 32] };
        let b = auth.to_vec().unwrap();
        assert_eq!(&b[..4], &[2, 0, 0, 0]);
        assert_eq!(Auth::parse(&b).unwrap(), auth);
        assert_eq!(
            Auth::parse(&[2, 0, 0]),
            Err(Error::Truncated { what: "AUTH payload", needed: 4, got: 3 })
        );
    }
}
