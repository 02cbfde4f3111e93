//! The protocol of iked's control socket (default [`DEFAULT_SOCKET`], root-only), spoken by
//! `ipsecctl ike …` and served by iked (`iked::daemon::control`). It lives here, beside
//! [`crate::ctl`], so that `ipsecctl` and iked share one definition (iked depends on this
//! crate, not the other way). The same style as ipsecd's: one request per connection, in
//! text, the reply framed by [`crate::ctl::encode_reply`] (`ok` or `error`, a newline, the
//! text).
//!
//! ```text
//! request := verb [" " arg] "\n"       (the client then shuts down its sending half)
//! verb    := "list"                     IKE SAs and their CHILD_SAs, with their states
//!          | "list raw"                 the same, one field a line, for scripts (below)
//!          | "up" CONN                  initiate a configured connection (all its children;
//!                                       those it lacks on its IKE SA, if one is up)
//!          | "up" CONN " new"           initiate another IKE SA of it even so (with the
//!                                       connection's `unique = never`, all of them stay)
//!          | "down" CONN                close a connection's IKE SAs (deleting their CHILD_SAs)
//!          | "rekey" SA                 rekey an IKE SA (its number in `list`, its SPI, or
//!                                       CONN: all of CONN's) or a CHILD_SA (`CONN/CHILD`,
//!                                       or its inbound SPI `0x…`)
//!          | "stats"                    the state machine's counters
//! reply   := ("ok" | "error") "\n" text (the daemon then closes)
//!
//! monitor := "monitor" "\n"             (the client keeps its sending half open)
//! stream  := "ok" "\n" *(event "\n")    IKE events, one line each, until the client closes
//! ```
//!
//! `list raw` writes each field of each SA on a line of its own, under the names and in
//! the values of strongSwan's `swanctl --list-sas --raw`, so that one script reads
//! either daemon (scripts/ike-interop):
//!
//! ```text
//! raw     := *(ike-field | child-field)
//! ike     := "ike " CONN " " FIELD " " VALUE "\n"          state, initiator-spi, dh-group, …
//! child   := "child " CONN " " CHILD " " FIELD " " VALUE "\n"   state, spi-in, encr-alg, …
//! ```
//!
//! The IKE SAs come in the order of `list` (each connection's oldest first), each
//! followed by its CHILD_SAs; a VALUE may hold spaces (a DN), never a newline.
//!
//! [`call`] and [`monitor`] are the client side. A request is at most [`MAX_REQUEST`] bytes
//! (a connection name is short).

use std::path::Path;

use crate::ctl::{call_named, monitor_named, CallError, Reply, Wait};

/// The default socket path.
pub const DEFAULT_SOCKET: &str = "/run/iked.sock";

/// The largest request read.
pub const MAX_REQUEST: usize = 4096;

/// A request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    List,
    /// `list raw`: the fields of `list` and more, one a line (the module doc).
    ListRaw,
    /// Initiate connection `conn`; `new`: even if it has an IKE SA already.
    Up {
        conn: String,
        new: bool,
    },
    Down(String),
    Rekey(String),
    Stats,
    Monitor,
}

impl Request {
    /// The bytes sent on the socket.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Request::List => "list\n".into(),
            Request::ListRaw => "list raw\n".into(),
            Request::Up { conn, new: false } => format!("up {conn}\n"),
            Request::Up { conn, new: true } => format!("up {conn} new\n"),
            Request::Down(c) => format!("down {c}\n"),
            Request::Rekey(sa) => format!("rekey {sa}\n"),
            Request::Stats => "stats\n".into(),
            Request::Monitor => "monitor\n".into(),
        }
        .into_bytes()
    }

    /// Reads a request; the error says what is wrong with it.
    pub fn decode(bytes: &[u8]) -> Result<Request, String> {
        if bytes.len() > MAX_REQUEST {
            return Err(format!("a request of more than {MAX_REQUEST} bytes"));
        }
        let text = std::str::from_utf8(bytes).map_err(|e| format!("the request is not UTF-8 ({e})"))?;
        let line = text.strip_suffix('\n').unwrap_or(text);
        if line.contains('\n') {
            return Err("a request is one line".to_owned());
        }
        let mut words = line.split_ascii_whitespace();
        let verb = words.next().ok_or("empty request")?;
        let arg = words.next();
        // `up CONN new` is the one request with a second word.
        let new = verb == "up" && words.clone().next() == Some("new");
        if new {
            words.next();
        }
        if words.next().is_some() {
            return Err(if verb == "up" {
                "up takes a connection name and, optionally, new".to_owned()
            } else {
                format!("{verb} takes at most one argument")
            });
        }
        let need = |what: &str| arg.map(str::to_owned).ok_or_else(|| format!("{verb} needs {what}"));
        let none = |r: Request| match arg {
            None => Ok(r),
            Some(a) => Err(format!("{verb} takes no argument (got {a:?})")),
        };
        match verb {
            "list" if arg == Some("raw") => Ok(Request::ListRaw),
            "list" => none(Request::List),
            "stats" => none(Request::Stats),
            "monitor" => none(Request::Monitor),
            "up" => need("a connection name").map(|conn| Request::Up { conn, new }),
            "down" => need("a connection name").map(Request::Down),
            "rekey" => need("an SA (a number from list, or CONN/CHILD)").map(Request::Rekey),
            other => {
                Err(format!("unknown request {other:?} (expected list, up, down, rekey, stats or monitor)"))
            }
        }
    }
}

/// Sends `req` (not [`Request::Monitor`]) to iked at `socket` and returns its reply.
pub fn call(socket: &Path, req: &Request, wait: Wait) -> Result<Reply, CallError> {
    call_named(socket, "iked", &req.encode(), wait)
}

/// Subscribes to iked's IKE events at `socket`, handing `each` every line until iked closes
/// the connection or `each` returns false.
pub fn monitor(socket: &Path, each: impl FnMut(&str) -> bool) -> Result<(), String> {
    monitor_named(socket, "iked", &Request::Monitor.encode(), each)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        for r in [
            Request::List,
            Request::ListRaw,
            Request::Up { conn: "site-a".into(), new: false },
            Request::Up { conn: "site-a".into(), new: true },
            Request::Down("site-a".into()),
            Request::Rekey("3".into()),
            Request::Rekey("site-a/net".into()),
            Request::Stats,
            Request::Monitor,
        ] {
            assert_eq!(Request::decode(&r.encode()), Ok(r));
        }
    }

    #[test]
    fn malformed_requests_are_named() {
        let e = |b: &[u8]| Request::decode(b).unwrap_err();
        assert_eq!(e(b""), "empty request");
        assert_eq!(e(b"up\n"), "up needs a connection name");
        assert_eq!(e(b"list all\n"), "list takes no argument (got \"all\")");
        assert_eq!(e(b"list raw x\n"), "list takes at most one argument");
        assert_eq!(e(b"down a b\n"), "down takes at most one argument");
        assert_eq!(e(b"down a new\n"), "down takes at most one argument");
        assert_eq!(e(b"up a b\n"), "up takes a connection name and, optionally, new");
        assert_eq!(e(b"up a new b\n"), "up takes a connection name and, optionally, new");
        assert_eq!(Request::decode(b"up a new\n"), Ok(Request::Up { conn: "a".into(), new: true }));
        assert!(e(b"frob\n").starts_with("unknown request \"frob\""));
        assert_eq!(e(b"list\nstats\n"), "a request is one line");
        assert!(e(&[0xff]).contains("UTF-8"));
        assert!(e(&vec![b'x'; MAX_REQUEST + 1]).contains("more than 4096 bytes"));
    }
}
