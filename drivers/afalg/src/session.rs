//! A session on the kernel: its keyed transform, the operation sockets its requests reuse,
//! and the processing function (chosen once, by mode).
//!
//! ```text
//!  new: bind ─► set key (authenc: crate::names::authenc_key) ─► set authsize ─► accept one
//!  run: take an op socket (free list; accept if empty) ─► request through it (crate::socket)
//!       ─► give it back; on an error other than a bad tag, close it instead (it may hold
//!       half a request)
//! ```
//!
//! The free list is a `Mutex<Vec<OpSocket>>`: one uncontended lock per request, against the
//! two or three system calls the request makes anyway; a session used by N threads at once
//! holds at most N sockets.

use std::sync::{Mutex, OnceLock};

use ocf::{Error, Mode, Op, Request, SessionParams, Views, MAX_TAG_LEN};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use crate::errors::{Cause, Fault, KernelErrors};
use crate::names::{self, SockType};
use crate::socket::{AeadRequest, OpSocket, Transform};

/// What a session's requests do.
enum Work {
    Skcipher,
    Aead,
    /// Encrypt-then-MAC through `authenc`; ESN requests through `authencesn`, set up on
    /// the first (its key kept until then, zeroized on drop).
    AuthEnc {
        esn_name: String,
        key: Zeroizing<Vec<u8>>,
        esn: OnceLock<Result<Keyed, Cause>>,
    },
    /// A digest or HMAC with this full output length.
    Hash {
        out_len: usize,
    },
}

/// A transform and its free operation sockets.
pub(crate) struct Keyed {
    tfm: Transform,
    free: Mutex<Vec<OpSocket>>,
}

impl Keyed {
    fn new(tfm: Transform) -> Result<Keyed, Cause> {
        // One socket now: a transform the kernel cannot accept on fails at setup.
        let first = tfm.accept().map_err(|_| Cause::Accept)?;
        Ok(Keyed { tfm, free: Mutex::new(vec![first]) })
    }

    /// Runs `f` on a free operation socket (accepting one if none is free), then keeps the
    /// socket unless `f` failed with anything but a bad tag. A failure says whether the
    /// kernel had begun writing the request's pages.
    fn with_socket(&self, f: impl FnOnce(&mut OpSocket) -> Result<(), Cause>) -> Result<(), Fault> {
        let taken = self.free.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut sock = match taken {
            Some(s) => s,
            None => self.tfm.accept().map_err(|_| Cause::Accept)?,
        };
        sock.begin();
        let result = f(&mut sock);
        let midway = sock.wrote();
        if matches!(result, Ok(()) | Err(Cause::BadTag)) {
            self.free.lock().unwrap_or_else(|p| p.into_inner()).push(sock);
        }
        result.map_err(|cause| Fault { cause, midway })
    }
}

pub(crate) struct SessionCore {
    work: Work,
    keyed: Keyed,
    tag_len: usize,
    /// Payloads of at least this many bytes are spliced (see `crate::socket`).
    zero_copy_min: usize,
}

fn bind_keyed(
    kind: SockType,
    name: &str,
    key: Option<&[u8]>,
    authsize: Option<usize>,
) -> Result<Keyed, Cause> {
    let tfm = Transform::bind(kind, name).map_err(|_| Cause::Setup)?;
    if let Some(k) = key {
        tfm.set_key(k).map_err(|_| Cause::Setup)?;
    }
    if let Some(n) = authsize {
        tfm.set_authsize(n).map_err(|_| Cause::Setup)?;
    }
    Keyed::new(tfm)
}

impl SessionCore {
    pub(crate) fn new(p: &SessionParams, zero_copy_min: usize) -> Result<SessionCore, Cause> {
        let alg = names::kernel_alg(p).ok_or(Cause::Setup)?;
        let tag_len = p.tag_len();
        let (work, keyed) = match &p.mode {
            Mode::Cipher { key, .. } => {
                (Work::Skcipher, bind_keyed(alg.kind, &alg.name, Some(key.as_bytes()), None)?)
            }
            Mode::Aead { key, .. } => {
                (Work::Aead, bind_keyed(alg.kind, &alg.name, Some(key.as_bytes()), Some(tag_len))?)
            }
            Mode::CipherThenMac { cipher, cipher_key, mac, mac_key, .. } => {
                let key = names::authenc_key(cipher_key.as_bytes(), mac_key.as_bytes());
                let keyed = bind_keyed(alg.kind, &alg.name, Some(&key), Some(tag_len))?;
                let esn_name = names::authenc_name(*cipher, *mac, true).ok_or(Cause::Setup)?;
                (Work::AuthEnc { esn_name, key, esn: OnceLock::new() }, keyed)
            }
            Mode::Digest { alg: d } => {
                (Work::Hash { out_len: d.output_len() }, bind_keyed(alg.kind, &alg.name, None, None)?)
            }
            Mode::Mac { alg: m, key, .. } => (
                Work::Hash { out_len: m.output_len() },
                bind_keyed(alg.kind, &alg.name, Some(key.as_bytes()), None)?,
            ),
            _ => return Err(Cause::Setup),
        };
        Ok(SessionCore { work, keyed, tag_len, zero_copy_min })
    }

    /// Does one request; the error is counted in `errors`.
    pub(crate) fn run(&self, req: &mut Request, errors: &KernelErrors) -> Result<(), Error> {
        let op = req.op;
        req.with_views(|v| self.run_views(op, v)).map_err(|fault| errors.record(fault))
    }

    fn run_views(&self, op: Op, v: Views<'_>) -> Result<(), Fault> {
        let zc = v.payload.len() >= self.zero_copy_min;
        let encrypt = op == Op::Encrypt;
        match &self.work {
            Work::Skcipher if v.payload.is_empty() => Ok(()),
            Work::Skcipher => {
                let result = self.keyed.with_socket(|s| s.skcipher(encrypt, v.iv, &mut *v.payload, zc));
                wipe_if_midway(v.payload, result)
            }
            Work::Aead => self.aead(&self.keyed, encrypt, v, false),
            Work::AuthEnc { esn_name, key, esn } if !v.esn.is_empty() => {
                let keyed = esn
                    .get_or_init(|| bind_keyed(SockType::Aead, esn_name, Some(key), Some(self.tag_len)))
                    .as_ref()
                    .map_err(|c| Fault::from(*c))?;
                self.aead(keyed, encrypt, v, true)
            }
            Work::AuthEnc { .. } => self.aead(&self.keyed, encrypt, v, false),
            Work::Hash { out_len } => {
                let mut mine = [0u8; MAX_TAG_LEN];
                let mine = &mut mine[..*out_len];
                self.keyed.with_socket(|s| s.hash(&[v.payload, v.esn], mine, zc))?;
                let mine = &mine[..v.tag.len()];
                match op {
                    Op::VerifyDigest if bool::from(mine.ct_eq(v.tag)) => Ok(()),
                    Op::VerifyDigest => Err(Cause::BadTag.into()),
                    _ => {
                        v.tag.copy_from_slice(mine);
                        Ok(())
                    }
                }
            }
        }
    }

    fn aead(&self, keyed: &Keyed, encrypt: bool, v: Views<'_>, esn: bool) -> Result<(), Fault> {
        let zero_copy = v.payload.len() >= self.zero_copy_min;
        let esn_hi = if esn { v.esn } else { &[] };
        let result = keyed.with_socket(|s| {
            s.aead(AeadRequest {
                encrypt,
                iv: v.iv,
                aad: v.aad,
                esn_hi,
                data: &mut *v.payload,
                tag: v.tag,
                zero_copy,
            })
        });
        // A decryption writes plaintext into the caller's pages before the kernel compares
        // the tag: a bad tag (a receive that had begun) releases none of it.
        wipe_if_midway(v.payload, result)
    }
}

/// A failure after the kernel began writing the request's pages leaves them neither input
/// nor output: wipe them (`crate::errors::Fault`).
fn wipe_if_midway(payload: &mut [u8], result: Result<(), Fault>) -> Result<(), Fault> {
    if let Err(Fault { midway: true, .. }) = result {
        payload.fill(0);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_failure_after_the_kernel_began_writing_wipes_the_payload() {
        let mut p = [7u8; 16];
        let before = Fault { cause: Cause::Invalid, midway: false };
        assert_eq!(wipe_if_midway(&mut p, Err(before)), Err(before));
        assert_eq!(p, [7; 16], "redoable elsewhere: left as it came");
        assert_eq!(wipe_if_midway(&mut p, Ok(())), Ok(()));
        assert_eq!(p, [7; 16]);
        let after = Fault { cause: Cause::NoMemory, midway: true };
        assert_eq!(wipe_if_midway(&mut p, Err(after)), Err(after));
        assert_eq!(p, [0; 16]);
        let errors = KernelErrors::default();
        assert!(matches!(errors.record(after), Error::DriverFailureMidway(_)));
        assert!(matches!(errors.record(before), Error::DriverFailure(_)));
        assert_eq!(errors.record(Fault { cause: Cause::BadTag, midway: true }), Error::AuthFailed);
    }
}
