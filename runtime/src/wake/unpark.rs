//! Waking a parked waiter: the unparker's half of `park` / `unpark` — the token step
//! (`tcb/token.rs`), then [`try_to_wake_up`] — for a task, or the futex wake of a plain OS
//! thread's parker.

use super::ttwu::{try_to_wake_up, try_to_wake_up_held};
use crate::tcb::set_token;
use crate::worker::{RqGuard, TaskRef, Waiter, WorkerThread};
use lagom_policy::WakeFlags;

/// Unparks task `task`: sets its token and, if it was clear, wakes the task with the
/// waker's flags `wf` (`WF_SYNC`: the waker is about to block).
pub(crate) fn unpark_task(task: &TaskRef, wf: WakeFlags) {
    if set_token(task) {
        // One unpark in a thousand dropped after its token step (runtime/tests/mutants.sh):
        // the task keeps its token and never runs.
        #[cfg(lagom_mutant = "unpark_drop_one_in_1000")]
        {
            use crate::locking::atomic::{AtomicU64, Ordering};
            static UNPARKS: AtomicU64 = AtomicU64::new(0);
            if UNPARKS.fetch_add(1, Ordering::Relaxed) % 1000 == 999 {
                return;
            }
        }
        let _ = try_to_wake_up(task, wf);
    }
}

/// Unparks `w`, from any thread, with the waker's flags `wf` (`WF_SYNC` from a task about
/// to block: `Unparker::unpark_sync`; a thread's parker has no use for them).
pub(crate) fn unpark(w: &Waiter, wf: WakeFlags) {
    match w {
        Waiter::Task(t) => unpark_task(t, wf),
        Waiter::Thread(p) => p.unpark(),
    }
}

/// [`unpark`] from worker thread `wt`, which holds its own runqueue lock (`rq`): a task
/// joiner queued or woken on `wt`'s worker is made runnable under that lock, without taking
/// it again ([`try_to_wake_up_held`]). Returns the guard if the lock is still held; `None` if
/// it was released on the way (another worker's queue, a thread parker), and the caller must
/// take it again.
pub(crate) fn unpark_held<'a>(
    w: &Waiter,
    wt: &'a WorkerThread,
    rq: RqGuard<'a>,
) -> Option<RqGuard<'a>> {
    match w {
        Waiter::Task(t) if set_token(t) => {
            crate::locking::probe::probe!("wake/unpark: a held-lock unpark of a task");
            try_to_wake_up_held(t, wt, rq)
        }
        Waiter::Task(_) => Some(rq),
        Waiter::Thread(p) => {
            // A futex wake is a system call: not under the runqueue lock.
            drop(rq);
            p.unpark();
            None
        }
    }
}
