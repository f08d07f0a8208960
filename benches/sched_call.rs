//! The cost of a scheduling call, lagom beside `may` and tokio in one run, each on
//! one worker (one OS thread):
//!
//! * `*/cond_resched_idle` — lagom's `cond_resched` with nothing due (no other task, no
//!   timer): the price a hog pays per call for being preemptible;
//! * `*/yield_pair` — `yield_now` with one other runnable task that also yields: the time of
//!   one yield of the timed task, i.e. a round A → B → A (two switches, two calls);
//!   lagom `yield_now`, may `coroutine::yield_now`, tokio `task::yield_now` (current-thread
//!   runtime);
//! * `*/park_unpark_rt` — the same-worker park/unpark round trip: two tasks pass a turn,
//!   each parking until it is its own and unparking the other (lagom `park`/`Unparker`, may
//!   `coroutine::park`/`Coroutine::unpark`, tokio `Notify` ping-pong on a current-thread
//!   runtime); the time of one round trip.
//!
//! * `lagom_no_host_hints/*` — `cond_resched_idle` and `park_unpark_rt` on a runtime built
//!   with `host_hints(false)`: beside the default's, the cost of the workers' host hints;
//!
//! * `clock/*`, `flag/relaxed_load` — the candidate sources of `cond_resched`'s "is a tick
//!   due": a read of the TSC (what the scheduler clock is on x86_64 with an invariant TSC,
//!   before its multiply), `clock_gettime(CLOCK_MONOTONIC)` through the vDSO, and the load
//!   of a flag, which is what the call does now (the worker's resched word, set by its tick
//!   timer);
//! * `task_clock/*` — the candidate sources of a task clock that leaves out the time the
//!   worker thread was off its CPU (the kernel's `clock_task`): the thread's
//!   `CLOCK_THREAD_CPUTIME_ID`, `getrusage(RUSAGE_THREAD)`, and a read of
//!   `/proc/thread-self/schedstat` (its first field: ns on a CPU) through an open descriptor.
//!
//! After the criterion group, the hogs' throughput loss from calling `cond_resched` every
//! iteration of a tight loop is timed, interleaved round by round with the same loop without
//! the call (on one lagom worker, nothing else runnable), for a tiny and a ~0.3 µs work unit;
//! each side's fastest round is kept and the loss printed in %. Last, the cost of the
//! alternative to the worker's tick timer that was measured and rejected: a ticker thread
//! waking every 50 µs (its CPU time per second and how late its wakeups are).
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::Criterion;
use lagom::Runtime;
use lagom_benches::workloads;

/// A lagom runtime with one worker, on the first CPU this process may use.
fn lagom_rt() -> Runtime {
    lagom_rt_hints(true)
}

/// [`lagom_rt`] with its worker's host hints on or off (`Builder::host_hints`).
fn lagom_rt_hints(hints: bool) -> Runtime {
    let cpu = Runtime::builder().build().expect("runtime").worker_cpus()[0];
    Runtime::builder()
        .worker_cpus([cpu])
        .host_hints(hints)
        .build()
        .expect("one-worker runtime")
}

// may's worker takes coroutines spawned from outside its threads from a global queue only
// when its local queue is empty, and a yield goes to the back of the local queue: a
// coroutine spawned from outside would starve behind a yielding one. So each case runs in
// one coroutine that spawns its partner from inside (both then on the local queue).

fn may_yield_pair(iters: u64) -> Duration {
    // SAFETY: the coroutines use no thread-local storage across yields.
    let timed = unsafe {
        may::coroutine::spawn(move || {
            let stop = Arc::new(AtomicBool::new(false));
            let s = Arc::clone(&stop);
            // SAFETY: as above.
            let other = may::coroutine::spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    may::coroutine::yield_now();
                }
            });
            may::coroutine::yield_now();
            let t = Instant::now();
            for _ in 0..iters {
                may::coroutine::yield_now();
            }
            let e = t.elapsed();
            stop.store(true, Ordering::Relaxed);
            let _ = other.join();
            e
        })
    };
    timed.join().unwrap_or(Duration::ZERO)
}

fn may_park_unpark(iters: u64) -> Duration {
    // SAFETY: the coroutines use no thread-local storage across parks.
    let a = unsafe {
        may::coroutine::spawn(move || {
            let turn = Arc::new(AtomicU64::new(0));
            let t2 = Arc::clone(&turn);
            let me = may::coroutine::current();
            // SAFETY: as above.
            let b = may::coroutine::spawn(move || {
                for i in 0..iters {
                    while t2.load(Ordering::Acquire) != 2 * i + 1 {
                        may::coroutine::park();
                    }
                    t2.store(2 * i + 2, Ordering::Release);
                    me.unpark();
                }
            });
            let other = b.coroutine().clone();
            may::coroutine::yield_now();
            let t = Instant::now();
            for i in 0..iters {
                turn.store(2 * i + 1, Ordering::Release);
                other.unpark();
                while turn.load(Ordering::Acquire) != 2 * i + 2 {
                    may::coroutine::park();
                }
            }
            let e = t.elapsed();
            let _ = b.join();
            e
        })
    };
    a.join().unwrap_or(Duration::ZERO)
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio current-thread runtime")
}

fn tokio_yield_pair(rt: &tokio::runtime::Runtime, iters: u64) -> Duration {
    rt.block_on(async move {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let other = tokio::spawn(async move {
            while !s.load(Ordering::Relaxed) {
                tokio::task::yield_now().await;
            }
        });
        let timed = tokio::spawn(async move {
            tokio::task::yield_now().await;
            let t = Instant::now();
            for _ in 0..iters {
                tokio::task::yield_now().await;
            }
            let e = t.elapsed();
            stop.store(true, Ordering::Relaxed);
            e
        });
        let e = timed.await.expect("timed");
        other.await.expect("other");
        e
    })
}

fn tokio_notify_pingpong(rt: &tokio::runtime::Runtime, iters: u64) -> Duration {
    use tokio::sync::Notify;
    rt.block_on(async move {
        let (to_a, to_b) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let (a2, b2) = (Arc::clone(&to_a), Arc::clone(&to_b));
        let b = tokio::spawn(async move {
            for _ in 0..iters {
                b2.notified().await;
                a2.notify_one();
            }
        });
        let a = tokio::spawn(async move {
            let t = Instant::now();
            for _ in 0..iters {
                to_b.notify_one();
                to_a.notified().await;
            }
            t.elapsed()
        });
        let e = a.await.expect("A");
        b.await.expect("B");
        e
    })
}

fn benches() {
    let mut c = config().configure_from_args();
    let mut g = c.benchmark_group("sched_call");
    let rt = lagom_rt();
    g.bench_function("lagom/cond_resched_idle", |b| {
        b.iter_custom(|n| workloads::cond_resched(&rt, n))
    });
    g.bench_function("lagom/yield_pair", |b| {
        b.iter_custom(|n| workloads::yield_pair(&rt, n))
    });
    g.bench_function("lagom/park_unpark_rt", |b| {
        b.iter_custom(|n| workloads::park_unpark(&rt, n))
    });
    // The cost of the host hints: the same two calls on a runtime without them, beside the
    // default's above.
    let off = lagom_rt_hints(false);
    g.bench_function("lagom_no_host_hints/cond_resched_idle", |b| {
        b.iter_custom(|n| workloads::cond_resched(&off, n))
    });
    g.bench_function("lagom_no_host_hints/park_unpark_rt", |b| {
        b.iter_custom(|n| workloads::park_unpark(&off, n))
    });
    drop(off);
    may::config().set_workers(1);
    g.bench_function("may/yield_pair", |b| b.iter_custom(may_yield_pair));
    g.bench_function("may/park_unpark_rt", |b| b.iter_custom(may_park_unpark));
    let tk = tokio_rt();
    g.bench_function("tokio/yield_pair", |b| {
        b.iter_custom(|n| tokio_yield_pair(&tk, n))
    });
    g.bench_function("tokio/notify_pingpong_rt", |b| {
        b.iter_custom(|n| tokio_notify_pingpong(&tk, n))
    });
    #[cfg(target_arch = "x86_64")]
    g.bench_function("clock/rdtsc", |b| {
        // SAFETY: rdtsc has no preconditions on x86_64.
        b.iter(|| black_box(unsafe { core::arch::x86_64::_rdtsc() }))
    });
    g.bench_function("clock/clock_gettime_monotonic", |b| {
        b.iter(|| {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is writable; CLOCK_MONOTONIC exists on Linux.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
            black_box(ts.tv_nsec)
        })
    });
    g.bench_function("task_clock/thread_cputime", |b| {
        b.iter(|| {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is writable; the thread CPU clock exists on Linux.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            black_box(ts.tv_nsec)
        })
    });
    g.bench_function("task_clock/getrusage_thread", |b| {
        b.iter(|| {
            // SAFETY: an all-zero rusage is a valid value to overwrite.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: `ru` is writable.
            unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
            black_box(ru.ru_utime.tv_usec)
        })
    });
    if let Ok(f) = std::fs::File::open("/proc/thread-self/schedstat") {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 128];
        g.bench_function("task_clock/schedstat_pread", |b| {
            b.iter(|| {
                let n = f.read_at(&mut buf, 0).unwrap_or(0);
                let ns: u64 = std::str::from_utf8(&buf[..n])
                    .ok()
                    .and_then(|t| t.split_whitespace().next())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                black_box(ns)
            })
        });
    }
    let flag = AtomicBool::new(false);
    g.bench_function("flag/relaxed_load", |b| {
        b.iter(|| black_box(black_box(&flag).load(Ordering::Relaxed)))
    });
    g.finish();
    drop(rt);
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

/// One unit of a hog's work: `ops` dependent multiply-adds, opaque to the optimiser.
#[inline(always)]
fn work(h: u64, ops: u32) -> u64 {
    let mut h = h;
    for _ in 0..ops {
        h = black_box(
            h.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
    }
    h
}

/// The hogs' throughput loss (module doc): `ROUNDS` rounds of `PER_ROUND` iterations with
/// and without `cond_resched`, interleaved, fastest round of each.
fn hog_loss() {
    const ROUNDS: usize = 200;
    const PER_ROUND: u64 = 20_000;
    let rt = lagom_rt();
    for ops in [4u32, 256] {
        let (with, without) = rt.block_on(move || {
            let mut best = [f64::MAX; 2];
            let mut h = 1u64;
            for _ in 0..ROUNDS {
                for (k, resched) in [(0usize, true), (1, false)] {
                    let t = Instant::now();
                    for _ in 0..PER_ROUND {
                        h = work(h, ops);
                        if resched {
                            lagom::task::cond_resched();
                        }
                    }
                    let ns = t.elapsed().as_nanos() as f64 / PER_ROUND as f64;
                    best[k] = best[k].min(ns);
                }
            }
            black_box(h);
            (best[0], best[1])
        });
        println!(
            "hog loop of {ops} multiply-adds: {without:.2} ns/iteration alone, {with:.2} with \
             cond_resched each iteration: throughput loss {:.1} % (fastest of {ROUNDS} rounds)",
            (1.0 - without / with) * 100.0
        );
    }
}

/// What the alternative to `cond_resched`'s clock read would cost (module doc): a ticker
/// thread that wakes every `TICK` (50 µs) to set a "tick due" flag for the workers. For one
/// second it sleeps to absolute 50 µs deadlines (`clock_nanosleep`, timer slack 1 ns, as the
/// workers' own timed sleeps; a tick it missed is skipped, not caught up), and its own CPU
/// time (`CLOCK_THREAD_CPUTIME_ID`) per second is printed with the wakeups it made and how
/// late they were on average.
fn ticker_cost() {
    const PERIOD_NS: i64 = 50_000;
    const WALL_NS: i64 = 1_000_000_000;
    let (cpu_ns, wakeups, late_ns) = std::thread::spawn(|| {
        // SAFETY: PR_SET_TIMERSLACK with a value takes no pointer; the calling thread's.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
        let clock = |id| {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is writable; both clocks exist on Linux.
            unsafe { libc::clock_gettime(id, &mut ts) };
            ts.tv_sec * 1_000_000_000 + ts.tv_nsec
        };
        let (start, cpu0) = (
            clock(libc::CLOCK_MONOTONIC),
            clock(libc::CLOCK_THREAD_CPUTIME_ID),
        );
        let (mut deadline, mut wakeups, mut late) = (start, 0u64, 0i64);
        while deadline - start < WALL_NS {
            deadline += PERIOD_NS;
            let ts = libc::timespec {
                tv_sec: (deadline / 1_000_000_000) as libc::time_t,
                tv_nsec: (deadline % 1_000_000_000) as libc::c_long,
            };
            // SAFETY: `ts` is a valid absolute time; no remainder is asked for.
            unsafe {
                libc::clock_nanosleep(
                    libc::CLOCK_MONOTONIC,
                    libc::TIMER_ABSTIME,
                    &ts,
                    std::ptr::null_mut(),
                )
            };
            let now = clock(libc::CLOCK_MONOTONIC);
            late += (now - deadline).max(0);
            wakeups += 1;
            // A ticker that fell behind skips the ticks it missed (no burst of catch-up
            // wakeups, which would count as its cost).
            deadline = deadline.max(now - PERIOD_NS);
        }
        let cpu = clock(libc::CLOCK_THREAD_CPUTIME_ID) - cpu0;
        (cpu, wakeups, late / wakeups.max(1) as i64)
    })
    .join()
    .expect("ticker");
    println!(
        "ticker alternative: a thread waking every 50 µs for 1 s used {:.1} ms of CPU \
         ({:.1} % of a CPU; {wakeups} wakeups, {:.1} µs late on average)",
        cpu_ns as f64 / 1e6,
        cpu_ns as f64 / 1e7,
        late_ns as f64 / 1e3
    );
}

fn main() {
    benches();
    if !std::env::args().any(|a| a == "--list" || a == "--test") {
        hog_loss();
        ticker_cost();
    }
    Criterion::default().configure_from_args().final_summary();
}
