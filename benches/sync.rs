//! `lagom::sync` beside std, parking_lot, crossbeam-channel and tokio, in one run.
//!
//! * `lock_unlock/*` — an uncontended lock + unlock on the bench thread: lagom's `Mutex`
//!   (its fast path is the same in a task and on a thread), `std::sync::Mutex`,
//!   `parking_lot::Mutex`. One iteration: one lock and one unlock.
//! * `handoff/*` — two contenders, each doing lock, `+= 1`, unlock in a loop; one iteration
//!   is one lock/unlock of one of them (the figure is the total time over all iterations):
//!   - `lagom/one_worker_yield` — two tasks on one worker; each yields while it holds the
//!     lock, so every acquisition waits for a hand-off (park, unpark, switch): tasks on one
//!     worker never contend otherwise (they are not preempted inside a critical section).
//!     Against it `tokio/one_thread_yield` (a current-thread runtime, `tokio::sync::Mutex`,
//!     `yield_now().await` under the lock) and `std/two_threads_yield` (two threads,
//!     `std::thread::yield_now()` under the lock).
//!   - `lagom/two_workers` — a task on each worker, no yield: real contention across CPUs.
//!     Against it `tokio/two_workers` (2-worker runtime, `tokio::sync::Mutex`) and
//!     `std/two_threads`, `parking_lot/two_threads`.
//! * `pingpong/*` — one message each way between two parties over two unbounded channels;
//!   one iteration is one round trip: `lagom/one_worker` (two tasks, one worker),
//!   `lagom/two_workers`, `tokio/one_thread` (current-thread runtime, `tokio::sync::mpsc`),
//!   `tokio/two_workers`, `std/two_threads` (`std::sync::mpsc`), `crossbeam/two_threads`.
//! * `mpmc_4x4/*` — 4 producers and 4 consumers, 10 000 messages per producer through one
//!   channel (bound 64); one iteration is one message. `lagom/tasks` (8 tasks on the 2
//!   workers), `crossbeam/threads` (8 threads), `std/threads` (std's receiver is not
//!   `Clone`: the 4 consumer threads share it behind a `std::sync::Mutex`), `tokio/tasks`
//!   (2-worker runtime; tokio's receiver is single-consumer too: shared behind a
//!   `tokio::sync::Mutex`).
//!
//! The machine this runs on is shared: compare the cases of one run, side by side.
//!
//! ```text
//! cargo bench -p lagom-benches --bench sync
//! ```

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use lagom::Runtime;
use lagom::task::Builder;

/// Each sample runs at least this many iterations, scaled back to criterion's count: the
/// spawns of the two parties (tasks or threads) must not weigh in a sample of a few
/// iterations.
const MIN_ITERS: u64 = 5_000;

/// `Bencher::iter_custom`, each sample running at least [`MIN_ITERS`] iterations of `f`
/// and scaled back to criterion's count.
fn iter_scaled(b: &mut criterion::Bencher<'_>, mut f: impl FnMut(u64) -> Duration) {
    b.iter_custom(|n| {
        let k = n.max(MIN_ITERS);
        f(k).mul_f64(n as f64 / k as f64)
    });
}

/// Two pinned lagom tasks on OS CPUs `a` and `b` each run `f(iters / 2)`; the time until both
/// ended, measured inside the runtime.
fn lagom_pair<F>(rt: &Runtime, a: usize, b: usize, iters: u64, f: F) -> Duration
where
    F: Fn(u64) + Send + Sync + Clone + 'static,
{
    rt.block_on(move || {
        let t0 = Instant::now();
        let hs: Vec<_> = [a, b]
            .into_iter()
            .map(|cpu| {
                let f = f.clone();
                Builder::new()
                    .cpus([cpu])
                    .spawn(move || f(iters / 2))
                    .unwrap()
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        t0.elapsed()
    })
}

fn bench_lock_unlock(c: &mut Criterion) {
    let mut g = c.benchmark_group("lock_unlock");
    let l = lagom::sync::Mutex::new(0u64);
    g.bench_function("lagom", |b| b.iter(|| *black_box(&l).lock().unwrap() += 1));
    let s = std::sync::Mutex::new(0u64);
    g.bench_function("std", |b| b.iter(|| *black_box(&s).lock().unwrap() += 1));
    let p = parking_lot::Mutex::new(0u64);
    g.bench_function("parking_lot", |b| b.iter(|| *black_box(&p).lock() += 1));
    g.finish();
}

fn bench_handoff(c: &mut Criterion, rt: &Runtime) {
    let cpus = rt.worker_cpus();
    let mut g = c.benchmark_group("handoff");
    g.bench_function("lagom/one_worker_yield", |b| {
        iter_scaled(b, |n| {
            let m = Arc::new(lagom::sync::Mutex::new(0u64));
            lagom_pair(rt, cpus[0], cpus[0], n, move |k| {
                for _ in 0..k {
                    let mut g = m.lock().unwrap();
                    *g += 1;
                    lagom::task::yield_now();
                }
            })
        })
    });
    g.bench_function("tokio/one_thread_yield", |b| {
        let trt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        iter_scaled(b, |n| {
            trt.block_on(async move {
                let m = Arc::new(tokio::sync::Mutex::new(0u64));
                let t0 = Instant::now();
                let hs: Vec<_> = (0..2)
                    .map(|_| {
                        let m = m.clone();
                        tokio::spawn(async move {
                            for _ in 0..n / 2 {
                                let mut g = m.lock().await;
                                *g += 1;
                                tokio::task::yield_now().await;
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
                t0.elapsed()
            })
        })
    });
    g.bench_function("std/two_threads_yield", |b| {
        iter_scaled(b, |n| {
            threads_pair(n, std::sync::Mutex::new(0u64), |m| {
                let mut g = m.lock().unwrap();
                *g += 1;
                std::thread::yield_now();
            })
        })
    });
    if cpus.len() >= 2 {
        g.bench_function("lagom/two_workers", |b| {
            iter_scaled(b, |n| {
                let m = Arc::new(lagom::sync::Mutex::new(0u64));
                lagom_pair(rt, cpus[0], cpus[1], n, move |k| {
                    for _ in 0..k {
                        *m.lock().unwrap() += 1;
                    }
                })
            })
        });
    }
    g.bench_function("tokio/two_workers", |b| {
        let trt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        iter_scaled(b, |n| {
            trt.block_on(async move {
                let m = Arc::new(tokio::sync::Mutex::new(0u64));
                let t0 = Instant::now();
                let hs: Vec<_> = (0..2)
                    .map(|_| {
                        let m = m.clone();
                        tokio::spawn(async move {
                            for _ in 0..n / 2 {
                                *m.lock().await += 1;
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
                t0.elapsed()
            })
        })
    });
    g.bench_function("std/two_threads", |b| {
        iter_scaled(b, |n| {
            threads_pair(n, std::sync::Mutex::new(0u64), |m| {
                *m.lock().unwrap() += 1;
            })
        })
    });
    g.bench_function("parking_lot/two_threads", |b| {
        iter_scaled(b, |n| {
            threads_pair(n, parking_lot::Mutex::new(0u64), |m| *m.lock() += 1)
        })
    });
    g.finish();
}

/// Two OS threads each run `step(&m)` `iters / 2` times; the time until both ended.
fn threads_pair<M: Send + Sync + 'static>(iters: u64, m: M, step: fn(&M)) -> Duration {
    let m = Arc::new(m);
    let t0 = Instant::now();
    let ts: Vec<_> = (0..2)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..iters / 2 {
                    step(&m);
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    t0.elapsed()
}

/// A lagom ping-pong of `n` round trips between a task on `a` and one on `b`.
fn lagom_pingpong(rt: &Runtime, a: usize, b: usize, n: u64) -> Duration {
    rt.block_on(move || {
        let (to_b, from_a) = lagom::sync::mpsc::channel::<u64>();
        let (to_a, from_b) = lagom::sync::mpsc::channel::<u64>();
        let echo = Builder::new()
            .cpus([b])
            .spawn(move || {
                for v in from_a.iter() {
                    to_a.send(v).unwrap();
                }
            })
            .unwrap();
        let t = Builder::new()
            .cpus([a])
            .spawn(move || {
                let t0 = Instant::now();
                for i in 0..n {
                    to_b.send(i).unwrap();
                    black_box(from_b.recv().unwrap());
                }
                t0.elapsed()
            })
            .unwrap()
            .join()
            .unwrap();
        echo.join().unwrap();
        t
    })
}

async fn tokio_pingpong(n: u64) -> Duration {
    let (to_b, mut from_a) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let (to_a, mut from_b) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let echo = tokio::spawn(async move {
        while let Some(v) = from_a.recv().await {
            to_a.send(v).unwrap();
        }
    });
    let t = tokio::spawn(async move {
        let t0 = Instant::now();
        for i in 0..n {
            to_b.send(i).unwrap();
            black_box(from_b.recv().await.unwrap());
        }
        t0.elapsed()
    })
    .await
    .unwrap();
    echo.await.unwrap();
    t
}

fn bench_pingpong(c: &mut Criterion, rt: &Runtime) {
    let cpus = rt.worker_cpus();
    let mut g = c.benchmark_group("pingpong");
    g.bench_function("lagom/one_worker", |b| {
        iter_scaled(b, |n| lagom_pingpong(rt, cpus[0], cpus[0], n))
    });
    if cpus.len() >= 2 {
        g.bench_function("lagom/two_workers", |b| {
            iter_scaled(b, |n| lagom_pingpong(rt, cpus[0], cpus[1], n))
        });
    }
    g.bench_function("tokio/one_thread", |b| {
        let trt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        iter_scaled(b, |n| trt.block_on(tokio_pingpong(n)))
    });
    g.bench_function("tokio/two_workers", |b| {
        let trt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        iter_scaled(b, |n| trt.block_on(tokio_pingpong(n)))
    });
    g.bench_function("std/two_threads", |b| {
        iter_scaled(b, |n| {
            let (to_b, from_a) = std::sync::mpsc::channel::<u64>();
            let (to_a, from_b) = std::sync::mpsc::channel::<u64>();
            let echo = std::thread::spawn(move || {
                for v in from_a.iter() {
                    to_a.send(v).unwrap();
                }
            });
            let t0 = Instant::now();
            for i in 0..n {
                to_b.send(i).unwrap();
                black_box(from_b.recv().unwrap());
            }
            let t = t0.elapsed();
            drop(to_b);
            echo.join().unwrap();
            t
        })
    });
    g.bench_function("crossbeam/two_threads", |b| {
        iter_scaled(b, |n| {
            let (to_b, from_a) = crossbeam_channel::unbounded::<u64>();
            let (to_a, from_b) = crossbeam_channel::unbounded::<u64>();
            let echo = std::thread::spawn(move || {
                for v in from_a.iter() {
                    to_a.send(v).unwrap();
                }
            });
            let t0 = Instant::now();
            for i in 0..n {
                to_b.send(i).unwrap();
                black_box(from_b.recv().unwrap());
            }
            let t = t0.elapsed();
            drop(to_b);
            echo.join().unwrap();
            t
        })
    });
    g.finish();
}

/// Messages per producer in one `mpmc_4x4` run.
const PER_PRODUCER: u64 = 10_000;
/// Producers, and consumers.
const SIDES: u64 = 4;
/// The channels' bound.
const BOUND: usize = 64;

/// Runs `runs` 4×4 transfers with `one`, returning the total time scaled to `iters`
/// messages (each run moves `SIDES * PER_PRODUCER`).
fn per_message(iters: u64, one: impl Fn() -> Duration) -> Duration {
    let per_run = SIDES * PER_PRODUCER;
    let runs = iters.div_ceil(per_run).max(1);
    let total: Duration = (0..runs).map(|_| one()).sum();
    total.mul_f64(iters as f64 / (runs * per_run) as f64)
}

fn bench_mpmc(c: &mut Criterion, rt: &Runtime) {
    let mut g = c.benchmark_group("mpmc_4x4");
    g.bench_function("lagom/tasks", |b| {
        b.iter_custom(|n| {
            per_message(n, || {
                rt.block_on(|| {
                    let (tx, rx) = lagom::sync::mpsc::sync_channel::<u64>(BOUND);
                    let t0 = Instant::now();
                    let ps: Vec<_> = (0..SIDES)
                        .map(|_| {
                            let tx = tx.clone();
                            lagom::task::spawn(move || {
                                for i in 0..PER_PRODUCER {
                                    tx.send(i).unwrap();
                                }
                            })
                        })
                        .collect();
                    drop(tx);
                    let cs: Vec<_> = (0..SIDES)
                        .map(|_| {
                            let rx = rx.clone();
                            lagom::task::spawn(move || rx.iter().map(black_box).count())
                        })
                        .collect();
                    drop(rx);
                    ps.into_iter().for_each(|h| h.join().unwrap());
                    let got: usize = cs.into_iter().map(|h| h.join().unwrap()).sum();
                    assert_eq!(got as u64, SIDES * PER_PRODUCER);
                    t0.elapsed()
                })
            })
        })
    });
    g.bench_function("crossbeam/threads", |b| {
        b.iter_custom(|n| {
            per_message(n, || {
                let (tx, rx) = crossbeam_channel::bounded::<u64>(BOUND);
                let t0 = Instant::now();
                let ps: Vec<_> = (0..SIDES)
                    .map(|_| {
                        let tx = tx.clone();
                        std::thread::spawn(move || {
                            for i in 0..PER_PRODUCER {
                                tx.send(i).unwrap();
                            }
                        })
                    })
                    .collect();
                drop(tx);
                let cs: Vec<_> = (0..SIDES)
                    .map(|_| {
                        let rx = rx.clone();
                        std::thread::spawn(move || rx.iter().map(black_box).count())
                    })
                    .collect();
                ps.into_iter().for_each(|h| h.join().unwrap());
                let got: usize = cs.into_iter().map(|h| h.join().unwrap()).sum();
                assert_eq!(got as u64, SIDES * PER_PRODUCER);
                t0.elapsed()
            })
        })
    });
    g.bench_function("std/threads", |b| {
        b.iter_custom(|n| {
            per_message(n, || {
                let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(BOUND);
                let rx = Arc::new(std::sync::Mutex::new(rx));
                let t0 = Instant::now();
                let ps: Vec<_> = (0..SIDES)
                    .map(|_| {
                        let tx = tx.clone();
                        std::thread::spawn(move || {
                            for i in 0..PER_PRODUCER {
                                tx.send(i).unwrap();
                            }
                        })
                    })
                    .collect();
                drop(tx);
                let cs: Vec<_> = (0..SIDES)
                    .map(|_| {
                        let rx = rx.clone();
                        std::thread::spawn(move || {
                            let mut k = 0usize;
                            while let Ok(v) = rx.lock().unwrap().recv() {
                                black_box(v);
                                k += 1;
                            }
                            k
                        })
                    })
                    .collect();
                ps.into_iter().for_each(|h| h.join().unwrap());
                let got: usize = cs.into_iter().map(|h| h.join().unwrap()).sum();
                assert_eq!(got as u64, SIDES * PER_PRODUCER);
                t0.elapsed()
            })
        })
    });
    g.bench_function("tokio/tasks", |b| {
        let trt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        b.iter_custom(|n| {
            per_message(n, || {
                trt.block_on(async {
                    let (tx, rx) = tokio::sync::mpsc::channel::<u64>(BOUND);
                    let rx = Arc::new(tokio::sync::Mutex::new(rx));
                    let t0 = Instant::now();
                    let ps: Vec<_> = (0..SIDES)
                        .map(|_| {
                            let tx = tx.clone();
                            tokio::spawn(async move {
                                for i in 0..PER_PRODUCER {
                                    tx.send(i).await.unwrap();
                                }
                            })
                        })
                        .collect();
                    drop(tx);
                    let cs: Vec<_> = (0..SIDES)
                        .map(|_| {
                            let rx = rx.clone();
                            tokio::spawn(async move {
                                let mut k = 0usize;
                                while let Some(v) = rx.lock().await.recv().await {
                                    black_box(v);
                                    k += 1;
                                }
                                k
                            })
                        })
                        .collect();
                    for p in ps {
                        p.await.unwrap();
                    }
                    let mut got = 0;
                    for c in cs {
                        got += c.await.unwrap();
                    }
                    assert_eq!(got as u64, SIDES * PER_PRODUCER);
                    t0.elapsed()
                })
            })
        })
    });
    g.finish();
}

fn bench_sync(c: &mut Criterion) {
    let cpus: Vec<usize> = {
        let probe = Runtime::builder().build().unwrap();
        probe.worker_cpus().into_iter().take(2).collect()
    };
    let rt = Runtime::builder().worker_cpus(cpus).build().unwrap();
    bench_lock_unlock(c);
    bench_handoff(c, &rt);
    bench_pingpong(c, &rt);
    bench_mpmc(c, &rt);
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .sample_size(15)
}

criterion_group! { name = benches; config = config(); targets = bench_sync }
criterion_main!(benches);
