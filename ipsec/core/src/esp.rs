//! The ESP transform (RFC 4303): how an SA's algorithms become one ocf session, and where
//! the header, IV, payload, padding, trailer and ICV of a packet lie, so that one ocf
//! request encrypts and authenticates (or verifies and decrypts) it in place.
//!
//! ```text
//!  esp ─┬─ SPI (4) ─ seq (4) ─┬─ IV (iv_len) ─┬─ payload … padding 1,2,3… ─ pad len ─ next hdr ─┬─ ICV ─┐
//!       └──── AAD (AEAD) ─────┘               └──────────────── encrypted (ocf payload) ─────────┘       │
//!       └──── authenticated by HMAC (cipher+MAC: AAD = header and IV) ───────────────────────────┘       │
//!                                                                      ICV written/read in place ────────┘
//! ```
//!
//! - AES-GCM (RFC 4106) and ChaCha20-Poly1305 (RFC 7634): the key material ends with a
//!   4-byte salt; the nonce is salt ‖ IV, and the 8-byte IV is the 64-bit sequence number,
//!   which never repeats for an SA (the SA stops before it would). AAD is SPI ‖ seq, or
//!   SPI ‖ seq_hi ‖ seq_lo with ESN (RFC 4106 §5, RFC 7634 §2.1).
//! - AES-CBC (RFC 3602), 3DES-CBC (RFC 2451) and NULL (RFC 2410) with HMAC (RFC 2404,
//!   RFC 4868): encrypt, then HMAC over header ‖ IV ‖ ciphertext (‖ seq_hi with ESN, which ocf
//!   appends without its being in the packet: `with_esn_high`), truncated. CBC IVs are
//!   random (RFC 3602 §3: unpredictable).

use std::cell::RefCell;
use std::ops::Range;

use ipsec_wire::esp::Trailer as WireTrailer;
use ipsec_wire::{Error as WireError, IpProtocol};
use ocf::{Aad, CipherAlg, DigestAlg, InlineAad, Key, MacAlg, Op, Request, SessionParams, TagPlace};
use rand::RngCore;

use crate::control::{AuthAlg, EncAlg, SaSpec};

/// ESP header: SPI and sequence number.
pub const ESP_HEADER_LEN: usize = 8;

/// The longest explicit IV of any transform (AES-CBC's block).
const MAX_IV_LEN: usize = 16;
/// The largest alignment of payload ‖ padding ‖ trailer (AES-CBC's block).
const MAX_ALIGN: usize = 16;
/// The longest ICV (HMAC-SHA2-512 truncated to 256 bits, RFC 4868 §2.3).
const MAX_ICV_LEN: usize = 32;

/// The longest packet that ESP carries in at most `wire_mtu` bytes whatever the SA: below an
/// outer IPv6 header (40), UDP (8, ESP in UDP), the ESP header, AES-CBC's 16-byte IV, its
/// 16-byte blocks holding payload, padding and the 2-byte trailer, and HMAC-SHA2-512's
/// 32-byte ICV. A TUN whose MTU is at most this never makes an ESP packet longer than the
/// wire's MTU: 1390 for Ethernet's 1500 (AES-CBC with HMAC-SHA2-512 over IPv6 in UDP needs
/// 122 bytes around a 1400-byte packet). Linux sizes each SA's packets the same way (the
/// MTU of an XFRM bundle is the path's less that SA's overhead). `wire_mtu` is at least 1280,
/// IPv6's minimum.
pub const fn max_inner_len(wire_mtu: usize) -> usize {
    let room = wire_mtu - 40 - 8 - ESP_HEADER_LEN - MAX_IV_LEN - MAX_ICV_LEN;
    (room & !(MAX_ALIGN - 1)) - 2
}

/// How an SA's packets are laid out and authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transform {
    pub enc: EncAlg,
    /// Explicit IV bytes carried in each packet.
    pub iv_len: usize,
    /// The payload ‖ padding ‖ trailer must be a multiple of this (at least 4).
    pub align: usize,
    pub icv_len: usize,
    /// AEAD nonce salt (RFC 4106 / RFC 7634), zero otherwise.
    salt: [u8; 4],
    aead: bool,
    /// The cipher's block (CBC needs whole blocks).
    block: usize,
}

/// Why an SA's algorithms and keys cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransformError {
    /// The key material length is not one the algorithm defines.
    KeyLength { alg: &'static str, got: usize, allowed: &'static [usize] },
    /// An AEAD with an authentication algorithm, or another cipher without one.
    AuthMismatch(&'static str),
}

impl std::fmt::Display for TransformError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransformError::KeyLength { alg, got, allowed } => {
                write!(f, "{alg}: key of {got} bytes (allowed: {allowed:?})")
            }
            TransformError::AuthMismatch(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for TransformError {}

impl Transform {
    /// The transform and the ocf session parameters for an SA.
    pub fn new(spec: &SaSpec) -> Result<(Transform, SessionParams), TransformError> {
        let key = spec.enc_key.as_bytes();
        if !spec.enc.key_lens().contains(&key.len()) {
            return Err(TransformError::KeyLength {
                alg: spec.enc.name(),
                got: key.len(),
                allowed: spec.enc.key_lens(),
            });
        }
        let mut t = Transform {
            enc: spec.enc,
            iv_len: 0,
            align: 4,
            icv_len: 0,
            salt: [0; 4],
            aead: spec.enc.is_aead(),
            block: 1,
        };
        let params = match (spec.enc, &spec.auth) {
            (EncAlg::AesGcm16 | EncAlg::ChaCha20Poly1305, None) => {
                let (k, salt) = key.split_at(key.len() - 4);
                t.salt.copy_from_slice(salt);
                t.iv_len = 8;
                t.icv_len = 16;
                let alg = if spec.enc == EncAlg::AesGcm16 {
                    CipherAlg::AesGcm
                } else {
                    CipherAlg::ChaCha20Poly1305
                };
                SessionParams::aead(alg, k)
            }
            (EncAlg::AesGcm16 | EncAlg::ChaCha20Poly1305, Some(_)) => {
                return Err(TransformError::AuthMismatch("an AEAD algorithm authenticates by itself: no -A"))
            }
            (enc, Some((auth, mkey))) => {
                let Some(digest) = digest(*auth) else {
                    return Err(TransformError::AuthMismatch(
                        "aes-gmac is AH's: ESP with GMAC (RFC 4543's ENCR_NULL_AUTH_AES_GMAC) is not supported",
                    ));
                };
                if mkey.as_bytes().len() != auth.key_len() {
                    return Err(TransformError::KeyLength {
                        alg: auth.name(),
                        got: mkey.as_bytes().len(),
                        allowed: auth.key_lens(),
                    });
                }
                let (cipher, ckey) = match enc {
                    EncAlg::AesCbc => (CipherAlg::AesCbc, Key::new(key)),
                    EncAlg::TdesCbc => (CipherAlg::TdesCbc, Key::new(key)),
                    _ => (CipherAlg::Null, Key::empty()),
                };
                t.iv_len = cipher.iv_len();
                t.block = cipher.block_len();
                t.align = t.block.max(4);
                t.icv_len = auth.icv_len();
                SessionParams::cipher_then_mac(cipher, ckey, MacAlg::Hmac(digest), mkey.as_bytes())
                    .with_tag_len(t.icv_len)
            }
            (_, None) => {
                return Err(TransformError::AuthMismatch(
                    "ESP without authentication is not supported: give -A (RFC 4303 §3.2 recommends it)",
                ))
            }
        };
        Ok((t, params))
    }

    /// Bytes ESP adds around a payload of `len` bytes (header, IV, padding, trailer, ICV).
    pub fn overhead(&self, len: usize) -> usize {
        ESP_HEADER_LEN + self.iv_len + self.padded_len(len) - len + self.icv_len
    }

    /// The payload ‖ padding ‖ pad length ‖ next header length for `len` payload bytes.
    pub fn padded_len(&self, len: usize) -> usize {
        // `align` is 4, 8 or 16: a mask, not a division (measured on the packet path).
        debug_assert!(self.align.is_power_of_two());
        (len + 2 + self.align - 1) & !(self.align - 1)
    }

    /// Lays out an ESP packet at `esp` in `buf`, whose payload (`len` bytes) already sits at
    /// `esp + 8 + iv_len`: writes the header, IV, padding and trailer, grows `buf` for the
    /// ICV, and returns the ocf request that encrypts and authenticates it in place.
    ///
    /// `iv` is the IV: the datapath gives CBC packets one from ocf's random operation
    /// (`crate::ivs`), known-answer tests their vector's. Without one, AEAD uses the sequence
    /// number (RFC 4106 §3.1) and CBC draws from the thread's CSPRNG (tests and tools only).
    #[allow(clippy::too_many_arguments)]
    pub fn seal(
        &self,
        mut buf: Vec<u8>,
        esp: usize,
        len: usize,
        next_header: u8,
        spi: u32,
        seq: u64,
        esn: bool,
        iv: Option<&[u8]>,
    ) -> Request {
        let body = esp + ESP_HEADER_LEN + self.iv_len;
        let padded = self.padded_len(len);
        let pad = padded - len - 2;
        let icv = body + padded;
        buf.resize(icv + self.icv_len, 0);
        let mut h = ipsec_wire::esp::Packet::new_unchecked(&mut buf[esp..]);
        h.set_spi(spi);
        h.set_sequence_number(seq as u32);
        let ivr = esp + ESP_HEADER_LEN..body;
        match iv {
            Some(iv) => buf[ivr.clone()].copy_from_slice(iv),
            None if self.aead => buf[ivr.clone()].copy_from_slice(&seq.to_be_bytes()),
            None => rand::rng().fill_bytes(&mut buf[ivr.clone()]),
        }
        // RFC 4303 §2.4: the default padding 1, 2, 3, …, then pad length and next header.
        let trailer =
            WireTrailer { payload_len: len, pad_len: pad as u8, next_header: IpProtocol(next_header) };
        // `buf` was sized for exactly this trailer above.
        let _ = trailer.emit(&mut buf[body + len..icv]);
        self.request(Op::Encrypt, buf, esp, body..icv, icv, seq, esn)
    }

    /// Whether an ESP packet of `len` bytes (header to ICV) can be opened at all: long
    /// enough for header, IV, two trailer bytes and ICV, and whole cipher blocks.
    pub fn check_len(&self, len: usize) -> Result<(), OpenError> {
        let Some(body) = len.checked_sub(ESP_HEADER_LEN + self.iv_len + self.icv_len).filter(|&b| b >= 2)
        else {
            return Err(OpenError::Truncated);
        };
        if body % self.block != 0 {
            return Err(OpenError::NotBlocks);
        }
        Ok(())
    }

    /// The ocf request that verifies and decrypts the ESP packet at `esp` in `buf` (whose
    /// length ends at the ICV), given the full sequence number the replay window inferred.
    /// `Err` if the packet is too short or not whole blocks.
    pub fn open(
        &self,
        buf: Vec<u8>,
        esp: usize,
        seq: u64,
        esn: bool,
    ) -> Result<Request, (OpenError, Vec<u8>)> {
        let body = esp + ESP_HEADER_LEN + self.iv_len;
        let Some(icv) = buf.len().checked_sub(self.icv_len).filter(|&icv| icv >= body + 2) else {
            return Err((OpenError::Truncated, buf));
        };
        if (icv - body) % self.block != 0 {
            return Err((OpenError::NotBlocks, buf));
        }
        Ok(self.request(Op::Decrypt, buf, esp, body..icv, icv, seq, esn))
    }

    #[allow(clippy::too_many_arguments)]
    fn request(
        &self,
        op: Op,
        buf: Vec<u8>,
        esp: usize,
        payload: Range<usize>,
        icv: usize,
        seq: u64,
        esn: bool,
    ) -> Request {
        let body = payload.start;
        let mut iv = [0u8; 16];
        let iv = if self.aead {
            iv[..4].copy_from_slice(&self.salt);
            iv[4..12].copy_from_slice(&buf[esp + ESP_HEADER_LEN..body]);
            &iv[..12]
        } else {
            iv[..self.iv_len].copy_from_slice(&buf[esp + ESP_HEADER_LEN..body]);
            &iv[..self.iv_len]
        };
        let mut req =
            spare_request(op, buf).with_payload(payload).with_iv(iv).with_tag_place(TagPlace::InBuffer(icv));
        match (self.aead, esn) {
            (true, false) => req.aad = Aad::Region(esp..esp + ESP_HEADER_LEN),
            (true, true) => {
                // RFC 4106 §5 / RFC 7634 §2.1: SPI ‖ seq_hi ‖ seq_lo, not contiguous in the
                // packet. SPI and seq_lo are taken from the packet itself, so that what is
                // authenticated is what was sent.
                let packet = req.buf.as_contiguous().unwrap_or(&[]);
                let (spi, lo) = (word(packet, esp), word(packet, esp + 4));
                let mut aad = [0u8; 12];
                aad[..4].copy_from_slice(&spi);
                aad[4..8].copy_from_slice(&((seq >> 32) as u32).to_be_bytes());
                aad[8..].copy_from_slice(&lo);
                req.aad = Aad::Inline(InlineAad::new(&aad).expect("12 bytes fit"));
            }
            (false, esn) => {
                req.aad = Aad::Region(esp..body);
                if esn {
                    req.set_esn_high((seq >> 32) as u32);
                }
            }
        }
        req
    }

    /// Whether the transform is an AEAD (AES-GCM-16, ChaCha20-Poly1305): one cipher
    /// gives confidentiality and the ICV, with no separate HMAC, and each packet's explicit
    /// IV is its 64-bit sequence number (the nonce's variable part, after the salt).
    pub fn is_aead(&self) -> bool {
        self.aead
    }
}

thread_local! {
    /// Requests whose packets are finished, for the next packets on this thread: a
    /// request is a heap allocation, and taking one from here instead of the allocator was
    /// measured on the ESP packet path.
    static SPARE_REQUESTS: RefCell<Vec<Request>> = const { RefCell::new(Vec::new()) };
}

/// At most this many spare requests are kept per thread (a batch's worth).
const SPARE_REQUESTS_MAX: usize = 64;

/// A request for `op` on `buf`: a spare one reset, or a new one (ESP's and AH's). Always
/// inlined: with AH calling it too, LLVM made it a call on ESP's path (`benches/esp.rs`).
#[inline(always)]
pub(crate) fn spare_request(op: Op, buf: Vec<u8>) -> Request {
    match SPARE_REQUESTS.with(|s| s.borrow_mut().pop()) {
        Some(mut r) => {
            r.reset(op, buf.into());
            r
        }
        None => Request::new(op, buf),
    }
}

/// Keeps a finished request (its buffer already taken) for [`spare_request`].
pub(crate) fn recycle(req: Request) {
    SPARE_REQUESTS.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARE_REQUESTS_MAX {
            s.push(req);
        }
    });
}

fn word(b: &[u8], at: usize) -> [u8; 4] {
    let mut w = [0; 4];
    if let Some(s) = b.get(at..at + 4) {
        w.copy_from_slice(s);
    }
    w
}

/// Why an ESP packet cannot even be handed to the cipher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// Shorter than header, IV, two trailer bytes and ICV.
    Truncated,
    /// The ciphertext is not a whole number of blocks.
    NotBlocks,
}

/// The digest under an HMAC (ESP's and AH's); `None` for AES-GMAC.
pub(crate) fn digest(a: AuthAlg) -> Option<DigestAlg> {
    match a {
        AuthAlg::HmacSha1 => Some(DigestAlg::Sha1),
        AuthAlg::HmacSha256 => Some(DigestAlg::Sha256),
        AuthAlg::HmacSha384 => Some(DigestAlg::Sha384),
        AuthAlg::HmacSha512 => Some(DigestAlg::Sha512),
        AuthAlg::AesGmac => None,
    }
}

/// After a successful open: the payload's length and next header, checking the padding
/// (`ipsec_wire`'s trailer parser). `plain` is payload ‖ padding ‖ pad length ‖ next header.
pub fn trailer(plain: &[u8]) -> Result<(usize, u8), Trailer> {
    match WireTrailer::parse(plain) {
        Ok(t) => Ok((t.payload_len, t.next_header.0)),
        Err(WireError::PadTooLong) => Err(Trailer::PadTooLong),
        Err(WireError::BadPadding) => Err(Trailer::BadPadding),
        Err(_) => Err(Trailer::Short),
    }
}

/// What is wrong with a decrypted ESP trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trailer {
    Short,
    PadTooLong,
    BadPadding,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{KeyBytes, Lifetime, Mode, Proto};
    use std::net::{IpAddr, Ipv4Addr};

    fn spec(enc: EncAlg, key: &[u8], auth: Option<(AuthAlg, &[u8])>) -> SaSpec {
        SaSpec {
            src: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
            proto: Proto::Esp,
            spi: 0x1234,
            mode: Mode::Tunnel,
            reqid: 0,
            enc,
            enc_key: KeyBytes::new(key),
            auth: auth.map(|(a, k)| (a, KeyBytes::new(k))),
            replay_window: 64,
            esn: false,
            natt: None,
            hard: Lifetime::default(),
            soft: Lifetime::default(),
        }
    }

    #[test]
    fn padding_is_checked() {
        assert_eq!(trailer(&[9, 9, 1, 2, 3, 3, 4]), Ok((2, 4)));
        assert_eq!(trailer(&[9, 9, 0, 4]), Ok((2, 4)), "no padding");
        assert_eq!(trailer(&[9, 9, 1, 3, 2, 4]), Err(Trailer::BadPadding));
        assert_eq!(trailer(&[1, 2, 9, 4]), Err(Trailer::PadTooLong));
        assert_eq!(trailer(&[4]), Err(Trailer::Short));
    }

    #[test]
    fn bad_key_material_and_missing_authentication_are_refused() {
        assert!(matches!(
            Transform::new(&spec(EncAlg::AesGcm16, &[0; 16], None)),
            Err(TransformError::KeyLength { got: 16, .. })
        ));
        assert!(matches!(
            Transform::new(&spec(EncAlg::AesCbc, &[0; 16], None)),
            Err(TransformError::AuthMismatch(_))
        ));
        assert!(matches!(
            Transform::new(&spec(EncAlg::AesCbc, &[0; 16], Some((AuthAlg::HmacSha1, &[0; 16])))),
            Err(TransformError::KeyLength { got: 16, .. })
        ));
        assert!(Transform::new(&spec(EncAlg::Null, &[], Some((AuthAlg::HmacSha256, &[0; 32])))).is_ok());
    }
}
