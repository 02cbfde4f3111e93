//! A setkey request's keys do not stay in the daemon's memory once it has answered: the
//! control server reads a request whose key is a known string, its handler answers with
//! the body (as a `dump` reply carries keys), and after the reply every writable mapping
//! of the process (`/proc/self/maps`, read through `/proc/self/mem`) is searched for the
//! key's text: the read chunk on the connection thread's stack, the growing read buffer,
//! the decoded body, the reply and its encoding are all wiped. The client here is a plain
//! socket whose own buffers the test wipes; the key is kept inverted (a copy of its own
//! would be found).

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::net::{UnixListener, UnixStream};

use ipsecd::ctl::Reply;
use ipsecd::ctl_server::{Counters, Handler, Limits, Server};
use zeroize::Zeroize;

/// The key's hex digits, inverted at compile time.
const KEY: [u8; 64] = {
    let text = b"8f3a91c4d27be605c1e9a7340bd25f6e93c08a1db47e2f5619ac3d70e85b24f1";
    let mut out = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        out[i] = !text[i];
        i += 1;
    }
    out
};

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

/// Where the key's text occurs in the process's writable memory.
fn found() -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mem = File::open("/proc/self/mem").unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut hits = Vec::new();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || !f[1].starts_with("rw") {
            continue;
        }
        let (start, end) = f[0].split_once('-').unwrap();
        let (start, end) = (u64::from_str_radix(start, 16).unwrap(), u64::from_str_radix(end, 16).unwrap());
        let mut at = start;
        while at < end {
            let want = (end - at).min(buf.len() as u64) as usize;
            let Ok(got) = mem.read_at(&mut buf[..want], at) else { break };
            if got == 0 {
                break;
            }
            for i in (0..got.saturating_sub(KEY.len() - 1)).filter(|&i| !buf[i] == KEY[0]) {
                if buf[i..i + KEY.len()].iter().zip(&KEY).all(|(a, b)| !a == *b) {
                    hits.push(format!("{:#x} in {}", at + i as u64, f.get(5).unwrap_or(&"[anonymous]")));
                }
            }
            buf[..got].zeroize();
            at += if at + (got as u64) < end { (got - (KEY.len() - 1)) as u64 } else { got as u64 };
        }
    }
    hits
}

#[test]
fn a_setkey_request_and_its_reply_leave_no_key_behind() {
    let path = std::env::temp_dir().join(format!("ipsecd-ctl-wipe-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).unwrap();
    let server = Server::new(Echo, Limits::default());
    std::thread::spawn(move || server.serve(&listener));

    // The request: large enough that the server's buffer grows several times on the way.
    let mut request: Vec<u8> = b"setkey\n".to_vec();
    for spi in 0..2000 {
        request.extend_from_slice(format!("add 10.0.0.1 10.0.0.2 esp {spi:#x} -E aes-cbc 0x").as_bytes());
        request.extend(KEY.iter().map(|b| !b));
        request.extend_from_slice(b";\n");
    }
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
