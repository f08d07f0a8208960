//! [`RwLock`]: many readers or one writer, blocking the calling task (or thread), with
//! `std::sync::RwLock`'s API and poisoning (a writer's panic poisons; a reader's does not).
//!
//! Invariant: *a writer holds the lock alone; readers hold it only together with readers;
//! a waiter is never overtaken: once someone is parked, newcomers queue behind it.*
//!
//! ## The protocol
//!
//! The state word: `WRITER` (a writer holds it), `PARKED` (someone is, or is about to be,
//! queued on the waiter queue, `waiters.rs`), and the number of readers above them.
//!
//! * **read**: add a reader if neither `WRITER` nor `PARKED` is set (so a waiting writer is
//!   not starved by a stream of readers). **write**: `0 → WRITER`.
//! * Otherwise spin a little while the lock is held and nobody is parked, then set `PARKED`
//!   and queue — tagged reader or writer — with `validate` = "`PARKED` is set and the lock is
//!   held" (a lock freed meanwhile fails it, and the caller retries).
//! * **unlock** (the writer, or the last reader) with `PARKED` set **hands the lock on**
//!   under the queue's lock: to the front waiter if it is a writer, else to every reader at
//!   the front up to the first writer; the word becomes their hold (`WRITER`, or that many
//!   readers), with `PARKED` kept if more wait, and they return from their wait owning it.
//!   With nobody queued the word goes to 0.
//!
//! While `PARKED` is set and the lock is free — only inside that hand-off — nobody else
//! changes the word but the hand-off under the queue's lock, so its plain store loses
//! nothing.

use core::cell::UnsafeCell;
use core::fmt;
use core::ops::{Deref, DerefMut};

use super::poison::{self, LockResult, TryLockError, TryLockResult};
use super::waiters::{Wait, WaitQueue};
use crate::locking::atomic::{AtomicUsize, Ordering};

const WRITER: usize = 1;
const PARKED: usize = 2;
const ONE_READER: usize = 4;

/// The queue tag of a reader.
const TAG_READ: usize = 0;
/// The queue tag of a writer.
const TAG_WRITE: usize = 1;

/// As the mutex's spin (`mutex.rs`).
const SPIN_LIMIT: u32 = if cfg!(loom) { 1 } else { 16 };

/// A reader-writer lock for tasks and threads (module doc).
pub struct RwLock<T: ?Sized> {
    state: AtomicUsize,
    queue: WaitQueue,
    poison: poison::Flag,
    data: UnsafeCell<T>,
}

// SAFETY: readers share `&T` across threads (T: Sync), a writer gets `&mut T` (T: Send), as
// std's.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}
// SAFETY: owning the lock is owning the data.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// As std's: a panic while the data is held is not hidden from the next holder, since a writer's panic poisons the lock.
impl<T: ?Sized> core::panic::UnwindSafe for RwLock<T> {}
impl<T: ?Sized> core::panic::RefUnwindSafe for RwLock<T> {}

/// A shared hold of a [`RwLock`] (as `std::sync::RwLockReadGuard`).
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized + 'a> {
    lock: &'a RwLock<T>,
    _not_send: core::marker::PhantomData<*const ()>,
}

/// The exclusive hold of a [`RwLock`] (as `std::sync::RwLockWriteGuard`).
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized + 'a> {
    lock: &'a RwLock<T>,
    poison: poison::Guard,
    _not_send: core::marker::PhantomData<*const ()>,
}

// SAFETY: shared guards hand out `&T` only.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Sync> Sync for RwLockWriteGuard<'_, T> {}

/// Whether state `s` is held by anyone.
fn held(s: usize) -> bool {
    s & WRITER != 0 || s >= ONE_READER
}

impl<T> RwLock<T> {
    crate::locking::loom_const_fn! {
        /// An unlocked lock holding `value`. A `const fn`, as std's: a `static` may hold one
        /// (not under `cfg(loom)`, whose atomics are not `const`).
        pub fn new(value: T) -> RwLock<T> {
            RwLock {
                state: AtomicUsize::new(0),
                queue: WaitQueue::new(),
                poison: poison::Flag::new(),
                data: UnsafeCell::new(value),
            }
        }
    }

    /// The data, consuming the lock.
    ///
    /// # Errors
    /// The data inside a `PoisonError` if a writer panicked.
    pub fn into_inner(self) -> LockResult<T> {
        let poisoned = self.poison.get();
        let data = self.data.into_inner();
        poison::Flag::result(poisoned, data)
    }
}

impl<T: ?Sized> RwLock<T> {
    fn try_read_raw(&self) -> bool {
        let s = self.state.load(Ordering::Relaxed);
        s & (WRITER | PARKED) == 0
            && self
                .state
                .compare_exchange(s, s + ONE_READER, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    fn try_write_raw(&self) -> bool {
        self.state
            .compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// The slow path of both: spin, mark `PARKED`, queue (module doc).
    #[cold]
    fn lock_slow(&self, tag: usize) {
        let mut spins = 0;
        loop {
            let got = if tag == TAG_READ {
                self.try_read_raw()
            } else {
                self.try_write_raw()
            };
            if got {
                return;
            }
            let s = self.state.load(Ordering::Relaxed);
            if !held(s) && s & PARKED != 0 {
                // A hand-off is under way: it ends in a moment.
                crate::locking::spin_loop();
                continue;
            }
            if !held(s) {
                continue;
            }
            if s & PARKED == 0 {
                if spins < SPIN_LIMIT {
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
                tag,
                None,
                || {
                    let s = self.state.load(Ordering::Relaxed);
                    s & PARKED != 0 && held(s)
                },
                || {},
                |_| {},
                // Handed the lock, then cancelled: give it back.
                |_| {
                    if tag == TAG_READ {
                        self.read_unlock();
                    } else {
                        self.write_unlock();
                    }
                },
            );
            match r {
                Wait::Woken | Wait::Handed => return,
                Wait::Invalid | Wait::TimedOut => spins = 0,
            }
        }
    }

    /// Hands the free lock on to the front waiters, or clears it (module doc).
    #[cold]
    fn hand_off(&self) {
        let first = core::cell::Cell::new(None);
        self.queue.wake_front_while(
            false,
            |tag| match first.get() {
                None => {
                    first.set(Some(tag));
                    true
                }
                Some(TAG_READ) => tag == TAG_READ,
                Some(_) => false,
            },
            |w| {
                let more = if w.more { PARKED } else { 0 };
                let s = match first.get() {
                    None => 0,
                    Some(TAG_READ) => (w.count * ONE_READER) | more,
                    Some(_) => WRITER | more,
                };
                self.state.store(s, Ordering::Release);
            },
        );
    }

    fn read_unlock(&self) {
        let prev = self.state.fetch_sub(ONE_READER, Ordering::Release);
        if prev == ONE_READER | PARKED {
            self.hand_off();
        }
    }

    fn write_unlock(&self) {
        if self
            .state
            .compare_exchange(WRITER, 0, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            // PARKED is set: only the hand-off may change the word now.
            self.state.store(PARKED, Ordering::Release);
            self.hand_off();
        }
    }

    /// Takes a shared hold, blocking while a writer holds the lock or waiters are queued.
    ///
    /// # Errors
    /// The guard inside a `PoisonError` if a writer panicked.
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        if !self.try_read_raw() {
            self.lock_slow(TAG_READ);
        }
        self.poison.map(self.read_guard())
    }

    /// Takes the exclusive hold, blocking while anyone holds the lock.
    ///
    /// # Errors
    /// The guard inside a `PoisonError` if a writer panicked.
    pub fn write(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        if !self.try_write_raw() {
            self.lock_slow(TAG_WRITE);
        }
        self.poison.map(self.write_guard())
    }

    /// A shared hold if one is free now.
    ///
    /// # Errors
    /// `WouldBlock`, or the guard inside `Poisoned`.
    pub fn try_read(&self) -> TryLockResult<RwLockReadGuard<'_, T>> {
        if self.try_read_raw() {
            Ok(self.poison.map(self.read_guard())?)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// The exclusive hold if it is free now.
    ///
    /// # Errors
    /// `WouldBlock`, or the guard inside `Poisoned`.
    pub fn try_write(&self) -> TryLockResult<RwLockWriteGuard<'_, T>> {
        if self.try_write_raw() {
            Ok(self.poison.map(self.write_guard())?)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    fn read_guard(&self) -> RwLockReadGuard<'_, T> {
        RwLockReadGuard {
            lock: self,
            _not_send: core::marker::PhantomData,
        }
    }

    fn write_guard(&self) -> RwLockWriteGuard<'_, T> {
        RwLockWriteGuard {
            lock: self,
            poison: self.poison.guard(),
            _not_send: core::marker::PhantomData,
        }
    }

    /// Whether a writer panicked.
    pub fn is_poisoned(&self) -> bool {
        self.poison.get()
    }

    /// Clears the poison.
    pub fn clear_poison(&self) {
        self.poison.clear();
    }

    /// The data, through the exclusive reference.
    ///
    /// # Errors
    /// The reference inside a `PoisonError` if poisoned.
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.poison.map(self.data.get_mut())
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a shared hold: no writer exists while the guard lives.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the exclusive hold: no other reference to the data exists.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and the guard is borrowed mutably.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.read_unlock();
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.poison.done(&self.poison);
        self.lock.write_unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read() {
            Ok(g) => d.field("data", &&*g),
            Err(TryLockError::Poisoned(e)) => d.field("data", &&**e.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.poison.get())
            .finish_non_exhaustive()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T> From<T> for RwLock<T> {
    fn from(t: T) -> Self {
        RwLock::new(t)
    }
}
