//! What the IPsec core costs on top of the crypto: ESP tunnel-mode encapsulation and
//! decapsulation of 1400-byte packets with AES-GCM-128 through `Ipsec::output` /
//! `Ipsec::input` (policy lookup, SA lookup, sequence number, layout, outer header, replay
//! window, trailer check, inbound policy check), side by side with the soft driver doing
//! the same AES-GCM alone through ocf (a reused request, no ESP).
//!
//! Run: `cargo bench -p ipsec-core --bench esp` (pin it to one core with `taskset -c 1`
//! for steadier figures). The goal is encapsulation and decapsulation at ≥ 0.8 of the
//! `gcm` rows' throughput.
//!
//! The machine this project is measured on is noisy, and a benchmark that times one case
//! after another (as criterion does) lets a noisy stretch land on one case only. So the
//! four cases take turns: each round runs every case for the same number of packets, the
//! starting case rotating, and a share is computed per round (case time ÷ base time of the
//! same round); the report gives the median share and its quartiles over the rounds.
//!
//! Options (after `--`): `--rounds N` (default 600), `--iters N` packets per case per round
//! (default 500), `--profile NAME SECS` runs one case alone for `perf record`, `--ce`: the
//! inner packet is ECT(0) and the outer header arrives CE, so every decapsulation marks the
//! inner header CE and updates its checksum (RFC 6040; without it nothing changes there).
//!
//! `--bundle` measures SA bundles instead (`ipsec_core::bundle`): ESP alone, AH alone and
//! the bundle of both (`esp/transport//require ah/transport//require`, HMAC-SHA2-256 AH over
//! AES-GCM-128 ESP, host to host) each way, taking turns as above; the bundle's cost is
//! reported against the sum of its two SAs' (what its stages' continuations add).
//!
//! Buffers are recycled through the sink, so neither side allocates a packet buffer per
//! iteration; both decrypt sides copy a fresh ciphertext in first (decryption is in place),
//! so both pay the same copy.

use std::hint::black_box;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipsec_core::control::{
    Action, Dir, EncAlg, KeyBytes, Level, Lifetime, Mode, PolicySpec, Prefix, Proto, Request as Ctl, Rule,
    SaSpec, Selector, Upper,
};
use ipsec_core::{Ipsec, Packet, Results, Sink, Via, HEADROOM, TAILROOM};
use ocf::{Aad, CipherAlg, Framework, Op, Request, SessionParams, TagPlace};

const SIZE: usize = 1400;

/// The soft driver finishes every packet in the call, into its `Results`: nothing reaches
/// the sink.
struct Unused;

impl Sink for Unused {
    fn transmit(&self, _: Packet) {
        unreachable!("a synchronous driver's packet came through the sink")
    }
    fn deliver(&self, _: Packet) {
        unreachable!("a synchronous driver's packet came through the sink")
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn inner_packet() -> Vec<u8> {
    let mut p = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0, 10, 1, 0, 1, 10, 2, 0, 1];
    p[2..4].copy_from_slice(&(SIZE as u16).to_be_bytes());
    let c = ipsec_wire::checksum::checksum(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&[0x30, 0x39, 0, 53]);
    p.extend_from_slice(&((SIZE - 20) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.resize(SIZE, 0x5a);
    p
}

fn gateway(fw: &Framework, dir: Dir, window: u32) -> Ipsec {
    let g = Ipsec::new(fw.clone(), Arc::new(Unused));
    let spec = SaSpec {
        src: ip("192.0.2.1"),
        dst: ip("192.0.2.2"),
        proto: Proto::Esp,
        spi: 0x1000,
        mode: Mode::Tunnel,
        reqid: 0,
        enc: EncAlg::AesGcm16,
        enc_key: KeyBytes::new(&[7; 20]),
        auth: None,
        replay_window: window,
        esn: false,
        natt: None,
        hard: Lifetime::default(),
        soft: Lifetime::default(),
    };
    g.control(&Ctl::AddSa(spec)).unwrap();
    let net = |a| Prefix { addr: ip(a), len: 16 };
    g.control(&Ctl::AddPolicy(PolicySpec {
        selector: Selector {
            src: net("10.1.0.0"),
            dst: net("10.2.0.0"),
            sport: None,
            dport: None,
            upper: Upper::Any,
        },
        dir,
        action: Action::Protect(vec![Rule {
            proto: Proto::Esp,
            mode: Mode::Tunnel,
            tunnel: Some((ip("192.0.2.1"), ip("192.0.2.2"))),
            level: Level::Require,
        }]),
    }))
    .unwrap();
    g
}

/// One case: a name and a closure doing one packet's work.
struct Case<'a> {
    name: &'static str,
    run: Box<dyn FnMut() + 'a>,
    ns: Vec<f64>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times each case for `iters` packets per round, the cases taking turns (the starting
/// case rotates), so that a noisy stretch of the machine hits every case alike.
fn interleave(cases: &mut [Case<'_>], rounds: usize, iters: usize) {
    for c in cases.iter_mut() {
        for _ in 0..iters {
            (c.run)();
        }
    }
    for r in 0..rounds {
        for k in 0..cases.len() {
            let c = &mut cases[(r + k) % cases.len()];
            let t = Instant::now();
            for _ in 0..iters {
                (c.run)();
            }
            c.ns.push(t.elapsed().as_nanos() as f64 / iters as f64);
        }
    }
}

/// The share of `base`'s throughput that `case` reaches, per round, as its quartiles.
fn share(case: &Case<'_>, base: &Case<'_>) -> (f64, f64, f64) {
    let mut r: Vec<f64> = case.ns.iter().zip(&base.ns).map(|(c, b)| b / c).collect();
    let m = median(&mut r);
    (m, r[r.len() / 4], r[r.len() * 3 / 4])
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().expect("a number"))
    };
    let (rounds, iters) = (opt("--rounds", 600), opt("--iters", 500));
    let ce = args.iter().any(|a| a == "--ce");
    let profile = args.iter().position(|a| a == "--profile").map(|i| {
        let name = args.get(i + 1).expect("--profile NAME SECS").clone();
        (name, Duration::from_secs_f64(args.get(i + 2).and_then(|s| s.parse().ok()).unwrap_or(5.0)))
    });

    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    if args.iter().any(|a| a == "--bundle") {
        return bundles(&fw, rounds, iters);
    }

    // The soft driver alone: copy 1400 bytes in (as ESP output must: it encrypts the
    // packet in place), seal them with 8 bytes of AAD; the request reused.
    let gcm = fw.new_session(&SessionParams::aead(CipherAlg::AesGcm, &[7u8; 16][..])).unwrap();
    let mut seal_req = Some({
        let mut r = Request::new(Op::Encrypt, vec![0u8; 8 + SIZE + 16])
            .with_iv(&[1; 12])
            .with_payload(8..8 + SIZE)
            .with_tag_place(TagPlace::InBuffer(8 + SIZE));
        r.aad = Aad::Region(0..8);
        r
    });
    let plain_payload = vec![0x5au8; SIZE];
    let gcm_seal = || {
        let mut r = seal_req.take().unwrap();
        if let Some(v) = r.buf.as_contiguous_mut() {
            v[8..8 + SIZE].copy_from_slice(&plain_payload);
        }
        seal_req = Some(gcm.run(black_box(r)).unwrap());
    };
    // …and open: copy a valid ciphertext in, then verify and decrypt in place.
    let ct = {
        let mut r = Request::new(Op::Encrypt, vec![0u8; 8 + SIZE + 16])
            .with_iv(&[1; 12])
            .with_payload(8..8 + SIZE)
            .with_tag_place(TagPlace::InBuffer(8 + SIZE));
        r.aad = Aad::Region(0..8);
        gcm.run(r).unwrap().buf.to_vec()
    };
    let mut open_req = Some(Request::new(Op::Decrypt, ct.clone()));
    let gcm_open = || {
        let mut r = open_req.take().unwrap();
        let mut v = match r.buf.take() {
            ocf::Buffer::Contiguous(v) => v,
            other => other.to_vec(),
        };
        v.copy_from_slice(&ct);
        r.reset(Op::Decrypt, v.into());
        r.set_iv(&[1; 12]);
        r.payload = Some(8..8 + SIZE);
        r.tag_place = TagPlace::InBuffer(8 + SIZE);
        r.aad = Aad::Region(0..8);
        open_req = Some(gcm.run(black_box(r)).unwrap());
    };

    // ESP output through the core: policy, SA, sequence number, layout, outer header, seal.
    let out = gateway(&fw, Dir::Out, 64);
    let plain = inner_packet();
    let mut spare = Packet::with_headroom(&plain);
    let mut res = Results::with_capacity(1);
    let esp_output = || {
        let mut p = std::mem::take(&mut spare);
        p.data.clear();
        p.data.resize(HEADROOM, 0);
        p.data.extend_from_slice(&plain);
        p.data.reserve(TAILROOM);
        p.head = HEADROOM;
        out.output_one(black_box(p), &mut res).unwrap();
        spare = res.transmit.pop().expect("the ESP packet");
    };

    // ESP input: a valid packet copied in, then SA lookup, (window off: the same packet
    // every time), open, trailer, inbound policy.
    let mut sent = plain.clone();
    if ce {
        ipsec_wire::ipv4::Packet::new_unchecked(&mut sent[..]).set_ecn_updating_checksum(0b10);
    }
    let mut first = Results::default();
    out.output_one(Packet::with_headroom(&sent), &mut first).unwrap();
    let mut esp = first.transmit[0].bytes().to_vec();
    if ce {
        ipsec_wire::ipv4::Packet::new_unchecked(&mut esp[..]).set_ecn_updating_checksum(0b11);
    }
    let inp = gateway(&fw, Dir::In, 0);
    let mut spare_in = Packet::new(esp.clone());
    let mut res_in = Results::with_capacity(1);
    let esp_input = || {
        let mut p = std::mem::take(&mut spare_in);
        p.data.clear();
        p.data.extend_from_slice(&esp);
        p.head = 0;
        inp.input_one(black_box(p), Via::Ip, &mut res_in).unwrap();
        spare_in = res_in.deliver.pop().expect("the inner packet");
    };

    let mut cases = [
        Case { name: "gcm-seal", run: Box::new(gcm_seal), ns: vec![] },
        Case { name: "esp-output", run: Box::new(esp_output), ns: vec![] },
        Case { name: "gcm-open", run: Box::new(gcm_open), ns: vec![] },
        Case { name: "esp-input", run: Box::new(esp_input), ns: vec![] },
    ];
    if let Some((name, secs)) = profile {
        let c = cases.iter_mut().find(|c| c.name == name).expect("a case name");
        let t = Instant::now();
        while t.elapsed() < secs {
            for _ in 0..1000 {
                (c.run)();
            }
        }
        return;
    }
    interleave(&mut cases, rounds, iters);
    println!(
        "ESP tunnel mode, AES-GCM-128, {SIZE}-byte packets: {rounds} rounds of {iters} packets per case"
    );
    println!(
        "{:<12} {:>10} {:>10} {:>8}   quartiles (share: of the gcm row above, per round)",
        "case", "ns/packet", "Gbit/s", "share"
    );
    for (i, c) in cases.iter().enumerate() {
        let mut ns = c.ns.clone();
        let m = median(&mut ns);
        let gbit = SIZE as f64 * 8.0 / m;
        if i % 2 == 1 {
            let (s, lo, hi) = share(c, &cases[i - 1]);
            println!("{:<12} {:>10.0} {:>10.2} {:>8.2}   {lo:.2}–{hi:.2}", c.name, m, gbit, s);
        } else {
            println!("{:<12} {:>10.0} {:>10.2}", c.name, m, gbit);
        }
    }
    drop(cases);
    assert_eq!(inp.stats().total_drops(), 0, "{}", inp.stats());
}

/// A core configured with setkey text.
fn configured(fw: &Framework, config: &str) -> Ipsec {
    let g = Ipsec::new(fw.clone(), Arc::new(Unused));
    for r in ipsec_core::setkey::parse(config).unwrap() {
        g.control(&r.item).unwrap();
    }
    g
}

/// `--bundle`: ESP, AH and the bundle of both, out and in, host to host in transport mode.
fn bundles(fw: &Framework, rounds: usize, iters: usize) {
    // Without replay windows (-r 0), so inbound takes the same packet every time.
    let sas = "add 10.1.0.1 10.2.0.1 esp 0x1000 -m transport -r 0 -E aes-gcm-16 \
               0x0707070707070707070707070707070707070707;\n\
               add 10.1.0.1 10.2.0.1 ah 0x2000 -m transport -r 0 -A hmac-sha2-256 \
               0x0808080808080808080808080808080808080808080808080808080808080808;\n";
    let rules =
        ["esp/transport//require", "ah/transport//require", "esp/transport//require ah/transport//require"];
    let plain = inner_packet();
    let mut cases = Vec::new();
    let mut wires = Vec::new();
    for r in rules {
        let policy = |dir| format!("{sas}spdadd 10.1.0.1/32 10.2.0.1/32 any -P {dir} ipsec {r};\n");
        let (out, inp) = (configured(fw, &policy("out")), configured(fw, &policy("in")));
        let mut first = Results::default();
        out.output_one(Packet::with_headroom(&plain), &mut first).unwrap();
        wires.push(first.transmit[0].bytes().to_vec());
        cases.push((out, inp));
    }
    let mut runs: Vec<Case<'_>> = Vec::new();
    for (i, (out, _)) in cases.iter().enumerate() {
        let plain = &plain;
        let mut res = Results::with_capacity(1);
        runs.push(Case {
            name: ["esp-out", "ah-out", "esp+ah-out"][i],
            run: Box::new(move || {
                out.output_one(black_box(Packet::with_headroom(plain)), &mut res).unwrap();
                res.transmit.clear();
            }),
            ns: vec![],
        });
    }
    for (i, (_, inp)) in cases.iter().enumerate() {
        let wire = &wires[i];
        let mut res = Results::with_capacity(1);
        runs.push(Case {
            name: ["esp-in", "ah-in", "esp+ah-in"][i],
            run: Box::new(move || {
                inp.input_one(black_box(Packet::new(wire.clone())), Via::Ip, &mut res).unwrap();
                res.deliver.clear();
            }),
            ns: vec![],
        });
    }
    interleave(&mut runs, rounds, iters);
    println!("SA bundles, transport mode, {SIZE}-byte packets: {rounds} rounds of {iters} packets per case");
    println!("{:<12} {:>10}", "case", "ns/packet");
    let ns: Vec<f64> = runs.iter().map(|c| median(&mut c.ns.clone())).collect();
    for (c, n) in runs.iter().zip(&ns) {
        println!("{:<12} {:>10.0}", c.name, n);
    }
    for (way, k) in [("out", 0), ("in", 3)] {
        println!(
            "{way}: the bundle costs {:.3}x ESP's and AH's together ({} ns more a packet)",
            ns[k + 2] / (ns[k] + ns[k + 1]),
            (ns[k + 2] - ns[k] - ns[k + 1]).round()
        );
    }
}
