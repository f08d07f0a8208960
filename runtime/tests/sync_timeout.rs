//! Timed waits on the workers' timers (and on a thread's futex outside tasks):
//! `park_timeout`, `sleep_until`, `JoinHandle::join_timeout`, each within a generous bound,
//! and an unpark that ends a `park_timeout` early.
mod sync_util;

use std::time::{Duration, Instant};

use lagom::task;
use sync_util::{on, rt2};

/// At least `d` and at most 3 s.
fn within(took: Duration, d: Duration) {
    assert!(took >= d, "{took:?} < {d:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[test]
fn park_timeout_returns_after_its_timeout() {
    let (rt, cpus) = rt2();
    let d = Duration::from_millis(30);
    let timed = move || {
        let t0 = Instant::now();
        // `park_timeout` may return early (spuriously): loop to the deadline, as a caller does.
        while t0.elapsed() < d {
            task::park_timeout(d - t0.elapsed());
        }
        t0.elapsed()
    };
    within(on(&rt, cpus[0], timed).join().unwrap(), d);
    within(timed(), d);
}

#[test]
fn unpark_ends_park_timeout_early() {
    let (rt, cpus) = rt2();
    let (tx, rx) = lagom::sync::mpsc::channel();
    let h = on(&rt, cpus[0], move || {
        tx.send(task::current_unparker()).unwrap();
        let t0 = Instant::now();
        task::park_timeout(Duration::from_secs(30));
        t0.elapsed()
    });
    let u = rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(10));
    u.unpark();
    assert!(h.join().unwrap() < Duration::from_secs(10));
}

#[test]
fn sleep_until_a_deadline() {
    let (rt, cpus) = rt2();
    let run = || {
        let t0 = Instant::now();
        task::sleep_until(lagom::time::Instant::now() + Duration::from_millis(25));
        let a = t0.elapsed();
        // A std deadline, as std's `sleep_until` takes.
        let t1 = Instant::now();
        task::sleep_until(t1 + Duration::from_millis(25));
        // A deadline in the past returns at once.
        task::sleep_until(lagom::time::Instant::now() - Duration::from_millis(1));
        (a, t1.elapsed())
    };
    for (a, b) in [on(&rt, cpus[0], run).join().unwrap(), run()] {
        within(a, Duration::from_millis(25));
        within(b, Duration::from_millis(24));
    }
}

#[test]
fn join_timeout_times_out_then_joins() {
    let (rt, cpus) = rt2();
    let (tx, rx) = lagom::sync::oneshot::channel::<()>();
    let h = on(&rt, cpus[1 % cpus.len()], move || {
        rx.recv().unwrap();
        5
    });
    // From a task: it times out, and the handle comes back.
    let h = on(&rt, cpus[0], move || {
        let t0 = Instant::now();
        let h = h.join_timeout(Duration::from_millis(20)).unwrap_err();
        (h, t0.elapsed())
    });
    let (h, took) = h.join().unwrap();
    within(took, Duration::from_millis(20));
    // From this thread (not the waiter registered by the task): it times out again, then
    // the task ends and a plain join gets the value.
    let t0 = Instant::now();
    let h = h.join_timeout(Duration::from_millis(20)).unwrap_err();
    within(t0.elapsed(), Duration::from_millis(20));
    tx.send(()).unwrap();
    assert_eq!(h.join().unwrap(), 5);
    // A task that ends in time: `Ok` with its outcome.
    let h = on(&rt, cpus[0], || 6);
    assert_eq!(
        h.join_timeout(Duration::from_secs(20))
            .ok()
            .unwrap()
            .unwrap(),
        6
    );
}
