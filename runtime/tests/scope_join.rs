//! `lagom::scope`, `Runtime::scope` and `lagom::join` (`task/scope.rs`): tasks that borrow from
//! the caller's stack, blocking closures on both sides of a join, panics propagated only after
//! every task ended, a shutdown's cancellation that never lets a scope leave before its
//! children, and nothing left alive afterwards.
mod panic_util;
mod runtime_util;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task::{self, Unparker};

fn runtime() -> Runtime {
    Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .build()
        .unwrap()
}

/// Waits (generously) until the runtime's live-task count is back to `before`.
fn settles(rt: &Runtime, before: usize) {
    let t0 = Instant::now();
    while rt.stats().live_tasks != before {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{} tasks still alive, {before} before",
            rt.stats().live_tasks
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Parks until `flag` is set (by whoever then unparks this task).
fn park_until(flag: &AtomicBool) {
    while !flag.load(Ordering::Acquire) {
        task::park();
    }
}

#[test]
fn scope_tasks_borrow_and_mutate_the_callers_stack() {
    let rt = runtime();
    let before = rt.stats().live_tasks;
    let total = rt.block_on(|| {
        let mut parts = vec![0u64; 64];
        let input: Vec<u64> = (0..6400).collect();
        lagom::scope(|s| {
            for (i, p) in parts.iter_mut().enumerate() {
                let input = &input;
                s.spawn(move || {
                    *p = input[i * 100..(i + 1) * 100].iter().sum();
                    task::yield_now();
                });
            }
        });
        parts.iter().sum::<u64>()
    });
    assert_eq!(total, (0..6400u64).sum::<u64>());
    settles(&rt, before);
}

#[test]
fn runtime_scope_from_a_plain_thread_and_handles_return_values() {
    let rt = runtime();
    let before = rt.stats().live_tasks;
    let words = ["a", "bb", "ccc"];
    let mut seen = 0;
    let lens: Vec<usize> = rt.scope(|s| {
        s.spawn(|| seen = words.len());
        let hs: Vec<_> = words.iter().map(|w| s.spawn(move || w.len())).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!((lens, seen), (vec![1, 2, 3], 3));
    settles(&rt, before);
}

#[test]
fn a_scope_inside_a_task_and_nested_scopes() {
    let rt = runtime();
    let before = rt.stats().live_tasks;
    let n = rt.block_on(|| {
        let count = AtomicUsize::new(0);
        let h = task::spawn(|| {
            // A scope in a spawned task, whose tasks open scopes of their own.
            let inner = AtomicUsize::new(0);
            lagom::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| {
                        let local = AtomicUsize::new(0);
                        lagom::scope(|s2| {
                            for _ in 0..4 {
                                s2.spawn(|| local.fetch_add(1, Ordering::Relaxed));
                            }
                        });
                        inner.fetch_add(local.load(Ordering::Relaxed), Ordering::Relaxed);
                    });
                }
            });
            inner.into_inner()
        });
        // And a child spawning into the same scope from inside it.
        lagom::scope(|s| {
            s.spawn(|| {
                s.spawn(|| count.fetch_add(1, Ordering::Relaxed));
                count.fetch_add(1, Ordering::Relaxed);
            });
        });
        h.join().unwrap() + count.into_inner()
    });
    assert_eq!(n, 16 + 2);
    settles(&rt, before);
}

#[test]
fn join_runs_two_blocking_closures_at_once() {
    let rt = runtime();
    let before = rt.stats().live_tasks;
    let (a, b) = rt.block_on(|| {
        // `a` waits for `b` and `b` waits for `a`: run one after the other they would hang.
        let a_ready = AtomicBool::new(false);
        let b_ready = AtomicBool::new(false);
        let b_unparker: Mutex<Option<Unparker>> = Mutex::new(None);
        let a_unparker = task::current_unparker();
        lagom::join(
            || {
                while b_unparker.lock().unwrap().is_none() {
                    task::yield_now();
                }
                a_ready.store(true, Ordering::Release);
                b_unparker.lock().unwrap().as_ref().unwrap().unpark();
                park_until(&b_ready);
                "a"
            },
            || {
                *b_unparker.lock().unwrap() = Some(task::current_unparker());
                park_until(&a_ready);
                task::sleep(Duration::from_millis(5));
                b_ready.store(true, Ordering::Release);
                a_unparker.unpark();
                "b"
            },
        )
    });
    assert_eq!((a, b), ("a", "b"));
    settles(&rt, before);
}

fn fib(n: u64) -> u64 {
    if n < 10 {
        return (0..n).fold((0u64, 1u64), |(a, b), _| (b, a + b)).0;
    }
    let (a, b) = lagom::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

#[test]
fn recursive_join_computes_fib() {
    let rt = runtime();
    let before = rt.stats().live_tasks;
    assert_eq!(rt.block_on(|| fib(22)), 17711);
    settles(&rt, before);
}

#[test]
fn a_panic_in_join_is_resumed_after_both_ended() {
    panic_util::quiet();
    let rt = runtime();
    let before = rt.stats().live_tasks;
    let a_done = Arc::new(AtomicBool::new(false));
    let a2 = Arc::clone(&a_done);
    let r = rt.block_on(move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lagom::join(
                || {
                    task::sleep(Duration::from_millis(20));
                    a2.store(true, Ordering::Release);
                },
                || panic!("deliberate: b fails"),
            )
        }))
        .map_err(|p| (*p.downcast::<&str>().unwrap(), a2.load(Ordering::Acquire)))
    });
    assert_eq!(r.unwrap_err(), ("deliberate: b fails", true));
    assert!(a_done.load(Ordering::Acquire));
    // Both panic: `a`'s wins.
    let r = rt.block_on(|| {
        std::panic::catch_unwind(|| {
            lagom::join(
                || panic!("deliberate: a"),
                || {
                    task::sleep(Duration::from_millis(5));
                    panic!("deliberate: b")
                },
            )
        })
        .map_err(|p| *p.downcast::<&str>().unwrap())
    });
    assert_eq!(r.unwrap_err(), "deliberate: a");
    settles(&rt, before);
}

#[test]
fn an_unjoined_panic_is_propagated_after_every_task_ended_a_joined_one_is_not() {
    panic_util::quiet();
    let rt = runtime();
    let before = rt.stats().live_tasks;
    let finished = AtomicUsize::new(0);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.scope(|s| {
            s.spawn(|| panic!("deliberate: unjoined"));
            for _ in 0..8 {
                s.spawn(|| {
                    task::sleep(Duration::from_millis(10));
                    finished.fetch_add(1, Ordering::Relaxed);
                });
            }
        })
    }));
    let p = r.unwrap_err();
    assert_eq!(*p.downcast::<&str>().unwrap(), "deliberate: unjoined");
    assert_eq!(
        finished.load(Ordering::Relaxed),
        8,
        "the scope returned early"
    );
    // A joined panic is the joiner's: the scope returns normally.
    let e = rt.scope(|s| {
        let h = s.spawn_with(task::Builder::new().name("bad"), || -> u32 {
            panic!("deliberate: joined")
        });
        h.unwrap().join().unwrap_err()
    });
    assert!(e.is_panic());
    assert_eq!(e.task_name(), "bad");
    assert!(e.to_string().contains("deliberate: joined"), "{e}");
    // The body's own panic, after its tasks ended.
    let done = AtomicBool::new(false);
    let (msg, _) = panic_util::expect(|| {
        rt.scope(|s| {
            s.spawn(|| {
                task::sleep(Duration::from_millis(10));
                done.store(true, Ordering::Release);
            });
            panic!("deliberate: body")
        })
    });
    assert_eq!(msg, "deliberate: body");
    assert!(done.load(Ordering::Acquire));
    settles(&rt, before);
}

#[test]
fn off_runtime_scope_and_join_panic_with_a_clear_message() {
    let (msg, loc) = panic_util::expect(|| lagom::scope(|_| ()));
    assert!(msg.contains("Runtime::scope"), "{msg}");
    assert!(loc.contains("scope_join.rs"), "{loc}");
    let (msg, _) = panic_util::expect(|| {
        lagom::join(|| 1, || 2);
    });
    assert!(msg.contains("inside a task"), "{msg}");
    // A task of another runtime may not own a scope of this one.
    let rt = runtime();
    let other = Arc::new(runtime());
    let o = Arc::clone(&other);
    let r = rt.block_on(move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| o.scope(|_| ()))).map_err(|p| {
            p.downcast::<&str>()
                .map(|s| s.to_string())
                .unwrap_or_default()
        })
    });
    assert!(r.unwrap_err().contains("another runtime"));
    drop(rt);
    assert_eq!(other.scope(|s| s.spawn(|| 7).join().unwrap()), 7);
}

/// Sets its flag when dropped.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

#[test]
fn a_cancelled_scope_does_not_leave_before_its_children_stopped() {
    cancelled_scope(runtime());
}

/// On one worker the owner and its children share a thread, and a task that unwinds keeps
/// its thread (`sched/unwind.rs`): the owner's wait is no cancellation point, so it waits
/// without unwinding while its children are cancelled and end, and unwinds after them.
/// (With a cancellable wait the owner unwound first and then waited for children that could
/// not run: the shutdown had to abandon them all.)
#[test]
fn a_cancelled_scope_on_one_worker_unwinds_after_its_children() {
    cancelled_scope(one_worker());
}

/// A runtime with one worker.
fn one_worker() -> Runtime {
    Runtime::builder()
        .worker_cpus([runtime_util::two_cpus()[0]])
        .build()
        .unwrap()
}

/// A task owns a scope whose two children and whose body block for good; the shutdown must
/// cancel them all, the children before the owner leaves the scope, and abandon nothing.
fn cancelled_scope(rt: Runtime) {
    let order_ok = Arc::new(AtomicU64::new(0));
    let ok = Arc::clone(&order_ok);
    let entered = Arc::new(AtomicUsize::new(0));
    let e2 = Arc::clone(&entered);
    let h = rt.spawn(move || {
        let children_stopped = [AtomicBool::new(false), AtomicBool::new(false)];
        /// Checks, as the owner's frame unwinds past it, that both children stopped.
        struct Check<'a>(&'a [AtomicBool; 2], Arc<AtomicU64>);
        impl Drop for Check<'_> {
            fn drop(&mut self) {
                let stopped = self.0.iter().all(|f| f.load(Ordering::Acquire));
                self.1.store(if stopped { 1 } else { 2 }, Ordering::Release);
            }
        }
        let _check = Check(&children_stopped, ok);
        lagom::scope(|s| {
            for f in &children_stopped {
                let e = &e2;
                s.spawn(move || {
                    let _g = SetOnDrop(f);
                    e.fetch_add(1, Ordering::Relaxed);
                    loop {
                        // Blocked for good: only the shutdown's cancellation ends it.
                        task::park();
                    }
                });
            }
            loop {
                task::park();
            }
        })
    });
    let t0 = Instant::now();
    while entered.load(Ordering::Relaxed) < 2 {
        assert!(t0.elapsed() < Duration::from_secs(10), "children never ran");
        std::thread::sleep(Duration::from_millis(1));
    }
    let stats = rt.shutdown_timeout(Duration::from_secs(4));
    assert!(h.join().unwrap_err().is_cancelled());
    assert_eq!(
        order_ok.load(Ordering::Acquire),
        1,
        "the scope left before its children"
    );
    assert_eq!((stats.live_tasks, stats.shutdown.abandoned), (0, 0));
}

/// `join` on one worker at shutdown: `a` and `b` both block for good. The caller's wait for
/// `b`'s task is no cancellation point: it waits while `b` is cancelled and unwinds, then
/// resumes the cancellation itself. Nothing is abandoned.
#[test]
fn a_cancelled_join_on_one_worker_unwinds_after_b() {
    let rt = one_worker();
    let entered = Arc::new(AtomicUsize::new(0));
    let e2 = Arc::clone(&entered);
    let b_stopped = Arc::new(AtomicBool::new(false));
    let bs = Arc::clone(&b_stopped);
    let order_ok = Arc::new(AtomicU64::new(0));
    let ok = Arc::clone(&order_ok);
    let h = rt.spawn(move || {
        /// Checks, as the caller's frame unwinds past it, that `b` stopped.
        struct Check(Arc<AtomicBool>, Arc<AtomicU64>);
        impl Drop for Check {
            fn drop(&mut self) {
                let stopped = self.0.load(Ordering::Acquire);
                self.1.store(if stopped { 1 } else { 2 }, Ordering::Release);
            }
        }
        let _check = Check(Arc::clone(&bs), ok);
        let (e_a, e_b) = (&e2, &e2);
        lagom::join(
            || {
                e_a.fetch_add(1, Ordering::Relaxed);
                loop {
                    task::park();
                }
            },
            || {
                let _g = SetOnDrop(&bs);
                e_b.fetch_add(1, Ordering::Relaxed);
                loop {
                    task::park();
                }
            },
        )
    });
    let t0 = Instant::now();
    while entered.load(Ordering::Relaxed) < 2 {
        assert!(t0.elapsed() < Duration::from_secs(10), "a and b never ran");
        std::thread::sleep(Duration::from_millis(1));
    }
    let stats = rt.shutdown_timeout(Duration::from_secs(4));
    assert!(h.join().unwrap_err().is_cancelled());
    assert_eq!(
        order_ok.load(Ordering::Acquire),
        1,
        "the join left before b stopped"
    );
    assert_eq!((stats.live_tasks, stats.shutdown.abandoned), (0, 0));
}

/// A shutdown that asks a scope's owner to unwind while it waits for a child of its own
/// worker whose `task::blocking` closure still runs. The owner's wait is no cancellation
/// point: it waits on, the closure ends (released well after the shutdown's sweep), the child
/// runs and ends, and the owner leaves the scope and is cancelled at its next point. Had the
/// wait unwound, the owner would wait again while unwinding, holding the worker's thread
/// (`sched/unwind.rs`): the child could never run, and the shutdown would abandon both.
#[test]
fn a_scope_owner_asked_to_unwind_while_waiting_on_one_worker_waits_for_its_child() {
    let rt = one_worker();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let started = Arc::new(AtomicBool::new(false));
    let left = Arc::new(AtomicBool::new(false));
    let (s2, l2) = (Arc::clone(&started), Arc::clone(&left));
    let h = rt.spawn(move || {
        lagom::scope(|s| {
            s.spawn(move || {
                task::blocking(move || {
                    s2.store(true, Ordering::Release);
                    release_rx.recv().unwrap();
                })
            });
        });
        l2.store(true, Ordering::Release);
        loop {
            task::park();
        }
    });
    shutdown_while_blocked(rt, &started, release_tx, h, &left);
}

/// As above for `join`, whose caller waits for `b`'s task.
#[test]
fn a_join_asked_to_unwind_while_waiting_on_one_worker_waits_for_b() {
    let rt = one_worker();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let started = Arc::new(AtomicBool::new(false));
    let left = Arc::new(AtomicBool::new(false));
    let (s2, l2) = (Arc::clone(&started), Arc::clone(&left));
    let h = rt.spawn(move || {
        lagom::join(
            // `a` yields until `b`'s task has started, so that the caller waits for it.
            || {
                while !s2.load(Ordering::Acquire) {
                    task::yield_now();
                }
            },
            || {
                task::blocking(|| {
                    s2.store(true, Ordering::Release);
                    let release_rx = release_rx;
                    release_rx.recv().unwrap();
                })
            },
        );
        l2.store(true, Ordering::Release);
        loop {
            task::park();
        }
    });
    shutdown_while_blocked(rt, &started, release_tx, h, &left);
}

/// Once the closure started, shuts `rt` down, releasing the closure 300 ms in (the sweep that
/// asks the waiting tasks to unwind comes within a millisecond); `h` must have left its scope
/// or join (`left`) and been cancelled, with nothing abandoned.
fn shutdown_while_blocked(
    rt: Runtime,
    started: &AtomicBool,
    release: std::sync::mpsc::Sender<()>,
    h: lagom::task::JoinHandle<()>,
    left: &AtomicBool,
) {
    let t0 = Instant::now();
    while !started.load(Ordering::Acquire) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the closure never started"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        release.send(()).unwrap();
    });
    let stats = rt.shutdown_timeout(Duration::from_secs(8));
    releaser.join().unwrap();
    assert!(h.join().unwrap_err().is_cancelled());
    assert!(
        left.load(Ordering::Acquire),
        "the owner unwound out of its wait"
    );
    assert_eq!(
        (stats.live_tasks, stats.shutdown.abandoned),
        (0, 0),
        "{stats}"
    );
}
