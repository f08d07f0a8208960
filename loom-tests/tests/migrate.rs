//! Model 7, **migration chase**: a wakeup aimed at worker 0 for a task that the
//! periodic load balance of worker 1 moves away from worker 0 at the same time must be
//! delivered where the task is, never on the runqueue it left.
//! Over the real code: `try_to_wake_up` (`wake/ttwu.rs`), the balancer's `periodic_balance`
//! (`sched/balance.rs`) and the wakelist drain (`wake/queue.rs`).
//!
//! Setup (before the race): on worker 0, task T runs beside a queued task U, is charged
//! 10 ms and blocks; not eligible, it stays queued as delayed, and U runs. Worker 0's load
//! is two nice-0 weights, worker 1's is zero: the periodic balance of worker 1 may pull T
//! (only the periodic balancer moves delayed tasks; U is running and stays).
//!
//! The race, three threads: a waker unparks T from outside the workers; worker 1 runs its
//! periodic balance (both runqueue locks; T's entity, handle and `cpu` change together);
//! worker 0 drains its wakelist. Then every worker drains twice (a forwarded entry may hop
//! once more). Afterwards T is queued exactly once, on the runqueue of the worker its `cpu`
//! names, `RUNNING` and no longer delayed.
//!
//! Under TTWU_QUEUE_DELAYED the waker hands T to the wakelist of the worker its `cpu` named
//! when it looked; if the balancer moved T meanwhile, the drain of that worker finds `cpu`
//! changed under its lock and forwards the entry (the chase). Under the default (in-place
//! requeue) the waker locks the runqueue of the `cpu` it read and re-checks `cpu` under the
//! lock, retrying on the new worker (O4).
//!
//! Mutants (each caught here; `mutants.sh`):
//! * `drain_no_chase` makes the drain assume the delayed task is still its own: it finishes
//!   the dequeue of T's handle on worker 0's runqueue while T sits on worker 1's — the
//!   handle names another entity there or none (TTWU_QUEUE_DELAYED);
//! * `ttwu_runnable_no_cpu_recheck` drops O4's re-check of `cpu` under the lock: the waker
//!   requeues T's handle on the runqueue T just left (the default features).
//!
//! `migration_chase_new_owner_picks` adds the new owner's pick, concurrent with the old
//! owner's drain (mutant `drain_delayed_no_recheck`).
//!
//! Run time at LOOM_MAX_PREEMPTIONS=2 (CI's bound), `--release`: about 0.2 s for both tests.
#![cfg(loom)]

use lagom::model::{Model, Step};
use loom::sync::Arc;
use loom::thread;

const MS: u64 = 1_000_000;

const FEATURES: [&str; 2] = ["TTWU_QUEUE_DELAYED", "TTWU_QUEUE"];

#[test]
fn migration_chase() {
    for spec in FEATURES {
        loom_tests::claim_model(move || {
            // The balancer moves T, which has run (the chase needs it).
            // SAFETY: model tasks run no code of their own: nothing thread-local to break.
            let m = Arc::new(unsafe { Model::with_migration(2, spec) });
            let t = m.running_task(0);
            let u = m.queued_task(0);
            assert_eq!(m.prepare_park(&t), Step::Sleep);
            assert_eq!(m.schedule_at(&t, 0, 10 * MS), Some(u.id()));
            assert!(m.is_delayed(&t), "[{spec}] T, not eligible, sleeps delayed");

            let waker = {
                let (m, t) = (Arc::clone(&m), t.clone());
                thread::spawn(move || m.unpark(&t))
            };
            let balancer = {
                let m = Arc::clone(&m);
                thread::spawn(move || m.periodic_balance(1, 11 * MS))
            };
            m.drain(0, 12 * MS);
            waker.join().unwrap();
            let pulled = balancer.join().unwrap();
            m.drain_all();
            m.drain_all();

            let (on, cpu) = m.whereabouts(&t);
            assert_eq!(
                on,
                [cpu],
                "[{spec}] T must be queued once, where its cpu says (balancer pulled {pulled})"
            );
            assert_eq!(m.queued_count(&t), 1, "[{spec}] T queued once");
            assert!(m.is_running_state(&t), "[{spec}] T queued but not RUNNING");
            assert!(!m.is_delayed(&t), "[{spec}] T woken but still delayed");
            let (u_on, _) = m.whereabouts(&u);
            assert_eq!(u_on, [0], "[{spec}] U, running, never moves");
        });
    }
}

/// The chase with the new owner picking: worker 1's balancer pulls the delayed T
/// and worker 1 then drains and picks at once (`Model::switch_in`), concurrently with the
/// waker and with worker 0's drain of the wakeup the waker queued there (TTWU_QUEUE_DELAYED).
/// Worker 1's pick may finish T's delayed dequeue (T alone there) under worker 1's lock while
/// worker 0's drain, under its own lock, holds the wakeup the waker queued before the move:
/// the drain must see that T is no longer queued and not finish a dequeue that happened
/// elsewhere. Afterwards T is queued exactly once, where its `cpu` names, `RUNNING`; if
/// worker 1 picked it, it runs there. Mutant `drain_delayed_no_recheck` (the drain assumes
/// the delayed task still queued): it finishes T's dequeue again, on a runqueue that does not
/// hold it.
#[test]
fn migration_chase_new_owner_picks() {
    loom_tests::claim_model(|| {
        // SAFETY: model tasks run no code of their own: nothing thread-local to break.
        let m = Arc::new(unsafe { Model::with_migration(2, "TTWU_QUEUE_DELAYED") });
        let t = m.running_task(0);
        let u = m.queued_task(0);
        assert_eq!(m.prepare_park(&t), Step::Sleep);
        assert_eq!(m.schedule_at(&t, 0, 10 * MS), Some(u.id()));
        assert!(m.is_delayed(&t), "T, not eligible, sleeps delayed");
        let waker = {
            let (m, t) = (Arc::clone(&m), t.clone());
            thread::spawn(move || m.unpark(&t))
        };
        let worker1 = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let pulled = m.periodic_balance(1, 11 * MS);
                (pulled, m.switch_in(1, 12 * MS).map(|n| n.id()))
            })
        };
        m.drain(0, 12 * MS);
        waker.join().unwrap();
        let (pulled, ran) = worker1.join().unwrap();
        m.drain_all();
        m.drain_all();
        let (on, cpu) = m.whereabouts(&t);
        assert_eq!(
            on,
            [cpu],
            "T queued once, where its cpu says (pulled {pulled})"
        );
        assert!(m.is_running_state(&t), "T queued but not RUNNING");
        assert!(!m.is_delayed(&t), "T woken but still delayed");
        if ran == Some(t.id()) {
            assert_eq!(cpu, 1, "worker 1 runs T");
            assert!(m.is_on_cpu(&t), "T runs on worker 1");
        }
    });
}

/// The chase without the race, in the order that needs it: the waker queues T on worker 0,
/// then the balancer moves T to worker 1, then worker 0 drains and must forward T.
#[test]
fn migration_chase_in_order() {
    loom_tests::claim_model(|| {
        // The balancer moves T, which has run (the chase needs it).
        // SAFETY: model tasks run no code of their own: nothing thread-local to break.
        let m = unsafe { Model::with_migration(2, "TTWU_QUEUE_DELAYED") };
        let t = m.running_task(0);
        let u = m.queued_task(0);
        assert_eq!(m.prepare_park(&t), Step::Sleep);
        assert_eq!(m.schedule_at(&t, 0, 10 * MS), Some(u.id()));
        m.unpark(&t);
        assert_eq!(m.periodic_balance(1, 11 * MS), 1, "the delayed T moves");
        assert_eq!(m.whereabouts(&t), (vec![1], 1));
        assert!(m.is_delayed(&t), "T moved still delayed");
        m.drain(0, 12 * MS);
        m.drain(1, 12 * MS);
        let (on, cpu) = m.whereabouts(&t);
        assert_eq!(on, [cpu], "T queued once, where its cpu says");
        assert!(m.is_running_state(&t) && !m.is_delayed(&t), "T woken");
    });
}

/// Executions of `migration_chase_busy_new_owner` in which worker 0's drain activated T
/// itself after worker 1 had finished T's dequeue (the shape the model exists for).
static TAKEN_BACK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The chase where the **old owner activates the task itself**: worker 1's
/// balancer pulls the delayed T and worker 1's pick finishes T's dequeue there (T alone), and
/// then worker 1 gets work of its own (a task V queued there), so that worker 0's drain of
/// the wakeup the waker queued before the move finds T off every runqueue and, with both
/// workers busy, CPU selection keeps T on worker 0: the drain activates it locally. The
/// activation reads T's entity, which worker 1's pick stored under worker 1's lock alone;
/// only the drain's Acquire load of `on_rq` (false, stored with Release after the entity)
/// orders that read after the store. In `migration_chase_new_owner_picks` worker 1 is idle
/// after its pick, so selection always forwards T there and the drain never activates it
/// (worker 1's own drain then reads what it stored itself).
///
/// Afterwards T is queued once, where its `cpu` says. Mutants: `drain_on_rq_relaxed` (the
/// drain's `on_rq` load Relaxed: loom reports the entity read racing with the pick's store)
/// and `drain_takeback_stale_cpu` (T activated on worker 0 with `cpu` still naming worker 1,
/// a bug this model found: a later wakeup would requeue T's handle on worker 1's runqueue).
/// After the model, it checks that some execution took T back (`TAKEN_BACK`), so that a
/// change of CPU selection that forwards T again fails here rather than emptying the race.
#[test]
fn migration_chase_busy_new_owner() {
    TAKEN_BACK.store(0, std::sync::atomic::Ordering::Relaxed);
    loom_tests::claim_model(|| {
        // SAFETY: model tasks run no code of their own: nothing thread-local to break.
        let m = Arc::new(unsafe { Model::with_migration(2, "TTWU_QUEUE_DELAYED") });
        let t = m.running_task(0);
        let u = m.queued_task(0);
        assert_eq!(m.prepare_park(&t), Step::Sleep);
        assert_eq!(m.schedule_at(&t, 0, 10 * MS), Some(u.id()));
        assert!(m.is_delayed(&t), "T, not eligible, sleeps delayed");
        let waker = {
            let (m, t) = (Arc::clone(&m), t.clone());
            thread::spawn(move || m.unpark(&t))
        };
        let worker1 = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let pulled = m.periodic_balance(1, 11 * MS);
                let ran = m.switch_in(1, 12 * MS).map(|n| n.id());
                // Worker 1 is busy from here on.
                let v = m.queued_task(1);
                (pulled, ran, v)
            })
        };
        m.drain(0, 13 * MS);
        let queued_here = m.whereabouts(&t).0 == [0];
        waker.join().unwrap();
        let (pulled, ran, _v) = worker1.join().unwrap();
        let finished_on_1 = pulled == 1 && ran.is_none() && m.stats(1).delayed_finished == 1;
        m.drain_all();
        m.drain_all();
        let (on, cpu) = m.whereabouts(&t);
        assert_eq!(
            on,
            [cpu],
            "T queued once, where its cpu says (pulled {pulled}, worker 1 ran {ran:?})"
        );
        assert_eq!(m.queued_count(&t), 1, "T queued once");
        assert!(m.is_running_state(&t), "T queued but not RUNNING");
        assert!(!m.is_delayed(&t), "T woken but still delayed");
        if finished_on_1 && queued_here {
            TAKEN_BACK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert!(
        TAKEN_BACK.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "no execution had worker 0's drain take back T after worker 1 finished its dequeue"
    );
}
