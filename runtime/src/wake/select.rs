//! CPU selection for a wakeup or a spawn: the policy's `select_task_rq`
//! (`lagom_policy`'s `select.rs`: wake_affine, select_idle_sibling, WF_FORK's idlest CPU) over the
//! workers' published runnable counts and wakelists and the runtime's `CpuMap` (its domains
//! and priorities, built by `lagom_topology::layout`), under the migration contract.
//!
//! ## The migration contract
//!
//! Invariant: *a task that has started running resumes only on the worker thread it last ran
//! on, unless it may migrate (`Task::migratable`, the `unsafe` opt-in of its runtime or its
//! builder).*
//!
//! Safe Rust lets a task keep what its OS thread hands out across a blocking call — a
//! reference into a `thread_local!`, an `Rc` to thread-local state (`rand::thread_rng()`),
//! a `MutexGuard` that must be unlocked by the thread that locked it — and lets the compiler
//! keep a thread-local's address in a register across a call that switched stacks. Resumed
//! on another worker, such a task would read and write the other thread's storage while
//! that thread runs another task: undefined behaviour from safe code. So the default keeps a
//! started task on its thread; what the opt-in buys is the kernel's freedom (wakeup
//! placement, balancing of started tasks) for tasks whose code promises not to need it
//! (`Builder::allow_migration`'s `# Safety`).
//!
//! The decision is the policy's, told what it may choose from: a task that may not move is
//! given an affinity of one CPU, the one it last ran on, so `select_task_rq` returns it and
//! `can_migrate` refuses it (`sched/balance.rs`). Placement stays free for what has not run:
//! a spawn, and the balancing of a queued task that was never switched in. Every path that
//! picks a CPU for a started task goes through here or through the balancer:
//!
//! * the full wakeup (`wake/ttwu.rs`, from a task, a timer, the exit of a joinee or an outside
//!   thread), including a delayed wakee that TTWU_DEQUEUE or DELAYED_WAKE_IDLE dequeued
//!   first (`wake/runnable.rs`: DELAYED_WAKE_IDLE dequeues only a task that may move);
//! * the TTWU_QUEUE_DELAYED drain's reselection (`wake/queue.rs`);
//! * ITMT active balance, whose request (`sched/balance.rs`) is honoured here, at the next
//!   placement of a task that last ran on the requested worker — lagom cannot move a running
//!   task, so "at its next schedule point" is its next block and wakeup;
//! * newly idle and periodic balance (`sched/balance.rs`);
//!
//! and the requeue in place, the TTWU_QUEUE_ON_CPU hand-off and the chase of a moved task
//! keep the worker the task is on. A pinned started task's `cpu` is the worker it last ran
//! on: it is set there when the task is first switched in and no path changes it afterwards,
//! so `prev` (its `cpu`) is the worker to keep it on. `sched::prepare_switch`, where every
//! resume begins, checks the invariant at no cost on the usual path (it compares the worker
//! with the one the task last ran on anyway) and aborts the process if it ever broke.
//!
//! Loom model 10 (`loom-tests/tests/contract.rs`) races wakers, the balancer and the drain
//! under the contract (mutants `select_ignores_contract`, `balance_ignores_contract`); the
//! other models of cross-worker races opt in, as the runtime's lab does.

use crate::locking::atomic::Ordering;
use crate::worker::{Shared, Task, TaskRef, WorkerThread};
use lagom_policy::{CpuView, Placement, WakeCtx, WakeFlags, WakeeState, select_task_rq};

/// What CPU selection reads of worker `i`: its published runnable count and load and
/// whether its wakelist is empty, as `CpuView::of` (the policy's rule, shared with the
/// simulator) combines them.
pub(crate) fn cpu_view(shared: &Shared, i: usize) -> CpuView {
    let w = &shared.workers[i];
    CpuView::of(
        w.nr_running.load(Ordering::Relaxed),
        w.load.load(Ordering::Relaxed),
        !w.wakelist.is_empty(),
    )
}

/// The task running on worker thread `wt` (the waker task of a wakeup made there), if any.
fn running_task(wt: &WorkerThread) -> Option<&Task> {
    let t = wt.curr.get();
    // SAFETY: the running task is kept alive by its registry while it runs, and it runs
    // until this worker switches away from it, which it does not do inside a wakeup it
    // makes (the caller's) nor inside a schedule point's drain before its switch.
    (!t.is_null()).then(|| unsafe { &*t })
}

/// `select_task_rq` (`lagom_policy`'s `select.rs`) over the workers' published state and the
/// runtime's `CpuMap`, for a task that last ran on (or, new, was spawned from) `prev`, woken
/// from worker `waker`, with the wakeup's flags `wf`: `WF_FORK` for a new task, whose
/// placement is free; otherwise the task has run (a woken task blocked, so it ran), and a
/// started task that may not migrate may use one CPU, `prev`, so no selection runs (module
/// doc). `waker_wt` is the waking worker thread when the caller runs on it: its running task
/// is the waker task, whose wakee record (`Task::wakee_flips` and its neighbours) the
/// selection updates (`record_wakee`); `None` where no task wakes (the drain of a delayed
/// wakeup). Stores the task's new recently used CPU where the policy says, counts the
/// outcome (`place_*`, and `place_wide`) on the waker's worker, or on the chosen one for a
/// wakeup from outside, and returns the CPU with the flags the selection adds
/// (`WF_RQ_SELECTED`).
pub(crate) fn select_cpu(
    shared: &Shared,
    t: &TaskRef,
    prev: usize,
    waker: Option<usize>,
    waker_wt: Option<&WorkerThread>,
    wf: WakeFlags,
) -> (usize, WakeFlags) {
    let n = shared.workers.len();
    let view = |i: usize| cpu_view(shared, i);
    let started = !wf.contains(WakeFlags::FORK);
    // Mutant `select_ignores_contract` (loom model `contract`): every woken task is free to
    // move.
    #[cfg(not(lagom_mutant = "select_ignores_contract"))]
    let pinned = started && !t.migratable;
    #[cfg(lagom_mutant = "select_ignores_contract")]
    let pinned = false;
    // ITMT active balance (`sched/balance.rs`): a preferred worker, idle, asked for the
    // task that ran on `prev`; honoured here, at the task's first placement since, if that
    // worker is still idle and the task may go there. (The kernel's stopper moves the task
    // without a selection: nothing is recorded.)
    if started && prev < n {
        let src = &shared.workers[prev];
        if src.active_push.load(Ordering::Relaxed) != usize::MAX
            && src.active_push_task.load(Ordering::Relaxed) == t.id
        {
            let dst = src.active_push.swap(usize::MAX, Ordering::Relaxed);
            if dst < n && !pinned && t.allowed(dst) && view(dst).idle {
                let w = &shared.workers[dst];
                w.stats.inc(&w.stats.balance_active);
                return (dst, WakeFlags::NONE);
            }
        }
    }
    let nr_allowed = if pinned {
        1
    } else {
        match &t.affinity {
            None => n,
            Some(_) => (0..n).filter(|&i| t.allowed(i)).count(),
        }
    };
    let recent = t.recent_cpu.load(Ordering::Relaxed);
    let waker_task = waker_wt
        .filter(|_| nr_allowed > 1 && wf.contains(WakeFlags::TTWU))
        .and_then(running_task);
    let mut record = waker_task.map(|w| WakeeState {
        flips: w.wakee_flips.load(core::sync::atomic::Ordering::Relaxed),
        decay_ts: w.wakee_decay_ts.load(core::sync::atomic::Ordering::Relaxed),
        last: w.last_wakee.load(core::sync::atomic::Ordering::Relaxed),
    });
    let ctx = WakeCtx {
        prev,
        waker,
        recent: (recent != usize::MAX).then_some(recent),
        flags: wf,
        nr_allowed,
        wakee: t.id,
        wakee_flips: t.wakee_flips.load(core::sync::atomic::Ordering::Relaxed),
        now: waker_wt
            .filter(|_| record.is_some())
            .map_or(0, |wt| wt.sched_now()),
    };
    let s = if pinned {
        select_task_rq(
            &shared.cpus,
            view,
            |i| i == prev,
            shared.features,
            ctx,
            None,
        )
    } else {
        select_task_rq(
            &shared.cpus,
            view,
            |i| t.allowed(i),
            shared.features,
            ctx,
            record.as_mut(),
        )
    };
    if let (Some(w), Some(r)) = (waker_task, record) {
        // Only the waker task itself writes its record, while it runs (here).
        w.wakee_flips
            .store(r.flips, core::sync::atomic::Ordering::Relaxed);
        w.wakee_decay_ts
            .store(r.decay_ts, core::sync::atomic::Ordering::Relaxed);
        w.last_wakee
            .store(r.last, core::sync::atomic::Ordering::Relaxed);
    }
    if let Some(r) = s.recent_used_cpu {
        t.recent_cpu.store(r, Ordering::Relaxed);
    }
    let w = &shared.workers[waker.unwrap_or(s.cpu)];
    let c = match s.how {
        Placement::Affine => &w.stats.place_affine,
        Placement::IdleSibling => &w.stats.place_idle_sibling,
        Placement::Prev => &w.stats.place_prev,
        Placement::ForkIdlest => &w.stats.place_fork_idlest,
    };
    w.stats.inc(c);
    if s.wide {
        w.stats.inc(&w.stats.place_wide);
    }
    (s.cpu, s.flags)
}
