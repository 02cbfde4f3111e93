//! The soft driver's public-key operations through ocf, next to the library alone
//! (aws-lc-rs, the same calls the driver makes, keys parsed once) and to `openssl speed`,
//! in one run: the issue-32 aim is soft through ocf ≥ 0.95x `openssl speed` for RSA-2048
//! sign/verify, ECDSA P-256 sign/verify, ECDH P-256, X25519 and Ed25519 sign.
//!
//! Run: `taskset -c 1 cargo run --release -p ocf-soft --example asym_speed -- [--ms 300]
//! [--rounds 5] [--seconds 1]`. Each round times every case once, in turn, and after the
//! cases of each of `rsa2048 ecdsap256 ecdhp256 ecdhx25519 ed25519` runs `openssl speed
//! -seconds N` for it (so a slow neighbour hits all three columns alike). Prints the median
//! op/s over the rounds with its range, and the medians of the per-round ratios ocf / library
//! and ocf / `openssl speed`. Rates are per second of the process's CPU time, as `openssl
//! speed` counts them (without `-elapsed`, it divides by getrusage's user time), so time the
//! scheduler gives a neighbour is not counted against either.

use std::process::Command;

use aws_lc_rs::agreement::{self, UnparsedPublicKey};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self as sig, EcdsaKeyPair, Ed25519KeyPair, KeyPair, ParsedPublicKey, RsaKeyPair};
use ocf::asym::AsymKey;
use ocf::{AsymAlg, Curve, DigestAlg, Framework, Op, PublicKey, Request, SessionParams, SigEncoding};

const MSG: &[u8] = b"ocf asym_speed: a 36-byte message..";

/// A timed operation.
type Run = Box<dyn FnMut()>;

struct Case {
    name: &'static str,
    /// The `openssl speed` algorithm, and the figure it is compared with: (line marker,
    /// column from the end).
    speed_alg: &'static str,
    speed: (&'static str, usize),
    ocf: Run,
    lib: Run,
    ocf_rates: Vec<f64>,
    lib_rates: Vec<f64>,
}

/// The process's CPU time (user + system), in seconds.
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Operations per second of CPU time (what `openssl speed` reports without `-elapsed`: its
/// counts over getrusage's user time), for about `ms` of it.
fn rate(f: &mut dyn FnMut(), ms: u64) -> f64 {
    let c0 = cpu_seconds();
    let mut n = 0u64;
    while cpu_seconds() - c0 < ms as f64 / 1000.0 {
        for _ in 0..8 {
            f();
        }
        n += 8;
    }
    n as f64 / (cpu_seconds() - c0)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().unwrap())
    };
    let (ms, rounds, seconds) = (arg("--ms", 300), arg("--rounds", 5), arg("--seconds", 1));

    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let session = |alg, key| fw.new_session_on("soft", &SessionParams::asymmetric(alg, key)).unwrap();

    let rng = SystemRandom::new();
    let rsa = AsymAlg::RsaPkcs1 { hash: DigestAlg::Sha256 };
    let rsa_key = fw.generate_key(rsa, 2048).unwrap();
    let ecdsa = AsymAlg::Ecdsa { curve: Curve::P256, hash: DigestAlg::Sha256, encoding: SigEncoding::Der };
    let ecdsa_key = fw.generate_key(ecdsa, 0).unwrap();
    let ed_key = fw.generate_key(AsymAlg::Ed25519, 0).unwrap();

    let mut out: Vec<Case> = Vec::new();
    for (alg, key, speed_alg, name_s, name_v, marker) in [
        (rsa, rsa_key, "rsa2048", "rsa2048 sign", "rsa2048 verify", "rsa 2048 bits"),
        (ecdsa, ecdsa_key, "ecdsap256", "ecdsap256 sign", "ecdsap256 verify", "ecdsa (nistp256)"),
        (AsymAlg::Ed25519, ed_key, "ed25519", "ed25519 sign", "ed25519 verify", "EdDSA (Ed25519)"),
    ] {
        let signer = session(alg, AsymKey::Private(key.clone()));
        let room = alg.max_output_len(2048);
        let raw_pub =
            signer.run(Request::asymmetric(Op::PublicKey, Vec::new(), 1024)).unwrap().result_payload();
        let signature =
            signer.run(Request::asymmetric(Op::Sign, MSG.to_vec(), room)).unwrap().result_payload();
        let verifier = session(alg, AsymKey::Public(PublicKey::raw(&raw_pub)));
        let (lib_sign, lib_verify): (Run, Run) = match alg {
            AsymAlg::RsaPkcs1 { .. } => {
                let kp = RsaKeyPair::from_pkcs8(key.bytes()).unwrap();
                let pk = ParsedPublicKey::new(&sig::RSA_PKCS1_2048_8192_SHA256, &raw_pub).unwrap();
                let (rng, s) = (rng.clone(), signature.clone());
                let mut buf = vec![0; 256];
                (
                    Box::new(move || kp.sign(&sig::RSA_PKCS1_SHA256, &rng, MSG, &mut buf).unwrap()),
                    Box::new(move || pk.verify_sig(MSG, &s).unwrap()),
                )
            }
            AsymAlg::Ecdsa { .. } => {
                let kp = EcdsaKeyPair::from_pkcs8(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, key.bytes()).unwrap();
                let pk = ParsedPublicKey::new(&sig::ECDSA_P256_SHA256_ASN1, &raw_pub).unwrap();
                let (rng, s) = (rng.clone(), signature.clone());
                (
                    Box::new(move || {
                        std::hint::black_box(kp.sign(&rng, MSG).unwrap());
                    }),
                    Box::new(move || pk.verify_sig(MSG, &s).unwrap()),
                )
            }
            _ => {
                let kp = Ed25519KeyPair::from_pkcs8_maybe_unchecked(key.bytes()).unwrap();
                let pk = ParsedPublicKey::new(&sig::ED25519, kp.public_key().as_ref()).unwrap();
                let s = signature.clone();
                (
                    Box::new(move || {
                        std::hint::black_box(kp.sign(MSG));
                    }),
                    Box::new(move || pk.verify_sig(MSG, &s).unwrap()),
                )
            }
        };
        out.push(Case {
            name: name_s,
            speed_alg,
            speed: (marker, 1),
            ocf: Box::new(move || {
                signer.run(Request::asymmetric(Op::Sign, MSG.to_vec(), room)).unwrap();
            }),
            lib: lib_sign,
            ocf_rates: vec![],
            lib_rates: vec![],
        });
        let s = signature.clone();
        out.push(Case {
            name: name_v,
            speed_alg,
            speed: (marker, 0),
            ocf: Box::new(move || {
                verifier.run(Request::verify(MSG, &s)).unwrap();
            }),
            lib: lib_verify,
            ocf_rates: vec![],
            lib_rates: vec![],
        });
    }
    for (alg, lib_alg, name, marker) in [
        (AsymAlg::Ecdh(Curve::P256), &agreement::ECDH_P256, "ecdhp256", "ecdh (nistp256)"),
        (AsymAlg::X25519, &agreement::X25519, "ecdhx25519", "ecdh (X25519)"),
    ] {
        let speed_alg = name;
        let mine = fw.generate_key(alg, 0).unwrap();
        let peer = session(alg, AsymKey::Private(fw.generate_key(alg, 0).unwrap()));
        let peer_pub =
            peer.run(Request::asymmetric(Op::PublicKey, Vec::new(), 128)).unwrap().result_payload();
        let s = session(alg, AsymKey::Private(mine.clone()));
        let key = match alg {
            AsymAlg::X25519 => {
                let pkey = openssl::pkey::PKey::private_key_from_pkcs8(mine.bytes()).unwrap();
                agreement::PrivateKey::from_private_key(lib_alg, &pkey.raw_private_key().unwrap()).unwrap()
            }
            _ => agreement::PrivateKey::from_private_key_der(lib_alg, mine.bytes()).unwrap(),
        };
        let p2 = peer_pub.clone();
        out.push(Case {
            name,
            speed_alg,
            speed: (marker, 0),
            ocf: Box::new(move || {
                s.run(Request::asymmetric(Op::Derive, peer_pub.clone(), 64)).unwrap();
            }),
            lib: Box::new(move || {
                agreement::agree(&key, UnparsedPublicKey::new(lib_alg, &p2), (), |k| {
                    std::hint::black_box(k);
                    Ok(())
                })
                .unwrap()
            }),
            ocf_rates: vec![],
            lib_rates: vec![],
        });
    }

    // Each round takes the operations in turn: ocf and the library alone for each case of
    // one `openssl speed` algorithm, then `openssl speed` for it, so that the three columns
    // of a row are measured within seconds of each other and see the same load. The ratio
    // to `openssl speed` is taken per round; its median is printed.
    let mut speed_rates: Vec<Vec<f64>> = vec![vec![]; out.len()];
    let mut ratios: Vec<Vec<f64>> = vec![vec![]; out.len()];
    let mut text = String::new();
    let groups: Vec<&'static str> = out.iter().map(|c| c.speed_alg).fold(vec![], |mut v, a| {
        if !v.contains(&a) {
            v.push(a);
        }
        v
    });
    for round in 0..rounds {
        for group in &groups {
            for c in out.iter_mut().filter(|c| c.speed_alg == *group) {
                c.ocf_rates.push(rate(&mut c.ocf, ms));
                c.lib_rates.push(rate(&mut c.lib, ms));
            }
            let speed = Command::new("openssl")
                .args(["speed", "-seconds", &seconds.to_string(), group])
                .output()
                .expect("openssl speed runs");
            let t = String::from_utf8_lossy(&speed.stdout).to_string();
            for (i, c) in out.iter().enumerate().filter(|(_, c)| c.speed_alg == *group) {
                let figure = t.lines().find(|l| l.contains(c.speed.0)).and_then(|l| {
                    let nums: Vec<f64> = l.split_whitespace().filter_map(|w| w.parse().ok()).collect();
                    nums.len().checked_sub(1 + c.speed.1).map(|i| nums[i])
                });
                if let Some(f) = figure {
                    speed_rates[i].push(f);
                    ratios[i].push(c.ocf_rates.last().unwrap() / f);
                }
            }
            text.push_str(&t);
        }
        eprintln!("round {} of {rounds}", round + 1);
    }

    println!("# ocf soft vs aws-lc-rs alone vs `openssl speed -seconds {seconds}`: op per CPU second, median of {rounds} rounds of {ms} ms (range)");
    println!(
        "{:<18} {:>26} {:>26} {:>26} {:>10} {:>10}",
        "operation", "soft through ocf", "aws-lc-rs alone", "openssl speed", "ocf/lib", "ocf/speed"
    );
    for ((c, speed), ratio) in out.iter().zip(&speed_rates).zip(&ratios) {
        let figure = (!speed.is_empty()).then(|| median(speed));
        let range = |v: &[f64]| {
            format!(
                "{:.0} ({:.0}-{:.0})",
                median(v),
                v.iter().cloned().fold(f64::MAX, f64::min),
                v.iter().cloned().fold(0.0, f64::max)
            )
        };
        println!(
            "{:<18} {:>26} {:>26} {:>26} {:>10.3} {:>10}",
            c.name,
            range(&c.ocf_rates),
            range(&c.lib_rates),
            figure.map_or("-".into(), |_| range(speed)),
            median(&c.ocf_rates.iter().zip(&c.lib_rates).map(|(o, l)| o / l).collect::<Vec<_>>()),
            figure.map_or("-".into(), |_| format!("{:.3}", median(ratio))),
        );
    }
    println!(
        "\n# openssl speed output (every round)\n{}",
        text.lines().filter(|l| l.contains("bits")).collect::<Vec<_>>().join("\n")
    );
}
