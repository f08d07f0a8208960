//! A task's exit (the kernel's `do_exit` and its final `__schedule`), and the freeing of the
//! dead task on the next context (`finish_task_switch`'s `put_task_stack` for `TASK_DEAD`).
//!
//! Invariant: *a dead task's fiber and stack are freed only once a worker runs on another
//! context, never while the task's own stack is in use, and its registry reference is dropped
//! last.*
//!
//! ## Steps (`exit_current`, on the ending task's own stack)
//!
//! The fiber's exit hook runs once the closure has ended and its outcome is recorded:
//!
//! 1. fire expired timers (as `schedule()` does);
//! 2. under the runqueue lock, dequeue the task (`DequeueKind::Dead`: never delayed, the
//!    kernel's delayed dequeue finished at once in `task_dead_fair`), store `DEAD` and
//!    `on_rq = false` (Release);
//! 3. still under the lock, deliver the outcome (`Complete::complete`, which returns the
//!    registered joiner) and wake the joiner with `try_to_wake_up_held`: a joiner that lands
//!    on this worker (requeued in place while it sleeps delayed here, or enqueued here) is
//!    woken under the lock already held; any other wakeup (another worker's queue or lock, a
//!    joiner still `on_cpu` elsewhere, a thread parker) releases the lock first and takes the
//!    usual path, and the lock is then taken again;
//! 4. drain the wakelist and pick the next task (marking it `on_cpu`);
//!    record the dead task in `WorkerThread::dead` and as `prev`, release the lock, and return
//!    the next task's context, or the idle context if nothing is runnable: the fiber switches
//!    there straight away. The dead task's registers are saved into its own context, which
//!    nobody resumes.
//!
//! The hook returns the context instead of switching itself so that the switch is made from
//! `fiber_main`, one call deep on the task's stack as the fiber's old switch to its parent
//! was: made from inside the hook, one call deeper, the switch made every spawn+join slower,
//! by return mispredictions as far as the profile tells (`docs/src/lab/mechanism.md`).
//!
//! The outcome is delivered after the dequeue, not before it: delivering first saves a lock
//! round trip but made spawn+join slower (`examples/spawn_join`), because the joiner then
//! re-enters the tree while the ending task is still queued, which makes the ending task's
//! dequeue dearer (the profile shows its delayed dequeue being finished). So the order is
//! dequeue → wake joiner → pick, in one lock section in the usual (same-worker) case.
//!
//! On the next context, `finish_task_switch` clears the dead task's `on_cpu` as for any
//! previous task and then calls [`put_dead`], which takes the fiber out of the task, gives the
//! stack back to this worker's pool, removes the task from its registry and drops that last
//! owning reference (the join handle may still hold one). A task whose home is another worker
//! is handed to that worker's dead list instead, fiber and all, and its home frees the fiber
//! into its own pool and removes the task (`tcb/registry.rs`). The idle context is kept for when
//! nothing is runnable; before this path existed every exit went through it: a second switch
//! per task.
//!
//! Loom: `exit_recycle` (`loom-tests/tests/exit_recycle.rs`) runs the exit hook and
//! `finish_task_switch` with `put_dead` (both branches, and the home's reap) against the
//! joiner's join, its recycle of the task's allocation and the next spawn into it (mutant
//! `recycle_no_unique_check`); `exit_wake` the joiner's wakeup under the held lock. A
//! reordering that writes the task after the registry's reference is dropped is a plain
//! use-after-free, which loom cannot report (it does not model the `Arc` owning a task):
//! that order is kept by the invariant above, not by a model.

use core::ptr;

use super::schedule::{pick, prepare_switch_on};
use super::timer;
use crate::JoinError;
use crate::arch::Context;
use crate::locking::atomic::Ordering;
use crate::tcb::{DEAD, FOREIGN};
use crate::trace::SwitchReason;
use crate::wake::{drain, unpark_held};
use crate::worker::{QueuedTask, Task, Worker, WorkerThread, local, trace};
use lagom_policy::{DequeueKind, Dequeued, RunQueue};

/// The exit hook of every task's fiber (module doc): dequeues the task, delivers its outcome,
/// picks the next one and returns the context the fiber then switches to for the last time.
pub(crate) fn exit_current() -> *const Context {
    let wt = local().expect("lagom: a task ended outside a worker");
    let prev = wt.curr.get();
    assert!(!prev.is_null(), "lagom: exit from the idle task");
    // SAFETY: the registry keeps the running task alive until `put_dead` on the next context.
    let t = unsafe { &*prev };
    // SAFETY: the running task's scheduling part belongs to this worker; the fiber's outcome
    // was recorded before the hook was called and the fiber touches it no more.
    let outcome = unsafe { t.sched(|s| s.fiber.as_mut().and_then(|f| f.take_outcome())) };
    exit_on(wt, outcome)
}

/// [`exit_current`] on worker thread `wt`, whose running task ended with `outcome` (its
/// fiber's: `Ok(())` or `None` if the closure returned and stored its value, `Err` if it
/// panicked or was cancelled). Everything of the exit but the look-up of the thread and the
/// fiber: a loom model runs it (`lagom::model`) for a task whose fiber never ran.
#[inline(always)]
pub(crate) fn exit_on(wt: &WorkerThread, outcome: Option<Result<(), JoinError>>) -> *const Context {
    timer::fire(wt);
    let now = crate::sys::time::sched_clock();
    exit_at(wt, outcome, now).0
}

/// How the exit woke the task's joiner (returned by [`exit_at`] for the loom models, which
/// tell the paths apart; the runtime ignores it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinerWake {
    /// No joiner was registered.
    None,
    /// Woken with the runqueue lock still held (or nothing to do: it was not blocked).
    Held,
    /// The wakeup released the lock on its way; the exit took it again.
    Released,
}

/// [`exit_on`] after the timers, at scheduler-clock time `now` (steps 2–4 of the module
/// doc); also returns how the joiner was woken. Split out so that the loom models that pass
/// their own times run it (`lagom::model`'s `Model::exit`).
#[inline(always)]
pub(crate) fn exit_at(
    wt: &WorkerThread,
    outcome: Option<Result<(), JoinError>>,
    now: u64,
) -> (*const Context, JoinerWake) {
    let prev = wt.curr.get();
    assert!(!prev.is_null(), "lagom: exit from the idle task");
    // SAFETY: as in `exit_current`.
    let t = unsafe { &*prev };
    let w = wt.worker();
    let mut rq = w.rq.lock();
    wt.exclude_host_stall(&mut rq, now);
    dequeue_dead(w, &mut rq, t, now);
    // Deliver the outcome and wake the joiner, in the same lock section when the joiner
    // lands on this worker (step 3).
    let joiner = t.completion.complete(outcome.and_then(Result::err));
    crate::locking::probe::probe!("sched/exit: exit_current runs");
    let (mut rq, how) = match joiner {
        Some(j) => {
            wt.clock.set(now);
            let held = unpark_held(&j, wt, rq);
            wt.clock.set(0);
            // Dropping the waiter's reference never frees the joiner, which its registry
            // keeps alive while it waits.
            match held {
                Some(rq) => (rq, JoinerWake::Held),
                None => (w.rq.lock(), JoinerWake::Released),
            }
        }
        None => (rq, JoinerWake::None),
    };
    drain(&wt.shared, wt.index, &mut rq, now);
    // The stall monitor's evidence of progress (`monitor.rs`): an exit is a scheduling call.
    w.last_point.store(now, Ordering::Relaxed);
    let next = pick(w, &mut rq, now);
    w.stats.inc_owned(&w.stats.exits);
    // SAFETY: `next` is null or was picked from the runqueue: its registry keeps it alive (`tcb/queued.rs`).
    let next_t = unsafe { next.as_ref() };
    match next_t {
        Some(n) => {
            prepare_switch_on(wt, n);
            wt.tick_rearm(&rq);
        }
        None => wt.clear_signal_task(),
    }
    trace::switch(wt, Some(t), next_t, SwitchReason::Exit);
    wt.prev.set(prev);
    wt.dead.set(prev);
    wt.curr.set(next);
    drop(rq);
    // Suspended: a task picked under the lock whose previous switch-out completed, or this
    // thread's idle context, suspended while any task runs here.
    (next_t.map_or(wt.idle_ctx(), |n| n.ctx), how)
}

/// The ending task `t`, running on worker `w` whose runqueue lock the caller holds as `rq`,
/// leaves the runqueue for good (step 2): `DEAD`, dequeued at once (`DequeueKind::Dead`, never
/// delayed), `on_rq = false` (Release), and the worker's load published.
fn dequeue_dead(w: &Worker, rq: &mut RunQueue<QueuedTask>, t: &Task, now: u64) {
    // SAFETY: the running task's scheduling part belongs to this worker (it runs here).
    let h = unsafe { t.sched(|s| s.handle.take()) }.expect("lagom: ending task not queued");
    t.state.store(DEAD, Ordering::Relaxed);
    let removed = rq.dequeue(h, DequeueKind::Dead, now);
    debug_assert!(
        matches!(removed, Dequeued::Removed { .. }),
        "a dead task is never delayed"
    );
    t.on_rq.store(false, Ordering::Release);
    w.publish(rq);
    crate::locking::probe::probe!("sched/exit: the dead task leaves its runqueue");
}

/// Frees the task that died in the switch that just completed, if any (module doc); called by
/// `finish_task_switch` on the next context, after the dead task's `on_cpu` is clear.
pub(crate) fn put_dead(wt: &WorkerThread) {
    let dead = wt.dead.replace(ptr::null());
    if dead.is_null() {
        return;
    }
    // SAFETY: the registry keeps the dead task alive until it is removed below.
    let t: &Task = unsafe { &*dead };
    // Its switch-out is complete (`finish_task_switch` cleared `on_cpu` first): freed or
    // handed on now, nothing writes it afterwards.
    t.check_freeable("put_dead");
    let home = t.reg_home.load(Ordering::Relaxed);
    let slot = t.reg_slot.load(Ordering::Relaxed);
    let reg = &wt.shared.workers[home].tasks;
    if home != wt.index && slot & FOREIGN == 0 {
        crate::locking::probe::probe!("sched/exit: put_dead hands the task to its home worker");
        // Another worker's own task: its home frees the fiber, keeps the stack in its own
        // pool and removes the task (`tcb/registry.rs`).
        // SAFETY: the task is dead, off every queue and CPU, on no list (a dead task cannot
        // be claimed, so it is on no wakelist), and not touched below.
        if unsafe { reg.push_dead(t) } {
            wt.shared.workers[home].kick.kick();
        }
        return;
    }
    // SAFETY: the task is dead, off every queue and CPU: only this worker references its
    // scheduling part.
    let fiber = unsafe { t.sched(|s| s.fiber.take()) };
    if let Some(stack) = fiber.and_then(|f| f.into_stack()) {
        wt.pool.borrow_mut().put(stack);
    }
    crate::locking::probe::probe!("sched/exit: put_dead frees the task");
    // SAFETY: an own slot of this worker (this thread is its home), or a foreign one.
    let me = unsafe { reg.remove(slot) };
    // The registry's reference, dropped last: it may be the one that frees `t`, or leave a
    // joiner that holds the only other one free to recycle the allocation (loom model
    // `exit_recycle`): nothing touches `t` after this line.
    drop(me);
}
