//! The kernel side: transform sockets (bound to an algorithm, keyed once) and operation
//! sockets (accepted from a transform, one request at a time, reused), and how a request's
//! bytes travel through them.
//!
//! ```text
//!  socket(AF_ALG) ─bind("aead","gcm(aes)")─► transform ─ALG_SET_KEY, ALG_SET_AEAD_AUTHSIZE
//!                                               │ accept (once per operation socket, kept)
//!                                               ▼
//!   copy:      sendmsg(cmsg op+IV+assoclen, AAD ‖ data ‖ tag) ──► op socket ──► recvmsg(AAD' ‖ data ‖ tag)
//!   zero-copy: sendmsg(cmsg, MSG_MORE) + vmsplice(user pages → pipe) + splice(pipe → op socket)
//! ```
//!
//! The receive side is zero-copy either way: the kernel maps the caller's pages as its
//! output (`af_alg_get_rsgl`). Only the send side copies, and the zero-copy variant trades
//! that copy for two system calls more per request (vmsplice, splice): worth it from the
//! size measured in the kernel machine (`ZERO_COPY_MIN` in the crate root).
//!
//! Every send and receive is non-blocking (`MSG_DONTWAIT`): a request the kernel cannot take
//! whole or that leaves it waiting for data fails with a cause (`TooLarge`, `Incomplete`)
//! instead of hanging its thread. An operation socket that failed for any reason but a bad
//! tag may hold half a request: the caller drops it (see `crate::session`).

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{fcntl, splice, vmsplice, FcntlArg, OFlag, SpliceFFlags};
use nix::libc;
use nix::sys::socket::{
    accept4, bind, recv, recvmsg, sendmsg, setsockopt, socket, sockopt, AddressFamily, AlgAddr,
    ControlMessage, MsgFlags, SockFlag, SockType as NixSockType,
};

use crate::errors::Cause;
use crate::names::{self, SockType};

/// Skcipher requests go to the kernel in pieces of at most this many bytes (the IV chains
/// from one to the next, `MSG_MORE`): a socket's buffer holds about 200 KiB.
pub const CHUNK: usize = 64 * 1024;

/// The largest AEAD or authenc message (AAD, payload and tag): AF_ALG needs an AEAD's whole
/// input in the socket's buffer (`sk_sndbuf`, 212,992 bytes by default) before it starts.
pub const AEAD_MAX: usize = 160 * 1024;

/// The pipe that zero-copy sends go through (its default is 64 KiB: 16 pages).
const PIPE_SIZE: i32 = 256 * 1024;

/// A new AF_ALG socket: the test of whether the kernel has AF_ALG at all.
pub fn af_alg_socket() -> nix::Result<OwnedFd> {
    socket(AddressFamily::Alg, NixSockType::SeqPacket, SockFlag::SOCK_CLOEXEC, None)
}

/// A transform: an AF_ALG socket bound to one algorithm, keyed once per session.
pub struct Transform {
    fd: OwnedFd,
}

impl Transform {
    /// Binds `name` (the kernel instantiates templates such as `gcm(aes)` here).
    pub fn bind(kind: SockType, name: &str) -> nix::Result<Transform> {
        if name.len() >= 64 {
            return Err(Errno::ENAMETOOLONG);
        }
        let fd = af_alg_socket()?;
        bind(fd.as_raw_fd(), &AlgAddr::new(kind.as_str(), name))?;
        Ok(Transform { fd })
    }

    pub fn set_key(&self, key: &[u8]) -> nix::Result<()> {
        setsockopt(&self.fd, sockopt::AlgSetKey::default(), &key)
    }

    pub fn set_authsize(&self, len: usize) -> nix::Result<()> {
        setsockopt(&self.fd, sockopt::AlgSetAeadAuthSize, &len)
    }

    /// A new operation socket on this transform (it shares the transform's key).
    #[allow(unsafe_code)]
    pub fn accept(&self) -> nix::Result<OpSocket> {
        let raw = accept4(self.fd.as_raw_fd(), SockFlag::SOCK_CLOEXEC)?;
        // SAFETY: `accept4` just returned `raw`, a new descriptor that nothing else owns;
        // the `OwnedFd` becomes its only owner and closes it once. (nix 0.31's `accept4`
        // returns a bare `RawFd`; this is the one `unsafe` of the crate. The tests in
        // `tests/kernel.rs` accept, use and drop thousands of them.)
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(OpSocket { fd, pipe: None, scratch: Vec::new(), assoc: Vec::new(), wrote: false })
    }
}

/// An operation socket, with what its requests reuse: the pipe of zero-copy sends, a
/// scratch buffer for the AEAD output's AAD copy, the ESN-ordered AAD.
pub struct OpSocket {
    fd: OwnedFd,
    pipe: Option<(OwnedFd, OwnedFd)>,
    scratch: Vec<u8>,
    /// `authencesn`'s associated data (see `crate::names::esn_assoc`).
    assoc: Vec<u8>,
    /// The current request's receive has begun: the kernel may have written the caller's
    /// pages (see `crate::errors::Fault`).
    wrote: bool,
}

/// One AEAD request's views: `aad` authenticated, `data` encrypted or decrypted in place,
/// `tag` written (encrypt) or checked (decrypt). `esn_hi` non-empty: the transform is
/// `authencesn`, and the AAD goes to it reordered (`crate::names::esn_assoc`).
pub struct AeadRequest<'a> {
    pub encrypt: bool,
    pub iv: &'a [u8],
    pub aad: &'a [u8],
    pub esn_hi: &'a [u8],
    pub data: &'a mut [u8],
    pub tag: &'a mut [u8],
    pub zero_copy: bool,
}

/// `ALG_OP_*` for `ALG_SET_OP`.
fn op_value(encrypt: bool) -> &'static libc::c_int {
    const ENC: libc::c_int = libc::ALG_OP_ENCRYPT;
    const DEC: libc::c_int = libc::ALG_OP_DECRYPT;
    if encrypt {
        &ENC
    } else {
        &DEC
    }
}

/// The bytes of `parts` (at most three) from `skip` on, as I/O slices in `out`; returns
/// how many of `out` it filled.
fn from_offset<'a>(parts: &[&'a [u8]], mut skip: usize, out: &mut [IoSlice<'a>; 3]) -> usize {
    let mut n = 0;
    for p in parts.iter().take(3) {
        if skip >= p.len() {
            skip -= p.len();
            continue;
        }
        out[n] = IoSlice::new(&p[skip..]);
        n += 1;
        skip = 0;
    }
    n
}

fn send_err(e: Errno) -> Cause {
    Cause::of(e, true)
}

fn recv_err(e: Errno) -> Cause {
    Cause::of(e, false)
}

fn exactly(got: usize, want: usize) -> Result<(), Cause> {
    if got == want {
        Ok(())
    } else {
        Err(Cause::Short)
    }
}

impl OpSocket {
    /// Whether the last request's receive had begun (the kernel may have written the
    /// caller's pages); reset by [`OpSocket::begin`].
    pub fn wrote(&self) -> bool {
        self.wrote
    }

    /// Marks the start of a request.
    pub fn begin(&mut self) {
        self.wrote = false;
    }

    /// Sends `cmsgs` and `parts` whole; with `more`, the request continues. (nix's `sendmsg`
    /// allocates its control-message buffer, about 60 bytes, per call: not measured apart,
    /// but a small allocation is tens of nanoseconds and a request through AF_ALG cost
    /// 40-100 µs in the kernel machines, measured.)
    fn send(&self, parts: &[&[u8]], cmsgs: &[ControlMessage<'_>], more: bool) -> Result<(), Cause> {
        let iov: [IoSlice<'_>; 3] =
            std::array::from_fn(|i| IoSlice::new(parts.get(i).copied().unwrap_or(&[])));
        let want: usize = parts.iter().map(|p| p.len()).sum();
        let mut flags = MsgFlags::MSG_DONTWAIT;
        if more {
            // nix names no MSG_MORE; the kernel's bit, as `send(2)` documents it.
            flags |= MsgFlags::from_bits_retain(libc::MSG_MORE);
        }
        let n =
            sendmsg::<()>(self.fd.as_raw_fd(), &iov[..parts.len()], cmsgs, flags, None).map_err(send_err)?;
        exactly(n, want)
    }

    /// Sends `parts` by reference to the caller's pages: vmsplice into the pipe, splice from
    /// the pipe into the socket, as many rounds as the pipe needs. `more`: the request
    /// continues after these bytes.
    fn splice_in(&mut self, parts: &[&[u8]], more: bool) -> Result<(), Cause> {
        if self.pipe.is_none() {
            let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(send_err)?;
            // A bigger pipe takes a 64 KiB message in one round; the default works too.
            let _ = fcntl(&w, FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
            self.pipe = Some((r, w));
        }
        let Some((r, w)) = &self.pipe else { return Err(Cause::Other) };
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut done = 0;
        let mut iov = [IoSlice::new(&[]), IoSlice::new(&[]), IoSlice::new(&[])];
        while done < total {
            let used = from_offset(parts, done, &mut iov);
            let n = vmsplice(w, &iov[..used], SpliceFFlags::empty()).map_err(send_err)?;
            let mut left = n;
            while left > 0 {
                let mut flags = SpliceFFlags::empty();
                if more || done + n < total {
                    flags |= SpliceFFlags::SPLICE_F_MORE;
                }
                let m = splice(r, None, &self.fd, None, left, flags).map_err(send_err)?;
                if m == 0 {
                    return Err(Cause::Short);
                }
                left -= m;
            }
            done += n;
        }
        Ok(())
    }

    /// Encrypts or decrypts `data` in place (skcipher), in pieces of [`CHUNK`] bytes.
    pub fn skcipher(
        &mut self,
        encrypt: bool,
        iv: &[u8],
        data: &mut [u8],
        zero_copy: bool,
    ) -> Result<(), Cause> {
        let op = ControlMessage::AlgSetOp(op_value(encrypt));
        let with_iv = [op, ControlMessage::AlgSetIv(iv)];
        let cmsgs = if iv.is_empty() { &with_iv[..1] } else { &with_iv[..] };
        let chunks = data.len().div_ceil(CHUNK);
        for (i, chunk) in data.chunks_mut(CHUNK).enumerate() {
            let more = i + 1 < chunks;
            let first = if i == 0 { cmsgs } else { &[] };
            if zero_copy {
                if i == 0 {
                    self.send(&[], first, true)?;
                }
                self.splice_in(&[chunk], more)?;
            } else {
                self.send(&[chunk], first, more)?;
            }
            self.wrote = true;
            let n = recv(self.fd.as_raw_fd(), chunk, MsgFlags::MSG_DONTWAIT).map_err(recv_err)?;
            exactly(n, chunk.len())?;
        }
        Ok(())
    }

    /// One AEAD (or authenc/authencesn) request (see [`AeadRequest`]).
    pub fn aead(&mut self, r: AeadRequest<'_>) -> Result<(), Cause> {
        if r.esn_hi.is_empty() {
            return self.aead_with(r.encrypt, r.iv, r.aad, r.data, r.tag, r.zero_copy);
        }
        let mut assoc = std::mem::take(&mut self.assoc);
        let result = match names::esn_assoc(r.aad, r.esn_hi, &mut assoc) {
            Some(()) => self.aead_with(r.encrypt, r.iv, &assoc, r.data, r.tag, r.zero_copy),
            None => Err(Cause::EsnAad),
        };
        self.assoc = assoc;
        result
    }

    fn aead_with(
        &mut self,
        encrypt: bool,
        iv: &[u8],
        assoc: &[u8],
        data: &mut [u8],
        tag: &mut [u8],
        zero_copy: bool,
    ) -> Result<(), Cause> {
        if assoc.len() + data.len() + tag.len() > AEAD_MAX {
            return Err(Cause::TooLarge);
        }
        let assoclen = assoc.len() as u32;
        let op = ControlMessage::AlgSetOp(op_value(encrypt));
        let len = ControlMessage::AlgSetAeadAssoclen(&assoclen);
        let with_iv = [op, len, ControlMessage::AlgSetIv(iv)];
        let cmsgs = if iv.is_empty() { &with_iv[..2] } else { &with_iv[..] };
        {
            let tag_in: &[u8] = if encrypt { &[] } else { tag };
            let parts = [assoc, &*data, tag_in];
            if zero_copy {
                self.send(&[], cmsgs, true)?;
                self.splice_in(&parts, false)?;
            } else {
                self.send(&parts, cmsgs, false)?;
            }
        }
        // Out: AAD (a copy, into scratch) ‖ result ‖ tag (encrypt only). A decryption with
        // neither AAD nor payload has no output, but algif_aead's recvmsg loops only while
        // the caller's buffer has room: with an empty one it returns 0 without checking the
        // tag (a forgery accepted) and leaves the request in the socket. One byte of room
        // more makes it run the check; it writes nothing there.
        let want = assoc.len() + data.len() + if encrypt { tag.len() } else { 0 };
        self.scratch.resize(assoc.len() + usize::from(want == 0), 0);
        let tag_out: &mut [u8] = if encrypt { tag } else { &mut [] };
        self.wrote = true;
        let mut iov = [IoSliceMut::new(&mut self.scratch), IoSliceMut::new(data), IoSliceMut::new(tag_out)];
        let msg =
            recvmsg::<()>(self.fd.as_raw_fd(), &mut iov, None, MsgFlags::MSG_DONTWAIT).map_err(recv_err)?;
        exactly(msg.bytes, want)
    }

    /// A digest or MAC over `parts` (the payload, then the ESN bits if any) into `out`
    /// (the algorithm's full output length); `zero_copy` splices the payload.
    pub fn hash(&mut self, parts: &[&[u8]], out: &mut [u8], zero_copy: bool) -> Result<(), Cause> {
        match (zero_copy, parts) {
            (true, [payload, rest @ ..]) => {
                let more = rest.iter().any(|p| !p.is_empty());
                self.splice_in(&[payload], more)?;
                if more {
                    self.send(rest, &[], false)?;
                }
            }
            _ => self.send(parts, &[], false)?,
        }
        let n = recv(self.fd.as_raw_fd(), out, MsgFlags::MSG_DONTWAIT).map_err(recv_err)?;
        exactly(n, out.len())
    }
}

impl AsFd for OpSocket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
