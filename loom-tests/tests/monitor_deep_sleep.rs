//! Model 18, **the stall monitor's deep sleep against a waking worker**: once
//! every worker has been idle for a while, the monitor sleeps without a timeout
//! (`Model::monitor_deep_sleep`: the real `sched::monitor::deep_sleep` — store `DEEP`, fence,
//! look at every kick word, sleep on its futex only if all still read idle). Worker 0 runs
//! its real idle loop (`Model::idle_run`: `sched/idle.rs`'s round, its `Kick::idle_wait`, and
//! the monitor's wake-up when it leaves the wait, `sched::monitor::worker_active`) while a
//! thread outside the workers unparks a task blocked there.
//!
//! The race: the monitor's "store DEEP, look at the kick words" against the worker's "kick
//! word back to active, look at the monitor's word" — a store-buffering handshake. Whatever
//! the interleaving, once the worker has left its idle wait to run the task the monitor must
//! not be asleep for good: it would then report no stall of that worker, ever. Under loom the
//! futex stand-in has no timeout, so a monitor left asleep is a deadlock when the model joins
//! it. Both ways the worker leaves its wait are covered: woken from its sleep, and its
//! re-check after publishing idle finding the task (it never slept, but the monitor may have
//! seen it idle).
//!
//! Mutants: `monitor_wake_no_fence` drops the worker's fence between its kick word and its
//! look at the monitor's word; `monitor_deep_no_recheck` makes the monitor sleep without
//! looking at the kick words after storing `DEEP`.
#![cfg(loom)]

use lagom::model::{Model, Step};
use loom::sync::Arc;
use loom::thread;

#[test]
fn monitor_deep_sleep_sees_a_waking_worker() {
    loom_tests::claim_model(|| {
        let m = Arc::new(Model::new(1, "TTWU_QUEUE"));
        // The task ran on worker 0 and blocked there; worker 0 then has nothing to run.
        let t = m.running_task(0);
        assert_eq!(m.prepare_park(&t), Step::Sleep);
        assert_eq!(m.schedule_at(&t, 0, 1), None);
        let worker = {
            let m = Arc::clone(&m);
            thread::spawn(move || m.idle_run(0))
        };
        let monitor = {
            let m = Arc::clone(&m);
            thread::spawn(move || m.monitor_deep_sleep())
        };
        m.unpark(&t);
        let ran = worker.join().unwrap();
        assert_eq!(ran.id(), t.id(), "the idle worker ran another task");
        // Worker 0 now runs the task: a monitor asleep for good would be a deadlock here.
        let _slept: bool = monitor.join().unwrap();
    });
}
