//! `QueuedTask`: the runqueue's payload, a pointer to a queued task that borrows the reference
//! its registry holds instead of owning one (an `Arc` clone on every enqueue and its
//! drop on every dequeue are two locked read-modify-writes per spawn).
//!
//! The lifetime argument: a task is inserted into its registry (`registry.rs`) before its
//! first enqueue (`spawn_inner`), and leaves it only
//!
//! * in `put_dead` (`sched/exit.rs`), or in its home worker's reap of the dead list that `put_dead`
//!   pushed it on, after its exit hook has dequeued it for good (a dead task is never
//!   enqueued again: only a claimed `BLOCKED` task or a new one is activated), or
//! * in `Runtime::shutdown`, after every worker has stopped and every runqueue was replaced by
//!   an empty one.
//!
//! So while a `QueuedTask` is in a runqueue the registry's reference keeps its task alive, and
//! a pointer taken out of it (`pick`, balance, a finished delayed dequeue) is used only under
//! that runqueue's lock or, for the running task, while the registry still holds it.
//!
//! Wakelist entries (`wake::queue_wakelist`) borrow the registry's reference the same way: an
//! entry is a claimed or new task, which is not dead and so still in its registry, until the
//! drain that takes it activates it; shutdown empties every wakelist before it frees the
//! registries' tasks. Loom
//! models, which have no registry, keep every task they queue in their own handle
//! (`model/`). A `QueuedTask` never frees anything; dropping one is a no-op.

use core::ops::Deref;
use core::ptr::NonNull;

use super::{Task, TaskRef};

/// A queued task of a runtime `R` (module doc).
///
/// It also carries a copy of the task's context pointer ([`Task::ctx`], stable for the task's
/// life), so that the resume prefetch (`sched/schedule.rs`) can fetch a queued task's stack
/// without first waiting for its cold struct: a hint only, never dereferenced.
pub(crate) struct QueuedTask<R: 'static>(NonNull<Task<R>>, *const u8);

// SAFETY: it stands for a shared reference to a `Task`, which is Sync (and Send as an Arc).
unsafe impl<R: Send + Sync + 'static> Send for QueuedTask<R> {}
// SAFETY: as for Send.
unsafe impl<R: Send + Sync + 'static> Sync for QueuedTask<R> {}

impl<R: 'static> QueuedTask<R> {
    /// The payload for `t`, which is about to be enqueued.
    ///
    /// # Safety
    /// Another reference to `t` (its registry's, or a loom model's) outlives the returned
    /// value's time in the runqueue, and whatever is done through pointers taken out of it
    /// (module doc).
    pub(crate) unsafe fn new(t: &TaskRef<R>) -> QueuedTask<R> {
        QueuedTask(NonNull::from(&**t), t.ctx.cast::<u8>().cast_const())
    }

    /// The address of the task's saved context (the top of its stack), copied at enqueue:
    /// for prefetch hints only.
    pub(crate) fn ctx_hint(&self) -> *const u8 {
        self.1
    }

    /// The task's address.
    pub(crate) fn as_ptr(&self) -> *const Task<R> {
        self.0.as_ptr()
    }
}

impl<R: 'static> Deref for QueuedTask<R> {
    type Target = Task<R>;

    fn deref(&self) -> &Task<R> {
        // SAFETY: the registry's reference keeps the task alive while it is queued, and a
        // payload is reached only through its runqueue (module doc).
        unsafe { self.0.as_ref() }
    }
}
