//! Model 12, **two rounds of wakeup by two wakers**: a task blocked on worker 0
//! is unparked by two threads outside the workers (each first makes the task's condition true
//! by one), while a loom thread plays worker 0 through the real code only (`ModelWorker`: the
//! idle loop's rounds up to the switch into the task, and the task's real `park` loop,
//! `task::park_loop` — `prepare_park`, then the real `schedule()` up to the switch and
//! `finish_task_switch` after it, `ModelWorker::park`). The task runs and parks again until
//! both wakers are done: it may be woken by one,
//! run, block again and be woken by the other, racing with the worker that is still switching
//! it out, so nothing but the wakeup protocol orders the second waker's claim after the
//! first round's run (no thread spawn does: both wakers start before the task first runs).
//!
//! The race: a waker that claims the task (`BLOCKED → WAKING`, Acquire) must see everything
//! the previous round wrote — the worker's dequeue (`on_rq = false`, the entity stored back)
//! and, through the `on_cpu` wait or the hand-off to the wakelist, the switch's save of the
//! task's context. Either unpark may be consumed as a token by a `park` that then returns,
//! or wake the task from a real sleep; either way the task runs both rounds, and the worker
//! never sleeps with the task runnable (a lost wakeup is a loom deadlock).
//!
//! Mutants: `ttwu_no_on_cpu_wait` (a waker that finds the task blocked but still `on_cpu`
//! does not wait for its switch-out: it takes the context while the worker saves it),
//! `finish_relaxed_on_cpu` (the `on_cpu` clear without Release: the waker that sees it clear
//! does not see the save), both also caught by older models, and `ttwu_claim_relaxed`, which
//! only this model catches: the claim's compare-exchange without Acquire. The waker's later
//! loads of `on_rq` and `on_cpu` are Acquire themselves, but an Acquire load may still read a
//! value older than the one the previous round published, and then synchronizes with nothing
//! of that round: the second waker's enqueue reads the task's entity concurrently with the
//! worker's dequeue that stored it (a causality violation in `enqueue_on`). It takes three
//! preemptions to reach, so this model, as every model of a waker's claim, runs with a bound
//! of at least three (`loom_tests::claim_model`; at two it passes with the mutant).
#![cfg(loom)]

use lagom::model::{Model, Step};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

fn two_rounds(spec: &'static str) {
    loom_tests::claim_model(move || {
        let m = Arc::new(Model::new(1, spec));
        // The task ran on worker 0 and blocked there, in `park`; the worker has nothing else.
        let t = m.running_task(0);
        assert_eq!(m.prepare_park(&t), Step::Sleep);
        assert_eq!(m.schedule_at(&t, 0, 1), None);
        // Each waker makes the task's condition true by one, then unparks it.
        let done = Arc::new(AtomicUsize::new(0));
        let wakers: Vec<_> = (0..2)
            .map(|_| {
                let (m, t, done) = (Arc::clone(&m), t.clone(), Arc::clone(&done));
                thread::spawn(move || {
                    done.fetch_add(1, Ordering::Release);
                    m.unpark(&t);
                })
            })
            .collect();
        // Worker 0's thread: its idle loop runs the task, which goes on with its park and
        // then parks until both wakers are done, as every caller of `park` re-checks.
        let w = m.worker(0);
        let ran = w.idle_run();
        assert_eq!(ran.id(), t.id(), "[{spec}] the worker ran another task");
        w.park(&t);
        while done.load(Ordering::Acquire) < 2 {
            w.park(&t);
        }
        for h in wakers {
            h.join().unwrap();
        }
        assert!(
            m.is_running_state(&t),
            "[{spec}] not RUNNING after its wakeups"
        );
        assert_eq!(m.queued_count(&t), 1, "[{spec}] queued other than once");
    });
}

#[test]
fn two_wakers_wakelist() {
    two_rounds("TTWU_QUEUE,NO_TTWU_QUEUE_ON_CPU");
}

#[test]
fn two_wakers_on_cpu_wakelist() {
    two_rounds("TTWU_QUEUE,TTWU_QUEUE_ON_CPU");
}

#[test]
fn two_wakers_locked_enqueue() {
    two_rounds("NO_TTWU_QUEUE");
}
