//! The control socket's protocol, spoken by `ipsecctl` and served by `ipsecd` (the server
//! is [`crate::ctl_server`]).
//!
//! One request per connection, in text, so that it can be typed by hand (`socat`) and so
//! that the config file and the socket share one language:
//!
//! ```text
//! request := verb "\n" body      (the client then shuts down its sending half)
//! verb    := "setkey"            body: setkey(8) statements, parsed by ipsec_core::setkey;
//!                                what they print (dump, get) shows no key
//!          | "setkey keys"       the same, SAs printed with their keys (`ipsecctl --keys`)
//!          | "stats"             body: empty
//! reply   := *("working" "\n") ("ok" | "error") "\n" text      (the daemon then closes)
//!
//! monitor := "monitor" "\n"       (the client keeps its sending half open)
//! stream  := "ok" "\n" *(event "\n")  | "error" "\n" text
//!
//! session := "session" "\n"       (the client keeps the connection for many requests)
//!            then, from the daemon, "ok" "\n"; from then on, in each direction, frames:
//! frame   := length "\n" bytes     (length: decimal, of bytes; at most MAX_REQUEST)
//!            client → daemon: a request's bytes (verb "\n" body; setkey or stats)
//!            daemon → client: a reply's bytes ("ok" | "error") "\n" text, no heartbeat,
//!            one per request, in the order of the requests
//! ```
//!
//! `session` is for a key manager (`iked`) that sends a request per CHILD_SA: one
//! connection for its life instead of a connection (and a daemon thread) per request, and
//! requests pipelined, their replies matched in order ([`Frames`]). The one-shot form
//! stays for `ipsecctl` and `socat`. A frame cut short by the client's end is not carried
//! out (its length says it is not whole), and a request of a session is carried out as the
//! one-shot one is; the daemon gives each frame [`DEADLINE`] once its first byte came, and
//! none between frames.
//!
//! `monitor` subscribes to the daemon's events ([`crate::monitor`] documents each line):
//! the daemon answers `ok` once the subscription holds, then writes one line per event
//! until the client closes the connection or shuts down its sending half (so a client
//! such as `socat` must keep its input open). A client that reads too slowly loses
//! events, and is told how many where they were lost (`overflow lost=N`).
//!
//! A `setkey` body is parsed whole before anything is applied, so a malformed request
//! changes nothing; its error names the line and column. Statements are then applied in
//! order as one transaction: if the databases refuse one, nothing changes (its line is
//! named; the statement is shown without its keys).
//!
//! Limits, and why each is where it is:
//! - A request holds at most [`MAX_REQUEST`] bytes. The daemon refuses a larger one with its
//!   reason before it closes, and the client reads that reason even when its own sending
//!   failed because the daemon stopped reading ([`call`]); `ipsecctl` stops reading its
//!   input at the same limit ([`read_body`]), so it never holds more than that in memory.
//! - The daemon gives a client [`DEADLINE`] to send its whole request (in total, however
//!   the bytes trickle in) and as long to take its reply.
//! - While the daemon works on a request (waiting its turn behind other changes, applying
//!   it), it sends `working` lines, one every [`HEARTBEAT`]. The client waits as long as
//!   they come and gives up only after [`IDLE`] of silence, or at a total limit the user
//!   set; either way it says that the outcome is unknown, never that the request failed.
//!   So a large request that takes long to apply is never reported as a failure.

use std::io::{BufRead, ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use zeroize::Zeroizing;

/// The largest request the daemon reads, its verb line included (a config of thousands of
/// SAs fits).
pub const MAX_REQUEST: usize = 4 << 20;

/// The verb line of a `setkey` request.
const SETKEY_VERB: &str = "setkey\n";

/// The verb line of a `setkey` request whose printed SAs show their keys.
const SETKEY_KEYS_VERB: &str = "setkey keys\n";

/// The largest body a `setkey` request can carry: [`MAX_REQUEST`] less its verb line. (A
/// `setkey keys` request, which only reads need, has 5 bytes less: the daemon refuses a
/// larger one with its reason.)
pub const MAX_SETKEY_BODY: usize = MAX_REQUEST - SETKEY_VERB.len();

/// How long the daemon waits for a whole request, and for a client to take its whole reply.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// How often the daemon says it is still working on a request.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// How long the client waits for the daemon to say anything (a heartbeat or the reply)
/// before it gives up, with the outcome unknown.
pub const IDLE: Duration = Duration::from_secs(10);

/// A heartbeat line, sent before the reply while the daemon works.
pub const WORKING: &str = "working\n";

/// The default socket path.
pub const DEFAULT_SOCKET: &str = "/run/ipsecd.sock";

/// What [`Request::decode`] says of no bytes at all. (The daemon never gets that far with
/// a connection that sent nothing, such as the probe a starting daemon makes to see whether
/// another one is serving the socket: its server closes such a connection unanswered.)
pub const EMPTY: &str = "empty request";

/// The whole of a `session` request (the daemon stops reading there; frames follow).
pub const SESSION: &str = "session\n";

/// The frame that carries `bytes` in a session, wiped when dropped (a request may hold
/// keys).
pub fn encode_frame(bytes: &[u8]) -> Zeroizing<Vec<u8>> {
    let head = format!("{}\n", bytes.len());
    let mut out = Zeroizing::new(Vec::with_capacity(head.len() + bytes.len()));
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(bytes);
    out
}

/// Where the first frame of a session's byte stream is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frames {
    /// Not whole yet: more bytes are needed.
    Partial,
    /// A whole frame: its bytes are `buf[start..end]`, and the next frame starts at `end`.
    Whole { start: usize, end: usize },
}

/// The longest length line (`4194304\n` and some room).
const MAX_LENGTH_LINE: usize = 12;

/// Finds the first frame in `buf`, of at most `max` bytes. `Err` names what is wrong: a
/// length that is not a decimal number, or one over `max`.
pub fn first_frame(buf: &[u8], max: usize) -> Result<Frames, String> {
    let Some(nl) = buf.iter().take(MAX_LENGTH_LINE).position(|&b| b == b'\n') else {
        if buf.len() >= MAX_LENGTH_LINE {
            return Err(format!("a frame's length line is longer than {MAX_LENGTH_LINE} bytes"));
        }
        return Ok(Frames::Partial);
    };
    let len = std::str::from_utf8(&buf[..nl])
        .ok()
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|t| t.parse::<usize>().ok())
        .ok_or_else(|| {
            format!("a frame's length is not a decimal number: {:?}", String::from_utf8_lossy(&buf[..nl]))
        })?;
    if len > max {
        return Err(format!(
            "request larger than {max} bytes, the most ipsecd reads in one request; split it"
        ));
    }
    let (start, end) = (nl + 1, nl + 1 + len);
    Ok(if buf.len() >= end { Frames::Whole { start, end } } else { Frames::Partial })
}

/// A request. Its `Debug` never prints a setkey body (it may hold keys), only its length.
#[derive(Clone, PartialEq, Eq)]
pub enum Request {
    /// setkey(8) statements; SAs they print (`dump`, `get`) show `(key not shown)` for
    /// each key.
    Setkey(String),
    /// setkey(8) statements whose printed SAs show their keys, as setkey(8) prints them.
    SetkeyWithKeys(String),
    /// Every counter: global, per SA, per drop reason.
    Stats,
    /// Events, one line each, until the client closes ([`crate::monitor`]).
    Monitor,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Setkey(body) => write!(f, "Setkey({} bytes)", body.len()),
            Request::SetkeyWithKeys(body) => write!(f, "SetkeyWithKeys({} bytes)", body.len()),
            Request::Stats => f.write_str("Stats"),
            Request::Monitor => f.write_str("Monitor"),
        }
    }
}

/// The whole of a `monitor` request (the daemon stops reading there).
pub const MONITOR: &str = "monitor\n";

impl Request {
    /// The bytes sent on the socket, wiped when dropped (a setkey body may hold keys).
    pub fn encode(&self) -> Zeroizing<Vec<u8>> {
        let (verb, body) = match self {
            Request::Setkey(body) => (SETKEY_VERB, body.as_str()),
            Request::SetkeyWithKeys(body) => (SETKEY_KEYS_VERB, body.as_str()),
            Request::Stats => ("stats\n", ""),
            Request::Monitor => (MONITOR, ""),
        };
        // Sized first, so that no reallocation leaves a copy of a key behind.
        let mut bytes = Zeroizing::new(Vec::with_capacity(verb.len() + body.len()));
        bytes.extend_from_slice(verb.as_bytes());
        bytes.extend_from_slice(body.as_bytes());
        bytes
    }

    /// Reads a request (what a client sent before shutting down its half).
    pub fn decode(bytes: &[u8]) -> Result<Request, String> {
        if bytes.is_empty() {
            return Err(EMPTY.to_owned());
        }
        let text = std::str::from_utf8(bytes).map_err(|e| format!("the request is not UTF-8 ({e})"))?;
        let (verb, body) = text.split_once('\n').unwrap_or((text, ""));
        match verb.trim() {
            "setkey" => Ok(Request::Setkey(body.to_owned())),
            "setkey keys" => Ok(Request::SetkeyWithKeys(body.to_owned())),
            "stats" if body.trim().is_empty() => Ok(Request::Stats),
            "stats" => Err("stats takes no body".to_owned()),
            "monitor" if body.trim().is_empty() => Ok(Request::Monitor),
            "monitor" => Err("monitor takes no body".to_owned()),
            other => Err(format!(
                "unknown request {other:?} (expected \"setkey\", \"setkey keys\", \"stats\" or \"monitor\")"
            )),
        }
    }
}

/// A reply: `Ok(text)` or `Err(message)`.
pub type Reply = Result<String, String>;

/// The reply's bytes; the caller wipes them where the text may hold keys (a `dump`). Sized
/// first, so that no reallocation leaves a copy behind.
pub fn encode_reply(r: &Reply) -> Vec<u8> {
    let (head, text) = match r {
        Ok(text) => ("ok\n", text),
        Err(msg) => ("error\n", msg),
    };
    let mut bytes = Vec::with_capacity(head.len() + text.len());
    bytes.extend_from_slice(head.as_bytes());
    bytes.extend_from_slice(text.as_bytes());
    bytes
}

/// What follows the heartbeats.
fn after_heartbeats(mut bytes: &[u8]) -> &[u8] {
    while let Some(rest) = bytes.strip_prefix(WORKING.as_bytes()) {
        bytes = rest;
    }
    bytes
}

/// Decodes a reply, skipping the heartbeats before it.
pub fn decode_reply(bytes: &[u8]) -> Reply {
    let bytes = after_heartbeats(bytes);
    let text = String::from_utf8_lossy(bytes);
    match text.split_once('\n') {
        Some(("ok", rest)) => Ok(rest.to_owned()),
        Some(("error", rest)) => Err(rest.to_owned()),
        _ => Err(format!("malformed reply from the daemon: {text:?}")),
    }
}

/// Reads a `setkey` body (a file, stdin) for a request, stopping at [`MAX_SETKEY_BODY`]:
/// more is refused with a message naming `what` and the limit, having read at most one
/// byte past it.
pub fn read_body(from: impl Read, what: &str) -> Result<String, String> {
    let mut buf = Vec::new();
    from.take(MAX_SETKEY_BODY as u64 + 1).read_to_end(&mut buf).map_err(|e| format!("{what}: {e}"))?;
    if buf.len() > MAX_SETKEY_BODY {
        return Err(format!(
            "{what}: more than {MAX_SETKEY_BODY} bytes, the most one request to ipsecd carries \
             ({MAX_REQUEST} with its verb line); nothing was sent: split it into smaller requests"
        ));
    }
    String::from_utf8(buf).map_err(|e| format!("{what}: not UTF-8 text ({e})"))
}

/// How long a client waits.
#[derive(Clone, Copy, Debug)]
pub struct Wait {
    /// For the daemon to say anything at all (its heartbeat comes every [`HEARTBEAT`]).
    pub idle: Duration,
    /// For the whole reply, however busy the daemon says it is; `None`: no limit.
    pub total: Option<Duration>,
}

impl Default for Wait {
    fn default() -> Self {
        Wait { idle: IDLE, total: None }
    }
}

/// Why a call got no reply.
#[derive(Debug, PartialEq, Eq)]
pub enum CallError {
    /// The socket could not be reached: nothing was sent.
    Unreachable(String),
    /// Sending failed and the daemon said nothing: the request was not applied.
    Send(String),
    /// The daemon fell silent (no heartbeat) for this long: the outcome is unknown.
    Silent(Duration),
    /// The user's total limit passed while the daemon was still working: the outcome is
    /// unknown.
    TimedOut(Duration),
    /// The daemon closed the connection without a reply (it stopped?): the outcome is
    /// unknown.
    NoReply,
    /// Reading the reply failed: the outcome is unknown.
    Receive(String),
}

impl CallError {
    /// Whether the request may have been applied (the caller cannot tell).
    pub fn outcome_unknown(&self) -> bool {
        !matches!(self, CallError::Unreachable(_) | CallError::Send(_))
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const CHECK: &str = "whether the request was applied is unknown: look with ipsecctl -D and -DP";
        match self {
            CallError::Unreachable(e) => write!(f, "{e}"),
            CallError::Send(e) => write!(f, "sending the request: {e}"),
            CallError::Silent(d) => {
                write!(f, "ipsecd said nothing for {} s, not even that it is working; {CHECK}", d.as_secs())
            }
            CallError::TimedOut(d) => {
                write!(f, "no reply within {} s (--timeout), ipsecd is still working; {CHECK}", d.as_secs())
            }
            CallError::NoReply => write!(f, "ipsecd closed the connection without a reply; {CHECK}"),
            CallError::Receive(e) => write!(f, "reading the reply: {e}; {CHECK}"),
        }
    }
}

/// Sends a request to the daemon at `socket` and returns its reply (client side), waiting
/// as `wait` says.
pub fn call(socket: &Path, req: &Request, wait: Wait) -> Result<Reply, CallError> {
    call_named(socket, "ipsecd", &req.encode(), wait)
}

/// [`call`] for a daemon that speaks this framing with requests of its own (`iked`'s
/// control socket, `ipsecctl ike …`): `request` is sent as it is, and `daemon` names the
/// daemon when it cannot be reached.
pub fn call_named(socket: &Path, daemon: &str, request: &[u8], wait: Wait) -> Result<Reply, CallError> {
    let mut conn = UnixStream::connect(socket)
        .map_err(|e| CallError::Unreachable(format!("cannot reach {daemon} at {}: {e}", socket.display())))?;
    let start = Instant::now();
    let sent = conn
        .set_write_timeout(Some(DEADLINE))
        .and_then(|_| conn.write_all(request))
        .and_then(|_| conn.shutdown(std::net::Shutdown::Write));
    let received = receive(&mut conn, start, wait);
    match (sent, received) {
        (_, Ok(bytes)) if !after_heartbeats(&bytes).is_empty() => Ok(decode_reply(&bytes)),
        // The daemon stopped reading and said nothing (or not in time): not applied.
        (Err(e), _) => Err(CallError::Send(e.to_string())),
        (Ok(()), Ok(_)) => Err(CallError::NoReply),
        (Ok(()), Err(e)) => Err(e),
    }
}

/// Subscribes to the daemon's events at `socket` and hands `each` every line (without its
/// newline) until the daemon closes the connection or `each` returns false. `Err`: the
/// daemon could not be reached, refused (its reason), or the connection failed.
pub fn monitor(socket: &Path, each: impl FnMut(&str) -> bool) -> Result<(), String> {
    monitor_named(socket, "ipsecd", MONITOR.as_bytes(), each)
}

/// [`monitor`] for a daemon that streams its events in this framing (`iked`'s `monitor`):
/// `request` is sent as it is, and `daemon` names the daemon in errors.
pub fn monitor_named(
    socket: &Path,
    daemon: &str,
    request: &[u8],
    mut each: impl FnMut(&str) -> bool,
) -> Result<(), String> {
    let mut conn = UnixStream::connect(socket)
        .map_err(|e| format!("cannot reach {daemon} at {}: {e}", socket.display()))?;
    conn.set_write_timeout(Some(DEADLINE))
        .and_then(|_| conn.write_all(request))
        .map_err(|e| format!("sending the request: {e}"))?;
    let mut lines = std::io::BufReader::new(conn).lines();
    match lines.next() {
        Some(Ok(l)) if l == "ok" => {}
        Some(Ok(l)) if l == "error" => {
            let why: Vec<String> = lines.map_while(Result::ok).collect();
            return Err(why.join("\n"));
        }
        Some(Ok(l)) => return Err(format!("malformed reply from the daemon: {l:?}")),
        Some(Err(e)) => return Err(format!("reading the reply: {e}")),
        None => return Err(format!("{daemon} closed the connection without a reply")),
    }
    for l in lines {
        let l = l.map_err(|e| format!("reading events: {e}"))?;
        if !each(&l) {
            break;
        }
    }
    Ok(())
}

/// Reads until the daemon closes: heartbeats and the reply.
fn receive(conn: &mut UnixStream, start: Instant, wait: Wait) -> Result<Vec<u8>, CallError> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    loop {
        let left = wait.total.map(|t| t.saturating_sub(start.elapsed()));
        if left == Some(Duration::ZERO) {
            return Err(CallError::TimedOut(wait.total.unwrap_or_default()));
        }
        // Whether this read waits the whole idle time, or only what is left of the total.
        let idle_bound = left.is_none_or(|l| l >= wait.idle);
        let timeout = left.map_or(wait.idle, |l| l.min(wait.idle));
        conn.set_read_timeout(Some(timeout)).map_err(|e| CallError::Receive(e.to_string()))?;
        match conn.read(&mut chunk) {
            Ok(0) => return Ok(buf),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if idle_bound {
                    return Err(CallError::Silent(wait.idle));
                }
                // Otherwise the total limit ran out: said at the top.
            }
            // The daemon closed while data we sent was still unread (it refused a request
            // too large): what it said before is already in `buf`.
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(buf),
            Err(e) => return Err(CallError::Receive(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_round_trip() {
        for r in [
            Request::Stats,
            Request::Monitor,
            Request::Setkey("flush;\nspdflush;\n".into()),
            Request::Setkey(String::new()),
            Request::SetkeyWithKeys("dump;\n".into()),
            Request::SetkeyWithKeys(String::new()),
        ] {
            assert_eq!(Request::decode(&r.encode()), Ok(r));
        }
        for r in [Ok("a\nb".to_owned()), Err("line 1, column 2: x".to_owned()), Ok(String::new())] {
            assert_eq!(decode_reply(&encode_reply(&r)), r);
            let mut beating = WORKING.repeat(3).into_bytes();
            beating.extend(encode_reply(&r));
            assert_eq!(decode_reply(&beating), r);
        }
    }

    /// A request's `Debug` (what a failed assertion or a log line would print) names a
    /// setkey body's length, not its keys.
    #[test]
    fn debug_never_prints_a_setkey_body() {
        let body =
            "add 10.0.0.1 10.0.0.2 esp 0x1001 -E aes-gcm-16 0x00112233445566778899aabbccddeeff01020304;\n";
        let printed = format!("{:?}", Request::Setkey(body.to_owned()));
        assert_eq!(printed, format!("Setkey({} bytes)", body.len()));
        assert_eq!(format!("{:?}", Request::Stats), "Stats");
    }

    #[test]
    fn malformed_requests_are_named() {
        assert!(Request::decode(b"frobnicate\n").unwrap_err().contains("unknown request \"frobnicate\""));
        assert!(Request::decode(b"setkey all\ndump;")
            .unwrap_err()
            .contains("unknown request \"setkey all\""));
        assert!(Request::decode(b"stats\nextra").unwrap_err().contains("no body"));
        assert!(Request::decode(b"monitor\nextra").unwrap_err().contains("monitor takes no body"));
        assert!(Request::decode(&[0xff, 0xfe]).unwrap_err().contains("UTF-8"));
        assert!(decode_reply(b"maybe").unwrap_err().contains("malformed reply"));
    }

    /// `ipsecctl -f /dev/zero` read until it was killed for memory: the body stops at the
    /// request limit, with the limit named.
    #[test]
    fn a_body_stops_at_the_request_limit() {
        let e = read_body(std::io::repeat(b'x'), "/dev/zero").unwrap_err();
        assert!(e.starts_with("/dev/zero: more than 4194297 bytes"), "{e}");
        assert!(e.contains("nothing was sent"), "{e}");
        let full = "x".repeat(MAX_SETKEY_BODY);
        assert_eq!(read_body(full.as_bytes(), "f").unwrap().len(), MAX_SETKEY_BODY);
        assert_eq!(Request::Setkey(full).encode().len(), MAX_REQUEST);
        assert!(read_body(&[0xffu8, 0xfe][..], "f").unwrap_err().contains("not UTF-8"));
    }
}
