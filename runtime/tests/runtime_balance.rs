//! Load balancing with two workers: work spawned on one worker while the other sleeps idle
//! spreads to both (the busy worker's tick kicks the sleeper, whose newly idle balance pulls;
//! the runtime opts in to migration, as tasks that have run may be what it pulls).
//! Weighted balancing is checked by `runtime_fair.rs`; the delayed-task migration race by
//! loom model 7 (`loom-tests/tests/migrate.rs`).
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lagom::Runtime;

/// A task spawns four CPU-bound tasks, which all start on its worker; the other worker went
/// to sleep long before. Each task records the CPUs it runs on. Both CPUs must show up:
/// without the nohz kick the sleeping worker would never wake, since nothing is ever queued
/// for it directly.
#[test]
fn spawned_work_spreads_to_the_idle_worker() {
    let cpus = runtime_util::two_cpus();
    if cpus.len() < 2 {
        eprintln!("SKIPPED: needs two allowed CPUs");
        return;
    }
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
        total.balance_pulls + total.balance_periodic > 0,
        "work moved without a balance pull?"
    );
}
