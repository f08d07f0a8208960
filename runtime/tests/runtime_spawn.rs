//! 100 000 tasks spawned and joined with correct results; shutdown with blocked tasks.
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lagom::Runtime;

#[test]
fn hundred_thousand_tasks() {
    const CHUNKS: u64 = 100;
    const PER_CHUNK: u64 = 1_000;
    let rt = Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .stack_size(64 * 1024)
        .build()
        .unwrap();
    let progress = Arc::new(AtomicU64::new(0));
    let _dog = runtime_util::Watchdog::new("spawn", Arc::clone(&progress), Duration::from_secs(5));
    let p = Arc::clone(&progress);
    let sum = rt.block_on(move || {
        let mut sum = 0u64;
        for c in 0..CHUNKS {
            let hs: Vec<_> = (0..PER_CHUNK)
                .map(|i| {
                    let n = c * PER_CHUNK + i;
                    lagom::task::spawn(move || n * n % 1_000_003)
                })
                .collect();
            for (i, h) in hs.into_iter().enumerate() {
                let n = c * PER_CHUNK + i as u64;
                let v = h.join().unwrap();
                assert_eq!(v, n * n % 1_000_003, "task {n} returned a wrong value");
                sum += v;
            }
            p.fetch_add(1, Ordering::Relaxed);
        }
        sum
    });
    let expect: u64 = (0..CHUNKS * PER_CHUNK).map(|n| n * n % 1_000_003).sum();
    assert_eq!(sum, expect);
    let st = rt.shutdown();
    let t = st.total();
    assert_eq!(t.spawns, CHUNKS * PER_CHUNK + 1);
    assert_eq!(t.exits, CHUNKS * PER_CHUNK + 1);
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
}

/// Shutdown with tasks blocked in park, sleeping, and joining each other: it returns, every
/// blocked task is cancelled (it unwinds; joining it returns a cancelled error, without a
/// panic), and every task and stack is freed.
#[test]
fn shutdown_with_blocked_tasks_neither_hangs_nor_leaks() {
    let progress = Arc::new(AtomicU64::new(0));
    let _dog =
        runtime_util::Watchdog::new("shutdown", Arc::clone(&progress), Duration::from_secs(5));
    let rt = Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .build()
        .unwrap();
    let started = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for i in 0..20 {
        let s = Arc::clone(&started);
        handles.push(rt.spawn(move || {
            s.fetch_add(1, Ordering::Relaxed);
            match i % 3 {
                0 => loop {
                    lagom::task::park();
                },
                1 => lagom::task::sleep(Duration::from_secs(3600)),
                _ => {
                    let inner = lagom::task::spawn(|| {
                        loop {
                            lagom::task::park();
                        }
                    });
                    let _ = inner.join();
                }
            }
        }));
    }
    // Finished tasks are freed at once; they must not disturb the count.
    let done: Vec<_> = (0..10u32).map(|i| rt.spawn(move || i)).collect();
    for (i, h) in done.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), i as u32);
    }
    while started.load(Ordering::Relaxed) < 20 {
        std::thread::yield_now();
    }
    std::thread::sleep(Duration::from_millis(20));
    let live = rt.stats().live_tasks;
    assert!(
        live >= 20,
        "blocked tasks are live before shutdown ({live})"
    );
    let st = rt.shutdown();
    progress.fetch_add(1, Ordering::Relaxed);
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
    // The 14 that park or sleep and the 6 inner tasks are cancelled; each of the 6 that join
    // an inner task is cancelled too, unless its inner task was first: its join then
    // returns the inner task's cancellation, and it ends normally.
    let cancelled = st.total().cancelled;
    assert!(
        (20..=26).contains(&cancelled),
        "{cancelled} cancelled\n{st}"
    );
    assert_eq!(
        st.shutdown,
        lagom::runtime::ShutdownStats::default(),
        "nothing abandoned"
    );
    let mut ended = 0;
    for (i, h) in handles.into_iter().enumerate() {
        assert!(h.is_finished());
        match h.join() {
            Err(e) => assert!(e.is_cancelled() && !e.is_panic(), "{e}"),
            Ok(()) if i % 3 == 2 => ended += 1,
            Ok(()) => panic!("task {i}, blocked for good, ended normally"),
        }
    }
    assert_eq!(cancelled, 26 - ended, "{st}");
}

/// A spawn is a preemption point, as the kernel's `fork` returns through one: a task that
/// spawns in a loop, with no other call into lagom, gives its one worker up once its request
/// is used up, so children queued behind it run before the loop ends (without the point none
/// could: they wait for the spawner's first blocking call). The spawns also stay no
/// cancellation point, and every child's result arrives.
#[test]
fn a_spawning_loop_lets_its_children_run_once_its_request_is_used_up() {
    let cpu = runtime_util::two_cpus()[0];
    let rt = Runtime::builder().worker_cpus([cpu]).build().unwrap();
    let (ran_meanwhile, spawned, sum) = rt.block_on(|| {
        let ran = Arc::new(AtomicU64::new(0));
        let t0 = std::time::Instant::now();
        let mut hs = Vec::new();
        // 40 ms of the spawner's own work (many default slices), a spawn every 20 µs.
        while t0.elapsed() < Duration::from_millis(40) {
            let r = Arc::clone(&ran);
            let i = hs.len() as u64;
            hs.push(lagom::task::spawn(move || {
                r.fetch_add(1, Ordering::Relaxed);
                i
            }));
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_micros(20) {
                std::hint::spin_loop();
            }
        }
        let ran_meanwhile = ran.load(Ordering::Relaxed);
        let spawned = hs.len() as u64;
        let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        (ran_meanwhile, spawned, sum)
    });
    assert_eq!(sum, spawned * (spawned - 1) / 2, "every child's result");
    assert!(
        ran_meanwhile > 0,
        "none of {spawned} children ran while their spawner spawned for 40 ms on their worker"
    );
    println!("{ran_meanwhile} of {spawned} children ran during the spawning loop");
}
