//! What a CBC packet's IV costs: 16 bytes from ocf's random operation through the core's
//! pools (`ipsec_core::ivs`, the soft driver's getrandom refilling 4 KiB at a time) against
//! 16 bytes from the thread's CSPRNG (`rand::rng()`, what the core used before).
//!
//! Run: `taskset -c 1 cargo bench -p ipsec-core --bench ivs`. The two cases take turns in
//! rounds of `ITERS` IVs each, the first case alternating; the report gives the median
//! nanoseconds per IV of each and the median of the per-round ratios.
//!
//! Measured (2026-12-02, the reference machine, three runs): ocf pool 43.1–51.1 ns,
//! `rand::rng()` 11.0–14.1 ns per IV, ratio 3.64–3.93: 32–37 ns more per CBC packet, about 3%
//! of a 1400-byte AES-CBC + HMAC-SHA1 packet. The kernel's ChaCha20 behind getrandom and the
//! pool's lock are most of it; a lock-free per-thread pool would take the second away.

use std::time::Instant;

use ipsec_core::ivs::IvSource;
use rand::RngCore;

const ROUNDS: usize = 200;
const ITERS: usize = 20_000;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let fw = ocf::Framework::new();
    ocf_soft::register(&fw).unwrap();
    let pool = IvSource::new(fw);
    let mut iv = [0u8; 16];
    let mut sink = 0u8;
    let mut time = |f: &mut dyn FnMut(&mut [u8; 16])| {
        let t = Instant::now();
        for _ in 0..ITERS {
            f(&mut iv);
            sink ^= iv[0];
        }
        t.elapsed().as_nanos() as f64 / ITERS as f64
    };
    let (mut ocf_ns, mut rand_ns, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let mut a = |iv: &mut [u8; 16]| pool.fill(iv).unwrap();
        let mut b = |iv: &mut [u8; 16]| rand::rng().fill_bytes(iv);
        let (x, y) = if round % 2 == 0 {
            let x = time(&mut a);
            (x, time(&mut b))
        } else {
            let y = time(&mut b);
            (time(&mut a), y)
        };
        ocf_ns.push(x);
        rand_ns.push(y);
        ratio.push(x / y);
    }
    println!(
        "16-byte IV: ocf pool {:.1} ns, rand::rng() {:.1} ns, ocf ÷ rand (median of {ROUNDS} rounds) {:.2} [{sink}]",
        median(&mut ocf_ns),
        median(&mut rand_ns),
        median(&mut ratio)
    );
}
