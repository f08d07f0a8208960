//! The idle spin (`Builder::idle_spin`, `Builder::idle_spin_adaptive`): its validation, and
//! what it changes — with no spin an idle worker sleeps on its futex and each remote wake
//! kicks it; with a spin much longer than the gap between wakes the wake finds it spinning
//! and no kick is sent; the default adaptive spin learns such gaps and stays at 0 without
//! them.
//!
//! The counts are compared with wide margins, not exact values: on a loaded machine the OS
//! may deschedule a worker thread for milliseconds at any point, which can turn a single
//! round either way.
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lagom::runtime::{DEFAULT_IDLE_SPIN, MAX_IDLE_SPIN, WorkerStats};
use lagom::task::{Builder, Unparker};
use lagom::{Error, Runtime};

#[test]
fn spin_longer_than_the_maximum_is_an_error() {
    let too_long = MAX_IDLE_SPIN + Duration::from_nanos(1);
    let err = Runtime::builder().idle_spin(too_long).build().unwrap_err();
    assert_eq!(
        err,
        Error::IdleSpinTooLong {
            requested: too_long,
            maximum: MAX_IDLE_SPIN
        }
    );
    let msg = err.to_string();
    assert!(msg.contains(&format!("{MAX_IDLE_SPIN:?}")), "{msg}");
    assert!(msg.contains("Duration::ZERO"), "{msg}");
    // A unit slip (seconds for microseconds) is caught too.
    assert!(matches!(
        Runtime::builder()
            .idle_spin(Duration::from_secs(50))
            .build(),
        Err(Error::IdleSpinTooLong { .. })
    ));
    // The bounds themselves, and the default, are accepted.
    assert!(DEFAULT_IDLE_SPIN <= MAX_IDLE_SPIN);
    for ok in [Duration::ZERO, MAX_IDLE_SPIN, DEFAULT_IDLE_SPIN] {
        let rt = Runtime::builder().idle_spin(ok).build();
        assert!(rt.is_ok(), "{ok:?}: {rt:?}");
    }
}

/// Task A (worker 0) wakes task B (parked on worker 1) `n` times, each `gap` after B
/// acknowledged the previous wake; returns worker 1's counters over the wakes.
fn remote_wakes(spin: Duration, gap: Duration, n: u64) -> WorkerStats {
    remote_wakes_on(Runtime::builder().idle_spin(spin), gap, n)
}

/// [`remote_wakes`] on a runtime from `b` (its worker CPUs set here).
fn remote_wakes_on(b: lagom::runtime::Builder, gap: Duration, n: u64) -> WorkerStats {
    let cpus = runtime_util::two_cpus();
    assert_eq!(cpus.len(), 2, "needs two CPUs");
    let rt = b.worker_cpus(cpus.clone()).build().unwrap();
    let turn = Arc::new(AtomicU64::new(0));
    let ack = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(AtomicBool::new(false));
    let go = Arc::new(AtomicBool::new(false));
    let _dog = runtime_util::Watchdog::new("idle spin", Arc::clone(&ack), Duration::from_secs(5));
    let un: Arc<std::sync::OnceLock<Unparker>> = Arc::default();
    let b = {
        let (turn, ack, un) = (Arc::clone(&turn), Arc::clone(&ack), Arc::clone(&un));
        rt.spawn_with(Builder::new().cpus([cpus[1]]), move || {
            un.set(lagom::task::current_unparker()).unwrap();
            for k in 1..=n {
                while turn.load(Ordering::Acquire) != k {
                    lagom::task::park();
                }
                ack.store(k, Ordering::Release);
            }
        })
        .unwrap()
    };
    let a = {
        let (turn, ack, un) = (Arc::clone(&turn), Arc::clone(&ack), Arc::clone(&un));
        let (ready, go) = (Arc::clone(&ready), Arc::clone(&go));
        rt.spawn_with(Builder::new().cpus([cpus[0]]), move || {
            let un = loop {
                if let Some(u) = un.get() {
                    break u.clone();
                }
                lagom::task::yield_now();
            };
            ready.store(true, Ordering::Release);
            while !go.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            for k in 1..=n {
                while ack.load(Ordering::Acquire) != k - 1 {
                    std::hint::spin_loop();
                }
                let t = Instant::now();
                while t.elapsed() < gap {
                    std::hint::spin_loop();
                }
                turn.store(k, Ordering::Release);
                un.unpark();
            }
        })
        .unwrap()
    };
    while !ready.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    let before = rt.stats().workers[1];
    go.store(true, Ordering::Release);
    a.join().unwrap();
    b.join().unwrap();
    let after = rt.stats().workers[1];
    let st = rt.shutdown();
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
    WorkerStats {
        idle_sleeps: after.idle_sleeps - before.idle_sleeps,
        kicks: after.kicks - before.kicks,
        idle_spin_hits: after.idle_spin_hits - before.idle_spin_hits,
        ..after
    }
}

/// With no spin, worker 1 goes to sleep as soon as B parks, so nearly every wake (200 µs
/// later) finds it asleep and kicks it. With the longest spin (10 ms) and wakes 100 µs apart,
/// worker 1 is still spinning when the wake arrives: it neither sleeps nor needs a kick (but
/// for the rare round in which the OS took a thread away for longer than the spin). One test,
/// so that the two runs do not compete for the CPUs.
#[test]
fn the_spin_decides_whether_an_idle_worker_sleeps() {
    let n = 50;
    let w = remote_wakes(Duration::ZERO, Duration::from_micros(200), n);
    assert!(
        w.idle_sleeps >= n / 2 && w.kicks >= n / 2,
        "no spin, {n} wakes: {} idle sleeps, {} kicks",
        w.idle_sleeps,
        w.kicks
    );
    let w = remote_wakes(MAX_IDLE_SPIN, Duration::from_micros(100), n);
    assert!(
        w.idle_sleeps <= n / 4 && w.kicks <= n / 4,
        "10 ms spin, {n} wakes: {} idle sleeps, {} kicks",
        w.idle_sleeps,
        w.kicks
    );
}

/// The default, adaptive spin: wakes that come some 20 µs after worker 1 went idle (within
/// the 30 µs ceiling) grow its window from 0, so that the later ones find it spinning; most
/// wakes then need no kick, and the spin's hits are counted. An idle runtime's workers,
/// whose only wakes are their own timers or none, never spin at all.
#[test]
fn the_adaptive_spin_learns_short_gaps_and_an_idle_runtime_does_not_spin() {
    let n = 200;
    let w = remote_wakes_on(Runtime::builder(), Duration::from_micros(20), n);
    assert!(
        w.kicks <= n / 2 && w.idle_spin_hits >= n / 4,
        "adaptive spin, {n} wakes 20 µs apart: {} kicks, {} spin hits",
        w.kicks,
        w.idle_spin_hits
    );
    let rt = Runtime::builder().build().unwrap();
    // The workers go idle at the start; the first wake comes long after (past the ceiling).
    std::thread::sleep(Duration::from_millis(30));
    rt.spawn(|| lagom::task::sleep(Duration::from_millis(20)))
        .join()
        .unwrap();
    std::thread::sleep(Duration::from_millis(30));
    for w in rt.stats().workers {
        assert_eq!(
            (w.idle_spin_ns, w.idle_spin_hits),
            (0, 0),
            "an idle worker (one that only slept to a timer) spun: {w:?}"
        );
    }
}
