//! The soft driver through ocf against `openssl speed`, side by side in one run.
//!
//! For each algorithm and size it alternates: `openssl speed -elapsed -mr -bytes SIZE …` for
//! S seconds, then the same operation through ocf (direct dispatch, the request reused) for
//! S seconds; R rounds; it prints the median of each, their ratio, and the range of the
//! per-round ratios. Alternating keeps the two under the same machine conditions on a noisy
//! 2-core box.
//!
//! Run: `cargo run --release -p ocf-soft --example vs_openssl -- [--seconds S] [--rounds R]
//! [--sizes 1024,8192] [--alg aes-128-gcm,sha256]`. (cryptotest's `--openssl` will do this for every driver.)

use std::process::Command;
use std::time::{Duration, Instant};

use ocf::{CipherAlg, DigestAlg, Framework, Op, Request, Session, SessionParams};

struct Alg {
    name: &'static str,
    openssl_args: &'static [&'static str],
    params: SessionParams,
    op: Op,
    iv_len: usize,
}

fn algs() -> Vec<Alg> {
    vec![
        Alg {
            name: "aes-128-gcm",
            openssl_args: &["-aead", "-evp", "aes-128-gcm"],
            params: SessionParams::aead(CipherAlg::AesGcm, &[7u8; 16]),
            op: Op::Encrypt,
            iv_len: 12,
        },
        Alg {
            name: "chacha20-poly1305",
            openssl_args: &["-aead", "-evp", "chacha20-poly1305"],
            params: SessionParams::aead(CipherAlg::ChaCha20Poly1305, &[7u8; 32]),
            op: Op::Encrypt,
            iv_len: 12,
        },
        Alg {
            name: "aes-128-cbc decrypt",
            openssl_args: &["-decrypt", "-evp", "aes-128-cbc"],
            params: SessionParams::cipher(CipherAlg::AesCbc, &[7u8; 16]),
            op: Op::Decrypt,
            iv_len: 16,
        },
        Alg {
            name: "aes-128-cbc encrypt",
            openssl_args: &["-evp", "aes-128-cbc"],
            params: SessionParams::cipher(CipherAlg::AesCbc, &[7u8; 16]),
            op: Op::Encrypt,
            iv_len: 16,
        },
        Alg {
            name: "hmac-sha1",
            openssl_args: &["-hmac", "sha1"],
            params: SessionParams::hmac(DigestAlg::Sha1, &[9u8; 20]),
            op: Op::ComputeDigest,
            iv_len: 0,
        },
        Alg {
            name: "sha256",
            openssl_args: &["-evp", "sha256"],
            params: SessionParams::digest(DigestAlg::Sha256),
            op: Op::ComputeDigest,
            iv_len: 0,
        },
    ]
}

/// Bytes per second from `openssl speed -mr` (its `+F:` line carries bytes/s).
fn openssl_speed(args: &[&str], size: usize, seconds: u64) -> Result<f64, String> {
    let out = Command::new("openssl")
        .args(["speed", "-elapsed", "-mr", "-seconds", &seconds.to_string(), "-bytes", &size.to_string()])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run openssl: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("+F:").and_then(|rest| rest.rsplit(':').next()?.trim().parse().ok()))
        .ok_or_else(|| format!("no +F: line in openssl speed output for {args:?}"))
}

/// Bytes per second through ocf for about `time`.
fn ocf_speed(s: &Session, op: Op, iv_len: usize, size: usize, time: Duration) -> f64 {
    let mut slot = Some(Request::new(op, vec![0x5a; size]).with_iv(&vec![1u8; iv_len]));
    let start = Instant::now();
    let mut ops = 0u64;
    while start.elapsed() < time {
        for _ in 0..256 {
            let r = slot.take().expect("request");
            slot = Some(s.run(r).expect("ok"));
        }
        ops += 256;
    }
    ops as f64 * size as f64 / start.elapsed().as_secs_f64()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, default: &str| -> String {
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or(default.into())
    };
    let seconds: u64 = opt("--seconds", "1").parse().expect("--seconds N");
    let rounds: usize = opt("--rounds", "3").parse().expect("--rounds N");
    let sizes: Vec<usize> =
        opt("--sizes", "16,1024,8192").split(',').map(|s| s.parse().expect("--sizes a,b,c")).collect();
    let only = opt("--alg", "");

    let fw = Framework::new();
    ocf_soft::register(&fw).expect("register soft");
    println!("soft driver through ocf vs `openssl speed -elapsed`, median of {rounds} alternating rounds of {seconds} s");
    println!(
        "{:<22} {:>6} {:>12} {:>12} {:>7}  per-round ratios, lowest-highest",
        "algorithm", "bytes", "ocf MB/s", "openssl MB/s", "ratio"
    );
    for alg in
        algs().into_iter().filter(|a| only.is_empty() || only.split(',').any(|o| a.name.starts_with(o)))
    {
        let s = fw.new_session(&alg.params).expect("session");
        for &size in &sizes {
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                match openssl_speed(alg.openssl_args, size, seconds) {
                    Ok(v) => theirs.push(v),
                    Err(e) => {
                        eprintln!("{e}");
                        std::process::exit(2);
                    }
                }
                ours.push(ocf_speed(&s, alg.op, alg.iv_len, size, Duration::from_secs(seconds)));
            }
            // Each round's two figures were taken one after the other: their ratio is the
            // steadiest per-round view on a noisy machine.
            let mut per_round: Vec<f64> = ours.iter().zip(&theirs).map(|(o, t)| o / t).collect();
            per_round.sort_by(|a, b| a.total_cmp(b));
            let (lo, hi) = (per_round[0], per_round[per_round.len() - 1]);
            let (o, t) = (median(&mut ours), median(&mut theirs));
            println!(
                "{:<22} {:>6} {:>12.0} {:>12.0} {:>6.2}x  {lo:.2}-{hi:.2}x",
                alg.name,
                size,
                o / 1e6,
                t / 1e6,
                o / t
            );
        }
    }
}
