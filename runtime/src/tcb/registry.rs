//! The registry of live tasks: the owning reference of every task from its spawn until it is
//! freed, so that shutdown can find and free tasks that nothing else refers to (a task blocked
//! for good, whose unparkers are gone), and so that a runqueue can borrow that reference
//! instead of counting one of its own (`queued.rs`).
//!
//! Invariant: *a task is in exactly one registry slot from the end of its spawn until its
//! home worker (or the one that freed it, for a task spawned from outside, or shutdown)
//! removes it, which happens only after its exit hook has dequeued it for good (or, at
//! shutdown, after every worker has stopped); the slots' counts say how many tasks and task
//! stacks each registry holds.*
//!
//! There is one registry per worker (`Worker::tasks`), the registry of the tasks whose *home*
//! it is. It has three parts:
//!
//! * **own** — the tasks spawned on the worker itself, by a task it runs. Only the worker's
//!   own thread touches these slots, without a lock (the lock taken at spawn and
//!   again at the free cost four locked instructions per spawn+join): it inserts at spawn, and
//!   removes when one of these tasks dies on this worker (`sched/exit.rs`, `put_dead`) or when it
//!   reaps its dead list.
//! * **dead** — a lock-free list (`locking/llist.rs`) of own tasks that died on *another* worker
//!   (moved there by balancing or a wakeup). That worker pushes the task, through the task's
//!   wakelist link, which a dead task no longer uses (it is on no wakelist: only a claimed,
//!   blocked task is pushed on one, and a dead task can no longer be claimed), with its fiber
//!   still in it. It touches the task no more after the push: the home's slot still holds
//!   the reference, and the home may free the task at once. The push is Release and the
//!   home's take is Acquire, so the home sees everything the dying worker did to the task.
//!   The home **reaps** the list at its next spawn and whenever it runs out of work
//!   (`sched/idle.rs`): it takes each fiber out, gives its stack to the caller (its own
//!   pool: so the stacks of a worker's spawns come back to that worker's pool, wherever the
//!   tasks ended, and the pool's high-water mark is its own spawns', `arch/pool.rs`) and
//!   removes the slot; until then the dead tasks still count as live. A push onto
//!   an empty list kicks the home, and the idle re-check counts a non-empty list as work
//!   (the kick protocol, `locking/kick.rs`), so an idle home does not sleep on dead tasks.
//! * **foreign** — tasks spawned from outside the runtime's workers (`Runtime::spawn`), behind
//!   a lock, since the spawning thread is not the home's; whichever worker frees such a task
//!   takes that lock.
//!
//! `Task::reg_home` and `Task::reg_slot` (with [`FOREIGN`] set for the foreign part) say where
//! a task is; the spawner writes them before the task's first enqueue publishes it, and its
//! exit reads them after it ran. `Runtime::stats` reads the own part's counts, which the owner
//! publishes after each change (Relaxed: a snapshot), and the foreign part's under its lock.
//! Shutdown, with every worker stopped and joined, reaps every dead list and takes every part.
//!
//! The registry also keeps the worker's *spare*, a joined task's allocation for its next
//! spawn (`task/recycle.rs`); it is in no slot and counts as nothing.

#[cfg(feature = "std")]
use alloc::vec::Vec;
use core::ptr::NonNull;

use super::slots::Slots;
use super::{Task, TaskRef};
use crate::arch::{DefaultStack, Fiber};
use crate::locking::atomic::{AtomicUsize, Ordering};
use crate::locking::cell::UnsafeCell;
use crate::locking::llist::LList;
use crate::locking::lock::Lock;

/// The bit of `Task::reg_slot` that marks a slot of the foreign part.
pub(crate) const FOREIGN: usize = 1 << (usize::BITS - 1);

/// One worker's live tasks of a runtime `R` (module doc).
pub(crate) struct Registry<R: 'static> {
    /// The own part: touched only by the home worker's thread, or with every worker stopped.
    own: UnsafeCell<Slots<TaskRef<R>>>,
    /// `own`'s task count, published by the owner after each change.
    own_tasks: AtomicUsize,
    /// `own`'s stack count, published with `own_tasks`.
    own_stacks: AtomicUsize,
    /// Own tasks that died on other workers, for the owner to reap.
    dead: LList<Task<R>>,
    /// The foreign part.
    foreign: Lock<Slots<TaskRef<R>>>,
    /// A joined task's allocation kept for the next spawn here (`recycle.rs`): touched only by
    /// the home worker's thread, or with every worker stopped.
    spare: UnsafeCell<Option<TaskRef<R>>>,
}

// SAFETY: `own` is touched by one thread at a time (the owner's, or the shutting-down thread
// after joining every worker: the contracts of the unsafe methods); the other parts are
// atomics, a lock-free list and a lock. The tasks themselves are Send and Sync.
unsafe impl<R: Send + Sync + 'static> Sync for Registry<R> {}
// SAFETY: as for Sync; every part holds only `TaskRef`s, which are Send.
unsafe impl<R: Send + Sync + 'static> Send for Registry<R> {}

impl<R: 'static> Registry<R> {
    /// An empty registry.
    pub(crate) fn new() -> Registry<R> {
        Registry {
            own: UnsafeCell::new(Slots::default()),
            own_tasks: AtomicUsize::new(0),
            own_stacks: AtomicUsize::new(0),
            dead: LList::new(),
            foreign: Lock::new(Slots::default()),
            spare: UnsafeCell::new(None),
        }
    }

    /// Keeps `t` as the spare, dropping the one kept before (`task/recycle.rs`).
    ///
    /// # Safety
    /// The caller is the home worker's thread; `t` is the only reference to its task, which
    /// is dead and out of its registry.
    pub(crate) unsafe fn put_spare(&self, t: TaskRef<R>) {
        // SAFETY: the caller's contract: only this thread touches the spare slot.
        let old = self.spare.with_mut(|p| unsafe { (*p).replace(t) });
        drop(old);
    }

    /// Takes the spare, if any: the only reference to a dead task, out of every registry.
    ///
    /// # Safety
    /// The caller is the home worker's thread, or every worker has stopped and been joined.
    pub(crate) unsafe fn take_spare(&self) -> Option<TaskRef<R>> {
        // SAFETY: the caller's contract: only this thread touches the spare slot.
        self.spare.with_mut(|p| unsafe { (*p).take() })
    }

    /// Runs `f` on the own part and publishes its counts.
    ///
    /// # Safety
    /// The caller is the home worker's thread, or every worker has stopped and been joined.
    #[inline]
    unsafe fn with_own<T>(&self, f: impl FnOnce(&mut Slots<TaskRef<R>>) -> T) -> T {
        self.own.with_mut(|p| {
            // SAFETY: the caller's contract makes this the only access to the own part.
            let own = unsafe { &mut *p };
            let r = f(own);
            self.own_tasks.store(own.tasks(), Ordering::Relaxed);
            self.own_stacks.store(own.stacks(), Ordering::Relaxed);
            r
        })
    }

    /// Registers `t`, spawned by a task of the home worker, with its stack; returns the value
    /// for `Task::reg_slot`. Reaps the dead list first (their stacks to `give_back`), which
    /// bounds it to the tasks spawned here since this worker's previous spawn or idle moment.
    ///
    /// # Safety
    /// The caller is the home worker's thread.
    #[inline]
    pub(crate) unsafe fn insert_own(
        &self,
        t: TaskRef<R>,
        give_back: impl FnMut(DefaultStack),
    ) -> usize {
        if !self.dead.is_empty() {
            // SAFETY: the caller's contract.
            unsafe { self.reap(give_back) };
        }
        // SAFETY: the caller's contract.
        unsafe { self.with_own(|own| own.insert(t)) }
    }

    /// Registers `t`, spawned from outside the workers, with its stack; returns the value for
    /// `Task::reg_slot`.
    pub(crate) fn insert_foreign(&self, t: TaskRef<R>) -> usize {
        self.foreign.lock().insert(t) | FOREIGN
    }

    /// Takes out the task in `slot` (a `Task::reg_slot`), dead and with its stack given back,
    /// and returns the registry's reference, which the caller drops last.
    ///
    /// # Safety
    /// For an own slot, the caller is the home worker's thread.
    #[inline]
    pub(crate) unsafe fn remove(&self, slot: usize) -> TaskRef<R> {
        let take = |s: &mut Slots<TaskRef<R>>, i| {
            s.stack_returned();
            s.remove(i)
        };
        if slot & FOREIGN != 0 {
            take(&mut self.foreign.lock(), slot & !FOREIGN)
        } else {
            // SAFETY: the caller's contract.
            unsafe { self.with_own(|own| take(own, slot)) }
        }
    }

    /// Hands an own task that died on another worker, its fiber still in it, to the home
    /// worker, which frees the fiber and removes the task at its next reap (module doc). Returns
    /// whether the dead list was empty: the caller then kicks the home, which may be asleep.
    ///
    /// # Safety
    /// `t` is in this registry's own part, dead, off every queue and CPU, and on no list;
    /// the caller touches it no more once this returns (the home may free it at once).
    #[must_use = "the home worker must be kicked when the list was empty"]
    pub(crate) unsafe fn push_dead(&self, t: &Task<R>) -> bool {
        // SAFETY: the caller's contract: the task is on no list and stays alive (its slot
        // holds it) until the home's reap takes it out of the list.
        unsafe { self.dead.push(NonNull::from(t)) }
    }

    /// Whether own tasks that died elsewhere wait to be reaped (the idle re-check).
    pub(crate) fn has_dead(&self) -> bool {
        !self.dead.is_empty()
    }

    /// Removes the own tasks that died on other workers (module doc): takes each one's fiber
    /// out, hands its stack to `give_back`, and drops the registry's reference.
    ///
    /// # Safety
    /// The caller is the home worker's thread, or every worker has stopped and been joined.
    #[inline(never)]
    pub(crate) unsafe fn reap(&self, mut give_back: impl FnMut(DefaultStack)) {
        for t in self.dead.take_all() {
            // SAFETY: pushed by `push_dead`; the own slot keeps the task alive until removed
            // here, and the pusher's writes happen-before this take (Release/Acquire).
            let task = unsafe { t.as_ref() };
            task.check_freeable("the home's reap");
            // SAFETY: the task is dead, off every queue and CPU, and its pusher touches it no
            // more: this thread is the only one to reach its scheduling part.
            let fiber = unsafe { task.sched(|s| s.fiber.take()) };
            if let Some(stack) = fiber.and_then(Fiber::into_stack) {
                give_back(stack);
            }
            let slot = task.reg_slot.load(Ordering::Relaxed);
            // SAFETY: the caller's contract; removing may free the task, not read afterwards.
            drop(unsafe { self.remove(slot) });
        }
    }

    /// Drops the spare, reaps, then empties every part (shutdown): hands each task to `cancel`, which returns
    /// whether it gave the task's stack back, counts that stack returned, and drops the
    /// registry's reference. Nothing of the registry is borrowed while `cancel` runs or a
    /// task is dropped.
    ///
    /// # Safety
    /// Every worker has stopped and been joined.
    pub(crate) unsafe fn cancel_all(&self, mut cancel: impl FnMut(&Task<R>) -> bool) {
        // SAFETY: the caller's contract (for the spare and the three calls on the own part).
        drop(unsafe { self.take_spare() });
        // SAFETY: as above. The dead tasks ended: their stacks are unmapped.
        unsafe { self.reap(drop) };
        // SAFETY: as above.
        let own = unsafe { self.with_own(Slots::take_all) };
        for t in own {
            if cancel(&t) {
                // SAFETY: as above.
                unsafe { self.with_own(Slots::stack_returned) };
            }
        }
        let foreign = self.foreign.lock().take_all();
        for t in foreign {
            if cancel(&t) {
                self.foreign.lock().stack_returned();
            }
        }
    }

    /// Calls `f` on every task of the own and foreign parts (a shutdown, before it frees the
    /// tasks left: `Task::retire`).
    ///
    /// # Safety
    /// Every worker has stopped and been joined.
    pub(crate) unsafe fn for_each_stopped(&self, mut f: impl FnMut(&Task<R>)) {
        // SAFETY: the caller's contract: nobody else touches the own part.
        self.own.with(|p| unsafe { (*p).for_each(|t| f(t)) });
        self.foreign.lock().for_each(|t| f(t));
    }

    /// New references to the tasks of the own and foreign parts for which `pick` says yes
    /// (a shutdown's sweep, `sched/shutdown.rs`). The foreign part's lock is held only while
    /// they are collected.
    ///
    /// # Safety
    /// The caller is the home worker's thread.
    #[cfg(feature = "std")]
    pub(crate) unsafe fn collect(&self, mut pick: impl FnMut(&Task<R>) -> bool) -> Vec<TaskRef<R>> {
        let mut out = Vec::new();
        let mut take = |t: &TaskRef<R>| {
            if pick(t) {
                out.push(alloc::sync::Arc::clone(t));
            }
        };
        // SAFETY: the caller's contract; `for_each` only reads the own part (its counts are
        // unchanged, so the published ones stay right).
        self.own.with(|p| unsafe { (*p).for_each(&mut take) });
        self.foreign.lock().for_each(&mut take);
        out
    }

    /// Tasks held now, and their stacks not yet given back (a snapshot while workers run).
    pub(crate) fn counts(&self) -> (usize, usize) {
        let foreign = self.foreign.lock();
        (
            self.own_tasks.load(Ordering::Relaxed) + foreign.tasks(),
            self.own_stacks.load(Ordering::Relaxed) + foreign.stacks(),
        )
    }
}
