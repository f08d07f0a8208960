//! Model 12 (issue #21), **two rounds of wakeup by two wakers**: a task blocked on worker 0
//! is unparked by two threads outside the workers, while a loom thread plays worker 0 through
//! the real code only (`ModelWorker`: the idle loop's rounds up to the switch into the task,
//! and the task's `park` — `prepare_park`, then the real `schedule()` up to the switch and
//! `finish_task_switch` after it). The task runs, parks again, and must be woken again: the
//! second wakeup may come from either waker, racing with the worker that is still switching
//! the task out, so nothing but the wakeup protocol orders the second waker's claim after the
//! first round's run (no thread spawn does: both wakers start before the task first runs).
//!
//! The race: a waker that claims the task (`BLOCKED → WAKING`, Acquire) must see everything
//! the previous round wrote — the worker's dequeue (`on_rq = false`, the entity stored back)
//! and, through the `on_cpu` wait or the hand-off to the wakelist, the switch's save of the
//! task's context. Either unpark may be consumed as a token by a `park` that then returns,
//! or wake the task from a real sleep; either way the task runs both rounds, and the worker
//! never sleeps with the task runnable (a lost wakeup is a loom deadlock).
//!
//! Mutants: `ttwu_claim_relaxed` (the claim without Acquire: the second waker's reads of the
//! scheduling state race with the first round's writes) and `finish_relaxed_on_cpu` (the
//! `on_cpu` clear without Release).
#![cfg(loom)]

use lagom::model::{Model, Next, Step};
use loom::sync::Arc;
use loom::thread;

fn two_rounds(spec: &'static str) {
    loom::model(move || {
        let m = Arc::new(Model::new(1, spec));
        // The task ran on worker 0 and blocked there; the worker then has nothing to run.
        let t = m.running_task(0);
        assert_eq!(m.prepare_park(&t), Step::Sleep);
        assert_eq!(m.schedule_at(&t, 0, 1), None);
        let wakers: Vec<_> = (0..2)
            .map(|_| {
                let (m, t) = (Arc::clone(&m), t.clone());
                thread::spawn(move || m.unpark(&t))
            })
            .collect();
        // Worker 0's thread: round 1 runs the task, which parks again (round 2).
        let w = m.worker(0);
        let ran = w.idle_run();
        assert_eq!(ran.id(), t.id(), "[{spec}] round 1 ran another task");
        loop {
            match m.prepare_park(&t) {
                // The other unpark's token: the park returns, round 2 done.
                Step::Return => break,
                Step::Retry => continue,
                Step::Sleep => {
                    match w.block() {
                        // Requeued by a waker before its dequeue: it runs on.
                        Next::Same => {}
                        Next::Idle => {
                            let ran = w.idle_run();
                            assert_eq!(ran.id(), t.id(), "[{spec}] round 2 ran another task");
                        }
                        Next::Task(_) => panic!("[{spec}] the worker has one task"),
                    }
                    break;
                }
            }
        }
        for h in wakers {
            h.join().unwrap();
        }
        assert!(
            m.is_running_state(&t),
            "[{spec}] not RUNNING after two rounds"
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
