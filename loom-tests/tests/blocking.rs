//! Model 15, **the `spawn_blocking` hand-off**: the calling task C on worker 0
//! joins a blocking job (`BlockingHandle::join`'s real loop, `join_with`: `try_take`
//! registering C, then the real `park` loop over worker 0's real `schedule()` and idle loop,
//! `ModelWorker`), while a thread outside the workers plays the pool thread and runs the job
//! through the real `task::run_job` (the value's store, the packet's completion, the wakeup
//! of the joiner that registered).
//!
//! The race: the pool thread's completion and unpark against C's registration and park. C
//! gets the job's value whichever comes first, and a C that registered and slept is woken
//! (else worker 0 sleeps on its kick word forever: a loom deadlock); loom checks the
//! packet's cells for a happens-before edge between the job's writes and C's reads.
//!
//! Mutant `blocking_no_unpark` (`task/blocking.rs`): the job completes the packet but does
//! not wake the joiner it returned: a C that registered first sleeps forever.
#![cfg(loom)]

use lagom::model::Model;
use loom::sync::Arc;
use loom::thread;

/// The job's value.
const VALUE: u64 = 0xb10c;

#[test]
fn blocking_handoff() {
    loom_tests::claim_model(|| {
        let m = Arc::new(Model::new(1, ""));
        let c = m.queued_task(0);
        let w = m.worker(0);
        assert_eq!(w.idle_run().id(), c.id());
        let (job, h) = m.blocking_job::<u64>();
        let pool = thread::spawn(move || job.run(|| VALUE));
        let v = w.join_blocking(h, &c).expect("the job did not panic");
        assert_eq!(v, VALUE, "the value arrives intact");
        pool.join().unwrap();
        assert!(m.is_running_state(&c), "C runs");
        assert_eq!(m.queued_count(&c), 1, "C is queued once");
    });
}
