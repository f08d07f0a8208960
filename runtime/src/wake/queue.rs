//! Making a claimed or new task runnable on a worker (module doc, step 6) — on the waker's
//! own runqueue, under another worker's lock, or through its lock-free wakelist and a kick —
//! and the target's side of the wakelist: the drain (`sched_ttwu_pending`), under its lock.

use alloc::sync::Arc;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;

use super::activate::{activate, finished_delayed};
use super::select::select_cpu;
use crate::locking::atomic::Ordering;
use crate::locking::resched::WAKE_PENDING;
use crate::trace::MigrateCause;
use crate::worker::{QueuedTask, Shared, TaskRef, WorkerThread, trace};
use lagom_policy::{ActivatePath, Feature, RunQueue, WakeFlags, activation_flags, ttwu_queue_cond};

/// Makes a claimed or new task runnable on worker `target` (module doc, step 6). `local` is
/// the caller's worker thread if it is one of `shared`'s (passed down, not looked up again);
/// `wf` are the wakeup's flags (`WF_FORK`: a spawn; `WF_TTWU`, the waker's `WF_SYNC`,
/// `WF_MIGRATED` for a wakeup), which reach the activation as the policy's
/// `activation_flags` say for the path taken: all of them when this caller activates the
/// task, only `WF_MIGRATED` through the wakelist.
///
/// A wakeup to another worker goes through its wakelist or under its lock as
/// `ttwu_queue_cond` says (policy: across LLCs or to an idle worker the wakelist, to a busy
/// one in the waker's LLC the lock; TTWU_QUEUE_DEFAULT: always the wakelist). A spawn to
/// another worker is activated under that worker's lock, as the kernel's
/// `wake_up_new_task` activates the child on its runqueue at once: the next spawn's
/// selection sees it counted there (a spawn sent through the wakelist was counted only
/// once the target drained it, and a burst of spawns piled onto a worker that had not).
pub(crate) fn enqueue_on(
    shared: &Shared,
    local: Option<&WorkerThread>,
    target: usize,
    t: &TaskRef,
    wf: WakeFlags,
) {
    let spawn = wf.contains(WakeFlags::FORK);
    let w = &shared.workers[target];
    let local_idx = local.map(|wt| wt.index);
    let here = local.filter(|wt| wt.index == target);
    // `ttwu_queue_cond` for a wakeup; a spawn is activated under the target's lock
    // (`wake_up_new_task`). Mutant `spawn_counted_late` (runtime/tests/mutants.sh): a spawn
    // to another worker through its wakelist, counted there only once drained.
    let wakelist = here.is_none()
        && shared.features.is_enabled(Feature::TtwuQueue)
        && if spawn {
            cfg!(lagom_mutant = "spawn_counted_late")
        } else {
            ttwu_queue_cond(
                &shared.cpus,
                shared.features,
                local_idx,
                target,
                w.nr_running.load(Ordering::Relaxed),
            )
        };
    trace::enqueue(shared, t, local_idx, target, wf, wakelist);
    if spawn {
        w.stats.inc(&w.stats.spawns);
    }
    if let Some(wt) = here {
        let now = wt.sched_now();
        let mut rq = w.rq.lock();
        wt.exclude_host_stall(&mut rq, now);
        let wf = activation_flags(ActivatePath::Direct, wf);
        // SAFETY: `t` is new or claimed, and in its registry (`tcb/queued.rs`).
        unsafe { activate(w, &mut rq, t, now, wf) };
        if !spawn {
            w.stats.inc_owned(&w.stats.wakeups_local);
        }
        crate::locking::probe::probe!("wake/queue: enqueued on the waker's own worker");
    } else if wakelist {
        crate::locking::probe::probe!("wake/queue: enqueued through the target's wakelist");
        if !spawn {
            w.stats.inc(&w.stats.wakeups_queued);
        }
        let flags = activation_flags(ActivatePath::Wakelist, wf);
        // SAFETY: `t` is new or claimed (the caller's), so alive in its registry.
        unsafe { queue_wakelist(shared, target, t, flags) };
    } else {
        crate::locking::probe::probe!("wake/queue: enqueued under the target's lock");
        let now = crate::sys::time::sched_clock();
        {
            let mut rq = w.rq.lock();
            let wf = activation_flags(ActivatePath::Direct, wf);
            // SAFETY: as above.
            unsafe { activate(w, &mut rq, t, now, wf) };
        }
        if !spawn {
            w.stats.inc(&w.stats.wakeups_remote);
        }
        // Mutant `remote_enqueue_no_kick` (loom model `idle_worker`): no kick after it.
        if !cfg!(lagom_mutant = "remote_enqueue_no_kick") && w.kick.kick() {
            crate::locking::probe::probe!(
                "wake/queue: a locked remote enqueue kicks an idle worker"
            );
            w.stats.inc(&w.stats.kicks);
        }
    }
}

/// Pushes `t` on worker `cpu`'s wakelist and kicks it if it is idle, with `flags` travelling
/// with the entry (`Task::wake_flags`, written before the push): for a wakeup, the
/// activation's flags (`activation_flags(Wakelist, ..)`: `WF_MIGRATED` or nothing, the
/// kernel's `sched_remote_wakeup`); for a delayed wakeup (`wake_delayed`), the waker's
/// flags, with which the owner selects a CPU. The entry borrows the registry's reference, as
/// a runqueue payload does (`tcb/queued.rs`): no count changes, so a cross-worker wakeup
/// does not move the `Arc`'s count between the two workers' caches.
///
/// # Safety
/// `t` is claimed (or new) and on no wakelist, and stays in its registry (or, in a loom
/// model, the model's hands) until the drain that takes it has activated it: a claimed or new
/// task is not dead, and leaves its registry only after it ran to its end or at shutdown,
/// which empties the wakelists first (`tcb/queued.rs`).
pub(super) unsafe fn queue_wakelist(shared: &Shared, cpu: usize, t: &TaskRef, flags: WakeFlags) {
    let w = &shared.workers[cpu];
    // Published by the push's Release (`LList::push`), read after the drain's take.
    t.wake_flags.store(flags.bits(), Ordering::Relaxed);
    // SAFETY: the task is claimed (or new) and on no list: this waker has it until the
    // owner's take_all, and the registry keeps it alive meanwhile (the caller's contract).
    unsafe { w.wakelist.push(NonNull::from(&**t)) };
    // After the push: the running task's next `cond_resched` drains (`locking/resched.rs`).
    w.resched.set_wake_pending();
    // Mutant `ttwu_queue_no_kick` (loom model `idle_worker`): the push without its kick.
    if !cfg!(lagom_mutant = "ttwu_queue_no_kick") && w.kick.kick() {
        crate::locking::probe::probe!("wake/queue: a wakelist push kicks an idle worker");
        w.stats.inc(&w.stats.kicks);
    }
}

/// Takes every wakelist entry of worker `me` and activates it on `rq` (the kernel's
/// `sched_ttwu_pending`). The caller holds that runqueue's lock.
///
/// A delayed wakeup (TTWU_QUEUE_DELAYED, the RFC's `ttwu_delayed`) is still queued here
/// unless a pick finished its dequeue meanwhile: its dequeue is finished now, a CPU is
/// selected for it as for any wakeup (the waker's CPU recorded in `wake_cpu`), and it is
/// activated here or forwarded to the chosen worker's wakelist (never under another lock:
/// this one is held). If balancing moved the delayed task to another worker meanwhile, the
/// entry is forwarded there (the chase, `sched/balance.rs`).
#[inline]
pub(crate) fn drain(shared: &Shared, me: usize, rq: &mut RunQueue<QueuedTask>, now: u64) {
    // Look before taking: most drains find the list empty, and the swap is a locked
    // instruction. An entry pushed after this look waits for the next drain (or the idle
    // re-check), as one pushed just after the swap would. The look is inlined into the
    // caller; the rest is out of line. The wakelist's bit in the resched word is cleared
    // first (`locking/resched.rs`): a push after the clear sets it again.
    let w = &shared.workers[me];
    #[cfg(not(lagom_mutant = "wake_pending_cleared_late"))]
    w.resched.take(WAKE_PENDING);
    if !w.wakelist.is_empty() {
        drain_pending(shared, me, rq, now);
    }
    // Mutant `wake_pending_cleared_late` (loom model `resched_word`): the bit cleared after
    // the take, wiping a push that came between them.
    #[cfg(lagom_mutant = "wake_pending_cleared_late")]
    w.resched.take(WAKE_PENDING);
}

/// The body of [`drain`] once the list was seen non-empty.
#[inline(never)]
fn drain_pending(shared: &Shared, me: usize, rq: &mut RunQueue<QueuedTask>, now: u64) {
    let w = &shared.workers[me];
    for p in w.wakelist.take_all() {
        crate::locking::probe::probe!("wake/queue: the drain takes an entry");
        // SAFETY: pushed by `queue_wakelist` from a live `TaskRef`, which its registry keeps
        // alive until it is activated (`tcb/queued.rs`). The entry owns no count: the `Arc`
        // rebuilt here is never dropped (`ManuallyDrop`).
        let t = ManuallyDrop::new(unsafe { Arc::from_raw(p.as_ptr().cast_const()) });
        if t.wake_delayed.swap(false, Ordering::Relaxed) {
            // Still queued (delayed) unless a pick finished the dequeue after the waker saw
            // `sched_delayed` (loom model `delayed_wakeup`, mutant `drain_delayed_no_recheck`).
            // Acquire: that pick may have run on another worker, after a balancer moved the
            // task there; its entity store must be visible before `activate` reads it here
            // (loom model `migration_chase_busy_new_owner`, mutant `drain_on_rq_relaxed`).
            #[cfg(not(lagom_mutant = "drain_on_rq_relaxed"))]
            let queued = t.on_rq.load(Ordering::Acquire);
            #[cfg(lagom_mutant = "drain_on_rq_relaxed")]
            let queued = t.on_rq.load(Ordering::Relaxed);
            // Queued, but maybe no longer here: the periodic balancer may have moved the
            // delayed task (it changes `cpu` under both locks, this one included). Chase
            // after it: forward the entry to its owner, which repeats this under its own
            // lock (loom model `migration_chase`, mutant `drain_no_chase`).
            let owner = t.cpu.load(Ordering::Relaxed);
            #[cfg(lagom_mutant = "drain_no_chase")]
            let owner = me;
            if queued && owner != me {
                crate::locking::probe::probe!("wake/queue: the drain chases a moved delayed task");
                t.wake_delayed.store(true, Ordering::Relaxed);
                w.stats.inc(&w.stats.wakeups_chased);
                let flags = WakeFlags::from_bits(t.wake_flags.load(Ordering::Relaxed));
                // SAFETY: the entry's task is claimed and alive (above); it moves lists.
                unsafe { queue_wakelist(shared, owner, &t, flags) };
                continue;
            }
            #[cfg(lagom_mutant = "drain_delayed_no_recheck")]
            let queued = true;
            if queued {
                crate::locking::probe::probe!("wake/queue: the drain finishes a delayed dequeue");
                // SAFETY: the task is queued on this runqueue, whose lock is held.
                let h = unsafe { t.sched(|s| s.handle) }.expect("queued task has a handle");
                let (se, p) = rq.finish_delayed(h, now);
                finished_delayed(w, se, p);
                w.publish(rq);
            }
            // A task that may not migrate was never moved: it last ran here.
            debug_assert!(t.migratable || owner == me, "lagom: a pinned task moved");
            let waker = t.wake_cpu.load(Ordering::Relaxed);
            // The entry's flags (`WF_TTWU`): a delayed wakee has run, last here, so it moves
            // only if it may (the migration contract, `select.rs`). No waker task runs here
            // to record the wakee.
            let wf = WakeFlags::from_bits(t.wake_flags.load(Ordering::Relaxed));
            let (target, added) = select_cpu(
                shared,
                &t,
                me,
                (waker < shared.workers.len()).then_some(waker),
                None,
                wf,
            );
            if target != me {
                crate::locking::probe::probe!(
                    "wake/queue: the drain forwards a delayed wakeup to another worker"
                );
                trace::migrate(shared, &t, me, target, MigrateCause::Wakeup);
                t.cpu.store(target, Ordering::Relaxed);
                w.stats.inc(&w.stats.runnable_migrated);
                let flags = activation_flags(ActivatePath::Wakelist, WakeFlags::MIGRATED);
                // SAFETY: as above.
                unsafe { queue_wakelist(shared, target, &t, flags) };
                continue;
            }
            // Mutant `drain_takeback_stale_cpu`: the task is activated here with `cpu` still
            // naming the worker it was moved to.
            if owner != me && !cfg!(lagom_mutant = "drain_takeback_stale_cpu") {
                // The balancer moved the delayed task to `owner` and a pick there finished its
                // dequeue: it is activated here, so its `cpu` must name this worker again, as
                // the simulator's drain sets it (loom model `migration_chase_busy_new_owner`,
                // where the new owner is busy and selection keeps the task here).
                crate::locking::probe::probe!(
                    "wake/queue: the drain takes back a delayed task moved and dequeued elsewhere"
                );
                t.cpu.store(me, Ordering::Relaxed);
            }
            let wf = activation_flags(ActivatePath::Direct, wf | added);
            // SAFETY: as below.
            unsafe { activate(w, rq, &t, now, wf) };
            continue;
        }
        // The entry's flags (`WF_MIGRATED` or nothing: `sched_ttwu_pending`).
        let wf = WakeFlags::from_bits(t.wake_flags.load(Ordering::Relaxed));
        let wf = activation_flags(ActivatePath::Wakelist, wf);
        // SAFETY: a woken task is alive and in its registry (it is not dead: a dead task is
        // never claimed), which outlives its time in the runqueue (`tcb/queued.rs`).
        unsafe { activate(w, rq, &t, now, wf) };
    }
}
