//! [`Waiter`]: who waits for a join — a task, woken through the wakeup path, or a plain OS
//! thread (`block_on`'s caller, any thread outside the runtime), which sleeps on its
//! [`ThreadParker`], a futex word with three states as `std`'s parker has: `EMPTY`, `PARKED`,
//! `NOTIFIED`.
//!
//! The task layer only stores a waiter and hands it back; waking one is the wakeup layer's
//! (`wake::unpark`), and the public `Unparker` wraps one (`task/park.rs`).

use alloc::sync::Arc;
use core::ffi::c_void;

use super::TaskRef;
use crate::locking::atomic::Ordering;
use crate::locking::futex::Futex;
use crate::sys::thread::Key;

/// A task of runtime `R`, or a plain OS thread, that waits to be unparked.
pub(crate) enum Waiter<R: 'static> {
    /// A task: its park token, then `try_to_wake_up`.
    Task(TaskRef<R>),
    /// A plain OS thread's futex parker.
    Thread(Arc<ThreadParker>),
}

impl<R: 'static> Clone for Waiter<R> {
    fn clone(&self) -> Self {
        match self {
            Waiter::Task(t) => Waiter::Task(Arc::clone(t)),
            Waiter::Thread(p) => Waiter::Thread(Arc::clone(p)),
        }
    }
}

const EMPTY: u32 = 0;
const NOTIFIED: u32 = 1;
const PARKED: u32 = u32::MAX;

/// The futex parker of a plain OS thread.
pub(crate) struct ThreadParker {
    futex: Futex,
}

impl ThreadParker {
    /// A parker of its own, not the calling thread's (the loom models give each loom thread
    /// one: loom threads share an OS thread, so they cannot use [`thread_parker`]).
    pub(crate) fn new() -> ThreadParker {
        ThreadParker {
            futex: Futex::new(EMPTY),
        }
    }

    /// Sleeps until [`unpark`](Self::unpark) (at once if one is pending); consumes it.
    pub(crate) fn park(&self) {
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

    /// As [`park`](Self::park), but returns at the latest when the monotonic clock reaches
    /// `deadline` (ns); an unpark that came is consumed either way. (Under loom the clock
    /// stands still and the futex stand-in has no timeout: it waits for an unpark.)
    pub(crate) fn park_until(&self, deadline: u64) {
        let w = self.futex.word();
        if w.fetch_sub(1, Ordering::Acquire) == NOTIFIED {
            return;
        }
        loop {
            let now = crate::sys::time::monotonic_ns();
            if now >= deadline && !cfg!(loom) {
                // PARKED → EMPTY, or NOTIFIED → EMPTY (an unpark that came meanwhile).
                w.swap(EMPTY, Ordering::Acquire);
                return;
            }
            self.futex.wait(PARKED, Some(deadline.saturating_sub(now)));
            if w.compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// Makes the current or next [`park`](Self::park) return.
    pub(crate) fn unpark(&self) {
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

/// The calling OS thread's parker (made on first use, dropped when the thread exits).
pub(crate) fn thread_parker() -> Arc<ThreadParker> {
    let p = PARKER.get().cast::<ThreadParker>();
    if !p.is_null() {
        // SAFETY: set below from Arc::into_raw; the slot keeps its reference until exit.
        unsafe { Arc::increment_strong_count(p) };
        // SAFETY: the count was just incremented for this new Arc.
        return unsafe { Arc::from_raw(p) };
    }
    let new = Arc::new(ThreadParker::new());
    PARKER.set(Arc::into_raw(Arc::clone(&new)).cast());
    new
}
