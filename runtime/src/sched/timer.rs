//! Firing the timers of `sleep` (`worker/timer.rs` holds the heap): every task whose deadline
//! has passed is unparked, outside any runqueue lock, at each scheduling call and in the idle
//! loop. Loom model `timer_unpark` (`loom-tests/tests/timer_unpark.rs`, mutant
//! `timer_fire_no_token`) races an expiry against an outside unpark of the same task.

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
/// across a call out of this module).
#[inline(never)]
fn fire_armed(wt: &WorkerThread) {
    let mut now = None;
    loop {
        let due: Option<TaskRef> = {
            let mut t = wt.timers.borrow_mut();
            let Some(first) = t.next_deadline() else {
                return;
            };
            let now = *now.get_or_insert_with(crate::sys::time::monotonic_ns);
            if first > now {
                return;
            }
            t.pop_due(now)
        };
        match due {
            // Mutant `timer_fire_no_token` (loom model `timer_unpark`): the expiry wakes the
            // task without its token, so its `park` finds nothing and sleeps again.
            #[cfg(not(lagom_mutant = "timer_fire_no_token"))]
            Some(task) => unpark_task(&task, WakeFlags::NONE),
            #[cfg(lagom_mutant = "timer_fire_no_token")]
            Some(task) => drop(crate::wake::try_to_wake_up(&task, WakeFlags::NONE)),
            None => return,
        }
    }
}
