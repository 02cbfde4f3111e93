//! The Configuration payload (RFC 7296 §3.15): a request, reply, set or ack of
//! configuration attributes (an internal address, DNS servers, subnets…).
//!
//! ```text
//! CP body   = CFG Type (1) | RESERVED (3) | Attribute*
//! Attribute = R (1 bit) | Attribute Type (15 bits) | Length (2) | Value (Length)
//! ```

use crate::bytes::{len16, Reader, Writer};
use crate::error::{Error, Result};
use crate::ids::{CfgAttributeType, CfgType};
use crate::payload::Body;

/// A CP payload.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cp {
    /// Request, reply, set or ack.
    pub cfg_type: CfgType,
    /// The attributes, in order.
    pub attributes: Vec<CpAttribute>,
}

/// One configuration attribute (an empty value in a request asks for one).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CpAttribute {
    /// The attribute type (15 bits).
    pub attribute_type: CfgAttributeType,
    /// The value.
    pub value: Vec<u8>,
}

impl Body for Cp {
    fn parse(body: &[u8]) -> Result<Cp> {
        let mut r = Reader::new(body, "CP payload");
        let cfg_type = CfgType(r.u8()?);
        r.take(3)?;
        let mut attributes = Vec::new();
        while r.remaining() > 0 {
            let remaining = r.remaining();
            let mut h = Reader::new(r.take(remaining.min(4))?, "configuration attribute");
            let attribute_type = CfgAttributeType(h.u16()? & 0x7fff);
            let length = h.u16()? as usize;
            if length > r.remaining() {
                return Err(Error::SubstructureLength { what: "configuration attribute", length, remaining });
            }
            attributes.push(CpAttribute { attribute_type, value: r.take(length)?.to_vec() });
        }
        Ok(Cp { cfg_type, attributes })
    }

    fn buffer_len(&self) -> usize {
        4 + self.attributes.iter().map(|a| 4 + a.value.len()).sum::<usize>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let mut w = Writer::new(buf, "CP payload");
        w.u8(self.cfg_type.0)?;
        w.put(&[0; 3])?;
        for a in &self.attributes {
            if a.attribute_type.0 > 0x7fff {
                return Err(Error::TooLong {
                    what: "configuration attribute type",
                    max: 0x7fff,
                    got: a.attribute_type.0 as usize,
                });
            }
            w.u16(a.attribute_type.0)?;
            w.u16(len16("configuration attribute", a.value.len())?)?;
            w.put(&a.value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_lengths() {
        let cp = Cp {
            cfg_type: CfgType::REPLY,
            attributes: vec![
                CpAttribute {
                    attribute_type: CfgAttributeType::INTERNAL_IP4_ADDRESS,
                    value: vec![10, 3, 0, 1],
                },
                CpAttribute { attribute_type: CfgAttributeType::INTERNAL_IP4_DNS, value: vec![] },
            ],
        };
        let b = cp.to_vec().unwrap();
        assert_eq!(b, [2, 0, 0, 0, 0, 1, 0, 4, 10, 3, 0, 1, 0, 3, 0, 0]);
        assert_eq!(Cp::parse(&b).unwrap(), cp);
        assert_eq!(
            Cp::parse(&b[..11]),
            Err(Error::SubstructureLength { what: "configuration attribute", length: 4, remaining: 7 })
        );
        assert_eq!(
            Cp::parse(&b[..14]),
            Err(Error::Truncated { what: "configuration attribute", needed: 4, got: 2 })
        );
    }
}
