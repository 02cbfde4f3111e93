//! What IPComp (RFC 3173, DEFLATE through ocf's soft driver) costs per packet and what it
//! saves: 1400-byte payloads of a compressible stream (text-like: the repository's
//! `docs/*.md`, cut in packets) and an incompressible one (random bytes), through
//! `ipcomp::IpComp::output` and `input` behind a 20-byte IPv4 header, with the AES-128-GCM
//! seal of the same 1400 bytes through ocf beside them as the yardstick (ESP's crypto).
//!
//! Run: `taskset -c 1 cargo bench -p ipsec-core --bench ipcomp` (`-- --rounds N`). The
//! cases take turns, each round every case once on the same packets; a cell is the median
//! over the rounds, ns per packet. "wire ÷ in" is the bytes sent (IPComp header included,
//! packets sent as they are counted whole) over the payload bytes.

use std::hint::black_box;
use std::time::Instant;

use ipsec_core::ipcomp::{IpComp, Scratch, Sent};
use ipsec_wire::IpProtocol;
use ocf::{CipherAlg, Framework, Op, Request, SessionParams};

const SIZE: usize = 1400;
const HEADERS: usize = 20;

fn packets(random: bool) -> Vec<Vec<u8>> {
    let data: Vec<u8> = if random {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        (0..SIZE * 64)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    } else {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs");
        let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        files
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .flat_map(|f| std::fs::read(f).unwrap())
            .collect()
    };
    data.chunks_exact(SIZE)
        .take(64)
        .map(|c| {
            let mut p = vec![0x45; HEADERS];
            p.extend_from_slice(c);
            p
        })
        .collect()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .map_or(31, |n| n.parse().expect("--rounds N"));
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let c = IpComp::new(&fw, 0x4321).unwrap();
    let gcm = fw.new_session(&SessionParams::aead(CipherAlg::AesGcm, &[7u8; 16])).unwrap();
    let mut scratch = Scratch::default();
    let streams = [("compressible", packets(false)), ("incompressible", packets(true))];

    // Ratio, and the compressed packets for the input case.
    let mut compressed = Vec::new();
    for (name, ps) in &streams {
        let (mut wire, mut sent) = (0usize, 0usize);
        let mut mine = Vec::new();
        for p in ps {
            let mut q = p.clone();
            match c.output(&mut scratch, &mut q, HEADERS, IpProtocol::IPV4).unwrap() {
                Sent::Compressed { .. } => {
                    sent += 1;
                    mine.push(q.clone());
                }
                Sent::NotSmaller | Sent::BelowThreshold => {}
            }
            wire += q.len() - HEADERS;
        }
        println!(
            "{name}: {sent} of {} packets compressed; wire ÷ in = {:.3}",
            ps.len(),
            wire as f64 / (ps.len() * SIZE) as f64
        );
        compressed.push(mine);
    }

    let cases = ["output compressible", "output incompressible", "input compressible", "aes-128-gcm seal"];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    let mut gcm_req = Some(Request::new(Op::Encrypt, vec![0u8; SIZE]).with_iv(&[1u8; 12]));
    for round in 0..rounds {
        for k in 0..cases.len() {
            let case = (k + round) % cases.len();
            let t = Instant::now();
            let n = match case {
                0 | 1 => {
                    for p in &streams[case].1 {
                        let mut q = p.clone();
                        black_box(c.output(&mut scratch, &mut q, HEADERS, IpProtocol::IPV4).unwrap());
                    }
                    streams[case].1.len()
                }
                2 => {
                    for p in &compressed[0] {
                        let mut q = p.clone();
                        black_box(c.input(&mut scratch, &mut q, HEADERS).unwrap());
                    }
                    compressed[0].len()
                }
                _ => {
                    for _ in 0..64 {
                        let r = gcm.run(gcm_req.take().unwrap()).unwrap();
                        gcm_req = Some(black_box(r));
                    }
                    64
                }
            };
            samples[case].push(t.elapsed().as_nanos() as f64 / n as f64);
        }
    }
    println!(
        "\nns per {SIZE}-byte packet, median of {rounds} rounds (the IPComp cases include a packet copy)"
    );
    for (name, s) in cases.iter().zip(&mut samples) {
        println!("{name:24} {:8.0}", median(s));
    }
}
