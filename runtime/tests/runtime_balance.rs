//! Load balancing with two workers: work spawned on one worker while the other sleeps idle
//! spreads to both (fork placement sends new tasks to the idlest CPU, waking the sleeper;
//! the balance evens out what placement left uneven; the runtime opts in to migration, as
//! tasks that have run may be what it pulls), and the periodic balance alone evens out two
//! busy workers. Weighted balancing is checked by `runtime_fair.rs`; the delayed-task
//! migration race by loom model 7 (`loom-tests/tests/migrate.rs`); the nohz kick's target by
//! the shared policy (`lagom_policy`'s `nohz.rs`) and the simulator.
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lagom::Runtime;

/// A task spawns four CPU-bound tasks; the other worker went to sleep long before. Each task
/// records the CPUs it runs on. Both CPUs must show up: fork placement
/// (`sched_balance_find_dst_cpu`) sends new tasks to the idlest CPU, and a task it leaves
/// queued behind another is pulled by the balance (newly idle, periodic, or after a nohz
/// kick). Which of these moved the work depends on timing (under qemu, placement alone), so
/// the test asks only that every spawn went through fork placement and that the work reached
/// both CPUs.
#[test]
fn spawned_work_spreads_to_the_idle_worker() {
    let Some(cpus) = runtime_util::two_cpus_or_skip("spawned_work_spreads_to_the_idle_worker")
    else {
        return;
    };
    let rt = Runtime::builder().worker_cpus(cpus.clone());
    // Some of the tasks may have run before the idle worker wakes and pulls: the migration
    // opt-in lets it pull those too.
    // SAFETY: the tasks compute and call `cond_resched` and `current()` (the CPU number,
    // which they only record): they hold nothing thread-local across a switch.
    let rt = unsafe { rt.allow_migration() }.build().unwrap();
    // Let both workers go idle and sleep.
    std::thread::sleep(Duration::from_millis(50));
    let seen = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (seen2, stop2, cpus2) = (Arc::clone(&seen), Arc::clone(&stop), cpus.clone());
    let spawner_cpu = rt.block_on(move || {
        let me = lagom::task::current().unwrap().cpu;
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (seen, stop, cpus) = (Arc::clone(&seen2), Arc::clone(&stop2), cpus2.clone());
                lagom::task::spawn(move || {
                    let mut x = 1u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..1000 {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                        }
                        let cpu = lagom::task::current().unwrap().cpu;
                        let bit = cpus.iter().position(|&c| c == cpu).unwrap();
                        seen.fetch_or(1 << bit, Ordering::Relaxed);
                        lagom::task::cond_resched();
                    }
                })
            })
            .collect();
        let t0 = Instant::now();
        while seen2.load(Ordering::Relaxed) != 0b11 && t0.elapsed() < Duration::from_secs(5) {
            lagom::task::sleep(Duration::from_millis(5));
        }
        stop2.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().unwrap();
        }
        me
    });
    let stats = rt.stats();
    println!("{stats}");
    assert_eq!(
        seen.load(Ordering::Relaxed),
        0b11,
        "the tasks spawned on cpu {spawner_cpu} never ran on the other worker"
    );
    let total = stats.total();
    assert!(
        total.place_fork_idlest >= 4,
        "the four spawns were not placed by fork placement: {}",
        total.place_fork_idlest
    );
}

/// The periodic balance, alone: both workers stay busy, so neither runs the newly idle
/// balance or needs a nohz kick. Worker 1 runs one hog pinned to it, and four more pinned
/// "blockers" while a task pinned to worker 0 spawns three unpinned hogs: fork placement
/// (the idlest CPU) puts them all on worker 0, the blockers then end, and the spawner joins. Only worker 1's periodic balance (from its tick, in its hog's `cond_resched`)
/// can even the load, 3 + 1 into 2 + 2: a hog that started on worker 0 must run on worker 1
/// within 10 s, and the pull must be counted as periodic.
#[test]
fn the_periodic_balance_evens_out_busy_workers() {
    use lagom::task::Builder;
    use std::sync::atomic::AtomicU64;
    let Some(cpus) = runtime_util::two_cpus_or_skip("the_periodic_balance_evens_out_busy_workers")
    else {
        return;
    };
    let (w0, w1) = (cpus[0], cpus[1]);
    // SAFETY: the hogs compute and call `cond_resched` and `current()` (the CPU number,
    // which they only compare): they hold nothing thread-local across a switch.
    let rt = unsafe {
        Runtime::builder()
            .worker_cpus(cpus.clone())
            .allow_migration()
    }
    .build()
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let pinned = runtime_util::pinned_hog(&rt, w1, 0, &stop);
    // Four blockers keep worker 1 the busier while the hogs are placed (fork placement would
    // otherwise spread them, 2 + 2 from the start); they end once every hog has started.
    // They are waited for until each has run: one still on worker 1's wakelist (its thread
    // not yet given a CPU by the OS) is not in its published count, and the hogs' placement
    // would see the two workers as equal.
    let release = Arc::new(AtomicBool::new(false));
    let blockers_running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let blockers: Vec<_> = (0..4)
        .map(|_| {
            let (r, n) = (Arc::clone(&release), Arc::clone(&blockers_running));
            rt.spawn_with(Builder::new().name("blocker").cpus([w1]), move || {
                n.fetch_add(1, Ordering::AcqRel);
                while !r.load(Ordering::Acquire) {
                    lagom::task::cond_resched();
                }
            })
            .unwrap()
        })
        .collect();
    let t0 = Instant::now();
    while blockers_running.load(Ordering::Acquire) < 4 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the blockers never all ran"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // The id of a hog that started on worker 0 and later ran on worker 1.
    let moved = Arc::new(AtomicU64::new(0));
    let (s, m, go) = (Arc::clone(&stop), Arc::clone(&moved), Arc::clone(&started));
    let started_on = rt
        .spawn_with(Builder::new().name("spawner").cpus([w0]), move || {
            let hogs: Vec<_> = (0..3)
                .map(|_| {
                    let (stop, moved, go) = (Arc::clone(&s), Arc::clone(&m), Arc::clone(&go));
                    lagom::task::spawn(move || {
                        let first = lagom::task::current().unwrap().cpu;
                        go.fetch_add(1, Ordering::AcqRel);
                        let t0 = Instant::now();
                        while !stop.load(Ordering::Relaxed) {
                            let me = lagom::task::current().unwrap();
                            if first == w0 && me.cpu == w1 {
                                moved.store(me.id, Ordering::Relaxed);
                                stop.store(true, Ordering::Relaxed);
                            }
                            if t0.elapsed() > Duration::from_secs(10) {
                                stop.store(true, Ordering::Relaxed);
                            }
                            for _ in 0..1000 {
                                std::hint::black_box(first);
                            }
                            lagom::task::cond_resched();
                        }
                        first
                    })
                })
                .collect();
            hogs.into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        })
        .unwrap();
    let t0 = Instant::now();
    while started.load(Ordering::Acquire) < 3 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    release.store(true, Ordering::Release);
    for b in blockers {
        b.join().unwrap();
    }
    let started_on = started_on.join().unwrap();
    pinned.join().unwrap();
    let st = rt.shutdown();
    println!("{st}");
    assert!(
        started_on.contains(&w0),
        "no hog started on worker 0 (cpu {w0}): {started_on:?}"
    );
    assert_ne!(
        moved.load(Ordering::Relaxed),
        0,
        "no hog moved from the busier worker 0 to the busy worker 1 (started on {started_on:?})\n{st}"
    );
    assert!(
        st.total().balance_periodic > 0,
        "moved, but not by the periodic balance\n{st}"
    );
}
