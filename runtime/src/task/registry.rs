//! The registry of live tasks: the owning reference of every task from its spawn until it is
//! freed, so that shutdown can find and free tasks that nothing else refers to (a task blocked
//! for good, whose unparkers are gone).
//!
//! Invariant: *a task is in exactly one registry slot from the end of its spawn until it is
//! freed (or shutdown cancels it), and the slot's counts say how many tasks and task stacks
//! that registry holds.*
//!
//! Each worker has two registries. A spawn inserts the task into one of them and records the
//! *home* worker and the slot in the task (`Task::reg_home`, `Task::reg_slot`, written before
//! the task is published by its first enqueue, read after it ran); slots are reused through a
//! free list, so once a registry has grown to its peak neither spawn nor exit allocates.
//!
//! * **`Worker::tasks`**, behind a lock: tasks spawned from outside the runtime (the
//!   round-robin hint names the home). Their exit, on whichever worker, removes them under
//!   that lock (`worker/exit.rs`).
//! * **`Worker::own`** ([`LocalRegistry`]), without a lock: tasks spawned by a task running on
//!   the worker (issue #5: the lock was two locked instructions on every spawn and again on
//!   every exit). Only the worker's own OS thread touches it while the worker runs, and
//!   shutdown once every worker thread has been joined. A task of it that exits on its home
//!   worker is removed there directly. One that exits on another worker (it migrated) cannot
//!   be: that worker frees its fiber and stack, then pushes the dead task on the home's
//!   `remote_dead` list (the wakelist's lock-free list, through the task's `link`, which a
//!   dead task no longer uses), and touches it no more; the slot's reference keeps it alive
//!   until the home *reaps* the list (at its next spawn, before it sleeps idle, or at
//!   shutdown): it removes each slot and drops that reference. The push is Release and the
//!   take Acquire, so the reaper sees the exiter's last writes. Until then the task still
//!   counts as live in [`crate::Runtime::stats`]. The push that finds the list empty kicks
//!   the home, and the home's idle re-check counts a non-empty list as work (the kick
//!   protocol of `worker/idle.rs`), so a sleeping home wakes to reap instead of keeping the
//!   dead tasks until its next wakeup.
//!
//! The counts of the lock-free registry are published in atomics (Relaxed stores by the
//! owner; only `Runtime::stats` reads them, as a snapshot).

use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};

use super::{Task, TaskRef};
use crate::sync::llist::LList;

/// The flag of `Task::reg_slot` for a slot of a worker's [`LocalRegistry`].
pub(crate) const LOCAL_SLOT: usize = 1 << (usize::BITS - 1);

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

/// A worker's lock-free registry (module doc): its owner thread's alone. On a cache line
/// of its own.
#[repr(align(64))]
pub(crate) struct LocalRegistry {
    reg: UnsafeCell<Registry<TaskRef>>,
    /// Dead tasks of this registry that ended on other workers, to be reaped by the owner.
    remote_dead: LList<Task>,
    /// `reg.tasks()` and `reg.stacks()` as of the owner's last change.
    tasks: AtomicUsize,
    stacks: AtomicUsize,
}

// SAFETY: `reg` is touched only by the owning worker's thread, or by shutdown once that thread
// has been joined (the contract of every method that reaches it); the rest is atomic.
unsafe impl Sync for LocalRegistry {}
// SAFETY: as for Sync; the tasks it holds are Send.
unsafe impl Send for LocalRegistry {}

impl Default for LocalRegistry {
    fn default() -> Self {
        LocalRegistry {
            reg: UnsafeCell::new(Registry::default()),
            remote_dead: LList::new(),
            tasks: AtomicUsize::new(0),
            stacks: AtomicUsize::new(0),
        }
    }
}

impl LocalRegistry {
    /// Runs `f` on the registry and publishes its counts.
    ///
    /// # Safety
    /// Called on the owning worker's thread (or, at shutdown, once it was joined), not from
    /// within another call of this registry's methods.
    unsafe fn with<R>(&self, f: impl FnOnce(&mut Registry<TaskRef>) -> R) -> R {
        // SAFETY: the caller's contract makes this the only access.
        let reg = unsafe { &mut *self.reg.get() };
        let r = f(reg);
        self.tasks.store(reg.tasks(), Ordering::Relaxed);
        self.stacks.store(reg.stacks(), Ordering::Relaxed);
        r
    }

    /// Adds `t` (with its freshly mapped stack) after reaping; returns its slot, flagged
    /// [`LOCAL_SLOT`].
    ///
    /// # Safety
    /// As for `with`.
    pub(crate) unsafe fn insert(&self, t: TaskRef) -> usize {
        // SAFETY: forwarded contract.
        unsafe {
            self.reap();
            self.with(|r| r.insert(t)) | LOCAL_SLOT
        }
    }

    /// Removes the task in `slot` (flagged), whose stack was given back; returns the
    /// registry's reference, for the caller to drop.
    ///
    /// # Safety
    /// As for `with`.
    pub(crate) unsafe fn remove(&self, slot: usize) -> TaskRef {
        // SAFETY: forwarded contract.
        unsafe {
            self.with(|r| {
                r.stack_returned();
                r.remove(slot & !LOCAL_SLOT)
            })
        }
    }

    /// Hands dead `t`, which ended on another worker, to the owner (module doc). Returns
    /// whether the list was empty: the caller then kicks the owner, which may sleep idle.
    ///
    /// # Safety
    /// `t` is dead and in this registry; its fiber and stack were freed; the caller does not
    /// touch it afterwards.
    #[must_use]
    pub(crate) unsafe fn push_remote_dead(&self, t: &Task) -> bool {
        // SAFETY: a dead task is on no wakelist, so its link is free; the slot's reference
        // keeps it alive until `reap` hands it out.
        unsafe { self.remote_dead.push(NonNull::from(t)) }
    }

    /// Whether dead tasks wait to be reaped (a hint, as `LList::is_empty`).
    pub(crate) fn has_remote_dead(&self) -> bool {
        !self.remote_dead.is_empty()
    }

    /// Removes the tasks that ended on other workers and drops their references.
    ///
    /// # Safety
    /// As for `with`.
    pub(crate) unsafe fn reap(&self) {
        if self.remote_dead.is_empty() {
            return;
        }
        for t in self.remote_dead.take_all() {
            // SAFETY: pushed by `push_remote_dead`: in this registry, kept alive by its slot.
            let slot = unsafe { t.as_ref() }.reg_slot.load(Ordering::Relaxed);
            // SAFETY: forwarded contract.
            drop(unsafe { self.remove(slot) });
        }
    }

    /// Every task left (shutdown), after reaping; the stack count is kept for the caller to
    /// settle with [`stack_returned`](Self::stack_returned).
    ///
    /// # Safety
    /// As for `with`.
    pub(crate) unsafe fn take_all(&self) -> Vec<TaskRef> {
        // SAFETY: forwarded contract.
        unsafe {
            self.reap();
            self.with(Registry::take_all)
        }
    }

    /// A stack of one of its tasks was given back (shutdown).
    ///
    /// # Safety
    /// As for `with`.
    pub(crate) unsafe fn stack_returned(&self) {
        // SAFETY: forwarded contract.
        unsafe { self.with(Registry::stack_returned) }
    }

    /// Tasks held, as last published.
    pub(crate) fn tasks(&self) -> usize {
        self.tasks.load(Ordering::Relaxed)
    }

    /// Stacks of its tasks not yet given back, as last published.
    pub(crate) fn stacks(&self) -> usize {
        self.stacks.load(Ordering::Relaxed)
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
