//! The migration contract in both modes (the crate's "Soundness" section).
//!
//! The scenario: task T starts on some worker W; two CPU-bound hogs then run there
//! (restricted to W), and on the other worker O a hog and a partner task P, which
//! ping-pongs with T through `park`/`unpark`. Each round T records its OS thread (`gettid`)
//! and CPU, hands the turn to P and parks until P hands it back; every 50 rounds it also
//! yields, and every 100 it sleeps 50 µs, so it blocks through the three paths a wakeup can
//! take (a wakeup from the other worker, a local wakeup, a timer's). Everything pulls T off
//! W: W is busy (its two hogs) and O less so, so CPU selection prefers O for a wakeup from
//! O, and O's periodic balance finds W heavier by more than its threshold with T, of the
//! weight to settle it, queued there whenever it waits or sleeps delayed.
//!
//! The second scenario isolates the balancer: no P, and T's blocking calls are all local
//! (`cond_resched` between chunks of work, which the hogs preempt, and short sleeps, woken by
//! W's own timer, so CPU selection keeps T on W: its waker's CPU), so only O's periodic
//! balance can move it, as it can whenever T waits its turn on W.
//!
//! * By default T never leaves W's thread across 10 000 rounds (and every blocking call in
//!   between), nor across the balancer-only scenario, although everything around it would
//!   move it; nor under TTWU_DEQUEUE and TTWU_QUEUE_DELAYED, which reselect a CPU for a
//!   wakee that slept delayed.
//! * Opted in — the runtime (`Builder::allow_migration`) or the task alone
//!   (`task::Builder::allow_migration`) — the same scenarios move T to another thread: CPU
//!   selection and the balancer do what the default keeps them from.
mod runtime_util;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use lagom::Runtime;
use lagom::task::{self, Builder, Unparker};

/// What T saw: the OS threads and the CPUs it ran on, and the blocking calls it made.
struct Seen {
    threads: HashSet<i32>,
    cpus: HashSet<usize>,
    blocking_calls: u64,
}

/// The state T, P and the test share.
#[derive(Default)]
struct Pingpong {
    /// T's last round handed to P.
    ack: AtomicU64,
    /// P's last round handed back to T.
    go: AtomicU64,
    /// T's first CPU, plus one (0: not started yet).
    start_cpu: AtomicUsize,
    /// P's unparker, published once P runs.
    partner: OnceLock<Unparker>,
    /// Hogs that have started running.
    hogs_running: AtomicUsize,
    stop: AtomicBool,
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

fn hog(s: Arc<Pingpong>) -> impl FnOnce() + Send + 'static {
    move || {
        s.hogs_running.fetch_add(1, Ordering::Release);
        while !s.stop.load(Ordering::Relaxed) {
            for _ in 0..200 {
                std::hint::spin_loop();
            }
            task::cond_resched();
        }
    }
}

/// About 20 µs of arithmetic the optimiser cannot remove.
fn chunk(seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..20_000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        x ^= x >> 17;
    }
    std::hint::black_box(x)
}

/// T's closure: `rounds` rounds of the ping-pong with P, or (`partner` false) of work and
/// local blocking calls (module doc).
fn t_body(s: Arc<Pingpong>, rounds: u64, partner: bool) -> impl FnOnce() -> Seen + Send + 'static {
    move || {
        let me = task::current().unwrap();
        let mut seen = Seen {
            threads: HashSet::from([gettid()]),
            cpus: HashSet::from([me.cpu]),
            blocking_calls: 0,
        };
        s.start_cpu.store(me.cpu + 1, Ordering::Release);
        while partner && s.partner.get().is_none() {
            task::park();
            seen.blocking_calls += 1;
        }
        // The balancer's scenario starts once the three hogs run: before, the other CPU may
        // be idle at one of T's wakeups, and CPU selection (not the balancer) would move T
        // there (seen under qemu). Yielding is no wakeup: only a balance can move T here.
        while !partner && s.hogs_running.load(Ordering::Acquire) < 3 {
            task::yield_now();
        }
        let mut x = 0;
        for i in 1..=rounds {
            seen.threads.insert(gettid());
            seen.cpus.insert(task::current().unwrap().cpu);
            if !partner {
                x = chunk(x);
                task::cond_resched();
                seen.blocking_calls += 1;
                if i % 4 == 0 {
                    task::sleep(Duration::from_micros(20));
                    seen.blocking_calls += 1;
                }
                continue;
            }
            if i % 100 == 0 {
                task::sleep(Duration::from_micros(50));
                seen.blocking_calls += 1;
            } else if i % 50 == 0 {
                task::yield_now();
                seen.blocking_calls += 1;
            }
            seen.threads.insert(gettid());
            s.ack.store(i, Ordering::Release);
            s.partner.get().unwrap().unpark();
            while s.go.load(Ordering::Acquire) < i {
                task::park();
                seen.blocking_calls += 1;
            }
        }
        seen.threads.insert(gettid());
        seen.cpus.insert(task::current().unwrap().cpu);
        seen
    }
}

/// Runs the scenario (`partner`: the first, else the balancer's) on `rt` (two workers on
/// `cpus`) with T spawned from `t`; returns what T saw.
fn scenario(rt: &Runtime, cpus: &[usize], t: Builder, rounds: u64, partner: bool) -> Seen {
    let s = Arc::new(Pingpong::default());
    // A short slice lets T and P preempt the hogs as soon as they are woken, so that a round
    // costs microseconds, not a hog's slice.
    let short = Duration::from_micros(100);
    let th = rt
        .spawn_with(
            t.name("T").slice(short),
            t_body(Arc::clone(&s), rounds, partner),
        )
        .unwrap();
    let w = loop {
        match s.start_cpu.load(Ordering::Acquire) {
            0 => std::thread::sleep(Duration::from_millis(1)),
            c => break c - 1,
        }
    };
    let o = *cpus.iter().find(|&&c| c != w).unwrap();
    let mut hogs = Vec::new();
    for cpu in [w, w, o] {
        let b = Builder::new().name("hog").cpus([cpu]);
        hogs.push(rt.spawn_with(b, hog(Arc::clone(&s))).unwrap());
    }
    if !partner {
        let seen = th.join().unwrap();
        s.stop.store(true, Ordering::Relaxed);
        for h in hogs {
            h.join().unwrap();
        }
        report(rt, &seen, rounds);
        return seen;
    }
    let t_unparker = th.unparker();
    let s2 = Arc::clone(&s);
    let p = rt
        .spawn_with(Builder::new().name("P").cpus([o]).slice(short), move || {
            for i in 1..=rounds {
                while s2.ack.load(Ordering::Acquire) < i {
                    task::park();
                }
                // Give T time to finish switching away, so that the wakeup below goes
                // through CPU selection (not a requeue in place or the on_cpu hand-off).
                let t0 = std::time::Instant::now();
                while t0.elapsed() < Duration::from_micros(20) {
                    std::hint::spin_loop();
                }
                s2.go.store(i, Ordering::Release);
                // WF_SYNC: P blocks right after, so wake_affine weighs its own CPU without
                // P's load and prefers it over T's busier previous CPU (the pull a
                // kernel-faithful selection exerts; a plain wakeup, weighed by runnable
                // counts, keeps T where it was).
                t_unparker.unpark_sync();
            }
        })
        .unwrap();
    s.partner.set(p.unparker()).unwrap();
    th.unparker().unpark();
    let seen = th.join().unwrap();
    p.join().unwrap();
    s.stop.store(true, Ordering::Relaxed);
    for h in hogs {
        h.join().unwrap();
    }
    report(rt, &seen, rounds);
    seen
}

fn report(rt: &Runtime, seen: &Seen, rounds: u64) {
    println!(
        "T ran on threads {:?} (cpus {:?}) over {rounds} rounds and {} blocking calls\n{}",
        seen.threads,
        seen.cpus,
        seen.blocking_calls,
        rt.stats()
    );
}

/// The scenarios run one at a time: each needs both CPUs to itself to exert its pull.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Two workers with `features`, opted in to migration or not (and the guard that keeps
/// other scenarios of this file off the CPUs meanwhile).
fn two_workers(
    allow_migration: bool,
    features: &str,
) -> Option<(Runtime, Vec<usize>, MutexGuard<'static, ()>)> {
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cpus = runtime_util::two_cpus_or_skip("runtime_migration")?;
    // Migration cost 0: no task is cache hot (`task_hot`), so the balancer's pull is the
    // migration contract's alone to allow or refuse, at every attempt.
    let b = Runtime::builder()
        .worker_cpus(cpus.clone())
        .features(features)
        .sched_migration_cost_ns(0);
    let b = if allow_migration {
        // SAFETY: the scenario's tasks hold nothing thread-local across a blocking call; T
        // asks for its thread id only to record it, and relies on nothing about it.
        unsafe { b.allow_migration() }
    } else {
        b
    };
    Some((b.build().unwrap(), cpus, one))
}

/// Under the default features, and under the two that reselect a CPU for a delayed wakee
/// (TTWU_DEQUEUE in `ttwu_runnable`, TTWU_QUEUE_DELAYED in the wakelist drain).
#[test]
fn by_default_a_started_task_never_changes_thread() {
    for (features, rounds) in [
        ("", 10_000),
        ("TTWU_DEQUEUE", 2_000),
        ("TTWU_QUEUE_DELAYED", 2_000),
    ] {
        let Some((rt, cpus, _one)) = two_workers(false, features) else {
            return;
        };
        println!("[{features}]");
        never_moves(rt, &cpus, rounds);
    }
}

fn never_moves(rt: Runtime, cpus: &[usize], rounds: u64) {
    for (rounds, partner) in [(rounds, true), (2_000, false)] {
        let seen = scenario(&rt, cpus, Builder::new(), rounds, partner);
        assert!(
            seen.blocking_calls >= rounds,
            "only {} blocking calls",
            seen.blocking_calls
        );
        assert_eq!(
            seen.threads.len(),
            1,
            "T resumed on several OS threads: {:?}",
            seen.threads
        );
        assert_eq!(
            seen.cpus.len(),
            1,
            "T ran on several workers: {:?}",
            seen.cpus
        );
    }
    let st = rt.shutdown();
    assert_eq!((st.live_tasks, st.live_stacks), (0, 0));
}

/// The opt-in scenarios run with TTWU_DEQUEUE, so that a wakee that slept delayed (as one
/// charged for time the OS took from its worker may, on a loaded machine) is woken through
/// CPU selection too, instead of in place.
const OPT_IN_FEATURES: &str = "TTWU_DEQUEUE";

#[test]
fn a_task_that_opts_in_is_moved() {
    let Some((rt, cpus, _one)) = two_workers(false, OPT_IN_FEATURES) else {
        return;
    };
    // SAFETY: as in `two_workers`: T holds nothing thread-local across a blocking call.
    let t = unsafe { Builder::new().allow_migration() };
    let seen = scenario(&rt, &cpus, t, 1_000, true);
    assert!(
        seen.threads.len() > 1,
        "T, free to move, never left its first thread: the scenario exerts no pull"
    );
}

#[test]
fn opted_in_the_balancer_moves_a_started_task() {
    let Some((rt, cpus, _one)) = two_workers(true, "") else {
        return;
    };
    // 20 000 rounds (about 2 s alone): a busy worker balances its 2-CPU domain every 32 ms
    // or more (`balance_interval` × `busy_factor`), not every 4 ms, so a loaded machine needs
    // the longer run to see a pull.
    let seen = scenario(&rt, &cpus, Builder::new(), 20_000, false);
    let st = rt.stats().total();
    assert!(
        seen.threads.len() > 1,
        "T, free to move, never left its first thread: the balancer exerts no pull"
    );
    assert!(
        st.balance_periodic + st.balance_pulls > 0,
        "T moved without a balance pull?"
    );
}

#[test]
fn a_runtime_that_opts_in_moves_its_tasks() {
    let Some((rt, cpus, _one)) = two_workers(true, OPT_IN_FEATURES) else {
        return;
    };
    let seen = scenario(&rt, &cpus, Builder::new(), 1_000, true);
    assert!(
        seen.threads.len() > 1,
        "T, free to move, never left its first thread: the scenario exerts no pull"
    );
}
