//! The per-worker timer heap behind `sleep`: a min-heap of (deadline, task, token). Expired
//! entries unpark their task (`sched/timer.rs`).
//!
//! Each entry carries a token, unique in the process, which its task holds in
//! [`Task::timer`](crate::tcb::Task) while it waits for that timer: arming stores it, and
//! whichever comes first clears it — the expiry (which then unparks the task) or the task
//! itself, when its timed park returns before the deadline (`task/park.rs`, `TimerGuard`). An
//! entry whose token its task no longer holds is *stale*: its task was woken early and waits
//! for it no longer. The heap deletes lazily, so stale entries stay until they reach its head;
//! expiry skips them (no spurious unpark), and whoever pops the head — the expiry, or an early
//! return whose own entry is the head — drops the stale entries behind it, so that the head is
//! a timer some task still waits for. That head's deadline is what the worker publishes for
//! the stall monitor (`Worker::next_timer`): a sleeper whose deadline passed while its worker
//! is stuck waits behind the stuck task, and a stale entry must not look like one.
//!
//! The one case the head can go stale without its worker noticing: a task that may migrate,
//! woken early and resumed on another worker, clears its token there, and its old worker
//! sees it only at its next expiry. Until then the monitor of a stuck worker may count that
//! timer as a waiter that is gone (the worker is stuck either way).

use alloc::collections::BinaryHeap;
use core::cmp::{Ordering as CmpOrdering, Reverse};

use super::TaskRef;
use crate::locking::atomic::Ordering;

/// Bits of a token that hold the arming worker's index (the rest count that worker's arms).
const WORKER_BITS: u32 = 20;

struct Entry {
    deadline: u64,
    token: u64,
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
    /// Timers armed here so far (the count part of the next token).
    armed: u64,
}

/// The worker index that armed the timer of `token`.
pub(crate) fn token_worker(token: u64) -> usize {
    (token & ((1 << WORKER_BITS) - 1)) as usize
}

impl Timers {
    /// Arms a wakeup of `task` at `deadline` (monotonic ns) on worker `worker`'s heap, and
    /// gives the task the entry's token (module doc), which it returns.
    pub(crate) fn add(&mut self, deadline: u64, task: TaskRef, worker: usize) -> u64 {
        self.armed += 1;
        let token = (self.armed << WORKER_BITS) | (worker as u64 & ((1 << WORKER_BITS) - 1));
        task.timer.store(token, Ordering::Relaxed);
        self.heap.push(Reverse(Entry {
            deadline,
            token,
            task,
        }));
        token
    }

    /// The earliest deadline (of any entry, stale or not).
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.heap.peek().map(|e| e.0.deadline)
    }

    /// The token of the earliest entry.
    pub(crate) fn head_token(&self) -> Option<u64> {
        self.heap.peek().map(|e| e.0.token)
    }

    /// Whether no timer is armed.
    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Takes out the earliest entry if its deadline is at or before `now`, with its token.
    /// Expiry pops one at a time (`sched/timer.rs`), so that firing needs no allocation:
    /// collecting the due entries in a fresh `Vec` cost a malloc, its growth and a free per
    /// firing (about 7 % of the instructions of `sleepers`).
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<(TaskRef, u64)> {
        if self.next_deadline()? <= now {
            self.heap.pop().map(|e| (e.0.task, e.0.token))
        } else {
            None
        }
    }

    /// Drops the stale entries at the head (module doc) and returns the head's deadline, that
    /// of a timer a task still waits for (`u64::MAX`: none).
    pub(crate) fn prune(&mut self) -> u64 {
        while let Some(e) = self.heap.peek() {
            if e.0.task.timer.load(Ordering::Relaxed) == e.0.token {
                return e.0.deadline;
            }
            self.heap.pop();
        }
        u64::MAX
    }
}
