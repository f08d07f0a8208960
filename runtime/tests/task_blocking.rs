//! `task::blocking`: a blocking closure that borrows from the calling task runs on the
//! blocking pool while the task waits (its worker runs other tasks meanwhile); its panic
//! reaches the caller; outside a task it runs in place; and a shutdown while it runs neither
//! unwinds the caller past the borrow nor frees the stack it borrows, nor waits for it.
mod child_util;
mod panic_util;
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task;
use runtime_util::Watchdog;

/// The child scenarios' variable (`child_util`).
const ENV: &str = "LAGOM_BLOCKING_CHILD";

/// A runtime with one worker.
fn one_worker() -> Runtime {
    Runtime::builder()
        .worker_cpus([runtime_util::two_cpus()[0]])
        .build()
        .expect("a runtime on one worker")
}

/// Waits (generously) until `flag` is set.
fn wait_for(flag: &AtomicBool, what: &str) {
    let t0 = Instant::now();
    while !flag.load(Ordering::Acquire) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{what} never happened"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// On one worker: the closure fills a buffer on the task's stack and returns a value, but
/// first waits (on a std channel, in the OS) for a message that another task of the same
/// worker sends. That task can run only if the worker is free while the closure blocks.
#[test]
fn a_closure_borrowing_the_tasks_stack_runs_while_the_worker_runs_others() {
    let p = Arc::new(AtomicU64::new(0));
    let _wd = Watchdog::new(
        "task::blocking holding its worker",
        Arc::clone(&p),
        Duration::from_secs(20),
    );
    let rt = one_worker();
    let (sum, buf) = rt.block_on(|| {
        let (tx, rx) = std::sync::mpsc::channel::<u8>();
        let other = task::spawn(move || tx.send(3).unwrap());
        let mut buf = [0u8; 256];
        let worker_thread = std::thread::current().id();
        let sum = task::blocking(|| {
            assert_ne!(
                std::thread::current().id(),
                worker_thread,
                "ran on the worker"
            );
            // Moved in: a std receiver may be sent, not shared.
            let rx = rx;
            let k = rx.recv().unwrap();
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(k);
            }
            buf.iter().map(|&b| u64::from(b)).sum::<u64>()
        });
        other.join().unwrap();
        (sum, buf)
    });
    assert_eq!(buf[5], 15, "the closure wrote into the task's stack");
    assert_eq!(sum, buf.iter().map(|&b| u64::from(b)).sum::<u64>());
}

#[test]
fn a_panic_in_the_closure_reaches_the_caller() {
    panic_util::quiet();
    let rt = one_worker();
    let msg = rt.block_on(|| {
        let local = String::from("deliberate: a panic in a borrowing blocking closure");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            task::blocking(|| panic!("{}", local))
        }));
        let payload = r.expect_err("the closure's panic is resumed in the caller");
        // The task goes on: a second call works.
        assert_eq!(task::blocking(|| local.len()), local.len());
        payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default()
    });
    assert!(
        msg.contains("a panic in a borrowing blocking closure"),
        "{msg}"
    );
}

#[test]
fn outside_a_task_it_runs_on_the_calling_thread() {
    let me = std::thread::current().id();
    let mut n = 0;
    let ran_on = task::blocking(|| {
        n += 1;
        std::thread::current().id()
    });
    assert_eq!((ran_on, n), (me, 1));
}

/// A shutdown while the closure waits: the caller is not unwound (its wait is no
/// cancellation point), so the closure's value arrives; the task then meets the cancellation
/// at its next call into lagom. Nothing is abandoned.
#[test]
fn a_shutdown_lets_the_closure_end_and_then_cancels_the_task() {
    let rt = one_worker();
    let started = Arc::new(AtomicBool::new(false));
    let returned = Arc::new(AtomicBool::new(false));
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let (s2, r2) = (Arc::clone(&started), Arc::clone(&returned));
    let h = rt.spawn(move || {
        let mut value = 0u32;
        task::blocking(|| {
            s2.store(true, Ordering::Release);
            let release_rx = release_rx;
            release_rx.recv().unwrap();
            value = 42;
        });
        r2.store(value == 42, Ordering::Release);
        loop {
            task::park();
        }
    });
    wait_for(&started, "the closure's start");
    // Released well after the shutdown's sweep has asked the waiting task to unwind (the
    // sweep comes within a millisecond of the start); the give-up point is far later.
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        release_tx.send(()).unwrap();
    });
    let stats = rt.shutdown_timeout(Duration::from_secs(8));
    releaser.join().unwrap();
    assert!(h.join().unwrap_err().is_cancelled());
    assert!(
        returned.load(Ordering::Acquire),
        "the caller was unwound before its closure's value arrived"
    );
    assert_eq!(
        stats.shutdown,
        lagom::runtime::ShutdownStats::default(),
        "{stats}"
    );
}

#[test]
fn child() {
    let Ok(scenario) = std::env::var(ENV) else {
        return;
    };
    match scenario.as_str() {
        // The closure is still running, on the task's stack's buffer, when the shutdown gives
        // up: the task is abandoned, the shutdown returns within its timeout without waiting
        // for the closure, and no stack is unmapped. The closure then writes into the buffer
        // and ends; the process must go on normally.
        "shutdown-gives-up-while-it-runs" => {
            let rt = one_worker();
            let started = Arc::new(AtomicBool::new(false));
            let finished = Arc::new(AtomicBool::new(false));
            let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
            let (s2, f2) = (Arc::clone(&started), Arc::clone(&finished));
            let h = rt.spawn(move || {
                let mut buf = [0u8; 16 * 1024];
                task::blocking(|| {
                    s2.store(true, Ordering::Release);
                    let release_rx = release_rx;
                    release_rx.recv().unwrap();
                    buf.fill(0xab);
                    f2.store(true, Ordering::Release);
                });
                buf[0]
            });
            wait_for(&started, "the closure's start");
            let t0 = Instant::now();
            let stats = rt.shutdown_timeout(Duration::from_millis(300));
            let took = t0.elapsed();
            eprintln!(
                "shutdown returned after {} ms: abandoned {}, blocking_borrows {}",
                took.as_millis(),
                stats.shutdown.abandoned,
                stats.shutdown.blocking_borrows
            );
            assert!(
                took < Duration::from_secs(10),
                "the shutdown waited for the closure"
            );
            assert!(h.join().unwrap_err().is_cancelled());
            release_tx.send(()).unwrap();
            wait_for(&finished, "the closure's end");
            // The pool thread completes the job (wakes the abandoned task, uncounts it) and
            // goes idle.
            let t0 = Instant::now();
            loop {
                let s = task::blocking_pool_stats();
                if s.idle == s.threads {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "the pool thread never idled"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            eprintln!("the closure ended after the shutdown");
        }
        other => panic!("unknown scenario {other}"),
    }
}

/// In a child process: with the stack unmapped under it (mutant `blocking_uncounted_early`)
/// the closure's write kills the process.
#[test]
fn a_shutdown_that_gives_up_while_the_closure_runs_leaks_the_stack_it_borrows() {
    let run = child_util::run_child(ENV, "shutdown-gives-up-while-it-runs");
    assert_eq!(
        (run.code, run.signal),
        (Some(0), None),
        "stderr was: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains("abandoned 1, blocking_borrows 1")
            && run.stderr.contains("the closure ended after the shutdown")
            && run
                .stderr
                .contains("closure(s) of task::blocking still running may borrow"),
        "stderr was: {}",
        run.stderr
    );
}
