//! Model 14, **a timer firing against an unpark**: the task T on worker 0 arms a
//! timer (`task::arm_timer`, where `park_timeout`, `sleep` and every timed wait arm theirs)
//! and parks (the real `park` loop, `task::park_loop`, with worker 0's real `schedule()` and
//! idle loop played by `ModelWorker`). Under loom the clock stands still past the deadline,
//! so the timer is due at once: the worker's real expiry (`sched/timer.rs`'s `fire`, at the
//! top of `schedule()` and of every idle round, outside the runqueue lock) pops it and
//! unparks T (`unpark_task`: the token, then `try_to_wake_up`). (`park_until`'s own first
//! step, the return for a deadline already past, is not run: with a clock that stands still
//! no deadline could pass during the park.)
//!
//! * `timer_alone`: the expiry is T's only waker. The `park` must return: the expiry's
//!   wakeup leaves its token, which T's `park` consumes (it may come while T is still
//!   switching out, requeuing it in place, or once it sleeps).
//! * `timer_against_unpark`: a thread outside the workers makes T's condition true and
//!   unparks it, racing with the expiry. T's `park_timeout` returns once (the timer's or the
//!   unpark's wakeup, or a token consumed before it slept), and T then parks until it sees
//!   the condition: the unpark's token is never lost (else T sleeps forever: a loom
//!   deadlock), and T is woken into its runqueue once (never enqueued twice however the two
//!   wakeups interleave).
//!
//! Mutant `timer_fire_no_token` (`sched/timer.rs`): the expiry wakes the task
//! (`try_to_wake_up`) without setting its token: `park` finds no token, sleeps again, and with
//! no other waker it sleeps forever (`timer_alone`; in `timer_against_unpark` the outside
//! unpark rescues it, so only the model with the timer alone catches it).
#![cfg(loom)]

use lagom::model::{Model, Step};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

/// A deadline already due under loom's clock.
const DUE: u64 = 1;

#[test]
fn timer_alone() {
    loom_tests::claim_model(|| {
        let m = Model::new(1, "");
        let t = m.queued_task(0);
        let w = m.worker(0);
        assert_eq!(w.idle_run().id(), t.id());
        w.arm_timer(&t, DUE);
        w.park(&t);
        assert!(w.timers_empty(), "the timer fired");
        assert!(m.is_running_state(&t), "T runs");
        assert_eq!(m.queued_count(&t), 1, "T is queued once");
        // The expiry's token was consumed: T's next `park` would sleep.
        assert_eq!(m.prepare_park(&t), Step::Sleep, "a token was left behind");
    });
}

fn timer_against_unpark(spec: &'static str) {
    loom_tests::claim_model(move || {
        let m = Arc::new(Model::new(1, spec));
        let t = m.queued_task(0);
        let w = m.worker(0);
        assert_eq!(w.idle_run().id(), t.id());
        let cond = Arc::new(AtomicBool::new(false));
        let waker = {
            let (m, t, cond) = (Arc::clone(&m), t.clone(), Arc::clone(&cond));
            thread::spawn(move || {
                cond.store(true, Ordering::Release);
                m.unpark(&t);
            })
        };
        // `park_timeout`: the timer, then one `park`; then park until the condition holds.
        w.arm_timer(&t, DUE);
        w.park(&t);
        while !cond.load(Ordering::Acquire) {
            w.park(&t);
        }
        waker.join().unwrap();
        assert!(m.is_running_state(&t), "[{spec}] T runs");
        assert_eq!(m.queued_count(&t), 1, "[{spec}] T is queued once");
    });
}

#[test]
fn timer_against_unpark_wakelist() {
    timer_against_unpark("TTWU_QUEUE");
}

#[test]
fn timer_against_unpark_locked() {
    timer_against_unpark("NO_TTWU_QUEUE");
}
