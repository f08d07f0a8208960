//! The per-worker timer heap behind `sleep`: a min-heap of (deadline, task). Expired entries
//! unpark their task (`sched/timer.rs`). An entry whose task was woken early is harmless: its
//! unpark is a spurious wakeup, which `sleep` (a loop until the deadline) absorbs.

use alloc::collections::BinaryHeap;
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

    /// Takes out the earliest entry if its deadline is at or before `now`. Expiry pops one at
    /// a time (`sched/timer.rs`), so that firing needs no allocation: collecting the due
    /// entries in a fresh `Vec` cost a malloc, its growth and a free per firing (about 7 % of
    /// the instructions of `sleepers`).
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<TaskRef> {
        if self.next_deadline()? <= now {
            self.heap.pop().map(|e| e.0.task)
        } else {
            None
        }
    }
}
