//! The control socket's protocol, spoken by `ipsecctl` and served by `ipsecd`.
//!
//! One request per connection, in text, so that it can be typed by hand (`socat`) and so
//! that the config file and the socket share one language:
//!
//! ```text
//! request := verb "\n" body      (the client then shuts down its sending half)
//! verb    := "setkey"            body: setkey(8) statements, parsed by ipsec_core::setkey
//!          | "stats"             body: empty
//! reply   := ("ok" | "error") "\n" text
//! ```
//!
//! A `setkey` body is parsed whole before anything is applied, so a malformed request
//! changes nothing; its error names the line and column. Statements are then applied in
//! order as one transaction: if the databases refuse one, nothing changes (its line is
//! named; the statement is shown without its keys).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// The largest request the daemon reads (a config of thousands of SAs fits).
pub const MAX_REQUEST: usize = 4 << 20;

/// How long either side waits on a silent peer.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The default socket path.
pub const DEFAULT_SOCKET: &str = "/run/ipsecd.sock";

/// What [`Request::decode`] says of a connection that sent nothing (such as the probe a
/// starting daemon makes to see whether another one is serving the socket).
pub const EMPTY: &str = "empty request";

/// A request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// setkey(8) statements.
    Setkey(String),
    /// Every counter: global, per SA, per drop reason.
    Stats,
}

impl Request {
    /// The bytes sent on the socket.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Request::Setkey(body) => format!("setkey\n{body}").into_bytes(),
            Request::Stats => b"stats\n".to_vec(),
        }
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
            "stats" if body.trim().is_empty() => Ok(Request::Stats),
            "stats" => Err("stats takes no body".to_owned()),
            other => Err(format!("unknown request {other:?} (expected \"setkey\" or \"stats\")")),
        }
    }
}

/// A reply: `Ok(text)` or `Err(message)`.
pub type Reply = Result<String, String>;

pub fn encode_reply(r: &Reply) -> Vec<u8> {
    match r {
        Ok(text) => format!("ok\n{text}").into_bytes(),
        Err(msg) => format!("error\n{msg}").into_bytes(),
    }
}

pub fn decode_reply(bytes: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(bytes);
    match text.split_once('\n') {
        Some(("ok", rest)) => Ok(rest.to_owned()),
        Some(("error", rest)) => Err(rest.to_owned()),
        _ => Err(format!("malformed reply from the daemon: {text:?}")),
    }
}

/// Reads a whole request from a connection, refusing one over [`MAX_REQUEST`].
pub fn read_request(conn: &mut UnixStream) -> Result<Request, String> {
    conn.set_read_timeout(Some(TIMEOUT)).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let n = conn
        .take(MAX_REQUEST as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("reading the request: {e}"))?;
    if n > MAX_REQUEST {
        return Err(format!("request larger than {MAX_REQUEST} bytes"));
    }
    Request::decode(&buf)
}

/// Sends a request to the daemon at `socket` and returns its reply (client side).
pub fn call(socket: &Path, req: &Request) -> Result<Reply, String> {
    let mut conn = UnixStream::connect(socket)
        .map_err(|e| format!("cannot reach ipsecd at {}: {e}", socket.display()))?;
    conn.set_read_timeout(Some(TIMEOUT)).map_err(|e| e.to_string())?;
    conn.set_write_timeout(Some(TIMEOUT)).map_err(|e| e.to_string())?;
    conn.write_all(&req.encode()).map_err(|e| format!("sending the request: {e}"))?;
    conn.shutdown(std::net::Shutdown::Write).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    conn.read_to_end(&mut buf).map_err(|e| format!("reading the reply: {e}"))?;
    Ok(decode_reply(&buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_round_trip() {
        for r in
            [Request::Stats, Request::Setkey("flush;\nspdflush;\n".into()), Request::Setkey(String::new())]
        {
            assert_eq!(Request::decode(&r.encode()), Ok(r));
        }
        for r in [Ok("a\nb".to_owned()), Err("line 1, column 2: x".to_owned()), Ok(String::new())] {
            assert_eq!(decode_reply(&encode_reply(&r)), r);
        }
    }

    #[test]
    fn malformed_requests_are_named() {
        assert!(Request::decode(b"frobnicate\n").unwrap_err().contains("unknown request \"frobnicate\""));
        assert!(Request::decode(b"stats\nextra").unwrap_err().contains("no body"));
        assert!(Request::decode(&[0xff, 0xfe]).unwrap_err().contains("UTF-8"));
        assert!(decode_reply(b"maybe").unwrap_err().contains("malformed reply"));
    }
}
