//! iked's side of its control socket: the protocol is `ipsecd::ike_ctl`'s (shared with
//! `ipsecctl ike …`); this reads one request from a client that connected.
//!
//! ```text
//!  listener readable ─▶ accept ─▶ read_request (until "\n", EOF, or MAX_REQUEST; at most
//!                                  READ_WAIT) ─▶ Request ─▶ the loop answers or subscribes
//! ```
//!
//! The loop is one thread, so a client that trickles its request holds it up for at most
//! [`READ_WAIT`]; the socket is root's (0600), so that client is an administrator.

use std::io::{ErrorKind, Read};
use std::os::unix::net::UnixStream;
use std::time::Duration;

pub use ipsecd::ike_ctl::{Request, DEFAULT_SOCKET, MAX_REQUEST};

/// How long the daemon waits for a client's whole request.
pub const READ_WAIT: Duration = Duration::from_secs(1);

/// Reads one request from a control client, within [`READ_WAIT`].
pub fn read_request(conn: &mut UnixStream) -> Result<Request, String> {
    conn.set_nonblocking(false).map_err(|e| e.to_string())?;
    conn.set_read_timeout(Some(READ_WAIT)).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256];
    // Up to the newline (monitor keeps its half open), the end, or the limit.
    while !buf.contains(&b'\n') && buf.len() <= MAX_REQUEST {
        match conn.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading the request: {e}")),
        }
    }
    Request::decode(&buf)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// What `ipsecctl ike` sends (ipsecd::ike_ctl's encoding) is read whole, whether the
    /// client shuts down its half (a request) or keeps it open (monitor).
    #[test]
    fn requests_are_read_from_a_connection() {
        for (req, shut) in
            [(Request::Up { conn: "site-a".into(), new: false }, true), (Request::Monitor, false)]
        {
            let (mut client, mut server) = UnixStream::pair().unwrap();
            client.write_all(&req.encode()).unwrap();
            if shut {
                client.shutdown(std::net::Shutdown::Write).unwrap();
            }
            assert_eq!(read_request(&mut server), Ok(req));
        }
    }

    /// A client that sends nothing holds the loop for READ_WAIT, then is refused.
    #[test]
    fn a_silent_client_is_refused_in_time() {
        let (_client, mut server) = UnixStream::pair().unwrap();
        let t = std::time::Instant::now();
        assert!(read_request(&mut server).unwrap_err().starts_with("reading the request"));
        assert!(t.elapsed() < READ_WAIT * 3);
    }
}
