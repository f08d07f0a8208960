//! Models 1 and 2 over the real wakeup path (`lagom::model` seams into
//! `tcb/token.rs`, `wake/` and `sched/`):
//!
//! **1. Lost wakeup** (`lost_wakeup`): a task announcing `BLOCKED` and re-checking its park
//! token, then switching away (the worker's `put_prev` dequeue and the `on_cpu` clear of a
//! completed switch), against a waker setting the token and calling `try_to_wake_up`. The
//! task ends up runnable (queued exactly once) or saw the token and never slept. Mutants:
//! `park_no_waker_fence` drops the waker's SeqCst fence between the token store and the state
//! load; `ttwu_no_sleeper_fence` drops the sleeper's fence between the `BLOCKED` store and the
//! token re-check. Either lets both sides miss each other (store buffering): the task sleeps
//! and nobody wakes it.
//!
//! **2. Double wake** (`double_wake`): two wakers call `try_to_wake_up` on one blocked task;
//! it is enqueued exactly once, by exactly one of them. Mutant `ttwu_no_claim` replaces the
//! `BLOCKED → WAKING` compare-exchange by a load and a store: both wakers can win, and the
//! task is queued twice (or its scheduling state raced on, which loom reports).
//!
//! **3. Stale token** (`stale_token`): the task still holds an earlier unpark's token when a
//! waker sets the task's wait condition and unparks it, and the task parks in a loop until it
//! sees the condition (as every caller of `park` does). The task consumes the old token,
//! finds the condition false (nothing orders the waker's store before its load yet), and
//! goes to sleep: the waker's own token store and fence must then wake it. Mutant
//! `unpark_look_first` makes the unparker return early when its plain look finds a token
//! set: that look can read the token the task already consumed, and the task sleeps with
//! nobody to wake it.
//!
//! Model 1 also catches `finish_relaxed_on_cpu` (the `on_cpu` clear of `finish_task_switch`
//! without Release): a waker that sees `on_cpu` clear then touches the task's scheduling
//! state without seeing the switch's save of the task's context (loom reports the race).
//!
//! Each model runs under several feature sets (remote wakeups through the wakelist or under
//! the remote lock; TTWU_QUEUE_ON_CPU on and off).
#![cfg(loom)]

use lagom::model::{Model, Step, Woken};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

const FEATURES: [&str; 3] = [
    "TTWU_QUEUE,TTWU_QUEUE_ON_CPU",
    "TTWU_QUEUE,NO_TTWU_QUEUE_ON_CPU",
    "NO_TTWU_QUEUE,NO_TTWU_QUEUE_ON_CPU",
];

#[test]
fn lost_wakeup() {
    for spec in FEATURES {
        loom_tests::claim_model(move || {
            let m = Arc::new(Model::new(2, spec));
            let t = m.running_task(0);
            let waker = {
                let (m, t) = (Arc::clone(&m), t.clone());
                thread::spawn(move || m.unpark(&t))
            };
            let slept = match m.prepare_park(&t) {
                Step::Sleep => {
                    m.schedule_out(&t, 0);
                    true
                }
                Step::Return | Step::Retry => false,
            };
            waker.join().unwrap();
            m.drain_all();
            let queued = m.queued_count(&t);
            if slept {
                assert_eq!(
                    queued, 1,
                    "[{spec}] lost wakeup: the task sleeps, nobody woke it"
                );
                assert!(m.is_running_state(&t), "[{spec}] queued but not RUNNING");
            } else {
                // It never switched away: it is still queued as the running task.
                assert_eq!(
                    queued, 1,
                    "[{spec}] a task that did not sleep left its runqueue"
                );
            }
        });
    }
}

#[test]
fn double_wake() {
    for spec in FEATURES {
        loom_tests::claim_model(move || {
            let m = Arc::new(Model::new(2, spec));
            let t = m.running_task(0);
            assert_eq!(m.prepare_park(&t), Step::Sleep);
            m.schedule_out(&t, 0);
            assert_eq!(m.queued_count(&t), 0);
            let wakers: Vec<_> = (0..2)
                .map(|_| {
                    let (m, t) = (Arc::clone(&m), t.clone());
                    thread::spawn(move || m.try_to_wake_up(&t))
                })
                .collect();
            let results: Vec<Woken> = wakers.into_iter().map(|w| w.join().unwrap()).collect();
            m.drain_all();
            let winners = results.iter().filter(|&&r| r != Woken::NotBlocked).count();
            assert_eq!(
                winners, 1,
                "[{spec}] {results:?}: the wakeup was claimed twice"
            );
            assert_eq!(m.queued_count(&t), 1, "[{spec}] enqueued more than once");
            assert!(m.is_running_state(&t));
        });
    }
}

#[test]
fn stale_token() {
    for spec in FEATURES {
        loom_tests::claim_model(move || {
            let m = Arc::new(Model::new(2, spec));
            let t = m.running_task(0);
            // An earlier unpark, not consumed yet.
            m.unpark(&t);
            let cond = Arc::new(AtomicBool::new(false));
            let waker = {
                let (m, t, cond) = (Arc::clone(&m), t.clone(), Arc::clone(&cond));
                thread::spawn(move || {
                    cond.store(true, Ordering::Release);
                    m.unpark(&t);
                })
            };
            // The caller's loop: park until the condition holds. Bounded: each `Return`
            // consumes one of the two tokens, and a `Retry` leaves one to consume.
            let mut slept = false;
            let mut steps = Vec::new();
            while !cond.load(Ordering::Acquire) {
                let st = m.prepare_park(&t);
                steps.push(st);
                match st {
                    Step::Sleep => {
                        m.schedule_out(&t, 0);
                        slept = true;
                        break;
                    }
                    Step::Return | Step::Retry => {}
                }
            }
            waker.join().unwrap();
            m.drain_all();
            if slept {
                assert_eq!(
                    m.queued_count(&t),
                    1,
                    "[{spec}] lost wakeup: the task sleeps after consuming an old token, and \
                     the unparker that set its condition left it asleep {steps:?}"
                );
            }
        });
    }
}
