//! Spawn + join of a trivial task (it returns a number), lagom beside `std::thread` and tokio
//! in one run:
//!
//! * `lagom/in_task` — the common case: from a task inside `Runtime::block_on`,
//!   `task::spawn(|| x).join()`: one iteration creates the task (control block, a stack from
//!   the worker's pool, enqueue), blocks the spawner in `join`, runs the child to its end,
//!   wakes the spawner and frees the child. Timed inside the task (`iter_custom`), so the
//!   `block_on` around each sample is not counted.
//! * `lagom/outside` — `Runtime::spawn(|| x).join()` from the bench's OS thread: the same, plus
//!   a cross-thread wake of a worker and a futex sleep/wake of the calling OS thread.
//! * `std/thread` — `std::thread::spawn(|| x).join()`: an OS thread created and joined.
//! * `tokio/in_task` — on a 2-worker multi-thread runtime, from a task (itself spawned, driven
//!   by `block_on`): `tokio::spawn(async { x }).await`. Timed inside the task.
//!
//! The runtimes use every allowed CPU (two on the CI VM). Run with
//! `cargo bench --bench spawn -- --warm-up-time 1 --measurement-time 2`.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

fn bench_spawn_join(c: &mut Criterion) {
    let mut g = c.benchmark_group("spawn_join");
    // Beside tokio's work-stealing runtime, lagom's with the kernel's freedom to move tasks.
    // SAFETY: the tasks spawn, join and return numbers: they hold nothing thread-local across
    // a blocking call and never ask which thread they run on.
    let rt = unsafe { lagom::Runtime::builder().allow_migration() }
        .build()
        .expect("lagom runtime");
    g.bench_function("lagom/in_task", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let t = Instant::now();
                for i in 0..iters {
                    let h = lagom::task::spawn(move || black_box(i));
                    black_box(h.join().expect("trivial task"));
                }
                t.elapsed()
            })
        })
    });
    g.bench_function("lagom/outside", |b| {
        b.iter(|| black_box(rt.spawn(|| black_box(1u64)).join().expect("trivial task")))
    });
    drop(rt);

    g.bench_function("std/thread", |b| {
        b.iter(|| {
            black_box(
                std::thread::spawn(|| black_box(1u64))
                    .join()
                    .expect("trivial thread"),
            )
        })
    });

    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio runtime");
    g.bench_function("tokio/in_task", |b| {
        b.iter_custom(|iters| {
            tokio
                .block_on(tokio.spawn(async move {
                    let t = Instant::now();
                    for i in 0..iters {
                        let h = tokio::spawn(async move { black_box(i) });
                        black_box(h.await.expect("trivial task"));
                    }
                    t.elapsed()
                }))
                .expect("timing task")
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! { name = benches; config = config(); targets = bench_spawn_join }
criterion_main!(benches);
