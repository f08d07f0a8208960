//! The per-worker timer heap behind `sleep`: a min-heap of (deadline, task). Expired entries
//! unpark their task (`sched/timer.rs`). An entry whose task was woken early is harmless: its
//! unpark is a spurious wakeup, which `sleep` (a loop until the deadline) absorbs.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::{Ordering as CmpOrdering, Reverse};

use super::TaskRef;

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

    /// Whether no timer is armed.
    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Takes out every entry whose deadline is at or before `now`, earliest first.
    pub(crate) fn take_due(&mut self, now: u64) -> Vec<TaskRef> {
        let mut due = Vec::new();
        while self.next_deadline().is_some_and(|d| d <= now) {
            due.push(self.heap.pop().expect("peeked").0.task);
        }
        due
    }
}
