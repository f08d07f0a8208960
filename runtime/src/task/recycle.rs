//! Recycling a joined task's allocation for the next spawn on the same worker (a
//! `malloc` and a `free` of the task control block cost ~150 instructions per spawn+join).
//!
//! Invariant: *a worker's spare is a task that nothing else refers to: dead, freed by its
//! worker (out of its registry, fiber taken), its only reference the spare slot's.*
//!
//! * **put** ([`recycle`]): `JoinHandle::join`, once it has the outcome, hands its task
//!   reference here. If it is the only one left (`Arc::get_mut`, which also proves that no
//!   other thread reads the task any more: every other reference, counted or borrowed from
//!   the registry's, is gone) and the joiner runs on a worker of the task's runtime, the
//!   reference goes into that worker's spare slot (`Registry::put_spare`, touched only by
//!   the worker's own thread), dropping the spare it held, if any. Otherwise it is dropped as
//!   usual. A unique reference implies that the task left its registry, which happens only
//!   after its exit hook has dequeued it for good and `put_dead` took its fiber
//!   (`tcb/registry.rs`); a cancelled task never gets here (its join panics).
//! * **take** (`spawn_inner`, `builder.rs`, for a spawn by a task of that worker): takes the spare, turns
//!   the reference into a raw pointer (so that nothing would drop it twice if the spawn
//!   panicked half-way), drops the old task's fields in place and builds the new task in the
//!   same allocation, whose count is still 1; the `Arc` is rebuilt from the pointer.
//!
//! A spare holds its runtime's `Shared` (through `Task::shared`) while `Shared` holds the
//! spare: shutdown drops every spare (`Registry::cancel_all`) after the workers stopped, so
//! the cycle never outlives the runtime.

use alloc::sync::Arc;

use crate::worker::{TaskRef, WorkerThread, local};

/// Keeps `task`, just joined, as its worker's spare if nothing else refers to it (module
/// doc); drops it otherwise.
pub(crate) fn recycle(task: TaskRef) {
    recycle_on(local(), task);
}

/// [`recycle`] by the joiner running on worker thread `wt` (`None`: not on a worker), as a
/// loom model calls it with its own worker thread (`lagom::model`).
#[inline(always)]
pub(crate) fn recycle_on(wt: Option<&WorkerThread>, mut task: TaskRef) {
    // Mutant `recycle_no_unique_check` (loom model `exit_recycle`): a task that its worker
    // has not freed yet is recycled, and the next spawn builds a task in memory that the
    // exiting worker still writes.
    #[cfg(not(lagom_mutant = "recycle_no_unique_check"))]
    if Arc::get_mut(&mut task).is_none() {
        return;
    }
    let Some(wt) = wt else { return };
    if !Arc::ptr_eq(&task.shared, &wt.shared) {
        return;
    }
    // Unique, so out of its registry: its worker freed it (`put_dead`) after its switch-out,
    // and the `Arc`'s count (Release on the drop, Acquire in `get_mut`) orders that switch-out
    // before this check. Not under loom, which does not model the count of a standard `Arc`:
    // there the check could read an `on_cpu` older than the one `put_dead` saw clear.
    #[cfg(not(loom))]
    task.check_freeable("the recycle of a joined task");
    // SAFETY: this thread is the worker's; the task is unique (checked above), so dead and
    // out of its registry (module doc).
    unsafe { wt.worker().tasks.put_spare(task) };
}
