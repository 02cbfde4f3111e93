//! Finite-field Diffie-Hellman over the RFC 3526 MODP groups 14 and 15 (generator 2), on
//! libcrypto's constant-time exponentiation (`super::modexp`).
//!
//! ```text
//!  new:    x (raw, big-endian, ≤ the prime's length) ─▶ y = 2^x mod p  (PublicKey)
//!  Derive: peer value, the prime's length ─▶ 2 ≤ peer ≤ p-2 ? ─▶ peer^x mod p
//! ```
//!
//! The peer's value must lie in `2..=p-2` (SP 800-56A §5.6.2.3.1): 0, 1 and p-1 give a
//! secret an attacker knows (`PeerValueOutOfRange`). The groups' primes are safe primes, so
//! the range check is the whole validation. The public value and the shared secret are
//! written left-padded with zeros to the prime's length, as IKEv2 sends and uses them
//! (RFC 7296 §2.14 and §3.4).

use ocf::asym::PrivateKey;
use ocf::{Error, ModpGroup};
use openssl::bn::BigNum;

use super::modexp::{mod_exp_padded, SecretBn};
use super::room;

pub(crate) struct Ffdh {
    p: BigNum,
    p_minus_1: BigNum,
    len: usize,
    x: SecretBn,
    public: Vec<u8>,
}

impl Ffdh {
    pub(crate) fn new(group: ModpGroup, key: &PrivateKey) -> Result<Ffdh, Error> {
        let failed = |_| Error::DriverFailure("soft: bignum allocation failed");
        let p = BigNum::from_slice(group.prime()).map_err(failed)?;
        let mut p_minus_1 = BigNum::from_slice(group.prime()).map_err(failed)?;
        p_minus_1.sub_word(1).map_err(failed)?;
        let x = SecretBn::from_slice(key.bytes())?;
        // SP 800-56A wants 1 ≤ x ≤ q-1 (q = (p-1)/2); ocf's raw form takes any exponent up
        // to the prime's length, so only the degenerate ones are refused: 0 and ≥ p-1.
        if x.get().num_bits() == 0 || x.get() >= &p_minus_1 {
            return Err(Error::BadKey { why: "a MODP exponent must lie in 1..p-1" });
        }
        let len = group.bytes();
        let two = BigNum::from_u32(2).map_err(failed)?;
        let mut public = vec![0; len];
        mod_exp_padded(&two, &x, &p, len, &mut public)?;
        Ok(Ffdh { p, p_minus_1, len, x, public })
    }

    pub(crate) fn public_key(&self) -> &[u8] {
        &self.public
    }

    pub(crate) fn derive(&self, peer: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        if peer.len() != self.len {
            return Err(Error::BadInputLength {
                what: "MODP peer value (the prime's length)",
                got: peer.len(),
                expected: self.len,
            });
        }
        let y = BigNum::from_slice(peer).map_err(|_| Error::DriverFailure("soft: BN_bin2bn failed"))?;
        if y.num_bits() < 2 || y >= self.p_minus_1 {
            // y < 2 (0 or 1), or y ≥ p-1.
            return Err(Error::PeerValueOutOfRange);
        }
        room(out, self.len)?;
        mod_exp_padded(&y, &self.x, &self.p, self.len, out)
    }
}
