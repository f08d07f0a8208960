//! The timer spin (`Builder::timer_spin`): its validation, and what it changes —
//! an idle worker whose next timer is within the spin waits for it spinning, so a task's
//! `sleep` shorter than the spin is woken without the worker sleeping on its futex; with no
//! spin every such wait is a futex sleep. Neither wakes a sleeper early.

use std::time::{Duration, Instant};

use lagom::runtime::{DEFAULT_TIMER_SPIN, MAX_IDLE_SPIN};
use lagom::{Error, Runtime};

#[test]
fn spin_longer_than_the_maximum_is_an_error() {
    let too_long = MAX_IDLE_SPIN + Duration::from_nanos(1);
    let err = Runtime::builder().timer_spin(too_long).build().unwrap_err();
    assert_eq!(
        err,
        Error::TimerSpinTooLong {
            requested: too_long,
            maximum: MAX_IDLE_SPIN
        }
    );
    let msg = err.to_string();
    assert!(msg.contains(&format!("{MAX_IDLE_SPIN:?}")), "{msg}");
    assert!(msg.contains("Duration::ZERO"), "{msg}");
    assert!(DEFAULT_TIMER_SPIN <= MAX_IDLE_SPIN);
    for ok in [Duration::ZERO, MAX_IDLE_SPIN, DEFAULT_TIMER_SPIN] {
        let rt = Runtime::builder().timer_spin(ok).build();
        assert!(rt.is_ok(), "{ok:?}: {rt:?}");
    }
}

/// One worker, one task sleeping `n` times for 1 ms: the worker's futex sleeps over the run,
/// and the shortest sleep seen.
fn sleeps(spin: Duration, n: u32) -> (u64, Duration) {
    let cpu = Runtime::builder().build().unwrap().worker_cpus()[0];
    let rt = Runtime::builder()
        .worker_cpus([cpu])
        .idle_spin(Duration::ZERO)
        .timer_spin(spin)
        .build()
        .unwrap();
    let before = rt.stats().workers[0].idle_sleeps;
    let shortest = rt.block_on(move || {
        (0..n)
            .map(|_| {
                let t = Instant::now();
                lagom::task::sleep(Duration::from_millis(1));
                t.elapsed()
            })
            .min()
            .unwrap()
    });
    let after = rt.stats().workers[0].idle_sleeps;
    (after - before, shortest)
}

#[test]
fn a_timer_within_the_spin_is_waited_for_spinning() {
    let n = 40;
    let (slept_plain, shortest_plain) = sleeps(Duration::ZERO, n);
    let (slept_spin, shortest_spin) = sleeps(Duration::from_millis(5), n);
    for s in [shortest_plain, shortest_spin] {
        assert!(s >= Duration::from_millis(1), "woke early: {s:?}");
    }
    // Without a spin each 1 ms sleep is a futex sleep of the idle worker (a preempted
    // worker thread can only add sleeps: a timeout that finds the deadline passed).
    assert!(
        slept_plain >= u64::from(n) / 2,
        "{slept_plain} futex sleeps"
    );
    // With a 5 ms spin none needs one (a few allowed for the runtime's own timeouts).
    assert!(slept_spin <= 4, "{slept_spin} futex sleeps with the spin");
}
