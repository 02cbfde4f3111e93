//! The Security Association payload (RFC 7296 §3.3): proposals, each of transforms, each
//! with attributes.
//!
//! ```text
//! SA body      = Proposal*
//! Proposal     = Last(0|2) RESERVED Length(2) | Num ProtocolID SPISize #Transforms | SPI | Transform*
//! Transform    = Last(0|3) RESERVED Length(2) | Type RESERVED ID(2) | Attribute*
//! Attribute    = 1|Type(15) Value(2)                (TV: KEY_LENGTH)
//!              | 0|Type(15) Length(2) Value(Length)  (TLV)
//! ```
//!
//! Parse checks every length against its container, the "Last Substructure" fields against
//! the position (0 on the last one only), and "# of Transforms" against the transforms
//! found. Proposal numbers are not checked: a request numbers them 1, 2, 3…, a response
//! carries the one chosen, and that is the core's to judge.

use crate::bytes::{len16, len8, Reader, Writer};
use crate::error::{Error, Result};
use crate::ids::{AttributeType, DhId, EncrId, EsnId, IntegId, PrfId, ProtocolId, TransformType};
use crate::payload::Body;

/// "Last Substructure" of a proposal that is followed by another (RFC 7296 §3.3.1).
const MORE_PROPOSALS: u8 = 2;
/// "Last Substructure" of a transform that is followed by another (RFC 7296 §3.3.2).
const MORE_TRANSFORMS: u8 = 3;
/// The attribute format bit: TV (value in the length's place) when set.
const ATTRIBUTE_TV: u16 = 0x8000;

/// An SA payload: the proposals, in order of preference.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Sa {
    /// The proposals.
    pub proposals: Vec<Proposal>,
}

/// One proposal: a protocol, its SPI, and the transforms offered for it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Proposal {
    /// The Proposal Num.
    pub number: u8,
    /// IKE, ESP or AH.
    pub protocol: ProtocolId,
    /// The SPI: empty in an IKE_SA_INIT's IKE proposal, 8 bytes when rekeying an IKE SA, 4
    /// for ESP and AH.
    pub spi: Vec<u8>,
    /// The transforms.
    pub transforms: Vec<Transform>,
}

/// One transform: a type, an algorithm, and attributes (only KEY_LENGTH is defined).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Transform {
    /// The Transform Type.
    pub transform_type: TransformType,
    /// The Transform ID, whose registry the type names ([`EncrId`], [`PrfId`], …).
    pub id: u16,
    /// The attributes.
    pub attributes: Vec<Attribute>,
}

/// A transform attribute (RFC 7296 §3.3.5).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Attribute {
    /// The Attribute Type (15 bits).
    pub attribute_type: AttributeType,
    /// The value, in the form it travels in.
    pub value: AttributeValue,
}

/// An attribute's value: TV (two bytes, in the length's place) or TLV.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AttributeValue {
    /// Type/Value: the 16-bit value.
    Tv(u16),
    /// Type/Length/Value: the value bytes.
    Tlv(Vec<u8>),
}

impl Transform {
    /// A transform with no attributes.
    pub fn new(transform_type: TransformType, id: u16) -> Transform {
        Transform { transform_type, id, attributes: Vec::new() }
    }

    /// An encryption transform, with a KEY_LENGTH attribute (bits) when given.
    pub fn encr(id: EncrId, key_bits: Option<u16>) -> Transform {
        let mut t = Transform::new(TransformType::ENCR, id.0);
        if let Some(bits) = key_bits {
            t.attributes.push(Attribute {
                attribute_type: AttributeType::KEY_LENGTH,
                value: AttributeValue::Tv(bits),
            });
        }
        t
    }

    /// A pseudorandom function transform.
    pub fn prf(id: PrfId) -> Transform {
        Transform::new(TransformType::PRF, id.0)
    }

    /// An integrity transform.
    pub fn integ(id: IntegId) -> Transform {
        Transform::new(TransformType::INTEG, id.0)
    }

    /// A key exchange (Diffie-Hellman group) transform.
    pub fn ke(id: DhId) -> Transform {
        Transform::new(TransformType::KE, id.0)
    }

    /// An Extended Sequence Numbers transform.
    pub fn esn(id: EsnId) -> Transform {
        Transform::new(TransformType::ESN, id.0)
    }

    /// The KEY_LENGTH attribute's value in bits, if the transform has one in TV form.
    pub fn key_length(&self) -> Option<u16> {
        self.attributes.iter().find_map(|a| match a.value {
            AttributeValue::Tv(v) if a.attribute_type == AttributeType::KEY_LENGTH => Some(v),
            _ => None,
        })
    }

    fn parse(body: &[u8]) -> Result<Transform> {
        let mut r = Reader::new(body, "transform");
        let transform_type = TransformType(r.u8()?);
        r.u8()?;
        let id = r.u16()?;
        let mut attributes = Vec::new();
        while r.remaining() > 0 {
            let remaining = r.remaining();
            let mut a = Reader::new(r.take(remaining.min(4))?, "transform attribute");
            let word = a.u16()?;
            let second = a.u16()?;
            let attribute_type = AttributeType(word & !ATTRIBUTE_TV);
            let value = if word & ATTRIBUTE_TV != 0 {
                AttributeValue::Tv(second)
            } else {
                let len = second as usize;
                if len > r.remaining() {
                    return Err(Error::SubstructureLength { what: "TLV attribute", length: len, remaining });
                }
                AttributeValue::Tlv(r.take(len)?.to_vec())
            };
            attributes.push(Attribute { attribute_type, value });
        }
        Ok(Transform { transform_type, id, attributes })
    }

    fn buffer_len(&self) -> usize {
        8 + self
            .attributes
            .iter()
            .map(|a| match &a.value {
                AttributeValue::Tv(_) => 4,
                AttributeValue::Tlv(v) => 4 + v.len(),
            })
            .sum::<usize>()
    }

    fn emit(&self, w: &mut Writer<'_>, last: bool) -> Result<()> {
        w.u8(if last { 0 } else { MORE_TRANSFORMS })?;
        w.u8(0)?;
        w.u16(len16("transform", self.buffer_len())?)?;
        w.u8(self.transform_type.0)?;
        w.u8(0)?;
        w.u16(self.id)?;
        for a in &self.attributes {
            if a.attribute_type.0 & ATTRIBUTE_TV != 0 {
                return Err(Error::TooLong {
                    what: "attribute type",
                    max: 0x7fff,
                    got: a.attribute_type.0 as usize,
                });
            }
            match &a.value {
                AttributeValue::Tv(v) => {
                    w.u16(a.attribute_type.0 | ATTRIBUTE_TV)?;
                    w.u16(*v)?;
                }
                AttributeValue::Tlv(v) => {
                    w.u16(a.attribute_type.0)?;
                    w.u16(len16("TLV attribute", v.len())?)?;
                    w.put(v)?;
                }
            }
        }
        Ok(())
    }
}

/// Splits `body` into substructures of the Last/RESERVED/Length(2) form, checking each
/// length and each Last field (`more` when one follows, 0 on the last).
fn substructures<'a>(body: &'a [u8], what: &'static str, fixed: usize, more: u8) -> Result<Vec<&'a [u8]>> {
    let mut out = Vec::new();
    let mut r = Reader::new(body, what);
    while r.remaining() > 0 {
        let remaining = r.remaining();
        let mut h = r.clone();
        let last = h.u8()?;
        h.u8()?;
        let length = h.u16()? as usize;
        if length < fixed || length > remaining {
            return Err(Error::SubstructureLength { what, length, remaining });
        }
        let sub = r.take(length)?;
        let is_last = r.remaining() == 0;
        if (is_last && last != 0) || (!is_last && last != more) {
            return Err(Error::LastSubstructure { what, value: last });
        }
        out.push(&sub[4..]);
    }
    Ok(out)
}

impl Proposal {
    fn parse(body: &[u8]) -> Result<Proposal> {
        let mut r = Reader::new(body, "proposal");
        let number = r.u8()?;
        let protocol = ProtocolId(r.u8()?);
        let spi_size = r.u8()?;
        let declared = r.u8()?;
        let spi = r.take(spi_size as usize)?.to_vec();
        let transforms = substructures(r.rest(), "transform", 8, MORE_TRANSFORMS)?
            .into_iter()
            .map(Transform::parse)
            .collect::<Result<Vec<_>>>()?;
        if transforms.len() != declared as usize {
            return Err(Error::TransformCount { proposal: number, declared, found: transforms.len() });
        }
        Ok(Proposal { number, protocol, spi, transforms })
    }

    fn buffer_len(&self) -> usize {
        8 + self.spi.len() + self.transforms.iter().map(Transform::buffer_len).sum::<usize>()
    }

    fn emit(&self, w: &mut Writer<'_>, last: bool) -> Result<()> {
        w.u8(if last { 0 } else { MORE_PROPOSALS })?;
        w.u8(0)?;
        w.u16(len16("proposal", self.buffer_len())?)?;
        w.u8(self.number)?;
        w.u8(self.protocol.0)?;
        w.u8(len8("proposal SPI", self.spi.len())?)?;
        w.u8(len8("proposal's transforms", self.transforms.len())?)?;
        w.put(&self.spi)?;
        for (i, t) in self.transforms.iter().enumerate() {
            t.emit(w, i + 1 == self.transforms.len())?;
        }
        Ok(())
    }
}

impl Body for Sa {
    fn parse(body: &[u8]) -> Result<Sa> {
        let proposals = substructures(body, "proposal", 8, MORE_PROPOSALS)?
            .into_iter()
            .map(Proposal::parse)
            .collect::<Result<Vec<_>>>()?;
        Ok(Sa { proposals })
    }

    fn buffer_len(&self) -> usize {
        self.proposals.iter().map(Proposal::buffer_len).sum()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let mut w = Writer::new(buf, "SA payload");
        for (i, p) in self.proposals.iter().enumerate() {
            p.emit(&mut w, i + 1 == self.proposals.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ike_proposal() -> Sa {
        Sa {
            proposals: vec![
                Proposal {
                    number: 1,
                    protocol: ProtocolId::IKE,
                    spi: vec![],
                    transforms: vec![
                        Transform::encr(EncrId::AES_GCM_16, Some(256)),
                        Transform::prf(PrfId::HMAC_SHA2_256),
                        Transform::ke(DhId::CURVE25519),
                    ],
                },
                Proposal {
                    number: 2,
                    protocol: ProtocolId::ESP,
                    spi: vec![1, 2, 3, 4],
                    transforms: vec![Transform {
                        transform_type: TransformType(200),
                        id: 7,
                        attributes: vec![Attribute {
                            attribute_type: AttributeType(300),
                            value: AttributeValue::Tlv(vec![9, 9, 9]),
                        }],
                    }],
                },
            ],
        }
    }

    #[test]
    fn round_trip() {
        let sa = ike_proposal();
        let bytes = sa.to_vec().unwrap();
        assert_eq!(bytes.len(), sa.buffer_len());
        // First proposal: more follow (2), length 8 + 12 + 8 + 8.
        assert_eq!(&bytes[..8], &[2, 0, 0, 36, 1, 1, 0, 3]);
        // Its first transform: more follow (3), ENCR 20, KEY_LENGTH 256 in TV form.
        assert_eq!(&bytes[8..20], &[3, 0, 0, 12, 1, 0, 0, 20, 0x80, 14, 1, 0]);
        assert_eq!(Sa::parse(&bytes).unwrap(), sa);
        assert_eq!(sa.proposals[0].transforms[0].key_length(), Some(256));
        assert_eq!(sa.proposals[0].transforms[1].key_length(), None);
        assert_eq!(Sa::parse(&[]).unwrap(), Sa::default());
    }

    #[test]
    fn refuses_bad_structure() {
        let bytes = ike_proposal().to_vec().unwrap();
        // Last Substructure 0 on a proposal that is followed by another.
        let mut b = bytes.clone();
        b[0] = 0;
        assert_eq!(Sa::parse(&b), Err(Error::LastSubstructure { what: "proposal", value: 0 }));
        // A proposal length one past the end.
        let mut b = bytes.clone();
        b.truncate(36);
        b[0] = 0;
        b[3] = 37;
        assert_eq!(
            Sa::parse(&b),
            Err(Error::SubstructureLength { what: "proposal", length: 37, remaining: 36 })
        );
        // A transform length past its proposal (nested lengths that disagree).
        let mut b = bytes.clone();
        b[8 + 3] = 40;
        assert_eq!(
            Sa::parse(&b),
            Err(Error::SubstructureLength { what: "transform", length: 40, remaining: 28 })
        );
        // A transform count that disagrees.
        let mut b = bytes.clone();
        b[7] = 4;
        assert_eq!(Sa::parse(&b), Err(Error::TransformCount { proposal: 1, declared: 4, found: 3 }));
        // A zero-length proposal.
        assert_eq!(
            Sa::parse(&[0, 0, 0, 0]),
            Err(Error::SubstructureLength { what: "proposal", length: 0, remaining: 4 })
        );
        // A TLV attribute whose length runs past its transform.
        let mut b = bytes.clone();
        let at = b.len() - 4;
        b[at] = 4;
        assert_eq!(
            Sa::parse(&b),
            Err(Error::SubstructureLength { what: "TLV attribute", length: 4, remaining: 7 })
        );
        // An SPI size past the proposal.
        let mut b = bytes;
        b[6] = 200;
        assert_eq!(Sa::parse(&b), Err(Error::Truncated { what: "proposal", needed: 204, got: 32 }));
    }
}
