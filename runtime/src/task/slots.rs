//! `Slots`: the store behind each part of a worker's registry (`registry.rs`): the owning
//! references of its tasks in a vector of slots, reused through a free list, so that once it
//! has grown to its peak number of tasks neither an insert nor a remove allocates; and the
//! count of those tasks' stacks not yet given back.

use alloc::vec::Vec;

/// A slot store (module doc); `T` is `TaskRef` (generic for the unit tests).
pub(crate) struct Slots<T> {
    slots: Vec<Option<T>>,
    free: Vec<usize>,
    /// Stacks of the held tasks not yet given back.
    stacks: usize,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
            stacks: 0,
        }
    }
}

impl<T> Slots<T> {
    /// Adds `t` (with its stack); returns its slot.
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

    /// A stack of one of the held tasks was given back (to a pool, or unmapped).
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
    use super::Slots;

    #[test]
    fn slots_are_reused_and_counted() {
        let mut r = Slots::default();
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
        let mut r = Slots::default();
        let a = r.insert(1);
        r.remove(a);
        r.remove(a);
    }
}
