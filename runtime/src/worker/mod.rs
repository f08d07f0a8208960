//! The per-CPU worker: its runqueue, wakelist, kick word and counters (shared with wakers), and
//! the thread-local part that only its OS thread touches (idle context, running task, stack
//! pool, timers). `schedule()` and `finish_task_switch()` live here; the idle loop, balancing
//! and timers in their own files.
//!
//! Invariant: *a task's registers are saved before any other worker can observe its `on_cpu`
//! cleared, and a worker only switches to a task it picked under its own runqueue lock.*
//!
//! ## `schedule()` (the kernel's `__schedule`)
//!
//! 1. fire expired timers (wakeups, outside the lock);
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
//! wakelist, drained only after the switch has completed, by program order); the balancer
//! skips tasks that are `on_cpu`; and a task still queued (preempted) can only be picked again
//! by this worker, after the switch. The cost is the Acquire/Release pair on `on_cpu`, which
//! the wakeup path needs anyway.
//!
//! A task that ends does not come back through `schedule()`: its fiber switches to its parent
//! context, the worker's idle context, which frees it (`idle.rs`).
//!
//! Checked by the loom models `lost_wakeup` and `double_wake` (`loom-tests/tests/ttwu.rs`),
//! which run `put_prev`, `pick`, `drain` and `clear_on_cpu` against the real wakeup path
//! (mutant `finish_relaxed_on_cpu`). The on_cpu hand-off with a real switch (model 6) and the
//! migration chase (model 7) are still to be written (issue #6).

mod idle;
mod stats;
mod timer;

pub(crate) use idle::worker_main;
pub(crate) use stats::Counters;
pub use stats::{Stats, WorkerStats};

use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::ptr;

use crate::arch::{Context, SignalStack, StackPool, switch};
use crate::policy::{
    DequeueKind, Dequeued, EnqueueKind, Features, Handle, Pick, RqConfig, RunQueue, WakeFlags,
    Wakeup,
};
use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::kick::Kick;
use crate::sync::llist::LList;
use crate::sync::lock::Lock;
use crate::sys::thread::Key;
use crate::task::{RUNNING, Task, TaskRef};

/// The part of a worker that other threads reach: runqueue, wakelist, kick word, counters.
pub(crate) struct Worker {
    /// The OS CPU it is pinned to.
    pub(crate) os_cpu: usize,
    /// The runqueue (the cfs_rq), behind the runqueue lock.
    pub(crate) rq: Lock<RunQueue<TaskRef>>,
    /// Remote wakeups waiting to be activated here (TTWU_QUEUE).
    pub(crate) wakelist: LList<Task>,
    /// The idle/kick word.
    pub(crate) kick: Kick,
    /// A wakeup asked the running task to yield (acted on at its next runtime call).
    pub(crate) need_resched: AtomicBool,
    /// `nr_runnable` of the runqueue, published after every change under the lock (a hint
    /// for CPU selection and balancing, and the idle re-check).
    pub(crate) nr_running: AtomicUsize,
    /// Counters.
    pub(crate) stats: Counters,
}

impl Worker {
    pub(crate) fn new(os_cpu: usize, cfg: RqConfig) -> Worker {
        Worker {
            os_cpu,
            rq: Lock::new(RunQueue::new(cfg)),
            wakelist: LList::new(),
            kick: Kick::new(),
            need_resched: AtomicBool::new(false),
            nr_running: AtomicUsize::new(0),
            stats: Counters::default(),
        }
    }
}

/// Everything the workers share: the runtime's state.
pub(crate) struct Shared {
    pub(crate) workers: Vec<Worker>,
    pub(crate) features: Features,
    /// Shutdown was requested.
    pub(crate) closing: AtomicBool,
    /// Every live task (the owning reference, dropped when it is freed).
    pub(crate) registry: Lock<BTreeMap<u64, TaskRef>>,
    /// Tasks not yet freed.
    pub(crate) live_tasks: AtomicUsize,
    /// Task stacks mapped and not yet given back (to a pool or unmapped).
    pub(crate) live_stacks: AtomicUsize,
    /// Stack size of tasks without their own.
    pub(crate) stack_size: usize,
    /// Spin iterations before an idle worker sleeps.
    pub(crate) idle_spin: u32,
    /// Round-robin hint for spawns from outside.
    pub(crate) next_outside: AtomicUsize,
}

/// The thread-local part of a worker, reachable from its OS thread only (through `LOCAL`).
pub(crate) struct WorkerThread {
    pub(crate) shared: Arc<Shared>,
    pub(crate) index: usize,
    /// The worker thread's own context: its idle task.
    idle_ctx: core::cell::UnsafeCell<Context>,
    /// The task running on this thread (null: the idle task). The registry keeps it alive.
    curr: Cell<*const Task>,
    /// The task being switched away from, for `finish_task_switch`.
    prev: Cell<*const Task>,
    pub(crate) pool: RefCell<StackPool>,
    pub(crate) timers: RefCell<timer::Timers>,
    signals: Option<SignalStack>,
}

static LOCAL: Key = Key::new(None);

/// The calling worker thread's state, `None` on other threads.
///
/// The reference must not be kept across a switch: the calling task may resume on another
/// worker. Every function re-fetches it after `schedule()`.
pub(crate) fn local() -> Option<&'static WorkerThread> {
    let p = LOCAL.get().cast::<WorkerThread>();
    // SAFETY: set by worker_main to its boxed WorkerThread, which outlives every task run on
    // the thread, and cleared before it is dropped.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// The running task, as a new reference (`None` outside tasks).
pub(crate) fn current_task() -> Option<TaskRef> {
    let wt = local()?;
    let t = wt.curr.get();
    if t.is_null() {
        return None;
    }
    // SAFETY: `t` came from a live TaskRef (the registry holds one while it runs).
    unsafe {
        Arc::increment_strong_count(t);
        Some(Arc::from_raw(t))
    }
}

impl WorkerThread {
    pub(crate) fn worker(&self) -> &Worker {
        &self.shared.workers[self.index]
    }

    fn idle_ctx(&self) -> *mut Context {
        self.idle_ctx.get()
    }

    /// Marks `next` running here and points its fiber's parent at this worker (under the
    /// runqueue lock, which owns `next`'s scheduling part).
    fn prepare_switch(&self, next: &Task) {
        next.on_cpu.store(true, Ordering::Relaxed);
        // SAFETY: `next` was picked under this worker's lock (held by the caller) and is not
        // running anywhere: its previous switch-out completed (on_cpu was observed clear by
        // whoever queued it here, or it was switched out by this very thread).
        unsafe {
            next.sched(|s| {
                if s.parent_worker != self.index {
                    s.parent_worker = self.index;
                    if let Some(f) = s.fiber.as_mut() {
                        f.set_parent(self.idle_ctx());
                    }
                }
                if let Some(sig) = &self.signals {
                    sig.set_current(s.fiber.as_ref().map_or(ptr::null(), |f| f.info()));
                }
            })
        };
    }
}

/// Takes every wakelist entry of worker `me` and activates it on `rq` (the kernel's
/// `sched_ttwu_pending`). The caller holds that runqueue's lock.
///
/// A delayed wakeup (TTWU_QUEUE_DELAYED, `ttwu_delayed` of spec §7.10) is still queued here
/// unless a pick finished its dequeue meanwhile: its dequeue is finished now, a CPU is
/// selected for it as for any wakeup (the waker's CPU recorded in `wake_cpu`), and it is
/// activated here or forwarded to the chosen worker's wakelist (never under another lock:
/// this one is held).
pub(crate) fn drain(shared: &Shared, me: usize, rq: &mut RunQueue<TaskRef>, now: u64) {
    let w = &shared.workers[me];
    for t in w.wakelist.take_all() {
        // SAFETY: pushed from `Arc::into_raw` by `queue_wakelist`; the list gives it back once.
        let t = unsafe { Arc::from_raw(t.as_ptr().cast_const()) };
        if t.wake_delayed.swap(false, Ordering::Relaxed) {
            if t.on_rq.load(Ordering::Relaxed) {
                // SAFETY: the task is queued on this runqueue, whose lock is held.
                let h = unsafe { t.sched(|s| s.handle) }.expect("queued task has a handle");
                let (se, p) = rq.finish_delayed(h, now);
                finished_delayed(w, se, p);
                w.nr_running.store(rq.nr_runnable(), Ordering::Relaxed);
            }
            let waker = t.wake_cpu.load(Ordering::Relaxed);
            let target = crate::wake::select_cpu(
                shared,
                &t,
                me,
                (waker < shared.workers.len()).then_some(waker),
            );
            if target != me {
                t.cpu.store(target, Ordering::Relaxed);
                w.stats.inc(&w.stats.runnable_migrated);
                crate::wake::queue_wakelist(shared, target, t);
                continue;
            }
        }
        activate(w, rq, t, now);
    }
}

/// Enqueues a claimed (or new) task here and runs the wakeup-preemption check
/// (`ttwu_do_activate`). The caller holds `w`'s runqueue lock and owns `t`.
pub(crate) fn activate(w: &Worker, rq: &mut RunQueue<TaskRef>, t: TaskRef, now: u64) {
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
    let task = Arc::clone(&t);
    let h = rq.enqueue(se, t, kind, now);
    // SAFETY: as above.
    unsafe { task.sched(|s| s.handle = Some(h)) };
    task.on_rq.store(true, Ordering::Relaxed);
    // WAKING → RUNNING (new tasks already are): Release, so a later claim's Acquire sees
    // the enqueue.
    task.state.store(RUNNING, Ordering::Release);
    check_preempt(w, rq, h, now);
    w.nr_running.store(rq.nr_runnable(), Ordering::Relaxed);
}

/// Runs the policy's wakeup-preemption check for `h` and sets need-resched if it says so.
pub(crate) fn check_preempt(w: &Worker, rq: &mut RunQueue<TaskRef>, h: Handle, now: u64) {
    loop {
        match rq.wakeup_preempt(h, WakeFlags::TTWU, now) {
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
pub(crate) fn finished_delayed(w: &Worker, se: crate::policy::SchedEntity, t: TaskRef) {
    // SAFETY: the caller holds the lock of the runqueue `t` was queued on.
    unsafe {
        t.sched(|s| {
            s.se = se;
            s.handle = None;
        })
    };
    t.sched_delayed.store(false, Ordering::Relaxed);
    // O2: the entity store above happens-before a waker's Acquire of on_rq == false.
    t.on_rq.store(false, Ordering::Release);
    w.stats.inc(&w.stats.delayed_finished);
}

/// Picks the next task (`pick_next_task`), finishing delayed dequeues on the way.
pub(crate) fn pick(w: &Worker, rq: &mut RunQueue<TaskRef>, now: u64) -> *const Task {
    let next = loop {
        match rq.pick_next(now) {
            Pick::Run(h) => break Arc::as_ptr(rq.payload(h)),
            Pick::FinishedDelayed { se, payload } => finished_delayed(w, se, payload),
            Pick::Idle => break ptr::null(),
        }
    };
    w.need_resched.store(false, Ordering::Relaxed);
    w.nr_running.store(rq.nr_runnable(), Ordering::Relaxed);
    next
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

/// Puts the previous (running) task back (`put_prev_task` and the sleep dequeue of
/// `__schedule`): a task that is not `RUNNING` is dequeued (`Sleep`; delayed or removed, the
/// latter publishing `on_rq = false` with Release, O2); a yielding task yields its request.
/// The caller holds `w`'s runqueue lock and runs `prev_t` on this worker.
pub(crate) fn put_prev(
    w: &Worker,
    rq: &mut RunQueue<TaskRef>,
    prev_t: &Task,
    reason: Reason,
    now: u64,
) {
    // SAFETY: the running task's scheduling part belongs to this worker (it runs here).
    let h = unsafe { prev_t.sched(|s| s.handle) }.expect("lagom: running task not queued");
    if prev_t.state.load(Ordering::Relaxed) != RUNNING {
        w.stats.inc(&w.stats.switches_voluntary);
        match rq.dequeue(h, DequeueKind::Sleep, now) {
            Dequeued::Delayed => {
                // Release: a waker that reads it (Acquire) knows the task passed its block
                // decision (spec §7.10, step 1).
                prev_t.sched_delayed.store(true, Ordering::Release);
                w.stats.inc(&w.stats.delayed_dequeues);
            }
            Dequeued::Removed { se, payload } => {
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
                drop(payload);
            }
        }
    } else {
        match reason {
            Reason::Yield => {
                rq.yield_curr(now);
                w.stats.inc(&w.stats.switches_voluntary);
            }
            _ => w.stats.inc(&w.stats.switches_involuntary),
        }
    }
}

/// Switches away from the running task (which must be a task, not the idle context).
pub(crate) fn schedule(reason: Reason) {
    let wt = local().expect("lagom: schedule outside a worker");
    let prev = wt.curr.get();
    assert!(!prev.is_null(), "lagom: schedule from the idle task");
    // SAFETY: the registry keeps the running task alive.
    let prev_t = unsafe { &*prev };
    let now = crate::sys::time::monotonic_ns();
    timer::fire(wt, now);
    let w = wt.worker();
    let mut rq = w.rq.lock();
    drain(&wt.shared, wt.index, &mut rq, now);
    rq.update_curr(now);
    put_prev(w, &mut rq, prev_t, reason, now);
    let next = pick(w, &mut rq, now);
    if next == prev {
        return;
    }
    if let Some(n) = (!next.is_null()).then(|| {
        // SAFETY: picked from the runqueue, which holds a reference.
        unsafe { &*next }
    }) {
        wt.prepare_switch(n);
    } else if let Some(sig) = &wt.signals {
        // SAFETY: null is always allowed.
        unsafe { sig.set_current(ptr::null()) };
    }
    wt.prev.set(prev);
    wt.curr.set(next);
    drop(rq);
    let to = if next.is_null() {
        wt.idle_ctx()
    } else {
        // SAFETY: as above.
        unsafe { (*next).ctx }
    };
    // SAFETY: `prev_t.ctx` is the running task's own context; `to` is a suspended context
    // (a picked task whose previous switch-out completed, or this thread's idle context).
    unsafe { switch(prev_t.ctx, to) };
    finish_task_switch();
}

/// Completes a switch on the new context's stack: clears the previous task's `on_cpu` with
/// Release, so that whoever observes it clear (Acquire) sees its saved registers and stack.
pub(crate) fn finish_task_switch() {
    let Some(wt) = local() else { return };
    let prev = wt.prev.replace(ptr::null());
    if !prev.is_null() {
        // SAFETY: the registry keeps the task alive until it is freed, which happens only on
        // the idle context after its on_cpu is clear.
        clear_on_cpu(unsafe { &*prev });
    }
}

/// The switch away from `t` is complete: publish it (Release; O2/O3).
pub(crate) fn clear_on_cpu(t: &Task) {
    #[cfg(not(lagom_mutant = "finish_relaxed_on_cpu"))]
    t.on_cpu.store(false, Ordering::Release);
    #[cfg(lagom_mutant = "finish_relaxed_on_cpu")]
    t.on_cpu.store(false, Ordering::Relaxed);
}

/// The running task blocks (its state is set): schedule away until woken.
pub(crate) fn block_current() {
    if let Some(wt) = local() {
        let w = wt.worker();
        w.stats.inc(&w.stats.blocks);
    }
    schedule(Reason::Block);
}
