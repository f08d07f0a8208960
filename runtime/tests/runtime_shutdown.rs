//! Shutdown that unwinds (`lagom::runtime`'s module doc): blocked tasks are cancelled — their
//! blocking call unwinds, so their destructors run and their locks are released — loops that
//! never block are cancelled at `cond_resched` or `yield_now` within the timeout, a task that
//! catches the cancellation and goes on is abandoned and reported, and a task that never
//! calls into lagom is reported too, without making the shutdown wait for it.
mod runtime_util;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task;

/// Counts its drops.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn runtime() -> Runtime {
    Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .build()
        .unwrap()
}

/// Waits until `n` reaches `want` (the tasks got where the test needs them).
fn wait_for(n: &AtomicUsize, want: usize) {
    let t0 = Instant::now();
    while n.load(Ordering::Relaxed) < want {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "tasks never got there"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_thousand_parked_tasks_holding_locks_unwind() {
    // A cancellation unwinds without the panic machinery's hook: nothing is printed, and
    // no test of this file panics on purpose, so the hook must never run.
    let hook_ran = Arc::new(AtomicBool::new(false));
    let hr = Arc::clone(&hook_ran);
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        hr.store(true, Ordering::Relaxed);
        default(info);
    }));

    const N: usize = 1000;
    let rt = runtime();
    let dropped = Arc::new(AtomicUsize::new(0));
    let parked = Arc::new(AtomicUsize::new(0));
    let mutexes: Vec<Arc<Mutex<u64>>> = (0..N).map(|_| Arc::new(Mutex::new(0))).collect();
    let handles: Vec<_> = mutexes
        .iter()
        .map(|m| {
            let (m, dropped, parked) = (Arc::clone(m), Arc::clone(&dropped), Arc::clone(&parked));
            rt.spawn(move || {
                let _counter = Dropped(dropped);
                let mut guard = m.lock().unwrap();
                *guard += 1;
                parked.fetch_add(1, Ordering::Relaxed);
                loop {
                    task::park();
                }
            })
        })
        .collect();
    wait_for(&parked, N);
    assert!(
        mutexes.iter().all(|m| m.try_lock().is_err()),
        "the tasks hold their locks"
    );
    let st = rt.shutdown();
    println!("{st}");
    assert_eq!(dropped.load(Ordering::Relaxed), N, "every destructor ran");
    for m in &mutexes {
        // Dropped while unwinding, a std guard poisons its mutex, and unlocks it.
        match m.try_lock() {
            Ok(_) | Err(TryLockError::Poisoned(_)) => {}
            Err(TryLockError::WouldBlock) => panic!("a mutex is still locked"),
        }
    }
    for h in handles {
        let e = h.join().expect_err("a cancelled task has no value");
        assert!(e.is_cancelled() && !e.is_panic(), "{e}");
    }
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
    assert_eq!(st.total().cancelled, N as u64, "{st}");
    assert_eq!(
        st.shutdown,
        lagom::runtime::ShutdownStats::default(),
        "{st}"
    );
    assert!(!hook_ran.load(Ordering::Relaxed), "the panic hook ran");
}

#[test]
fn loops_that_never_block_are_cancelled_within_the_timeout() {
    let rt = runtime();
    let dropped = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let spin = |yielding: bool| {
        let (dropped, started) = (Arc::clone(&dropped), Arc::clone(&started));
        move || {
            let _counter = Dropped(dropped);
            started.fetch_add(1, Ordering::Relaxed);
            loop {
                match yielding {
                    true => task::yield_now(),
                    false => task::cond_resched(),
                }
            }
        }
    };
    let a = rt.spawn(spin(false));
    let b = rt.spawn(spin(true));
    wait_for(&started, 2);
    let timeout = Duration::from_millis(400);
    let t0 = Instant::now();
    let st = rt.shutdown_timeout(timeout);
    let took = t0.elapsed();
    println!("shutdown took {took:?}\n{st}");
    assert!(took < timeout, "shutdown took {took:?}, beyond {timeout:?}");
    assert_eq!(dropped.load(Ordering::Relaxed), 2, "both unwound");
    for h in [a, b] {
        assert!(h.join().unwrap_err().is_cancelled());
    }
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
    assert_eq!(
        st.shutdown,
        lagom::runtime::ShutdownStats::default(),
        "{st}"
    );
}

#[test]
fn dropping_a_runtime_with_a_spinning_task_does_not_hang() {
    let rt = runtime();
    let started = Arc::new(AtomicUsize::new(0));
    let s = Arc::clone(&started);
    let h = rt.spawn(move || {
        s.fetch_add(1, Ordering::Relaxed);
        loop {
            task::cond_resched();
        }
    });
    wait_for(&started, 1);
    let t0 = Instant::now();
    drop(rt);
    let took = t0.elapsed();
    assert!(
        took < lagom::runtime::DEFAULT_SHUTDOWN_TIMEOUT,
        "drop took {took:?}"
    );
    assert!(h.join().unwrap_err().is_cancelled());
}

#[test]
fn a_task_that_catches_the_cancellation_is_abandoned_and_reported() {
    let rt = runtime();
    let caught = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&caught);
    let h = rt.spawn(move || {
        loop {
            if std::panic::catch_unwind(task::park).is_err() {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    std::thread::sleep(Duration::from_millis(20));
    let timeout = Duration::from_millis(200);
    let t0 = Instant::now();
    let st = rt.shutdown_timeout(timeout);
    let took = t0.elapsed();
    println!("shutdown took {took:?}\n{st}");
    assert_eq!(
        caught.load(Ordering::Relaxed),
        1,
        "cancelled once, not again"
    );
    assert_eq!(st.shutdown.abandoned, 1, "{st}");
    assert_eq!(st.shutdown.stuck_workers, 0, "{st}");
    assert!(took < timeout + Duration::from_millis(50), "took {took:?}");
    assert!(h.join().unwrap_err().is_cancelled());
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0), "{st}");
}

#[test]
fn a_task_that_never_calls_into_lagom_is_reported_not_waited_for() {
    let rt = runtime();
    let release = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    let (r, s) = (Arc::clone(&release), Arc::clone(&started));
    let h = rt.spawn(move || {
        s.fetch_add(1, Ordering::Relaxed);
        while !r.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    wait_for(&started, 1);
    let timeout = Duration::from_millis(200);
    let t0 = Instant::now();
    let st = rt.shutdown_timeout(timeout);
    let took = t0.elapsed();
    println!("shutdown took {took:?}\n{st}");
    assert!(took < timeout + Duration::from_millis(50), "took {took:?}");
    assert_eq!(st.shutdown.stuck_workers, 1, "{st}");
    // The detached worker still runs it; let it end, and its value arrives.
    release.store(true, Ordering::Relaxed);
    h.join().unwrap();
}
