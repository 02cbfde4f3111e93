//! # ocf-soft — the software driver
//!
//! Every algorithm ocf names, on the CPU, through the library measured fastest for it on
//! our reference machine (AMD Zen 5: AES-NI, VAES, AVX-512, SHA-NI):
//!
//! | algorithm                              | library                                      |
//! |----------------------------------------|----------------------------------------------|
//! | AES-GCM                                | aws-lc-rs                                    |
//! | ChaCha20-Poly1305                      | aws-lc-rs < 512 B ≤ IPsec-MB (if built with it); else aws-lc-rs < 2 KiB ≤ libcrypto (reused ctx) |
//! | AES-CBC, AES-CTR, 3DES-CBC             | aws-lc-rs (`cipher`, unpadded)               |
//! | SHA-1, SHA-256, HMAC over them         | RustCrypto (SHA-NI)                          |
//! | SHA-384, SHA-512, MD5, HMAC over them  | libcrypto (reused ctx) from 128/256 B, else RustCrypto |
//! | DEFLATE (raw, RFC 1951), level 1       | libdeflate (`libdeflater`; `tools/deflatebench`) |
//! | X25519, ECDH P-256/P-384               | aws-lc-rs (`agreement`): 1.8x / 3.7x / 8.5x libcrypto |
//! | Ed25519                                | aws-lc-rs (`signature`): sign 4.6x, verify 2.6x libcrypto |
//! | ECDSA P-256/SHA-256, P-384/SHA-384     | aws-lc-rs: sign 1.5x / 9x, verify 1.3x / 3.4x libcrypto |
//! | ECDSA, the other curve/hash pairs      | sign: libcrypto over the digest (aws-lc-rs signs only the curve's own hash); verify: aws-lc-rs |
//! | RSA PKCS#1 v1.5 and PSS, 2048–4096     | aws-lc-rs: 2048 sign 1.02x, verify 1.26x; 4096 sign 2.35x libcrypto |
//! | MODP DH (groups 14, 15), `CRK_MOD_EXP` | libcrypto `BN_mod_exp_mont_consttime` (aws-lc-rs has no bignum API) |
//! | ML-KEM-768                             | aws-lc-rs (`kem`); the seed expanded by aws-lc-sys (libcrypto 3.0 has none) |
//! | key generation (PKCS#8)                | libcrypto (`openssl pkey` reads what it writes; not a hot path) |
//! | random bytes                           | the kernel, `getrandom(2)` (`getrandom` crate) |
//!
//! The measurements behind the table are in `docs/architecture.md`, `docs/measurements.md`
//! and `tools/libbench/REPORT.md` (public-key operations: its "Public-key operations"
//! section; `examples/asym_speed.rs` puts the driver through ocf next to the library alone
//! and `openssl speed`).
//!
//! The driver is synchronous (every request is finished inside `process`), and its
//! processing function is chosen once per session: `SoftSession` is an enum built by
//! `new_session`, so a request costs one `match`, not a lookup.

mod aead;
mod asym;
mod chacha;
mod cipher;
mod cpu;
mod deflate;
mod digest;
mod evp;
#[cfg(ocf_ipsec_mb)]
mod imb;
mod pool;
mod random;
mod stream;

/// The library calls the driver makes, without the framework around them: what the
/// overhead benchmark compares ocf against. Not a stable API.
#[doc(hidden)]
pub mod raw {
    pub use crate::aead::Aead;
    pub use crate::cipher::Cipher;
    pub use crate::digest::{Digester, HmacKey};
}

use std::sync::Arc;

use ocf::{
    AsymAlg, Capabilities, CipherAlg, CompAlg, DigestAlg, Driver, DriverSession, Error, Failed, Framework,
    Hint, MacAlg, Mode, Op, Part, Priority, Processed, Request, SessionContext, SessionParams, MAX_TAG_LEN,
};
use subtle::ConstantTimeEq;

use crate::aead::Aead;
use crate::cipher::Cipher;
use crate::digest::HmacKey;

/// The software driver. Register it with [`register`] or `Framework::register`.
#[derive(Debug, Default)]
pub struct SoftDriver {
    _private: (),
}

/// The name the soft driver registers under.
pub const NAME: &str = "soft";

impl SoftDriver {
    pub fn new() -> SoftDriver {
        SoftDriver::default()
    }
}

/// Registers a soft driver with `fw`.
pub fn register(fw: &Framework) -> Result<(), Error> {
    fw.register(Arc::new(SoftDriver::new()))
}

impl Driver for SoftDriver {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        // Every algorithm ocf names, whole or in parts, and compression.
        Capabilities {
            synchronous: true,
            multipart: true,
            compression: CompAlg::ALL.to_vec(),
            asymmetric: AsymAlg::all(),
            random: true,
            ..Capabilities::every_algorithm()
        }
    }

    fn probe_session(&self, params: &SessionParams) -> Option<Priority> {
        // Sessions whose work runs on special instructions are "accelerated software", the
        // rest plain software; both lose to a hardware driver that wants the session.
        let accelerated = match &params.mode {
            Mode::Cipher { alg, .. } | Mode::Aead { alg, .. } | Mode::CipherThenMac { cipher: alg, .. } => {
                matches!(alg, CipherAlg::AesCbc | CipherAlg::AesCtr | CipherAlg::AesGcm) && cpu_has_aes()
            }
            Mode::Digest { alg } | Mode::Mac { alg: MacAlg::Hmac(alg), .. } => {
                matches!(alg, DigestAlg::Sha1 | DigestAlg::Sha256) && cpu_has_sha()
            }
            _ => false,
        };
        Some(if accelerated { Priority::AcceleratedSoftware } else { Priority::Software })
    }

    fn new_session(
        &self,
        params: &SessionParams,
        _ctx: SessionContext,
    ) -> Result<Box<dyn DriverSession>, Error> {
        Ok(Box::new(SoftSession::new(params)?))
    }
}

fn cpu_has_aes() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("aes")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn cpu_has_sha() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("sha")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A soft session: the processing function and its keyed state, chosen once.
// Variants differ in size (an HMAC-SHA512 state is large), but there is one value per
// session, already boxed by `new_session`; boxing variants would add a pointer chase to
// every request.
#[allow(clippy::large_enum_variant)]
pub(crate) enum SoftSession {
    Cipher(Cipher),
    Digest(digest::Digester),
    Mac(HmacKey),
    Aead(Aead),
    CipherThenMac(Cipher, HmacKey),
    /// Raw DEFLATE (`crate::deflate`); its library state is per thread.
    Deflate,
    /// A public-key algorithm with its parsed key (`crate::asym`).
    Asym(asym::AsymSession),
    /// Random bytes from the kernel (`crate::random`).
    Random,
}

impl SoftSession {
    fn new(params: &SessionParams) -> Result<SoftSession, Error> {
        Ok(match &params.mode {
            Mode::Cipher { alg, key } => SoftSession::Cipher(Cipher::new(*alg, key.as_bytes())?),
            Mode::Digest { alg } => SoftSession::Digest(digest::Digester::new(*alg)?),
            Mode::Mac { alg, key, .. } => SoftSession::Mac(HmacKey::new(*alg, key.as_bytes())?),
            Mode::Aead { alg, key, .. } => {
                SoftSession::Aead(Aead::new(*alg, key.as_bytes(), params.multipart)?)
            }
            Mode::CipherThenMac { cipher, cipher_key, mac, mac_key, .. } => SoftSession::CipherThenMac(
                Cipher::new(*cipher, cipher_key.as_bytes())?,
                HmacKey::new(*mac, mac_key.as_bytes())?,
            ),
            Mode::Compress { alg: CompAlg::Deflate } => SoftSession::Deflate,
            Mode::Asymmetric { alg, key } => SoftSession::Asym(asym::AsymSession::new(*alg, key)?),
            Mode::Random => SoftSession::Random,
            _ => return Err(Error::InvalidParams("soft: unknown mode")),
        })
    }

    #[inline(always)]
    fn run(&self, req: &mut Request) -> Result<(), Error> {
        if req.part != Part::Whole {
            return self.run_part(req);
        }
        let op = req.op;
        match self {
            SoftSession::Deflate => {
                return match op {
                    Op::Compress => req.with_input_output(deflate::compress),
                    _ => req.with_input_output(deflate::decompress),
                };
            }
            SoftSession::Asym(a) => return a.run(req),
            SoftSession::Random => return req.with_views(|v| random::fill_in_place(v.payload)),
            _ => {}
        }
        req.with_views(|v| match (self, op) {
            (SoftSession::Cipher(c), Op::Encrypt) => c.encrypt(v.iv, v.payload),
            (SoftSession::Cipher(c), _) => c.decrypt(v.iv, v.payload),
            (SoftSession::Digest(d), Op::ComputeDigest) => d.digest(v.payload, v.tag),
            (SoftSession::Digest(d), _) => {
                let mut mine = [0u8; MAX_TAG_LEN];
                d.digest(v.payload, &mut mine)?;
                verify(&mine[..v.tag.len()], v.tag)
            }
            (SoftSession::Mac(k), Op::ComputeDigest) => k.compute(&[v.payload, v.esn], v.tag),
            (SoftSession::Mac(k), _) => {
                let mut mine = [0u8; MAX_TAG_LEN];
                let mine = &mut mine[..v.tag.len()];
                k.compute(&[v.payload, v.esn], mine)?;
                verify(mine, v.tag)
            }
            (SoftSession::Aead(a), Op::Encrypt) => a.seal(v.iv, v.aad, v.payload, v.tag),
            (SoftSession::Aead(a), _) => a.open(v.iv, v.aad, v.payload, v.tag),
            (SoftSession::CipherThenMac(c, k), Op::Encrypt) => {
                c.encrypt(v.iv, v.payload)?;
                k.compute(&[v.aad, v.payload, v.esn], v.tag)
            }
            (SoftSession::Deflate | SoftSession::Asym(_) | SoftSession::Random, _) => {
                Err(Error::DriverFailure("soft: compression, public-key or random reached the cipher path"))
            }
            (SoftSession::CipherThenMac(c, k), _) => {
                // Verify before decrypting: a forged packet is never decrypted.
                let mut mine = [0u8; MAX_TAG_LEN];
                let mine = &mut mine[..v.tag.len()];
                k.compute(&[v.aad, v.payload, v.esn], mine)?;
                verify(mine, v.tag)?;
                c.decrypt(v.iv, v.payload)
            }
        })
    }
}

impl SoftSession {
    /// One part of a multi-part message (see `crate::stream`). ocf checked the part's
    /// place in its message; the state travels in the request.
    fn run_part(&self, req: &mut Request) -> Result<(), Error> {
        let (op, part) = (req.op, req.part);
        let taken = req.take_part_state();
        let mut stream = if part == Part::First {
            let starter = match self {
                SoftSession::Cipher(c) => stream::Starter::Cipher(c.alg()),
                SoftSession::Digest(d) => stream::Starter::Hash(d.hash),
                SoftSession::Mac(k) => stream::Starter::Hmac(k.rust()),
                SoftSession::Aead(a) => match &a.streams {
                    Some(aead::StreamSource::Gcm(pool)) => stream::Starter::Gcm(pool),
                    Some(aead::StreamSource::Chacha(pool)) => stream::Starter::Chacha(pool),
                    None => return Err(Error::DriverFailure("soft: AEAD session not opened for multi-part")),
                },
                SoftSession::CipherThenMac(..) => {
                    return Err(Error::BadPart("cipher+mac sessions take whole messages only"));
                }
                SoftSession::Deflate => {
                    return Err(Error::BadPart("compression sessions take whole messages only"));
                }
                SoftSession::Asym(_) | SoftSession::Random => {
                    return Err(Error::BadPart("asymmetric and random sessions take whole messages only"));
                }
            };
            // Recycle the last finished message's state (or an abandoned one) where it is
            // ours: no allocation, and an AEAD context of the same session only takes the
            // new nonce (see `crate::pool`).
            match req.take_spare_state().or(taken).and_then(stream::ours) {
                Some(mut s) => {
                    s.restart(starter, op, req.iv())?;
                    s
                }
                None => Box::new(stream::Stream::start(starter, op, req.iv())?),
            }
        } else {
            taken
                .and_then(stream::ours)
                .ok_or(Error::BadPart("the message in progress was started by another driver"))?
        };
        let cipher = match self {
            SoftSession::Cipher(c) => Some(c),
            _ => None,
        };
        // A failed part ends its message: the state is not put back.
        req.with_views(|v| stream.part(cipher, op, v, part == Part::Last))?;
        if part == Part::Last {
            req.keep_spare_state(stream);
        } else {
            req.set_part_state(stream);
        }
        Ok(())
    }
}

/// Constant-time tag comparison (lengths are public and already equal).
fn verify(computed: &[u8], given: &[u8]) -> Result<(), Error> {
    if bool::from(computed.ct_eq(given)) {
        Ok(())
    } else {
        Err(Error::AuthFailed)
    }
}

impl DriverSession for SoftSession {
    #[inline]
    fn process(&self, mut req: Request, _hint: Hint) -> Processed {
        Processed::Done(match self.run(&mut req) {
            Ok(()) => Ok(req),
            Err(error) => Err(Failed::new(error, req)),
        })
    }
}

#[cfg(test)]
mod tests {
    /// Intel IPsec-MB is built in and runs here when `OCF_REQUIRE_IPSEC_MB=1` (set by
    /// `scripts/test` where the library is installed and `OCF_NO_IPSEC_MB` is not set): its
    /// tests are compiled only with it (`cfg(ocf_ipsec_mb)`), so a build that lost it would
    /// otherwise pass them by having none, and ChaCha20-Poly1305 would quietly fall back.
    #[test]
    fn ipsec_mb_is_there_when_required() {
        #[cfg(ocf_ipsec_mb)]
        let runs = crate::imb::available();
        #[cfg(not(ocf_ipsec_mb))]
        let runs = false;
        if std::env::var_os("OCF_REQUIRE_IPSEC_MB").is_some_and(|v| v == "1") {
            let why = if cfg!(ocf_ipsec_mb) { "does not start on this CPU" } else { "is not built in" };
            assert!(runs, "OCF_REQUIRE_IPSEC_MB=1, but IPsec-MB {why}");
        } else if !runs {
            eprintln!("soft: no IPsec-MB (built without it, or it does not start): its tests are not run");
        }
    }
}
