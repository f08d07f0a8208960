//! [`Condvar`]: waiting for a condition on data behind a [`Mutex`], with
//! `std::sync::Condvar`'s API (`wait`, `wait_while`, `wait_timeout`, `wait_timeout_while`,
//! `notify_one`, `notify_all`).
//!
//! Invariant: *a notify that comes after a waiter released its mutex in `wait` wakes that
//! waiter (or another one, for `notify_one`); waits may also return spuriously, as std's.*
//!
//! ## The protocol
//!
//! * **wait**: the waiter holds the mutex. It queues on the condvar's waiter queue
//!   (`waiters.rs`: no condition to validate, the mutex already excludes the notifier's
//!   change), and only *then* — in the queue's `before_sleep` — unlocks the mutex and parks.
//!   Woken (or timed out), it locks the mutex again before it returns.
//! * **notify**: pops one waiter (or all) and unparks it, after a look at the queue's count
//!   that skips the queue's lock when nobody waits.
//!
//! No lost wakeup: a notifier that changed the condition under the mutex did so after the
//! waiter's unlock, which came after the waiter was queued and counted; the count's store is
//! sequenced before that unlock (Release) and the notifier's look after its lock (Acquire),
//! so the look sees the waiter (`waiters.rs`, "`len`"). A notifier that changes the condition
//! without the mutex may miss a waiter, with std's condvar too.
//!
//! A woken waiter re-takes the mutex through its ordinary `lock` (a `notify_all` wakes every
//! waiter, which then queue on the mutex in turn; no requeueing onto the mutex's queue).
//!
//! ## Cancellation
//!
//! A shutdown's cancellation unwinds a waiter out of its park (or out of the `lock` that
//! takes the mutex again): at that point the waiter does not hold the mutex, which another
//! task or thread may hold. Its guard is kept in a `ManuallyDrop` across the wait and only a
//! normal return hands it back, so an unwinding waiter forgets it instead of dropping it: it
//! never unlocks (nor poisons) a mutex it does not hold. It does not take the mutex again
//! first, as a cancelled pthread waiter does: while a task unwinds no other task runs on its
//! worker (`sched/unwind.rs`), so a re-lock could wait for ever for a holder of the same
//! worker. A waiter that was notified and then cancelled passes the notification on
//! (`notify_one`), as the other primitives pass on what a cancelled waiter was handed.
//! (Test `sync_condvar::a_cancelled_waiter_never_unlocks_a_mutex_it_does_not_hold`, mutant
//! `condvar_cancel_unlocks`.)

use core::time::Duration;

use super::mutex::MutexGuard;
use super::poison::{LockResult, PoisonError};
use super::waiters::{Wait, WaitQueue};
use crate::time::Instant;

/// Whether a timed wait ended by its timeout (as `std::sync::WaitTimeoutResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// Whether the wait ended because its time ran out.
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

/// A condition variable for tasks and threads, with `std::sync::Condvar`'s API: a notify that
/// comes after a waiter released its mutex in `wait` wakes that waiter (or another one, for
/// `notify_one`); waits may also return spuriously, as std's.
///
/// ```
/// use std::sync::Arc;
/// use lagom::sync::{Condvar, Mutex};
///
/// let rt = lagom::Runtime::builder().build().unwrap();
/// let pair = Arc::new((Mutex::new(false), Condvar::new()));
/// let p2 = Arc::clone(&pair);
/// let h = rt.spawn(move || {
///     let (m, cv) = &*p2;
///     let ready = cv.wait_while(m.lock().unwrap(), |r| !*r).unwrap();
///     assert!(*ready);
/// });
/// let (m, cv) = &*pair;
/// *m.lock().unwrap() = true;
/// cv.notify_one();
/// h.join().unwrap();
/// ```
#[derive(Debug, Default)]
pub struct Condvar {
    queue: WaitQueue,
}

impl Condvar {
    crate::locking::loom_const_fn! {
        /// A condvar with no waiters. A `const fn`, as std's (not under `cfg(loom)`).
        pub fn new() -> Condvar {
            Condvar {
                queue: WaitQueue::new(),
            }
        }
    }

    /// One wait: queue, unlock, park until notified or `deadline`, lock again; returns the
    /// guard and whether it timed out (module doc, "Cancellation").
    ///
    /// The guard is held in a `ManuallyDrop` across the wait: if a shutdown's cancellation
    /// unwinds out of it — out of the park, or out of the `lock` that takes the mutex
    /// again — the mutex is not held, so the guard must not be dropped (its drop would unlock
    /// the mutex under whoever holds it now, and poison it). Only a normal return hands the
    /// guard back.
    fn wait_once<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Option<u64>,
    ) -> (MutexGuard<'a, T>, bool) {
        let guard = core::mem::ManuallyDrop::new(guard);
        // Mutant `condvar_cancel_unlocks` (runtime/tests/mutants.sh): the guard is an
        // ordinary local again, dropped (unlocking) when a cancellation unwinds the wait.
        #[cfg(lagom_mutant = "condvar_cancel_unlocks")]
        let guard = core::mem::ManuallyDrop::into_inner(guard);
        let raw = guard.raw();
        let r = self.queue.wait(
            0,
            deadline,
            || true,
            || raw.unlock(),
            |_| {},
            // Notified, then cancelled: the notification may be another waiter's.
            |_| self.notify_one(),
        );
        raw.lock();
        #[cfg(not(lagom_mutant = "condvar_cancel_unlocks"))]
        let guard = core::mem::ManuallyDrop::into_inner(guard);
        (guard, r == Wait::TimedOut)
    }

    /// Blocks the calling task until notified, releasing the mutex meanwhile; takes it again
    /// before returning. May return spuriously: check the condition in a loop, or use
    /// [`wait_while`](Self::wait_while).
    ///
    /// # Errors
    /// The guard inside a `PoisonError` if the mutex was poisoned when it was taken again.
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
        let (guard, _) = self.wait_once(guard, None);
        guard.poison().map(guard)
    }

    /// Waits while `condition` holds (checked first, and after every wakeup).
    ///
    /// # Errors
    /// As [`wait`](Self::wait).
    pub fn wait_while<'a, T: ?Sized, F: FnMut(&mut T) -> bool>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: F,
    ) -> LockResult<MutexGuard<'a, T>> {
        while condition(&mut *guard) {
            guard = self.wait_once(guard, None).0;
        }
        guard.poison().map(guard)
    }

    /// As [`wait`](Self::wait), for at most `dur` (on the worker's timer inside a task).
    ///
    /// # Errors
    /// As [`wait`](Self::wait), with the timeout result beside the guard.
    pub fn wait_timeout<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        dur: Duration,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let deadline = Instant::now().add_saturating(dur).as_nanos();
        let (guard, timed_out) = self.wait_once(guard, Some(deadline));
        let poisoned = guard.poison().get();
        let r = (guard, WaitTimeoutResult(timed_out));
        if poisoned {
            Err(PoisonError::new(r))
        } else {
            Ok(r)
        }
    }

    /// As [`wait_while`](Self::wait_while), for at most `dur`; the result says whether the
    /// condition still held when the time ran out.
    ///
    /// # Errors
    /// As [`wait_timeout`](Self::wait_timeout).
    pub fn wait_timeout_while<'a, T: ?Sized, F: FnMut(&mut T) -> bool>(
        &self,
        mut guard: MutexGuard<'a, T>,
        dur: Duration,
        mut condition: F,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let deadline = Instant::now().add_saturating(dur).as_nanos();
        let mut timed_out = false;
        while condition(&mut *guard) {
            if timed_out || crate::sys::time::monotonic_ns() >= deadline {
                timed_out = true;
                break;
            }
            (guard, timed_out) = self.wait_once(guard, Some(deadline));
        }
        let timed_out = timed_out && condition(&mut *guard);
        let poisoned = guard.poison().get();
        let r = (guard, WaitTimeoutResult(timed_out));
        if poisoned {
            Err(PoisonError::new(r))
        } else {
            Ok(r)
        }
    }

    /// Wakes one waiting task or thread, if any.
    #[inline]
    pub fn notify_one(&self) {
        if self.queue.has_waiters() {
            self.queue.wake_one(false, |_| {});
        }
    }

    /// Wakes every waiting task and thread.
    #[inline]
    pub fn notify_all(&self) {
        if self.queue.has_waiters() {
            self.queue.wake_all(|_| {});
        }
    }
}
