//! [`Semaphore`]: a count of permits that tasks (and threads) take and give back, blocking
//! while too few are free (std has none; the shape is tokio's, the blocking kind).
//!
//! Invariant: *the permits held never exceed the permits the semaphore was given: a permit is
//! taken by exactly one acquirer, whether it took it itself or was handed it.*
//!
//! ## The protocol
//!
//! The free permits are one atomic count.
//!
//! * **acquire(n)**: take `n` with a compare-exchange while at least `n` are free. Otherwise
//!   queue on the waiter queue (`waiters.rs`), tagged `n`, with `validate` = "fewer than `n`
//!   free"; when woken, the permits are already the waiter's.
//! * **release(n)**: add `n`, then — always under the queue's lock, since the count and the
//!   waiter's `validate` share no other lock — hand permits to the front waiters in order, as
//!   long as the front one's request fits (taking them from the count), and wake those.
//!
//! Order: waiters are served first come, first served among themselves; an acquirer that
//! finds enough permits free takes them even while a larger request waits (no queueing
//! behind it), so a stream of small acquires can delay a big one.

use core::fmt;
use core::time::Duration;

use super::waiters::{Wait, WaitQueue};
use crate::locking::atomic::{AtomicUsize, Ordering};
use crate::time::Instant;

/// A counting semaphore for tasks and threads (std has none; tokio's shape, blocking).
/// Waiters are served first come, first served; an acquirer that finds enough permits free
/// takes them even while a larger request waits, so a stream of small acquires can delay a
/// big one.
///
/// ```
/// use lagom::sync::Semaphore;
///
/// let s = Semaphore::new(2);
/// let a = s.acquire();
/// let b = s.acquire();
/// assert!(s.try_acquire().is_none());
/// drop(a);
/// assert!(s.try_acquire().is_some());
/// drop(b);
/// assert_eq!(s.available_permits(), 2);
/// ```
pub struct Semaphore {
    permits: AtomicUsize,
    queue: WaitQueue,
}

/// Permits taken from a [`Semaphore`], given back on drop.
#[must_use = "the permits are released as soon as the guard is dropped"]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
    n: usize,
}

impl Semaphore {
    crate::locking::loom_const_fn! {
        /// A semaphore with `permits` free permits. A `const fn` (tokio's is `const_new`), so
        /// a `static` may hold one (not under `cfg(loom)`).
        pub fn new(permits: usize) -> Semaphore {
            Semaphore {
                permits: AtomicUsize::new(permits),
                queue: WaitQueue::new(),
            }
        }
    }

    /// How many permits are free now.
    pub fn available_permits(&self) -> usize {
        self.permits.load(Ordering::Relaxed)
    }

    fn try_take(&self, n: usize) -> bool {
        let mut p = self.permits.load(Ordering::Relaxed);
        while p >= n {
            match self
                .permits
                .compare_exchange_weak(p, p - n, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => p = now,
            }
        }
        false
    }

    fn acquire_raw(&self, n: usize, deadline: Option<u64>) -> bool {
        loop {
            if self.try_take(n) {
                return true;
            }
            let r = self.queue.wait(
                n,
                deadline,
                || self.permits.load(Ordering::Relaxed) < n,
                || {},
                |_| {},
                // Handed the permits, then cancelled: give them back.
                |_| self.release(n),
            );
            match r {
                Wait::Woken | Wait::Handed => return true,
                Wait::TimedOut => return false,
                Wait::Invalid => {}
            }
        }
    }

    /// Takes one permit, blocking the calling task (or thread) until one is free.
    pub fn acquire(&self) -> SemaphorePermit<'_> {
        self.acquire_many(1)
    }

    /// Takes `n` permits at once, blocking until `n` are free. A request larger than the
    /// semaphore ever holds waits for ever.
    pub fn acquire_many(&self, n: usize) -> SemaphorePermit<'_> {
        self.acquire_raw(n, None);
        SemaphorePermit { sem: self, n }
    }

    /// As [`acquire`](Self::acquire), giving up after `timeout` (`None`).
    pub fn acquire_timeout(&self, timeout: Duration) -> Option<SemaphorePermit<'_>> {
        let d = Instant::now().add_saturating(timeout).as_nanos();
        // Not `then_some`: it would build (and drop, so release) a permit on a timeout too.
        if self.acquire_raw(1, Some(d)) {
            Some(SemaphorePermit { sem: self, n: 1 })
        } else {
            None
        }
    }

    /// One permit if one is free now. Inside a task, a `None` is also a preemption point
    /// (`sync`'s module doc).
    pub fn try_acquire(&self) -> Option<SemaphorePermit<'_>> {
        self.try_acquire_many(1)
    }

    /// `n` permits if that many are free now. Inside a task, a `None` is also a preemption
    /// point (`sync`'s module doc).
    pub fn try_acquire_many(&self, n: usize) -> Option<SemaphorePermit<'_>> {
        if self.try_take(n) {
            Some(SemaphorePermit { sem: self, n })
        } else {
            crate::task::try_point();
            None
        }
    }

    /// Adds `n` permits (given back, or new ones), handing them to waiters first.
    pub fn release(&self, n: usize) {
        self.permits.fetch_add(n, Ordering::Release);
        self.queue
            .wake_front_while(false, |want| self.try_take(want), |_| {});
    }
}

impl SemaphorePermit<'_> {
    /// How many permits this holds.
    pub fn num_permits(&self) -> usize {
        self.n
    }

    /// Keeps the permits taken: they are not given back on drop.
    pub fn forget(self) {
        core::mem::forget(self);
    }
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.sem.release(self.n);
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("permits", &self.available_permits())
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("n", &self.n)
            .finish()
    }
}
