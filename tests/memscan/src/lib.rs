//! Test support for "no secret survives": every place in this process's writable memory
//! (`/proc/self/maps`' `rw` mappings: heaps, thread stacks, thread-locals, the libraries'
//! data, read through `/proc/self/mem`) where one of some byte patterns occurs.
//!
//! ```text
//!  patterns (kept inverted) ─ /proc/self/maps: rw mappings ─ /proc/self/mem, 1 MiB chunks
//!    (overlapping by a pattern less one) ─ compare inverted ─ Hit { pattern, addr, mapping }
//!    ─ the chunk wiped before the next read
//! ```
//!
//! A test never holds the secret as it is: a copy of its own would be found. It keeps the
//! patterns inverted (bitwise not) and the scan compares them inverted; the scan's own
//! buffer is wiped after every chunk, so what it copied is not found by a later scan.
//! Used by `drivers/mb/tests/key_wipe.rs` (expanded keys after a session's drop) and
//! `ipsec/daemon/tests/ctl_wipe.rs` (a setkey request's keys after its reply). Linux only.

#![forbid(unsafe_code)]

use std::fs::File;
use std::os::unix::fs::FileExt;

use zeroize::Zeroize;

/// Where a pattern was found: its name, the address and the mapping it lies in.
#[derive(Debug, Clone)]
pub struct Hit {
    pub pattern: String,
    pub addr: u64,
    pub mapping: String,
}

impl std::fmt::Display for Hit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {:#x} in {}", self.pattern, self.addr, self.mapping)
    }
}

/// `bytes` inverted (each byte's bitwise not), for a pattern made at compile time: a
/// `const` made with it holds no copy of the secret as it is.
pub const fn inverted<const N: usize>(bytes: [u8; N]) -> [u8; N] {
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = !bytes[i];
        i += 1;
    }
    out
}

/// The hits as lines, for a failure's message.
pub fn lines(hits: &[Hit]) -> String {
    hits.iter().map(|h| format!("{h}\n")).collect()
}

/// Every place in the process's writable memory where one of `patterns` occurs; each
/// pattern is given inverted (its bytes' bitwise not), with a name for the hits.
///
/// # Panics
/// Where `/proc/self/maps` or `/proc/self/mem` cannot be read (not Linux, or no procfs),
/// or a pattern is empty: the test cannot look, so it must not pass.
pub fn scan(patterns: &[(&str, &[u8])]) -> Vec<Hit> {
    assert!(patterns.iter().all(|(_, p)| !p.is_empty()), "an empty pattern");
    let longest = patterns.iter().map(|(_, p)| p.len()).max().unwrap_or(1);
    // The first bytes the patterns can start with (as found in memory: not inverted).
    let mut first = [false; 256];
    for (_, p) in patterns {
        first[usize::from(!p[0])] = true;
    }
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    let mem = File::open("/proc/self/mem").expect("/proc/self/mem");
    let mut buf = vec![0u8; 1 << 20];
    let mut hits = Vec::new();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || !f[1].starts_with("rw") {
            continue;
        }
        let (start, end) = f[0].split_once('-').expect("a range");
        let (start, end) = (u64::from_str_radix(start, 16).unwrap(), u64::from_str_radix(end, 16).unwrap());
        let here = &start as *const u64 as u64;
        let mapping = match f.get(5) {
            Some(name) => (*name).to_owned(),
            None if (start..end).contains(&here) => {
                format!("this thread's stack ({here:#x} is in the scan's frame)")
            }
            None => format!("the anonymous mapping {start:#x}-{end:#x} (a heap arena or a thread's stack)"),
        };
        let mut at = start;
        while at < end {
            let want = (end - at).min(buf.len() as u64) as usize;
            let Ok(got) = mem.read_at(&mut buf[..want], at) else { break };
            if got == 0 {
                break;
            }
            let hay = &buf[..got];
            for i in (0..got).filter(|&i| first[usize::from(hay[i])]) {
                for (name, p) in patterns {
                    if i + p.len() <= got && hay[i..i + p.len()].iter().zip(p.iter()).all(|(a, b)| !a == *b) {
                        hits.push(Hit {
                            pattern: (*name).to_owned(),
                            addr: at + i as u64,
                            mapping: mapping.clone(),
                        });
                    }
                }
            }
            buf[..got].zeroize();
            // The next chunk overlaps this one by the longest pattern less one byte.
            at += if at + (got as u64) < end && got >= longest {
                (got - (longest - 1)) as u64
            } else {
                got as u64
            };
        }
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "memscan-test", inverted at compile time (the test holds no copy of it as it is).
    const INVERTED: [u8; 12] = inverted(*b"memscan-test");

    /// A pattern in a live heap buffer is found (two copies 1 MiB apart: the chunks
    /// overlap, so a copy across a chunk's edge is found too), and no longer once the
    /// buffer is wiped.
    #[test]
    fn finds_a_live_pattern_and_not_a_wiped_one() {
        let mut heap: Vec<u8> = vec![0; 3 << 20];
        for k in 1..3usize {
            let at = (k << 20) - 5;
            for (j, b) in INVERTED.iter().enumerate() {
                heap[at + j] = !b;
            }
        }
        let found = scan(&[("secret", &INVERTED)]);
        assert!(found.len() >= 2, "found {}: {}", found.len(), lines(&found));
        heap.zeroize();
        let left = scan(&[("secret", &INVERTED)]);
        assert!(left.is_empty(), "{}", lines(&left));
    }
}
