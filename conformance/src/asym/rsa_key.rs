//! An RSA private key from the numbers NIST's signature files give (`n`, `e`, `d`), as the
//! PKCS#8 DER a session takes: the primes are recovered from `n`, `e` and `d` (NIST SP
//! 800-56B rev. 2, appendix C.2's method), then the CRT values computed, with `num-bigint`.

use num_bigint::BigUint;

use super::der::{pkcs8_rsa, Integers};

/// A factor of `n` from `e` and `d`: with `k = d·e - 1 = 2^s·t` (t odd), for a base g,
/// some `x = g^(t·2^i) mod n` is a square root of 1 other than ±1, and `gcd(x - 1, n)` is
/// a prime factor. Bases 2, 3, 5, … are tried in turn (each fails with probability ½).
fn recover_factor(n: &BigUint, e: &BigUint, d: &BigUint) -> Option<BigUint> {
    let one = BigUint::from(1u32);
    let k = d * e - &one;
    let s = k.trailing_zeros()?;
    let t = &k >> s;
    let n_minus_1 = n - &one;
    for g in [2u32, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47] {
        let mut x = BigUint::from(g).modpow(&t, n);
        for _ in 0..s {
            let y = &x * &x % n;
            if y == one && x != one && x != n_minus_1 {
                return Some(gcd(&x - &one, n.clone()));
            }
            x = y;
        }
    }
    None
}

fn gcd(mut a: BigUint, mut b: BigUint) -> BigUint {
    while b != BigUint::default() {
        let r = &a % &b;
        a = b;
        b = r;
    }
    a
}

/// The PKCS#8 DER of the RSA key (`n`, `e`, `d`), big-endian; `None` if `e` and `d` do
/// not factor `n`.
pub(crate) fn pkcs8_from_n_e_d(n: &[u8], e: &[u8], d: &[u8]) -> Option<Vec<u8>> {
    let (nb, eb, db) = (BigUint::from_bytes_be(n), BigUint::from_bytes_be(e), BigUint::from_bytes_be(d));
    let p = recover_factor(&nb, &eb, &db)?;
    let q = &nb / &p;
    if p == BigUint::from(1u32) || p == nb || &p * &q != nb {
        return None;
    }
    let (p, q) = if p > q { (p, q) } else { (q, p) };
    let one = BigUint::from(1u32);
    let dp = &db % (&p - &one);
    let dq = &db % (&q - &one);
    let qinv = q.modinv(&p)?;
    let be = |x: &BigUint| x.to_bytes_be();
    Some(pkcs8_rsa(&Integers {
        n: n.to_vec(),
        e: e.to_vec(),
        d: d.to_vec(),
        p: be(&p),
        q: be(&q),
        dp: be(&dp),
        dq: be(&dq),
        qinv: be(&qinv),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wycheproof's RSA decryption keys come with their primes and as PKCS#8: recovered
    /// from `n`, `e`, `d` alone, the PKCS#8 must be byte for byte Wycheproof's.
    #[test]
    fn rebuilds_wycheproof_pkcs8_keys() {
        use wycheproof::rsa_pkcs1_decrypt::{TestName, TestSet};
        for name in [TestName::Rsa2048, TestName::Rsa3072, TestName::Rsa4096] {
            let group = &TestSet::load(name).unwrap().test_groups[0];
            let k = &group.key;
            assert_eq!(
                pkcs8_from_n_e_d(&k.n, &k.e, &k.d).as_deref(),
                Some(group.pkcs8.as_slice()),
                "{name:?}"
            );
        }
        // A prime "modulus" (13, with 5·5 = 1 mod 12) has no factor to find.
        assert_eq!(pkcs8_from_n_e_d(&[13], &[5], &[5]), None);
    }
}
