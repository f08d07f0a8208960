//! Model 11, **an idle worker on its real kick word**: worker 1 runs its real
//! idle loop (`Model::idle_run`: `sched/idle.rs`'s round — drain and pick under the runqueue
//! lock, the registry reap, the newly idle balance, the `has_work` re-check and the sleep in
//! `Kick::idle_wait` on the worker's own kick word) against a thread outside the workers that
//! unparks a task blocked on worker 1 (`wake::unpark_task` → `try_to_wake_up` → select →
//! `ttwu_queue`): with TTWU_QUEUE a wakelist push and a kick, without it an enqueue under
//! worker 1's lock (publishing `nr_running`) and a kick.
//!
//! The race: the worker's "pick found nothing, publish idle, re-check" against the waker's
//! "publish the work, look at the kick word". Whatever the interleaving the worker must end
//! up running the task; a wakeup that only the idle sleep's timeout would rescue is lost
//! (under loom the futex stand-in has no timeout: the worker sleeps forever, and loom reports
//! the deadlock when the model joins it).
//!
//! Mutants: `ttwu_queue_no_kick` (the wakelist push without its kick) and
//! `idle_recheck_no_wakelist` (the idle re-check blind to the wakelist) break the TTWU_QUEUE
//! case; `remote_enqueue_no_kick` (the locked remote enqueue without its kick) and
//! `idle_recheck_no_nr_running` (the re-check blind to the runqueue count) the other.
#![cfg(loom)]

use lagom::model::{Model, Step};
use loom::sync::Arc;
use loom::thread;

fn idle_worker_runs_the_woken_task(spec: &'static str) {
    loom_tests::claim_model(move || {
        let m = Arc::new(Model::new(2, spec));
        // The task ran on worker 1 and blocked there; worker 1 then has nothing to run.
        let t = m.running_task(1);
        assert_eq!(m.prepare_park(&t), Step::Sleep);
        assert_eq!(m.schedule_at(&t, 1, 1), None);
        let worker = {
            let m = Arc::clone(&m);
            thread::spawn(move || m.idle_run(1))
        };
        m.unpark(&t);
        let ran = worker.join().unwrap();
        assert_eq!(
            ran.id(),
            t.id(),
            "[{spec}] the idle worker ran another task"
        );
        assert!(m.is_on_cpu(&t), "[{spec}] picked but not on_cpu");
        assert_eq!(m.queued_count(&t), 1, "[{spec}] queued other than once");
    });
}

#[test]
fn idle_worker_wakelist_push() {
    idle_worker_runs_the_woken_task("TTWU_QUEUE");
}

#[test]
fn idle_worker_locked_remote_enqueue() {
    idle_worker_runs_the_woken_task("NO_TTWU_QUEUE");
}
