//! The event queue: a binary min-heap of `(time, sequence number)` keys.
//!
//! Invariant: *events pop in time order, and events of equal time in the order they were
//! pushed*. The sequence number makes every key distinct, so the order never depends on the
//! heap's internal layout: a run is reproducible event for event.
//!
//! An event that became moot (a CPU re-planned its next step) is not removed; its owner keeps
//! an epoch number and ignores a popped event whose epoch is stale. That keeps each
//! push and pop O(log n) with no search.

use alloc::collections::BinaryHeap;
use core::cmp::{Ordering, Reverse};

/// What an event does when its time comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// CPU `cpu`'s next step (its running task's next scheduling point, the end of a switch,
    /// or its idle loop), valid while the CPU's epoch is still `epoch`.
    Cpu {
        /// The virtual CPU.
        cpu: u32,
        /// The CPU's epoch when the step was planned.
        epoch: u32,
    },
    /// A delayed wakeup (`wake T after D`) of `task`, made from `waker` (`u32::MAX`: from
    /// outside every CPU).
    Wake {
        /// The wakee.
        task: u32,
        /// The waker's virtual CPU.
        waker: u32,
    },
    /// A waker that found `task` still being switched out (`on_cpu`) and waited: the wakeup
    /// goes on now that the switch is complete.
    WakeAfterSwitch {
        /// The wakee.
        task: u32,
        /// The waker's virtual CPU (`u32::MAX`: outside).
        waker: u32,
    },
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    at: u64,
    seq: u64,
    ev: Event,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The pending events of one simulation.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

impl EventQueue {
    /// Schedules `ev` at virtual time `at`.
    pub(crate) fn push(&mut self, at: u64, ev: Event) {
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            at,
            seq: self.seq,
            ev,
        }));
    }

    /// The earliest event (first pushed among equals), with its time.
    pub(crate) fn pop(&mut self) -> Option<(u64, Event)> {
        self.heap.pop().map(|Reverse(e)| (e.at, e.ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_order_then_push_order() {
        let mut q = EventQueue::default();
        let ev = |cpu| Event::Cpu { cpu, epoch: 0 };
        q.push(20, ev(0));
        q.push(10, ev(1));
        q.push(20, ev(2));
        q.push(10, ev(3));
        let order: alloc::vec::Vec<_> = core::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, [(10, ev(1)), (10, ev(3)), (20, ev(0)), (20, ev(2))]);
    }
}
