//! `lagom::sync::Mutex` under contention across two workers and OS threads: mutual exclusion
//! over a million increments, the hand-off that keeps a re-locking holder from starving a
//! waiter on its own worker, poisoning, `try_lock`.
mod sync_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lagom::sync::{Mutex, TryLockError};
use lagom::task;
use sync_util::{on, rt2, watchdog};

/// 4 tasks (two per worker) and 2 OS threads increment one counter under the mutex, 1 M
/// times in all; a flag checks that nobody else is inside, and tasks sometimes yield while
/// holding the lock so that waiters on the same worker park.
#[test]
fn million_increments_tasks_and_threads() {
    let (rt, cpus) = rt2();
    let (progress, _wd) = watchdog("mutex increments");
    let m = Arc::new(Mutex::new(0u64));
    let inside = Arc::new(AtomicBool::new(false));
    let body = {
        let (m, inside, progress) = (m.clone(), inside.clone(), progress.clone());
        move |n: u64, yields: bool| {
            for i in 0..n {
                let mut g = m.lock().unwrap();
                assert!(!inside.swap(true, Ordering::Relaxed), "two holders at once");
                *g += 1;
                if yields && i % 64 == 0 {
                    task::yield_now();
                }
                inside.store(false, Ordering::Relaxed);
                drop(g);
                progress.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    let mut tasks = Vec::new();
    for k in 0..4 {
        let b = body.clone();
        tasks.push(on(&rt, cpus[k % cpus.len()], move || b(200_000, true)));
    }
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let b = body.clone();
            std::thread::spawn(move || b(100_000, false))
        })
        .collect();
    for t in tasks {
        t.join().unwrap();
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*m.lock().unwrap(), 1_000_000);
}

/// A task that unlocks and at once re-locks, yielding while it holds the lock, on the same
/// worker as a waiter: the hand-off gives the lock to the waiter at the holder's next
/// unlock. Without it the waiter, woken but not yet run, would find the lock taken again at
/// every turn.
#[test]
fn relocking_holder_does_not_starve_a_waiter() {
    let (rt, cpus) = rt2();
    let m = Arc::new(Mutex::new(()));
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let hog = {
        let (m, stop, rounds) = (m.clone(), stop.clone(), rounds.clone());
        on(&rt, cpus[0], move || {
            let t0 = Instant::now();
            while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(20) {
                let g = m.lock().unwrap();
                rounds.fetch_add(1, Ordering::Relaxed);
                task::yield_now();
                drop(g);
            }
        })
    };
    while rounds.load(Ordering::Relaxed) < 100 {
        std::thread::yield_now();
    }
    let waiter = {
        let m = m.clone();
        on(&rt, cpus[0], move || {
            let t0 = Instant::now();
            drop(m.lock().unwrap());
            t0.elapsed()
        })
    };
    let waited = waiter.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    hog.join().unwrap();
    assert!(
        waited < Duration::from_secs(5),
        "the waiter waited {waited:?} behind a re-locking holder"
    );
}

/// A task that panics while holding the lock poisons it, for tasks and threads alike; the
/// data stays reachable through the error, and `clear_poison` clears it.
#[test]
fn panic_while_locked_poisons() {
    let (rt, cpus) = rt2();
    let m = Arc::new(Mutex::new(5));
    let h = {
        let m = m.clone();
        on(&rt, cpus[0], move || {
            let mut g = m.lock().unwrap();
            *g = 6;
            panic!("boom while locked");
        })
    };
    assert!(h.join().is_err());
    assert!(m.is_poisoned());
    // From another task, and from this thread.
    let m2 = m.clone();
    let seen = on(&rt, cpus[1], move || match m2.lock() {
        Err(e) => *e.into_inner(),
        Ok(_) => panic!("not poisoned"),
    })
    .join()
    .unwrap();
    assert_eq!(seen, 6);
    assert!(matches!(m.try_lock(), Err(TryLockError::Poisoned(_))));
    m.clear_poison();
    assert_eq!(*m.lock().unwrap(), 6);
    // An OS thread's panic poisons it too, for a task to see.
    let m3 = m.clone();
    let _ = std::thread::spawn(move || {
        let _g = m3.lock().unwrap();
        panic!("boom on a thread");
    })
    .join();
    let m4 = m.clone();
    assert!(on(&rt, cpus[0], move || m4.lock().is_err()).join().unwrap());
    // Owning the mutex: the data comes out through the error while poisoned, plainly after.
    let mut m = Arc::try_unwrap(m).expect("every task is done with it");
    assert_eq!(m.get_mut().map_err(|e| *e.into_inner()), Err(6));
    m.clear_poison();
    assert_eq!(m.get_mut().map(|v| *v).ok(), Some(6));
    assert_eq!(m.into_inner().ok(), Some(6));
    let poisoned = Mutex::new(7);
    let _ = std::panic::catch_unwind(|| {
        let _g = poisoned.lock().unwrap();
        panic!("boom on this thread");
    });
    assert_eq!(poisoned.into_inner().map_err(|e| e.into_inner()), Err(7));
}

/// `try_lock` fails with `WouldBlock` while a task holds the lock, and succeeds after.
#[test]
fn try_lock_would_block() {
    let (rt, cpus) = rt2();
    let m = Arc::new(Mutex::new(0));
    let (tx, rx) = lagom::sync::mpsc::channel::<()>();
    let (back_tx, back_rx) = lagom::sync::mpsc::channel::<()>();
    let h = {
        let m = m.clone();
        on(&rt, cpus[1], move || {
            let _g = m.lock().unwrap();
            back_tx.send(()).unwrap();
            rx.recv().unwrap();
        })
    };
    back_rx.recv().unwrap();
    assert!(matches!(m.try_lock(), Err(TryLockError::WouldBlock)));
    tx.send(()).unwrap();
    h.join().unwrap();
    assert!(m.try_lock().is_ok());
}
