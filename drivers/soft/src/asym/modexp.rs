//! `CRK_MOD_EXP` (the seed's modular exponentiation, what the Broadcom 5822's unit did):
//! `base ^ exponent mod modulus` with the session's exponent and odd modulus, through
//! libcrypto's `BN_mod_exp_mont_consttime` — a fixed-window Montgomery ladder whose memory
//! accesses and timing do not depend on the exponent (the exponent is a secret: a
//! Diffie-Hellman private value, an RSA private exponent). aws-lc-rs offers no bignum API.
//!
//! The secret exponent lives in a [`SecretBn`], cleared (`BN_clear`) when dropped.

use std::ffi::c_int;

use foreign_types::ForeignTypeRef;
use ocf::Error;
use openssl::bn::{BigNum, BigNumContext, BigNumRef};

use zeroize::Zeroizing;

use super::room;

unsafe extern "C" {
    // libcrypto 3.0 exports it (crypto/bn/bn_exp.c); openssl-sys does not declare it.
    fn BN_mod_exp_mont_consttime(
        rr: *mut openssl_sys::BIGNUM,
        a: *const openssl_sys::BIGNUM,
        p: *const openssl_sys::BIGNUM,
        m: *const openssl_sys::BIGNUM,
        ctx: *mut openssl_sys::BN_CTX,
        in_mont: *mut openssl_sys::BN_MONT_CTX,
    ) -> c_int;
}

/// A secret bignum, cleared when dropped.
pub(crate) struct SecretBn(BigNum);

impl SecretBn {
    pub(crate) fn from_slice(bytes: &[u8]) -> Result<SecretBn, Error> {
        let mut n = BigNum::new().map_err(|_| Error::DriverFailure("soft: BN_new failed"))?;
        n.copy_from_slice(bytes).map_err(|_| Error::DriverFailure("soft: BN_bin2bn failed"))?;
        Ok(SecretBn(n))
    }

    pub(crate) fn get(&self) -> &BigNumRef {
        &self.0
    }
}

impl Drop for SecretBn {
    fn drop(&mut self) {
        self.0.clear();
    }
}

/// `base ^ exponent mod modulus` in time independent of `exponent`, written big-endian to
/// `out`, left-padded to `len` bytes; returns `len`. `base < modulus`, `modulus` odd, and
/// `out` at least `len` bytes: the callers check.
pub(crate) fn mod_exp_padded(
    base: &BigNumRef,
    exponent: &SecretBn,
    modulus: &BigNumRef,
    len: usize,
    out: &mut [u8],
) -> Result<usize, Error> {
    let failed = |_| Error::DriverFailure("soft: BN_mod_exp_mont_consttime failed");
    let ctx = BigNumContext::new().map_err(failed)?;
    let result = SecretBn(BigNum::new().map_err(failed)?);
    // SAFETY: every pointer is a live BIGNUM / BN_CTX owned by this frame or borrowed for
    // it; `result` is distinct from the inputs; a null BN_MONT_CTX makes libcrypto build
    // its own.
    let ok = unsafe {
        BN_mod_exp_mont_consttime(
            result.0.as_ptr(),
            base.as_ptr(),
            exponent.get().as_ptr(),
            modulus.as_ptr(),
            ctx.as_ptr(),
            std::ptr::null_mut(),
        )
    };
    if ok != 1 {
        return Err(Error::DriverFailure("soft: BN_mod_exp_mont_consttime failed"));
    }
    let bytes = Zeroizing::new(result.0.to_vec_padded(len as i32).map_err(failed)?);
    out[..len].copy_from_slice(&bytes);
    Ok(len)
}

/// A `CRK_MOD_EXP` session.
pub(crate) struct ModExp {
    exponent: SecretBn,
    modulus: BigNum,
    len: usize,
}

impl ModExp {
    pub(crate) fn new(exponent: &[u8], modulus: &[u8]) -> Result<ModExp, Error> {
        let modulus_bn =
            BigNum::from_slice(modulus).map_err(|_| Error::BadKey { why: "the modulus does not parse" })?;
        // The result has the modulus's length without its leading zero bytes.
        let len = modulus_bn.num_bytes() as usize;
        Ok(ModExp { exponent: SecretBn::from_slice(exponent)?, modulus: modulus_bn, len })
    }

    pub(crate) fn run(&self, base: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        let b = BigNum::from_slice(base).map_err(|_| Error::DriverFailure("soft: BN_bin2bn failed"))?;
        if b >= self.modulus {
            return Err(Error::ModExpBaseTooLarge);
        }
        room(out, self.len)?;
        mod_exp_padded(&b, &self.exponent, &self.modulus, self.len, out)
    }
}
