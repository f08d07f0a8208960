//! [`LazyLock`]: a value computed on first use by the function it was built with, as
//! `std::sync::LazyLock`; a task that finds another one computing it blocks (the task, not
//! its worker) until it is done. On a [`Once`](super::Once).
//!
//! Invariant: *the data is the function until the `Once` completes, the value after; a run
//! that panicked leaves neither (and the `Once` poisoned). Through `&self` only the `Once`'s
//! runner changes the data.*
//!
//! Poisoning as std's: a panicking function poisons the `LazyLock`, and every later access
//! panics with std's message ("LazyLock instance has previously been poisoned"); the
//! function's own panic reaches the caller that ran it unchanged.

use core::cell::UnsafeCell;
use core::fmt;
use core::ops::{Deref, DerefMut};
use core::panic::{RefUnwindSafe, UnwindSafe};

use super::once::{Exclusive, OnPoison, Once};

/// What the cell holds (module doc). An enum, where std's is a union beside the `Once`'s
/// state: its drop glue drops whichever is there, so the type needs no `Drop` impl.
enum Data<T, F> {
    Init(F),
    Value(T),
    Poisoned,
}

/// A value initialised on first access by the function it was built with, as
/// `std::sync::LazyLock`, with its poisoning (a panicking function poisons it, and every later
/// access panics). Its dereference blocks the calling task, not its worker, while another
/// caller initialises it.
///
/// ```
/// use std::collections::HashMap;
/// use lagom::sync::LazyLock;
///
/// static PRIMES: LazyLock<HashMap<u32, bool>> = LazyLock::new(|| {
///     (2..50).map(|n| (n, (2..n).all(|d| n % d != 0))).collect()
/// });
///
/// let rt = lagom::Runtime::builder().build().unwrap();
/// let hs: Vec<_> = (0..4).map(|_| rt.spawn(|| PRIMES[&47])).collect();
/// for h in hs {
///     assert!(h.join().unwrap());
/// }
/// assert!(!PRIMES[&49]);
/// ```
pub struct LazyLock<T, F = fn() -> T> {
    once: Once,
    data: UnsafeCell<Data<T, F>>,
}

// SAFETY: shared, the cell hands out `&T` to any thread (`T: Sync`), and the thread that
// forces it runs `F` (moved out of the cell: `F: Send`) and writes a `T` that another may
// drop (`T: Send`); nobody gets an `&F`, so `F` need not be `Sync` (std's bounds).
unsafe impl<T: Sync + Send, F: Send> Sync for LazyLock<T, F> {}

// As std's: a panicking initialiser poisons the cell, and nothing reads it half-made.
impl<T: RefUnwindSafe + UnwindSafe, F: UnwindSafe> RefUnwindSafe for LazyLock<T, F> {}

impl<T, F: FnOnce() -> T> LazyLock<T, F> {
    crate::locking::loom_const_fn! {
        /// A lazy value that `f` computes on first access. A `const fn`, as std's: a
        /// `static` holds one (not under `cfg(loom)`).
        pub fn new(f: F) -> LazyLock<T, F> {
            LazyLock {
                once: Once::new(),
                data: UnsafeCell::new(Data::Init(f)),
            }
        }
    }

    /// Computes the value if nobody has yet, and returns it: the same as dereferencing.
    /// Blocks the calling task (or thread) while another caller computes it.
    ///
    /// An associated function, as std's: `LazyLock::force(&lazy)`.
    ///
    /// # Panics
    /// If the function panics (now, or on an earlier access: the `LazyLock` is poisoned);
    /// if the function reads the value it computes (std's deadlocks; this one says so).
    #[inline]
    #[track_caller]
    pub fn force(this: &LazyLock<T, F>) -> &T {
        if !this.once.completed() {
            this.initialize();
        }
        // SAFETY: complete (Acquire, in `is_completed` or the `Once`'s wait): the data is the
        // value, written before, and never written again through `&self`.
        match unsafe { &*this.data.get() } {
            Data::Value(v) => v,
            _ => unreachable!("a completed LazyLock holds its value (module invariant)"),
        }
    }

    /// Runs the function as the `Once`'s initialiser (module doc).
    #[cold]
    #[track_caller]
    fn initialize(&self) {
        let data = &self.data;
        self.once.call(OnPoison::PanicLazyLock, &mut |_| {
            // SAFETY: this is the `Once`'s runner: nobody else reads or writes the data until
            // the completion this run ends with. The borrow ends before `f` runs.
            let taken = unsafe { core::mem::replace(&mut *data.get(), Data::Poisoned) };
            let Data::Init(f) = taken else {
                unreachable!("an incomplete, unpoisoned LazyLock holds its function")
            };
            let v = f();
            // SAFETY: as above; `f` has returned.
            unsafe { *data.get() = Data::Value(v) };
        });
    }

    /// The value through the exclusive reference, computed first if need be (std's
    /// `DerefMut`, stable since Rust 1.89; std's `force_mut` is not stable).
    #[track_caller]
    fn force_mut(this: &mut LazyLock<T, F>) -> &mut T {
        match this.once.exclusive() {
            Exclusive::Poisoned => panic!("LazyLock instance has previously been poisoned"),
            Exclusive::Complete => {}
            Exclusive::Incomplete => {
                // Poisoned until the value is in: a panicking `f` leaves it so.
                this.once.set_exclusive(Exclusive::Poisoned);
                let data = this.data.get_mut();
                let Data::Init(f) = core::mem::replace(data, Data::Poisoned) else {
                    unreachable!("an incomplete, unpoisoned LazyLock holds its function")
                };
                *this.data.get_mut() = Data::Value(f());
                this.once.set_exclusive(Exclusive::Complete);
            }
        }
        match this.data.get_mut() {
            Data::Value(v) => v,
            _ => unreachable!("a completed LazyLock holds its value (module invariant)"),
        }
    }
}

impl<T, F> LazyLock<T, F> {
    /// The value, if computed (for `Debug`).
    fn get(&self) -> Option<&T> {
        if !self.once.completed() {
            return None;
        }
        // SAFETY: as in `force`.
        match unsafe { &*self.data.get() } {
            Data::Value(v) => Some(v),
            _ => None,
        }
    }
}

impl<T, F: FnOnce() -> T> Deref for LazyLock<T, F> {
    type Target = T;

    /// [`LazyLock::force`].
    #[inline]
    #[track_caller]
    fn deref(&self) -> &T {
        LazyLock::force(self)
    }
}

impl<T, F: FnOnce() -> T> DerefMut for LazyLock<T, F> {
    /// The value, computed first if need be (no blocking: the reference is exclusive).
    #[inline]
    #[track_caller]
    fn deref_mut(&mut self) -> &mut T {
        LazyLock::force_mut(self)
    }
}

impl<T: Default> Default for LazyLock<T> {
    /// A lazy `T::default()`.
    fn default() -> LazyLock<T> {
        LazyLock::new(T::default)
    }
}

impl<T: fmt::Debug, F> fmt::Debug for LazyLock<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_tuple("LazyLock");
        match self.get() {
            Some(v) => d.field(v),
            None => d.field(&format_args!("<uninit>")),
        };
        d.finish()
    }
}
