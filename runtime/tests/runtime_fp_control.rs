//! `Builder::fp_control`: a runtime in `FpControl::AssumeDefault` runs tasks that keep its
//! promise as correctly as one in `Preserve`; a `Preserve` runtime keeps a task's own rounding
//! mode across its switches while the other tasks keep the default; and, with
//! `debug_assertions`, a task that breaks the `AssumeDefault` promise aborts the process
//! naming itself (checked in a child process).
mod child_util;
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lagom::{FpControl, Runtime};

#[cfg(target_arch = "x86_64")]
mod fp {
    /// MXCSR control bits | x87 control word << 32, in the default environment.
    pub const DEFAULT: u64 = 0x1F80 | 0x037F << 32;

    /// The FP control state now, status flags dropped.
    pub fn get() -> u64 {
        let mut v = [0u32; 2];
        // SAFETY: stores MXCSR and the x87 control word into the local array.
        unsafe { core::arch::asm!("stmxcsr [{0}]", "fnstcw [{0} + 4]", in(reg) v.as_mut_ptr()) };
        u64::from(v[0] & !0x3F) | u64::from(v[1] & 0xFFFF) << 32
    }

    /// Sets MXCSR: `true` round toward zero, `false` the default.
    pub fn round_toward_zero(on: bool) {
        let v: u32 = if on { 0x7F80 } else { 0x1F80 };
        // SAFETY: a valid MXCSR, all exceptions masked.
        unsafe { core::arch::asm!("ldmxcsr [{0}]", in(reg) &v) };
    }
}

#[cfg(target_arch = "aarch64")]
mod fp {
    /// FPCR in the default environment.
    pub const DEFAULT: u64 = 0;

    /// The FP control state now (FPCR).
    pub fn get() -> u64 {
        let v: u64;
        // SAFETY: reading FPCR has no side effects.
        unsafe { core::arch::asm!("mrs {0}, fpcr", out(reg) v) };
        v
    }

    /// Sets FPCR: `true` round toward zero, `false` the default.
    pub fn round_toward_zero(on: bool) {
        let v: u64 = if on { 3 << 22 } else { 0 };
        // SAFETY: a valid FPCR, no traps enabled.
        unsafe { core::arch::asm!("msr fpcr, {0}", in(reg) v) };
    }
}

/// A rounding-sensitive computation: its result under the default rounding is what the test
/// thread computes.
fn series(seed: u64, n: u64) -> f64 {
    (1..=n).map(|k| 1.0 / (k as f64 + seed as f64 / 7.0)).sum()
}

const TASKS: u64 = 32;
const STEPS: u64 = 200;

/// `TASKS` tasks, half pinned to each of (up to) two workers, each compute `series` one term per step, yielding
/// after each; they check the FP control state at every resume. Returns the results, the
/// number of resumes that found a non-default state, and the number of switches.
fn workload(mode: FpControl) -> (Vec<f64>, u64, u64) {
    let cpus = runtime_util::two_cpus();
    let rt = Runtime::builder()
        .worker_cpus(cpus.clone())
        .stack_size(64 * 1024)
        .fp_control(mode)
        .build()
        .unwrap();
    let progress = Arc::new(AtomicU64::new(0));
    let _dog = runtime_util::Watchdog::new("fp", Arc::clone(&progress), Duration::from_secs(10));
    let wrong = Arc::new(AtomicU64::new(0));
    let w = Arc::clone(&wrong);
    let results = rt.block_on(move || {
        let hs: Vec<_> = (0..TASKS)
            .map(|seed| {
                let (w, p) = (Arc::clone(&w), Arc::clone(&progress));
                // Half on each worker, pinned: every yield then switches to another task,
                // however the OS schedules the two worker threads (unpinned, a balancer
                // could hand one worker's tasks to the other one at a time).
                let cpu = cpus[seed as usize % cpus.len()];
                lagom::task::Builder::new().cpus([cpu]).spawn(move || {
                    let mut sum = 0.0;
                    for k in 1..=STEPS {
                        sum += 1.0 / (k as f64 + seed as f64 / 7.0);
                        lagom::task::yield_now();
                        if fp::get() != fp::DEFAULT {
                            w.fetch_add(1, Ordering::Relaxed);
                        }
                        p.fetch_add(1, Ordering::Relaxed);
                    }
                    sum
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.expect("spawn").join().unwrap())
            .collect::<Vec<_>>()
    });
    let t = rt.shutdown().total();
    let switches = t.switches_voluntary + t.switches_involuntary;
    (results, wrong.load(Ordering::Relaxed), switches)
}

#[test]
fn assume_default_runtime_runs_tasks_like_preserve() {
    let expected: Vec<f64> = (0..TASKS).map(|seed| series(seed, STEPS)).collect();
    for mode in [FpControl::AssumeDefault, FpControl::Preserve] {
        let (results, wrong, switches) = workload(mode);
        assert_eq!(results, expected, "{mode:?}: wrong results");
        assert_eq!(
            wrong, 0,
            "{mode:?}: a task resumed with a non-default FP control state"
        );
        assert!(
            switches >= TASKS * STEPS / 10,
            "{mode:?}: only {switches} switches: the tasks did not interleave"
        );
    }
}

/// In `Preserve`, one task runs with round toward zero across many yields and gets it back
/// every time, while the tasks it switches with keep the default.
#[test]
fn preserve_runtime_keeps_each_tasks_own_rounding_mode() {
    let rt = Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .build()
        .unwrap();
    let (own, others) = rt.block_on(|| {
        let rz = lagom::task::spawn(|| {
            fp::round_toward_zero(true);
            let want = fp::get();
            let mut lost = 0u64;
            for _ in 0..STEPS {
                lagom::task::yield_now();
                lost += u64::from(fp::get() != want);
            }
            fp::round_toward_zero(false);
            (lost, want != fp::DEFAULT)
        });
        let hs: Vec<_> = (0..8)
            .map(|_| {
                lagom::task::spawn(|| {
                    (0..STEPS)
                        .map(|_| {
                            lagom::task::yield_now();
                            u64::from(fp::get() != fp::DEFAULT)
                        })
                        .sum::<u64>()
                })
            })
            .collect();
        let own = rz.join().unwrap();
        (own, hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>())
    });
    let t = rt.shutdown().total();
    let switches = t.switches_voluntary + t.switches_involuntary;
    assert!(
        switches >= STEPS,
        "only {switches} switches: the tasks did not interleave"
    );
    assert!(own.1, "round toward zero was not in force at all");
    assert_eq!(
        own.0, 0,
        "the task lost its own rounding mode across a switch"
    );
    assert_eq!(
        others, 0,
        "another task resumed with the rounding mode of the first"
    );
}

const CHILD_ENV: &str = "LAGOM_FP_RUNTIME_CHILD";

/// The child side: an `AssumeDefault` runtime whose task changes its rounding mode and
/// sleeps (the process must abort before this returns).
#[test]
fn child() {
    if std::env::var(CHILD_ENV).is_err() {
        return;
    }
    let rt = Runtime::builder()
        .worker_cpus(runtime_util::two_cpus())
        .fp_control(FpControl::AssumeDefault)
        .build()
        .unwrap();
    rt.block_on(|| {
        let h = lagom::task::Builder::new()
            .name("rounds-toward-zero")
            .spawn(|| {
                fp::round_toward_zero(true);
                // Blocks (a yield with nothing else runnable would not switch). Long enough
                // that the deadline cannot pass before the sleep first blocks, even under
                // qemu, where a 1 ms sleep was seen to return without blocking.
                lagom::task::sleep(Duration::from_millis(50));
                fp::round_toward_zero(false);
            })
            .unwrap();
        h.join().unwrap();
    });
    eprintln!("child returned without aborting");
}

#[test]
#[cfg(debug_assertions)]
fn assume_default_runtime_aborts_naming_a_task_that_broke_the_promise() {
    let run = child_util::run_child(CHILD_ENV, "1");
    let stderr = &run.stderr;
    assert!(
        stderr.contains("lagom: task 'rounds-toward-zero' (id "),
        "stderr was: {stderr}"
    );
    assert!(
        stderr.contains("under FpControl::AssumeDefault"),
        "stderr was: {stderr}"
    );
    assert_eq!(run.signal, Some(libc::SIGABRT), "stderr was: {stderr}");
}
