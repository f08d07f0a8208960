//! `lagom::sync::Once` against std's own tests for `std::sync::Once` (adapted: lagom's
//! types, the helpers spawned as tasks or threads by `sync_util::spawn`), each run on plain
//! threads and in tasks on one worker and on two (`std_test!`); then what lagom adds: a task
//! waiting for another task's blocking initialiser on one worker, tasks and threads waiting
//! on one `Once`, an initialiser that waits for itself.
//!
//! Not under loom: the tests keep their `Once`s in `static`s, as std's do, and loom's atomics
//! cannot be built in a constant.
#![cfg(not(loom))]

mod sync_util;

use std::panic;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use lagom::sync::mpsc::channel;
use lagom::sync::{Once, OnceState};
use sync_util::{spawn, yield_now};

std_test! {
    fn smoke_once() {
        static O: Once = Once::new();
        let mut a = 0;
        O.call_once(|| a += 1);
        assert_eq!(a, 1);
        O.call_once(|| a += 1);
        assert_eq!(a, 1);
    }
}

std_test! {
    fn stampede_once() {
        static O: Once = Once::new();
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        static DONE: AtomicBool = AtomicBool::new(false);
        fn init() {
            assert_eq!(RUNS.fetch_add(1, Relaxed), 0, "a second initialiser ran");
            // Let the others pile up on the running initialiser.
            for _ in 0..4 {
                yield_now();
            }
            DONE.store(true, Relaxed);
        }

        let (tx, rx) = channel();
        for _ in 0..10 {
            let tx = tx.clone();
            spawn(move || {
                for _ in 0..4 {
                    yield_now();
                }
                O.call_once(init);
                assert!(DONE.load(Relaxed), "returned before the initialiser finished");
                tx.send(()).unwrap();
            });
        }
        O.call_once(init);
        assert!(DONE.load(Relaxed));
        for _ in 0..10 {
            rx.recv().unwrap();
        }
        assert_eq!(RUNS.load(Relaxed), 1);
    }
}

std_test! {
    fn poison_bad() {
        static O: Once = Once::new();

        // A panicking initialiser poisons the Once.
        let t = panic::catch_unwind(|| O.call_once(|| panic!()));
        assert!(t.is_err());
        assert!(!O.is_completed());

        // The poison propagates, with std's message.
        let t = panic::catch_unwind(|| O.call_once(|| {}));
        let msg = t.unwrap_err();
        assert_eq!(
            msg.downcast_ref::<&str>().copied(),
            Some("Once instance has previously been poisoned")
        );

        // call_once_force runs anyway, and is told.
        let mut called = false;
        O.call_once_force(|p| {
            called = true;
            assert!(p.is_poisoned());
        });
        assert!(called);

        // Once a run succeeds, the poison is gone.
        O.call_once(|| {});
        assert!(O.is_completed());
    }
}

std_test! {
    fn wait_for_force_to_finish() {
        static O: Once = Once::new();

        // Poison it.
        let t = panic::catch_unwind(|| O.call_once(|| panic!()));
        assert!(t.is_err());

        // A forced initialiser runs (and stays inside until told to leave)...
        let (tx1, rx1) = channel();
        let (tx2, rx2) = channel::<()>();
        let t1 = spawn(move || {
            O.call_once_force(|p| {
                assert!(p.is_poisoned());
                tx1.send(()).unwrap();
                rx2.recv().unwrap();
            });
        });
        rx1.recv().unwrap();

        // ...while another caller waits on it, and does not run its own.
        let t2 = spawn(|| {
            let mut called = false;
            O.call_once(|| called = true);
            assert!(!called);
        });

        tx2.send(()).unwrap();
        assert!(t1.join().is_ok());
        assert!(t2.join().is_ok());
    }
}

std_test! {
    fn wait() {
        for _ in 0..50 {
            let val = Arc::new(AtomicBool::new(false));
            let once = Arc::new(Once::new());
            let waiters: Vec<_> = (0..4)
                .map(|_| {
                    let (val, once) = (Arc::clone(&val), Arc::clone(&once));
                    spawn(move || {
                        once.wait();
                        assert!(val.load(Relaxed));
                    })
                })
                .collect();
            once.call_once(|| val.store(true, Relaxed));
            for w in waiters {
                w.join().unwrap();
            }
        }
    }
}

std_test! {
    fn wait_on_poisoned() {
        let once = Once::new();
        panic::catch_unwind(|| once.call_once(|| panic!())).unwrap_err();
        panic::catch_unwind(|| once.wait()).unwrap_err();
    }
}

std_test! {
    fn wait_force_on_poisoned() {
        let once = Arc::new(Once::new());
        panic::catch_unwind(|| once.call_once(|| panic!())).unwrap_err();
        let o = Arc::clone(&once);
        let forcer = spawn(move || {
            // std's sleeps 100 ms so that the main thread is waiting first; either order
            // must end with the wait returning.
            lagom::task::sleep(Duration::from_millis(10));
            o.call_once_force(|_| {});
        });
        once.wait_force();
        assert!(once.is_completed());
        forcer.join().unwrap();
    }
}

// What lagom adds.

std_test! {
    /// A task (or thread) that waits while another runs a *blocking* initialiser: the
    /// initialiser waits for a message that only a third party sends after the waiter is
    /// queued. With std's `Once` on one worker, the waiting task would block the worker and
    /// the initialiser, a task of the same worker, would never run again.
    fn waiter_lets_a_blocking_initialiser_finish() {
        static O: Once = Once::new();
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let (go_tx, go_rx) = channel::<()>();
        let (started_tx, started_rx) = channel::<()>();
        let runner = spawn(move || {
            O.call_once(|| {
                started_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                RUNS.fetch_add(1, Relaxed);
            });
        });
        started_rx.recv().unwrap();
        let waiter = spawn(|| {
            O.call_once(|| panic!("the initialiser ran twice"));
            assert_eq!(RUNS.load(Relaxed), 1);
        });
        // The waiter has had every chance to queue (and, on one worker, to block the
        // worker if it could); now let the initialiser finish.
        for _ in 0..10 {
            yield_now();
        }
        go_tx.send(()).unwrap();
        runner.join().unwrap();
        waiter.join().unwrap();
        assert!(O.is_completed());
    }
}

std_test! {
    /// An initialiser that calls its own `Once` panics with a message that says so (std's
    /// deadlocks); the `Once` is poisoned by that panic, as by any other.
    fn reentrant_call_panics() {
        static O: Once = Once::new();
        let r = panic::catch_unwind(|| O.call_once(|| O.call_once(|| {})));
        let msg = r.unwrap_err();
        let msg = msg.downcast_ref::<&str>().expect("a literal message");
        assert!(msg.contains("from inside its own initialiser"), "{msg}");
        // The outer run ended by that panic: poisoned, and a forced run completes it.
        let mut st = None;
        O.call_once_force(|s: &OnceState| st = Some(s.is_poisoned()));
        assert_eq!(st, Some(true));
        assert!(O.is_completed());
        // `wait` from inside the initialiser is the same mistake.
        let o2 = Once::new();
        let r = panic::catch_unwind(|| o2.call_once_force(|_| o2.wait_force()));
        assert!(r.is_err());
    }
}

/// Tasks on both workers and plain threads wait on one `Once` whose initialiser (a task)
/// sleeps: one run, and everyone sees what it wrote.
#[test]
fn tasks_and_threads_wait_together() {
    let (rt, cpus) = sync_util::rt2();
    let (progress, _wd) = sync_util::watchdog("once: tasks and threads");
    for _ in 0..20 {
        let once = Arc::new(Once::new());
        let value = Arc::new(AtomicUsize::new(0));
        let get = {
            let (once, value) = (Arc::clone(&once), Arc::clone(&value));
            move || {
                once.call_once(|| {
                    lagom::task::sleep(Duration::from_micros(200));
                    value.fetch_add(7, Relaxed);
                });
                value.load(Relaxed)
            }
        };
        let tasks: Vec<_> = (0..6)
            .map(|k| sync_util::on(&rt, cpus[k % cpus.len()], get.clone()))
            .collect();
        let threads: Vec<_> = (0..2).map(|_| std::thread::spawn(get.clone())).collect();
        for t in tasks {
            assert_eq!(t.join().unwrap(), 7);
        }
        for t in threads {
            assert_eq!(t.join().unwrap(), 7);
        }
        progress.fetch_add(1, Relaxed);
    }
}

#[test]
fn debug_output() {
    let o = Once::new();
    assert_eq!(format!("{o:?}"), "Once { .. }");
    o.call_once_force(|s| assert_eq!(format!("{s:?}"), "OnceState { poisoned: false }"));
}
