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
    let new = Arc::new(ThreadParker {
        futex: Futex::new(EMPTY),
    });
    PARKER.set(Arc::into_raw(Arc::clone(&new)).cast());
    new
}
