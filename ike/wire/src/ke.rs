//! The Key Exchange payload (RFC 7296 §3.4): the group and the sender's public value.
//!
//! ```text
//! | Diffie-Hellman Group Num (2) | RESERVED (2) | Key Exchange Data ... |
//! ```
//!
//! The data's length belongs to the group (256 bytes for MODP 2048, 32 for Curve25519):
//! the core checks it against the group, the codec only carries it.

use crate::bytes::{Reader, Writer};
use crate::error::Result;
use crate::ids::DhId;
use crate::payload::Body;

/// A KE payload.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ke {
    /// The group (key exchange method).
    pub group: DhId,
    /// The public value.
    pub data: Vec<u8>,
}

impl Body for Ke {
    fn parse(body: &[u8]) -> Result<Ke> {
        let mut r = Reader::new(body, "KE payload");
        let group = DhId(r.u16()?);
        r.u16()?;
        Ok(Ke { group, data: r.rest().to_vec() })
    }

    fn buffer_len(&self) -> usize {
        4 + self.data.len()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let mut w = Writer::new(buf, "KE payload");
        w.u16(self.group.0)?;
        w.u16(0)?;
        w.put(&self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn round_trip_and_short() {
        let ke = Ke { group: DhId::CURVE25519, data: vec![7; 32] };
        let b = ke.to_vec().unwrap();
        assert_eq!(&b[..4], &[0, 31, 0, 0]);
        assert_eq!(Ke::parse(&b).unwrap(), ke);
        assert_eq!(Ke::parse(&[0, 31, 0]), Err(Error::Truncated { what: "KE payload", needed: 4, got: 3 }));
        let mut small = [0u8; 35];
        assert_eq!(ke.emit(&mut small), Err(Error::Truncated { what: "KE payload", needed: 36, got: 35 }));
    }
}
