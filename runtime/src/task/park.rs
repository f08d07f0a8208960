//! `park` / `Unparker::unpark`: the primitive every blocking operation is built on.
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
//!   task first); otherwise `schedule()` switches away. Loop.
//! * **unpark**: set the token (`swap(true, Release)`; if it was already set, the earlier
//!   unparker does the wakeup), `fence(SeqCst)`, then `try_to_wake_up`, which claims the task
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
//!
//! Outside tasks (plain OS threads, `block_on`'s caller) a futex parker does the same with a
//! three-state word, as `std` does: `EMPTY`, `PARKED`, `NOTIFIED`.

use alloc::sync::Arc;
use core::ffi::c_void;

use super::{Task, TaskRef};
use crate::sync::atomic::{Ordering, fence};
use crate::sync::futex::Futex;
use crate::sys::thread::Key;
use crate::worker::{self, RqGuard, WorkerThread};

/// Wakes one parked task or thread. Cloning it is cheap; any thread may call `unpark`.
#[derive(Clone)]
pub struct Unparker {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    Task(TaskRef),
    Thread(Arc<ThreadParker>),
}

impl core::fmt::Debug for Unparker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.inner {
            Inner::Task(t) => f.debug_tuple("Unparker::Task").field(&t.id).finish(),
            Inner::Thread(_) => f.write_str("Unparker::Thread"),
        }
    }
}

impl Unparker {
    pub(crate) fn for_task(t: TaskRef) -> Unparker {
        Unparker {
            inner: Inner::Task(t),
        }
    }

    /// Makes the parker's next (or current) `park` return.
    pub fn unpark(&self) {
        match &self.inner {
            Inner::Task(t) => unpark_task(t),
            Inner::Thread(p) => p.unpark(),
        }
    }

    /// [`unpark`](Self::unpark) from worker thread `wt`, which holds its own runqueue lock
    /// (`rq`): a task joiner queued or woken on `wt`'s worker is made runnable under that
    /// lock, without taking it again (`wake::try_to_wake_up_held`). Returns the guard if the
    /// lock is still held; `None` if it was released on the way (another worker's queue, a
    /// thread parker), and the caller must take it again.
    pub(crate) fn unpark_held<'a>(
        &self,
        wt: &'a WorkerThread,
        rq: RqGuard<'a>,
    ) -> Option<RqGuard<'a>> {
        match &self.inner {
            Inner::Task(t) => unpark_task_held(t, wt, rq),
            Inner::Thread(p) => {
                // A futex wake is a system call: not under the runqueue lock.
                drop(rq);
                p.unpark();
                None
            }
        }
    }
}

/// The unparker of the calling task, or of the calling OS thread outside tasks.
pub fn current_unparker() -> Unparker {
    let inner = match worker::current_task() {
        Some(t) => Inner::Task(t),
        None => Inner::Thread(thread_parker()),
    };
    Unparker { inner }
}

/// Blocks the calling task (or OS thread) until its unparker is called; may return spuriously.
pub fn park() {
    if worker::with_current(park_task).is_none() {
        thread_parker().park();
    }
}

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
pub(crate) fn prepare_park(task: &Task) -> ParkStep {
    // Look before consuming: the swap is a locked instruction, and a sleeper usually finds no
    // token. A token set just after the look is found by the re-check below, as one set just
    // after the swap would be.
    if task.token.load(Ordering::Relaxed) && task.token.swap(false, Ordering::Acquire) {
        return ParkStep::Return;
    }
    task.set_blocked();
    if task.token.load(Ordering::Relaxed) && task.cancel_block() {
        return ParkStep::Retry;
    }
    ParkStep::Sleep
}

/// The park loop of the running task `task` on worker thread `wt`. `wt` serves the first
/// sleep only (the look-up `park` made): once the task has switched away it may resume on
/// another worker, so a later sleep looks its worker up afresh.
pub(crate) fn park_task(wt: &WorkerThread, task: &Task) {
    let mut wt = Some(wt);
    loop {
        match prepare_park(task) {
            ParkStep::Return => return,
            ParkStep::Retry => {}
            ParkStep::Sleep => worker::block_current(wt.take()),
        }
    }
}

pub(crate) fn unpark_task(task: &TaskRef) {
    if set_token(task) {
        let _ = crate::wake::try_to_wake_up(task);
    }
}

/// [`unpark_task`] from worker thread `wt` holding its runqueue lock (`Unparker::unpark_held`).
fn unpark_task_held<'a>(
    task: &TaskRef,
    wt: &'a WorkerThread,
    rq: RqGuard<'a>,
) -> Option<RqGuard<'a>> {
    if set_token(task) {
        crate::wake::try_to_wake_up_held(task, wt, rq)
    } else {
        Some(rq)
    }
}

/// The unparker's token step (module doc): sets the token and returns whether this unparker
/// must go on to `try_to_wake_up` (the token was clear), after the fence that orders the token
/// store before the wakeup's state load.
fn set_token(task: &Task) -> bool {
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

const EMPTY: u32 = 0;
const NOTIFIED: u32 = 1;
const PARKED: u32 = u32::MAX;

/// The futex parker of a plain OS thread.
pub(crate) struct ThreadParker {
    futex: Futex,
}

impl ThreadParker {
    fn park(&self) {
        let w = self.futex.word();
        // EMPTY → PARKED, or NOTIFIED → EMPTY (consumed, return).
        if w.fetch_sub(1, Ordering::Acquire) == NOTIFIED {
            return;
        }
        loop {
            self.futex.wait(PARKED, None);
            if w.compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    fn unpark(&self) {
        if self.futex.word().swap(NOTIFIED, Ordering::Release) == PARKED {
            self.futex.wake_all();
        }
    }
}

/// Drops the thread's parker reference when the thread exits.
unsafe extern "C" fn drop_parker(p: *mut c_void) {
    // SAFETY: the value was set from `Arc::into_raw` by `thread_parker`, once per thread.
    drop(unsafe { Arc::from_raw(p.cast_const().cast::<ThreadParker>()) });
}

static PARKER: Key = Key::new(Some(drop_parker));

fn thread_parker() -> Arc<ThreadParker> {
    let p = PARKER.get().cast::<ThreadParker>();
    if !p.is_null() {
        // SAFETY: set below from Arc::into_raw; the slot keeps its reference until exit.
        unsafe { Arc::increment_strong_count(p) };
        // SAFETY: the count was just incremented for this new Arc.
        return unsafe { Arc::from_raw(p) };
    }
    let new = Arc::new(ThreadParker {
        futex: Futex::new(EMPTY),
    });
    PARKER.set(Arc::into_raw(Arc::clone(&new)).cast());
    new
}
