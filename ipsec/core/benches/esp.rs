//! What the IPsec core costs on top of the crypto: ESP tunnel-mode encapsulation and
//! decapsulation of 1400-byte packets with AES-GCM-128 through `Ipsec::output` /
//! `Ipsec::input` (policy lookup, SA lookup, sequence number, layout, outer header, replay
//! window, trailer check, inbound policy check), side by side with the soft driver doing
//! the same AES-GCM alone through ocf (a reused request, no ESP).
//!
//! Run: `cargo bench -p ipsec-core --bench esp`. The goal is encapsulation and
//! decapsulation at ≥ 0.8 of the `gcm` rows.
//!
//! Buffers are recycled through the sink, so neither side allocates a packet buffer per
//! iteration; both decrypt sides copy a fresh ciphertext in first (decryption is in place),
//! so both pay the same copy.

use std::hint::black_box;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ipsec_core::control::{
    Action, Dir, EncAlg, KeyBytes, Level, Lifetime, Mode, PolicySpec, Prefix, Proto, Request as Ctl, Rule,
    SaSpec, Selector, Upper,
};
use ipsec_core::{Ipsec, Packet, Sink, HEADROOM, TAILROOM};
use ocf::{Aad, CipherAlg, Framework, Op, Request, SessionParams, TagPlace};

const SIZE: usize = 1400;

/// Keeps the last packet so the next iteration reuses its buffer.
#[derive(Default)]
struct Recycle {
    last: Mutex<Option<Packet>>,
}

impl Sink for Recycle {
    fn transmit(&self, p: Packet) {
        *self.last.lock().unwrap() = Some(p);
    }
    fn deliver(&self, p: Packet) {
        *self.last.lock().unwrap() = Some(p);
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

fn gateway(fw: &Framework, sink: Arc<Recycle>, dir: Dir, window: u32) -> Ipsec {
    let g = Ipsec::new(fw.clone(), sink);
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

fn bench(c: &mut Criterion) {
    let fw = Framework::new();
    ocf_soft::register(&fw).unwrap();
    let mut g = c.benchmark_group("esp-aes-128-gcm-1400");
    g.throughput(Throughput::Bytes(SIZE as u64));
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    g.sample_size(30);

    // The soft driver alone: copy 1400 bytes in (as ESP output must: it encrypts the
    // packet in place), seal them with 8 bytes of AAD; the request reused.
    let gcm = fw.new_session(&SessionParams::aead(CipherAlg::AesGcm, &[7u8; 16][..])).unwrap();
    let mut buf = vec![0u8; 8 + SIZE + 16];
    let mut slot = Some(
        Request::new(Op::Encrypt, std::mem::take(&mut buf))
            .with_iv(&[1; 12])
            .with_payload(8..8 + SIZE)
            .with_tag_place(TagPlace::InBuffer(8 + SIZE)),
    );
    if let Some(r) = slot.as_mut() {
        r.aad = Aad::Region(0..8);
    }
    let plain_payload = vec![0x5au8; SIZE];
    g.bench_function("gcm-seal", |b| {
        b.iter(|| {
            let mut r = slot.take().unwrap();
            if let Some(v) = r.buf.as_contiguous_mut() {
                v[8..8 + SIZE].copy_from_slice(&plain_payload);
            }
            slot = Some(gcm.run(black_box(r)).unwrap());
        })
    });
    // …and open: copy a valid ciphertext in, then verify and decrypt in place.
    let sealed = slot.take().unwrap();
    let ct = sealed.buf.to_vec();
    let mut slot = Some(Request::new(Op::Decrypt, ct.clone()));
    g.bench_function("gcm-open", |b| {
        b.iter(|| {
            let mut r = slot.take().unwrap();
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
            slot = Some(gcm.run(black_box(r)).unwrap());
        })
    });

    // ESP output through the core: policy, SA, sequence number, layout, outer header, seal.
    let out_sink = Arc::new(Recycle::default());
    let out = gateway(&fw, out_sink.clone(), Dir::Out, 64);
    let plain = inner_packet();
    let mut spare = Packet::with_headroom(&plain);
    g.bench_function("esp-output", |b| {
        b.iter(|| {
            let mut p = std::mem::take(&mut spare);
            p.data.clear();
            p.data.resize(HEADROOM, 0);
            p.data.extend_from_slice(&plain);
            p.data.reserve(TAILROOM);
            p.head = HEADROOM;
            out.output(black_box(p)).unwrap();
            spare = out_sink.last.lock().unwrap().take().unwrap();
        })
    });

    // ESP input: a valid packet copied in, then SA lookup, (window off: the same packet
    // every time), open, trailer, inbound policy.
    out.output(Packet::with_headroom(&plain)).unwrap();
    let esp = out_sink.last.lock().unwrap().take().unwrap().bytes().to_vec();
    let in_sink = Arc::new(Recycle::default());
    let inp = gateway(&fw, in_sink.clone(), Dir::In, 0);
    let mut spare = Packet::new(esp.clone());
    g.bench_function("esp-input", |b| {
        b.iter(|| {
            let mut p = std::mem::take(&mut spare);
            p.data.clear();
            p.data.extend_from_slice(&esp);
            p.head = 0;
            inp.input(black_box(p)).unwrap();
            spare = in_sink.last.lock().unwrap().take().unwrap();
        })
    });
    g.finish();
    assert_eq!(inp.stats().total_drops(), 0, "{}", inp.stats());
}

criterion_group!(benches, bench);
criterion_main!(benches);
