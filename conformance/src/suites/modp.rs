//! Finite-field Diffie-Hellman over the RFC 3526 MODP groups 14 and 15, and modular
//! exponentiation (the seed's `CRK_MOD_EXP`).
//!
//! No published file has known answers for these with ocf's inputs, so they are computed
//! here, when the suite loads, by an implementation independent of every driver: the
//! `num-bigint` crate's `modpow`. The exponents come from a fixed-seed generator, so the
//! cases are the same on every run. The primes are ocf's (`ModpGroup::prime`, checked
//! against libcrypto's copies by the soft driver's tests, and here against RFC 3526's
//! formula in `rfc3526_primes_follow_their_formula`).
//!
//! - DH: two parties per group and exponent size (32, 64 and 255 bytes). Each party's
//!   session (the raw exponent) must give `2^x mod p` (`PublicKey`) and, with the other's
//!   public value, `(2^y)^x mod p` (`Derive`), both the prime's length (left-padded).
//!   Peer values at the edges of SP 800-56A's range `2..=p-2`: 2 and p-2 are computed;
//!   0, 1, p-1, p and 2^n-1 must fail with `PeerValueOutOfRange`. An empty exponent or one
//!   longer than the prime is refused when the session is made (`BadKey`).
//! - ModExp: `base^e mod m` with the modulus's length, for the two primes and a fixed
//!   4096-bit odd modulus, exponents 0, 1, 3, 65537 and random ones, bases 0, 1, m-1 and
//!   random ones; a base equal to or above the modulus must fail with
//!   `ModExpBaseTooLarge`. An even modulus (`BadKey`) and a 4097-bit one (`KeyTooLarge`)
//!   are refused when the session is made.

use num_bigint::BigUint;
use ocf::{AsymAlg, AsymKey, Key, ModpGroup, Op, PrivateKey};

use crate::asym::{self, Expect, Step};
use crate::case::{Case, Rejection};
use crate::report::{CaseId, Report};

/// The source name the generated cases are reported under.
const DH_SOURCE: &str = "computed/rfc3526-modp (num-bigint)";
const MODEXP_SOURCE: &str = "computed/modexp (num-bigint)";

/// SplitMix64 (Steele, Lea, Flood 2014): a fixed-seed generator for the exponents and
/// bases, so the cases are the same every run.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `n` bytes, the first one non-zero (so the number has exactly `n` bytes).
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out: Vec<u8> = (0..n.div_ceil(8)).flat_map(|_| self.next().to_be_bytes()).take(n).collect();
        if let Some(first) = out.first_mut() {
            *first |= 0x80;
        }
        out
    }
}

/// `x` big-endian, left-padded to `len` bytes.
fn padded(x: &BigUint, len: usize) -> Vec<u8> {
    let bytes = x.to_bytes_be();
    let mut out = vec![0; len.saturating_sub(bytes.len())];
    out.extend_from_slice(&bytes);
    out
}

fn id(source: &str, label: String) -> CaseId {
    CaseId { source: source.to_owned(), label }
}

/// Both MODP groups: DH known answers and peer-value checks.
pub(crate) fn modp(report: &mut Report) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut rng = SplitMix(0x6f63_665f_6d6f_6470); // "ocf_modp"
    for group in [ModpGroup::Modp2048, ModpGroup::Modp3072] {
        cases.extend(dh_cases(group, &mut rng));
    }
    report.count_loaded(DH_SOURCE, cases.len());
    let modexp = modexp_cases(&mut rng);
    report.count_loaded(MODEXP_SOURCE, modexp.len());
    cases.extend(modexp);
    cases
}

fn dh_cases(group: ModpGroup, rng: &mut SplitMix) -> Vec<Case> {
    let alg = AsymAlg::Ffdh(group);
    let len = group.bytes();
    let p = BigUint::from_bytes_be(group.prime());
    let g = BigUint::from(2u32);
    let one = BigUint::from(1u32);
    let private = |x: &[u8]| AsymKey::Private(PrivateKey::raw(x));
    let mut cases = Vec::new();
    for exp_len in [32, 64, 255] {
        let (x, y) = (rng.bytes(exp_len), rng.bytes(exp_len));
        let (xn, yn) = (BigUint::from_bytes_be(&x), BigUint::from_bytes_be(&y));
        let (gx, gy) = (g.modpow(&xn, &p), g.modpow(&yn, &p));
        let shared = padded(&gy.modpow(&xn, &p), len);
        for (party, mine, my_public, theirs) in [("a", &x, &gx, &gy), ("b", &y, &gy, &gx)] {
            cases.push(asym::case(
                id(DH_SOURCE, format!("{group} {exp_len}-byte exponent, party {party}")),
                alg,
                private(mine),
                vec![
                    Step::new(Op::PublicKey, &[], Expect::Output(padded(my_public, len))),
                    Step::new(Op::Derive, &padded(theirs, len), Expect::Output(shared.clone())),
                ],
            ));
        }
        if exp_len == 32 {
            // The edges of the peer range, with this exponent.
            for (what, peer) in [("2", BigUint::from(2u32)), ("p-2", &p - 2u32)] {
                cases.push(asym::case(
                    id(DH_SOURCE, format!("{group} peer value {what}")),
                    alg,
                    private(&x),
                    vec![Step::new(
                        Op::Derive,
                        &padded(&peer, len),
                        Expect::Output(padded(&peer.modpow(&xn, &p), len)),
                    )],
                ));
            }
            let all_ones = (&one << (8 * len)) - &one;
            for (what, peer) in [
                ("0", BigUint::default()),
                ("1", one.clone()),
                ("p-1", &p - &one),
                ("p", p.clone()),
                ("2^n-1", all_ones),
            ] {
                cases.push(asym::case(
                    id(DH_SOURCE, format!("{group} peer value {what}")),
                    alg,
                    private(&x),
                    vec![Step::new(
                        Op::Derive,
                        &padded(&peer, len),
                        Expect::Refused(Rejection::PeerValueOutOfRange),
                    )],
                ));
            }
        }
    }
    cases.push(asym::refused_session(
        id(DH_SOURCE, format!("{group} empty exponent")),
        alg,
        private(&[]),
        Rejection::BadKey,
    ));
    cases.push(asym::refused_session(
        id(DH_SOURCE, format!("{group} exponent longer than the prime")),
        alg,
        private(&vec![1; len + 1]),
        Rejection::BadKey,
    ));
    cases
}

fn modexp_key(exponent: &[u8], modulus: &[u8]) -> AsymKey {
    AsymKey::ModExp { exponent: Key::new(exponent), modulus: modulus.to_vec() }
}

fn modexp_cases(rng: &mut SplitMix) -> Vec<Case> {
    let mut odd_4096 = rng.bytes(512);
    odd_4096[511] |= 1;
    let moduli: [(&str, Vec<u8>); 3] = [
        ("modp2048 prime", ModpGroup::Modp2048.prime().to_vec()),
        ("modp3072 prime", ModpGroup::Modp3072.prime().to_vec()),
        ("4096-bit odd", odd_4096),
    ];
    let mut cases = Vec::new();
    for (name, modulus) in &moduli {
        let m = BigUint::from_bytes_be(modulus);
        let len = modulus.len();
        let exponents: Vec<(String, Vec<u8>)> = vec![
            ("0".into(), vec![0]),
            ("1".into(), vec![1]),
            ("3".into(), vec![3]),
            ("65537".into(), vec![1, 0, 1]),
            ("32 random bytes".into(), rng.bytes(32)),
            (format!("{len} random bytes"), rng.bytes(len)),
        ];
        let random_base = BigUint::from_bytes_be(&rng.bytes(len)) % &m;
        let bases = [
            ("0", BigUint::default()),
            ("1", BigUint::from(1u32)),
            ("m-1", &m - 1u32),
            ("random", random_base),
        ];
        for (ename, e) in &exponents {
            let en = BigUint::from_bytes_be(e);
            let steps = bases
                .iter()
                .map(|(_, b)| {
                    Step::new(Op::ModExp, &padded(b, len), Expect::Output(padded(&b.modpow(&en, &m), len)))
                })
                .collect();
            let label = format!("{name} modulus, exponent {ename}, bases 0, 1, m-1, random");
            cases.push(asym::case(id(MODEXP_SOURCE, label), AsymAlg::ModExp, modexp_key(e, modulus), steps));
        }
        let e = &exponents[2].1;
        let all_ones = vec![0xff; len];
        for (bname, base) in [("m", modulus.clone()), ("2^n-1", all_ones)] {
            cases.push(asym::case(
                id(MODEXP_SOURCE, format!("{name} modulus, base {bname}")),
                AsymAlg::ModExp,
                modexp_key(e, modulus),
                vec![Step::new(Op::ModExp, &base, Expect::Refused(Rejection::ModExpBaseTooLarge))],
            ));
        }
    }
    let mut even = moduli[0].1.clone();
    even[255] &= 0xfe;
    cases.push(asym::refused_session(
        id(MODEXP_SOURCE, "even modulus".into()),
        AsymAlg::ModExp,
        modexp_key(&[3], &even),
        Rejection::BadKey,
    ));
    let mut too_large = vec![1];
    too_large.extend_from_slice(&moduli[2].1);
    cases.push(asym::refused_session(
        id(MODEXP_SOURCE, "4097-bit modulus".into()),
        AsymAlg::ModExp,
        modexp_key(&[3], &too_large),
        Rejection::KeyTooLarge { bits: 4097 },
    ));
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `atan(1/x) * 2^bits`, truncated, by its Taylor series.
    fn atan_inv(x: u32, bits: usize) -> BigUint {
        let x2 = BigUint::from(x) * x;
        let mut power = (BigUint::from(1u32) << bits) / x; // 2^bits / x^(2k+1)
        let (mut sum, mut k) = (BigUint::default(), 0u32);
        let mut negative = BigUint::default();
        while power > BigUint::default() {
            let term = &power / (2 * k + 1);
            if k % 2 == 0 {
                sum += term;
            } else {
                negative += term;
            }
            power /= &x2;
            k += 1;
        }
        sum - negative
    }

    /// RFC 3526 §3 and §4: p = 2^n - 2^(n-64) - 1 + 2^64 * (floor(2^(n-130) π) + c), with
    /// c = 124476 (group 14, n = 2048) and 1690314 (group 15, n = 3072). π from Machin's
    /// formula, π = 16 atan(1/5) - 4 atan(1/239), with 64 guard bits.
    #[test]
    fn rfc3526_primes_follow_their_formula() {
        for (group, n, c) in
            [(ModpGroup::Modp2048, 2048usize, 124_476u32), (ModpGroup::Modp3072, 3072, 1_690_314)]
        {
            let bits = n + 64;
            let pi = atan_inv(5, bits) * 16u32 - atan_inv(239, bits) * 4u32;
            let floor = pi >> (bits - (n - 130));
            let one = BigUint::from(1u32);
            let p = (&one << n) - (&one << (n - 64)) - &one + ((floor + c) << 64);
            assert_eq!(padded(&p, group.bytes()), group.prime(), "{group}");
        }
    }

    #[test]
    fn generator_is_fixed_and_sized() {
        let mut a = SplitMix(1);
        let mut b = SplitMix(1);
        let x = a.bytes(33);
        assert_eq!(x, b.bytes(33));
        assert_eq!(x.len(), 33);
        assert!(x[0] & 0x80 != 0);
        assert_ne!(x, a.bytes(33));
    }
}
