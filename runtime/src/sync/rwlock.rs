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
//!
//! * **downgrade** (a writer becomes a reader, as std's `RwLockWriteGuard::downgrade`):
//!   without `PARKED`, `WRITER → ONE_READER` in one compare-exchange. With `PARKED`, under
//!   the queue's lock, the word becomes one reader plus every reader at the front of the queue
//!   (up to the first writer), whom it wakes, with `PARKED` kept if more wait. Either way the
//!   word goes from held-by-the-writer to held-by-readers in one store that nobody else may
//!   make meanwhile (a held word with `PARKED` set changes only by its holder's release), so
//!   no writer gets in between: the reader sees what the writer wrote. A writer at the front
//!   stays queued (the readers behind it too: newcomers do not overtake a parked writer).
//!   (Mutant `rwlock_downgrade_unlock` releases and re-takes instead; the adapted std test
//!   `downgrade_atomic` catches it.)
//!
//! The guards: a read guard holds a pointer to the data and a reference to the lock word and
//! queue (`RawRwLock`), not to the `RwLock<T>`, so that it is covariant in `T` as std's (a
//! `&RwLock<T>` would make it invariant: `RwLock<T>` holds an `UnsafeCell<T>`); a write guard
//! refers to the `RwLock<T>`, invariant as std's, since it hands out `&mut T`.

use core::cell::UnsafeCell;
use core::fmt;
use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;

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

/// The lock word and its waiter queue, without the data (module doc): what a read guard
/// refers to.
struct RawRwLock {
    state: AtomicUsize,
    queue: WaitQueue,
}

/// A reader-writer lock for tasks and threads, with `std::sync::RwLock`'s API and poisoning (a
/// writer's panic poisons, a reader's does not). Writer-fair: once someone waits, newcomers
/// queue behind it, so a stream of readers cannot starve a writer; an unlock hands the lock
/// to the front waiter (a writer, or every reader up to the first writer).
///
/// ```
/// use lagom::sync::{RwLock, RwLockWriteGuard};
///
/// static CONFIG: RwLock<Vec<u32>> = RwLock::new(Vec::new());
///
/// let mut w = CONFIG.write().unwrap();
/// w.push(7);
/// // Atomically a reader: no writer can change the data in between.
/// let r = RwLockWriteGuard::downgrade(w);
/// assert_eq!(*r, [7]);
/// assert!(CONFIG.try_read().is_ok());
/// assert!(CONFIG.try_write().is_err());
/// ```
pub struct RwLock<T: ?Sized> {
    raw: RawRwLock,
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

/// A shared hold of a [`RwLock`] (as `std::sync::RwLockReadGuard`: covariant in `T`, not
/// `Send`).
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized + 'a> {
    /// The data, shared for as long as the guard lives (a pointer, not a `&'a T`: the guard
    /// shares the data only until it drops). Covariant, and not `Send`.
    data: NonNull<T>,
    raw: &'a RawRwLock,
}

/// The exclusive hold of a [`RwLock`] (as `std::sync::RwLockWriteGuard`).
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized + 'a> {
    lock: &'a RwLock<T>,
    poison: poison::Guard,
    _not_send: core::marker::PhantomData<*const ()>,
}

// SAFETY: shared guards hand out `&T` only; the pointer is to data that `T: Sync` lets
// threads share.
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
                raw: RawRwLock {
                    state: AtomicUsize::new(0),
                    queue: WaitQueue::new(),
                },
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

impl RawRwLock {
    fn try_read(&self) -> bool {
        let s = self.state.load(Ordering::Relaxed);
        s & (WRITER | PARKED) == 0
            && self
                .state
                .compare_exchange(s, s + ONE_READER, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    fn try_write(&self) -> bool {
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
                self.try_read()
            } else {
                self.try_write()
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

    /// A writer's hold becomes one reader's, with nobody in between (module doc, "downgrade").
    fn downgrade(&self) {
        #[cfg(lagom_mutant = "rwlock_downgrade_unlock")]
        {
            self.write_unlock();
            if !self.try_read() {
                self.lock_slow(TAG_READ);
            }
        }
        #[cfg(not(lagom_mutant = "rwlock_downgrade_unlock"))]
        if self
            .state
            .compare_exchange(WRITER, ONE_READER, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            // PARKED is set (the only other bit a held word may gain): only this holder may
            // change the word now. Wake the readers at the front with it.
            self.queue.wake_front_while(
                false,
                |tag| tag == TAG_READ,
                |w| {
                    let more = if w.more { PARKED } else { 0 };
                    self.state
                        .store(((w.count + 1) * ONE_READER) | more, Ordering::Release);
                },
            );
        }
    }
}

impl<T: ?Sized> RwLock<T> {
    fn try_read_raw(&self) -> bool {
        self.raw.try_read()
    }

    fn try_write_raw(&self) -> bool {
        self.raw.try_write()
    }

    fn lock_slow(&self, tag: usize) {
        self.raw.lock_slow(tag);
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

    /// A shared hold if one is free now. Inside a task, a `WouldBlock` is also a preemption
    /// point (`sync`'s module doc).
    ///
    /// # Errors
    /// `WouldBlock`, or the guard inside `Poisoned`.
    pub fn try_read(&self) -> TryLockResult<RwLockReadGuard<'_, T>> {
        let r = self.try_read_now();
        if matches!(r, Err(TryLockError::WouldBlock)) {
            crate::task::try_point();
        }
        r
    }

    /// [`try_read`](Self::try_read) without its preemption point (for `Debug`, as
    /// `Mutex::try_lock_now`).
    fn try_read_now(&self) -> TryLockResult<RwLockReadGuard<'_, T>> {
        if self.try_read_raw() {
            Ok(self.poison.map(self.read_guard())?)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// The exclusive hold if it is free now. Inside a task, a `WouldBlock` is also a
    /// preemption point (`sync`'s module doc).
    ///
    /// # Errors
    /// `WouldBlock`, or the guard inside `Poisoned`.
    pub fn try_write(&self) -> TryLockResult<RwLockWriteGuard<'_, T>> {
        if self.try_write_raw() {
            Ok(self.poison.map(self.write_guard())?)
        } else {
            crate::task::try_point();
            Err(TryLockError::WouldBlock)
        }
    }

    fn read_guard(&self) -> RwLockReadGuard<'_, T> {
        RwLockReadGuard {
            // SAFETY: `UnsafeCell::get` of a live cell is never null.
            data: unsafe { NonNull::new_unchecked(self.data.get()) },
            raw: &self.raw,
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

impl<'a, T: ?Sized> RwLockWriteGuard<'a, T> {
    /// Turns the exclusive hold into a shared one, atomically: no writer can take the lock
    /// between the write and the reads after it, so the reader sees what it wrote (as std's,
    /// stable since Rust 1.92). Readers queued at the front are let in with it; a queued
    /// writer still waits for every reader.
    ///
    /// An associated function, not a method, as std's: `RwLockWriteGuard::downgrade(g)`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lagom::sync::{RwLock, RwLockWriteGuard};
    ///
    /// let rt = lagom::Runtime::builder().build().unwrap();
    /// let rw = Arc::new(RwLock::new(1));
    /// let mut w = rw.write().unwrap();
    /// let rw2 = Arc::clone(&rw);
    /// let writer = rt.spawn(move || *rw2.write().unwrap() = 3);
    /// *w = 2;
    /// let r = RwLockWriteGuard::downgrade(w);
    /// assert_eq!(*r, 2, "no writer got in between");
    /// drop(r);
    /// writer.join().unwrap();
    /// assert_eq!(*rw.read().unwrap(), 3);
    /// ```
    pub fn downgrade(s: Self) -> RwLockReadGuard<'a, T> {
        let lock = s.lock;
        // The hold passes to the reader without the write guard's drop (its unlock, and its
        // poisoning: as std's, a downgrade does not poison, even while unwinding).
        core::mem::forget(s);
        lock.raw.downgrade();
        lock.read_guard()
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a shared hold: no writer exists while the guard lives, and the pointer is
        // to the lock's data, which outlives the guard's `'a`.
        unsafe { self.data.as_ref() }
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
        self.raw.read_unlock();
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.poison.done(&self.poison);
        self.lock.raw.write_unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read_now() {
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

impl<T: ?Sized + fmt::Display> fmt::Display for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
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

#[cfg(all(test, not(loom)))]
mod tests {
    use alloc::sync::Arc;
    use std::thread;
    use std::time::{Duration, Instant};

    use super::{RwLock, RwLockWriteGuard};

    /// Waits until `n` waiters are queued on `lock` (10 s at most: a hang fails the test).
    fn wait_queued(lock: &RwLock<u32>, n: usize) {
        let t0 = Instant::now();
        while lock.raw.queue.queued() < n {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{n} waiters never queued"
            );
            thread::yield_now();
        }
    }

    fn reader(lock: &Arc<RwLock<u32>>) -> thread::JoinHandle<u32> {
        let l = Arc::clone(lock);
        thread::spawn(move || *l.read().unwrap())
    }

    /// Queued behind the write hold: two readers, a writer, a reader. The downgrade lets the
    /// two front readers in beside the downgraded reader; the writer, and the reader behind
    /// it, wait until every reader has left.
    #[test]
    fn downgrade_admits_the_front_readers_not_a_writer() {
        let lock = Arc::new(RwLock::new(0));
        let w = lock.write().unwrap();
        let front = [reader(&lock), {
            wait_queued(&lock, 1);
            reader(&lock)
        }];
        wait_queued(&lock, 2);
        let l = Arc::clone(&lock);
        let writer = thread::spawn(move || *l.write().unwrap() += 1);
        wait_queued(&lock, 3);
        let back = reader(&lock);
        wait_queued(&lock, 4);
        let r = RwLockWriteGuard::downgrade(w);
        for h in front {
            assert_eq!(h.join().unwrap(), 0);
        }
        assert_eq!(*r, 0);
        assert_eq!(
            lock.raw.queue.queued(),
            2,
            "the writer and the reader behind it wait"
        );
        assert!(!writer.is_finished());
        assert!(
            lock.try_read().is_err(),
            "a newcomer queues behind the parked writer"
        );
        drop(r);
        writer.join().unwrap();
        assert_eq!(
            back.join().unwrap(),
            1,
            "the back reader came after the writer"
        );
    }

    /// With no waiter the downgrade is one compare-exchange: readers come in, writers not.
    #[test]
    fn downgrade_without_waiters() {
        let lock = RwLock::new(5);
        let mut w = lock.write().unwrap();
        *w += 1;
        let r = RwLockWriteGuard::downgrade(w);
        assert_eq!(*lock.try_read().unwrap(), 6);
        assert!(lock.try_write().is_err());
        drop(r);
        assert!(lock.try_write().is_ok());
    }
}
