//! The one error type of the framework, and the counters that account for every error.
//!
//! Leffler, "Cryptographic Device Support for FreeBSD": "Every error or failure is accounted for separately so problems can be
//! determined immediately." Each [`Error`] variant has an [`ErrorKind`]; the framework
//! increments an [`ErrorCounts`] slot for every error it returns or delivers — per session,
//! per driver, and framework-wide for errors that happen before a driver is involved.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::alg::{CipherAlg, CompAlg, DigestAlg, MacAlg};
use crate::asym::AsymAlg;

/// Everything that can go wrong in ocf. One variant per distinct cause.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// A key whose length the algorithm does not define.
    BadKeyLength {
        what: &'static str,
        got: usize,
        allowed: &'static [usize],
    },
    /// A key the algorithm's standard forbids although its length is right (3DES with
    /// equal subkeys, which degenerates to single DES, or a weak DES subkey).
    WeakKey {
        why: &'static str,
    },
    /// A MAC key that is empty (HMAC accepts any non-zero length).
    BadMacKeyLength {
        got: usize,
    },
    /// A request IV or AEAD nonce of the wrong length.
    BadIvLength {
        expected: usize,
        got: usize,
    },
    /// An AEAD tag or truncated MAC length the algorithm does not allow.
    BadTagLength {
        got: usize,
        allowed: &'static str,
    },
    /// A payload that a block mode cannot process without padding.
    NotBlockMultiple {
        len: usize,
        block: usize,
    },
    /// A payload, AAD or tag region that lies outside its buffer.
    BadRegion {
        what: &'static str,
        start: usize,
        end: usize,
        buf_len: usize,
    },
    /// An out-of-place output buffer too short for the result.
    OutputTooShort {
        need: usize,
        got: usize,
    },
    /// An operation the session's mode cannot do (e.g. encrypt on a digest session).
    BadOperation {
        op: &'static str,
        mode: &'static str,
    },
    /// AAD given to a session whose mode does not authenticate it.
    AadNotSupported {
        mode: &'static str,
    },
    /// ESP extended-sequence-number bits given to a session that does not MAC the payload
    /// (only MAC and cipher+MAC sessions authenticate them; AEAD takes them in the AAD).
    EsnNotSupported {
        mode: &'static str,
    },
    /// A combination of algorithm and mode that does not exist (e.g. AES-GCM as a plain cipher).
    InvalidParams(&'static str),
    /// Tag or MAC verification failed: the data or the tag was altered.
    AuthFailed,
    /// No registered driver supports the algorithm.
    UnsupportedCipher(CipherAlg),
    UnsupportedDigest(DigestAlg),
    UnsupportedMac(MacAlg),
    UnsupportedCompression(CompAlg),
    /// No driver is registered, or none probed the session successfully.
    NoDriver,
    /// A driver asked for by name is not registered.
    UnknownDriver(String),
    /// A driver with the same name is already registered.
    DuplicateDriver(String),
    /// The session's driver was unregistered while the request was pending.
    DriverGone,
    /// The framework's queues for this driver are full and the caller asked not to wait
    /// ([`crate::Session::try_submit`]). Retry later; nothing was lost.
    WouldBlock,
    /// An unregistered driver still held requests when the time to drain them ran out.
    /// It is gone for new requests; the ones it holds complete whenever it finishes them.
    DetachTimeout {
        in_flight: usize,
    },
    /// The driver reported a failure of its own (hardware fault, library error) and handed
    /// the request back as it came: a routed session redoes it once on another driver.
    DriverFailure(&'static str),
    /// The driver failed by a fault of its own after it had begun writing the request's
    /// buffer (a kernel or device error part-way through a message): the buffer was wiped,
    /// and unlike [`Error::DriverFailure`] the request is not redone elsewhere — its input
    /// is gone.
    DriverFailureMidway(&'static str),
    /// A completion callback panicked on a framework thread. Only counted (nobody is there
    /// to receive it); the thread goes on with the next request.
    CallbackPanicked,
    /// A part of a multi-part message that does not fit the message so far (see
    /// [`crate::Part`]): a middle part with no message in progress, an IV after the first
    /// part, a session not opened for multi-part messages.
    BadPart(&'static str),
    /// A compression or decompression request without an out-of-place `out` buffer: the
    /// result's length differs from the input's, so it cannot be written in place.
    NoOutputBuffer {
        op: &'static str,
    },
    /// Compression would not make the data smaller (or would not fit the room in `out`):
    /// RFC 3173 §2.2 — the caller sends the original instead.
    Incompressible {
        len: usize,
    },
    /// Decompression would produce more than the room in `out`, the request's limit (a
    /// decompression bomb, or a packet larger than the largest IP packet). Nothing beyond
    /// the limit was written or allocated.
    OutputLimit {
        limit: usize,
    },
    /// Input to decompress that is not a valid stream: corrupt, or truncated before its
    /// final block.
    BadCompressedData,
    /// No registered driver supports the public-key algorithm.
    UnsupportedAsym(AsymAlg),
    /// A key whose encoding does not parse, or does not fit the session's algorithm.
    BadKey {
        why: &'static str,
    },
    /// An RSA key or modulus smaller than the least accepted.
    KeyTooSmall {
        bits: usize,
        min: usize,
    },
    /// An RSA key or modulus larger than the largest accepted.
    KeyTooLarge {
        bits: usize,
        max: usize,
    },
    /// A signature that does not verify (wrong key, altered message, malformed or badly
    /// padded signature: libraries do not tell these apart, on purpose).
    BadSignature,
    /// A peer's elliptic-curve public value that is not a point on the curve, or not in
    /// the encoding the session takes.
    InvalidPoint,
    /// Key agreement gave the all-zero secret: the peer's X25519 value has small order
    /// (RFC 7748 §6.1).
    ZeroSharedSecret,
    /// A peer's finite-field Diffie-Hellman value outside `2..=p-2` (SP 800-56A
    /// §5.6.2.3.1).
    PeerValueOutOfRange,
    /// An input of the wrong length for the algorithm (an ML-KEM ciphertext, a raw key).
    BadInputLength {
        what: &'static str,
        got: usize,
        expected: usize,
    },
    /// A modular exponentiation's base not smaller than the modulus.
    ModExpBaseTooLarge,
    /// The random source failed its health tests (SP 800-90B §4.4) or could not be read:
    /// no bytes were given, the source is out until it passes again.
    RandomSourceFailed {
        why: &'static str,
    },
}

impl Error {
    /// The counter slot this error is accounted under.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::BadKeyLength { .. } => ErrorKind::BadKeyLength,
            Error::WeakKey { .. } => ErrorKind::WeakKey,
            Error::BadMacKeyLength { .. } => ErrorKind::BadMacKeyLength,
            Error::BadIvLength { .. } => ErrorKind::BadIvLength,
            Error::BadTagLength { .. } => ErrorKind::BadTagLength,
            Error::NotBlockMultiple { .. } => ErrorKind::NotBlockMultiple,
            Error::BadRegion { .. } => ErrorKind::BadRegion,
            Error::OutputTooShort { .. } => ErrorKind::OutputTooShort,
            Error::BadOperation { .. } => ErrorKind::BadOperation,
            Error::AadNotSupported { .. } => ErrorKind::AadNotSupported,
            Error::EsnNotSupported { .. } => ErrorKind::EsnNotSupported,
            Error::InvalidParams(_) => ErrorKind::InvalidParams,
            Error::AuthFailed => ErrorKind::AuthFailed,
            Error::UnsupportedCipher(_)
            | Error::UnsupportedDigest(_)
            | Error::UnsupportedMac(_)
            | Error::UnsupportedCompression(_) => ErrorKind::Unsupported,
            Error::NoDriver => ErrorKind::NoDriver,
            Error::UnknownDriver(_) => ErrorKind::UnknownDriver,
            Error::DuplicateDriver(_) => ErrorKind::DuplicateDriver,
            Error::DriverGone => ErrorKind::DriverGone,
            Error::WouldBlock => ErrorKind::WouldBlock,
            Error::DetachTimeout { .. } => ErrorKind::DetachTimeout,
            Error::DriverFailure(_) => ErrorKind::DriverFailure,
            Error::DriverFailureMidway(_) => ErrorKind::DriverFailureMidway,
            Error::CallbackPanicked => ErrorKind::CallbackPanicked,
            Error::BadPart(_) => ErrorKind::BadPart,
            Error::NoOutputBuffer { .. } => ErrorKind::NoOutputBuffer,
            Error::Incompressible { .. } => ErrorKind::Incompressible,
            Error::OutputLimit { .. } => ErrorKind::OutputLimit,
            Error::BadCompressedData => ErrorKind::BadCompressedData,
            Error::UnsupportedAsym(_) => ErrorKind::Unsupported,
            Error::BadKey { .. } => ErrorKind::BadKey,
            Error::KeyTooSmall { .. } => ErrorKind::KeyTooSmall,
            Error::KeyTooLarge { .. } => ErrorKind::KeyTooLarge,
            Error::BadSignature => ErrorKind::BadSignature,
            Error::InvalidPoint => ErrorKind::InvalidPoint,
            Error::ZeroSharedSecret => ErrorKind::ZeroSharedSecret,
            Error::PeerValueOutOfRange => ErrorKind::PeerValueOutOfRange,
            Error::BadInputLength { .. } => ErrorKind::BadInputLength,
            Error::ModExpBaseTooLarge => ErrorKind::ModExpBaseTooLarge,
            Error::RandomSourceFailed { .. } => ErrorKind::RandomSourceFailed,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadKeyLength { what, got, allowed } => {
                write!(f, "bad {what} key length {got} bytes (allowed: {allowed:?})")
            }
            Error::WeakKey { why } => write!(f, "weak key: {why}"),
            Error::BadMacKeyLength { got } => write!(f, "bad MAC key length {got} bytes (must be > 0)"),
            Error::BadIvLength { expected, got } => {
                write!(f, "bad IV/nonce length {got} bytes (expected {expected})")
            }
            Error::BadTagLength { got, allowed } => {
                write!(f, "bad tag length {got} bytes (allowed: {allowed})")
            }
            Error::NotBlockMultiple { len, block } => {
                write!(f, "payload length {len} is not a multiple of the {block}-byte block")
            }
            Error::BadRegion { what, start, end, buf_len } => {
                write!(f, "{what} region {start}..{end} lies outside the {buf_len}-byte buffer")
            }
            Error::OutputTooShort { need, got } => {
                write!(f, "output buffer holds {got} bytes, the result needs {need}")
            }
            Error::BadOperation { op, mode } => write!(f, "operation {op} is not valid for a {mode} session"),
            Error::AadNotSupported { mode } => write!(f, "AAD is not authenticated by a {mode} session"),
            Error::EsnNotSupported { mode } => {
                write!(
                    f,
                    "ESN high-order bits are only authenticated by mac and cipher+mac sessions, not {mode}"
                )
            }
            Error::InvalidParams(why) => write!(f, "invalid session parameters: {why}"),
            Error::AuthFailed => f.write_str("authentication failed: tag or MAC mismatch"),
            Error::UnsupportedCipher(a) => write!(f, "no driver supports cipher {a}"),
            Error::UnsupportedDigest(a) => write!(f, "no driver supports digest {a}"),
            Error::UnsupportedMac(a) => write!(f, "no driver supports MAC {a}"),
            Error::UnsupportedCompression(a) => write!(f, "no driver supports compression {a}"),
            Error::NoDriver => f.write_str("no driver is registered that can serve this session"),
            Error::UnknownDriver(n) => write!(f, "no driver named {n:?} is registered"),
            Error::DuplicateDriver(n) => write!(f, "a driver named {n:?} is already registered"),
            Error::DriverGone => f.write_str("the session's driver was unregistered"),
            Error::WouldBlock => {
                f.write_str("queues full: the driver has as many requests in flight as allowed")
            }
            Error::DetachTimeout { in_flight } => {
                write!(f, "unregistered driver still holds {in_flight} requests after the drain timeout")
            }
            Error::DriverFailure(why) => write!(f, "driver failure: {why}"),
            Error::DriverFailureMidway(why) => {
                write!(f, "driver failure part-way through the request (its buffer was wiped): {why}")
            }
            Error::CallbackPanicked => f.write_str("a completion callback panicked"),
            Error::BadPart(why) => write!(f, "bad part of a multi-part message: {why}"),
            Error::NoOutputBuffer { op } => {
                write!(f, "{op} needs an out-of-place output buffer (the result's length differs)")
            }
            Error::Incompressible { len } => {
                write!(f, "compression would not make the {len}-byte input smaller")
            }
            Error::OutputLimit { limit } => {
                write!(f, "decompressed data would exceed the {limit}-byte limit of the output buffer")
            }
            Error::BadCompressedData => f.write_str("compressed data is corrupt or truncated"),
            Error::UnsupportedAsym(a) => write!(f, "no driver supports public-key algorithm {a}"),
            Error::BadKey { why } => write!(f, "bad key: {why}"),
            Error::KeyTooSmall { bits, min } => write!(f, "key of {bits} bits is below the minimum of {min}"),
            Error::KeyTooLarge { bits, max } => write!(f, "key of {bits} bits is above the maximum of {max}"),
            Error::BadSignature => f.write_str("signature verification failed"),
            Error::InvalidPoint => f.write_str("the peer's public value is not a valid point on the curve"),
            Error::ZeroSharedSecret => {
                f.write_str("key agreement gave the all-zero secret (a small-order peer value)")
            }
            Error::PeerValueOutOfRange => f.write_str("the peer's Diffie-Hellman value is outside 2..=p-2"),
            Error::BadInputLength { what, got, expected } => {
                write!(f, "{what} of {got} bytes (expected {expected})")
            }
            Error::ModExpBaseTooLarge => f.write_str("modular exponentiation base is not below the modulus"),
            Error::RandomSourceFailed { why } => write!(f, "random source failed: {why}"),
        }
    }
}

impl std::error::Error for Error {}

/// The counter slot of an [`Error`]. `#[repr(usize)]` so counters are a flat array.
#[non_exhaustive]
#[repr(usize)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    BadKeyLength,
    WeakKey,
    BadMacKeyLength,
    BadIvLength,
    BadTagLength,
    NotBlockMultiple,
    BadRegion,
    OutputTooShort,
    BadOperation,
    AadNotSupported,
    EsnNotSupported,
    InvalidParams,
    AuthFailed,
    Unsupported,
    NoDriver,
    UnknownDriver,
    DuplicateDriver,
    DriverGone,
    WouldBlock,
    DetachTimeout,
    DriverFailure,
    CallbackPanicked,
    BadPart,
    DriverFailureMidway,
    NoOutputBuffer,
    Incompressible,
    OutputLimit,
    BadCompressedData,
    BadKey,
    KeyTooSmall,
    KeyTooLarge,
    BadSignature,
    InvalidPoint,
    ZeroSharedSecret,
    PeerValueOutOfRange,
    BadInputLength,
    ModExpBaseTooLarge,
    RandomSourceFailed,
}

impl ErrorKind {
    /// Number of kinds (length of a counter array).
    pub const COUNT: usize = ErrorKind::RandomSourceFailed as usize + 1;

    /// Every kind, in counter order.
    pub const ALL: [ErrorKind; ErrorKind::COUNT] = [
        ErrorKind::BadKeyLength,
        ErrorKind::WeakKey,
        ErrorKind::BadMacKeyLength,
        ErrorKind::BadIvLength,
        ErrorKind::BadTagLength,
        ErrorKind::NotBlockMultiple,
        ErrorKind::BadRegion,
        ErrorKind::OutputTooShort,
        ErrorKind::BadOperation,
        ErrorKind::AadNotSupported,
        ErrorKind::EsnNotSupported,
        ErrorKind::InvalidParams,
        ErrorKind::AuthFailed,
        ErrorKind::Unsupported,
        ErrorKind::NoDriver,
        ErrorKind::UnknownDriver,
        ErrorKind::DuplicateDriver,
        ErrorKind::DriverGone,
        ErrorKind::WouldBlock,
        ErrorKind::DetachTimeout,
        ErrorKind::DriverFailure,
        ErrorKind::CallbackPanicked,
        ErrorKind::BadPart,
        ErrorKind::DriverFailureMidway,
        ErrorKind::NoOutputBuffer,
        ErrorKind::Incompressible,
        ErrorKind::OutputLimit,
        ErrorKind::BadCompressedData,
        ErrorKind::BadKey,
        ErrorKind::KeyTooSmall,
        ErrorKind::KeyTooLarge,
        ErrorKind::BadSignature,
        ErrorKind::InvalidPoint,
        ErrorKind::ZeroSharedSecret,
        ErrorKind::PeerValueOutOfRange,
        ErrorKind::BadInputLength,
        ErrorKind::ModExpBaseTooLarge,
        ErrorKind::RandomSourceFailed,
    ];

    /// A stable snake_case name, for statistics output.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::BadKeyLength => "bad_key_length",
            ErrorKind::WeakKey => "weak_key",
            ErrorKind::BadMacKeyLength => "bad_mac_key_length",
            ErrorKind::BadIvLength => "bad_iv_length",
            ErrorKind::BadTagLength => "bad_tag_length",
            ErrorKind::NotBlockMultiple => "not_block_multiple",
            ErrorKind::BadRegion => "bad_region",
            ErrorKind::OutputTooShort => "output_too_short",
            ErrorKind::BadOperation => "bad_operation",
            ErrorKind::AadNotSupported => "aad_not_supported",
            ErrorKind::EsnNotSupported => "esn_not_supported",
            ErrorKind::InvalidParams => "invalid_params",
            ErrorKind::AuthFailed => "auth_failed",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::NoDriver => "no_driver",
            ErrorKind::UnknownDriver => "unknown_driver",
            ErrorKind::DuplicateDriver => "duplicate_driver",
            ErrorKind::DriverGone => "driver_gone",
            ErrorKind::WouldBlock => "would_block",
            ErrorKind::DetachTimeout => "detach_timeout",
            ErrorKind::DriverFailure => "driver_failure",
            ErrorKind::CallbackPanicked => "callback_panicked",
            ErrorKind::BadPart => "bad_part",
            ErrorKind::DriverFailureMidway => "driver_failure_midway",
            ErrorKind::NoOutputBuffer => "no_output_buffer",
            ErrorKind::Incompressible => "incompressible",
            ErrorKind::OutputLimit => "output_limit",
            ErrorKind::BadCompressedData => "bad_compressed_data",
            ErrorKind::BadKey => "bad_key",
            ErrorKind::KeyTooSmall => "key_too_small",
            ErrorKind::KeyTooLarge => "key_too_large",
            ErrorKind::BadSignature => "bad_signature",
            ErrorKind::InvalidPoint => "invalid_point",
            ErrorKind::ZeroSharedSecret => "zero_shared_secret",
            ErrorKind::PeerValueOutOfRange => "peer_value_out_of_range",
            ErrorKind::BadInputLength => "bad_input_length",
            ErrorKind::ModExpBaseTooLarge => "modexp_base_too_large",
            ErrorKind::RandomSourceFailed => "random_source_failed",
        }
    }
}

/// One atomic counter per [`ErrorKind`]. Errors are rare, so a relaxed atomic add is cheap
/// enough; the success path never touches these.
pub struct ErrorCounters([AtomicU64; ErrorKind::COUNT]);

impl Default for ErrorCounters {
    fn default() -> ErrorCounters {
        ErrorCounters(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl ErrorCounters {
    pub fn record(&self, kind: ErrorKind) {
        self.0[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A consistent-enough copy for reading (each counter is read once).
    pub fn snapshot(&self) -> ErrorCounts {
        let mut out = ErrorCounts::default();
        for (o, c) in out.0.iter_mut().zip(&self.0) {
            *o = c.load(Ordering::Relaxed);
        }
        out
    }
}

/// A snapshot of error counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorCounts([u64; ErrorKind::COUNT]);

impl Default for ErrorCounts {
    fn default() -> ErrorCounts {
        ErrorCounts([0; ErrorKind::COUNT])
    }
}

impl ErrorCounts {
    pub fn get(&self, kind: ErrorKind) -> u64 {
        self.0[kind as usize]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The non-zero counters, by name.
    pub fn nonzero(&self) -> impl Iterator<Item = (ErrorKind, u64)> + '_ {
        ErrorKind::ALL.iter().map(|k| (*k, self.get(*k))).filter(|(_, n)| *n > 0)
    }

    pub(crate) fn add(&mut self, other: &ErrorCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += *b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_dense_and_named_uniquely() {
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i);
        }
        let mut names: Vec<_> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ErrorKind::COUNT);
    }

    #[test]
    fn counters_count_each_kind_separately() {
        let c = ErrorCounters::default();
        c.record(ErrorKind::AuthFailed);
        c.record(ErrorKind::AuthFailed);
        c.record(ErrorKind::WouldBlock);
        let s = c.snapshot();
        assert_eq!(s.get(ErrorKind::AuthFailed), 2);
        assert_eq!(s.get(ErrorKind::WouldBlock), 1);
        assert_eq!(s.get(ErrorKind::BadIvLength), 0);
        assert_eq!(s.total(), 3);
    }
}
