//! The switch counters count switches: a reschedule that picks the running task again
//! (`yield_now` with nothing else runnable; a preempting reschedule after which the running
//! task is still EEVDF's pick) switches nothing and counts nothing, as `__schedule` counts
//! `nvcsw`/`nivcsw` only when `prev != next` (a busy worker's `cond_resched` loop
//! counted ~10 involuntary "switches" per remote wake that were re-picks of the same task).
mod runtime_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lagom::Runtime;
use lagom::task::Builder;

/// A task alone on its worker yields 10 000 times: nothing else can run, so no switch.
#[test]
fn yield_alone_is_no_switch() {
    let cpu = runtime_util::two_cpus()[0];
    let rt = Runtime::builder().worker_cpus([cpu]).build().unwrap();
    let h = rt
        .spawn_with(Builder::new().name("yielder").cpus([cpu]), || {
            for _ in 0..10_000 {
                lagom::task::yield_now();
            }
        })
        .unwrap();
    h.join().unwrap();
    let w = rt.shutdown().workers[0];
    assert_eq!(
        (w.switches_voluntary, w.switches_involuntary),
        (0, 0),
        "yields with nothing else runnable were counted as switches"
    );
}

/// Two CPU-bound tasks of very different weight (nice −10 and 10) share one worker through
/// `cond_resched` for 300 ms. Once the heavy task's protected slice has run out it is
/// rescheduled at every `cond_resched`, and EEVDF picks it again until the light one is
/// eligible: many reschedules, few switches. Each task notes every time it finds that the
/// other ran since its own last step: the real switches between them. The counter must not
/// exceed that (plus the final exit, which is no switch either, and one step of slack).
#[test]
fn preempt_repick_is_no_switch() {
    let cpu = runtime_util::two_cpus()[0];
    let rt = Runtime::builder().worker_cpus([cpu]).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let last = Arc::new(AtomicU64::new(u64::MAX));
    let seen = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = [(0u64, -10), (1, 10)]
        .into_iter()
        .map(|(me, nice)| {
            let (stop, last, seen) = (Arc::clone(&stop), Arc::clone(&last), Arc::clone(&seen));
            let b = Builder::new().nice(nice).cpus([cpu]);
            rt.spawn_with(b, move || {
                let mut steps = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Only tasks on this one worker touch `last`: no step interleaves with
                    // another, so a change of owner is a switch between the two tasks.
                    if last.swap(me, Ordering::Relaxed) != me {
                        seen.fetch_add(1, Ordering::Relaxed);
                    }
                    lagom::task::cond_resched();
                    steps += 1;
                }
                steps
            })
            .unwrap()
        })
        .collect();
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(300) {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    let steps: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let w = rt.shutdown().workers[0];
    let seen = seen.load(Ordering::Relaxed);
    eprintln!(
        "steps {steps}, switches seen by the tasks {seen}, counted: involuntary {}, voluntary {}",
        w.switches_involuntary, w.switches_voluntary
    );
    assert!(seen >= 2, "both tasks should have run in turns: {seen}");
    assert_eq!(w.switches_voluntary, 0, "nothing blocked or yielded");
    assert!(
        w.switches_involuntary <= seen + 1,
        "{} involuntary switches counted, but the tasks saw only {seen} switches",
        w.switches_involuntary
    );
}
