//! The worker thread's main loop, which is also its idle task: pick and switch, free tasks
//! that ended, pull work when newly idle, and sleep on the kick word.
//!
//! Invariant (the kick protocol, `sync/kick.rs`): *a worker never sleeps while work published
//! for it before it slept is pending.* The idle worker spins `idle_spin` times watching its
//! wakelist and runqueue counter, then publishes idle (`Kick::idle_wait`: store IDLE,
//! `fence(SeqCst)`, re-check both, `futex_wait`); every waker publishes work first (a
//! wakelist push, Release, or an enqueue under the lock followed by the `nr_running` store)
//! and then calls `Kick::kick` (`fence(SeqCst)`, load the word, `IDLE → KICKED`,
//! `futex_wake`). One of the two fences comes first: either the re-check sees the work or the
//! waker sees IDLE and wakes the sleeper (loom model 4, `idle_kick`). The sleep times out at
//! the next timer of this worker.
//!
//! Newly idle balance: before sleeping, the worker pulls one runnable task that is neither
//! running nor being switched away (`on_cpu` clear, Acquire) nor delayed, and may run here,
//! from the worker with the most runnable tasks (at least two). Both runqueue locks are held,
//! lower index first, while the task moves (`DequeueKind::Save`, then `EnqueueKind::Restore`),
//! so `on_rq` stays true and a concurrent `ttwu_runnable` that locked the old runqueue sees
//! `cpu` changed and retries (O4).
//!
//! Shutdown: once `closing` is set, a worker whose runqueue and wakelist are empty leaves the
//! loop; tasks still blocked are cancelled by `Runtime::shutdown`.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::cell::{Cell, RefCell};
use core::ptr;

use super::{LOCAL, Shared, WorkerThread, drain, finish_task_switch, pick, timer};
use crate::arch::{Context, SignalStack, StackPool, switch};
use crate::policy::{DequeueKind, Dequeued, EnqueueKind};
use crate::sync::atomic::Ordering;
use crate::sync::kick::Idle;
use crate::task::{DEAD, Task};

/// How many idle stacks each worker's pool keeps.
const POOL_CAPACITY: usize = 64;

/// The body of worker thread `index`.
pub(crate) fn worker_main(shared: Arc<Shared>, index: usize) {
    let os_cpu = shared.workers[index].os_cpu;
    // Pinning can fail in a restricted container; the worker then still runs, unpinned.
    let _ = crate::sys::thread::pin_to(os_cpu);
    let pool = StackPool::new(shared.stack_size, POOL_CAPACITY).expect("checked by build()");
    let wt = Box::new(WorkerThread {
        shared,
        index,
        idle_ctx: core::cell::UnsafeCell::new(Context::new()),
        curr: Cell::new(ptr::null()),
        prev: Cell::new(ptr::null()),
        clock: Cell::new(0),
        pool: RefCell::new(pool),
        timers: RefCell::new(timer::Timers::default()),
        signals: SignalStack::install().ok(),
    });
    LOCAL.set((&*wt as *const WorkerThread).cast());
    idle_loop(&wt);
    LOCAL.set(ptr::null());
    drop(wt);
}

fn idle_loop(wt: &WorkerThread) {
    let shared = &*wt.shared;
    let w = wt.worker();
    // The clock of a task's exit, reused by the pick that follows it (one read per call).
    let mut exit_now = None;
    loop {
        timer::fire(wt);
        let now = exit_now
            .take()
            .unwrap_or_else(crate::sys::time::sched_clock);
        let mut rq = w.rq.lock();
        drain(shared, wt.index, &mut rq, now);
        let next = pick(w, &mut rq, now);
        if !next.is_null() {
            // SAFETY: picked from the runqueue, which holds a reference.
            let n = unsafe { &*next };
            wt.prepare_switch(n);
            wt.curr.set(next);
            drop(rq);
            // SAFETY: the idle context is this thread's; `n` is suspended (see prepare_switch).
            unsafe { switch(wt.idle_ctx(), n.ctx) };
            // Back on the idle task: either a task scheduled to idle (curr is null, prev is
            // set) or a task's fiber ended and switched to its parent (curr is that task).
            let ended = wt.curr.replace(ptr::null());
            finish_task_switch();
            if !ended.is_null() {
                // SAFETY: the registry keeps it alive until exit_task removes it.
                exit_now = Some(exit_task(wt, unsafe { &*ended }));
            }
            continue;
        }
        let empty = rq.nr_queued() == 0;
        drop(rq);
        if shared.closing.load(Ordering::Acquire) && empty && w.wakelist.is_empty() {
            return;
        }
        if balance(wt) {
            continue;
        }
        let has_work = || {
            !w.wakelist.is_empty()
                || w.nr_running.load(Ordering::Relaxed) > 0
                || shared.closing.load(Ordering::Relaxed)
        };
        let mut found = false;
        for _ in 0..shared.idle_spin {
            if has_work() {
                found = true;
                break;
            }
            crate::sync::spin_loop();
        }
        if found {
            continue;
        }
        let timeout = wt
            .timers
            .borrow()
            .next_deadline()
            .map(|d| d.saturating_sub(crate::sys::time::monotonic_ns()));
        if timeout == Some(0) {
            continue;
        }
        if w.kick.idle_wait(has_work, timeout) != Idle::Work {
            w.stats.inc(&w.stats.idle_sleeps);
        }
    }
}

/// Frees a task whose fiber ended: completes its dequeue, gives its stack back, takes it out
/// of its registry, delivers its outcome, drops the registry's reference. Returns the clock
/// time it ran at, which the wakeup of its joiner also used (`WorkerThread::clock`).
fn exit_task(wt: &WorkerThread, t: &Task) -> u64 {
    let w = wt.worker();
    let now = crate::sys::time::sched_clock();
    {
        let mut rq = w.rq.lock();
        // SAFETY: the task ran here, so its scheduling part belongs to this worker.
        let h = unsafe { t.sched(|s| s.handle.take()) }.expect("ending task is queued");
        t.state.store(DEAD, Ordering::Relaxed);
        match rq.dequeue(h, DequeueKind::Sleep, now) {
            Dequeued::Delayed => drop(rq.finish_delayed(h, now)),
            Dequeued::Removed { .. } => {}
        }
        t.sched_delayed.store(false, Ordering::Relaxed);
        t.on_rq.store(false, Ordering::Release);
        w.nr_running.store(rq.nr_runnable(), Ordering::Relaxed);
    }
    if let Some(sig) = &wt.signals {
        // SAFETY: null is always allowed; the task's info is about to be freed.
        unsafe { sig.set_current(ptr::null()) };
    }
    t.on_cpu.store(false, Ordering::Release);
    // SAFETY: the task is off every queue and CPU; only this worker references its parts.
    let (fiber, completion) = unsafe { t.sched(|s| (s.fiber.take(), s.completion.take())) };
    let mut fiber = fiber.expect("ending task has its fiber");
    let outcome = fiber.take_outcome();
    if let Some(stack) = fiber.into_stack() {
        wt.pool.borrow_mut().put(stack);
    }
    w.stats.inc_owned(&w.stats.exits);
    // The registry's reference: held until the end, since it keeps `t` alive.
    let me = {
        let home = t.reg_home.load(Ordering::Relaxed);
        let mut reg = wt.shared.workers[home].tasks.lock();
        reg.stack_returned();
        reg.remove(t.reg_slot.load(Ordering::Relaxed))
    };
    if let Some(c) = completion {
        wt.clock.set(now);
        c.complete(outcome.and_then(Result::err));
        wt.clock.set(0);
    }
    drop(me);
    now
}

/// Newly idle balance (module doc). Returns whether a task was pulled.
fn balance(wt: &WorkerThread) -> bool {
    let shared = &*wt.shared;
    let me = wt.index;
    let busiest = (0..shared.workers.len())
        .filter(|&i| i != me)
        .map(|i| (shared.workers[i].nr_running.load(Ordering::Relaxed), i))
        .max();
    let Some((load, src)) = busiest else {
        return false;
    };
    if load < 2 {
        return false;
    }
    let (lo, hi) = (me.min(src), me.max(src));
    let mut g_lo = shared.workers[lo].rq.lock();
    let mut g_hi = shared.workers[hi].rq.lock();
    let (src_rq, dst_rq) = if src == lo {
        (&mut *g_lo, &mut *g_hi)
    } else {
        (&mut *g_hi, &mut *g_lo)
    };
    let curr = src_rq.curr();
    let candidate = src_rq
        .iter()
        .find(|(h, se, t)| {
            Some(*h) != curr
                && !se.sched_delayed
                && t.allowed(me)
                && !t.on_cpu.load(Ordering::Acquire)
        })
        .map(|(h, _, _)| h);
    let Some(h) = candidate else {
        return false;
    };
    let now = crate::sys::time::sched_clock();
    let Dequeued::Removed { se, payload } = src_rq.dequeue(h, DequeueKind::Save, now) else {
        unreachable!("a Save dequeue is never delayed");
    };
    payload.cpu.store(me, Ordering::Relaxed);
    let t = Arc::clone(&payload);
    let nh = dst_rq.enqueue(se, payload, EnqueueKind::Restore, now);
    // SAFETY: both runqueue locks are held; the task is queued, not on any CPU.
    unsafe { t.sched(|s| s.handle = Some(nh)) };
    shared.workers[src]
        .nr_running
        .store(src_rq.nr_runnable(), Ordering::Relaxed);
    shared.workers[me]
        .nr_running
        .store(dst_rq.nr_runnable(), Ordering::Relaxed);
    let w = wt.worker();
    w.stats.inc(&w.stats.balance_pulls);
    true
}
