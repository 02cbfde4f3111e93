//! The AUTH payload's octets (RFC 7296 §2.15) and pre-shared-key authentication; the
//! signature methods are in [`super::signature`].
//!
//! ```text
//!  InitiatorSignedOctets = RealMessage1 | NonceRData | prf(SK_pi, RestOfInitIDPayload)
//!  ResponderSignedOctets = RealMessage2 | NonceIData | prf(SK_pr, RestOfRespIDPayload)
//!      RealMessage1/2: the IKE_SA_INIT message this side sent, every byte as sent
//!      NonceR/IData:   the *other* side's nonce data (no payload header)
//!      RestOf…IDPayload: the ID payload after its generic header (ID Type, 3 reserved
//!                        bytes, Identification Data)
//!
//!  PSK:       AUTH = prf(prf(Shared Secret, "Key Pad for IKEv2"), <SignedOctets>)
//!  signature: AUTH = sign(<SignedOctets>)                 (signature.rs)
//! ```
//!
//! A received PSK AUTH is compared with ours in constant time (`subtle`).

use ike_wire::ids::AuthMethod;
use ocf::Framework;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use super::error::CryptoError;
use super::prf::{prf, PrfSession};
use super::suite::Prf;

/// The shortest pre-shared key accepted, in bytes. A PSK's AUTH value lets whoever sees it
/// (a passive attacker once the SK keys are known, or an active one playing responder)
/// test guesses offline at the speed of two HMACs, so a PSK must carry real entropy: NIST
/// SP 800-77r1 §4.2.2 asks for high-entropy PSKs, RFC 7296 §2.15 warns against ones from a
/// small space. 16 bytes is 128 bits if random; a 16-character passphrase is the least we
/// let an administrator type. (strongSwan accepts any length.)
pub const MIN_PSK_LEN: usize = 16;

/// The key pad of RFC 7296 §2.15, without a terminating NUL.
const KEY_PAD: &[u8] = b"Key Pad for IKEv2";

/// The octets an AUTH payload covers: `real_message | peer_nonce | prf(sk_p, id_rest)`.
/// `sk_p` is SK_pi for the initiator's AUTH and SK_pr for the responder's; `id_rest` the
/// signer's ID payload body after the generic header.
pub fn signed_octets(
    fw: &Framework,
    prf_alg: Prf,
    real_message: &[u8],
    peer_nonce: &[u8],
    sk_p: &[u8],
    id_rest: &[u8],
) -> Result<Vec<u8>, CryptoError> {
    let maced_id = prf(fw, prf_alg, sk_p, id_rest)?;
    let mut octets = Vec::with_capacity(real_message.len() + peer_nonce.len() + maced_id.len());
    octets.extend_from_slice(real_message);
    octets.extend_from_slice(peer_nonce);
    octets.extend_from_slice(&maced_id);
    Ok(octets)
}

/// A PSK AUTH payload's Authentication Data: prf(prf(psk, "Key Pad for IKEv2"), octets).
/// Its Auth Method is [`AuthMethod::PSK`]. A PSK shorter than [`MIN_PSK_LEN`] is refused.
pub fn psk_auth(
    fw: &Framework,
    prf_alg: Prf,
    psk: &[u8],
    signed_octets: &[u8],
) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    if psk.len() < MIN_PSK_LEN {
        return Err(CryptoError::PskTooShort { len: psk.len(), min: MIN_PSK_LEN });
    }
    let padded = prf(fw, prf_alg, psk, KEY_PAD)?;
    PrfSession::new(fw, prf_alg, &padded)?.compute(&[signed_octets])
}

/// Checks a peer's PSK AUTH: `method` must be PSK and `auth_data` equal (in constant
/// time) to what [`psk_auth`] computes over the peer's signed octets.
pub fn verify_psk_auth(
    fw: &Framework,
    prf_alg: Prf,
    psk: &[u8],
    method: AuthMethod,
    auth_data: &[u8],
    signed_octets: &[u8],
) -> Result<(), CryptoError> {
    if method != AuthMethod::PSK {
        return Err(CryptoError::UnsupportedAuthMethod(method));
    }
    let expected = psk_auth(fw, prf_alg, psk, signed_octets)?;
    if bool::from(expected.as_slice().ct_eq(auth_data)) {
        Ok(())
    } else {
        Err(CryptoError::PskMismatch)
    }
}
