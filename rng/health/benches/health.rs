//! What the health tests cost, side by side with the source they test:
//! `cargo bench -p ocf-health --bench health`.
//!
//! - `chacha8_raw`: ChaCha8 filling 64 KiB (the clean test source alone);
//! - `tested_chacha8`: the same through `TestedSource` (tests, scratch copy and wipe);
//! - `tests_only`: `HealthTests::test` over 64 KiB already in memory.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ocf_health::{Claim, HealthTests, NoiseSource, SourceError, TestedSource};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

struct ChaCha(ChaCha8Rng);

impl NoiseSource for ChaCha {
    fn fill_raw(&mut self, buf: &mut [u8]) -> Result<(), SourceError> {
        self.0.fill_bytes(buf);
        Ok(())
    }
}

const N: usize = 64 * 1024;

fn health(c: &mut Criterion) {
    let mut g = c.benchmark_group("health_64KiB");
    g.throughput(Throughput::Bytes(N as u64));
    let mut buf = vec![0u8; N];

    let mut raw = ChaCha8Rng::seed_from_u64(1);
    g.bench_function("chacha8_raw", |b| b.iter(|| raw.fill_bytes(&mut buf)));

    let mut tested = TestedSource::new(ChaCha(ChaCha8Rng::seed_from_u64(1)), Claim::bytes(4.0)).unwrap();
    g.bench_function("tested_chacha8", |b| b.iter(|| tested.fill(&mut buf).expect("clean")));

    // One clean buffer tested over and over: its end meets its start without a run
    // (checked), so the stream stays clean.
    let mut clean = vec![0u8; N];
    ChaCha8Rng::seed_from_u64(2).fill_bytes(&mut clean);
    assert_ne!(clean[0], clean[N - 1]);
    let mut tests = HealthTests::new(Claim::bytes(4.0)).unwrap();
    tests.startup(&clean[..1024]).unwrap();
    g.bench_function("tests_only", |b| b.iter(|| tests.test(&clean).expect("clean")));
    g.finish();
}

criterion_group!(benches, health);
criterion_main!(benches);
