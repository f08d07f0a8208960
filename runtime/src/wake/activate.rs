//! Activating a woken task on a worker, under its runqueue lock: the enqueue with its
//! wakeup-preemption check (`ttwu_do_activate`), and the completion of a delayed dequeue.

use crate::locking::atomic::Ordering;
use crate::tcb::RUNNING;
use crate::worker::{QueuedTask, TaskRef, Worker, tick_check};
use lagom_policy::{
    ActivatePath, EnqueueFlags, EnqueueKind, Handle, RunQueue, SchedEntity, WakeFlags, Wakeup,
    activation_flags,
};

/// Enqueues a claimed (or new) task here and runs the wakeup-preemption check
/// (`ttwu_do_activate`) with the activation's flags `wf`: the policy's `activation_flags` of
/// the path that brought it (the waker's own activation keeps the wakeup's flags; one from
/// the wakelist only `WF_MIGRATED`). `WF_MIGRATED` makes the enqueue `ENQUEUE_MIGRATED`
/// (`exec_start` cleared: not cache hot here). The caller holds `w`'s runqueue lock and owns
/// `t`'s wakeup. The runqueue borrows the task's registry reference ([`QueuedTask`]): no
/// count changes.
///
/// A new task's enqueue is a fork (`activation_flags(Fork, ..)`).
///
/// # Safety
/// `t` is in its registry (or, in a loom model, held by the model) until it has been dequeued
/// for good (`tcb/queued.rs`).
pub(crate) unsafe fn activate(
    w: &Worker,
    rq: &mut RunQueue<QueuedTask>,
    t: &TaskRef,
    now: u64,
    wf: WakeFlags,
) {
    // SAFETY: the caller holds the lock of the runqueue `t` joins and owns `t` (claimed or new,
    // on no queue, off every CPU).
    let (se, kind) = unsafe {
        t.sched(|s| {
            let kind = if s.new {
                EnqueueKind::Initial
            } else {
                EnqueueKind::Wakeup
            };
            s.new = false;
            (s.se, kind)
        })
    };
    // A new task is a fork (`wake_up_new_task`): it preempts only with a shorter slice.
    let wf = if kind == EnqueueKind::Initial {
        activation_flags(ActivatePath::Fork, wf | WakeFlags::FORK)
    } else {
        wf
    };
    // SAFETY: per the contract.
    let h = rq.enqueue(
        se,
        unsafe { QueuedTask::new(t) },
        kind,
        EnqueueFlags::of_wake(wf),
        now,
    );
    let task = t;
    // SAFETY: as above.
    unsafe { task.sched(|s| s.handle = Some(h)) };
    task.on_rq.store(true, Ordering::Relaxed);
    // WAKING → RUNNING (new tasks already are): Release, so a later claim's Acquire sees
    // the enqueue.
    task.state.store(RUNNING, Ordering::Release);
    check_preempt(w, rq, h, wf, now);
    w.publish(rq);
    tick_check(w, rq);
}

/// Runs the policy's wakeup-preemption check for `h` (woken, forked or migrated, as `wf`
/// says) and sets need-resched if it says so.
pub(crate) fn check_preempt(
    w: &Worker,
    rq: &mut RunQueue<QueuedTask>,
    h: Handle,
    wf: WakeFlags,
    now: u64,
) {
    // Already asked to reschedule: nothing to decide. Set and cleared
    // under this runqueue's lock, which the caller holds.
    if w.resched.need_resched() {
        return;
    }
    loop {
        match rq.wakeup_preempt(h, wf, now) {
            Wakeup::NoPreempt => return,
            Wakeup::Preempt => {
                w.resched.set_need_resched();
                return;
            }
            Wakeup::FinishedDelayed { se, payload } => finished_delayed(w, se, payload),
        }
    }
}

/// A delayed entity completed its dequeue: store its entity and publish `on_rq = false`.
pub(crate) fn finished_delayed(w: &Worker, se: SchedEntity, t: QueuedTask) {
    // SAFETY: the caller holds the lock of the runqueue `t` was queued on.
    unsafe {
        t.sched(|s| {
            s.se = se;
            s.handle = None;
        })
    };
    t.sched_delayed.store(false, Ordering::Relaxed);
    // O2: the entity store above happens-before a waker's Acquire of on_rq == false. Unlike
    // the blocking dequeue in `put_prev`, nothing else orders it: the task was switched out
    // long ago, so the waker's on_cpu Acquire pairs with an older store (loom model
    // `delayed_wakeup`, mutant `finish_delayed_relaxed_on_rq`).
    #[cfg(not(lagom_mutant = "finish_delayed_relaxed_on_rq"))]
    t.on_rq.store(false, Ordering::Release);
    #[cfg(lagom_mutant = "finish_delayed_relaxed_on_rq")]
    t.on_rq.store(false, Ordering::Relaxed);
    w.stats.inc(&w.stats.delayed_finished);
}
