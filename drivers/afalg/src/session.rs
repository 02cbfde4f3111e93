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

use crate::errors::{Cause, KernelErrors};
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
    /// socket unless `f` failed with anything but a bad tag.
    fn with_socket(&self, f: impl FnOnce(&mut OpSocket) -> Result<(), Cause>) -> Result<(), Cause> {
        let taken = self.free.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut sock = match taken {
            Some(s) => s,
            None => self.tfm.accept().map_err(|_| Cause::Accept)?,
        };
        let result = f(&mut sock);
        if matches!(result, Ok(()) | Err(Cause::BadTag)) {
            self.free.lock().unwrap_or_else(|p| p.into_inner()).push(sock);
        }
        result
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
        req.with_views(|v| self.run_views(op, v)).map_err(|cause| errors.record(cause))
    }

    fn run_views(&self, op: Op, v: Views<'_>) -> Result<(), Cause> {
        let zc = v.payload.len() >= self.zero_copy_min;
        let encrypt = op == Op::Encrypt;
        match &self.work {
            Work::Skcipher if v.payload.is_empty() => Ok(()),
            Work::Skcipher => self.keyed.with_socket(|s| s.skcipher(encrypt, v.iv, v.payload, zc)),
            Work::Aead => self.aead(&self.keyed, encrypt, v, false),
            Work::AuthEnc { esn_name, key, esn } if !v.esn.is_empty() => {
                let keyed = esn
                    .get_or_init(|| bind_keyed(SockType::Aead, esn_name, Some(key), Some(self.tag_len)))
                    .as_ref()
                    .map_err(|c| *c)?;
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
                    Op::VerifyDigest => Err(Cause::BadTag),
                    _ => {
                        v.tag.copy_from_slice(mine);
                        Ok(())
                    }
                }
            }
        }
    }

    fn aead(&self, keyed: &Keyed, encrypt: bool, v: Views<'_>, esn: bool) -> Result<(), Cause> {
        let zero_copy = v.payload.len() >= self.zero_copy_min;
        let esn_hi = if esn { v.esn } else { &[] };
        let result = keyed.with_socket(|s| {
            s.aead(AeadRequest {
                encrypt,
                iv: v.iv,
                aad: v.aad,
                esn_hi,
                data: v.payload,
                tag: v.tag,
                zero_copy,
            })
        });
        if result.is_err() && !encrypt {
            // The kernel writes plaintext into the caller's pages before it compares the
            // tag: release none of it.
            v.payload.fill(0);
        }
        result
    }
}
