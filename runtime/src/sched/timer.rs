//! Firing the timers of `sleep` (`worker/timer.rs` holds the heap): every task whose deadline
//! has passed is unparked, outside any runqueue lock, at each scheduling call and in the idle
//! loop. Loom model `timer_unpark` (`loom-tests/tests/timer_unpark.rs`, mutant
//! `timer_fire_no_token`) races an expiry against an outside unpark of the same task.

use crate::locking::atomic::Ordering;
use crate::wake::unpark_task;
use crate::worker::{TaskRef, WorkerThread};
use lagom_policy::WakeFlags;

/// Unparks every task whose deadline has passed (outside any runqueue lock). The deadlines
/// are on the exact clock (`monotonic_ns`), which is read only when a timer is armed: the
/// scheduler's own clock (`sched_clock`) may drift from it.
///
/// The common case, no timer armed, is one inlined look at the heap's length; the clock
/// read and the rest are out of line.
#[inline]
pub(crate) fn fire(wt: &WorkerThread) {
    if !wt.timers.borrow().is_empty() {
        fire_armed(wt);
    }
}

/// [`fire`] once a timer is armed: pops the due entries one at a time, each unparked with
/// the heap's borrow released (an unpark never arms a timer, but the borrow is not held
/// across a call out of this module). An entry whose task no longer waits for it (it was
/// woken early: `worker/timer.rs`) is dropped without a wakeup. If any was popped, the stale
/// entries now at the head go too, and the worker publishes its next live deadline for the
/// stall monitor (`Worker::next_timer`); a call that pops nothing touches no other task.
#[inline(never)]
fn fire_armed(wt: &WorkerThread) {
    let mut now = None;
    let mut popped = false;
    loop {
        let due: Option<(TaskRef, u64)> = {
            let mut t = wt.timers.borrow_mut();
            let first = t.next_deadline();
            let now = *now.get_or_insert_with(crate::sys::time::monotonic_ns);
            if first.is_none_or(|first| first > now) {
                if popped {
                    publish_next_timer(wt, t.prune());
                }
                return;
            }
            popped = true;
            t.pop_due(now)
        };
        let Some((task, token)) = due else { continue };
        // The expiry takes the task's token; a task that already returned took it (stale).
        if task
            .timer
            .compare_exchange(token, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        // Mutant `timer_fire_no_token` (loom model `timer_unpark`): the expiry wakes the
        // task without its token, so its `park` finds nothing and sleeps again.
        #[cfg(not(lagom_mutant = "timer_fire_no_token"))]
        unpark_task(&task, WakeFlags::NONE);
        #[cfg(lagom_mutant = "timer_fire_no_token")]
        drop(crate::wake::try_to_wake_up(&task, WakeFlags::NONE));
    }
}

/// Publishes `deadline` (monotonic ns, `u64::MAX`: none) as worker thread `wt`'s earliest
/// live timer, for the stall monitor (`Worker::next_timer`; its only writer is `wt`).
pub(crate) fn publish_next_timer(wt: &WorkerThread, deadline: u64) {
    let w = wt.worker();
    if w.next_timer.load(Ordering::Relaxed) != deadline {
        w.next_timer.store(deadline, Ordering::Relaxed);
    }
}
