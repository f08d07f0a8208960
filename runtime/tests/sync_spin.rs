//! A call into `lagom::sync` that returns without blocking is a preemption point
//! (`task::try_point`): a task that spins on a failing `try_*`, on an unbounded `send`, on a
//! timed wait whose time is already up or on `is_finished` gives its worker up once its
//! request is used up, so the task it waits for runs even on the same worker. On one worker
//! each scenario below hangs without that point (mutant `try_no_preempt_point`); a watchdog
//! turns the hang into a failure.
//!
//! The first three are adaptations of the spinning tests of std's own `mpsc` test suite
//! (a sender that spins until the receiver has gone, alone or with a second sender; a
//! requester that spins on `try_iter` and an unbounded `send` while a responder answers), run
//! as tasks of a runtime with one worker.
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use lagom::Runtime;
use lagom::sync::{Condvar, Mutex, Once, OnceLock, RwLock, Semaphore, TryLockError, mpsc, oneshot};
use lagom::task;
use runtime_util::Watchdog;

/// A runtime with one worker.
fn one_worker() -> Runtime {
    let cpu = runtime_util::two_cpus()[0];
    Runtime::builder()
        .worker_cpus([cpu])
        .build()
        .expect("a runtime on one worker")
}

/// A watchdog that fails the process if `progress` stays put for 20 s: a spin that never
/// gives its worker up hangs, it does not fail by itself.
fn watchdog(what: &'static str) -> (Arc<AtomicU64>, Watchdog) {
    let p = Arc::new(AtomicU64::new(0));
    let w = Watchdog::new(what, Arc::clone(&p), Duration::from_secs(20));
    (p, w)
}

/// std's `port_gone_concurrent`: the receiver takes one message and leaves; the sender spins
/// on `send` until a send fails. On one worker the receiver runs only when a send gives the
/// worker up.
#[test]
fn a_sender_spinning_until_the_receiver_left_lets_it_leave() {
    let (_p, _wd) = watchdog("sender spinning on an unbounded send");
    let rt = one_worker();
    let sent = rt.block_on(|| {
        let (tx, rx) = mpsc::channel::<i32>();
        let r = task::spawn(move || {
            rx.recv().unwrap();
        });
        let mut sent = 0u64;
        while tx.send(1).is_ok() {
            sent += 1;
        }
        r.join().unwrap();
        sent
    });
    assert!(sent >= 1, "the receiver took a message before it left");
}

/// std's `port_gone_concurrent_shared`: as above, alternating two senders of one channel.
#[test]
fn two_senders_spinning_until_the_receiver_left_let_it_leave() {
    let (_p, _wd) = watchdog("two senders spinning on an unbounded send");
    let rt = one_worker();
    rt.block_on(|| {
        let (tx, rx) = mpsc::channel::<i32>();
        let tx2 = tx.clone();
        let r = task::spawn(move || {
            rx.recv().unwrap();
        });
        while tx.send(1).is_ok() && tx2.send(1).is_ok() {}
        r.join().unwrap();
    });
}

/// std's `test_recv_try_iter`: a requester spins on `try_iter` of its responses and an
/// unbounded `send` of requests until the responses add up to 6; the responder answers
/// each request with 2 until its response channel is gone.
#[test]
fn a_requester_spinning_on_try_iter_gets_its_answers() {
    let (_p, _wd) = watchdog("requester spinning on try_iter");
    let rt = one_worker();
    let total = rt.block_on(|| {
        let (request_tx, request_rx) = mpsc::channel::<()>();
        let (response_tx, response_rx) = mpsc::channel::<u32>();
        let requester = task::spawn(move || {
            let mut count = 0;
            loop {
                for x in response_rx.try_iter() {
                    count += x;
                    if count == 6 {
                        return count;
                    }
                }
                request_tx.send(()).unwrap();
            }
        });
        for () in request_rx.iter() {
            if response_tx.send(2).is_err() {
                break;
            }
        }
        requester.join().unwrap()
    });
    assert_eq!(total, 6);
}

/// On one worker: `hold` runs as a task that takes something (a lock, a permit, room in a
/// channel), sets `held`, yields once — so that it is runnable but not running — and then
/// gives the thing back; the calling task first yields until `held` is set, then spins on
/// `attempt` until it succeeds. Only the attempt's preemption point lets `hold` run again.
fn spin_while_a_task_of_the_same_worker_holds(
    rt: &Runtime,
    progress: &AtomicU64,
    hold: impl FnOnce(Arc<AtomicBool>) + Send + 'static,
    mut attempt: impl FnMut() -> bool + Send + 'static,
) {
    rt.block_on(move || {
        let held = Arc::new(AtomicBool::new(false));
        let h = {
            let held = Arc::clone(&held);
            task::spawn(move || hold(held))
        };
        while !held.load(Ordering::Acquire) {
            task::yield_now();
        }
        let mut tries = 0u64;
        while !attempt() {
            tries += 1;
        }
        h.join().unwrap();
        assert!(
            tries > 0,
            "the attempt failed at least once while the task held it"
        );
    });
    progress.fetch_add(1, Ordering::Relaxed);
}

/// Sets `held`, yields once, and returns (so the caller then gives back what it took).
fn say_held_and_yield(held: &AtomicBool) {
    held.store(true, Ordering::Release);
    task::yield_now();
}

#[test]
fn every_failing_attempt_is_a_preemption_point() {
    let (p, _wd) = watchdog("a spin on a failing attempt");
    let rt = one_worker();

    let m = Arc::new(Mutex::new(()));
    let m2 = Arc::clone(&m);
    spin_while_a_task_of_the_same_worker_holds(
        &rt,
        &p,
        move |held| {
            let _g = m2.lock().unwrap();
            say_held_and_yield(&held);
        },
        move || match m.try_lock() {
            Ok(_) => true,
            Err(TryLockError::WouldBlock) => false,
            Err(TryLockError::Poisoned(_)) => panic!("poisoned"),
        },
    );

    let l = Arc::new(RwLock::new(()));
    let l2 = Arc::clone(&l);
    spin_while_a_task_of_the_same_worker_holds(
        &rt,
        &p,
        move |held| {
            let _g = l2.read().unwrap();
            say_held_and_yield(&held);
        },
        {
            let l = Arc::clone(&l);
            move || l.try_write().is_ok()
        },
    );
    let l2 = Arc::clone(&l);
    spin_while_a_task_of_the_same_worker_holds(
        &rt,
        &p,
        move |held| {
            let _g = l2.write().unwrap();
            say_held_and_yield(&held);
        },
        move || l.try_read().is_ok(),
    );

    let s = Arc::new(Semaphore::new(1));
    let s2 = Arc::clone(&s);
    spin_while_a_task_of_the_same_worker_holds(
        &rt,
        &p,
        move |held| {
            let _permit = s2.acquire();
            say_held_and_yield(&held);
        },
        {
            let s = Arc::clone(&s);
            move || s.try_acquire().is_some()
        },
    );
    let s2 = Arc::clone(&s);
    spin_while_a_task_of_the_same_worker_holds(
        &rt,
        &p,
        move |held| {
            let _permit = s2.acquire();
            say_held_and_yield(&held);
        },
        move || s.try_acquire_many(1).is_some(),
    );

    // A full bounded channel: the task takes the message that fills it (a second receiver
    // keeps the channel connected once the task's is gone).
    let (tx, rx) = mpsc::sync_channel::<u8>(1);
    let _keep = rx.clone();
    tx.send(0).unwrap();
    spin_while_a_task_of_the_same_worker_holds(
        &rt,
        &p,
        move |held| {
            say_held_and_yield(&held);
            rx.recv().unwrap();
        },
        move || tx.try_send(1).is_ok(),
    );

    // An empty channel: the task sends.
    let (tx, rx) = mpsc::channel::<u8>();
    spin_while_a_task_of_the_same_worker_holds(
        &rt,
        &p,
        move |held| {
            say_held_and_yield(&held);
            tx.send(1).unwrap();
        },
        move || rx.try_recv().is_ok(),
    );
    let (tx, rx) = mpsc::channel::<u8>();
    spin_while_a_task_of_the_same_worker_holds(
        &rt,
        &p,
        move |held| {
            say_held_and_yield(&held);
            tx.send(1).unwrap();
        },
        move || rx.recv_timeout(Duration::ZERO).is_ok(),
    );
    let (tx, rx) = oneshot::channel::<u8>();
    spin_while_a_task_of_the_same_worker_holds(
        &rt,
        &p,
        move |held| {
            say_held_and_yield(&held);
            tx.send(1).unwrap();
        },
        move || rx.try_recv().is_ok(),
    );

    // A flag under a mutex, waited for with a condvar's zero timeout.
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let pair2 = Arc::clone(&pair);
    spin_while_a_task_of_the_same_worker_holds(
        &rt,
        &p,
        move |held| {
            say_held_and_yield(&held);
            *pair2.0.lock().unwrap() = true;
            pair2.1.notify_all();
        },
        move || {
            let g = pair.0.lock().unwrap();
            let (g, _) = pair.1.wait_timeout(g, Duration::ZERO).unwrap();
            *g
        },
    );

    // A `OnceLock` and a `Once` that the task initialises, polled without blocking.
    let cell = Arc::new(OnceLock::new());
    let c2 = Arc::clone(&cell);
    spin_while_a_task_of_the_same_worker_holds(
        &rt,
        &p,
        move |held| {
            say_held_and_yield(&held);
            c2.set(7u32).unwrap();
        },
        move || cell.get() == Some(&7),
    );
    let once = Arc::new(Once::new());
    let o2 = Arc::clone(&once);
    spin_while_a_task_of_the_same_worker_holds(
        &rt,
        &p,
        move |held| {
            say_held_and_yield(&held);
            o2.call_once(|| {});
        },
        move || once.is_completed(),
    );

    // A plain flag, polled with zero sleeps and zero park timeouts.
    for sleep in [true, false] {
        let done = Arc::new(AtomicBool::new(false));
        let d2 = Arc::clone(&done);
        spin_while_a_task_of_the_same_worker_holds(
            &rt,
            &p,
            move |held| {
                say_held_and_yield(&held);
                d2.store(true, Ordering::Release);
            },
            move || {
                if sleep {
                    task::sleep(Duration::ZERO);
                } else {
                    task::park_timeout(Duration::ZERO);
                }
                done.load(Ordering::Acquire)
            },
        );
    }
}

/// A task polling another task's `is_finished` on one worker lets it finish.
#[test]
fn polling_is_finished_lets_the_task_finish() {
    let (_p, _wd) = watchdog("a spin on is_finished");
    let rt = one_worker();
    rt.block_on(|| {
        let held = Arc::new(AtomicBool::new(false));
        let h = {
            let held = Arc::clone(&held);
            task::spawn(move || {
                say_held_and_yield(&held);
                7
            })
        };
        while !held.load(Ordering::Acquire) {
            task::yield_now();
        }
        let mut polls = 0u64;
        while !h.is_finished() {
            polls += 1;
        }
        assert!(
            polls > 0,
            "the task had not finished when the polling began"
        );
        assert_eq!(h.join().unwrap(), 7);
    });
}
