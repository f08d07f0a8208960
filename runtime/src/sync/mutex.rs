//! [`Mutex`]: mutual exclusion that blocks the calling *task* (its worker runs others) or, on
//! a plain OS thread, the thread; with `std::sync::Mutex`'s API and poisoning.
//!
//! Invariant: *at most one guard exists at a time, and a waiter is overtaken at most once
//! per wait: the second time its turn comes, the lock is handed to it.*
//!
//! ## The protocol
//!
//! The lock word has two bits: `LOCKED` and `PARKED` (someone is, or is about to be, in the
//! waiter queue, `waiters.rs`).
//!
//! * **lock**: `compare_exchange(0, LOCKED, Acquire)`. Failing that, spin a little (some
//!   200 pause hints, [`SPIN_LIMIT`] tries) while the holder runs and nobody is parked — a
//!   short critical section on another worker ends sooner than a park round; a task that
//!   finds the lock held by a task of its own worker does not spin (that holder cannot run
//!   while it spins; the lock keeps a hint of where its holder runs). Then set `PARKED` and
//!   queue, with `validate` = "the word is still `LOCKED | PARKED`": a lock that became free
//!   meanwhile fails the validation, and the locker retries.
//! * **unlock**: `compare_exchange(LOCKED, 0, Release)`. If `PARKED` is set, the slow path
//!   pops the front waiter under the queue's lock and either
//!   - **wakes it to compete**: the word is released (`PARKED` kept if more wait) and the
//!     waiter retries `lock`, where a running locker may get there first; or
//!   - **hands it the lock**, if it was woken to compete before and lost (its queue tag
//!     says so): the word stays `LOCKED`, and the waiter returns from `lock` owning it.
//!
//!   With no waiter left (one whose validation failed), the word goes to 0.
//!
//! So a holder that unlocks and locks again at once (a task re-locking in a loop) cannot
//! starve a waiter, and a waiter that is slow to wake (a thread the OS has not run yet, a
//! task behind others on its worker) does not hold up the lockers that are running, as a
//! hand-off at every unlock would (a lock convoy: the lock idle while its next owner wakes
//! up). The kernel's mutex hands off once a woken waiter failed to get the lock
//! (`MUTEX_FLAG_HANDOFF`), which is the rule here; parking_lot once a waiter waited 0.5 ms;
//! std's futex mutex never. A waiter woken to compete and then cancelled by a shutdown
//! wakes the next one instead.
//!
//! The hand-off's happens-before: the unlocker's writes under the lock precede its
//! `notified` store (Release), which the woken waiter's load (Acquire) reads.
//!
//! A task must not hold a `std::sync::Mutex` across a blocking call (or a call that may
//! switch: `yield_now`, `cond_resched`, a spawn, a failing `try_*`, an unbounded `send`), nor
//! block on one that a task of its own worker holds: std's block the worker thread, so the
//! holder may never run again. Every lock of `lagom::sync` blocks only the task.

use core::cell::UnsafeCell;
use core::fmt;
use core::ops::{Deref, DerefMut};

use super::poison::{self, LockResult, TryLockError, TryLockResult};
use super::waiters::{Wait, WaitQueue};
use crate::locking::atomic::{AtomicU32, AtomicUsize, Ordering};

/// Held.
const LOCKED: u32 = 1;
/// Someone is queued, or about to queue.
const PARKED: u32 = 2;

/// How many times a contended `lock` re-tries before it queues (with 2, 4, 8, then 16
/// pause hints between tries: some 200 in all, a few hundred ns to a few µs).
const SPIN_LIMIT: u32 = if cfg!(loom) { 1 } else { 16 };

/// Who the caller is, for [`RawMutex::owner`]: the OS CPU + 1 of the worker whose task
/// calls, or 0 on a plain thread.
#[inline]
fn whoami() -> usize {
    crate::worker::local().map_or(0, |wt| wt.worker().os_cpu + 1)
}

/// The lock word and its queue, without data or poisoning (the `Condvar` and `RwLock` use
/// it too).
#[derive(Debug)]
pub(crate) struct RawMutex {
    state: AtomicU32,
    /// A hint of where the holder runs ([`whoami`]'s answer for it): a task that finds the
    /// lock held by a task of its own worker does not spin, since that holder cannot run
    /// while it spins (the kernel's mutex spins only while its owner runs on another CPU).
    /// Written Relaxed after each acquisition; a stale value costs a needless spin or park,
    /// never correctness.
    owner: AtomicUsize,
    queue: WaitQueue,
}

impl RawMutex {
    crate::locking::loom_const_fn! {
        /// An unlocked lock.
        pub(crate) fn new() -> RawMutex {
            RawMutex {
                state: AtomicU32::new(0),
                owner: AtomicUsize::new(0),
                queue: WaitQueue::new(),
            }
        }
    }

    /// Takes the lock, blocking the caller until it is free (module doc).
    #[inline]
    pub(crate) fn lock(&self) {
        if self
            .state
            .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow();
        }
        self.owner.store(whoami(), Ordering::Relaxed);
    }

    /// Whether a spin may see the lock freed: not when the holder is a task of the caller's
    /// own worker (`owner`).
    #[inline]
    fn spin_may_help(&self) -> bool {
        let me = whoami();
        me == 0 || self.owner.load(Ordering::Relaxed) != me
    }

    /// Takes the lock if it is free now.
    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        let s = self.state.load(Ordering::Relaxed);
        let got = s & LOCKED == 0
            && self
                .state
                .compare_exchange(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok();
        if got {
            self.owner.store(whoami(), Ordering::Relaxed);
        }
        got
    }

    #[cold]
    fn lock_slow(&self) {
        let mut spins = 0;
        // The queue tag: 1 once this locker was woken to compete and lost (module doc).
        let mut overtaken = 0;
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & LOCKED == 0 {
                if self
                    .state
                    .compare_exchange_weak(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            if s & PARKED == 0 {
                if spins < SPIN_LIMIT && self.spin_may_help() {
                    spins += 1;
                    for _ in 0..(1u32 << spins.min(4)) {
                        crate::locking::spin_loop();
                    }
                    continue;
                }
                if self
                    .state
                    .compare_exchange_weak(s, s | PARKED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
            }
            let r = self.queue.wait(
                overtaken,
                None,
                || self.state.load(Ordering::Relaxed) == LOCKED | PARKED,
                || {},
                |_| {},
                |how| {
                    if how == Wait::Handed {
                        // Handed the lock, then cancelled: pass it on.
                        self.unlock();
                    } else if self.try_lock() {
                        // Woken to compete, then cancelled: wake the next one instead.
                        self.unlock();
                    }
                },
            );
            match r {
                // Handed the lock (module doc).
                Wait::Handed => return,
                // Woken to compete for a released lock: the next wait, if it loses, is
                // handed the lock at its turn.
                Wait::Woken => {
                    overtaken = 1;
                    spins = 0;
                }
                Wait::Invalid | Wait::TimedOut => spins = 0,
            }
        }
    }

    /// Releases the lock; wakes the front waiter if one is parked (module doc).
    #[inline]
    pub(crate) fn unlock(&self) {
        if self
            .state
            .compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            self.unlock_slow();
        }
    }

    #[cold]
    fn unlock_slow(&self) {
        self.queue.wake_one_handing(false, |w, overtaken| {
            let more = if w.more { PARKED } else { 0 };
            let hand_off = w.count == 1 && overtaken != 0;
            let s = if hand_off { LOCKED | more } else { more };
            self.state.store(s, Ordering::Release);
            hand_off
        });
    }
}

/// A mutual-exclusion lock for tasks and threads, with `std::sync::Mutex`'s API and
/// poisoning.
///
/// A contended `lock` spins briefly while the holder runs on another worker, then blocks the
/// calling task (its worker runs others meanwhile; on a plain thread, the thread). An unlock
/// wakes the front waiter to compete for the lock; a waiter that was woken once and lost is
/// handed the lock the next time (as the kernel's mutex does), so a holder that re-locks at
/// once cannot starve it, and a slow waiter does not hold up running lockers. Unlike
/// `std::sync::Mutex`, whose contended lock blocks the whole worker thread and every task
/// queued on it, this one may be held across blocking calls in a task.
///
/// ```
/// use std::sync::Arc;
/// use lagom::sync::Mutex;
///
/// let rt = lagom::Runtime::builder().build().unwrap();
/// let n = Arc::new(Mutex::new(0));
/// let hs: Vec<_> = (0..4)
///     .map(|_| {
///         let n = Arc::clone(&n);
///         rt.spawn(move || {
///             for _ in 0..1000 {
///                 *n.lock().unwrap() += 1;
///             }
///         })
///     })
///     .collect();
/// for h in hs {
///     h.join().unwrap();
/// }
/// assert_eq!(*n.lock().unwrap(), 4000);
/// ```
pub struct Mutex<T: ?Sized> {
    raw: RawMutex,
    poison: poison::Flag,
    data: UnsafeCell<T>,
}

// SAFETY: the lock hands the data to one guard at a time, so it may be shared when the data
// may be sent (as std's).
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}
// SAFETY: owning the mutex is owning the data.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// As std's: a panic while the data is held is not hidden from the next holder, since the mutex poisons.
impl<T: ?Sized> core::panic::UnwindSafe for Mutex<T> {}
impl<T: ?Sized> core::panic::RefUnwindSafe for Mutex<T> {}

/// The proof of holding a [`Mutex`]: derefs to the data; unlocks on drop (as
/// `std::sync::MutexGuard`). Not `Send`: it is released where it was taken.
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized + 'a> {
    lock: &'a Mutex<T>,
    poison: poison::Guard,
    _not_send: core::marker::PhantomData<*const ()>,
}

// SAFETY: a shared guard only hands out `&T`, as `std::sync::MutexGuard`.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T> Mutex<T> {
    crate::locking::loom_const_fn! {
        /// An unlocked mutex holding `value`. A `const fn`, as std's: a `static` may hold
        /// one (not under `cfg(loom)`, whose atomics are not `const`).
        ///
        /// ```
        /// use lagom::sync::Mutex;
        ///
        /// static HITS: Mutex<u64> = Mutex::new(0);
        /// *HITS.lock().unwrap() += 1;
        /// assert_eq!(*HITS.lock().unwrap(), 1);
        /// ```
        pub fn new(value: T) -> Mutex<T> {
            Mutex {
                raw: RawMutex::new(),
                poison: poison::Flag::new(),
                data: UnsafeCell::new(value),
            }
        }
    }

    /// The data, consuming the mutex.
    ///
    /// # Errors
    /// The data inside a `PoisonError` if the mutex is poisoned.
    pub fn into_inner(self) -> LockResult<T> {
        let poisoned = self.poison.get();
        let data = self.data.into_inner();
        poison::Flag::result(poisoned, data)
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Takes the lock, blocking the calling task (or thread) until it is free.
    ///
    /// # Errors
    /// The guard inside a `PoisonError` if a holder panicked (the lock is held either way).
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        self.raw.lock();
        self.poison.map(self.guard())
    }

    /// Takes the lock if it is free now. Inside a task, a `WouldBlock` is also a preemption
    /// point (as a `cond_resched` without its cancellation: `sync`'s module doc), so a task
    /// that spins on `try_lock` lets the holder run, even on its own worker.
    ///
    /// # Errors
    /// `WouldBlock` if it is held; the guard inside `Poisoned` if a holder panicked.
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        let r = self.try_lock_now();
        if matches!(r, Err(TryLockError::WouldBlock)) {
            crate::task::try_point();
        }
        r
    }

    /// [`try_lock`](Self::try_lock) without its preemption point (for `Debug`, which may run
    /// while the caller holds a lock of std's: a switch there could let another task of the
    /// worker take it on the same thread).
    fn try_lock_now(&self) -> TryLockResult<MutexGuard<'_, T>> {
        if self.raw.try_lock() {
            Ok(self.poison.map(self.guard())?)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// The guard of a lock just taken.
    fn guard(&self) -> MutexGuard<'_, T> {
        MutexGuard {
            lock: self,
            poison: self.poison.guard(),
            _not_send: core::marker::PhantomData,
        }
    }

    /// Whether a holder panicked.
    pub fn is_poisoned(&self) -> bool {
        self.poison.get()
    }

    /// Clears the poison.
    pub fn clear_poison(&self) {
        self.poison.clear();
    }

    /// The data, through the exclusive reference (no locking needed).
    ///
    /// # Errors
    /// The reference inside a `PoisonError` if the mutex is poisoned.
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.poison.map(self.data.get_mut())
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// The raw lock of the guard's mutex (for `Condvar`).
    pub(crate) fn raw(&self) -> &'a RawMutex {
        &self.lock.raw
    }

    /// The poison flag (for `Condvar`).
    pub(crate) fn poison(&self) -> &'a poison::Flag {
        &self.lock.poison
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves the lock is held: no other reference to the data exists.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and the guard is borrowed mutably.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.poison.done(&self.poison);
        self.lock.raw.unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock_now() {
            Ok(g) => d.field("data", &&*g),
            Err(TryLockError::Poisoned(e)) => d.field("data", &&**e.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.poison.get())
            .finish_non_exhaustive()
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(t: T) -> Self {
        Mutex::new(t)
    }
}
