//! Task graphs, lagom beside rayon, `std::thread` (scoped) and tokio in one run,
//! on four shapes:
//!
//! * `fanout` — a source, 100 000 tiny leaves (each writes one number) and a sink that sums
//!   them: `lagom/scope` (`lagom::scope`, one `spawn` per leaf, each writing its slot of a
//!   borrowed `Vec`), `lagom/graph` (a `TaskGraph` of 100 002 nodes, built and run),
//!   `rayon/scope`, `std/scoped` (`std::thread::scope`, a thread per leaf), `tokio/spawn`
//!   (`tokio::spawn` per leaf, then every handle awaited);
//! * `chain` — 1 000 nodes, each needing the previous one's output: `lagom/graph` (a
//!   `TaskGraph` chain), `lagom/spawn` (spawn + join, one after another), `rayon/spawn`
//!   (`rayon::scope`, each task spawning the next), `std/scoped` (each thread spawning the
//!   next), `tokio/spawn` (spawn + await, one after another);
//! * `fib` — fib(25) by recursive `join`, sequential below 12 (about 700 joins):
//!   `lagom/join`, `rayon/join`, `std/scoped` (one side on a scoped thread), `tokio/spawn`
//!   (one side spawned, boxed futures);
//! * `blocking` — 64 nodes in a ring, each blocking on its channel until the token arrives and
//!   passing it on, 20 rounds (1 280 blocking hand-offs): `lagom/scope` (`lagom::sync::mpsc`),
//!   `std/scoped` (`std::sync::mpsc`), `tokio/spawn` (`tokio::sync::mpsc`, awaiting),
//!   `rayon/64-threads` (a rayon pool of 64 threads, one per node: in rayon's own 2-thread
//!   pool the ring deadlocks, since two nodes blocked in `recv` hold both threads, so it
//!   cannot run there).
//!
//! Each runtime uses every allowed CPU (two on the CI VM); lagom's with its defaults (no
//! migration opt-in: the sound mode users get). lagom's scope, spawn and join and tokio are
//! timed inside a task (`iter_custom`), the `TaskGraph` rows from the bench's thread
//! (`run(&rt)`, as a user calls it; building the graph is counted), rayon inside `install`. Run with
//! `cargo bench -p lagom-benches --bench graph -- --warm-up-time 1 --measurement-time 3`.
#![allow(missing_docs)]

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use lagom::TaskGraph;

const LEAVES: usize = 100_000;
const CHAIN: usize = 1_000;
const FIB: u64 = 25;
const CUTOFF: u64 = 12;
const RING: usize = 64;
const ROUNDS: usize = 20;

fn fib_seq(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

fn fib_lagom(n: u64) -> u64 {
    if n < CUTOFF {
        return fib_seq(n);
    }
    let (a, b) = lagom::join(|| fib_lagom(n - 1), || fib_lagom(n - 2));
    a + b
}

fn fib_rayon(n: u64) -> u64 {
    if n < CUTOFF {
        return fib_seq(n);
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

fn fib_std(n: u64) -> u64 {
    if n < CUTOFF {
        return fib_seq(n);
    }
    std::thread::scope(|s| {
        let b = s.spawn(|| fib_std(n - 2));
        fib_std(n - 1) + b.join().expect("fib thread")
    })
}

fn fib_tokio(n: u64) -> Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        if n < CUTOFF {
            return fib_seq(n);
        }
        let b = tokio::spawn(fib_tokio(n - 2));
        fib_tokio(n - 1).await + b.await.expect("fib task")
    })
}

/// The leaves' slots and their sum (the fan-in).
fn sum(v: &[u64]) -> u64 {
    v.iter().sum()
}

fn lagom_rt() -> lagom::Runtime {
    lagom::Runtime::builder().build().expect("lagom runtime")
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(lagom_rt().worker_cpus().len())
        .build()
        .expect("tokio runtime")
}

fn rayon_pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon pool")
}

/// Times `iters` runs of `f` inside a lagom task.
fn in_lagom(rt: &lagom::Runtime, iters: u64, f: fn()) -> Duration {
    rt.block_on(move || {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        t.elapsed()
    })
}

/// Times `iters` runs of `f` inside a tokio task.
fn in_tokio<F: Future<Output = ()> + Send + 'static>(
    rt: &tokio::runtime::Runtime,
    iters: u64,
    f: fn() -> F,
) -> Duration {
    rt.block_on(rt.spawn(async move {
        let t = Instant::now();
        for _ in 0..iters {
            f().await;
        }
        t.elapsed()
    }))
    .expect("timing task")
}

fn fanout_lagom_scope() {
    let mut out = vec![0u64; LEAVES];
    lagom::scope(|s| {
        for (i, slot) in out.iter_mut().enumerate() {
            s.spawn(move || *slot = i as u64);
        }
    });
    black_box(sum(&out));
}

/// The fan-out graph, built (its building is part of what `lagom/graph` measures).
fn graph_fanout() -> TaskGraph<'static, u64> {
    let mut g = TaskGraph::new();
    let src = g.add(|_| 1u64);
    let sink = g.add(|i| i.iter().sum::<u64>());
    for k in 0..LEAVES as u64 {
        let leaf = g.add(move |i| i[0] * k);
        g.add_edge(src, leaf).expect("acyclic");
        g.add_edge(leaf, sink).expect("acyclic");
    }
    g
}

fn bench_fanout(c: &mut Criterion) {
    let mut g = c.benchmark_group("fanout");
    g.sample_size(10);
    let rt = lagom_rt();
    g.bench_function("lagom/scope", |b| {
        b.iter_custom(|iters| in_lagom(&rt, iters, fanout_lagom_scope))
    });
    g.bench_function("lagom/graph", |b| {
        b.iter(|| black_box(graph_fanout().run(&rt).expect("graph").len()))
    });
    let pool = rayon_pool(rt.worker_cpus().len());
    g.bench_function("rayon/scope", |b| {
        b.iter(|| {
            pool.install(|| {
                let mut out = vec![0u64; LEAVES];
                rayon::scope(|s| {
                    for (i, slot) in out.iter_mut().enumerate() {
                        s.spawn(move |_| *slot = i as u64);
                    }
                });
                black_box(sum(&out))
            })
        })
    });
    g.bench_function("std/scoped", |b| {
        b.iter(|| {
            let mut out = vec![0u64; LEAVES];
            std::thread::scope(|s| {
                for (i, slot) in out.iter_mut().enumerate() {
                    s.spawn(move || *slot = i as u64);
                }
            });
            black_box(sum(&out))
        })
    });
    let tokio = tokio_rt();
    g.bench_function("tokio/spawn", |b| {
        b.iter_custom(|iters| {
            in_tokio(&tokio, iters, || async {
                let hs: Vec<_> = (0..LEAVES as u64)
                    .map(|i| tokio::spawn(async move { i }))
                    .collect();
                let mut total = 0;
                for h in hs {
                    total += h.await.expect("leaf");
                }
                black_box(total);
            })
        })
    });
    g.finish();
}

fn bench_chain(c: &mut Criterion) {
    let mut g = c.benchmark_group("chain");
    let rt = lagom_rt();
    g.bench_function("lagom/graph", |b| {
        b.iter(|| {
            let mut g = TaskGraph::new();
            let mut prev = g.add(|_| 0u64);
            for _ in 1..CHAIN {
                let n = g.add(|i| i[0] + 1);
                g.add_edge(prev, n).expect("acyclic");
                prev = n;
            }
            black_box(g.run(&rt).expect("chain")[prev])
        })
    });
    g.bench_function("lagom/spawn", |b| {
        b.iter_custom(|iters| {
            in_lagom(&rt, iters, || {
                let mut v = 0u64;
                for _ in 0..CHAIN {
                    v = lagom::task::spawn(move || v + 1).join().expect("link");
                }
                black_box(v);
            })
        })
    });
    let pool = rayon_pool(rt.worker_cpus().len());
    g.bench_function("rayon/spawn", |b| {
        fn link<'s>(s: &rayon::Scope<'s>, left: usize, out: &'s std::sync::atomic::AtomicU64) {
            out.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if left > 1 {
                s.spawn(move |s| link(s, left - 1, out));
            }
        }
        b.iter(|| {
            pool.install(|| {
                let out = std::sync::atomic::AtomicU64::new(0);
                rayon::scope(|s| s.spawn(|s| link(s, CHAIN, &out)));
                black_box(out.into_inner())
            })
        })
    });
    g.bench_function("std/scoped", |b| {
        fn link(left: usize) -> u64 {
            if left == 0 {
                return 0;
            }
            std::thread::scope(|s| s.spawn(|| link(left - 1)).join().expect("link")) + 1
        }
        b.iter(|| black_box(link(CHAIN)))
    });
    let tokio = tokio_rt();
    g.bench_function("tokio/spawn", |b| {
        b.iter_custom(|iters| {
            in_tokio(&tokio, iters, || async {
                let mut v = 0u64;
                for _ in 0..CHAIN {
                    v = tokio::spawn(async move { v + 1 }).await.expect("link");
                }
                black_box(v);
            })
        })
    });
    g.finish();
}

fn bench_fib(c: &mut Criterion) {
    let mut g = c.benchmark_group("fib");
    let rt = lagom_rt();
    g.bench_function("lagom/join", |b| {
        b.iter_custom(|iters| {
            in_lagom(&rt, iters, || {
                black_box(fib_lagom(black_box(FIB)));
            })
        })
    });
    let pool = rayon_pool(rt.worker_cpus().len());
    g.bench_function("rayon/join", |b| {
        b.iter(|| pool.install(|| black_box(fib_rayon(black_box(FIB)))))
    });
    g.bench_function("std/scoped", |b| {
        b.iter(|| black_box(fib_std(black_box(FIB))))
    });
    let tokio = tokio_rt();
    g.bench_function("tokio/spawn", |b| {
        b.iter_custom(|iters| {
            in_tokio(&tokio, iters, || async {
                black_box(fib_tokio(black_box(FIB)).await);
            })
        })
    });
    g.bench_function("sequential", |b| {
        b.iter(|| black_box(fib_seq(black_box(FIB))))
    });
    g.finish();
}

/// One node of the ring: `ROUNDS` times, wait for the token, pass it on (node 0 starts).
fn ring_lagom() {
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..RING).map(|_| lagom::sync::mpsc::channel()).unzip();
    lagom::scope(|s| {
        for (i, rx) in rxs.into_iter().enumerate() {
            let next = txs[(i + 1) % RING].clone();
            s.spawn(move || {
                if i == 0 {
                    next.send(0u64).expect("ring");
                }
                for r in 0..ROUNDS {
                    let t = rx.recv().expect("ring");
                    if i != 0 || r + 1 < ROUNDS {
                        let _ = next.send(t + 1);
                    }
                }
            });
        }
    });
}

fn ring_std() {
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..RING).map(|_| std::sync::mpsc::channel()).unzip();
    std::thread::scope(|s| {
        for (i, rx) in rxs.into_iter().enumerate() {
            let next = txs[(i + 1) % RING].clone();
            s.spawn(move || {
                if i == 0 {
                    next.send(0u64).expect("ring");
                }
                for r in 0..ROUNDS {
                    let t = rx.recv().expect("ring");
                    if i != 0 || r + 1 < ROUNDS {
                        let _ = next.send(t + 1);
                    }
                }
            });
        }
    });
}

async fn ring_tokio() {
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..RING)
        .map(|_| tokio::sync::mpsc::unbounded_channel())
        .unzip();
    let hs: Vec<_> = rxs
        .into_iter()
        .enumerate()
        .map(|(i, mut rx)| {
            let next = txs[(i + 1) % RING].clone();
            tokio::spawn(async move {
                if i == 0 {
                    next.send(0u64).expect("ring");
                }
                for r in 0..ROUNDS {
                    let t = rx.recv().await.expect("ring");
                    if i != 0 || r + 1 < ROUNDS {
                        let _ = next.send(t + 1);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.await.expect("ring node");
    }
}

fn bench_blocking(c: &mut Criterion) {
    let mut g = c.benchmark_group("blocking");
    let rt = lagom_rt();
    g.bench_function("lagom/scope", |b| {
        b.iter_custom(|iters| in_lagom(&rt, iters, ring_lagom))
    });
    g.bench_function("std/scoped", |b| b.iter(ring_std));
    let tokio = tokio_rt();
    g.bench_function("tokio/spawn", |b| {
        b.iter_custom(|iters| in_tokio(&tokio, iters, ring_tokio))
    });
    let pool = rayon_pool(RING);
    g.bench_function("rayon/64-threads", |b| {
        b.iter(|| {
            pool.install(|| {
                let (txs, rxs): (Vec<_>, Vec<_>) =
                    (0..RING).map(|_| std::sync::mpsc::channel()).unzip();
                rayon::scope(|s| {
                    for (i, rx) in rxs.into_iter().enumerate() {
                        let next = txs[(i + 1) % RING].clone();
                        s.spawn(move |_| {
                            if i == 0 {
                                next.send(0u64).expect("ring");
                            }
                            for r in 0..ROUNDS {
                                let t = rx.recv().expect("ring");
                                if i != 0 || r + 1 < ROUNDS {
                                    let _ = next.send(t + 1);
                                }
                            }
                        });
                    }
                });
            })
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! { name = benches; config = config(); targets = bench_fanout, bench_chain, bench_fib, bench_blocking }
criterion_main!(benches);
