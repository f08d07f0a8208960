//! Model 17, **the balance tick pulling a task that is being woken**: worker 0
//! ran T, then U, which both blocked there (a runtime that opted in to migration: they have
//! run, and may still be moved), and now runs V. Under DELAY_DEQUEUE (the default) T and U
//! sleep queued as delayed, neither eligible (each ran 1 ms while V waited). A thread outside
//! the workers unparks T (`wake::unpark_task` → `try_to_wake_up`: the claim, then
//! `ttwu_runnable`, T being still queued: under the lock of the runqueue its `cpu` names, the
//! re-checks of `cpu` and `on_rq`, the requeue in place), while the model's main thread plays
//! worker 1 through the real code only (`ModelWorker`): its idle loop runs A, and A blocks in
//! the real `schedule()`, whose first steps are the timers and the balance tick
//! (`sched/balance.rs`'s `tick`: the periodic balance, which locks both runqueues and may
//! detach T from worker 0 before or after its wakeup has requeued it there), then the pick of
//! what it pulled.
//!
//! The balancer follows the kernel's `can_migrate_task` (`policy::can_migrate`): while no
//! attempt of worker 1 has failed, an entity that is not eligible stays where it is (worker 1
//! has A). So before the race worker 1 plays one earlier attempt, the real periodic balance
//! (`Model::periodic_balance`, what the tick runs, at 3 ms): it finds an imbalance (three
//! weights on worker 0, A's on worker 1) and nothing it may take (T and U not eligible, V
//! running), and fails (`nr_balance_failed` 1, asserted through `balance_failed`). The tick's
//! attempt (at the loom clock's 1 s, where nothing is cache hot) may then take an ineligible
//! task, and the balance cursor, resuming after the slots the first attempt examined, wraps
//! round to T's, the first: it pulls T, delayed or just requeued, and, the imbalance being
//! one weight, nothing else. The model asserts that it did (`balance_periodic` 1, U still on worker 0),
//! so a change in the balancer that stops it from pulling T fails the model instead of
//! leaving its race unexplored, as happened once (when `can_migrate` began to skip
//! ineligible tasks, the one tick the model then played pulled an eligible V).
//!
//! The race: the waker's requeue of T under worker 0's lock (and its `sched_delayed`,
//! `state` stores), or under worker 1's when it follows T there, against the balancer's
//! detach and attach under both locks (T's entity, handle and `cpu` change together) and
//! worker 1's pick, which finishes the delayed dequeue of a T pulled still delayed (the
//! waker then enqueues it afresh). Checked: T ends up runnable, not delayed, queued exactly
//! once and where its `cpu` says, and a worker 1 that picked a task picked T and runs it
//! (`on_cpu`); loom checks the task's cells (its entity and handle, moved between runqueues)
//! for happens-before edges.
//!
//! Mutants (`mutants.sh`; each fails both variants): `ttwu_runnable_no_cpu_recheck`
//! (`wake/runnable.rs`): the requeue in place trusts the `cpu` it read before taking that
//! runqueue's lock instead of re-checking it under the lock (O4), so where the balancer moved
//! T in between, the waker requeues T through worker 0's runqueue, which no longer holds it,
//! touching T's cells under the wrong lock (loom: concurrent writes to an `UnsafeCell`).
//! `ttwu_runnable_no_recheck`: the requeue without its re-check of `on_rq` under the lock,
//! so where worker 1's pick finished T's delayed dequeue after the waker's lock-free look,
//! the waker requeues a task that is no longer queued (it has no handle). Both are caught by
//! their own models too (`migrate`, `delayed`). `ttwu_no_claim` does not fail this model
//! (one waker). (No mutation of the balancer's own lines is named here: `sched/balance.rs`
//! and `lab/policy/src/balance.rs` were being rewritten on another branch when the model was
//! written; `balance_ignores_contract` in `contract.rs` covers its filter.)
//!
//! Run time at LOOM_MAX_PREEMPTIONS=2, `--release`: under 0.1 s for both variants.
#![cfg(loom)]

use lagom::model::{Model, Next, Step};
use loom::sync::Arc;
use loom::thread;

/// 1 ms in ns.
const MS: u64 = 1_000_000;

fn balance_against_wakeup(spec: &'static str) {
    loom_tests::claim_model(move || {
        // SAFETY: model tasks run no code of their own (`Model::with_migration`).
        let m = Arc::new(unsafe { Model::with_migration(2, spec) });
        // Worker 0 ran T, then U, which both blocked there; it now runs V.
        let t = m.running_task(0);
        let u = m.queued_task(0);
        let v = m.queued_task(0);
        let a = m.queued_task(1);
        assert_eq!(m.prepare_park(&t), Step::Sleep);
        assert_eq!(m.schedule_at(&t, 0, MS), Some(u.id()));
        assert_eq!(m.prepare_park(&u), Step::Sleep);
        assert_eq!(m.schedule_at(&u, 0, 2 * MS), Some(v.id()));
        assert!(
            m.is_delayed(&t) && m.is_delayed(&u),
            "[{spec}] T and U sleep delayed"
        );
        // Worker 1's earlier balance attempt: an imbalance (three weights against one) with
        // nothing it may take (T and U are not eligible and no attempt has failed yet; V
        // runs), which fails and so lets the next attempt take them.
        assert_eq!(
            m.periodic_balance(1, 3 * MS),
            0,
            "[{spec}] the first attempt pulled"
        );
        assert_eq!(
            m.stats(1).balance_failed,
            1,
            "[{spec}] the first attempt did not fail"
        );
        let waker = {
            let (m, t) = (Arc::clone(&m), t.clone());
            thread::spawn(move || m.unpark(&t))
        };
        // Worker 1 runs A, which then blocks: the tick balances before the pick (every
        // domain level made due: `balance_due`).
        let w1 = m.worker(1);
        w1.balance_due();
        assert_eq!(w1.idle_run().id(), a.id());
        assert_eq!(m.prepare_park(&a), Step::Sleep);
        let next = w1.block();
        waker.join().unwrap();
        m.drain_all();
        // The tick pulled one task, and not U: T (V runs on worker 0, never a candidate).
        assert_eq!(
            m.stats(1).balance_periodic,
            1,
            "[{spec}] the tick did not pull (the race is not explored)"
        );
        assert_eq!(
            m.whereabouts(&u),
            (vec![0], 0),
            "[{spec}] the tick pulled U"
        );
        if let Next::Task(n) = &next {
            assert_eq!(n.id(), t.id(), "[{spec}] worker 1 picked other than T");
            assert!(m.is_on_cpu(n), "[{spec}] picked but not on_cpu");
            assert_eq!(
                m.whereabouts(n),
                (vec![1], 1),
                "[{spec}] picked off worker 1"
            );
        }
        let (on, cpu) = m.whereabouts(&t);
        assert_eq!(on, vec![cpu], "[{spec}] T queued once, where its cpu says");
        assert!(m.is_running_state(&t), "[{spec}] T is runnable");
        assert_eq!(m.queued_count(&t), 1, "[{spec}] T queued other than once");
        assert!(!m.is_delayed(&t), "[{spec}] T woken but still delayed");
    });
}

#[test]
fn balance_against_wakeup_locked() {
    balance_against_wakeup("NO_TTWU_QUEUE");
}

#[test]
fn balance_against_wakeup_wakelist() {
    balance_against_wakeup("TTWU_QUEUE");
}
