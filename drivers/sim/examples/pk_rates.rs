//! Public-key operations per second on `soft` alone, on a simulated card alone, and routed
//! over both (`cost-model`, what `-d auto` does), side by side in one run: which operations
//! the card's table makes it win, lose or tie, what it measures alone, and whether routing
//! reaches the best single driver.
//!
//! Each operation runs in rounds; in a round each of the three sessions (soft, card, auto)
//! gets `SECS` seconds in turn, with `THREADS` threads each running one request at a time,
//! so that the machine's noise hits the three alike. Per operation it prints the median
//! over rounds of each one's ops/s, the card's model rate (1 s / its table time), how late
//! the card's completions were (the device thread computing slower than the model), and
//! auto ÷ the better single driver.
//!
//! Run with the card on a core of its own and the host's work on the other:
//! `taskset -c 0 cargo run --release -p ocf-sim --example pk_rates -- [CARD] [SECS] [ROUNDS] [THREADS]`
//! (default `qat-like,cpu=1 0.5 3 4`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ocf::asym::{AsymKey, Curve, ModpGroup, PublicKey};
use ocf::{AsymAlg, DigestAlg, Framework, Key, Op, Request, Session, SessionParams};
use ocf_sim::{PkClass, SimDriver};

/// One measured operation: its name, session parameters and request.
struct Case {
    name: &'static str,
    class: &'static str,
    params: SessionParams,
    request: Box<dyn Fn() -> Request + Send + Sync>,
}

fn cases(fw: &Framework) -> Vec<Case> {
    let soft = |p: &SessionParams, op: Op, input: &[u8]| -> Vec<u8> {
        let s = fw.new_session_on("soft", p).expect("soft session");
        s.run(Request::asymmetric(op, input.to_vec(), 1024)).expect("soft").result_payload()
    };
    let mut v = Vec::new();
    let msg = vec![0x5a; 64];
    let sign = |alg: AsymAlg, bits: usize, name: &'static str, class: &'static str, v: &mut Vec<Case>| {
        let key = fw.generate_key(alg, bits).expect("key");
        let private = SessionParams::asymmetric(alg, AsymKey::Private(key));
        let public = soft(&private, Op::PublicKey, &[]);
        let signature = soft(&private, Op::Sign, &msg);
        let m = msg.clone();
        v.push(Case {
            name: Box::leak(format!("{name} sign").into_boxed_str()),
            class: Box::leak(format!("{class}_sign").into_boxed_str()),
            params: private,
            request: Box::new(move || Request::asymmetric(Op::Sign, m.clone(), 1024)),
        });
        let m = msg.clone();
        v.push(Case {
            name: Box::leak(format!("{name} verify").into_boxed_str()),
            class: Box::leak(format!("{class}_verify").into_boxed_str()),
            params: SessionParams::asymmetric(alg, AsymKey::Public(PublicKey::raw(&public))),
            request: Box::new(move || Request::verify(&m, &signature)),
        });
    };
    sign(AsymAlg::RsaPkcs1 { hash: DigestAlg::Sha256 }, 2048, "rsa2048", "rsa2048", &mut v);
    sign(AsymAlg::RsaPkcs1 { hash: DigestAlg::Sha256 }, 4096, "rsa4096", "rsa4096", &mut v);
    // Each curve with its own hash, as TLS pairs them (`openssl speed ecdsap384` too).
    let ecdsa = |curve, hash| AsymAlg::Ecdsa { curve, hash, encoding: ocf::asym::SigEncoding::Der };
    sign(ecdsa(Curve::P256, DigestAlg::Sha256), 256, "ecdsa-p256", "ecdsa_p256", &mut v);
    sign(ecdsa(Curve::P384, DigestAlg::Sha384), 384, "ecdsa-p384", "ecdsa_p384", &mut v);
    sign(AsymAlg::Ed25519, 256, "ed25519", "ed25519", &mut v);
    for (alg, name, class) in [
        (AsymAlg::Ecdh(Curve::P256), "ecdh-p256", "ecdh_p256"),
        (AsymAlg::Ecdh(Curve::P384), "ecdh-p384", "ecdh_p384"),
        (AsymAlg::X25519, "x25519", "x25519"),
        (AsymAlg::Ffdh(ModpGroup::Modp2048), "modp2048", "modp2048"),
    ] {
        let (a, b) = (fw.generate_key(alg, 0).expect("key"), fw.generate_key(alg, 0).expect("key"));
        let peer = soft(&SessionParams::asymmetric(alg, AsymKey::Private(b)), Op::PublicKey, &[]);
        v.push(Case {
            name,
            class,
            params: SessionParams::asymmetric(alg, AsymKey::Private(a)),
            request: Box::new(move || Request::asymmetric(Op::Derive, peer.clone(), 1024)),
        });
    }
    // A full-length 2048-bit exponentiation (the MODP group 14 prime as the modulus).
    let modulus = ModpGroup::Modp2048.prime().to_vec();
    let exponent: Vec<u8> = (0..256).map(|i| (i * 29 + 11) as u8 | 0x80).collect();
    v.push(Case {
        name: "modexp2048",
        class: "modexp2048",
        params: SessionParams::asymmetric(
            AsymAlg::ModExp,
            AsymKey::ModExp { exponent: Key::new(&exponent), modulus },
        ),
        request: Box::new(|| Request::asymmetric(Op::ModExp, vec![7u8; 255], 1024)),
    });
    v
}

/// Ops per second through `s` over `secs`, `threads` threads each one request at a time.
fn rate(s: &Session, case: &Case, secs: f64, threads: usize) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (stop, done, s) = (stop.clone(), done.clone(), s.clone());
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    s.run((case.request)()).unwrap_or_else(|f| panic!("{}: {}", case.name, f.error()));
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    });
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let spec = args.first().map_or("qat-like,cpu=1", String::as_str);
    let secs: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(0.5);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let threads: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(4);
    let fw = Framework::with_config(ocf::Config { profile_every: 0, ..ocf::Config::default() });
    ocf_soft::register(&fw).expect("soft");
    let card: Arc<SimDriver> = ocf_sim::register_driver(&fw, spec).expect("the card");
    let card_name = ocf::Driver::name(&*card).to_owned();
    println!("card {card_name}; {rounds} rounds of {secs} s per session, {threads} threads; ops/s (median)");
    println!(
        "{:<18} {:>9} {:>9} {:>9} {:>10} {:>9} {:>9}  verdict",
        "operation", "soft", "card", "auto", "card model", "late µs", "auto/best"
    );
    for case in cases(&fw) {
        let model = PkClass::named(case.class).and_then(|c| card.profile().pk_time(c));
        let Some(model_ns) = model else {
            println!("{:<18} not on this card", case.name);
            continue;
        };
        let on_soft = fw.new_session_on("soft", &case.params).expect("soft");
        let on_card = fw.new_session_on(&card_name, &case.params).expect("card");
        let auto = fw.new_session(&case.params).expect("auto");
        // Let the cost model see both drivers before the clock starts.
        rate(&auto, &case, secs.min(0.3), threads);
        let before = card.stats().pk.unwrap_or_default();
        let (mut s, mut c, mut a) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            // The order turns every round.
            for which in (0..3).map(|i| (i + round) % 3) {
                match which {
                    0 => s.push(rate(&on_soft, &case, secs, threads)),
                    1 => c.push(rate(&on_card, &case, secs, threads)),
                    _ => a.push(rate(&auto, &case, secs, threads)),
                }
            }
        }
        let after = card.stats().pk.unwrap_or_default();
        let n = (after.completed - before.completed).max(1);
        let late_us = (after.late_total_ns - before.late_total_ns) as f64 / n as f64 / 1e3;
        let (s, c, a) = (median(s), median(c), median(a));
        let model_rate = 1e9 / model_ns as f64;
        let soft_ns = 1e9 / s;
        let verdict = if (model_ns as f64) < soft_ns * 0.9 {
            "card wins in the model (capped at the CPU in the sim)"
        } else if (model_ns as f64) > soft_ns * 1.1 {
            "CPU wins"
        } else {
            "tie"
        };
        println!(
            "{:<18} {:>9.0} {:>9.0} {:>9.0} {:>10.0} {:>9.1} {:>9.2}  {verdict}",
            case.name,
            s,
            c,
            a,
            model_rate,
            late_us,
            a / s.max(c)
        );
    }
}
