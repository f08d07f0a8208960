//! `Slots`: the store behind each part of a worker's registry (`registry.rs`): the owning
//! references of its tasks in a vector of slots, reused through a free list threaded through
//! the free slots, so that once it has grown to its peak number of tasks neither an insert
//! nor a remove allocates; and the counts of those tasks and of their stacks not yet given
//! back.

use alloc::vec::Vec;

/// The end of the free list.
const NONE: usize = usize::MAX;

/// One slot: a held task, or a free slot linking to the next free one.
enum Entry<T> {
    Taken(T),
    Free(usize),
}

/// A slot store (module doc); `T` is `TaskRef` (generic for the unit tests).
pub(crate) struct Slots<T> {
    entries: Vec<Entry<T>>,
    /// The first free slot (`NONE`: none); each free slot names the next. No second vector:
    /// an insert or a remove touches one entry and this head.
    free: usize,
    /// Tasks held.
    tasks: usize,
    /// Stacks of the held tasks not yet given back.
    stacks: usize,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            entries: Vec::new(),
            free: NONE,
            tasks: 0,
            stacks: 0,
        }
    }
}

impl<T> Slots<T> {
    /// Adds `t` (with its stack); returns its slot.
    #[inline]
    pub(crate) fn insert(&mut self, t: T) -> usize {
        self.tasks += 1;
        self.stacks += 1;
        let slot = self.free;
        match self.entries.get_mut(slot) {
            Some(e) => {
                let Entry::Free(next) = *e else {
                    unreachable!("lagom: free slot {slot} is taken")
                };
                self.free = next;
                *e = Entry::Taken(t);
                slot
            }
            None => {
                self.entries.push(Entry::Taken(t));
                self.entries.len() - 1
            }
        }
    }

    /// A stack of one of the held tasks was given back (to a pool, or unmapped).
    #[inline]
    pub(crate) fn stack_returned(&mut self) {
        self.stacks -= 1;
    }

    /// Removes the task in `slot` and returns the owning reference.
    ///
    /// # Panics
    /// If the slot is empty (a task freed twice).
    #[inline]
    pub(crate) fn remove(&mut self, slot: usize) -> T {
        let e = &mut self.entries[slot];
        match core::mem::replace(e, Entry::Free(self.free)) {
            Entry::Taken(t) => {
                self.free = slot;
                self.tasks -= 1;
                t
            }
            Entry::Free(next) => {
                *e = Entry::Free(next);
                panic!("lagom: registry slot {slot} already empty")
            }
        }
    }

    /// Removes every task (shutdown), leaving the registry empty; the stack count is kept
    /// for the caller to settle with [`stack_returned`](Self::stack_returned).
    pub(crate) fn take_all(&mut self) -> Vec<T> {
        self.free = NONE;
        self.tasks = 0;
        self.entries
            .drain(..)
            .filter_map(|e| match e {
                Entry::Taken(t) => Some(t),
                Entry::Free(_) => None,
            })
            .collect()
    }

    /// Calls `f` on every task held (a shutdown's sweep, and its retiring of the tasks left).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&T)) {
        for e in &self.entries {
            if let Entry::Taken(t) = e {
                f(t);
            }
        }
    }

    /// Tasks held now.
    pub(crate) fn tasks(&self) -> usize {
        self.tasks
    }

    /// Stacks of its tasks not yet given back.
    pub(crate) fn stacks(&self) -> usize {
        self.stacks
    }
}

#[cfg(test)]
mod tests {
    use super::Slots;
    use alloc::vec::Vec;

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
    fn every_freed_slot_is_reused_before_the_store_grows() {
        let mut r = Slots::default();
        let slots: Vec<usize> = (0..5).map(|i| r.insert(i)).collect();
        for &s in &slots[1..4] {
            r.remove(s);
        }
        let mut again: Vec<usize> = (0..3).map(|i| r.insert(10 + i)).collect();
        again.sort();
        assert_eq!(again, slots[1..4]);
        assert_eq!(r.insert(20), 5, "no free slot left: the store grows");
        assert_eq!(r.tasks(), 6);
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
