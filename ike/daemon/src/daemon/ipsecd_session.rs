//! iked's one connection to ipsecd's control socket for its changes (ipsecd's `session`,
//! `ipsecd::ctl`): requests pipelined, never waited for, their replies matched in order.
//!
//! ```text
//!  send(request, tag) ─▶ framed into the outbox ─▶ written as far as the socket takes
//!                         tag queued (waiting)       (the rest when poll says POLLOUT)
//!  poll: readable ─▶ receive() ─▶ each whole reply frame ─▶ (the oldest tag, its reply)
//!  connection lost ─▶ every waiting tag answered Err (outcome unknown), the outbox
//!                     dropped, a new session opened for what comes next
//! ```
//!
//! Why: a request per CHILD_SA on a connection of its own cost ipsecd a thread (and a
//! heartbeat thread) per request, and iked's loop waited for each reply, doing no IKE work
//! meanwhile. ipsecd carries out a session's requests one after the other in the order
//! sent, so installs, removals and migrations of one CHILD_SA stay ordered. A reply comes
//! back to the loop as an event with its tag (what the request was for).
//!
//! The outbox holds keys (install requests): it is a [`Zeroizing`] buffer, grown by hand
//! so that no reallocation leaves a copy behind, and wiped as it drains
//! ([`ipsecd::serve::consume`]).

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ipsecd::ctl::{self, Frames, Reply};
use ipsecd::serve::{consume, read_more, ReadError};
use zeroize::{Zeroize, Zeroizing};

/// What a lost connection answers each request that was waiting for its reply.
pub const LOST: &str =
    "the connection to ipsecd's control socket was lost before the reply: whether the request was applied is unknown";

/// A session with ipsecd; `T` is what the caller needs back with each reply.
pub struct Session<T> {
    path: PathBuf,
    conn: UnixStream,
    /// Framed requests not yet taken by the socket.
    outbox: Zeroizing<Vec<u8>>,
    /// Reply bytes not yet a whole frame.
    inbox: Zeroizing<Vec<u8>>,
    /// The tags of the requests sent, oldest first.
    waiting: VecDeque<T>,
    /// Replies ready for the caller: read, or made up for a lost connection.
    ready: VecDeque<(T, Reply)>,
    /// Sessions opened again after a loss.
    reconnects: u64,
}

impl<T> Session<T> {
    /// Opens a session with ipsecd at `path` (waits for its `ok`, at most [`ctl::IDLE`]).
    pub fn connect(path: &Path) -> Result<Session<T>, String> {
        Ok(Session {
            path: path.to_owned(),
            conn: open(path)?,
            outbox: Zeroizing::new(Vec::new()),
            inbox: Zeroizing::new(Vec::new()),
            waiting: VecDeque::new(),
            ready: VecDeque::new(),
            reconnects: 0,
        })
    }

    /// Sends `request` (framed; as much as the socket takes now, the rest on
    /// [`Session::flush`]); its reply comes back with `tag` from [`Session::receive`]. The
    /// request is wiped here once framed.
    pub fn send(&mut self, mut request: Zeroizing<Vec<u8>>, tag: T) {
        let frame = ctl::encode_frame(&request);
        request.zeroize();
        if self.outbox.capacity() - self.outbox.len() < frame.len() {
            let mut bigger =
                Vec::with_capacity((self.outbox.len() + frame.len()).max(2 * self.outbox.capacity()));
            bigger.extend_from_slice(&self.outbox);
            self.outbox = Zeroizing::new(bigger);
        }
        self.outbox.extend_from_slice(&frame);
        self.waiting.push_back(tag);
        self.flush();
    }

    /// Writes what the socket takes of the outbox.
    pub fn flush(&mut self) {
        let mut sent = 0;
        while sent < self.outbox.len() {
            match self.conn.write(&self.outbox[sent..]) {
                Ok(0) => return self.lost("ipsecd closed the session"),
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return self.lost(&format!("writing to ipsecd: {e}")),
            }
        }
        // What was written is wiped as it leaves, and where the rest moved down from.
        consume(&mut self.outbox, sent);
    }

    /// Whether requests wait for room in the socket (poll for POLLOUT, then flush).
    pub fn wants_write(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// How many requests wait for their reply.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Whether replies are in hand for [`Session::receive`] without reading (those a lost
    /// connection made up).
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// How often the session was opened again after a loss.
    pub fn reconnects(&self) -> u64 {
        self.reconnects
    }

    /// Every reply that has come (without waiting), each with its request's tag, in the
    /// order of the requests.
    pub fn receive(&mut self) -> Vec<(T, Reply)> {
        loop {
            // Straight into the inbox, grown by hand (no copy left behind); no bound of its
            // own: whole frames leave it as they come.
            match read_more(&mut self.conn, &mut self.inbox, usize::MAX / 2) {
                Ok(0) => {
                    self.lost("ipsecd closed the session");
                    break;
                }
                Ok(_) => self.frames(),
                Err(ReadError::Io(e)) if e.kind() == ErrorKind::WouldBlock => break,
                Err(ReadError::Io(e)) if e.kind() == ErrorKind::Interrupted => {}
                Err(ReadError::Io(e)) => {
                    self.lost(&format!("reading from ipsecd: {e}"));
                    break;
                }
                Err(ReadError::TooLarge | ReadError::Deadline(_)) => {
                    self.lost("ipsecd's reply is larger than iked reads");
                    break;
                }
            }
        }
        self.ready.drain(..).collect()
    }

    /// Waits until every request sent has its reply, or `patience` passes with nothing from
    /// ipsecd (those left are answered as lost): for iked's last requests before it exits.
    pub fn finish(&mut self, patience: Duration) -> Vec<(T, Reply)> {
        let mut out = Vec::new();
        let mut last = Instant::now();
        while !self.waiting.is_empty() || self.wants_write() {
            self.flush();
            let got = self.receive();
            if got.is_empty() {
                if last.elapsed() >= patience {
                    self.lost("ipsecd did not answer in time");
                    out.extend(self.ready.drain(..));
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            } else {
                last = Instant::now();
            }
            out.extend(got);
        }
        out
    }

    /// Moves each whole reply frame in the inbox to the ready queue with its tag.
    fn frames(&mut self) {
        loop {
            match ctl::first_frame(&self.inbox, usize::MAX / 2) {
                Ok(Frames::Partial) => return,
                Ok(Frames::Whole { start, end }) => {
                    let reply = ctl::decode_reply(&self.inbox[start..end]);
                    consume(&mut self.inbox, end);
                    match self.waiting.pop_front() {
                        Some(tag) => self.ready.push_back((tag, reply)),
                        None => return self.lost("ipsecd sent a reply to no request"),
                    }
                }
                Err(e) => return self.lost(&format!("ipsecd's reply: {e}")),
            }
        }
    }

    /// The connection is gone or broken: every waiting request is answered with [`LOST`],
    /// what was not sent is dropped (a frame cut short is not carried out by ipsecd), and
    /// a new session is opened (if that fails, the next request finds it out again).
    fn lost(&mut self, why: &str) {
        tracing::warn!("ipsecd's control session: {why}; {} request(s) without a reply", self.waiting.len());
        for tag in self.waiting.drain(..) {
            self.ready.push_back((tag, Err(LOST.to_owned())));
        }
        self.outbox.zeroize();
        self.inbox.zeroize();
        match open(&self.path) {
            Ok(c) => {
                self.conn = c;
                self.reconnects += 1;
            }
            Err(e) => tracing::warn!("ipsecd's control session: opening it again: {e}"),
        }
    }
}

impl<T> AsFd for Session<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.conn.as_fd()
    }
}

/// Connects, asks for a session, waits for `ok`; the connection is then non-blocking.
fn open(path: &Path) -> Result<UnixStream, String> {
    let mut conn =
        UnixStream::connect(path).map_err(|e| format!("cannot reach ipsecd at {}: {e}", path.display()))?;
    conn.set_read_timeout(Some(ctl::IDLE)).map_err(|e| e.to_string())?;
    conn.set_write_timeout(Some(ctl::DEADLINE)).map_err(|e| e.to_string())?;
    conn.write_all(ctl::SESSION.as_bytes()).map_err(|e| format!("asking ipsecd for a session: {e}"))?;
    // Byte by byte up to the line's end: nothing after `ok\n` may be read here (nothing
    // comes before the first request anyway).
    let mut first = Vec::new();
    let mut b = [0u8; 1];
    while first.last() != Some(&b'\n') && first.len() < 4096 {
        match conn.read(&mut b) {
            Ok(0) => break,
            Ok(_) => first.push(b[0]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("ipsecd's answer to session: {e}")),
        }
    }
    if first != b"ok\n" {
        let mut why = Vec::new();
        let _ = conn.read_to_end(&mut why);
        first.extend(why);
        return Err(format!("ipsecd refused a session: {}", String::from_utf8_lossy(&first).trim_end()));
    }
    conn.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipsecd::ctl::Request;
    use ipsecd::ctl_server::{Counters, Handler, Limits, Server};
    use std::os::unix::net::UnixListener;
    use std::sync::{Arc, Mutex};

    /// ipsecd's real control server, with a handler that records the changes and refuses
    /// those that start with "bad".
    #[derive(Clone, Default)]
    struct Record(Arc<Mutex<Vec<String>>>);

    impl Handler for Record {
        fn stats(&self, _: &Counters) -> String {
            "stats\n".into()
        }
        fn change(&self, body: &str) -> Reply {
            self.0.lock().unwrap().push(body.to_owned());
            if body.starts_with("bad") {
                Err(format!("refused {body}"))
            } else {
                Ok(format!("applied {body}"))
            }
        }
    }

    fn serve(name: &str) -> (PathBuf, Record) {
        let path = std::env::temp_dir().join(format!("iked-session-{}-{name}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).unwrap();
        let rec = Record::default();
        let server = Server::new(rec.clone(), Limits::default());
        std::thread::spawn(move || server.serve(&listener));
        (path, rec)
    }

    fn setkey(body: &str) -> Zeroizing<Vec<u8>> {
        Request::Setkey(body.to_owned()).encode()
    }

    /// 500 requests sent without reading a reply (more than a socket buffer of install-sized
    /// requests: the outbox takes the rest) come back in order, each with its tag and its
    /// own outcome, and ipsecd carried them out in the order sent.
    #[test]
    fn pipelined_requests_come_back_in_order_with_their_tags() {
        let (path, rec) = serve("order");
        let mut s = Session::<usize>::connect(&path).unwrap();
        let pad = "x".repeat(1000);
        for i in 0..500 {
            let body = if i % 7 == 3 { format!("bad{i} {pad}") } else { format!("{i} {pad}") };
            s.send(setkey(&body), i);
        }
        let got = s.finish(Duration::from_secs(60));
        assert_eq!(got.len(), 500);
        for (n, (tag, reply)) in got.into_iter().enumerate() {
            assert_eq!(tag, n);
            if n % 7 == 3 {
                assert_eq!(reply, Err(format!("refused bad{n} {pad}")));
            } else {
                assert_eq!(reply, Ok(format!("applied {n} {pad}")));
            }
        }
        let applied = rec.0.lock().unwrap();
        assert_eq!(applied.len(), 500);
        assert!(applied.iter().enumerate().all(|(i, b)| b
            .split(' ')
            .next()
            .unwrap()
            .trim_start_matches("bad")
            == i.to_string()));
        assert_eq!(s.waiting(), 0);
        let _ = std::fs::remove_file(&path);
    }

    /// A connection that breaks with requests waiting answers each of them as lost (the
    /// outcome unknown, not a refusal), and the session is opened again for the next: the
    /// peer here is a listener that takes the session, answers one request and closes.
    #[test]
    fn a_lost_connection_answers_the_waiting_and_reconnects() {
        let path = std::env::temp_dir().join(format!("iked-session-{}-lost.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            // The first session: "ok", then, once the session's line and the three frames
            // (two lines each) came, one reply, and closed with two requests unanswered.
            let (mut c, _) = listener.accept().unwrap();
            c.write_all(b"ok\n").unwrap();
            let mut seen = Vec::new();
            let mut b = [0u8; 1024];
            while seen.iter().filter(|&&x| x == b'\n').count() < 7 {
                let n = c.read(&mut b).unwrap();
                seen.extend_from_slice(&b[..n]);
            }
            c.write_all(&ctl::encode_frame(b"ok\nfirst")).unwrap();
            drop(c);
            // The second: "ok" and one reply.
            let (mut c, _) = listener.accept().unwrap();
            c.write_all(b"ok\n").unwrap();
            let _ = c.read(&mut b).unwrap();
            c.write_all(&ctl::encode_frame(b"ok\nagain")).unwrap();
            let _ = c.read(&mut b);
        });
        let mut s = Session::<u32>::connect(&path).unwrap();
        for i in 1..=3 {
            s.send(setkey("a"), i);
        }
        let got = s.finish(Duration::from_secs(60));
        assert_eq!(
            got,
            vec![(1, Ok("first".to_owned())), (2, Err(LOST.to_owned())), (3, Err(LOST.to_owned()))]
        );
        assert_eq!(s.reconnects(), 1);
        s.send(setkey("b"), 4);
        assert_eq!(s.finish(Duration::from_secs(60)), vec![(4, Ok("again".to_owned()))]);
        server.join().unwrap();
        let _ = std::fs::remove_file(&path);
    }
}
