//! The public-key engine's table: which public-key operations a card offers, and how long its
//! engine works on each, by algorithm and key size.
//!
//! Real cards keep public-key work apart from the bulk cipher engine: the Broadcom 5822 had
//! a modular exponentiation unit with its own queue (the `ubsec` driver's MCR2, which also
//! carried the random number generator's requests), QuickAssist has PKE slices beside its
//! cipher slices. The simulated card has a second serial engine, with its own queue
//! (`pk_ring`), its own device thread and its own interrupts; a request's engine time is
//! one figure per *operation class* — an algorithm, its key size and the operation:
//!
//! ```text
//!  SessionParams { Mode::Asymmetric { alg, key }, key_bits }
//!      │  PkClass::of: the class of the session's main operation, or None
//!      ▼     (key generation, ML-KEM, a size above every listed one)
//!  rsa2048_sign  rsa2048_verify … ecdsa_p256_sign … ecdh_p384  x25519  ed25519_sign
//!  modp2048  modp3072  modexp512 … modexp4096
//!      │  PkTable: a time per class, or "not offered"
//!      ▼
//!  probe_session: offered → Hardware, else None (the framework takes the session elsewhere)
//! ```
//!
//! RSA keys of any size from 2048 to 4096 bits and `ModExp` moduli of any size are charged
//! at the smallest listed size at or above theirs (`rsa2560` costs as `rsa3072`). A
//! session's other operation, `PublicKey` on a private key, is charged as its main one:
//! the card works it out with the same engine (a scalar multiplication for the curves; for
//! RSA, reading the modulus out of the key, which costs a card no less a descriptor).

use std::fmt;

use ocf::asym::{AsymKey, Curve, ModpGroup};
use ocf::AsymAlg;

/// One operation class: an index into [`PkClass::NAMES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PkClass(usize);

/// RSA modulus sizes the table distinguishes.
const RSA_SIZES: [usize; 3] = [2048, 3072, 4096];
/// `ModExp` modulus sizes the table distinguishes.
const MODEXP_SIZES: [usize; 5] = [512, 1024, 2048, 3072, 4096];

impl PkClass {
    /// Every class's name, as profile strings spell them.
    pub const NAMES: [&'static str; 22] = [
        "rsa2048_sign",
        "rsa2048_verify",
        "rsa3072_sign",
        "rsa3072_verify",
        "rsa4096_sign",
        "rsa4096_verify",
        "ecdsa_p256_sign",
        "ecdsa_p256_verify",
        "ecdsa_p384_sign",
        "ecdsa_p384_verify",
        "ecdh_p256",
        "ecdh_p384",
        "x25519",
        "ed25519_sign",
        "ed25519_verify",
        "modp2048",
        "modp3072",
        "modexp512",
        "modexp1024",
        "modexp2048",
        "modexp3072",
        "modexp4096",
    ];

    /// The number of classes.
    pub const COUNT: usize = PkClass::NAMES.len();

    /// The class a profile string names (`rsa2048_sign`).
    pub fn named(name: &str) -> Option<PkClass> {
        PkClass::NAMES.iter().position(|&n| n == name).map(PkClass)
    }

    pub fn name(self) -> &'static str {
        PkClass::NAMES[self.0]
    }

    pub(crate) fn index(self) -> usize {
        self.0
    }

    fn must(name: &str) -> PkClass {
        // Only called with names from NAMES (the unit test walks every path).
        PkClass::named(name).unwrap_or(PkClass(0))
    }

    /// The class of the main operation of a session of `alg` with `key` of `bits` bits, or
    /// `None` where the engine model has none: key generation (a card makes no keys here),
    /// ML-KEM, and sizes above every listed one.
    pub fn of(alg: AsymAlg, key: &AsymKey, bits: usize) -> Option<PkClass> {
        let private = match key {
            AsymKey::Private(_) => true,
            AsymKey::Public(_) => false,
            AsymKey::ModExp { .. } => true,
            AsymKey::Generate { .. } => return None,
        };
        let role = if private { "sign" } else { "verify" };
        let name = match alg {
            AsymAlg::RsaPkcs1 { .. } | AsymAlg::RsaPss { .. } => {
                let size = RSA_SIZES.into_iter().find(|&s| bits <= s)?;
                format!("rsa{size}_{role}")
            }
            AsymAlg::Ecdsa { curve, .. } => format!("ecdsa_{}_{role}", curve_name(curve)),
            AsymAlg::Ecdh(curve) => format!("ecdh_{}", curve_name(curve)),
            AsymAlg::X25519 => "x25519".to_owned(),
            AsymAlg::Ed25519 => format!("ed25519_{role}"),
            AsymAlg::Ffdh(ModpGroup::Modp2048) => "modp2048".to_owned(),
            AsymAlg::Ffdh(ModpGroup::Modp3072) => "modp3072".to_owned(),
            AsymAlg::ModExp => {
                let size = MODEXP_SIZES.into_iter().find(|&s| bits <= s)?;
                format!("modexp{size}")
            }
            // ML-KEM, and whatever ocf adds: not in the engine model.
            _ => return None,
        };
        Some(PkClass::must(&name))
    }
}

fn curve_name(c: Curve) -> &'static str {
    match c {
        Curve::P256 => "p256",
        Curve::P384 => "p384",
    }
}

impl fmt::Display for PkClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The engine time of every class the card offers (nanoseconds per operation), `None` for
/// those it does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PkTable([Option<u64>; PkClass::COUNT]);

impl PkTable {
    /// A table from `(class name, time)` pairs; the rest not offered.
    pub(crate) fn from_pairs(pairs: &[(&str, u64)]) -> PkTable {
        let mut t = PkTable::default();
        for &(name, ns) in pairs {
            t.set(PkClass::must(name), Some(ns));
        }
        t
    }

    /// Every class at one time (`pk=…`).
    pub(crate) fn every(ns: u64) -> PkTable {
        PkTable([Some(ns); PkClass::COUNT])
    }

    pub fn get(&self, class: PkClass) -> Option<u64> {
        self.0[class.index()]
    }

    pub(crate) fn set(&mut self, class: PkClass, ns: Option<u64>) {
        self.0[class.index()] = ns;
    }

    /// The classes offered, with their times, in [`PkClass::NAMES`] order.
    pub fn offered(&self) -> impl Iterator<Item = (PkClass, u64)> + '_ {
        self.0.iter().enumerate().filter_map(|(i, ns)| ns.map(|ns| (PkClass(i), ns)))
    }

    /// The algorithms some class of which is offered, for [`ocf::Capabilities::asymmetric`]
    /// (the probe then checks the key size).
    pub fn algorithms(&self) -> Vec<AsymAlg> {
        let offered = |prefix: &str| self.offered().any(|(c, _)| c.name().starts_with(prefix));
        AsymAlg::all()
            .into_iter()
            .filter(|alg| match alg {
                AsymAlg::RsaPkcs1 { .. } | AsymAlg::RsaPss { .. } => offered("rsa"),
                AsymAlg::Ecdsa { curve, .. } => offered(&format!("ecdsa_{}", curve_name(*curve))),
                AsymAlg::Ecdh(curve) => offered(&format!("ecdh_{}", curve_name(*curve))),
                AsymAlg::X25519 => offered("x25519"),
                AsymAlg::Ed25519 => offered("ed25519"),
                AsymAlg::Ffdh(g) => offered(&g.to_string()),
                AsymAlg::ModExp => offered("modexp"),
                _ => false,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use ocf::asym::{PrivateKey, PublicKey, SigEncoding};
    use ocf::{DigestAlg, Key};

    use super::*;

    fn private() -> AsymKey {
        AsymKey::Private(PrivateKey::raw(&[1; 32]))
    }

    fn public() -> AsymKey {
        AsymKey::Public(PublicKey::raw(&[1; 32]))
    }

    #[test]
    fn every_algorithm_and_size_has_its_class() {
        let name = |alg, key: &AsymKey, bits| PkClass::of(alg, key, bits).map(PkClass::name);
        let pss = AsymAlg::RsaPss { hash: DigestAlg::Sha256 };
        assert_eq!(name(pss, &private(), 2048), Some("rsa2048_sign"));
        assert_eq!(name(pss, &public(), 2048), Some("rsa2048_verify"));
        assert_eq!(name(pss, &private(), 2560), Some("rsa3072_sign"), "rounded up");
        assert_eq!(
            name(AsymAlg::RsaPkcs1 { hash: DigestAlg::Sha512 }, &public(), 4096),
            Some("rsa4096_verify")
        );
        assert_eq!(name(pss, &public(), 4097), None, "above every size");
        let ecdsa = |curve| AsymAlg::Ecdsa { curve, hash: DigestAlg::Sha384, encoding: SigEncoding::P1363 };
        assert_eq!(name(ecdsa(Curve::P256), &private(), 256), Some("ecdsa_p256_sign"));
        assert_eq!(name(ecdsa(Curve::P384), &public(), 384), Some("ecdsa_p384_verify"));
        assert_eq!(name(AsymAlg::Ecdh(Curve::P384), &private(), 384), Some("ecdh_p384"));
        assert_eq!(name(AsymAlg::X25519, &private(), 256), Some("x25519"));
        assert_eq!(name(AsymAlg::Ed25519, &private(), 256), Some("ed25519_sign"));
        assert_eq!(name(AsymAlg::Ed25519, &public(), 256), Some("ed25519_verify"));
        assert_eq!(name(AsymAlg::Ffdh(ModpGroup::Modp3072), &private(), 3072), Some("modp3072"));
        let modexp = AsymKey::ModExp { exponent: Key::new(&[3]), modulus: vec![0xff; 64] };
        assert_eq!(name(AsymAlg::ModExp, &modexp, 512), Some("modexp512"));
        assert_eq!(name(AsymAlg::ModExp, &modexp, 513), Some("modexp1024"));
        assert_eq!(name(AsymAlg::ModExp, &modexp, 17), Some("modexp512"));
        assert_eq!(name(AsymAlg::MlKem768, &private(), 768), None);
        assert_eq!(name(AsymAlg::X25519, &AsymKey::Generate { bits: 0 }, 256), None, "no key generation");
        // Every name is reachable and round-trips.
        for (i, n) in PkClass::NAMES.iter().enumerate() {
            assert_eq!(PkClass::named(n), Some(PkClass(i)));
        }
    }

    #[test]
    fn the_table_lists_the_algorithms_it_offers() {
        let t = PkTable::from_pairs(&[("modexp2048", 1), ("modp2048", 2)]);
        assert_eq!(t.algorithms(), vec![AsymAlg::Ffdh(ModpGroup::Modp2048), AsymAlg::ModExp]);
        assert_eq!(t.offered().count(), 2);
        let all = PkTable::every(5).algorithms();
        assert!(!all.contains(&AsymAlg::MlKem768));
        assert_eq!(all.len(), AsymAlg::all().len() - 1, "everything but ML-KEM");
    }
}
