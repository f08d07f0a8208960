//! Model 8, **join**: a task finishing against a joiner blocking on its handle,
//! over the real join path (`lagom::model` seams into `tcb/packet.rs`, `tcb/token.rs`,
//! `wake/` and `sched/`).
//!
//! The finishing task stores its value (`Packet::set_value`, what its fiber does when the
//! closure returns), then the outcome is delivered (`Complete::complete`, what the task's
//! exit hook `sched::exit_current` does: write the outcome, swap the packet's state to
//! `DONE`, and unpark the joiner if the old state said one registered). The joiner, a task on another worker, runs
//! `JoinHandle::join`'s rounds: `try_take` (take the outcome if the state is `DONE`, else
//! write its unparker and register it with one `PENDING → WAITING` compare-exchange), then
//! `park` — announce `BLOCKED`, re-check the token, switch away — and round again.
//!
//! Checked: the joiner gets the value, and a joiner that slept was woken (queued exactly
//! once, `RUNNING`) so that its next round takes it: it never sleeps forever. (Exactly once:
//! the outcome moves out of its cell.) loom also checks that the packet's cells are never
//! accessed by both sides without a happens-before edge.
//!
//! Mutant `join_split_check` splits the joiner's check and registration: after the check it
//! stores `WAITING` plainly instead of the compare-exchange. The task can finish between the
//! two, find no joiner to unpark, and have its `DONE` overwritten: the joiner sleeps forever.
#![cfg(loom)]

use lagom::model::{Model, Step};
use loom::sync::Arc;
use loom::thread;

/// The value the task returns.
const VALUE: u64 = 0x5eed;

#[test]
fn join() {
    loom_tests::claim_model(|| {
        let m = Arc::new(Model::new(2, ""));
        let joiner = m.running_task(0);
        let (_task, handle, exit) = m.joinable_task::<u64>(1);
        let finisher = thread::spawn(move || exit.finish(VALUE));

        // `JoinHandle::join`, round by round, with its park spelled out.
        let mut slept = false;
        let got = loop {
            if let Some(r) = m.try_join(&handle, &joiner) {
                break Some(r);
            }
            match m.prepare_park(&joiner) {
                Step::Return | Step::Retry => continue,
                Step::Sleep => {
                    m.schedule_out(&joiner, 0);
                    slept = true;
                    break None;
                }
            }
        };
        finisher.join().unwrap();
        m.drain_all();
        let got = match got {
            Some(r) => r,
            None => {
                assert!(slept);
                assert_eq!(
                    m.queued_count(&joiner),
                    1,
                    "the joiner sleeps and nobody woke it: it would sleep forever"
                );
                assert!(m.is_running_state(&joiner), "queued but not RUNNING");
                // Woken and run again, its next round finds the value.
                m.try_join(&handle, &joiner)
                    .expect("woken after the task ended, the joiner finds its outcome")
            }
        };
        let v = got.expect("the task did not panic");
        assert_eq!(v, VALUE, "the value arrives intact");
    });
}
