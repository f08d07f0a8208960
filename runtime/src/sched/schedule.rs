//! `schedule()` (the kernel's `__schedule`) and `finish_task_switch()`.
//!
//! ## Steps
//!
//! 1. fire expired timers (wakeups, outside the lock) and, when its interval has passed, run
//!    the periodic load balance (`balance.rs`, which takes the locks it needs);
//! 2. take the runqueue lock; drain the wakelist (`sched_ttwu_pending`: each entry is
//!    activated here, with its owner already set to this worker by its waker);
//! 3. `update_curr`; if the previous task is not `RUNNING` (it blocks) dequeue it with
//!    `DequeueKind::Sleep`: `Delayed` keeps it queued (DELAY_DEQUEUE); `Removed` stores its
//!    entity back into the task and publishes `on_rq = false` with Release (O2);
//! 4. pick with `pick_next`; a `FinishedDelayed` publishes that task's `on_rq = false` and picks
//!    again; nothing runnable means the idle context;
//! 5. mark the next task `on_cpu` (under the lock), release the lock, **then** switch;
//! 6. on the next context's stack, `finish_task_switch` clears the previous task's `on_cpu`
//!    with Release.
//!
//! ## Why the lock is released before the switch
//!
//! The kernel holds the runqueue lock across `context_switch` and releases it in
//! `finish_task_switch` on the next task's stack. lagom releases it just before `switch`
//! instead: the guard then lives and dies in one frame, and nothing that a waker or the
//! balancer can do in the window needs the lock to exclude it, because `on_cpu` carries the
//! weight. In the window the previous task is still `on_cpu`: a waker that finds it dequeued
//! waits for `on_cpu` to clear (or, with TTWU_QUEUE_ON_CPU, queues it on this worker's
//! wakelist, drained only after the switch has completed, by program order: model 6); the balancer
//! skips tasks that are `on_cpu`; and a task still queued (preempted) can only be picked again
//! by this worker, after the switch. The cost is the Acquire/Release pair on `on_cpu`, which
//! the wakeup path needs anyway.
//!
//! A task that ends does not come back through `schedule()`: its fiber's exit hook dequeues it
//! and switches straight to the next task (`exit.rs`); `finish_task_switch` frees it there.
//!
//! Checked by the loom models `lost_wakeup` and `double_wake` (`loom-tests/tests/ttwu.rs`),
//! which run steps 2–5 (`schedule_prepare_at`) and `finish_task_switch_on` against the real
//! wakeup path (mutant `finish_relaxed_on_cpu`), and by `delayed_wakeup` and
//! `delayed_wakeup_during_block` (`loom-tests/tests/delayed.rs`), where the task blocks
//! delayed and a later pick finishes its dequeue. Model 6, `on_cpu_handoff` and
//! `on_cpu_handoff_busy` (`loom-tests/tests/on_cpu.rs`), plays both halves of the switch —
//! this worker's switch-out up to `clear_on_cpu`, and the switch-in (`drain`, `pick`,
//! `prepare_switch`, the restore) on whichever worker picks the woken task — and checks that
//! the task never runs on two workers at once (mutants `ttwu_on_cpu_wrong_cpu`,
//! `ttwu_no_on_cpu_wait`). The migration chase is model 7 (`loom-tests/tests/migrate.rs`).
//! The models of issues #15 and #21 (`idle_worker`, `two_wakers`, `timer_unpark`,
//! `balance_wake`, `exit_recycle`, `blocking`, `shutdown_sweep`) run the whole of
//! `schedule_prepare` (timers and balance tick included) through `lagom::model::ModelWorker`.

use core::ptr;

use super::{balance_tick, timer};
use crate::arch::{Context, SignalStack, switch};
use crate::locking::atomic::Ordering;
use crate::locking::resched::NEED_RESCHED;
use crate::tcb::RUNNING;
use crate::trace::SwitchReason;
use crate::wake::{drain, finished_delayed};
use crate::worker::{QueuedTask, Task, Worker, WorkerThread, local, trace};
use lagom_policy::{DequeueKind, Dequeued, Pick, RunQueue};

/// Picks the next task (`pick_next_task`), finishing delayed dequeues on the way.
pub(crate) fn pick(w: &Worker, rq: &mut RunQueue<QueuedTask>, now: u64) -> *const Task {
    let next = loop {
        match rq.pick_next(now) {
            Pick::Run(h) => break rq.payload(h).as_ptr(),
            Pick::FinishedDelayed { se, payload } => {
                crate::locking::probe::probe!(
                    "sched/schedule: the pick finishes a delayed dequeue"
                );
                finished_delayed(w, se, payload)
            }
            Pick::Idle => break ptr::null(),
        }
    };
    w.resched.take(NEED_RESCHED);
    w.publish(rq);
    prefetch_upcoming(rq);
    next
}

/// Lines at and below a task's saved context that [`prefetch_upcoming`] fetches: the fiber's
/// bookkeeping and the frames of a task parked a few calls deep (about 1 KiB from the top of
/// the stack for a task blocked in `sleep`); more lines did not help (the book's
/// `docs/src/lab/mechanism.md`).
const RESUME_PREFETCH_LINES: usize = 16;

/// The runqueue length above which [`prefetch_upcoming`] gives its hints.
const RESUME_PREFETCH_MIN_QUEUED: usize = 16;

/// Hints the CPU to fetch what the next switch will touch (no effect on any decision): the
/// struct of the task that a pick now would choose ([`RunQueue::predicted_payload`]) and the
/// top of its stack (its saved context and the frames below it). Switching into a task whose
/// stack was last touched thousands of switches ago stalls on those lines (and their page's
/// TLB entry); fetched a pick ahead, the miss overlaps the current task's run. The context
/// pointer is stable for the task's life, so reading it races with nothing; the stack itself
/// is only prefetched, never read.
///
/// The prediction is the pick's own rule on the tree as it stands (the running entity left
/// out: it is the one about to switch away), so only what is enqueued before the next pick
/// can change it. The leftmost entity (the earliest deadline) would be cheaper to find but
/// is the next pick far less often when many sleepers wake (`docs/src/lab/mechanism.md`).
///
/// Only on a runqueue of more than [`RESUME_PREFETCH_MIN_QUEUED`] entities: the stacks of a few
/// tasks stay in the caches, and the hints would only cost instructions.
#[inline]
fn prefetch_upcoming(rq: &RunQueue<QueuedTask>) {
    use lagom_policy::hint::{prefetch, prefetch_line, prefetch_lines_below};
    if rq.nr_queued() > RESUME_PREFETCH_MIN_QUEUED
        && let Some(next) = rq.predicted_payload()
    {
        // The payload's copy of the context pointer (`tcb/queued.rs`): no load from the cold
        // task, so the task's lines and its stack's are fetched at once. The line holding the
        // context and those below, then the task.
        let ctx = next.ctx_hint();
        prefetch_line(ctx);
        prefetch_lines_below(ctx, RESUME_PREFETCH_LINES - 1);
        prefetch::<Task>(next);
    }
}

/// Marks `next`, just picked by worker `me`, running there: `on_cpu` (under the runqueue
/// lock, which the caller holds), its fiber's parent link to `parent` (worker `me`'s idle
/// context) and the overflow handler's current fiber (`signals`, worker `me`'s). The switch
/// into `next` follows once the lock is released; `next`'s previous switch-out has completed
/// (whoever queued it here saw its `on_cpu` clear, or this very worker switched away from it,
/// or, with TTWU_QUEUE_ON_CPU, the wakeup was handed to that worker's wakelist, which it drains
/// only after the switch). Loom model `on_cpu_handoff` checks that hand-off.
///
/// Every resume of a task begins here, so this is where the migration contract
/// (`wake/select.rs`) is checked: a started task that may not migrate and was picked by a
/// worker other than the one it last ran on means that some path broke it, and resuming it
/// would be the undefined behaviour the contract exists to prevent; the process aborts
/// instead (under loom: the model panics). The check sits on the branch a worker change
/// takes anyway, so it costs nothing when the task stays.
pub(crate) fn prepare_switch(
    next: &Task,
    me: usize,
    parent: *mut Context,
    signals: Option<&SignalStack>,
) {
    next.on_cpu.store(true, Ordering::Relaxed);
    // SAFETY: `next` was picked under worker `me`'s lock (held by the caller) and is not
    // running anywhere: its previous switch-out completed (see above).
    unsafe {
        next.sched(|s| {
            if s.parent_worker != me {
                if s.started() && !next.migratable {
                    contract_broken(next, s.parent_worker, me);
                }
                s.parent_worker = me;
                if let Some(f) = s.fiber.as_mut() {
                    f.set_parent(parent);
                }
            }
            if let Some(sig) = signals {
                sig.set_current(s.fiber.as_ref().map_or(ptr::null(), |f| f.info()));
            }
        })
    };
}

/// A started task that may not migrate was about to resume on worker `to` after running on
/// `from` ([`prepare_switch`]): a bug of lagom's, reported and never resumed.
#[cold]
#[inline(never)]
fn contract_broken(t: &Task, from: usize, to: usize) -> ! {
    let msg = alloc::format!(
        "lagom: internal error: task {} last ran on worker {from} and may not migrate (the \
         migration contract), but worker {to} picked it; aborting instead of resuming it there\n",
        t.id
    );
    #[cfg(loom)]
    panic!("{msg}");
    #[cfg(not(loom))]
    {
        crate::sys::signal::write_stderr(msg.as_bytes());
        crate::sys::signal::abort()
    }
}

/// Marks `next`, just picked by worker thread `wt`'s worker, running there
/// ([`prepare_switch`] with that worker's idle context and overflow stack).
pub(crate) fn prepare_switch_on(wt: &WorkerThread, next: &Task) {
    // Without a tick timer, the task switched in runs its first `cond_resched` in full
    // (`task/current.rs`).
    wt.next_tick.set(0);
    prepare_switch(next, wt.index, wt.idle_ctx(), wt.signals());
}

/// Why the running task calls `schedule`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// It announced a sleep (its state is not RUNNING, unless a waker already requeued it).
    Block,
    /// `yield_now`.
    Yield,
    /// need-resched or the tick: preempted.
    Preempt,
}

impl From<Reason> for SwitchReason {
    fn from(r: Reason) -> SwitchReason {
        match r {
            Reason::Block => SwitchReason::Block,
            Reason::Yield => SwitchReason::Yield,
            Reason::Preempt => SwitchReason::Preempt,
        }
    }
}

/// Which switch counter a switch away from the previous task belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SwitchKind {
    /// It blocked or yielded.
    Voluntary,
    /// It was preempted (need-resched or the tick).
    Involuntary,
}

/// Puts the previous (running) task back (`put_prev_task` and the sleep dequeue of
/// `__schedule`): a task that is not `RUNNING` is dequeued (`Sleep`; delayed or removed, the
/// latter publishing `on_rq = false` with Release, O2); a yielding task yields its request.
/// The caller holds `w`'s runqueue lock and runs `prev_t` on this worker. Returns the counter
/// that a switch away from it belongs to; the caller counts it only if the pick does switch
/// (as `__schedule` counts `nvcsw`/`nivcsw` only when `prev != next`): a reschedule that picks
/// the running task again switches nothing.
pub(crate) fn put_prev(
    w: &Worker,
    rq: &mut RunQueue<QueuedTask>,
    prev_t: &Task,
    reason: Reason,
    now: u64,
) -> SwitchKind {
    // SAFETY: the running task's scheduling part belongs to this worker (it runs here).
    let h = unsafe { prev_t.sched(|s| s.handle) }.expect("lagom: running task not queued");
    if prev_t.state.load(Ordering::Relaxed) != RUNNING {
        match rq.dequeue(h, DequeueKind::Sleep, now) {
            Dequeued::Delayed => {
                crate::locking::probe::probe!(
                    "sched/schedule: put_prev leaves a blocked task delayed"
                );
                // Release: a waker that reads it (Acquire) knows the task passed its block
                // decision.
                prev_t.sched_delayed.store(true, Ordering::Release);
                w.stats.inc_owned(&w.stats.delayed_dequeues);
            }
            Dequeued::Removed { se, .. } => {
                crate::locking::probe::probe!("sched/schedule: put_prev dequeues a blocked task");
                // SAFETY: as above.
                unsafe {
                    prev_t.sched(|s| {
                        s.se = se;
                        s.handle = None;
                    })
                };
                // O2: a waker that sees on_rq == false also sees the entity stored above,
                // and then waits for on_cpu (still true until finish_task_switch). In lagom
                // the on_cpu Release/Acquire pair alone would order the entity too (the waker
                // claims before it looks, and always waits for on_cpu or hands the task to
                // this very worker), so loom cannot break the model by weakening this store;
                // it stays Release as the kernel's, for readers that skip the on_cpu wait.
                prev_t.on_rq.store(false, Ordering::Release);
            }
        }
        SwitchKind::Voluntary
    } else if reason == Reason::Yield {
        crate::locking::probe::probe!("sched/schedule: put_prev yields");
        rq.yield_curr(now);
        SwitchKind::Voluntary
    } else {
        SwitchKind::Involuntary
    }
}

/// Switches away from the running task (which must be a task, not the idle context).
pub(crate) fn schedule(reason: Reason) {
    schedule_on(local().expect("lagom: schedule outside a worker"), reason);
}

/// [`schedule`] on the calling worker thread `wt`, which the caller has just looked up (and
/// not across a switch: a task may resume on another worker). A task that unwinds does not
/// switch: it holds the thread (`unwind.rs`).
fn schedule_on(wt: &WorkerThread, reason: Reason) {
    if super::unwind::thread_unwinding() {
        return super::unwind::hold(wt, reason);
    }
    schedule_switching(wt, reason);
}

/// [`schedule_on`] for a task that does not unwind: steps 1–6 of the module doc.
pub(super) fn schedule_switching(wt: &WorkerThread, reason: Reason) {
    let Some((prev_t, to)) = schedule_prepare(wt, reason) else {
        return;
    };
    // SAFETY: `prev_t.ctx` is the running task's own context; `to` is a suspended context
    // (a picked task whose previous switch-out completed, or this thread's idle context).
    unsafe { switch(prev_t.ctx, to) };
    finish_task_switch();
}

/// [`schedule_on`] up to the switch (steps 1–5 of the module doc): returns the running task
/// and the context to switch to from it, or `None` if the pick chose the running task again
/// (no switch). Split out so that a loom model runs it (`lagom::model`) and plays the switch.
pub(crate) fn schedule_prepare(wt: &WorkerThread, reason: Reason) -> Option<(&Task, *mut Context)> {
    timer::fire(wt);
    let now = crate::sys::time::sched_clock();
    schedule_prepare_at(wt, reason, now)
}

/// [`schedule_prepare`] after the timers, at scheduler-clock time `now`: the balance tick
/// and steps 2–5. Split out so that the loom models that pass their own times (the clock
/// stands still under loom) run it (`lagom::model`'s `Model::schedule_prev`).
#[inline(always)]
pub(crate) fn schedule_prepare_at(
    wt: &WorkerThread,
    reason: Reason,
    now: u64,
) -> Option<(&Task, *mut Context)> {
    let prev = wt.curr.get();
    assert!(!prev.is_null(), "lagom: schedule from the idle task");
    // SAFETY: the registry keeps the running task alive.
    let prev_t = unsafe { &*prev };
    balance_tick(wt, now);
    let w = wt.worker();
    // The stall monitor's evidence of progress (`monitor.rs`): the time this call read anyway.
    // Mutant `monitor_no_last_point` (runtime/tests/mutants.sh): a worker that blocks and
    // switches in lagom looks stuck to the monitor.
    #[cfg(not(lagom_mutant = "monitor_no_last_point"))]
    w.last_point.store(now, Ordering::Relaxed);
    if reason == Reason::Block {
        w.stats.inc_owned(&w.stats.blocks);
    }
    let mut rq = w.rq.lock();
    wt.exclude_host_stall(&mut rq, now);
    drain(&wt.shared, wt.index, &mut rq, now);
    rq.update_curr(now);
    let kind = put_prev(w, &mut rq, prev_t, reason, now);
    // ITMT active balance (`balance.rs`): a preempted or yielding task that an idle,
    // preferred worker asked for goes back into the tree and this worker switches to its
    // idle context; the move follows in `finish_task_switch`, once its registers are saved.
    let push = prev_t.state.load(Ordering::Relaxed) == RUNNING
        && super::balance::active_push_point(&wt.shared, wt.index, &mut rq, prev_t);
    let next = if push {
        rq.clear_need_resched();
        w.resched.take(NEED_RESCHED);
        w.publish(&rq);
        ptr::null()
    } else {
        pick(w, &mut rq, now)
    };
    if !next.is_null() {
        // The tick timer for the task that runs next (`worker/tick.rs`).
        wt.tick_rearm(&rq);
    }
    if next == prev {
        crate::locking::probe::probe!("sched/schedule: the pick chooses the running task again");
        return None;
    }
    w.stats.inc_owned(match kind {
        SwitchKind::Voluntary => &w.stats.switches_voluntary,
        SwitchKind::Involuntary => &w.stats.switches_involuntary,
    });
    if let Some(n) = (!next.is_null()).then(|| {
        // SAFETY: picked from the runqueue: its registry keeps it alive (`tcb/queued.rs`).
        unsafe { &*next }
    }) {
        crate::locking::probe::probe!("sched/schedule: switches to another task");
        prepare_switch_on(wt, n);
    } else {
        crate::locking::probe::probe!("sched/schedule: switches to the idle task");
        wt.clear_signal_task();
    }
    // SAFETY: `next` is null or was picked from the runqueue: its registry keeps it alive (`tcb/queued.rs`).
    trace::switch(wt, Some(prev_t), unsafe { next.as_ref() }, reason);
    wt.prev.set(prev);
    wt.curr.set(next);
    drop(rq);
    let to = if next.is_null() {
        wt.idle_ctx()
    } else {
        // SAFETY: as above.
        unsafe { (*next).ctx }
    };
    Some((prev_t, to))
}

/// Completes a switch on the new context's stack: clears the previous task's `on_cpu` with
/// Release, so that whoever observes it clear (Acquire) sees its saved registers and stack,
/// then frees the previous task if it died (`exit.rs`).
pub(crate) fn finish_task_switch() {
    let Some(wt) = local() else { return };
    finish_task_switch_on(wt);
}

/// [`finish_task_switch`] on worker thread `wt` (a loom model passes its own).
pub(crate) fn finish_task_switch_on(wt: &WorkerThread) {
    let prev = wt.prev.replace(ptr::null());
    if !prev.is_null() {
        crate::locking::probe::probe!("sched/schedule: finish_task_switch clears on_cpu");
        // SAFETY: the registry keeps the task alive until it is freed, which happens only on
        // the idle context after its on_cpu is clear.
        let push = super::balance::active_push_pending(wt, unsafe { &*prev });
        // Mutant `put_dead_before_clear_on_cpu`: the dead task is freed before its `on_cpu`
        // is cleared, a write after the free (`Task::check_freeable` in `put_dead` fails;
        // memcheck reports the write, `.ci/memcheck.sh`).
        #[cfg(lagom_mutant = "put_dead_before_clear_on_cpu")]
        super::exit::put_dead(wt);
        // SAFETY: as above.
        clear_on_cpu(unsafe { &*prev });
        if let Some(h) = push {
            super::balance::active_push_switched_out(wt, prev, h);
        }
    }
    super::exit::put_dead(wt);
    wt.speak_for_tasks();
}

/// The switch away from `t` is complete: publish it (Release; O2/O3).
pub(crate) fn clear_on_cpu(t: &Task) {
    #[cfg(not(lagom_mutant = "finish_relaxed_on_cpu"))]
    t.on_cpu.store(false, Ordering::Release);
    #[cfg(lagom_mutant = "finish_relaxed_on_cpu")]
    t.on_cpu.store(false, Ordering::Relaxed);
}

/// The running task of `wt`, which unwinds and which the shutdown abandons (`unwind.rs`),
/// leaves the worker's thread for good: it is dequeued as a blocked task and the thread
/// switches to its idle context, marked stranded, where the idle loop ends (`idle.rs`): the
/// thread's panic count stays raised, so it runs no task again. The shutdown frees what is
/// left on this worker without unwinding it.
pub(crate) fn strand(wt: &WorkerThread) -> ! {
    let prev = wt.curr.get();
    assert!(!prev.is_null(), "lagom: strand from the idle task");
    // SAFETY: the running task, alive in its registry while it runs.
    let prev_t = unsafe { &*prev };
    wt.stranded.set(true);
    let w = wt.worker();
    let now = crate::sys::time::sched_clock();
    let mut rq = w.rq.lock();
    rq.update_curr(now);
    let _ = put_prev(w, &mut rq, prev_t, Reason::Block, now);
    w.publish(&rq);
    wt.clear_signal_task();
    trace::switch(wt, Some(prev_t), None, Reason::Block);
    wt.prev.set(prev);
    wt.curr.set(ptr::null());
    drop(rq);
    // SAFETY: `prev_t.ctx` is the running task's own context; the idle context is this
    // thread's, suspended in its loop.
    unsafe { switch(prev_t.ctx, wt.idle_ctx()) };
    unreachable!("lagom: a stranded task was resumed")
}

/// The running task blocks (its state is set): schedule away until woken. `wt` is the
/// calling worker thread if the caller has it at hand (looked up since its last switch).
pub(crate) fn block_current(wt: Option<&WorkerThread>) {
    match wt {
        Some(wt) => schedule_on(wt, Reason::Block),
        None => schedule(Reason::Block),
    }
}
