//! A setkey request's keys do not stay in the daemon's memory once it has answered: the
//! control server reads a request whose key is a known string, its handler answers with
//! the body (as a `dump` reply carries keys), and after the reply every writable mapping
//! of the process (`/proc/self/maps`, read through `/proc/self/mem`) is searched for the
//! key's text: the read chunk on the connection thread's stack, the growing read buffer,
//! the decoded body, the reply and its encoding are all wiped. The client here is a plain
//! socket whose own buffers the test wipes; the key is kept inverted (a copy of its own
//! would be found). The same for a request in a session (`ipsecd::ctl`'s framed
//! requests on one connection), whose buffer lives as long as the connection and moves
//! what follows a request down over it: with a key of its own, as the two tests run at
//! once.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};

use ipsecd::ctl::Reply;
use ipsecd::ctl_server::{Counters, Handler, Limits, Server};
use zeroize::Zeroize;

/// The key's hex digits, inverted at compile time.
const KEY: [u8; 64] =
    ocf_memscan::inverted(*b"8f3a91c4d27be605c1e9a7340bd25f6e93c08a1db47e2f5619ac3d70e85b24f1");

/// Answers a change with its body, as a dump answers with keys.
struct Echo;

impl Handler for Echo {
    fn stats(&self, _: &Counters) -> String {
        String::new()
    }
    fn change(&self, body: &str) -> Reply {
        Ok(body.to_owned())
    }
}

/// The session test's key, inverted.
const SESSION_KEY: [u8; 64] =
    ocf_memscan::inverted(*b"27c0e4b19fa6d3583e1b07f42ac95d6e0b8f3172d4a9c6e51f08b3d72e6a94c5");

/// Where the key's text occurs in the process's writable memory.
fn found() -> Vec<String> {
    found_key(&KEY)
}

fn found_key(key: &[u8; 64]) -> Vec<String> {
    ocf_memscan::scan(&[("the key's text", key)]).iter().map(|h| h.to_string()).collect()
}

/// Three requests of 500 SAs each in one session, sent in one write with the session's
/// line (so that the server's buffer holds the next requests while it takes the first),
/// then the connection closed: once the server's thread has ended the session, no key's
/// text is left (looked for again for up to a minute: the thread ends after the client's
/// close, at a time the test cannot see).
#[test]
fn a_session_leaves_no_key_behind() {
    let path = std::env::temp_dir().join(format!("ipsecd-ctl-wipe-session-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).unwrap();
    let server = Server::new(Echo, Limits::default());
    std::thread::spawn(move || server.serve(&listener));

    let mut body: Vec<u8> = Vec::with_capacity(500 * 128);
    body.extend_from_slice(b"setkey\n");
    for spi in 0..500 {
        body.extend_from_slice(format!("add 10.0.0.1 10.0.0.2 esp {spi:#x} -E aes-cbc 0x").as_bytes());
        body.extend(SESSION_KEY.iter().map(|b| !b));
        body.extend_from_slice(b";\n");
    }
    let head = format!("{}\n", body.len());
    let mut sent: Vec<u8> = Vec::with_capacity(8 + 3 * (head.len() + body.len()));
    sent.extend_from_slice(b"session\n");
    for _ in 0..3 {
        sent.extend_from_slice(head.as_bytes());
        sent.extend_from_slice(&body);
    }
    assert_eq!(sent.capacity(), sent.len(), "the request's buffer grew");
    body.zeroize();
    assert!(!found_key(&SESSION_KEY).is_empty(), "the scan does not see the request's buffer");
    let mut reply = Vec::with_capacity(2 * sent.len());
    {
        let mut conn = UnixStream::connect(&path).unwrap();
        conn.write_all(&sent).unwrap();
        sent.zeroize();
        // "ok", then three reply frames; the client then closes.
        let mut chunk = [0u8; 4096];
        let keys =
            |r: &[u8]| r.windows(64).filter(|w| w.iter().zip(&SESSION_KEY).all(|(a, b)| !a == *b)).count();
        while keys(&reply) < 1500 {
            let n = conn.read(&mut chunk).unwrap();
            assert!(n > 0, "the session ended before its three replies");
            reply.extend_from_slice(&chunk[..n]);
        }
        chunk.zeroize();
    }
    reply.zeroize();
    let _ = std::fs::remove_file(&path);
    let t = std::time::Instant::now();
    let mut left = found_key(&SESSION_KEY);
    while !left.is_empty() && t.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(50));
        left = found_key(&SESSION_KEY);
    }
    assert!(left.is_empty(), "the key's text left after the session:\n{}", left.join("\n"));
}

#[test]
fn a_setkey_request_and_its_reply_leave_no_key_behind() {
    let path = std::env::temp_dir().join(format!("ipsecd-ctl-wipe-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).unwrap();
    let server = Server::new(Echo, Limits::default());
    std::thread::spawn(move || server.serve(&listener));

    // The request: large enough that the server's buffer grows several times on the way.
    // Its buffer is as large as it gets from the start: a vector that grew would leave its
    // smaller copies, keys included, in freed memory the test does not wipe.
    let mut request: Vec<u8> = Vec::with_capacity(2000 * 128);
    request.extend_from_slice(b"setkey\n");
    for spi in 0..2000 {
        request.extend_from_slice(format!("add 10.0.0.1 10.0.0.2 esp {spi:#x} -E aes-cbc 0x").as_bytes());
        request.extend(KEY.iter().map(|b| !b));
        request.extend_from_slice(b";\n");
    }
    assert_eq!(request.capacity(), 2000 * 128, "the request's buffer grew");
    // The control: the request's own buffer is found.
    assert!(!found().is_empty(), "the scan does not see the request's buffer");
    let mut reply = Vec::with_capacity(2 * request.len());
    {
        let mut conn = UnixStream::connect(&path).unwrap();
        conn.write_all(&request).unwrap();
        conn.shutdown(std::net::Shutdown::Write).unwrap();
        request.zeroize();
        // The server closes the connection after its last wipe.
        conn.read_to_end(&mut reply).unwrap();
    }
    let answered = reply.windows(KEY.len()).filter(|w| w.iter().zip(&KEY).all(|(a, b)| !a == *b)).count();
    reply.zeroize();
    assert_eq!(answered, 2000, "the reply carries every key");
    let _ = std::fs::remove_file(&path);

    let left = found();
    assert!(left.is_empty(), "the key's text left after the reply:\n{}", left.join("\n"));
}
