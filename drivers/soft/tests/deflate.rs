//! Raw DEFLATE (RFC 1951) through ocf's compression sessions on the soft driver.
//!
//! RFC 1951 has no test vectors, so the known answers come from an independent
//! implementation: Python's `zlib` (zlib 1.2/1.3, raw streams with `wbits=-15`), run here.
//! It compresses inputs of many sizes at several levels and strategies (stored, fixed and
//! dynamic Huffman blocks), ocf decompresses them; and ocf's output goes back to Python to
//! be decompressed there. Then: round trips at many sizes, a decompression bomb stopped at
//! the limit without allocating beyond it, and corrupt, truncated and random streams that
//! each give a named error and never panic.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ocf::{CompAlg, Error, ErrorKind, Framework, Op, Request, Session, SessionParams};

/// Counts the bytes allocated while `COUNTING` is set (the bomb test's proof).
struct Counting;
static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only adds a relaxed counter.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The largest IP packet: IPComp's decompression limit.
const LIMIT: usize = 65_535;

fn session() -> (Framework, Session) {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let s = fw.new_session(&SessionParams::compress(CompAlg::Deflate)).unwrap();
    (fw, s)
}

fn compress(s: &Session, data: &[u8]) -> Result<Vec<u8>, Error> {
    let r = Request::new(Op::Compress, data.to_vec()).with_output(vec![0u8; data.len()]);
    s.run(r).map(|r| r.result_payload()).map_err(|f| f.into_parts().0)
}

fn decompress(s: &Session, data: &[u8], limit: usize) -> Result<Vec<u8>, Error> {
    let r = Request::new(Op::Decompress, data.to_vec()).with_output(vec![0u8; limit]);
    s.run(r).map(|r| r.result_payload()).map_err(|f| f.into_parts().0)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(h: &str) -> Vec<u8> {
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
}

/// Text-like data: words from a small vocabulary, deterministic.
fn text(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "the ",
        "packet ",
        "session ",
        "driver ",
        "compress ",
        "of ",
        "and ",
        "IPsec ",
        "a ",
        "to ",
        "request ",
        "buffer ",
        "in ",
        "limit ",
        "DEFLATE ",
        "\n",
    ];
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len + 16);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(WORDS[(x % 16) as usize].as_bytes());
    }
    v.truncate(len);
    v
}

fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Runs `script` under python3 with `stdin`, returns stdout.
fn python(script: &str, stdin: &str) -> String {
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 (the independent DEFLATE implementation) must be installed");
    // Written from a thread: Python's output fills its pipe before it has read all input.
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.to_owned();
    let writer = std::thread::spawn(move || pipe.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "python3 failed");
    String::from_utf8(out.stdout).unwrap()
}

/// Python's zlib compresses (every level × strategy below, which between them produce
/// stored, fixed-Huffman and dynamic-Huffman blocks); ocf decompresses to the same bytes.
#[test]
fn known_answers_from_pythons_zlib_decompress() {
    let (_fw, s) = session();
    let script = r#"
import sys, zlib
for line in sys.stdin:
    data = bytes.fromhex(line.strip())
    for level in (0, 1, 6, 9):
        for strategy in (zlib.Z_DEFAULT_STRATEGY, zlib.Z_FIXED, zlib.Z_HUFFMAN_ONLY, zlib.Z_RLE):
            c = zlib.compressobj(level, zlib.DEFLATED, -15, 8, strategy)
            print(line.strip(), (c.compress(data) + c.flush()).hex())
"#;
    let mut inputs = String::new();
    for (i, len) in [0usize, 1, 2, 3, 17, 100, 258, 1400, 4096, 9000, 40_000].into_iter().enumerate() {
        inputs +=
            &format!("{}\n{}\n", hex(&text(len, i as u64 + 1)), hex(&random(len.min(3000), i as u64 + 7)));
    }
    let answers = python(script, &inputs);
    let mut n = 0;
    for line in answers.lines() {
        let (input, stream) = line.split_once(' ').unwrap_or((line, ""));
        let (input, stream) = (unhex(input), unhex(stream));
        let got =
            decompress(&s, &stream, LIMIT).unwrap_or_else(|e| panic!("{}-byte input: {e}", input.len()));
        assert_eq!(got, input);
        n += 1;
    }
    assert_eq!(n, 22 * 16, "every (input, level, strategy) was checked");
}

/// ocf compresses; Python's zlib decompresses to the same bytes.
#[test]
fn pythons_zlib_decompresses_what_ocf_compressed() {
    let (_fw, s) = session();
    let mut lines = String::new();
    let mut inputs = Vec::new();
    for len in [2usize, 10, 64, 90, 100, 512, 1400, 1500, 9000, 65_535] {
        let data = text(len, len as u64);
        let Ok(c) = compress(&s, &data) else { continue };
        lines += &format!("{}\n", hex(&c));
        inputs.push(data);
    }
    assert!(inputs.len() >= 8, "text of 64 bytes and more compresses");
    let script = r#"
import sys, zlib
for line in sys.stdin:
    d = zlib.decompressobj(-15)
    print((d.decompress(bytes.fromhex(line.strip())) + d.flush()).hex())
"#;
    let out = python(script, &lines);
    let got: Vec<Vec<u8>> = out.lines().map(unhex).collect();
    assert_eq!(got, inputs);
}

#[test]
fn round_trips_at_many_sizes() {
    let (_fw, s) = session();
    let sizes = (0..300).chain((300..3000).step_by(37)).chain([8192, 9000, 16_384, 65_535]);
    let (mut shrank, mut kept) = (0, 0);
    for len in sizes {
        for data in [text(len, len as u64 + 3), vec![0u8; len], random(len, len as u64 + 5)] {
            match compress(&s, &data) {
                Ok(c) => {
                    assert!(c.len() < data.len(), "a result is smaller than its input");
                    assert_eq!(decompress(&s, &c, LIMIT).unwrap(), data, "{len} bytes");
                    // The exact length is room enough.
                    assert_eq!(decompress(&s, &c, data.len()).unwrap(), data);
                    shrank += 1;
                }
                Err(Error::Incompressible { len: l }) => {
                    assert_eq!(l, data.len());
                    kept += 1;
                }
                Err(e) => panic!("{len} bytes: {e}"),
            }
        }
    }
    assert!(shrank > 600 && kept > 300, "both outcomes occur: {shrank} shrank, {kept} kept");
}

/// A stream of a few KiB that inflates to 16 MiB stops at the limit: the request fails
/// with `OutputLimit`, counted, and nothing was allocated for the output beyond the
/// caller's 65,535-byte buffer.
#[test]
fn a_decompression_bomb_stops_at_the_limit() {
    let (fw, s) = session();
    // Built with Python's zlib (level 9 over zeros), as an attacker would.
    let bombs = python(
        "import zlib\nfor n in (1 << 18, 1 << 24):\n c = zlib.compressobj(9, zlib.DEFLATED, -15)\n print((c.compress(bytes(n)) + c.flush()).hex())",
        "",
    );
    let bombs: Vec<Vec<u8>> = bombs.lines().map(unhex).collect();
    assert!(bombs[0].len() < 400, "a few hundred bytes: {}", bombs[0].len());
    assert!(bombs[1].len() < 20_000, "{} bytes for 16 MiB", bombs[1].len());
    for bomb in &bombs {
        let req = Request::new(Op::Decompress, bomb.clone()).with_output(vec![0u8; LIMIT]);
        let before = s.stats().errors.get(ErrorKind::OutputLimit);
        ALLOCATED.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::Relaxed);
        let failed = s.run(req);
        COUNTING.store(false, Ordering::Relaxed);
        let allocated = ALLOCATED.load(Ordering::Relaxed);
        let failed = failed.expect_err("the bomb exceeds the limit");
        assert_eq!(failed.error(), &Error::OutputLimit { limit: LIMIT });
        assert_eq!(s.stats().errors.get(ErrorKind::OutputLimit), before + 1);
        assert_eq!(failed.request.out.as_ref().unwrap().len(), LIMIT, "the output buffer did not grow");
        assert!(allocated < 16_384, "{allocated} bytes allocated while decompressing the bomb");
    }
    // Given room for all of it, the small one really is 256 KiB of zeros.
    assert_eq!(decompress(&s, &bombs[0], 1 << 18).unwrap(), vec![0u8; 1 << 18]);
    assert_eq!(fw.driver_stats("soft").unwrap().errors.get(ErrorKind::OutputLimit), 2);
}

/// Every truncation of a valid stream, every single-bit flip of one, and random bytes:
/// a named error (or, for some flips and random bytes, some other valid stream), never a
/// panic, never more than the limit.
#[test]
fn corrupt_truncated_and_random_streams_fail_by_name() {
    let (_fw, s) = session();
    let data = text(1400, 99);
    let good = compress(&s, &data).unwrap();
    for cut in 0..good.len() {
        assert_eq!(decompress(&s, &good[..cut], LIMIT), Err(Error::BadCompressedData), "cut at {cut}");
    }
    let named = |r: Result<Vec<u8>, Error>, limit: usize| match r {
        Ok(v) => assert!(v.len() <= limit),
        Err(Error::BadCompressedData | Error::OutputLimit { .. }) => {}
        Err(e) => panic!("unexpected {e:?}"),
    };
    for bit in 0..good.len() * 8 {
        let mut bad = good.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        named(decompress(&s, &bad, 1400), 1400);
    }
    for seed in 0..2000u64 {
        let junk = random((seed as usize * 7) % 1500, seed + 11);
        named(decompress(&s, &junk, 1500), 1500);
    }
}

/// Compression sessions go through the dispatcher like any other: under every routing
/// policy, beside a routable driver that does not compress (never chosen), requests
/// complete on the soft driver and are counted there.
#[test]
fn routed_under_every_policy_only_to_a_driver_that_compresses() {
    for policy in ocf::Policy::ALL {
        let fw = Framework::with_config(ocf::Config { policy, ..ocf::Config::default() });
        fw.register(std::sync::Arc::new(ocf_null::NullDriver::routable("null-routable"))).unwrap();
        ocf_soft::register(&fw).unwrap();
        let s = fw.new_session(&SessionParams::compress(CompAlg::Deflate)).unwrap();
        for i in 0..300u64 {
            let data = text(100 + (i as usize * 13) % 3000, i);
            let c = compress(&s, &data).unwrap();
            assert_eq!(decompress(&s, &c, LIMIT).unwrap(), data, "{policy:?}");
        }
        assert_eq!(s.stats().ops, 600, "{policy:?}");
        assert_eq!(fw.driver_stats("soft").unwrap().ops, 600, "{policy:?}");
        assert_eq!(fw.driver_stats("null-routable").unwrap().ops, 0, "{policy:?}");
    }
}

/// Scatter-gather input and output, and a result at an offset in `out`: the same bytes.
#[test]
fn segmented_buffers_and_an_output_offset() {
    let (_fw, s) = session();
    let data = text(1400, 42);
    let segs = |v: &[u8]| ocf::Buffer::Segments(v.chunks(333).map(<[u8]>::to_vec).collect());
    let mut r = Request::new(Op::Compress, segs(&data)).with_output(segs(&[0u8; 1500]));
    r.out_offset = 7;
    let r = s.run(r).unwrap();
    let packed = r.result_payload();
    assert_eq!(packed, compress(&s, &data).unwrap(), "same stream as from contiguous buffers");
    assert_eq!(r.result_buf().to_vec()[..7], [0u8; 7], "nothing written before the offset");
    let mut r = Request::new(Op::Decompress, segs(&packed)).with_output(segs(&[0u8; 2000]));
    r.out_offset = 100;
    let r = s.run(r).unwrap();
    assert_eq!((r.result_len(), r.result_payload()), (1400, data));
}
