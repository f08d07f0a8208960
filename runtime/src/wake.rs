//! The wakeup path: `try_to_wake_up` (spec §7.2, DESIGN.md "The wakeup protocol").
//!
//! Invariant: *a blocked task that is woken becomes runnable exactly once, on exactly one
//! runqueue, and never before the worker it blocked on has finished switching away from it.*
//!
//! Steps, with the ordering each relies on (spec §7.5):
//!
//! 1. The caller has published its wakeup condition and issued `fence(SeqCst)` (for park:
//!    the token swap, then the fence in `unpark_task`); the state load that follows pairs
//!    with the sleeper's `set_blocked` fence (lost-wakeup handshake, loom model 1).
//! 2. **Claim** `BLOCKED → WAKING` (compare-exchange, Acquire). Losing means the task is
//!    running, already being woken, or dead: return. Only one waker wins (loom model 2,
//!    mutant `ttwu_no_claim`). This replaces the kernel's `pi_lock`.
//! 3. **Runnable wakeup** (`ttwu_runnable`, §7.3): if `on_rq` (Acquire, O1) the task has not
//!    been dequeued (it is still running towards `schedule()`, or delayed). Lock the runqueue
//!    of `cpu`, re-check that `cpu` did not change (a balancer may have moved it: retry, O4)
//!    and that `on_rq` still holds; requeue a delayed entity in place (`requeue_delayed`, then
//!    the preemption check), and store `RUNNING`. If `on_rq` turned false under the lock, the
//!    sleeper dequeued it meanwhile: continue with the full wakeup.
//! 4. **on_cpu**: the task is off every runqueue (its `on_rq = false` Release was observed,
//!    O2). If its worker is still switching away from it (`on_cpu`, Acquire): with
//!    TTWU_QUEUE_ON_CPU hand the wakeup to that worker's wakelist (`cpu` is that worker,
//!    O3) — it activates the task after the switch completed, by program order; otherwise
//!    spin until `on_cpu` clears (Acquire: the saved context is visible). Either way no
//!    worker switches the task in before its switch-out completed (loom model 6,
//!    `on_cpu_handoff`; mutants `ttwu_on_cpu_wrong_cpu`, `ttwu_no_on_cpu_wait`).
//! 5. **select_task_rq** (policy/select.rs) over the workers' published load; store the
//!    chosen `cpu` (this waker owns the task exclusively now).
//! 6. **Enqueue**: on the waker's own worker directly under its lock; on another worker
//!    through its wakelist and a kick (TTWU_QUEUE), or under its lock followed by a kick
//!    (NO_TTWU_QUEUE). `activate` stores `RUNNING` and runs the wakeup-preemption check,
//!    which may set the target's need-resched flag.
//!
//! Delayed wakees (spec §7.10): with TTWU_QUEUE_DELAYED a waker that sees `on_rq` and
//! `sched_delayed` (Acquire; set with Release when the task was delayed) for a task on another
//! worker does not take that worker's lock: it records its own CPU in `wake_cpu`, marks the
//! entry `wake_delayed` and pushes the task on the owner's wakelist; the owner finishes the
//! dequeue under its own lock (unless a pick already did), selects a CPU and activates the
//! task there or forwards it (`worker::drain`). With TTWU_DEQUEUE, `ttwu_runnable` finishes
//! the delayed dequeue and returns "not done", so the task takes the full path (CPU
//! selection included). The periodic load balance may move a delayed task (the kernel's
//! `migrate_load` does): a delayed wakeup queued to its old worker is then forwarded by that
//! worker's drain to the new one (the chase, loom model 7, `loom-tests/tests/migrate.rs`).
//! Loom model 5
//! (`loom-tests/tests/delayed.rs`) races such a waker against the owner's pick finishing the
//! delayed dequeue under each of the three (mutants `ttwu_runnable_no_recheck`,
//! `drain_delayed_no_recheck`, `finish_delayed_relaxed_on_rq`). The Acquire on
//! `sched_delayed` is kept as the RFC has it, but in lagom the claim's Acquire already orders
//! everything the waker reads next: weakening it to Relaxed is not caught by that model.
//!
//! **From a task's exit** (`try_to_wake_up_held`, `worker/exit.rs`): the exit wakes its joiner
//! while it holds its own runqueue lock (the kernel's wakeups from `__schedule` under
//! `rq->lock`). The steps are the same code (`ttwu`), with that lock standing in for the one
//! they would take on the waker's own worker: a joiner queued there is requeued in place
//! under it (the `cpu` re-check holds trivially: a balancer moves a task only under both
//! locks), and a joiner that is enqueued there is activated under it. Every other step
//! releases the held lock before it goes on: another runqueue lock (never two at once, so no
//! lock-order question), a wakelist push and its kick, or the `on_cpu` wait. The held lock
//! adds no interleaving, as it excludes exactly what a fresh one would; what it adds is a
//! choice — which worker's lock stands in, and when it must be released — and loom model 9
//! (`loom-tests/tests/exit_wake.rs`) checks that choice: the `Model::exit` seam runs the
//! exit's dequeue and this wakeup from a loom thread playing the exiting worker (a
//! `WorkerThread` of its own, the lock held), against the joiner blocking on another worker
//! (`exit_wake_remote`, `exit_wake_remote_idle`), and against another worker's balancer
//! pulling a joiner that sleeps delayed on the exiting worker (`exit_wake_local`). Mutants
//! `ttwu_held_wrong_rq` (the held guard used for a task queued on another worker) and
//! `ttwu_held_any_target` (a task enqueued under the held lock whatever worker CPU selection
//! chose) are caught there, and only there.

use core::ptr::NonNull;

use crate::policy::{CpuView, Feature, RunQueue, select_task_rq};
use crate::sync::atomic::Ordering;
use crate::task::{BLOCKED, Claim, QueuedTask, TaskRef};
use crate::trace::{self, MigrateCause, WakePath};
use crate::worker::{RqGuard, Shared, WorkerThread, activate, check_preempt, local};

/// Which path a wakeup took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum Woken {
    /// The task was not blocked (or another waker owns the wakeup).
    NotBlocked,
    /// Runnable wakeup: it was still queued.
    Runnable,
    /// Enqueued (directly, under a lock, or through a wakelist).
    Enqueued,
}

/// Wakes `t` if it is blocked (module doc).
pub(crate) fn try_to_wake_up(t: &TaskRef) -> Woken {
    if t.state.load(Ordering::Relaxed) != BLOCKED {
        return Woken::NotBlocked;
    }
    let local_wt = local().filter(|wt| core::ptr::eq(&*wt.shared, &*t.shared));
    ttwu(t, local_wt, None).0
}

/// [`try_to_wake_up`] from worker thread `wt`, which holds its own runqueue lock `rq` (a
/// task's exit waking its joiner, `worker/exit.rs`): a wakeup that lands on `wt`'s worker
/// (the joiner requeued in place there, or enqueued there) is done under `rq`, in the same
/// lock section as the exit's dequeue and pick. Any other path first releases `rq` (it never
/// takes a second runqueue lock, nor spins, nor kicks while holding one) and goes on as
/// `try_to_wake_up`. Returns the guard if the lock is still held.
pub(crate) fn try_to_wake_up_held<'a>(
    t: &TaskRef,
    wt: &'a WorkerThread,
    rq: RqGuard<'a>,
) -> Option<RqGuard<'a>> {
    if t.state.load(Ordering::Relaxed) != BLOCKED {
        return Some(rq);
    }
    if !core::ptr::eq(&*wt.shared, &*t.shared) {
        drop(rq);
        let _ = try_to_wake_up(t);
        return None;
    }
    ttwu(t, Some(wt), Some(rq)).1
}

/// The body of [`try_to_wake_up`] once the state was seen `BLOCKED`. `local_wt` is the
/// waker's worker thread if it is one of `t`'s runtime; `held`, if any, is that worker's
/// runqueue lock, held by the caller, and given back if still held.
fn ttwu<'a>(
    t: &TaskRef,
    local_wt: Option<&'a WorkerThread>,
    mut held: Option<RqGuard<'a>>,
) -> (Woken, Option<RqGuard<'a>>) {
    if t.claim() == Claim::NotBlocked {
        return (Woken::NotBlocked, held);
    }
    // Borrowed, not cloned: `t` keeps it alive, and a clone would bounce the count's cache
    // line between every waker.
    let shared: &Shared = &t.shared;
    let local_idx = local_wt.map(|wt| wt.index);
    if t.on_rq.load(Ordering::Acquire) {
        // TTWU_QUEUE_DELAYED (spec §7.10): a delayed task on another worker is handed to
        // that worker's wakelist instead of taking its lock; `sched_delayed` (Acquire) proves
        // the task passed its block decision there. The owner finishes the dequeue and
        // selects a CPU (`worker::drain`).
        if shared.features.is_enabled(Feature::TtwuQueueDelayed)
            && t.sched_delayed.load(Ordering::Acquire)
        {
            let cpu = t.cpu.load(Ordering::Relaxed);
            if Some(cpu) != local_idx {
                drop(held.take());
                t.wake_cpu
                    .store(local_idx.unwrap_or(usize::MAX), Ordering::Relaxed);
                t.wake_delayed.store(true, Ordering::Relaxed);
                let w = &shared.workers[cpu];
                trace::wakeup(shared, t, cpu, WakePath::DelayedQueued);
                w.stats.inc(&w.stats.runnable_queued);
                // SAFETY: claimed just above; a claimed task is alive in its registry.
                unsafe { queue_wakelist(shared, cpu, t) };
                return (Woken::Runnable, held);
            }
        }
        if ttwu_runnable(shared, t, local_wt, &mut held) {
            return (Woken::Runnable, held);
        }
    }
    // Off every runqueue; the sleeper's dequeue happened-before (O2).
    if t.on_cpu.load(Ordering::Acquire) {
        // Never spin or kick under a runqueue lock.
        drop(held.take());
        if shared.features.is_enabled(Feature::TtwuQueueOnCpu) {
            let cpu = t.cpu.load(Ordering::Relaxed);
            // Any other worker could switch the task in before its switch-out completed (loom
            // model `on_cpu_handoff`, mutant `ttwu_on_cpu_wrong_cpu`).
            #[cfg(lagom_mutant = "ttwu_on_cpu_wrong_cpu")]
            let cpu = (cpu + 1) % shared.workers.len();
            if Some(cpu) != local_idx {
                let w = &shared.workers[cpu];
                trace::wakeup(shared, t, cpu, WakePath::OnCpu);
                w.stats.inc(&w.stats.wakeups_on_cpu);
                // SAFETY: claimed just above; a claimed task is alive in its registry.
                unsafe { queue_wakelist(shared, cpu, t) };
                return (Woken::Enqueued, held);
            }
        }
    }
    // Dropping the wait lets a worker switch the task in while its switch-out is still
    // saving it (loom models `on_cpu_handoff` and `lost_wakeup`, mutant `ttwu_no_on_cpu_wait`).
    #[cfg(not(lagom_mutant = "ttwu_no_on_cpu_wait"))]
    while t.on_cpu.load(Ordering::Acquire) {
        crate::sync::spin_loop();
    }
    // The switch away from the task is complete: its saved context is this waker's to hand
    // on. Under loom, touch the stand-in for it, so that a model sees whether that save
    // happened-before (the on_cpu Release/Acquire pair).
    #[cfg(loom)]
    // SAFETY: only a switch away from the task writes the cell, before it clears `on_cpu`,
    // which was just seen clear: no write runs now (loom checks that this read is ordered).
    let _ = t.loom_ctx.with(|c| unsafe { *c });
    let prev = t.cpu.load(Ordering::Relaxed);
    let target = select_cpu(shared, t, prev, local_idx);
    trace::migrate(shared, t, prev, target, MigrateCause::Wakeup);
    t.cpu.store(target, Ordering::Relaxed);
    match (held.as_mut(), local_wt) {
        // Only if the target is the held lock's worker: CPU selection may send the task
        // elsewhere (loom model `exit_wake_remote_idle`, mutant `ttwu_held_any_target`).
        (Some(rq), Some(wt))
            if wt.index == target || cfg!(lagom_mutant = "ttwu_held_any_target") =>
        {
            // The waker's own runqueue, whose lock the caller holds (`try_to_wake_up_held`).
            let w = &shared.workers[target];
            trace::enqueue(shared, t, local_idx, target, false);
            // SAFETY: a claimed task is alive and in its registry (module doc of
            // `task/queued.rs`), the caller's `t` keeps it alive meanwhile.
            unsafe { activate(w, rq, t, wt.sched_now()) };
            w.stats.inc_owned(&w.stats.wakeups_local);
        }
        _ => {
            drop(held.take());
            enqueue_on(shared, local_wt, target, t, false);
        }
    }
    (Woken::Enqueued, held)
}

/// `select_task_rq` over the workers' published state.
pub(crate) fn select_cpu(shared: &Shared, t: &TaskRef, prev: usize, waker: Option<usize>) -> usize {
    let n = shared.workers.len();
    let view = |i: usize| {
        let nr = shared.workers[i].nr_running.load(Ordering::Relaxed);
        CpuView {
            idle: nr == 0,
            nr_running: nr,
        }
    };
    select_task_rq(n, view, prev, waker, |i| t.allowed(i))
}

/// The runnable wakeup (module doc, step 3). Returns `false` if the task left its runqueue
/// before the lock was taken. `local_wt` is the waker's worker thread, if it is one of
/// `shared`'s: a wakeup on its own runqueue uses the clock of the runtime call in progress
/// (`WorkerThread::sched_now`, e.g. a task's exit waking its joiner). `held` is that worker's
/// runqueue lock if the caller holds it (`try_to_wake_up_held`): used when the task is queued
/// there, released before any other runqueue lock is taken.
fn ttwu_runnable<'a>(
    shared: &Shared,
    t: &TaskRef,
    local_wt: Option<&'a WorkerThread>,
    held: &mut Option<RqGuard<'a>>,
) -> bool {
    let local_idx = local_wt.map(|wt| wt.index);
    loop {
        let cpu = t.cpu.load(Ordering::Acquire);
        let w = &shared.workers[cpu];
        let mut own: Option<RqGuard<'_>> = None;
        let rq: &mut RunQueue<QueuedTask> = match held.as_mut() {
            // The lock of `cpu` is held: a balancer, which moves a task under both locks,
            // cannot move it away now, and the checks below hold as for a fresh lock. Only
            // that lock: a task queued elsewhere (blocking on another worker, or pulled there
            // by a balancer) is not under it (loom model 9, `exit_wake.rs`, mutant
            // `ttwu_held_wrong_rq`).
            #[cfg(not(lagom_mutant = "ttwu_held_wrong_rq"))]
            Some(g) if Some(cpu) == local_idx => g,
            #[cfg(lagom_mutant = "ttwu_held_wrong_rq")]
            Some(g) => g,
            _ => {
                drop(held.take());
                own.insert(w.rq.lock())
            }
        };
        // O4: a balancer may have moved the task before this lock was taken (it changes
        // `cpu` under both runqueue locks): follow it (loom model `migration_chase`, mutant
        // `ttwu_runnable_no_cpu_recheck`).
        #[cfg(not(lagom_mutant = "ttwu_runnable_no_cpu_recheck"))]
        if t.cpu.load(Ordering::Relaxed) != cpu {
            continue;
        }
        // The re-check under the lock: the owner's pick may have finished a delayed dequeue
        // since the lock-free look (loom model `delayed_wakeup`, mutant
        // `ttwu_runnable_no_recheck`).
        #[cfg(not(lagom_mutant = "ttwu_runnable_no_recheck"))]
        if !t.on_rq.load(Ordering::Relaxed) {
            return false;
        }
        // SAFETY: the task is queued on this runqueue, whose lock is held.
        let h = unsafe { t.sched(|s| s.handle) }.expect("queued task has a handle");
        let now = match local_wt {
            Some(wt) if wt.index == cpu => wt.sched_now(),
            _ => crate::sys::time::sched_clock(),
        };
        if rq.entity(h).sched_delayed && shared.features.is_enabled(Feature::TtwuDequeue) {
            // TTWU_DEQUEUE: finish the delayed dequeue and wake it like any sleeper, through
            // CPU selection (the caller's full path).
            let (se, p) = rq.finish_delayed(h, now);
            crate::worker::finished_delayed(w, se, p);
            w.publish(rq);
            return false;
        }
        if rq.entity(h).sched_delayed {
            t.sched_delayed.store(false, Ordering::Relaxed);
            rq.requeue_delayed(h, now);
            check_preempt(w, rq, h, crate::policy::WakeFlags::TTWU, now);
            w.publish(rq);
        }
        t.state.store(crate::task::RUNNING, Ordering::Relaxed);
        trace::wakeup(shared, t, cpu, WakePath::RunnableInPlace);
        w.stats.inc_owned(&w.stats.runnable_in_place);
        drop(own);
        // An idle owner must run the requeued task (its need-resched is set too, but the
        // kick is what wakes a sleeping worker). A waker on the owner itself is that worker,
        // running: no kick (whose fence is the dearest step of a local wakeup).
        if Some(cpu) != local_idx && w.kick.kick() {
            w.stats.inc(&w.stats.kicks);
        }
        return true;
    }
}

/// Makes a claimed or new task runnable on worker `target` (module doc, step 6). `local` is
/// the caller's worker thread if it is one of `shared`'s (passed down, not looked up again).
pub(crate) fn enqueue_on(
    shared: &Shared,
    local: Option<&WorkerThread>,
    target: usize,
    t: &TaskRef,
    spawn: bool,
) {
    let w = &shared.workers[target];
    let local_idx = local.map(|wt| wt.index);
    trace::enqueue(shared, t, local_idx, target, spawn);
    if spawn {
        w.stats.inc(&w.stats.spawns);
    }
    if let Some(wt) = local.filter(|wt| wt.index == target) {
        let now = wt.sched_now();
        let mut rq = w.rq.lock();
        // SAFETY: `t` is new or claimed, and in its registry (`task/queued.rs`).
        unsafe { activate(w, &mut rq, t, now) };
        if !spawn {
            w.stats.inc_owned(&w.stats.wakeups_local);
        }
    } else if shared.features.is_enabled(Feature::TtwuQueue) {
        if !spawn {
            w.stats.inc(&w.stats.wakeups_queued);
        }
        // SAFETY: `t` is new or claimed (the caller's), so alive in its registry.
        unsafe { queue_wakelist(shared, target, t) };
    } else {
        let now = crate::sys::time::sched_clock();
        {
            let mut rq = w.rq.lock();
            // SAFETY: as above.
            unsafe { activate(w, &mut rq, t, now) };
        }
        if !spawn {
            w.stats.inc(&w.stats.wakeups_remote);
        }
        if w.kick.kick() {
            w.stats.inc(&w.stats.kicks);
        }
    }
}

/// Pushes `t` on worker `cpu`'s wakelist and kicks it if it is idle. The entry borrows the
/// registry's reference, as a runqueue payload does (`task/queued.rs`): no count changes, so
/// a cross-worker wakeup does not move the `Arc`'s count between the two workers' caches.
///
/// # Safety
/// `t` is claimed (or new) and on no wakelist, and stays in its registry (or, in a loom
/// model, the model's hands) until the drain that takes it has activated it: a claimed or new
/// task is not dead, and leaves its registry only after it ran to its end or at shutdown,
/// which empties the wakelists first (`task/queued.rs`).
pub(crate) unsafe fn queue_wakelist(shared: &Shared, cpu: usize, t: &TaskRef) {
    let w = &shared.workers[cpu];
    // SAFETY: the task is claimed (or new) and on no list: this waker has it until the
    // owner's take_all, and the registry keeps it alive meanwhile (the caller's contract).
    unsafe { w.wakelist.push(NonNull::from(&**t)) };
    if w.kick.kick() {
        w.stats.inc(&w.stats.kicks);
    }
}
