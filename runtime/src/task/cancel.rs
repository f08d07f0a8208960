//! The task's side of a shutdown's cancellation (the protocol is in `lagom::runtime`'s module
//! doc): the cancellation points, where a task finds out that the runtime is shutting down
//! and unwinds, or, past the shutdown's give-up point, is abandoned.
//!
//! The points are where a task calls into lagom: the top of every round of `park` (and so of
//! `sleep` and `join`, which park), and `yield_now` and `cond_resched` once they have
//! switched (a `cond_resched` that does not switch is no point: its fast path stays one
//! look at the worker's flags, and a shutdown that wants a running task to stop sets
//! need-resched on every worker). A spawn is no point even when its preemption point
//! switches (`task/current.rs`, `spawn_point`): a spawn never unwinds; nor is a call that
//! returned without blocking (a failing `try_*`, an unbounded `send`: `try_point`), for the
//! same reason. Nor are three waits that must not end before what they wait for has stopped
//! touching the waiter's frame, and that end on their own once it has (`task/park.rs`,
//! `park_uncancelled`): a scope's owner waiting for its children and `join`'s caller waiting
//! for `b` (`scope.rs`), and `task::blocking`'s caller waiting for its closure
//! (`blocking.rs`). A cancellation requested meanwhile stays pending for the task's next
//! point. A task's start is no point either (it would cost every spawn a look-up of its
//! worker): a task that first runs during a shutdown meets its first point at its first call
//! into lagom.
//!
//! At a point a task finds its own `cancel` word, the runtime's phase, and whether its
//! thread is unwinding (std's panic count: the task's own, since a task that unwinds keeps
//! its thread, `sched/unwind.rs`):
//!
//! | task \ phase | RUN | DRAIN | FORCE | EXIT |
//! |---|---|---|---|---|
//! | NONE | go on | go on | raise | abandon |
//! | REQUESTED | raise | raise | raise | abandon |
//! | unwinding (its own panic, or RAISED and still unwinding) | go on | go on | go on | abandon |
//! | RAISED, not unwinding (it caught the cancellation) | go on; `park` yields instead of sleeping | same | same | abandon |
//!
//! * **Raise** (with `std`): store RAISED, count it, and unwind with
//!   `std::panic::resume_unwind` and the crate's private [`Cancelled`] payload — no panic
//!   hook runs, so nothing is printed — through the task's frames to the fiber's
//!   `catch_unwind`, which hands it to the joiner as a cancelled `JoinError`. Destructors
//!   run and guards are released on the way. The blocking call does not return normally.
//! * **Unwinding** tasks (a destructor that blocks during a panic, whether the panic is the
//!   cancellation or the task's own) are never raised: a second unwind out of a destructor
//!   that runs during the first aborts the process. Their `park` sleeps as usual, which
//!   holds their worker's thread (`sched/unwind.rs`): a real wakeup ends it, and the
//!   shutdown's give-up point abandons the task there.
//! * **RAISED** tasks that are no longer unwinding caught the cancellation and went on. They
//!   are not raised again, and they never sleep: `park` yields to the other tasks of the
//!   worker and returns at once (a spurious return, which its contract allows), so that no
//!   sweep is needed to wake them; the give-up point abandons them.
//! * **Abandon**: the task blocks with nobody to wake it (a timer's spurious wakeup finds it
//!   here again), its worker runs out of work and stops, and the shutdown frees the task
//!   without unwinding it. A task that unwinds leaves its thread's panic count raised: that
//!   thread runs no task again (`sched/unwind.rs`, `strand`).
//!
//! Without `std` nothing can unwind a task: no sweep requests a cancellation and FORCE
//! raises nothing, so blocked tasks are abandoned (`lagom::runtime`).

#[cfg(feature = "std")]
use alloc::boxed::Box;

#[cfg(feature = "std")]
use crate::join_error::Cancelled;
use crate::locking::atomic::Ordering;
use crate::sched::block_current;
#[cfg(feature = "std")]
use crate::sched::{Reason, schedule};
use crate::tcb::{CANCEL_NONE, CANCEL_RAISED, CANCEL_REQUESTED};
use crate::worker::{PHASE_EXIT, PHASE_FORCE, PHASE_RUN, Task};

/// What a task at a cancellation point does (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    /// Nothing to do.
    Go,
    /// Unwind now.
    Raise,
    /// Already unwinding (or the cancellation was caught): go on, but never sleep.
    Unwinding,
    /// Past the shutdown's give-up point: block for good.
    Abandon,
}

/// The table of the module doc for task `t`. Two loads (its `cancel` word, its runtime's
/// phase) when nothing is happening, which is the usual case.
#[inline]
pub(crate) fn check(t: &Task) -> Point {
    let c = t.cancel.load(Ordering::Acquire);
    let phase = t.shared.phase();
    if c == CANCEL_NONE && phase == PHASE_RUN {
        return Point::Go;
    }
    slow(c, phase)
}

#[cold]
fn slow(c: u32, phase: u32) -> Point {
    if phase == PHASE_EXIT {
        return Point::Abandon;
    }
    // A task that unwinds already — from the cancellation, or from a panic of its own — is
    // never raised: a second unwind out of a destructor that runs during the first aborts
    // the process.
    // Mutant `unwinding_task_raised` (runtime/tests/mutants.sh): the process aborts.
    if crate::sched::thread_unwinding() && !cfg!(lagom_mutant = "unwinding_task_raised") {
        return Point::Unwinding;
    }
    match c {
        CANCEL_RAISED => Point::Unwinding,
        CANCEL_REQUESTED => Point::Raise,
        _ if phase == PHASE_FORCE && cfg!(feature = "std") => Point::Raise,
        _ => Point::Go,
    }
}

/// A cancellation point of `yield_now` and `cond_resched`: raises or abandons as [`check`]
/// says, else returns.
#[inline]
pub(crate) fn point(t: &Task) {
    match check(t) {
        Point::Go | Point::Unwinding => {}
        Point::Raise => raise(t),
        Point::Abandon => abandon(t),
    }
}

/// `park`'s cancellation point, at the top of each round: `true` if `park` must return now
/// without sleeping (the task caught the cancellation and went on: it yielded instead,
/// module doc). A task that unwinds sleeps as usual: its sleep holds its worker's thread
/// (`sched/unwind.rs`), and the shutdown's give-up point ends it.
#[inline]
pub(crate) fn park_point(t: &Task) -> bool {
    match check(t) {
        Point::Go => false,
        Point::Raise => raise(t),
        Point::Abandon => abandon(t),
        Point::Unwinding if crate::sched::thread_unwinding() => false,
        Point::Unwinding => {
            #[cfg(feature = "std")]
            schedule(Reason::Yield);
            true
        }
    }
}

/// Unwinds the calling task `t` with the cancellation (module doc). Without `std` no point
/// ever raises (`slow`), so this is unreachable there.
#[cold]
#[inline(never)]
fn raise(t: &Task) -> ! {
    t.cancel.store(CANCEL_RAISED, Ordering::Relaxed);
    if let Some(wt) = crate::worker::local() {
        let w = wt.worker();
        w.stats.inc(&w.stats.cancelled);
    }
    #[cfg(feature = "std")]
    std::panic::resume_unwind(Box::new(Cancelled));
    #[cfg(not(feature = "std"))]
    unreachable!("lagom: a cancellation raised without std")
}

/// Blocks the calling task `t` for good (module doc).
#[cold]
#[inline(never)]
fn abandon(t: &Task) -> ! {
    loop {
        t.set_blocked();
        block_current(None);
    }
}

/// Resumes a panic `payload` that a scope or a `join` caught in one of its tasks (or in its
/// own body) once they all ended (`scope.rs`). A shutdown's cancellation goes on as one: the
/// calling task is marked RAISED first, as [`raise`] marks it (a destructor that blocks
/// while it unwinds is never raised a second time, which would abort, in any case). A
/// plain thread is never cancelled (its runtime cannot shut down while it owns a scope, which
/// borrows the runtime), so there a cancellation payload becomes a panic with a message.
#[cfg(feature = "std")]
pub(crate) fn resume(payload: Box<dyn core::any::Any + Send>) -> ! {
    if payload.is::<Cancelled>()
        && crate::worker::with_current_task(|t| t.cancel.store(CANCEL_RAISED, Ordering::Release))
            .is_none()
    {
        panic!("lagom: a scope's task was cancelled: its runtime shut down before it ended");
    }
    std::panic::resume_unwind(payload)
}
