//! Raw DEFLATE (RFC 1951) on IPsec-sized packets, three libraries side by side:
//! miniz_oxide (flate2's default backend), flate2 over zlib-rs, and libdeflate (libdeflater).
//!
//! Each packet is compressed into a buffer one byte shorter than itself, as IPComp does
//! (RFC 3173 §2.2: a result that is not smaller is not sent), and the compressible packets
//! are decompressed back into a 65,535-byte buffer (the largest IP packet, IPComp's limit).
//! State (compressor, decompressor) is built once and reset per packet.
//!
//! Usage: `taskset -c 1 ./target/release/deflatebench [--rounds N] [--level L,..] [TEXT FILES..]`
//! (text defaults to `../../docs/*.md`). Every round times every case once (alternating);
//! a cell is the median over the rounds, ns per 1400-byte packet.

use std::hint::black_box;
use std::time::Instant;

const PACKET: usize = 1400;
const LIMIT: usize = 65_535;

trait Lib {
    fn name(&self) -> String;
    /// Compressed length, or None if the result is not shorter than the input.
    fn compress(&mut self, input: &[u8], out: &mut [u8]) -> Option<usize>;
    fn decompress(&mut self, input: &[u8], out: &mut [u8]) -> usize;
}

struct Miniz {
    level: u8,
    c: Box<miniz_oxide::deflate::core::CompressorOxide>,
    d: Box<miniz_oxide::inflate::core::DecompressorOxide>,
}

impl Miniz {
    fn new(level: u8) -> Miniz {
        use miniz_oxide::deflate::core::{create_comp_flags_from_zip_params, CompressorOxide};
        // window_bits < 0: raw DEFLATE, no zlib header; strategy 0 = default.
        let flags = create_comp_flags_from_zip_params(level.into(), -15, 0);
        Miniz { level, c: Box::new(CompressorOxide::new(flags)), d: Box::default() }
    }
}

impl Lib for Miniz {
    fn name(&self) -> String {
        format!("miniz_oxide L{}", self.level)
    }
    fn compress(&mut self, input: &[u8], out: &mut [u8]) -> Option<usize> {
        use miniz_oxide::deflate::core::{compress, TDEFLFlush, TDEFLStatus};
        self.c.reset();
        let (status, _, n) = compress(&mut self.c, input, out, TDEFLFlush::Finish);
        (status == TDEFLStatus::Done).then_some(n)
    }
    fn decompress(&mut self, input: &[u8], out: &mut [u8]) -> usize {
        use miniz_oxide::inflate::core::{decompress, inflate_flags};
        self.d.init();
        let (status, _, n) =
            decompress(&mut self.d, input, out, 0, inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF);
        assert_eq!(status, miniz_oxide::inflate::TINFLStatus::Done);
        n
    }
}

struct ZlibRs {
    level: u32,
    c: flate2::Compress,
    d: flate2::Decompress,
}

impl ZlibRs {
    fn new(level: u32) -> ZlibRs {
        ZlibRs {
            level,
            c: flate2::Compress::new(flate2::Compression::new(level), false),
            d: flate2::Decompress::new(false),
        }
    }
}

impl Lib for ZlibRs {
    fn name(&self) -> String {
        format!("flate2+zlib-rs L{}", self.level)
    }
    fn compress(&mut self, input: &[u8], out: &mut [u8]) -> Option<usize> {
        self.c.reset();
        match self.c.compress(input, out, flate2::FlushCompress::Finish) {
            Ok(flate2::Status::StreamEnd) => Some(self.c.total_out() as usize),
            _ => {
                // zlib-rs 0.6.8 panicked ("buf.len() must fit in remaining()", deflate.rs:1073)
                // on the 47th random packet when a stream that ran out of room was `reset`
                // and reused: a stream that did not finish is replaced instead.
                self.c = flate2::Compress::new(flate2::Compression::new(self.level), false);
                None
            }
        }
    }
    fn decompress(&mut self, input: &[u8], out: &mut [u8]) -> usize {
        self.d.reset(false);
        let s = self.d.decompress(input, out, flate2::FlushDecompress::Finish).unwrap();
        assert_eq!(s, flate2::Status::StreamEnd);
        self.d.total_out() as usize
    }
}

struct Libdeflate {
    level: i32,
    c: libdeflater::Compressor,
    d: libdeflater::Decompressor,
}

impl Libdeflate {
    fn new(level: i32) -> Libdeflate {
        Libdeflate {
            level,
            c: libdeflater::Compressor::new(libdeflater::CompressionLvl::new(level).unwrap()),
            d: libdeflater::Decompressor::new(),
        }
    }
}

impl Lib for Libdeflate {
    fn name(&self) -> String {
        format!("libdeflate L{}", self.level)
    }
    fn compress(&mut self, input: &[u8], out: &mut [u8]) -> Option<usize> {
        self.c.deflate_compress(input, out).ok()
    }
    fn decompress(&mut self, input: &[u8], out: &mut [u8]) -> usize {
        self.d.deflate_decompress(input, out).unwrap()
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--threshold") {
        return threshold();
    }
    let mut rounds = 11;
    let mut levels = vec![1u32, 6];
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => rounds = args.next().unwrap().parse().unwrap(),
            "--level" => levels = args.next().unwrap().split(',').map(|l| l.parse().unwrap()).collect(),
            _ => files.push(a),
        }
    }
    if files.is_empty() {
        let mut docs: Vec<_> = std::fs::read_dir("../../docs")
            .expect("run from tools/deflatebench or name text files")
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        docs.sort();
        files = docs.into_iter().map(|p| p.display().to_string()).collect();
    }
    let text: Vec<u8> = files.iter().flat_map(|f| std::fs::read(f).unwrap()).collect();
    let text_packets: Vec<&[u8]> = text.chunks_exact(PACKET).take(64).collect();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let random: Vec<u8> = (0..PACKET * 64)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let random_packets: Vec<&[u8]> = random.chunks_exact(PACKET).collect();

    let mut libs: Vec<Box<dyn Lib>> = Vec::new();
    for &l in &levels {
        libs.push(Box::new(Miniz::new(l as u8)));
        libs.push(Box::new(ZlibRs::new(l)));
        libs.push(Box::new(Libdeflate::new(l as i32)));
    }

    // Correctness and ratio: every library's output decompresses (with every library) to the input.
    let mut out = vec![0u8; PACKET];
    let mut back = vec![0u8; LIMIT];
    let mut compressed: Vec<Vec<Vec<u8>>> = Vec::new();
    println!("{} text packets from {} files; 64 random packets; {} B each", text_packets.len(), files.len(), PACKET);
    println!("\n| library | text: mean compressed size | text ratio | random: packets that shrank |");
    println!("|---|---:|---:|---:|");
    for i in 0..libs.len() {
        let mut mine = Vec::new();
        for p in &text_packets {
            let n = libs[i].compress(p, &mut out[..PACKET - 1]).expect("text compresses");
            mine.push(out[..n].to_vec());
            for j in 0..libs.len() {
                let m = libs[j].decompress(&out[..n], &mut back);
                assert_eq!(&back[..m], *p, "{} -> {}", libs[i].name(), libs[j].name());
            }
        }
        let shrank = random_packets.iter().filter(|p| libs[i].compress(p, &mut out[..PACKET - 1]).is_some()).count();
        let mean = mine.iter().map(Vec::len).sum::<usize>() as f64 / mine.len() as f64;
        println!("| {} | {:.0} | {:.3} | {} |", libs[i].name(), mean, mean / PACKET as f64, shrank);
        compressed.push(mine);
    }

    // Timing: each case calibrated to ~5 ms per sample; each round runs every case once.
    let cases = ["compress text", "compress random", "decompress text"];
    let mut samples = vec![vec![Vec::new(); cases.len()]; libs.len()];
    let time = |lib: &mut Box<dyn Lib>, case: usize, c: &[Vec<u8>], iters: usize, out: &mut [u8], back: &mut [u8]| {
        let t = Instant::now();
        for k in 0..iters {
            match case {
                0 => {
                    black_box(lib.compress(text_packets[k % text_packets.len()], &mut out[..PACKET - 1]));
                }
                1 => {
                    black_box(lib.compress(random_packets[k % random_packets.len()], &mut out[..PACKET - 1]));
                }
                _ => {
                    black_box(lib.decompress(&c[k % c.len()], back));
                }
            }
        }
        t.elapsed().as_nanos() as f64 / iters as f64
    };
    let mut iters = vec![vec![0usize; cases.len()]; libs.len()];
    for (i, lib) in libs.iter_mut().enumerate() {
        for case in 0..cases.len() {
            let ns = time(lib, case, &compressed[i], 200, &mut out, &mut back);
            iters[i][case] = ((5e6 / ns) as usize).max(64);
        }
    }
    for _ in 0..rounds {
        for (i, lib) in libs.iter_mut().enumerate() {
            for case in 0..cases.len() {
                let ns = time(lib, case, &compressed[i], iters[i][case], &mut out, &mut back);
                samples[i][case].push(ns);
            }
        }
    }
    println!("\nns per {PACKET}-byte packet, median of {rounds} alternating rounds (÷ fastest of the row's level in brackets)\n");
    println!("| library | {} |", cases.join(" | "));
    println!("|---|{}", "---:|".repeat(cases.len()));
    let med: Vec<Vec<f64>> = samples.iter_mut().map(|s| s.iter_mut().map(|v| median(v)).collect()).collect();
    for (i, lib) in libs.iter().enumerate() {
        let group = i / 3 * 3..i / 3 * 3 + 3;
        let cells: Vec<String> = (0..cases.len())
            .map(|c| {
                let best = group.clone().map(|j| med[j][c]).fold(f64::MAX, f64::min);
                format!("{:.0} ({:.2}x)", med[i][c], med[i][c] / best)
            })
            .collect();
        println!("| {} | {} |", lib.name(), cells.join(" | "));
    }
}

/// `--threshold`: below which payload size IPComp should not try. For payloads of each size
/// cut from the text (docs/*.md), with libdeflate level 1: the share that came out smaller
/// by more than the 4-byte IPComp header, the mean bytes saved (counting the header and
/// zero for packets sent as is), and the time an attempt costs.
fn threshold() {
    let mut docs: Vec<_> = std::fs::read_dir("../../docs")
        .expect("run from tools/deflatebench")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    let text: Vec<u8> = docs.iter().flat_map(|f| std::fs::read(f).unwrap()).collect();
    let mut lib = Libdeflate::new(1);
    let mut out = vec![0u8; 4096];
    println!("| payload bytes | smaller by > 4 B | mean bytes saved | ns per attempt |");
    println!("|---:|---:|---:|---:|");
    for size in [16usize, 32, 48, 64, 80, 90, 96, 112, 128, 160, 192, 256, 512] {
        let packets: Vec<&[u8]> = text.chunks_exact(size).take(2000).collect();
        let (mut wins, mut saved) = (0usize, 0usize);
        for p in &packets {
            if let Some(n) = lib.compress(p, &mut out[..size - 1]) {
                if n + 4 < size {
                    wins += 1;
                    saved += size - n - 4;
                }
            }
        }
        let t = Instant::now();
        let reps = 20;
        for _ in 0..reps {
            for p in &packets {
                black_box(lib.compress(p, &mut out[..size - 1]));
            }
        }
        let ns = t.elapsed().as_nanos() as f64 / (reps * packets.len()) as f64;
        println!(
            "| {size} | {:.0}% | {:.1} | {ns:.0} |",
            100.0 * wins as f64 / packets.len() as f64,
            saved as f64 / packets.len() as f64
        );
    }
}
