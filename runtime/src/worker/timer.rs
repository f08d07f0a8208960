//! The per-worker timer heap behind `sleep`: a min-heap of (deadline, task); expired entries
//! unpark their task. An entry whose task was woken early is harmless: its unpark is a
//! spurious wakeup, which `sleep` (a loop until the deadline) absorbs.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::{Ordering as CmpOrdering, Reverse};

use super::WorkerThread;
use crate::task::TaskRef;

struct Entry {
    deadline: u64,
    task: TaskRef,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.deadline == other.deadline
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        self.deadline.cmp(&other.deadline)
    }
}

/// The timer heap of one worker.
#[derive(Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<Entry>>,
}

impl Timers {
    /// Arms a wakeup of `task` at `deadline` (monotonic ns).
    pub(crate) fn add(&mut self, deadline: u64, task: TaskRef) {
        self.heap.push(Reverse(Entry { deadline, task }));
    }

    /// The earliest deadline.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.heap.peek().map(|e| e.0.deadline)
    }
}

/// Unparks every task whose deadline has passed (outside any runqueue lock). The deadlines
/// are on the exact clock (`monotonic_ns`), which is read only when a timer is armed: the
/// scheduler's own clock (`sched_clock`) may drift from it.
///
/// The common case, no timer armed, is one inlined look at the heap's length; the clock
/// read and the rest are out of line.
#[inline]
pub(crate) fn fire(wt: &WorkerThread) {
    if !wt.timers.borrow().heap.is_empty() {
        fire_armed(wt);
    }
}

/// [`fire`] once a timer is armed.
#[inline(never)]
fn fire_armed(wt: &WorkerThread) {
    let due: Vec<TaskRef> = {
        let mut t = wt.timers.borrow_mut();
        let Some(first) = t.next_deadline() else {
            return;
        };
        let now = crate::sys::time::monotonic_ns();
        if first > now {
            return;
        }
        let mut due = Vec::new();
        while t.next_deadline().is_some_and(|d| d <= now) {
            due.push(t.heap.pop().expect("peeked").0.task);
        }
        due
    };
    for task in due {
        crate::task::unpark_task(&task);
    }
}
