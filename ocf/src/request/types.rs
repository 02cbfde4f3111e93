//! What a request asks for and where its pieces are: the operation ([`Op`]), where the tag
//! lives ([`TagPlace`]), the associated data ([`Aad`], [`InlineAad`]), which piece of a
//! message it carries ([`Part`], [`PartState`]) and how it travels ([`Flags`]). Plain
//! values, used by the request itself (`super`), its validation (`rules`) and the
//! driver's views (`views`); they need nothing of either.

use std::any::Any;
use std::ops::Range;

/// The longest tag, MAC or digest (SHA-512).
pub const MAX_TAG_LEN: usize = 64;
/// The longest IV or nonce (AES block).
pub const MAX_IV_LEN: usize = 16;

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Cipher: encrypt. AEAD and cipher+MAC: encrypt and compute the tag.
    Encrypt,
    /// Cipher: decrypt. AEAD and cipher+MAC: verify the tag, then decrypt.
    Decrypt,
    /// Digest or MAC: compute it.
    ComputeDigest,
    /// Digest or MAC: compare with the given one (in constant time).
    VerifyDigest,
    /// Compression: compress the payload into `out[out_offset..]`. The result must be
    /// shorter than the input and fit the room in `out`, else the request fails with
    /// [`Error::Incompressible`](crate::Error::Incompressible) and the caller sends the
    /// original (RFC 3173 §2.2).
    Compress,
    /// Compression: decompress the payload into `out[out_offset..]`. The room there is the
    /// limit: a stream that would produce more fails with
    /// [`Error::OutputLimit`](crate::Error::OutputLimit), having written no more than the
    /// room and allocated nothing for the rest; a corrupt or
    /// truncated one with [`Error::BadCompressedData`](crate::Error::BadCompressedData).
    Decompress,
    /// Asymmetric (signature key): sign `buf`'s payload, the message (hashed by the driver
    /// with the algorithm's hash). The signature goes to `out[out_offset..]`, its length to
    /// [`RequestFields::result_len`](crate::RequestFields::result_len).
    Sign,
    /// Asymmetric (public signature key): verify a signature of `buf`'s payload. The
    /// signature is `buf[off..]` with [`TagPlace::InBuffer`]`(off)`, after the payload
    /// ([`Request::verify`](crate::Request::verify) lays it out). Fails with
    /// [`Error::BadSignature`](crate::Error::BadSignature).
    Verify,
    /// Asymmetric (agreement, private key): the shared secret with the peer's public value
    /// in `buf`'s payload (raw form), written to `out[out_offset..]`.
    Derive,
    /// Asymmetric (KEM, the peer's public key): a new shared secret and its ciphertext,
    /// written to `out[out_offset..]` as `ciphertext ‖ shared secret`; `buf` is empty.
    Encapsulate,
    /// Asymmetric (KEM, private key): the shared secret of the ciphertext in `buf`'s
    /// payload, written to `out[out_offset..]`.
    Decapsulate,
    /// Asymmetric (`ModExp`): `base ^ exponent mod modulus` for the base in `buf`'s
    /// payload (big-endian), written to `out[out_offset..]` with the modulus's length.
    ModExp,
    /// Asymmetric (private key): the session key's public key in its raw form
    /// ([`PublicFormat::Raw`](crate::asym::PublicFormat::Raw)) to `out[out_offset..]`.
    PublicKey,
    /// Asymmetric (no key, [`AsymKey::Generate`](crate::asym::AsymKey::Generate)): a new
    /// private key to `out[out_offset..]`, PKCS#8 DER, or the raw form for the MODP groups
    /// and ML-KEM. [`Framework::generate_key`](crate::Framework::generate_key) wraps it.
    GenerateKey,
    /// Random bytes (a [`Mode::Random`](crate::Mode::Random) session): `buf`'s payload is
    /// overwritten with them, in place. Fails with
    /// [`Error::RandomSourceFailed`](crate::Error::RandomSourceFailed), the buffer untouched,
    /// when the source is out.
    Random,
}

impl Op {
    /// Every operation, in the cost model's order.
    pub const ALL: [Op; 15] = [
        Op::Encrypt,
        Op::Decrypt,
        Op::ComputeDigest,
        Op::VerifyDigest,
        Op::Compress,
        Op::Decompress,
        Op::Sign,
        Op::Verify,
        Op::Derive,
        Op::Encapsulate,
        Op::Decapsulate,
        Op::ModExp,
        Op::PublicKey,
        Op::GenerateKey,
        Op::Random,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Encrypt => "encrypt",
            Op::Decrypt => "decrypt",
            Op::ComputeDigest => "compute-digest",
            Op::VerifyDigest => "verify-digest",
            Op::Compress => "compress",
            Op::Decompress => "decompress",
            Op::Sign => "sign",
            Op::Verify => "verify",
            Op::Derive => "derive",
            Op::Encapsulate => "encapsulate",
            Op::Decapsulate => "decapsulate",
            Op::ModExp => "modexp",
            Op::PublicKey => "public-key",
            Op::GenerateKey => "generate-key",
            Op::Random => "random",
        }
    }

    /// Whether this is a public-key operation (its result's length comes back in
    /// [`RequestFields::result_len`](crate::RequestFields::result_len), like compression's).
    #[inline]
    pub fn asymmetric(self) -> bool {
        matches!(
            self,
            Op::Sign
                | Op::Verify
                | Op::Derive
                | Op::Encapsulate
                | Op::Decapsulate
                | Op::ModExp
                | Op::PublicKey
                | Op::GenerateKey
        )
    }

    /// Whether this is a compression operation (result out of place, its own length).
    #[inline]
    pub fn compresses(self) -> bool {
        matches!(self, Op::Compress | Op::Decompress)
    }

    /// Whether the tag is an input (checked) rather than an output (written).
    #[inline]
    pub fn checks_tag(self) -> bool {
        matches!(self, Op::Decrypt | Op::VerifyDigest | Op::Verify)
    }
}

/// Where the tag/MAC/digest lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagPlace {
    /// Inline in the request: read it with [`RequestFields::tag`](crate::RequestFields::tag),
    /// give one to verify with [`RequestFields::set_tag`](crate::RequestFields::set_tag).
    Separate,
    /// At this offset of the result buffer (computing) or of `buf` (verifying).
    InBuffer(usize),
}

/// Associated data authenticated but not encrypted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Aad {
    #[default]
    None,
    /// Separate bytes.
    Bytes(Vec<u8>),
    /// A few separate bytes held in the request itself: no allocation per request for
    /// short AAD such as ESP's SPI ‖ ESN high ‖ sequence number (12 bytes) or TLS 1.2's
    /// record header (13). [`Request::with_aad`](crate::Request::with_aad) picks it when the
    /// AAD fits.
    Inline(InlineAad),
    /// A region of `buf`, which must not overlap the payload.
    Region(Range<usize>),
}

impl Aad {
    /// The AAD bytes when they are separate from the buffer (`Bytes` or `Inline`).
    #[inline]
    pub fn separate(&self) -> Option<&[u8]> {
        match self {
            Aad::Bytes(b) => Some(b),
            Aad::Inline(a) => Some(a.as_bytes()),
            Aad::None | Aad::Region(_) => None,
        }
    }
}

/// Up to [`InlineAad::MAX`] AAD bytes, stored without a heap allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InlineAad {
    bytes: [u8; InlineAad::MAX],
    len: u8,
}

impl InlineAad {
    /// The most bytes it holds.
    pub const MAX: usize = 16;

    /// `aad` held inline; `None` if it is longer than [`InlineAad::MAX`].
    #[inline]
    pub fn new(aad: &[u8]) -> Option<InlineAad> {
        let mut bytes = [0; InlineAad::MAX];
        bytes.get_mut(..aad.len())?.copy_from_slice(aad);
        Some(InlineAad { bytes, len: aad.len() as u8 })
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Which piece of a message a request carries.
///
/// Most messages travel whole: an ESP packet, a TLS record. Some arrive in pieces of any
/// size — OpenSSL's `EVP_EncryptUpdate` calls, a file hashed as it is read — and a digest
/// or AEAD tag covers them all. A *multi-part message* is a `First` part, any number of
/// `Middle` parts and a `Last` part, sent one after the other **in the same
/// [`Request`](crate::Request)**: the driver keeps its state for the message (a running
/// hash, a CBC chaining value, a GCM counter and GHASH) in the request ([`PartState`]), so
/// a session serves any number of messages at once, and the next part cannot overtake the
/// previous one.
///
/// Rules, checked by the framework before the driver sees a part (errors are
/// [`Error::BadPart`](crate::Error::BadPart)):
/// - the session was opened with
///   [`SessionParams::multipart`](crate::SessionParams::multipart), so its driver takes
///   parts;
/// - the IV or nonce is read from the `First` part (later parts' IV fields are ignored, so
///   a reused request need not clear it);
/// - the tag (to compute or to verify) belongs to the `Last` part only;
/// - a `Middle` or `Last` part needs a message in progress in its request;
/// - block-mode parts are whole blocks (the caller buffers the rest, as OpenSSL's own
///   ciphers do); stream modes, AEADs and digests take parts of any length;
/// - AEAD associated data comes before the first byte of payload.
///
/// A failed part ends its message: the state is dropped, and the next part must be a
/// `First`. A decrypting AEAD releases plaintext part by part, before the `Last` part
/// checks the tag — as every streaming AEAD interface does; a caller that must not see
/// unauthenticated plaintext sends the message whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Part {
    /// A whole message (the default).
    #[default]
    Whole,
    /// The first piece: starts a message (a new IV, a fresh hash), abandoning any message
    /// still in progress in the request.
    First,
    /// A piece in between.
    Middle,
    /// The last piece: finishes the message and computes or checks the tag.
    Last,
}

impl Part {
    /// Whether this part starts a message (carries the IV).
    #[inline]
    pub fn starts(self) -> bool {
        matches!(self, Part::Whole | Part::First)
    }

    /// Whether this part ends a message (carries the tag).
    #[inline]
    pub fn ends(self) -> bool {
        matches!(self, Part::Whole | Part::Last)
    }
}

/// A driver's state for a multi-part message in progress, carried by the request between
/// parts (see [`Part`]). The framework never looks inside; the driver that made it
/// downcasts it back (`Box<dyn PartState>` upcasts to `Box<dyn Any>`).
pub trait PartState: Any + Send {
    /// An independent copy of the message so far, if the driver can make one: OpenSSL
    /// duplicates digest contexts to hash a common prefix once (`EVP_MD_CTX_copy`).
    fn try_clone(&self) -> Option<Box<dyn PartState>>;
}

/// Per-request flags: how the request travels (see `crate::dispatch`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags(u32);

impl Flags {
    /// No flag: direct dispatch, callback on a return worker.
    pub const NONE: Flags = Flags(0);
    /// The request may be queued and handed to the driver with others by the dispatch
    /// worker, with a hint that more follow (the paper's "batchable" requests). Without
    /// it, a request goes from the caller straight into the driver.
    pub const BATCH: Flags = Flags(1);
    /// Run the callback in the driver's completion context — the submitting thread for a
    /// synchronous driver, the device's completion thread for an asynchronous one —
    /// instead of on a return worker (FreeBSD's CRYPTO_F_CBIMM). For short callbacks that
    /// do not block: it saves a thread hop per request.
    pub const CALLBACK_IMMEDIATE: Flags = Flags(2);
    /// More requests for this session follow from this submitter at once: direct dispatch
    /// hands the driver [`crate::Hint::more`], so a device can post them all and ring its
    /// doorbell once (the paper's "more follow" hint without the dispatch worker's thread
    /// hop). The submitter must send the last of its run without it; a device that was
    /// promised more and got none only learns it from its own timeout.
    pub const MORE: Flags = Flags(4);

    /// These flags without `other`'s.
    pub fn without(self, other: Flags) -> Flags {
        Flags(self.0 & !other.0)
    }

    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, o: Flags) -> Flags {
        Flags(self.0 | o.0)
    }
}
