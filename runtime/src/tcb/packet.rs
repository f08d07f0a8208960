//! The join packet: the result slot of a task and the one waiter that joins it
//! (`task/join.rs`'s `JoinHandle` is the joiner's side).
//!
//! Invariant: *the value arrives once, and a joiner that found the slot empty is woken after
//! it is filled.*
//!
//! ## The protocol
//!
//! One state word and three cells, each owned by one side at a time (no lock: the
//! lock was taken three or four times per spawn+join, two locked instructions each):
//!
//! | state | meaning | owner of `waiter` | owner of `outcome` |
//! |---|---|---|---|
//! | `PENDING` | no outcome, nobody registered | the joiner (may write it) | the finisher |
//! | `WAITING` | the joiner registered its unparker | the finisher | the finisher |
//! | `DONE` | the outcome is in `outcome` | the finisher if it saw `WAITING`, else the joiner | the joiner |
//!
//! * **joiner** ([`Packet::try_take`], one round of `join`): load the state (Acquire). `DONE`: take the
//!   outcome. `WAITING`: already registered (park returned spuriously): park again.
//!   `PENDING`: write its waiter into `waiter`, then `compare_exchange(PENDING → WAITING)`
//!   (AcqRel): on success it is registered and parks; on failure the state is `DONE` (the
//!   finisher came in between and saw no waiter): it drops its unparker and takes the outcome.
//! * **finisher** (`complete` or `cancel`, exactly once per task: the task ends once, and
//!   shutdown cancels only a task that never ended): write `outcome`, then `swap(DONE)` (AcqRel): the Release half publishes the
//!   outcome to the joiner's Acquire; if the old state was `WAITING`, the Acquire half makes
//!   the joiner's `waiter` write visible: take it and hand it to the caller, which wakes it
//!   (the exit hook under the runqueue lock it already holds, `sched/exit.rs`; shutdown
//!   after the workers stopped).
//!
//! The check and the registration are one compare-exchange. A check followed by a plain store
//! of `WAITING` would let the finisher swap in between, find no waiter, and then be
//! overwritten: the joiner sleeps forever (mutant `join_split_check`).
//!
//! The closure's value does not go through the state word either: the task stores it in a
//! cell of its own (`set_value`) just before its closure returns, and the fiber's exit hook
//! (`sched/exit.rs`) moves it into the outcome in `complete`, still on the task's stack and
//! OS thread, so the two accesses are ordered by program order.
//!
//! The packet is generic over the waiter `W` (the driver's `Waiter`: a task or a thread
//! parker): it only stores and hands back what the joiner registered, and names no layer above.
//!
//! Checked by the loom model `join` (`loom-tests/tests/join.rs`), which runs `try_take` (one
//! round of `join`) and the finishing side (`set_value`, then `Complete::complete`) against
//! each other over the real park/unpark path; mutant `join_split_check`.

use alloc::sync::Arc;
use core::ptr::NonNull;

use crate::JoinError;
use crate::locking::atomic::{AtomicU32, Ordering};
use crate::locking::cell::UnsafeCell;

/// The type-erased side a worker calls when the task ends; `W` is the joiner's waiter.
pub(crate) trait Complete<W>: Send + Sync {
    /// The task ended: `Some` if it panicked, `None` if its closure returned (the value is
    /// already in the slot). Returns the registered joiner's waiter, which the caller must
    /// wake (the exit hook does so under the runqueue lock it holds, `sched/exit.rs`).
    #[must_use = "the joiner must be woken"]
    fn complete(&self, panic: Option<JoinError>) -> Option<W>;
    /// The runtime shut down before the task ended. Returns the registered joiner's waiter,
    /// which the caller must wake.
    #[must_use = "the joiner must be woken"]
    fn cancel(&self) -> Option<W>;
}

/// No outcome, nobody registered (module doc).
const PENDING: u32 = 0;
/// The joiner's waiter is in `waiter`.
const WAITING: u32 = 1;
/// The outcome is in `outcome`.
const DONE: u32 = 2;

/// What the finisher delivers.
pub(crate) enum Outcome<T> {
    /// The task ended: its value or its panic.
    Ended(Result<T, JoinError>),
    /// The runtime shut down first.
    Cancelled,
}

/// The result slot of one task, joined by at most one waiter `W` (module doc).
pub(crate) struct Packet<T, W> {
    /// `PENDING`, `WAITING` or `DONE` (module doc).
    state: AtomicU32,
    /// The joiner's waiter; owned as the module doc's table says.
    waiter: UnsafeCell<Option<W>>,
    /// The outcome; the finisher's until `DONE`, then the joiner's.
    outcome: UnsafeCell<Option<Outcome<T>>>,
    /// The closure's value between its return and `complete` (module doc): written by the task,
    /// taken by the worker that ran it, on that one OS thread.
    value: UnsafeCell<Option<T>>,
}

// SAFETY: every cell has one owner at a time, handed over through `state` (module doc), and
// `value` is touched only on the task's worker thread, in program order. `T: Send` lets the
// value move between the task's and the joiner's threads, `W: Send` the waiter.
unsafe impl<T: Send, W: Send> Sync for Packet<T, W> {}
// SAFETY: as for Sync: every part is Send when `T` and `W` are.
unsafe impl<T: Send, W: Send> Send for Packet<T, W> {}

impl<T, W> Packet<T, W> {
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

    /// The closure's value, stored by the task itself just before it ends (or by the pool
    /// thread that ran a `spawn_blocking` closure, its finisher).
    ///
    /// # Safety
    /// Called once, by the packet's finisher — the task, from its fiber, whose closure then
    /// ends, or the pool thread of a blocking job — and `complete` runs later on the same OS
    /// thread (module doc).
    pub(crate) unsafe fn set_value(&self, v: T) {
        // SAFETY: the caller's contract: the only access until `complete`, which follows it on
        // this thread.
        self.value.with_mut(|p| unsafe { *p = Some(v) });
    }

    /// Whether the outcome is there.
    pub(crate) fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == DONE
    }

    /// The finisher's step (module doc); called once per packet. Returns the joiner to wake,
    /// if one registered.
    fn finish(&self, outcome: Outcome<T>) -> Option<W> {
        // SAFETY: the outcome cell is the finisher's until the swap below publishes DONE, and
        // there is one finisher (the task ends once; shutdown cancels only a task that never
        // ended).
        self.outcome.with_mut(|p| unsafe { *p = Some(outcome) });
        if self.state.swap(DONE, Ordering::AcqRel) == WAITING {
            // SAFETY: the joiner wrote its waiter before its PENDING → WAITING exchange,
            // which this swap read (Acquire); from WAITING on the cell is the finisher's.
            return self.waiter.with_mut(|p| unsafe { (*p).take() });
        }
        None
    }

    /// One round of a join: take the outcome if it is there, else register `waiter()` (once)
    /// to be woken when it arrives. The check and the registration are one compare-exchange
    /// (module doc; loom model `join`, mutant `join_split_check`). Inlined into the join
    /// loop, as it was when it lived there (out of line it cost ~35 instructions per
    /// spawn+join).
    ///
    /// # Safety
    /// The caller is the packet's one joiner (the join handle, which is not `Clone` and whose
    /// `join` consumes it), and does not call this again once it returned `Some`.
    #[inline]
    pub(crate) unsafe fn try_take(&self, waiter: impl FnOnce() -> W) -> Option<Outcome<T>> {
        match self.state.load(Ordering::Acquire) {
            // SAFETY: the caller is the one joiner.
            DONE => return Some(unsafe { self.take_outcome() }),
            WAITING => return None,
            _ => {}
        }
        // PENDING: the waiter cell is ours until the exchange below publishes it.
        let w = waiter();
        // SAFETY: in PENDING the joiner owns `waiter` (module doc); there is one joiner (the
        // caller's contract).
        self.waiter.with_mut(|c| unsafe { *c = Some(w) });
        #[cfg(not(lagom_mutant = "join_split_check"))]
        let registered = self
            .state
            .compare_exchange(PENDING, WAITING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        // Mutant: the check (the load above) and the registration split into a plain store;
        // the task may finish between the two, find no waiter, and the store hides its DONE:
        // the joiner sleeps forever.
        #[cfg(lagom_mutant = "join_split_check")]
        let registered = {
            self.state.store(WAITING, Ordering::Release);
            true
        };
        if registered {
            return None;
        }
        // DONE came first and the finisher saw PENDING: the cell is still ours.
        // SAFETY: as above; the finisher touches `waiter` only after reading WAITING.
        drop(self.waiter.with_mut(|c| unsafe { (*c).take() }));
        // SAFETY: the caller is the one joiner.
        Some(unsafe { self.take_outcome() })
    }

    /// Takes the outcome once the state read `DONE` (Acquire).
    ///
    /// # Safety
    /// As for [`try_take`](Self::try_take), which alone calls it.
    #[inline]
    unsafe fn take_outcome(&self) -> Outcome<T> {
        // SAFETY: after DONE the outcome cell is the joiner's (module doc); there is one joiner.
        let o = self.outcome.with_mut(|c| unsafe { (*c).take() });
        o.expect("lagom: a join packet's outcome is taken once")
    }
}

impl<T: Send, W: Send> Complete<W> for Packet<T, W> {
    fn complete(&self, panic: Option<JoinError>) -> Option<W> {
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

    fn cancel(&self) -> Option<W> {
        self.finish(Outcome::Cancelled)
    }
}

/// The task's pointer to its packet's value cell, for [`Packet::set_value`]: a plain pointer,
/// not an `Arc` clone (two locked read-modify-writes per spawn). The task's
/// `completion` owns the same packet (in the task or as an `Arc`, `completion.rs`) and is
/// dropped only with the task, which outlives its closure.
pub(crate) struct ValueSlot<T, W>(*const Packet<T, W>);

// SAFETY: it is used only as `set_value` through `&Packet<T, W>`, which is Send + Sync for
// `T: Send, W: Send`.
unsafe impl<T: Send, W: Send> Send for ValueSlot<T, W> {}

impl<T, W> ValueSlot<T, W> {
    /// The slot of the packet at `p`, which the task's completion owns.
    pub(crate) fn new(p: NonNull<Packet<T, W>>) -> Self {
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
