//! `task::spawn_blocking`: closures that block in the OS run on the blocking pool while their
//! joiners park, so blocking calls overlap instead of holding the workers; the pool grows on
//! demand, stays within its bound, retires idle threads, and serves plain threads too.
mod panic_util;
mod runtime_util;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task::{self, blocking_pool_stats, configure_blocking_pool, spawn_blocking};

/// The pool is the process's: the tests of this file, which look at its threads, run one at a
/// time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one() -> std::sync::MutexGuard<'static, ()> {
    let g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    configure_blocking_pool(
        task::DEFAULT_MAX_BLOCKING_THREADS,
        task::DEFAULT_BLOCKING_KEEP_ALIVE,
    )
    .unwrap();
    g
}

/// Ten tasks on two workers each sleep 20 ms in the OS: on the workers that takes about 100 ms
/// (five sleeps in a row per worker); through `spawn_blocking` the ten sleeps overlap.
#[test]
fn ten_blocking_sleeps_overlap_on_two_workers() {
    let _one = one();
    let rt = Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .build()
        .unwrap();
    let run = |offload: bool| {
        let t0 = Instant::now();
        rt.block_on(move || {
            let tasks: Vec<_> = (0..10)
                .map(|_| {
                    task::spawn(move || {
                        let nap = || std::thread::sleep(Duration::from_millis(20));
                        match offload {
                            true => spawn_blocking(nap).join().unwrap(),
                            false => nap(),
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.join().unwrap();
            }
        });
        t0.elapsed()
    };
    // Warm the pool (its threads are started on demand, then kept).
    run(true);
    let offloaded = run(true);
    let on_workers = run(false);
    println!("10 x 20 ms: {offloaded:?} through spawn_blocking, {on_workers:?} on the workers");
    assert!(
        offloaded < Duration::from_millis(60),
        "10 x 20 ms through spawn_blocking took {offloaded:?}"
    );
    let workers = rt.worker_cpus().len() as u32;
    assert!(
        on_workers >= Duration::from_millis(20) * 10 / workers,
        "sleeping on the workers took only {on_workers:?}: the comparison shows nothing"
    );
}

#[test]
fn plain_threads_can_use_it_and_panics_reach_the_joiner() {
    let _one = one();
    let h = spawn_blocking(|| 6 * 7);
    assert_eq!(h.join().unwrap(), 42);
    panic_util::quiet();
    let h = spawn_blocking(|| -> u32 { panic!("deliberate: a blocking job panics") });
    let e = h.join().unwrap_err();
    assert!(
        e.is_panic() && e.task_name().starts_with("blocking-"),
        "{e}"
    );
    assert!(e.to_string().contains("a blocking job panics"), "{e}");
}

#[test]
fn the_pool_is_bounded_and_retires_idle_threads() {
    let _one = one();
    assert!(configure_blocking_pool(0, Duration::from_secs(1)).is_err());
    let err = configure_blocking_pool(0, Duration::from_secs(1)).unwrap_err();
    assert!(err.to_string().contains("1 to 10000"), "{err}");
    let keep = Duration::from_millis(100);
    configure_blocking_pool(2, keep).unwrap();
    // Let threads of earlier tests retire.
    let t0 = Instant::now();
    while blocking_pool_stats().threads > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "idle threads never retired"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let t0 = Instant::now();
    let jobs: Vec<_> = (0..4)
        .map(|_| spawn_blocking(|| std::thread::sleep(Duration::from_millis(30))))
        .collect();
    let st = blocking_pool_stats();
    assert!(st.threads <= 2, "{st:?}");
    for j in jobs {
        j.join().unwrap();
    }
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(60),
        "4 x 30 ms on at most 2 threads took {took:?}"
    );
    assert_eq!(
        blocking_pool_stats().threads,
        2,
        "grown to the bound, not beyond"
    );
    std::thread::sleep(keep * 3);
    assert_eq!(
        blocking_pool_stats().threads,
        0,
        "idle threads retire after the keep-alive"
    );
}

/// A burst larger than the idle threads left from earlier jobs starts threads for the rest
/// instead of queueing behind the idle ones (each submission counts the wakeup it sends).
#[test]
fn a_burst_beyond_the_idle_threads_grows_the_pool() {
    let _one = one();
    // Two threads, left idle.
    for j in [spawn_blocking(|| ()), spawn_blocking(|| ())] {
        j.join().unwrap();
    }
    let started = blocking_pool_stats().started;
    let t0 = Instant::now();
    let jobs: Vec<_> = (0..10)
        .map(|_| spawn_blocking(|| std::thread::sleep(Duration::from_millis(20))))
        .collect();
    for j in jobs {
        j.join().unwrap();
    }
    let took = t0.elapsed();
    // Eight threads start for the jobs the two idle ones cannot take; queued behind those
    // two instead, the ten take five rounds, 100 ms. The count is the test (a host that
    // delays a submission past a 20 ms job may let an idle thread take it — then the time
    // shows the overlap: under qemu-user the burst took 62.7 ms once, its thread starts
    // slow).
    let grown = blocking_pool_stats().started - started;
    assert!(
        grown >= 8 || took < Duration::from_millis(60),
        "10 x 20 ms took {took:?}, with {grown} threads started for them"
    );
}
