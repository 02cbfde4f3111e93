//! RDSEED alone and through the driver (health tests, session, framework), side by side:
//! `cargo bench -p ocf-hwrng --bench rdseed`. Where the CPU has no RDSEED it says so and
//! measures nothing. (`/dev/hwrng` is not measured: in a VM it is virtio-rng, some 10 KB/s.)

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ocf::{Framework, Request, SessionParams};
use ocf_health::NoiseSource;
use ocf_hwrng::rdseed::Rdseed;
use ocf_hwrng::{HwrngDriver, SourceKind};

const N: usize = 4096;

fn rdseed(c: &mut Criterion) {
    let mut raw = match Rdseed::probe(Arc::default()) {
        Ok(r) => r,
        Err(why) => {
            eprintln!("rdseed bench skipped: {why}");
            return;
        }
    };
    let fw = Framework::new();
    let d = Arc::new(HwrngDriver::open(SourceKind::Rdseed).unwrap());
    fw.register(d.clone()).unwrap();
    let s = fw.new_session_on(SourceKind::Rdseed.driver_name(), &SessionParams::random()).unwrap();

    let mut g = c.benchmark_group("rdseed_4KiB");
    g.throughput(Throughput::Bytes(N as u64));
    let mut buf = vec![0u8; N];
    g.bench_function("instruction", |b| b.iter(|| raw.fill_raw(&mut buf).unwrap()));
    let mut req = Some(Request::random(N));
    g.bench_function("driver", |b| {
        b.iter(|| req = Some(s.run(req.take().unwrap()).expect("healthy")));
    });
    g.finish();
    eprintln!("{:?}", d.stats());
}

criterion_group!(benches, rdseed);
criterion_main!(benches);
