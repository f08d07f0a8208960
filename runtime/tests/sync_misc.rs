//! `RwLock`, `Barrier`, `Semaphore` and `oneshot` under contention across two workers and OS
//! threads: readers never see a writer's half-done update, a barrier generation releases
//! exactly its `n` waiters once with one leader, semaphore permits are never exceeded,
//! oneshot delivery and disconnection both ways.
mod sync_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lagom::sync::mpsc::{RecvError, RecvTimeoutError, TryRecvError};
use lagom::sync::{Barrier, RwLock, Semaphore, oneshot};
use lagom::task;
use sync_util::{on, rt2, watchdog};

/// Writers (2 tasks, 1 thread) keep `a == b` across a yield inside the write lock; readers
/// (2 tasks, 1 thread) check it and that no writer is inside with them.
#[test]
fn rwlock_readers_and_writers() {
    let (rt, cpus) = rt2();
    let (progress, _wd) = watchdog("rwlock");
    let l = Arc::new(RwLock::new((0u64, 0u64)));
    let writers_in = Arc::new(AtomicUsize::new(0));
    let readers_in = Arc::new(AtomicUsize::new(0));
    let write = {
        let (l, w, r, p) = (
            l.clone(),
            writers_in.clone(),
            readers_in.clone(),
            progress.clone(),
        );
        move |n: u64| {
            for _ in 0..n {
                let mut g = l.write().unwrap();
                assert_eq!(w.fetch_add(1, Ordering::SeqCst), 0, "two writers");
                assert_eq!(r.load(Ordering::SeqCst), 0, "a reader beside a writer");
                g.0 += 1;
                task::yield_now();
                g.1 += 1;
                w.fetch_sub(1, Ordering::SeqCst);
                drop(g);
                p.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    let read = {
        let (l, w, r, p) = (
            l.clone(),
            writers_in.clone(),
            readers_in.clone(),
            progress.clone(),
        );
        move |n: u64| {
            for _ in 0..n {
                let g = l.read().unwrap();
                r.fetch_add(1, Ordering::SeqCst);
                assert_eq!(w.load(Ordering::SeqCst), 0, "a writer beside a reader");
                assert_eq!(g.0, g.1, "a half-done write seen");
                task::yield_now();
                r.fetch_sub(1, Ordering::SeqCst);
                drop(g);
                p.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    let mut hs = Vec::new();
    for k in 0..2 {
        let (w, r) = (write.clone(), read.clone());
        hs.push(on(&rt, cpus[k % cpus.len()], move || w(20_000)));
        hs.push(on(&rt, cpus[k % cpus.len()], move || r(20_000)));
    }
    let (w, r) = (write.clone(), read.clone());
    let ts = [
        std::thread::spawn(move || w(20_000)),
        std::thread::spawn(move || r(20_000)),
    ];
    for h in hs {
        h.join().unwrap();
    }
    for t in ts {
        t.join().unwrap();
    }
    assert_eq!(*l.read().unwrap(), (60_000, 60_000));
    // A writer's panic poisons it; a reader's does not.
    let l2 = l.clone();
    assert!(
        on(&rt, cpus[0], move || {
            let _g = l2.read().unwrap();
            panic!("reader panics");
        })
        .join()
        .is_err()
    );
    assert!(!l.is_poisoned());
    let l3 = l.clone();
    assert!(
        on(&rt, cpus[0], move || {
            let _g = l3.write().unwrap();
            panic!("writer panics");
        })
        .join()
        .is_err()
    );
    assert!(l.is_poisoned() && l.read().is_err());
    // Owning the lock: the data comes out through the error while poisoned, plainly after.
    drop((write, read));
    let mut l = Arc::try_unwrap(l).expect("every task is done with it");
    assert_eq!(
        l.get_mut().map_err(|e| *e.into_inner()),
        Err((60_000, 60_000))
    );
    l.clear_poison();
    assert_eq!(l.into_inner().ok(), Some((60_000, 60_000)));
}

/// 4 tasks and 2 threads pass a barrier of 6 for 2000 generations: in each, everyone
/// arrived before anyone left, and exactly one leads.
#[test]
fn barrier_releases_each_generation_once() {
    const N: usize = 6;
    const GENS: usize = 2000;
    let (rt, cpus) = rt2();
    let (progress, _wd) = watchdog("barrier");
    let b = Arc::new(Barrier::new(N));
    let arrived: Arc<Vec<AtomicUsize>> = Arc::new((0..GENS).map(|_| AtomicUsize::new(0)).collect());
    let leaders: Arc<Vec<AtomicUsize>> = Arc::new((0..GENS).map(|_| AtomicUsize::new(0)).collect());
    let run = {
        let (b, a, l, p) = (
            b.clone(),
            arrived.clone(),
            leaders.clone(),
            progress.clone(),
        );
        move || {
            for g in 0..GENS {
                a[g].fetch_add(1, Ordering::SeqCst);
                let r = b.wait();
                assert_eq!(
                    a[g].load(Ordering::SeqCst),
                    N,
                    "generation {g} released early"
                );
                if r.is_leader() {
                    l[g].fetch_add(1, Ordering::SeqCst);
                }
                p.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    let hs: Vec<_> = (0..4)
        .map(|k| on(&rt, cpus[k % cpus.len()], run.clone()))
        .collect();
    let ts: Vec<_> = (0..2).map(|_| std::thread::spawn(run.clone())).collect();
    for h in hs {
        h.join().unwrap();
    }
    for t in ts {
        t.join().unwrap();
    }
    for g in 0..GENS {
        assert_eq!(
            leaders[g].load(Ordering::SeqCst),
            1,
            "generation {g}: leaders"
        );
        assert_eq!(arrived[g].load(Ordering::SeqCst), N);
    }
}

/// 6 tasks and 2 threads share 3 permits: never more than 3 holders (and, under this
/// contention, 3 are reached); `acquire_many` and `acquire_timeout`.
#[test]
fn semaphore_permits_never_exceeded() {
    let (rt, cpus) = rt2();
    let (progress, _wd) = watchdog("semaphore");
    let s = Arc::new(Semaphore::new(3));
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let run = {
        let (s, i, m, p) = (s.clone(), inside.clone(), most.clone(), progress.clone());
        move |n: usize| {
            for k in 0..n {
                let permit = if k % 7 == 0 {
                    s.acquire_many(2)
                } else {
                    s.acquire()
                };
                let now =
                    i.fetch_add(permit.num_permits(), Ordering::SeqCst) + permit.num_permits();
                assert!(now <= 3, "{now} permits held of 3");
                m.fetch_max(now, Ordering::SeqCst);
                task::yield_now();
                i.fetch_sub(permit.num_permits(), Ordering::SeqCst);
                drop(permit);
                p.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    let hs: Vec<_> = (0..6)
        .map(|k| {
            let r = run.clone();
            on(&rt, cpus[k % cpus.len()], move || r(10_000))
        })
        .collect();
    let ts: Vec<_> = (0..2)
        .map(|_| {
            let r = run.clone();
            std::thread::spawn(move || r(10_000))
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    for t in ts {
        t.join().unwrap();
    }
    assert_eq!(s.available_permits(), 3);
    assert!(most.load(Ordering::SeqCst) >= 2);
    // Timeouts, in a task and on a thread.
    let all = s.acquire_many(3);
    let s2 = s.clone();
    let check = move || {
        let t0 = Instant::now();
        assert!(s2.acquire_timeout(Duration::from_millis(25)).is_none());
        t0.elapsed()
    };
    for took in [on(&rt, cpus[0], check.clone()).join().unwrap(), check()] {
        assert!(
            took >= Duration::from_millis(25) && took < Duration::from_secs(3),
            "{took:?}"
        );
    }
    drop(all);
    assert!(s.try_acquire_many(3).is_some());
}

/// oneshot: task to thread, thread to task, a dropped sender, a dropped receiver, a timeout.
#[test]
fn oneshot_both_ways() {
    let (rt, cpus) = rt2();
    let (_p, _wd) = watchdog("oneshot");
    let (tx, rx) = oneshot::channel();
    on(&rt, cpus[0], move || tx.send(1u32).unwrap());
    assert_eq!(rx.recv(), Ok(1));
    let (tx, rx) = oneshot::channel();
    let h = on(&rt, cpus[1 % cpus.len()], move || rx.recv());
    std::thread::sleep(Duration::from_millis(10));
    tx.send(2u32).unwrap();
    assert_eq!(h.join().unwrap(), Ok(2));
    // The sender dropped while the receiver (a task) waits.
    let (tx, rx) = oneshot::channel::<u32>();
    let h = on(&rt, cpus[0], move || rx.recv());
    std::thread::sleep(Duration::from_millis(10));
    drop(tx);
    assert_eq!(h.join().unwrap(), Err(RecvError));
    // The receiver dropped: the send fails with its value back.
    let (tx, rx) = oneshot::channel::<u32>();
    assert!(!tx.is_closed());
    drop(rx);
    assert!(tx.is_closed());
    assert_eq!(tx.send(3), Err(3));
    // A timeout, then the value.
    let (tx, rx) = oneshot::channel::<u32>();
    let h = on(&rt, cpus[0], move || {
        let t0 = Instant::now();
        let first = rx.recv_timeout(Duration::from_millis(20));
        let took = t0.elapsed();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        (first, took, rx.recv_timeout(Duration::from_secs(20)))
    });
    std::thread::sleep(Duration::from_millis(60));
    tx.send(4).unwrap();
    let (first, took, second) = h.join().unwrap();
    assert_eq!(first, Err(RecvTimeoutError::Timeout));
    assert!(
        took >= Duration::from_millis(20) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert_eq!(second, Ok(4));
}
