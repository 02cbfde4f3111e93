//! The key manager's side of the relay socket: [`Client`], what `iked` uses to receive the
//! IKE datagrams ipsecd takes in and to send its own.

use std::io::{Error, ErrorKind, IoSlice, Result};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::Path;
use std::time::Duration;

use ipsec_wire::ike_relay::{self, Datagram, Record, MAX_RECORD};
use nix::libc;
use nix::sys::socket::{recv, MsgFlags};
use socket2::{Domain, SockAddr, Socket, Type};

/// How long [`Client::connect`] waits for ipsecd's first record (attached or refused).
pub const GREETING_WAIT: Duration = Duration::from_secs(5);

/// A key manager's connection to ipsecd's relay socket. Blocking by default; for a poll
/// loop, [`Client::set_nonblocking`] and the descriptor ([`AsRawFd`]), whose readiness is
/// one whole record.
pub struct Client {
    sock: Socket,
    buf: Vec<u8>,
}

impl Client {
    /// Connects to the relay socket at `path` and waits (up to [`GREETING_WAIT`]) for
    /// ipsecd to attach it. Errors: the socket's (`NotFound`, `PermissionDenied`: it is
    /// root's), `ConnectionRefused` with ipsecd's reason where another key manager is
    /// attached, `InvalidData` for a first record that is not a status.
    pub fn connect(path: &Path) -> Result<Client> {
        let sock = Socket::new(Domain::UNIX, Type::SEQPACKET, None)?;
        sock.connect(&SockAddr::unix(path)?)?;
        let mut c = Client { sock, buf: vec![0u8; MAX_RECORD + 1] };
        c.sock.set_read_timeout(Some(GREETING_WAIT))?;
        let first = c.record()?;
        c.sock.set_read_timeout(None)?;
        match first {
            Record::Attached => Ok(c),
            Record::Refused(why) => {
                Err(Error::new(ErrorKind::ConnectionRefused, format!("ipsecd refused: {why}")))
            }
            Record::Datagram(_) => {
                Err(Error::new(ErrorKind::InvalidData, "a datagram before ipsecd's greeting"))
            }
        }
    }

    /// The next IKE datagram ipsecd received. Errors: `UnexpectedEof` when ipsecd closed the
    /// connection, `InvalidData` for a record that does not decode (the error names why;
    /// the connection is still usable), `WouldBlock` when non-blocking and nothing waits.
    pub fn recv(&mut self) -> Result<Datagram> {
        match self.record()? {
            Record::Datagram(d) => Ok(d),
            other => Err(Error::new(
                ErrorKind::InvalidData,
                format!("a status record after the greeting: {other:?}"),
            )),
        }
    }

    fn record(&mut self) -> Result<Record> {
        let n = loop {
            match recv(self.sock.as_raw_fd(), &mut self.buf, MsgFlags::MSG_TRUNC) {
                Ok(0) => return Err(Error::new(ErrorKind::UnexpectedEof, "ipsecd closed the relay socket")),
                Ok(n) => break n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(Error::from(e)),
            }
        };
        let r = if n > self.buf.len() {
            Err(ike_relay::Error::TooLong(n))
        } else {
            ike_relay::decode(&self.buf[..n])
        };
        r.map_err(|e| Error::new(ErrorKind::InvalidData, e))
    }

    /// Sends `d` for ipsecd to send from `d.local` (its port: the IKE port, or the NAT-T
    /// port with `d.nat_t`) to `d.remote`. Errors: `InvalidInput` for a datagram the format
    /// cannot carry (the error names why), the socket's otherwise (`BrokenPipe`: ipsecd
    /// went away).
    pub fn send(&self, d: &Datagram) -> Result<()> {
        let header = ike_relay::header(d).map_err(|e| Error::new(ErrorKind::InvalidInput, e))?;
        self.sock
            .send_vectored_with_flags(&[IoSlice::new(&header), IoSlice::new(&d.bytes)], libc::MSG_NOSIGNAL)?;
        Ok(())
    }

    /// Non-blocking reads and sends (for a poll loop on the descriptor).
    pub fn set_nonblocking(&self, on: bool) -> Result<()> {
        self.sock.set_nonblocking(on)
    }

    /// How long a blocking [`Client::recv`] waits (`None`: for ever); past it, `WouldBlock`.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> Result<()> {
        self.sock.set_read_timeout(t)
    }
}

impl AsRawFd for Client {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl AsFd for Client {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}
