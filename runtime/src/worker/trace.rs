//! The trace hooks: the calls the scheduler makes where a traced event happens (switch,
//! wakeup, migration, spawn), recording into the runtime's [`Recorder`] (`trace/record.rs`).
//!
//! Each hook is `#[inline]` and starts with the only test that runs when tracing is off: is
//! `Shared::trace` `Some`? The recording itself is out of line and `#[cold]`, so the hot paths
//! keep their shape. Which thread records which event, and into which log, is the module doc
//! of `trace`: the hooks find the calling thread's worker with `local()` and fall back to the
//! locked outside log.

use super::{Shared, Task, WorkerThread, local};
use crate::trace::{MigrateCause, Recorder, SwitchReason, TraceEventKind, WakePath};
use lagom_policy::WakeFlags;

/// Records `kind` into `r`, the recorder of `shared`, from the calling thread. Out of line,
/// as the recording it leads to: a hook inlines only its `Some` test.
#[cold]
#[inline(never)]
fn record(r: &Recorder, shared: &Shared, kind: TraceEventKind) {
    // SAFETY: `my_worker` is the calling thread's own worker index, if any.
    unsafe { r.record(my_worker(shared), kind) }
}

/// The calling thread's worker index, if it is a worker of `shared`'s runtime.
fn my_worker(shared: &Shared) -> Option<usize> {
    local()
        .filter(|wt| core::ptr::eq(&*wt.shared, shared))
        .map(|wt| wt.index)
}

/// Hook: worker `wt` switches from `prev` to `next` (`None`: its idle loop).
#[inline]
pub(crate) fn switch(
    wt: &WorkerThread,
    prev: Option<&Task>,
    next: Option<&Task>,
    reason: impl Into<SwitchReason>,
) {
    if let Some(r) = &wt.shared.trace {
        let kind = TraceEventKind::Switch {
            prev: prev.map(|t| t.id),
            next: next.map(|t| t.id),
            reason: reason.into(),
        };
        record(r, &wt.shared, kind);
    }
}

/// Hook: the calling thread woke `t` onto (or handed it to) worker `target` by `path`.
#[inline]
pub(crate) fn wakeup(shared: &Shared, t: &Task, target: usize, path: WakePath) {
    if let Some(r) = &shared.trace {
        let waker = my_worker(shared);
        let kind = TraceEventKind::Wakeup {
            task: t.id,
            waker,
            target,
            path,
        };
        record(r, shared, kind);
    }
}

/// Hook at the top of `wake::enqueue_on`: a wakeup (not a spawn, `WF_FORK`) of `t` onto
/// `target`; the path follows `enqueue_on`'s branches (own worker, else TTWU_QUEUE's
/// wakelist, else the lock).
#[inline]
pub(crate) fn enqueue(
    shared: &Shared,
    t: &Task,
    local: Option<usize>,
    target: usize,
    wf: WakeFlags,
    wakelist: bool,
) {
    if shared.trace.is_some() && !wf.contains(WakeFlags::FORK) {
        let path = if Some(target) == local {
            WakePath::Local
        } else if wakelist {
            WakePath::Queued
        } else {
            WakePath::Remote
        };
        wakeup(shared, t, target, path);
    }
}

/// Hook: `t` moves from worker `from` to `to` (nothing if they are the same).
#[inline]
pub(crate) fn migrate(shared: &Shared, t: &Task, from: usize, to: usize, cause: MigrateCause) {
    if let Some(r) = &shared.trace
        && from != to
    {
        let kind = TraceEventKind::Migrate {
            task: t.id,
            from,
            to,
            cause,
        };
        record(r, shared, kind);
    }
}

/// Hook: `t` was spawned; keep its name for the export. An unnamed task keeps no entry: the
/// export names it `task-<id>`, as errors and reports do.
#[inline]
pub(crate) fn spawn(shared: &Shared, t: &Task) {
    if let Some(r) = &shared.trace
        && !t.name.is_empty()
    {
        r.name(t.id, &t.name);
    }
}
