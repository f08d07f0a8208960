//! Model 18, **the resched word**: a wakeup queued for a busy worker against that worker's
//! running task in `cond_resched` (`lagom::model::Model::cond_resched`: the real one-load
//! test, the real tick — `task::tick`, which takes the tick bits — and the real `schedule()`
//! up to the switch, whose drain clears the wakelist's bit and takes the list).
//!
//! The race: the waker, a thread outside the workers, unparks a task blocked on worker 0,
//! which goes through worker 0's wakelist (a push, then `WAKE_PENDING` set in its resched
//! word, then the kick); meanwhile worker 0's running task is in its tick, clearing the tick
//! bits (`TICK_FIRED`, set as the tick timer's signal would) and maybe switching. The worker
//! is busy and never idle, so no kick wakes it: the resched word is the only way the running
//! task learns of the wakeup. Whatever the interleaving, once both are done the woken task
//! is on worker 0's runqueue, or it is still on the wakelist **and** `WAKE_PENDING` is set,
//! so that the running task's next `cond_resched` drains it (checked by making that call).
//!
//! Two starting points: only the tick bit set (the running task's tick finds nothing to
//! switch for unless it sees the wakeup), and need-resched set too (it switches, and its
//! drain races the push).
//!
//! Mutants: `tick_cleared_by_store` (the tick clears its bits with a store of the word it
//! read, wiping a `WAKE_PENDING` set meanwhile) breaks the first; `wake_pending_cleared_late`
//! (the drain clears `WAKE_PENDING` after taking the list instead of before) the second.
#![cfg(loom)]

use lagom::model::locking::resched::{NEED_RESCHED, TICK_FIRED, WAKE_PENDING};
use lagom::model::{Model, Step};
use loom::sync::Arc;
use loom::thread;

fn the_wakeup_is_not_lost(start: u32) {
    loom::model(move || {
        // One worker, so the outside waker can only queue the task there; without delayed
        // dequeue, so the blocked task leaves the runqueue and its wakeup is a real enqueue.
        let m = Arc::new(Model::new(1, "TTWU_QUEUE,NO_DELAY_DEQUEUE"));
        let sleeper = m.running_task(0);
        assert_eq!(m.prepare_park(&sleeper), Step::Sleep);
        assert_eq!(m.schedule_at(&sleeper, 0, 1), None);
        let runner = m.running_task(0);
        m.set_resched(0, start);
        let waker = {
            let (m, s) = (Arc::clone(&m), sleeper.clone());
            thread::spawn(move || m.unpark(&s))
        };
        let now = m.cond_resched(&runner, 0, 2);
        waker.join().unwrap();
        assert!(
            now.is_some(),
            "[{start:#x}] the tick bit was set: a tick ran"
        );
        let queued = m.queued_count(&sleeper) == 1;
        if !queued {
            assert!(
                !m.wakelist_is_empty(0),
                "[{start:#x}] the woken task is neither queued nor on the wakelist"
            );
            assert_ne!(
                m.resched(0) & WAKE_PENDING,
                0,
                "[{start:#x}] a wakeup waits on the busy worker's wakelist and its resched \
                 word says nothing: the running task would run on past it"
            );
            // The next call drains it.
            let running = if now == Some(runner.id()) {
                &runner
            } else {
                &sleeper
            };
            let _ = m.cond_resched(running, 0, 3);
            assert!(
                m.wakelist_is_empty(0),
                "[{start:#x}] the next call left it queued"
            );
        }
    });
}

#[test]
fn resched_word_tick_vs_wakeup() {
    the_wakeup_is_not_lost(TICK_FIRED);
}

#[test]
fn resched_word_switch_vs_wakeup() {
    the_wakeup_is_not_lost(NEED_RESCHED | TICK_FIRED);
}
