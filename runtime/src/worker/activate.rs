//! Activating woken tasks on this worker: the wakelist drain (`sched_ttwu_pending`) and the
//! enqueue of a claimed task with its wakeup-preemption check (`ttwu_do_activate`). Both run
//! under the worker's runqueue lock.

use alloc::sync::Arc;
use core::mem::ManuallyDrop;

use super::{Shared, Worker};
use crate::policy::{EnqueueKind, Handle, RunQueue, WakeFlags, Wakeup};
use crate::sync::atomic::Ordering;
use crate::task::{QueuedTask, RUNNING, TaskRef};

/// Takes every wakelist entry of worker `me` and activates it on `rq` (the kernel's
/// `sched_ttwu_pending`). The caller holds that runqueue's lock.
///
/// A delayed wakeup (TTWU_QUEUE_DELAYED, `ttwu_delayed` of spec §7.10) is still queued here
/// unless a pick finished its dequeue meanwhile: its dequeue is finished now, a CPU is
/// selected for it as for any wakeup (the waker's CPU recorded in `wake_cpu`), and it is
/// activated here or forwarded to the chosen worker's wakelist (never under another lock:
/// this one is held). If balancing moved the delayed task to another worker meanwhile, the
/// entry is forwarded there (the chase, `balance.rs`).
#[inline]
pub(crate) fn drain(shared: &Shared, me: usize, rq: &mut RunQueue<QueuedTask>, now: u64) {
    // Look before taking: most drains find the list empty, and the swap is a locked
    // instruction. An entry pushed after this look waits for the next drain (or the idle
    // re-check), as one pushed just after the swap would. The look is inlined into the
    // caller; the rest is out of line.
    if !shared.workers[me].wakelist.is_empty() {
        drain_pending(shared, me, rq, now);
    }
}

/// The body of [`drain`] once the list was seen non-empty.
#[inline(never)]
fn drain_pending(shared: &Shared, me: usize, rq: &mut RunQueue<QueuedTask>, now: u64) {
    let w = &shared.workers[me];
    for p in w.wakelist.take_all() {
        // SAFETY: pushed by `queue_wakelist` from a live `TaskRef`, which its registry keeps
        // alive until it is activated (`task/queued.rs`). The entry owns no count: the `Arc`
        // rebuilt here is never dropped (`ManuallyDrop`).
        let t = ManuallyDrop::new(unsafe { Arc::from_raw(p.as_ptr().cast_const()) });
        if t.wake_delayed.swap(false, Ordering::Relaxed) {
            // Still queued (delayed) unless a pick finished the dequeue after the waker saw
            // `sched_delayed` (loom model `delayed_wakeup`, mutant `drain_delayed_no_recheck`).
            // Acquire: that pick may have run on another worker, after a balancer moved the
            // task there; its entity store must be visible before `activate` reads it.
            let queued = t.on_rq.load(Ordering::Acquire);
            // Queued, but maybe no longer here: the periodic balancer may have moved the
            // delayed task (it changes `cpu` under both locks, this one included). Chase
            // after it: forward the entry to its owner, which repeats this under its own
            // lock (loom model `migration_chase`, mutant `drain_no_chase`).
            let owner = t.cpu.load(Ordering::Relaxed);
            #[cfg(lagom_mutant = "drain_no_chase")]
            let owner = me;
            if queued && owner != me {
                t.wake_delayed.store(true, Ordering::Relaxed);
                w.stats.inc(&w.stats.wakeups_chased);
                // SAFETY: the entry's task is claimed and alive (above); it moves lists.
                unsafe { crate::wake::queue_wakelist(shared, owner, &t) };
                continue;
            }
            #[cfg(lagom_mutant = "drain_delayed_no_recheck")]
            let queued = true;
            if queued {
                // SAFETY: the task is queued on this runqueue, whose lock is held.
                let h = unsafe { t.sched(|s| s.handle) }.expect("queued task has a handle");
                let (se, p) = rq.finish_delayed(h, now);
                finished_delayed(w, se, p);
                w.publish(rq);
            }
            let waker = t.wake_cpu.load(Ordering::Relaxed);
            let target = crate::wake::select_cpu(
                shared,
                &t,
                me,
                (waker < shared.workers.len()).then_some(waker),
            );
            if target != me {
                crate::trace::migrate(shared, &t, me, target, crate::trace::MigrateCause::Wakeup);
                t.cpu.store(target, Ordering::Relaxed);
                w.stats.inc(&w.stats.runnable_migrated);
                // SAFETY: as above.
                unsafe { crate::wake::queue_wakelist(shared, target, &t) };
                continue;
            }
        }
        // SAFETY: a woken task is alive and in its registry (it is not dead: a dead task is
        // never claimed), which outlives its time in the runqueue (`task/queued.rs`).
        unsafe { activate(w, rq, &t, now) };
    }
}

/// Enqueues a claimed (or new) task here and runs the wakeup-preemption check
/// (`ttwu_do_activate`). The caller holds `w`'s runqueue lock and owns `t`'s wakeup. The
/// runqueue borrows the task's registry reference ([`QueuedTask`]): no count changes.
///
/// # Safety
/// `t` is in its registry (or, in a loom model, held by the model) until it has been dequeued
/// for good (`task/queued.rs`).
pub(crate) unsafe fn activate(w: &Worker, rq: &mut RunQueue<QueuedTask>, t: &TaskRef, now: u64) {
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
    // SAFETY: per the contract.
    let h = rq.enqueue(se, unsafe { QueuedTask::new(t) }, kind, now);
    let task = t;
    // SAFETY: as above.
    unsafe { task.sched(|s| s.handle = Some(h)) };
    task.on_rq.store(true, Ordering::Relaxed);
    // WAKING → RUNNING (new tasks already are): Release, so a later claim's Acquire sees
    // the enqueue.
    task.state.store(RUNNING, Ordering::Release);
    // A new task is a fork (`wake_up_new_task`): it preempts only with a shorter slice.
    let wf = if kind == EnqueueKind::Initial {
        WakeFlags::FORK
    } else {
        WakeFlags::TTWU
    };
    check_preempt(w, rq, h, wf, now);
    w.publish(rq);
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
    // Already asked to reschedule: nothing to decide (spec §6.1 step 1). Set and cleared
    // under this runqueue's lock, which the caller holds.
    if w.need_resched.load(Ordering::Relaxed) {
        return;
    }
    loop {
        match rq.wakeup_preempt(h, wf, now) {
            Wakeup::NoPreempt => return,
            Wakeup::Preempt => {
                w.need_resched.store(true, Ordering::Relaxed);
                return;
            }
            Wakeup::FinishedDelayed { se, payload } => finished_delayed(w, se, payload),
        }
    }
}

/// A delayed entity completed its dequeue: store its entity and publish `on_rq = false`.
pub(crate) fn finished_delayed(w: &Worker, se: crate::policy::SchedEntity, t: QueuedTask) {
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
