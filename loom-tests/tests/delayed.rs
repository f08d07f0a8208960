//! Model 5, **delayed runnable wakeup**: a waker observing `sched_delayed`
//! against the owner picking the delayed entity and finishing its dequeue, over the real
//! path (`lagom::model` seams into `wake/`, `sched/` and the policy's delayed dequeue).
//!
//! Setup (before the race): task T runs on worker 0 beside a queued task U, is charged 10 ms
//! and blocks; not eligible, it stays queued as delayed (DELAY_DEQUEUE: `on_rq` and
//! `sched_delayed` true), and U is picked. The race: a waker unparks T (`unpark_task` →
//! `try_to_wake_up`) while worker 0's `schedule()` for U — which blocks too — drains its
//! wakelist, puts U away and picks, finding T's delayed entity and finishing its dequeue
//! (`Pick::FinishedDelayed` → `finished_delayed`: entity saved, `on_rq = false` Release).
//!
//! Checked under each delayed-wakeup feature: in-place requeue (the default, with remote
//! enqueues through the wakelist or under the lock), TTWU_QUEUE_DELAYED (the waker hands T to
//! worker 0's wakelist; the drain finishes the dequeue unless the pick did and selects a
//! CPU) and TTWU_DEQUEUE (the waker finishes the dequeue under the lock and takes the full
//! path). Afterwards T is queued exactly once, `RUNNING` and no longer delayed: requeued, or
//! dequeued and woken — never lost, never queued twice.
//!
//! `delayed_wakeup_during_block` runs the same race one step earlier, from T's own block on:
//! the waker may then find T queued as delayed while worker 0 is still switching away from
//! it (`sched_delayed` is published in `put_prev`, under the lock, before the switch), and
//! requeue it in place, or hand it to worker 0's wakelist, or finish its dequeue and wait for
//! (or queue behind) `on_cpu`.
//!
//! Mutants (each caught by `delayed_wakeup`; `mutants.sh` runs the whole file):
//! * `ttwu_runnable_no_recheck` drops `ttwu_runnable`'s re-check of `on_rq` under the lock:
//!   a waker that saw T queued, then lost the race for the lock to the pick, requeues an
//!   entity that has left the runqueue (in place and TTWU_DEQUEUE);
//! * `drain_delayed_no_recheck` makes the drain of a delayed wakeup assume T is still
//!   queued: when the pick finished the dequeue first, it is finished twice
//!   (TTWU_QUEUE_DELAYED);
//! * `finish_delayed_relaxed_on_rq` publishes the finished dequeue's `on_rq = false`
//!   without Release: a waker that reads it enqueues T elsewhere without seeing the entity
//!   the pick saved into T (NO_TTWU_QUEUE, where the waker enqueues under the target's lock).
#![cfg(loom)]

use lagom::model::{Model, Step};
use loom::sync::Arc;
use loom::thread;

const FEATURES: [&str; 4] = [
    "TTWU_QUEUE",
    "NO_TTWU_QUEUE",
    "TTWU_QUEUE_DELAYED",
    "TTWU_DEQUEUE",
];

/// T's time on worker 0 before it blocks, and U's after it (ns).
const MS: u64 = 1_000_000;

#[test]
fn delayed_wakeup() {
    for spec in FEATURES {
        loom_tests::claim_model(move || {
            // CPU selection may send T, which has run, to worker 1.
            // SAFETY: model tasks run no code of their own: nothing thread-local to break.
            let m = Arc::new(unsafe { Model::with_migration(2, spec) });
            let t = m.running_task(0);
            let u = m.queued_task(0);
            assert_eq!(m.prepare_park(&t), Step::Sleep);
            assert_eq!(
                m.schedule_at(&t, 0, 10 * MS),
                Some(u.id()),
                "[{spec}] U runs"
            );
            assert!(m.is_delayed(&t), "[{spec}] T, not eligible, sleeps delayed");
            assert_eq!(m.queued_count(&t), 1);

            let waker = {
                let (m, t) = (Arc::clone(&m), t.clone());
                thread::spawn(move || m.unpark(&t))
            };
            // Worker 0: U blocks too; the pick meets T's delayed entity (or T, requeued).
            assert_eq!(m.prepare_park(&u), Step::Sleep);
            let next = m.schedule_at(&u, 0, 20 * MS);
            waker.join().unwrap();
            m.drain_all();

            assert_eq!(
                m.queued_count(&t),
                1,
                "[{spec}] T must be queued exactly once (next on worker 0: {next:?})"
            );
            assert!(m.is_running_state(&t), "[{spec}] T queued but not RUNNING");
            assert!(!m.is_delayed(&t), "[{spec}] T woken but still delayed");
        });
    }
}

/// The same race one step earlier: the waker comes while T is still blocking — announcing
/// `BLOCKED`, being dequeued as delayed by `put_prev` (`sched_delayed` stored with Release
/// while T is still `on_cpu`) and switched away from — and worker 0 then runs U's
/// `schedule()` as above. T may also see the token and never sleep.
#[test]
fn delayed_wakeup_during_block() {
    for spec in FEATURES {
        loom_tests::claim_model(move || {
            // CPU selection may send T, which has run, to worker 1.
            // SAFETY: model tasks run no code of their own: nothing thread-local to break.
            let m = Arc::new(unsafe { Model::with_migration(2, spec) });
            let t = m.running_task(0);
            let u = m.queued_task(0);
            let waker = {
                let (m, t) = (Arc::clone(&m), t.clone());
                thread::spawn(move || m.unpark(&t))
            };
            let slept = loop {
                match m.prepare_park(&t) {
                    Step::Return => break false,
                    Step::Retry => continue,
                    Step::Sleep => break true,
                }
            };
            if slept {
                let next = m.schedule_at(&t, 0, 10 * MS);
                assert_eq!(next, Some(u.id()), "[{spec}] T blocked: U is picked");
                assert_eq!(m.prepare_park(&u), Step::Sleep);
                let _ = m.schedule_at(&u, 0, 20 * MS);
            }
            waker.join().unwrap();
            m.drain_all();
            assert_eq!(
                m.queued_count(&t),
                1,
                "[{spec}] T must be queued exactly once (it slept: {slept})"
            );
            assert!(m.is_running_state(&t), "[{spec}] T queued but not RUNNING");
            assert!(!m.is_delayed(&t), "[{spec}] T woken but still delayed");
        });
    }
}
