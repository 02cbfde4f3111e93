//! `GenerateKey`: a new private key, in the form ocf's key handles take back.
//!
//! - X25519, ECDH, Ed25519, ECDSA, RSA: PKCS#8 DER, made and written by libcrypto (what
//!   `openssl pkey -inform DER` reads; one writer for every PKCS#8 key). Generation is not
//!   on a request's hot path; its speed was not a criterion.
//! - MODP: the raw exponent, big-endian, from the kernel's random source. Its length is
//!   the larger estimate of RFC 3526 §8 for the group — 320 bits for group 14 (2048-bit),
//!   420 bits for group 15 (3072-bit) — which is also at least twice the group's strength
//!   as SP 800-57 Part 1 Table 2 rates it (112 and 128 bits), the least SP 800-56A Rev. 3
//!   allows for FFC private keys (§5.6.1.1: at least 2s bits for strength s). A full-length
//!   exponent costs 7x (group 14) and 11x (group 15) a 256-bit one (`tools/libbench --asym`).
//! - ML-KEM-768: the 64-byte seed `d ‖ z` (FIPS 203 §7.1), from the kernel.

use ocf::{AsymAlg, Curve, Error, ModpGroup};
use openssl::ec::{EcGroup, EcKey};
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::rsa::Rsa;
use zeroize::Zeroizing;

use super::room;

pub(crate) struct Generator {
    alg: AsymAlg,
    bits: usize,
}

/// The MODP private exponent's length in bits (see the module's doc).
pub(crate) fn modp_exponent_bits(group: ModpGroup) -> usize {
    match group {
        ModpGroup::Modp2048 => 320,
        ModpGroup::Modp3072 => 420,
    }
}

impl Generator {
    pub(crate) fn new(alg: AsymAlg, bits: usize) -> Generator {
        Generator { alg, bits }
    }

    pub(crate) fn generate(&self, out: &mut [u8]) -> Result<usize, Error> {
        let failed = |_| Error::DriverFailure("soft: key generation failed");
        let pkey: PKey<Private> = match self.alg {
            AsymAlg::X25519 => PKey::generate_x25519().map_err(failed)?,
            AsymAlg::Ed25519 => PKey::generate_ed25519().map_err(failed)?,
            AsymAlg::Ecdh(c) | AsymAlg::Ecdsa { curve: c, .. } => {
                let nid = match c {
                    Curve::P256 => Nid::X9_62_PRIME256V1,
                    Curve::P384 => Nid::SECP384R1,
                };
                let group = EcGroup::from_curve_name(nid).map_err(failed)?;
                PKey::from_ec_key(EcKey::generate(&group).map_err(failed)?).map_err(failed)?
            }
            AsymAlg::RsaPkcs1 { .. } | AsymAlg::RsaPss { .. } => {
                PKey::from_rsa(Rsa::generate(self.bits as u32).map_err(failed)?).map_err(failed)?
            }
            AsymAlg::Ffdh(g) => {
                let bits = modp_exponent_bits(g);
                let n = bits.div_ceil(8);
                room(out, n)?;
                loop {
                    crate::random::fill(&mut out[..n])?;
                    // Keep `bits` bits: clear the excess top bits of the first byte.
                    out[0] &= 0xff >> (8 * n - bits);
                    if out[..n].iter().any(|&b| b != 0) {
                        return Ok(n);
                    }
                }
            }
            AsymAlg::MlKem768 => {
                room(out, ocf::asym::MLKEM_SEED_LEN)?;
                crate::random::fill(&mut out[..ocf::asym::MLKEM_SEED_LEN])?;
                return Ok(ocf::asym::MLKEM_SEED_LEN);
            }
            _ => return Err(Error::UnsupportedAsym(self.alg)),
        };
        let der = Zeroizing::new(pkey.private_key_to_pkcs8().map_err(failed)?);
        super::put(out, &der)
    }
}
