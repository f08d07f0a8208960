//! A worker's part of a shutdown (the protocol is in `lagom::runtime`'s module doc): the sweep that
//! cancels the blocked tasks of its registry.
//!
//! Invariant: *a task is asked to unwind only while it is blocked, once, and through its
//! ordinary wakeup.*
//!
//! An idle worker sweeps when the shutdown is in DRAIN and no worker has anything runnable,
//! or in FORCE whatever runs elsewhere, each time its idle loop comes round (it waits at most
//! [`SWEEP_EVERY`] between rounds during a shutdown, since tasks block elsewhere without
//! telling it). The sweep collects the tasks of its registry (the own part, which only its
//! thread touches, and the foreign part, under its lock) that are `BLOCKED` and not yet
//! cancelled, stores `CANCEL_REQUESTED` in each (Release) and unparks it. The wakeup is the
//! ordinary one, so it honours the migration contract (a started task is woken on the worker
//! it last ran on, whichever worker sweeps it) and orders the store before the task's resume;
//! the task then raises the cancellation at the top of its `park` round (`task/cancel.rs`).
//! A task that was not really asleep (woken meanwhile, or between its `BLOCKED` store and its
//! switch) just sees a spurious return of `park` and the request at its next one.
//!
//! Loom model `shutdown_sweep` (`loom-tests/tests/shutdown_sweep.rs`, mutant
//! `sweep_no_unpark`) runs the sweep from a worker's real idle loop against an outside unpark
//! of the task, which unwinds once from its `park` and whose join sees the cancellation.
//!
//! Without `std` nothing can unwind a task, so there is no sweep: blocked tasks are
//! abandoned once the workers stop.

use core::time::Duration;

/// The longest an idle worker sleeps between two rounds of its loop while a shutdown runs.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_millis(1);

/// The sweep (module doc), run by worker thread `wt` from its idle loop.
#[cfg(feature = "std")]
pub(crate) fn sweep(wt: &crate::worker::WorkerThread) {
    use crate::locking::atomic::Ordering;
    use crate::tcb::{BLOCKED, CANCEL_NONE, CANCEL_REQUESTED};

    let reg = &wt.worker().tasks;
    // SAFETY: this is the registry's home worker thread.
    let blocked = unsafe {
        reg.collect(|t| {
            t.state.load(Ordering::Acquire) == BLOCKED
                && t.cancel.load(Ordering::Relaxed) == CANCEL_NONE
        })
    };
    for t in blocked {
        t.cancel.store(CANCEL_REQUESTED, Ordering::Release);
        // Mutant `sweep_no_unpark` (loom model `shutdown_sweep`): the request without the
        // wakeup, left to whoever unparks the task next.
        #[cfg(not(lagom_mutant = "sweep_no_unpark"))]
        crate::wake::unpark_task(&t, lagom_policy::WakeFlags::NONE);
    }
}

/// Without `std` there is no sweep (module doc).
#[cfg(not(feature = "std"))]
pub(crate) fn sweep(_wt: &crate::worker::WorkerThread) {}
