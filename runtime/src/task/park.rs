//! `park` / `Unparker::unpark`: the primitive every blocking operation is built on.
//!
//! Invariant: *an `unpark` that happens before or during a `park` makes that `park` return (at
//! once or after a wakeup); `park` may also return spuriously, so callers re-check.*
//!
//! The protocol is the park token's (`tcb/token.rs`, with its loom models and mutants): this
//! file is the user's side of it. Inside a task, `park` loops on the sleeper's half
//! (`prepare_park`) and blocks in `schedule()`; `unpark` is the wakeup layer's
//! (`wake/unpark.rs`). Outside tasks (plain OS threads, `block_on`'s caller) a futex parker
//! does the same (`tcb/waiter.rs`).

use core::time::Duration;

use crate::locking::atomic::Ordering;
use crate::sched::block_current;
use crate::tcb::{ParkStep, prepare_park, thread_parker};
use crate::worker::{self, Task, TaskRef, Waiter, WorkerThread, token_worker};

/// Wakes one parked task or thread. Cloning it is cheap; any thread may call `unpark`.
#[derive(Clone)]
pub struct Unparker {
    inner: Waiter,
}

impl core::fmt::Debug for Unparker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.inner {
            Waiter::Task(t) => f.debug_tuple("Unparker::Task").field(&t.id).finish(),
            Waiter::Thread(_) => f.write_str("Unparker::Thread"),
        }
    }
}

impl Unparker {
    pub(crate) fn for_task(t: TaskRef) -> Unparker {
        Unparker {
            inner: Waiter::Task(t),
        }
    }

    /// The unparker of waiter `w` (the loom models' own thread parkers, `sync/waiters.rs`).
    #[cfg(loom)]
    pub(crate) fn from_waiter(w: Waiter) -> Unparker {
        Unparker { inner: w }
    }

    /// The waiter it wakes.
    pub(crate) fn waiter(&self) -> &Waiter {
        &self.inner
    }

    /// Makes the parker's next (or current) `park` return.
    pub fn unpark(&self) {
        crate::wake::unpark(&self.inner, lagom_policy::WakeFlags::NONE);
    }

    /// [`unpark`](Unparker::unpark) from a task that is about to block (the kernel's `WF_SYNC`:
    /// a pipe's hand-off, a send followed by a receive): the wakee may be placed on the
    /// caller's CPU (sync `wake_affine`) and preempt the caller only if its deadline is earlier
    /// (`preempt_sync`, with the run time since the caller was picked). Only a hint: the wakeup
    /// is the same, and from outside a task it is a plain `unpark`.
    ///
    /// ```
    /// let rt = lagom::Runtime::builder().build()?;
    /// rt.block_on(|| {
    ///     let me = lagom::task::current_unparker();
    ///     let h = lagom::task::spawn(move || me.unpark_sync());
    ///     lagom::task::park();
    ///     h.join().unwrap();
    /// });
    /// # Ok::<(), lagom::Error>(())
    /// ```
    pub fn unpark_sync(&self) {
        crate::wake::unpark(&self.inner, lagom_policy::WakeFlags::SYNC);
    }
}

/// The unparker of the calling task, or of the calling OS thread outside tasks.
pub fn current_unparker() -> Unparker {
    Unparker {
        inner: current_waiter(),
    }
}

/// The calling task, or the calling OS thread outside tasks, as a [`Waiter`].
pub(crate) fn current_waiter() -> Waiter {
    match worker::current_task() {
        Some(t) => Waiter::Task(t),
        None => Waiter::Thread(thread_parker()),
    }
}

/// Blocks the calling task (or OS thread) until its unparker is called; may return spuriously.
///
/// At shutdown a task blocked here is cancelled: `park` does not return but unwinds (see
/// [`crate::Runtime::shutdown_timeout`]); so do `sleep` and `JoinHandle::join`, which park.
/// A task that is unwinding already (a destructor that parks during a panic) is never
/// cancelled a second time; its park holds its worker's thread until it is unparked (no other
/// task may run there while it unwinds: `sched/unwind.rs`).
pub fn park() {
    if worker::with_current(park_task).is_none() {
        thread_parker().park();
    }
}

/// As [`park`], without the cancellation point: a shutdown's cancellation is neither raised
/// nor abandoned here but stays pending for the task's next point. For the waits that must
/// not end before what they wait for has stopped touching the caller's frame — a scope's
/// owner waiting for its children, `join` for its `b` (`scope.rs`), a task waiting for its
/// borrowing closure on the blocking pool (`blocking.rs`) — and which end on their own once
/// it has: unwinding out of them would free what is still borrowed, and a task that
/// unwinds may not let the tasks it waits for run on its worker (`sched/unwind.rs`) — and
/// the sleep of an `interpose` hook, an `extern "C"` function (`interpose.rs`).
pub(crate) fn park_uncancelled() {
    let parked = worker::with_current(|wt, t| {
        let mut wt = Some(wt);
        loop {
            match prepare_park(t) {
                ParkStep::Return => return,
                ParkStep::Retry => {}
                ParkStep::Sleep => block_current(wt.take()),
            }
        }
    });
    if parked.is_none() {
        thread_parker().park();
    }
}

/// As [`park`], but returns at the latest once `d` has passed (or spuriously, or after an
/// unpark): the caller re-checks its condition and the clock. Inside a task the worker's
/// timer wakes it; outside tasks the calling OS thread sleeps on its futex with a timeout. A
/// zero timeout returns at once, after a preemption point (`cond_resched`'s check without
/// its cancellation), so a loop of them gives the worker up.
pub fn park_timeout(d: Duration) {
    park_until(crate::time::Instant::now().add_saturating(d).as_nanos());
}

/// [`park_timeout`] to an absolute deadline on the monotonic clock (`sys::time::monotonic_ns`).
/// A deadline in the past returns at once (an unpark pending is then left pending), after the
/// preemption point of a call that did not block (`current.rs`, `try_point`).
pub(crate) fn park_until(deadline: u64) {
    match (worker::local(), worker::current_task()) {
        (Some(wt), Some(t)) => {
            if crate::sys::time::monotonic_ns() >= deadline {
                super::current::try_point();
                return;
            }
            let _timer = TimerGuard(arm_timer(wt, deadline, t));
            park();
        }
        _ => thread_parker().park_until(deadline),
    }
}

/// Arms a wakeup of `task` (running on `wt`) at `deadline` (monotonic ns) on the worker's
/// timer heap (`worker/timer.rs`; fired by `sched/timer.rs`): the one place the task API arms
/// a timer (`sleep`, `park_timeout` and every timed wait of `lagom::sync` come here). Returns
/// the timer's token, which the task now holds (`Task::timer`); the caller keeps it in a
/// [`TimerGuard`] across its park, so that an early return drops the timer (its expiry then
/// wakes nobody). The worker publishes a new earliest deadline for the stall monitor.
pub(crate) fn arm_timer(wt: &WorkerThread, deadline: u64, task: TaskRef) -> u64 {
    let token = wt.timers.borrow_mut().add(deadline, task, wt.index);
    if deadline < wt.worker().next_timer.load(Ordering::Relaxed) {
        crate::sched::publish_next_timer(wt, deadline);
    }
    token
}

/// The timer a timed park armed ([`arm_timer`]), given up when the park is over — returned
/// normally or unwound by a shutdown's cancellation: if its expiry has not taken the task's
/// token yet, the task was woken early and waits for it no longer, so the token is cleared
/// (the expiry will skip the entry) and, on the worker that armed it, an entry at the head of
/// the heap is dropped at once with the stale ones behind it (`worker/timer.rs`).
pub(crate) struct TimerGuard(pub(crate) u64);

impl Drop for TimerGuard {
    fn drop(&mut self) {
        // Mutant `timer_keeps_stale` (runtime/tests/mutants.sh): a timer whose task was woken
        // early stays live, and the stall monitor takes its deadline for a waiting sleeper.
        if cfg!(lagom_mutant = "timer_keeps_stale") {
            return;
        }
        let token = self.0;
        let Some(wt) = worker::local() else { return };
        let early = worker::with_current_task(|t| {
            t.timer.load(Ordering::Relaxed) == token
                && t.timer
                    .compare_exchange(token, 0, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
        });
        if early == Some(true) && token_worker(token) == wt.index {
            let mut timers = wt.timers.borrow_mut();
            if timers.head_token() == Some(token) {
                let next = timers.prune();
                drop(timers);
                crate::sched::publish_next_timer(wt, next);
            }
        }
    }
}

/// The park loop of the running task `task` on worker thread `wt`. `wt` serves the first
/// sleep only (the look-up `park` made): once the task has switched away it may resume on
/// another worker, so a later sleep looks its worker up afresh.
///
/// Each round begins with a cancellation point (`cancel.rs`): at shutdown the task unwinds
/// from here (or, unwinding already, returns without sleeping).
fn park_task(wt: &WorkerThread, task: &Task) {
    let mut wt = Some(wt);
    park_loop(task, || block_current(wt.take()));
}

/// The loop of [`park_task`], with `block` the switch away (`block_current`): a cancellation
/// point, the sleeper's half (`prepare_park`), and on `Sleep` the block; round again until a
/// token is consumed. A loom model runs it with a worker thread of its own in `block`
/// (`lagom::model`: the real `schedule()` up to the switch, which the model plays).
#[inline(always)]
pub(crate) fn park_loop(task: &Task, mut block: impl FnMut()) {
    loop {
        if super::cancel::park_point(task) {
            return;
        }
        match prepare_park(task) {
            ParkStep::Return => return,
            ParkStep::Retry => {}
            ParkStep::Sleep => {
                crate::locking::probe::probe!("task/park: park_task blocks in schedule()");
                block()
            }
        }
    }
}
