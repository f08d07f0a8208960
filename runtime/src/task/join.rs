//! `JoinHandle`: the result slot of a task and the one waiter that joins it.
//!
//! Invariant: *the value arrives once, and a joiner that found the slot empty is woken after
//! it is filled.*
//!
//! ## The protocol
//!
//! One state word and three cells, each owned by one side at a time (no lock: issue #5, the
//! lock was taken three or four times per spawn+join, two locked instructions each):
//!
//! | state | meaning | owner of `waiter` | owner of `outcome` |
//! |---|---|---|---|
//! | `PENDING` | no outcome, nobody registered | the joiner (may write it) | the finisher |
//! | `WAITING` | the joiner registered its unparker | the finisher | the finisher |
//! | `DONE` | the outcome is in `outcome` | the finisher if it saw `WAITING`, else the joiner | the joiner |
//!
//! * **joiner** (`try_take`, one round of `join`): load the state (Acquire). `DONE`: take the
//!   outcome. `WAITING`: already registered (park returned spuriously): park again.
//!   `PENDING`: write its unparker into `waiter`, then `compare_exchange(PENDING → WAITING)`
//!   (AcqRel): on success it is registered and parks; on failure the state is `DONE` (the
//!   finisher came in between and saw no waiter): it drops its unparker and takes the outcome.
//! * **finisher** (`complete` or `cancel`, exactly once per task: the task ends once, and
//!   shutdown cancels only a task that never ended): write `outcome`, then `swap(DONE)` (AcqRel): the Release half publishes the
//!   outcome to the joiner's Acquire; if the old state was `WAITING`, the Acquire half makes
//!   the joiner's `waiter` write visible: take it and unpark it (`complete` hands it to its
//!   caller, the exit hook, which unparks it under the runqueue lock it already holds).
//!
//! The check and the registration are one compare-exchange. A check followed by a plain store
//! of `WAITING` would let the finisher swap in between, find no waiter, and then be
//! overwritten: the joiner sleeps forever (mutant `join_split_check`).
//!
//! The closure's value does not go through the state word either: the task stores it in a
//! cell of its own (`set_value`) just before its closure returns, and the fiber's exit hook
//! (`worker/exit.rs`) moves it into the outcome in `complete`, still on the task's stack and
//! OS thread, so the two accesses are ordered by program order.
//!
//! Checked by the loom model `join` (`loom-tests/tests/join.rs`), which runs `try_take` (one
//! round of `join`) and the finishing side (`set_value`, then `Complete::complete`) against
//! each other over the real park/unpark path; mutant `join_split_check`.

use alloc::sync::Arc;
use core::ptr::NonNull;

use super::park::{Unparker, current_unparker, park};
use crate::JoinError;
use crate::sync::atomic::{AtomicU32, Ordering};
use crate::sync::cell::UnsafeCell;

/// The type-erased side a worker calls when the task ends.
pub(crate) trait Complete: Send + Sync {
    /// The task ended: `Some` if it panicked, `None` if its closure returned (the value is
    /// already in the slot). Returns the registered joiner's unparker, which the caller must
    /// unpark (the exit hook does so under the runqueue lock it holds, `worker/exit.rs`).
    #[must_use = "the joiner must be unparked"]
    fn complete(&self, panic: Option<JoinError>) -> Option<Unparker>;
    /// The runtime shut down before the task ended.
    fn cancel(&self);
}

/// No outcome, nobody registered (module doc).
const PENDING: u32 = 0;
/// The joiner's unparker is in `waiter`.
const WAITING: u32 = 1;
/// The outcome is in `outcome`.
const DONE: u32 = 2;

/// What the finisher delivers.
enum Outcome<T> {
    /// The task ended: its value or its panic.
    Ended(Result<T, JoinError>),
    /// The runtime shut down first.
    Cancelled,
}

pub(crate) struct Packet<T> {
    /// `PENDING`, `WAITING` or `DONE` (module doc).
    state: AtomicU32,
    /// The joiner's unparker; owned as the module doc's table says.
    waiter: UnsafeCell<Option<Unparker>>,
    /// The outcome; the finisher's until `DONE`, then the joiner's.
    outcome: UnsafeCell<Option<Outcome<T>>>,
    /// The closure's value between its return and `complete` (module doc): written by the task,
    /// taken by the worker that ran it, on that one OS thread.
    value: UnsafeCell<Option<T>>,
}

// SAFETY: every cell has one owner at a time, handed over through `state` (module doc), and
// `value` is touched only on the task's worker thread, in program order. `T: Send` lets the
// value move between the task's and the joiner's threads.
unsafe impl<T: Send> Sync for Packet<T> {}
// SAFETY: as for Sync: every part is Send when `T` is.
unsafe impl<T: Send> Send for Packet<T> {}

impl<T> Packet<T> {
    /// A packet of its own (a task whose packet does not fit in the task, and loom models).
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::new_value())
    }

    /// A packet, to be kept in its task (`completion.rs`).
    pub(crate) fn new_value() -> Self {
        Packet {
            state: AtomicU32::new(PENDING),
            waiter: UnsafeCell::new(None),
            outcome: UnsafeCell::new(None),
            value: UnsafeCell::new(None),
        }
    }

    /// The closure's value, stored by the task itself just before it ends.
    ///
    /// # Safety
    /// Called by the task once, from its fiber, whose closure then ends; `complete` runs later
    /// on the same OS thread (module doc).
    pub(crate) unsafe fn set_value(&self, v: T) {
        // SAFETY: the caller's contract: the only access until `complete`, which follows it on
        // this thread.
        self.value.with_mut(|p| unsafe { *p = Some(v) });
    }

    /// The finisher's step (module doc); called once per packet. Returns the joiner to unpark,
    /// if one registered.
    fn finish(&self, outcome: Outcome<T>) -> Option<Unparker> {
        // SAFETY: the outcome cell is the finisher's until the swap below publishes DONE, and
        // there is one finisher (the task ends once; shutdown cancels only a task that never
        // ended).
        self.outcome.with_mut(|p| unsafe { *p = Some(outcome) });
        if self.state.swap(DONE, Ordering::AcqRel) == WAITING {
            // SAFETY: the joiner wrote its unparker before its PENDING → WAITING exchange,
            // which this swap read (Acquire); from WAITING on the cell is the finisher's.
            return self.waiter.with_mut(|p| unsafe { (*p).take() });
        }
        None
    }
}

impl<T: Send> Complete for Packet<T> {
    fn complete(&self, panic: Option<JoinError>) -> Option<Unparker> {
        // SAFETY: `complete` runs on the worker thread that ran the task, after its closure
        // ended: `set_value`, if it ran, is done and nothing else touches the cell (module doc).
        let value = self.value.with_mut(|p| unsafe { (*p).take() });
        let r = match (panic, value) {
            (Some(e), _) => Err(e),
            (None, Some(v)) => Ok(v),
            (None, None) => unreachable!("lagom: a task ended without a value or a panic"),
        };
        self.finish(Outcome::Ended(r))
    }

    fn cancel(&self) {
        if let Some(w) = self.finish(Outcome::Cancelled) {
            w.unpark();
        }
    }
}

/// The task's pointer to its packet's value cell, for [`Packet::set_value`]: a plain pointer,
/// not an `Arc` clone (two locked read-modify-writes per spawn, issue #5). The task's
/// `completion` owns the same packet (in the task or as an `Arc`, `completion.rs`) and is
/// dropped only with the task, which outlives its closure.
pub(crate) struct ValueSlot<T>(*const Packet<T>);

// SAFETY: it is used only as `set_value` through `&Packet<T>`, which is Send + Sync for
// `T: Send`.
unsafe impl<T: Send> Send for ValueSlot<T> {}

impl<T> ValueSlot<T> {
    /// The slot of the packet at `p`, which the task's completion owns.
    pub(crate) fn new(p: NonNull<Packet<T>>) -> Self {
        ValueSlot(p.as_ptr())
    }

    /// [`Packet::set_value`] through the pointer.
    ///
    /// # Safety
    /// As for `set_value`, and the packet is alive: called by the task's closure, whose task
    /// (and so its completion) outlives it.
    pub(crate) unsafe fn set(self, v: T) {
        // SAFETY: the caller's contract.
        unsafe { (*self.0).set_value(v) }
    }
}

/// The handle of a spawned task: [`join`](Self::join) waits for its end and returns its value,
/// or the panic that ended it as a [`JoinError`].
pub struct JoinHandle<T> {
    /// The task's packet, kept alive by `task`, whose `completion` owns it (`completion.rs`):
    /// an `Arc` here would cost two more locked read-modify-writes per spawn (issue #5).
    pub(crate) packet: NonNull<Packet<T>>,
    pub(crate) id: u64,
    pub(crate) task: super::TaskRef,
}

// SAFETY: as if it held an `Arc<Packet<T>>` (which it reaches through its task): the packet
// is Send and Sync for `T: Send`, and the task reference is.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: as for Send.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> core::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("JoinHandle").field("id", &self.id).finish()
    }
}

impl<T> JoinHandle<T> {
    /// The handle of `task`, whose completion is `packet`.
    #[cfg(loom)]
    pub(crate) fn new(packet: &Arc<Packet<T>>, id: u64, task: super::TaskRef) -> Self {
        JoinHandle {
            packet: Self::packet_of(packet),
            id,
            task,
        }
    }

    /// The pointer a handle keeps to `packet`, which its task's completion must hold.
    #[cfg(loom)]
    pub(crate) fn packet_of(packet: &Arc<Packet<T>>) -> NonNull<Packet<T>> {
        NonNull::from(&**packet)
    }

    /// The packet.
    fn packet(&self) -> &Packet<T> {
        // SAFETY: `self.task` keeps the task alive, and its completion keeps the packet alive
        // (the task drops it only when it is freed).
        unsafe { self.packet.as_ref() }
    }

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
        self.packet().state.load(Ordering::Acquire) == DONE
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
        let r = loop {
            if let Some(r) = self.try_take(current_unparker) {
                break r;
            }
            park();
        };
        // The outcome is out of the packet: the task's allocation may serve the next spawn.
        super::recycle::recycle(self.task);
        r
    }

    /// One round of [`join`](Self::join): take the outcome if it is there, else register
    /// `waiter()` (once) to be unparked when it arrives. The check and the registration are
    /// one compare-exchange (module doc; loom model `join`, mutant `join_split_check`).
    pub(crate) fn try_take(
        &self,
        waiter: impl FnOnce() -> Unparker,
    ) -> Option<Result<T, JoinError>> {
        let p = self.packet();
        match p.state.load(Ordering::Acquire) {
            DONE => return Some(self.take_outcome()),
            WAITING => return None,
            _ => {}
        }
        // PENDING: the waiter cell is ours until the exchange below publishes it.
        let w = waiter();
        // SAFETY: in PENDING the joiner owns `waiter` (module doc); there is one joiner (the
        // handle is not Clone and `join` consumes it).
        p.waiter.with_mut(|c| unsafe { *c = Some(w) });
        #[cfg(not(lagom_mutant = "join_split_check"))]
        let registered = p
            .state
            .compare_exchange(PENDING, WAITING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        // Mutant: the check (the load above) and the registration split into a plain store;
        // the task may finish between the two, find no waiter, and the store hides its DONE:
        // the joiner sleeps forever.
        #[cfg(lagom_mutant = "join_split_check")]
        let registered = {
            p.state.store(WAITING, Ordering::Release);
            true
        };
        if registered {
            return None;
        }
        // DONE came first and the finisher saw PENDING: the cell is still ours.
        // SAFETY: as above; the finisher touches `waiter` only after reading WAITING.
        drop(p.waiter.with_mut(|c| unsafe { (*c).take() }));
        Some(self.take_outcome())
    }

    /// Takes the outcome once the state read `DONE` (Acquire).
    fn take_outcome(&self) -> Result<T, JoinError> {
        // SAFETY: after DONE the outcome cell is the joiner's (module doc); there is one joiner.
        let o = self.packet().outcome.with_mut(|c| unsafe { (*c).take() });
        match o {
            Some(Outcome::Ended(r)) => r,
            Some(Outcome::Cancelled) => panic!("lagom: joined task was cancelled by shutdown"),
            None => unreachable!("JoinHandle::join consumes the handle"),
        }
    }
}
