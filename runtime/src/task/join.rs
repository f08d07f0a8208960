//! `JoinHandle`: the result slot of a task and the one waiter that joins it.
//!
//! Invariant: *the value arrives once, and a joiner that found the slot empty is woken after
//! it is filled.* The slot and the waiter sit under one [`Lock`]; the finishing side fills the
//! slot and takes the waiter under the lock, then unparks it outside; the joiner checks the
//! slot and registers itself under the lock, then parks, re-checking after every return
//! (park may return spuriously).
//!
//! The closure's value does not go through the lock: the task stores it in a cell of its own
//! (`set_value`) just before its fiber ends, and the worker that ran it moves it into the slot
//! in `complete`, on the same OS thread after the switch away from the ended fiber, so the
//! two accesses are ordered by program order and nothing else touches the cell (issue #5:
//! one lock round trip fewer per spawn+join).
//!
//! Checked by the loom model `join` (`loom-tests/tests/join.rs`), which runs `try_take` (one
//! round of `join`) and the finishing side (`set_value`, then `Complete::complete`) against
//! each other over the real park/unpark path; mutant `join_split_check`.

use alloc::sync::Arc;

use super::park::{Unparker, current_unparker, park};
use crate::JoinError;
use crate::sync::cell::UnsafeCell;
use crate::sync::lock::Lock;

/// The type-erased side a worker calls when the task ends.
pub(crate) trait Complete: Send + Sync {
    /// The task ended: `Some` if it panicked, `None` if its closure returned (the value is
    /// already in the slot). Wakes the joiner.
    fn complete(&self, panic: Option<JoinError>);
    /// The runtime shut down before the task ended.
    fn cancel(&self);
}

/// What the slot holds.
enum Slot<T> {
    /// Not finished.
    Pending,
    /// Finished; the outcome waits for `join`.
    Done(Result<T, JoinError>),
    /// Taken by `join`.
    Taken,
    /// The runtime shut down first.
    Cancelled,
}

pub(crate) struct Packet<T> {
    /// The closure's value between its return and `complete` (module doc): written by the task,
    /// taken by the worker that ran it, on that one OS thread.
    value: UnsafeCell<Option<T>>,
    inner: Lock<(Slot<T>, Option<Unparker>)>,
}

// SAFETY: `inner` is behind its lock; `value` is accessed only by the task (`set_value`) and
// then by the worker thread that ran it (`complete`), in program order on one OS thread
// (module doc), so never by two threads at once. `T: Send` lets the value move between the
// spawner's and the joiner's threads.
unsafe impl<T: Send> Sync for Packet<T> {}
// SAFETY: as for Sync: every part is Send when `T` is.
unsafe impl<T: Send> Send for Packet<T> {}

impl<T> Packet<T> {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Packet {
            value: UnsafeCell::new(None),
            inner: Lock::new((Slot::Pending, None)),
        })
    }

    /// The closure's value, stored by the task itself just before it ends.
    ///
    /// # Safety
    /// Called by the task once, from its fiber, which then ends; `complete` runs later on the
    /// same OS thread (module doc).
    pub(crate) unsafe fn set_value(&self, v: T) {
        // SAFETY: the caller's contract: the only access until `complete`, which follows it on
        // this thread.
        self.value.with_mut(|p| unsafe { *p = Some(v) });
    }

    fn finish(&self, slot: impl FnOnce(Slot<T>) -> Slot<T>) {
        let waiter = {
            let mut g = self.inner.lock();
            let old = core::mem::replace(&mut g.0, Slot::Taken);
            g.0 = slot(old);
            g.1.take()
        };
        if let Some(w) = waiter {
            w.unpark();
        }
    }
}

impl<T: Send> Complete for Packet<T> {
    fn complete(&self, panic: Option<JoinError>) {
        // SAFETY: `complete` runs on the worker thread that ran the task, after its fiber
        // ended: `set_value`, if it ran, is done and nothing else touches the cell (module doc).
        let value = self.value.with_mut(|p| unsafe { (*p).take() });
        self.finish(|old| match (panic, value) {
            (Some(e), _) => Slot::Done(Err(e)),
            (None, Some(v)) => Slot::Done(Ok(v)),
            (None, None) => old,
        });
    }

    fn cancel(&self) {
        self.finish(|_| Slot::Cancelled);
    }
}

/// The handle of a spawned task: [`join`](Self::join) waits for its end and returns its value,
/// or the panic that ended it as a [`JoinError`].
pub struct JoinHandle<T> {
    pub(crate) packet: Arc<Packet<T>>,
    pub(crate) id: u64,
    pub(crate) task: super::TaskRef,
}

impl<T> core::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("JoinHandle").field("id", &self.id).finish()
    }
}

impl<T> JoinHandle<T> {
    /// The task's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The task's unparker: makes its current or next [`park`] return.
    pub fn unparker(&self) -> Unparker {
        Unparker::for_task(alloc::sync::Arc::clone(&self.task))
    }

    /// Whether the task has ended (its outcome is ready).
    pub fn is_finished(&self) -> bool {
        matches!(self.packet.inner.lock().0, Slot::Done(_) | Slot::Cancelled)
    }

    /// Waits for the task to end; from a task (it blocks, the worker runs others) or from a
    /// plain OS thread (it sleeps on a futex).
    ///
    /// # Errors
    /// The task's panic, as [`JoinError`].
    ///
    /// # Panics
    /// If the runtime was shut down before the task ended (it was cancelled, see
    /// [`crate::Runtime::shutdown`]).
    pub fn join(self) -> Result<T, JoinError> {
        loop {
            if let Some(r) = self.try_take(current_unparker) {
                return r;
            }
            park();
        }
    }

    /// One round of [`join`](Self::join): under the packet's lock, take the outcome if it is
    /// there, else register `waiter()` (once) to be unparked when it arrives. The check and the
    /// registration must stay in one critical section (loom model `join`, mutant
    /// `join_split_check`).
    pub(crate) fn try_take(
        &self,
        waiter: impl FnOnce() -> Unparker,
    ) -> Option<Result<T, JoinError>> {
        let mut g = self.packet.inner.lock();
        match core::mem::replace(&mut g.0, Slot::Taken) {
            Slot::Done(r) => return Some(r),
            Slot::Cancelled => panic!("lagom: joined task was cancelled by shutdown"),
            Slot::Taken => unreachable!("JoinHandle::join consumes the handle"),
            other => g.0 = other,
        }
        // Mutant: the registration in a second critical section; the task may finish between
        // the two, find no waiter, and the joiner sleeps forever.
        #[cfg(lagom_mutant = "join_split_check")]
        let mut g = (drop(g), self.packet.inner.lock()).1;
        if g.1.is_none() {
            g.1 = Some(waiter());
        }
        None
    }
}
