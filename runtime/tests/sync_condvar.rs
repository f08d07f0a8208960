//! `lagom::sync::Condvar`: no lost wakeup over 100 k ping-pong rounds between tasks on two
//! workers and between a task and an OS thread (a watchdog fails the test if progress stops),
//! `notify_all`, and `wait_timeout` firing within a generous bound.
mod sync_util;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use lagom::sync::{Condvar, Mutex};
use sync_util::{on, rt2, watchdog};

/// The turn (0 or 1) and the round, behind one mutex with one condvar.
type Turn = Arc<(Mutex<(u32, u64)>, Condvar)>;

/// Plays side `me` for `rounds`: waits for its turn, passes it.
fn play(t: &Turn, me: u32, rounds: u64, progress: &std::sync::atomic::AtomicU64) {
    let (m, cv) = &**t;
    for _ in 0..rounds {
        let mut g = cv.wait_while(m.lock().unwrap(), |s| s.0 != me).unwrap();
        g.0 = 1 - me;
        g.1 += 1;
        drop(g);
        cv.notify_one();
        progress.fetch_add(1, Ordering::Relaxed);
    }
}

fn ping_pong(thread_side: bool) {
    let (rt, cpus) = rt2();
    let (progress, _wd) = watchdog("condvar ping-pong");
    let t: Turn = Arc::new((Mutex::new((0, 0)), Condvar::new()));
    const ROUNDS: u64 = 100_000;
    let a = {
        let (t, p) = (t.clone(), progress.clone());
        on(&rt, cpus[0], move || play(&t, 0, ROUNDS, &p))
    };
    let (t2, p2) = (t.clone(), progress.clone());
    if thread_side {
        std::thread::spawn(move || play(&t2, 1, ROUNDS, &p2))
            .join()
            .unwrap();
    } else {
        on(&rt, cpus[1 % cpus.len()], move || play(&t2, 1, ROUNDS, &p2))
            .join()
            .unwrap();
    }
    a.join().unwrap();
    assert_eq!(t.0.lock().unwrap().1, 2 * ROUNDS);
}

#[test]
fn ping_pong_tasks_across_workers() {
    ping_pong(false);
}

#[test]
fn ping_pong_task_and_thread() {
    ping_pong(true);
}

/// `notify_all` wakes every waiter: 3 tasks on each worker and 2 threads wait for a flag.
#[test]
fn notify_all_wakes_everyone() {
    let (rt, cpus) = rt2();
    let (_p, _wd) = watchdog("notify_all");
    let s = Arc::new((Mutex::new((false, 0u32)), Condvar::new()));
    let wait = {
        let s = s.clone();
        move || {
            let (m, cv) = &*s;
            let mut g = m.lock().unwrap();
            g.1 += 1;
            let mut g = cv.wait_while(g, |g| !g.0).unwrap();
            g.1 -= 1;
        }
    };
    let mut hs = Vec::new();
    for k in 0..6 {
        hs.push(on(&rt, cpus[k % cpus.len()], wait.clone()));
    }
    let ts: Vec<_> = (0..2).map(|_| std::thread::spawn(wait.clone())).collect();
    let (m, cv) = &*s;
    while m.lock().unwrap().1 < 8 {
        std::thread::sleep(Duration::from_millis(1));
    }
    m.lock().unwrap().0 = true;
    cv.notify_all();
    for h in hs {
        h.join().unwrap();
    }
    for t in ts {
        t.join().unwrap();
    }
    assert_eq!(m.lock().unwrap().1, 0);
}

/// `wait_timeout` returns after its timeout when nobody notifies (in a task, on the worker's
/// timer, and on a thread), and early, not timed out, when notified.
#[test]
fn wait_timeout_fires_and_notify_beats_it() {
    let (rt, cpus) = rt2();
    let timed = || {
        let m = Mutex::new(());
        let cv = Condvar::new();
        let t0 = Instant::now();
        let (_g, r) = cv
            .wait_timeout(m.lock().unwrap(), Duration::from_millis(30))
            .unwrap();
        (r.timed_out(), t0.elapsed())
    };
    for (timed_out, took) in [on(&rt, cpus[0], timed).join().unwrap(), timed()] {
        assert!(timed_out);
        assert!(took >= Duration::from_millis(30), "{took:?}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }
    // Notified well before the timeout.
    let s = Arc::new((Mutex::new(false), Condvar::new()));
    let s2 = s.clone();
    let h = on(&rt, cpus[0], move || {
        let (m, cv) = &*s2;
        let t0 = Instant::now();
        let (g, r) = cv
            .wait_timeout_while(m.lock().unwrap(), Duration::from_secs(30), |f| !*f)
            .unwrap();
        assert!(*g);
        (r.timed_out(), t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(20));
    *s.0.lock().unwrap() = true;
    s.1.notify_one();
    let (timed_out, took) = h.join().unwrap();
    assert!(!timed_out);
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// A waiter that a shutdown cancels unwinds out of `wait` without the mutex: its guard must
/// not unlock it on the way, for by then another holder — here this OS thread — may have it.
/// (The waiter gave the mutex up inside `wait`, and the cancellation unwinds before it takes
/// it again.) Before the fix the guard's drop unlocked and poisoned the mutex under this
/// thread, and a second `try_lock` succeeded: two holders.
#[test]
fn a_cancelled_waiter_never_unlocks_a_mutex_it_does_not_hold() {
    let (rt, _) = rt2();
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let p2 = Arc::clone(&pair);
    let h = rt.spawn(move || {
        let (m, cv) = &*p2;
        let mut waiting = m.lock().unwrap();
        *waiting = true;
        // Never notified: only the shutdown's cancellation ends this wait.
        let _g = cv.wait_while(waiting, |_| true).unwrap();
    });
    let (m, _) = &*pair;
    // The flag is set under the mutex, which the task gives up only once it is queued on the
    // condvar: holding it with the flag set means the task waits.
    let t0 = Instant::now();
    let held = loop {
        let g = m.lock().unwrap();
        if *g {
            break g;
        }
        drop(g);
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the task never waited"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    let stats = rt.shutdown_timeout(Duration::from_secs(2));
    assert!(h.join().unwrap_err().is_cancelled());
    assert_eq!(stats.shutdown.abandoned, 0, "{stats}");
    assert!(
        matches!(m.try_lock(), Err(lagom::sync::TryLockError::WouldBlock)),
        "the cancelled waiter released the mutex this thread holds"
    );
    assert!(
        !m.is_poisoned(),
        "the cancelled waiter's guard poisoned the mutex"
    );
    drop(held);
    assert!(
        m.try_lock().is_ok(),
        "the mutex is free once its holder let go"
    );
}
