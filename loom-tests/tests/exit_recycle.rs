//! Model 13, **an exit against its joiner and the recycle of its allocation**,
//! over the real exit, switch-out, join and spawn paths. The task T is spawned from outside
//! the workers by the real spawn (`task::spawn_inner`: a real fiber and stack, the registry's
//! foreign part, CPU selection) onto idle worker 1, while worker 0 runs the joiner J. Two
//! loom threads play the workers through the real code only (`ModelWorker`):
//!
//! * worker 1 runs its idle loop into T, and T ends: the real exit hook (`sched::exit_on`:
//!   the dequeue, the outcome's delivery and J's wakeup under the runqueue lock, the pick of
//!   the idle task), the switch (played: the dead task's save), and the real
//!   `finish_task_switch` on the idle context: T's `on_cpu` cleared, then `put_dead` takes
//!   the fiber out, gives the stack to the pool and drops the registry's reference;
//! * worker 0 runs J's `JoinHandle::join` (the real `join_with` loop: `try_take`, the real
//!   `park` loop over `schedule()` and the idle loop), whose end recycles T's allocation
//!   into worker 0's spare when J's reference is the last one, and then J spawns again (the
//!   real spawn from worker 0), which takes that spare and builds the new task U in T's
//!   memory.
//!
//! The race: J's recycle may run as soon as the registry's reference is gone, so every write
//! of the exiting worker to T must come before that drop; J must get T's value and be woken
//! if it slept. loom checks every access to the task's cells (its scheduling part above all)
//! for a happens-before edge: a write by worker 1 to T after J recycled it lands in U, which
//! worker 0 built and enqueued, with no edge between them.
//!
//! Mutant `recycle_no_unique_check` (`task/recycle.rs`): the join recycles the task without
//! checking that its reference is the last one, so U is built in T's memory while worker 1
//! is still exiting T; loom reports worker 1's write to "T's" scheduling part, which is now
//! U's, as concurrent with worker 0's.
//!
//! Not caught, and why: a reordering inside `put_dead` that drops the registry's reference
//! before a later write to the task (the review's "frees a task before its last write to
//! it"; tried as the fiber's take moved after the drop) is caught here only where J has
//! recycled the allocation first. Where J dropped its own reference first, the exiting
//! worker frees T itself and then writes freed memory: loom does not model the standard
//! `Arc` that owns a task, so that use-after-free is no loom report but a crash (this model
//! died of SIGSEGV under that mutation), which `mutants.sh` does not count as caught. The
//! order is stated where it is kept: `put_dead`'s last line, and the invariant in
//! `sched/exit.rs`'s module doc.
//!
//! Mutant `put_dead_before_clear_on_cpu` (`sched/schedule.rs`): `finish_task_switch` frees
//! the dead task before it clears the task's `on_cpu`, a write after the free. Loom cannot see
//! the free, but `put_dead` checks that the task it frees is off every CPU
//! (`Task::check_freeable`, on under loom and in debug builds), which fails here; memcheck
//! reports the write itself in the threaded runtime (`.ci/memcheck.sh`).
//!
//! Bound: `LOOM_MAX_PREEMPTIONS` (two in CI), although J's wakeup by the exit is a waker's
//! claim, which the other models of a claim explore with at least three
//! (`loom_tests::claim_model`): that wakeup's race is `exit_wake`'s, which runs at three,
//! while this model's is the free and the recycle after it, and its mutants are caught at
//! two; at three it would be the longest model of CI's loom step by far (its times are on
//! the book's page of the checks' figures).
#![cfg(loom)]

use lagom::model::Model;
use loom::sync::Arc;
use loom::thread;

/// The value T returns.
const VALUE: u64 = 0x5eed;

/// Where T comes from: spawned from outside the workers (a foreign slot: the exiting worker
/// frees it) or by J on worker 0 (an own slot of worker 0: the exiting worker hands it to
/// worker 0's dead list, and worker 0's idle loop reaps it while J sleeps in its join).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spawner {
    Outside,
    Joiner,
}

fn exit_recycle(spawner: Spawner) {
    loom::model(move || {
        let m = Arc::new(Model::new(2, ""));
        // Worker 0 (this thread) runs J.
        let j = m.queued_task(0);
        let w0 = m.worker(0);
        // The balancer is not this model's race (`balance_wake` has it).
        w0.balance_not_due();
        let ran = w0.idle_run();
        assert_eq!(ran.id(), j.id());
        drop(ran);
        // T lands on the idle worker 1.
        let (h, value) = match spawner {
            Spawner::Outside => m.spawn::<u64>(),
            Spawner::Joiner => w0.spawn::<u64>(),
        };
        {
            let t = m.task_of(&h);
            // Queued there, or on its wakelist (a new task's remote enqueue).
            assert_eq!(m.whereabouts(&t).1, 1, "T is placed on idle worker 1");
        }
        let t_id = h.id();
        let w1 = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let w1 = m.worker(1);
                w1.balance_not_due();
                let t = w1.idle_run();
                assert_eq!(t.id(), t_id, "worker 1 runs T");
                drop(t);
                // Worker 1 switches to its idle task, or to U if J spawned it here already.
                let _next = w1.exit(value, VALUE);
            })
        };
        let v = w0.join(h, &j).expect("T did not panic");
        assert_eq!(v, VALUE, "the value arrives intact");
        if spawner == Spawner::Joiner {
            // The reap and J's recycle both ran on worker 0's thread; the recycle's race with
            // an exiting worker is the other variant's (fewer executions this way).
            w1.join().unwrap();
            return;
        }
        // J spawns again: the spawn takes the spare T's join may have left.
        let (u, _) = w0.spawn::<u64>();
        w1.join().unwrap();
        // U may wait on a wakelist (a new task's remote enqueue).
        m.drain_all();
        assert_eq!(m.queued_count(&m.task_of(&u)), 1, "U is queued once");
    });
}

#[test]
fn exit_recycle_spawned_outside() {
    exit_recycle(Spawner::Outside);
}

#[test]
fn exit_recycle_spawned_by_joiner() {
    exit_recycle(Spawner::Joiner);
}
