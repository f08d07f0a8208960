//! Wakeups, lagom beside tokio's `Notify` in one run. Every case is a ping-pong between two
//! tasks A and B that pass a turn back and forth; **one iteration is one round trip: two
//! wakeups** (A wakes B, B wakes A), each followed by the wakee running and seeing the turn.
//! Halve a figure for one wake. Timed inside task A (`iter_custom`): spawning the tasks and
//! the `block_on` around each sample are not counted, nor are the first 100 round trips of each
//! lagom and two-runtime tokio sample (`pingpong.rs`, which both cases share with
//! `examples/remote_wake.rs`).
//!
//! lagom (park / `Unparker::unpark`, every task pinned with `task::Builder::cpus`):
//!
//! * `lagom/local` — A and B on the same worker: each unpark queues the partner on the
//!   waker's own runqueue, the waker parks and the worker switches to the partner.
//! * `lagom/remote_busy` — A on worker 0, B on worker 1, and on each worker a CPU-bound task
//!   that loops on `cond_resched()`: every wake crosses workers (wakelist or remote lock, no
//!   futex since the target is running) and the wakee runs only once the busy task reaches
//!   `cond_resched()` with its need-resched flag set by wakeup preemption, or its slice ends.
//!   The figure is a mean, and rare stalls dominate it (the book's `docs/src/lab/peers.md`,
//!   "Remote wakes to a busy worker", has a run's spread). Up to one slice
//!   (1.4 ms with two workers) that is EEVDF as designed: RUN_TO_PARITY protects the busy
//!   task's request, or the wakee is not yet eligible. Longer stalls are the host taking a
//!   worker thread's CPU away (in 4 ms steps here), which wall-clock charging also turns into
//!   scheduling debt; `examples/busy_wake.rs` labels each stall.
//!   Why the stalls add up to half the time: at equal weights EEVDF makes a wakee wait, on
//!   average, about as long as it runs per wake, since it earns no credit while it sleeps
//!   (policy test `wakee_against_a_hog_waits_its_run_time_times_the_weight_ratio`).
//! * `lagom/remote_busy_bg` — as `remote_busy`, but the busy tasks run at nice 19, as a
//!   background job would: the fairness waits shrink by the weight ratio (15/1024); what is
//!   left is the wakeup path, rare waits for the busy task's protected slice (RUN_TO_PARITY)
//!   and the division that a weight sum other than a power of two costs the placement. tokio
//!   has no weights: its busy tasks are the same in every case.
//! * `lagom/remote_busy_yield` — as `remote_busy`, but the busy tasks loop on `yield_now()`,
//!   as tokio's do: the busy task of `tokio/remote_busy` in lagom's terms. Each yield gives
//!   up the rest of the busy task's request (its vruntime jumps to its deadline), so a woken
//!   player runs at the busy task's next yield and never waits for fairness; the figure is the
//!   wakeup path plus the length of one `yield_now()` (about 20 ns alone on a worker).
//! * `lagom/remote_busy_short_slice` — as `remote_busy`, but A and B ask for a 0.1 ms
//!   request (`task::Builder::slice`), as a latency-sensitive task does under EEVDF: a wakee
//!   with a shorter slice than the running task cuts its protection (PREEMPT_SHORT), so no
//!   wait exceeds about 0.1 ms; but a shorter slice buys latency, not share, and the waits,
//!   shorter and more frequent, add up to about the same time.
//! * `lagom/remote_idle` — A on worker 0, B on worker 1, nothing else: each worker goes idle
//!   when its task parks; the wake finds it in its idle spin (default `idle_spin`) or, if the
//!   spin ran out, asleep on its futex.
//! * `lagom/remote_idle_futex` — as `remote_idle` with `idle_spin(Duration::ZERO)`: every
//!   wake is a `futex_wake` of a sleeping worker (the cross-vCPU cost).
//!
//! tokio (2-worker multi-thread runtime; A and B each wait on their own `Notify` with
//! `notified().await` and wake the partner with `notify_one`): tokio has no pinning and puts a
//! task woken from a worker into that worker's LIFO slot, so its wakes are local whatever
//! the load; these are the same round trips under the same load, not the same placement:
//!
//! * `tokio/pingpong` — nothing else runs: the counterpart of `lagom/local` and
//!   `lagom/remote_idle`.
//! * `tokio/pingpong_busy` — two more tasks loop on `tokio::task::yield_now().await`
//!   (CPU-bound, cooperative), under the same load as `lagom/remote_busy`.
//!
//! tokio, one worker per CPU (the placement of the lagom cases: two current-thread runtimes,
//! each on its own OS thread pinned to the CPU of lagom's worker 0 or 1, A on the first and B
//! on the second; a `notify_one` from one runtime's thread wakes a task of the other, which
//! goes through that runtime's remote (inject) queue: the like-for-like remote wake):
//!
//! * `tokio/remote_busy` — beside each player, a task loops on `yield_now().await`: the
//!   counterpart of `lagom/remote_busy`; the wakee runs once the busy task yields and the
//!   scheduler finds it in the remote queue.
//! * `tokio/remote_idle` — nothing else runs: each runtime parks its thread when its player
//!   waits, so a wake is a cross-thread unpark (the counterpart of `lagom/remote_idle_futex`:
//!   tokio parks at once, without an idle spin).
//!
//! Run with `cargo bench --bench wake -- --warm-up-time 1 --measurement-time 2`.
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use lagom::Runtime;
use lagom_benches::pingpong::{Busy, lagom_pingpong, tokio_remote};

/// Untimed round trips before each sample's timed ones (`pingpong.rs`).
const WARMUP: u64 = 100;

/// `iters` Notify round trips on `rt`; with `busy`, two tasks loop on `yield_now` meanwhile.
fn tokio_pingpong(rt: &tokio::runtime::Runtime, busy: bool, iters: u64) -> Duration {
    use tokio::sync::Notify;
    rt.block_on(async move {
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..if busy { 2 } else { 0 })
            .map(|_| {
                let stop = Arc::clone(&stop);
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        let to_b = Arc::new(Notify::new());
        let to_a = Arc::new(Notify::new());
        let (b_in, b_out) = (Arc::clone(&to_b), Arc::clone(&to_a));
        let hb = tokio::spawn(async move {
            for _ in 0..iters {
                b_in.notified().await;
                b_out.notify_one();
            }
        });
        let ha = tokio::spawn(async move {
            let t = Instant::now();
            for _ in 0..iters {
                to_b.notify_one();
                to_a.notified().await;
            }
            t.elapsed()
        });
        let elapsed = ha.await.expect("A");
        hb.await.expect("B");
        stop.store(true, Ordering::Relaxed);
        for s in spinners {
            s.await.expect("busy");
        }
        elapsed
    })
}

/// The request a latency-sensitive task asks for (`task::Builder::slice`), against the
/// default 3 ms (scaled by the worker count) of the busy tasks.
const SHORT_SLICE: Duration = Duration::from_micros(100);

fn bench_wake(c: &mut Criterion) {
    let mut g = c.benchmark_group("wake_round_trip");
    // The bench measures the kernel's wakeup path, migrations included.
    // SAFETY: the ping-pong and busy tasks park, unpark, yield and read clocks: they hold
    // nothing thread-local across a blocking call and never ask which thread they run on.
    let rt = unsafe { Runtime::builder().allow_migration() }
        .build()
        .expect("lagom runtime");
    let cpus = rt.worker_cpus();
    let remote = cpus.len() >= 2;
    g.bench_function("lagom/local", |b| {
        b.iter_custom(|n| lagom_pingpong(&rt, 0, 0, None, None, WARMUP, n))
    });
    if remote {
        g.bench_function("lagom/remote_busy", |b| {
            b.iter_custom(|n| {
                lagom_pingpong(&rt, 0, 1, Some(Busy::CondResched(0)), None, WARMUP, n)
            })
        });
        g.bench_function("lagom/remote_busy_bg", |b| {
            b.iter_custom(|n| {
                lagom_pingpong(&rt, 0, 1, Some(Busy::CondResched(19)), None, WARMUP, n)
            })
        });
        g.bench_function("lagom/remote_busy_yield", |b| {
            b.iter_custom(|n| lagom_pingpong(&rt, 0, 1, Some(Busy::Yield), None, WARMUP, n))
        });
        g.bench_function("lagom/remote_busy_short_slice", |b| {
            b.iter_custom(|n| {
                lagom_pingpong(
                    &rt,
                    0,
                    1,
                    Some(Busy::CondResched(0)),
                    Some(SHORT_SLICE),
                    WARMUP,
                    n,
                )
            })
        });
        g.bench_function("lagom/remote_idle", |b| {
            b.iter_custom(|n| lagom_pingpong(&rt, 0, 1, None, None, WARMUP, n))
        });
        drop(rt);
        // SAFETY: as for the first runtime: the same tasks.
        let rt = unsafe {
            Runtime::builder()
                .idle_spin(Duration::ZERO)
                .allow_migration()
        }
        .build()
        .expect("lagom runtime");
        g.bench_function("lagom/remote_idle_futex", |b| {
            b.iter_custom(|n| lagom_pingpong(&rt, 0, 1, None, None, WARMUP, n))
        });
    }

    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio runtime");
    g.bench_function("tokio/pingpong", |b| {
        b.iter_custom(|n| tokio_pingpong(&tokio, false, n))
    });
    g.bench_function("tokio/pingpong_busy", |b| {
        b.iter_custom(|n| tokio_pingpong(&tokio, true, n))
    });
    if let [a, b, ..] = cpus[..] {
        g.bench_function("tokio/remote_busy", |bch| {
            bch.iter_custom(|n| tokio_remote([a, b], true, WARMUP, n))
        });
        g.bench_function("tokio/remote_idle", |bch| {
            bch.iter_custom(|n| tokio_remote([a, b], false, WARMUP, n))
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! { name = benches; config = config(); targets = bench_wake }
criterion_main!(benches);
