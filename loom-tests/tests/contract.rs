//! Model 10, **the migration contract**: under the runtime's default, a task that has run is
//! woken, requeued and balanced only on the worker it last ran on, whatever the race; a task
//! that has not run yet is still balanced freely. Over the real code: `try_to_wake_up`
//! (`wake/ttwu.rs`) and its CPU selection (`wake/select.rs`), the wakelist drain's
//! reselection of a delayed wakee (`wake/queue.rs`), the periodic balance
//! (`sched/balance.rs`) and the switch-in (`sched::prepare_switch`, which panics under loom if
//! a task that may not migrate is switched in on another worker).
//!
//! * `pinned_wakeup_busy`: the race of `on_cpu.rs`'s `on_cpu_handoff_busy` without the opt-in.
//!   T blocks on worker A beside a queued task U; a waker from outside wakes it while A
//!   switches to U and U blocks, and worker B looks for work. With the opt-in the waker,
//!   finding A busy, sends T to B; here T must end queued on A, and B must never pick it.
//! * `pinned_delayed_wakeup`: the race of `migrate.rs` without the opt-in. T sleeps delayed
//!   on worker 0 beside the running U; a waker unparks it while worker 1's periodic balance
//!   looks for load to pull and worker 0 drains. Under every delayed-wakeup feature (the
//!   in-place requeue, TTWU_QUEUE_DELAYED's reselection in the drain, TTWU_DEQUEUE's full
//!   path) T must end queued on worker 0, and the balancer must pull nothing (U runs, T has
//!   run).
//! * `never_ran_is_balanced`: placement stays free before a task first runs: worker 1's
//!   periodic balance pulls a task that is queued on worker 0 but was never switched in, and
//!   worker 1 then switches it in.
//!
//! Mutants (`mutants.sh`):
//! * `select_ignores_contract` lets CPU selection treat every woken task as free to move:
//!   `pinned_wakeup_busy` sees B switch T in (the switch-in check) or T queued on B, and
//!   `pinned_delayed_wakeup` sees T sent to worker 1 (TTWU_QUEUE_DELAYED, TTWU_DEQUEUE);
//! * `balance_ignores_contract` lets the balancer pull a task that has run:
//!   `pinned_delayed_wakeup` sees T pulled to worker 1.
#![cfg(loom)]

use lagom::model::{Model, Next, Step};
use loom::sync::Arc;
use loom::thread;

/// The worker the tasks block on.
const A: usize = 0;
/// The other worker.
const B: usize = 1;
const MS: u64 = 1_000_000;

#[test]
fn pinned_wakeup_busy() {
    for spec in [
        "TTWU_QUEUE,TTWU_QUEUE_ON_CPU",
        "NO_TTWU_QUEUE,TTWU_QUEUE_ON_CPU",
        "TTWU_QUEUE,NO_TTWU_QUEUE_ON_CPU",
        "NO_TTWU_QUEUE,NO_TTWU_QUEUE_ON_CPU",
    ] {
        loom_tests::claim_model(move || {
            let m = Arc::new(Model::new(2, spec));
            let t = m.running_task(A);
            let u = m.queued_task(A);
            assert_eq!(m.prepare_park(&t), Step::Sleep);
            let waker = {
                let (m, t) = (Arc::clone(&m), t.clone());
                thread::spawn(move || m.try_to_wake_up(&t))
            };
            let b = {
                let m = Arc::clone(&m);
                thread::spawn(move || m.switch_in(B, 0).map(|n| n.id()))
            };
            // Worker A: T's schedule(), the switch to U; U blocks, U's schedule().
            let mut t_ran = false;
            match m.schedule_prev(&t, A, 0) {
                Next::Same => t_ran = true,
                Next::Idle => panic!("[{spec}] A has U queued, yet picked nothing"),
                Next::Task(n) => {
                    assert_eq!(n.id(), u.id(), "[{spec}] A must pick U");
                    m.switch(&t, Some(&n));
                    m.finish_task_switch(&t);
                    assert_eq!(m.prepare_park(&u), Step::Sleep);
                    match m.schedule_prev(&u, A, 0) {
                        Next::Same => panic!("[{spec}] nobody wakes U"),
                        Next::Idle => {
                            m.switch(&u, None);
                            m.finish_task_switch(&u);
                        }
                        Next::Task(n) => {
                            assert_eq!(n.id(), t.id(), "[{spec}] A must pick T");
                            m.switch(&u, Some(&n));
                            m.finish_task_switch(&u);
                            t_ran = true;
                        }
                    }
                }
            }
            waker.join().unwrap();
            assert_eq!(
                b.join().unwrap(),
                None,
                "[{spec}] B must not pick T, which last ran on A"
            );
            m.drain_all();
            if !t_ran {
                assert_eq!(m.switch_in(B, 0).map(|n| n.id()), None, "[{spec}] B picked");
                assert_eq!(m.switch_in(A, 0).map(|n| n.id()), Some(t.id()), "[{spec}]");
            }
            assert_eq!(
                m.whereabouts(&t),
                (vec![A], A),
                "[{spec}] T must be queued on A, where it last ran"
            );
            assert!(m.is_running_state(&t), "[{spec}] T queued but not RUNNING");
        });
    }
}

#[test]
fn pinned_delayed_wakeup() {
    for spec in [
        "TTWU_QUEUE",
        "NO_TTWU_QUEUE",
        "TTWU_QUEUE_DELAYED",
        "TTWU_DEQUEUE",
    ] {
        loom_tests::claim_model(move || {
            let m = Arc::new(Model::new(2, spec));
            let t = m.running_task(A);
            let u = m.queued_task(A);
            assert_eq!(m.prepare_park(&t), Step::Sleep);
            assert_eq!(m.schedule_at(&t, A, 10 * MS), Some(u.id()));
            assert!(m.is_delayed(&t), "[{spec}] T, not eligible, sleeps delayed");

            let waker = {
                let (m, t) = (Arc::clone(&m), t.clone());
                thread::spawn(move || m.unpark(&t))
            };
            let balancer = {
                let m = Arc::clone(&m);
                thread::spawn(move || m.periodic_balance(B, 11 * MS))
            };
            m.drain(A, 12 * MS);
            waker.join().unwrap();
            let pulled = balancer.join().unwrap();
            m.drain_all();
            m.drain_all();

            assert_eq!(pulled, 0, "[{spec}] U runs and T has run: nothing may move");
            assert_eq!(
                m.whereabouts(&t),
                (vec![A], A),
                "[{spec}] T must be queued on worker 0, where it last ran"
            );
            assert!(m.is_running_state(&t), "[{spec}] T queued but not RUNNING");
            assert!(!m.is_delayed(&t), "[{spec}] T woken but still delayed");
        });
    }
}

#[test]
fn never_ran_is_balanced() {
    loom_tests::claim_model(|| {
        let m = Model::new(2, "");
        let _t = m.running_task(A);
        let n = m.queued_task(A);
        assert_eq!(m.periodic_balance(B, MS), 1, "N, never run, may move");
        assert_eq!(m.whereabouts(&n), (vec![B], B));
        assert_eq!(m.switch_in(B, 2 * MS).map(|x| x.id()), Some(n.id()));
    });
}
