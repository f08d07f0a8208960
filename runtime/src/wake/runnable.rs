//! `ttwu_runnable`: the wakeup of a task that is still queued (delayed, or not yet switched
//! out), under the lock of the runqueue it is on (module doc, step 3).

use super::activate::{check_preempt, finished_delayed};
use crate::locking::atomic::Ordering;
use crate::tcb::RUNNING;
use crate::trace::WakePath;
use crate::worker::{QueuedTask, RqGuard, Shared, TaskRef, WorkerThread, trace};
use lagom_policy::{
    ActivatePath, DelayedWake, DelayedWakeView, Feature, Handle, RunQueue, WakeFlags,
    activation_flags, delayed_wake, idle_in_llc,
};

/// The runnable wakeup (module doc, step 3). Returns `false` if the task left its runqueue
/// before the lock was taken. `local_wt` is the waker's worker thread, if it is one of
/// `shared`'s: a wakeup on its own runqueue uses the clock of the runtime call in progress
/// (`WorkerThread::sched_now`, e.g. a task's exit waking its joiner). `held` is that worker's
/// runqueue lock if the caller holds it (`try_to_wake_up_held`): used when the task is queued
/// there, released before any other runqueue lock is taken. `wf` are the wakeup's flags
/// (`WF_TTWU`, the waker's `WF_SYNC`): a delayed task requeued in place runs the
/// wakeup-preemption check with them (`activation_flags(RunnableInPlace, ..)`).
pub(super) fn ttwu_runnable<'a>(
    shared: &Shared,
    t: &TaskRef,
    local_wt: Option<&'a WorkerThread>,
    held: &mut Option<RqGuard<'a>>,
    wf: WakeFlags,
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
            crate::locking::probe::probe!(
                "wake/runnable: the task moved before the lock: follow it"
            );
            continue;
        }
        // The re-check under the lock: the owner's pick may have finished a delayed dequeue
        // since the lock-free look (loom model `delayed_wakeup`, mutant
        // `ttwu_runnable_no_recheck`).
        #[cfg(not(lagom_mutant = "ttwu_runnable_no_recheck"))]
        if !t.on_rq.load(Ordering::Relaxed) {
            crate::locking::probe::probe!(
                "wake/runnable: the task left its runqueue before the lock"
            );
            return false;
        }
        // SAFETY: the task is queued on this runqueue, whose lock is held.
        let h = unsafe { t.sched(|s| s.handle) }.expect("queued task has a handle");
        let now = match local_wt {
            Some(wt) if wt.index == cpu => {
                let now = wt.sched_now();
                wt.exclude_host_stall(rq, now);
                now
            }
            _ => crate::sys::time::sched_clock(),
        };
        if rq.entity(h).sched_delayed && dequeue_delayed(shared, t, cpu, rq, h, now) {
            // TTWU_DEQUEUE, or DELAYED_WAKE_IDLE with an idle CPU to go to: finish the
            // delayed dequeue and wake it like any sleeper, through CPU selection (the
            // caller's full path).
            crate::locking::probe::probe!(
                "wake/runnable: TTWU_DEQUEUE finishes the delayed dequeue"
            );
            let (se, p) = rq.finish_delayed(h, now);
            finished_delayed(w, se, p);
            w.publish(rq);
            w.stats.inc(&w.stats.runnable_dequeued);
            return false;
        }
        if rq.entity(h).sched_delayed {
            crate::locking::probe::probe!("wake/runnable: a delayed task requeued in place");
            t.sched_delayed.store(false, Ordering::Relaxed);
            rq.requeue_delayed(h, now);
            check_preempt(
                w,
                rq,
                h,
                activation_flags(ActivatePath::RunnableInPlace, wf),
                now,
            );
            w.publish(rq);
        }
        crate::locking::probe::probe!("wake/runnable: woken in place");
        t.state.store(RUNNING, Ordering::Relaxed);
        trace::wakeup(shared, t, cpu, WakePath::RunnableInPlace);
        w.stats.inc_owned(&w.stats.runnable_in_place);
        drop(own);
        // An idle owner must run the requeued task (its need-resched is set too, but the
        // kick is what wakes a sleeping worker). A waker on the owner itself is that worker,
        // running: no kick (whose fence is the dearest step of a local wakeup).
        if Some(cpu) != local_idx && w.kick.kick() {
            crate::locking::probe::probe!("wake/runnable: kicks an idle owner");
            w.stats.inc(&w.stats.kicks);
        }
        return true;
    }
}

/// Whether the delayed wakee `t`, queued (handle `h`) on `rq`, worker `cpu`'s, whose lock
/// is held, is dequeued for CPU selection instead of requeued in place (`delayed_wake`:
/// TTWU_DEQUEUE, DELAYED_WAKE_IDLE).
fn dequeue_delayed(
    shared: &Shared,
    t: &TaskRef,
    cpu: usize,
    rq: &RunQueue<QueuedTask>,
    h: Handle,
    now: u64,
) -> bool {
    let f = shared.features;
    if !f.is_enabled(Feature::TtwuDequeue) && !f.is_enabled(Feature::DelayedWakeIdle) {
        return false;
    }
    // A started task moves only if it may (the migration contract, `select.rs`); an idle
    // CPU it may not use is no reason to dequeue it.
    let may_move = t.migratable;
    let idle_elsewhere = may_move
        && idle_in_llc(
            &shared.cpus,
            cpu,
            |i| t.allowed(i),
            |i| super::select::cpu_view(shared, i),
        );
    delayed_wake(f, DelayedWakeView::of(rq, h, now, idle_elsewhere)) == DelayedWake::Dequeue
}
