//! The payloads whose body the codec does not look into: Vendor ID (RFC 7296 §3.12), whose
//! body is the vendor's constant, and EAP (§3.16), whose body is an EAP message (RFC 3748)
//! that an EAP method reads.

use crate::error::Result;
use crate::payload::Body;

/// A Vendor ID payload: the vendor's identifier (often a hash of a string).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VendorId(pub Vec<u8>);

/// An EAP payload: the EAP message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Eap(pub Vec<u8>);

macro_rules! opaque {
    ($t:ident, $what:literal) => {
        impl Body for $t {
            fn parse(body: &[u8]) -> Result<$t> {
                Ok($t(body.to_vec()))
            }

            fn buffer_len(&self) -> usize {
                self.0.len()
            }

            fn emit(&self, buf: &mut [u8]) -> Result<()> {
                crate::bytes::Writer::new(buf, $what).put(&self.0)
            }
        }
    };
}

opaque!(VendorId, "Vendor ID payload");
opaque!(Eap, "EAP payload");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn round_trip() {
        let v = VendorId(b"strongSwan".to_vec());
        assert_eq!(VendorId::parse(&v.to_vec().unwrap()).unwrap(), v);
        assert_eq!(VendorId::parse(&[]).unwrap(), VendorId(vec![]));
        let e = Eap(vec![1, 2, 0, 5, 1]);
        assert_eq!(Eap::parse(&e.to_vec().unwrap()).unwrap(), e);
        assert_eq!(e.emit(&mut [0; 4]), Err(Error::Truncated { what: "EAP payload", needed: 5, got: 4 }));
    }
}
