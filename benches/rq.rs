//! Pick + requeue on one runqueue at 16 … 1 000 000 queued entities.
//!
//! Each iteration advances the virtual clock by one base slice, so the running entity uses up
//! its request, and calls `pick_next`: account the running entity, pick the eligible entity
//! with the earliest deadline (tree descent), put the previous one back into the tree and take
//! the new one out. Run with `cargo bench --bench rq`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use lagom_benches::runqueue_with;
use lagom_policy::Pick;

fn pick_requeue(c: &mut Criterion) {
    let mut group = c.benchmark_group("rq/pick_requeue");
    for n in [16usize, 1_000, 100_000, 1_000_000] {
        let mut rq = runqueue_with(n, 3_000_000, 0x5eed);
        let step = rq.config().base_slice;
        let mut now = 0u64;
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                now += step;
                match rq.pick_next(black_box(now)) {
                    Pick::Run(h) => black_box(h),
                    _ => unreachable!("CPU-bound entities are never delayed"),
                }
            })
        });
        assert_eq!(rq.nr_queued(), n);
    }
    group.finish();
}

criterion_group!(benches, pick_requeue);
criterion_main!(benches);
