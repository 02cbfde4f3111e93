//! IKEv2's cryptography, every operation an ocf session: the Diffie-Hellman exchanges,
//! the signatures, the PRF and its key schedule, the SK payloads' AEAD or cipher + HMAC,
//! the nonces, SPIs and NAT detection hashes. Nothing here calls a crypto library
//! directly, so ocf's cost model, counters and profile see IKE as they see ESP.
//!
//! Every function takes the [`ocf::Framework`] whose drivers serve it, and returns a
//! [`CryptoError`] naming the cause. Key material is held in `Zeroizing` buffers
//! ([`KeyBytes`], [`SharedSecret`]) or ocf sessions, wiped when dropped.
//!
//! # How an IKE SA uses it
//!
//! ```text
//!  IKE_SA_INIT ─ proposal chosen ─▶ suite = IkeSuite::from_ids(encr, bits, integ, prf, ke)
//!   initiator:  spi_i = ike_spi(fw); ni = nonce(fw, prf, DEFAULT_NONCE_LEN)
//!               share = KeyShare::generate(fw, suite.ke)   → KEi = share.public_value()
//!   responder:  (KEr, g_ir) = encapsulate(fw, suite.ke, KEi); nr = nonce(…); spi_r = ike_spi(fw)
//!   initiator:  g_ir = share.decapsulate(KEr)
//!   both:       NAT_DETECTION_*: natd_hash(fw, &spi_i, &spi_r, address)
//!               keys = IkeKeys::new_sa(fw, &suite, &g_ir, &ni, &nr, &spi_i, &spi_r)
//!               (out, inb) = keys.sk_ciphers(fw, &suite, we_are_initiator)
//!
//!  every later message:
//!     body = out.seal(header_and_sk_header, inner_payloads)      (lengths: out.body_len(n))
//!     inner = inb.open(header_and_sk_header, body)               (or open_message)
//!
//!  IKE_AUTH:    octets = signed_octets(fw, prf, our_IKE_SA_INIT_msg, peer_nonce, &keys.sk_pi|sk_pr, our_id_rest)
//!               PSK:  psk_auth(fw, prf, psk, &octets)              → AUTH method 2
//!                     verify_psk_auth(fw, prf, psk, method, data, &peer_octets)
//!               cert: key = SigningKey::from_pkcs8(der); scheme = key.choose_scheme(peer_hashes)
//!                     data = key.sign(fw, scheme, &octets)         → AUTH method scheme.method()
//!                     verify_signature(fw, peer_spki, method, data, &peer_octets)
//!               CHILD_SA: ChildKeys::derive(fw, prf, &keys.sk_d, &child_suite, None, &ni, &nr)
//!
//!  CREATE_CHILD_SA: CHILD_SA (PFS: g_ir from a new KeyShare/encapsulate, Some(&g_ir))
//!                   IKE SA rekey: keys.rekeyed(fw, old_prf, &new_suite, &g_ir, &ni, &nr, &spi_i, &spi_r)
//! ```
//!
//! Module layout (each module uses only those below it; `suite` and `error`, the leaves,
//! are used by all):
//!
//! ```text
//!   what the state machine calls:
//!   auth      keys          signature     kex     random    natd
//!    │       ╱    ╲          │     ╲       │        │         │
//!    ▼      ▼      ▼         ▼      │      │        │         │
//!    prf           sk        der    │      │        │         │
//!     │            │                │      │        │         │
//!     ▼            ▼                ▼      ▼        ▼         ▼
//!    ops: every ocf call (session, run, asym, random, digest)
//! ```

mod auth;
mod der;
mod error;
mod kex;
mod keys;
mod natd;
mod ops;
mod prf;
mod random;
mod signature;
mod sk;
mod suite;

pub use auth::{psk_auth, signed_octets, verify_psk_auth, MIN_PSK_LEN};
pub use der::{pkcs8_key_type, spki_key_type, KeyType};
pub use error::CryptoError;
pub use kex::{encapsulate, KeyShare, SharedSecret};
pub use keys::{rekey_skeyseed, skeyseed, ChildKeys, IkeKeys, KeyBytes};
pub use natd::{natd_hash, NATD_HASH_LEN};
pub use prf::{prf, prf_plus, PrfSession};
pub use random::{check_nonce, ike_spi, nonce, DEFAULT_NONCE_LEN, MAX_NONCE_LEN};
pub use signature::{verify_signature, AuthScheme, SignatureScheme, SigningKey};
pub use sk::SkCipher;
pub use suite::{ChildSuite, Encr, IkeSuite, Integ, KeMethod, Prf};
