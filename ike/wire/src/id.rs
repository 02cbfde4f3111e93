//! The Identification payloads IDi and IDr (RFC 7296 §3.5): a type and its data.
//!
//! ```text
//! | ID Type (1) | RESERVED (3) | Identification Data ... |
//! ```
//!
//! AUTH signs the body of the sender's ID payload (RestOfInitIDPayload / RestOfRespIDPayload,
//! §2.15): [`Body::to_vec`] gives exactly those bytes, and the RESERVED bytes as received
//! are kept in [`Id::reserved`] so that the peer's bytes can be rebuilt to verify its AUTH.

use crate::bytes::{Reader, Writer};
use crate::error::Result;
use crate::ids::IdType;
use crate::payload::Body;

/// An IDi or IDr payload.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Id {
    /// The identification type.
    pub id_type: IdType,
    /// The three RESERVED bytes: 0 when sent, but part of what AUTH signs.
    pub reserved: [u8; 3],
    /// The identification data (an address, an FQDN, a DER name, …).
    pub data: Vec<u8>,
}

impl Id {
    /// An identity with RESERVED 0.
    pub fn new(id_type: IdType, data: impl Into<Vec<u8>>) -> Id {
        Id { id_type, reserved: [0; 3], data: data.into() }
    }
}

impl Body for Id {
    fn parse(body: &[u8]) -> Result<Id> {
        let mut r = Reader::new(body, "ID payload");
        let id_type = IdType(r.u8()?);
        let reserved = r.array()?;
        Ok(Id { id_type, reserved, data: r.rest().to_vec() })
    }

    fn buffer_len(&self) -> usize {
        4 + self.data.len()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let mut w = Writer::new(buf, "ID payload");
        w.u8(self.id_type.0)?;
        w.put(&self.reserved)?;
        w.put(&self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn round_trip_and_short() {
        let id = Id::new(IdType::FQDN, &b"moon.strongswan.org"[..]);
        let b = id.to_vec().unwrap();
        assert_eq!(&b[..4], &[2, 0, 0, 0]);
        assert_eq!(&b[4..], b"moon.strongswan.org");
        assert_eq!(Id::parse(&b).unwrap(), id);
        assert_eq!(Id::parse(&[2, 0]), Err(Error::Truncated { what: "ID payload", needed: 4, got: 2 }));
    }
}
