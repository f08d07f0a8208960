//! Poisoning, as `std::sync` has it: a lock whose guard was dropped while its thread (here:
//! its task or thread) panicked is marked poisoned, and every later `lock` returns the guard
//! inside a [`PoisonError`]. The types and their methods are std's, so `match`es on them move
//! over unchanged.
//!
//! "Panicking" is `std::thread::panicking()` of the OS thread the guard is dropped on. A task
//! that unwinds keeps its worker's thread until its panic is caught, even where a destructor
//! blocks (`sched/unwind.rs`), so the answer is always the task's own. Without the `std`
//! feature a panic cannot be observed (nor caught), and nothing is ever poisoned.

use core::fmt;

use crate::locking::atomic::{AtomicBool, Ordering};

/// A lock's poison flag.
#[derive(Debug, Default)]
pub(crate) struct Flag {
    failed: AtomicBool,
}

/// Whether the calling thread is unwinding now.
#[inline]
pub(crate) fn panicking() -> bool {
    #[cfg(feature = "std")]
    return std::thread::panicking();
    #[cfg(not(feature = "std"))]
    false
}

impl Flag {
    crate::locking::loom_const_fn! {
        /// A clear flag.
        pub(crate) fn new() -> Flag {
            Flag {
                failed: AtomicBool::new(false),
            }
        }
    }

    /// Whether the lock is poisoned.
    #[inline]
    pub(crate) fn get(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Clears the poison.
    pub(crate) fn clear(&self) {
        self.failed.store(false, Ordering::Relaxed);
    }

    /// What a guard records when it is made: whether its thread was panicking already.
    #[inline]
    pub(crate) fn guard(&self) -> Guard {
        Guard {
            panicking: panicking(),
        }
    }

    /// At a guard's drop: poisons the lock if its thread started panicking since `g` was made.
    #[inline]
    pub(crate) fn done(&self, g: &Guard) {
        if !g.panicking && panicking() {
            self.failed.store(true, Ordering::Relaxed);
        }
    }

    /// `Ok(guard)`, or `Err(PoisonError(guard))` if poisoned.
    #[inline]
    pub(crate) fn map<G>(&self, guard: G) -> LockResult<G> {
        Flag::result(self.get(), guard)
    }

    /// `Ok(value)`, or `Err(PoisonError(value))` if `poisoned` (for a lock consumed before
    /// its value is taken out, whose flag is read first).
    #[inline]
    pub(crate) fn result<G>(poisoned: bool, value: G) -> LockResult<G> {
        if poisoned {
            Err(PoisonError::new(value))
        } else {
            Ok(value)
        }
    }
}

/// Whether a guard's thread was panicking when the guard was made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Guard {
    panicking: bool,
}

/// A lock's result: the guard, or the guard inside a [`PoisonError`] (as `std::sync`).
pub type LockResult<G> = Result<G, PoisonError<G>>;

/// A `try_lock`'s result (as `std::sync`).
pub type TryLockResult<G> = Result<G, TryLockError<G>>;

/// The lock was poisoned: a holder panicked. Carries the guard, so the data stays reachable
/// ([`into_inner`](Self::into_inner)), as `std::sync::PoisonError`.
pub struct PoisonError<T> {
    guard: T,
}

impl<T> PoisonError<T> {
    /// Wraps `guard`.
    pub fn new(guard: T) -> PoisonError<T> {
        PoisonError { guard }
    }

    /// The guard.
    pub fn into_inner(self) -> T {
        self.guard
    }

    /// A reference to the guard.
    pub fn get_ref(&self) -> &T {
        &self.guard
    }

    /// A mutable reference to the guard.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> fmt::Debug for PoisonError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoisonError").finish_non_exhaustive()
    }
}

impl<T> fmt::Display for PoisonError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("poisoned lock: another task panicked while holding it")
    }
}

#[cfg(feature = "std")]
impl<T> std::error::Error for PoisonError<T> {}

/// Why a `try_lock` failed (as `std::sync::TryLockError`).
pub enum TryLockError<T> {
    /// The lock was poisoned; the guard is inside.
    Poisoned(PoisonError<T>),
    /// The lock is held elsewhere.
    WouldBlock,
}

impl<T> From<PoisonError<T>> for TryLockError<T> {
    fn from(e: PoisonError<T>) -> Self {
        TryLockError::Poisoned(e)
    }
}

impl<T> fmt::Debug for TryLockError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryLockError::Poisoned(e) => e.fmt(f),
            TryLockError::WouldBlock => f.write_str("WouldBlock"),
        }
    }
}

impl<T> fmt::Display for TryLockError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryLockError::Poisoned(e) => e.fmt(f),
            TryLockError::WouldBlock => {
                f.write_str("try_lock failed because the operation would block")
            }
        }
    }
}

#[cfg(feature = "std")]
impl<T> std::error::Error for TryLockError<T> {}
