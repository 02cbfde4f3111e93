//! Serving connections so that no client holds up another: the control socket
//! ([`crate::ctl_server`]) and the metrics endpoint ([`crate::daemon`]) both use it.
//!
//! ```text
//!  accept thread ── more than `bound` open? ── told `busy()` at once, on the accept thread
//!     │ a thread per connection (a Slot while it lives)
//!     ▼
//!  read_by(deadline, max)  ── the whole request by one deadline, however it trickles in
//!  … the server's work …
//!  write_by(deadline)      ── the whole reply by one deadline, however slowly it is taken
//! ```
//!
//! Deadlines are for the whole request or reply, not for each read or write: a client that
//! sends (or takes) one byte just inside every per-read timeout would otherwise hold its
//! thread for ever. Each refusal is counted under its cause ([`Refused`], [`Counters`]).

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zeroize::{Zeroize, Zeroizing};

/// A stream with timeouts: a Unix or a TCP connection.
pub trait Conn: Read + Write + Send + 'static {
    fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()>;
    fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()>;
    fn set_nonblocking(&self, on: bool) -> io::Result<()>;
}

macro_rules! conn {
    ($t:ty) => {
        impl Conn for $t {
            fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
                <$t>::set_read_timeout(self, d)
            }
            fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
                <$t>::set_write_timeout(self, d)
            }
            fn set_nonblocking(&self, on: bool) -> io::Result<()> {
                <$t>::set_nonblocking(self, on)
            }
        }
    };
}
conn!(UnixStream);
conn!(TcpStream);

/// Why a connection got no answer, one counter each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// A request larger than the server reads.
    TooLarge,
    /// The request did not arrive whole by the deadline.
    RequestDeadline,
    /// The client did not take its reply by the deadline.
    ReplyDeadline,
    /// Not a request of the protocol (unknown verb, not UTF-8, a body for stats).
    Malformed,
    /// The bound of open connections was reached.
    Busy,
    /// The connection failed, or no thread could be had for it.
    Io,
    /// The client was gone by the time its request ended (killed while sending: what came
    /// may be a prefix), so it was not carried out.
    Abandoned,
}

impl Refused {
    pub const ALL: [Refused; 7] = [
        Refused::TooLarge,
        Refused::RequestDeadline,
        Refused::ReplyDeadline,
        Refused::Malformed,
        Refused::Busy,
        Refused::Io,
        Refused::Abandoned,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Refused::TooLarge => "too_large",
            Refused::RequestDeadline => "request_deadline",
            Refused::ReplyDeadline => "reply_deadline",
            Refused::Malformed => "malformed",
            Refused::Busy => "busy",
            Refused::Io => "io",
            Refused::Abandoned => "abandoned",
        }
    }
}

/// A server's counters: requests answered, and refusals by cause.
#[derive(Debug, Default)]
pub struct Counters {
    answered: AtomicU64,
    refused: [AtomicU64; Refused::ALL.len()],
}

impl Counters {
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    pub fn refused(&self, why: Refused) -> u64 {
        self.refused[why as usize].load(Ordering::Relaxed)
    }

    pub fn count_answered(&self) {
        self.answered.fetch_add(1, Ordering::Relaxed);
    }

    pub fn count(&self, why: Refused) {
        self.refused[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Prometheus text: `ipsecd_{server}_requests_total` and `ipsecd_{server}_refused_total`
    /// by reason.
    pub fn prometheus(&self, server: &str) -> String {
        let mut o = format!(
            "# HELP ipsecd_{server}_requests_total Requests answered by the {server} server.\n\
             # TYPE ipsecd_{server}_requests_total counter\n\
             # HELP ipsecd_{server}_refused_total Connections the {server} server refused, by reason.\n\
             # TYPE ipsecd_{server}_refused_total counter\n\
             ipsecd_{server}_requests_total {}\n",
            self.answered()
        );
        for r in Refused::ALL {
            o += &format!("ipsecd_{server}_refused_total{{reason=\"{}\"}} {}\n", r.name(), self.refused(r));
        }
        o
    }
}

impl std::fmt::Display for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} requests answered; refused:", self.answered())?;
        for r in Refused::ALL {
            write!(f, " {} {}", r.name(), self.refused(r))?;
        }
        Ok(())
    }
}

/// One of `bound` places, given back however its connection's thread ends.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Accepts connections for ever, each served by `serve` on a thread of its own named
/// `name`; with `bound` already open, a new one is counted and told `busy()` on the accept
/// thread, without waiting on it (the reply fits the empty socket buffer of a new
/// connection), then closed.
pub fn accept<C: Conn>(
    incoming: impl Iterator<Item = io::Result<C>>,
    name: &str,
    bound: usize,
    counters: &Counters,
    busy: impl Fn() -> Vec<u8>,
    serve: impl Fn(C) + Send + Sync + 'static,
) {
    let open = Arc::new(AtomicUsize::new(0));
    let serve = Arc::new(serve);
    for conn in incoming {
        let Ok(mut conn) = conn else { continue };
        if open.fetch_add(1, Ordering::AcqRel) >= bound {
            open.fetch_sub(1, Ordering::AcqRel);
            counters.count(Refused::Busy);
            let _ = conn.set_nonblocking(true);
            let _ = conn.write_all(&busy());
            continue;
        }
        let (slot, serve) = (Slot(open.clone()), serve.clone());
        let spawned = std::thread::Builder::new().name(name.into()).spawn(move || {
            let _slot = slot;
            serve(conn)
        });
        if let Err(e) = spawned {
            // The closure, and the slot in it, were dropped.
            counters.count(Refused::Io);
            tracing::warn!("{name}: no thread for a connection: {e}");
        }
    }
}

/// Why [`read_by`] stopped.
#[derive(Debug)]
pub enum ReadError {
    /// The deadline passed with this many bytes read.
    Deadline(usize),
    /// More than the most the server reads.
    TooLarge,
    Io(io::Error),
}

/// Reads a request by `deadline`: until the client shuts down its sending half, or
/// until `complete` says the bytes so far are a whole request; at most `max` bytes.
pub fn read_by<C: Conn>(
    conn: &mut C,
    deadline: Instant,
    max: usize,
    complete: impl Fn(&[u8]) -> bool,
) -> Result<Vec<u8>, ReadError> {
    // A request may carry keys (setkey statements): what is read is wiped wherever it was
    // (the buffer as it grows, the buffer on an error); only the returned buffer is the
    // caller's to wipe.
    let mut buf = Zeroizing::new(Vec::new());
    while !complete(&buf) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::Deadline(buf.len()));
        }
        conn.set_read_timeout(Some(left)).map_err(ReadError::Io)?;
        match read_more(conn, &mut buf, max) {
            Ok(0) => break,
            Ok(_) => {}
            Err(ReadError::Io(e)) if is_timeout(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(std::mem::take(&mut *buf))
}

/// The room [`read_more`] gives an empty buffer: a control request of one CHILD_SA (about
/// 1 KiB) fits, so that it costs one small allocation, not a 64 KiB chunk zeroed and wiped.
const FIRST_ROOM: usize = 4 << 10;

/// Reads once from `conn` into the end of `buf`, straight into its spare room (no chunk in
/// between to wipe): `Ok(0)` at the end of the stream, [`ReadError::TooLarge`] once `buf`
/// would hold more than `max` bytes. The room grows by hand, doubling: a reallocation would
/// leave the old bytes in the block it frees; the old buffer is wiped as it drops. The
/// spare room is zeroed before the read (safe code cannot read into uninitialised memory),
/// and `buf`'s whole capacity is wiped when it drops.
pub fn read_more<C: Read>(
    conn: &mut C,
    buf: &mut Zeroizing<Vec<u8>>,
    max: usize,
) -> Result<usize, ReadError> {
    let len = buf.len();
    if len >= max.saturating_add(1) {
        return Err(ReadError::TooLarge);
    }
    if buf.capacity() == len {
        // One byte past `max`, so that a request larger than `max` is seen as such.
        let cap = (2 * len).max(FIRST_ROOM).min(max.saturating_add(1)).max(len + 1);
        let mut bigger = Vec::with_capacity(cap);
        bigger.extend_from_slice(buf);
        *buf = Zeroizing::new(bigger);
    }
    let room = buf.capacity() - len;
    buf.resize(len + room, 0);
    let r = conn.read(&mut buf[len..]);
    let n = *r.as_ref().unwrap_or(&0);
    buf.truncate(len + n);
    match r {
        Ok(n) if len + n > max => Err(ReadError::TooLarge),
        Ok(n) => Ok(n),
        Err(e) => Err(ReadError::Io(e)),
    }
}

/// Drops the first `n` bytes of `buf` (a request taken, bytes sent), wiping them, and
/// wiping the places the rest moved down from: a long-lived buffer (a session's) keeps no
/// copy of a key in its spare room.
pub fn consume(buf: &mut Zeroizing<Vec<u8>>, n: usize) {
    let n = n.min(buf.len());
    let rest = buf.len() - n;
    buf[..n].zeroize();
    buf.copy_within(n.., 0);
    buf[rest..].zeroize();
    buf.truncate(rest);
}

/// Why [`write_by`] stopped.
#[derive(Debug)]
pub enum WriteError {
    /// The deadline passed with this many bytes taken.
    Deadline(usize),
    /// The client went away.
    Gone,
}

/// Writes all of `bytes` by `deadline`, however slowly the client takes them.
pub fn write_by<C: Conn>(conn: &mut C, bytes: &[u8], deadline: Instant) -> Result<(), WriteError> {
    let mut sent = 0;
    while sent < bytes.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(WriteError::Deadline(sent));
        }
        conn.set_write_timeout(Some(left)).map_err(|_| WriteError::Gone)?;
        match conn.write(&bytes[sent..]) {
            Ok(0) => return Err(WriteError::Gone),
            Ok(n) => sent += n,
            Err(e) if is_timeout(&e) => {}
            Err(_) => return Err(WriteError::Gone),
        }
    }
    Ok(())
}

pub fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn counters_print_every_cause() {
        let c = Counters::default();
        c.count(Refused::Malformed);
        c.count_answered();
        assert_eq!(
            c.to_string(),
            "1 requests answered; refused: too_large 0 request_deadline 0 reply_deadline 0 malformed 1 busy 0 io 0 abandoned 0"
        );
        let p = c.prometheus("control");
        assert!(p.contains("ipsecd_control_requests_total 1\n"), "{p}");
        assert!(p.contains("ipsecd_control_refused_total{reason=\"malformed\"} 1\n"), "{p}");
    }

    /// How long a test waits for what must happen (generous: other work shares the
    /// machine); the waits return as soon as the event comes.
    const PATIENCE: Duration = Duration::from_secs(60);

    /// A TCP client that drips a byte every 50 ms is cut off at the whole request's
    /// deadline, however inside each read's timeout each byte comes. The client would drip
    /// for a minute: a reader with only a per-read timeout would still be reading when it
    /// stopped (and then end with the bytes, not the deadline).
    #[test]
    fn reading_stops_at_the_deadline_of_the_whole_request() {
        use std::sync::atomic::AtomicBool;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (stop, sent) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let drip = {
            let (stop, sent) = (stop.clone(), sent.clone());
            std::thread::spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                let t = Instant::now();
                while !stop.load(Ordering::SeqCst) && t.elapsed() < PATIENCE {
                    // Counted before it is sent, so that the reader never has more.
                    sent.fetch_add(1, Ordering::SeqCst);
                    if c.write_all(b"G").is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                // Whether it was still dripping when told to stop.
                stop.load(Ordering::SeqCst)
            })
        };
        let (mut conn, _) = l.accept().unwrap();
        let t = Instant::now();
        let r = read_by(&mut conn, t + Duration::from_millis(500), 1 << 10, |b| b.ends_with(b"\r\n\r\n"));
        let waited = t.elapsed();
        stop.store(true, Ordering::SeqCst);
        let sent = sent.load(Ordering::SeqCst);
        assert!(matches!(r, Err(ReadError::Deadline(n)) if n <= sent), "{r:?} ({sent} sent)");
        assert!(waited >= Duration::from_millis(500), "stopped before the deadline: {waited:?}");
        drop(conn);
        assert!(drip.join().unwrap(), "the client had stopped dripping: nothing was cut off");
    }

    /// A request larger than the first room (4 KiB) is read whole however it is split; one
    /// byte over the most is refused, and exactly the most is not.
    #[test]
    fn read_by_grows_to_the_request_and_stops_past_the_most() {
        let path = std::env::temp_dir().join(format!("ipsecd-serve-grow-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let request: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        for (size, whole) in [(20_000, true), (19_999, false)] {
            let sent = request.clone();
            let p = path.clone();
            let client = std::thread::spawn(move || {
                let mut c = UnixStream::connect(&p).unwrap();
                for part in sent.chunks(3_000) {
                    let _ = c.write_all(part);
                }
                let _ = c.shutdown(std::net::Shutdown::Write);
            });
            let (mut conn, _) = l.accept().unwrap();
            let r = read_by(&mut conn, Instant::now() + PATIENCE, size, |_| false);
            if whole {
                assert_eq!(r.unwrap(), request);
            } else {
                assert!(matches!(r, Err(ReadError::TooLarge)), "{r:?}");
            }
            drop(conn);
            client.join().unwrap();
        }
        let _ = std::fs::remove_file(&path);
    }

    /// What is consumed is gone, the rest moved to the front, and no byte of either is
    /// left in the buffer's room.
    #[test]
    fn consume_wipes_what_it_drops_and_where_the_rest_was() {
        let mut b = Zeroizing::new(b"keykeyKEYrest".to_vec());
        consume(&mut b, 9);
        assert_eq!(&b[..], b"rest");
        b.resize(13, 0);
        assert_eq!(&b[..], b"rest\0\0\0\0\0\0\0\0\0", "the room holds no old byte");
        consume(&mut b, 100);
        assert!(b.is_empty());
    }

    /// A client that takes its reply a byte at a time (or not at all) is dropped at the
    /// reply's deadline. This one never reads: a writer without the deadline would block
    /// for ever (the test gives up after a minute).
    #[test]
    fn writing_stops_at_the_deadline_of_the_whole_reply() {
        let path = std::env::temp_dir().join(format!("ipsecd-serve-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let _reader = UnixStream::connect(&path).unwrap(); // never reads
        let (mut conn, _) = l.accept().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let t = Instant::now();
            let r = write_by(&mut conn, &vec![0u8; 16 << 20], t + Duration::from_millis(300));
            let _ = tx.send((r, t.elapsed()));
        });
        let (r, waited) = rx.recv_timeout(PATIENCE).expect("the write did not stop at its deadline");
        assert!(matches!(r, Err(WriteError::Deadline(n)) if n < 16 << 20), "{r:?}");
        assert!(waited >= Duration::from_millis(300), "stopped before the deadline: {waited:?}");
        let _ = std::fs::remove_file(&path);
    }
}
