//! Fair shares: CPU-bound tasks calling `cond_resched` get run time in proportion to their
//! weight (nice 0, 0, 5, −5 → 1024 : 1024 : 335 : 3121) over 2 s: within 5 % on one worker,
//! 10 % per worker with two (see the test for why).
//!
//! Each task reads the run time the scheduler charged to it (`task::runtime()`, its entity's
//! `sum_exec_runtime`) when measuring starts and ends, so what is compared is the time the
//! runtime gave each task (wall time, as the kernel charges it: time the OS steals from a
//! worker thread is charged to the task it was running, so on a loaded machine a task's own
//! chunk timings would drift from the scheduler's account).
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lagom::Runtime;
use lagom::policy::weight_of_nice;
use lagom::task::Builder;

/// About 20 µs of arithmetic the optimiser cannot remove.
fn chunk(seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..20_000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x ^= x >> 17;
    }
    std::hint::black_box(x)
}

/// Runs one CPU-bound task per (nice, cpu); after a 200 ms warm-up, measures each one's run
/// time for `dur`.
fn run(rt: &Runtime, tasks: &[(i32, usize)], dur: Duration) -> Vec<Duration> {
    let stop = Arc::new(AtomicBool::new(false));
    let measure = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = tasks
        .iter()
        .enumerate()
        .map(|(i, &(nice, cpu))| {
            let (stop, measure) = (Arc::clone(&stop), Arc::clone(&measure));
            rt.spawn_with(
                Builder::new()
                    .name(format!("nice{nice}"))
                    .nice(nice)
                    .cpus([cpu]),
                move || {
                    let mut start = None;
                    let mut x = i as u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = chunk(x);
                        if start.is_none() && measure.load(Ordering::Relaxed) {
                            start = lagom::task::runtime();
                        }
                        lagom::task::cond_resched();
                    }
                    let end = lagom::task::runtime().unwrap();
                    end - start.expect("measured")
                },
            )
            .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    measure.store(true, Ordering::Relaxed);
    std::thread::sleep(dur);
    stop.store(true, Ordering::Relaxed);
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Checks that each group's times are in proportion to weight within `tol` (relative).
fn check(label: &str, nices: &[i32], ran: &[Duration], tol: f64) {
    let wsum: u64 = nices.iter().map(|&n| weight_of_nice(n)).sum();
    let tsum: f64 = ran.iter().map(Duration::as_secs_f64).sum();
    for (&n, t) in nices.iter().zip(ran) {
        let want = weight_of_nice(n) as f64 / wsum as f64;
        println!(
            "{label}: nice {n:>2}: share {:.4}, weight share {want:.4} ({t:?})",
            t.as_secs_f64() / tsum
        );
    }
    for (&n, t) in nices.iter().zip(ran) {
        let want = weight_of_nice(n) as f64 / wsum as f64;
        let got = t.as_secs_f64() / tsum;
        assert!(
            (got - want).abs() <= tol * want,
            "{label}: nice {n} got {got:.4} of the time, its weight asks for {want:.4} (±{tol})"
        );
    }
}

/// One test (not two in parallel: they would share the two CPUs and disturb each other).
#[test]
fn shares_follow_weights() {
    let cpus = runtime_util::two_cpus();
    // The four tasks on one worker.
    {
        let rt = Runtime::builder().worker_cpus([cpus[0]]).build().unwrap();
        let nices = [0, 0, 5, -5];
        let tasks: Vec<_> = nices.iter().map(|&n| (n, cpus[0])).collect();
        let ran = run(&rt, &tasks, Duration::from_secs(2));
        check("one worker", &nices, &ran, 0.05);
    }
    // Two workers, two tasks each (nice 0 with 5, nice 0 with −5), placed by affinity: each
    // worker shares out its time by weight while the other runs in parallel. (Weighted
    // shares across workers need periodic load balancing, which this stage does not have.)
    // Tolerance 10 %: with both workers busy on a 2-core machine shared with other
    // processes, the OS steals multi-millisecond stretches from the worker threads, which
    // are charged (as the kernel charges them) to whichever task was running, and a 2 s
    // window does not amortise them; measured deviations reached 7 % for the nice 5 task.
    if cpus.len() < 2 {
        eprintln!("SKIPPED two workers: needs two allowed CPUs");
        return;
    }
    let rt = Runtime::builder()
        .worker_cpus(cpus.clone())
        .build()
        .unwrap();
    let tasks = [(0, cpus[0]), (5, cpus[0]), (0, cpus[1]), (-5, cpus[1])];
    let ran = run(&rt, &tasks, Duration::from_secs(2));
    check("worker A", &[0, 5], &ran[..2], 0.10);
    check("worker B", &[0, -5], &ran[2..], 0.10);
}
