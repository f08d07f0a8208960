//! The registry of live tasks: the owning reference of every task from its spawn until it is
//! freed, so that shutdown can find and free tasks that nothing else refers to (a task blocked
//! for good, whose unparkers are gone).
//!
//! Invariant: *a task is in exactly one registry slot from the end of its spawn until its
//! worker frees it (or shutdown cancels it), and the slot's counts say how many tasks and task
//! stacks that registry holds.*
//!
//! There is one registry per worker, each behind its own lock (`Worker::tasks`). A spawn
//! inserts the task into the registry of its *home* worker (the spawning worker, or the one
//! the round-robin hint names for a spawn from outside) and records the home and the slot in
//! the task (`Task::reg_home`, `Task::reg_slot`, written before the task is published by its
//! first enqueue, read by its exit after it ran). The exit, on whichever worker, removes it
//! from there. Slots are reused through a free list, so once a registry has grown to its peak
//! number of tasks neither spawn nor exit allocates, and spawns on different workers take
//! different locks.

use alloc::vec::Vec;

/// One worker's live tasks (module doc); `T` is `TaskRef` (generic for the unit tests).
pub(crate) struct Registry<T> {
    slots: Vec<Option<T>>,
    free: Vec<usize>,
    /// Task stacks mapped for tasks of this registry and not yet given back.
    stacks: usize,
}

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Registry {
            slots: Vec::new(),
            free: Vec::new(),
            stacks: 0,
        }
    }
}

impl<T> Registry<T> {
    /// Adds `t` (with its freshly mapped stack); returns its slot.
    pub(crate) fn insert(&mut self, t: T) -> usize {
        self.stacks += 1;
        match self.free.pop() {
            Some(slot) => {
                debug_assert!(self.slots[slot].is_none(), "free slot {slot} is taken");
                self.slots[slot] = Some(t);
                slot
            }
            None => {
                self.slots.push(Some(t));
                self.slots.len() - 1
            }
        }
    }

    /// A stack of one of this registry's tasks was given back (to a pool, or unmapped).
    pub(crate) fn stack_returned(&mut self) {
        self.stacks -= 1;
    }

    /// Removes the task in `slot` and returns the owning reference.
    ///
    /// # Panics
    /// If the slot is empty (a task freed twice).
    pub(crate) fn remove(&mut self, slot: usize) -> T {
        let t = self.slots[slot]
            .take()
            .expect("lagom: registry slot already empty");
        self.free.push(slot);
        t
    }

    /// Removes every task (shutdown), leaving the registry empty; the stack count is kept
    /// for the caller to settle with [`stack_returned`](Self::stack_returned).
    pub(crate) fn take_all(&mut self) -> Vec<T> {
        self.free.clear();
        self.slots.drain(..).flatten().collect()
    }

    /// Tasks held now.
    pub(crate) fn tasks(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Stacks of its tasks not yet given back.
    pub(crate) fn stacks(&self) -> usize {
        self.stacks
    }
}

#[cfg(test)]
mod tests {
    use super::Registry;

    #[test]
    fn slots_are_reused_and_counted() {
        let mut r = Registry::default();
        let a = r.insert('a');
        let b = r.insert('b');
        let c = r.insert('c');
        assert_eq!((r.tasks(), r.stacks()), (3, 3));
        assert_eq!(r.remove(b), 'b');
        r.stack_returned();
        assert_eq!((r.tasks(), r.stacks()), (2, 2));
        // The freed slot is handed out again; the others keep their tasks.
        assert_eq!(r.insert('d'), b);
        assert_eq!(r.remove(a), 'a');
        assert_eq!(r.remove(c), 'c');
        assert_eq!(r.tasks(), 1);
        let mut rest = r.take_all();
        rest.sort();
        assert_eq!(rest, ['d']);
        assert_eq!((r.tasks(), r.stacks()), (0, 3));
        assert_eq!(r.insert('e'), 0, "take_all leaves no stale free slot");
    }

    #[test]
    #[should_panic(expected = "already empty")]
    fn a_double_free_panics() {
        let mut r = Registry::default();
        let a = r.insert(1);
        r.remove(a);
        r.remove(a);
    }
}
