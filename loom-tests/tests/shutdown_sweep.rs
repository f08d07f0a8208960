//! Model 16, **the shutdown sweep's cancellation against an unpark**: the task T,
//! spawned by the real spawn path onto worker 0, parks in a loop that only a cancellation
//! ends (the real `park` loop, `task::park_loop`, whose every round begins with the
//! cancellation point, over worker 0's real `schedule()` and idle loop, `ModelWorker`). The
//! runtime's shutdown is in DRAIN (`Shared::set_phase`), so worker 0's idle loop, finding
//! nothing runnable anywhere, sweeps its registry (`sched/shutdown.rs`: a `BLOCKED` task not
//! yet cancelled gets `CANCEL_REQUESTED` and its ordinary unpark). Meanwhile a thread outside
//! the workers unparks T.
//!
//! Checked: T unwinds exactly once, from a cancellation point (`task/cancel.rs`'s `raise`:
//! the private `Cancelled` payload, caught here as the fiber's `catch_unwind` catches it); it
//! is never woken into its runqueue twice nor run by two workers; its exit (the real exit
//! hook with the cancelled outcome, `JoinError::panicked` of that payload as the fiber makes
//! it) delivers a `JoinError` whose `is_cancelled()` holds; and worker 0 then leaves its
//! idle loop in EXIT. Whether the outside unpark comes before T sleeps (a token consumed:
//! `park` returns, T parks again), wins the wakeup (the sweep's unpark finds the token set and
//! leaves the wakeup to it), or comes after (a token left pending), T is cancelled once.
//!
//! Mutant `sweep_no_unpark` (`sched/shutdown.rs`): the sweep requests the cancellation but
//! leaves the wakeup to whoever unparks the task next; where the outside unpark came first,
//! nobody wakes T again and worker 0 sleeps forever (a loom deadlock). `ttwu_no_claim` (the
//! claim dropped from `try_to_wake_up`) breaks it too: the sweep's and the outside unpark's
//! wakeups both enqueue T, which is left queued after its exit.
#![cfg(loom)]

use lagom::JoinError;
use lagom::model::Model;
use loom::sync::Arc;
use loom::thread;
use std::panic::{AssertUnwindSafe, catch_unwind};

#[test]
fn shutdown_sweep_against_unpark() {
    loom_tests::claim_model(|| {
        let m = Arc::new(Model::new(1, ""));
        let (h, _value) = m.spawn::<u64>();
        let t = m.task_of(&h);
        let w = m.worker(0);
        assert_eq!(w.idle_run().id(), t.id());
        m.begin_shutdown();
        let waker = {
            let (m, t) = (Arc::clone(&m), t.clone());
            thread::spawn(move || m.unpark(&t))
        };
        // T's body: it parks until the shutdown cancels it.
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            loop {
                w.park(&t);
            }
        }));
        let Err(payload) = unwound;
        // Anything but the cancellation (a failed assertion, loom's own report) goes on.
        let outcome = match JoinError::panicked(String::new(), t.id(), payload).try_into_panic() {
            Ok(other) => std::panic::resume_unwind(other),
            Err(cancelled) => cancelled,
        };
        assert_eq!(m.queued_count(&t), 1, "T is queued once");
        let next = w.exit_with(Some(Err(outcome)));
        assert!(next.is_none(), "worker 0 has nothing else to run");
        waker.join().unwrap();
        m.exit_phase();
        w.idle_until_exit();
        let joiner = m.running_task(0);
        let got = m.try_join(&h, &joiner).expect("T has ended");
        let err = got.expect_err("T was cancelled");
        assert!(err.is_cancelled(), "the join sees the cancellation");
    });
}
