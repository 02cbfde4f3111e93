//! The Certificate and Certificate Request payloads (RFC 7296 §3.6, §3.7): an encoding and
//! its data, the same layout for both.
//!
//! ```text
//! | Cert Encoding (1) | Certificate Data / Certification Authority ... |
//! ```
//!
//! In a CERTREQ with encoding X.509 the data is a list of 20-byte SHA-1 hashes of trusted
//! CAs' public keys ([`Cert::ca_hashes`]).

use crate::bytes::{Reader, Writer};
use crate::error::{Error, Result};
use crate::ids::CertEncoding;
use crate::payload::Body;

/// A CERT or CERTREQ payload.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cert {
    /// The encoding.
    pub encoding: CertEncoding,
    /// The certificate (CERT) or the certification authorities (CERTREQ).
    pub data: Vec<u8>,
}

impl Cert {
    /// A CERTREQ's data as SHA-1 hashes of CA public keys; [`Error::Truncated`] when the
    /// data is not a whole number of 20-byte hashes.
    pub fn ca_hashes(&self) -> Result<Vec<[u8; 20]>> {
        if self.data.len() % 20 != 0 {
            let got = self.data.len();
            return Err(Error::Truncated {
                what: "CERTREQ hash list",
                needed: got.next_multiple_of(20),
                got,
            });
        }
        Ok(self.data.chunks_exact(20).map(|c| c.try_into().unwrap_or([0; 20])).collect())
    }
}

impl Body for Cert {
    fn parse(body: &[u8]) -> Result<Cert> {
        let mut r = Reader::new(body, "CERT payload");
        let encoding = CertEncoding(r.u8()?);
        Ok(Cert { encoding, data: r.rest().to_vec() })
    }

    fn buffer_len(&self) -> usize {
        1 + self.data.len()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let mut w = Writer::new(buf, "CERT payload");
        w.u8(self.encoding.0)?;
        w.put(&self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_short() {
        let req = Cert { encoding: CertEncoding::X509_SIGNATURE, data: [[1u8; 20], [2u8; 20]].concat() };
        let b = req.to_vec().unwrap();
        assert_eq!(b[0], 4);
        assert_eq!(Cert::parse(&b).unwrap(), req);
        assert_eq!(req.ca_hashes().unwrap(), vec![[1u8; 20], [2u8; 20]]);
        assert_eq!(Cert::parse(&[]), Err(Error::Truncated { what: "CERT payload", needed: 1, got: 0 }));
        let odd = Cert { encoding: CertEncoding::X509_SIGNATURE, data: vec![0; 21] };
        assert_eq!(odd.ca_hashes(), Err(Error::Truncated { what: "CERTREQ hash list", needed: 40, got: 21 }));
    }
}
