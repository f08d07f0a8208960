//! `try_to_wake_up` and `try_to_wake_up_held`: the claim, the runnable wakeup, the `on_cpu`
//! wait or hand-off, CPU selection and the enqueue (module doc, steps 2–6).

use super::activate::activate;
use super::queue::{enqueue_on, queue_wakelist};
use super::runnable::ttwu_runnable;
use super::select::select_cpu;
use crate::locking::atomic::Ordering;
use crate::tcb::{BLOCKED, Claim};
use crate::trace::{MigrateCause, WakePath};
use crate::worker::{RqGuard, Shared, TaskRef, WorkerThread, local, trace};
use lagom_policy::{ActivatePath, Feature, WakeFlags, activation_flags, ttwu_queue_cond};

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

/// Wakes `t` if it is blocked (module doc), with the waker's flags `wf` (`WF_TTWU` is
/// added; `WF_SYNC`: the waker is about to block, so the wakee may take its CPU — sync
/// `wake_affine` and `preempt_sync`). `WF_SYNC` from a thread outside the runtime is
/// dropped: there is no waker CPU to hand over.
pub(crate) fn try_to_wake_up(t: &TaskRef, wf: WakeFlags) -> Woken {
    if t.state.load(Ordering::Relaxed) != BLOCKED {
        return Woken::NotBlocked;
    }
    let local_wt = local().filter(|wt| core::ptr::eq(&*wt.shared, &*t.shared));
    let mut wf = wf | WakeFlags::TTWU;
    if local_wt.is_none() {
        wf = wf.without(WakeFlags::SYNC);
    }
    ttwu(t, local_wt, None, wf).0
}

/// [`try_to_wake_up`] from worker thread `wt`, which holds its own runqueue lock `rq` (a
/// task's exit waking its joiner, `sched/exit.rs`): a wakeup that lands on `wt`'s worker
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
        let _ = try_to_wake_up(t, WakeFlags::NONE);
        return None;
    }
    ttwu(t, Some(wt), Some(rq), WakeFlags::TTWU).1
}

/// The body of [`try_to_wake_up`] once the state was seen `BLOCKED`. `local_wt` is the
/// waker's worker thread if it is one of `t`'s runtime; `held`, if any, is that worker's
/// runqueue lock, held by the caller, and given back if still held; `wf` are the wakeup's
/// flags (`WF_TTWU`, perhaps `WF_SYNC`).
fn ttwu<'a>(
    t: &TaskRef,
    local_wt: Option<&'a WorkerThread>,
    mut held: Option<RqGuard<'a>>,
    wf: WakeFlags,
) -> (Woken, Option<RqGuard<'a>>) {
    if t.claim() == Claim::NotBlocked {
        crate::locking::probe::probe!("wake/ttwu: the claim finds the task not blocked");
        return (Woken::NotBlocked, held);
    }
    // Borrowed, not cloned: `t` keeps it alive, and a clone would bounce the count's cache
    // line between every waker.
    let shared: &Shared = &t.shared;
    let local_idx = local_wt.map(|wt| wt.index);
    if t.on_rq.load(Ordering::Acquire) {
        // TTWU_QUEUE_DELAYED: a delayed task on another worker is handed to
        // that worker's wakelist instead of taking its lock; `sched_delayed` (Acquire) proves
        // the task passed its block decision there. The owner finishes the dequeue and
        // selects a CPU (`wake::drain`).
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
                crate::locking::probe::probe!(
                    "wake/ttwu: a delayed task handed to its worker's wakelist"
                );
                // The owner selects a CPU with `WF_TTWU` alone (the RFC's `ttwu_delayed`: the
                // waker's `WF_SYNC` does not travel).
                // SAFETY: claimed just above; a claimed task is alive in its registry.
                unsafe { queue_wakelist(shared, cpu, t, WakeFlags::TTWU) };
                return (Woken::Runnable, held);
            }
        }
        if ttwu_runnable(shared, t, local_wt, &mut held, wf) {
            return (Woken::Runnable, held);
        }
        crate::locking::probe::probe!(
            "wake/ttwu: on_rq seen, but the task left its runqueue meanwhile"
        );
    }
    // Off every runqueue; the sleeper's dequeue happened-before (O2).
    if t.on_cpu.load(Ordering::Acquire) {
        // Never spin or kick under a runqueue lock.
        drop(held.take());
        let cpu = t.cpu.load(Ordering::Relaxed);
        // Gated by the rule of any remote wakeup (`ttwu_queue_cond`'s last rule: the
        // wakee was already subtracted from its CPU's runnable count). TTWU_QUEUE_ON_CPU
        // alone switches the hand-off on or off, as before: NO_TTWU_QUEUE does not (the
        // kernel's hand-off would also need TTWU_QUEUE; lagom keeps the two apart, so that
        // each can be measured alone).
        let cond = || {
            let nr = shared.workers[cpu].nr_running.load(Ordering::Relaxed);
            let f = shared.features.with(Feature::TtwuQueue, true);
            ttwu_queue_cond(&shared.cpus, f, local_idx, cpu, nr)
        };
        if shared.features.is_enabled(Feature::TtwuQueueOnCpu) && cond() {
            // Any other worker could switch the task in before its switch-out completed (loom
            // model `on_cpu_handoff`, mutant `ttwu_on_cpu_wrong_cpu`).
            #[cfg(lagom_mutant = "ttwu_on_cpu_wrong_cpu")]
            let cpu = (cpu + 1) % shared.workers.len();
            if Some(cpu) != local_idx {
                let w = &shared.workers[cpu];
                trace::wakeup(shared, t, cpu, WakePath::OnCpu);
                w.stats.inc(&w.stats.wakeups_on_cpu);
                crate::locking::probe::probe!(
                    "wake/ttwu: a task still on_cpu handed to that worker's wakelist"
                );
                // No CPU was selected and the task stays on `cpu`: nothing travels with the
                // entry (`sched_remote_wakeup` false).
                let flags = activation_flags(ActivatePath::Wakelist, WakeFlags::NONE);
                // SAFETY: claimed just above; a claimed task is alive in its registry.
                unsafe { queue_wakelist(shared, cpu, t, flags) };
                return (Woken::Enqueued, held);
            }
        }
    }
    // Dropping the wait lets a worker switch the task in while its switch-out is still
    // saving it (loom models `on_cpu_handoff` and `lost_wakeup`, mutant `ttwu_no_on_cpu_wait`).
    #[cfg(not(lagom_mutant = "ttwu_no_on_cpu_wait"))]
    while t.on_cpu.load(Ordering::Acquire) {
        crate::locking::probe::probe!("wake/ttwu: the waker waits for on_cpu to clear");
        crate::locking::spin_loop();
    }
    // The switch away from the task is complete: its saved context is this waker's to hand
    // on. Under loom, touch the stand-in for it, so that a model sees whether that save
    // happened-before (the on_cpu Release/Acquire pair).
    #[cfg(loom)]
    // SAFETY: only a switch away from the task writes the cell, before it clears `on_cpu`,
    // which was just seen clear: no write runs now (loom checks that this read is ordered).
    let _ = t.loom_ctx.with(|c| unsafe { *c });
    let prev = t.cpu.load(Ordering::Relaxed);
    // A woken task has run (it blocked): it moves only if it may (`select.rs`).
    let (target, added) = select_cpu(shared, t, prev, local_idx, local_wt, wf);
    trace::migrate(shared, t, prev, target, MigrateCause::Wakeup);
    t.cpu.store(target, Ordering::Relaxed);
    // `WF_RQ_SELECTED` if CPU selection ran; `set_task_cpu` to another CPU: the activation
    // is a migration (`WF_MIGRATED`).
    let mut wf = wf | added;
    if target != prev {
        wf |= WakeFlags::MIGRATED;
    }
    match (held.as_mut(), local_wt) {
        // Only if the target is the held lock's worker: CPU selection may send the task
        // elsewhere (loom model `exit_wake_remote_idle`, mutant `ttwu_held_any_target`).
        (Some(rq), Some(wt))
            if wt.index == target || cfg!(lagom_mutant = "ttwu_held_any_target") =>
        {
            // The waker's own runqueue, whose lock the caller holds (`try_to_wake_up_held`).
            let w = &shared.workers[target];
            trace::enqueue(shared, t, local_idx, target, wf, false);
            let now = wt.sched_now();
            wt.exclude_host_stall(rq, now);
            // SAFETY: a claimed task is alive and in its registry (module doc of
            // `tcb/queued.rs`), the caller's `t` keeps it alive meanwhile.
            unsafe { activate(w, rq, t, now, activation_flags(ActivatePath::Direct, wf)) };
            w.stats.inc_owned(&w.stats.wakeups_local);
            crate::locking::probe::probe!("wake/ttwu: enqueued under the waker's held lock");
        }
        _ => {
            drop(held.take());
            crate::locking::probe::probe!("wake/ttwu: enqueued through enqueue_on");
            enqueue_on(shared, local_wt, target, t, wf);
        }
    }
    (Woken::Enqueued, held)
}
