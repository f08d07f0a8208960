//! Workers that speak for their tasks (`Builder::host_hints`, `worker/host.rs`) and floating
//! workers (`Builder::pin_workers`): what the kernel sees of a worker thread, read with
//! `sched_getattr` and `sched_getaffinity` from a task running on it (a task runs on its
//! worker's thread).
//!
//! Where the kernel refuses a hint (a kernel before 6.12 keeps no custom slice; without
//! `CAP_SYS_NICE` or `RLIMIT_NICE` a nice cannot come back down), the test checks that the
//! refusal is recorded in `Stats::host_hints` instead of the attribute.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use lagom::Runtime;

/// `struct sched_attr` up to `sched_period` (`SCHED_ATTR_SIZE_VER0`).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

/// The calling thread's (nice, slice in ns: the custom one, or the kernel's default, which
/// Linux 6.12 and later report when none is set).
fn attr() -> (i32, u64) {
    let mut a = SchedAttr::default();
    // SAFETY: `a` is writable for the size passed; pid 0 is the calling thread; flags 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut a as *mut SchedAttr,
            size_of::<SchedAttr>() as u32,
            0,
        )
    };
    assert_eq!(rc, 0, "sched_getattr: {}", std::io::Error::last_os_error());
    (a.sched_nice, a.sched_runtime)
}

/// The CPUs the calling thread may run on.
fn affinity() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is the empty set; the kernel writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable for the size passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(rc, 0);
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below the set's size.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

fn one_worker(hints: bool) -> Runtime {
    let cpu = Runtime::builder().build().unwrap().worker_cpus()[0];
    Runtime::builder()
        .worker_cpus([cpu])
        .host_hints(hints)
        .build()
        .unwrap()
}

fn slices_refused(rt: &Runtime) -> bool {
    rt.stats()
        .host_hints
        .iter()
        .any(|n| n.contains("custom slice"))
}

/// A task with a 100 µs slice makes its worker thread a 100 µs thread while it runs; the
/// worker goes back to the kernel's default once only default-slice tasks are runnable.
#[test]
fn a_task_with_a_short_slice_gives_its_worker_that_slice() {
    let rt = one_worker(true);
    let default = std::thread::spawn(attr).join().unwrap().1;
    let (short, after) = rt.block_on(|| {
        let short = lagom::task::Builder::new()
            .slice(Duration::from_micros(100))
            .spawn(attr)
            .unwrap()
            .join()
            .unwrap();
        let after = lagom::task::spawn(attr).join().unwrap();
        (short, after)
    });
    if slices_refused(&rt) {
        eprintln!("this kernel keeps no custom slice: the refusal is recorded");
        assert_eq!(short.1, default);
        return;
    }
    assert_eq!(short.1, 100_000, "the short task's worker thread");
    assert_eq!(after.1, default, "a default-slice task's worker thread");
    assert!(rt.stats().total().host_attr_calls >= 2);
}

/// With the hints off the worker thread keeps the kernel's defaults, whatever its tasks
/// ask.
#[test]
fn with_the_hints_off_the_worker_thread_is_left_alone() {
    let rt = one_worker(false);
    let before = std::thread::spawn(attr).join().unwrap();
    let seen = rt.block_on(|| {
        lagom::task::Builder::new()
            .slice(Duration::from_micros(100))
            .spawn(attr)
            .unwrap()
            .join()
            .unwrap()
    });
    assert_eq!(seen, before);
    assert_eq!(rt.stats().total().host_attr_calls, 0);
    assert!(rt.stats().host_hints.is_empty());
}

/// Two tasks that yield to each other switch thousands of times; their slices and weights
/// never change, so the worker calls the kernel a bounded number of times, not once per
/// switch.
#[test]
fn a_switch_that_changes_nothing_makes_no_call() {
    const ROUNDS: usize = 5_000;
    let rt = one_worker(true);
    rt.block_on(|| {
        let other = lagom::task::spawn(|| {
            for _ in 0..ROUNDS {
                lagom::task::yield_now();
            }
        });
        for _ in 0..ROUNDS {
            lagom::task::yield_now();
        }
        other.join().unwrap();
    });
    let t = rt.stats().total();
    assert!(
        t.switches_voluntary + t.switches_involuntary >= ROUNDS as u64,
        "{t:?}"
    );
    // The nice may move once or twice as the average weight goes from one task to two and
    // back; nothing else changes.
    assert!(t.host_attr_calls <= 6, "{} calls", t.host_attr_calls);
}

/// The same with a park/unpark ping-pong, where the parked task may stay queued (a delayed
/// dequeue) and the runqueue's load moves between one and two tasks at every switch.
#[test]
fn a_ping_pong_makes_no_call_per_switch() {
    const ROUNDS: u64 = 5_000;
    let rt = one_worker(true);
    rt.block_on(|| {
        let turn = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let me = lagom::task::current_unparker();
        let t2 = Arc::clone(&turn);
        let (tx, rx) = std::sync::mpsc::channel();
        let b = lagom::task::spawn(move || {
            tx.send(lagom::task::current_unparker()).unwrap();
            for i in 0..ROUNDS {
                while t2.load(Ordering::Acquire) != 2 * i + 1 {
                    lagom::task::park();
                }
                t2.store(2 * i + 2, Ordering::Release);
                me.unpark();
            }
        });
        let other = loop {
            if let Ok(u) = rx.try_recv() {
                break u;
            }
            lagom::task::yield_now();
        };
        for i in 0..ROUNDS {
            turn.store(2 * i + 1, Ordering::Release);
            other.unpark();
            while turn.load(Ordering::Acquire) != 2 * i + 2 {
                lagom::task::park();
            }
        }
        b.join().unwrap();
    });
    let t = rt.stats().total();
    assert!(t.switches_voluntary >= ROUNDS, "{t:?}");
    assert!(
        t.host_attr_calls <= 6,
        "{} calls in {t:?}",
        t.host_attr_calls
    );
}

/// Four busy nice-0 tasks weigh as one nice −6 thread: the worker thread's nice gets there
/// (where the kernel lets a thread lower its nice; else the refusal is recorded and the
/// nice stays as started).
#[test]
fn the_worker_thread_s_nice_follows_the_weight_it_carries() {
    let rt = one_worker(true);
    let start = std::thread::spawn(attr).join().unwrap().0;
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(AtomicUsize::new(0));
    let nice_refused = rt
        .stats()
        .host_hints
        .iter()
        .any(|n| n.contains("nice stays"));
    let want = if nice_refused { start } else { -6 };
    let hogs: Vec<_> = (0..4)
        .map(|_| {
            let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
            rt.spawn(move || {
                let mut last = 0;
                // Each hog runs until one of them saw the nice it waits for; the test's
                // watchdog below bounds a nice that never comes.
                while !stop.load(Ordering::Relaxed) {
                    last = attr().0;
                    if last == want {
                        seen.fetch_add(1, Ordering::Relaxed);
                        stop.store(true, Ordering::Relaxed);
                    }
                    lagom::task::cond_resched();
                }
                last
            })
        })
        .collect();
    let watchdog = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            for _ in 0..600 {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            stop.store(true, Ordering::Relaxed);
        })
    };
    let last: Vec<i32> = hogs.into_iter().map(|h| h.join().unwrap()).collect();
    watchdog.join().unwrap();
    assert!(
        seen.load(Ordering::Relaxed) > 0,
        "the worker thread's nice never reached {want}: last seen {last:?}, notes {:?}",
        rt.stats().host_hints
    );
}

/// Pinned, a worker thread may run on its CPU alone; floating, on every CPU of the
/// process's affinity, however few workers there are.
#[test]
fn floating_workers_may_run_on_every_allowed_cpu() {
    let allowed = std::thread::spawn(affinity).join().unwrap();
    let pinned = Runtime::builder().build().unwrap();
    let cpus = pinned.worker_cpus().to_vec();
    let seen = pinned.block_on(affinity);
    assert_eq!(seen.len(), 1);
    assert!(cpus.contains(&seen[0]));
    drop(pinned);
    let floating = Runtime::builder().pin_workers(false).build().unwrap();
    let mut seen = floating.block_on(affinity);
    seen.sort_unstable();
    let mut want = floating.worker_cpus().to_vec();
    want.sort_unstable();
    assert_eq!(seen, want);
    assert_eq!(want, allowed);
    // One worker floats over all of them too.
    let first = Runtime::builder()
        .worker_cpus([allowed[0]])
        .pin_workers(false)
        .build()
        .unwrap();
    assert_eq!(first.block_on(affinity), allowed);
}
