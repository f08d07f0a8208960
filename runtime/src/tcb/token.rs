//! The park token, the state behind `park` / `Unparker::unpark` (`task/park.rs`, the
//! primitive every blocking operation is built on): the sleeper's half up to `schedule()`
//! ([`prepare_park`]) and the unparker's half up to `try_to_wake_up` ([`set_token`]).
//!
//! Invariant: *an `unpark` that happens before or during a `park` makes that `park` return (at
//! once or after a wakeup); `park` may also return spuriously, so callers re-check.*
//!
//! Each parker has a token (`true`: an unpark is pending). Inside a task:
//!
//! * **park**: consume the token (`swap(false, Acquire)`, after a plain look that skips the
//!   locked swap when no token is there) and return if it was set; else
//!   announce the sleep ([`Task::set_blocked`]: store `BLOCKED`, `fence(SeqCst)`), re-check the
//!   token, and if it is set cancel the sleep (`BLOCKED → RUNNING`, unless a waker claimed the
//!   task first); otherwise `schedule()` switches away (`task/park.rs`'s loop). Loop.
//! * **unpark**: set the token (`swap(true, Release)`; if it was already set, the earlier
//!   unparker does the wakeup), `fence(SeqCst)`, then `try_to_wake_up` (`wake/unpark.rs`), which claims the task
//!   only if it is `BLOCKED`. The swap must stay a read-modify-write: a plain look that finds
//!   the token set may read one the sleeper has consumed already; the unparker would then
//!   leave while the sleeper, which consumed the older token without the Acquire edge to this
//!   unparker's condition, re-checks its condition, misses it and sleeps (loom model
//!   `stale_token`, mutant `unpark_look_first`). Loom also rejects a blind `store(true)` in
//!   its place: the sleeper's re-check after the `BLOCKED` fence may then read its own
//!   consume instead of the newer token, so the swap is kept.
//!
//! The two SeqCst fences make the store-buffering pair safe: either the sleeper's re-check
//! sees the token, or the waker's state load sees `BLOCKED` and wakes it (loom model 1,
//! `ttwu_lost_wakeup`; mutants `ttwu_no_sleeper_fence`, `park_no_waker_fence`).

use super::Task;
use crate::locking::atomic::{Ordering, fence};

/// What the sleeper does next (`prepare_park`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum ParkStep {
    /// An unpark was pending; it is consumed: return.
    Return,
    /// The token arrived after `BLOCKED` was announced and the sleep was cancelled: look
    /// again (the token is consumed on the next round).
    Retry,
    /// Switch away (`schedule()`): a waker will make the task runnable.
    Sleep,
}

/// The sleeper's side up to `schedule()` (module doc).
pub(crate) fn prepare_park<R: 'static>(task: &Task<R>) -> ParkStep {
    // Look before consuming: the swap is a locked instruction, and a sleeper usually finds no
    // token. A token set just after the look is found by the re-check below, as one set just
    // after the swap would be.
    if task.token.load(Ordering::Relaxed) && task.token.swap(false, Ordering::Acquire) {
        crate::locking::probe::probe!("tcb/token: park consumes a token");
        return ParkStep::Return;
    }
    task.set_blocked();
    if task.token.load(Ordering::Relaxed) && task.cancel_block() {
        crate::locking::probe::probe!("tcb/token: park cancels its sleep");
        return ParkStep::Retry;
    }
    crate::locking::probe::probe!("tcb/token: park sleeps");
    ParkStep::Sleep
}

/// The unparker's token step (module doc): sets the token and returns whether this unparker
/// must go on to `try_to_wake_up` (the token was clear), after the fence that orders the token
/// store before the wakeup's state load.
pub(crate) fn set_token<R: 'static>(task: &Task<R>) -> bool {
    // A read-modify-write, not a look and a store: only a swap reads the latest token (module
    // doc; loom model `stale_token`, mutant `unpark_look_first`).
    #[cfg(lagom_mutant = "unpark_look_first")]
    if task.token.load(Ordering::Relaxed) {
        return false;
    }
    if task.token.swap(true, Ordering::Release) {
        return false;
    }
    // Orders the token store before the state load in try_to_wake_up (module doc).
    #[cfg(not(lagom_mutant = "park_no_waker_fence"))]
    fence(Ordering::SeqCst);
    true
}
