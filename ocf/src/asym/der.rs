//! Just enough DER to read an RSA key's modulus size, so that the framework bounds RSA keys
//! (2048–4096 bits) in one place, before any driver parses them, and keys the cost model by
//! size. Reads, never allocates, and refuses what it does not understand: a driver's library
//! parses the key fully when a session is made.

use super::keys::{PrivateFormat, PublicFormat};

/// A DER reader over a byte slice.
struct Der<'a>(&'a [u8]);

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const BIT_STRING: u8 = 0x03;
const OCTET_STRING: u8 = 0x04;

/// Why a key could not be read (the caller makes it an `Error::BadKey`).
type Why = &'static str;

fn bad(why: Why) -> Why {
    why
}

impl<'a> Der<'a> {
    /// The next element's tag and contents; the reader moves past it.
    fn next(&mut self) -> Result<(u8, &'a [u8]), Why> {
        let (&tag, rest) = self.0.split_first().ok_or(bad("DER: truncated (tag)"))?;
        let (&first, rest) = rest.split_first().ok_or(bad("DER: truncated (length)"))?;
        let (len, rest) = match first {
            n if n < 0x80 => (n as usize, rest),
            0x81..=0x83 => {
                let k = (first & 0x7f) as usize;
                let (bytes, rest) = rest.split_at_checked(k).ok_or(bad("DER: truncated (long length)"))?;
                (bytes.iter().fold(0usize, |l, &b| (l << 8) | b as usize), rest)
            }
            _ => return Err(bad("DER: unsupported length form")),
        };
        let (content, rest) =
            rest.split_at_checked(len).ok_or(bad("DER: element longer than its container"))?;
        self.0 = rest;
        Ok((tag, content))
    }

    fn expect(&mut self, tag: u8, what: &'static str) -> Result<&'a [u8], Why> {
        match self.next()? {
            (t, c) if t == tag => Ok(c),
            _ => Err(bad(what)),
        }
    }
}

/// The bit length of a big-endian unsigned integer (leading zero bytes ignored).
pub(crate) fn bit_len(be: &[u8]) -> usize {
    match be.iter().position(|&b| b != 0) {
        Some(i) => (be.len() - i - 1) * 8 + (8 - be[i].leading_zeros() as usize),
        None => 0,
    }
}

/// `RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER }` → bits of n.
fn rsa_public_key(der: &[u8]) -> Result<usize, Why> {
    let mut seq = Der(Der(der).expect(SEQUENCE, "RSA public key: not a SEQUENCE")?);
    Ok(bit_len(seq.expect(INTEGER, "RSA public key: no modulus")?))
}

/// Bits of the modulus of an RSA private key (PKCS#8 wrapping PKCS#1 `RSAPrivateKey`).
pub(crate) fn rsa_private_modulus_bits(format: PrivateFormat, der: &[u8]) -> Result<usize, Why> {
    if format != PrivateFormat::Pkcs8 {
        return Err(bad("RSA private keys are taken as PKCS#8"));
    }
    let mut info = Der(Der(der).expect(SEQUENCE, "PKCS#8: not a SEQUENCE")?);
    info.expect(INTEGER, "PKCS#8: no version")?;
    info.expect(SEQUENCE, "PKCS#8: no algorithm identifier")?;
    let inner = info.expect(OCTET_STRING, "PKCS#8: no private key octets")?;
    let mut rsa = Der(Der(inner).expect(SEQUENCE, "RSA private key: not a SEQUENCE")?);
    rsa.expect(INTEGER, "RSA private key: no version")?;
    Ok(bit_len(rsa.expect(INTEGER, "RSA private key: no modulus")?))
}

/// Bits of the modulus of an RSA public key (SPKI, or raw PKCS#1 `RSAPublicKey`).
pub(crate) fn rsa_public_modulus_bits(format: PublicFormat, der: &[u8]) -> Result<usize, Why> {
    match format {
        PublicFormat::Raw => rsa_public_key(der),
        PublicFormat::Spki => {
            let mut spki = Der(Der(der).expect(SEQUENCE, "SPKI: not a SEQUENCE")?);
            spki.expect(SEQUENCE, "SPKI: no algorithm identifier")?;
            let bits = spki.expect(BIT_STRING, "SPKI: no key bit string")?;
            match bits.split_first() {
                Some((0, key)) => rsa_public_key(key),
                _ => Err(bad("SPKI: key bit string with unused bits")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_lengths() {
        assert_eq!(bit_len(&[]), 0);
        assert_eq!(bit_len(&[0, 0]), 0);
        assert_eq!(bit_len(&[0, 1]), 1);
        assert_eq!(bit_len(&[0, 0x80, 0]), 16);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        for junk in [&[][..], &[0x30], &[0x30, 0x05, 0x02], &[0x30, 0x84, 0, 0, 0, 1, 0], &[0x02, 0x00]] {
            assert!(rsa_public_modulus_bits(PublicFormat::Raw, junk).is_err(), "{junk:?}");
            assert!(rsa_public_modulus_bits(PublicFormat::Spki, junk).is_err(), "{junk:?}");
            assert!(rsa_private_modulus_bits(PrivateFormat::Pkcs8, junk).is_err(), "{junk:?}");
        }
    }

    #[test]
    fn reads_a_public_key() {
        // SEQUENCE { INTEGER 0x00c3 (8 bits after the sign byte), INTEGER 3 }
        let pk = [0x30, 0x07, 0x02, 0x02, 0x00, 0xc3, 0x02, 0x01, 0x03];
        assert_eq!(rsa_public_modulus_bits(PublicFormat::Raw, &pk).unwrap(), 8);
        let mut spki = vec![0x30, 0x11, 0x30, 0x03, 0x06, 0x01, 0x00, 0x03, 0x0a, 0x00];
        spki.extend_from_slice(&pk);
        assert_eq!(rsa_public_modulus_bits(PublicFormat::Spki, &spki).unwrap(), 8);
    }
}
